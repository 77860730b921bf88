"""Moving the timeline's view onto events, for the search arrows and the details links. Times are
the trace's own (its columns'); the x axis counts from ``origin_ns`` (details.timeline_origin_ns)."""

from __future__ import annotations

import numpy as np

MIN_ZOOM_NS = 2_000  # zooming onto a 50 ns event shows 2 µs around it, not a blur of one bar


def event_interval(trace, row: int, kind: str) -> tuple[int, int]:
    """A CPU event's (kind "cpu") or GPU interval's ("gpu") start and end."""
    if kind == "gpu":
        return int(trace.gpu_start_ns[row]), int(trace.gpu_end_ns[row])
    return int(trace.start_ns[row]), int(trace.end_ns[row])


def is_in_view(timeline, origin_ns: int, start_ns: int, end_ns: int) -> bool:
    x_range = timeline.plot.x_range
    return start_ns - origin_ns < x_range.end and end_ns - origin_ns > x_range.start


def count_in_view(trace, timeline, origin_ns: int, event_ids, gpu_rows) -> int:
    """How many of these CPU events and GPU intervals overlap the range in view. The browser sends
    each zoom and pan to the kernel (jupyter_bokeh), so x_range is the user's view."""
    x_range = timeline.plot.x_range
    low, high = x_range.start + origin_ns, x_range.end + origin_ns
    return int(np.count_nonzero((trace.start_ns[event_ids] < high) & (trace.end_ns[event_ids] > low))
               + np.count_nonzero((trace.gpu_start_ns[gpu_rows] < high)
                                  & (trace.gpu_end_ns[gpu_rows] > low)))


def zoom_to(timeline, start_ns: int, end_ns: int) -> None:
    """Zoom onto an event: the timeline's own ``bring_into_view`` where it has one (the timeline
    package adds it), else a view three times the event's width around it."""
    bring_into_view = getattr(timeline, "bring_into_view", None)
    if bring_into_view is not None:
        bring_into_view(int(start_ns), int(end_ns))
        return
    width = max(3 * (end_ns - start_ns), MIN_ZOOM_NS)
    middle = (start_ns + end_ns) // 2
    timeline.show_range(middle - width // 2, middle + width // 2)


def pan_to(timeline, origin_ns: int, start_ns: int, end_ns: int) -> None:
    """Pan (keeping the zoom) so the interval is in view; zoom out if it is wider than the view."""
    x_range = timeline.plot.x_range
    start, end = start_ns - origin_ns, end_ns - origin_ns
    width = max(x_range.end - x_range.start, (end - start) * 1.2)
    middle = (start + end) / 2
    x_range.update(start=middle - width / 2, end=middle + width / 2)
