"""What a timeline shows beside the slices: the trace's notes (what loading repaired or left
out), its counters (one step-line row per series, e.g. allocated memory) and its instant events
(thin markers on one row), in a strip under the main plot sharing its time axis.

Plain Bokeh glyphs over small sources: a trace has few counter samples and instants next to
its slices, so none of this goes through the packed columns js/timeline.js reads. Text from the
file reaches the page only as text: Paragraph (no HTML), axis labels (canvas) and tooltip fields
(escaped by Bokeh).
"""

from __future__ import annotations

import numpy as np
from bokeh.models import (ColumnDataSource, FixedTicker, HoverTool, Paragraph, Range1d)
from bokeh.plotting import figure

from ..model import NO_ID, Trace

ROW_PX = 28
COUNTER_COLOR = "#e15759"
INSTANT_COLOR = "#555555"
MAX_NOTES_SHOWN = 8


def extra_rows(trace: Trace, plot, size: dict) -> tuple[list, list]:
    """Models for above the main plot (the notes) and below it (the counters and instants
    strip, None of either when the trace has none)."""
    return _notes(trace), _strip(trace, plot, size)


def _notes(trace: Trace) -> list:
    notes = [str(note) for note in trace.meta.get("notes") or ()]
    if not notes:
        return []
    shown = notes[:MAX_NOTES_SHOWN]
    if len(notes) > len(shown):
        shown.append(f"... and {len(notes) - len(shown)} more notes in trace.meta['notes']")
    return [Paragraph(text=f"note: {note}", name="nbprof_load_note",
                      styles={"margin": "0", "font-size": "12px", "color": "#8a5a00"})
            for note in shown]


def _origin_ns(trace: Trace) -> int:
    # The main plot's x is ns from the trace's first slice (data.encode_events).
    starts = np.concatenate([trace.start_ns, trace.gpu_start_ns])
    return int(starts.min()) if len(starts) else 0


def _strip(trace: Trace, plot, size: dict) -> list:
    series = [s for s in trace.counters if len(s.time_ns)]
    has_instants = len(trace.instants) > 0
    rows = len(series) + has_instants
    if not rows:
        return []
    origin = _origin_ns(trace)
    strip = figure(x_range=plot.x_range, y_range=Range1d(rows, 0), height=ROW_PX * rows + 30,
                   tools=[], toolbar_location=None, name="nbprof_counters", **size)
    strip.xaxis.visible = False
    strip.xgrid.grid_line_alpha = 0.4
    strip.ygrid.visible = False
    labels = {}
    for row, counter in enumerate(series):
        labels[row + 0.5] = _label(counter)
        strip.step(x="x", y="y", mode="after", source=_counter_source(counter, row, origin),
                   line_color=COUNTER_COLOR, line_width=1.5, name="nbprof_counter")
    if series:
        strip.add_tools(HoverTool(tooltips=[("counter", "@name"), ("value", "@value")],
                                  renderers=strip.select({"name": "nbprof_counter"}),
                                  mode="vline"))
    if has_instants:
        row = len(series)
        labels[row + 0.5] = "instant events"
        marks = strip.segment(x0="x", x1="x", y0=row + 0.1, y1=row + 0.9,
                              source=_instant_source(trace, origin), line_color=INSTANT_COLOR,
                              line_width=1.5)
        strip.add_tools(HoverTool(tooltips=[("instant", "@name"), ("on", "@where")],
                                  renderers=[marks]))
    strip.yaxis.ticker = FixedTicker(ticks=list(labels))
    strip.yaxis.major_label_overrides = labels
    strip.yaxis.major_label_text_font_size = "11px"
    return [strip]


def _label(counter) -> str:
    name = counter.name if counter.series in (counter.name, "value", "") else \
        f"{counter.name}.{counter.series}"
    return f"{name} (pid {counter.pid})" if counter.pid != NO_ID else name


def _counter_source(counter, row: int, origin: int) -> ColumnDataSource:
    """The samples scaled into the row (its top is the series' largest value, its bottom
    the smallest, or zero when all are positive, as memory is)."""
    values = counter.values
    low = min(float(values.min()), 0.0)
    high = float(values.max())
    scale = (high - low) or 1.0
    return ColumnDataSource({
        "x": (counter.time_ns - origin).astype(np.float64),
        "y": row + 0.9 - 0.8 * (values - low) / scale,
        "value": values, "name": [_label(counter)] * len(values)})


def _instant_source(trace: Trace, origin: int) -> ColumnDataSource:
    instants = trace.instants
    names = [thread.name for thread in trace.threads]
    return ColumnDataSource({
        "x": (instants.time_ns - origin).astype(np.float64),
        "name": list(instants.name),
        "where": [names[t] if 0 <= t < len(names) else "whole trace"
                  for t in instants.thread.tolist()]})
