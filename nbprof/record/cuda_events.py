"""The GPU recording: Kineto (every thread, CUPTI kernels where allowed) + CUDA event pairs per op.

``ProfilerState.CUDA`` (torch's legacy profiler, the seed's mechanism) records, at each op's push
and pop, the CPU time and a CUDA event on the current stream of the current device; it is
thread-local (the starting thread and autograd's threads). Kineto with ``profile_all_threads``
records every thread, and with ``ProfilerActivity.CUDA`` CUPTI's kernels. Both at once works only
in one order (CUDA_EVENTS.md, "Read again"): Kineto first, then the legacy profiler; stopped in
reverse. :class:`CudaRecorder` does that; :class:`LegacyCudaRecorder` alone is the fallback for a
torch whose Kineto cannot profile all threads.

Anchors: right after enabling, on each device in use (never another: a CUDA context costs
~0.5 GB), a few warm-up ranges, a synchronize, then one empty ``record_function`` whose push is
the device's anchor; again at stop after the final synchronize (gpu_clock.py fits the drift
between the two). Ranges nbprof opens carry the ``nbprof::`` prefix, which the converter drops.
This module only switches profilers and places anchors; the arithmetic is in nbprof.record.convert.
"""

from __future__ import annotations

import threading
import time
from typing import NamedTuple

import torch
from torch._C._profiler import _ExperimentalConfig
from torch.autograd import ProfilerConfig, ProfilerState

from .kineto_cpu import KinetoCpuRecorder, KinetoRecords
from .quiet import quiet_usdt

ANCHOR_NAME = "nbprof::gpu_clock_anchor"
WARMUP_NAME = "nbprof::warmup"
WARMUP_RANGES = 5  # torch 1.x recorded 5: "event recording appears to have some startup overhead"


def legacy_cuda_available() -> bool:
    """Whether this torch still has the legacy CUDA-event profiler (deprecated; may go)."""
    return (hasattr(torch._C._autograd, "_enable_profiler_legacy")
            and hasattr(ProfilerState, "CUDA"))


def devices_in_use(device_count: int, initialized: bool, has_primary_context) -> list[int]:
    """The devices that already have a CUDA context: only these are synchronized and anchored.
    ``has_primary_context(i)`` as ``torch._C._cuda_hasPrimaryContext``; none before CUDA is
    initialised in this process (asking would not create one, but nothing can be in use)."""
    if not initialized or has_primary_context is None:
        return []
    return [device for device in range(device_count) if has_primary_context(device)]


def stop_anchor_devices(anchored, in_use_now) -> list[int]:
    """Devices synchronized and anchored at stop: those anchored at start and any first used
    inside the block (it has a context now; the records will show its events)."""
    return sorted(set(anchored) | set(in_use_now))


def cuda_devices_in_use() -> list[int]:
    return devices_in_use(torch.cuda.device_count(), torch.cuda.is_initialized(),
                          getattr(torch._C, "_cuda_hasPrimaryContext", None))


class LegacyCudaRecorder:
    """Turns the legacy CUDA-event profiler on (with anchors) and off; ``stop()`` returns
    torch's per-thread record lists. ``state=ProfilerState.CPU`` runs the same path without CUDA
    events (the tests on a machine without a GPU)."""

    anchor_name = ANCHOR_NAME

    def __init__(self, *, record_shapes: bool = False, with_stack: bool = False,
                 state=None):
        self.record_shapes = record_shapes
        self.with_stack = with_stack
        self.cuda = state is None
        self._config = ProfilerConfig(ProfilerState.CUDA if state is None else state,
                                      record_shapes, False, with_stack, False, False,
                                      _ExperimentalConfig())
        self.anchored: list[int] = []
        self.thread_id = None
        self.paused = False
        self._earlier_lists: list = []  # sessions ended early (a CUDA graph capture)

    def start(self) -> None:
        with quiet_usdt():
            torch._C._autograd._enable_profiler_legacy(self._config)
        self.thread_id = threading.get_ident()
        try:
            if self.cuda:
                self.anchored = cuda_devices_in_use()
                self._place_anchors(self.anchored, warm_up=True)
        except BaseException:
            torch._C._autograd._disable_profiler_legacy()
            raise

    @staticmethod
    def _place_anchors(devices, *, warm_up: bool) -> None:
        record_function = torch.autograd.profiler.record_function
        for device in devices:
            with torch.cuda.device(device):
                if warm_up:  # the first event records pay a start-up cost the anchor must not
                    for _ in range(WARMUP_RANGES):
                        with record_function(WARMUP_NAME):
                            pass
                # An idle device completes the anchor's event as soon as it is submitted, so its
                # GPU time corresponds to its CPU time up to the submission latency.
                torch.cuda.synchronize()
                with record_function(ANCHOR_NAME):
                    pass

    def pause(self) -> None:
        """End the session for now (its records are kept); :meth:`resume` starts another."""
        with quiet_usdt():
            self._earlier_lists.extend(torch._C._autograd._disable_profiler_legacy())
        self.paused = True

    def resume(self) -> None:
        with quiet_usdt():
            torch._C._autograd._enable_profiler_legacy(self._config)
        self.paused = False

    def stop(self):
        if self.paused:  # the block ended inside a CUDA graph capture: no event may go there
            self.paused = False
            return self._earlier_lists
        try:
            if self.cuda:
                # Every event must have completed before elapsed times can be read; devices first
                # used inside the block are anchored now (one anchor: no drift fit for them).
                devices = stop_anchor_devices(self.anchored, cuda_devices_in_use())
                for device in devices:
                    torch.cuda.synchronize(device)
                if not torch.cuda.is_current_stream_capturing():
                    self._place_anchors(devices, warm_up=False)
        finally:
            with quiet_usdt():
                thread_lists = torch._C._autograd._disable_profiler_legacy()
        return self._earlier_lists + list(thread_lists)


class CudaRecords(NamedTuple):
    """What :class:`CudaRecorder` recorded."""

    legacy_lists: list | None  # _disable_profiler_legacy()'s lists (None: the legacy part failed)
    kineto: KinetoRecords
    windows: list  # (OS tid, start ns, end ns): nbprof's own calls, left out of the trace
    kernels_asked: bool  # whether CUPTI was asked for kernels
    legacy_error: str = ""  # why the legacy part did not start, where it did not


class CudaRecorder:
    """Kineto first (all threads; CUDA activities when ``kernels``), then the legacy CUDA-event
    profiler; stopped in reverse. ``stop()`` on a thread other than the starting one (a torch
    profiler taking over there) stops Kineto only; call it again on the starting thread."""

    anchor_name = ANCHOR_NAME

    def __init__(self, *, record_shapes: bool = False, with_stack: bool = False,
                 kernels: bool = False, legacy_state=None):
        self.kineto = KinetoCpuRecorder(record_shapes=record_shapes, with_stack=with_stack,
                                        kernels=kernels, correlated=True)
        self.kernels = kernels
        self.all_threads = self.kineto.all_threads
        self.legacy = LegacyCudaRecorder(record_shapes=record_shapes, with_stack=with_stack,
                                         state=legacy_state)
        self.legacy_error: BaseException | None = None
        self.windows: list = []
        self._legacy_on = self._kineto_on = False
        self._legacy_lists = None
        self._kineto_records = None

    @property
    def pending(self) -> bool:
        """The legacy part is still on (stop() ran on another thread)."""
        return self._legacy_on

    def start(self) -> None:
        tid = threading.get_native_id()
        begin = time.time_ns()
        self.kineto.start()
        self._kineto_on = True
        try:
            self.legacy.start()
            self._legacy_on = True
        except RuntimeError as error:  # refused or broken: Kineto's ops (and kernels) remain
            self.legacy_error = error
        self.windows.append((tid, begin, time.time_ns()))

    def own_window(self, begin_ns: int) -> None:
        """nbprof's own calls on the starting thread since ``begin_ns`` (the calibration)."""
        self.windows.append((threading.get_native_id(), begin_ns, time.time_ns()))

    def stop(self) -> CudaRecords | None:
        on_legacy_thread = threading.get_ident() == self.legacy.thread_id
        begin = time.time_ns()
        try:
            if self._legacy_on and on_legacy_thread:
                self._legacy_on = False
                self._legacy_lists = self.legacy.stop()
        finally:
            if on_legacy_thread:
                self.windows.append((threading.get_native_id(), begin, time.time_ns()))
            if self._kineto_on:
                self._kineto_on = False
                self._kineto_records = self.kineto.stop()
        if self._legacy_on:
            return None
        return CudaRecords(self._legacy_lists, self._kineto_records, self.windows, self.kernels,
                           str(self.legacy_error or ""))
