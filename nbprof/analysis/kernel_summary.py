"""``trace.kernel_summary()``: the top GPU work by time, with the op that launched it.

One row per (GPU name, call path of the launching op): count, total, mean, share of all GPU time of
that table, the launching op's name and call path (callpaths.py). ``memory=True`` gives the same
for memcpy / memset. numpy only; paths are spelled out for the rows returned.
"""

from __future__ import annotations

import numpy as np

from .averages import gpu_work_kinds
from .callpaths import CallPaths
from ..model import GPU_KINDS, KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET, KIND_OP, Trace
from .tables import make_table

COMPUTE_KINDS = (KIND_KERNEL, KIND_OP)
MEMORY_KINDS = (KIND_MEMCPY, KIND_MEMSET)


def kernel_summary(trace: Trace, *, memory: bool = False, limit: int | None = 20,
                   paths: CallPaths | None = None, plain: bool = False):
    """Top kernels (or, ``memory=True``, memcpy / memset) by total GPU time; ``limit=None`` for
    all rows. A DataFrame; ``.table()`` (and printing it) gives it as text."""
    compute = [kind for kind in COMPUTE_KINDS if kind in gpu_work_kinds(trace)]  # kernels over op events
    rows = np.flatnonzero(np.isin(trace.gpu_kind, MEMORY_KINDS if memory else compute))
    duration = (trace.gpu_end_ns - trace.gpu_start_ns)[rows]
    launch = trace.gpu_launch[rows].astype(np.int64)
    paths = CallPaths(trace) if paths is None else paths
    launch_path = np.where(launch >= 0, paths.of_event[np.maximum(launch, 0)] if len(trace) else -1, -1)
    key = trace.gpu_name_id[rows].astype(np.int64) * (len(paths) + 1) + (launch_path + 1)
    unique, first, group = np.unique(key, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    total = np.bincount(group, weights=duration, minlength=len(unique))
    count = np.bincount(group, minlength=len(unique))
    order = np.argsort(-total, kind="stable")
    if limit is not None and limit >= 0:
        order = order[:limit]
    grand = float(duration.sum())
    sample = rows[first[order]]  # one GPU row per group: its name, kind and launching op
    sample_launch = launch[first[order]]
    columns = {
        "name": [trace.names[i] for i in trace.gpu_name_id[sample]],
        "kind": [GPU_KINDS[k] for k in trace.gpu_kind[sample]],
        "count": count[order],
        "total_us": total[order] / 1e3,
        "mean_us": total[order] / np.maximum(count[order], 1) / 1e3,
        "share_pct": 100.0 * total[order] / grand if grand else np.zeros(len(order)),
        "op": [trace.names[trace.name_id[e]] if e >= 0 else "" for e in sample_launch.tolist()],
        "call_path": [paths.text(p) for p in launch_path[first[order]].tolist()],
    }
    return make_table("KernelSummary", columns, kernel_text, plain)


def kernel_text(rows: list[dict], row_limit: int = -1, name_width: int = 50) -> str:
    from .averages import format_us, limit_rows, text_table

    headers = ["Name", "Count", "Total", "Mean", "Share", "Launched by"]
    cells = [[row["name"], str(row["count"]), format_us(row["total_us"]), format_us(row["mean_us"]),
              f"{row['share_pct']:.1f}%", row["op"] or "-"] for row in limit_rows(rows, row_limit)]
    return "\n".join(text_table(headers, cells, name_width))
