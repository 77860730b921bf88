"""Many ranks of one distributed job: merge their traces into one, align their clocks, summarise.

numpy and the standard library only (the model's rule): loading the files is the caller's job
(``nbprof.load`` hands this module Traces), the DuckDB summary over Parquet files lives in
:mod:`nbprof.rank_sql`.

How a merged Trace says which rank owns what (plain JSON-able meta, so exports keep it):
- ``meta["thread_rank"]``: the rank of each entry of ``trace.threads``;
- ``meta["gpu_devices"]``: ``[merged device, rank, device in its own file]`` per GPU device. Every
  rank's GPU 0 is a GPU 0, so the merged trace numbers devices afresh (what ``gpu_device`` holds)
  and this table maps them back;
- ``meta["ranks"]``: per rank its source file, host, and the clock offsets applied.

Clocks: each file's times are ns from its own origin, ``meta["base_time_ns"]`` on its host's wall
clock. Shifting by the bases puts every rank on one wall clock; hosts' clocks disagree by up to
milliseconds, so the shift is refined by the collectives: a collective (all_reduce, ...) ends on
every rank at about the same moment, since none can leave before the last arrives. The k-th
collective of a name on one rank is matched with the k-th of that name on the reference rank
(the lowest), and the median difference of their ends is added to the shift.
"""

from __future__ import annotations

import os
import pathlib
import re
import socket
from dataclasses import dataclass, field

import numpy as np

from .analysis import KERNEL_WORK
from .events import NO_ID, Trace

# Names of collective ops and kernels: torch's c10d ops, NCCL's and gloo's record_function names,
# NCCL's kernels. The DuckDB summary uses the same pattern (RE2 reads it the same way).
COLLECTIVE_PATTERN = (r"nccl|gloo|c10d::|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all"
                      r"|broadcast|barrier")
_COLLECTIVE = re.compile(COLLECTIVE_PATTERN, re.IGNORECASE)
_RANK_IN_NAME = re.compile(r"rank[_\-.]?(\d+)", re.IGNORECASE)
STEP_PATTERN = r"^ProfilerStep#\d+$"
_STEP = re.compile(STEP_PATTERN)
TRACE_SUFFIXES = (".json", ".json.gz", ".parquet")
# How closely the ends of one collective agree across ranks once aligned: the width of the band
# of end differences that alignment looks for (NCCL ranks leave a collective within microseconds).
ALIGN_WINDOW_NS = 1_000_000


# -- recording side -------------------------------------------------------------------------------

def distributed_meta(environ=None) -> dict:
    """rank, world_size, local_rank and host of this process when it is one rank of a job
    (torch.distributed initialised, or torchrun's RANK / WORLD_SIZE / LOCAL_RANK set); {} else."""
    environ = os.environ if environ is None else environ
    meta = {}
    for key, name in (("rank", "RANK"), ("world_size", "WORLD_SIZE"), ("local_rank", "LOCAL_RANK")):
        if str(environ.get(name, "")).isdigit():
            meta[key] = int(environ[name])
    try:  # torch.distributed says best once initialised; importing it here costs nothing more
        import sys

        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            meta["rank"], meta["world_size"] = dist.get_rank(), dist.get_world_size()
            meta["dist_backend"] = str(dist.get_backend())
    except Exception:  # noqa: BLE001  (a broken process group must not stop the profile)
        pass
    if "rank" in meta:
        meta["host"] = socket.gethostname()
    return meta


def expand_rank(path: str, meta: dict) -> str:
    """``out/step.rank{rank}.json.gz`` with this process's rank (0 outside a job)."""
    return str(path).replace("{rank}", str(meta.get("rank", 0)))


# -- which files, which ranks -----------------------------------------------------------------------

def trace_paths(sources) -> list[pathlib.Path]:
    """The trace files named by a path, a folder (its .json/.json.gz/.parquet files), a glob, or a
    list of those, in rank-file order (sorted)."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    paths: list[pathlib.Path] = []
    for source in sources:
        source = pathlib.Path(source)
        if source.is_dir():
            found = sorted(p for p in source.iterdir() if p.name.endswith(TRACE_SUFFIXES))
            if not found:
                raise FileNotFoundError(f"{source}: no .json, .json.gz or .parquet trace in it")
            paths += found
        elif any(c in str(source) for c in "*?["):
            found = sorted(pathlib.Path(source.anchor or ".").glob(
                str(source.relative_to(source.anchor)) if source.anchor else str(source)))
            if not found:
                raise FileNotFoundError(f"{source}: the pattern matches no file")
            paths += found
        else:
            paths.append(source)
    return paths


def is_many(source) -> bool:
    """Whether ``nbprof.load(source)`` means several ranks (a list, a folder or a glob)."""
    if isinstance(source, (list, tuple)):
        return True
    text = str(source)
    if pathlib.Path(text).is_file():  # a file whose name has a "[" is still one file
        return False
    return pathlib.Path(text).is_dir() or any(c in text for c in "*?[")


def rank_of(trace: Trace, path, position: int) -> int:
    """A file's rank: its own meta (Kineto's distributedInfo, nbprof's recording), else a number
    after "rank" in its name, else its position among the files."""
    rank = meta_rank(trace)
    if rank >= 0:
        return rank
    found = _RANK_IN_NAME.search(pathlib.Path(str(path)).name)
    return int(found.group(1)) if found else position


# -- per-row ranks of a trace -----------------------------------------------------------------------

def meta_rank(trace: Trace) -> int:
    """The trace's own rank from its meta, or -1: only a whole number counts (a file may say
    anything there)."""
    rank = trace.meta.get("rank")
    if isinstance(rank, (int, np.integer)) and not isinstance(rank, bool) and 0 <= rank < 1 << 31:
        return int(rank)
    return -1


def thread_ranks(trace: Trace) -> np.ndarray:
    """The rank of each entry of ``trace.threads`` (int32; -1 where the trace names none)."""
    listed = trace.meta.get("thread_rank")
    if isinstance(listed, list) and len(listed) == len(trace.threads):
        return np.array(listed, np.int32)
    return np.full(len(trace.threads), meta_rank(trace), np.int32)


def gpu_ranks(trace: Trace) -> np.ndarray:
    """The rank of each GPU interval (int32; -1 where the trace names none)."""
    table = trace.meta.get("gpu_devices")
    if not table:
        return np.full(len(trace.gpu_start_ns), meta_rank(trace), np.int32)
    size = max(device for device, _rank, _own in table) + 1
    rank_of_device = np.full(max(size, int(trace.gpu_device.max(initial=0)) + 1), -1, np.int32)
    for device, rank, _own in table:
        rank_of_device[device] = rank
    return rank_of_device[trace.gpu_device]


def own_devices(trace: Trace) -> dict:
    """merged device -> (rank, the device's number in its own file); {} for a single trace."""
    return {device: (rank, own) for device, rank, own in trace.meta.get("gpu_devices") or []}


def event_ranks(trace: Trace) -> np.ndarray:
    return thread_ranks(trace)[trace.thread] if len(trace) else np.zeros(0, np.int32)


# -- clocks ------------------------------------------------------------------------------------------

def collective_ends(trace: Trace) -> dict:
    """name -> ends (ns, in time order) of the trace's collectives: its GPU collective kernels
    when it has any (their ends are where the ranks meet), else its CPU collective ops."""
    collective_names = [i for i, name in enumerate(trace.names) if _COLLECTIVE.search(name)]
    out = {}
    for name_column, end_column in ((trace.gpu_name_id, trace.gpu_end_ns),
                                    (trace.name_id, trace.end_ns)):
        rows = np.flatnonzero(np.isin(name_column, collective_names))
        if not len(rows):
            continue
        for name_id in np.unique(name_column[rows]).tolist():
            ends = np.sort(end_column[rows[name_column[rows] == name_id]])
            out[trace.names[name_id]] = ends
        return out
    return out


def collective_offset(reference: dict, other: dict, other_shift_ns: int,
                      window_ns: int = ALIGN_WINDOW_NS) -> tuple[int, int]:
    """(ns to add to ``other``'s shift so its collectives end with ``reference``'s, how many
    collectives that rests on). ``reference`` is already on the merged clock; ``other`` gets
    ``other_shift_ns`` first.

    Collectives are matched by name and order. A rank's profile may have missed some (sampled
    traces, a window that started late), which puts later pairs out of step, so the offset is not
    the plain median of the differences but the median of the densest cluster of them: the
    ``window_ns`` wide band that holds the most differences."""
    differences = []
    for name, ends in other.items():
        if name in reference:
            count = min(len(ends), len(reference[name]))
            differences.append(reference[name][:count] - (ends[:count] + other_shift_ns))
    if not differences:
        return 0, 0
    differences = np.sort(np.concatenate(differences))
    in_band = np.searchsorted(differences, differences + window_ns, side="right") - \
        np.arange(len(differences))
    first = int(np.argmax(in_band))
    cluster = differences[first:first + int(in_band[first])]
    return int(np.median(cluster)), len(cluster)


def clock_shifts(traces: list[Trace], align: bool = True) -> tuple[int, list[dict]]:
    """The merged origin (the earliest base) and, per trace, the shift applied to its times:
    ``base_offset_ns`` (its base minus the origin) plus ``collective_offset_ns``."""
    bases = [int(t.meta.get("base_time_ns") or 0) for t in traces]
    origin = min(bases) if bases else 0
    reference = None
    shifts = []
    for trace, base in zip(traces, bases):
        base_offset = base - origin
        ends = collective_ends(trace) if align else {}
        if reference is None:
            refined, matched = 0, 0
            reference = {name: e + base_offset for name, e in ends.items()}
        else:
            refined, matched = collective_offset(reference, ends, base_offset)
        shifts.append({"base_offset_ns": base_offset, "collective_offset_ns": refined,
                       "collectives_matched": matched, "offset_ns": base_offset + refined})
    return origin, shifts


# -- merging -----------------------------------------------------------------------------------------

def merge(traces: list[Trace], ranks: list[int], sources=None, align: bool = True) -> Trace:
    """One Trace of the ranks' traces (``ranks[i]`` is ``traces[i]``'s rank): lanes by rank,
    times on one clock (see the module's docstring), names, threads, categories and devices
    renumbered into shared tables, every id column and sparse extra remapped."""
    if len(set(ranks)) != len(ranks):
        seen = {}
        for rank, source in zip(ranks, sources or ranks):
            if rank in seen:
                raise ValueError(f"two files say they are rank {rank}: {seen[rank]} and {source}; "
                                 "give files of different ranks (or rename them rankN)")
            seen[rank] = source
    order = sorted(range(len(traces)), key=lambda i: ranks[i])
    traces = [traces[i] for i in order]
    ranks = [ranks[i] for i in order]
    sources = [str(sources[i]) for i in order] if sources else [None] * len(traces)
    origin, shifts = clock_shifts(traces, align)

    names, name_index = [], {}
    category_index = {}
    threads, thread_rank, gpu_devices, device_names = [], [], [], {}
    columns = {key: [] for key in ("start", "end", "thread", "name", "cat", "depth", "parent",
                                   "self", "gstart", "gend", "gname", "gdev", "gstream", "glaunch",
                                   "gkind")}
    sparse = {"event_args": [], "shapes": [], "stacks": [], "gpu_args": []}  # (rows, row base)
    notes, rank_meta, segments = [], [], []
    event_base = gpu_base = 0
    for trace, rank, source, shift in zip(traces, ranks, sources, shifts):
        name_map = np.array([name_index.setdefault(n, len(name_index)) for n in trace.names]
                            or [0], np.int32)
        category_map = np.array([category_index.setdefault(c, len(category_index))
                                 for c in trace.categories] or [0], np.int64)
        thread_base = len(threads)
        threads += trace.threads
        thread_rank += [rank] * len(trace.threads)
        own = np.unique(trace.gpu_device)
        device_map = np.zeros(int(own.max(initial=0)) + 1, np.int16)
        for device in own.tolist():
            device_map[device] = len(gpu_devices)
            gpu_devices.append([len(gpu_devices), rank, device])
            name = (trace.meta.get("device_names") or {}).get(device)
            if name is not None:
                device_names[len(gpu_devices) - 1] = name
        # Times, threads and ids are shifted after concatenating, in place (see _shifted): at
        # millions of rows each pass over a column counts.
        segments.append((len(trace), len(trace.gpu_start_ns), shift["offset_ns"], thread_base,
                         event_base))
        columns["start"].append(trace.start_ns)
        columns["end"].append(trace.end_ns)
        columns["thread"].append(trace.thread)
        columns["name"].append(name_map[trace.name_id])
        columns["cat"].append(category_map[trace.category])
        columns["depth"].append(trace.depth)
        columns["parent"].append(trace.parent)
        columns["self"].append(trace.self_ns)
        columns["gstart"].append(trace.gpu_start_ns)
        columns["gend"].append(trace.gpu_end_ns)
        columns["gname"].append(name_map[trace.gpu_name_id])
        columns["gdev"].append(device_map[trace.gpu_device])
        columns["gstream"].append(trace.gpu_stream)
        columns["glaunch"].append(trace.gpu_launch)
        columns["gkind"].append(trace.gpu_kind)
        for extra, base in (("event_args", event_base), ("shapes", event_base),
                            ("stacks", event_base), ("gpu_args", gpu_base)):
            sparse[extra].append((getattr(trace, extra), base))
        notes += [f"rank {rank}: {note}" for note in trace.meta.get("notes") or []]
        rank_meta.append({"rank": rank, "source": source, "host": trace.meta.get("host"),
                          "pid": trace.meta.get("pid"), "backend": trace.meta.get("backend"),
                          "base_time_ns": trace.meta.get("base_time_ns"), **shift})
        event_base += len(trace)
        gpu_base += len(trace.gpu_start_ns)
    if len(categories := list(category_index)) > 256:
        raise ValueError(f"{len(categories)} event categories across the ranks: at most 256")

    cat = {key: np.concatenate(parts) if parts else np.zeros(0) for key, parts in columns.items()}
    _shifted(cat, segments)
    trace = _sorted_trace(cat, names=list(name_index), threads=threads, categories=categories,
                          **sparse)
    backends = sorted({str(t.meta.get("backend")) for t in traces})
    world = [t.meta.get("world_size") for t in traces if t.meta.get("world_size")]
    trace.meta = {
        "backend": backends[0] if len(backends) == 1 else "mixed: " + ", ".join(backends),
        "base_time_ns": origin, "merged_ranks": ranks, "world_size": max(world) if world else
        len(traces), "thread_rank": thread_rank, "gpu_devices": gpu_devices,
        "device_names": device_names, "ranks": rank_meta, "notes": notes}
    return trace


def _shifted(c: dict, segments: list) -> None:
    """Each rank's rows of the concatenated columns put on the merged clock, threads and ids
    (NO_ID stays), in place."""
    parent, launch = c["parent"].astype(np.int64), c["glaunch"].astype(np.int64)
    lo = glo = 0
    for rows, gpu_rows, offset, thread_base, event_base in segments:
        hi, ghi = lo + rows, glo + gpu_rows
        for key in ("start", "end"):
            c[key][lo:hi] += offset
        for key in ("gstart", "gend"):
            c[key][glo:ghi] += offset
        c["thread"][lo:hi] += thread_base
        part = parent[lo:hi]
        part[part >= 0] += event_base
        part = launch[glo:ghi]
        part[part >= 0] += event_base
        lo, glo = hi, ghi
    c["parent"], c["glaunch"] = parent, launch


def _sorted_trace(c: dict, **tables) -> Trace:
    """The concatenated columns in a Trace's order. Each rank's rows are sorted already and its
    nesting stays valid (threads never cross ranks), so only the ids are remapped."""
    # Stable sorts by start alone: timsort merges the ranks' already sorted runs (k runs: n log k,
    # ~3x faster than a two-key lexsort) and keeps each rank's own order among equal starts, so
    # parents still precede their children (threads never cross ranks).
    order = np.argsort(c["start"], kind="stable")
    new_id = np.empty(len(order), np.int32)
    new_id[order] = np.arange(len(order), dtype=np.int32)
    gpu_order = np.argsort(c["gstart"], kind="stable")
    new_gpu_row = np.empty(len(gpu_order), np.int64)
    new_gpu_row[gpu_order] = np.arange(len(gpu_order))

    def remap_ids(column):  # int64 ids into the concatenation, NO_ID where none
        if not len(new_id):
            return np.full(len(column), NO_ID, np.int32)
        missing = column < 0
        column[missing] = 0
        remapped = new_id[column]
        remapped[missing] = NO_ID
        return remapped

    return Trace(
        start_ns=c["start"][order], end_ns=c["end"][order], thread=c["thread"][order],
        name_id=c["name"][order], category=c["cat"][order], depth=c["depth"][order],
        parent=remap_ids(c["parent"])[order], self_ns=c["self"][order],
        gpu_start_ns=c["gstart"][gpu_order], gpu_end_ns=c["gend"][gpu_order],
        gpu_name_id=c["gname"][gpu_order], gpu_device=c["gdev"][gpu_order],
        gpu_stream=c["gstream"][gpu_order], gpu_launch=remap_ids(c["glaunch"])[gpu_order],
        gpu_kind=c["gkind"][gpu_order], names=tables["names"], threads=tables["threads"],
        categories=tables["categories"],
        event_args=combine_sparse(tables["event_args"], new_id),
        shapes=combine_sparse(tables["shapes"], new_id),
        stacks=combine_sparse(tables["stacks"], new_id),
        gpu_args=combine_sparse(tables["gpu_args"], new_gpu_row))


def combine_sparse(parts: list, new_rows: np.ndarray):
    """One row -> value mapping of the ranks' sparse extras (``parts``: (mapping, the rank's first
    row in the concatenation)), keyed by the rows' places after sorting (``new_rows``). Mappings
    that can combine themselves without decoding each value (Parquet's lazy rows) do."""
    parts = [(mapping, base) for mapping, base in parts if mapping]
    kinds = {type(mapping) for mapping, _base in parts}
    if len(kinds) == 1 and hasattr(next(iter(kinds)), "combined"):
        combined = next(iter(kinds)).combined(parts, new_rows)
        if combined is not None:
            return combined
    out = {}
    for mapping, base in parts:
        rows = np.fromiter(mapping.keys(), np.int64, len(mapping)) + base
        out.update(zip(new_rows[rows].tolist(), mapping.values()))
    return out


def load_many(sources, load_one, align: bool = True) -> Trace:
    """The merged Trace of the files ``sources`` names (see :func:`trace_paths`);
    ``load_one(path)`` reads one file."""
    paths = trace_paths(sources)
    if not paths:
        raise FileNotFoundError("no trace files given")
    traces = [load_one(path) for path in paths]
    ranks = [rank_of(trace, path, i) for i, (trace, path) in enumerate(zip(traces, paths))]
    return merge(traces, ranks, sources=paths, align=align)


# -- the per-rank summary ------------------------------------------------------------------------------

def union_ns(keys: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> dict:
    """Per key, the length of the union of its intervals. For intervals sorted by start, each
    adds what reaches past every earlier one's end: the same sum the DuckDB summary computes
    with a running max, so both agree to the ns."""
    out = {}
    if not len(keys):
        return out
    order = np.lexsort((ends, starts, keys))
    keys, starts, ends = keys[order], starts[order], ends[order]
    bounds = np.flatnonzero(np.diff(keys)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(keys)]):
        s, e = starts[lo:hi], ends[lo:hi]
        before = np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(e)[:-1]))
        out[int(keys[lo])] = int(np.clip(e - np.maximum(s, before), 0, None).sum())
    return out


@dataclass(frozen=True)
class RankRow:
    """One rank's figures, in ns."""

    rank: int
    events: int
    gpu_intervals: int
    wall_ns: int  # first start to last end, CPU or GPU
    cpu_busy_ns: int  # per thread, the time some op ran; summed over threads
    gpu_busy_ns: int  # per stream, the time some GPU work ran; summed over streams
    collective_ns: int  # per thread (CPU collective ops) or per stream (GPU collective kernels)
    step_collective_ns: int = 0  # the part of collective_ns inside this rank's ProfilerSteps
    steps: tuple = ()  # durations of its ProfilerStep#N annotations, in time order


@dataclass(frozen=True)
class RankSummary:
    rows: list
    straggler: int | None
    reason: str = ""
    notes: list = field(default_factory=list)

    def row(self, rank: int) -> RankRow:
        return next(row for row in self.rows if row.rank == rank)

    def to_dicts(self) -> list[dict]:
        return [{**row.__dict__, "steps": list(row.steps)} for row in self.rows]

    def __str__(self) -> str:
        from .analysis import format_us, text_table

        headers = ["Rank", "Wall", "CPU busy", "GPU busy", "In collectives", "Steps", "Step mean",
                   "Step max"]
        cells = [[str(r.rank), *(format_us(v / 1e3) for v in (r.wall_ns, r.cpu_busy_ns,
                                                               r.gpu_busy_ns, r.collective_ns)),
                  str(len(r.steps)),
                  format_us(float(np.mean(r.steps)) / 1e3) if r.steps else "-",
                  format_us(max(r.steps) / 1e3) if r.steps else "-"] for r in self.rows]
        lines = text_table(headers, cells, name_width=8)
        if self.straggler is not None:
            lines.append(f"Straggler: rank {self.straggler} ({self.reason})")
        return "\n".join(lines + list(self.notes))

    __repr__ = __str__


def name_straggler(rows: list[RankRow]) -> tuple[int | None, str]:
    """The rank the others wait for: in a collective every rank waits for the last to arrive, so
    the straggler is the one that spends the least time inside them; without collectives, the
    one with the longest wall time."""
    if len(rows) < 2:
        return None, ""
    # Inside the steps when every rank has some: the waits before the first step (rendezvous,
    # DDP's parameter broadcast) measure when each process got going, not who is slow.
    in_steps = all(row.steps and row.step_collective_ns for row in rows)
    waited = (lambda r: r.step_collective_ns) if in_steps else (lambda r: r.collective_ns)
    if any(waited(row) for row in rows):
        row = min(rows, key=lambda r: (waited(r), r.rank))
        others = np.median([waited(r) for r in rows if r is not row])
        where = "collectives during its steps" if in_steps else "collectives"
        return row.rank, (f"least time inside {where}: {waited(row) / 1e6:.3f} ms "
                          f"against a median of {others / 1e6:.3f} ms for the others")
    row = max(rows, key=lambda r: (r.wall_ns, -r.rank))
    return row.rank, f"longest wall time ({row.wall_ns / 1e6:.3f} ms) and no collectives seen"


def _starts_inside(starts: np.ndarray, span_starts: np.ndarray, span_ends: np.ndarray) -> np.ndarray:
    """Which of ``starts`` fall inside one of the spans (spans on one thread: they do not overlap,
    so the last span starting before a point is the only one that can hold it)."""
    if not len(span_starts):
        return np.zeros(len(starts), bool)
    order = np.argsort(span_starts, kind="stable")
    span_starts, span_ends = span_starts[order], span_ends[order]
    at = np.searchsorted(span_starts, starts, side="right") - 1
    return (at >= 0) & (starts < span_ends[np.maximum(at, 0)])


def rank_summary(trace: Trace) -> RankSummary:
    """Per rank: wall time, CPU busy, GPU busy, time inside collectives, ProfilerStep times; and
    the straggler named. A single-rank trace gives one row."""
    cpu_rank, gpu_rank = event_ranks(trace), gpu_ranks(trace)
    collective = np.array([bool(_COLLECTIVE.search(n)) for n in trace.names] or [False])
    step = np.array([bool(_STEP.match(n)) for n in trace.names] or [False])
    stream_keys = trace.gpu_stream_keys()
    # Lanes as one int64 key: rank in the high bits, thread (or device/stream key) below.
    cpu_key = (cpu_rank.astype(np.int64) << 40) | trace.thread.astype(np.int64)
    gpu_key = (gpu_rank.astype(np.int64) << 40) | (stream_keys & ((1 << 40) - 1))
    is_kernel_work = np.isin(trace.gpu_kind, KERNEL_WORK)
    rows = []
    for rank in sorted(set(cpu_rank.tolist()) | set(gpu_rank.tolist())):
        cpu = cpu_rank == rank
        gpu = gpu_rank == rank
        starts = np.concatenate([trace.start_ns[cpu], trace.gpu_start_ns[gpu]])
        ends = np.concatenate([trace.end_ns[cpu], trace.gpu_end_ns[gpu]])
        cpu_coll = cpu & collective[trace.name_id]
        gpu_coll = gpu & collective[trace.gpu_name_id]
        steps = cpu & step[trace.name_id]
        # GPU busy from kernels, memcpys and memsets where the rank has them: its per-op
        # CUDA-event intervals beside them hold the same work again, with queueing (steps.py's rule)
        gpu_work = gpu & is_kernel_work
        if not gpu_work.any():
            gpu_work = gpu
        if gpu_coll.any():
            coll_key, coll_start, coll_end = (gpu_key[gpu_coll], trace.gpu_start_ns[gpu_coll],
                                              trace.gpu_end_ns[gpu_coll])
        else:
            coll_key, coll_start, coll_end = (cpu_key[cpu_coll], trace.start_ns[cpu_coll],
                                              trace.end_ns[cpu_coll])
        coll = union_ns(coll_key, coll_start, coll_end)
        inside = _starts_inside(coll_start, trace.start_ns[steps], trace.end_ns[steps])
        step_coll = union_ns(coll_key[inside], coll_start[inside], coll_end[inside])
        rows.append(RankRow(
            rank=int(rank), events=int(cpu.sum()), gpu_intervals=int(gpu.sum()),
            wall_ns=int(ends.max() - starts.min()) if len(starts) else 0,
            cpu_busy_ns=sum(union_ns(cpu_key[cpu], trace.start_ns[cpu], trace.end_ns[cpu]).values()),
            gpu_busy_ns=sum(union_ns(gpu_key[gpu_work], trace.gpu_start_ns[gpu_work],
                                     trace.gpu_end_ns[gpu_work]).values()),
            collective_ns=sum(coll.values()), step_collective_ns=sum(step_coll.values()),
            steps=tuple((trace.end_ns[steps] - trace.start_ns[steps]).tolist())))
    straggler, reason = name_straggler(rows)
    return RankSummary(rows, straggler, reason)


def merged_note(trace: Trace) -> str:
    """For a merged job's page header: how many ranks, and the clock offset applied to each
    (plain text: the caller escapes it)."""
    listed = trace.meta.get("ranks")
    if not isinstance(listed, list) or not listed:
        return ""
    offsets = ", ".join(
        f"rank {r.get('rank')} {r.get('offset_ns', 0) / 1e3:+,.1f} µs"
        + (f" ({r.get('collectives_matched')} collectives)" if r.get("collectives_matched") else "")
        for r in listed[:16])
    more = f", ... ({len(listed) - 16} more in meta['ranks'])" if len(listed) > 16 else ""
    return f"{len(listed)} ranks merged; clock offsets applied: {offsets}{more}"
