"""Checks a Chrome trace against the rules nbprof's exports keep (export's docstring).

``check_chrome_trace(data_or_path) -> list[str]``: the problems found, empty when valid.
- every pid used has ``process_name`` and ``process_sort_index`` M events, every (pid, tid)
  used ``thread_name`` and ``thread_sort_index``;
- numbers (ts, dur) are finite, durations are not negative;
- X events nest properly on each (pid, tid): a slice starting inside another ends inside it
  (Perfetto drops the ones that do not);
- every flow id has both ends (``s`` and ``f``); each ``s`` lies inside an X slice on its
  (pid, tid); each ``f`` has ``"bp": "e"`` and sits at the start of an X slice on its (pid, tid).
Times are compared in integer ns from the earliest ts, so µs floats with 3 decimals compare
exactly.
"""

from __future__ import annotations

import bisect
import math
import pathlib
from collections import defaultdict

from .read import MAX_TIME_US, TraceFormatError, read_json

MAX_PER_RULE = 5  # problems reported per rule; the rest are counted


def check_chrome_trace(data_or_path) -> list[str]:
    """Problems found in a Chrome trace (a parsed dict or list, or a path); [] when valid."""
    if isinstance(data_or_path, (str, pathlib.Path)):
        try:
            data = read_json(data_or_path)
        except TraceFormatError as error:
            return [str(error)]
    else:
        data = data_or_path
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        return ["no 'traceEvents' list"]
    report = _Report()
    timed = _timed_events(events, report)
    if not timed:
        return report.problems()
    origin = min(event["ts"] for _index, event in timed)
    last = max(event["ts"] + (event["dur"] if event.get("ph") == "X" else 0)
               for _index, event in timed)
    if last - origin > MAX_TIME_US:
        report.add("numbers", f"the events span {last - origin:.3g} µs, more than "
                              f"{MAX_TIME_US:.3g} µs (146 years): some ts are wrong")
    slices, points = defaultdict(list), []
    for index, event in timed:
        lane = (event.get("pid"), event.get("tid"))
        start = _ns(event["ts"], origin)
        if event.get("ph") == "X":
            slices[lane].append((start, start + _ns(event["dur"], 0), index))
        elif event.get("ph") in ("s", "f"):
            points.append((index, event, lane, start))
    _check_names(events, slices, points, report)
    tops = {lane: _check_nesting(lane, rows, report) for lane, rows in slices.items()}
    _check_flows(points, slices, tops, report)
    return report.problems()


class _Report:
    def __init__(self):
        self.by_rule = defaultdict(list)

    def add(self, rule: str, problem: str) -> None:
        self.by_rule[rule].append(problem)

    def problems(self) -> list[str]:
        out = []
        for rule, problems in self.by_rule.items():
            out += problems[:MAX_PER_RULE]
            if len(problems) > MAX_PER_RULE:
                out.append(f"... and {len(problems) - MAX_PER_RULE} more: {rule}")
        return out


def _timed_events(events, report) -> list:
    timed = []
    for index, event in enumerate(events):
        if not isinstance(event, dict):
            report.add("not an object", f"event {index} is not a JSON object")
            continue
        phase = event.get("ph")
        fields = ("pid", "tid", "id") if phase in ("s", "f") else ("pid", "tid")
        not_ids = [key for key in fields if not _scalar(event.get(key))]
        if not_ids:  # a list or an object: it names no lane or flow
            report.add("ids", f"event {index} ({_text(phase)} {_text(event.get('name'))}): "
                              f"{', '.join(not_ids)} not a string or a number")
            continue
        if "name" in event and not isinstance(event["name"], str):
            report.add("names", f"event {index} ({_text(phase)}): name "
                                f"{_text(event['name'])} is not a string")
        if phase == "M":
            continue
        numbers = ("ts", "dur") if phase == "X" else ("ts",)
        bad = [key for key in numbers if not _finite(event.get(key))]
        if bad:
            report.add("numbers", f"event {index} ({_text(phase)} {_text(event.get('name'))}): "
                                  f"{', '.join(bad)} missing or not a finite number")
        elif phase == "X" and event["dur"] < 0:
            report.add("numbers", f"event {index} (X {_text(event.get('name'))}): negative dur")
        elif any(abs(event[key]) > MAX_TIME_US for key in numbers):
            report.add("numbers", f"event {index} ({_text(phase)} {_text(event.get('name'))}): "
                                  f"ts or dur beyond {MAX_TIME_US:.3g} µs (146 years)")
        else:
            timed.append((index, event))
    return timed


def _scalar(value) -> bool:
    return value is None or isinstance(value, (str, int, float))


def _text(value) -> str:
    """A value from the file, quoted and cut short for a message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _ns(micros, origin) -> int:
    return round((micros - origin) * 1000)


def _check_names(events, slices, points, report) -> None:
    """Every pid used has a process_name and a process_sort_index, every (pid, tid) used a
    thread_name and a thread_sort_index."""
    given = defaultdict(set)  # M event name -> the pids, or (pid, tid) lanes, it covers
    for event in events:
        if isinstance(event, dict) and event.get("ph") == "M":
            name = event.get("name")
            pid = event.get("pid")
            if not (_scalar(name) and _scalar(pid) and _scalar(event.get("tid"))):
                continue  # reported by _timed_events
            given[name].add(pid if str(name).startswith("process") else (pid, event.get("tid")))
    lanes = set(slices) | {lane for _index, _event, lane, _start in points}
    pids = {pid for pid, _tid in lanes}
    for kind in ("process_name", "process_sort_index"):
        for pid in sorted(pids - given[kind], key=str):
            report.add("names", f"pid {pid!r} has no {kind} M event")
    for kind in ("thread_name", "thread_sort_index"):
        for lane in sorted(lanes - given[kind], key=str):
            report.add("names", f"pid {lane[0]!r} tid {lane[1]!r} has no {kind} M event")


def _check_nesting(lane, rows, report) -> list:
    """Reports X slices that overlap without nesting; returns the top-level slices
    (start, end), disjoint and sorted, which cover every point inside some slice."""
    rows.sort(key=lambda row: (row[0], -(row[1] - row[0])))
    stack, tops = [], []
    for start, end, index in rows:
        while stack and stack[-1][1] <= start:
            stack.pop()
        if stack and end > stack[-1][1]:
            report.add("nesting", f"event {index} overlaps event {stack[-1][2]} without "
                                  f"nesting on pid {lane[0]!r} tid {lane[1]!r}")
            continue
        if not stack:
            tops.append((start, end))
        stack.append((start, end, index))
    return tops


def _check_flows(points, slices, tops, report) -> None:
    ends = defaultdict(dict)
    slice_starts = {}  # per lane, built on first use
    for index, event, lane, start in points:
        phase = event["ph"]
        ends[event.get("id")][phase] = index
        if phase == "s" and not _inside(tops.get(lane, []), start):
            report.add("flow s", f"event {index} (flow s, id {event.get('id')!r}) lies inside "
                                 f"no X slice on pid {lane[0]!r} tid {lane[1]!r}")
        if phase == "f":
            if event.get("bp") != "e":
                report.add("flow f", f"event {index} (flow f, id {event.get('id')!r}) lacks "
                                     f"\"bp\": \"e\"")
            if lane not in slice_starts:
                slice_starts[lane] = {row[0] for row in slices.get(lane, [])}
            if start not in slice_starts[lane]:
                report.add("flow f", f"event {index} (flow f, id {event.get('id')!r}) is not at "
                                     f"the start of an X slice on pid {lane[0]!r} "
                                     f"tid {lane[1]!r}")
    for flow_id, found in ends.items():
        if set(found) != {"s", "f"}:
            have = next(iter(found.values()))
            report.add("flow ends", f"flow id {flow_id!r} has only its "
                                    f"{'/'.join(sorted(found))} end (event {have})")


def _inside(tops: list, point: int) -> bool:
    at = bisect.bisect_right(tops, (point, math.inf)) - 1
    return at >= 0 and tops[at][0] <= point <= tops[at][1]
