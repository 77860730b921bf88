"""The memory lanes: under the threads, a row per device ("CPU", "cuda:0") with its level as a
step curve sharing the main plot's time axis, the peak marked.

The events stay in the page as typed arrays (time, level, bytes, op) and js/memory_lane.js draws
only the view, a pixel's worth of events as one stroke, as the bars do: a million allocations cost
what a view's width of points costs. Hovering a point gives the level and the allocation (or, for
a merged pixel, how many events and their bytes); a click selects the op that allocated.
Names from the trace reach the page only as tooltip fields (escaped by Bokeh). Past the
embedding budget the page carries a reduced level and the kernel serves each view
(memory_served.py).
"""

from __future__ import annotations

import numpy as np
from bokeh.models import (ColumnDataSource, CustomJS, FixedTicker, HoverTool, Range1d, TapTool)
from bokeh.plotting import figure

from ..analysis.memory import format_bytes, peaks
from ..model import NO_ID, Trace, device_name
from .jsfiles import read_js
from .memory_served import EMBEDDED_BUCKETS, DevicePoints, MemoryServed

ROW_PX = 56
BLOCK = 32  # events per precomputed block: a merged pixel reads its whole blocks at once
LINE_COLOR = "#4e79a7"
PEAK_COLOR = "#e15759"


def _blocks(level: np.ndarray, size: np.ndarray) -> dict:
    """Per BLOCK events (the whole blocks only): lowest and highest level, bytes made and
    freed, and the position of the largest event, for js/memory_lane.js's merged pixels."""
    whole = len(level) // BLOCK * BLOCK
    level, size = level[:whole].reshape(-1, BLOCK), size[:whole].reshape(-1, BLOCK)
    big = np.argmax(np.abs(size), axis=1) + np.arange(len(size)) * BLOCK
    return {"block": BLOCK, "block_lo": level.min(axis=1).astype(np.float64),
            "block_hi": level.max(axis=1).astype(np.float64),
            "block_made": np.where(size > 0, size, 0).sum(axis=1).astype(np.float64),
            "block_freed": np.where(size < 0, -size, 0).sum(axis=1).astype(np.float64),
            "block_big": big.astype(np.int32)}


def memory_strip(trace: Trace, plot, size: dict, selection, origin_ns: int,
                 reduce: bool = False):
    """The strip (a figure) and its CustomJS (to run at document ready), or (None, None) when
    the trace recorded no memory. ``reduce``: the page carries a reduced level and the kernel
    serves each view (memory_served.py), as for a page past its embedding budget."""
    memory = trace.memory
    if not len(memory):
        return None, None
    level = memory.levels()
    found = peaks(trace)
    used, name_index = np.unique(np.where(memory.op >= 0, trace.name_id[np.maximum(memory.op, 0)]
                                          if len(trace) else NO_ID, NO_ID), return_inverse=True)
    name_index = name_index.reshape(-1) - int(used[0] < 0 if len(used) else 0)
    names = [trace.names[i] for i in used.tolist() if i >= 0]
    devices, labels, peak_x, peak_y, peak_text, served = [], {}, [], [], [], []
    for row, (device, at, peak) in enumerate(found):
        rows = np.flatnonzero(memory.device == device)
        label = device_name(device, trace.meta)
        labels[row + 0.5] = f"memory {label}"
        events = DevicePoints((memory.time_ns[rows] - origin_ns).astype(np.float64), level[rows],
                              memory.bytes[rows], name_index[rows].astype(np.int32),
                              memory.op[rows].astype(np.int32))
        served.append(events)
        drawn = events.reduced() if reduce else {
            "t": events.t, "level": level[rows].astype(np.float64),
            "bytes": memory.bytes[rows].astype(np.float64), "name": events.name, "op": events.op,
            **_blocks(level[rows], memory.bytes[rows])}
        devices.append({**drawn, "row": row, "peak": float(max(peak, 1)), "label": label})
        peak_x.append(float(memory.time_ns[at] - origin_ns))
        peak_y.append(row + 0.1)
        peak_text.append(f"peak {format_bytes(peak)}")
    strip = figure(x_range=plot.x_range, y_range=Range1d(len(found), 0),
                   height=ROW_PX * len(found) + 30, tools=[], toolbar_location=None,
                   name="nbprof_memory", **size)
    strip.xaxis.visible = False
    strip.xgrid.grid_line_alpha = 0.4
    strip.ygrid.visible = False
    line = ColumnDataSource({"x": [], "y": []}, name="nbprof_memory_line")
    points = ColumnDataSource({"x": [], "y": [], "level": [], "what": [], "op": [], "device": []},
                              name="nbprof_memory_points")
    strip.line(x="x", y="y", source=line, line_color=LINE_COLOR, line_width=1.5)
    dots = strip.scatter(x="x", y="y", source=points, size=4, color=LINE_COLOR, alpha=0.5,
                         name="nbprof_memory_dots")
    peak_source = ColumnDataSource({"x": peak_x, "y": peak_y, "text": peak_text},
                                   name="nbprof_memory_peak")
    strip.scatter(x="x", y="y", source=peak_source, marker="inverted_triangle", size=10,
                  color=PEAK_COLOR)
    strip.text(x="x", y="y", text="text", source=peak_source, text_font_size="11px",
               text_color=PEAK_COLOR, x_offset=8, text_baseline="middle")
    strip.add_tools(HoverTool(tooltips=[("device", "@device"), ("level", "@level"),
                                        ("allocation", "@what")], renderers=[dots]),
                    TapTool(renderers=[dots]))
    strip.yaxis.ticker = FixedTicker(ticks=list(labels))
    strip.yaxis.major_label_overrides = labels
    strip.yaxis.major_label_text_font_size = "11px"
    if reduce:
        server = MemoryServed(served)
        strip.title.text = (f"memory: {len(memory):,} events shown at {EMBEDDED_BUCKETS:,} steps "
                            "per device; in a notebook the kernel draws each event of the view "
                            "you stop at")
    request, answer = (server.request, server.answer_source) if reduce else \
        (ColumnDataSource({}), ColumnDataSource({}))
    callback = CustomJS(code=read_js("memory_lane.js"), args=dict(
        devices=devices, names=names, x_range=plot.x_range, plot=plot, line=line, points=points,
        selection=selection, request=request, answer=answer))
    plot.x_range.js_on_change("start", callback)
    plot.x_range.js_on_change("end", callback)
    points.selected.js_on_change("indices", callback)
    answer.js_on_change("data", callback)
    return strip, callback
