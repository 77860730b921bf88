"""Nesting of CPU events per thread: depth, parent and self time, in one numba pass."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _nest_sorted(start_ns, end_ns, thread, top, depth, parent, self_ns):
    # Rows in start order (enclosing events first on ties), all threads at once. Each
    # thread's stack of open events is the parent chain from its last event (``top``): the
    # event below another on its stack is its parent, so popping is following parent links,
    # and no stack or per-thread row list is built.
    for row in range(len(start_ns)):
        lane = thread[row]
        up = top[lane]
        while up >= 0 and end_ns[up] <= start_ns[row]:
            up = parent[up]
        if up >= 0:
            parent[row] = up
            depth[row] = depth[up] + 1
            # A slice that overlaps its enclosing one without fitting in it (real traces have
            # such quirks) is drawn one level down; only the part inside counts against self time.
            self_ns[up] -= min(end_ns[row], end_ns[up]) - start_ns[row]
        top[lane] = row


def nest(start_ns: np.ndarray, end_ns: np.ndarray, thread: np.ndarray):
    """Depth, parent (NO_ID at the top) and self time for events sorted by start."""
    n = len(start_ns)
    depth = np.zeros(n, np.int16)
    parent = np.full(n, -1, np.int32)
    self_ns = np.subtract(end_ns, start_ns, dtype=np.int64)
    if n:
        lanes = np.asarray(thread)
        if lanes.min() < 0 or lanes.max() >= 2 * n + 1024:  # not small indices: renumbered
            lanes = np.unique(lanes, return_inverse=True)[1].reshape(-1)
        top = np.full(int(lanes.max()) + 1, -1, np.int64)
        _nest_sorted(np.asarray(start_ns, np.int64), np.asarray(end_ns, np.int64), lanes, top,
                     depth, parent, self_ns)
    return depth, parent, self_ns


def time_ordered(rows: np.ndarray, first: np.ndarray, then) -> np.ndarray:
    """``rows`` ordered by ``first[row]``, then by ``then(rows)`` (a function: the second key
    of the rows it is given), then by position: ``rows[np.lexsort((then(rows), first[rows]))]``.

    A trace's start times come nearly sorted, where a stable argsort (timsort) runs in about
    linear time, and lexsort does not (1.3 s for 3.6M sorted rows, against 3 ms): lexsort
    is left to order the rows that tie on ``first``, each group in place."""
    key = first[rows]
    order = np.argsort(key, kind="stable")
    rows = rows[order]
    del order
    key.sort(kind="stable")  # = key[order], in place: one column fewer at a big load's peak
    tied = key[1:] == key[:-1]
    if tied.any():
        member = np.zeros(len(rows), bool)
        member[1:] = tied
        member[:-1] |= tied
        at = np.flatnonzero(member)
        del tied, member
        group_rows = rows[at]
        rows[at] = group_rows[np.lexsort((then(group_rows), key[at]))]
    return rows
