"""Kineto's CPU profiler with every thread recorded, read through its raw records.

torch's profilers record only the thread that started them unless Kineto is asked for
``profile_all_threads``; with it, ops on every thread arrive with their OS thread id (the raw
record's ``device_resource_id``). Raw records are read with one unbound-method ``map`` per field
(about 0.3 us per field and event); torch's own ``prof.events()`` costs ~45 us per event.

``gpu_fallback=True`` selects ``KINETO_GPU_FALLBACK``: a CUDA event pair per op that yields only
whole-microsecond GPU durations (``cuda_elapsed_us``), for a torch without the legacy CUDA path.

``kernels=True`` adds ``ProfilerActivity.CUDA`` (CUPTI); ``cpu=False`` leaves the CPU activity
out (CUPTI's side alone, beside nbprof's native observer: no second callback per op); with
kernels (or ``correlated=True``)
``stop()`` returns :class:`KinetoRecords`: the CPU rows (ops and the CUDA runtime calls) with
their correlation ids and thread ids, and the kernels, memcpys and memsets with the correlation
id of the op that launched them.
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import json
import os
import sys

import numpy as np
import orjson
import torch
from torch._C._profiler import _ExperimentalConfig
from torch.autograd import ProfilerActivity, ProfilerConfig, ProfilerState

from .convert import keep_rows, sparse_rows
from .kineto_python import events_hold_python, saved_python_functions, with_python_functions
from .quiet import quiet_usdt

_KinetoEvent = torch._C._autograd._KinetoEvent
_CPU = torch._C._autograd.DeviceType.CPU
# Kineto's activity types that are GPU work, and nbprof's kind for each (events.GPU_KINDS); the
# rest of the device side (gpu_user_annotation spans, CUPTI overhead) is not work of its own.
DEVICE_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


def device_kind(activity_type: str, name: str, is_annotation: bool = False) -> str | None:
    """nbprof's kind of a device-side Kineto row, None for one that is not GPU work.
    ``activity_type`` is "" on a torch whose events do not say it (then the name tells)."""
    if activity_type in DEVICE_KINDS:
        return DEVICE_KINDS[activity_type]
    if is_annotation or activity_type.endswith("annotation") or activity_type == "overhead":
        return None
    for kind in ("memcpy", "memset"):  # another spelling, or no activity type at all
        if kind in activity_type.lower() or name.lower().startswith(kind):
            return kind
    return "kernel" if not activity_type or "kernel" in activity_type.lower() else None


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


class DeviceRecords(NamedTuple):
    """Kernels, memcpys and memsets that CUPTI saw, one row each, in Kineto's order."""

    names: list
    start_ns: np.ndarray  # int64, wall clock
    end_ns: np.ndarray
    device: np.ndarray  # int64
    stream: np.ndarray  # int64, CUDA stream id
    correlation: np.ndarray  # int64: the launching op's correlation id (0: none)
    kinds: list  # "kernel" / "memcpy" / "memset"
    args: dict  # row -> grid, block, bytes... (from Kineto's metadata), where it says
    # int64: CUPTI's own correlation id, the one its runtime call (cudaLaunchKernel,
    # cudaGraphLaunch...) carries too; None where not read. The way to the launch when torch
    # links no op: a graph replayed inside a record_function range alone (CUPTI links kernels to
    # ops, not to user ranges), or a thread where torch's link is missing.
    runtime_correlation: np.ndarray | None = None


class KinetoRecords(NamedTuple):
    """What a Kineto session with CUDA activities recorded."""

    cpu: CpuRecords
    correlation: np.ndarray  # int64 per CPU row: its correlation id (an op's own number space;
    # a CUDA runtime call's is CUPTI's, a different space: the two may collide)
    devices: DeviceRecords
    os_tids: dict  # torch's small profiler thread id -> OS thread id (legacy records use the former)


class KinetoCpuRecorder:
    """Turns Kineto CPU profiling on and off; ``stop()`` returns :class:`CpuRecords`."""

    def __init__(self, *, record_shapes: bool = False, with_stack: bool = False,
                 gpu_fallback: bool = False, kernels: bool = False, correlated: bool = False,
                 cpu: bool = True):
        if not (cpu or kernels):
            raise ValueError("a Kineto session without the CPU activity needs kernels=True")
        self.record_shapes = record_shapes
        self.with_stack = with_stack
        self.gpu_fallback = gpu_fallback
        self.kernels = kernels
        self.correlated = correlated or kernels  # stop() returns KinetoRecords
        state = ProfilerState.KINETO_GPU_FALLBACK if gpu_fallback else ProfilerState.KINETO
        # Kineto hands out a kernel's grid, block and bytes only when asked to.
        extra = {"expose_kineto_event_metadata": True} if kernels else {}
        # A torch from before profile_all_threads records the starting thread only; one from
        # before expose_kineto_event_metadata gives kernels without grid and block.
        for options in ({"profile_all_threads": True, **extra}, {"profile_all_threads": True},
                        extra, {}):
            try:
                experimental = _ExperimentalConfig(**options)
                break
            except TypeError:
                continue
        self.all_threads = "profile_all_threads" in options
        self._config = ProfilerConfig(state, record_shapes, False, with_stack, False, False,
                                      experimental)
        self._activities = {ProfilerActivity.CPU} if cpu else set()
        self.notes: list[str] = []  # for trace.meta["notes"]: what stop() could not read
        if kernels:
            self._activities.add(ProfilerActivity.CUDA)

    def start(self) -> None:
        if self.kernels:
            # torch.profiler does this when CUDA graphs are in use: tearing CUPTI down after a
            # graph was captured crashes its next start (profiler.py, "FIXME: CUDA Graph does not
            # work well with CUPTI teardown"), and a profiled block may capture one.
            os.environ.setdefault("TEARDOWN_CUPTI", "0")
        with quiet_usdt():
            torch.autograd._prepare_profiler(self._config, self._activities)
            torch.autograd._enable_profiler(self._config, self._activities)

    def stop(self) -> CpuRecords:
        with quiet_usdt():
            result = torch.autograd._disable_profiler()
        events = result.events()
        if self.correlated:
            records = read_kineto_records(events, record_shapes=self.record_shapes,
                                          with_stack=self.with_stack)
        else:
            records = read_records(events, record_shapes=self.record_shapes,
                                   with_stack=self.with_stack, gpu_fallback=self.gpu_fallback)
        if self.with_stack and not events_hold_python(events):
            records, note = records_with_saved_python(records, result)
            self.notes += [note] if note else []
        return records


def kernels_supported() -> bool:
    """Whether this torch was built with CUPTI (ProfilerActivity.CUDA). Whether CUPTI is allowed
    to trace here (WSL2, ERR_NVGPUCTRPERM in containers) shows only in what it records."""
    return ProfilerActivity.CUDA in torch.autograd._supported_activities()


def _metadata(text: str) -> dict:
    """Kineto's metadata is the inside of a JSON object (``"grid": [1, 1, 1], ...``). Parsed
    with orjson: json.loads took 0.7 s of a 2.4 s exit for 20k kernels on an H200."""
    if not text:
        return {}
    text = "{" + text + "}"
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:  # what only Python's json takes (NaN, ints past 64 bits)
        try:
            value = json.loads(text)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


_KEPT_METADATA = ("grid", "block", "bytes", "registers per thread", "shared memory")


def read_kineto_records(events, *, record_shapes=False, with_stack=False) -> KinetoRecords:
    """CPU rows and device rows of a Kineto session with CUDA activities."""
    kind = type(events[0]) if len(events) else _KinetoEvent
    # compared as ints: 1.5x faster than comparing torch's enum objects, 0.1 s per 150k events
    on_cpu = np.fromiter(map(int, map(kind.device_type, events)), np.int16,
                         len(events)) == int(_CPU)
    cpu_events = [event for event, cpu in zip(events, on_cpu) if cpu]
    cpu = read_records(cpu_events, record_shapes=record_shapes, with_stack=with_stack)
    if not cpu.tid.all():
        # CUPTI's own overhead rows ("Activity Buffer Request") come on the CPU side with thread
        # id 0, which no thread has (Linux's is the idle task): the profiler's cost, not a lane
        # of the user's (seen on an H200, torch 2.11). Dropped by the tid column already read.
        keep = cpu.tid != 0
        cpu = keep_rows(cpu, keep)
        cpu_events = [event for event, kept in zip(cpu_events, keep.tolist()) if kept]
    os_tids = thread_ids_by_small_id(map(kind.start_thread_id, cpu_events), cpu.tid.tolist())
    device_events, kinds = [], []
    activity = getattr(kind, "activity_type", None)  # older torches lack these two
    metadata_of = getattr(kind, "metadata_json", None)
    annotation = getattr(kind, "is_user_annotation", None)
    for event, cpu_row in zip(events, on_cpu):
        kind_of_row = None if cpu_row else device_kind(
            activity(event) if activity else "", event.name(),
            bool(annotation(event)) if annotation else False)
        if kind_of_row:
            device_events.append(event)
            kinds.append(kind_of_row)
    args = {}
    for row, event in enumerate(device_events):
        metadata = _metadata(metadata_of(event)) if metadata_of else {}
        kept = {key: metadata[key] for key in _KEPT_METADATA if key in metadata}
        if kept:
            args[row] = kept
    devices = DeviceRecords(
        list(map(kind.name, device_events)), _int_column(kind.start_ns, device_events),
        _int_column(kind.end_ns, device_events), _int_column(kind.device_index, device_events),
        _int_column(kind.device_resource_id, device_events),
        _int_column(kind.linked_correlation_id, device_events), kinds, args,
        _int_column(kind.correlation_id, device_events))
    return KinetoRecords(cpu, _int_column(kind.correlation_id, cpu_events), devices, os_tids)


def thread_ids_by_small_id(small_ids, os_tids) -> dict:
    """torch's small thread id -> the OS thread id most of its rows carry. One pairing seen
    first is not enough: on an H200 small id 1 (the main thread) also came with OS tid 0 on a
    CUPTI row, and whichever pair a set gave first won, so autograd's records found no lane."""
    counts = Counter(zip(map(int, small_ids), map(int, os_tids)))
    found: dict = {}
    for (small, os_tid), _count in counts.most_common():
        if os_tid:
            found.setdefault(small, os_tid)
    return found


NOTE_NO_PYTHON_FRAMES = (
    "Python frames were not recorded: torch {version} gives with_stack's Python functions only in "
    "its trace file, and nbprof could not read them from it ({why}). Install python3.{minor}-dev "
    "(then nbprof's native recorder records them), or torch >= 2.13.")


def records_with_saved_python(records, result):
    """``records`` (CpuRecords or KinetoRecords) with the Python functions of ``result``'s saved
    trace (kineto_python.py: a torch whose events() leaves them out), and a note for
    trace.meta["notes"] where they could not all be read."""
    try:
        functions = saved_python_functions(result)
    except (OSError, RuntimeError, ValueError) as error:  # no room to write, torch refused
        return records, NOTE_NO_PYTHON_FRAMES.format(
            version=torch.__version__, why=f"{type(error).__name__}: {error}",
            minor=sys.version_info.minor)
    note = None
    if functions.unread:
        note = (f"{functions.unread} of the Python function slices in torch's trace file were "
                "not in the layout nbprof reads: left out of the Python frames")
    if isinstance(records, KinetoRecords):
        correlation = np.concatenate([records.correlation,
                                      np.zeros(len(functions.names), np.int64)])
        return records._replace(cpu=with_python_functions(records.cpu, functions),
                                correlation=correlation), note
    return with_python_functions(records, functions), note


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
