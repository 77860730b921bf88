"""The hidden event columns a timeline page carries, and the small tables js/timeline.js reads.

Every CPU event and GPU interval becomes one entry of a draw row (see lanes.py); entries go row by
row, each row in start order (event ids are in start order, so sorting by (row, id) is enough).
Times are ns from the trace's first event. Built with numpy over whole columns: no loop per event.
"""

from __future__ import annotations

import numpy as np

from ..model import Trace
from .lanes import FAMILY_RUNTIME, Lanes, cpu_families, gpu_families, name_hashes
from .packing import pack_columns


def _deltas_within_rows(values: np.ndarray, first_of_row: np.ndarray) -> np.ndarray:
    deltas = np.diff(values, prepend=0)
    deltas[first_of_row] = values[first_of_row]
    return deltas


def _gaps_within_rows(start: np.ndarray, end: np.ndarray, first_of_row: np.ndarray) -> np.ndarray:
    """Each start as the gap after the previous event's end in its row (the first: after 0),
    zigzag-coded (overlaps make negative gaps). Back-to-back events give tiny gaps, so this packs
    far smaller than start deltas, which repeat the previous duration."""
    gaps = start - np.concatenate([[0], end[:-1]])
    gaps[first_of_row] = start[first_of_row]
    return np.where(gaps >= 0, 2 * gaps, -2 * gaps - 1)


STACK_FRAMES_SHOWN = 3


def _detail_texts(trace: Trace) -> tuple[dict[int, str], dict[int, str]]:
    """Hover text for the events the trace knows more about: shapes, Python stack, grid and
    block, bytes.
    These are sparse Python dicts already, so one pass over their entries. Per-event ids
    (correlation) are left out: unique per kernel, they would make every text its own entry in
    the page's text table."""
    cpu = {row: f"shapes: {shapes}" for row, shapes in trace.shapes.items() if shapes}
    for row, stack in trace.stacks.items():
        if stack:  # the innermost frames say where in the user's code the op ran
            where = "at " + " ← ".join(stack[:STACK_FRAMES_SHOWN])
            cpu[row] = f"{cpu[row]} · {where}" if row in cpu else where
    gpu = {}
    for row, args in trace.gpu_args.items():
        if not args:
            continue
        parts = [f"{key}: {args[key]}" for key in ("grid", "block", "bytes")
                 if key in args]
        if parts:
            gpu[row] = " · ".join(parts)
    return cpu, gpu


def runtime_calls(trace: Trace) -> np.ndarray:
    """Per GPU interval, the runtime call that launched it (cudaLaunchKernel, cuLaunchKernel,
    cudaMemcpyAsync...; -1 where unknown): the CPU runtime event with the same ``correlation`` in
    its args. ``gpu_launch`` names the op around that call; links start at the call itself, as
    Perfetto's flows do. One pass over the sparse args dicts, not over the events."""
    found = np.full(len(trace.gpu_start_ns), -1, np.int32)  # kept by Served: 4 B an interval
    if not trace.event_args or not trace.gpu_args:
        return found
    is_runtime = cpu_families(trace) == FAMILY_RUNTIME

    def correlation(args):  # a file's id may be anything: only numbers and strings match
        value = args.get("correlation") if isinstance(args, dict) else None
        return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None

    by_correlation = {}
    for event, args in trace.event_args.items():
        if is_runtime[event] and correlation(args) is not None:
            by_correlation[correlation(args)] = event
    for row, args in trace.gpu_args.items():
        found[row] = by_correlation.get(correlation(args), -1)
    return found


def encode_events(trace: Trace, lanes: Lanes) -> tuple[str, dict]:
    n_cpu, n_gpu = len(trace), len(trace.gpu_start_ns)
    starts = np.concatenate([trace.start_ns, trace.gpu_start_ns])
    ends = np.concatenate([trace.end_ns, trace.gpu_end_ns])
    origin = int(starts.min()) if len(starts) else 0
    span = int(ends.max()) - origin if len(ends) else 0
    rows = np.concatenate([lanes.cpu_row, lanes.gpu_row])
    # A row holds CPU events or GPU intervals, never both, each in id order: a stable sort by
    # row alone is the (row, id) order (a radix sort on int16, where a lexsort took two passes)
    order = np.argsort(rows.astype(np.int16) if len(lanes.row_lane) < 2 ** 15 else rows,
                       kind="stable")
    rows = rows[order]
    ids = np.where(order < n_cpu, order, order - n_cpu)
    first_of_row = np.flatnonzero(np.diff(rows, prepend=-1))
    start_rel = starts[order] - origin
    durations = np.maximum(ends[order] - starts[order], 0)
    is_gpu_entry = order >= n_cpu

    cpu_detail, gpu_detail = _detail_texts(trace)
    texts = sorted(set(cpu_detail.values()) | set(gpu_detail.values()))
    text_index = {text: i for i, text in enumerate(texts)}
    # entry position of each CPU event / GPU interval, to place the sparse details
    entry_of = np.empty(n_cpu + n_gpu, np.int64)
    entry_of[order] = np.arange(len(order))
    detail_entries = [int(entry_of[row]) for row in cpu_detail] + \
        [int(entry_of[n_cpu + row]) for row in gpu_detail]
    detail_text_ids = [text_index[t] for t in cpu_detail.values()] + \
        [text_index[t] for t in gpu_detail.values()]

    columns = {
        "row_count": np.bincount(rows, minlength=len(lanes.row_lane)),
        "start_gap": _gaps_within_rows(start_rel, start_rel + durations, first_of_row),
        "duration": durations,
        "id_delta": _deltas_within_rows(ids, first_of_row),
        "name_id": np.concatenate([trace.name_id, trace.gpu_name_id])[order],
        "family": np.concatenate([cpu_families(trace), gpu_families(trace)])[order],
        # per GPU entry, in entry order: the launching event's id + 1 (0: unknown)
        "gpu_launch": trace.gpu_launch.astype(np.int64)[order[is_gpu_entry] - n_cpu] + 1,
        "gpu_runtime": runtime_calls(trace)[order[is_gpu_entry] - n_cpu] + 1,  # the same, its call
        "detail_entry": np.asarray(detail_entries, np.int64),
        "detail_text": np.asarray(detail_text_ids, np.int64),
    }
    packed, layout = pack_columns(columns)
    info = {"layout": layout, "n_cpu": n_cpu, "n_gpu": n_gpu, "origin_ns": origin, "span_ns": span,
            **lane_info(trace, lanes), "detail_texts": texts}
    return packed, info


def lane_info(trace: Trace, lanes: Lanes) -> dict:
    """What the browser knows of lanes, rows and names: the same whichever events a page carries
    (served.py's coarser level uses it too)."""
    lane_height = np.zeros(len(lanes.labels), np.int64)
    np.maximum.at(lane_height, lanes.row_lane, lanes.row_sub + 1)
    return {
        "labels": lanes.labels, "short_labels": lanes.short, "groups": lanes.groups,
        "group_titles": lanes.group_titles, "row_kind": lanes.row_kind.tolist(),
        "lane_is_gpu": lanes.is_gpu.tolist(),
        "lane_height": lane_height.tolist(), "row_lane": lanes.row_lane.tolist(),
        "row_sub": lanes.row_sub.tolist(), "row_is_gpu": lanes.row_is_gpu.tolist(),
        "names": list(trace.names), "name_hash": name_hashes(trace.names).tolist(),
    }
