"""Kineto's ``[memory]`` instants <-> a Trace's memory columns (nbprof/model/memory.py).

Kineto writes each allocation and free as ``{"ph": "i", "cat": "cpu_instant_event", "s": "t",
"name": "[memory]", pid, tid, ts, "args": {"Total Reserved", "Total Allocated", "Bytes",
"Device Id", "Device Type", "Addr", ...}}`` on the allocating (or freeing) thread; ``Bytes`` < 0
is a free, ``Addr`` a decimal pointer, ``Device Type`` 0 the CPU and 1 CUDA. nbprof's export
writes them the same way, plus a counter track per device with the level (Chrome and Perfetto
draw it as a curve); the "nbprof" block names those tracks so that a load does not read them
back as counters of their own.
"""

from __future__ import annotations

import math

import numpy as np

from .read import canonical_id, hashable, number_or_nan
from ...model import NO_ID, MemoryEvents, Trace, device_name

MEMORY_NAME = "[memory]"
MEMORY_CATEGORY = "cpu_instant_event"
DEVICE_TYPE_CPU, DEVICE_TYPE_CUDA = 0, 1
_U64 = 1 << 64


def counter_name(device: int, meta=None) -> str:
    return f"Memory {device_name(device, meta)}"


def _int(value, low=-(1 << 63), high=1 << 63):
    """An int in [low, high) from a JSON number (or its text), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = int(value)
        except ValueError:
            return None
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    return value if isinstance(value, int) and low <= value < high else None


def memory_row(event):
    """(ts µs, pid, tid or None, bytes, addr, device, allocated, reserved) of a ``[memory]``
    instant, or None where it is not one a Trace can keep (a device other than the CPU or CUDA,
    a missing or non-integer Bytes)."""
    args = event.args
    if event.name != MEMORY_NAME or not isinstance(args, dict):
        return None
    ts = number_or_nan(event.ts)
    size = _int(args.get("Bytes"))
    kind = _int(args.get("Device Type"))
    if not (math.isfinite(ts) and size is not None and hashable(event.pid)
            and hashable(event.tid)) or kind not in (DEVICE_TYPE_CPU, DEVICE_TYPE_CUDA):
        return None
    # Kineto's CPU is Device Id -1; a merged trace's export numbers each rank's CPU -1, -2, ...
    device = (_int(args.get("Device Id"), -(1 << 15), 0) or -1 if kind == DEVICE_TYPE_CPU else
              _int(args.get("Device Id"), 0, 1 << 15))
    if device is None:
        return None
    addr = _int(args.get("Addr"), -(1 << 63), _U64)
    totals = [_int(args.get(key), 0) for key in ("Total Allocated", "Total Reserved")]
    return (ts, canonical_id(event.pid), canonical_id(event.tid) if event.s in (None, "t") else None,
            size, (addr if addr is not None else 0) % _U64, device,
            *(-1 if total is None else total for total in totals))


def memory_events(rows: list, lane_index: dict, time_ns: np.ndarray) -> MemoryEvents:
    """The events of ``rows`` (memory_row's tuples; ``time_ns`` each one's time in the trace),
    their threads found in ``lane_index`` ((pid, tid) -> thread index)."""
    if not rows:
        return MemoryEvents.empty()
    _ts, pid, tid, size, addr, device, allocated, reserved = zip(*rows)
    thread = [lane_index.get((p, t), NO_ID) if t is not None else NO_ID for p, t in zip(pid, tid)]
    return MemoryEvents.build(time_ns=time_ns, bytes=size, addr=np.array(addr, np.uint64),
                              device=device, thread=thread, allocated=allocated,
                              reserved=reserved)


def memory_instants(trace: Trace, rows: slice, micros) -> list[dict]:
    """Kineto's ``[memory]`` instant per event of ``rows`` (``micros``: ns -> µs floats as the
    export writes them); an event without a thread is process-wide."""
    memory = trace.memory.take(rows)
    pids = [t.pid for t in trace.threads]
    tids = [t.tid for t in trace.threads]
    first_pid = pids[0] if pids else 0
    out = []
    for ts, size, addr, device, thread, allocated, reserved in zip(
            micros(memory.time_ns), memory.bytes.tolist(), memory.addr.tolist(),
            memory.device.tolist(), memory.thread.tolist(), memory.allocated.tolist(),
            memory.reserved.tolist()):
        args = {"Bytes": size, "Addr": addr, "Device Id": device,
                "Device Type": DEVICE_TYPE_CPU if device < 0 else DEVICE_TYPE_CUDA}
        if allocated >= 0:
            args["Total Allocated"] = allocated
        if reserved >= 0:
            args["Total Reserved"] = reserved
        where = ({"s": "t", "pid": pids[thread], "tid": tids[thread]} if thread >= 0 else
                 {"s": "p", "pid": first_pid, "tid": 0})
        out.append({"ph": "i", "cat": MEMORY_CATEGORY, "name": MEMORY_NAME, "ts": ts, **where,
                    "args": args})
    return out


def memory_counters(trace: Trace, rows: slice, level: np.ndarray, micros) -> list[dict]:
    """A counter sample per event of ``rows``: its device's level after it (``level``, the
    memory's levels()), on that device's track."""
    memory = trace.memory.take(rows)
    level = level[rows].tolist()
    names = {device: counter_name(device, trace.meta) for device in memory.devices()}
    pid = trace.threads[0].pid if trace.threads else 0
    return [{"ph": "C", "name": names[device], "pid": pid, "tid": 0, "ts": ts,
             "args": {"allocated": value}}
            for ts, device, value in zip(micros(memory.time_ns), memory.device.tolist(), level)]
