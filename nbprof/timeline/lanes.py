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
    "python_function": FAMILY_ANNOTATION,
}
_GPU_KIND_FAMILY = np.full(len(GPU_KINDS), FAMILY_GPU_OTHER, np.uint8)
_GPU_KIND_FAMILY[[KIND_OP, GPU_KINDS.index("kernel"), KIND_MEMCPY, KIND_MEMSET]] = [
    FAMILY_GPU_OP, FAMILY_KERNEL, FAMILY_MEMCPY, FAMILY_MEMSET]


@dataclass(frozen=True)
class Lanes:
    labels: list[str]  # lane labels, display order
    groups: list[str]  # each lane's group (rank / process), for the alternating bands
    is_gpu: np.ndarray  # bool per lane
    row_lane: np.ndarray  # per draw row: its lane
    row_sub: np.ndarray  # per draw row: its sub-row inside the lane (0 = top)
    row_is_gpu: np.ndarray  # bool per draw row
    cpu_row: np.ndarray  # per CPU event: its draw row
    gpu_row: np.ndarray  # per GPU interval: its draw row


def _group_prefix(trace: Trace) -> str:
    rank = trace.meta.get("rank")
    return "" if rank is None else f"rank {rank}"


def build_lanes(trace: Trace) -> Lanes:
    rank_prefix = _group_prefix(trace)
    # A merged job (nbprof.ranks): every lane says its rank, and lanes go rank by rank.
    merged = "thread_rank" in trace.meta
    thread_rank = ranks.thread_ranks(trace)
    own_devices = ranks.own_devices(trace)
    # CPU lanes: threads that hold events, ordered by (rank, pid, tid).
    used_threads = np.unique(trace.thread)
    threads = [trace.threads[t] for t in used_threads]
    thread_order = sorted(range(len(threads)), key=lambda i: (
        thread_rank[used_threads[i]], threads[i].pid, threads[i].tid))
    lane_rank = []
    pids = sorted({t.pid for t in threads})
    show_pid = len(pids) > 1
    labels, groups = [], []
    lane_of_thread = np.zeros(len(trace.threads), np.int64)
    for lane, i in enumerate(thread_order):  # one iteration per thread, not per event
        thread = threads[i]
        lane_of_thread[used_threads[i]] = lane
        name = thread.name or f"thread {thread.tid}"
        prefix = f"pid {thread.pid} · " if show_pid else ""
        # Kineto's names already hold the tid ("thread 1102 (pt_main_thread)"): not twice
        tid = "" if re.search(rf"\b{thread.tid}\b", name) else f" ({thread.tid})"
        if merged:
            rank_prefix = f"rank {thread_rank[used_threads[i]]}"
        labels.append(f"{rank_prefix + ' · ' if merged else ''}{prefix}{name}{tid}")
        groups.append(" · ".join(filter(None, [rank_prefix, f"pid {thread.pid}"])))
        lane_rank.append(int(thread_rank[used_threads[i]]))
    n_cpu_lanes = len(labels)

    # GPU lanes: one per (device, stream) in use.
    unique_streams, gpu_stream_index = np.unique(trace.gpu_stream_keys(), return_inverse=True)
    for key in unique_streams:  # one iteration per stream
        device, stream = split_stream_key(key)
        rank, device = own_devices.get(device, (None, device))
        if merged:
            rank_prefix = f"rank {rank}"
        labels.append(f"{rank_prefix + ' · ' if merged else ''}GPU {device} " + ("(op events)" if (trace.gpu_kind[trace.gpu_stream_keys() == key] == KIND_OP).all() else f"stream {stream}"))  # noqa: E501 (op events only: the legacy records name no stream)
        groups.append(" · ".join(filter(None, [rank_prefix, f"GPU {device}"])))
        lane_rank.append(-1 if rank is None else rank)
    is_gpu = np.arange(len(labels)) >= n_cpu_lanes
    # Rank by rank (a stable sort: within a rank, its CPU lanes then its GPU lanes).
    lane_order = np.argsort(np.array(lane_rank, np.int64), kind="stable") if merged else \
        np.arange(len(labels))
    new_lane = np.empty(len(labels), np.int64)
    new_lane[lane_order] = np.arange(len(labels))
    labels, groups = [labels[i] for i in lane_order], [groups[i] for i in lane_order]
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

    lane = np.concatenate([cpu_lane, gpu_lane])
    sub = np.concatenate([cpu_sub, gpu_sub])
    row_keys, row_of = np.unique(lane * 65536 + sub, return_inverse=True)
    row_of = row_of.reshape(-1)
    row_lane = row_keys // 65536
    return Lanes(labels=labels, groups=groups, is_gpu=is_gpu, row_lane=row_lane,
                 row_sub=row_keys % 65536, row_is_gpu=is_gpu[row_lane] if len(row_lane) else
                 np.zeros(0, bool), cpu_row=row_of[:len(trace)], gpu_row=row_of[len(trace):])


def cpu_families(trace: Trace) -> np.ndarray:
    table = np.array([_CATEGORY_FAMILY.get(str(c).lower(), FAMILY_CPU_OP) for c in trace.categories]
                     or [FAMILY_CPU_OP], np.uint8)
    return table[trace.category]


def gpu_families(trace: Trace) -> np.ndarray:
    return _GPU_KIND_FAMILY[trace.gpu_kind]


def name_hashes(names: list[str]) -> np.ndarray:
    """A stable hash per name (crc32), so an op keeps its colour across runs and pages."""
    return np.array([zlib.crc32(name.encode("utf-8", "replace")) for name in names], np.uint32)
