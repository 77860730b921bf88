"""Reading a Chrome trace file into parsed JSON and its X slices' columns, with clear errors.

Shared by the loader (chrome_load) and the checker (chrome_check). Parsing is orjson; the
columns are built by one list comprehension per field over the parsed dicts (no per-event
objects of our own), then turned into numpy arrays.
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import pathlib
import zlib
from dataclasses import dataclass
from itertools import compress, repeat
from operator import eq, itemgetter

import numpy as np
import orjson

GZIP_MAGIC = b"\x1f\x8b"
REQUIRED_X_FIELDS = ("name", "ts", "dur", "pid", "tid")
OPTIONAL_X_FIELDS = ("cat", "args")


@contextlib.contextmanager
def paused_gc():
    """No garbage collection inside: building or parsing ~10^5 small dicts otherwise triggers
    collections that walk them all again and again (a third to half of the time measured on
    the 68k-event trace). Nothing built here makes reference cycles."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class TraceFormatError(ValueError):
    """A file :func:`nbprof.load` cannot read. The message names the file and, where one event
    is at fault, that event's index in ``traceEvents``, and says what to do."""


def read_json(path) -> object:
    """The parsed JSON of a ``.json`` or gzipped file (gzip is recognised by its magic bytes)."""
    path = pathlib.Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise TraceFormatError(f"{path}: no such file; check the path (nbprof.load reads Chrome "
                               f"traces: .json or .json.gz)") from None
    except OSError as error:
        raise TraceFormatError(f"{path}: cannot read it ({error.strerror})") from error
    if raw[:2] == GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as error:
            raise TraceFormatError(f"{path}: the gzip data is truncated or corrupt ({error}); "
                                   f"copy or download the file again") from None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise TraceFormatError(f"{path}: not valid JSON ({error}); a Chrome trace is a JSON "
                               f"object with a 'traceEvents' list (or a JSON list of events)"
                               ) from None


def trace_events(data, path) -> list:
    """The event list of a Chrome trace: ``data["traceEvents"]``, or ``data`` when it is a list."""
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceFormatError(f"{path}: no 'traceEvents' list in this JSON; it is not a Chrome "
                               f"trace (export one with torch.profiler or nbprof)")
    return events


@dataclass
class Slices:
    """The X events of a trace, column-wise, in file order."""

    name: tuple
    cat: tuple
    pid: tuple
    tid: tuple
    ts: np.ndarray  # float64 µs, as in the file
    dur: np.ndarray
    args: tuple  # dict or None


def phases_of(events, path) -> list:
    try:  # itemgetter runs in C, three times faster than a comprehension calling .get
        return list(map(itemgetter("ph"), events))
    except (KeyError, TypeError):
        pass
    try:
        return [event.get("ph") for event in events]
    except AttributeError:
        bad = next(i for i, event in enumerate(events) if not isinstance(event, dict))
        raise TraceFormatError(f"{path}: event {bad} is not a JSON object but "
                               f"{type(events[bad]).__name__}; fix or remove it") from None


def x_slices(events, phases, path) -> Slices:
    """The X events' columns; TraceFormatError for the first one missing a field, with a
    non-numeric or non-finite ts/dur, or with a negative duration."""
    xs = list(compress(events, map(eq, phases, repeat("X"))))  # in C
    fields = REQUIRED_X_FIELDS + OPTIONAL_X_FIELDS
    try:  # the fast path, in C: every slice has every field (Kineto's and nbprof's files)
        columns = dict(zip(fields, zip(*map(itemgetter(*fields), xs)))) if xs else {
            field: () for field in fields}
        maybe_missing = ("name",)  # an explicit null; a null ts or dur becomes NaN below
    except KeyError:
        columns = {field: [event.get(field) for event in xs] for field in fields}
        maybe_missing = REQUIRED_X_FIELDS

    def fail(position, problem):
        index = [i for i, phase in enumerate(phases) if phase == "X"][position]
        name = xs[position].get("name")
        raise TraceFormatError(f"{path}: event {index} (X {name!r}) {problem}; fix or remove "
                               f"that event, or export the trace again")

    for field in maybe_missing:
        values = columns[field]
        if None in values:
            fail(values.index(None), f"has no {field!r}")
    numbers = {}
    for field in ("ts", "dur"):
        try:
            numbers[field] = np.fromiter(columns[field], np.float64, len(columns[field]))
        except (TypeError, ValueError):
            numbers[field] = np.array([_number_or_nan(v) for v in columns[field]])
        bad = np.flatnonzero(~np.isfinite(numbers[field]))
        if len(bad):
            fail(int(bad[0]), f"has a {field} that is not a finite number: "
                              f"{columns[field][bad[0]]!r}")
    negative = np.flatnonzero(numbers["dur"] < 0)
    if len(negative):
        fail(int(negative[0]), f"has a negative duration ({columns['dur'][negative[0]]})")
    return Slices(name=columns["name"], cat=columns["cat"], pid=columns["pid"],
                  tid=columns["tid"], ts=numbers["ts"], dur=numbers["dur"], args=columns["args"])


def _number_or_nan(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return float("nan")
    try:
        return float(value)
    except ValueError:
        return float("nan")


def intern(values) -> tuple[np.ndarray, list]:
    """Index of each value in a table of the distinct values (first-seen order), and the table."""
    table = dict.fromkeys(values)  # in C, keeps first-seen order
    for code, value in enumerate(table):
        table[value] = code
    return np.array(list(map(table.__getitem__, values)), np.int32), list(table)
