"""The profiler's own CUDA runtime calls, found among Kineto's CPU records / CUPTI's runtime rows
so that they are left out of the view. Pure (numpy and numba).

With the legacy CUDA-event profiler running beside Kineto, CUPTI sees every call that torch's
event stub makes at each op's push and pop (torch/csrc/profiler/stubs/cuda.cpp):
``cudaGetDevice``, ``cudaEventCreate``, then the CPU time is read, then ``cudaEventRecord``. The
user's own calls of the same names (``torch.cuda.Event.record()``) must stay, so a call is the
profiler's only when it sits right at a legacy record's CPU time on the same thread, one call of
each name per record: the first ``cudaEventRecord`` at or after that time, the last
``cudaGetDevice`` / ``cudaEventCreate`` before it. Everything inside nbprof's own recorder calls
(the windows of warm-up, anchors and the final synchronize) is the profiler's too.
"""

from __future__ import annotations

import numpy as np
from numba import njit

CALLS_AFTER_THE_TIME = ("cudaEventRecord",)
CALLS_BEFORE_THE_TIME = ("cudaGetDevice", "cudaEventCreate", "cudaEventCreateWithFlags")
TOLERANCE_NS = 2_000  # Kineto's clock and torch's getTime() may differ by a microsecond or so
REACH_NS = 20_000  # how far from the record's time its own call may lie


def own_cuda_calls(names, start_ns, tid, *, event_times: dict, windows=(),
                   tolerance_ns: int = TOLERANCE_NS, reach_ns: int = REACH_NS,
                   calls_after=CALLS_AFTER_THE_TIME, calls_before=CALLS_BEFORE_THE_TIME
                   ) -> np.ndarray:
    """A mask of the rows that are the profiler's own (True: leave out).

    ``names``, ``start_ns``, ``tid``: the rows (Kineto CPU records or CUPTI runtime rows; epoch ns,
    OS thread ids). ``event_times``: OS tid -> the CPU times (epoch ns) of that thread's legacy
    records that carry a CUDA event (:func:`legacy_event_times`, keyed through the match of
    legacy thread ids to OS tids). ``windows``: ``(tid, start_ns, end_ns)`` of nbprof's own
    recorder calls; every row of that thread that starts inside one is the profiler's.
    ``calls_after`` / ``calls_before``: the names its event recording calls right after / before
    each of those times (the legacy stub's by default; the native observer's differ).
    """
    start_ns = np.asarray(start_ns, np.int64)
    tid = np.asarray(tid, np.int64)
    own = np.zeros(len(start_ns), np.bool_)
    for window_tid, window_start, window_end in windows:
        own |= (tid == window_tid) & (start_ns >= window_start) & (start_ns <= window_end)
    if not event_times or not len(start_ns):
        return own
    mark_tid = np.concatenate([np.full(len(times), t, np.int64) for t, times in event_times.items()])
    mark_ns = np.concatenate([np.asarray(times, np.int64) for times in event_times.values()])
    order = np.lexsort((mark_ns, mark_tid))
    mark_tid, mark_ns = mark_tid[order], mark_ns[order]
    names = np.asarray(names, dtype=object)
    for name in (*calls_after, *calls_before):
        rows = np.flatnonzero((names == name) & ~own)
        if not len(rows):
            continue
        rows = rows[np.lexsort((start_ns[rows], tid[rows]))]
        if name in calls_after:
            claimed = _claim_first_after(tid[rows], start_ns[rows], mark_tid, mark_ns,
                                         tolerance_ns, reach_ns)
        else:  # the same walk backwards in time: the last call before each record's time
            claimed = _claim_first_after(-tid[rows][::-1], -start_ns[rows][::-1],
                                         -mark_tid[::-1], -mark_ns[::-1], tolerance_ns,
                                         reach_ns)[::-1]
        own[rows[claimed]] = True
    return own


@njit(cache=True)
def _claim_first_after(call_tid, call_ns, mark_tid, mark_ns, tolerance_ns, reach_ns):
    # Both sorted by (tid, time). Each mark claims the first unclaimed call of its thread that
    # starts in [mark - tolerance, mark + reach]: one call per record, in time order.
    claimed = np.zeros(len(call_ns), np.bool_)
    j = 0
    for k in range(len(mark_ns)):
        while j < len(call_ns) and (call_tid[j] < mark_tid[k] or (
                call_tid[j] == mark_tid[k] and call_ns[j] < mark_ns[k] - tolerance_ns)):
            j += 1
        if j < len(call_ns) and call_tid[j] == mark_tid[k] and \
                call_ns[j] <= mark_ns[k] + reach_ns:
            claimed[j] = True
            j += 1
    return claimed


def legacy_event_times(thread_lists) -> dict:
    """Legacy thread id -> sorted epoch ns of its records that carry a CUDA event (pushes and
    pops), for :func:`own_cuda_calls` once the ids are mapped to OS tids. ``start_us()`` is a
    double of epoch microseconds: ~0.25 us, well inside the tolerance."""
    times: dict = {}
    for records in thread_lists:
        for record in records:
            if record.has_cuda():
                times.setdefault(record.thread_id(), []).append(round(record.start_us() * 1000))
    return {thread: np.sort(np.asarray(ns, np.int64)) for thread, ns in times.items()}
