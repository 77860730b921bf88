"""Kineto's CPU profiler with every thread recorded, read through its raw records.

torch's profilers record only the thread that started them unless Kineto is asked for
``profile_all_threads``; with it, ops on every thread arrive with their OS thread id (the raw
record's ``device_resource_id``). Raw records are read with one unbound-method ``map`` per field
(about 0.3 us per field and event); torch's own ``prof.events()`` costs ~45 us per event.

``gpu_fallback=True`` selects ``KINETO_GPU_FALLBACK``: a CUDA event pair per op that yields only
whole-microsecond GPU durations (``cuda_elapsed_us``), for a torch without the legacy CUDA path.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch._C._profiler import _ExperimentalConfig
from torch.autograd import ProfilerActivity, ProfilerConfig, ProfilerState

from ..convert import sparse_rows
from .quiet import quiet_usdt

_KinetoEvent = torch._C._autograd._KinetoEvent


class CpuRecords(NamedTuple):
    """The raw records as columns, one row per CPU-side event, in torch's order."""

    names: list  # str per event
    start_ns: np.ndarray  # int64, wall clock (time.time_ns's epoch)
    end_ns: np.ndarray  # int64
    tid: np.ndarray  # int64, OS thread id
    is_annotation: np.ndarray  # bool: a record_function / user annotation rather than an op
    is_python: np.ndarray  # bool: a Python function (with_stack's tracer)
    shapes: dict  # row -> input shapes, where recorded and not empty
    stacks: dict  # row -> tuple of "file(line): function" frames, where recorded
    cuda_us: np.ndarray | None  # float64 per event, GPU duration in us (-1: none); fallback only


class KinetoCpuRecorder:
    """Turns Kineto CPU profiling on and off; ``stop()`` returns :class:`CpuRecords`."""

    def __init__(self, *, record_shapes: bool = False, with_stack: bool = False,
                 gpu_fallback: bool = False):
        self.record_shapes = record_shapes
        self.with_stack = with_stack
        self.gpu_fallback = gpu_fallback
        state = ProfilerState.KINETO_GPU_FALLBACK if gpu_fallback else ProfilerState.KINETO
        try:
            experimental = _ExperimentalConfig(profile_all_threads=True)
            self.all_threads = True
        except TypeError:  # a torch from before profile_all_threads: the starting thread only
            experimental = _ExperimentalConfig()
            self.all_threads = False
        self._config = ProfilerConfig(state, record_shapes, False, with_stack, False, False,
                                      experimental)
        self._activities = {ProfilerActivity.CPU}

    def start(self) -> None:
        with quiet_usdt():
            torch.autograd._prepare_profiler(self._config, self._activities)
            torch.autograd._enable_profiler(self._config, self._activities)

    def stop(self) -> CpuRecords:
        with quiet_usdt():
            result = torch.autograd._disable_profiler()
        return read_records(result.events(), record_shapes=self.record_shapes,
                            with_stack=self.with_stack, gpu_fallback=self.gpu_fallback)


def select_rows(records: CpuRecords, keep: np.ndarray) -> CpuRecords:
    """``records`` with only the rows where ``keep`` is True (sparse extras renumbered)."""
    if keep.all():
        return records
    new_row = np.cumsum(keep) - 1

    def remap(sparse):
        return {int(new_row[row]): value for row, value in sparse.items() if keep[row]}

    return records._replace(
        names=[name for name, kept in zip(records.names, keep) if kept],
        start_ns=records.start_ns[keep], end_ns=records.end_ns[keep], tid=records.tid[keep],
        is_annotation=records.is_annotation[keep], is_python=records.is_python[keep],
        shapes=remap(records.shapes), stacks=remap(records.stacks),
        cuda_us=None if records.cuda_us is None else records.cuda_us[keep])


def drop_own_window(records: CpuRecords, tid: int, windows) -> CpuRecords:
    """Without the rows that nbprof's own start and stop recorded on the starting thread
    (``windows``: (start_ns, end_ns) wall-clock spans: calibration, anchors, synchronize)."""
    own = np.zeros(len(records.names), np.bool_)
    on_thread = records.tid == tid
    for start_ns, end_ns in windows:
        own |= on_thread & (records.start_ns >= start_ns) & (records.start_ns <= end_ns)
    return select_rows(records, ~own)


def _int_column(method, events) -> np.ndarray:
    return np.fromiter(map(method, events), np.int64, len(events))


def _flag_column(kind, method_name: str, events) -> np.ndarray:
    method = getattr(kind, method_name, None)  # older torches lack some of these
    if method is None:
        return np.zeros(len(events), np.bool_)
    return np.fromiter(map(method, events), np.bool_, len(events))


UNDECODABLE_NAME = "<name not valid UTF-8>"


def _names(kind, events) -> list:
    try:
        return list(map(kind.name, events))
    except UnicodeDecodeError:
        pass
    # torch 2.13's Python tracer (with_stack) hands out a few hundred names in a million that
    # are not valid UTF-8, and name() then raises: keep the event, say why its name is missing.
    names = []
    for event in events:
        try:
            names.append(event.name())
        except UnicodeDecodeError:
            names.append(UNDECODABLE_NAME)
    return names


def read_records(events, *, record_shapes=False, with_stack=False,
                 gpu_fallback=False) -> CpuRecords:
    """Columns from a list of ``_KinetoEvent`` (or anything with the same methods)."""
    kind = type(events[0]) if len(events) else _KinetoEvent
    names = _names(kind, events)
    start_ns = _int_column(kind.start_ns, events)
    end_ns = _int_column(kind.end_ns, events)
    tid = _int_column(kind.device_resource_id, events)
    is_annotation = _flag_column(kind, "is_user_annotation", events)
    is_python = _flag_column(kind, "is_python_function", events) if with_stack \
        else np.zeros(len(events), np.bool_)
    shapes = sparse_rows(map(kind.shapes, events)) if record_shapes else {}
    stacks = sparse_rows(map(kind.stack, events), tuple) if with_stack else {}
    cuda_us = np.fromiter(map(kind.cuda_elapsed_us, events), np.float64, len(events)) \
        if gpu_fallback else None
    return CpuRecords(names, start_ns, end_ns, tid, is_annotation, is_python, shapes, stacks,
                      cuda_us)
