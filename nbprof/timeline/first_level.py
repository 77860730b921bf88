"""The first level of a big page: the whole trace's bars at a fine fixed resolution, drawn while
the events decode.

A page that embeds a million events spent ~0.3 s of its first second in the browser inflating and
decoding all of them and sweeping them twice (view and overview), to draw ~7,000 bars
(bench/RESULTS.md, issue 22). A page of at least FIRST_LEVEL_MIN_EVENTS events also carries the
bars of the whole trace swept at FIRST_LEVEL_PX "pixels" across it (sweep.py's rule, packed as a
served page's level: served.BarsEncoder), a few thousand entries. The browser draws every view at
least as coarse as that level from it (js/timeline_served.js, as a served page does), so the
first view and the overview cost a sweep over those bars; the events themselves decode after the
first view is painted, a few milliseconds at a time, and a view finer than the level, a tap, a
hover or a search mark waits for them (or decodes what is left at once).
"""

from __future__ import annotations

from ..model import Trace
from .lanes import Lanes
from .served import BarsEncoder
from .sweep import row_columns, view_bars

# Below this many events the page decodes them all before its first view (~20 ms at 45k).
FIRST_LEVEL_MIN_EVENTS = 200_000
# "Pixels" across the whole trace: views narrower than span / FIRST_LEVEL_PX ns per pixel read
# the events. 8192 is at least twice the width of a 4K screen's plot showing the whole trace.
FIRST_LEVEL_PX = 8192
# A level with more bars than this fraction of the events is not worth its bytes.
MOST_BARS_PER_EVENT = 1 / 8


def first_level(trace: Trace, lanes: Lanes) -> dict | None:
    """The page's first level (packed entries, their layout, the ns per pixel it was swept at),
    or None for a page that decodes its events before its first view."""
    events = len(trace) + len(trace.gpu_start_ns)
    if events < FIRST_LEVEL_MIN_EVENTS:
        return None
    columns = row_columns(trace, lanes)
    if columns.span_ns < FIRST_LEVEL_PX:
        return None
    bars = view_bars(columns, 0, columns.span_ns, FIRST_LEVEL_PX)
    if len(bars) > MOST_BARS_PER_EVENT * events:
        return None
    packed, meta = BarsEncoder(trace, lanes, columns).encode(bars)
    return {"packed": packed, "meta": meta, "ns_per_px": columns.span_ns / FIRST_LEVEL_PX}
