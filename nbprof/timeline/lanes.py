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
from ..events import (GPU_KINDS, KIND_MEMCPY, KIND_MEMSET, KIND_OP, KIND_OTHER, Trace,
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


def _thread_names(threads, ordinals) -> tuple[list[str], list[str]]:
    """(full, short) names of CPU lanes; ``ordinals`` numbers each thread within its process
    (the main thread first), for the short form."""
    full, short = [], []
    for thread, ordinal in zip(threads, ordinals):
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


def _ordinals(threads) -> list[int]:
    """Each thread's number within its process: 1 for the main thread, then by tid."""
    order = sorted(range(len(threads)), key=lambda i: (
        threads[i].pid, threads[i].tid != threads[i].pid, shown_tid(threads[i].tid)))
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
    thread_order = sorted(range(len(threads)), key=lambda i: (  # each process's main thread first
        thread_rank[used_threads[i]], threads[i].pid, threads[i].tid != threads[i].pid,
        shown_tid(threads[i].tid)))
    full_names, short_names = _thread_names(threads, _ordinals(threads))
    lane_rank = []
    pids = sorted({t.pid for t in threads})
    show_pid = len(pids) > 1
    labels, short, groups = [], [], []
    lane_of_thread = np.zeros(len(trace.threads), np.int64)
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
    unique_streams, gpu_stream_index = np.unique(trace.gpu_stream_keys(), return_inverse=True)
    op_events_only = np.ones(len(unique_streams), bool)
    np.logical_and.at(op_events_only, gpu_stream_index, trace.gpu_kind == KIND_OP)
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
    new_lane = np.empty(len(labels), np.int64)
    new_lane[lane_order] = np.arange(len(labels))
    labels, groups = [labels[i] for i in lane_order], [groups[i] for i in lane_order]
    short = [short[i] for i in lane_order]
    is_gpu = is_gpu[lane_order]

    cpu_lane = new_lane[lane_of_thread[trace.thread]] if len(trace) else np.zeros(0, np.int64)
    cpu_sub = trace.depth.astype(np.int64)

    gpu_lane = new_lane[n_cpu_lanes + gpu_stream_index.astype(np.int64).reshape(-1)] if \
        len(gpu_stream_index) else np.zeros(0, np.int64)
    is_op = trace.gpu_kind == KIND_OP
    launch = trace.gpu_launch
    launch_depth = np.where(launch >= 0, trace.depth[np.clip(launch, 0, max(len(trace) - 1, 0))]
                            if len(trace) else 0, 0).astype(np.int64)
    # GPU-side spans (kind "other": Kineto's gpu_user_annotation) enclose kernels, so they get the
    # top row, as annotations do on CPU lanes, instead of covering the kernels; kernels, memcpy and
    # memset take the next row; op intervals go below, one row per op depth.
    is_span = trace.gpu_kind == KIND_OTHER
    lane_has_spans = np.zeros(len(labels) + 1, bool)
    lane_has_spans[gpu_lane[is_span]] = True
    lane_has_kernels = np.zeros(len(labels) + 1, bool)
    lane_has_kernels[gpu_lane[~is_op & ~is_span]] = True
    kernel_row = lane_has_spans[gpu_lane].astype(np.int64)
    gpu_sub = np.select([is_span, is_op],
                        [0, launch_depth + kernel_row + lane_has_kernels[gpu_lane]], kernel_row)
    gpu_row_kind = np.select([is_span, is_op], [ROW_GPU_SPAN, ROW_GPU_OP], ROW_GPU_KERNEL)

    lane = np.concatenate([cpu_lane, gpu_lane])
    sub = np.concatenate([cpu_sub, gpu_sub])
    row_keys, row_of = np.unique(lane * 65536 + sub, return_inverse=True)
    row_of = row_of.reshape(-1)
    row_lane = row_keys // 65536
    row_kind = np.zeros(len(row_keys), np.uint8)  # every entry of a row is of one kind
    row_kind[row_of[len(trace):]] = gpu_row_kind
    return Lanes(labels=labels, short=short, groups=groups,
                 group_titles=_group_titles(groups, threads, thread_rank[used_threads], merged,
                                            rank_prefix), is_gpu=is_gpu, row_lane=row_lane,
                 row_sub=row_keys % 65536, row_is_gpu=is_gpu[row_lane] if len(row_lane) else
                 np.zeros(0, bool), row_kind=row_kind, cpu_row=row_of[:len(trace)],
                 gpu_row=row_of[len(trace):])


def cpu_families(trace: Trace) -> np.ndarray:
    table = np.array([_CATEGORY_FAMILY.get(str(c).lower(), FAMILY_CPU_OP) for c in trace.categories]
                     or [FAMILY_CPU_OP], np.uint8)
    return table[trace.category]


def gpu_families(trace: Trace) -> np.ndarray:
    return _GPU_KIND_FAMILY[trace.gpu_kind]


def name_hashes(names: list[str]) -> np.ndarray:
    """A stable hash per name (crc32), so an op keeps its colour across runs and pages."""
    return np.array([zlib.crc32(name.encode("utf-8", "replace")) for name in names], np.uint32)
