"""Unions, gaps and overlaps of time intervals, grouped (by step, by device), with numpy only.

Busy time is the union of intervals, never their sum: a parent op's CUDA-event interval holds its
children's, and kernels on two streams run at once.
"""

from __future__ import annotations

import numpy as np

_EMPTY = np.zeros(0, np.int64)


def merge_by_group(group, start_ns, end_ns):
    """The union of the intervals of each group, as disjoint blocks ``(group, start, end)`` sorted
    by group then start. Touching intervals merge; empty ones (end <= start) are dropped."""
    group = np.asarray(group, np.int64)
    start_ns, end_ns = np.asarray(start_ns, np.int64), np.asarray(end_ns, np.int64)
    # One temporary at a time, in place where it can be (a widget's step breakdown merges every
    # GPU interval of the trace: at 100M events this sets the kernel's peak memory).
    keep = end_ns > start_ns
    if not keep.all():
        group, start_ns, end_ns = group[keep], start_ns[keep], end_ns[keep]
    del keep
    if not len(start_ns):
        return _EMPTY, _EMPTY, _EMPTY
    order = np.lexsort((start_ns, group))
    group = group[order]
    start_ns = start_ns[order]
    end_ns = end_ns[order]
    del order
    base = int(start_ns.min())
    shift = int(end_ns.max()) - base + 1
    if shift * (int(group[-1] - group[0]) + 1) < 2 ** 62:
        # The running maximum of ends, restarted per group: lifting each group above every end
        # of the groups before it lets one maximum.accumulate do all groups at once.
        lift = group - group[0]  # 0.. in sorted order
        lift *= shift
        reach = end_ns - base
        reach += lift
        np.maximum.accumulate(reach, out=reach)
        reach -= lift
        reach += base
        del lift
    else:  # an enormous span times many groups: per group instead
        reach = np.empty_like(end_ns)
        bounds = np.flatnonzero(np.diff(group)) + 1
        for rows in np.split(np.arange(len(group)), bounds):
            reach[rows] = np.maximum.accumulate(end_ns[rows])
    new_block = np.ones(len(start_ns), bool)
    new_block[1:] = (group[1:] != group[:-1]) | (start_ns[1:] > reach[:-1])
    first = np.flatnonzero(new_block)
    last = np.append(first[1:] - 1, len(start_ns) - 1)
    return group[first], start_ns[first], reach[last]


def union_ns_by_group(group, start_ns, end_ns, groups: int) -> np.ndarray:
    """Per group 0..groups-1, the length of the union of its intervals."""
    block_group, block_start, block_end = merge_by_group(group, start_ns, end_ns)
    return np.bincount(block_group, weights=block_end - block_start, minlength=groups)[:groups] \
        .astype(np.int64)


def gaps_in_windows(window_start, window_end, block_group, block_start, block_end):
    """The gaps ``(group, start, end)`` of each window ``g`` (``window_start[g]``..``window_end[g]``)
    not covered by its blocks (from :func:`merge_by_group`, already clipped to the windows)."""
    window_start = np.asarray(window_start, np.int64)
    window_end = np.asarray(window_end, np.int64)
    windows = np.arange(len(window_start), dtype=np.int64)
    # Each gap runs from a window start or a block end to the next block start or the window end.
    gap_group = np.concatenate([windows, block_group])
    opens = np.concatenate([window_start, block_end])
    closes = np.concatenate([block_start, window_end])
    open_order = np.lexsort((opens, np.concatenate([np.zeros(len(windows)), np.ones(len(block_end))]),
                             gap_group))
    close_order = np.lexsort((closes, np.concatenate([np.zeros(len(block_start)), np.ones(len(windows))]),
                              np.concatenate([block_group, windows])))
    group, start, end = gap_group[open_order], opens[open_order], closes[close_order]
    real = end > start
    return group[real], start[real], end[real]


def covered_ns(block_start, block_end, start_ns, end_ns) -> np.ndarray:
    """Per interval ``start_ns[i]..end_ns[i]``, how much of it the disjoint sorted blocks cover."""
    block_start = np.asarray(block_start, np.int64)
    block_end = np.asarray(block_end, np.int64)
    if not len(block_start):
        return np.zeros(len(start_ns), np.int64)
    before = np.concatenate([[0], np.cumsum(block_end - block_start)])

    def measure_up_to(t):  # covered time before t
        t = np.asarray(t, np.int64)
        index = np.searchsorted(block_start, t, side="right") - 1
        inside = np.clip(t - block_start[np.maximum(index, 0)], 0,
                         (block_end - block_start)[np.maximum(index, 0)])
        return np.where(index >= 0, before[np.maximum(index, 0)] + inside, 0)

    return np.maximum(measure_up_to(end_ns) - measure_up_to(start_ns), 0)


def touches_any(block_start, block_end, start_ns, end_ns) -> np.ndarray:
    """Per interval, whether some disjoint sorted block overlaps it or ends exactly at its start."""
    block_start = np.asarray(block_start, np.int64)
    block_end = np.asarray(block_end, np.int64)
    if not len(block_start):
        return np.zeros(len(start_ns), bool)
    index = np.searchsorted(block_end, np.asarray(start_ns, np.int64), side="left")
    found = index < len(block_start)
    result = np.zeros(len(start_ns), bool)
    result[found] = block_start[index[found]] < np.asarray(end_ns, np.int64)[found]
    return result
