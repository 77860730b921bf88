"""What ran in a time range, per name, as Perfetto's area selection summarises it: how many events
overlap the range and how much of their time lies inside it (each event clipped to the range),
CPU events and GPU intervals apart. Pure: numpy over a Trace's columns, no torch, bokeh or IPython."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..model import Trace

TOP = 15


class RangeRow(NamedTuple):
    name: str
    count: int  # events (or GPU intervals) of this name that overlap the range
    inside_ns: int  # their time inside the range, summed (nested events each count)


class RangeSide(NamedTuple):
    rows: list[RangeRow]  # the names with most time inside, at most ``top``
    events: int  # every event that overlaps the range
    names: int  # distinct names among them (more than len(rows) when cut)
    inside_ns: int  # all their time inside the range


class RangeSummary(NamedTuple):
    start_ns: int  # the range, in the trace's own times (its columns')
    end_ns: int
    cpu: RangeSide
    gpu: RangeSide


def range_summary(trace: Trace, start_ns: int, end_ns: int, top: int = TOP, *,
                  cpu_shown=None, gpu_shown=None) -> RangeSummary:
    """Per name, count and time inside ``start_ns``..``end_ns`` (the trace's own times), CPU and
    GPU separately, the ``top`` names with most time first (ties: more events, then by name).
    ``cpu_shown`` / ``gpu_shown``: bool per event / GPU interval, what the timeline shows (its
    lane filter); None counts all."""
    start_ns, end_ns = int(start_ns), int(end_ns)
    if end_ns < start_ns:
        start_ns, end_ns = end_ns, start_ns  # a drag from right to left
    cpu = _side(trace.names, trace.start_ns, trace.end_ns, trace.name_id, start_ns, end_ns, top,
                cpu_shown)
    gpu = _side(trace.names, trace.gpu_start_ns, trace.gpu_end_ns, trace.gpu_name_id, start_ns,
                end_ns, top, gpu_shown)
    return RangeSummary(start_ns, end_ns, cpu, gpu)


def _side(names, starts, ends, name_ids, start_ns: int, end_ns: int, top: int,
          shown) -> RangeSide:
    overlap = (starts < end_ns) & (ends > start_ns)
    # an instant (zero-length) event counts where it lies in the range, edges included
    overlap |= (starts == ends) & (starts >= start_ns) & (starts <= end_ns)
    if shown is not None:
        overlap &= np.asarray(shown, bool)
    inside = np.minimum(ends[overlap], end_ns) - np.maximum(starts[overlap], start_ns)
    ids = name_ids[overlap]
    count = np.bincount(ids, minlength=len(names))
    # float64 sums are exact to 2**53 ns (104 days) of time inside: far beyond any trace
    total = np.rint(np.bincount(ids, weights=inside, minlength=len(names))).astype(np.int64)
    present = np.flatnonzero(count)
    order = sorted(present.tolist(), key=lambda i: (-int(total[i]), -int(count[i]), names[i]))
    rows = [RangeRow(names[i], int(count[i]), int(total[i])) for i in order[:top]]
    return RangeSide(rows, int(overlap.sum()), len(present), int(inside.sum()))
