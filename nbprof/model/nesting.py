"""Nesting of CPU events per thread: depth, parent and self time, in numpy.

The definition is a stack per thread (tests/unit/test_load_columns.py has it in plain Python):
rows in start order, each row's parent is the innermost event still open at its start. That
is the last earlier row of its thread whose end is after the row's start, a query numpy answers
for all rows at once over a tree of maxima. It was one numba pass; importing numba cost a big
load ~60 MB, and the load needs numba nowhere else.
"""

from __future__ import annotations

import numpy as np

_FANOUT = 8  # children per node of the tree of maxima
_QUERY_BLOCK = 1 << 16  # rows whose parent is looked for at a time: temporaries stay small


def nest(start_ns: np.ndarray, end_ns: np.ndarray, thread: np.ndarray):
    """Depth, parent (NO_ID at the top) and self time for events sorted by start (the
    enclosing event first on ties)."""
    n = len(start_ns)
    depth = np.zeros(n, np.int16)
    parent = np.full(n, -1, np.int32)
    self_ns = np.subtract(end_ns, start_ns, dtype=np.int64)
    if not n:
        return depth, parent, self_ns
    start_ns, end_ns = np.asarray(start_ns, np.int64), np.asarray(end_ns, np.int64)
    for rows in _rows_by_thread(np.asarray(thread)):
        for at, up in _last_open(_last_open_position(start_ns, end_ns, rows), len(rows)):
            parent[rows[at]] = rows[up]
    _depths(parent, depth)
    # A slice that overlaps its enclosing one without fitting in it (real traces have such
    # quirks: Kineto's µs rounding) is drawn one level down; only the part inside counts
    # against its parent's self time. A block of rows at a time: at millions of rows each
    # full-size temporary is tens of MB.
    for first in range(0, n, _QUERY_BLOCK):
        children = np.flatnonzero(parent[first:first + _QUERY_BLOCK] >= 0) + first
        up = parent[children]
        np.subtract.at(self_ns, up,
                       np.minimum(end_ns[children], end_ns[up]) - start_ns[children])
    return depth, parent, self_ns


def _rows_by_thread(thread: np.ndarray):
    """Each thread's rows, in order. Threads are few: a mask per thread costs less memory
    than sorting every row by thread (one int64 per row)."""
    if thread.min() >= 0 and thread.max() < 2 * len(thread) + 1024:  # small ints, as a Trace's
        seen = np.zeros(int(thread.max()) + 1, bool)  # bincount would copy the column to int64
        for first in range(0, len(thread), _QUERY_BLOCK):
            seen[thread[first:first + _QUERY_BLOCK]] = True
        lanes = np.flatnonzero(seen)
    else:
        lanes = np.unique(thread)
    if len(lanes) > 64:
        by_thread = np.argsort(thread, kind="stable")
        sorted_lanes = thread[by_thread]
        bounds = np.r_[0, np.flatnonzero(sorted_lanes[1:] != sorted_lanes[:-1]) + 1,
                       len(thread)]
        del sorted_lanes
        for first, last in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            yield by_thread[first:last]
        return
    small = np.int32 if len(thread) < 1 << 31 else np.int64
    for lane in lanes.tolist():
        rows, filled = np.empty(int(np.count_nonzero(thread == lane)), small), 0
        for first in range(0, len(thread), _QUERY_BLOCK):  # no int64 row list at full size
            found = np.flatnonzero(thread[first:first + _QUERY_BLOCK] == lane) + first
            rows[filled:filled + len(found)] = found
            filled += len(found)
        yield rows


def _last_open_position(start_ns: np.ndarray, end_ns: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For one thread's ``rows`` (increasing; all rows are sorted by start): the last position
    among them at which each row is still open, i.e. before the first of them that starts at
    or after its end. Padded with -1 to a multiple of the fan-out (the tree of maxima's first
    level, without a copy). Counted among all rows, then among the thread's: the thread's
    starts are never gathered (an int64 per row of the largest thread)."""
    last = np.full(len(rows) + -len(rows) % _FANOUT, -1,
                   np.int32 if len(rows) < 1 << 31 else np.int64)
    for first in range(0, len(rows), _QUERY_BLOCK):
        block = rows[first:first + _QUERY_BLOCK]
        before = np.searchsorted(start_ns, end_ns[block], side="left")  # rows starting earlier
        # (in rows' own type: a mixed-type search would copy all of rows, per block)
        last[first:first + len(block)] = np.searchsorted(rows, before.astype(rows.dtype),
                                                         side="left") - 1
    return last


def _last_open(last: np.ndarray, size: int):
    """For the positions i < ``size``, the largest j < i with ``last[j] >= i`` (the innermost
    row still open at i) where there is one: (positions, their j), a block at a time. Walks
    left over a tree of maxima of ``last``: up while no node left of the walk's path under the
    same parent reaches i, then down to the rightmost position that does. The row just
    before is the answer for about half the rows: it is tried first."""
    last = _padded(last)
    tree = [last]
    while len(tree[-1]) > _FANOUT:
        tree.append(_padded(tree[-1].reshape(-1, _FANOUT).max(axis=1)))
    # per node above the positions, the maximum of it and the nodes left of it under the same
    # parent (for the positions: per block of queries, below)
    so_far = [None] + [np.maximum.accumulate(level.reshape(-1, _FANOUT), axis=1).reshape(-1)
                       for level in tree[1:]]
    fan = np.arange(_FANOUT)
    for first in range(0, size, _QUERY_BLOCK):
        query = np.arange(max(first, 1), min(first + _QUERY_BLOCK, size))
        behind = last[query - 1] >= query
        yield query[behind], query[behind] - 1
        query = query[~behind]
        node = query - 1  # on level 0
        low = (max(first - 1, 0) // _FANOUT) * _FANOUT  # the positions' so_far, for this block
        span = last[low:low + _QUERY_BLOCK + 2 * _FANOUT]
        span = span[:len(span) - len(span) % _FANOUT]
        so_far[0] = np.maximum.accumulate(span.reshape(-1, _FANOUT), axis=1).reshape(-1)
        for level, maxima in enumerate(tree):
            live = node >= 0
            query, node = query[live], node[live]
            if not len(query):
                break
            hit = so_far[level][node - (low if level == 0 else 0)] >= query
            if hit.any():
                # the rightmost of the nodes that reach, left of the path and under its parent
                look = node[hit, None] - fan
                reach = (look >= (node[hit] - node[hit] % _FANOUT)[:, None]) & \
                    (maxima[np.maximum(look, 0)] >= query[hit, None])
                at = look[np.arange(len(look)), reach.argmax(axis=1)]
                yield query[hit], _down(tree, level, at, query[hit])
                query, node = query[~hit], node[~hit]
            node = node // _FANOUT - 1


def _down(tree: list, level: int, at: np.ndarray, query: np.ndarray) -> np.ndarray:
    """From nodes ``at`` on ``level`` (each holds a position reaching its query) down to the
    rightmost such position."""
    fan = np.arange(_FANOUT)
    for maxima in tree[level - 1::-1] if level else []:
        children = at[:, None] * _FANOUT + fan
        reach = maxima[children] >= query[:, None]
        at = children[np.arange(len(at)), _FANOUT - 1 - reach[:, ::-1].argmax(axis=1)]
    return at


def _padded(values: np.ndarray) -> np.ndarray:
    """``values`` with -1 appended up to a multiple of the fan-out (-1 reaches no position)."""
    pad = -len(values) % _FANOUT
    return np.concatenate([values, np.full(pad, -1, values.dtype)]) if pad else values


def _depths(parent: np.ndarray, depth: np.ndarray) -> None:
    """Each row's number of ancestors into ``depth``, by pointer jumping: each round adds the
    distance to the row's current ancestor and jumps to that one's, log2(depth) rounds. A block
    at a time: a row may read a block already updated this round, which is still right (it
    then jumps further, and adds the matching distance)."""
    above = parent.copy()
    distance = depth  # int16: past 32767 levels it wraps, as depth[up] + 1 would
    np.greater_equal(parent, 0, out=distance, casting="unsafe")
    jumping = True
    while jumping:
        jumping = False
        for first in range(0, len(parent), _QUERY_BLOCK):
            rows = np.flatnonzero(above[first:first + _QUERY_BLOCK] >= 0) + first
            if len(rows):
                step = above[rows]
                distance[rows] += distance[step]
                above[rows] = above[step]
                jumping = True


def time_ordered(rows: np.ndarray, first: np.ndarray, then) -> np.ndarray:
    """``rows`` ordered by ``first[row]``, then by ``then(rows)`` (a function: the second key
    of the rows it is given), then by position: ``rows[np.lexsort((then(rows), first[rows]))]``.

    lexsort is left to order only the rows that tie on ``first``, each group in place: a
    trace's start times come nearly sorted, and lexsort is not adaptive (1.3 s for 3.6M sorted
    rows, against 3 ms)."""
    key, rows = _stable_sorted(first[rows], rows)
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


def _stable_sorted(key: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``key`` (int64, overwritten) sorted, and ``rows`` in that order (stable). Where the keys'
    span leaves room, each key and its position share one int64 that is sorted in place:
    argsort's int64 order would be the peak of a big load (~30 MB at a 1 GB file)."""
    bits = max(len(rows).bit_length(), 1)
    low = int(key.min()) if len(key) else 0
    if not len(key) or int(key.max()) - low >= 1 << (62 - bits):  # spans over ~half an hour
        order = np.argsort(key, kind="stable")  # (at millions of rows): the general way
        return key[order], rows[order]
    key -= low
    key <<= bits
    for start in range(0, len(key), _QUERY_BLOCK):
        key[start:start + _QUERY_BLOCK] |= np.arange(start, min(start + _QUERY_BLOCK, len(key)))
    key.sort()  # unique values: any sort is stable
    ordered = np.empty_like(rows)
    position = (1 << bits) - 1
    for start in range(0, len(key), _QUERY_BLOCK):
        ordered[start:start + _QUERY_BLOCK] = rows[key[start:start + _QUERY_BLOCK] & position]
    key >>= bits
    key += low
    return key, ordered
