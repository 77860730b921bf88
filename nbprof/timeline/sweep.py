"""The browser's level-of-detail rule in numba, over a Trace's sorted per-row columns.

js/timeline_draw.js's ``sweep``, ported exactly (tests/unit/test_timeline_served.py checks it
against a transliteration of the JS): per row, a binary search on the running maximum of ends finds
the first event in view; events at least MIN_REAL_PX wide are bars of their own; narrower ones whose
gap to the block's end is under MERGE_GAP_PX merge into busy blocks, each ending at the
grid column (a power of two ns, 2-4 px: block_column_ns) it starts in and carrying the time its events cover. Coarse levels (the whole
trace's bars at a fixed resolution) let a wide view be swept from their blocks instead of every
event, with the same result. Pure numpy and numba: served.py puts it behind the Bokeh models.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..model import Trace
from .lanes import Lanes

# js/timeline.js's constants: the same rule on both sides.
MIN_REAL_PX = 3
MERGE_GAP_PX = 1
MAX_BLOCK_PX = 4


def block_column_ns(ns_per_px: float) -> float:
    """The width of the grid columns blocks end at (js/timeline_draw.js blockColumnNs: the same
    arithmetic): the power of two ns at most MAX_BLOCK_PX pixels (2-4 px). Any view's columns
    then split where a finer level's do, so a level swept in place of its events (served
    levels, first_level.py) draws the same blocks. The 1e-9 keeps a width a hair under a power
    of two (ns per pixel computed as span / (span / 2^k)) on that power."""
    ns = MAX_BLOCK_PX * ns_per_px
    if not ns > 0 or math.isinf(ns):
        return ns
    return 2.0 ** math.floor(math.log2(ns * (1 + 1e-9)))


@dataclass(frozen=True)
class RowColumns:
    """Every CPU event and GPU interval as an entry of its draw row: rows in order, each row in
    start order (the page's own entry order, data.py). Times in ns since ``origin_ns``."""
    order: np.ndarray  # entry -> index into (CPU events, then GPU intervals)
    row_start: np.ndarray  # row r holds entries row_start[r]:row_start[r + 1]
    start: np.ndarray
    duration: np.ndarray
    max_end: np.ndarray  # running max of ends within the row: the binary search's key
    origin_ns: int
    span_ns: int


def row_columns(trace: Trace, lanes: Lanes) -> RowColumns:
    n_rows = len(lanes.row_lane)
    # Ids are in start order and CPU entries come before GPU ones, so a stable sort by row alone
    # gives data.py's (row, id) order; on small ints numpy's stable sort is a radix sort.
    rows = np.concatenate([lanes.cpu_row, lanes.gpu_row]).astype(
        np.int16 if n_rows < 2 ** 15 - 1 else np.int32, copy=False)
    order = np.argsort(rows, kind="stable")
    # Each row's first entry: a binary search in the sorted rows, not a bincount (which widens
    # every row number to int64 first; so would needles of another dtype).
    row_start = np.searchsorted(rows[order], np.arange(n_rows + 1, dtype=rows.dtype))
    row_start = row_start.astype(np.int64)
    del rows
    if len(order) < 2 ** 31:  # the kept index at 4 bytes an entry, not 8
        order = order.astype(np.int32)
    # One full-length temporary at a time: at 10^8 entries each costs 800 MB.
    start = np.concatenate([trace.start_ns, trace.gpu_start_ns])
    origin = int(start.min()) if len(start) else 0
    start = start[order]
    start -= origin
    end = np.concatenate([trace.end_ns, trace.gpu_end_ns])
    span = int(end.max()) - origin if len(end) else 0
    end = end[order]
    end -= origin
    np.maximum(end, start, out=end)  # a negative duration counts as 0
    duration = end - start
    return RowColumns(order=order, row_start=row_start, start=start, duration=duration,
                      max_end=_running_max_per_row(end, row_start), origin_ns=origin, span_ns=span)


@njit(cache=True)
def _running_max_per_row(ends, row_start):
    """The running max of ``ends`` within each row, in place."""
    for r in range(len(row_start) - 1):
        running = np.iinfo(np.int64).min
        for i in range(row_start[r], row_start[r + 1]):
            running = max(running, ends[i])
            ends[i] = running
    return ends


@dataclass(frozen=True)
class Bars:
    """What a view draws, row by row: each bar is one event (count 1) or a merged block."""
    row: np.ndarray
    first: np.ndarray  # the bar's first entry (its name, colour and, for count 1, the event)
    count: np.ndarray
    left: np.ndarray
    right: np.ndarray
    busy: np.ndarray  # the time its events cover (their union)

    def __len__(self) -> int:
        return len(self.row)


@njit(cache=True)
def _put(out, n, row, first, count, left, right, busy):
    """Bar n into the columns of ``out``; -1 when it is full."""
    if n < 0 or n >= out.shape[1]:
        return -1
    out[0, n], out[1, n], out[2, n], out[3, n], out[4, n], out[5, n] = \
        row, first, count, left, right, busy
    return n + 1


# The open block of a row's sweep: (count, first, start, end, busy, end of its grid column); a
# tuple, so numba keeps it in registers (an array here made the sweep 5x slower).
_NO_BLOCK = (0, -1, 0, 0, 0, 0.0)


@njit(cache=True, inline="always")
def _close(out, n, row, block):
    return _put(out, n, row, block[1], block[0], block[2], block[3], block[4]) if block[0] else n


@njit(cache=True, inline="always")
def _add(out, n, block, row, first, count, s, e, busy, real, gap_ns, chunk_ns):
    """One item into a row's sweep: an event (a bar of its own when ``real``) or a pre-merged unit
    of ``count`` events (never real; _add_bar splits one that overlaps the open block or crosses
    its grid column). Returns (n, the open block)."""
    if real:
        return _put(out, _close(out, n, row, block), row, first, 1, s, e, busy), _NO_BLOCK
    if block[0] and s - block[3] < gap_ns and s < block[5]:
        # only what reaches past the block's end is new busy time: the union of its events
        busy = max(0, busy - max(0, min(e, block[3]) - s))
        return n, (block[0] + count, block[1], block[2], max(block[3], e), block[4] + busy,
                   block[5])
    return _close(out, n, row, block), (count, first, s, e, busy, _column_end(s, chunk_ns))


@njit(cache=True, inline="always")
def _column_end(s, chunk_ns):
    """The end of the MAX_BLOCK_PX grid column that time ``s`` is in (js: the same arithmetic)."""
    return (np.floor(s / chunk_ns) + 1.0) * chunk_ns if chunk_ns > 0 else np.inf


@njit(cache=True, inline="always")
def _add_events(out, n, block, row, start, duration, max_end, lo, hi, x0, x1, real_ns, gap_ns,
                chunk_ns, min_duration):
    """Entries lo..hi of one row, those in view, into its sweep, one by one."""
    i = lo + np.searchsorted(max_end[lo:hi], x0)  # first entry whose row max end >= x0
    while i < hi and start[i] <= x1:
        d = duration[i]
        s = start[i]
        if d >= min_duration and s + d >= x0:
            n, block = _add(out, n, block, row, i, 1, s, s + d, d, d >= real_ns, gap_ns, chunk_ns)
        i += 1
    return n, block


@njit(cache=True)
def _sweep(row_start, start, duration, max_end, x0, x1, real_ns, gap_ns, chunk_ns, min_duration,
           out):
    """js/timeline_draw.js's sweep over every row into ``out`` (6 x capacity: row, first, count,
    left, right, busy); the number of bars, or -1 when ``out`` is too short."""
    n = 0
    for r in range(len(row_start) - 1):
        n, block = _add_events(out, n, _NO_BLOCK, r, start, duration, max_end, row_start[r],
                               row_start[r + 1], x0, x1, real_ns, gap_ns, chunk_ns, min_duration)
        n = _close(out, n, r, block)
        if n < 0:
            return -1
    return n


@njit(cache=True, inline="always")
def _add_bar(out, n, block, row, level, j, x0, x1, real_ns, gap_ns, chunk_ns):
    """Bar j of a level (left, right, count, busy, first, last start) into a row's sweep, when it
    can go in as a whole: an event of its own, or a block wholly in view and in one grid column
    (its events are all narrower than 3 px here and their gaps under 1 px: the sweep would merge
    them all the same) that does not overlap the open block it joins (its busy time adds up).
    Returns (n, block, whether it must go in piece by piece: a block across an edge of the view
    or of a grid column, or one that overlaps the open block)."""
    left, right, count, busy, first, last_start = (level[0][j], level[1][j], level[2][j],
                                                   level[3][j], level[4][j], level[5][j])
    if right < x0:
        return n, block, False
    if count == 1:
        n, block = _add(out, n, block, row, first, 1, left, right, right - left,
                        right - left >= real_ns, gap_ns, chunk_ns)
        return n, block, False
    if left < x0 or last_start > x1:
        return n, block, True
    if block[0] and left - block[3] < gap_ns and left < block[5]:  # it joins the open block
        whole = left >= block[3] and last_start < block[5]
    else:
        whole = last_start < _column_end(left, chunk_ns)
    if whole:
        n, block = _add(out, n, block, row, first, count, left, right, busy, False, gap_ns,
                        chunk_ns)
    return n, block, not whole


@njit(cache=True)
def _sweep_level(row_start, start, duration, max_end, coarse, coarse_row_start, coarse_max_end,
                 fine, x0, x1, real_ns, gap_ns, chunk_ns, out):
    """The same bars as _sweep (with no minimum duration) for a view at least as coarse as the
    ``coarse`` level, reading its bars instead of their events. A block across an edge of the
    view goes in through the ``fine`` level's bars inside it (the page's level: its blocks are
    short), and a fine block across the edge event by event. Levels are tuples of arrays:
    (left, right, count, busy, first, last_start); bars of both are in row and start order."""
    n = 0
    for r in range(len(coarse_row_start) - 1):
        block = _NO_BLOCK
        lo, hi = coarse_row_start[r], coarse_row_start[r + 1]
        j = lo + np.searchsorted(coarse_max_end[lo:hi], x0)
        while j < hi and coarse[0][j] <= x1:
            n, block, split = _add_bar(out, n, block, r, coarse, j, x0, x1, real_ns, gap_ns,
                                       chunk_ns)
            if split:  # the fine bars that make up this coarse one (their first events)
                first, count = coarse[4][j], coarse[2][j]
                k = np.searchsorted(fine[4], first)
                while k < len(fine[4]) and fine[4][k] < first + count and fine[0][k] <= x1:
                    n, block, split = _add_bar(out, n, block, r, fine, k, x0, x1, real_ns, gap_ns,
                                               chunk_ns)
                    if split:
                        n, block = _add_events(out, n, block, r, start, duration, max_end,
                                               fine[4][k], fine[4][k] + fine[2][k], x0, x1,
                                               real_ns, gap_ns, chunk_ns, 0)
                    k += 1
            j += 1
        n = _close(out, n, r, block)
        if n < 0:
            return -1
    return n


@njit(cache=True)
def longest_entries(duration, first, count):
    """Per bar (its entries first..first + count - 1), the entry of its longest event: what a
    block is named after."""
    out = first.copy()
    for k in range(len(first)):
        for i in range(first[k] + 1, first[k] + count[k]):
            if duration[i] > duration[out[k]]:
                out[k] = i
    return out


@dataclass(frozen=True)
class Level:
    """A coarse level as the sweep reads it: bars of the whole trace at ``ns_per_px``."""
    bars: Bars
    ns_per_px: float
    row_start: np.ndarray
    max_end: np.ndarray  # running max of the bars' right ends within each row
    last_start: np.ndarray  # start of each bar's last event: is the whole block in view?

    @classmethod
    def of(cls, bars: Bars, ns_per_px: float, columns: RowColumns) -> "Level":
        rows = len(columns.row_start) - 1
        row_start = np.zeros(rows + 1, np.int64)
        np.cumsum(np.bincount(bars.row, minlength=rows), out=row_start[1:])
        return cls(bars, ns_per_px, row_start, _running_max_per_row(bars.right.copy(), row_start),
                   columns.start[bars.first + bars.count - 1])

    def arrays(self) -> tuple:
        bars = self.bars
        return bars.left, bars.right, bars.count, bars.busy, bars.first, self.last_start


def view_bars(columns: RowColumns, x0: float, x1: float, width_px: float,
              min_duration_ns: int = 0, limit: int | None = None,
              levels: tuple[Level, ...] = ()) -> Bars | None:
    """The bars of the view [x0, x1] (ns since ``columns.origin_ns``) at ``width_px`` pixels:
    what js/timeline_draw.js draws for that view from every event. None if more than ``limit``.
    Given ``levels`` (coarse levels, finest first) and no minimum duration, the sweep reads the
    coarsest level no coarser than the view: the same bars, at a cost that follows that level's
    bars in view, not the events."""
    ns_per_px = (float(x1) - float(x0)) / max(float(width_px), 1.0)
    # Each row gives at most ~2 bars per pixel (bars of their own are >= 3 px, blocks are
    # separated by >= 1 px); overlapping events can give more, then the sweep runs again with
    # room for every entry.
    rows, entries = len(columns.row_start) - 1, len(columns.start)
    capacities = (limit + 1,) if limit is not None else (
        min(entries, rows * (2 * int(width_px) + 8)), entries)
    usable = [level for level in levels if level.ns_per_px <= ns_per_px and not min_duration_ns]
    level = usable[-1] if usable else None
    for capacity in capacities:
        out = np.empty((6, capacity), np.int64)
        real_ns, gap_ns = MIN_REAL_PX * ns_per_px, MERGE_GAP_PX * ns_per_px
        chunk_ns = block_column_ns(ns_per_px)
        if level is not None:
            n = _sweep_level(columns.row_start, columns.start, columns.duration, columns.max_end,
                             level.arrays(), level.row_start, level.max_end, usable[0].arrays(),
                             float(x0), float(x1), real_ns, gap_ns, chunk_ns, out)
        else:
            n = _sweep(columns.row_start, columns.start, columns.duration, columns.max_end,
                       float(x0), float(x1), real_ns, gap_ns, chunk_ns, int(min_duration_ns), out)
        if n >= 0 and (limit is None or n <= limit):
            # views of ``out`` would keep all its capacity (48 B an entry) alive: copy a short fill
            kept = out[:, :n] if 2 * n >= capacity else out[:, :n].copy()
            return Bars(*kept)
    return None


def coarse_level(columns: RowColumns, budget: int) -> Level:
    """The whole trace's bars at the finest resolution (ns per "pixel", in powers of two) whose
    bars fit ``budget``. Each try is one sweep over every entry."""
    rows = max(len(columns.row_start) - 1, 1)
    resolution = 2.0 ** math.ceil(math.log2(max(2.0 * rows * columns.span_ns / max(budget, 1), 1.0)))

    def level_at(resolution):
        width = columns.span_ns / resolution
        bars = view_bars(columns, 0, columns.span_ns, width, limit=budget)
        # the ns per pixel view_bars used, exactly: views at least this coarse may read the level
        return bars and Level.of(bars, float(columns.span_ns) / max(width, 1.0), columns)

    level = level_at(resolution)
    while level is None:  # too many: coarser
        if columns.span_ns / resolution <= 1:
            # one "pixel" for the whole trace and still over budget: a bar per non-empty row is
            # as coarse as a level gets (a budget under the number of rows, or a trace of
            # instants), so that is the level, whatever the budget
            bars = view_bars(columns, 0, columns.span_ns, 1.0)
            return Level.of(bars, float(max(columns.span_ns, 1)), columns)
        resolution *= 2
        level = level_at(resolution)
    while resolution > 1:  # idle time and overlaps leave room: finer while it fits
        finer = level_at(resolution / 2)
        if finer is None:
            break
        level, resolution = finer, resolution / 2
    return level


def coarser_levels(level: Level, columns: RowColumns, factor: int = 8,
                   smallest: int = 50_000) -> tuple[Level, ...]:
    """``level`` and levels ``factor`` times coarser each, each swept from the one before (exact,
    see _sweep_level), until one has under ``smallest`` bars. A view reads the coarsest level no
    coarser than itself: the whole of a 100M-event trace is then a sweep over thousands of bars."""
    chain = [level]
    while len(chain[-1].bars) >= smallest and len(chain) < 12:
        width = columns.span_ns / (chain[-1].ns_per_px * factor)
        if width < 1:
            break
        bars = view_bars(columns, 0, columns.span_ns, width, levels=(chain[-1],))
        chain.append(Level.of(bars, float(columns.span_ns) / max(width, 1.0), columns))
    return tuple(chain)
