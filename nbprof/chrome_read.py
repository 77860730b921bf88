"""Reading a Chrome trace file, with clear errors: for the loader, its events and their X slices'
columns; for the checker, the plain parsed JSON.

The loader parses with msgspec into :class:`Event` structs that hold only the fields it uses
(``ph name cat pid tid ts dur args id bp``; the rest is skipped unparsed) and that the garbage
collector does not track: on the 68k-event trace that parses in about half orjson's time into
dicts. The columns are then taken in C (map/attrgetter/zip) and turned into numpy arrays. The
checker reads plain dicts with orjson (:func:`read_json`).
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import pathlib
import re
import zlib
from dataclasses import dataclass
from itertools import compress, count, repeat
from operator import attrgetter, eq

from typing import Any

import msgspec
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


class Event(msgspec.Struct, gc=False):
    """One trace event as the loader reads it (any JSON value in each field, None if absent)."""

    ph: Any = None
    name: Any = None
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Any = None
    id: Any = None
    bp: Any = None


_TOP_LEVEL = msgspec.json.Decoder(dict[str, msgspec.Raw])
_EVENTS = msgspec.json.Decoder(list[Event])
_NOT_JSON = ("not valid JSON ({error}); a Chrome trace is a JSON object with a 'traceEvents' "
             "list (or a JSON list of events)")
_NO_EVENTS = ("no 'traceEvents' list in this JSON; it is not a Chrome trace (export one with "
              "torch.profiler or nbprof)")


def read_file_bytes(path: pathlib.Path) -> bytes:
    """A file's bytes, gunzipped when they start with gzip's magic bytes."""
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
    return raw


def read_json(path) -> object:
    """The parsed JSON of a ``.json`` or gzipped file, as plain dicts and lists."""
    path = pathlib.Path(path)
    raw = read_file_bytes(path)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise TraceFormatError(f"{path}: {_NOT_JSON.format(error=error)}") from None


def read_trace(path: pathlib.Path) -> tuple[dict, list]:
    """The top-level fields other than traceEvents (as plain JSON values) and the events."""
    raw = read_file_bytes(path)
    try:
        top = _TOP_LEVEL.decode(raw)
    except msgspec.ValidationError:  # not an object: maybe the bare list form
        top, events_json = {}, raw
    except msgspec.DecodeError as error:
        raise TraceFormatError(f"{path}: {_NOT_JSON.format(error=error)}") from None
    else:
        if "traceEvents" not in top:
            raise TraceFormatError(f"{path}: {_NO_EVENTS}")
        events_json = top.pop("traceEvents")
    try:
        events = _EVENTS.decode(events_json)
    except msgspec.ValidationError as error:
        at = re.search(r"\$\[(\d+)\]", str(error))
        if at is None:
            raise TraceFormatError(f"{path}: {_NO_EVENTS}") from None
        raise TraceFormatError(f"{path}: event {at.group(1)} is not a JSON object ({error}); "
                               f"fix or remove it") from None
    return {key: msgspec.json.decode(value) for key, value in top.items()}, events


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


def phases_of(events) -> list:
    return list(map(attrgetter("ph"), events))  # in C


def x_slices(events, phases, path) -> Slices:
    """The X events' columns; TraceFormatError for the first one missing a field, with a
    non-numeric or non-finite ts/dur, or with a negative duration."""
    xs = list(compress(events, map(eq, phases, repeat("X"))))  # in C
    fields = REQUIRED_X_FIELDS + OPTIONAL_X_FIELDS
    columns = dict(zip(fields, zip(*map(attrgetter(*fields), xs)))) if xs else {
        field: () for field in fields}

    def fail(position, problem):
        index = [i for i, phase in enumerate(phases) if phase == "X"][position]
        name = xs[position].name
        raise TraceFormatError(f"{path}: event {index} (X {name!r}) {problem}; fix or remove "
                               f"that event, or export the trace again")

    for field in ("name", "pid", "tid"):  # a null ts or dur becomes NaN, caught below
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
            value = columns[field][bad[0]]
            fail(int(bad[0]), f"has no {field!r}" if value is None else
                 f"has a {field} that is not a finite number: {value!r}")
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
    # One pass in C: setdefault hands back the position where each value was first seen;
    # numpy then numbers those positions 0, 1, 2, ... in order.
    first_seen: dict = {}
    firsts = np.fromiter(map(first_seen.setdefault, values, count()), np.int64, len(values))
    positions, codes = np.unique(firsts, return_inverse=True)
    return codes.reshape(-1).astype(np.int32), [values[i] for i in positions.tolist()]
