"""The first level of a big page: the whole trace's bars at a fine fixed resolution, drawn while
the events decode.

A page that embeds a million events spent ~0.3 s of its first second in the browser inflating and
decoding all of them and sweeping them twice (view and overview), to draw ~3,000 bars
(bench/RESULTS.md, issue 22). A page of at least FIRST_LEVEL_MIN_EVENTS events also carries the
bars of the whole trace swept at FIRST_LEVEL_PX or more "pixels" across it (sweep.py's rule,
packed as a served page's level: served.BarsEncoder), a few thousand entries. Opening on the whole
trace, the browser draws the first view and the overview from them: the same bars as from the
events (its "pixels" are a power of two ns, as the blocks' columns are), at the cost of a sweep
over those few thousand (js/timeline_served.js). The events decode after the first view is
painted, a few milliseconds at a time; every view after that is drawn from them, and one asked for
meanwhile that the level does not draw exactly (narrower than the whole trace, finer than the
level, a minimum duration) is drawn again once they are in.
"""

from __future__ import annotations

import math

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
    # a power of two ns per pixel: every coarser view's block columns split where the level's
    # do (sweep.block_column_ns), so its blocks are the ones the events would give
    ns_per_px = 2.0 ** math.floor(math.log2(columns.span_ns / FIRST_LEVEL_PX))
    bars = view_bars(columns, 0, columns.span_ns, columns.span_ns / ns_per_px)
    if len(bars) > MOST_BARS_PER_EVENT * events:
        return None
    # uncompressed: the browser reads it at once (its inflate would wait on later tasks, and a
    # few hundred kB of base64 more cost less)
    packed, meta = BarsEncoder(trace, lanes, columns).encode(bars, compress=False)
    return {"packed": packed, "meta": meta, "ns_per_px": ns_per_px}
