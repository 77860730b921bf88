"""What a recorded numba launch shows: its argument signature, its source location, and the rows
it adds to a finished Trace (:class:`NewRows`). Read only after the profile, never per launch."""

from __future__ import annotations

import re
import sys

import numpy as np

from ..model import KIND_KERNEL, KIND_OP, Thread, Trace
from .numba_names import known_numba_launches, pair_kernels_with_launches

CATEGORY = "numba"
_IPYTHON_INPUT = re.compile(r"^<ipython-input-(\d+)-")


def raw_argument(value):
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


def dim3(dims) -> tuple:
    return tuple(int(size) for size in dims)


def entry_names(dispatcher) -> str:
    """The mangled entry names of a real-mode kernel's compiled signatures (none in the
    simulator, nor when compilation failed): what CUPTI names the kernel."""
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


class NewRows:
    """A Trace's columns with rows appended (and args or streams of its rows changed), rebuilt
    (sorted and nested) once at the end."""

    def __init__(self, trace: Trace, pid, known_names: dict, device: int,
                 category: str = CATEGORY):
        self.trace = trace
        self.device = device
        self.pid = pid if pid is not None else (trace.threads[0].pid if trace.threads else 0)
        self.known_names = known_names
        self.names = list(trace.names)
        self.name_ids = {name: index for index, name in enumerate(self.names)}
        self.threads = list(trace.threads)
        self.lane_of_tid = {thread.tid: lane for lane, thread in enumerate(self.threads)}
        self.categories = list(trace.categories)
        if category not in self.categories:
            self.categories.append(category)
        self.category = self.categories.index(category)  # of the CPU rows added here
        self.category_column = trace.category  # copied on the first change (set_category)
        self.cpu_rows: list = []  # (start_ns, end_ns, lane, name_id)
        self.gpu_rows: list = []  # (start_ns, end_ns, name_id, stream, launch row)
        self.event_args = dict(trace.event_args)
        self.gpu_args = dict(trace.gpu_args)
        self.gpu_stream = trace.gpu_stream.copy()
        self.gpu_start_ns = trace.gpu_start_ns.copy()
        self.gpu_launch = trace.gpu_launch.copy()

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

    def annotate(self, row: int, args: dict) -> None:
        """The existing CPU event ``row`` gets ``args`` (a torch-timed launch's record_function)."""
        self.event_args[row] = {**self.event_args.get(row, {}), **args}

    def set_category(self, row: int) -> None:
        """The existing CPU event ``row`` is this category's (a launch the native recorder
        recorded as a range of its thread)."""
        if self.category_column is self.trace.category:
            self.category_column = self.trace.category.copy()
        self.category_column[row] = self.category

    def move_gpu(self, gpu_row: int, stream: int | None, args: dict, start_ns: int | None = None):
        """The existing GPU interval ``gpu_row`` is on ``stream`` (the legacy records do not say;
        None: it stays where it is) and, where given, starts at ``start_ns``."""
        if stream is not None:
            self.gpu_stream[gpu_row] = stream
        if start_ns is not None:
            self.gpu_start_ns[gpu_row] = start_ns
        self.gpu_args[gpu_row] = {**self.gpu_args.get(gpu_row, {}), **args}

    def link_gpu(self, gpu_row: int, launch_row: int) -> None:
        """The existing GPU interval ``gpu_row`` (a CUPTI kernel no op launched) was launched
        by ``launch_row`` (one of the CPU rows added here)."""
        self.gpu_launch[gpu_row] = launch_row

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
            category=np.concatenate([self.category_column, np.full(len(cpu), self.category)]),
            categories=self.categories,
            gpu_start_ns=np.concatenate([self.gpu_start_ns, gpu[:, 0]]),
            gpu_end_ns=np.concatenate([trace.gpu_end_ns, gpu[:, 1]]),
            gpu_name_id=np.concatenate([trace.gpu_name_id, gpu[:, 2]]),
            gpu_device=np.concatenate([trace.gpu_device, np.full(len(gpu), self.device, np.int16)]),
            gpu_stream=np.concatenate([self.gpu_stream, gpu[:, 3]]),
            gpu_launch=np.concatenate([self.gpu_launch, gpu[:, 4]]),
            gpu_kind=np.concatenate([trace.gpu_kind, np.full(len(gpu), KIND_OP)]),
            meta=meta, event_args=self.event_args, gpu_args=self.gpu_args,
            shapes=trace.shapes, stacks=trace.stacks)


def event_intervals_of(trace: Trace, op_rows: set) -> dict:
    """op row -> its GPU rows of kind op (the CUDA-event interval; not CUPTI's kernels)."""
    found: dict = {}
    if op_rows:
        candidates = np.flatnonzero(trace.gpu_kind == KIND_OP)
        for gpu_row, launch in zip(candidates.tolist(), trace.gpu_launch[candidates].tolist()):
            if launch in op_rows:
                found.setdefault(launch, []).append(gpu_row)
    return found


def link_cupti_kernels(rows: NewRows, own_rows: list) -> int:
    """CUPTI's kernels of numba functions, linked to the numba launches (with their own
    slices) that ran them, through numba's mangled entry names; ``own_rows``: (slice name, row,
    start_ns, args) of those launches. Returns how many such kernels stayed unpaired. Every
    kernel is a candidate, not only unlinked ones: the converter links a kernel that no op
    launched to the slice around its runtime call, which for a numba launch is the user's range
    around it (or a record_function numba's path opens), never better than numba's own slice."""
    trace = rows.trace
    unlinked = np.flatnonzero(trace.gpu_kind == KIND_KERNEL)
    if not own_rows or not len(unlinked):
        return 0
    known = known_numba_launches((name, args) for name, _, _, args in own_rows)
    paired, unpaired = pair_kernels_with_launches(
        [trace.names[trace.gpu_name_id[row]] for row in unlinked.tolist()],
        trace.gpu_start_ns[unlinked], [own[:3] for own in own_rows], known)
    for index, launch_row in paired.items():
        rows.link_gpu(int(unlinked[index]), launch_row)
    return unpaired
