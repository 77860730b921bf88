"""What a timeline shows beside the slices: the trace's notes (what loading repaired or left
out), its counters (one step-line row per series, e.g. allocated memory) and its instant events
(thin markers on one row), in a strip under the main plot sharing its time axis.

Plain Bokeh glyphs over small sources: a trace has few counter samples and instants next to
its slices, so none of this goes through the packed columns js/timeline.js reads. All counter
series share one line glyph (and one hover glyph): a file may hold 10,000 series, and a glyph
each took minutes to build. Text from the
file reaches the page only as text: escaped HTML (html_text, in an html_pane: no widget, so a
standalone page needs no widgets bundle), axis labels (canvas) and tooltip fields
(escaped by Bokeh).
"""

from __future__ import annotations

import math

import numpy as np
from bokeh.models import ColumnDataSource, FixedTicker, HoverTool, Range1d
from bokeh.plotting import figure

from ..model import NO_ID, Trace
from .html_text import html_pane, html_text

ROW_PX = 28
COUNTER_COLOR = "#e15759"
INSTANT_COLOR = "#555555"
MAX_NOTES_SHOWN = 8
MAX_STRIP_PX = 2800  # the counters strip's most height: rows shrink past it
MIN_LABEL_PX = 12  # rows thinner than this label only every k-th row
MAX_VLINE_SERIES = 20  # past this many series the hover shows the sample under the mouse


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
    return [html_pane(html_text(f"note: {note}"), name="nbprof_load_note",
                      styles={"margin": "0 5px", "font-size": "12px", "color": "#8a5a00"})
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
    # Rows shrink past MAX_STRIP_PX: a canvas much taller than that is not drawn at all
    row_px = min(ROW_PX, MAX_STRIP_PX / rows)
    strip = figure(x_range=plot.x_range, y_range=Range1d(rows, 0),
                   height=round(row_px * rows) + 30, tools=[], toolbar_location=None,
                   name="nbprof_counters", **size)
    strip.xaxis.visible = False
    strip.xgrid.grid_line_alpha = 0.4
    strip.ygrid.visible = False
    labels = {row + 0.5: _label(counter) for row, counter in enumerate(series)}
    if series:
        # One glyph for every series (a glyph per series took 163 s to build at 10,000): the
        # steps as one line broken by NaN gaps, the samples as one invisible point glyph that
        # the hover reads.
        lines, points = _counter_sources(series, origin)
        strip.line(x="x", y="y", source=lines, line_color=COUNTER_COLOR, line_width=1.5,
                   name="nbprof_counter")
        samples = strip.scatter(x="x", y="y", source=points, size=6, alpha=0,
                                name="nbprof_counter_samples")
        # a vertical line hits a sample of every series: with many, only the one under the mouse
        strip.add_tools(HoverTool(tooltips=[("counter", "@name"), ("value", "@value")],
                                  renderers=[samples],
                                  mode="vline" if len(series) <= MAX_VLINE_SERIES else "mouse"))
    if has_instants:
        row = len(series)
        labels[row + 0.5] = "instant events"
        marks = strip.segment(x0="x", x1="x", y0=row + 0.1, y1=row + 0.9,
                              source=_instant_source(trace, origin), line_color=INSTANT_COLOR,
                              line_width=1.5)
        strip.add_tools(HoverTool(tooltips=[("instant", "@name"), ("on", "@where")],
                                  renderers=[marks]))
    every = max(1, math.ceil(MIN_LABEL_PX / row_px))  # labels that would overlap: every k-th
    ticks = list(labels)[::every]
    strip.yaxis.ticker = FixedTicker(ticks=ticks)
    strip.yaxis.major_label_overrides = {tick: labels[tick] for tick in ticks}
    strip.yaxis.major_label_text_font_size = "11px"
    return [strip]


def _label(counter) -> str:
    name = counter.name if counter.series in (counter.name, "value", "") else \
        f"{counter.name}.{counter.series}"
    return f"{name} (pid {counter.pid})" if counter.pid != NO_ID else name


def _counter_sources(series: list, origin: int) -> tuple[ColumnDataSource, ColumnDataSource]:
    """Every series' step line in one source (a NaN between two series breaks the line) and
    every sample in another (x, y, value, name). Each series is scaled into its row: its top is
    its largest value, its bottom the smallest, or zero when all are positive, as memory is."""
    xs, ys, point_x, point_y, values, names = [], [], [], [], [], []
    gap = np.array([np.nan])
    for row, counter in enumerate(series):
        x = (counter.time_ns - origin).astype(np.float64)
        value = counter.values
        low = min(float(value.min()), 0.0)
        y = row + 0.9 - 0.8 * (value - low) / ((float(value.max()) - low) or 1.0)
        # a value holds until the next sample: (t0, v0) (t1, v0) (t1, v1) ... (tn, vn)
        xs += [np.repeat(x, 2)[1:], gap]
        ys += [np.repeat(y, 2)[:-1], gap]
        point_x.append(x)
        point_y.append(y)
        values.append(value)
        names += [_label(counter)] * len(value)
    lines = ColumnDataSource({"x": np.concatenate(xs[:-1]), "y": np.concatenate(ys[:-1])})
    points = ColumnDataSource({"x": np.concatenate(point_x), "y": np.concatenate(point_y),
                               "value": np.concatenate(values), "name": names})
    return lines, points


def _instant_source(trace: Trace, origin: int) -> ColumnDataSource:
    instants = trace.instants
    names = [thread.name for thread in trace.threads]
    return ColumnDataSource({
        "x": (instants.time_ns - origin).astype(np.float64),
        "name": list(instants.name),
        "where": [names[t] if 0 <= t < len(names) else "whole trace"
                  for t in instants.thread.tolist()]})
