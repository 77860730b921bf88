"""Chunks of events -> the loader's inputs, growing column by column (no object per event kept).

Per chunk (stream.EventChunks): the X slices' fields are interned into tables that grow over
the whole file, their ts and dur appended as float arrays, their args handed to the
compressed args store (args.py); flow ends (s/f of the ac2g categories) become columns too.
The rare phases (metadata, B/E, instants, counters) keep their events or samples: a file has
few. Every error names the event's index over the whole file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import count, repeat
from operator import attrgetter, is_not

import msgspec
import numpy as np

from .args import ArgsStore, IdColumn, decode_value
from .async_slices import ASYNC_PHASES, AsyncEvents
from .growing import GrowingColumn
from .phases import (INSTANT_PHASES, RawCounters, RawInstants, counter_events, instant_events,
                     paired_begin_ends)
from .read import (NOT_AN_OBJECT, Column, Slices, floats, canonical_id, hashable, ns_from_us,
                   phase_rows, pick, x_slices)

FLOW_CATEGORIES = {"ac2g", "async_cpu_to_gpu"}
# The args of the rare phases' events (metadata, counters, instants, B/E, async) are decoded
# into Python objects (some kept until the end): past this much text (a thread name or a counter's values are bytes) they
# are left out with a note, so that one such event cannot cost hundreds of MB.
RARE_ARGS_BYTES = 1 << 20
_SLICE_FIELDS = ("name", "cat", "pid", "tid")
_END_BLOCK = 1 << 18  # rows at a time when looking for the trace's end


class FlowEnds:
    """The ac2g flows' s and f events, column-wise: id, pid, tid, ts, and which end."""

    def __init__(self):
        self.ids = IdColumn()
        self.places: dict = {}  # (pid, tid) as the file spells them -> code
        self._place = GrowingColumn(np.int16, widen=True)
        self._ts, self._is_end = GrowingColumn(np.float64), GrowingColumn(bool)
        self.count = 0
        self.unusable = 0

    def add(self, events: list, starts: int) -> None:
        """The flow events of a chunk: its ``starts`` s events, then its f events."""
        # In C where it can be (map/attrgetter): a Kineto file's flows are a third of its events.
        flows = _flow_rows(list(map(attrgetter("cat"), events)))
        if not len(flows):
            return
        if len(flows) < len(events):
            events = pick(events, flows)
        ts = floats(events, "ts")
        try:
            places = list(map(attrgetter("pid", "tid"), events))
            codes = np.fromiter(map(self.places.setdefault, places, count(len(self.places))),
                                np.int64, len(places))
        except TypeError:  # a list or an object as pid or tid
            codes = None
        ids = list(map(attrgetter("id"), events))
        id_types = set(map(type, ids))
        int_ids = _int64s(ids) if id_types == {int} else None  # Kineto's: every id an int
        usable = ~np.isnan(ts)
        if int_ids is None:
            usable &= np.fromiter(map(is_not, ids, repeat(None)), bool, len(ids))
        if not id_types <= {int, str, float, type(None)}:
            usable &= np.fromiter(map(hashable, ids), bool, len(ids))
        if codes is None:
            usable &= np.fromiter((hashable(e.pid) and hashable(e.tid) for e in events), bool,
                                  len(events))
        self.unusable += int((~usable).sum())
        keep = np.flatnonzero(usable)
        if not len(keep):
            return
        if codes is None:
            codes = np.array([self.places.setdefault((events[i].pid, events[i].tid),
                                                     len(self.places)) for i in keep.tolist()])
        else:
            codes = codes[keep]
        rows = np.arange(self.count, self.count + len(keep), dtype=np.int64)
        if int_ids is not None:
            self.ids.append_ints(rows, int_ids[keep])
        else:
            self.ids.append(rows, pick(ids, keep))
        self._place.extend(codes)
        self._ts.extend(ts[keep])
        self._is_end.extend(flows[keep] >= starts)
        self.count += len(keep)

    def finish(self) -> None:
        self.ids.finish(self.count)
        self.place, self.ts = self._place.finish(), self._ts.finish()
        self.is_end = self._is_end.finish()
        del self._place, self._ts, self._is_end

    def __bool__(self):
        return self.count > 0 or self.unusable > 0

    def ends(self, origin_us: float):
        """(id, is an f, (pid, tid, ts)) of each flow end, in file order; ts in ns from
        ``origin_us``, rounded as the slices' starts are (ends beyond a trace's span are left
        out: no slice is there)."""
        place_of = {code: (canonical_id(pid), canonical_id(tid))
                    for (pid, tid), code in self.places.items()}
        ids = self.ids.lookup_values(np.arange(self.count, dtype=np.int64))
        ns, fits = ns_from_us(self.ts, origin_us)
        for flow_id, place, ts, is_end, usable in zip(
                ids, self.place.tolist(), ns.tolist(), self.is_end.tolist(), fits.tolist()):
            if flow_id is not None and usable:
                yield flow_id, is_end, (*place_of[place], ts)


def _flow_rows(cats: list) -> np.ndarray:
    """Which of the s/f events (their ``cats``) are flows of the ac2g categories."""
    if cats and cats.count(cats[0]) == len(cats):  # one category (Kineto's "ac2g"): no hashing
        return np.arange(len(cats)) if str(cats[0]).lower() in FLOW_CATEGORIES else \
            np.zeros(0, np.int64)
    try:
        flagged = {cat: str(cat).lower() in FLOW_CATEGORIES for cat in set(cats)}
    except TypeError:  # a list as cat: no flow category
        cats = [cat if hashable(cat) else None for cat in cats]
        flagged = {cat: str(cat).lower() in FLOW_CATEGORIES for cat in set(cats)}
    return np.flatnonzero(np.fromiter(map(flagged.__getitem__, cats), bool, len(cats)))


def _int64s(ids: list) -> np.ndarray | None:
    """Ints as int64, None where one does not fit."""
    try:
        return np.fromiter(ids, np.int64, len(ids))
    except OverflowError:
        return None


@dataclass
class Gathered:
    slices: Slices
    metadata: list = field(default_factory=list)
    flows: FlowEnds = field(default_factory=FlowEnds)
    instants: RawInstants = field(default_factory=RawInstants)
    counters: RawCounters = field(default_factory=RawCounters)
    events: int = 0  # in the file
    skipped: int = 0  # of phases nbprof does not read
    not_objects: int = 0  # entries of traceEvents that are not JSON objects
    unmatched: int = 0  # E without its B (a B without its E is an unfinished slice)
    unfinished: int = 0  # slices without an end (X without dur, B without E): to the trace's end
    async_notes: list = field(default_factory=list)  # what async events were left out
    filled_ids: int = 0  # slices without a pid or tid (given their process's main thread)
    left_out: dict = field(default_factory=dict)  # slices read.x_slices left out, by why
    repaired: dict = field(default_factory=dict)  # in the rare events' args (see decode_value)
    big_args: int = 0  # rare events whose args were past RARE_ARGS_BYTES: left out


class Gatherer:
    def __init__(self, path):
        self.path = path
        self.tables = {name: {} for name in _SLICE_FIELDS}
        self.codes = {name: GrowingColumn(np.int16, widen=True) for name in _SLICE_FIELDS}
        self.ts, self.dur = GrowingColumn(np.float64), GrowingColumn(np.float64)
        self.args = ArgsStore()
        self.out = Gathered(slices=None)
        self.begin_ends = ([], [], [], [])  # B events, their rows, E events, their rows
        self.unfinished = []  # per chunk: the positions of its slices without an end
        self.async_events = AsyncEvents()

    def add(self, base: int, events: list) -> None:
        out = self.out
        rows = phase_rows(events)
        out.events += len(events)
        out.skipped += len(events) - sum(map(len, rows.values()))
        out.not_objects += len(rows[NOT_AN_OBJECT])
        for phase in ("M", "B", "E", "C", *INSTANT_PHASES, *ASYNC_PHASES):
            for event in (events[row] for row in rows[phase].tolist()):
                raw = event.args
                if len(raw) > RARE_ARGS_BYTES:
                    out.big_args += 1
                    raw = b""
                event.args = decode_value(raw, out.repaired) if len(raw) else None
        self._add_slices(events, rows["X"])
        out.metadata += [events[row] for row in rows["M"].tolist()]
        begins, begin_rows, ends, end_rows = self.begin_ends
        begins += [events[row] for row in rows["B"].tolist()]
        begin_rows += (rows["B"] + base).tolist()
        ends += [events[row] for row in rows["E"].tolist()]
        end_rows += (rows["E"] + base).tolist()
        out.flows.add(pick(events, np.concatenate([rows["s"], rows["f"]])), len(rows["s"]))
        plain_instants = self.async_events.add(
            events, np.sort(np.concatenate([rows[p] for p in ASYNC_PHASES])), base)
        found = instant_events(events, np.sort(np.concatenate(
            [*(rows[p] for p in INSTANT_PHASES), plain_instants])))
        for name in ("ts", "name", "pid", "tid"):
            getattr(out.instants, name).extend(getattr(found, name))
        out.instants.skipped += found.skipped
        out.instants.memory += found.memory
        out.instants.memory_skipped += found.memory_skipped
        samples = counter_events(events, rows["C"])
        for key, (times, values) in samples.series.items():
            out.counters.series[key][0].extend(times)
            out.counters.series[key][1].extend(values)
        out.counters.skipped += samples.skipped

    def _add_slices(self, events, x_rows) -> None:
        if not len(x_rows):
            return
        chunk = x_slices(events, x_rows)
        self.out.filled_ids += chunk.filled_ids
        for why, count in chunk.left_out.items():
            self.out.left_out[why] = self.out.left_out.get(why, 0) + count
        if len(chunk.unfinished):
            self.unfinished.append(chunk.unfinished + len(self.ts))
        for name in _SLICE_FIELDS:
            column, table = getattr(chunk, name), self.tables[name]
            code_of = np.fromiter((table.setdefault(value, len(table)) for value in column.table),
                                  np.int32, len(column.table))
            self.codes[name].extend(code_of[column.codes] if len(code_of) else column.codes)
        self.ts.extend(chunk.ts)
        self.dur.extend(chunk.dur)
        self.args.append(chunk.args)

    def _add_paired(self, slices: list) -> None:
        """X-like events made of pairs (B/E, async), their args decoded, as slices."""
        for pair in slices:
            pair.args = msgspec.Raw(msgspec.json.encode(pair.args)) if pair.args is not None \
                else msgspec.Raw(b"")
        self._add_slices(slices, np.arange(len(slices)))

    def finish(self) -> Gathered:
        begins, begin_rows, ends, end_rows = self.begin_ends
        pairs, _rows, self.out.unmatched = paired_begin_ends(
            begins + ends, np.arange(len(begins)), np.arange(len(begins), len(begins) + len(ends)),
            file_rows=begin_rows + end_rows)
        self._add_paired(pairs)
        found = self.async_events.finish()
        self._add_paired(found.slices)
        self.out.metadata += found.metadata
        for name in ("ts", "name", "pid", "tid"):
            getattr(self.out.instants, name).extend(getattr(found.instants, name))
        self.out.async_notes = found.notes
        self.args.finish()
        self.out.flows.finish()
        columns = {name: Column(codes=self.codes[name].finish(), table=list(self.tables[name]))
                   for name in _SLICE_FIELDS}
        self.out.slices = Slices(**columns, ts=self.ts.finish(), dur=self.dur.finish(),
                                 args=self.args)
        if self.unfinished:
            self._end_unfinished(np.concatenate(self.unfinished))
        return self.out

    def _end_unfinished(self, rows: np.ndarray) -> None:
        """The slices without an end end where the trace does, as Perfetto draws them: at the
        last time anything in the file has (a slice's end, an instant, a counter sample)."""
        s, out = self.out.slices, self.out
        # a block at a time (a big file's whole ts + dur would be tens of MB at the load's peak);
        # fmax passes the unfinished rows' NaN ends by
        last_end = max((float(np.fmax.reduce(s.ts[first:first + _END_BLOCK]
                                             + s.dur[first:first + _END_BLOCK], initial=-np.inf))
                        for first in range(0, len(s.ts), _END_BLOCK)), default=-np.inf)
        times = [last_end, float(s.ts.max()), *out.instants.ts,
                 *(max(times) for times, _values in out.counters.series.values() if times)]
        s.dur[rows] = np.maximum(max(times) - s.ts[rows], 0.0)
        out.unfinished = len(rows)


