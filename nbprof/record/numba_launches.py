"""numba.cuda kernel launches inside a profile: a CPU slice ``numba::<qualname>`` per launch.

While a profile records, numba's launch entry point is swapped for a wrapper; ``stop()`` puts
the very same object back (``_LaunchConfiguration.__call__`` in real mode,
``FakeCUDAKernel.__call__`` under the simulator), so launches outside a profile run numba's own
code and pay nothing. torch's profiler only records its own ops, so each launch is recorded here:
two ``time.time_ns()`` reads (the wall clock Kineto's records use, so numba slices nest among
torch ops), the launch configuration, the argument shapes/dtypes and the caller's file and line,
in a side list that :meth:`NumbaLaunchRecorder.add_to` turns into events of the finished Trace.

Where nbprof's native recorder records, each launch is one of its ranges instead (pushed and
popped around numba's launch on its thread, :class:`~.numba_gpu.NativeRanges`): the slice is the
native record, nested among that thread's ops, and on a GPU its event pair goes on the launch's
stream. Otherwise, on a GPU every launch also gets a GPU interval on the stream it ran on
(:mod:`.numba_gpu`): on threads torch's legacy profiler records, through a record_function on the
launch's stream (its op becomes the launch's slice); elsewhere through a numba event pair and
this recorder's anchor.
A launch that compiles first has its GPU interval start after the compilation, so it holds the
kernel, not the JIT; the compilation itself becomes a child slice ``numba::compile <qualname>``
(numba-cuda's ``numba-cuda:compiler_lock`` event: the installed 0.30.4 emits no
``numba-cuda:compile`` for CUDA kernels, only that lock and ``numba-cuda:run_pass``).

Under the simulator (``NUMBA_ENABLE_CUDASIM=1``) a kernel runs on the CPU inside the launch: its
simulated GPU interval is the launch's CPU interval, and the notes say so.
"""

from __future__ import annotations

import os
import sys
import threading
from time import time_ns


from ..model import Trace
from .numba_gpu import NativeRanges, NumbaEventClock, TorchLaunchTiming, record_function_ops
from .numba_rows import (NewRows, argument_signature, dim3, entry_names, event_intervals_of,
                         line_of, link_cupti_kernels, raw_argument, source_location)

NOTE_NO_NUMBA = ("numba.cuda kernel launches were not recorded: numba.cuda cannot be imported "
                 "({error}). Install numba-cuda to see numba kernels on the timeline.")
NOTE_SIMULATED = ("numba.cuda simulator (NUMBA_ENABLE_CUDASIM=1): GPU timings are simulated: a "
                  "numba kernel's GPU interval is the simulator's run of it on the CPU.")
NOTE_NO_GPU_TIMES = ("numba kernels: CPU slices only ({why}), no GPU intervals.")
NOTE_UNTIMED = "{count} numba launches could not be timed on the GPU ({error}): no GPU interval."
NOTE_UNPAIRED = ("{count} CUPTI kernels of numba functions could not be paired with their "
                 "launches (the counts differ): not linked.")
NOTE_UNMATCHED = ("{count} numba launches timed by {recorder} are missing from its records:"
                  " CPU slices only.")

NAME_PREFIX = "numba::"
COMPILE_PREFIX = "numba::compile "
LAUNCH_FIELDS = 14
TORCH_TIMED = "torch"  # a launch's events field: timed by torch's profiler (a record_function)
NATIVE_TIMED = "native"  # ... recorded as a range of the native recorder
RECORDED_BY = {TORCH_TIMED: "torch's profiler", NATIVE_TIMED: "nbprof's native recorder"}
_RECORD_FAILED = "numba could not record its events on the launch's stream"


def _numba_cuda_config_and_events():
    """numba-cuda's config and event module and the event its compiler lock sends; the CUDA
    target built into numba before numba-cuda (no ``numba.cuda.core``) uses numba's own."""
    try:
        from numba.cuda.core import config, event
        return config, event, "numba-cuda:compiler_lock"
    except ImportError:
        from numba.core import config, event
        return config, event, "numba:compiler_lock"


def stream_handle(stream) -> int:
    """A launch's stream as an integer handle (0: the default stream). numba-cuda hands a
    cuda.core Stream (its ``handle`` a CUstream, truthy even for 0); the built-in target a numba
    Stream (ctypes handle) or 0."""
    if not stream:
        return 0
    handle = getattr(stream, "handle", 0)
    return int(getattr(handle, "value", handle) or 0)


def _per_thread_default_stream() -> bool:
    """Whether cuda-python (numba-cuda's driver binding) makes stream 0 the per-thread default."""
    flag = os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "0").strip()
    return flag not in ("", "0")


def _record(events, index: int, stream) -> bool:
    try:
        events[index].record(stream)
        return True
    except Exception:  # noqa: BLE001
        pass
    # A thread's first launch: numba makes its context current on the thread inside the launch,
    # after this record, which then fails (the first launch of every worker thread went untimed
    # on an H200). Made current here, the record is tried once more.
    try:
        from numba import cuda

        cuda.current_context()
        events[index].record(stream)
        return True
    except Exception:  # noqa: BLE001  (another device's stream: numba's events cannot go there)
        return False


class NumbaLaunchRecorder:
    """``start()`` swaps numba's launch path for a recording one, ``stop()`` restores it (never
    raises for the restore), ``add_to(trace)`` returns the Trace with the launches in it."""

    def __init__(self, *, gpu: bool, no_gpu_reason: str = "no GPU", native=None):
        """``native``: the native recorder's library where it records this profile (each launch
        then becomes one of its ranges)."""
        self.want_gpu = gpu
        self._native = native
        self.no_gpu_reason = no_gpu_reason
        self.notes: list[str] = []  # for every trace (why nothing could be recorded)
        self._launch_notes: list[str] = []  # for a trace with numba launches in it
        # The launches, LAUNCH_FIELDS values each, in one flat list, and their argument
        # signatures interned: a tuple kept per launch would be one more object for every
        # garbage collection to walk (it cost ~8 us per launch at 100k launches).
        self._launch_fields: list = []
        self._signature_ids: dict = {}
        self.compiles: list = []  # (tid, start_ns, end_ns, qualname)
        self.simulator = False
        self._restore = None  # (owner class, attribute name, original) while installed
        self._listener = None
        self._local = threading.local()
        self._events = self._lock_event = None  # numba's event module, the lock's event kind
        self._clock: NumbaEventClock | None = None  # numba's events and their anchor
        self.torch_timing: TorchLaunchTiming | None = None  # where torch's legacy profiler runs
        self._stream_numbers: dict[int, int] = {}
        self.device = 0  # the device numba's context is on (the anchor's)
        self._untimed = 0
        self._untimed_error = None

    @property
    def launches(self) -> list:
        """One tuple per launch: (tid, start_ns, end_ns, qualname, grid, block, stream handle,
        shared memory, argument signature, the caller's code object and its f_lasti, CUDA
        event pair / TORCH_TIMED / None, error, numba's dispatcher (the simulator's: the
        function))."""
        fields = self._launch_fields
        signatures = list(self._signature_ids)
        rows = [tuple(fields[at:at + LAUNCH_FIELDS]) for at in range(0, len(fields), LAUNCH_FIELDS)]
        return [row[:8] + (signatures[row[8]],) + row[9:] for row in rows]

    def clear(self) -> None:
        self._launch_fields.clear()
        self._signature_ids.clear()

    # -- switching ----------------------------------------------------------------------------

    def start(self) -> None:
        try:
            from numba import cuda
        except Exception as error:  # noqa: BLE001  (not installed, or a broken CUDA binding)
            self.notes.append(NOTE_NO_NUMBA.format(error=f"{type(error).__name__}: {error}"))
            return
        config, self._events, self._lock_event = _numba_cuda_config_and_events()
        self.simulator = bool(config.ENABLE_CUDASIM)
        if self.simulator:
            from numba.cuda.simulator import kernel as simulator_kernel
            owner, wrapper = simulator_kernel.FakeCUDAKernel, self._simulator_wrapper(
                simulator_kernel.FakeCUDAKernel.__call__, simulator_kernel)
            self._launch_notes.append(NOTE_SIMULATED)
        else:
            from numba.cuda import dispatcher
            owner = dispatcher._LaunchConfiguration
            if self._native is not None:  # its ranges carry their own CUDA events
                if not self.want_gpu:
                    self._launch_notes.append(NOTE_NO_GPU_TIMES.format(why=self.no_gpu_reason))
            else:
                self._start_gpu_timing(cuda)
            wrapper = self._launch_wrapper(owner.__call__)
        self._restore = (owner, "__call__", owner.__dict__["__call__"])
        self._listen_for_compiles()
        owner.__call__ = wrapper

    def stop(self) -> None:
        """Put numba's own launch path back (first, whatever else fails), stop listening."""
        try:
            if self._restore is not None:
                owner, attribute, original = self._restore
                setattr(owner, attribute, original)
                self._restore = None
        finally:
            if self._listener is not None:
                self._events.unregister(self._lock_event, self._listener)
                self._listener = None
        if self._clock is not None and self._launch_fields:
            try:
                self._clock.cuda.synchronize()  # every event must have completed to be read
            except Exception as error:  # noqa: BLE001  (a broken context: say so, lose nothing)
                count = len(self._launch_fields) // LAUNCH_FIELDS
                self.notes.append(NOTE_UNTIMED.format(count=count, error=error))
                self._clock = None

    def _start_gpu_timing(self, cuda) -> None:
        if not self.want_gpu or not cuda.is_available():
            why = self.no_gpu_reason if not self.want_gpu else "numba.cuda sees no GPU"
            self._launch_notes.append(NOTE_NO_GPU_TIMES.format(why=why))
            return
        try:
            self._clock = NumbaEventClock(cuda)
        except Exception as error:  # noqa: BLE001  (a broken context: the slices still come)
            why = f"numba's CUDA events failed: {type(error).__name__}: {error}"
            self._launch_notes.append(NOTE_NO_GPU_TIMES.format(why=why))
            return
        self.device = self._clock.device
        torch = sys.modules.get("torch")
        if torch is not None and _legacy_profiler_on(torch):
            self.torch_timing = TorchLaunchTiming(torch, self.device, _per_thread_default_stream())

    # -- the launch paths (hot: keep them short) ------------------------------------------------

    def _launch_wrapper(self, original):
        """Real mode: each launch a native range where the native recorder records (on a GPU
        session with its own event pair); else, on a GPU, timed by torch's record_function or
        numba's events."""
        launches, local, signature_ids = self._launch_fields, self._local, self._signature_ids
        pair = self._clock.pool.pair if self._clock else None
        torch_timing = self.torch_timing
        torch_covers = torch_timing.covers_this_thread if torch_timing else None
        ranges = NativeRanges(self._native, NAME_PREFIX) if self._native is not None else None
        begin, end = (ranges.begin, ranges.end) if ranges is not None else (None, None)

        def __call__(launch_config, *args):  # noqa: N807  (it replaces numba's __call__)
            caller = sys._getframe(1)
            stream = launch_config.stream
            handle = stream_handle(stream)
            dispatcher = launch_config.dispatcher
            qualname = dispatcher.py_func.__qualname__
            start_ns = time_ns()
            if begin is not None:
                on_stream, recorded = None, begin(qualname, handle)
                events = NATIVE_TIMED if recorded else None
            else:
                on_stream = torch_timing.stream_context(handle) if torch_covers and \
                    torch_covers() else None
                events = TORCH_TIMED if on_stream is not None else pair() if pair else None
                recorded = None
            local.launch = (qualname, events, stream)
            error = None
            try:
                if on_stream is not None:
                    with on_stream, torch_timing.record_function(NAME_PREFIX + qualname):
                        return original(launch_config, *args)
                if type(events) is tuple and not _record(events, 0, stream):
                    events = _RECORD_FAILED
                return original(launch_config, *args)
            except BaseException as raised:
                error = type(raised).__name__
                raise
            finally:
                if recorded is not None:
                    end()
                if type(events) is tuple and not _record(events, 1, stream):
                    events = _RECORD_FAILED
                end_ns = time_ns()
                local.launch = None
                try:
                    tid = local.tid
                except AttributeError:  # the thread's first launch: get_native_id is a syscall
                    tid = local.tid = threading.get_native_id()
                signature = tuple(map(raw_argument, args))
                launches.extend((
                    tid, start_ns, end_ns, qualname,
                    launch_config.griddim, launch_config.blockdim, handle,
                    launch_config.sharedmem,
                    signature_ids.setdefault(signature, len(signature_ids)),
                    caller.f_code, caller.f_lasti, events, error, dispatcher))

        return __call__

    def _simulator_wrapper(self, original, simulator_kernel):
        launches, signature_ids = self._launch_fields, self._signature_ids
        ranges = NativeRanges(self._native, NAME_PREFIX) if self._native is not None else None

        def __call__(kernel, *args):  # noqa: N807  (it replaces FakeCUDAKernel.__call__)
            if kernel._device or simulator_kernel._kernel_context is not None:
                return original(kernel, *args)  # a device function, or a call inside a kernel
            caller = sys._getframe(1)
            start_ns = time_ns()
            recorded = ranges.begin(kernel.fn.__qualname__, 0) if ranges else None
            error = None
            try:
                return original(kernel, *args)
            except BaseException as raised:
                error = type(raised).__name__
                raise
            finally:
                if recorded is not None:
                    ranges.end()
                end_ns = time_ns()
                signature = tuple(map(raw_argument, args))
                launches.extend((
                    threading.get_native_id(), start_ns, end_ns, kernel.fn.__qualname__,
                    kernel.grid_dim, kernel.block_dim, int(kernel.stream or 0),
                    kernel.dynshared_size, signature_ids.setdefault(signature, len(signature_ids)),
                    caller.f_code, caller.f_lasti, NATIVE_TIMED if recorded else None, error,
                    kernel.fn))

        return __call__

    def _listen_for_compiles(self) -> None:
        recorder, in_launches_only = self, self._lock_event == "numba:compiler_lock"

        class CompileListener(self._events.Listener):
            # numba-cuda's compiler lock is reentrant and reports every acquisition: only the
            # outermost one on a thread is the compilation.
            def on_start(self, _event):
                local = recorder._local
                depth = getattr(local, "compile_depth", 0)
                local.compile_depth = depth + 1
                if depth == 0:
                    local.compile_start_ns = time_ns()

            def on_end(self, _event):
                local = recorder._local
                depth = getattr(local, "compile_depth", 0)
                if depth == 0:  # the lock was taken before the profile started listening
                    return
                local.compile_depth = depth - 1
                if depth > 1:
                    return
                launch = getattr(local, "launch", None)
                if launch is not None and type(launch[1]) is tuple:
                    _record(launch[1], 0, launch[2])  # the kernel starts after its compilation
                if launch is None and in_launches_only:
                    return  # numba's own lock is also every @njit compilation's
                qualname = launch[0] if launch is not None else "(not launched)"
                recorder.compiles.append((threading.get_native_id(), local.compile_start_ns,
                                          time_ns(), qualname))

        self._listener = CompileListener()
        self._events.register(self._lock_event, self._listener)

    # -- into the Trace ---------------------------------------------------------------------------

    def add_to(self, trace: Trace, known_names: dict | None = None) -> Trace:
        """``trace`` (the one the profile just built: its meta is replaced) with a CPU event per
        launch and compilation, a GPU interval per timed launch, and this recorder's notes. A
        launch timed by torch's profiler is its record_function's op, which gets the launch's
        args and stream."""
        meta = dict(trace.meta)
        meta["notes"] = list(meta.get("notes", []))
        if not self._launch_fields and not self.compiles:
            meta["notes"] += self.notes
            trace.meta = meta
            return trace
        rows = NewRows(trace, meta.get("pid"), known_names or {}, self.device)
        base = int(meta.get("base_time_ns", 0))
        launches = self.launches
        timed = {index: (launch[0], NAME_PREFIX + launch[3], launch[1] - base, launch[2] - base)
                 for index, launch in enumerate(launches) if launch[11] in RECORDED_BY}
        op_of = record_function_ops(trace, timed)
        op_rows = [op_of.get(index, -1) for index in range(len(launches))]
        compile_ends = _compile_ends(self.compiles)
        op_intervals = event_intervals_of(trace, {row for row in op_rows if row >= 0})
        numba_timed = self._numba_intervals(launches, base)
        unmatched, own_rows = {}, []
        for index, (launch, op_row) in enumerate(zip(launches, op_rows)):
            if launch[11] in RECORDED_BY and op_row < 0:
                unmatched[launch[11]] = unmatched.get(launch[11], 0) + 1
            own = self._add_launch(rows, launch, base, op_row, compile_ends, op_intervals,
                                   numba_timed.get(index))
            if own is not None:
                own_rows.append(own)
        if not self.simulator:
            unpaired = link_cupti_kernels(rows, own_rows)
            if unpaired:
                meta["notes"].append(NOTE_UNPAIRED.format(count=unpaired))
        for tid, start_ns, end_ns, qualname in self.compiles:
            rows.cpu(tid, start_ns - base, end_ns - base, COMPILE_PREFIX + qualname,
                     {"what": "numba.cuda JIT compilation (first launch of a signature)"})
        meta["notes"] += self.notes + self._launch_notes
        if self.simulator and launches:  # the analysis says so, and finds no wait on the GPU
            meta["simulated"] = "numba.cuda simulator (NUMBA_ENABLE_CUDASIM=1)"
        if self._untimed:
            meta["notes"].append(NOTE_UNTIMED.format(count=self._untimed,
                                                     error=self._untimed_error))
        for recorded_by, count in unmatched.items():
            meta["notes"].append(NOTE_UNMATCHED.format(count=count,
                                                       recorder=RECORDED_BY[recorded_by]))
        return rows.build(meta)

    def _numba_intervals(self, launches, base_ns: int) -> dict:
        """launch index -> its (GPU start, GPU end) from ``base_ns``, or what numba raised, for
        the launches timed by numba's events. A launch's start event is recorded after its CPU
        start, so its GPU start cannot come before it: where one does, the anchor's event was
        late by at least that much (its submission latency; 1.9 us on an H200) and every
        interval is shifted later by the largest such lead, as gpu_clock.py does for torch's."""
        if self.simulator or self._clock is None:
            return {}
        found, lead_ns = {}, 0
        for index, launch in enumerate(launches):
            if type(launch[11]) is not tuple:
                continue
            try:
                found[index] = interval = self._clock.interval(launch[11], base_ns)
            except Exception as failure:  # noqa: BLE001  (not recorded, another context's)
                found[index] = failure
                continue
            lead_ns = max(lead_ns, launch[1] - base_ns - interval[0])
        return {index: value if isinstance(value, Exception) else
                (value[0] + lead_ns, value[1] + lead_ns) for index, value in found.items()}

    def _add_launch(self, rows: NewRows, launch, base_ns: int, op_row: int, compile_ends: dict,
                    op_intervals: dict, numba_interval=None):
        """Into ``rows`` (``op_intervals``: op row -> its CUDA-event GPU rows; ``numba_interval``:
        the launch's from :meth:`_numba_intervals`). Returns (slice name, row, start_ns, args)
        where the launch got a slice of its own (not torch's op)."""
        (tid, start_ns, end_ns, qualname, grid, block, handle, sharedmem, arg_sigs,
         code, instruction, events, error, dispatcher) = launch
        name = NAME_PREFIX + qualname
        stream = self._stream_number(handle)
        # grid and block as Kineto stores a kernel's: integer lists [x, y, z]
        args = {"grid": list(dim3(grid)), "block": list(dim3(block)),
                "stream": "default" if handle == 0 else hex(handle),
                "shared memory (bytes)": int(sharedmem or 0),
                "arguments": ", ".join(map(argument_signature, arg_sigs)),
                "launched at": source_location(code.co_filename, line_of(code, instruction))}
        function = getattr(dispatcher, "py_func", dispatcher)  # the simulator keeps the function
        args["function"] = f"{function.__module__}.{function.__qualname__}"  # for numba_names
        if error:
            args["raised"] = error
        names = entry_names(dispatcher)
        if names:  # what a CUPTI kernel record is named: maps it back to this launch
            args["entry names"] = names
        # the kernel starts after a compilation inside its launch (its CPU time: a lower bound)
        compiled_ns = max((end - base_ns for end in compile_ends.get(tid, ())
                           if start_ns <= end <= end_ns), default=None)
        # its GPU interval says how it was launched too, as a CUPTI kernel's args do
        config = {key: args[key] for key in LAUNCH_CONFIG}
        native = events == NATIVE_TIMED
        if op_row >= 0:  # torch's profiler timed it (a record_function), or the native recorder
            # recorded it as its range: that op is the launch's slice
            rows.annotate(op_row, args)
            for gpu_row in op_intervals.get(op_row, ()):
                gpu_start = int(rows.trace.gpu_start_ns[gpu_row])
                clipped = None if compiled_ns is None else min(max(gpu_start, compiled_ns),
                                                               int(rows.trace.gpu_end_ns[gpu_row]))
                # the native records know the stream (torch's id, shared with its ops)
                rows.move_gpu(gpu_row, None if native else stream,
                              {**config, "stream handle": hex(handle)}, clipped)
            if not native:  # Kineto links CUPTI's kernel to torch's op by correlation
                return None
            rows.set_category(op_row)
            row, cpu_start_ns = op_row, int(rows.trace.start_ns[op_row])
            cpu_end_ns = int(rows.trace.end_ns[op_row])
        else:
            row = rows.cpu(tid, start_ns - base_ns, end_ns - base_ns, name, args)
            cpu_start_ns, cpu_end_ns = start_ns - base_ns, end_ns - base_ns
        own = (name, row, cpu_start_ns, args)
        if self.simulator:
            rows.gpu(cpu_start_ns, cpu_end_ns, name, stream, row,
                     {**config, "simulated": "the simulator's run on the CPU"})
        elif events == _RECORD_FAILED:
            self._untimed += 1
            self._untimed_error = _RECORD_FAILED
        elif isinstance(numba_interval, Exception):
            self._untimed += 1
            self._untimed_error = numba_interval
        elif numba_interval is not None:
            gpu_start_ns, gpu_end_ns = numba_interval
            rows.gpu(gpu_start_ns, gpu_end_ns, name, stream, row,
                     {**config, "stream handle": hex(handle), "timed by": "numba's CUDA events"})
        return own

    def _stream_number(self, handle: int) -> int:
        """0 for the default stream, then 1, 2, ... for streams in order of first launch."""
        if handle == 0:
            return 0
        return self._stream_numbers.setdefault(handle, len(self._stream_numbers) + 1)


# what a numba launch's GPU interval repeats of its slice's args
LAUNCH_CONFIG = ("grid", "block", "stream", "shared memory (bytes)", "arguments", "launched at")


def _legacy_profiler_on(torch) -> bool:
    """Whether torch's legacy (CUDA-event) profiler records on this thread now."""
    try:
        profiler_type = torch._C._autograd._profiler_type()
        return profiler_type == torch._C._profiler.ActiveProfilerType.LEGACY
    except AttributeError:  # a torch without the legacy profiler
        return False


def _compile_ends(compiles) -> dict:
    ends: dict = {}
    for tid, _start_ns, end_ns, _qualname in compiles:
        ends.setdefault(tid, []).append(end_ns)
    return ends
