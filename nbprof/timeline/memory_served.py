"""The memory lanes past the embedding budget: a reduced level on the page, each view's points
from the kernel, as served.py does for the bars.

A reduced level keeps, per bucket of time, the events that draw it: the first, the last, the
lowest and the highest level and the largest allocation or free; every other event is counted in
the kept event before it (``count``, ``made``, ``freed``: how many events and bytes it stands
for). Drawn as js/memory_lane.js draws events, that is the exact step curve at the bucket's width.
The page carries such a level of the whole trace (EMBEDDED_BUCKETS per device); in a notebook the
browser asks the kernel for the view it settles on (``nbprof_memory_request``: x range, width) and
the kernel answers with that view reduced at its own pixels (``nbprof_memory_answer``), or every
event of it where they are few.
"""

from __future__ import annotations

import math

import numpy as np
from bokeh.models import ColumnDataSource

EMBEDDED_BUCKETS = 2048  # per device on a reduced page: at most 5 points each (~0.6 MB)
KEPT_PER_BUCKET = 5


def _group_arg(values, starts, counts, group_of, reduce) -> np.ndarray:
    """Per contiguous group, the index of its first value equal to ``reduce`` over it."""
    best = reduce.reduceat(values, starts)
    hit = np.flatnonzero(values == np.repeat(best, counts))
    _groups, first = np.unique(group_of[hit], return_index=True)
    return hit[first]


class DevicePoints:
    """One device's events (times in the page's ns, sorted) and what reducing them needs."""

    def __init__(self, t, level, size, name, op):
        self.t, self.level, self.bytes, self.name, self.op = t, level, size, name, op
        zero = np.zeros(1, np.int64)
        self.made_sum = np.concatenate([zero, np.cumsum(np.where(size > 0, size, 0))])
        self.freed_sum = np.concatenate([zero, np.cumsum(np.where(size < 0, -size, 0))])

    def kept(self, lo: int, hi: int, x0: float, x1: float, buckets: int) -> np.ndarray:
        """The rows of [lo, hi) that draw x0..x1 at ``buckets`` px (all of them where few)."""
        if hi - lo <= KEPT_PER_BUCKET * buckets or x1 <= x0:
            return np.arange(lo, hi)
        bucket = np.clip(np.floor((self.t[lo:hi] - x0) * (buckets / (x1 - x0))), -1, buckets)
        starts = np.flatnonzero(np.diff(bucket, prepend=-2))  # t is sorted: buckets are runs
        counts = np.diff(np.r_[starts, hi - lo])
        group_of = np.repeat(np.arange(len(starts)), counts)
        level, size = self.level[lo:hi], np.abs(self.bytes[lo:hi])
        rows = np.concatenate([starts, starts + counts - 1,
                               _group_arg(level, starts, counts, group_of, np.minimum),
                               _group_arg(level, starts, counts, group_of, np.maximum),
                               _group_arg(size, starts, counts, group_of, np.maximum)])
        return np.unique(rows) + lo

    def points(self, rows: np.ndarray, end: int) -> dict:
        """The arrays js/memory_lane.js draws for ``rows``, each kept row standing for the
        events up to the next one (the last: up to ``end``)."""
        upto = np.r_[rows[1:], end] if len(rows) else rows
        return {"t": self.t[rows], "level": self.level[rows].astype(np.float64),
                "bytes": self.bytes[rows].astype(np.float64), "name": self.name[rows],
                "op": self.op[rows], "count": (upto - rows).astype(np.float64),
                "made": (self.made_sum[upto] - self.made_sum[rows]).astype(np.float64),
                "freed": (self.freed_sum[upto] - self.freed_sum[rows]).astype(np.float64)}

    def reduced(self) -> dict:
        """The page's level: the whole trace at EMBEDDED_BUCKETS."""
        n = len(self.t)
        x0, x1 = (float(self.t[0]), float(self.t[-1]) + 1) if n else (0.0, 1.0)
        return self.points(self.kept(0, n, x0, x1, EMBEDDED_BUCKETS), n)

    def view(self, x0: float, x1: float, width: int) -> dict:
        """The view x0..x1 at ``width`` px, with the event before it (the level it starts at)
        and the one after it, as the page's own draw takes them."""
        lo = max(0, int(np.searchsorted(self.t, x0)) - 1)
        hi = min(len(self.t), int(np.searchsorted(self.t, x1)) + 1)
        return self.points(self.kept(lo, hi, x0, x1, width), hi)


class MemoryServed:
    """The kernel's side: answers each view the browser asks for."""

    def __init__(self, devices: list[DevicePoints]):
        self.devices = devices
        self.request = ColumnDataSource({}, name="nbprof_memory_request")
        self.answer_source = ColumnDataSource({}, name="nbprof_memory_answer")
        self.request.on_change("data", lambda _attr, _old, new: self._answer_request(new))
        self._last_key = None

    def _answer_request(self, request: dict) -> None:
        data = self.answer(request)
        if data is not None:
            self.answer_source.data = data

    def answer(self, request: dict) -> dict | None:
        """The answer source's data: one row per device, each column a ragged array; None for
        a repeat (jupyter_bokeh runs a change's callback twice) or a malformed request."""
        try:
            x0, x1 = float(request["x0"][0]), float(request["x1"][0])
            width, key = int(request["width"][0]), str(request["key"][0])
        except (KeyError, IndexError, TypeError, ValueError):
            return None
        if key == self._last_key or not (math.isfinite(x0) and math.isfinite(x1)) or x1 <= x0 \
                or not 0 < width <= 100_000:
            return None
        self._last_key = key
        views = [device.view(x0, x1, width) for device in self.devices]
        return {"key": [key] * len(views), **{field: [view[field] for view in views]
                                              for field in views[0]}}
