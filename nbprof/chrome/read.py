"""Reading a Chrome trace file, with clear errors: for the loader, its events and their X slices'
columns; for the checker, the plain parsed JSON.

The loader parses with msgspec into :class:`Event` structs that hold only the fields it uses
(``ph name cat pid tid ts dur args id``; the rest is skipped unparsed) and that the garbage
collector does not track: on the 68k-event trace that parses in about half orjson's time into
dicts. The X slices' columns are then read off the structs in C (map/attrgetter), straight into
interned codes and float arrays (:func:`x_slices`). The checker reads plain dicts with orjson
(:func:`read_json`).
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import pathlib
import re
import zlib
from dataclasses import dataclass
from itertools import count, repeat
from operator import attrgetter, itemgetter

from typing import Any

import msgspec
import numpy as np
import orjson

GZIP_MAGIC = b"\x1f\x8b"


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


# The phases the loader reads; every other (instant, counter, ...) is counted and skipped.
LOADED_PHASES = ("X", "M", "s", "f")
_PHASE_CODE = {phase: code for code, phase in enumerate(LOADED_PHASES, start=1)}


def phase_rows(events) -> dict[str, np.ndarray]:
    """For each phase in LOADED_PHASES, the indices of its events, in file order."""
    # One pass in C over the events: each ph to a small code (0: a phase not read), then numpy.
    phases = map(attrgetter("ph"), events)
    try:
        codes = np.fromiter(map(_PHASE_CODE.get, phases, repeat(0)), np.int8, len(events))
    except TypeError:  # an unhashable ph (a list, an object) is no phase the loader reads
        codes = np.array([_PHASE_CODE.get(ph, 0) if isinstance(ph, str) else 0
                          for ph in map(attrgetter("ph"), events)], np.int8)
    return {phase: np.flatnonzero(codes == code) for phase, code in _PHASE_CODE.items()}


def pick(values, rows: np.ndarray) -> list:
    """``values[row]`` for each row, as a list."""
    rows = rows.tolist()
    if len(rows) < 2:
        return [values[row] for row in rows]
    return list(itemgetter(*rows)(values))  # in C: a tenth of a comprehension's time


@dataclass
class Column:
    """One field of the X slices, interned: ``table[codes[i]]`` is slice i's value."""

    codes: np.ndarray  # int32
    table: list  # the distinct values, in first-seen order

    def values(self, rows: np.ndarray) -> list:
        return pick(self.table, self.codes[rows])


@dataclass
class Slices:
    """The X events of a trace, column-wise, in file order."""

    name: Column
    cat: Column  # None where an event has no cat
    pid: Column
    tid: Column
    ts: np.ndarray  # float64 µs, as in the file
    dur: np.ndarray
    args: list  # dict (or whatever the file holds) or None


def x_slices(events, x_rows: np.ndarray, path) -> Slices:
    """The columns of the X events at ``x_rows``; TraceFormatError for the first one missing a
    field, with a non-numeric or non-finite ts/dur, or with a negative duration."""
    xs = pick(events, x_rows)

    def fail(position, problem):
        raise TraceFormatError(f"{path}: event {x_rows[position]} (X {xs[position].name!r}) "
                               f"{problem}; fix or remove that event, or export the trace again")

    fields = ("name", "cat", "pid", "tid")
    try:
        columns = _interned_fields(xs, fields)
    except TypeError:  # a list or an object where a string or a number belongs
        position, field = next((position, field) for position, x in enumerate(xs)
                               for field in fields if not _hashable(getattr(x, field)))
        fail(position, f"has a {field} that is not a string or a number: "
                       f"{getattr(xs[position], field)!r}")

    for field in ("name", "pid", "tid"):  # a null ts or dur becomes NaN, caught below
        column = columns[field]
        if None in column.table:
            fail(int(np.argmax(column.codes == column.table.index(None))), f"has no {field!r}")
    numbers = {field: _floats(xs, field) for field in ("ts", "dur")}
    for field, values in numbers.items():
        bad = np.flatnonzero(~np.isfinite(values))
        if len(bad):
            value = getattr(xs[bad[0]], field)
            fail(int(bad[0]), f"has no {field!r}" if value is None else
                 f"has a {field} that is not a finite number: {value!r}")
    negative = np.flatnonzero(numbers["dur"] < 0)
    if len(negative):
        fail(int(negative[0]), f"has a negative duration ({xs[negative[0]].dur})")
    return Slices(name=columns["name"], cat=columns["cat"], pid=columns["pid"],
                  tid=columns["tid"], ts=numbers["ts"], dur=numbers["dur"],
                  args=list(map(attrgetter("args"), xs)))


def _interned_fields(xs: list, fields: tuple) -> dict[str, Column]:
    """Each field of the slices, interned."""
    # The fields are read together, in C (map/attrgetter), and the tuples interned: a file has
    # few distinct (name, cat, pid, tid) combinations (220 in 45k slices of the 68k trace), so
    # one pass over the structs and one dict replace a pass and a dict per field. Each field
    # is then interned over the combinations alone; its table keeps first-seen order.
    combinations = intern(map(attrgetter(*fields), xs), len(xs))
    columns = {}
    for position, field in enumerate(fields):
        per_combination = intern(map(itemgetter(position), combinations.table),
                                 len(combinations.table))
        columns[field] = Column(codes=per_combination.codes[combinations.codes],
                                table=per_combination.table)
    return columns


def _hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _floats(xs: list, field: str) -> np.ndarray:
    """The field of each slice as float64; NaN where it is not a number."""
    try:
        return np.fromiter(map(attrgetter(field), xs), np.float64, len(xs))
    except (TypeError, ValueError):
        return np.array([_number_or_nan(getattr(x, field)) for x in xs], np.float64)


def _number_or_nan(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return float("nan")
    try:
        return float(value)
    except ValueError:
        return float("nan")


def intern(values, size: int) -> Column:
    """The ``size`` values (any iterable) as codes into a table of the distinct values."""
    # One pass in C: setdefault hands back the position where each value was first seen; the
    # dict's values are those positions in first-seen order, which numpy turns into codes.
    first_seen: dict = {}
    firsts = np.fromiter(map(first_seen.setdefault, values, count()), np.int64, size)
    code_at = np.zeros(max(size, 1), np.int32)
    code_at[list(first_seen.values())] = np.arange(len(first_seen), dtype=np.int32)
    return Column(codes=code_at[firsts], table=list(first_seen))
