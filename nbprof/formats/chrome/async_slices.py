"""Async slices (``b``/``e``/``n``, and the legacy ``S``/``T``/``F``) -> X-like slices on
per-process async lanes, read as Perfetto's trace processor reads them.

Perfetto's rules (json_trace_parser, track_tracker, slice_tracker):
- An async event needs a pid and an id: ``id``, else ``id2.global``, else ``id2.local`` (an empty
  id is none). ``id`` and ``id2.global`` are global: the events of one (cat, id) form one track
  whatever process wrote them, drawn in the process of its first event; ``id2.local`` is
  scoped to its process. A missing ``cat`` is the empty category, so it is part of the key too.
- On a track, begins stack in time order (file order on ties): an end closes the innermost
  open begin of its name (any, where the end has no name), which may leave begins above it
  open; they nest where they nest. An end with no such begin (before its begin, or none) is
  left out, and so is a begin that never ends; the notes count both.
- ``n`` is an instant on its track's lane; on its own thread where the track has no slice (no
  lane) or it has no id (as nbprof read every ``n`` before).
- Legacy ``S``/``F`` begin and end as ``b``/``e`` do; a ``T`` step splits its open ``S``'s slice
  into children (as Chrome's trace viewer draws sub-slices), named ``name:step``.

How they reach the Trace: a track is no thread, but the pipeline keeps slices on threads (nesting,
the lanes, the exports, Parquet): so each async lane is a thread of its process in the Trace's
thread table, its tid an :class:`AsyncLane` here (the loaders give it an id past every real
tid), its name the track's, and ``trace.meta["async_threads"]`` says which threads are async
lanes (the timeline labels them so). Tracks of one name in a process share a lane where their
spans do not overlap (as Perfetto's UI merges them by name); one that overlaps takes the next
lane of that name. Everything downstream then treats them as any slice: the summary counts
them, the exports write them and load them back exactly.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from .phases import RawInstants, display_name, merged_args
from .read import MAX_TIME_US, Event, canonical_id, hashable, number_or_nan

ASYNC_PHASES = ("b", "e", "n", "S", "T", "F")
NO_NAME = "[No name]"  # Perfetto's name for a slice whose events have none
META_KEY = "async_threads"  # trace.meta: the thread indices that are async lanes


class AsyncLane:
    """The tid of an async lane while a file loads: the k-th lane (from 0) of async tracks named
    ``name`` in its process. Never equal to a tid the file spells."""

    __slots__ = ("name", "index")

    def __init__(self, name: str, index: int):
        self.name, self.index = name, index

    def __eq__(self, other):
        return isinstance(other, AsyncLane) and (self.name, self.index) == (other.name,
                                                                              other.index)

    def __hash__(self):
        return hash((AsyncLane, self.name, self.index))

    def __repr__(self):
        return f"AsyncLane({self.name!r}, {self.index})"

    @property
    def label(self) -> str:
        return self.name if self.index == 0 else f"{self.name} ({self.index + 1})"


def async_threads(lane_index: dict) -> list[int]:
    """The thread indices of the async lanes, from a loader's (pid, tid) -> thread index."""
    return sorted(index for (_pid, tid), index in lane_index.items()
                  if isinstance(tid, AsyncLane))


def id_text(value) -> str | None:
    """An async id as Perfetto compares it (its JSON text; "" for none); None for a list or an
    object, which is no id."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return value if isinstance(value, str) else repr(value)
    return None


def track_scope(event) -> tuple | None:
    """The key of the track an async event lies on, or None where it has no usable id."""
    cat = event.cat if isinstance(event.cat, str) else ""
    own = id_text(event.id)
    if own:
        return ("global", cat, own)
    id2 = event.id2 if isinstance(event.id2, dict) else {}
    global_id = id_text(id2.get("global"))
    if global_id:
        return ("global", cat, global_id)
    local_id = id_text(id2.get("local"))
    if local_id and hashable(event.pid) and event.pid is not None:
        return ("local", canonical_id(event.pid), cat, local_id)
    return None


@dataclass
class _Open:
    """A begin (b or S) still open on its track, and the steps (T) seen inside it."""

    ts: float
    row: int
    event: object
    steps: list = field(default_factory=list)  # (ts, name)


@dataclass
class _Track:
    pid: object  # the process it is drawn in (its first event's)
    name: str | None = None
    open: list = field(default_factory=list)  # _Open, innermost last
    slices: list = field(default_factory=list)  # (row, Event)
    instants: list = field(default_factory=list)  # (ts, name, the event's own thread)
    start: float = math.inf  # of its slices
    end: float = -math.inf


@dataclass
class AsyncFound:
    """What the async events of a file became: X-like events (pid: the track's process, tid:
    its AsyncLane) with each one's begin's row in the file, instants on the lanes, a
    thread_name metadata event per lane, and notes."""

    slices: list
    rows: list
    instants: RawInstants
    metadata: list
    notes: list


class AsyncEvents:
    """The async events of a file, gathered chunk by chunk (they are few next to X slices),
    paired once the whole file is read."""

    def __init__(self):
        self.points = []  # (ts, row, track key, event)
        self.unusable = 0

    def add(self, events: list, rows: np.ndarray, base: int) -> np.ndarray:
        """Keep the async events at ``rows`` (their args decoded); returns the rows of the ``n``
        events without an id, which stay instants on their thread."""
        plain = []
        for row in rows.tolist():
            event = events[row]
            scope = track_scope(event)
            if scope is None:
                if event.ph == "n":
                    plain.append(row)
                else:
                    self.unusable += 1
                continue
            ts = number_or_nan(event.ts)
            if not (abs(ts) <= MAX_TIME_US and hashable(event.pid) and event.pid is not None):
                self.unusable += 1
                continue
            self.points.append((ts, base + row, scope, event))
        return np.array(plain, np.int64)

    def finish(self) -> AsyncFound:
        tracks: dict = {}
        unmatched_ends = unmatched_steps = 0
        self.points.sort(key=lambda point: (point[0], point[1]))  # Perfetto's order: by time
        for ts, row, scope, event in self.points:
            track = tracks.get(scope)
            if track is None:
                track = tracks[scope] = _Track(pid=canonical_id(event.pid))
            if track.name is None and event.name is not None:
                track.name = display_name(event.name)
            phase = event.ph
            if phase in ("b", "S"):
                track.open.append(_Open(ts, row, event))
            elif phase == "n":
                own_thread = canonical_id(event.tid) if hashable(event.tid) else None
                track.instants.append((ts, display_name(event.name), own_thread))
            elif phase == "T":
                begin = _innermost(track.open, event.name)
                if begin is None:
                    unmatched_steps += 1
                else:
                    step = event.args.get("step") if isinstance(event.args, dict) else None
                    begin.steps.append((ts, display_name(begin.event.name) +
                                        (f":{display_name(step)}" if step is not None else "")))
            else:  # e, F
                begin = _innermost(track.open, event.name)
                if begin is None:
                    unmatched_ends += 1
                    continue
                track.open.remove(begin)
                if ts - begin.ts > MAX_TIME_US:  # no trace spans that: a wrong ts
                    self.unusable += 2
                    continue
                track.slices += _closed(begin, ts, event)
                track.start = min(track.start, begin.ts)
                track.end = max(track.end, ts)
        unmatched_begins = sum(len(track.open) for track in tracks.values())
        lanes = _lanes(track for track in tracks.values() if track.slices)
        lanes += [(track, None) for track in tracks.values() if not track.slices]
        slices, rows, metadata = [], [], []
        instants = RawInstants()
        for track, lane in lanes:
            for row, event in track.slices:
                event.pid, event.tid = track.pid, lane
                slices.append(event)
                rows.append(row)
            for ts, name, own_thread in track.instants:
                instants.ts.append(ts)
                instants.name.append(name)
                # on the track's lane; on its own thread where the track has no slice (an
                # instant alone makes no lane)
                instants.pid.append(track.pid)
                instants.tid.append(own_thread if lane is None else lane)
        used = set()  # (pid, label): a lane's label names it in the timeline's lane filter
        for pid, lane in dict.fromkeys((track.pid, lane) for track, lane in lanes
                                       if lane is not None):
            label, again = lane.label, 1
            while (pid, label) in used:  # a track named "req (2)" beside req's second lane
                again += 1
                label = f"{lane.label} #{again}"
            used.add((pid, label))
            metadata.append(Event(ph="M", name="thread_name", pid=pid, tid=lane,
                                  args={"name": label}))
        order = sorted(range(len(rows)), key=rows.__getitem__)
        return AsyncFound(slices=[slices[i] for i in order], rows=[rows[i] for i in order],
                          instants=instants, metadata=metadata,
                          notes=self._notes(unmatched_begins, unmatched_ends, unmatched_steps))

    def _notes(self, begins: int, ends: int, steps: int) -> list:
        notes = []
        if self.unusable:
            notes.append(f"{self.unusable} async events (b/e/S/T/F) without an id (id, "
                         f"id2.global or id2.local), a pid or a numeric ts were left out")
        if begins:
            notes.append(f"{begins} async begins (b/S) never ended on their track and were left "
                         f"out")
        if ends:
            notes.append(f"{ends} async ends (e/F) found no open begin of their name on their "
                         f"track (an end before its begin, or no begin) and were left out")
        if steps:
            notes.append(f"{steps} async steps (T) found no open S of their name and were left "
                         f"out")
        return notes


def _innermost(stack: list, name) -> _Open | None:
    """The innermost open begin an end (or a step) named ``name`` closes: any where it has no
    name, else one of that name (Perfetto's slice_tracker; a begin without a name is named
    NO_NAME there, so only an end without a name closes it)."""
    if name is None or name == "":
        return stack[-1] if stack else None
    wanted = display_name(name)
    for begin in reversed(stack):
        has = begin.event.name
        if (NO_NAME if has is None or has == "" else display_name(has)) == wanted:
            return begin
    return None


def _closed(begin: _Open, end_ts: float, end) -> list:
    """The slice from ``begin`` to ``end`` (args merged, the begin's first) as (row, Event), and
    its steps' sub-slices."""
    first = begin.event
    name = first.name if first.name is not None else end.name
    cat = next((c for c in (first.cat, end.cat) if c is not None and hashable(c)), None)
    args = merged_args(first.args, end.args)
    whole = Event(ph=first.ph, name=NO_NAME if name in (None, "") else display_name(name),
                  cat=cat, ts=begin.ts,
                  dur=end_ts - begin.ts, args=args)
    if not begin.steps:
        return [(begin.row, whole)]
    parts = [(begin.ts, whole.name), *begin.steps]
    ends = [ts for ts, _name in parts[1:]] + [end_ts]
    return [(begin.row, whole)] + [
        (begin.row, Event(ph="T", name=part_name, cat=whole.cat, ts=start, dur=stop - start,
                           args=None))
        for (start, part_name), stop in zip(parts, ends)]


def _lanes(tracks) -> list:
    """Each track (of those with slices) with its AsyncLane: tracks of one name in one process
    share a lane while their spans do not overlap (each takes the lane free the longest, a heap
    per name: a name may have thousands of tracks in flight)."""
    free = defaultdict(list)  # (pid, name) -> heap of (a lane's last end, its index)
    placed = []
    for track in sorted(tracks, key=lambda track: (track.start, track.end)):
        name = track.name if track.name is not None else NO_NAME
        lanes = free[(track.pid, name)]
        if lanes and lanes[0][0] <= track.start:
            index = heapq.heapreplace(lanes, (track.end, lanes[0][1]))[1]
        else:
            index = len(lanes)
            heapq.heappush(lanes, (track.end, index))
        placed.append((track, AsyncLane(name, index)))
    return placed
