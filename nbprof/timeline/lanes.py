"""Lanes and draw rows of a timeline, straight from a Trace's columns.

A lane is what the y axis labels: one per CPU thread, one per GPU device and stream, grouped by
rank and process. A lane holds one or more draw rows: a CPU lane one per nesting depth, a GPU lane
one for kernels/memcpy/memset and, for per-op CUDA-event intervals (which nest like their ops), one
per depth of the launching op. Inside a row events never (or rarely) overlap, so the browser can
binary-search and merge them row by row.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

import numpy as np

from .. import ranks
from ..model import (GPU_KINDS, KIND_MEMCPY, KIND_MEMSET, KIND_OP, KIND_OTHER, Trace,
                      split_stream_key)

# Colour families: what the legend lists and js/timeline.js colours by.
FAMILIES = ("CPU op", "CUDA runtime", "annotation", "kernel", "memcpy", "memset",
            "CUDA-event op interval", "GPU other")
FAMILY_CPU_OP, FAMILY_RUNTIME, FAMILY_ANNOTATION, FAMILY_KERNEL, FAMILY_MEMCPY, FAMILY_MEMSET, \
    FAMILY_GPU_OP, FAMILY_GPU_OTHER = range(len(FAMILIES))

# Trace category names (Kineto's "cat" and nbprof's own) -> family; anything else is a CPU op.
_CATEGORY_FAMILY = {
    "cuda_runtime": FAMILY_RUNTIME, "cuda_driver": FAMILY_RUNTIME, "runtime": FAMILY_RUNTIME,
    "cuda_sync": FAMILY_RUNTIME, "user_annotation": FAMILY_ANNOTATION,
    "gpu_user_annotation": FAMILY_ANNOTATION, "annotation": FAMILY_ANNOTATION,
    "python_function": FAMILY_ANNOTATION, "hip_runtime": FAMILY_RUNTIME, "hip_driver": FAMILY_RUNTIME,
}
_GPU_KIND_FAMILY = np.full(len(GPU_KINDS), FAMILY_GPU_OTHER, np.uint8)
_GPU_KIND_FAMILY[[KIND_OP, GPU_KINDS.index("kernel"), KIND_MEMCPY, KIND_MEMSET]] = [
    FAMILY_GPU_OP, FAMILY_KERNEL, FAMILY_MEMCPY, FAMILY_MEMSET]


# What a draw row holds: its lane's nesting depth (CPU), GPU-side spans, kernels/memcpy/memset,
# or per-op CUDA-event intervals. The browser sizes rows by kind (kernel rows are the tallest).
ROW_CPU, ROW_GPU_SPAN, ROW_GPU_KERNEL, ROW_GPU_OP = range(4)


@dataclass(frozen=True)
class Lanes:
    labels: list[str]  # full lane names, display order: unique, what tl.lanes and the filter use
    short: list[str]  # what the y axis shows: "main thread", "thread 2 · python3.10", "GPU 0 · stream 7"
    groups: list[str]  # each lane's group (rank / process / GPU): the collapsible headers
    group_titles: dict  # group -> its header's text ("pid 1234 · python3.10")
    is_gpu: np.ndarray  # bool per lane
    row_lane: np.ndarray  # per draw row: its lane
    row_sub: np.ndarray  # per draw row: its sub-row inside the lane (0 = top)
    row_is_gpu: np.ndarray  # bool per draw row
    row_kind: np.ndarray  # per draw row: ROW_CPU, ROW_GPU_SPAN, ROW_GPU_KERNEL or ROW_GPU_OP
    cpu_row: np.ndarray  # per CPU event: its draw row
    gpu_row: np.ndarray  # per GPU interval: its draw row


def _group_prefix(trace: Trace) -> str:
    rank = trace.meta.get("rank")
    return "" if rank is None else f"rank {rank}"


def shown_tid(tid: int) -> int:
    """A thread id as the OS knows it: Kineto writes some as negative int64 (a 32-bit unsigned id
    read as signed, or a pthread handle), which no tool shows; the unsigned value is stable."""
    if tid >= 0:
        return tid
    return tid + 2**32 if tid >= -2**31 else tid + 2**64


# Kineto names its threads "thread <tid> (<process name>)" or just "thread <tid>".
_KINETO_NAME = re.compile(r"thread (-?\d+)(?: \((.*)\))?")


def _thread_names(threads, ordinals, is_async) -> tuple[list[str], list[str]]:
    """(full, short) names of CPU lanes; ``ordinals`` numbers each thread within its process
    (the main thread first), for the short form. An async lane's tid is the loader's, not the
    OS's: its name alone, said to be async."""
    full, short = [], []
    for thread, ordinal, lane_is_async in zip(threads, ordinals, is_async):
        if lane_is_async:
            full.append(f"async · {thread.name}")
            short.append(f"async · {thread.name}")
            continue
        tid = shown_tid(thread.tid)
        name = (thread.name or f"thread {thread.tid}").replace(f"thread {thread.tid}", f"thread {tid}")
        # Kineto's names already hold the tid ("thread 1102 (pt_main_thread)"): not twice
        full.append(name if re.search(rf"(?<![\w-]){tid}(?!\w)", name) else f"{name} ({tid})")
        kineto = _KINETO_NAME.fullmatch(thread.name or f"thread {thread.tid}")
        is_main = thread.tid == thread.pid or thread.name == "MainThread"
        if kineto is None and thread.name != "MainThread":
            short.append(thread.name)  # a name someone chose: "PyTorch Profiler", "backward"
        elif is_main:
            short.append("main thread")
        else:
            process = kineto.group(2) if kineto else None
            short.append(f"thread {ordinal}" + (f" · {process}" if process else ""))
    return full, short


def _ordinals(threads, is_async) -> list[int]:
    """Each thread's number within its process: 1 for the main thread, then by tid (async
    lanes after every thread)."""
    order = sorted(range(len(threads)), key=lambda i: (
        threads[i].pid, is_async[i], threads[i].tid != threads[i].pid,
        shown_tid(threads[i].tid)))
    ordinals, seen = [0] * len(threads), {}
    for i in order:
        seen[threads[i].pid] = seen.get(threads[i].pid, 0) + 1
        ordinals[i] = seen[threads[i].pid]
    return ordinals


def _group_titles(groups, threads, ranks_of_threads, merged, rank_prefix) -> dict:
    """A process group's header names the process where Kineto's thread names say it."""
    process = {}
    for thread, rank in zip(threads, ranks_of_threads):
        kineto = _KINETO_NAME.fullmatch(thread.name or "")
        if kineto and kineto.group(2) and thread.tid == thread.pid:
            prefix = f"rank {rank}" if merged else rank_prefix
            process[" · ".join(filter(None, [prefix, f"pid {thread.pid}"]))] = kineto.group(2)
    return {group: group + (f" · {process[group]}" if group in process else "")
            for group in dict.fromkeys(groups)}


def build_lanes(trace: Trace) -> Lanes:
    rank_prefix = _group_prefix(trace)
    # A merged job (nbprof.ranks): every lane says its rank, and lanes go rank by rank.
    merged = "thread_rank" in trace.meta
    thread_rank = ranks.thread_ranks(trace)
    own_devices = ranks.own_devices(trace)
    # CPU lanes: threads that hold events, ordered by (rank, pid, tid).
    used_threads = np.unique(trace.thread)
    threads = [trace.threads[t] for t in used_threads]
    is_async = trace.async_thread_mask()[used_threads].tolist()
    thread_order = sorted(range(len(threads)), key=lambda i: (  # each process's main thread first,
        thread_rank[used_threads[i]], threads[i].pid, is_async[i],  # its async lanes last
        threads[i].tid != threads[i].pid, shown_tid(threads[i].tid)))
    full_names, short_names = _thread_names(threads, _ordinals(threads, is_async), is_async)
    lane_rank = []
    pids = sorted({t.pid for t in threads})
    show_pid = len(pids) > 1
    labels, short, groups = [], [], []
    lane_of_thread = np.zeros(len(trace.threads), np.int32)
    for lane, i in enumerate(thread_order):  # one iteration per thread, not per event
        thread = threads[i]
        lane_of_thread[used_threads[i]] = lane
        prefix = f"pid {thread.pid} · " if show_pid else ""
        if merged:
            rank_prefix = f"rank {thread_rank[used_threads[i]]}"
        labels.append(f"{rank_prefix + ' · ' if merged else ''}{prefix}{full_names[i]}")
        short.append(short_names[i])
        groups.append(" · ".join(filter(None, [rank_prefix, f"pid {thread.pid}"])))
        lane_rank.append(int(thread_rank[used_threads[i]]))
    n_cpu_lanes = len(labels)

    # GPU lanes: one per (device, stream) in use.
    unique_streams, gpu_stream_index = _stream_codes(trace)
    op_events_only = np.ones(len(unique_streams), bool)
    op_events_only[gpu_stream_index[trace.gpu_kind != KIND_OP]] = False
    for key_index, key in enumerate(unique_streams):  # one iteration per stream
        device, stream = split_stream_key(key)
        rank, device = own_devices.get(device, (None, device))
        if merged:
            rank_prefix = f"rank {rank}"
        # A lane of per-op CUDA-event intervals only: the legacy records name no stream.
        if op_events_only[key_index]:
            full, brief = f"GPU {device} (op events)", f"GPU {device} (op events)"
        else:
            full, brief = f"GPU {device} stream {stream}", f"GPU {device} · stream {stream}"
        labels.append(f"{rank_prefix + ' · ' if merged else ''}{full}")
        short.append(brief)
        groups.append(" · ".join(filter(None, [rank_prefix, f"GPU {device}"])))
        lane_rank.append(-1 if rank is None else rank)
    is_gpu = np.arange(len(labels)) >= n_cpu_lanes
    # Rank by rank (a stable sort: within a rank, its CPU lanes then its GPU lanes).
    lane_order = np.argsort(np.array(lane_rank, np.int64), kind="stable") if merged else \
        np.arange(len(labels))
    new_lane = np.empty(len(labels), np.int32)
    new_lane[lane_order] = np.arange(len(labels))
    labels, groups = [labels[i] for i in lane_order], [groups[i] for i in lane_order]
    short = [short[i] for i in lane_order]
    is_gpu = is_gpu[lane_order]

    # Per-event columns stay 4 bytes wide (int32) and go through per-lane tables: at 10^8 events
    # every full-length int64 temporary costs 800 MB.
    cpu_lane = new_lane[lane_of_thread][trace.thread]
    gpu_lane = new_lane[n_cpu_lanes:][gpu_stream_index]
    gpu_sub, gpu_row_kind = _gpu_subrows(trace, gpu_lane, len(labels))
    rows = _draw_rows(cpu_lane, trace.depth, gpu_lane, gpu_sub, len(labels))
    row_lane, row_sub, cpu_row, gpu_row = rows
    row_kind = np.zeros(len(row_lane), np.uint8)  # every entry of a row is of one kind
    row_kind[gpu_row] = gpu_row_kind
    return Lanes(labels=labels, short=short, groups=groups,
                 group_titles=_group_titles(groups, threads, thread_rank[used_threads], merged,
                                            rank_prefix), is_gpu=is_gpu, row_lane=row_lane,
                 row_sub=row_sub, row_is_gpu=is_gpu[row_lane] if len(row_lane) else
                 np.zeros(0, bool), row_kind=row_kind, cpu_row=cpu_row, gpu_row=gpu_row)


def _stream_codes(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """The (device, stream) keys in use, sorted, and each GPU interval's index into them (int32).
    A trace has a handful of streams: hash-based uniques of the two small columns and a binary
    search into them, never a sort of one int64 key per interval."""
    devices = np.unique(trace.gpu_device)  # no inverse asked: numpy hashes, no sort
    streams = np.unique(trace.gpu_stream)
    if len(devices) * len(streams) >= 2 ** 31:  # cannot happen with int16 devices in practice
        keys, index = np.unique(trace.gpu_stream_keys(), return_inverse=True)
        return keys, index.reshape(-1).astype(np.int32)
    pair = _codes(trace.gpu_device, devices) * np.int32(len(streams))
    pair += _codes(trace.gpu_stream, streams)
    used = np.zeros(len(devices) * len(streams), bool)
    used[pair] = True
    compact = (np.cumsum(used, dtype=np.int32) - 1).astype(np.int32)
    pairs = np.flatnonzero(used)
    keys = (devices[pairs // len(streams)].astype(np.int64) << 32) | \
        (streams[pairs % len(streams)].astype(np.int64) & 0xFFFFFFFF)
    # keys order streams as unsigned 32-bit values (stream -1 last), as Trace.gpu_stream_keys does
    order = np.argsort(keys, kind="stable")
    rank = np.empty(len(order), np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    return keys[order], rank[compact][pair]


def _codes(values: np.ndarray, uniques: np.ndarray) -> np.ndarray:
    """Each value's index into its sorted ``uniques`` (int32): a lookup table where the values are
    small non-negative ids (as device and stream ids are), else a binary search."""
    if len(uniques) <= 1:
        return np.zeros(len(values), np.int32)
    if uniques[0] >= 0 and uniques[-1] < 1 << 20:
        table = np.zeros(int(uniques[-1]) + 1, np.int32)
        table[uniques] = np.arange(len(uniques), dtype=np.int32)
        return table[values]
    return np.searchsorted(uniques, values).astype(np.int32)


def _gpu_subrows(trace: Trace, gpu_lane: np.ndarray, n_lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """Each GPU interval's sub-row in its lane and its row kind.
    GPU-side spans (kind "other": Kineto's gpu_user_annotation) enclose kernels, so they get the
    top row, as annotations do on CPU lanes, instead of covering the kernels; kernels, memcpy and
    memset take the next row; op intervals go below, one row per depth of the launching op."""
    is_op = trace.gpu_kind == KIND_OP
    is_span = trace.gpu_kind == KIND_OTHER
    lane_has_spans = np.zeros(n_lanes, bool)
    lane_has_spans[gpu_lane[is_span]] = True
    lane_has_kernels = np.zeros(n_lanes, bool)
    lane_has_kernels[gpu_lane[~is_op & ~is_span]] = True
    kernel_row = lane_has_spans.astype(np.int32)  # per lane
    sub = kernel_row[gpu_lane]
    sub[is_span] = 0
    kind = np.full(len(gpu_lane), ROW_GPU_KERNEL, np.uint8)
    kind[is_span] = ROW_GPU_SPAN
    if is_op.any():
        launch = trace.gpu_launch[is_op]
        depth = np.where(launch >= 0, trace.depth[np.clip(launch, 0, max(len(trace) - 1, 0))]
                         if len(trace) else 0, 0).astype(np.int32)
        sub[is_op] = depth + (kernel_row + lane_has_kernels)[gpu_lane[is_op]]
        kind[is_op] = ROW_GPU_OP
    return sub, kind


# A dense (lane, sub-row) table up to this many cells (a byte each, then 4): past it, a sort.
_DENSE_ROW_CELLS = 1 << 24


def _draw_rows(cpu_lane, cpu_sub, gpu_lane, gpu_sub, n_lanes):
    """The draw rows in use, in (lane, sub-row) order, and each CPU event's and GPU interval's
    row: (row_lane, row_sub, cpu_row, gpu_row). Lanes times depths is small, so a table over
    every (lane, sub) cell marks the rows in use: linear in the events, no sort of 10^8 keys."""
    subs = [s for s in (cpu_sub, gpu_sub) if len(s)]
    low = min((int(s.min()) for s in subs), default=0)
    stride = max((int(s.max()) for s in subs), default=0) + 1
    if low < 0 or n_lanes * stride > _DENSE_ROW_CELLS:  # never for a real trace's depths
        keys = [lane.astype(np.int64) * 65536 + sub for lane, sub in
                ((cpu_lane, cpu_sub), (gpu_lane, gpu_sub))]
        row_keys, row_of = np.unique(np.concatenate(keys), return_inverse=True)
        row_of = row_of.reshape(-1).astype(np.int32)
        return (row_keys // 65536).astype(np.int32), (row_keys % 65536).astype(np.int64), \
            row_of[:len(cpu_lane)], row_of[len(cpu_lane):]
    cells = []
    for lane, sub in ((cpu_lane, cpu_sub), (gpu_lane, gpu_sub)):
        cell = lane * np.int32(stride)
        cell += sub  # in place: no int32 copy of the depths
        cells.append(cell)
    used = np.zeros(n_lanes * stride, bool)
    for cell in cells:
        used[cell] = True
    row_of_cell = (np.cumsum(used, dtype=np.int32) - 1).astype(np.int32)
    in_use = np.flatnonzero(used)
    # row_lane as int32: gathered per event (Timeline.shown's lanes), it costs 4 bytes each, not 8
    return (in_use // stride).astype(np.int32), in_use % stride, row_of_cell[cells[0]], \
        row_of_cell[cells[1]]


def cpu_families(trace: Trace) -> np.ndarray:
    table = np.array([_CATEGORY_FAMILY.get(str(c).lower(), FAMILY_CPU_OP) for c in trace.categories]
                     or [FAMILY_CPU_OP], np.uint8)
    return table[trace.category]


def is_runtime_category(category: str) -> bool:
    """Whether a CPU event of this category is a runtime/driver call (cudaLaunchKernel...)."""
    return _CATEGORY_FAMILY.get(str(category).lower()) == FAMILY_RUNTIME


def gpu_families(trace: Trace) -> np.ndarray:
    return _GPU_KIND_FAMILY[trace.gpu_kind]


def name_hashes(names: list[str]) -> np.ndarray:
    """A stable hash per name (crc32), so an op keeps its colour across runs and pages."""
    return np.array([zlib.crc32(name.encode("utf-8", "replace")) for name in names], np.uint32)
