"""Answers about memory: ``trace.memory_summary()``, ``trace.memory_peak()``,
``trace.memory_holders()``, the summary table's allocated columns and the memory findings.

All from ``trace.memory`` (nbprof/model/memory.py): levels are the model's running levels per
device, an allocation's free is its partner by address, an event's op the innermost op of its
thread that held it. numpy only; paths are spelled out for the rows returned.
"""

from __future__ import annotations

import numpy as np

from .callpaths import CallPaths
from .tables import make_table
from ..model import NO_ID, Trace, device_code, device_name

OUTSIDE = "(outside any op)"


def format_bytes(value: float) -> str:
    """Bytes as people read them: 512 B, 4.0 KiB, 128.0 MiB (signed where negative)."""
    sign, value = ("-" if value < 0 else ""), abs(float(value))
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{sign}{value:.0f} {unit}" if unit == "B" else f"{sign}{value:.1f} {unit}"
        value /= 1024
    return ""  # not reached


def _op_name(trace: Trace, row: int) -> str:
    return trace.names[trace.name_id[row]] if row >= 0 else ""


def memory_summary(trace: Trace, by: str = "op", limit: int | None = 20, plain: bool = False):
    """One row per (device, op name) (``by="call_path"``: per call path) that allocated or freed:
    ``allocations``, ``allocated_bytes``, ``freed_bytes``, ``net_bytes``, ``largest_bytes``,
    most allocated first. Events outside any op are one row, ``(outside any op)``."""
    if by not in ("op", "call_path"):
        raise ValueError(f"memory_summary(by={by!r}): by is 'op' or 'call_path'")
    memory = trace.memory
    op = memory.op.astype(np.int64)
    if by == "op":
        key_of_op = trace.name_id.astype(np.int64)
        label = lambda key: trace.names[key]  # noqa: E731
    else:
        paths = CallPaths(trace)
        key_of_op = paths.of_event
        label = paths.text
    op_key = np.where(op >= 0, key_of_op[np.maximum(op, 0)] if len(trace) else NO_ID, NO_ID)
    # one bin per (device, op key): the keys are few and dense, so bincount, not a sort
    devices = np.array(memory.devices(), np.int64)
    width = max(len(key_of_op), len(trace.names)) + 1
    group = np.searchsorted(devices, memory.device) * width + op_key + 1
    bins = len(devices) * width
    size = memory.bytes
    allocs = size > 0
    allocated = np.bincount(group, weights=np.where(allocs, size, 0), minlength=bins)
    freed = np.bincount(group, weights=np.where(allocs, 0, -size), minlength=bins)
    count = np.bincount(group[allocs], minlength=bins)
    largest = np.zeros(bins, np.int64)
    np.maximum.at(largest, group[allocs], size[allocs])
    keys = np.flatnonzero(np.bincount(group, minlength=bins))
    allocated, freed, count, largest = allocated[keys], freed[keys], count[keys], largest[keys]
    unique = np.stack([devices[keys // width], keys % width - 1]) if len(keys) else \
        np.zeros((2, 0), np.int64)
    order = np.lexsort((-freed, -allocated))
    if limit is not None and limit >= 0:
        order = order[:limit]
    columns = {
        "device": [device_name(d, trace.meta) for d in unique[0, order].tolist()],
        by: [label(k) if k >= 0 else OUTSIDE for k in unique[1, order].tolist()],
        "allocations": count[order],
        "allocated_bytes": allocated[order].astype(np.int64),
        "freed_bytes": freed[order].astype(np.int64),
        "net_bytes": (allocated - freed)[order].astype(np.int64),
        "largest_bytes": largest[order],
    }
    return make_table("MemorySummary", columns, summary_text, plain)


def summary_text(rows: list[dict], row_limit: int = -1, name_width: int = 50) -> str:
    from .averages import limit_rows, text_table

    key = "op" if rows and "op" in rows[0] else "call_path"
    headers = ["Name", "Device", "Allocs", "Allocated", "Freed", "Net", "Largest"]
    cells = [[row[key], row["device"], str(row["allocations"]), format_bytes(row["allocated_bytes"]),
              format_bytes(row["freed_bytes"]), format_bytes(row["net_bytes"]),
              format_bytes(row["largest_bytes"])] for row in limit_rows(rows, row_limit)]
    return "\n".join(text_table(headers, cells, name_width))


def peaks(trace: Trace) -> list[tuple[int, int, int]]:
    """Per device with events: (device, the event row at which its level peaked, that level);
    the first such event where the level reaches its peak more than once."""
    memory = trace.memory
    level = memory.levels()
    out = []
    for device in memory.devices():
        rows = np.flatnonzero(memory.device == device)
        at = int(rows[np.argmax(level[rows])])
        out.append((device, at, int(level[at])))
    return out


def memory_peak(trace: Trace, plain: bool = False):
    """A row per device ("CPU", "cuda:0"): ``peak_bytes``, ``at_ns`` (the time of the event that
    reached it), ``op`` (the op that event happened in, "" outside any op) and its ``row``."""
    memory = trace.memory
    found = peaks(trace)
    columns = {
        "device": [device_name(device, trace.meta) for device, _at, _level in found],
        "peak_bytes": np.array([level for _d, _at, level in found], np.int64),
        "at_ns": np.array([memory.time_ns[at] for _d, at, _l in found], np.int64),
        "op": [_op_name(trace, int(memory.op[at])) for _d, at, _l in found],
        "row": np.array([memory.op[at] for _d, at, _l in found], np.int64),
    }
    return make_table("MemoryPeak", columns, peak_text, plain)


def peak_text(rows: list[dict], **_options) -> str:
    from .averages import format_us, text_table

    cells = [[row["device"], format_bytes(row["peak_bytes"]), format_us(row["at_ns"] / 1e3),
              row["op"] or OUTSIDE] for row in rows]
    return "\n".join(text_table(["Device", "Peak", "At", "In op"], cells, 12))


def alive_at(trace: Trace, at: int) -> np.ndarray:
    """The allocation rows of event ``at``'s device made at or before it and not freed by then."""
    memory = trace.memory
    partner = memory.partners()
    rows = np.flatnonzero((memory.device == memory.device[at]) & (memory.bytes > 0))
    rows = rows[rows <= at]
    return rows[(partner[rows] == NO_ID) | (partner[rows] > at)]


def memory_holders(trace: Trace, device=None, limit: int | None = 20, plain: bool = False):
    """The allocations alive at ``device``'s peak (a name "CPU" / "cuda:0", or None for the
    device with the highest peak), per call path of the op that made them: ``op``,
    ``call_path``, ``bytes``, ``count``, and ``row`` (the op of the largest of them, for a click
    to the timeline), most bytes first."""
    found = {d: (at, level) for d, at, level in peaks(trace)}
    if device is None:
        chosen = max(found, key=lambda d: found[d][1]) if found else None
    else:
        chosen = device_code(device, trace.meta) if isinstance(device, str) else int(device)
        if chosen not in found:
            raise ValueError(f"no memory events on {device_name(chosen, trace.meta)}; the trace "
                             f"has {[device_name(d, trace.meta) for d in found] or 'none'}")
    memory = trace.memory
    rows = alive_at(trace, found[chosen][0]) if chosen is not None else np.zeros(0, np.int64)
    op = memory.op[rows].astype(np.int64)
    paths = CallPaths(trace)
    path = np.where(op >= 0, paths.of_event[np.maximum(op, 0)] if len(trace) else NO_ID, NO_ID)
    unique, group = np.unique(path, return_inverse=True)
    group = group.reshape(-1)
    size = memory.bytes[rows]
    held = np.bincount(group, weights=size, minlength=len(unique)).astype(np.int64)
    count = np.bincount(group, minlength=len(unique))
    by_size = np.lexsort((size, group))  # each group's largest allocation is its last
    biggest = by_size[np.r_[np.flatnonzero(np.diff(group[by_size])), len(by_size) - 1]] \
        if len(by_size) else np.zeros(0, np.int64)
    order = np.argsort(-held, kind="stable")
    if limit is not None and limit >= 0:
        order = order[:limit]
    sample = op[biggest[order]] if len(order) else np.zeros(0, np.int64)
    columns = {
        "op": [_op_name(trace, r) or OUTSIDE for r in sample.tolist()],
        "call_path": [paths.text(p) for p in unique[order].tolist()],
        "bytes": held[order],
        "count": count[order],
        "row": sample,
    }
    return make_table("MemoryHolders", columns, holders_text, plain)


def holders_text(rows: list[dict], row_limit: int = -1, name_width: int = 60) -> str:
    from .averages import limit_rows, text_table

    cells = [[row["call_path"] or row["op"], format_bytes(row["bytes"]), str(row["count"])]
             for row in limit_rows(rows, row_limit)]
    return "\n".join(text_table(["Made by", "Held", "Allocs"], cells, name_width))


def allocated_per_name(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Per name id, bytes allocated by its ops themselves (self) and by them and every op
    nested in them (total), on all devices: the summary table's "Self / total allocated"."""
    memory = trace.memory
    n = len(trace)
    allocs = (memory.bytes > 0) & (memory.op >= 0)
    own = np.bincount(memory.op[allocs], weights=memory.bytes[allocs], minlength=n)
    total = own.copy()
    for depth in range(int(trace.depth.max()) if n else 0, 0, -1):  # children before parents
        rows = np.flatnonzero(trace.depth == depth)
        np.add.at(total, trace.parent[rows], total[rows])
    names = len(trace.names)
    return (np.bincount(trace.name_id, weights=own, minlength=names),
            np.bincount(trace.name_id, weights=total, minlength=names))


def memory_findings(trace: Trace) -> list[str]:
    """The peak of each device and its largest holders; what was never freed inside the block."""
    from .averages import name_cell

    out = []
    memory = trace.memory
    if not len(memory):
        return out
    for device, at, level in peaks(trace):
        holders = memory_holders(trace, device=device, limit=3, plain=True)
        held = ", ".join(f"{name_cell(row['call_path'] or row['op'], 60)} {format_bytes(row['bytes'])}"
                         for row in holders)
        where = _op_name(trace, int(memory.op[at])) or OUTSIDE
        out.append(f"Memory peak on {device_name(device, trace.meta)}: {format_bytes(level)} in "
                   f"{name_cell(where, 60)}" + (f"; held by {held}." if held else "."))
    partner = memory.partners()
    kept = np.flatnonzero((memory.bytes > 0) & (partner == NO_ID))
    for device in np.unique(memory.device[kept]).tolist():
        rows = kept[memory.device[kept] == device]
        size = memory.bytes[rows]
        largest = int(rows[np.argmax(size)])
        maker = _op_name(trace, int(memory.op[largest])) or OUTSIDE
        allocations = "allocation" if len(rows) == 1 else "allocations"
        out.append(f"{len(rows)} {allocations} on {device_name(device, trace.meta)} "
                   f"({format_bytes(size.sum())}) never freed inside the block; the largest "
                   f"({format_bytes(size.max())}) from {name_cell(maker, 60)}.")
    return out


def memory_in_range(trace: Trace, start_ns: int, end_ns: int, top: int = 15) -> list[dict]:
    """Per op name, the bytes allocated, freed and the net change by the events in
    ``start_ns``..``end_ns`` (edges included), most bytes moved first: what an area selection
    of the timeline says about memory."""
    memory = trace.memory
    start_ns, end_ns = sorted((int(start_ns), int(end_ns)))
    lo, hi = (np.searchsorted(memory.time_ns, start_ns, side="left"),
              np.searchsorted(memory.time_ns, end_ns, side="right"))
    op = memory.op[lo:hi].astype(np.int64)
    key = np.where(op >= 0, trace.name_id[np.maximum(op, 0)] if len(trace) else NO_ID, NO_ID) + 1
    size = memory.bytes[lo:hi]
    width = len(trace.names) + 1
    allocated = np.bincount(key, weights=np.maximum(size, 0), minlength=width)
    freed = np.bincount(key, weights=np.maximum(-size, 0), minlength=width)
    present = np.flatnonzero(np.bincount(key, minlength=width))
    order = present[np.argsort(-(allocated + freed)[present], kind="stable")][:top]
    return [{"op": trace.names[k - 1] if k else OUTSIDE, "allocated_bytes": int(allocated[k]),
             "freed_bytes": int(freed[k]), "net_bytes": int(allocated[k] - freed[k])}
            for k in order.tolist()]
