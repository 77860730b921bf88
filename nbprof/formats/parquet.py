"""Trace <-> Arrow and Parquet: ``trace.to_parquet(path)``, ``nbprof.load("x.parquet")``,
``trace.to_arrow()`` / ``trace.to_pandas()``.

One table, CPU events first then GPU intervals (``gpu`` tells them apart), so a folder of per-rank
files is one dataset for DuckDB, Spark, Dask or ``pyarrow.dataset``. Columns that only one kind
has are null on the other kind's rows. ``name`` is dictionary-encoded text (for SQL); ``name_id``
keeps the exact index into the name table. Sparse extras are JSON text (``args``, ``shapes``) and
a list of strings (``stack``); they are decoded when a row is read (:class:`LazyRows`), so loading
ten million events decodes none of them. The name, thread and category tables and the meta go in
the file's key-value metadata, as JSON in which tuples and non-string dict keys are tagged, so the
round trip is exact.

Row groups of ROW_GROUP rows: readers scan them in parallel and skip what a filter excludes.
pyarrow is imported here only, when first used: the model stays numpy-only.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Mapping

import msgspec
import numpy as np
import orjson

from .atomic import write_with
from .chrome.export import json_default
from .chrome.rawfile import TraceFormatError, TraceNotFoundError
from ..model import CounterSeries, Instants, MemoryEvents, Thread, Trace

FORMAT = "nbprof-columnar-1"
ROW_GROUP = 1 << 20
METADATA_KEY = b"nbprof"
MEMORY_KEY = b"nbprof.memory"

_CPU_COLUMNS = {"thread": np.int32, "category": np.uint8, "depth": np.int16, "parent": np.int32,
                "self_ns": np.int64}
_GPU_COLUMNS = {"device": ("gpu_device", np.int16), "stream": ("gpu_stream", np.int32),
                "launch": ("gpu_launch", np.int32), "gpu_kind": ("gpu_kind", np.uint8),
                "call": ("gpu_call", np.int32)}
_LATER_COLUMNS = {"call"}  # absent from files written before them: read as NO_ID


def require(module: str):
    """``module`` imported, or an ImportError that says how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(f"{module} is needed for Parquet files and `nbprof ranks`: "
                          "pip install 'nbprof[columnar]'") from error


class ColumnarFormatError(TraceFormatError):
    """A Parquet file that is not one of nbprof's (or is damaged): nbprof.load's one error
    type, as for a JSON trace."""


# -- JSON that keeps tuples and int keys ------------------------------------------------------------

def tag(value):
    """``value`` as plain JSON types, tuples and dicts with non-string keys tagged."""
    kind = type(value)
    if kind is dict:
        if all(type(key) is str for key in value):
            return {key: tag(item) for key, item in value.items()}
        return {"__items__": [[tag(key), tag(item)] for key, item in value.items()]}
    if kind is list:
        return [tag(item) for item in value]
    if kind is tuple:
        return {"__tuple__": [tag(item) for item in value]}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _untag_hook(obj: dict):
    if len(obj) == 1:
        if "__tuple__" in obj:
            return tuple(obj["__tuple__"])
        if "__items__" in obj:
            return {_hashable(key): item for key, item in obj["__items__"]}
    return obj


def _hashable(key):
    return tuple(key) if isinstance(key, list) else key


def dumps(value) -> str:
    return json.dumps(tag(value), ensure_ascii=False, allow_nan=True)


def loads(text: str):
    return json.loads(text, object_hook=_untag_hook)


class LazyRows(Mapping):
    """row -> value of a sparse extra, decoded from the file's column when a row is asked for.
    ``index`` (where given) is each row's position in ``texts``: a merge of ranks reorders the
    rows without copying the texts."""

    def __init__(self, rows: np.ndarray, texts, decode, index=None):
        self._rows, self._texts, self._decode, self._index = rows, texts, decode, index

    def __len__(self):
        return len(self._rows)

    def __iter__(self):
        return iter(self._rows.tolist())

    def _position(self, row):
        try:
            row = int(row)
        except (TypeError, ValueError):
            return -1
        at = int(np.searchsorted(self._rows, row))
        return at if at < len(self._rows) and self._rows[at] == row else -1

    def __getitem__(self, row):
        at = self._position(row)
        if at < 0:
            raise KeyError(row)
        at = at if self._index is None else int(self._index[at])
        return self._decode(self._texts[at].as_py())

    def __contains__(self, row):
        return self._position(row) >= 0

    def _positions(self) -> np.ndarray:
        return np.arange(len(self._rows)) if self._index is None else self._index

    @classmethod
    def combined(cls, parts: list, new_rows: np.ndarray) -> "LazyRows | None":
        """Several LazyRows as one (see nbprof.ranks.combine_sparse), values still undecoded
        and their texts not copied (a chunked array of the parts' texts); None if they decode
        differently."""
        pa = require("pyarrow")
        decode = parts[0][0]._decode
        if any(part._decode is not decode for part, _base in parts):
            return None
        rows = new_rows[np.concatenate([part._rows + base for part, base in parts])]
        order = np.argsort(rows, kind="stable")
        chunks, index, first = [], [], 0
        for part, _base in parts:
            texts = part._texts
            chunks += texts.chunks if isinstance(texts, pa.ChunkedArray) else [texts]
            index.append(part._positions() + first)
            first += len(texts)
        texts = pa.chunked_array(chunks, type=chunks[0].type) if chunks else parts[0][0]._texts
        return cls(rows[order], texts, decode, np.concatenate(index)[order])


# -- writing -----------------------------------------------------------------------------------------

def _sparse_column(pa, sparse: Mapping, size: int, encode, arrow_type):
    if hasattr(sparse, "encoded_blocks"):  # a loaded trace's args, kept compressed
        return _blockwise_column(pa, sparse, size, encode, arrow_type)
    values = [None] * size
    if sparse:
        rows = np.fromiter(sparse.keys(), np.int64, len(sparse))
        encoded = list(map(encode, sparse.values()))
        if len(rows) == size and (rows == np.arange(size)).all():
            values = encoded
        else:
            for row, value in zip(rows.tolist(), encoded):
                values[row] = value
    return pa.array(values, arrow_type)


def _blockwise_column(pa, sparse, size: int, encode, arrow_type):
    """The column of a mapping that hands out its values encoded a block at a time, in its own
    order: never every value decoded at once, nor a Python object per row (a 200 MB file's
    trace took 3 GB to write the other way). Put in row order by an arrow take."""
    chunks, rows = [], []
    for block_rows, encoded in sparse.encoded_blocks(encode):
        chunks.append(pa.array(encoded, arrow_type))
        rows.append(block_rows)
    if not chunks:
        return pa.nulls(size, arrow_type)
    position = np.full(size, -1, np.int64)  # row -> its text's index among the chunks'
    position[np.concatenate(rows)] = np.arange(sum(map(len, chunks)))
    indices = pa.array(position, mask=position < 0)
    return pa.chunked_array(chunks, arrow_type).take(indices).combine_chunks()


def _args_text(args) -> bytes:
    # Args are JSON values (they come from, and go back to, Chrome trace JSON): orjson writes
    # them in C, ten times faster than the tagged walk shapes and meta get. Copied to their
    # size: each bytes orjson returns keeps a 4 KB allocation (orjson 3.13), so a million rows'
    # args held 4 GB.
    try:
        return bytes(memoryview(orjson.dumps(args, option=orjson.OPT_SERIALIZE_NUMPY)))
    except TypeError:  # an int past 64 bits (JSON allows it, a file may hold it): msgspec's
        return msgspec.json.encode(args, enc_hook=json_default)  # encoder writes it exactly


def to_arrow(trace: Trace):
    """The trace as one pyarrow Table (see the module's docstring for its columns and metadata)."""
    pa = require("pyarrow")

    from ..ranks import event_ranks, gpu_ranks

    n, k = len(trace), len(trace.gpu_start_ns)
    is_gpu = np.r_[np.zeros(n, bool), np.ones(k, bool)]  # also the mask: CPU columns null there
    name_id = np.concatenate([trace.name_id, trace.gpu_name_id])
    columns = {
        "gpu": pa.array(is_gpu),
        "rank": pa.array(np.concatenate([event_ranks(trace), gpu_ranks(trace)]), pa.int32()),
        "start_ns": pa.array(np.concatenate([trace.start_ns, trace.gpu_start_ns])),
        "end_ns": pa.array(np.concatenate([trace.end_ns, trace.gpu_end_ns])),
        "name_id": pa.array(name_id),
        "name": pa.DictionaryArray.from_arrays(pa.array(name_id),
                                               pa.array(trace.names, pa.string())),
    }
    for column, dtype in _CPU_COLUMNS.items():
        values = np.concatenate([getattr(trace, column), np.zeros(k, dtype)])
        columns[column] = pa.array(values, mask=is_gpu)
    for column, (attribute, dtype) in _GPU_COLUMNS.items():
        values = np.concatenate([np.zeros(n, dtype), getattr(trace, attribute)])
        columns[column] = pa.array(values, mask=~is_gpu)
    columns["args"] = pa.concat_arrays([
        _sparse_column(pa, trace.event_args, n, _args_text, pa.binary()),
        _sparse_column(pa, trace.gpu_args, k, _args_text, pa.binary())]).cast(pa.string())
    columns["shapes"] = _sparse_column(pa, trace.shapes, n + k, dumps, pa.string())
    columns["stack"] = _sparse_column(pa, trace.stacks, n + k, list, pa.list_(pa.string()))
    header = {"format": FORMAT, "events": n, "gpu_intervals": k, "names": trace.names,
              "threads": [list(thread) for thread in trace.threads],
              "categories": trace.categories, "meta": trace.meta,
              # Markers and counters are few (a handful per step): the metadata holds them.
              "instants": {"time_ns": trace.instants.time_ns.tolist(), "name": trace.instants.name,
                           "thread": trace.instants.thread.tolist()},
              "counters": [{"name": c.name, "series": c.series, "pid": c.pid,
                            "time_ns": c.time_ns.tolist(), "values": c.values.tolist()}
                           for c in trace.counters]}
    table = pa.table(columns)
    metadata = {METADATA_KEY: dumps(header).encode("utf-8")}
    if len(trace.memory):
        metadata[MEMORY_KEY] = _memory_bytes(trace.memory)
    return table.replace_schema_metadata(metadata)


def _memory_bytes(memory: MemoryEvents) -> bytes:
    """The memory columns as a compressed .npz (base64: metadata values are text to some
    readers). They can be millions of rows, too many for the JSON header, and are not rows of
    the events table (a dataset of ranks would count them as events)."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **{name: getattr(memory, name)
                                   for name in MemoryEvents.__dataclass_fields__})
    return base64.b64encode(buffer.getvalue())


def _memory(path, metadata: dict) -> MemoryEvents:
    packed = metadata.get(MEMORY_KEY)
    if packed is None:
        return MemoryEvents.empty()
    try:
        with np.load(io.BytesIO(base64.b64decode(packed, validate=True)),
                     allow_pickle=False) as columns:
            # build casts each column to its type; the rows are already in time order
            return MemoryEvents.build(**{name: columns[name]
                                         for name in MemoryEvents.__dataclass_fields__})
    except (ValueError, KeyError, OSError, TypeError) as error:
        raise ColumnarFormatError(f"{path}: its memory events are damaged ({error}); write "
                                  "the file again with trace.to_parquet(path)") from error


def write_parquet(trace: Trace, path, compression: str = "zstd") -> str:
    """``trace`` as one Parquet file at ``path``, written atomically."""
    pq = require("pyarrow.parquet")

    table = to_arrow(trace)
    write_with(path, lambda temporary: pq.write_table(
        table, temporary, row_group_size=ROW_GROUP, compression=compression,
        use_dictionary=["name", "rank", "gpu", "thread", "category", "device", "stream",
                        "gpu_kind"]), "the Parquet file")
    return str(path)


# -- reading -----------------------------------------------------------------------------------------

def read_header(path) -> dict:
    """The nbprof block of a Parquet file's metadata; ColumnarFormatError if it has none."""
    pq = require("pyarrow.parquet")

    try:
        metadata = pq.read_schema(path).metadata or {}
    except FileNotFoundError:
        raise TraceNotFoundError(f"{path}: no such file; check the path") from None
    except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
        raise ColumnarFormatError(f"{path}: not a readable Parquet file ({error})") from error
    if METADATA_KEY not in metadata:
        raise ColumnarFormatError(f"{path}: a Parquet file, but not one nbprof wrote (no "
                                  "'nbprof' metadata); write it with trace.to_parquet(path)")
    try:
        header = loads(metadata[METADATA_KEY].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:  # JSONDecodeError
        raise ColumnarFormatError(f"{path}: its nbprof metadata is not JSON ({error}); the "
                                  f"file is damaged: write it again with trace.to_parquet"
                                  ) from None
    if not isinstance(header, dict):
        raise ColumnarFormatError(f"{path}: its nbprof metadata is damaged (not an object); "
                                  f"write it again with trace.to_parquet")
    if header.get("format") != FORMAT:
        raise ColumnarFormatError(f"{path}: nbprof columnar format "
                                  f"{str(header.get('format'))[:40]!r}, this nbprof reads "
                                  f"{FORMAT!r}")
    problem = _header_problem(header)
    if problem:
        raise ColumnarFormatError(f"{path}: its nbprof metadata is damaged ({problem}); write "
                                  f"it again with trace.to_parquet")
    return header


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(values) -> bool:
    return isinstance(values, list) and all(map(_is_int, values))


def _strings(values) -> bool:
    return isinstance(values, list) and all(isinstance(value, str) for value in values)


def _header_problem(header: dict) -> str | None:
    """What is wrong with a file's nbprof metadata, or None: every field read_parquet uses is
    checked for its type, as the JSON loader checks nbprof's block (the columns' indices into
    these tables are checked once the columns are read)."""
    for key in ("events", "gpu_intervals"):
        if not (_is_int(header.get(key)) and header[key] >= 0):
            return f"{key!r} is not a count"
    if not _strings(header.get("names")):
        return "'names' is not a list of strings"
    threads = header.get("threads")
    if not (isinstance(threads, list) and all(
            isinstance(t, (list, tuple)) and len(t) == 3 and _is_int(t[0]) and _is_int(t[1])
            and isinstance(t[2], str) for t in threads)):
        return "'threads' is not a list of [pid, tid, name]"
    categories = header.get("categories")
    if not (isinstance(categories, list) and len(categories) <= 256 and all(
            category is None or isinstance(category, str) for category in categories)):
        return "'categories' is not a list of at most 256 strings (or nulls: no category)"
    meta = header.get("meta")
    if not isinstance(meta, dict):
        return "'meta' is not an object"
    if not (isinstance(meta.get("notes", []), list) and
            isinstance(meta.get("device_names", {}), dict)):
        return "'meta' has notes that are not a list, or device names that are not an object"
    instants = header.get("instants")
    if instants and not (isinstance(instants, dict) and _ints(instants.get("time_ns"))
                         and _strings(instants.get("name")) and _ints(instants.get("thread"))
                         and len(instants["time_ns"]) == len(instants["name"])
                         == len(instants["thread"])):
        return "'instants' is not three lists of one length (time_ns, name, thread)"
    counters = header.get("counters", [])
    if not (isinstance(counters, list) and all(
            isinstance(c, dict) and isinstance(c.get("name"), str)
            and isinstance(c.get("series"), str) and _is_int(c.get("pid"))
            and _ints(c.get("time_ns")) and isinstance(c.get("values"), list)
            and all(isinstance(v, (int, float)) for v in c["values"])
            and len(c["time_ns"]) == len(c["values"]) for c in counters)):
        return "'counters' is not a list of series (name, series, pid, time_ns, values)"
    return None


def _index_problem(header: dict, cpu: dict, gpu: dict, name_id: np.ndarray,
                   instants) -> str | None:
    """Which column points outside the metadata's tables (a shortened name table), or None."""
    n = header["events"]
    for what, values, low, high in (
            ("a name index", name_id, 0, len(header["names"])),
            ("a thread index", cpu["thread"], 0, len(header["threads"])),
            ("a category index", cpu["category"], 0, len(header["categories"])),
            ("a parent", cpu["parent"], -1, n), ("a depth", cpu["depth"], 0, n),
            ("a kernel's launching event", gpu["gpu_launch"], -1, n),
            ("a kernel's runtime call", gpu.get("gpu_call", np.empty(0, np.int32)), -1, n),
            ("an instant's thread", instants.thread, -1, len(header["threads"]))):
        if len(values) and (int(values.min()) < low or int(values.max()) >= high):
            return f"{what} lies outside its table (or is not set)"
    return None


def _numpy(column, lo: int, hi: int, dtype) -> np.ndarray:
    return np.ascontiguousarray(column.slice(lo, hi - lo).to_numpy(), dtype)


def _sparse(column, lo: int, hi: int, decode) -> LazyRows:
    part = column.slice(lo, hi - lo).combine_chunks()
    valid = np.asarray(part.is_valid().to_numpy(zero_copy_only=False), bool)
    rows = np.flatnonzero(valid)
    return LazyRows(rows, part.filter(part.is_valid()) if len(rows) < len(part) else part, decode)


def read_parquet(path) -> Trace:
    """The Trace that ``write_parquet`` wrote, exactly."""
    pq = require("pyarrow.parquet")

    header = read_header(path)
    n, k = int(header["events"]), int(header["gpu_intervals"])
    try:
        present = set(pq.read_schema(path).names)
        gpu_columns = {name: column for name, column in _GPU_COLUMNS.items()
                       if name in present or name not in _LATER_COLUMNS}
        table = pq.read_table(path, columns=["start_ns", "end_ns", "name_id", *_CPU_COLUMNS,
                                             *gpu_columns, "args", "shapes", "stack"])
        if table.num_rows != n + k:
            raise ColumnarFormatError(f"{path}: {table.num_rows} rows, the metadata says "
                                      f"{n + k}; the file is damaged: write it again")
        col = table.column
        cpu = {name: _numpy(col(name), 0, n, dtype) for name, dtype in _CPU_COLUMNS.items()}
        gpu = {attribute: _numpy(col(name), n, n + k, dtype)
               for name, (attribute, dtype) in gpu_columns.items()}
        name_id = _numpy(col("name_id"), 0, n + k, np.int32)
    except (OSError, ValueError, KeyError, TypeError) as error:  # ArrowInvalid: a ValueError
        if isinstance(error, ColumnarFormatError):
            raise
        raise ColumnarFormatError(f"{path}: its columns cannot be read ({error}); the file is "
                                  f"damaged: write it again with trace.to_parquet") from None
    instants = _instants(header.get("instants"))
    problem = _index_problem(header, cpu, gpu, name_id, instants)
    if problem:
        raise ColumnarFormatError(f"{path}: {problem}; the file is damaged: write it again "
                                  f"with trace.to_parquet")
    meta = header["meta"]
    return Trace(
        start_ns=_numpy(col("start_ns"), 0, n, np.int64),
        end_ns=_numpy(col("end_ns"), 0, n, np.int64),
        name_id=name_id[:n], **cpu,
        gpu_start_ns=_numpy(col("start_ns"), n, n + k, np.int64),
        gpu_end_ns=_numpy(col("end_ns"), n, n + k, np.int64),
        gpu_name_id=name_id[n:], **gpu,
        names=header["names"], threads=[Thread(*thread) for thread in header["threads"]],
        categories=header["categories"], meta=meta,
        # msgspec, not orjson: orjson reads an int past 64 bits as a float
        event_args=_sparse(col("args"), 0, n, msgspec.json.decode),
        gpu_args=_sparse(col("args"), n, n + k, msgspec.json.decode),
        shapes=_sparse(col("shapes"), 0, n, loads),
        stacks=_sparse(col("stack"), 0, n, tuple),
        instants=instants,
        memory=_memory(path, pq.read_schema(path).metadata or {}),
        counters=[CounterSeries(c["name"], c["series"], c["pid"], np.asarray(c["time_ns"], np.int64),
                                np.asarray(c["values"], np.float64))
                  for c in header.get("counters", ())])


def _instants(block) -> Instants:
    if not block:
        return Instants.empty()
    return Instants(np.asarray(block["time_ns"], np.int64), list(block["name"]),
                    np.asarray(block["thread"], np.int32))
