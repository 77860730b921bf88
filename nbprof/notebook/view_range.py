"""Events and the timeline's view, for the search arrows and the details links. Times are the
trace's own (its columns'); the x axis counts from ``origin_ns`` (details.timeline_origin_ns)."""

from __future__ import annotations

import numpy as np


def event_interval(trace, row: int, kind: str) -> tuple[int, int]:
    """A CPU event's (kind "cpu") or GPU interval's ("gpu") start and end."""
    if kind == "gpu":
        return int(trace.gpu_start_ns[row]), int(trace.gpu_end_ns[row])
    return int(trace.start_ns[row]), int(trace.end_ns[row])


def count_in_view(trace, timeline, origin_ns: int, event_ids, gpu_rows) -> int:
    """How many of these CPU events and GPU intervals overlap the range in view. The browser sends
    each zoom and pan to the kernel (jupyter_bokeh), so x_range is the user's view."""
    x_range = timeline.plot.x_range
    low, high = x_range.start + origin_ns, x_range.end + origin_ns
    return int(np.count_nonzero((trace.start_ns[event_ids] < high) & (trace.end_ns[event_ids] > low))
               + np.count_nonzero((trace.gpu_start_ns[gpu_rows] < high)
                                  & (trace.gpu_end_ns[gpu_rows] > low)))


def outline_and_show(timeline, starts: np.ndarray, ends: np.ndarray, event_ids=(), gpu_rows=()) -> None:
    """Outline these events (a table row's) and zoom to all of them: one as its own bar
    (bring_into_view), several from the first's start to the last's end with a little room."""
    if not len(starts):
        return
    timeline.highlight(event_ids, gpu_rows)
    start, end = int(starts.min()), int(ends.max())
    if len(starts) == 1:
        timeline.bring_into_view(start, end)
    else:
        pad = max((end - start) // 50, 1)
        timeline.show_range(start - pad, end + pad)
