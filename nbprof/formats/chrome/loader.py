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

from itertools import compress

import numpy as np

from .args import MISSING, LazyArgs
from .async_slices import META_KEY as ASYNC_META_KEY, async_threads
from .export import FORMAT_VERSION, GPU_KIND_CATEGORY
from .growing import give_back_freed_memory
from .memory_events import memory_events
from .read import (MAX_TIME_US, Column, TraceFormatError, hashable, ns_from_us,
                   ns_in_place, pick)
from ...model import GPU_KINDS, NO_ID, KIND_OTHER, CounterSeries, Instants, MemoryEvents, Trace
from ...model.memory import attributed
from ...model.nesting import nest, time_ordered

# Kineto's GPU-side categories (lower-cased; older files capitalise them) -> GPU kind.
GPU_CATEGORY_KIND = {
    "kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset",
    "memset": "memset", "cuda_sync": "sync", "gpu_user_annotation": "other",
    **{category: kind for kind, category in GPU_KIND_CATEGORY.items()},
}
RUNTIME_CATEGORIES = {"cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver"}
FLOW_CATEGORIES = {"ac2g", "async_cpu_to_gpu"}
MAX_CATEGORIES = 256  # Trace.category is uint8
_BLOCK_ROWS = 1 << 20
OTHER_CATEGORIES = "(other categories)"


def nbprof_block(data) -> tuple[dict | None, str | None]:
    """The "nbprof" block of one of nbprof's own exports (None for any other file), and what
    is wrong with it where it is malformed: such a file is then read as a plain Chrome trace
    (its slices are all there; only what the block adds is lost)."""
    block = data.get("nbprof") if isinstance(data, dict) else None
    if not (isinstance(block, dict) and block.get("version") == FORMAT_VERSION):
        return None, None
    problem = _block_problem(block)
    if problem:
        return None, (f"the file's \"nbprof\" block is malformed ({problem}): it was read as a "
                      f"plain Chrome trace")
    return block, None


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(1 << 63) <= value < 1 << 63


def _block_problem(block: dict) -> str | None:
    """What is wrong with an "nbprof" block, or None: every field the loader reads is checked
    for its type, so a hand-edited or damaged block cannot fail half-way through loading."""
    def ints(values, width=None):
        return isinstance(values, list) and all(
            _is_int(v) for v in values) and (width is None or len(values) == width)

    threads = block.get("threads", [])
    if not (isinstance(threads, list) and all(
            isinstance(t, list) and len(t) == 3 and ints(t[:2]) and isinstance(t[2], str)
            for t in threads)):
        return "'threads' is not a list of [pid, tid, name]"
    extra = block.get("extra_tids", [])
    if not (isinstance(extra, list) and all(ints(t, 3) and 0 <= t[2] < len(threads)
                                            for t in extra)):
        return "'extra_tids' is not a list of [pid, tid, thread index]"
    categories = block.get("categories", [])
    if not (isinstance(categories, list) and all(isinstance(c, str) for c in categories)
            and len(set(categories)) == len(categories)):
        return "'categories' is not a list of distinct strings"
    if not hashable(block.get("gpu_pid")):
        return "'gpu_pid' is not a number or a string"
    if not ints(block.get("gpu_launch", [])):
        return "'gpu_launch' is not a list of ints"
    meta = block.get("meta")
    if meta is not None and not isinstance(meta, dict):
        return "'meta' is not an object"
    meta = meta or {}
    names = meta.get("device_names")
    if names is not None and not (isinstance(names, dict) and all(
            k.lstrip("-").isdigit() and len(k) < 18 for k in names)):
        return "'meta.device_names' does not map device numbers to names"
    for key in ("notes",):
        if key in meta and not isinstance(meta[key], list):
            return f"'meta.{key}' is not a list"
    for key in ("process_names",):
        if key in meta and not isinstance(meta[key], dict):
            return f"'meta.{key}' is not an object"
    if "base_time_ns" in meta and not _is_int(meta["base_time_ns"]):
        return "'meta.base_time_ns' is not an int"
    return None


NO_STREAM_U32 = (1 << 32) - 1  # Kineto's "no stream"


class Load:
    """What both formats share: splitting slices into CPU events and GPU intervals, and time."""

    def __init__(self, slices):
        self.slices = slices
        self.notes: list[str] = []
        self.path = "the trace"  # for messages; _load sets the file's
        self.lane_index: dict = {}  # (pid, tid) -> thread index, set by thread_table

    # -- what each format says its own way (NbprofLoad, kineto.KinetoLoad) -------------
    def gpu_rows_mask(self) -> np.ndarray:
        """Which slices are GPU intervals (the rest are CPU events)."""
        raise NotImplementedError

    def origin_us(self) -> float:
        """The µs value that becomes time 0."""
        raise NotImplementedError

    def metadata_rows_mask(self) -> np.ndarray | None:
        """Which slices say something of the whole trace rather than being events (Kineto's
        "PyTorch Profiler (0)" span): kept in ``meta["profiler_spans"]``, not as events. None:
        no such slices."""
        return None

    def thread_table(self, distinct: list) -> tuple[list, list]:
        """For the distinct (pid, tid) pairs of the CPU slices: each one's thread index, and
        the threads table."""
        raise NotImplementedError

    def categories(self) -> list:
        """Categories that come first in the table, in this order."""
        return []

    def launches(self, cpu_rows, gpu_rows, flows, start_ns, origin_us) -> np.ndarray:
        """Per GPU row (in ``gpu_rows``' order), the launching event's index into ``cpu_rows``
        (the sorted CPU rows: the event ids), or NO_ID. ``start_ns``: each slice's start, ns
        from ``origin_us``."""
        raise NotImplementedError

    def runtime_calls(self, cpu_rows, gpu_rows, launch) -> np.ndarray:
        """Per GPU row, the runtime/driver call (an index into ``cpu_rows``) that launched it,
        or NO_ID: the one with the same ``correlation`` in its args (``launch``: what
        launches() found)."""
        return matches(self.slices.args.ids["correlation"], cpu_rows, self._runtime_mask(cpu_rows),
                       gpu_rows, last_wins=True)

    def _runtime_mask(self, cpu_rows) -> np.ndarray:
        """Which CPU rows are runtime/driver calls (cudaLaunchKernel, cuLaunchKernel, ...)."""
        cat = self.slices.cat
        return category_flags(cat.table, RUNTIME_CATEGORIES)[cat.codes[cpu_rows]]

    def meta(self, base_ns: int) -> dict:
        raise NotImplementedError

    # -- the shared part --------------------------------------------------------------------
    def trace(self, found) -> Trace:
        """The Trace of the file's X slices (and B/E pairs), from what gather.Gatherer
        ``found`` (its flows, instants, counters, skipped events), whose flows it frees once
        they have linked what they can."""
        s = self.slices
        instants, counters, skipped = found.instants, found.counters, found.skipped
        is_gpu = self.gpu_rows_mask()
        origin_us = self.origin_us()
        last_end = max((float((s.ts[first:first + _BLOCK_ROWS] + s.dur[first:first + _BLOCK_ROWS]
                               ).max()) for first in range(0, len(s.ts), _BLOCK_ROWS)),
                       default=origin_us)
        if len(s.ts) and not ((s.ts.min() - origin_us) >= -MAX_TIME_US
                              and last_end - origin_us <= MAX_TIME_US):
            raise TraceFormatError(f"{self.path}: its slices span more than {MAX_TIME_US:.3g} µs "
                                   f"(146 years), more than a trace's ns times hold; some ts "
                                   f"are wrong: fix or remove those events")
        # The ns columns take the file's columns' place: at millions of slices each is tens of
        # MB, and a copy of either would be the peak of a big load.
        start_ns = ns_in_place(s.ts, origin_us)
        end_ns = ns_in_place(s.dur, 0.0)
        s.ts = s.dur = None
        end_ns += start_ns
        # Rows in the order a Trace keeps: CPU by start, the enclosing one first on ties (as
        # Trace.build sorts); GPU by start then end. Sorting here, before any per-row dict is
        # made, spares remapping those dicts afterwards.
        index = np.int32 if len(start_ns) < 1 << 31 else np.int64
        is_metadata = self.metadata_rows_mask()
        spans = [{"name": str(s.name.table[s.name.codes[row]]), "start_ns": int(start_ns[row]),
                  "end_ns": int(end_ns[row])} for row in np.flatnonzero(is_metadata).tolist()] \
            if is_metadata is not None else []
        cpu_rows = time_ordered(np.flatnonzero(~is_gpu if is_metadata is None else
                                               ~is_gpu & ~is_metadata).astype(index), start_ns,
                                lambda rows: start_ns[rows] - end_ns[rows])
        gpu_rows = time_ordered(np.flatnonzero(is_gpu).astype(index), start_ns,
                                lambda rows: end_ns[rows])

        # glibc keeps what the step before freed (up to 64 MB of heap top) resident: handed
        # back before each step, or it counts on top of that step's own peak
        give_back_freed_memory()
        launch = self.launches(cpu_rows, gpu_rows, found.flows, start_ns, origin_us)
        call = self.runtime_calls(cpu_rows, gpu_rows, launch)
        # Each of the file's columns is freed once read for the last time: at millions of
        # slices each is tens of MB, and what is left of them is the peak of a big load.
        found.flows = None
        gpu = dict(gpu_start_ns=start_ns[gpu_rows], gpu_end_ns=end_ns[gpu_rows],
                   gpu_name_id=s.name.codes[gpu_rows], gpu_device=self.devices(gpu_rows),
                   gpu_stream=self.streams(gpu_rows), gpu_launch=launch,
                   gpu_kind=self.gpu_kinds(gpu_rows), gpu_call=call,
                   gpu_args=LazyArgs.of(s.args, gpu_rows, "all"))
        s.args.drop_ids()
        cpu_start = start_ns[cpu_rows]
        del start_ns
        cpu_end = end_ns[cpu_rows]
        del end_ns
        tid_codes, tid_table = first_seen_order(s.tid.codes[cpu_rows], s.tid.table)
        s.tid.codes = None
        distinct, pair = distinct_pairs(s.pid.codes[cpu_rows], s.pid.table, tid_codes, tid_table)
        del tid_codes
        s.pid.codes = None
        thread_of_pair, threads = self.thread_table(distinct)
        thread = np.array(thread_of_pair, np.int32)[pair] if distinct else pair
        del pair
        categories, category = self._category_column(s.cat.table, s.cat.codes[cpu_rows])
        name_id = s.name.codes[cpu_rows]
        s.cat.codes = s.name.codes = None
        del gpu_rows, is_gpu
        cpu_extras = {view: LazyArgs.of(s.args, cpu_rows, view)
                      for view in ("args", "shapes", "stacks")}
        del cpu_rows
        if skipped:
            self.notes.append(f"{skipped} events of phases nbprof does not read (object, sample, "
                              f"...) were skipped")
        give_back_freed_memory()
        depth, parent, self_ns = nest(cpu_start, cpu_end, thread)
        trace = Trace(
            start_ns=cpu_start, end_ns=cpu_end, thread=thread, name_id=name_id,
            category=category, depth=depth, parent=parent, self_ns=self_ns, **gpu,
            names=s.name.table, threads=threads, categories=categories,
            instants=self._instants(instants, origin_us) if instants else None,
            counters=self._counters(counters, origin_us) if counters else (),
            event_args=cpu_extras["args"], shapes=cpu_extras["shapes"],
            stacks=cpu_extras["stacks"], meta=self.meta(round(origin_us * 1000)))
        if instants.memory or instants.memory_skipped:
            trace.memory = self._memory(instants, origin_us, trace)
        if spans:
            trace.meta["profiler_spans"] = spans
        async_lanes = async_threads(self.lane_index)
        if async_lanes:  # which threads are async tracks' lanes (async_slices.py)
            trace.meta[ASYNC_META_KEY] = sorted({*trace.meta.get(ASYNC_META_KEY, ()),
                                                 *async_lanes})
        give_back_freed_memory()
        return self.finish(trace)

    def _memory(self, found, origin_us, trace) -> MemoryEvents:
        """The [memory] instants as the trace's memory columns, each tied to its op."""
        if found.memory_skipped:
            trace.meta.setdefault("notes", []).append(
                f"{found.memory_skipped} [memory] events without integer Bytes or on a device "
                f"other than the CPU or CUDA were left out")
        time_ns, fits = self._in_range_ns(np.array([row[0] for row in found.memory], np.float64),
                                          origin_us, "[memory] events")
        rows = list(compress(found.memory, fits.tolist()))
        found.memory = None
        return attributed(memory_events(rows, self.lane_index, time_ns), trace)

    def _in_range_ns(self, ts_us: np.ndarray, origin_us: float, what: str):
        """ns from the origin, and which of ``ts_us`` fit (the rest are noted and dropped)."""
        time_ns, fits = ns_from_us(ts_us, origin_us)
        if not fits.all():
            self.notes.append(f"{int((~fits).sum())} {what} with a ts beyond {MAX_TIME_US:.3g} µs "
                              f"from the trace's start were left out")
        return time_ns[fits], fits

    def _instants(self, found, origin_us) -> Instants:
        if found.skipped:
            self.notes.append(f"{found.skipped} instant events without a numeric ts or with a "
                              f"list for pid/tid were left out")
        time_ns, fits = self._in_range_ns(np.array(found.ts, np.float64), origin_us,
                                          "instant events")
        thread = np.array([NO_ID if tid is None else self.lane_index.get((pid, tid), NO_ID)
                           for pid, tid in zip(found.pid, found.tid)], np.int32)[fits]
        names = list(compress(found.name, fits.tolist()))
        order = np.argsort(time_ns, kind="stable")
        return Instants(time_ns=time_ns[order], name=pick(names, order), thread=thread[order])

    def _counters(self, found, origin_us) -> list:
        if found.skipped:
            self.notes.append(f"{found.skipped} counter samples without a numeric ts or value "
                              f"were left out")
        series = []
        for (pid, name, key), (times, values) in found.series.items():
            time_ns, fits = self._in_range_ns(np.array(times, np.float64), origin_us,
                                              f"samples of counter {name!r}")
            order = np.argsort(time_ns, kind="stable")
            series.append(CounterSeries(name=name, series=key, pid=self.counter_pid(pid),
                                        time_ns=time_ns[order],
                                        values=np.array(values, np.float64)[fits][order]))
        return series

    def counter_pid(self, pid) -> int:
        """The int pid a counter's process has in the Trace's threads (-1 where unknown)."""
        return pid if isinstance(pid, int) else NO_ID

    def _category_column(self, cat_table: list, cat_codes: np.ndarray):
        """The categories table (the format's own first, then the file's, in first-seen order)
        and each CPU slice's index into it. Categories past the 256 a Trace keeps share the
        last one, "(other categories)", and a note says so."""
        position = {category: index for index, category in enumerate(self.categories())}
        code_of = np.zeros(max(len(cat_table), 1), np.int64)
        for code in np.unique(cat_codes).tolist():  # first-seen order: cat_table's codes are
            # a slice without a cat has the empty one (as Perfetto reads it): the table stays
            # strings, which an export's block must hold to load back
            category = cat_table[code] if cat_table[code] is not None else ""
            code_of[code] = position.setdefault(category, len(position))
        if len(position) > MAX_CATEGORIES:
            self.notes.append(f"the file has {len(position)} event categories, more than the "
                              f"{MAX_CATEGORIES} a trace keeps: the last "
                              f"{len(position) - MAX_CATEGORIES + 1} share {OTHER_CATEGORIES!r}")
            code_of = np.minimum(code_of, MAX_CATEGORIES - 1)
            position = dict(list(position.items())[:MAX_CATEGORIES - 1])
            position[OTHER_CATEGORIES] = MAX_CATEGORIES - 1
        return list(position), code_of[cat_codes].astype(np.uint8)

    def finish(self, trace: Trace) -> Trace:
        return trace

    def gpu_kinds(self, gpu_rows) -> np.ndarray:
        kind_of_cat = np.array([GPU_KINDS.index(GPU_CATEGORY_KIND.get(str(c).lower(), "other"))
                                for c in self.slices.cat.table] or [KIND_OTHER], np.uint8)
        return kind_of_cat[self.slices.cat.codes[gpu_rows]]

    def devices(self, gpu_rows) -> np.ndarray:
        """Each GPU slice's device, in the int16 column's range: a number outside it is
        clamped to its end, with a note (never wrapped: 65536 would be device 0); its args
        keep the file's number."""
        return self._clamped(self._int_column(gpu_rows, "device", self.slices.pid), np.int16,
                             "device")

    def streams(self, gpu_rows) -> np.ndarray:
        """Each GPU slice's stream in the int32 column. Kineto writes "no stream" as 4294967295
        (unsigned 32-bit -1): that one is -1, as the file's own tid says. Any other number
        outside int32's range is clamped to its end with a note (never wrapped: 2^31 + 7 would
        read as a negative stream, 2^32 + 7 as stream 7); the args keep the file's number."""
        streams = self._int_column(gpu_rows, "stream", self.slices.tid)
        streams[streams == NO_STREAM_U32] = -1
        return self._clamped(streams, np.int32, "stream")

    def _clamped(self, values: np.ndarray, dtype, what: str) -> np.ndarray:
        """``values`` as ``dtype``, a number outside its range clamped to its end with a note."""
        low, high = np.iinfo(dtype).min, np.iinfo(dtype).max
        outside = int(((values < low) | (values > high)).sum())
        if outside:
            self.notes.append(f"{outside} GPU intervals had a {what} number outside {low}..{high}"
                              f": clamped to that range (their args keep the file's number)")
            values = np.clip(values, low, high)
        return values.astype(dtype)

    def _int_column(self, rows, key, fallback: Column) -> np.ndarray:
        """``args[key]`` of each slice at ``rows`` as int64: the fallback column's value
        where the args lack it, 0 for a value that is no int64 (a stream of 2^70)."""
        ids = self.slices.args.ids[key]
        values = ids.ints(rows)
        missing = np.flatnonzero(values == MISSING)
        if len(missing):
            table = np.array([_as_int(value) for value in fallback.table] or [0], np.int64)
            values[missing] = table[fallback.codes[rows[missing]]]
            for at, row in zip(missing.tolist(), rows[missing].tolist()):
                if row in ids.others:
                    values[at] = _as_int(ids.others[row])
        return values


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
        unknown = [key for key in distinct if key not in lanes]
        if unknown:  # slices on lanes the block does not name: a thread each
            known = [(pid, tid) for pid, tid, _name in threads]
            pid_ids = int_ids([pid for pid, _tid in known + unknown])
            tid_ids = int_ids([tid for _pid, tid in known + unknown])
            for key in unknown:
                lanes[key] = len(threads)
                threads.append((pid_ids[key[0]], tid_ids[key[1]],
                                getattr(key[1], "label", None) or f"thread {key[1]}"))
        self.lane_index = lanes
        return [lanes[key] for key in distinct], threads

    def categories(self):
        return list(self.block.get("categories", []))

    def _counters(self, found, origin_us) -> list:
        # the export's memory level tracks are drawn from the [memory] events, not kept twice
        derived = self.block.get("memory_counters")
        if isinstance(derived, list):
            found.series = {key: samples for key, samples in found.series.items()
                            if key[1] not in derived}
        return super()._counters(found, origin_us)

    def launches(self, cpu_rows, gpu_rows, flows, start_ns, origin_us):
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
        for key in ("device_names", "gpu_clock"):  # JSON made their int (device) keys strings
            if isinstance(meta.get(key), dict) and all(k.lstrip("-").isdigit() for k in meta[key]):
                meta[key] = {int(k): v for k, v in meta[key].items()}
        if self.notes:
            meta["notes"] = [*meta.get("notes", []), *self.notes]
        return meta


def first_seen_order(codes: np.ndarray, table: list) -> tuple[np.ndarray, list]:
    """``codes`` (into ``table``) renumbered in the order they first appear in ``codes``, and
    the table of just those values in that order."""
    # Each code's first position by a minimum over the table's slots, not np.unique's sort of
    # every row (tables are small; the rows are millions)
    first = np.full(max(len(table), 1), len(codes), np.int64)
    for start in range(0, len(codes), _BLOCK_ROWS):
        block = codes[start:start + _BLOCK_ROWS]
        np.minimum.at(first, block, np.arange(start, start + len(block)))
    present = np.flatnonzero(first < len(codes))
    present = present[np.argsort(first[present])]
    renumber = np.zeros(max(len(table), 1), np.int32)
    renumber[present] = np.arange(len(present), dtype=np.int32)
    return renumber[codes], pick(table, present)


def distinct_pairs(pid_codes, pid_table, tid_codes, tid_table) -> tuple[list, np.ndarray]:
    """The distinct (pid, tid) pairs and each slice's index among them, through numpy rather
    than a dict of tuples (pids and tids may be strings: Kineto's "Spans")."""
    width = max(len(tid_table), 1)
    slots = max(len(pid_table), 1) * width
    if slots > _BLOCK_ROWS:  # many pids and tids: sorting the rows costs less than the slots
        distinct, pair = np.unique(pid_codes.astype(np.int64) * width + tid_codes,
                                   return_inverse=True)
        pair = pair.reshape(-1).astype(np.int32)
    else:  # which slots occur, by counting: no sort of the rows, int32 temporaries
        combined = pid_codes.astype(np.int32) * np.int32(width)
        combined += tid_codes
        distinct = np.flatnonzero(np.bincount(combined, minlength=slots))
        renumber = np.zeros(slots, np.int32)
        renumber[distinct] = np.arange(len(distinct), dtype=np.int32)
        pair = renumber[combined]
    keys = [(pid_table[code // width], tid_table[code % width]) for code in distinct.tolist()]
    return keys, pair


def _file_positions(rows: np.ndarray) -> np.ndarray:
    """Each of ``rows``' position among them in file order (rows are X-slice indices)."""
    position = np.empty(len(rows), np.int64)
    position[np.argsort(rows, kind="stable")] = np.arange(len(rows))
    return position


def category_flags(table: list, categories) -> np.ndarray:
    """For each category in ``table``, whether it is one of ``categories`` (lower-cased: older
    files capitalise them). Never empty, so that indexing it with no codes works."""
    return np.array([str(category).lower() in categories for category in table] or [False])


def _as_int(value) -> int:
    """An int column's value: 0 for what is no int, or no int64 (a stream of 2^70)."""
    try:
        value = int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
        return 0
    return value if _is_int(value) else 0


def int_ids(values: list) -> dict:
    """An int for each pid or tid: int64 ints as they are (read.canonical_id made numeric
    strings ints); other values (Kineto's "Spans", "PyTorch Profiler", a pid past int64) get
    ids past the largest int."""
    numeric = {value: value for value in values if _is_int(value)}
    next_id = max(numeric.values(), default=0) + 1
    for value in values:
        if value not in numeric:
            numeric[value] = next_id
            next_id += 1
    return numeric


_MATCH_ROWS = 1 << 18  # CPU rows matched at a time


def matches(ids, cpu_rows, is_target, wanted_rows, last_wins: bool) -> np.ndarray:
    """For each of ``wanted_rows``, the target (an index into ``cpu_rows``) of the row among
    those of ``cpu_rows`` that ``is_target`` flags whose id (an IdColumn of the args) equals
    its own, the last or the first such row; NO_ID where none. Ints are matched in numpy;
    other ids (strings, floats) through a dict."""
    wanted = ids.ints(wanted_rows)
    keys, found_targets = _wanted_keys(ids, cpu_rows, is_target, wanted)
    if last_wins:
        keys, found_targets = keys[::-1], found_targets[::-1]
    unique, first = np.unique(keys, return_index=True)
    at = np.minimum(np.searchsorted(unique, wanted), max(len(unique) - 1, 0))
    hit = (wanted != MISSING) & (unique[at] == wanted) if len(unique) else \
        np.zeros(len(wanted), bool)
    out = np.where(hit, found_targets[first[at]] if len(unique) else NO_ID, NO_ID)
    if ids.others:
        by_other = {}
        targets = np.flatnonzero(is_target)
        pairs = zip(cpu_rows[targets].tolist(), targets.tolist())
        for row, target in (reversed(list(pairs)) if not last_wins else pairs):
            if row in ids.others:
                by_other[ids.others[row]] = target
        for at, row in enumerate(wanted_rows.tolist()):
            if row in ids.others and ids.others[row] in by_other:
                out[at] = by_other[ids.others[row]]
    return out.astype(np.int32)


def _wanted_keys(ids, cpu_rows, is_target, wanted) -> tuple[np.ndarray, np.ndarray]:
    """The int ids of the rows of ``cpu_rows`` that ``is_target`` flags and that are among
    ``wanted``, and their targets (indices into ``cpu_rows``), in order: a block of rows at a
    time, so that at millions of rows no full-size temporaries pile up (the rows whose id no
    one wants are most of them)."""
    lookup = np.unique(wanted[wanted != MISSING])
    keys, found = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    if not len(lookup):
        return keys[0], found[0]
    for start in range(0, len(cpu_rows), _MATCH_ROWS):
        targets = np.flatnonzero(is_target[start:start + _MATCH_ROWS]) + start
        block = ids.ints(cpu_rows[targets])
        at = np.minimum(np.searchsorted(lookup, block), len(lookup) - 1)
        hit = np.flatnonzero(lookup[at] == block)  # MISSING is not in lookup
        keys.append(block[hit])
        found.append(targets[hit])
    return np.concatenate(keys), np.concatenate(found)
