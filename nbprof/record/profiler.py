"""``nbprof.profile``: record a block of PyTorch work into an :class:`nbprof.Trace`.

With a GPU: the seed's CUDA event pair per op (legacy profiler), so every op that launched GPU
work gets a GPU interval on the CPU clock. Without one: Kineto's CPU profiler recording every
thread. Either way ``prof.trace.meta`` says which backend ran and what it could not see.
"""

from __future__ import annotations

import os
import threading
import time
import warnings

import numpy as np
import torch

from .convert import cpu_records_to_trace, drop_own_cuda_calls, legacy_records_to_trace
from ..model import KIND_OP, Thread, Trace
from .overhead import overhead_meta
from .distributed import distributed_meta  # rank, world size, local rank, host under torchrun
from . import calibrate, forks
from .match_events import NOTE_KERNELS_OFF, NOTE_NO_CUPTI_KERNELS, gpu_records_to_trace, \
    is_runtime_call
from .native.recorder import NativeRecorder, native_or_why
from .native.memory_records import memory_of
from .native.to_trace import native_records_to_trace
from .cuda_events import CudaRecorder, LegacyCudaRecorder, cuda_devices_in_use, \
    legacy_cuda_available
from .cuda_graphs import GraphCaptures
from .cuda_init import CudaInitTiming
from .interrupts import interrupts_held
from .kineto_cpu import KinetoCpuRecorder, kernels_supported
from .numba_launches import NumbaLaunchRecorder
from .threads import ThreadNames, name_threads
from .torch_profilers import HandOver, torch_profiler_active

_state_lock = threading.Lock()
_active_profile = None  # the profile recording now, process-wide (Kineto's state is global)

NOTE_CPU_ONLY_NO_GPU = "CPU only: no GPU (torch.cuda.is_available() is False)."
NOTE_CPU_ONLY_ASKED = "CPU only: cuda=False was asked."
NOTE_THREAD_LOCAL = ("Only the thread that started profiling (and torch's autograd worker "
                     "threads) was recorded: torch's CUDA-event profiler is thread-local, so ops "
                     "on other Python threads are missing.")
NOTE_EVENT_THREADS = ("Every thread's ops come from Kineto; CUDA-event intervals exist for the ops of "
                      "the thread that started profiling and torch's autograd threads (torch's "
                      "CUDA-event profiler is thread-local).")
NOTE_NO_ALL_THREADS = ("Only the thread that started profiling was recorded: this torch cannot "
                       "profile all threads (no profile_all_threads), so ops on other threads "
                       "are missing.")
NOTE_OP_INTERVALS = ("Each GPU interval spans all the GPU work of one op (a CUDA event pair "
                     "around it), not single kernels.")
NOTE_TAKEN_OVER = ("torch.profiler was started inside this block: nbprof's recording ended there "
                   "(the two cannot record at once), so this trace holds only what ran before it. "
                   "Profile with one of them at a time.")
NOTE_SESSION_LOST = ("torch.profiler (or another torch profiler) ran inside this block and ended "
                     "nbprof's recording: ops after the point where it started are missing. "
                     "Profile with one of them at a time.")
NOTE_DATALOADER_WORKERS = ("A DataLoader with worker processes ran in this block: ops in the "
                           "worker processes are not recorded (only this process is profiled); "
                           "num_workers=0 shows the loading work on this timeline.")
NOTE_GRAPH_CAPTURE = ("{count} CUDA graph capture(s) in this block: the ops captured are CPU "
                      "slices without CUDA-event intervals (an event on a capturing stream cannot "
                      "be timed); each replay is a CUDAGraph::replay slice.")
NOTE_NO_MEMORY = ("memory=True, but no memory was recorded: torch's profiler records none once all "
                  "threads are profiled (pytorch#192290), and nbprof's native recorder, which "
                  "records every thread's allocations, did not record this profile (CPU "
                  "profiles with recorder='auto' or 'native'; recorder='native' on a GPU).")
_MULTIPROCESS_LOADER = "_MultiProcessingDataLoaderIter.__next__"
NOTE_NATIVE_EVENTS = ("nbprof's native recorder: a pooled CUDA event pair per op on the op's "
                      "stream, every thread's ops.")
NOTE_NATIVE_GPU_OPT_IN = ("Recorded through torch's CUDA-event profiler: nbprof's native recorder "
                          "records CUDA events too (recorder='native'), but stays opt-in on a GPU "
                          "until its cost and accuracy have been measured on one.")
NOTE_FALLBACK = ("No legacy CUDA-event profiler in this torch (or it would not start): GPU "
                 "durations only (whole microseconds), each drawn at its op's CPU start; GPU "
                 "start times were not measured.")


class NestedProfileError(RuntimeError):
    """A profile asked to start inside another (nbprof's or torch's): the outer keeps recording."""


def is_active() -> bool:
    """Whether an ``nbprof.profile`` block is recording now (profiles do not nest)."""
    return _active_profile is not None


class profile:  # noqa: N801  (a context manager named like torch's)
    """Record the block; afterwards ``prof.trace`` is an :class:`nbprof.Trace`.

    ``cuda``: None = CUDA events when ``torch.cuda.is_available()``, else CPU only; True requires
    a GPU; False records the CPU only. ``kernels`` (on a GPU): None = CUPTI's kernels, memcpys
    and memsets beside the events where this torch has CUPTI; True requires it; False: events
    only (the cheapest). ``record_shapes`` / ``with_stack`` keep each op's input
    shapes / Python stack (``trace.shapes`` / ``trace.stacks``, keyed by event id). ``memory``
    records every allocation and free (``trace.memory``) where the recorder can; where it
    cannot, ``trace.meta["notes"]`` says why.

    Not reentrant: a ``profile`` inside another raises RuntimeError and the outer keeps
    recording. An exception inside the block propagates; ``prof.trace`` then holds what was
    recorded up to it.

    ``recorder``: "auto" (nbprof's native observer where it builds and can record what was
    asked, else torch's profiler, ``meta["notes"]`` saying why), "native" (required) or "torch".
    ``trace.meta["recorder"]`` says which recorded. On a GPU "auto" stays on torch's CUDA-event
    path for now; "native" records a pooled CUDA event pair per op, for the ops at a depth below
    ``gpu_depth`` (None: every op; 1: the outermost only, cheapest), and CUPTI's kernels as
    ``kernels`` says (a Kineto session with the CUDA activity only, linked to the native ops).
    """

    def __init__(self, *, cuda: bool | None = None, record_shapes: bool = False,
                 with_stack: bool = False, kernels: bool | None = None, recorder: str = "auto",
                 memory: bool = False, gpu_depth: int | None = None):
        if cuda not in (None, True, False):
            raise TypeError(f"cuda must be None, True or False, not {cuda!r}")
        if kernels not in (None, True, False):
            raise TypeError(f"kernels must be None, True or False, not {kernels!r}")
        if recorder not in ("auto", "native", "torch"):
            raise ValueError(f"recorder must be 'auto', 'native' or 'torch', not {recorder!r}")
        if gpu_depth is not None and (not isinstance(gpu_depth, int) or gpu_depth < 0):
            raise ValueError(f"gpu_depth must be None (every op) or an int >= 0, not {gpu_depth!r}")
        self.cuda = cuda
        self.kernels = kernels
        self.gpu_depth = gpu_depth
        self.recorder = recorder
        self.record_shapes = bool(record_shapes)
        self.with_stack = bool(with_stack)
        self.memory = bool(memory)
        self._per_memory_event_ns, self._memory_windows = None, []
        self.trace: Trace | None = None
        self._recorder = None
        self._meta: dict = {}
        self._kernels_why_not = ""
        self._numba_launches = NumbaLaunchRecorder(gpu=False)

    def __enter__(self) -> "profile":
        try:
            self._start()
            return self
        except BaseException:
            # Ctrl-C once the start was done (as the state lock was released), before the `with`
            # block and so its __exit__: nothing may stay on.
            if _active_profile is self:
                with _state_lock:
                    self._abandon_start(recording=True)
            raise

    def _start(self) -> None:
        global _active_profile
        with _state_lock:
            if _active_profile is not None:
                raise NestedProfileError(
                    "nbprof.profile is not reentrant: a profile is already recording (it keeps "
                    "recording). End it before starting another.")
            if torch_profiler_active():
                raise NestedProfileError(
                    "torch's profiler is already active (torch.profiler.profile or "
                    "torch.autograd.profiler.profile, on this or another thread): nbprof.profile "
                    "cannot run inside it. Leave that block first.")
            self._recorder, self._meta = self._choose_backend()
            self._starting_thread = Thread(os.getpid(), threading.get_native_id(),
                                           threading.current_thread().name)
            self._thread_names = ThreadNames()
            self._hand_over = HandOver(self._end_recording)
            self._graphs = GraphCaptures()
            self._cuda_init = CudaInitTiming(torch.cuda)
            self._raw = None
            self._stopped = False
            recording = False
            try:
                with interrupts_held():  # Ctrl-C lands after the switch, not halfway through it
                    self._thread_names.start()
                    self._base_time_ns = time.time_ns()
                    self._start_recorder()
                    recording = True
                    self._per_op_ns = calibrate.per_op_overhead_ns()
                    self._calibrate_memory()
                    self._own_windows = [(self._starting_thread.tid, self._base_time_ns,
                                          time.time_ns())]
                    self._numba_launches = NumbaLaunchRecorder(
                        gpu=self._meta["cuda"], native=self._recorder.library
                        if isinstance(self._recorder, NativeRecorder) else None)
                    self._numba_launches.start()
                    self._graphs = GraphCaptures(self._legacy_part())
                    self._graphs.start()
                    if self._meta["cuda"]:
                        self._cuda_init.start()
                    self._hand_over.start()
                    forks.set_recording(True)
                    _active_profile = self
                    self._block_start_ns = time.perf_counter_ns()
            except BaseException as error:
                self._abandon_start(recording)
                # (the native recorder's own error says what failed: no torch profiler there)
                if isinstance(error, RuntimeError) and not isinstance(self._recorder,
                                                                      NativeRecorder):
                    raise RuntimeError(
                        f"torch's profiler could not start: {error}. Is another profiler "
                        "(torch.profiler, on another thread) active?") from error
                raise

    def _calibrate_memory(self) -> None:
        """Where memory is recorded: each event's cost, and the window whose events on this
        thread are the calibration's own (left out of the trace)."""
        self._per_memory_event_ns, self._memory_windows = None, []
        if getattr(self._recorder, "memory", False):
            start = time.time_ns()
            self._per_memory_event_ns = calibrate.per_memory_event_ns(self._recorder.pause_memory)
            self._memory_windows = [(self._starting_thread.tid, start, time.time_ns())]

    def _legacy_part(self):
        """The thread-local CUDA-event recorder a CUDA graph capture must pause, if any."""
        if isinstance(self._recorder, LegacyCudaRecorder):
            return self._recorder
        if isinstance(self._recorder, CudaRecorder) and self._recorder.legacy_error is None:
            return self._recorder.legacy
        return None

    def _end_recording(self) -> None:
        """Switch nbprof's profilers off and keep what they recorded; once. Called at the
        block's end, or earlier by the hand-over when a torch profiler starts inside it."""
        if self._stopped:
            return
        if isinstance(self._recorder, LegacyCudaRecorder) and \
                threading.get_ident() != self._recorder.thread_id:
            raise RuntimeError("the CUDA-event profiler is thread-local: it stops on its thread")
        self._stopped = True
        self._block_ns = time.perf_counter_ns() - self._block_start_ns
        forks.set_recording(False)
        self._cuda_init.stop()
        self._graphs.stop()
        self._numba_launches.stop()  # restores numba's launch path; never raises
        self._raw = self._recorder.stop()

    def _abandon_start(self, recording: bool) -> None:
        """After a failed start, or one that Ctrl-C interrupted once torch's profiler was on (the
        state lock held): leave nothing switched on. A recorder that did not start is not stopped:
        that could stop another profiler's session."""
        global _active_profile
        _active_profile = None
        forks.set_recording(False)
        self._cuda_init.stop()
        self._graphs.stop()
        self._hand_over.stop()
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
        if isinstance(self._recorder, NativeRecorder):
            cuda = self._recorder.cuda_records
            tids = set(raw.os_tids.tolist()) | (set(cuda.cpu.tid.tolist()) if cuda else set())
            trace = native_records_to_trace(
                raw, base_time_ns=self._base_time_ns, pid=os.getpid(),
                thread_names=name_threads(tids, known_names),
                first_tid=self._starting_thread.tid, meta=self._meta, cuda=cuda,
                windows=[*self._own_windows, *self._recorder.windows])
            self._recorder.cuda_records = None
            if self._recorder.gpu:
                trace.meta.setdefault("kernels", False)  # as on torch's path: CUPTI's or not
                trace.meta["notes"].extend(self._native_kernel_notes(trace))
            if self._recorder.memory_records is not None:
                records = self._recorder.memory_records
                trace.memory = memory_of(
                    records, trace, self._base_time_ns, drop_windows=self._memory_windows,
                    thread_names=name_threads(set(records.os_tid.tolist()), known_names))
                self._recorder.memory_records = None
            trace.meta.setdefault("notes", []).extend(self._recorder.notes)
            return trace
        if isinstance(self._recorder, CudaRecorder):
            trace = gpu_records_to_trace(
                raw, anchor_name=self._recorder.anchor_name, base_time_ns=self._base_time_ns,
                starting_thread=self._starting_thread,
                thread_names=name_threads(set(raw.kineto.cpu.tid.tolist()), known_names),
                windows=self._own_windows, kernels_why_not=self._kernels_why_not,
                record_shapes=self.record_shapes, with_stack=self.with_stack, meta=self._meta)
            trace.meta["notes"].extend(self._recorder.kineto.notes)
            return trace
        if isinstance(self._recorder, LegacyCudaRecorder):
            return legacy_records_to_trace(
                raw, anchor_name=self._recorder.anchor_name, base_time_ns=self._base_time_ns,
                starting_thread=self._starting_thread, record_shapes=self.record_shapes,
                with_stack=self.with_stack, meta=self._meta)
        raw, _ = drop_own_cuda_calls(raw, event_times={}, windows=self._own_windows)
        trace = cpu_records_to_trace(
            raw, base_time_ns=self._base_time_ns, pid=os.getpid(),
            thread_names=name_threads(set(raw.tid.tolist()), known_names),
            first_tid=self._starting_thread.tid, meta=self._meta)
        trace.meta["notes"].extend(self._recorder.notes)
        return trace

    def _choose_backend(self, legacy: bool = True):
        has_gpu = torch.cuda.is_available()
        if self.cuda and not has_gpu:
            raise RuntimeError(
                f"cuda=True, but torch {torch.__version__} sees no GPU "
                "(torch.cuda.is_available() is False). Use cuda=None to record the CPU only.")
        if self.kernels and (not has_gpu or self.cuda is False):
            raise RuntimeError("kernels=True needs a GPU and CUDA recording (cuda=None or True): "
                               "use kernels=None to record the CPU only here.")
        options = dict(record_shapes=self.record_shapes, with_stack=self.with_stack)
        meta = {"torch_version": torch.__version__, "pid": os.getpid(), **distributed_meta()}
        if has_gpu and self.cuda is not False:
            meta["device_names"] = {device: torch.cuda.get_device_name(device)
                                    for device in range(torch.cuda.device_count())}
        if has_gpu and self.cuda is not False and self.recorder == "native":
            return self._native_gpu(meta)
        if has_gpu and self.cuda is not False and legacy and legacy_cuda_available():
            kernels = self._kernels_wanted()
            recorder = CudaRecorder(kernels=kernels, **options)
            meta["recorder"] = "torch"
            opt_in = [NOTE_NATIVE_GPU_OPT_IN] if self.recorder == "auto" else []
            if recorder.all_threads:  # Kineto first, then the events (CUDA_EVENTS.md)
                meta.update(backend="cuda-events", cuda=True, all_threads=True,
                            notes=[NOTE_OP_INTERVALS, NOTE_EVENT_THREADS, *opt_in])
                return recorder, meta
            meta.update(backend="cuda-events", cuda=True, all_threads=False,
                        notes=[NOTE_OP_INTERVALS, NOTE_THREAD_LOCAL, *opt_in])
            return LegacyCudaRecorder(**options), meta
        if not has_gpu or self.cuda is False:
            native, why = self._native_or_why()
            if native is not None:
                meta.update(backend="native-cpu", cuda=False, all_threads=True, **native.meta(),
                            notes=[NOTE_CPU_ONLY_ASKED if has_gpu else NOTE_CPU_ONLY_NO_GPU])
                return native, meta
            if why:
                meta["native_not_used"] = why
        if has_gpu and self.cuda is not False:
            recorder = KinetoCpuRecorder(gpu_fallback=True, **options)
            meta.update(backend="kineto-gpu-fallback", cuda=True, notes=[NOTE_FALLBACK])
        else:
            recorder = KinetoCpuRecorder(**options)
            meta.update(backend="kineto-cpu", cuda=False,
                        notes=[NOTE_CPU_ONLY_ASKED if has_gpu else NOTE_CPU_ONLY_NO_GPU])
        meta["all_threads"] = recorder.all_threads
        meta["recorder"] = "torch"
        if meta.get("native_not_used"):
            meta["notes"].append(meta.pop("native_not_used"))
        if not recorder.all_threads:
            meta["notes"].append(NOTE_NO_ALL_THREADS)
        return recorder, meta

    def _native_gpu(self, meta: dict):
        """recorder='native' on a GPU: the observer with a pooled CUDA event pair per op and,
        where kernels are wanted, a Kineto session with the CUDA activity only beside it (CUPTI's
        calls and kernels, linked to the native ops by their call's thread and time)."""
        kernels = self._kernels_wanted()
        session = KinetoCpuRecorder(kernels=True, cpu=False, correlated=True) if kernels else None
        native, _ = native_or_why("native", with_stack=self.with_stack,
                                  record_shapes=self.record_shapes, memory=self.memory, gpu=True,
                                  gpu_depth=self.gpu_depth, anchor_devices=cuda_devices_in_use(),
                                  cuda_session=session, cuda_required=bool(self.kernels))
        meta.update(backend="native-cuda-events", cuda=True, all_threads=True, **native.meta(),
                    notes=[NOTE_OP_INTERVALS, NOTE_NATIVE_EVENTS])
        return native, meta

    def _native_kernel_notes(self, trace: Trace) -> list[str]:
        """What the notes say about CUPTI's kernels on the native path (as on torch's)."""
        if self._recorder.cuda_error:
            return [f"CUPTI would not start beside the native recorder "
                    f"({self._recorder.cuda_error}): kernels are not shown one by one."]
        if self._recorder.cuda_session is None:
            return [NOTE_KERNELS_OFF.format(why=self._kernels_why_not or "kernels=False")]
        if not trace.meta.get("kernels") and (trace.gpu_kind == KIND_OP).any():
            return [NOTE_NO_CUPTI_KERNELS]
        return []

    def _native_or_why(self):
        """The native recorder for a CPU profile, or why torch's records it ("" if asked)."""
        return native_or_why(self.recorder, with_stack=self.with_stack,
                             record_shapes=self.record_shapes, memory=self.memory)

    def _kernels_wanted(self) -> bool:
        if self.kernels is False:
            self._kernels_why_not = "kernels=False was asked"
            return False
        if kernels_supported():
            return True
        if self.kernels:
            raise RuntimeError(
                f"kernels=True, but torch {torch.__version__} was built without CUPTI "
                "(ProfilerActivity.CUDA is not supported): use kernels=None to record the CUDA "
                "events only.")
        self._kernels_why_not = "this torch has no CUPTI"
        return False

    def __exit__(self, exc_type, exc_value, traceback) -> bool:
        global _active_profile
        if _active_profile is not self:  # never entered, or already ended: nothing to stop
            raise RuntimeError("nbprof.profile.__exit__ without __enter__: use `with nbprof.profile() as prof:`")
        # Ctrl-C here waits for torch's profiler to be off and the trace to be built, then comes
        # through: the profiler is never left on, and prof.trace holds what was recorded.
        with interrupts_held():
            try:
                # Off first, so that a torch profiler started now finds nothing to hand over.
                taken_over = self._hand_over.stop()
                self._end_recording()
                if getattr(self._recorder, "pending", False):  # handed over on another thread:
                    self._raw = self._recorder.stop()  # the thread-local part ends here
            finally:
                known_names = self._thread_names.stop()
                with _state_lock:
                    _active_profile = None
            raw, self._raw = self._raw, None  # the records go once converted: ~100 B an event
            trace = self._numba_launches.add_to(self._to_trace(raw, known_names), known_names)
            trace = self._cuda_init.add_to(trace, known_names)
            del raw
            self.trace = self._with_findings(trace, taken_over)
        if taken_over or self._hand_over.flag_lost:
            warnings.warn(f"nbprof: {self.trace.meta['notes'][-1]}", RuntimeWarning, stacklevel=2)
        return False  # exceptions from the block propagate

    def _ranges_on_starting_thread(self, trace: Trace) -> int:
        """The ops and ranges of the starting thread: each ran the profilers' callbacks, which is
        what the calibration priced. CUDA runtime calls (CUPTI's rows: a cudaLaunchKernel beside
        every op on a GPU) and with_stack's Python frames ran none of them; counted, they put the
        share at 100% of a GPU cell that the profilers slowed by half (H200, 2026-12-04)."""
        if not trace.threads or trace.threads[0].tid != self._starting_thread.tid:
            return 0
        no_callback = np.fromiter((is_runtime_call(name) for name in trace.names), np.bool_,
                                  len(trace.names))
        python = (trace.category == trace.categories.index("python_function")
                  if "python_function" in trace.categories else np.zeros(len(trace), np.bool_))
        return int(((trace.thread == 0) & ~no_callback[trace.name_id] & ~python).sum())

    def _memory_events_on_starting_thread(self, trace: Trace) -> int:
        """Its allocations and frees: each ran the reporter the calibration priced."""
        if not trace.threads or trace.threads[0].tid != self._starting_thread.tid:
            return 0
        return int((trace.memory.thread == 0).sum())

    def _with_findings(self, trace: Trace, taken_over: bool) -> Trace:
        """The notes and figures only the profile knows: a torch profiler inside the block,
        DataLoader worker processes, the profiler's own cost."""
        notes = trace.meta.setdefault("notes", [])
        if any(_MULTIPROCESS_LOADER in name for name in trace.names):
            notes.append(NOTE_DATALOADER_WORKERS)
        trace.meta["overhead"] = overhead_meta(
            self._per_op_ns, self._ranges_on_starting_thread(trace), self._block_ns,
            self._per_memory_event_ns, self._memory_events_on_starting_thread(trace))
        if self.memory and not len(trace.memory):
            notes.append(NOTE_NO_MEMORY)
        if self._graphs.paused_captures:
            notes.append(NOTE_GRAPH_CAPTURE.format(count=self._graphs.paused_captures))
        if taken_over:
            notes.append(NOTE_TAKEN_OVER)
        elif self._hand_over.flag_lost:
            trace.meta["session_lost"] = True
            notes.append(NOTE_SESSION_LOST)
        return trace
