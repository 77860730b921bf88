"""Level of detail past the embedding budget: a coarser level on the page, exact bars from the kernel.

A page that embeds every event stays fluid to ~10M events (bench/bench_bigview.py), but its bytes
and the browser's decode grow with the trace. Past ``max_embedded_events`` the page carries the
bars of the whole trace drawn at a fixed resolution instead (events narrower than 3 of its "pixels"
merged into per-row busy blocks where the gaps are under one; longer events kept exact), and says
so in its note. In a notebook the browser also asks the kernel for each view it settles on
(``served_request``: x range, plot width, minimum duration); the kernel answers with just that
view's bars (``served_answer``), computed here from the Trace's sorted columns, and the browser
draws them with the same code as embedded events (js/timeline_served.js).

The rule is js/timeline_draw.js's ``sweep``, ported exactly (a test checks it against a
transliteration of the JS): per row, a binary search on the running maximum of ends finds the first
event in view; events at least MIN_REAL_PX wide are bars of their own; narrower ones whose gap to
the block's end is under MERGE_GAP_PX merge. Because it is the same rule, the browser re-sweeping
an answer at the same view draws exactly those bars.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import orjson
from bokeh.models import ColumnDataSource
from numba import njit

from ..events import Trace
from .data import _deltas_within_rows, _detail_texts, _gaps_within_rows, lane_info, runtime_calls
from .lanes import Lanes, cpu_families, gpu_families
from .packing import pack_columns

# js/timeline.js's constants: the same rule on both sides.
MIN_REAL_PX = 3
MERGE_GAP_PX = 1
DEFAULT_MAX_EMBEDDED = 5_000_000


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
    starts = np.concatenate([trace.start_ns, trace.gpu_start_ns]).astype(np.int64)
    ends = np.concatenate([trace.end_ns, trace.gpu_end_ns]).astype(np.int64)
    rows = np.concatenate([lanes.cpu_row, lanes.gpu_row]).astype(np.int64)
    n_rows = len(lanes.row_lane)
    # Ids are in start order and CPU entries come before GPU ones, so a stable sort by row alone
    # gives data.py's (row, id) order; on small ints numpy's stable sort is a radix sort.
    key = rows.astype(np.int16) if n_rows < 2 ** 15 else rows
    order = np.argsort(key, kind="stable")
    origin = int(starts.min()) if len(starts) else 0
    start = starts[order] - origin
    duration = np.maximum(ends[order] - starts[order], 0)
    row_start = np.zeros(n_rows + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=row_start[1:])
    return RowColumns(order=order, row_start=row_start, start=start, duration=duration,
                      max_end=_running_max_per_row(start + duration, row_start), origin_ns=origin,
                      span_ns=int(ends.max()) - origin if len(ends) else 0)


@njit(cache=True)
def _running_max_per_row(ends, row_start):
    out = np.empty_like(ends)
    for r in range(len(row_start) - 1):
        running = np.iinfo(np.int64).min
        for i in range(row_start[r], row_start[r + 1]):
            running = max(running, ends[i])
            out[i] = running
    return out


@dataclass(frozen=True)
class Bars:
    """What a view draws, row by row: each bar is one event (count 1) or a merged block."""
    row: np.ndarray
    first: np.ndarray  # the bar's first entry (its name, colour and, for count 1, the event)
    count: np.ndarray
    left: np.ndarray
    right: np.ndarray
    busy: np.ndarray  # summed durations of its events

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


# The open block of a row's sweep: (count, first, start, end, busy); a tuple, so numba keeps it
# in registers (an array here made the sweep 5x slower).
_NO_BLOCK = (0, -1, 0, 0, 0)


@njit(cache=True, inline="always")
def _close(out, n, row, block):
    return _put(out, n, row, block[1], block[0], block[2], block[3], block[4]) if block[0] else n


@njit(cache=True, inline="always")
def _add(out, n, block, row, first, count, s, e, busy, real, gap_ns):
    """One item into a row's sweep: an event (a bar of its own when ``real``) or a pre-merged unit
    of ``count`` events (never real). Returns (n, the open block)."""
    if real:
        return _put(out, _close(out, n, row, block), row, first, 1, s, e, busy), _NO_BLOCK
    if block[0] and s - block[3] < gap_ns:
        return n, (block[0] + count, block[1], block[2], max(block[3], e), block[4] + busy)
    return _close(out, n, row, block), (count, first, s, e, busy)


@njit(cache=True, inline="always")
def _add_events(out, n, block, row, start, duration, max_end, lo, hi, x0, x1, real_ns, gap_ns,
                min_duration):
    """Entries lo..hi of one row, those in view, into its sweep, one by one."""
    i = lo + np.searchsorted(max_end[lo:hi], x0)  # first entry whose row max end >= x0
    while i < hi and start[i] <= x1:
        d = duration[i]
        s = start[i]
        if d >= min_duration and s + d >= x0:
            n, block = _add(out, n, block, row, i, 1, s, s + d, d, d >= real_ns, gap_ns)
        i += 1
    return n, block


@njit(cache=True)
def _sweep(row_start, start, duration, max_end, x0, x1, real_ns, gap_ns, min_duration, out):
    """js/timeline_draw.js's sweep over every row into ``out`` (6 x capacity: row, first, count,
    left, right, busy); the number of bars, or -1 when ``out`` is too short."""
    n = 0
    for r in range(len(row_start) - 1):
        n, block = _add_events(out, n, _NO_BLOCK, r, start, duration, max_end, row_start[r],
                               row_start[r + 1], x0, x1, real_ns, gap_ns, min_duration)
        n = _close(out, n, r, block)
        if n < 0:
            return -1
    return n


@njit(cache=True, inline="always")
def _add_bar(out, n, block, row, level, j, x0, x1, real_ns, gap_ns):
    """Bar j of a level (left, right, count, busy, first, last start) into a row's sweep, when it
    can go in as a whole: an event of its own, or a block wholly in view (its events are all
    narrower than 3 px here and their gaps under 1 px: the sweep would merge them all the same).
    Returns (n, block, whether it must go in piece by piece: a block across an edge of the view)."""
    left, right, count, busy, first, last_start = (level[0][j], level[1][j], level[2][j],
                                                   level[3][j], level[4][j], level[5][j])
    if right < x0:
        return n, block, False
    if count == 1:
        n, block = _add(out, n, block, row, first, 1, left, right, right - left,
                        right - left >= real_ns, gap_ns)
        return n, block, False
    if left >= x0 and last_start <= x1:
        n, block = _add(out, n, block, row, first, count, left, right, busy, False, gap_ns)
        return n, block, False
    return n, block, True


@njit(cache=True)
def _sweep_level(row_start, start, duration, max_end, coarse, coarse_row_start, coarse_max_end,
                 fine, x0, x1, real_ns, gap_ns, out):
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
            n, block, split = _add_bar(out, n, block, r, coarse, j, x0, x1, real_ns, gap_ns)
            if split:  # the fine bars that make up this coarse one (their first events)
                first, count = coarse[4][j], coarse[2][j]
                k = np.searchsorted(fine[4], first)
                while k < len(fine[4]) and fine[4][k] < first + count and fine[0][k] <= x1:
                    n, block, split = _add_bar(out, n, block, r, fine, k, x0, x1, real_ns, gap_ns)
                    if split:
                        n, block = _add_events(out, n, block, r, start, duration, max_end,
                                               fine[4][k], fine[4][k] + fine[2][k], x0, x1,
                                               real_ns, gap_ns, 0)
                    k += 1
            j += 1
        n = _close(out, n, r, block)
        if n < 0:
            return -1
    return n


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
        return cls(bars, ns_per_px, row_start, _running_max_per_row(bars.right, row_start),
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
        if level is not None:
            n = _sweep_level(columns.row_start, columns.start, columns.duration, columns.max_end,
                             level.arrays(), level.row_start, level.max_end, usable[0].arrays(),
                             float(x0), float(x1), real_ns, gap_ns, out)
        else:
            n = _sweep(columns.row_start, columns.start, columns.duration, columns.max_end,
                       float(x0), float(x1), real_ns, gap_ns, int(min_duration_ns), out)
        if n >= 0 and (limit is None or n <= limit):
            return Bars(*(np.ascontiguousarray(column[:n]) for column in out))
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


class Served:
    """A timeline past its embedding budget: the coarse level for the page, answers for views."""

    def __init__(self, trace: Trace, lanes: Lanes, budget: int):
        self.trace, self.lanes, self.budget = trace, lanes, budget
        self.columns = row_columns(trace, lanes)
        self.family = np.concatenate([cpu_families(trace), gpu_families(trace)])
        self.cpu_detail, self.gpu_detail = _detail_texts(trace)
        # per GPU interval, the op that launched it and the runtime call that did (-1: unknown)
        self.launch_op = trace.gpu_launch
        self.launch_call = runtime_calls(trace)
        self.level = coarse_level(self.columns, budget)  # what the page embeds
        # what views are swept from (levels down to a few bars per row on small test traces)
        self.levels = coarser_levels(self.level, self.columns, smallest=min(50_000, budget // 8 + 1))
        self.coarse, self.resolution_ns = self.level.bars, self.level.ns_per_px
        self._last_key = None
        # The browser writes the view it settled on; the kernel (jupyter_bokeh syncs both ways)
        # writes that view's bars back. A static page has no kernel: it keeps the coarse level.
        self.request = ColumnDataSource({}, name="nbprof_served_request")
        self.answer_source = ColumnDataSource({}, name="nbprof_served_answer")

    def connect(self, callback) -> None:
        self.answer_source.js_on_change("data", callback)
        self.request.on_change("data", lambda _attr, _old, new: self._answer_request(new))

    def _answer_request(self, request: dict) -> None:
        data = self.answer(request)
        if data is not None:
            self.answer_source.data = data

    @property
    def events(self) -> int:
        return len(self.columns.start)

    def page(self) -> tuple[str, dict]:
        """The packed coarse level and the page's info, for view.py. The coarser levels that are
        small beside it (a quarter of its bars or fewer) go along, so a wide view's step sweeps
        one of those instead of millions of bars (js/timeline_served.js picks the level)."""
        packed, meta = self.encode(self.coarse)
        coarser = []
        for level in self.levels[1:]:
            if len(level.bars) <= len(self.coarse) // 4:
                level_packed, level_meta = self.encode(level.bars)
                coarser.append({"packed": level_packed, "meta": level_meta,
                                "ns_per_px": level.ns_per_px})
        info = {**meta, "origin_ns": self.columns.origin_ns, "span_ns": self.columns.span_ns,
                **lane_info(self.trace, self.lanes), "coarse": True, "coarser": coarser}
        return packed, info

    def note(self) -> str:
        real = MIN_REAL_PX * self.resolution_ns / 1e3
        return (f"showing {len(self.coarse):,} bars for {self.events:,} events (over the "
                f"{self.budget:,}-event budget): events under {_micros(real)} µs merged into busy "
                f"blocks at {_micros(self.resolution_ns / 1e3)} µs. In a notebook the kernel draws "
                "every event of the view you stop at; for a page with all of them: nbprof view --full")

    def answer(self, request: dict) -> dict | None:
        """The served_answer source's data for one served_request's data; None for a repeat
        (jupyter_bokeh runs a change's callback twice) or a malformed request."""
        try:
            x0, x1 = float(request["x0"][0]), float(request["x1"][0])
            width, min_duration = float(request["width"][0]), int(request["min_duration"][0])
            key = str(request["key"][0])
        except (KeyError, IndexError, TypeError, ValueError):
            return None
        if key == self._last_key or not (math.isfinite(x0) and math.isfinite(x1)) or x1 <= x0:
            return None
        self._last_key = key
        packed, meta = self.encode(view_bars(self.columns, x0, x1, width, min_duration,
                                             levels=self.levels))
        return {"packed": [packed], "meta": [orjson.dumps(meta).decode()], "key": [key]}

    def encode(self, bars: Bars) -> tuple[str, dict]:
        """Bars as entries in the page's packed format (data.py), plus each entry's count, busy
        time and event id. Entries get local ids (CPU and GPU apart, in start order) so the
        browser's per-id tables stay as small as the answer; ``event_id`` maps them back."""
        n_cpu_events = len(self.trace)
        index = self.columns.order[bars.first]
        is_gpu = index >= n_cpu_events
        event_id = np.where(is_gpu, index - n_cpu_events, index)
        local = np.empty(len(bars), np.int64)
        for kind in (False, True):
            where = np.flatnonzero(is_gpu == kind)
            local[where[np.argsort(event_id[where], kind="stable")]] = np.arange(len(where))
        first_of_row = np.flatnonzero(np.diff(bars.row, prepend=-1))
        single = bars.count == 1
        cpu_name = self.trace.name_id[np.minimum(index, max(n_cpu_events - 1, 0))] if \
            n_cpu_events else np.zeros(len(bars), np.int64)
        gpu_rows = np.clip(index - n_cpu_events, 0, max(len(self.trace.gpu_name_id) - 1, 0))
        gpu_name = self.trace.gpu_name_id[gpu_rows] if len(self.trace.gpu_name_id) else cpu_name
        columns = {
            "row_count": np.bincount(bars.row, minlength=len(self.lanes.row_lane)),
            "start_gap": _gaps_within_rows(bars.left, bars.right, first_of_row),
            "duration": bars.right - bars.left,
            "id_delta": _deltas_within_rows(local, first_of_row),
            "name_id": np.where(is_gpu, gpu_name, cpu_name),
            "family": self.family[index],
            "gpu_launch": self._launches(self.launch_op, index[is_gpu] - n_cpu_events,
                                         single[is_gpu], event_id, local, single & ~is_gpu),
            "gpu_runtime": self._launches(self.launch_call, index[is_gpu] - n_cpu_events,
                                          single[is_gpu], event_id, local, single & ~is_gpu),
            # per entry: how many events it stands for; busy time only where that is not its
            # duration (blocks); trace ids as deltas within the row, like id_delta
            "count": bars.count, "block_busy": bars.busy[~single],
            "event_id_delta": _deltas_within_rows(event_id, first_of_row),
        }
        texts, entries, text_ids = self._details(event_id, is_gpu, single)
        columns["detail_entry"], columns["detail_text"] = entries, text_ids
        packed, layout = pack_columns(columns)
        return packed, {"layout": layout, "n_cpu": int(np.count_nonzero(~is_gpu)),
                        "n_gpu": int(np.count_nonzero(is_gpu)), "detail_texts": texts}

    @staticmethod
    def _launches(launchers, gpu_rows, gpu_single, event_id, local, cpu_single) -> np.ndarray:
        """Per GPU entry: its launcher's (op's or runtime call's) local id + 1 when that event
        is itself an entry of this answer (0: not linked here)."""
        launcher = launchers[gpu_rows].astype(np.int64)  # gather, then widen
        cpu_ids, cpu_local = event_id[cpu_single], local[cpu_single]
        sort = np.argsort(cpu_ids)
        cpu_ids, cpu_local = cpu_ids[sort], cpu_local[sort]
        at = np.clip(np.searchsorted(cpu_ids, launcher), 0, max(len(cpu_ids) - 1, 0))
        found = gpu_single & (launcher >= 0) & (len(cpu_ids) > 0)
        if len(cpu_ids):
            found &= cpu_ids[at] == launcher
        return np.where(found, cpu_local[at] + 1 if len(cpu_ids) else 0, 0)

    def _details(self, event_id, is_gpu, single):
        entries, texts = [], []
        if not (self.cpu_detail or self.gpu_detail):
            single = single[:0]
        for entry in np.flatnonzero(single):  # one lookup per drawn event, not per trace event
            table = self.gpu_detail if is_gpu[entry] else self.cpu_detail
            text = table.get(int(event_id[entry]))
            if text:
                entries.append(int(entry))
                texts.append(text)
        table = sorted(set(texts))
        index = {text: i for i, text in enumerate(table)}
        return table, np.asarray(entries, np.int64), np.asarray([index[t] for t in texts], np.int64)


def _micros(value: float) -> str:
    return f"{value:,.3g}" if value < 1000 else f"{value:,.0f}"


def served_past_budget(trace: Trace, lanes: Lanes, budget: int | None) -> "Served | None":
    """A Served for a trace with more events than ``budget`` (None: no budget, embed them all)."""
    if budget is not None and budget < 1:
        raise ValueError(f"max_embedded_events must be at least 1 (or None to embed every "
                         f"event), got {budget}")
    events = len(trace) + len(trace.gpu_start_ns)
    return Served(trace, lanes, budget) if budget is not None and events > budget else None


def served_sources(served: "Served | None") -> dict:
    """The CustomJS args js/timeline_served.js reads (empty sources on a page within budget)."""
    if served is None:
        return {"served_request": ColumnDataSource({}), "served_answer": ColumnDataSource({})}
    return {"served_request": served.request, "served_answer": served.answer_source}
