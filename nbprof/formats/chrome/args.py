"""The X slices' args, kept as compressed JSON text and decoded only when a row is asked for.

A Kineto file's args are a quarter of its text, and a dict per slice costs ~250 bytes: kept as
Python dicts they were most of a big load's memory. Here each chunk's args texts are joined
and compressed (LZ4, ~5x on Kineto's args, ~1 GB/s; zlib where the lz4 package is missing),
with each slice's end in its block. What the loader itself needs from the args (correlation,
External id, device, stream, and whether shapes or a stack are there) is read per chunk into
int columns (sparse, or dense where most slices have the id). ``trace.event_args``, ``gpu_args``, ``shapes`` and ``stacks`` are then
:class:`LazyArgs` mappings over that text: row -> value, decoded on access (a block at a time,
the last one cached), so a load keeps no Python object per event.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Mapping
from itertools import compress, repeat
from operator import attrgetter, is_not
from typing import Any

import msgspec
import numpy as np

from .export import SHAPES_KEY, STACK_KEY
from .growing import GrowingColumn
from .rawfile import without_bad_utf8, without_lone_surrogates
from .read import pick

MISSING = np.iinfo(np.int64).min  # no such key in the args (or a value no id can be)
_BLOCK_ROWS = 1 << 18  # rows a lookup takes at a time: its temporaries stay a few MB
_FALSY = (b"{}", b"[]", b'""', b"0", b"null", b"false")


class KnownArgs(msgspec.Struct, gc=False):
    correlation: Any = None
    external_id: Any = msgspec.field(default=None, name="External id")
    device: Any = None
    stream: Any = None
    shapes: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name=SHAPES_KEY)
    stack: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name=STACK_KEY)


class IntArgs(KnownArgs, gc=False):
    """KnownArgs where every id is an int (as Kineto writes them): decoded straight to ints,
    MISSING where absent, so that each id is one numpy pass; any other value fails the chunk
    over to KnownArgs."""

    correlation: int = MISSING
    external_id: int = msgspec.field(default=MISSING, name="External id")
    device: int = MISSING
    stream: int = MISSING


_KNOWN = msgspec.json.Decoder(list[KnownArgs | None])
_INT_KNOWN = msgspec.json.Decoder(list[IntArgs])
_KNOWN_ONE = msgspec.json.Decoder(KnownArgs)
_ONLY_KEYS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ONLY_KEYS_LIST = msgspec.json.Decoder(list[dict[str, msgspec.Raw]])
ID_KEYS = ("correlation", "external_id", "device", "stream")


def _codec():
    # lz4, not pyarrow's LZ4 (the same codec and speed): importing pyarrow costs a load ~30 MB
    # of memory, 3% of a 1 GB file
    try:
        import lz4.block
    except ImportError:  # zlib's fastest level: ~6x slower
        return (lambda data: zlib.compress(data, 1)), (lambda data, size: zlib.decompress(data))
    return (lambda data: lz4.block.compress(data, store_size=False),
            lambda data, size: lz4.block.decompress(data, uncompressed_size=size))


class IdColumn:
    """One arg's value for the slices that have it: ints in numpy, anything else hashable
    (a string, a float, an int past int64) in ``others``; lists and objects are no id."""

    def __init__(self):
        self._rows, self._values = GrowingColumn(np.int32, True), GrowingColumn(np.int32, True)
        self.others = {}

    def append(self, rows: np.ndarray, values: list) -> None:
        present = np.flatnonzero(np.fromiter(map(is_not, values, repeat(None)), bool,
                                             len(values)))
        if not len(present):
            return
        values = pick(values, present)
        rows = rows[present]
        if set(map(type, values)) == {int}:
            try:
                ints = np.array(values, np.int64)
            except OverflowError:
                pass
            else:
                self._rows.extend(rows)
                self._values.extend(ints)
                return
        ints, int_rows = [], []
        for row, value in zip(rows.tolist(), values):
            if type(value) is int and -(1 << 63) < value < 1 << 63:
                ints.append(value)
                int_rows.append(row)
            elif not isinstance(value, (list, dict)):
                self.others[row] = value
        self._rows.extend(np.array(int_rows, np.int64))
        self._values.extend(np.array(ints, np.int64))

    def append_ints(self, rows: np.ndarray, ints: np.ndarray) -> None:
        """Int values (int64; a MISSING among them reads as absent, as in append) at ``rows``."""
        self._rows.extend(rows)
        self._values.extend(ints)

    def finish(self, count: int) -> None:
        """``count``: how many rows there are (with an id or not)."""
        # int32 where every value fits (ids and rows usually do): a third of a big load's
        # memory is these columns (GrowingColumn widens to int64 where one does not)
        self.rows, self.values = self._rows.finish(), self._values.finish()
        del self._rows, self._values  # rows come in order: already sorted
        size = self.values.dtype.itemsize
        if len(self.rows) * (self.rows.dtype.itemsize + size) > count * size:
            # Most rows have one (Kineto's External id: all but a few): a value per row, the
            # type's lowest value where none (GrowingColumn never holds it), costs less
            dense = np.full(count, np.iinfo(self.values.dtype).min, self.values.dtype)
            dense[self.rows] = self.values
            self.rows, self.values = None, dense

    def ints(self, rows: np.ndarray) -> np.ndarray:
        """The int value at each of ``rows`` (X slice indices); MISSING where none."""
        if len(rows) <= _BLOCK_ROWS:
            return self._ints(rows)
        # A block at a time: the lookup's temporaries are several times the rows' size
        out = np.empty(len(rows), np.int64)
        for start in range(0, len(rows), _BLOCK_ROWS):
            out[start:start + _BLOCK_ROWS] = self._ints(rows[start:start + _BLOCK_ROWS])
        return out

    def _ints(self, rows: np.ndarray) -> np.ndarray:
        if self.rows is None:
            inside = (rows >= 0) & (rows < len(self.values))
            values = self.values[np.where(inside, rows, 0)]
            inside &= values != np.iinfo(values.dtype).min
            return np.where(inside, values.astype(np.int64), MISSING)
        at = np.searchsorted(self.rows, rows)
        at_clipped = np.minimum(at, max(len(self.rows) - 1, 0))
        found = (at < len(self.rows)) & (self.rows[at_clipped] == rows) if len(self.rows) else \
            np.zeros(len(rows), bool)
        return np.where(found, self.values[at_clipped].astype(np.int64) if len(self.rows)
                        else MISSING, MISSING)

    def lookup_values(self, rows: np.ndarray) -> list:
        """Python values (None where absent), as id_values gave them: for small row sets."""
        ints = self.ints(rows).tolist()
        return [self.others.get(row) if value == MISSING else value
                for row, value in zip(rows.tolist(), ints)]


class ArgsStore:
    """The args of every X slice, in file order, a compressed block per chunk: slice i's text
    ends at ``ends[i]`` in its block and starts where slice i - 1's ends (at 0 for a block's
    first slice). An int32 per slice: offsets into the whole text would need int64, built from
    the lengths at the end (both at once: ~50 MB at a 1 GB file's peak)."""

    def __init__(self):
        self._compress, self._decompress = _codec()
        self.blocks, self.block_sizes, self._first_slots = [], [], []
        self._ends = GrowingColumn(np.int32, widen=True)
        self._end = 0  # the last block's size: where slices without args after it "end"
        self.ids = {key: IdColumn() for key in ID_KEYS}
        self._shapes, self._stacks, self._only_split = (GrowingColumn(np.int64) for _ in range(3))
        self.count = 0
        self._cache = (None, None)
        self.repaired = {"utf8": 0, "surrogates": 0}

    def append(self, raws: list) -> None:
        """The args (msgspec.Raw, empty where absent) of the next slices."""
        base = self.count
        lengths = np.fromiter(map(len, raws), np.int32, len(raws))
        for index in np.flatnonzero((lengths > 0) & (lengths <= 8)).tolist():
            if bytes(raws[index]).replace(b" ", b"") in _FALSY:
                lengths[index] = 0  # empty args are no args, as before
        present = np.flatnonzero(lengths)
        texts = pick(raws, present)
        self.count += len(raws)
        if not texts:
            self._ends.extend(np.full(len(raws), self._end, np.int64))
            return
        blob = b"".join(texts)
        # A backslash is rare in args: one memchr for it spares two searches for "\\ud"
        if not blob.isascii() or (b"\\" in blob and (b"\\ud" in blob or b"\\uD" in blob)):
            texts = list(map(self._repaired, texts))
            lengths[present] = list(map(len, texts))
            blob = b"".join(texts)
        self._ends.extend(np.cumsum(lengths, dtype=np.int64))
        self._first_slots.append(base)
        self._end = len(blob)
        self.blocks.append(self._compress(blob))
        self.block_sizes.append(len(blob))
        listed = b"[" + b",".join(texts) + b"]"
        rows = present + base
        objects, has_id = self._int_ids(listed, rows)
        if objects is not None:
            known_rows, object_rows = np.arange(len(texts)), rows
        else:
            try:
                known = _KNOWN.decode(listed)
            except msgspec.ValidationError:  # some args are no object (a number, a list)
                known = [_known_one(text) for text in texts]
            except (msgspec.DecodeError, RecursionError):
                known = [_known_one(text) for text in texts]
            known_rows = np.flatnonzero(np.fromiter(map(is_not, known, repeat(None)), bool,
                                                    len(known)))
            objects = pick(known, known_rows)
            object_rows = rows[known_rows]
            for key in ID_KEYS:
                self.ids[key].append(object_rows, list(map(attrgetter(key), objects)))
        del listed
        shapes = np.fromiter(map(len, map(attrgetter("shapes"), objects)), np.int64,
                             len(objects)) > 0
        stacks = np.fromiter(map(len, map(attrgetter("stack"), objects)), np.int64,
                             len(objects)) > 0
        self._shapes.extend(object_rows[shapes])
        self._stacks.extend(object_rows[stacks])
        # Most rows with shapes (Kineto's cpu_ops) have an id too, hence another key: only the
        # rest need reading for their keys
        split = shapes | stacks
        if has_id is not None:
            split &= ~has_id
        split = np.flatnonzero(split)
        if len(split):
            self._only_split.extend(object_rows[split[_only_split(
                pick(texts, known_rows[split]), shapes[split], stacks[split])]])

    def _int_ids(self, listed: bytes, rows: np.ndarray) -> tuple:
        """The args (``listed``: a JSON list of them, for ``rows``) as IntArgs, their ids
        appended, and which of them have an id; (None, None), with nothing appended, where one
        is no object or an id no int64."""
        try:
            objects = _INT_KNOWN.decode(listed)
            columns = [np.fromiter(map(attrgetter(key), objects), np.int64, len(objects))
                       for key in ID_KEYS]
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError, OverflowError):
            return None, None  # a string id, a number as args, ...: the general path
        has_id = np.zeros(len(objects), bool)
        for key, values in zip(ID_KEYS, columns):
            present = values != MISSING  # MISSING itself as a value: no id here, still exact
            self.ids[key].append_ints(rows[present], values[present])
            has_id |= present
        return objects, has_id

    def _repaired(self, text):
        """One args text as the repairs of a whole file leave it (read.py): invalid UTF-8 and
        lone surrogate escapes made U+FFFD, counted for the notes. msgspec kept the args
        unparsed (Raw), so it has not checked them."""
        text = bytes(text)
        if not text.isascii():
            text, count = without_bad_utf8(text)
            self.repaired["utf8"] += count
        if b"\\ud" in text or b"\\uD" in text:
            text, count = without_lone_surrogates(text)
            self.repaired["surrogates"] += count
        return text

    def finish(self) -> None:
        self.ends = self._ends.finish()
        self.first_slots = np.array(self._first_slots, np.int64)
        for column in self.ids.values():
            column.finish(self.count)
        self.shape_rows, self.stack_rows = self._shapes.finish(), self._stacks.finish()
        self.only_split_rows = self._only_split.finish()
        del self._ends, self._first_slots, self._shapes, self._stacks, self._only_split

    def drop_ids(self) -> None:
        """The loader has read what it needs from the args' ids: free them."""
        self.ids = None

    def has_args(self, slots: np.ndarray) -> np.ndarray:
        present = np.empty(len(slots), bool)
        for first in range(0, len(slots), _BLOCK_ROWS):  # temporaries of a few MB
            block = slots[first:first + _BLOCK_ROWS]
            present[first:first + len(block)] = self.ends[block] > self._starts(block)
        return present

    def _starts(self, slots: np.ndarray) -> np.ndarray:
        """Where each slot's text starts in its block."""
        if not len(self.first_slots):
            return np.zeros(len(slots), np.int64)
        block = np.searchsorted(self.first_slots, slots, side="right") - 1
        after_first = (block >= 0) & (self.first_slots[np.maximum(block, 0)] < slots)
        return np.where(after_first, self.ends[np.maximum(slots - 1, 0)], 0)

    def flagged(self, rows: np.ndarray) -> np.ndarray:
        """Which slices are among ``rows``, one bool per slice (a mask to index, where
        np.isin would sort both)."""
        mask = np.zeros(self.count, bool)
        mask[rows] = True
        return mask

    def value(self, slot: int):
        block = int(np.searchsorted(self.first_slots, slot, side="right")) - 1
        start = 0 if slot == self.first_slots[block] else int(self.ends[slot - 1])
        return decode_value(self.block_text(block)[start:int(self.ends[slot])])

    def block_text(self, block: int) -> bytes:
        """Block ``block``'s args texts, decompressed (the last one asked for is kept)."""
        cached_block, text = self._cache
        if cached_block != block:
            text = self._decompress(self.blocks[block], self.block_sizes[block])
            self._cache = (block, text)
        return text


def decode_value(text, repaired: dict | None = None):
    """A JSON value from args kept as text. A number beyond a float's range (1e400: valid
    JSON, which msgspec refuses) becomes None, so that what loaded also exports. Invalid
    UTF-8 and lone surrogates become U+FFFD, counted in ``repaired`` (as ArgsStore.repaired)."""
    try:
        return msgspec.json.decode(text)
    except msgspec.ValidationError:
        return json.loads(bytes(text), parse_float=_finite_or_none,
                          parse_constant=lambda _name: None)
    except msgspec.DecodeError:  # a rare event's args: not repaired on the way in
        text, utf8 = without_bad_utf8(bytes(text))
        text, surrogates = without_lone_surrogates(text)
        if repaired is not None:
            repaired["utf8"] = repaired.get("utf8", 0) + utf8
            repaired["surrogates"] = repaired.get("surrogates", 0) + surrogates
        return decode_value(text)


def _finite_or_none(text: str):
    value = float(text)
    return value if math.isfinite(value) else None


def _only_split(texts: list, shapes: np.ndarray, stacks: np.ndarray) -> np.ndarray:
    """Which of ``texts`` (args objects; ``shapes``/``stacks``: which have those keys) have no
    other key, so that their "args" view leaves them out: those whose count of distinct keys
    is the count of the two they have. One decode for all of them."""
    try:
        keys = _ONLY_KEYS_LIST.decode(b"[" + b",".join(texts) + b"]")
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        keys = list(map(_ONLY_KEYS.decode, texts))  # one at a time, as before: any error is theirs
    counts = np.fromiter(map(len, keys), np.int64, len(keys))
    return np.flatnonzero(counts == shapes.astype(np.int64) + stacks)


def _known_one(text):
    try:
        return _KNOWN_ONE.decode(text)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return None


def _picker(keys: list) -> type:
    """A msgspec Struct that keeps only ``keys`` of an args object, as their raw JSON texts."""
    return msgspec.defstruct("Picked", [(f"key{index}", msgspec.Raw, msgspec.field(
        default=msgspec.Raw(b""), name=key)) for index, key in enumerate(keys)], gc=False)


def _picked(picker, keys: list, texts: list) -> list:
    """Per key of ``keys``, its raw JSON text (bytes; b"" where absent) in each of ``texts``
    (args objects): one decode for all of them, else one at a time where any is no object or
    is damaged."""
    try:
        items = picker.decode(b"[" + b",".join(texts) + b"]")
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        values = list(map(decode_value, texts))
        return [[msgspec.json.encode(value[key], enc_hook=str)
                 if isinstance(value, dict) and key in value else b"" for value in values]
                for key in keys]
    return [list(map(bytes, map(attrgetter(f"key{index}"), items))) for index in range(len(keys))]


def _stack(value) -> tuple:
    return tuple(value) if isinstance(value, list) else (str(value),)


def _args_only(value):
    if isinstance(value, dict) and (SHAPES_KEY in value or STACK_KEY in value):
        return {key: item for key, item in value.items() if key not in (SHAPES_KEY, STACK_KEY)}
    return value


# What each mapping hands out from a slice's args.
VIEWS = {"args": _args_only, "all": lambda value: value,
         "shapes": lambda value: value[SHAPES_KEY], "stacks": lambda value: _stack(value[STACK_KEY])}


class LazyArgs(Mapping):
    """row -> a value from the args of slice ``slots[i]`` for ``rows[i]`` (rows sorted), decoded
    when asked for; ``view`` (a key of VIEWS) says which value."""

    def __init__(self, rows: np.ndarray, slots: np.ndarray, stores: list, store_of, view: str):
        self._rows, self._slots, self._stores = rows, slots, stores
        self._store_of, self._view = store_of, view  # store_of: None (one store) or per row

    @classmethod
    def of(cls, store: ArgsStore, slots_by_row: np.ndarray, view: str) -> "LazyArgs":
        """The mapping for a Trace whose row r is slice ``slots_by_row[r]``."""
        keep = store.has_args(slots_by_row)
        if view == "shapes":
            keep &= store.flagged(store.shape_rows)[slots_by_row]
        elif view == "stacks":
            keep &= store.flagged(store.stack_rows)[slots_by_row]
        elif view == "args" and len(store.only_split_rows):
            keep &= ~store.flagged(store.only_split_rows)[slots_by_row]
        rows = np.flatnonzero(keep)
        small = np.int32 if len(slots_by_row) < 1 << 31 else np.int64
        return cls(rows.astype(small), slots_by_row[rows].astype(small), [store], None, view)

    def __len__(self):
        return len(self._rows)

    def __iter__(self):
        return iter(self._rows.tolist())

    def _position(self, row) -> int:
        try:
            row = int(row)
        except (TypeError, ValueError):
            return -1
        at = int(np.searchsorted(self._rows, row)) if -1 < row < 1 << 62 else len(self._rows)
        return at if at < len(self._rows) and self._rows[at] == row else -1

    def __getitem__(self, row):
        at = self._position(row)
        if at < 0:
            raise KeyError(row)
        store = self._stores[0 if self._store_of is None else int(self._store_of[at])]
        return VIEWS[self._view](store.value(int(self._slots[at])))

    def __contains__(self, row):
        return self._position(row) >= 0

    def values(self):
        """Every value, in row order."""
        out = [None] * len(self._rows)
        for positions, values in self._in_file_order(lambda value: value):
            for position, value in zip(positions.tolist(), values):
                out[position] = value
        return out

    def encoded_blocks(self, encode, rows_per_block: int = 1 << 16):
        """(rows, [encode(value) of each]) a block of rows at a time: what a writer takes to
        write every value without holding them all decoded (columnar.to_arrow)."""
        for positions, encoded in self._in_file_order(encode, rows_per_block):
            yield self._rows[positions], encoded

    def _in_file_order(self, encode, rows_per_block: int = 1 << 16):
        # The file's order, so that each compressed block is decompressed once (rows sorted by
        # time visit the blocks back and forth)
        view = VIEWS[self._view]
        store_of = np.zeros(len(self._rows), np.int32) if self._store_of is None \
            else self._store_of
        order = np.lexsort((self._slots, store_of))
        for first in range(0, len(order), rows_per_block):
            positions = order[first:first + rows_per_block]
            yield positions, [encode(view(self._stores[store].value(slot))) for store, slot in
                              zip(store_of[positions].tolist(), self._slots[positions].tolist())]

    def items(self):
        return list(zip(self, self.values()))

    def subset(self, rows: np.ndarray) -> "LazyArgs":
        """The same mapping for just those of ``rows`` (sorted) it has, still undecoded."""
        at = np.minimum(np.searchsorted(self._rows, rows), max(len(self._rows) - 1, 0))
        at = at[self._rows[at] == rows] if len(self._rows) else at[:0]
        return LazyArgs(self._rows[at], self._slots[at], self._stores,
                        None if self._store_of is None else self._store_of[at], self._view)

    def coded(self, keys: tuple = (None,)) -> list:
        """Per key of ``keys`` (None: the mapping's own value), the rows whose value has it
        (sorted), each one's code into the table of its distinct values, and that table
        (decoded, once per distinct value). A block of the store at a time, each block's
        texts decoded in one msgspec call that keeps just those keys: what a caller that
        formats per value takes instead of a decode per row (a timeline's hover texts)."""
        fields = [{"shapes": SHAPES_KEY, "stacks": STACK_KEY}.get(self._view, key) for key in keys]
        if None in fields or (self._view == "args" and {SHAPES_KEY, STACK_KEY} & set(fields)):
            raise ValueError(f"coded() takes keys of each args object, not {keys!r}, from a "
                             f"mapping of {self._view!r}")
        post = _stack if self._view == "stacks" else (lambda value: value)
        picker = msgspec.json.Decoder(list[_picker(fields)])
        store_of = np.zeros(len(self._rows), np.int32) if self._store_of is None \
            else self._store_of
        order = np.lexsort((self._slots, store_of))
        found = [([], [], {}) for _field in fields]  # per key: rows, codes, table
        for store_index in np.unique(store_of).tolist():
            store = self._stores[store_index]
            positions = order[store_of[order] == store_index]
            slots = self._slots[positions].astype(np.int64)
            block_of = np.searchsorted(store.first_slots, slots, side="right") - 1
            bounds = np.flatnonzero(np.diff(block_of, prepend=-1, append=-1))
            starts, ends = store._starts(slots).tolist(), store.ends[slots].tolist()
            for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
                text = store.block_text(int(block_of[lo]))
                picked = _picked(picker, fields,
                                 [text[a:b] for a, b in zip(starts[lo:hi], ends[lo:hi])])
                for (rows, codes, table), raws in zip(found, picked):
                    present = np.fromiter(map(len, raws), np.int64, len(raws)) > 0
                    raws = list(compress(raws, present.tolist()))
                    for raw in dict.fromkeys(raws):  # codes for the block's new values
                        table.setdefault(raw, len(table))
                    rows.append(self._rows[positions[lo:hi]][present])
                    codes.append(np.fromiter(map(table.__getitem__, raws), np.int64, len(raws)))
        out = []
        for rows, codes, table in found:
            rows = np.concatenate(rows) if rows else np.zeros(0, np.int64)
            codes = np.concatenate(codes) if codes else np.zeros(0, np.int64)
            by_row = np.argsort(rows, kind="stable")
            out.append((rows[by_row], codes[by_row], [post(decode_value(raw)) for raw in table]))
        return out

    @classmethod
    def combined(cls, parts: list, new_rows: np.ndarray) -> "LazyArgs | None":
        """Several as one (see nbprof.ranks.combine_sparse), still undecoded."""
        views = {part._view for part, _base in parts}
        if len(views) != 1:
            return None
        stores, store_of = [], []
        for part, _base in parts:
            first = len(stores)
            stores += part._stores
            store_of.append(np.full(len(part._rows), first, np.int32) if part._store_of is None
                            else part._store_of + first)
        rows = new_rows[np.concatenate([part._rows + base for part, base in parts])]
        order = np.argsort(rows, kind="stable")
        return cls(rows[order], np.concatenate([part._slots for part, _b in parts])[order],
                   stores, np.concatenate(store_of)[order], views.pop())
