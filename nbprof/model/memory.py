"""Memory events as columns: every allocation and free a profile saw, and the level they make.

One row per event, in time order (``trace.memory``): ``time_ns`` (int64, the trace's ns),
``bytes`` (int64, negative for a free), ``addr`` (uint64, the pointer), ``device`` (int16: -1 the
CPU, k >= 0 ``cuda:k``), ``thread`` (int32, into ``Trace.threads``; NO_ID when the thread ran no
op), ``op`` (int32, the innermost op of the same thread whose interval holds the event; NO_ID
when it is outside every op), and the allocator's own totals where it gave them,
``allocated`` and ``reserved`` (int64, -1 where unknown).

The level per device is computed from the events (a running sum of ``bytes``): on the CPU the
allocator's totals count only what was allocated while profiling and a shared-memory map counts
as reserved, so the sum is the honest curve. CUDA's caching allocator reports true absolute
levels per device, so there ``allocated`` is the level wherever the events carry it.

numpy only, like the rest of the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .event_types import NO_ID

CPU_DEVICE = -1
UNKNOWN = -1  # an allocator total the events did not carry


MEMORY_DEVICES = "memory_devices"  # a merged trace's meta: [[device, rank, its own device], ...]


def _merged_devices(meta) -> dict:
    """device -> (rank, the device in its rank's own trace), from a merged trace's meta (only
    whole numbers count: a file may say anything there)."""
    listed = (meta or {}).get(MEMORY_DEVICES) if isinstance(meta, dict) else None
    out = {}
    for entry in listed if isinstance(listed, list) else ():
        if isinstance(entry, (list, tuple)) and len(entry) == 3 and \
                all(isinstance(x, int) and not isinstance(x, bool) for x in entry):
            out[entry[0]] = (entry[1], entry[2])
    return out


def device_name(device: int, meta=None) -> str:
    """A device as lanes name it: "CPU", "cuda:0"; in a merged trace (``meta`` lists its
    devices under "memory_devices"), with its rank as its lanes have: "rank 1 · cuda:0"."""
    merged = _merged_devices(meta).get(device)
    if merged is not None:
        return f"rank {merged[0]} · {device_name(merged[1])}"
    return "CPU" if device < 0 else f"cuda:{device}"


def device_code(name: str, meta=None) -> int:
    """The inverse of :func:`device_name`; ValueError for a name that is neither."""
    merged = _merged_devices(meta)
    for device in merged:
        if device_name(device, meta) == name:
            return device
    if not merged:
        if name == "CPU":
            return CPU_DEVICE
        if isinstance(name, str) and name.startswith("cuda:") and name[5:].isdigit():
            return int(name[5:])
    shape = "'rank N · CPU' or 'rank N · cuda:K'" if merged else "'CPU' or 'cuda:N'"
    raise ValueError(f"no memory device {name!r}: name one as {shape}")


def _column(values, dtype) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=dtype)


@dataclass(frozen=True, eq=False)
class MemoryEvents:
    time_ns: np.ndarray
    bytes: np.ndarray
    addr: np.ndarray
    device: np.ndarray
    thread: np.ndarray
    op: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray

    @classmethod
    def empty(cls) -> "MemoryEvents":
        return cls.build(time_ns=(), bytes=(), addr=(), device=(), thread=())

    @classmethod
    def build(cls, *, time_ns, bytes, addr, device, thread, op=None, allocated=None,
              reserved=None) -> "MemoryEvents":
        """Events from unsorted columns, put in time order (the given order on ties: a free
        and the allocation reusing its address may share a µs in a file)."""
        time_ns = _column(time_ns, np.int64)
        n = len(time_ns)
        order = np.argsort(time_ns, kind="stable")

        def take(values, dtype, fill):
            values = np.full(n, fill, dtype) if values is None else _column(values, dtype)
            if len(values) != n:
                raise ValueError(f"memory columns of {len(values)} and {n} rows")
            return values[order]

        return cls(time_ns=time_ns[order], bytes=take(bytes, np.int64, 0),
                   addr=take(addr, np.uint64, 0), device=take(device, np.int16, 0),
                   thread=take(thread, np.int32, NO_ID), op=take(op, np.int32, NO_ID),
                   allocated=take(allocated, np.int64, UNKNOWN),
                   reserved=take(reserved, np.int64, UNKNOWN))

    def __len__(self) -> int:
        return len(self.time_ns)

    def __eq__(self, other) -> bool:
        """The same events: every column of the same type and values."""
        if not isinstance(other, MemoryEvents):
            return NotImplemented
        return all(getattr(self, name).dtype == getattr(other, name).dtype
                   and np.array_equal(getattr(self, name), getattr(other, name))
                   for name in self.__dataclass_fields__)

    __hash__ = None

    def with_ops(self, op: np.ndarray) -> "MemoryEvents":
        return MemoryEvents(self.time_ns, self.bytes, self.addr, self.device, self.thread,
                            _column(op, np.int32), self.allocated, self.reserved)

    def take(self, rows) -> "MemoryEvents":
        """The events at ``rows`` (a mask or indices, kept in time order)."""
        return MemoryEvents(*(getattr(self, name)[rows] for name in self.__dataclass_fields__))

    def devices(self) -> list[int]:
        """The devices that have events: the CPU (a merged trace's CPUs, rank by rank) first,
        then the GPUs in order."""
        if not len(self):
            return []
        device = self.device.astype(np.int64)
        lowest = int(device.min())  # a merged trace numbers each rank's CPU -1, -2, ...
        return (np.flatnonzero(np.bincount(device - lowest)) + lowest).tolist()

    def levels(self) -> np.ndarray:
        """Per event, its device's level just after it (bytes): the running sum of ``bytes``;
        on a device whose every event carries the allocator's ``allocated`` (CUDA), that."""
        level = np.zeros(len(self), np.int64)
        for device in self.devices():
            rows = np.flatnonzero(self.device == device)
            allocated = self.allocated[rows]
            if device >= 0 and len(rows) and (allocated >= 0).all():
                level[rows] = allocated
            else:
                level[rows] = np.cumsum(self.bytes[rows])
        return level

    def partners(self) -> np.ndarray:
        """Per event, the row of its partner (an allocation's free, a free's allocation), or
        NO_ID: the same device and address, next in time order (addresses are reused, so an
        allocation pairs with the first free after it, and that free's address may be handed
        out again). A free of memory allocated before the profile, and memory never freed
        inside it, have none."""
        n = len(self)
        partner = np.full(n, NO_ID, np.int64)
        if n < 2:
            return partner
        order = np.lexsort((np.arange(n), self.addr, self.device))
        first, second = order[:-1], order[1:]
        pair = ((self.device[first] == self.device[second]) & (self.addr[first] == self.addr[second])
                & (self.bytes[first] > 0) & (self.bytes[second] < 0))
        partner[first[pair]] = second[pair]
        partner[second[pair]] = first[pair]
        return partner


def innermost_ops(start_ns, end_ns, thread, parent, time_ns, event_thread) -> np.ndarray:
    """Per memory event, the innermost op of its own thread whose interval holds its time
    (start <= t <= end), or NO_ID. There is no id tying an allocation to its op, and another
    thread's op is running at most moments, so only the same thread counts.

    The op rows are in start order (a Trace's); per thread the last op started at or before t
    is found by binary search, then its parents are climbed while they ended before t."""
    found = np.full(len(time_ns), NO_ID, np.int64)
    if not len(start_ns) or not len(time_ns):
        return found.astype(np.int32)
    by_thread = np.argsort(thread, kind="stable")  # each thread's rows, still in start order
    bounds = np.searchsorted(thread[by_thread], np.arange(thread.max() + 2))
    for lane in np.unique(event_thread[event_thread >= 0]).tolist():
        if lane + 1 >= len(bounds):
            continue
        rows = by_thread[bounds[lane]:bounds[lane + 1]]
        events = np.flatnonzero(event_thread == lane)
        at = np.searchsorted(start_ns[rows], time_ns[events], side="right") - 1
        found[events] = np.where(at >= 0, rows[np.maximum(at, 0)], NO_ID) if len(rows) else NO_ID
    climbing = np.flatnonzero(found >= 0)
    while len(climbing):
        ended = end_ns[found[climbing]] < time_ns[climbing]
        climbing = climbing[ended]
        found[climbing] = parent[found[climbing]]
        climbing = climbing[found[climbing] >= 0]
    return found.astype(np.int32)


def attributed(memory: MemoryEvents, trace) -> MemoryEvents:
    """``memory`` with each event's op found in ``trace`` (see :func:`innermost_ops`)."""
    return memory.with_ops(innermost_ops(trace.start_ns, trace.end_ns, trace.thread, trace.parent,
                                         memory.time_ns, memory.thread))
