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
import math
import pathlib
import re
from dataclasses import dataclass, field
from itertools import count, repeat
from operator import attrgetter, itemgetter

from typing import Any

import msgspec
import numpy as np
import orjson

from ...model.unfinished import UNFINISHED_KEY, UNFINISHED_TEXT
from .rawfile import (DEFAULT_MAX_BYTES, TraceFormatError, closed_arrays, read_file_bytes,
                      size_text, without_bad_utf8, without_lone_surrogates,
                      without_trailing_commas)



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


class Event(msgspec.Struct, gc=False):
    """One trace event as the loader reads it (any JSON value in each field, None if absent)."""

    ph: Any = None
    name: Any = None
    cat: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: msgspec.Raw = msgspec.Raw(b"")  # kept undecoded: see args.py; empty if absent
    id: Any = None
    id2: Any = None  # an async event's {"global": ...} or {"local": ...} id
    s: Any = None  # an instant event's scope: "t" (thread, the default), "p" or "g"


_TOP_LEVEL = msgspec.json.Decoder(dict[str, msgspec.Raw])
EVENTS_DECODER = msgspec.json.Decoder(list[Event])
_NOT_JSON = ("not valid JSON ({error}); a Chrome trace is a JSON object with a 'traceEvents' "
             "list (or a JSON list of events)")
_NO_EVENTS = ("no 'traceEvents' list in this JSON; it is not a Chrome trace (export one with "
              "torch.profiler or nbprof)")
UTF8_NOTE = "{count} invalid UTF-8 sequences in the file's text were replaced by U+FFFD"
COMMA_NOTE = ("{count} trailing commas (a comma just before a '}}' or ']') in the file's "
              "text were ignored")
SURROGATE_NOTE = ("{count} lone UTF-16 surrogate escapes (\\ud800 ...) in the file's text were "
                  "replaced by U+FFFD")


def read_json(path, max_bytes: int = DEFAULT_MAX_BYTES) -> object:
    """The parsed JSON of a ``.json`` or gzipped file, as plain dicts and lists (for the
    checker: it reports what the loader would repair, so it repairs nothing)."""
    path = pathlib.Path(path)
    raw = read_file_bytes(path, max_bytes)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise TraceFormatError(f"{path}: {_NOT_JSON.format(error=error)}") from None


def read_trace(path, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[dict, list, list]:
    """The whole file parsed at once (the loader streams instead: stream.py); for
    bench_chrome's parse-only figure."""
    path = pathlib.Path(path)
    return decode_text(read_file_bytes(path, max_bytes), path)


def decode_text(raw: bytes, path, base: int = 0, byte_base: int = 0) -> tuple[dict, list, list]:
    """The top-level fields other than traceEvents (as plain JSON values), the events, and
    notes on what had to be repaired to read them (invalid UTF-8, a cut-off end, ...).
    ``raw`` may be the last part of a file read in chunks (stream.py): ``base`` events and
    ``byte_base`` bytes came before it, for the messages."""
    try:
        return _decode(raw, path, base)
    except (msgspec.DecodeError, RecursionError) as error:
        return _repaired(raw, path, error, base, byte_base)


def decode_events(text: bytes, path, base: int = 0) -> list:
    """A JSON list of events. An entry that is not a JSON object has no meaning as an event:
    it becomes an Event of phase NOT_AN_OBJECT, which the loader counts and leaves out (one
    such entry never refuses the file)."""
    try:
        return EVENTS_DECODER.decode(text)
    except msgspec.ValidationError as error:
        if re.search(r"\$\[(\d+)\]", str(error)) is None:
            raise TraceFormatError(f"{path}: {_NO_EVENTS}") from None
    # the slow path, only for a chunk that holds such an entry: each entry on its own
    return [_event_or_nothing(entry) for entry in _RAW_LIST.decode(text)]


_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_ONE_EVENT = msgspec.json.Decoder(Event)


def _event_or_nothing(entry: msgspec.Raw) -> Event:
    try:
        return _ONE_EVENT.decode(entry)
    except msgspec.ValidationError:
        return Event(ph=NOT_AN_OBJECT)


# The top-level keys the loaders read, decoded whatever their size (their size is bounded by
# stream.MAX_UNCUT_BYTES); any other key is kept in the meta only up to KEPT_VALUE_BYTES of
# text: decoded, a few MiB of small strings or numbers are hundreds of MB of Python objects.
READ_TOP_LEVEL_KEYS = ("nbprof", "deviceProperties", "distributedInfo", "baseTimeNanoseconds")
KEPT_VALUE_BYTES = 1 << 20


def top_level_values(top: dict) -> tuple[dict, list]:
    """The top-level keys' values (``msgspec.Raw``) decoded, and a note for each left out."""
    values, notes = {}, []
    for key, value in top.items():
        if len(value) > KEPT_VALUE_BYTES and key not in READ_TOP_LEVEL_KEYS:
            notes.append(f"the file's top-level {key[:80]!r} ({size_text(len(value))} of text) "
                         f"is not one nbprof reads and was left out")
            continue
        values[key] = msgspec.json.decode(value)
    return values, notes


def _decode(raw: bytes, path, base: int = 0) -> tuple[dict, list, list]:
    try:
        top = _TOP_LEVEL.decode(raw)
    except msgspec.ValidationError:  # not an object: maybe the bare list form
        top, events_json = {}, raw
    else:
        if "traceEvents" not in top:
            raise TraceFormatError(f"{path}: {_NO_EVENTS}")
        events_json = top.pop("traceEvents")
    events = decode_events(events_json, path, base)
    values, notes = top_level_values(top)
    return values, events, notes


def _repaired(raw: bytes, path, error, base=0, byte_base=0) -> tuple[dict, list, list]:
    """The slow path, after the fast parse failed: the repairs a damaged file allows, each
    said in a note, or one TraceFormatError saying what is wrong."""
    notes = []
    for _ in range(5):  # each repair at most once: junk after, bad UTF-8, lone surrogates,
        # trailing commas
        if isinstance(error, RecursionError):
            raise TraceFormatError(f"{path}: its JSON nests too deep for a trace (lists or "
                                   f"objects inside each other thousands of levels down); it "
                                   f"is damaged or not a trace") from None
        message = str(error)
        trailing = re.search(r"trailing characters \(byte (\d+)\)", message)
        if trailing:  # a whole JSON value, then junk: the value is the trace
            # msgspec's byte is a little past the value's end: back up to its closing bracket
            end = int(trailing.group(1))
            end = max(raw.rfind(b"]", 0, end), raw.rfind(b"}", 0, end)) + 1
            notes.append(f"the file has {size_text(len(raw) - end)} of text after its JSON "
                         f"(from byte {byte_base + end}): ignored")
            raw = raw[:end]
        elif "UTF-8" in message and not any("UTF-8" in note for note in notes):
            raw, count = without_bad_utf8(raw)
            notes.append(UTF8_NOTE.format(count=count))
        elif "escape" in message or "surrogate" in message:
            raw, count = without_lone_surrogates(raw)
            if not count or any("surrogate" in note for note in notes):
                break
            notes.append(SURROGATE_NOTE.format(count=count))
        elif "trailing comma" in message and not any("trailing comma" in n for n in notes):
            raw, count = without_trailing_commas(raw)
            notes.append(COMMA_NOTE.format(count=count))
        else:
            return _closed(raw, path, error, notes, base)
        try:
            data, events, left_out = _decode(raw, path, base)
            return data, events, notes + left_out
        except (msgspec.DecodeError, RecursionError) as again:
            error = again
    raise TraceFormatError(f"{path}: {_NOT_JSON.format(error=error)}") from None


def _closed(raw: bytes, path, error, notes, base=0) -> tuple[dict, list, list]:
    """A trace cut off while it was written, read up to its last whole event."""
    for text, what in closed_arrays(raw):
        try:
            data, events, left_out = _decode(text, path, base)
        except (msgspec.DecodeError, RecursionError, TraceFormatError):
            continue
        notes += left_out
        notes.append(f"the file {what}: the {base + len(events):,} whole events before the cut "
                     f"were loaded")
        return data, events, notes
    raise TraceFormatError(f"{path}: {_NOT_JSON.format(error=error)}") from None


# The phases the loader reads; every other (object, sample, ...) is counted and skipped.
# The phase decode_events gives an entry of traceEvents that is not a JSON object (no real
# phase is two characters with a space): counted and left out, never a refusal of the file.
NOT_AN_OBJECT = "? "
LOADED_PHASES = ("X", "M", "s", "f", "B", "E", "i", "I", "n", "C", "b", "e", "S", "T", "F",
                 NOT_AN_OBJECT)
_PHASE_CODE = {phase: code for code, phase in enumerate(LOADED_PHASES, start=1)}
# Largest |ts| and dur (µs) taken: ns from the origin must fit int64 with room for the sums
# the timeline and the export make (2^62 ns is 146 years; a real trace spans seconds).
MAX_TIME_US = float(1 << 62) / 1000.0
_NS_BLOCK = 1 << 20


# A file's µs become a trace's ns in one way everywhere (subtract the origin, times 1000,
# rounded), so that a flow's end and the slice it sits on, equal in the file, stay equal.
def ns_from_us(us: np.ndarray, origin_us: float) -> tuple[np.ndarray, np.ndarray]:
    """float64 µs -> int64 ns from ``origin_us``, and which fit a trace's span (0 where not)."""
    relative = us - origin_us
    fits = np.abs(relative) <= MAX_TIME_US
    return np.rint(np.where(fits, relative, 0.0) * 1000.0).astype(np.int64), fits


def ns_in_place(us: np.ndarray, origin_us: float) -> np.ndarray:
    """ns_from_us of values known to fit, in ``us``'s own memory (which it overwrites): a block
    at a time, so that numpy's copy of what overlaps stays small."""
    ns = us.view(np.int64)
    for first in range(0, len(us), _NS_BLOCK):
        block = us[first:first + _NS_BLOCK]
        np.subtract(block, origin_us, out=block)
        np.multiply(block, 1000.0, out=block)
        ns[first:first + _NS_BLOCK] = np.rint(block, out=block)
    return ns


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
    filled_ids: int = 0  # slices without a pid or tid, given Perfetto's (see _filled_ids)
    left_out: dict = field(default_factory=dict)  # why -> how many (LEFT_OUT; x_slices)
    unfinished: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # dur NaN


def x_slices(events, x_rows: np.ndarray) -> Slices:
    """The columns of the X (or X-like: B/E pairs) events at ``x_rows``. Names become strings
    (an event without one, "": Perfetto's empty name) and pids/tids one value each for 1, 1.0
    and "1" (see canonical_id). The args stay as the file's text (msgspec.Raw).

    A slice without a numeric dur (a begin that never ends, as a B without its E) is kept as
    unfinished: its dur stays NaN (``unfinished`` lists those rows; the gatherer gives them the
    trace's end) and its args say so (model/unfinished.py). A slice that has no meaning is left
    out and counted in ``left_out`` by why (LEFT_OUT says each): no numeric ts, a negative dur, a
    time past MAX_TIME_US, or a list or object as its pid, tid, name or cat. A file of good
    slices pays one vector check for this."""
    xs = pick(events, x_rows)
    left_out: dict[str, int] = {}
    fields = ("name", "cat", "pid", "tid")
    try:
        columns = _interned_fields(xs, fields)
    except TypeError:  # a list or an object where a string or a number belongs
        xs = _kept(xs, [next((field for field in fields if not hashable(getattr(x, field))), None)
                        for x in xs], left_out)
        columns = _interned_fields(xs, fields)
    numbers = {field: floats(xs, field) for field in ("ts", "dur")}
    meaningless = ~(np.abs(numbers["ts"]) <= MAX_TIME_US) | ~(numbers["dur"] >= 0) | \
        (numbers["dur"] > MAX_TIME_US)  # NaN too
    if meaningless.any():
        reasons = [None] * len(xs)
        for row in np.flatnonzero(meaningless).tolist():
            reasons[row] = _why_left_out(numbers["ts"][row], numbers["dur"][row])
            if reasons[row] == "unfinished":  # kept: drawn to the end of the trace
                reasons[row], xs[row].dur = None, None
                xs[row].args = unfinished_args(xs[row].args)
        xs = _kept(xs, reasons, left_out)
        columns = _interned_fields(xs, fields)
        numbers = {field: floats(xs, field) for field in ("ts", "dur")}
    filled = 0
    if None in columns["pid"].table or None in columns["tid"].table:
        filled = _filled_ids(xs)
        columns = _interned_fields(xs, fields)
    name = columns["name"]
    if None in name.table:
        left_out["unnamed"] = int(np.count_nonzero(name.codes == name.table.index(None)))
        name = _reinterned(name, ["" if value is None else value for value in name.table])
    return Slices(name=_as_text(name), cat=_as_text(columns["cat"]),
                  pid=_canonical(columns["pid"]), tid=_canonical(columns["tid"]),
                  ts=numbers["ts"], dur=numbers["dur"], args=list(map(attrgetter("args"), xs)),
                  filled_ids=filled, left_out=left_out,
                  unfinished=np.flatnonzero(np.isnan(numbers["dur"])) if meaningless.any()
                  else np.zeros(0, np.int64))


# Why a slice was left out (x_slices), as the note says it; "unnamed" ones are kept, named "".
LEFT_OUT = {
    "ts": "slices had no ts (or one that is not a number) and were left out",
    "negative": "X slices had a negative dur and were left out",
    "far": f"slices had a ts or dur beyond {MAX_TIME_US:.3g} µs (146 years) and were left out",
    "pid": "slices had a pid that is not a string or a number and were left out",
    "tid": "slices had a tid that is not a string or a number and were left out",
    "name": "slices had a name that is not a string or a number and were left out",
    "cat": "slices had a cat that is not a string or a number and were left out",
    "unnamed": "slices had no name: read with an empty name, as Perfetto does",
}


def _why_left_out(ts: float, dur: float) -> str:
    if not math.isfinite(ts):
        return "ts"
    if not math.isfinite(dur) and abs(ts) <= MAX_TIME_US:
        return "unfinished"  # not left out: x_slices keeps it
    if dur < 0:
        return "negative"
    return "far"


def unfinished_args(raw: msgspec.Raw) -> msgspec.Raw:
    """A slice's args text with the unfinished mark added (last, so it wins over a key of the
    same name), spliced as text: the file's values are never decoded and written again."""
    text = bytes(raw).strip()
    mark = b'"' + UNFINISHED_KEY.encode() + b'":' + orjson.dumps(UNFINISHED_TEXT)
    if text in (b"", b"null"):
        return msgspec.Raw(b"{" + mark + b"}")
    if not text.startswith(b"{"):  # a list or a value as args: kept under "args"
        return msgspec.Raw(b'{"args":' + text + b"," + mark + b"}")
    body = text[:-1].rstrip()
    return msgspec.Raw(body + (b"" if body == b"{" else b",") + mark + b"}")


def _kept(xs: list, reasons: list, left_out: dict) -> list:
    """The slices whose reason is None; the others counted in ``left_out`` by reason."""
    for reason in reasons:
        if reason is not None:
            left_out[reason] = left_out.get(reason, 0) + 1
    return [x for x, reason in zip(xs, reasons) if reason is None]


def _filled_ids(xs: list) -> int:
    """Give the slices without a pid or tid the ones Perfetto gives them: no tid, its
    process's main thread (tid = pid); neither, pid 0 and tid 0. How many there were."""
    filled = 0
    for x in xs:
        if x.tid is None or x.pid is None:
            x.pid = 0 if x.pid is None else x.pid
            x.tid = x.pid if x.tid is None else x.tid
            filled += 1
    return filled


_NUMBER_TEXT = re.compile(r"\s*-?\d+(\.\d+)?([eE][-+]?\d+)?\s*")


def canonical_id(value):
    """One value for the ways a file spells a pid or tid: 1, 1.0, "1" and "1.0" are all 1,
    1.5 and "1.5" both 1.5. They are one process to the user (Chrome's viewer keys processes
    by the value's text, so it shows one) and would otherwise be two lanes with one label.
    Ints beyond int64 become their text."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str) and _NUMBER_TEXT.fullmatch(value):
        if value.strip().lstrip("-").isdigit():
            value = int(value)
        elif math.isfinite(float(value)):
            value = float(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not -(1 << 63) <= value < (1 << 63):
        return str(value)
    return value


def _canonical(column: Column) -> Column:
    return _reinterned(column, list(map(canonical_id, column.table)))


def _as_text(column: Column) -> Column:
    """Names and categories as strings (a number stays findable as its text)."""
    return _reinterned(column, [value if value is None or isinstance(value, str) else str(value)
                                for value in column.table])


def _reinterned(column: Column, table: list) -> Column:
    """``column`` with its table replaced by ``table`` (same length), merging equal values."""
    if table == column.table and all(type(a) is type(b) for a, b in zip(table, column.table)):
        return column
    merged = intern(table, len(table))
    return Column(codes=merged.codes[column.codes], table=merged.table)


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


def hashable(value) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def floats(xs: list, field: str) -> np.ndarray:
    """The field of each slice as float64; NaN where it is not a number (true and false are
    not 1 and 0)."""
    try:
        values = np.fromiter(map(attrgetter(field), xs), np.float64, len(xs))
    except (TypeError, ValueError):
        return np.array([number_or_nan(getattr(x, field)) for x in xs], np.float64)
    # numpy reads true as 1.0: only the values 0 and 1 can have been booleans
    maybe = np.flatnonzero((values == 0.0) | (values == 1.0))
    if len(maybe):
        kinds = np.fromiter(map(type, map(attrgetter(field), pick(xs, maybe))), object,
                            len(maybe))
        values[maybe[kinds == bool]] = np.nan
    return values


# A number written as JSON text writes it, and the forms Perfetto's importer also reads from
# a string: a leading '+', leading zeros, no digit before or after the point ("+10.5", "050",
# ".75", "246."). Not "1.5e", "+", "inf" or "nan" (which float() would take).
_NUMERIC_TEXT = re.compile(r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*")


def number_in_text(value) -> float:
    """A counter's value: a number, or a string that holds one; NaN for anything else."""
    if isinstance(value, str):
        return float(value) if _NUMERIC_TEXT.fullmatch(value) else math.nan
    return number_or_nan(value)


def number_or_nan(value) -> float:
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
