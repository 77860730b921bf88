"""Nesting of CPU events per thread: depth, parent and self time, in one numba pass."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _nest_sorted(start_ns, end_ns, rows, depth, parent, self_ns):
    # rows: event indices of one thread, in start order (enclosing events first on ties).
    stack = np.empty(len(rows), np.int64)
    top = -1
    for row in rows:
        while top >= 0 and end_ns[stack[top]] <= start_ns[row]:
            top -= 1
        if top >= 0:
            up = stack[top]
            parent[row] = up
            depth[row] = depth[up] + 1
            # A slice that overlaps its enclosing one without fitting in it (real traces have
            # such quirks) is drawn one level down; only the part inside counts against self time.
            self_ns[up] -= min(end_ns[row], end_ns[up]) - start_ns[row]
        top += 1
        stack[top] = row


def nest(start_ns: np.ndarray, end_ns: np.ndarray, thread: np.ndarray):
    """Depth, parent (NO_ID at the top) and self time for events sorted by start."""
    n = len(start_ns)
    depth = np.zeros(n, np.int16)
    parent = np.full(n, -1, np.int32)
    self_ns = (end_ns - start_ns).astype(np.int64)
    if n:
        by_thread = np.argsort(thread, kind="stable")
        bounds = np.flatnonzero(np.diff(thread[by_thread])) + 1
        for rows in np.split(by_thread, bounds):
            _nest_sorted(start_ns, end_ns, rows.astype(np.int64), depth, parent, self_ns)
    return depth, parent, self_ns
