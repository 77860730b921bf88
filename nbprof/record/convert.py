"""Backend records -> :class:`nbprof.Trace`. Pure functions: no torch, no clocks, no I/O.

Two inputs:
- :func:`cpu_records_to_trace`: Kineto's raw CPU records already read into columns (numpy), one
  row per event, wall-clock ns and OS thread ids.
- :func:`legacy_records_to_trace`: the legacy profiler's per-thread lists of push/pop records
  with CUDA events (``ProfilerState.CUDA``, the seed's mechanism). Each op's GPU interval is put
  on the CPU clock through anchor records per device (gpu_clock.py, CUDA_EVENTS.md): whatever
  origin the GPU clock has cancels out, its drift is fitted between a start and a stop anchor,
  and the anchor's latency is corrected by what the records prove. It only calls the records'
  methods, so tests feed it fakes that behave like torch's, failures included.
"""

from __future__ import annotations

import re

import numpy as np

from ..model import KIND_OP, Thread, Trace
from ..model.nesting import nest
from .gpu_clock import place_cuda_events
from .own_cuda_calls import own_cuda_calls
from .python_frames import cell_label, is_users, shell_cell_numbers, top_package, users_rows

CPU_CATEGORIES = ("op", "user_annotation", "python_function")


def sparse_rows(values, convert=None) -> dict:
    """row -> value (``convert``-ed) for the rows whose value is not empty: shapes and stacks are
    recorded for few events, so they are kept sparse."""
    return {row: convert(value) if convert else value
            for row, value in enumerate(values) if value}


def intern_names(names) -> tuple[np.ndarray, list[str]]:
    """Index of each name in a table of the distinct names (first-seen order), and the table."""
    table: dict[str, int] = {}
    ids = np.fromiter((table.setdefault(name, len(table)) for name in names), np.int32,
                      len(names))
    return ids, list(table)


def _thread_table(tids: np.ndarray, names_by_tid: dict, pid: int, first_tid: int | None):
    """Thread index per row and the thread table; ``first_tid`` (the thread that started the
    profile) gets the first lane, the others follow by id."""
    distinct = np.unique(tids)  # sorted
    ordered = [int(tid) for tid in distinct]
    if first_tid is not None and first_tid in ordered:
        ordered.remove(first_tid)
        ordered.insert(0, first_tid)
    lane_of_sorted = np.empty(len(distinct), np.int32)
    for lane, tid in enumerate(ordered):
        lane_of_sorted[np.searchsorted(distinct, tid)] = lane
    thread = lane_of_sorted[np.searchsorted(distinct, tids)]
    threads = [Thread(pid, tid, names_by_tid.get(tid, f"thread {tid}")) for tid in ordered]
    return thread.astype(np.int32), threads


# with_stack's Python events include nbprof's own frames (profile.__enter__/__exit__ and the
# recorders they call) around the user's code: these, and everything inside them, are dropped.
_OWN_FRAME = re.compile(r"(^|[/\\])nbprof[/\\](profiler|record[/\\]\w+)\.py\(\d+\): ")


def drop_profiler_frames(records):
    """``records`` without nbprof's own Python frames and the events inside them."""
    own = [row for row in np.flatnonzero(records.is_python)
           if _OWN_FRAME.search(records.names[row])]
    if not own:
        return records
    keep = np.ones(len(records.names), np.bool_)
    for row in own:
        keep &= ~((records.tid == records.tid[row]) & (records.start_ns >= records.start_ns[row])
                  & (records.end_ns <= records.end_ns[row]))
    return keep_rows(records, keep)


def keep_users_frames(records, cell_numbers: dict | None = None):
    """``records`` with only the Python frames the user's code ran (their own frames and the calls
    they made; never nbprof's), a notebook cell's frames named "cell [n]...", and no threads left
    that ran no op and no frame of the user's (the kernel's idle threads). Ops all stay."""
    cell_numbers = shell_cell_numbers() if cell_numbers is None else cell_numbers
    python_rows = np.flatnonzero(records.is_python)
    frames = {records.names[row] for row in python_rows}
    users = {frame for frame in frames if is_users(frame, cell_numbers)}
    nbprof = {frame for frame in frames if top_package(frame) == "nbprof"}
    is_users_row = np.zeros(len(records.names), np.bool_)
    is_users_row[[row for row in python_rows if records.names[row] in users]] = True
    order = np.lexsort((-(records.end_ns - records.start_ns), records.start_ns))
    depth, parent, _ = nest(records.start_ns[order], records.end_ns[order], records.tid[order])
    keep = np.empty(len(order), np.bool_)
    keep[order] = users_rows(records.is_python[order], is_users_row[order], parent, depth)
    if nbprof:
        keep[[row for row in python_rows if records.names[row] in nbprof]] = False
    labels = {frame: label for frame in users if (label := cell_label(frame, cell_numbers))}
    if labels:
        records = records._replace(names=[labels.get(name, name) for name in records.names])
    return keep_rows(records, keep) if not keep.all() else records


def drop_own_cuda_calls(records, *, event_times: dict, windows=()):
    """``records`` without the profiler's own CUDA runtime calls (own_cuda_calls.py: the
    legacy event stub's cudaEventRecord & co., everything inside nbprof's recorder calls), and
    how many were dropped."""
    own = own_cuda_calls(records.names, records.start_ns, records.tid, event_times=event_times,
                         windows=windows)
    return (keep_rows(records, ~own) if own.any() else records), int(own.sum())


def keep_rows(records, keep: np.ndarray):
    """:class:`CpuRecords` (or the like) with only the rows where ``keep``; sparse extras remapped."""
    new_row = np.cumsum(keep) - 1

    def remap(sparse):
        return {int(new_row[row]): value for row, value in sparse.items() if keep[row]}

    return records._replace(
        names=[name for name, kept in zip(records.names, keep) if kept],
        start_ns=records.start_ns[keep], end_ns=records.end_ns[keep], tid=records.tid[keep],
        is_annotation=records.is_annotation[keep], is_python=records.is_python[keep],
        shapes=remap(records.shapes), stacks=remap(records.stacks),
        cuda_us=None if records.cuda_us is None else records.cuda_us[keep])


def cpu_records_to_trace(records, *, base_time_ns: int, thread_names: dict, pid: int,
                         first_tid: int | None = None, meta: dict | None = None) -> Trace:
    """A Trace from :class:`nbprof.record.kineto_cpu.CpuRecords` (or any object with its fields).

    Times become ns from ``base_time_ns`` (the wall-clock origin, kept in ``meta``). With the
    Kineto GPU fallback (``records.cuda_us`` set), an op with a GPU duration gets a GPU interval
    of that length placed at its CPU start: torch gives no GPU start time on that path, and
    ``meta["notes"]`` must say so (the caller's job, it knows why the fallback was chosen).
    """
    if records.is_python.any():
        records = keep_users_frames(drop_profiler_frames(records))
    name_id, names = intern_names(records.names)
    own = [index for index, name in enumerate(names) if name.startswith(PROFILER_RANGE_PREFIX)]
    if own:  # the recorder's own ranges (calibration): never the user's ops
        records = keep_rows(records, ~np.isin(name_id, own))
        name_id, names = intern_names(records.names)
    thread, threads = _thread_table(records.tid, thread_names, pid, first_tid)
    category = records.is_annotation.astype(np.uint8) + 2 * records.is_python.astype(np.uint8)
    start_ns = records.start_ns - base_time_ns
    end_ns = records.end_ns - base_time_ns
    gpu = {}
    if records.cuda_us is not None:
        rows = np.flatnonzero(records.cuda_us > 0)
        gpu = dict(
            gpu_start_ns=start_ns[rows],
            gpu_end_ns=start_ns[rows] + np.rint(records.cuda_us[rows] * 1000).astype(np.int64),
            gpu_name_id=name_id[rows], gpu_device=np.zeros(len(rows), np.int16),
            gpu_stream=np.zeros(len(rows), np.int32), gpu_launch=rows.astype(np.int32),
            gpu_kind=np.full(len(rows), KIND_OP, np.uint8))
    trace = Trace.build(start_ns=start_ns, end_ns=end_ns, thread=thread, name_id=name_id,
                        names=names, threads=threads, category=category,
                        categories=CPU_CATEGORIES, meta=_with_base(meta, base_time_ns),
                        shapes=records.shapes, stacks=records.stacks, **gpu)
    if records.is_python.any():
        trace.stacks = {**python_stacks(trace), **trace.stacks}
    return trace


def python_stacks(trace: Trace) -> dict:
    """Each op's Python stack, innermost frame first, from the Python-function events that
    enclose it (with_stack records Python calls as events, as torch.profiler does)."""
    python = CPU_CATEGORIES.index("python_function")
    frames: dict[int, tuple] = {}  # row -> the Python frames around it (itself, if Python)
    stacks = {}
    names, parents, categories = trace.names, trace.parent, trace.category
    for row in range(len(trace)):  # parents come before their children in start order
        parent = int(parents[row])
        enclosing = frames.get(parent, ()) if parent >= 0 else ()
        if categories[row] == python:
            frames[row] = (names[trace.name_id[row]],) + enclosing
        else:  # an op inside an op (aten::add > aten::to) shares its parent's frames
            frames[row] = enclosing
            if enclosing:
                stacks[row] = enclosing
    return stacks


def _with_base(meta, base_time_ns):
    meta = dict(meta or {})
    meta["base_time_ns"] = int(base_time_ns)
    meta.setdefault("notes", [])
    return meta


class _LegacyRecords:
    """The legacy records as columns: each field read with one ``map`` of the unbound method
    (cheaper than a bound-method call per record: 0.19 s against 0.29 s for 100k events)."""

    def __init__(self, records: list):
        self.records = records  # not empty
        method, count = type(records[0]), len(records)

        def column(name, dtype):
            return np.fromiter(map(getattr(method, name), records), dtype, count)

        self.kinds = np.array(list(map(method.kind, records)), dtype=object)
        self.names = np.array(list(map(method.name, records)), dtype=object)
        self.handles = column("handle", np.int64)
        self.thread_ids = column("thread_id", np.int64)
        self.has_cuda = column("has_cuda", np.bool_)
        self.devices = column("device", np.int64)
        # async ranges (e.g. c10d Work) may be ended by another thread: CPU time only
        self.is_async = column("is_async", np.bool_) if hasattr(method, "is_async") \
            else np.zeros(count, np.bool_)

    def cpu_ns(self, base_time_ns: int) -> np.ndarray:
        """CPU times in ns from ``base_time_ns``. Relative to one record: cpu_elapsed_us
        differences are exact in float64, while start_us() (epoch us as a double) is only good
        to ~0.25 us, which is then the whole trace's placement error against the wall clock."""
        clock_ref = self.records[0]
        elapsed_us = np.fromiter(map(clock_ref.cpu_elapsed_us, self.records), np.float64,
                                 len(self.records))
        offset_ns = round(clock_ref.start_us() * 1000) - base_time_ns
        return offset_ns + np.rint(elapsed_us * 1000).astype(np.int64)

    def pop_of(self, push_rows: np.ndarray) -> np.ndarray:
        """The row of each push's pop (same handle), or -1 where it never came."""
        pop_rows = np.flatnonzero(self.kinds == "pop")
        if not len(pop_rows):
            return np.full(len(push_rows), -1, np.int64)
        by_handle = pop_rows[np.argsort(self.handles[pop_rows], kind="stable")]
        sorted_handles = self.handles[by_handle]
        position = np.minimum(np.searchsorted(sorted_handles, self.handles[push_rows]),
                              len(by_handle) - 1)
        found = sorted_handles[position] == self.handles[push_rows]
        return np.where(found, by_handle[position], -1)


# Ranges the recorder opens itself (anchors, warm-ups): never shown as the user's ops.
PROFILER_RANGE_PREFIX = "nbprof::"
LATE_ANCHOR_NS = 50_000  # an anchor error beyond this is worth a note (expected: a few us)


def legacy_records_to_trace(thread_lists, *, anchor_name: str, base_time_ns: int,
                            starting_thread: Thread, record_shapes: bool = False,
                            with_stack: bool = False, meta: dict | None = None) -> Trace:
    """A Trace with a GPU interval (kind ``op``) for every op whose records carry CUDA events.

    ``thread_lists``: what ``_disable_profiler_legacy()`` returns, one list of records per
    profiler thread. ``anchor_name``: the name of the empty record_function opened on each
    device right after enabling (and again at stop, for the drift fit: see gpu_clock.py).
    ``starting_thread``: the Thread that enabled the profiler (legacy records carry only torch's
    small thread ids, not OS ids). ``meta["gpu_clock"]`` gets each anchored device's clock.
    """
    meta = _with_base(meta, base_time_ns)
    records = [record for records in thread_lists for record in records]
    if not records:
        return Trace.empty(meta)
    table = _LegacyRecords(records)
    cpu_ns = table.cpu_ns(base_time_ns)
    is_push = table.kinds == "push"
    is_anchor = is_push & (table.names == anchor_name)
    own = np.fromiter((name == anchor_name or name.startswith(PROFILER_RANGE_PREFIX)
                       for name in table.names), np.bool_, len(records))
    push_rows = np.flatnonzero(is_push & ~own)
    pop_rows = table.pop_of(push_rows)
    unmatched = pop_rows < 0  # still open when profiling stopped (e.g. interrupted)
    start_ns = cpu_ns[push_rows]
    end_ns = np.where(unmatched, start_ns, cpu_ns[np.maximum(pop_rows, 0)])
    marks = np.flatnonzero((table.kinds == "mark") & (table.names == "__start_profile"))
    # __start_profile is marked on the thread that enabled profiling.
    starting_id = int(table.thread_ids[marks[0] if len(marks) else 0])

    gpu_ns, placed, clocks = place_cuda_events(records, cpu_ns, table.devices, table.has_cuda,
                                               np.flatnonzero(is_anchor))
    gpu, counts = _gpu_intervals(table, push_rows, pop_rows, gpu_ns, placed)
    if clocks:
        meta["gpu_clock"] = clocks
    meta["notes"] = [*meta["notes"], *gpu_interval_notes(clocks, int(unmatched.sum()), counts)]

    name_id, names = intern_names(table.names[push_rows].tolist())
    thread, threads = _legacy_threads(table.thread_ids[push_rows], starting_id, starting_thread)
    extras = {}
    record_type = type(table.records[0])
    pushes = [table.records[row] for row in push_rows] if record_shapes or with_stack else []
    if record_shapes:
        extras["shapes"] = sparse_rows(map(record_type.shapes, pushes))
    if with_stack:
        extras["stacks"] = sparse_rows(map(record_type.stack, pushes), tuple)
    gpu_op_rows, gpu_start_ns, gpu_end_ns, gpu_device = gpu
    count = len(gpu_op_rows)
    return Trace.build(
        start_ns=start_ns, end_ns=end_ns, thread=thread, name_id=name_id, names=names,
        threads=threads, meta=meta, gpu_start_ns=gpu_start_ns, gpu_end_ns=gpu_end_ns,
        gpu_name_id=name_id[gpu_op_rows], gpu_device=gpu_device,
        gpu_stream=np.zeros(count, np.int32),  # the legacy records do not say which stream
        gpu_launch=gpu_op_rows, gpu_kind=np.full(count, KIND_OP, np.uint8), **extras)


def gpu_interval_notes(clocks: dict, unmatched: int, counts: dict) -> list[str]:
    """What the notes say about a CUDA-event path (torch's legacy one or the native recorder's):
    the clocks and every op left without an interval, counted by why."""
    notes = []
    unfitted = sorted(device for device, clock in clocks.items() if clock["drift_ppm"] is None)
    if unfitted:
        notes.append(f"GPU {', '.join(map(str, unfitted))}: one anchor, so the GPU clock's drift "
                     "against the CPU clock is not corrected (~tens of us per second).")
    first_used = sorted(device for device, clock in clocks.items()
                        if clock.get("first_event_anchor"))
    if first_used:
        notes.append(f"GPU {', '.join(map(str, first_used))}: first used inside the block, so "
                     "its first CUDA event (on the then idle device) is its start anchor.")
    late = {device: clock["anchor_error_ns"] for device, clock in clocks.items()
            if clock["anchor_error_ns"] > LATE_ANCHOR_NS}
    for device, error_ns in late.items():
        notes.append(f"GPU {device}: its anchor was {error_ns / 1e3:.1f} us late (the records "
                     "prove it: events cannot complete before they are recorded); shifted.")
    if unmatched:
        notes.append(f"{unmatched} ops had not ended when profiling stopped: shown "
                     "with no length.")
    if counts["async"]:
        notes.append(f"{counts['async']} async or cross-thread ranges: CPU time only (their CUDA "
                     "events do not bracket one op's GPU work).")
    if counts["no_event"]:
        notes.append(f"{counts['no_event']} ops had CUDA events torch could not time: no GPU "
                     "interval.")
    if counts["no_anchor"]:
        notes.append(f"{counts['no_anchor']} ops ran on a device without an anchor: no GPU "
                     "interval.")
    if counts["negative"]:
        notes.append(f"{counts['negative']} ops' CUDA events ended before they started (the "
                     "current stream changed inside the op): no GPU interval.")
    return notes


def _gpu_intervals(table: _LegacyRecords, push_rows, pop_rows, gpu_ns, placed):
    """Each op's GPU interval from its push's and pop's placed events (gpu_clock.py), in columns.
    Left out, and counted for the notes: async ranges and pops on another thread (torch's own
    parser gives them CPU time only), events on two devices or not timed, no anchor, and
    intervals that end before they start (never clamped: that would invent GPU time)."""
    pop_rows = np.asarray(pop_rows, np.int64)
    pops = np.maximum(pop_rows, 0)
    has_events = (pop_rows >= 0) & table.has_cuda[push_rows]
    is_async = table.is_async[push_rows] | (table.thread_ids[push_rows] != table.thread_ids[pops])
    async_ = has_events & is_async
    candidate = has_events & ~is_async
    anchored = np.isin(table.devices[push_rows], table.devices[placed])
    no_anchor = candidate & ~anchored
    timed = (candidate & anchored & placed[push_rows] & placed[pops]
             & (table.devices[push_rows] == table.devices[pops]))
    no_event = candidate & anchored & ~timed
    negative = timed & (gpu_ns[pops] < gpu_ns[push_rows])
    op_rows = np.flatnonzero(timed & ~negative)
    gpu = (op_rows.astype(np.int32), gpu_ns[push_rows[op_rows]], gpu_ns[pops[op_rows]],
           table.devices[push_rows[op_rows]].astype(np.int16))
    counts = {"async": int(async_.sum()), "no_anchor": int(no_anchor.sum()),
              "no_event": int(no_event.sum()), "negative": int(negative.sum())}
    return gpu, counts


def _legacy_threads(profiler_ids: np.ndarray, starting_id: int, starting_thread: Thread):
    # Only the starting thread's OS id is known; torch's own threads (autograd's per-device
    # workers, which inherit the legacy profiler) keep torch's small id as their tid.
    thread_names = {starting_id: starting_thread.name}
    thread_names.update({int(tid): f"torch thread {int(tid)} (autograd worker)"
                         for tid in np.unique(profiler_ids) if tid != starting_id})
    thread, threads = _thread_table(profiler_ids, thread_names, starting_thread.pid, starting_id)
    return thread, [starting_thread if t.tid == starting_id else t for t in threads]
