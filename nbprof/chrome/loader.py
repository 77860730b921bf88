"""Chrome trace JSON -> Trace: nbprof's own exports and torch.profiler / Kineto traces.

What becomes what:
- Every X slice on a CPU process becomes an event (its ``cat`` goes into the categories table:
  cpu_op, user_annotation, python_function, cuda_runtime, cuda_driver, Trace, ...), on the
  thread named by the file's ``thread_name`` M events. ``"Input Dims"`` in args go to
  ``trace.shapes``, ``"Call stack"`` to ``trace.stacks``; the other args stay in ``event_args``.
- Every X slice on a GPU (category kernel, gpu_memcpy, gpu_memset, cuda_sync, ..., or any slice
  on a process labelled "GPU n") becomes a GPU interval with its kind; device and stream come
  from its args (else the pid and tid, as Kineto lays them out); all its args stay in
  ``gpu_args`` (grid, block, correlation, ...).

Which event a kernel's ``launch_id`` points to: the **op that launched it**, not the runtime call.
A kernel is first tied to its cudaLaunchKernel / cuLaunchKernel slice (by the ``correlation`` in
both slices' args, else by the ``ac2g`` / ``async_cpu_to_gpu`` flow's two ends, else by
``External id``), then climbs from that runtime slice to the innermost enclosing slice that is not
a runtime/driver call (the aten op, or a user annotation / Python function where no op encloses
it). That is what torch's own summaries do (``key_averages`` puts a kernel's CUDA time on
``aten::mm``, not on ``cudaLaunchKernel``) and what a user looking at an op wants in
``FunctionEvent.kernels``. The runtime call stays findable: its args keep the same
``correlation`` as the kernel's ``gpu_args``.

Times: ns from the trace's origin. Kineto files give µs floats, often since the epoch; the origin
is the whole µs at or before the first slice, subtracted before scaling so no precision is lost
beyond the file's own float (a float64 near 1.7e15 µs resolves 0.25 µs).
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import contains, methodcaller

import numpy as np

from .export import FORMAT_VERSION, GPU_KIND_CATEGORY, SHAPES_KEY, STACK_KEY
from .read import TraceFormatError, pick
from ..events import GPU_KINDS, NO_ID, KIND_OTHER, Trace
from ..nesting import nest

# Kineto's GPU-side categories (lower-cased; older files capitalise them) -> GPU kind.
GPU_CATEGORY_KIND = {
    "kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset",
    "memset": "memset", "cuda_sync": "sync", "gpu_user_annotation": "other",
    **{category: kind for kind, category in GPU_KIND_CATEGORY.items()},
}
RUNTIME_CATEGORIES = {"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver"}
FLOW_CATEGORIES = {"ac2g", "async_cpu_to_gpu"}


def nbprof_block(data) -> dict | None:
    """The "nbprof" block of one of nbprof's own exports, or None for any other file."""
    block = data.get("nbprof") if isinstance(data, dict) else None
    return block if isinstance(block, dict) and block.get("version") == FORMAT_VERSION else None


class Load:
    """What both formats share: splitting slices into CPU events and GPU intervals, and time."""

    def __init__(self, slices):
        self.slices = slices
        self.notes: list[str] = []

    # -- what each format says its own way (NbprofLoad, kineto.KinetoLoad) -------------
    def gpu_rows_mask(self) -> np.ndarray:
        """Which slices are GPU intervals (the rest are CPU events)."""
        raise NotImplementedError

    def origin_us(self) -> float:
        """The µs value that becomes time 0."""
        raise NotImplementedError

    def thread_table(self, distinct: list) -> tuple[list, list]:
        """For the distinct (pid, tid) pairs of the CPU slices: each one's thread index, and
        the threads table."""
        raise NotImplementedError

    def categories(self) -> list:
        """Categories that come first in the table, in this order."""
        return []

    def launches(self, cpu_rows, gpu_rows, cpu_args, gpu_args, flows) -> np.ndarray:
        """Per GPU row (in ``gpu_rows``' order), the launching event's index into ``cpu_rows``
        (the sorted CPU rows: the event ids), or NO_ID."""
        raise NotImplementedError

    def meta(self, base_ns: int) -> dict:
        raise NotImplementedError

    # -- the shared part --------------------------------------------------------------------
    def trace(self, flows: list, skipped: int) -> Trace:
        """The Trace of the file's X slices; ``flows`` are its s/f events, ``skipped`` how
        many other events (instant, counter, ...) it has."""
        s = self.slices
        is_gpu = self.gpu_rows_mask()
        origin_us = self.origin_us()
        start_ns = np.rint((s.ts - origin_us) * 1000.0).astype(np.int64)
        end_ns = start_ns + np.rint(s.dur * 1000.0).astype(np.int64)
        # Rows in the order a Trace keeps: CPU by start, the enclosing one first on ties (as
        # Trace.build sorts); GPU by start then end. Sorting here, before any per-row dict is
        # made, spares remapping those dicts afterwards.
        cpu_rows = np.flatnonzero(~is_gpu)
        cpu_rows = cpu_rows[np.lexsort((start_ns[cpu_rows] - end_ns[cpu_rows],
                                        start_ns[cpu_rows]))]
        gpu_rows = np.flatnonzero(is_gpu)
        gpu_rows = gpu_rows[np.lexsort((end_ns[gpu_rows], start_ns[gpu_rows]))]

        tid_codes, tid_table = first_seen_order(s.tid.codes[cpu_rows], s.tid.table)
        distinct, pair = distinct_pairs(s.pid.codes[cpu_rows], s.pid.table, tid_codes, tid_table)
        thread_of_pair, threads = self.thread_table(distinct)
        thread = np.array(thread_of_pair, np.int32)[pair] if distinct else pair
        categories, category = _category_column(self.categories(), s.cat.table,
                                                s.cat.codes[cpu_rows])
        cpu_args, gpu_args = pick(s.args, cpu_rows), pick(s.args, gpu_rows)
        launch = self.launches(cpu_rows, gpu_rows, cpu_args, gpu_args, flows)
        event_args, shapes, stacks = _split_args(cpu_args)
        if skipped:
            self.notes.append(f"{skipped} events other than X, M and flow events were skipped "
                              f"(instant events, counters, ...)")
        cpu_start, cpu_end = start_ns[cpu_rows], end_ns[cpu_rows]
        depth, parent, self_ns = nest(cpu_start, cpu_end, thread)
        trace = Trace(
            start_ns=cpu_start, end_ns=cpu_end, thread=thread, name_id=s.name.codes[cpu_rows],
            category=category, depth=depth, parent=parent, self_ns=self_ns,
            gpu_start_ns=start_ns[gpu_rows], gpu_end_ns=end_ns[gpu_rows],
            gpu_name_id=s.name.codes[gpu_rows], gpu_device=self.devices(gpu_rows, gpu_args),
            gpu_stream=self.streams(gpu_rows, gpu_args), gpu_launch=launch,
            gpu_kind=self.gpu_kinds(gpu_rows), names=s.name.table, threads=threads,
            categories=categories, meta=self.meta(round(origin_us * 1000)),
            event_args=event_args, shapes=shapes, stacks=stacks,
            gpu_args={row: args for row, args in enumerate(gpu_args) if args})
        return self.finish(trace)

    def finish(self, trace: Trace) -> Trace:
        return trace

    def gpu_kinds(self, gpu_rows) -> np.ndarray:
        kind_of_cat = np.array([GPU_KINDS.index(GPU_CATEGORY_KIND.get(str(c).lower(), "other"))
                                for c in self.slices.cat.table] or [KIND_OTHER], np.uint8)
        return kind_of_cat[self.slices.cat.codes[gpu_rows]]

    def devices(self, gpu_rows, gpu_args) -> np.ndarray:
        return _int_column(gpu_args, "device", self.slices.pid.values(gpu_rows))

    def streams(self, gpu_rows, gpu_args) -> np.ndarray:
        # Kineto's stream ids are unsigned 32-bit (4294967295 for "no stream"): they wrap into
        # the int32 column (-1, as the file's own tid says), the args keep the original.
        return _int_column(gpu_args, "stream", self.slices.tid.values(gpu_rows)).astype(np.int32)


class NbprofLoad(Load):
    """nbprof's own export: the "nbprof" block says which pid is the GPU's, the thread and
    category tables, the extra lanes, the launch ids and the meta."""

    def __init__(self, block, slices):
        super().__init__(slices)
        self.block = block

    def gpu_rows_mask(self):
        gpu_pid, pid = self.block.get("gpu_pid"), self.slices.pid
        gpu_codes = [code for code, value in enumerate(pid.table) if value == gpu_pid]
        return np.isin(pid.codes, gpu_codes)

    def origin_us(self):
        return 0.0  # exports are written relative to the trace's own origin

    def thread_table(self, distinct):
        threads = [tuple(thread) for thread in self.block.get("threads", [])]
        lanes = {(pid, tid): index for index, (pid, tid, _name) in enumerate(threads)}
        lanes.update({(pid, tid): index for pid, tid, index in self.block.get("extra_tids", [])})
        for key in distinct:
            if key not in lanes:
                lanes[key] = len(threads)
                threads.append((*key, f"thread {key[1]}"))
        return [lanes[key] for key in distinct], threads

    def categories(self):
        return list(self.block.get("categories", []))

    def launches(self, cpu_rows, gpu_rows, cpu_args, gpu_args, flows):
        # The block's ids are positions in the file's order (CPU slices, GPU slices); the rows
        # were sorted since: an export is already in order, but a file need not be.
        launch = self.block.get("gpu_launch")
        if not (isinstance(launch, list) and len(launch) == len(gpu_rows)):
            self.notes.append("the file's launch ids did not match its GPU slices: dropped")
            return np.full(len(gpu_rows), NO_ID, np.int32)
        launch = np.array(launch, np.int64)[_file_positions(gpu_rows)]
        new_id = np.empty(len(cpu_rows), np.int64)
        new_id[_file_positions(cpu_rows)] = np.arange(len(cpu_rows))
        valid = (launch >= 0) & (launch < len(cpu_rows))
        return np.where(valid, new_id[np.where(valid, launch, 0)] if len(cpu_rows) else NO_ID,
                        NO_ID).astype(np.int32)

    def meta(self, base_ns):
        meta = dict(self.block.get("meta") or {})
        if isinstance(meta.get("device_names"), dict):  # JSON made its int keys strings
            meta["device_names"] = {int(k): v for k, v in meta["device_names"].items()}
        if self.notes:
            meta["notes"] = [*meta.get("notes", []), *self.notes]
        return meta


def first_seen_order(codes: np.ndarray, table: list) -> tuple[np.ndarray, list]:
    """``codes`` (into ``table``) renumbered in the order they first appear in ``codes``, and
    the table of just those values in that order."""
    present, first = np.unique(codes, return_index=True)
    present = present[np.argsort(first)]
    renumber = np.zeros(max(len(table), 1), np.int32)
    renumber[present] = np.arange(len(present), dtype=np.int32)
    return renumber[codes], pick(table, present)


def distinct_pairs(pid_codes, pid_table, tid_codes, tid_table) -> tuple[list, np.ndarray]:
    """The distinct (pid, tid) pairs and each slice's index among them, through numpy rather
    than a dict of tuples (pids and tids may be strings: Kineto's "Spans")."""
    width = max(len(tid_table), 1)
    distinct, pair = np.unique(pid_codes.astype(np.int64) * width + tid_codes,
                               return_inverse=True)
    keys = [(pid_table[code // width], tid_table[code % width]) for code in distinct.tolist()]
    return keys, pair.reshape(-1).astype(np.int32)


def _file_positions(rows: np.ndarray) -> np.ndarray:
    """Each of ``rows``' position among them in file order (rows are X-slice indices)."""
    position = np.empty(len(rows), np.int64)
    position[np.argsort(rows, kind="stable")] = np.arange(len(rows))
    return position


def _category_column(categories: list, cat_table: list, cat_codes: np.ndarray):
    """The categories table (``categories`` first, then the file's, in first-seen order) and
    each CPU slice's index into it."""
    position = {category: index for index, category in enumerate(categories)}
    code_of = np.zeros(max(len(cat_table), 1), np.int64)
    for code in np.unique(cat_codes).tolist():  # first-seen order: cat_table's codes are
        code_of[code] = position.setdefault(cat_table[code], len(position))
    if len(position) > 256:
        raise TraceFormatError(f"{len(position)} event categories: nbprof keeps at most 256")
    return list(position), code_of[cat_codes].astype(np.uint8)


def category_flags(table: list, categories) -> np.ndarray:
    """For each category in ``table``, whether it is one of ``categories`` (lower-cased: older
    files capitalise them). Never empty, so that indexing it with no codes works."""
    return np.array([str(category).lower() in categories for category in table] or [False])


def arg_values(args_list: list, key: str) -> list:
    """``args[key]`` of each slice; None where it is absent or the args are not a dict."""
    try:  # in C, when every slice has a dict of args (the only JSON value with a .get)
        return list(map(methodcaller("get", key), args_list))
    except AttributeError:
        return [args.get(key) if isinstance(args, dict) else None for args in args_list]


def _int_column(args_list, key, fallback) -> np.ndarray:
    """``args[key]`` of each slice as int64, ``fallback``'s value where the args lack it."""
    values = [args.get(key, default) if isinstance(args, dict) else default
              for args, default in zip(args_list, fallback)]
    try:
        return np.array(values, np.int64)
    except (TypeError, ValueError, OverflowError):  # a string tid, a null: 0 for those
        return np.array([_as_int(value) for value in values], np.int64)


def _as_int(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _split_args(args_list: list):
    """event_args, shapes and stacks: shapes and stacks move out of the (dict) args."""
    event_args = dict(compress(enumerate(args_list), args_list))  # the non-empty ones, in C
    shapes = _pop_key(event_args, SHAPES_KEY)
    stacks = {row: _stack(stack) for row, stack in _pop_key(event_args, STACK_KEY).items()}
    if shapes or stacks:  # some args may hold nothing else
        event_args = {row: args for row, args in event_args.items() if args}
    return event_args, shapes, stacks


def _pop_key(event_args: dict, key: str) -> dict:
    """``key``'s value in each row's args that are a dict holding it, popped from them."""
    try:  # in C: map/contains instead of a comprehension
        rows = list(compress(event_args, map(contains, event_args.values(), repeat(key))))
    except TypeError:  # args that are a number: not a container
        rows = [row for row, args in event_args.items() if isinstance(args, dict) and key in args]
    # A string or a list "contains" the key's text too; only a dict holds it as a key.
    return {row: event_args[row].pop(key) for row in rows if isinstance(event_args[row], dict)}


def _stack(value) -> tuple:
    return tuple(value) if isinstance(value, list) else (str(value),)
