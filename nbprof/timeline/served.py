"""Level of detail past the embedding budget: coarse levels on the page, exact bars from the kernel.

A page that embeds every event stays fluid to ~10M events (bench/bench_bigview.py), but its bytes
and the browser's decode grow with the trace. Past ``max_embedded_events`` the page carries the
bars of the whole trace drawn at a fixed resolution instead (events narrower than 3 of its "pixels"
merged into per-row busy blocks where the gaps are under one; longer events kept exact), plus the
coarser levels that are small beside it, and says so in its note. In a notebook the browser also
asks the kernel for each view it settles on (``served_request``: x range, plot width, minimum
duration); the kernel answers with just that view's bars (``served_answer``), computed by
sweep.py from the Trace's sorted columns, and the browser draws them with the same code as
embedded events (js/timeline_served.js). Because the rule is the same, the browser re-sweeping an
answer at the same view draws exactly those bars.
"""

from __future__ import annotations

import math

import numpy as np
import orjson
from bokeh.models import ColumnDataSource

from ..model import Trace
from .data import _deltas_within_rows, _gaps_within_rows, detail_texts, lane_info, runtime_calls
from .lanes import Lanes, cpu_families, gpu_families
from .packing import pack_columns
from .sweep import (MIN_REAL_PX, Bars, RowColumns, coarse_level, coarser_levels, longest_entries,
                    row_columns, view_bars)

DEFAULT_MAX_EMBEDDED = 5_000_000


class BarsEncoder:
    """Bars (sweep.py) as entries in the page's packed format: a served page's levels and
    answers, and a big embedded page's first level (first_level.py)."""

    def __init__(self, trace: Trace, lanes: Lanes, columns: RowColumns):
        self.trace, self.lanes, self.columns = trace, lanes, columns
        self.family = np.concatenate([cpu_families(trace), gpu_families(trace)])
        # per GPU interval, the op that launched it and the runtime call that did (-1: unknown)
        self.launch_op = trace.gpu_launch
        self.launch_call = runtime_calls(trace)

    def encode(self, bars: Bars, *, compress: bool = True) -> tuple[str, dict]:
        """Bars as entries in the page's packed format (data.py), plus each entry's count, busy
        time and event id. Entries get local ids (CPU and GPU apart, in start order) so the
        browser's per-id tables stay as small as the answer; ``event_id`` maps them back. A
        block's name is its longest event's, with that event's duration (``longest_dur``): the
        browser names a run of blocks "N events, mostly <the longest>" as it would from events."""
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
        longest_entry = longest_entries(self.columns.duration, bars.first, bars.count)
        names = self._name_ids(self.columns.order[longest_entry])
        gpu_rows = index[is_gpu] - n_cpu_events
        launcher = self.launch_op[gpu_rows].astype(np.int64)
        columns = {
            "row_count": np.bincount(bars.row, minlength=len(self.lanes.row_lane)),
            "start_gap": _gaps_within_rows(bars.left, bars.right, first_of_row),
            "duration": bars.right - bars.left,
            "id_delta": _deltas_within_rows(local, first_of_row),
            "name_id": names,
            "family": self.family[index],
            "gpu_launch": self._launches(self.launch_op, gpu_rows,
                                         single[is_gpu], event_id, local, single & ~is_gpu),
            "gpu_runtime": self._launches(self.launch_call, gpu_rows,
                                          single[is_gpu], event_id, local, single & ~is_gpu),
            # per GPU entry: its launching op's name id + 1 (0: none), for the hover's "launched
            # by" where that op is in a block of this answer
            "gpu_launch_name": np.where(launcher >= 0, self._name_ids(np.maximum(launcher, 0)) + 1,
                                        0),
            # per entry: how many events it stands for; busy time and longest event's duration
            # only where that is not its duration (blocks); trace ids as deltas within the row,
            # like id_delta
            "count": bars.count, "block_busy": bars.busy[~single],
            "longest_dur": self.columns.duration[longest_entry[~single]],
            "event_id_delta": _deltas_within_rows(event_id, first_of_row),
        }
        texts, entries, text_ids = self._details(event_id, is_gpu, single)
        columns["detail_entry"], columns["detail_text"] = entries, text_ids
        packed, layout = pack_columns(columns, compress=compress)
        return packed, {"layout": layout, "n_cpu": int(np.count_nonzero(~is_gpu)),
                        "n_gpu": int(np.count_nonzero(is_gpu)), "detail_texts": texts}

    def _name_ids(self, index: np.ndarray) -> np.ndarray:
        """The name id of each of ``index`` (into CPU events, then GPU intervals)."""
        trace, n_cpu = self.trace, len(self.trace)
        cpu = trace.name_id[np.minimum(index, max(n_cpu - 1, 0))] if n_cpu else \
            np.zeros(len(index), np.int64)
        gpu_rows = np.clip(index - n_cpu, 0, max(len(trace.gpu_name_id) - 1, 0))
        gpu = trace.gpu_name_id[gpu_rows] if len(trace.gpu_name_id) else cpu
        return np.where(index >= n_cpu, gpu, cpu)

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
        """The texts of this answer's single events (the table of just those), the entries that
        have one and each one's code into that table: formatted per answer for the few events
        drawn as themselves, never for the whole trace."""
        shown = np.flatnonzero(single)
        ids, gpu = event_id[shown], is_gpu[shown]
        details = detail_texts(self.trace, cpu_ids=np.unique(ids[~gpu]),
                               gpu_rows=np.unique(ids[gpu]))
        codes = details.codes(ids, gpu)
        has = codes >= 0
        return details.texts, shown[has], codes[has]


class Served(BarsEncoder):
    """A timeline past its embedding budget: the coarse level for the page, answers for views."""

    def __init__(self, trace: Trace, lanes: Lanes, budget: int):
        super().__init__(trace, lanes, row_columns(trace, lanes))
        self.budget = budget
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
        (jupyter_bokeh runs a change's callback twice) or a malformed request. A repeat is the
        same view asked by the same page: another page showing the output (a re-shown cell, a
        second tab) asking for that view is answered again."""
        try:
            x0, x1 = float(request["x0"][0]), float(request["x1"][0])
            width, min_duration = float(request["width"][0]), int(request["min_duration"][0])
            key = str(request["key"][0])
            page = str((request.get("page") or [""])[0])
        except (KeyError, IndexError, TypeError, ValueError):
            return None
        if (key, page) == self._last_key or not (math.isfinite(x0) and math.isfinite(x1)) or x1 <= x0:
            return None
        self._last_key = (key, page)
        packed, meta = self.encode(view_bars(self.columns, x0, x1, width, min_duration,
                                             levels=self.levels))
        return {"packed": [packed], "meta": [orjson.dumps(meta).decode()], "key": [key]}


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
