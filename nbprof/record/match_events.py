"""Kineto's ops + the legacy profiler's CUDA-event intervals + CUPTI's kernels -> one Trace.

On a GPU both of torch's profilers record at once (record/cuda_events.py): Kineto sees every
thread's ops (and, with CUPTI, every kernel, memcpy and memset, each with the correlation id of
the op that launched it); the legacy profiler sees the starting thread and autograd's threads,
with a CUDA event pair per op. Each side is converted by nbprof.record.convert; this module joins them.
Pure: numpy and the model only.

- An op's event interval is moved onto its Kineto twin, matched per thread by name and order:
  the k-th ``aten::mm`` of a thread on one side is the k-th on the other. Where a thread's count
  of a name differs (an op one side missed), that name is matched by time instead, each op to
  its nearest namesake when that one is nearest to it too; the rest are counted, never guessed.
- The legacy profiler's own CUDA calls are left out before this (convert.drop_own_cuda_calls).
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

from ..model import GPU_KINDS, KIND_OP, NO_ID, Trace

# CUDA runtime and driver calls as Kineto names them (cudaLaunchKernel, cuLaunchKernel, ...): no
# legacy record has such a name, so they are not matched.
_RUNTIME_CALL = re.compile(r"^cu(da)?[A-Z]\w*$")


def is_runtime_call(name: str) -> bool:
    return bool(_RUNTIME_CALL.match(name))


def match_by_name_and_order(left_key, left_names, left_start, right_key, right_names,
                            right_start) -> np.ndarray:
    """For each left row, the right row of the same op (or -1): same key (the OS thread), same
    name, the k-th of its name on both sides; by mutual nearest start time where the counts of
    a (thread, name) differ. Rows are taken in start order within each group."""
    left_key, right_key = np.asarray(left_key, np.int64), np.asarray(right_key, np.int64)
    left_start, right_start = np.asarray(left_start, np.int64), np.asarray(right_start, np.int64)
    groups: dict = {}
    for row, (key, name) in enumerate(zip(left_key.tolist(), left_names)):
        groups.setdefault((key, name), ([], []))[0].append(row)
    for row, (key, name) in enumerate(zip(right_key.tolist(), right_names)):
        group = groups.get((key, name))
        if group is not None:
            group[1].append(row)
    matched = np.full(len(left_key), -1, np.int64)
    for left_rows, right_rows in groups.values():
        if not right_rows:
            continue
        left_rows = np.asarray(left_rows)[np.argsort(left_start[left_rows], kind="stable")]
        right_rows = np.asarray(right_rows)[np.argsort(right_start[right_rows], kind="stable")]
        if len(left_rows) == len(right_rows):
            matched[left_rows] = right_rows
            continue
        pairs = _mutual_nearest(left_start[left_rows], right_start[right_rows])
        matched[left_rows[pairs[0]]] = right_rows[pairs[1]]
    return matched


def _nearest(sorted_times: np.ndarray, times: np.ndarray) -> np.ndarray:
    after = np.clip(np.searchsorted(sorted_times, times), 0, len(sorted_times) - 1)
    before = np.clip(after - 1, 0, len(sorted_times) - 1)
    closer_before = np.abs(sorted_times[before] - times) <= np.abs(sorted_times[after] - times)
    return np.where(closer_before, before, after)


def _mutual_nearest(left_times: np.ndarray, right_times: np.ndarray):
    """Index pairs (into the two sorted arrays) that are each other's nearest."""
    right_of_left = _nearest(right_times, left_times)
    left_of_right = _nearest(left_times, right_times)
    mutual = left_of_right[right_of_left] == np.arange(len(left_times))
    return np.flatnonzero(mutual), right_of_left[mutual]


def rows_in_trace(trace: Trace, tids, start_ns, end_ns, base_time_ns: int) -> np.ndarray:
    """For each record (OS tid, wall-clock start and end), its row in ``trace``, or -1 where the
    conversion dropped it. Records with the same thread and times pair in order: the k-th
    record of a (tid, start, end) is the k-th trace row of it (both keep their input order)."""
    lane_tids = np.asarray([thread.tid for thread in trace.threads], np.int64)
    found = np.full(len(np.asarray(tids)), -1, np.int64)
    if not len(trace) or not len(found):
        return found
    keys = [np.concatenate([lane_tids[trace.thread], np.asarray(tids, np.int64)]),
            np.concatenate([trace.start_ns, np.asarray(start_ns, np.int64) - base_time_ns]),
            np.concatenate([trace.end_ns, np.asarray(end_ns, np.int64) - base_time_ns])]
    # one sort of both sides by (tid, start, end) gives each distinct key a group number; no
    # np.unique(axis=0) (a sort of void records) and no loop in Python over the rows
    order = np.lexsort(keys[::-1])
    new_key = np.ones(len(order), np.bool_)
    for key in keys:
        sorted_key = key[order]
        new_key[1:] &= sorted_key[1:] == sorted_key[:-1]
    new_key = ~new_key
    new_key[0] = True
    group = np.empty(len(order), np.int64)
    group[order] = np.cumsum(new_key) - 1
    trace_group, record_group = group[:len(trace)], group[len(trace):]
    trace_slot = _slots(trace_group)
    record_slot = _slots(record_group, width=trace_slot[1])
    by_slot = np.argsort(trace_slot[0], kind="stable")
    sorted_slots = trace_slot[0][by_slot]
    position = np.minimum(np.searchsorted(sorted_slots, record_slot[0]), len(by_slot) - 1)
    hit = sorted_slots[position] == record_slot[0]
    found[hit] = by_slot[position[hit]]
    return found


def _slots(groups: np.ndarray, width: int | None = None):
    """(group * width + rank of the row among its group's rows in input order, width)."""
    order = np.argsort(groups, kind="stable")
    sorted_groups = groups[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_groups)) + 1]
    first = np.repeat(starts, np.diff(np.r_[starts, len(sorted_groups)]))
    rank = np.empty(len(groups), np.int64)
    rank[order] = np.arange(len(groups)) - first
    if width is None:
        width = int(rank.max()) + 2 if len(rank) else 1
    rank = np.minimum(rank, width - 1)  # a record beyond its group's trace rows: no slot there
    return groups * width + rank, width


def with_gpu(trace: Trace, *, start_ns, end_ns, names, device, stream, launch, kinds,
             args: dict | None = None, meta: dict | None = None) -> Trace:
    """``trace`` with these GPU rows in place of its own (``names``: strings; ``kinds``: names in
    GPU_KINDS; ``launch``: event rows of ``trace`` or NO_ID; ``args``: row -> dict)."""
    table = {name: index for index, name in enumerate(trace.names)}
    all_names = list(trace.names)
    name_id = np.empty(len(names), np.int32)
    for row, name in enumerate(names):
        if name not in table:
            table[name] = len(all_names)
            all_names.append(name)
        name_id[row] = table[name]
    start_ns, end_ns = np.asarray(start_ns, np.int64), np.asarray(end_ns, np.int64)
    order = np.lexsort((end_ns, start_ns))
    new_row = np.empty(len(order), np.int64)
    new_row[order] = np.arange(len(order))
    kind_ids = np.asarray([GPU_KINDS.index(kind) for kind in kinds], np.uint8)
    return Trace(
        start_ns=trace.start_ns, end_ns=trace.end_ns, thread=trace.thread, name_id=trace.name_id,
        category=trace.category, depth=trace.depth, parent=trace.parent, self_ns=trace.self_ns,
        gpu_start_ns=start_ns[order], gpu_end_ns=end_ns[order], gpu_name_id=name_id[order],
        gpu_device=np.asarray(device, np.int16)[order],
        gpu_stream=np.asarray(stream, np.int32)[order],
        gpu_launch=np.asarray(launch, np.int32)[order], gpu_kind=kind_ids[order],
        names=all_names, threads=trace.threads, categories=trace.categories,
        meta=trace.meta if meta is None else meta, event_args=trace.event_args,
        gpu_args={int(new_row[row]): value for row, value in (args or {}).items()},
        shapes=trace.shapes, stacks=trace.stacks, instants=trace.instants,
        counters=trace.counters)


def legacy_lane_os_tids(legacy_trace: Trace, starting_tid: int, os_tids: dict, kineto_names,
                        kineto_tids) -> np.ndarray:
    """OS thread id of each legacy lane. The starting thread's is known; autograd's threads carry
    torch's small profiler id, which Kineto's own rows map to an OS id (``os_tids``). That thread
    is kept while its Kineto rows (``kineto_names``, ``kineto_tids``) hold at least half as many
    of the legacy lane's ops (names counted with their repeats) as the thread that holds the
    most; else that thread is taken. On an H200 the map alone sent a whole backward pass (125
    ops) to a thread holding none of them. No two legacy lanes share a thread; -1 where none is
    left."""
    held_by_tid = _names_by_tid(kineto_names, kineto_tids)
    legacy_names = _names_by_lane(legacy_trace)
    taken = {starting_tid}
    found = []
    for lane, thread in enumerate(legacy_trace.threads):
        if thread.tid == starting_tid:
            found.append(thread.tid)
            continue
        ops = legacy_names.get(lane, Counter())
        scores = {tid: sum(min(count, held[name]) for name, count in ops.items())
                  for tid, held in held_by_tid.items() if tid not in taken}
        mapped = os_tids.get(thread.tid, -1)
        best = max(scores, key=scores.get, default=-1)
        if mapped in scores and scores[mapped] * 2 >= scores.get(best, 0):
            best = mapped
        elif best != -1 and not scores[best]:
            best = mapped if mapped in scores else -1
        taken.add(best)
        found.append(best)
    return np.asarray(found, np.int64)


def _names_by_lane(trace: Trace) -> dict:
    """lane -> Counter of its rows' names."""
    return _counted(trace.thread, trace.name_id, trace.names)


def _names_by_tid(names, tids) -> dict:
    """OS tid -> Counter of the names of its records."""
    from .convert import intern_names

    name_id, table = intern_names(names)
    return _counted(np.asarray(tids, np.int64), name_id, table)


def _counted(keys: np.ndarray, name_id: np.ndarray, names) -> dict:
    """key -> Counter of names, counted by numpy (a loop over the rows was 80 ms of leaving a
    20k-op GPU block)."""
    width = max(len(names), 1)
    pairs, counts = np.unique(np.asarray(keys, np.int64) * width + name_id, return_counts=True)
    found: dict = {}
    for pair, count in zip(pairs.tolist(), counts.tolist()):
        key, index = divmod(pair, width)
        found.setdefault(key, Counter())[names[index]] = count
    return found


def event_intervals_onto(cpu_trace: Trace, legacy_trace: Trace, lane_os_tids: np.ndarray):
    """The legacy trace's op intervals, launched by the matching ops of ``cpu_trace``: a dict of
    GPU columns (as :func:`with_gpu` takes them) and the counts of what did not match."""
    cpu_tids = np.asarray([thread.tid for thread in cpu_trace.threads], np.int64)
    legacy_key = lane_os_tids[legacy_trace.thread] if len(legacy_trace) else np.zeros(0, np.int64)
    cpu_key = cpu_tids[cpu_trace.thread] if len(cpu_trace) else np.zeros(0, np.int64)
    legacy_names = [legacy_trace.names[i] for i in legacy_trace.name_id]
    cpu_names = [cpu_trace.names[i] for i in cpu_trace.name_id]
    twin = match_by_name_and_order(legacy_key, legacy_names, legacy_trace.start_ns,
                                   cpu_key, cpu_names, cpu_trace.start_ns)
    op_rows = np.flatnonzero(legacy_trace.gpu_kind == KIND_OP)
    launch = legacy_trace.gpu_launch[op_rows]
    has_launch = launch >= 0
    launched_by = np.where(has_launch, twin[np.maximum(launch, 0)], -1)
    kept = launched_by >= 0
    rows = op_rows[kept]
    on_legacy_threads = np.isin(cpu_key, lane_os_tids)
    matched_cpu = np.zeros(len(cpu_trace), np.bool_)
    matched_cpu[twin[twin >= 0]] = True
    cpu_only = sum(1 for row in np.flatnonzero(on_legacy_threads & ~matched_cpu)
                   if not is_runtime_call(cpu_names[row]))
    counts = {"intervals_without_op": int((~kept).sum()),
              "legacy_ops_unmatched": int((twin < 0).sum()),
              "kineto_ops_unmatched": int(cpu_only)}
    columns = dict(start_ns=legacy_trace.gpu_start_ns[rows], end_ns=legacy_trace.gpu_end_ns[rows],
                   names=[legacy_trace.names[i] for i in legacy_trace.gpu_name_id[rows]],
                   device=legacy_trace.gpu_device[rows], stream=legacy_trace.gpu_stream[rows],
                   launch=launched_by[kept], kinds=["op"] * len(rows))
    return columns, counts


def unmatched_note(counts: dict) -> str | None:
    """One line for the trace's notes when the two profilers' records did not pair up."""
    if not (counts["legacy_ops_unmatched"] or counts["kineto_ops_unmatched"]):
        return None
    return (f"CUDA-event records and Kineto's ops did not all pair up: "
            f"{counts['legacy_ops_unmatched']} event-recorded ops found no Kineto op "
            f"({counts['intervals_without_op']} GPU intervals dropped with them), "
            f"{counts['kineto_ops_unmatched']} Kineto ops on the same threads have no CUDA-event "
            "interval.")


def kernel_columns(devices, cpu_names, cpu_correlation: np.ndarray, cpu_rows: np.ndarray,
                   parents: np.ndarray, base_time_ns: int) -> dict:
    """CUPTI's device rows as GPU columns, each launched by a trace row: the op whose correlation
    id it carries as its linked one (torch's link); else, through CUPTI's own correlation id, the
    runtime call that launched it (cudaLaunchKernel, cudaGraphLaunch...) and the innermost slice
    around that call (an op or a record_function range; the call itself where none encloses it).
    ``cpu_correlation[i]`` and ``cpu_names[i]`` belong to trace row ``cpu_rows[i]`` (-1: not in
    the trace); ``parents``: the trace's parent column. A runtime call's correlation id is CUPTI's
    and an op's torch's: two number spaces that may hold the same number, so they are kept apart
    by the row's name, as torch's own parser keeps them apart."""
    by_op, by_call = {}, {}
    runtime_names: dict = {}  # many rows, few names: each name's kind is read once
    for name, correlation, row in zip(cpu_names, np.asarray(cpu_correlation).tolist(),
                                      np.asarray(cpu_rows).tolist()):
        if correlation > 0 and row >= 0:
            call = runtime_names.get(name)
            if call is None:
                call = runtime_names[name] = is_runtime_call(name)
            (by_call if call else by_op).setdefault(correlation, row)
    runtime = devices.runtime_correlation
    if runtime is None:
        runtime = np.zeros(len(devices.names), np.int64)
    launch = np.full(len(devices.names), NO_ID, np.int64)
    for index, (linked, own) in enumerate(zip(np.asarray(devices.correlation).tolist(),
                                              np.asarray(runtime).tolist())):
        row = by_op.get(linked, NO_ID) if linked > 0 else NO_ID
        if row == NO_ID and own > 0 and own in by_call:
            call = by_call[own]
            row = int(parents[call]) if parents[call] >= 0 else call
        launch[index] = row
    return dict(start_ns=np.asarray(devices.start_ns, np.int64) - base_time_ns,
                end_ns=np.asarray(devices.end_ns, np.int64) - base_time_ns,
                names=list(devices.names), device=devices.device, stream=devices.stream,
                launch=launch, kinds=list(devices.kinds), args=dict(devices.args))


def concat_columns(*parts: dict) -> dict:
    """GPU column dicts (from :func:`event_intervals_onto` / :func:`kernel_columns`) end to end."""
    out = {key: [] for key in ("start_ns", "end_ns", "names", "device", "stream", "launch",
                               "kinds")}
    args, offset = {}, 0
    for part in parts:
        for key in out:
            out[key].extend(np.asarray(part[key]).tolist() if key not in ("names", "kinds")
                            else part[key])
        args.update({offset + row: value for row, value in part.get("args", {}).items()})
        offset += len(part["start_ns"])
    out["args"] = args
    return out


NOTE_NO_CUPTI_KERNELS = (
    "CUPTI recorded no kernels here (tracing is not permitted or not supported on this machine: "
    "WSL2, containers without GPU profiling rights, ERR_NVGPUCTRPERM): GPU times are each op's "
    "CUDA-event interval, kernels are not shown one by one.")
NOTE_KERNELS_OFF = ("Kernels not recorded one by one ({why}): GPU times are each op's CUDA-event "
                    "interval.")
NOTE_LEGACY_FAILED = ("The CUDA-event profiler would not start beside Kineto ({error}): no per-op "
                      "event intervals; GPU times come from CUPTI's kernels{only}.")


def gpu_records_to_trace(records, *, anchor_name: str, base_time_ns: int, starting_thread,
                         thread_names: dict, windows=(), kernels_why_not: str = "",
                         record_shapes: bool = False, with_stack: bool = False,
                         meta: dict | None = None) -> Trace:
    """A Trace from :class:`nbprof.record.cuda_events.CudaRecords` (or anything shaped so):
    Kineto's ops on every thread, each op of the legacy threads with its CUDA-event interval,
    CUPTI's kernels linked to their ops. ``windows``: more (tid, start, end) spans of nbprof's
    own calls; ``kernels_why_not``: why kernels were not asked for, if they were not."""
    from .convert import cpu_records_to_trace, drop_own_cuda_calls, legacy_records_to_trace
    from .own_cuda_calls import legacy_event_times

    meta = dict(meta or {})
    notes = list(meta.get("notes", []))
    kineto = records.kineto
    legacy_trace = None
    event_times = {}
    if records.legacy_lists is not None:
        legacy_trace = legacy_records_to_trace(
            records.legacy_lists, anchor_name=anchor_name, base_time_ns=base_time_ns,
            starting_thread=starting_thread, record_shapes=False, with_stack=False,
            meta={"notes": []})
        notes.extend(legacy_trace.meta["notes"])
        if "gpu_clock" in legacy_trace.meta:
            meta["gpu_clock"] = legacy_trace.meta["gpu_clock"]
        # each legacy thread's OS thread, from its ops: for its intervals and, first, to find the
        # event stub's own calls on that thread (a wrong map left them in autograd's lane)
        lanes = legacy_lane_os_tids(legacy_trace, starting_thread.tid, kineto.os_tids,
                                    kineto.cpu.names, kineto.cpu.tid)
        os_tid_of = dict(kineto.os_tids)
        os_tid_of.update({thread.tid: int(tid) for thread, tid in zip(legacy_trace.threads, lanes)
                          if thread.tid != starting_thread.tid and tid >= 0})
        event_times = {os_tid_of[small]: times for small, times in
                       legacy_event_times(records.legacy_lists).items() if small in os_tid_of}
    cpu, own_calls = drop_own_cuda_calls(kineto.cpu, event_times=event_times,
                                         windows=[*records.windows, *windows])
    meta["own_cuda_calls"] = own_calls
    meta["notes"] = notes
    cpu_trace = cpu_records_to_trace(cpu, base_time_ns=base_time_ns, pid=starting_thread.pid,
                                     thread_names=thread_names, first_tid=starting_thread.tid,
                                     meta=meta)
    parts = []
    if legacy_trace is not None:
        intervals, counts = event_intervals_onto(cpu_trace, legacy_trace, lanes)
        cpu_trace.meta["event_matching"] = counts
        if note := unmatched_note(counts):
            cpu_trace.meta["notes"].append(note)
        parts.append(intervals)
    if len(kineto.devices.names):
        rows = rows_in_trace(cpu_trace, kineto.cpu.tid, kineto.cpu.start_ns, kineto.cpu.end_ns,
                             base_time_ns)
        parts.append(kernel_columns(kineto.devices, kineto.cpu.names, kineto.correlation, rows,
                                    cpu_trace.parent, base_time_ns))
    if records.legacy_lists is None:
        error = getattr(records, "legacy_error", "")
        only = "" if len(kineto.devices.names) else " (none were recorded: CPU times only)"
        cpu_trace.meta["notes"].append(NOTE_LEGACY_FAILED.format(error=error, only=only))
    elif not records.kernels_asked:
        cpu_trace.meta["notes"].append(NOTE_KERNELS_OFF.format(why=kernels_why_not or
                                                               "kernels=False"))
    elif not len(kineto.devices.names) and parts and len(parts[0]["start_ns"]):
        cpu_trace.meta["notes"].append(NOTE_NO_CUPTI_KERNELS)
    cpu_trace.meta["kernels"] = bool(len(kineto.devices.names))
    if not parts:
        return cpu_trace
    return with_gpu(cpu_trace, **concat_columns(*parts))
