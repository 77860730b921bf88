"""Many ranks' traces merged into one Trace: lanes by rank, one clock, shared tables, ids remapped.

What the merged Trace's meta holds is described in :mod:`nbprof.ranks`; how the clocks are
aligned in :mod:`nbprof.ranks.clocks`.
"""

from __future__ import annotations

import numpy as np

from ..model import NO_ID, UNFINISHED_KEY, MemoryEvents, Trace
from ..model.memory import MEMORY_DEVICES
from .clocks import clock_shifts
from .files import rank_of, trace_paths


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
                                   "gkind", "gcall")}
    sparse = {"event_args": [], "shapes": [], "stacks": [], "gpu_args": []}  # (rows, row base)
    notes, rank_meta, segments, async_threads = [], [], [], []
    memory_parts, memory_devices = [], []
    event_base = gpu_base = 0
    for index, (trace, rank, source, shift) in enumerate(zip(traces, ranks, sources, shifts)):
        name_map = np.array([name_index.setdefault(n, len(name_index)) for n in trace.names]
                            or [0], np.int32)
        category_map = np.array([category_index.setdefault(c, len(category_index))
                                 for c in trace.categories] or [0], np.int64)
        thread_base = len(threads)
        threads += trace.threads
        thread_rank += [rank] * len(trace.threads)
        async_threads += (np.flatnonzero(trace.async_thread_mask()) + thread_base).tolist()
        memory_gpus = trace.memory.device[trace.memory.device >= 0]
        own = np.union1d(trace.gpu_device, memory_gpus)  # a GPU with memory events only, too
        lowest = int(own.min(initial=0))  # a file may number a device -3: offset, not wrapped
        device_map = np.zeros(int(own.max(initial=0)) - lowest + 1, np.int16)
        for device in own.tolist():
            device_map[device - lowest] = len(gpu_devices)
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
        columns["gdev"].append(device_map[trace.gpu_device.astype(np.int64) - lowest])
        columns["gstream"].append(trace.gpu_stream)
        columns["glaunch"].append(trace.gpu_launch)
        columns["gcall"].append(trace.gpu_call)
        columns["gkind"].append(trace.gpu_kind)
        if len(trace.memory):
            memory_parts.append(_rank_memory(trace.memory, index - len(traces), device_map,
                                             lowest, shift["offset_ns"], thread_base, event_base))
            memory_devices += [[int(device), rank, -1 if device < 0 else own_device]
                               for device, own_device in _rank_memory_devices(
                                   memory_parts[-1], trace.memory)]
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
                          memory=memory_parts, **sparse)
    backends = sorted({str(t.meta.get("backend")) for t in traces})
    world = [t.meta.get("world_size") for t in traces if t.meta.get("world_size")]
    trace.meta = {
        "backend": backends[0] if len(backends) == 1 else "mixed: " + ", ".join(backends),
        "base_time_ns": origin, "merged_ranks": ranks, "world_size": max(world) if world else
        len(traces), "thread_rank": thread_rank, "gpu_devices": gpu_devices,
        "device_names": device_names, "ranks": rank_meta, "notes": notes}
    if async_threads:
        trace.meta["async_threads"] = async_threads
    if memory_devices:
        trace.meta[MEMORY_DEVICES] = memory_devices
    if unfinished := sum(int(t.meta.get(UNFINISHED_KEY) or 0) for t in traces):
        trace.meta[UNFINISHED_KEY] = unfinished
    return trace


def _rank_memory(memory: MemoryEvents, cpu_device: int, device_map: np.ndarray, lowest: int,
                 offset_ns: int, thread_base: int, event_base: int) -> MemoryEvents:
    """One rank's memory events on the merged clock, threads and devices: its CPU numbered
    ``cpu_device`` (each rank's own: -n .. -1 in rank order), its GPUs as its GPU intervals'
    (``device_map``); ops stay ids into the concatenation (+ ``event_base``) until sorted."""
    device = memory.device.astype(np.int64)
    gpu = device >= 0
    merged = np.full(len(device), cpu_device, np.int16)
    merged[gpu] = device_map[device[gpu] - lowest]
    thread = memory.thread.astype(np.int64)
    op = memory.op.astype(np.int64)
    return MemoryEvents(memory.time_ns + offset_ns, memory.bytes, memory.addr, merged,
                        np.where(thread >= 0, thread + thread_base, NO_ID).astype(np.int32),
                        np.where(op >= 0, op + event_base, NO_ID), memory.allocated,
                        memory.reserved)


def _rank_memory_devices(merged: MemoryEvents, own: MemoryEvents):
    """(merged device, the rank's own device) for each memory device of a rank."""
    pairs = np.unique(np.stack([merged.device.astype(np.int64), own.device.astype(np.int64)]),
                      axis=1)
    return [(int(a), int(b)) for a, b in pairs.T.tolist()]


def _merged_memory(parts: list, new_id: np.ndarray) -> MemoryEvents:
    """The ranks' memory events in one time order, their ops remapped to the sorted rows."""
    if not parts:
        return MemoryEvents.empty()
    op = np.concatenate([part.op for part in parts])
    op = np.where(op >= 0, new_id[np.maximum(op, 0)] if len(new_id) else NO_ID, NO_ID)
    return MemoryEvents.build(
        time_ns=np.concatenate([p.time_ns for p in parts]),
        bytes=np.concatenate([p.bytes for p in parts]),
        addr=np.concatenate([p.addr for p in parts]),
        device=np.concatenate([p.device for p in parts]),
        thread=np.concatenate([p.thread for p in parts]), op=op,
        allocated=np.concatenate([p.allocated for p in parts]),
        reserved=np.concatenate([p.reserved for p in parts]))


def _shifted(c: dict, segments: list) -> None:
    """Each rank's rows of the concatenated columns put on the merged clock, threads and ids
    (NO_ID stays), in place."""
    parent, launch, call = (c[key].astype(np.int64) for key in ("parent", "glaunch", "gcall"))
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
        for ids in (launch, call):
            part = ids[glo:ghi]
            part[part >= 0] += event_base
        lo, glo = hi, ghi
    c["parent"], c["glaunch"], c["gcall"] = parent, launch, call


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
        gpu_kind=c["gkind"][gpu_order], gpu_call=remap_ids(c["gcall"])[gpu_order],
        names=tables["names"], threads=tables["threads"],
        categories=tables["categories"],
        event_args=combine_sparse(tables["event_args"], new_id),
        shapes=combine_sparse(tables["shapes"], new_id),
        stacks=combine_sparse(tables["stacks"], new_id),
        gpu_args=combine_sparse(tables["gpu_args"], new_gpu_row),
        memory=_merged_memory(tables["memory"], new_id))


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
