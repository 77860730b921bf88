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

from operator import itemgetter

import numpy as np

from .chrome_export import FORMAT_VERSION, GPU_KIND_CATEGORY, SHAPES_KEY, STACK_KEY
from .chrome_read import TraceFormatError, intern
from .events import GPU_KINDS, NO_ID, KIND_OTHER, Trace

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

    # -- hooks for the two formats -------------------------------------------------------------
    def gpu_rows_mask(self, cat_codes, cat_table) -> np.ndarray: ...
    def origin_us(self) -> float: ...
    def thread_table(self, keys: list) -> tuple[np.ndarray, list]: ...
    def categories(self) -> list: return []
    def launches(self, cpu_rows, gpu_rows, flows) -> np.ndarray: ...
    def meta(self, base_ns: int) -> dict: ...

    # -- the shared part --------------------------------------------------------------------
    def trace(self, flows, skipped: int) -> Trace:
        s = self.slices
        cat_codes, cat_table = intern(s.cat)
        self.cat_table, self.cat_codes = cat_table, cat_codes
        is_gpu = self.gpu_rows_mask(cat_codes, cat_table)
        cpu_rows, gpu_rows = np.flatnonzero(~is_gpu), np.flatnonzero(is_gpu)
        origin_us = self.origin_us()
        start_ns = np.rint((s.ts - origin_us) * 1000.0).astype(np.int64)
        end_ns = start_ns + np.rint(s.dur * 1000.0).astype(np.int64)
        name_id, names = intern(s.name)

        pid, tid = _pick(s.pid, cpu_rows), _pick(s.tid, cpu_rows)
        thread, threads = self.thread_table(list(zip(pid, tid)))
        categories = self.categories()
        category = _codes_into(categories, [cat_table[c] for c in cat_codes[cpu_rows].tolist()])
        event_args, shapes, stacks = _split_args(_pick(s.args, cpu_rows))
        gpu_args = {row: args for row, args in enumerate(_pick(s.args, gpu_rows)) if args}

        launch = self.launches(cpu_rows, gpu_rows, flows)
        if skipped:
            self.notes.append(f"{skipped} events other than X, M and launch flows were skipped "
                              f"(instant events, counters, other flows)")
        trace = Trace.build(
            start_ns=start_ns[cpu_rows], end_ns=end_ns[cpu_rows], thread=thread,
            name_id=name_id[cpu_rows], names=names, threads=threads,
            category=category, categories=categories,
            gpu_start_ns=start_ns[gpu_rows], gpu_end_ns=end_ns[gpu_rows],
            gpu_name_id=name_id[gpu_rows], gpu_device=self.devices(gpu_rows),
            gpu_stream=self.streams(gpu_rows), gpu_launch=launch,
            gpu_kind=self.gpu_kinds(gpu_rows), meta=self.meta(round(origin_us * 1000)),
            event_args=event_args, gpu_args=gpu_args, shapes=shapes, stacks=stacks)
        return self.finish(trace)

    def finish(self, trace: Trace) -> Trace:
        return trace

    def gpu_kinds(self, gpu_rows) -> np.ndarray:
        kind_of_cat = np.array([GPU_KINDS.index(GPU_CATEGORY_KIND.get(str(c).lower(), "other"))
                                for c in self.cat_table] or [KIND_OTHER], np.uint8)
        return kind_of_cat[self.cat_codes[gpu_rows]]

    def devices(self, gpu_rows) -> np.ndarray:
        return _int_column(self.slices, gpu_rows, "device", self.slices.pid)

    def streams(self, gpu_rows) -> np.ndarray:
        # Kineto's stream ids are unsigned 32-bit (4294967295 for "no stream"): they wrap into
        # the int32 column (-1, as the file's own tid says), the args keep the original.
        return _int_column(self.slices, gpu_rows, "stream", self.slices.tid).astype(np.int32)


class NbprofLoad(Load):
    """nbprof's own export: the "nbprof" block says which pid is the GPU's, the thread and
    category tables, the extra lanes, the launch ids and the meta."""

    def __init__(self, block, slices):
        super().__init__(slices)
        self.block = block

    def gpu_rows_mask(self, cat_codes, cat_table):
        gpu_pid = self.block.get("gpu_pid")
        return np.fromiter((pid == gpu_pid for pid in self.slices.pid), bool, len(cat_codes))

    def origin_us(self):
        return 0.0  # exports are written relative to the trace's own origin

    def thread_table(self, keys):
        threads = [tuple(thread) for thread in self.block.get("threads", [])]
        lanes = {(pid, tid): index for index, (pid, tid, _name) in enumerate(threads)}
        lanes.update({(pid, tid): index for pid, tid, index in self.block.get("extra_tids", [])})
        for key in dict.fromkeys(keys):
            if key not in lanes:
                lanes[key] = len(threads)
                threads.append((*key, f"thread {key[1]}"))
        return np.array([lanes[key] for key in keys], np.int32), threads

    def categories(self):
        return list(self.block.get("categories", []))

    def launches(self, cpu_rows, gpu_rows, flows):
        launch = self.block.get("gpu_launch")
        if isinstance(launch, list) and len(launch) == len(gpu_rows):
            return np.array(launch, np.int32)
        self.notes.append("the file's launch ids did not match its GPU slices: launches dropped")
        return np.full(len(gpu_rows), NO_ID, np.int32)

    def meta(self, base_ns):
        meta = dict(self.block.get("meta") or {})
        if isinstance(meta.get("device_names"), dict):  # JSON made its int keys strings
            meta["device_names"] = {int(k): v for k, v in meta["device_names"].items()}
        if self.notes:
            meta["notes"] = [*meta.get("notes", []), *self.notes]
        return meta


def _pick(values: list, rows: np.ndarray) -> list:
    rows = rows.tolist()
    if len(rows) < 2:
        return [values[row] for row in rows]
    return list(itemgetter(*rows)(values))  # in C: a tenth of a comprehension's time


def _codes_into(table: list, values: list) -> np.ndarray:
    """Index of each value in ``table``, appending the values it lacks."""
    position = {value: index for index, value in enumerate(table)}
    codes = [position.setdefault(value, len(position)) for value in values]
    table[:] = list(position)
    if len(table) > 256:
        raise TraceFormatError(f"{len(table)} event categories: nbprof keeps at most 256")
    return np.array(codes, np.uint8)


def _int_column(slices, rows, key, fallback) -> np.ndarray:
    values = []
    for row in rows.tolist():
        args = slices.args[row]
        value = args.get(key) if isinstance(args, dict) else None
        if value is None:
            value = fallback[row]
        values.append(value if isinstance(value, int) else _as_int(value))
    return np.array(values, np.int64)


def _as_int(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _split_args(args_list: list):
    """event_args, shapes and stacks: shapes and stacks move out of the args."""
    event_args = {row: args for row, args in enumerate(args_list)
                  if args and isinstance(args, dict)}
    shapes = {row: args.pop(SHAPES_KEY) for row, args in event_args.items() if SHAPES_KEY in args}
    stacks = {row: _stack(args.pop(STACK_KEY)) for row, args in event_args.items()
              if STACK_KEY in args}
    if shapes or stacks:  # some args may hold nothing else
        event_args = {row: args for row, args in event_args.items() if args}
    return event_args, shapes, stacks


def _stack(value) -> tuple:
    return tuple(value) if isinstance(value, list) else (str(value),)
