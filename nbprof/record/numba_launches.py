"""numba.cuda kernel launches inside a profile: a CPU slice ``numba::<qualname>`` per launch.

While a profile records, numba's launch entry point is swapped for a wrapper; ``stop()`` puts
the very same object back (``_LaunchConfiguration.__call__`` in real mode,
``FakeCUDAKernel.__call__`` under the simulator), so launches outside a profile run numba's own
code and pay nothing. torch's profiler only records its own ops, so each launch is recorded here:
two ``time.time_ns()`` reads (the wall clock Kineto's records use, so numba slices nest among
torch ops), the launch configuration, the argument shapes/dtypes and the caller's file and line,
in a side list that :meth:`NumbaLaunchRecorder.add_to` turns into events of the finished Trace.

On a GPU every launch also records a CUDA event pair on the launch's own stream, read at the end
and put on the CPU clock through this recorder's anchor (an event recorded on an idle device
right after a CPU time read, as torch's legacy path does), so launches from any thread get a GPU
interval on the stream they ran on. A launch that compiles first re-records its start event when
the compilation ends, so the GPU interval holds the kernel, not the JIT; the compilation itself
becomes a child slice ``numba::compile <qualname>`` (numba-cuda's ``numba-cuda:compiler_lock``
event: the installed 0.30.4 emits no ``numba-cuda:compile`` for CUDA kernels, only that lock
and ``numba-cuda:run_pass``).

Under the simulator (``NUMBA_ENABLE_CUDASIM=1``) a kernel runs on the CPU inside the launch: its
simulated GPU interval is the launch's CPU interval, and the notes say so.
"""

from __future__ import annotations

import re
import sys
import threading
from time import time_ns

import numpy as np

from ..events import KIND_OP, Thread, Trace

NOTE_NO_NUMBA = ("numba.cuda kernel launches were not recorded: numba.cuda cannot be imported "
                 "({error}). Install numba-cuda to see numba kernels on the timeline.")
NOTE_SIMULATED = ("numba.cuda simulator (NUMBA_ENABLE_CUDASIM=1): GPU timings are simulated: a "
                  "numba kernel's GPU interval is the simulator's run of it on the CPU.")
NOTE_NO_GPU_TIMES = ("numba kernels: CPU slices only ({why}), no GPU intervals.")
NOTE_UNTIMED = "{count} numba launches could not be timed on the GPU ({error}): no GPU interval."

NAME_PREFIX = "numba::"
COMPILE_PREFIX = "numba::compile "
CATEGORY = "numba"
LAUNCH_FIELDS = 14
_EVENT_CHUNK = 128  # CUDA events are created in chunks: creating one costs more than a launch
_IPYTHON_INPUT = re.compile(r"^<ipython-input-(\d+)-")


def _raw_argument(value):
    """(shape, dtype) of an array argument (numpy, numba device arrays, torch tensors through
    __cuda_array_interface__), else its type: read per launch, formatted only at the end
    (``str(dtype)`` alone costs ~10 us on numpy 2)."""
    try:
        return value.shape, value.dtype
    except AttributeError:
        return type(value)


def argument_signature(raw) -> str:
    """``float32[1024]`` / ``float32[64, 64]`` for an array, ``float32`` for a numpy scalar,
    the type's name otherwise."""
    if isinstance(raw, type):
        return raw.__name__
    shape, dtype = raw
    dtype_name = str(dtype).removeprefix("torch.")
    if not len(shape):  # a numpy scalar (np.float32(2.0)) or a 0-d array
        return dtype_name
    return f"{dtype_name}[{', '.join(str(int(size)) for size in shape)}]"


def _numba_cuda_config_and_events():
    """numba-cuda's config and event module and the event its compiler lock sends; the CUDA
    target built into numba before numba-cuda (no ``numba.cuda.core``) uses numba's own."""
    try:
        from numba.cuda.core import config, event
        return config, event, "numba-cuda:compiler_lock"
    except ImportError:
        from numba.core import config, event
        return config, event, "numba:compiler_lock"


def _stream_handle(stream) -> int:
    """A launch's stream as an integer handle (0: the default stream). numba-cuda hands a
    cuda.core Stream; the built-in target a numba Stream (ctypes handle) or 0."""
    if not stream:
        return 0
    handle = getattr(stream, "handle", 0)
    return int(getattr(handle, "value", handle) or 0)


def _dim3(dims) -> tuple:
    return tuple(int(size) for size in dims)


class _EventPool:
    """Timing CUDA events handed out in pairs; all are read after the profile."""

    def __init__(self, cuda):
        self._cuda = cuda
        self._free: list = []

    def fill(self) -> None:
        self._free = [(self._cuda.event(timing=True), self._cuda.event(timing=True))
                      for _ in range(_EVENT_CHUNK)]

    def pair(self):
        if not self._free:
            self.fill()
        return self._free.pop()


class NumbaLaunchRecorder:
    """``start()`` swaps numba's launch path for a recording one, ``stop()`` restores it (never
    raises for the restore), ``add_to(trace)`` returns the Trace with the launches in it."""

    def __init__(self, *, gpu: bool, no_gpu_reason: str = "no GPU"):
        self.want_gpu = gpu
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
        self._gpu = None  # (cuda module, event pool, anchor event, anchor CPU ns) when timing
        self._stream_numbers: dict[int, int] = {}
        self.device = 0  # the device numba's context is on (the anchor's)
        self._untimed = 0
        self._untimed_error = None

    @property
    def launches(self) -> list:
        """One tuple per launch: (tid, start_ns, end_ns, qualname, grid, block, stream handle,
        shared memory, argument signature, the caller's code object and its f_lasti, CUDA
        event pair or None, error, numba's dispatcher or None under the simulator)."""
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
        except ImportError as error:
            self.notes.append(NOTE_NO_NUMBA.format(error=error))
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
        if self._gpu is not None and self._launch_fields:
            try:
                self._gpu[0].synchronize()  # every event must have completed to be read
            except Exception as error:  # noqa: BLE001  (a broken context: say so, lose nothing)
                count = len(self._launch_fields) // LAUNCH_FIELDS
                self.notes.append(NOTE_UNTIMED.format(count=count, error=error))
                self._gpu = None

    def _start_gpu_timing(self, cuda) -> None:
        if not self.want_gpu or not cuda.is_available():
            why = self.no_gpu_reason if not self.want_gpu else "numba.cuda sees no GPU"
            self._launch_notes.append(NOTE_NO_GPU_TIMES.format(why=why))
            return
        pool = _EventPool(cuda)
        pool.fill()  # the first chunk now, not in the first launch
        anchor = cuda.event(timing=True)
        # An idle device completes the anchor as soon as it is submitted: its GPU time is the
        # CPU time read just before, up to the submission latency.
        cuda.synchronize()
        anchor_ns = time_ns()
        anchor.record()
        self._gpu = (cuda, pool, anchor, anchor_ns)
        self.device = int(cuda.get_current_device().id)

    # -- the launch paths (hot: keep them short) ------------------------------------------------

    def _launch_wrapper(self, original):
        launches, local, gpu = self._launch_fields, self._local, self._gpu
        signature_ids = self._signature_ids
        pair = gpu[1].pair if gpu else None

        def __call__(launch_config, *args):  # noqa: N807  (it replaces numba's __call__)
            caller = sys._getframe(1)
            stream = launch_config.stream
            dispatcher = launch_config.dispatcher
            qualname = dispatcher.py_func.__qualname__
            events = pair() if pair else None
            local.launch = (qualname, events, stream)
            start_ns = time_ns()
            if events:
                events[0].record(stream)
            error = None
            try:
                return original(launch_config, *args)
            except BaseException as raised:
                error = type(raised).__name__
                raise
            finally:
                if events:
                    events[1].record(stream)
                end_ns = time_ns()
                local.launch = None
                try:
                    tid = local.tid
                except AttributeError:  # the thread's first launch: get_native_id is a syscall
                    tid = local.tid = threading.get_native_id()
                signature = tuple(map(_raw_argument, args))
                launches.extend((
                    tid, start_ns, end_ns, qualname,
                    launch_config.griddim, launch_config.blockdim, _stream_handle(stream),
                    launch_config.sharedmem,
                    signature_ids.setdefault(signature, len(signature_ids)),
                    caller.f_code, caller.f_lasti, events, error, dispatcher))

        return __call__

    def _simulator_wrapper(self, original, simulator_kernel):
        launches, signature_ids = self._launch_fields, self._signature_ids

        def __call__(kernel, *args):  # noqa: N807  (it replaces FakeCUDAKernel.__call__)
            if kernel._device or simulator_kernel._kernel_context is not None:
                return original(kernel, *args)  # a device function, or a call inside a kernel
            caller = sys._getframe(1)
            start_ns = time_ns()
            error = None
            try:
                return original(kernel, *args)
            except BaseException as raised:
                error = type(raised).__name__
                raise
            finally:
                end_ns = time_ns()
                signature = tuple(map(_raw_argument, args))
                launches.extend((
                    threading.get_native_id(), start_ns, end_ns, kernel.fn.__qualname__,
                    kernel.grid_dim, kernel.block_dim, int(kernel.stream or 0),
                    kernel.dynshared_size, signature_ids.setdefault(signature, len(signature_ids)),
                    caller.f_code, caller.f_lasti, None, error, None))

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
                if launch is not None and launch[1]:
                    launch[1][0].record(launch[2])  # the kernel starts after its compilation
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
        launch and compilation, a GPU interval per timed launch, and this recorder's notes."""
        meta = dict(trace.meta)
        meta["notes"] = list(meta.get("notes", []))
        if not self._launch_fields and not self.compiles:
            meta["notes"] += self.notes
            trace.meta = meta
            return trace
        rows = _NewRows(trace, meta.get("pid"), known_names or {}, self.device)
        base = int(meta.get("base_time_ns", 0))
        for launch in self.launches:
            self._add_launch(rows, launch, base)
        for tid, start_ns, end_ns, qualname in self.compiles:
            rows.cpu(tid, start_ns - base, end_ns - base, COMPILE_PREFIX + qualname,
                     {"what": "numba.cuda JIT compilation (first launch of a signature)"})
        meta["notes"] += self.notes + self._launch_notes
        if self._untimed:
            meta["notes"].append(NOTE_UNTIMED.format(count=self._untimed,
                                                     error=self._untimed_error))
        return rows.build(meta)

    def _add_launch(self, rows: "_NewRows", launch, base_ns: int) -> None:
        (tid, start_ns, end_ns, qualname, grid, block, stream_handle, sharedmem, arg_sigs,
         code, instruction, events, error, dispatcher) = launch
        name = NAME_PREFIX + qualname
        stream = self._stream_number(stream_handle)
        args = {"grid": str(_dim3(grid)), "block": str(_dim3(block)),
                "stream": "default" if stream_handle == 0 else hex(stream_handle),
                "shared memory (bytes)": int(sharedmem or 0),
                "arguments": ", ".join(map(argument_signature, arg_sigs)),
                "launched at": source_location(code.co_filename, line_of(code, instruction))}
        if error:
            args["raised"] = error
        entry_names = _entry_names(dispatcher)
        if entry_names:  # what a CUPTI kernel record is named: maps it back to this launch
            args["entry names"] = entry_names
        row = rows.cpu(tid, start_ns - base_ns, end_ns - base_ns, name, args)
        if self.simulator:
            rows.gpu(start_ns - base_ns, end_ns - base_ns, name, stream, row,
                     {"simulated": "the simulator's run on the CPU"})
        elif events is not None and self._gpu is not None:
            gpu_start_ns = self._gpu_start_ns(events[0], base_ns)
            if gpu_start_ns is not None:
                gpu_ns = self._elapsed_ns(events[0], events[1])
                if gpu_ns is not None:
                    rows.gpu(gpu_start_ns, gpu_start_ns + max(gpu_ns, 0), name, stream, row,
                             {"stream handle": hex(stream_handle)})

    def _gpu_start_ns(self, start_event, base_ns):
        _, _, anchor, anchor_ns = self._gpu
        elapsed = self._elapsed_ns(anchor, start_event)
        return None if elapsed is None else anchor_ns - base_ns + elapsed

    def _elapsed_ns(self, first, second):
        try:
            return round(self._gpu[0].event_elapsed_time(first, second) * 1_000_000)
        except Exception as error:  # noqa: BLE001  (not recorded, another device's context)
            self._untimed += 1
            self._untimed_error = error
            return None

    def _stream_number(self, handle: int) -> int:
        """0 for the default stream, then 1, 2, ... for streams in order of first launch."""
        if handle == 0:
            return 0
        return self._stream_numbers.setdefault(handle, len(self._stream_numbers) + 1)


def _entry_names(dispatcher) -> str:
    """The mangled entry names of a real-mode kernel's compiled signatures (none in the
    simulator, nor when compilation failed)."""
    overloads = getattr(dispatcher, "overloads", None) or {}
    return ", ".join(sorted({str(getattr(kernel, "entry_name", "")) for kernel in
                             overloads.values()} - {""}))


def line_of(code, instruction: int):
    """The source line of the bytecode offset ``instruction`` (a frame's f_lasti) in ``code``:
    read per launch, f_lineno costs ~1 us (it decodes the line table); f_lasti does not."""
    for start, end, line in code.co_lines():
        if start <= instruction < end:
            return line
    return code.co_firstlineno


def source_location(filename: str, lineno: int) -> str:
    """``file:line``, or ``cell [n], line k`` for code that IPython compiled from a cell."""
    number = _cell_number(filename)
    return f"cell [{number}], line {lineno}" if number is not None else f"{filename}:{lineno}"


def _cell_number(filename: str):
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None:  # IPython's and ipykernel's compilers map each cell's file to its number
        number = getattr(shell.compile, "_filename_map", {}).get(filename)
        if number is not None:
            return number
    match = _IPYTHON_INPUT.match(filename)
    return int(match.group(1)) if match else None


class _NewRows:
    """A Trace's columns with rows appended, rebuilt (sorted and nested) once at the end."""

    def __init__(self, trace: Trace, pid, known_names: dict, device: int):
        self.trace = trace
        self.device = device
        self.pid = pid if pid is not None else (trace.threads[0].pid if trace.threads else 0)
        self.known_names = known_names
        self.names = list(trace.names)
        self.name_ids = {name: index for index, name in enumerate(self.names)}
        self.threads = list(trace.threads)
        self.lane_of_tid = {thread.tid: lane for lane, thread in enumerate(self.threads)}
        self.categories = list(trace.categories)
        if CATEGORY not in self.categories:
            self.categories.append(CATEGORY)
        self.category = self.categories.index(CATEGORY)
        self.cpu_rows: list = []  # (start_ns, end_ns, lane, name_id)
        self.gpu_rows: list = []  # (start_ns, end_ns, name_id, stream, launch row)
        self.event_args = dict(trace.event_args)
        self.gpu_args = dict(trace.gpu_args)

    def _name_id(self, name: str) -> int:
        if name not in self.name_ids:
            self.name_ids[name] = len(self.names)
            self.names.append(name)
        return self.name_ids[name]

    def _lane(self, tid: int) -> int:
        lane = self.lane_of_tid.get(tid)
        if lane is None:
            from .threads import name_threads

            name = name_threads([tid], self.known_names)[tid]
            lane = self.lane_of_tid[tid] = len(self.threads)
            self.threads.append(Thread(self.pid, tid, name))
        return lane

    def cpu(self, tid, start_ns, end_ns, name, args) -> int:
        row = len(self.trace) + len(self.cpu_rows)
        self.cpu_rows.append((start_ns, end_ns, self._lane(tid), self._name_id(name)))
        self.event_args[row] = args
        return row

    def gpu(self, start_ns, end_ns, name, stream, launch_row, args) -> None:
        self.gpu_args[len(self.trace.gpu_start_ns) + len(self.gpu_rows)] = args
        self.gpu_rows.append((start_ns, end_ns, self._name_id(name), stream, launch_row))

    def build(self, meta) -> Trace:
        trace = self.trace
        cpu = np.array(self.cpu_rows, np.int64).reshape(-1, 4)
        gpu = np.array(self.gpu_rows, np.int64).reshape(-1, 5)
        return Trace.build(
            start_ns=np.concatenate([trace.start_ns, cpu[:, 0]]),
            end_ns=np.concatenate([trace.end_ns, cpu[:, 1]]),
            thread=np.concatenate([trace.thread, cpu[:, 2]]),
            name_id=np.concatenate([trace.name_id, cpu[:, 3]]), names=self.names,
            threads=self.threads,
            category=np.concatenate([trace.category, np.full(len(cpu), self.category)]),
            categories=self.categories,
            gpu_start_ns=np.concatenate([trace.gpu_start_ns, gpu[:, 0]]),
            gpu_end_ns=np.concatenate([trace.gpu_end_ns, gpu[:, 1]]),
            gpu_name_id=np.concatenate([trace.gpu_name_id, gpu[:, 2]]),
            gpu_device=np.concatenate([trace.gpu_device, np.full(len(gpu), self.device, np.int16)]),
            gpu_stream=np.concatenate([trace.gpu_stream, gpu[:, 3]]),
            gpu_launch=np.concatenate([trace.gpu_launch, gpu[:, 4]]),
            gpu_kind=np.concatenate([trace.gpu_kind, np.full(len(gpu), KIND_OP)]),
            meta=meta, event_args=self.event_args, gpu_args=self.gpu_args,
            shapes=trace.shapes, stacks=trace.stacks)

