"""Trace -> Chrome trace JSON (chrome://tracing, Perfetto), valid by construction.

- ``M`` events name and order every process and thread (process_name, process_sort_index,
  thread_name, thread_sort_index).
- One ``X`` per CPU event on its thread's lane; its args carry the event's sparse args, its
  shapes (``"Input Dims"``, Kineto's key) and its stack (``"Call stack"``).
- GPU intervals go on one "CUDA" process, one tid per (device, stream); their args always say
  ``device`` and ``stream`` (as Kineto's do) plus whatever the trace knows (grid, block, ...);
  where the args already hold a device or stream (a loaded Kineto trace), theirs is kept.
- A flow per launch: ``s`` at the launching event's start on its lane, ``f`` with
  ``"bp": "e"`` at the GPU slice's start, sharing one id (Kineto's ``ac2g`` category).
- Slices that would overlap without nesting on one lane go to an extra lane (see lanes).
- ``ts``/``dur`` are µs from the trace's origin as floats (ns / 1000: exact to the ns, since a
  float64 holds 3 decimals of µs up to ~100 days); ``baseTimeNanoseconds`` is the origin.
- JSON is written by orjson over dicts and lists, never by string formatting (rule 5).
- A top-level ``"nbprof"`` block keeps what a Chrome trace cannot say (the meta, the thread and
  category tables, launch ids, which tids are extra lanes) so that :func:`nbprof.load` of an
  export gives back the same Trace.
"""

from __future__ import annotations

import pathlib
import zlib

import numpy as np
import orjson

from ..atomic import write_file
from .lanes import assign_lanes
from .memory_events import counter_name, memory_counters, memory_instants
from .read import paused_gc
from ...model import GPU_KINDS, KIND_OP, Trace

FORMAT_VERSION = 1
# Chrome category of each GPU kind: Kineto's names where Kineto has one.
GPU_KIND_CATEGORY = {"op": "gpu_op", "kernel": "kernel", "memcpy": "gpu_memcpy",
                     "memset": "gpu_memset", "sync": "cuda_sync", "other": "gpu_other"}
FLOW_CATEGORY = "ac2g"
SHAPES_KEY = "Input Dims"
STACK_KEY = "Call stack"
# gzip level 6: within a few % of level 9's size here at a fraction of its time.
GZIP_LEVEL = 6
CHUNK_ROWS = 1 << 16  # events serialised at a time
_JSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def export_chrome_trace(trace: Trace, path) -> str:
    """Write ``trace`` as a Chrome trace to ``path`` (``.json``, or gzipped ``.json.gz``);
    returns the path written. The trace is not modified."""
    target = pathlib.Path(path)
    suffixes = "".join(target.suffixes[-2:]).lower()
    if not (suffixes.endswith(".json") or suffixes.endswith(".json.gz")):
        raise ValueError(f"cannot tell the format of {str(path)!r}: name the file *.json or "
                         f"*.json.gz")
    data = chrome_trace_bytes(trace, gzip=suffixes.endswith(".gz"))
    # A failure (full disk, Ctrl-C) leaves any earlier file at that path as it was.
    write_file(target, data, "the Chrome trace")
    return str(target)


def chrome_trace_bytes(trace: Trace, gzip: bool = False) -> bytes:
    """The Chrome trace as bytes (gzipped when ``gzip``), for a download without a file."""
    with paused_gc():
        pieces = _json_pieces(trace)
        if not gzip:
            return b"".join(pieces)
        # wbits 31: a gzip container; zlib writes mtime 0, so one trace gives the same bytes.
        compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
        packed = [compressor.compress(piece) for piece in pieces]
        packed.append(compressor.flush())
        return b"".join(packed)


def chrome_trace_dict(trace: Trace) -> dict:
    """The Chrome trace as a dict (what :func:`chrome_trace_bytes` serialises)."""
    top, chunks = _top_and_event_chunks(trace)
    return {**top, "traceEvents": [event for chunk in chunks for event in chunk]}


def _json_pieces(trace: Trace):
    """The JSON text in pieces: the top-level fields, then the events CHUNK_ROWS at a time.

    Every piece is orjson's output (so every string is escaped by orjson); only the brackets
    and commas between them are put in here. Serialising in chunks keeps the event dicts of
    one chunk alive at a time: a million events peaked at +580 MB as one list."""
    top, chunks = _top_and_event_chunks(trace)
    head = _dumps(top)
    yield head[:-1] + b',"traceEvents":['  # top is never empty: it has schemaVersion
    separator = b""
    for chunk in chunks:
        if chunk:
            yield separator + _dumps(chunk)[1:-1]
            separator = b","
    yield b"]}"


def _dumps(value) -> bytes:
    try:
        return orjson.dumps(value, option=_JSON_OPTIONS, default=json_default)
    except TypeError as error:
        if "64-bit" not in str(error):
            raise
        # An int past 64 bits in args a file held (JSON allows it, orjson writes none): as text.
        return orjson.dumps(_without_big_ints(value), option=_JSON_OPTIONS, default=json_default)


def _without_big_ints(value):
    if isinstance(value, int) and not -(1 << 63) <= value < 1 << 64:
        return str(value)
    if isinstance(value, dict):
        return {key: _without_big_ints(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_big_ints(item) for item in value]
    return value


def json_default(value):
    # Anything orjson cannot serialise natively (a torch.Size in shapes, a set, ...).
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def _top_and_event_chunks(trace: Trace):
    cpu = _cpu_lanes(trace)
    gpu = _gpu_lanes(trace, gpu_pid=cpu.next_pid)
    meta = trace.meta
    block = {
        "version": FORMAT_VERSION,
        "meta": meta,
        "threads": [list(thread) for thread in trace.threads],
        "categories": list(trace.categories),
        "extra_tids": cpu.extra_tids,
        "gpu_pid": gpu.pid,
        "gpu_launch": trace.gpu_launch,
    }
    if len(trace.memory):
        block["memory_counters"] = [counter_name(device, trace.meta)
                                    for device in trace.memory.devices()]
    top = {"schemaVersion": 1, "displayTimeUnit": "ns",
           "baseTimeNanoseconds": int(meta.get("base_time_ns", 0)), "nbprof": block}
    device_names = meta.get("device_names") or {}
    if device_names:
        top["deviceProperties"] = [{"id": int(device), "name": name}
                                   for device, name in device_names.items()]
    return top, _event_chunks(trace, cpu, gpu)


def _event_chunks(trace: Trace, cpu, gpu):
    yield cpu.metadata + gpu.metadata
    cpu_args = _SparseArgs(trace)
    for start in range(0, len(trace), CHUNK_ROWS):
        yield _cpu_slices(trace, cpu, cpu_args, start, min(start + CHUNK_ROWS, len(trace)))
    gpu_count = len(trace.gpu_start_ns)
    for start in range(0, gpu_count, CHUNK_ROWS):
        yield _gpu_slices(trace, gpu, start, min(start + CHUNK_ROWS, gpu_count))
    launched = np.flatnonzero(trace.gpu_launch >= 0)
    for start in range(0, len(launched), CHUNK_ROWS // 2):
        yield _flows(trace, cpu, gpu, launched[start:start + CHUNK_ROWS // 2])
    yield _instants(trace)
    for series in trace.counters:
        yield _counter_samples(series)
    level = trace.memory.levels()
    for start in range(0, len(trace.memory), CHUNK_ROWS):
        rows = slice(start, start + CHUNK_ROWS)
        yield memory_instants(trace, rows, _micros)
        yield memory_counters(trace, rows, level, _micros)


def _instants(trace: Trace) -> list[dict]:
    """An "i" event per instant: on its thread's own lane, or trace-wide ("s": "g")."""
    instants = trace.instants
    pid = [t.pid for t in trace.threads]
    tid = [t.tid for t in trace.threads]
    first_pid = pid[0] if pid else 0
    return [{"ph": "i", "name": name, "ts": ts, "s": "t", "pid": pid[thread], "tid": tid[thread]}
            if thread >= 0 else
            {"ph": "i", "name": name, "ts": ts, "s": "g", "pid": first_pid, "tid": 0}
            for name, ts, thread in zip(instants.name, _micros(instants.time_ns),
                                        instants.thread.tolist())]


def _counter_samples(series) -> list[dict]:
    """A "C" event per sample of one counter series (Chrome merges one pid and name's series
    into one track)."""
    return [{"ph": "C", "name": series.name, "pid": series.pid, "tid": 0, "ts": ts,
             "args": {series.series: value}}
            for ts, value in zip(_micros(series.time_ns), series.values.tolist())]


class _Lanes:
    """Where each slice goes: pid and tid per row, plus the M events naming those lanes."""

    def __init__(self, pid, tid, metadata, extra_tids=(), next_pid=1):
        self.pid = pid  # per row (array) or one pid for all rows
        self.tid = tid
        self.metadata = metadata
        self.extra_tids = list(extra_tids)
        self.next_pid = next_pid


def _name_lane(pid, tid, name, sort_index) -> list[dict]:
    return [{"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}},
            {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
             "args": {"sort_index": sort_index}}]


def _name_process(pid, name, sort_index) -> list[dict]:
    return [{"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}},
            {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
             "args": {"sort_index": sort_index}}]


def _cpu_lanes(trace: Trace) -> _Lanes:
    threads = trace.threads
    thread_pid = np.array([t.pid for t in threads] or [0], np.int64)
    thread_tid = np.array([t.tid for t in threads] or [0], np.int64)
    lane = assign_lanes(trace.start_ns, trace.end_ns, trace.thread)
    lanes_per_thread = int(lane.max()) + 1 if len(lane) else 1
    # tid of each (thread, lane): lane 0 is the thread's own tid; extra lanes get unused tids.
    lane_tid = np.repeat(thread_tid, lanes_per_thread).reshape(-1, lanes_per_thread)
    process_names = trace.meta.get("process_names") or {}
    metadata, extra_tids = [], []
    pids = list(dict.fromkeys(t.pid for t in threads))
    for order, pid in enumerate(pids):
        name = process_names.get(str(pid)) or process_names.get(pid) or f"CPU (pid {pid})"
        metadata += _name_process(pid, name, order)  # CPU first, then CUDA
    next_free_tid = {pid: int(thread_tid[thread_pid == pid].max()) + 1 for pid in pids}
    used = np.unique(trace.thread.astype(np.int64) * lanes_per_thread + lane)
    extra = {int(key) for key in used if key % lanes_per_thread}
    for index, thread in enumerate(threads):
        metadata += _name_lane(thread.pid, thread.tid, thread.name, index * lanes_per_thread)
        for extra_lane in range(1, lanes_per_thread):
            if index * lanes_per_thread + extra_lane not in extra:
                continue
            tid = next_free_tid[thread.pid]
            next_free_tid[thread.pid] += 1
            lane_tid[index, extra_lane] = tid
            extra_tids.append([thread.pid, tid, index])
            metadata += _name_lane(thread.pid, tid, f"{thread.name} (overlapping {extra_lane})",
                                   index * lanes_per_thread + extra_lane)
    return _Lanes(pid=thread_pid[trace.thread] if threads else np.zeros(0, np.int64),
                  tid=lane_tid[trace.thread, lane] if threads else np.zeros(0, np.int64),
                  metadata=metadata, extra_tids=extra_tids, next_pid=max(pids, default=0) + 1)


def _gpu_lanes(trace: Trace, gpu_pid: int) -> _Lanes:
    device = trace.gpu_device.astype(np.int64)
    stream = trace.gpu_stream.astype(np.int64)
    streams, group = np.unique(np.stack([device, stream]), axis=1, return_inverse=True)
    group = group.reshape(-1)
    lane = assign_lanes(trace.gpu_start_ns, trace.gpu_end_ns, group)
    lanes_per_stream = int(lane.max()) + 1 if len(lane) else 1
    # Sort index 1 << 24: after every CPU process (whose indices count from 0).
    metadata = _name_process(gpu_pid, "CUDA", 1 << 24) if len(device) else []
    # tids 1, 2, ...: one per (device, stream, lane) in use, ordered by device then stream.
    used = np.unique(group.astype(np.int64) * lanes_per_stream + lane)
    tid_of = np.zeros(streams.shape[1] * lanes_per_stream, np.int64)
    # A stream of per-op CUDA-event intervals only is no real stream: the legacy records name none.
    op_events_only = np.ones(streams.shape[1], bool)
    np.logical_and.at(op_events_only, group, trace.gpu_kind == KIND_OP)
    for tid, key in enumerate(used.tolist(), start=1):
        stream_index, extra_lane = divmod(key, lanes_per_stream)
        tid_of[key] = tid
        name = (f"cuda:{streams[0, stream_index]} (op events)" if op_events_only[stream_index] else
                f"cuda:{streams[0, stream_index]} stream {streams[1, stream_index]}")
        if extra_lane:
            name += f" (overlapping {extra_lane})"
        metadata += _name_lane(gpu_pid, tid, name, tid)
    return _Lanes(pid=gpu_pid, tid=tid_of[group * lanes_per_stream + lane], metadata=metadata)


def _micros(ns: np.ndarray) -> list[float]:
    # ns / 1000 is the float nearest to the decimal µs value: orjson writes it with at most
    # 3 decimals and reading it back (x 1000, rounded) gives the same ns.
    return (ns / 1000.0).tolist()


class _SparseArgs:
    """What goes in a CPU slice's args: the sparse event_args, shapes and stacks, found for a
    range of rows by binary search over their sorted row numbers."""

    def __init__(self, trace: Trace):
        self.sources = [(None, trace.event_args), (SHAPES_KEY, trace.shapes),
                        (STACK_KEY, trace.stacks)]
        self.rows = [np.array(sorted(sparse), np.int64) for _key, sparse in self.sources]

    def fill(self, slices: list[dict], start: int, stop: int) -> None:
        for (key, sparse), rows in zip(self.sources, self.rows):
            low, high = np.searchsorted(rows, [start, stop])
            for row in rows[low:high].tolist():
                value = sparse[row]
                if key is None:
                    if value:
                        slices[row - start]["args"] = value  # only read by orjson: no copy
                elif value is not None:  # a new dict: the trace's own args stay as they are
                    slice_ = slices[row - start]
                    slice_["args"] = {**slice_.get("args", {}), key: value}


def _cpu_slices(trace: Trace, lanes: _Lanes, sparse: _SparseArgs, start: int,
                stop: int) -> list[dict]:
    rows = slice(start, stop)
    names = np.array(trace.names, dtype=object)[trace.name_id[rows]].tolist()
    cats = np.array(trace.categories, dtype=object)[trace.category[rows]].tolist()
    slices = [{"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
              for cat, name, pid, tid, ts, dur in zip(
                  cats, names, lanes.pid[rows].tolist(), lanes.tid[rows].tolist(),
                  _micros(trace.start_ns[rows]),
                  _micros(trace.end_ns[rows] - trace.start_ns[rows]))]
    sparse.fill(slices, start, stop)
    return slices


def _gpu_slices(trace: Trace, lanes: _Lanes, start: int, stop: int) -> list[dict]:
    rows = slice(start, stop)
    names = np.array(trace.names, dtype=object)[trace.gpu_name_id[rows]].tolist()
    kind_category = np.array([GPU_KIND_CATEGORY[kind] for kind in GPU_KINDS], dtype=object)
    cats = kind_category[trace.gpu_kind[rows]].tolist()
    gpu_args = trace.gpu_args
    return [{"ph": "X", "cat": cat, "name": name, "pid": lanes.pid, "tid": tid, "ts": ts,
             "dur": dur, "args": {"device": device, "stream": stream, **gpu_args.get(row, {})}}
            for row, cat, name, tid, ts, dur, device, stream in zip(
                range(start, stop), cats, names, lanes.tid[rows].tolist(),
                _micros(trace.gpu_start_ns[rows]),
                _micros(trace.gpu_end_ns[rows] - trace.gpu_start_ns[rows]),
                trace.gpu_device[rows].tolist(), trace.gpu_stream[rows].tolist())]


def _flows(trace: Trace, cpu: _Lanes, gpu: _Lanes, rows: np.ndarray) -> list[dict]:
    """The s and f events of the launches of GPU ``rows`` (the flow id is the GPU row)."""
    launch = trace.gpu_launch[rows]
    flows = []
    for flow_id, pid, tid, ts, gpu_tid, gpu_ts in zip(
            rows.tolist(), cpu.pid[launch].tolist(), cpu.tid[launch].tolist(),
            _micros(trace.start_ns[launch]), gpu.tid[rows].tolist(),
            _micros(trace.gpu_start_ns[rows])):
        flows.append({"ph": "s", "id": flow_id, "pid": pid, "tid": tid, "ts": ts,
                      "cat": FLOW_CATEGORY, "name": FLOW_CATEGORY})
        flows.append({"ph": "f", "id": flow_id, "pid": gpu.pid, "tid": gpu_tid, "ts": gpu_ts,
                      "cat": FLOW_CATEGORY, "name": FLOW_CATEGORY, "bp": "e"})
    return flows
