"""Spreading slices over lanes so that each lane nests properly.

Chrome's and Perfetto's X events must nest per (pid, tid): a slice that overlaps another without
fitting inside it is silently dropped by Perfetto. Real traces have such slices (a Kineto
runtime call that outlives its op, CUDA-event intervals of ops on one stream), so the exporter
moves them to extra lanes instead of dropping them (DESIGN.md, rule 6).
"""

from __future__ import annotations

import numpy as np

_compiled = None


def _nested_pass(start_ns, end_ns, group, rows, fits):
    # rows: in (group, start, longest first) order. One stack per group; a slice fits when it
    # lies inside the innermost slice still open at its start (or when none is open).
    stack_end = np.empty(len(rows), np.int64)
    top = -1
    current_group = -1
    for i in range(len(rows)):
        row = rows[i]
        if group[row] != current_group:
            current_group = group[row]
            top = -1
        while top >= 0 and stack_end[top] <= start_ns[row]:
            top -= 1
        if top < 0 or end_ns[row] <= stack_end[top]:
            top += 1
            stack_end[top] = end_ns[row]
            fits[i] = True
        else:
            fits[i] = False


def assign_lanes(start_ns: np.ndarray, end_ns: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Lane of each slice within its group (0 = the group's own lane; 1, 2, ... = extra lanes),
    such that the slices of one (group, lane) nest properly. Greedy: lane 0 keeps every slice
    that nests, the others go through the same pass again for lane 1, and so on."""
    count = len(start_ns)
    lane = np.zeros(count, np.int32)
    if count == 0:
        return lane
    group = np.asarray(group, np.int64)
    rows = np.lexsort((start_ns - end_ns, start_ns, group)).astype(np.int64)
    current = 0
    nested_pass = _compiled_pass()
    while len(rows):
        fits = np.empty(len(rows), np.bool_)
        nested_pass(start_ns, end_ns, group, rows, fits)
        lane[rows[fits]] = current
        rows = rows[~fits]
        current += 1
    return lane


def _compiled_pass():
    # numba is imported on the first export, not with the package: loading a trace needs none
    # of it, and importing it costs ~60 MB
    global _compiled
    if _compiled is None:
        from numba import njit

        _compiled = njit(cache=True)(_nested_pass)
    return _compiled
