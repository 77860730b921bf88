"""CUPTI's GPU work linked to the native recorder's ops. Pure: numpy and the model, no torch.

With ``recorder="native"`` and kernels, a Kineto session with the CUDA activity only runs beside
the observer: no second RecordFunction callback per op (Kineto's CPU side), only CUPTI. It
records each runtime or driver call (cudaLaunchKernel, cuLaunchKernel, cudaMemcpyAsync...) with
its OS thread id, times and CUPTI's correlation id, and each kernel, memcpy and memset with the
same correlation id. torch's op correlation (the files' "External id", ``linked_correlation_id``)
exists only with Kineto's CPU side, so a GPU activity is linked through its call: to the
innermost native op on the call's thread whose interval holds the call.

Clocks: both sides read the TSC (``c10::getApproximateTime``, which Kineto installs as CUPTI's
timestamp source) and turn it into Unix-epoch ns, each through its own
``ApproximateClockToUnixTimeConverter``, fitted over nearly the same span: they may differ by
about a microsecond. The call's midpoint is what is placed: a launch takes microseconds, so its
midpoint stays inside the op that made it. Thread ids: CUPTI's rows carry the OS thread id (in
Kineto's files the main thread's equals the pid), as the observer's records do.

The observer's own CUDA calls (a ``cudaStreamIsCapturing`` and a ``cudaEventRecord`` right after
the CPU time of each op's start and end that records an event) are left out of the view, as the
legacy stub's are on torch's path (own_cuda_calls.py); so is everything inside nbprof's own
windows (anchors, calibration).
"""

from __future__ import annotations

import numpy as np

from ...model import GPU_KINDS, NO_ID, Thread, Trace
from ..match_events import is_runtime_call
from ..own_cuda_calls import own_cuda_calls

# What gpu_events.cpp calls through CUDA, after the CPU time it records: in this order
OBSERVER_CALLS = ("cudaStreamIsCapturing", "cudaEventRecord")


def innermost_ops(op_tid, op_start_ns, op_end_ns, tid, time_ns) -> np.ndarray:
    """For each point (``tid``, ``time_ns``), the innermost op of that thread whose interval
    holds it (start <= time <= end), as a row of the op columns; -1 where none does.

    Ops of one thread nest (a stack); per thread, the last op that started at or before the
    point is the innermost if it is still open there, else one of its ancestors is: parents are
    walked up for every point at once, one level per step."""
    op_tid, tid = np.asarray(op_tid, np.int64), np.asarray(tid, np.int64)
    op_start_ns, op_end_ns = np.asarray(op_start_ns, np.int64), np.asarray(op_end_ns, np.int64)
    time_ns = np.asarray(time_ns, np.int64)
    found = np.full(len(tid), -1, np.int64)
    if not len(op_tid) or not len(tid):
        return found
    # by thread, then start; the enclosing op first on ties (as Trace.build orders them)
    order = np.lexsort((-(op_end_ns - op_start_ns), op_start_ns, op_tid))
    sorted_tid, sorted_start = op_tid[order], op_start_ns[order]
    sorted_end = op_end_ns[order]
    parent = _parents_by_thread(sorted_tid, sorted_start, sorted_end)
    candidate = np.full(len(tid), -1, np.int64)
    for thread in np.unique(tid).tolist():
        first, last = np.searchsorted(sorted_tid, [thread, thread + 1])
        points = np.flatnonzero(tid == thread)
        if first == last:
            continue
        at = np.searchsorted(sorted_start[first:last], time_ns[points], side="right") - 1
        candidate[points] = np.where(at >= 0, at + first, -1)
    # walk up while the candidate ended before the point
    pending = np.flatnonzero(candidate >= 0)
    while len(pending):
        closed = sorted_end[candidate[pending]] < time_ns[pending]
        done = pending[~closed]
        found[done] = order[candidate[done]]
        pending = pending[closed]
        candidate[pending] = parent[candidate[pending]]
        pending = pending[candidate[pending] >= 0]
    return found


def _parents_by_thread(sorted_tid, sorted_start, sorted_end) -> np.ndarray:
    """Each op's parent row, for ops sorted by thread, then start: nest() (the model's stack
    per thread) over each thread's block, its parents offset to the block's place."""
    from ...model.nesting import nest

    parent = np.full(len(sorted_tid), -1, np.int64)
    bounds = np.r_[0, np.flatnonzero(np.diff(sorted_tid)) + 1, len(sorted_tid)]
    for first, last in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        _, block, _ = nest(sorted_start[first:last], sorted_end[first:last],
                           np.zeros(last - first, np.int32))
        parent[first:last] = np.where(block >= 0, block.astype(np.int64) + first, -1)
    return parent


def calls_of(activity_correlation, call_correlation) -> np.ndarray:
    """For each GPU activity, the row of the call with the same CUPTI correlation id (-1: none;
    0 is no id). A call launches one activity or several (a graph launch: many kernels)."""
    activity_correlation = np.asarray(activity_correlation, np.int64)
    call_correlation = np.asarray(call_correlation, np.int64)
    found = np.full(len(activity_correlation), -1, np.int64)
    if not len(call_correlation) or not len(activity_correlation):
        return found
    order = np.argsort(call_correlation, kind="stable")
    sorted_ids = call_correlation[order]
    at = np.minimum(np.searchsorted(sorted_ids, activity_correlation), len(order) - 1)
    hit = (sorted_ids[at] == activity_correlation) & (activity_correlation > 0)
    found[hit] = order[at[hit]]
    return found


def observer_marks(tid, start_ns, end_ns, start_recorded, end_recorded) -> dict:
    """OS tid -> sorted epoch ns after which the observer made its own CUDA calls: each op's
    start where it tried to record an event there, and its end likewise."""
    tid = np.asarray(tid, np.int64)
    times = np.concatenate([np.asarray(start_ns, np.int64)[start_recorded],
                            np.asarray(end_ns, np.int64)[end_recorded]])
    tids = np.concatenate([tid[start_recorded], tid[end_recorded]])
    return {int(thread): np.sort(times[tids == thread]) for thread in np.unique(tids).tolist()}


def with_cuda_activity(trace: Trace, kineto, *, base_time_ns: int, marks: dict | None = None,
                       windows=(), thread_names: dict | None = None, pid: int = 0) -> Trace:
    """``trace`` (the native ops, ns from ``base_time_ns``) with what a CUDA-only Kineto session
    recorded (:class:`nbprof.record.kineto_cpu.KinetoRecords`, epoch ns): the runtime and
    driver calls as rows on their threads' lanes (a new lane for a thread without ops), and the
    kernels, memcpys and memsets as GPU rows launched by the innermost op around their call (the
    call itself where no op holds it), ``gpu_call`` the call. ``marks`` (:func:`observer_marks`)
    and ``windows`` ((tid, start, end), epoch ns) find the observer's and nbprof's own calls,
    which are left out; ``meta["own_cuda_calls"]`` counts them."""
    calls, devices = kineto.cpu, kineto.devices
    own = own_cuda_calls(calls.names, calls.start_ns, calls.tid, event_times=marks or {},
                         windows=windows, calls_after=OBSERVER_CALLS, calls_before=())
    # a CUDA-only session's CPU side is CUPTI's calls; anything else is no launch of the user's
    calls_only = np.fromiter(map(is_runtime_call, calls.names), np.bool_, len(calls.names))
    keep = np.flatnonzero(~own & calls_only)
    call_tid = np.asarray(calls.tid, np.int64)[keep]
    call_start = np.asarray(calls.start_ns, np.int64)[keep] - base_time_ns
    call_end = np.asarray(calls.end_ns, np.int64)[keep] - base_time_ns
    call_names = [calls.names[row] for row in keep.tolist()]
    call_correlation = np.asarray(kineto.correlation, np.int64)[keep]

    threads = list(trace.threads)
    lane_of_tid = {thread.tid: lane for lane, thread in enumerate(threads)}
    for thread in sorted(set(call_tid.tolist()) - set(lane_of_tid)):
        lane_of_tid[thread] = len(threads)
        threads.append(Thread(pid, thread, (thread_names or {}).get(thread, f"thread {thread}")))
    lane_tids = np.asarray([thread.tid for thread in trace.threads], np.int64)
    op_of_call = innermost_ops(lane_tids[trace.thread] if len(trace) else np.zeros(0, np.int64),
                               trace.start_ns, trace.end_ns, call_tid, (call_start + call_end) // 2)

    count = len(trace)
    call = calls_of(devices.runtime_correlation if devices.runtime_correlation is not None
                    else np.zeros(len(devices.names), np.int64), call_correlation)
    has_call = call >= 0
    by_op = np.where(has_call, op_of_call[np.maximum(call, 0)], -1)
    launch = np.where(by_op >= 0, by_op, np.where(has_call, count + call, NO_ID))
    names = list(trace.names)
    table = {name: index for index, name in enumerate(names)}

    def name_ids(values):
        return np.fromiter((table.setdefault(name, len(table)) for name in values), np.int32,
                           len(values))

    call_name_id = name_ids(call_names)
    kernel_name_id = name_ids(devices.names)
    names = list(table)
    kinds = np.asarray([GPU_KINDS.index(kind) for kind in devices.kinds], np.uint8)
    gpu = len(trace.gpu_start_ns)
    # the event intervals' streams are numbered per profile (0, 1...), CUPTI's are CUDA's ids
    # (7 for the default stream): past CUPTI's, so that the two never share a lane
    event_stream = trace.gpu_stream.astype(np.int64)
    if len(devices.names) and len(event_stream):
        event_stream = event_stream + int(np.max(devices.stream)) + 1
    meta = dict(trace.meta)
    meta["own_cuda_calls"] = int(own.sum())
    meta["kernels"] = bool(len(devices.names))
    return Trace.build(
        start_ns=np.concatenate([trace.start_ns, call_start]),
        end_ns=np.concatenate([trace.end_ns, call_end]),
        thread=np.concatenate([trace.thread, np.fromiter(
            (lane_of_tid[t] for t in call_tid.tolist()), np.int32, len(call_tid))]),
        name_id=np.concatenate([trace.name_id, call_name_id]), names=names, threads=threads,
        category=np.concatenate([trace.category, np.zeros(len(keep), np.uint8)]),
        categories=trace.categories,
        gpu_start_ns=np.concatenate([trace.gpu_start_ns,
                                     np.asarray(devices.start_ns, np.int64) - base_time_ns]),
        gpu_end_ns=np.concatenate([trace.gpu_end_ns,
                                   np.asarray(devices.end_ns, np.int64) - base_time_ns]),
        gpu_name_id=np.concatenate([trace.gpu_name_id, kernel_name_id]),
        gpu_device=np.concatenate([trace.gpu_device, np.asarray(devices.device, np.int16)]),
        gpu_stream=np.concatenate([event_stream, np.asarray(devices.stream, np.int64)]),
        gpu_launch=np.concatenate([trace.gpu_launch, launch]).astype(np.int32),
        gpu_kind=np.concatenate([trace.gpu_kind, kinds]),
        gpu_call=np.concatenate([trace.gpu_call, np.where(has_call, count + call, NO_ID)]),
        meta=meta, event_args=trace.event_args,
        gpu_args={**trace.gpu_args, **{gpu + row: value for row, value in devices.args.items()}},
        shapes=trace.shapes, stacks=trace.stacks, instants=trace.instants,
        counters=trace.counters)
