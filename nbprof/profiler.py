"""``nbprof.profile``: record a block of PyTorch work into an :class:`nbprof.Trace`.

With a GPU: the seed's CUDA event pair per op (legacy profiler), so every op that launched GPU
work gets a GPU interval on the CPU clock. Without one: Kineto's CPU profiler recording every
thread. Either way ``prof.trace.meta`` says which backend ran and what it could not see.
"""

from __future__ import annotations

import os
import threading
import time

import torch

from .convert import cpu_records_to_trace, legacy_records_to_trace
from .events import Thread, Trace
from .ranks import distributed_meta  # rank, world size, local rank, host under torchrun
from .record.cuda_events import LegacyCudaRecorder, legacy_cuda_available
from .record.interrupts import interrupts_held
from .record.kineto_cpu import KinetoCpuRecorder
from .record.numba_launches import NumbaLaunchRecorder
from .record.threads import ThreadNames, name_threads

_state_lock = threading.Lock()
_active_profile = None  # the profile recording now, process-wide (Kineto's state is global)

NOTE_CPU_ONLY_NO_GPU = "CPU only: no GPU (torch.cuda.is_available() is False)."
NOTE_CPU_ONLY_ASKED = "CPU only: cuda=False was asked."
NOTE_THREAD_LOCAL = ("Only the thread that started profiling (and torch's autograd worker "
                     "threads) was recorded: torch's CUDA-event profiler is thread-local, so ops "
                     "on other Python threads are missing.")
NOTE_NO_ALL_THREADS = ("Only the thread that started profiling was recorded: this torch cannot "
                       "profile all threads (no profile_all_threads), so ops on other threads "
                       "are missing.")
NOTE_OP_INTERVALS = ("Each GPU interval spans all the GPU work of one op (a CUDA event pair "
                     "around it), not single kernels.")
NOTE_FALLBACK = ("No legacy CUDA-event profiler in this torch (or it would not start): GPU "
                 "durations only (whole microseconds), each drawn at its op's CPU start; GPU "
                 "start times were not measured.")


def is_active() -> bool:
    """Whether an ``nbprof.profile`` block is recording now (profiles do not nest)."""
    return _active_profile is not None


class profile:  # noqa: N801  (a context manager named like torch's)
    """Record the block; afterwards ``prof.trace`` is an :class:`nbprof.Trace`.

    ``cuda``: None = CUDA events when ``torch.cuda.is_available()``, else CPU only; True requires
    a GPU; False records the CPU only. ``record_shapes`` / ``with_stack`` keep each op's input
    shapes / Python stack (``trace.shapes`` / ``trace.stacks``, keyed by event id).

    Not reentrant: a ``profile`` inside another raises RuntimeError and the outer keeps
    recording. An exception inside the block propagates; ``prof.trace`` then holds what was
    recorded up to it.
    """

    def __init__(self, *, cuda: bool | None = None, record_shapes: bool = False,
                 with_stack: bool = False):
        if cuda not in (None, True, False):
            raise TypeError(f"cuda must be None, True or False, not {cuda!r}")
        self.cuda = cuda
        self.record_shapes = bool(record_shapes)
        self.with_stack = bool(with_stack)
        self.trace: Trace | None = None
        self._recorder = None
        self._meta: dict = {}
        self._numba_launches = NumbaLaunchRecorder(gpu=False)

    def __enter__(self) -> "profile":
        global _active_profile
        with _state_lock:
            if _active_profile is not None:
                raise RuntimeError(
                    "nbprof.profile is not reentrant: a profile is already recording (it keeps "
                    "recording). End it before starting another.")
            if torch.autograd._profiler_enabled():
                raise RuntimeError(
                    "torch's profiler is already active (torch.profiler.profile or "
                    "torch.autograd.profiler.profile): nbprof.profile cannot run inside it. "
                    "Leave that block first.")
            self._recorder, self._meta = self._choose_backend()
            self._starting_thread = Thread(os.getpid(), threading.get_native_id(),
                                           threading.current_thread().name)
            self._base_time_ns = time.time_ns()
            self._thread_names = ThreadNames()
            recording = False
            try:
                with interrupts_held():  # Ctrl-C lands after the switch, not halfway through it
                    self._thread_names.start()
                    self._start_recorder()
                    recording = True
                    self._numba_launches = NumbaLaunchRecorder(gpu=self._meta["cuda"])
                    self._numba_launches.start()
                    _active_profile = self
            except BaseException as error:
                self._abandon_start(recording)
                if isinstance(error, RuntimeError):
                    raise RuntimeError(
                        f"torch's profiler could not start: {error}. Is another profiler "
                        "(torch.profiler, on another thread) active?") from error
                raise
        return self

    def _abandon_start(self, recording: bool) -> None:
        """After a failed start, or one that Ctrl-C interrupted once torch's profiler was on (the
        state lock held): leave nothing switched on. A recorder that did not start is not stopped:
        that could stop another profiler's session."""
        global _active_profile
        _active_profile = None
        self._thread_names.stop()
        self._numba_launches.stop()
        if recording:
            with interrupts_held():
                self._recorder.stop()

    def _start_recorder(self) -> None:
        try:
            self._recorder.start()
        except RuntimeError as error:
            if not isinstance(self._recorder, LegacyCudaRecorder):
                raise
            # The legacy path is there but will not start (deprecated, maybe broken in a later
            # torch): record with the duration-only fallback rather than fail.
            self._recorder, self._meta = self._choose_backend(legacy=False)
            self._meta["notes"].append(f"The legacy CUDA-event profiler failed to start: {error}")
            self._recorder.start()

    def _to_trace(self, raw, known_names: dict) -> Trace:
        if isinstance(self._recorder, LegacyCudaRecorder):
            return legacy_records_to_trace(
                raw, anchor_name=self._recorder.anchor_name, base_time_ns=self._base_time_ns,
                starting_thread=self._starting_thread, record_shapes=self.record_shapes,
                with_stack=self.with_stack, meta=self._meta)
        return cpu_records_to_trace(
            raw, base_time_ns=self._base_time_ns, pid=os.getpid(),
            thread_names=name_threads(set(raw.tid.tolist()), known_names),
            first_tid=self._starting_thread.tid, meta=self._meta)

    def _choose_backend(self, legacy: bool = True):
        has_gpu = torch.cuda.is_available()
        if self.cuda and not has_gpu:
            raise RuntimeError(
                f"cuda=True, but torch {torch.__version__} sees no GPU "
                "(torch.cuda.is_available() is False). Use cuda=None to record the CPU only.")
        options = dict(record_shapes=self.record_shapes, with_stack=self.with_stack)
        meta = {"torch_version": torch.__version__, "pid": os.getpid(), **distributed_meta()}
        if has_gpu and self.cuda is not False:
            meta["device_names"] = {device: torch.cuda.get_device_name(device)
                                    for device in range(torch.cuda.device_count())}
        if has_gpu and self.cuda is not False and legacy and legacy_cuda_available():
            meta.update(backend="cuda-events", cuda=True, all_threads=False,
                        notes=[NOTE_OP_INTERVALS, NOTE_THREAD_LOCAL])
            return LegacyCudaRecorder(**options), meta
        if has_gpu and self.cuda is not False:
            recorder = KinetoCpuRecorder(gpu_fallback=True, **options)
            meta.update(backend="kineto-gpu-fallback", cuda=True, notes=[NOTE_FALLBACK])
        else:
            recorder = KinetoCpuRecorder(**options)
            meta.update(backend="kineto-cpu", cuda=False,
                        notes=[NOTE_CPU_ONLY_ASKED if has_gpu else NOTE_CPU_ONLY_NO_GPU])
        meta["all_threads"] = recorder.all_threads
        if not recorder.all_threads:
            meta["notes"].append(NOTE_NO_ALL_THREADS)
        return recorder, meta

    def __exit__(self, exc_type, exc_value, traceback) -> bool:
        global _active_profile
        # Ctrl-C here waits for torch's profiler to be off and the trace to be built, then comes
        # through: the profiler is never left on, and prof.trace holds what was recorded.
        with interrupts_held():
            try:
                self._numba_launches.stop()  # restores numba's launch path; never raises
                raw = self._recorder.stop()
            finally:
                known_names = self._thread_names.stop()
                with _state_lock:
                    _active_profile = None
            self.trace = self._numba_launches.add_to(self._to_trace(raw, known_names),
                                                     known_names)
        return False  # exceptions from the block propagate
