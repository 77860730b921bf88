"""Trace -> interactive Bokeh timeline (the only package that builds Bokeh models).

Interface (the notebook widget builds on it)::

    tl = Timeline(trace, height=None, width=None,   # height None: follows the lanes
                  max_embedded_events=5_000_000) # past it: coarse levels, the kernel serves views
    tl.layout            # the Bokeh root (a column: note, main plot, overview strip) to show or save
    tl.lanes             # full lane names in display order, unique: "pid 1234 · MainThread (1234)",
                         # "GPU 0 stream 7" (a merged job's start "rank N · "); set_filter takes them
    tl.lane_labels       # what the y axis shows for each: "main thread", "GPU 0 · stream 7"
    tl.lane_groups       # each lane's group ("pid 1234", "rank 0 · GPU 0"): the lane filter's rows
                         # and the plot's collapsible group headers
    tl.highlight(ids, gpu_rows=())  # outline these CPU event ids and GPU rows (empty clears); each
                                    # is also a tick on the overview strip
    tl.set_filter(lanes=None, min_duration_ns=0)  # show only these lanes / events at least this long
    tl.select(event_id, kind="cpu")               # select an event and draw its links; None clears
    tl.selection         # ColumnDataSource {"event_id": [...], "kind": ["cpu"|"gpu"]}: a tap in
                         # the browser sets it, so selection.on_change("data", cb) sees clicks. The
                         # first row is what was clicked; a runtime call's kernels follow it.
    tl.area_selection    # ColumnDataSource {"start_ns": [s], "end_ns": [e]} (the trace's own
                         # times), named "nbprof_area_selection": Shift+drag or the box select
                         # tool sets it; empty lists once cleared (Esc, a click on no bar)
    tl.show_range(start_ns, end_ns)               # zoom the x axis to exactly this range
    tl.bring_into_view(start_ns, end_ns)          # a search match as a bar with its name: nothing
                         # moves where it already is one in view, else centre on it at 4x its
                         # length (sets x_range; the browser checks again with its real width)
    tl.plot, tl.overview, tl.rendered              # the main figure, the strip, what is drawn now
    timeline(trace, **kw) -> tl.layout
    save_html(trace, path, title=None, **Timeline options) -> path  # standalone page, works offline
    tl.save(path, title=None) -> path             # the same for this Timeline, as it is now

highlight/set_filter/select/bring_into_view only change ColumnDataSource data that js/timeline*.js
listens to, so they work live (jupyter_bokeh syncs them) and in saved pages, without rebuilding
the figure. ``plot.tags`` gains "nbprof-ready" once the browser has drawn the first view (a big
page's events may still be decoding then: first_level.py).

In the browser: plain wheel scrolls the page; Ctrl/⌘+wheel (and pinch) zooms x, Shift+wheel pans;
Alt+wheel zooms the lanes in y (lanes cut to fit grow back; Alt+Shift+wheel scrolls them, reset
undoes it); with the plot focused W/S zoom, A/D and the arrows pan, Esc clears the selection; box
zoom changes x only; a click on a group header's label collapses or expands its lanes. Bars at least 30 px wide
carry their name, cut with "…" to fit; a merged block says "12 events, mostly aten::mm". A
merged block covers at most 4 px (a grid of power-of-two ns columns, 2-4 px), shaded by how much of it its events
cover: a dense lane shows its density and gaps at any zoom; a run of blocks is named as one.

How it stays fluid at a million events: every event is packed into one compact hidden blob (varint
columns, zlib, base64; see packing.py); on each x-range change the browser sweeps only the rows in
view and fills a small source with real events (at least 3 px wide) and per-row busy blocks of
narrower ones; the rest never becomes a glyph. A page of 200k events or more also carries its whole-trace bars at a fine level
(first_level.py): it opens on them, and decodes its events after that first view, a few ms at a
time.

Imports the analysis, ranks, formats and model packages; never the notebook, the CLI or IPython.
"""

from __future__ import annotations

import pathlib
import sys
import types

from .view import Timeline

__all__ = ["Timeline", "timeline", "save_html"]


def timeline(trace, **kwargs):
    """The Bokeh layout of a timeline of ``trace`` (see :class:`Timeline` for the options)."""
    return Timeline(trace, **kwargs).layout


def save_html(trace, path, *, title: str | None = None, **kwargs) -> pathlib.Path:
    """Write ``trace``'s timeline as one standalone HTML page (BokehJS inline: opens offline)."""
    return Timeline(trace, **kwargs).save(path, title=title)


class _CallableModule(types.ModuleType):
    # `nbprof.timeline` names both this package and the function: once anything imports the
    # package (``from nbprof.timeline import Timeline``), Python sets the attribute nbprof.timeline
    # to the module, hiding the function. Calling the module calls the function, so
    # ``nbprof.timeline(trace)`` works whatever was imported first.
    def __call__(self, trace, **kwargs):
        return timeline(trace, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
