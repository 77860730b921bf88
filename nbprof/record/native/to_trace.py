"""Native records -> :class:`nbprof.Trace`, in numpy: no Python object per op.

Pure: no torch, no clocks. Names are interned across the threads' tables (each thread keeps its
own), nbprof's own ranges (``nbprof::``, the overhead calibration) are left out, and each thread
table entry becomes a lane (the starting thread first, as on the Kineto path). Backward nodes
carry their link to the forward op as args (``Sequence number``, ``Fwd thread id``: Kineto's
names), as do the forward ops they link to.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...model import KIND_OP, Thread, Trace
from ..convert import CPU_CATEGORIES, PROFILER_RANGE_PREFIX, drop_profiler_frames, \
    gpu_interval_notes, keep_users_frames
from ..gpu_clock import place_event_offsets
from .kernel_links import observer_marks, with_cuda_activity
from .records import FLAG_ASYNC, FLAG_CAPTURING, FLAG_ENDED, FLAG_GPU_END, FLAG_GPU_ERROR, \
    FLAG_OTHER_THREAD, SCOPE_BACKWARD, SCOPE_FUNCTION, SCOPE_USER, NativeRecords


def _interned(records: NativeRecords):
    """Global name ids for the per-thread name ids, the names, and which ids are nbprof's own."""
    table: dict[str, int] = {}
    remap = np.fromiter((table.setdefault(name, len(table)) for name in records.names),
                        np.int32, len(records.names))
    names = list(table)
    own = np.fromiter((name.startswith(PROFILER_RANGE_PREFIX) for name in names), np.bool_,
                      len(names))
    return remap, names, own


def _lanes(records: NativeRecords, keep: np.ndarray, thread_names: dict, pid: int,
           first_tid: int | None, python_tids=()):
    """Lane per thread table entry (entries of one OS thread share it), the Thread list, for
    the threads with rows kept (one that ran only nbprof's own ranges has no lane) or Python
    frames (``python_tids``), and each OS thread's lane."""
    count = len(records.os_tids)
    # the rows come thread after thread (observer.cpp's read): counts without a pass over them
    rows = np.diff(np.searchsorted(records.thread, np.arange(count + 1)))
    rows -= np.bincount(records.thread[~keep], minlength=count)[:count]
    tids = [int(tid) for tid in records.os_tids]
    ordered = sorted({tid for tid, kept in zip(tids, rows.tolist()) if kept} | set(python_tids))
    if first_tid in ordered:
        ordered.remove(first_tid)
        ordered.insert(0, first_tid)
    lane_of_tid = {tid: lane for lane, tid in enumerate(ordered)}
    lane = np.array([lane_of_tid.get(tid, 0) for tid in tids], np.int32)
    threads = [Thread(pid, tid, thread_names.get(tid, f"thread {tid}")) for tid in ordered]
    return lane, threads, lane_of_tid


class _Rows(NamedTuple):  # convert.py's filters read and rebuild these fields (CpuRecords')
    names: list
    start_ns: np.ndarray
    end_ns: np.ndarray
    tid: np.ndarray
    is_annotation: np.ndarray
    is_python: np.ndarray
    shapes: dict
    stacks: dict
    cuda_us: None


def _users_python_frames(records: NativeRecords, rows) -> _Rows:
    """with_stack's Python calls that torch's path would show: the user's frames and the calls
    they made, never nbprof's own (convert.py's filters, over the calls and the kept ops, which
    decide what encloses what), notebook cells named as the user knows them."""
    python = records.python
    ops = len(records.start_ns[rows])
    count = len(python)
    both = _Rows(
        names=[python.names[index] for index in python.name.tolist()] + [""] * ops,
        start_ns=np.concatenate([python.start_ns, records.start_ns[rows]]),
        end_ns=np.concatenate([python.end_ns, records.end_ns[rows]]),
        tid=np.concatenate([python.os_tid, records.os_tids[records.thread[rows]]]),
        is_annotation=np.zeros(count + ops, np.bool_),
        is_python=np.arange(count + ops) < count, shapes={}, stacks={}, cuda_us=None)
    kept = keep_users_frames(drop_profiler_frames(both))
    frames = np.flatnonzero(kept.is_python)
    return _Rows(names=[kept.names[row] for row in frames.tolist()],
                 start_ns=kept.start_ns[frames], end_ns=kept.end_ns[frames],
                 tid=kept.tid[frames], is_annotation=kept.is_annotation[frames],
                 is_python=kept.is_python[frames], shapes={}, stacks={}, cuda_us=None)


def _backward_links(records: NativeRecords, keep: np.ndarray) -> dict:
    """Args for backward nodes and the forward ops they come from: a backward node's
    (forward thread, sequence number) is its forward op's (thread, sequence number)."""
    scope, seq = records.scope, records.seq
    backward = np.flatnonzero(keep & (scope == SCOPE_BACKWARD) & (seq >= 0))
    if not len(backward):
        return {}
    rf_tid = records.rf_tids[records.thread]
    forward = np.flatnonzero(keep & (scope == SCOPE_FUNCTION) & (seq >= 0))
    wanted = np.unique(np.stack([records.fwd_tid[backward], seq[backward]], axis=1), axis=0)
    keys = np.stack([rf_tid[forward], seq[forward]], axis=1)
    linked = forward[np.isin(keys[:, 0] * (1 << 40) + keys[:, 1],
                             wanted[:, 0] * (1 << 40) + wanted[:, 1])]
    args = {int(row): {"Sequence number": int(seq[row])} for row in linked}
    args.update({int(row): {"Sequence number": int(seq[row]),
                            "Fwd thread id": int(records.fwd_tid[row])} for row in backward})
    return args


def _gpu_intervals(records: NativeRecords, keep: np.ndarray, base_time_ns: int, meta: dict) -> dict:
    """Trace.build's GPU columns for the kept rows with both events placed on the CPU clock
    (gpu_clock.py: anchors, drift, the anchor error the records prove), rows in the original
    numbering (the caller renumbers), from ``base_time_ns`` (gpu_clock's float64 arithmetic
    keeps ns only on times near 0, not on Unix-epoch ns); ``meta`` gets the clocks and notes."""
    gpu, count = records.gpu, len(records)
    anchors = len(gpu.anchor_cpu_ns)
    gpu_ns, placed, clocks = place_event_offsets(
        np.concatenate([records.start_ns, records.end_ns, gpu.anchor_cpu_ns]) - base_time_ns,
        np.concatenate([gpu.device, gpu.device, gpu.anchor_device]).astype(np.int64),
        np.concatenate([gpu.start_offset_ns, gpu.end_offset_ns, gpu.anchor_offset_ns]),
        np.arange(2 * count, 2 * count + anchors))
    start_ns, end_ns = gpu_ns[:count], gpu_ns[count:2 * count]
    has_events = keep & (gpu.device >= 0)
    crossed = has_events & ((records.flags & (FLAG_ASYNC | FLAG_OTHER_THREAD)) != 0)
    candidate = has_events & ~crossed
    anchored = np.isin(gpu.device, gpu.anchor_device)
    timed = candidate & anchored & placed[:count] & placed[count:2 * count]
    negative = timed & (end_ns < start_ns)
    rows = np.flatnonzero(timed & ~negative)
    if clocks:
        meta["gpu_clock"] = clocks
    # an op whose end event was never recorded (still open at the stop, a capture began inside
    # it, CUDA refused it) is noted for that reason, not as one torch could not time
    unrecorded = ((records.flags & FLAG_ENDED) == 0) | (
        (records.flags & (FLAG_CAPTURING | FLAG_GPU_ERROR)) != 0)
    counts = {"async": int(crossed.sum()), "no_anchor": int((candidate & ~anchored).sum()),
              "no_event": int((candidate & anchored & ~timed & ~unrecorded).sum()),
              "negative": int(negative.sum())}
    # where no time was placed at all, its one reason says it (every op lacks its anchor)
    notes = [] if gpu.error else gpu_interval_notes(clocks, 0, counts)
    captured = int((keep & ((records.flags & FLAG_CAPTURING) != 0)).sum())
    if captured:
        notes.append(f"{captured} ops ran while their stream captured a CUDA graph: no CUDA "
                     "event was recorded for them (none can be timed there).")
    failed = int((keep & ((records.flags & FLAG_GPU_ERROR) != 0)).sum())
    if failed:
        notes.append(f"{failed} ops' CUDA events could not be recorded: no GPU interval.")
    if gpu.error:
        notes.append(f"No GPU time was placed: {gpu.error}")
    meta["notes"].extend(notes)
    # streams as small numbers per profile, the default stream (id 0) first
    _, stream = np.unique(gpu.stream[rows], return_inverse=True)
    return dict(gpu_start_ns=start_ns[rows], gpu_end_ns=end_ns[rows],
                gpu_device=gpu.device[rows].astype(np.int16), gpu_stream=stream.astype(np.int32),
                gpu_launch=rows, gpu_kind=np.full(len(rows), KIND_OP, np.uint8))


def _observer_marks(records: NativeRecords) -> dict:
    """Where the observer made CUDA calls of its own (kernel_links.observer_marks): after each
    op's start where it tried to record an event, and after its end where it recorded one."""
    if records.gpu is None or not len(records):
        return {}
    tried = (records.gpu.device >= 0) | ((records.flags & (FLAG_CAPTURING | FLAG_GPU_ERROR)) != 0)
    ended = (records.flags & FLAG_GPU_END) != 0
    return observer_marks(records.os_tids[records.thread], records.start_ns, records.end_ns,
                          tried, ended)


def native_records_to_trace(records: NativeRecords, *, base_time_ns: int, thread_names: dict,
                            pid: int, first_tid: int | None = None,
                            meta: dict | None = None, cuda=None, windows=()) -> Trace:
    """A Trace of the native records: times from ``base_time_ns``, nbprof's own ranges left
    out, ops still open at stop with no length and counted in ``meta["notes"]``. ``cuda``: what
    a CUDA-only Kineto session recorded beside them (KinetoRecords), linked to the ops by
    kernel_links.py, leaving out the calls inside ``windows`` ((tid, start, end), epoch ns)."""
    if cuda is not None:
        marks = _observer_marks(records)
        trace = native_records_to_trace(records, base_time_ns=base_time_ns,
                                        thread_names=thread_names, pid=pid, first_tid=first_tid,
                                        meta=meta)
        return with_cuda_activity(trace, cuda, base_time_ns=base_time_ns, marks=marks,
                                  windows=windows, thread_names=thread_names, pid=pid)
    meta = dict(meta or {})
    meta["base_time_ns"] = int(base_time_ns)
    notes = meta.setdefault("notes", [])
    if not len(records):
        return Trace.empty(meta)
    remap, names, own = _interned(records)
    name_id = remap[records.name]
    keep = ~own[name_id]
    open_ops = int((keep & ((records.flags & FLAG_ENDED) == 0)).sum())
    if open_ops:
        notes.append(f"{open_ops} ops had not ended when profiling stopped: shown with no length.")
    crossed = int((keep & ((records.flags & (FLAG_ASYNC | FLAG_OTHER_THREAD)) != 0)).sum())
    if crossed:
        meta["async_ranges"] = crossed
    frames = None if records.python is None else _users_python_frames(
        records, slice(None) if keep.all() else np.flatnonzero(keep))
    lane, threads, lane_of_tid = _lanes(records, keep, thread_names, pid, first_tid,
                                        () if frames is None else set(frames.tid.tolist()))
    args = _backward_links(records, keep)
    gpu = _gpu_intervals(records, keep, base_time_ns, meta) if records.gpu is not None else {}
    shapes = records.shapes
    rows = slice(None)  # every row: no copies of a 10M-row profile's columns
    if not keep.all():
        rows = np.flatnonzero(keep)
        new_row = np.cumsum(keep) - 1
        args = {int(new_row[row]): value for row, value in args.items() if keep[row]}
        shapes = {int(new_row[row]): value for row, value in shapes.items() if keep[row]}
        if gpu:
            gpu["gpu_launch"] = new_row[gpu["gpu_launch"]]
    category = (records.scope[rows] == SCOPE_USER).astype(np.uint8)  # 1: user_annotation
    name_id = (np.cumsum(~own, dtype=np.int32) - 1)[name_id[rows]]  # own names leave the table
    names = [name for name, is_own in zip(names, own.tolist()) if not is_own]
    # in place: the records are the caller's to drop, and a 10M-op profile's peak counts copies
    records.start_ns.__isub__(base_time_ns)
    records.end_ns.__isub__(base_time_ns)
    if gpu:
        gpu["gpu_launch"] = gpu["gpu_launch"].astype(np.int32)
        gpu["gpu_name_id"] = name_id[gpu["gpu_launch"]]
    columns = dict(start_ns=records.start_ns[rows], end_ns=records.end_ns[rows],
                   thread=lane[records.thread[rows]], name_id=name_id, category=category)
    if frames is not None:  # after the ops: sparse args and GPU launches keep their row numbers
        frame_id, frame_names = np.unique(np.array(frames.names, dtype=object),
                                          return_inverse=True)
        python = {"start_ns": frames.start_ns - base_time_ns,
                  "end_ns": frames.end_ns - base_time_ns,
                  "thread": np.array([lane_of_tid[tid] for tid in frames.tid.tolist()], np.int32),
                  "name_id": len(names) + frame_names.astype(np.int32),
                  "category": np.full(len(frames.start_ns), CPU_CATEGORIES.index("python_function"),
                                      np.uint8)}
        columns = {key: np.concatenate([value, python[key]]) for key, value in columns.items()}
        names = names + frame_id.tolist()
    trace = Trace.build(**columns, names=names, threads=threads, categories=CPU_CATEGORIES,
                        meta=meta, event_args=args or None, shapes=shapes, **gpu)
    if frames is not None:
        trace.stacks = stacks_by_time(trace)
    return trace


def stacks_by_time(trace: Trace) -> dict:
    """Each op's Python stack, innermost frame first: the frames of its thread that were running
    when it started. By time, not through the nesting (convert.py's python_stacks): a
    record_function range opens inside Python calls that return before it ends (its
    ``__enter__``), and the ops inside it ran in the frames that called them, not in those."""
    python = CPU_CATEGORIES.index("python_function")
    is_python = (trace.category == python).tolist()
    names, name_id = trace.names, trace.name_id.tolist()
    starts, ends, threads = trace.start_ns.tolist(), trace.end_ns.tolist(), trace.thread.tolist()
    running: dict[int, list] = {}  # thread -> (end, frames) of its running frames, outermost first
    stacks = {}
    for row, start in enumerate(starts):  # in start order, enclosing frames first on ties
        frames = running.setdefault(threads[row], [])
        while frames and frames[-1][0] < start:
            frames.pop()  # returned before this row started (frames of a thread nest)
        if is_python[row]:
            frames.append((ends[row], (names[name_id[row]],) + (frames[-1][1] if frames else ())))
        elif frames:
            stacks[row] = frames[-1][1]
    return stacks
