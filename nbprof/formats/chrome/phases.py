"""The trace events other than X slices that still carry data: B/E pairs (become slices),
instant events (markers) and counters (value series).

They are rare next to X slices (Kineto writes none of B/E, a few instants and counters), so
each is read with a plain loop over its own rows; a file without them costs nothing here.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from .memory_events import MEMORY_NAME, memory_row
from .read import Event, canonical_id, hashable, number_in_text, number_or_nan, pick

# "n" is an async instant: async_slices.py reads it (on its thread only where it has no id)
INSTANT_PHASES = ("i", "I")


def paired_begin_ends(events, begin_rows, end_rows, file_rows=None) -> tuple[list, list, int]:
    """B/E pairs as X-like events (ts of the B, dur to its E, the two args merged), with each
    pair's B's index in the file; and how many E (or B or E without a usable ts, pid or tid)
    found no partner. A B that no E closes is an X-like event without a dur: an unfinished slice
    (read.x_slices), drawn to the end of the trace as Perfetto does.

    Pairs are made per (pid, tid) as a stack, in time order (file order on ties), as Chrome's
    viewer does: an E closes the innermost B still open on its thread. ``file_rows``, if given,
    is each event's index in the file (else its index in ``events``)."""
    points = []
    unmatched = 0
    for kind, rows in (("B", begin_rows), ("E", end_rows)):
        for row, event in zip(rows.tolist(), pick(events, rows)):
            row = row if file_rows is None else file_rows[row]
            ts = number_or_nan(event.ts)
            if not (math.isfinite(ts) and hashable(event.pid) and hashable(event.tid)):
                unmatched += 1
                continue
            points.append((ts, row, kind, event))
    points.sort(key=lambda point: (point[0], point[1]))
    open_begins = defaultdict(list)
    slices = []
    for ts, row, kind, event in points:
        stack = open_begins[(canonical_id(event.pid), canonical_id(event.tid))]
        if kind == "B":
            stack.append((ts, row, event))
        elif stack:
            begin_ts, begin_row, begin = stack.pop()
            slices.append((begin_row, Event(
                ph="B", name=begin.name if begin.name is not None else event.name,
                cat=begin.cat if begin.cat is not None else event.cat, pid=begin.pid,
                tid=begin.tid, ts=begin.ts, dur=ts - begin_ts, args=merged_args(begin.args,
                                                                                event.args))))
        else:
            unmatched += 1
    for stack in open_begins.values():
        slices += [(row, Event(ph="B", name=begin.name, cat=begin.cat, pid=begin.pid,
                               tid=begin.tid, ts=begin.ts, dur=None, args=begin.args))
                   for _ts, row, begin in stack]
    slices.sort(key=lambda pair: pair[0])
    return [event for _row, event in slices], [row for row, _event in slices], unmatched


def merged_args(begin_args, end_args):
    """A pair's args: the begin's and the end's, the end's winning a key both have."""
    if isinstance(begin_args, dict) and isinstance(end_args, dict):
        return {**begin_args, **end_args}
    return begin_args if begin_args is not None else end_args


@dataclass
class RawInstants:
    """Instant events as the file gives them (µs, the file's pid and tid; tid None for
    process or global scope; a thread-scoped one without a tid on tid = pid, pid 0 without one)."""

    ts: list = field(default_factory=list)
    name: list = field(default_factory=list)
    pid: list = field(default_factory=list)
    tid: list = field(default_factory=list)
    skipped: int = 0
    memory: list = field(default_factory=list)  # [memory] instants: memory_events.memory_row's
    memory_skipped: int = 0


def instant_events(events, rows) -> RawInstants:
    found = RawInstants()
    for event in pick(events, rows):
        if event.name == MEMORY_NAME:  # an allocation or free: columns of its own, not a marker
            row = memory_row(event)
            if row is None:
                found.memory_skipped += 1
            else:
                found.memory.append(row)
            continue
        ts = number_or_nan(event.ts)
        if not (math.isfinite(ts) and hashable(event.pid) and hashable(event.tid)):
            found.skipped += 1
            continue
        pid, tid = event.pid, event.tid
        if event.s in (None, "t"):  # thread scope: without a tid, Perfetto's tid = pid (as X's)
            pid = 0 if pid is None else pid
            tid = pid if tid is None else tid
        else:  # "p" or "g": the process's or the whole trace's, on no thread
            tid = None
        found.ts.append(ts)
        found.name.append(display_name(event.name))
        found.pid.append(canonical_id(pid))
        found.tid.append(canonical_id(tid))
    return found


@dataclass
class RawCounters:
    """Counter samples per (pid, counter name, series key), in µs as in the file."""

    series: dict = field(default_factory=lambda: defaultdict(lambda: ([], [])))
    skipped: int = 0


def counter_events(events, rows) -> RawCounters:
    """Each "C" event's numeric args as samples of the series (pid, name, key) (Chrome draws
    one counter track per pid and name, a series per key)."""
    found = RawCounters()
    for event in pick(events, rows):
        ts = number_or_nan(event.ts)
        args = event.args
        if not (math.isfinite(ts) and hashable(event.pid) and isinstance(args, dict) and args):
            found.skipped += 1
            continue
        name, pid = display_name(event.name), canonical_id(event.pid)
        for key, value in args.items():
            value = number_in_text(value)
            if not math.isfinite(value):
                found.skipped += 1
                continue
            times, values = found.series[(pid, name, str(key))]
            times.append(ts)
            values.append(value)
    return found


def display_name(value) -> str:
    """An event name as text: names are strings, but a file may hold a number (or null)."""
    if isinstance(value, str):
        return value
    return "" if value is None else str(value)
