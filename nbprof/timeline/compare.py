"""The Compare tab's figure: two runs one above the other on one time axis, each step aligned at
its start (step k of both runs begins at the same x), ops and GPU work coloured by how their
op changed (analysis/diff.py compare): slower, faster, added (after) / removed (before), same.

A plain Bokeh figure, not the Timeline: to compare shapes it draws the outer levels only (CPU ops
at depth < ``depth`` on each thread, one GPU row per run) and at most ``max_bars`` bars per run,
the longest, so two big traces stay a small page."""

from __future__ import annotations

import numpy as np
from bokeh.models import ColumnDataSource, HoverTool, Legend, LegendItem, Range1d
from bokeh.plotting import figure

from ..analysis.steps import find_steps
from ..analysis.diff import STATUSES
from .html_text import html_pane, html_text

STATUS_COLORS = {"slower": "#d62728", "faster": "#2ca02c", "added": "#ff7f0e",
                 "removed": "#9467bd", "same": "#c7c7c7"}


def aligned_offsets(before, after) -> tuple[list, list, np.ndarray]:
    """Both runs' steps and, per step index, where it starts on the shared axis (ns): step k
    begins after the longer of the two runs' step k-1."""
    windows = [find_steps(before), find_steps(after)]
    if any(w.source == "whole trace" for w in windows):
        windows = [_whole(t) for t in (before, after)]
    count = max(len(w) for w in windows)
    longest = np.zeros(count, np.int64)
    for w in windows:
        longest[:len(w)] = np.maximum(longest[:len(w)], w.end_ns - w.start_ns)
    return windows[0], windows[1], np.concatenate([[0], np.cumsum(longest)[:-1]]) if count else longest


def _whole(trace):
    from ..analysis.steps import StepWindows

    starts = [a.min() for a in (trace.start_ns, trace.gpu_start_ns) if len(a)] or [0]
    ends = [a.max() for a in (trace.end_ns, trace.gpu_end_ns) if len(a)] or [0]
    return StepWindows(["whole trace"], np.array([min(starts)]), np.array([max(ends)]),
                       "whole trace", np.zeros(0, np.int64))


def _bars(trace, windows, offsets, status, row_base: int, depth: int, max_bars: int, run: str):
    """Bars of one run: (left, right, row, status) on the aligned axis."""
    step = windows.of_times(trace.start_ns)
    cpu = np.flatnonzero((trace.depth < depth) & (step >= 0))
    threads, thread_row = np.unique(trace.thread[cpu], return_inverse=True)
    # a row per thread and depth that holds a bar: no empty lanes
    used, rows = np.unique(thread_row.reshape(-1) * depth + trace.depth[cpu], return_inverse=True)
    rows = rows.reshape(-1)
    shift = offsets[step[cpu]] - windows.start_ns[step[cpu]]
    left, right = trace.start_ns[cpu] + shift, trace.end_ns[cpu] + shift
    names = [trace.names[i] for i in trace.name_id[cpu]]
    codes = status[cpu]
    gpu_row = len(used)  # a GPU row only for a run that has GPU work in its steps
    launch = trace.gpu_launch
    has = launch >= 0
    gpu_step = np.where(has, step[np.maximum(launch, 0)] if len(trace) else -1,
                        windows.of_times(trace.gpu_start_ns))
    gpu = np.flatnonzero(gpu_step >= 0)
    gpu_shift = offsets[gpu_step[gpu]] - windows.start_ns[gpu_step[gpu]]
    gpu_codes = np.where(has[gpu], status[np.maximum(launch[gpu], 0)] if len(trace) else 0,
                         STATUSES.index("same"))
    left = np.concatenate([left, trace.gpu_start_ns[gpu] + gpu_shift])
    right = np.concatenate([right, trace.gpu_end_ns[gpu] + gpu_shift])
    rows = np.concatenate([rows, np.full(len(gpu), gpu_row)])
    codes = np.concatenate([codes, gpu_codes])
    names += [trace.names[i] for i in trace.gpu_name_id[gpu]]
    keep = np.argsort(-(right - left), kind="stable")[:max_bars]
    labels = [f"{run} · {trace.threads[threads[row // depth]].name}"
              + (f" · depth {row % depth}" if row % depth else "") for row in used.tolist()]
    labels += [f"{run} · GPU"] * bool(len(gpu))
    # ms on the axis
    return {"left": left[keep] / 1e6, "right": right[keep] / 1e6, "bottom": rows[keep] + row_base + 0.1,
            "top": rows[keep] + row_base + 0.9, "status": [STATUSES[c] for c in codes[keep]],
            "color": [STATUS_COLORS[STATUSES[c]] for c in codes[keep]],
            "name": [names[i] for i in keep.tolist()], "run": [run] * len(keep),
            "dur_us": (right - left)[keep] / 1e3}, labels


# Names in bars, fitted to each bar's width in the whole view (zooming in only widens the bars).
NAME_FONT_PX, CHAR_PX, ASSUMED_WIDTH_PX, MIN_NAMED_PX = 10, 6.0, 900, 36
NAME_ON_DARK = {"slower", "faster", "removed"}  # white names on these colours, dark on the others


def bar_names(data: dict, span: float) -> dict:
    """Text glyph columns: each bar wide enough for a few characters, its name cut to fit."""
    out = {"x": [], "y": [], "text": [], "color": []}
    px_per_unit = ASSUMED_WIDTH_PX / max(span, 1e-12)
    for i, name in enumerate(data["name"]):
        chars = int(((data["right"][i] - data["left"][i]) * px_per_unit - 6) / CHAR_PX)
        if chars * CHAR_PX < MIN_NAMED_PX - 6:
            continue
        out["x"].append(float(data["left"][i] + data["right"][i]) / 2)
        out["y"].append(float(data["bottom"][i] + data["top"][i]) / 2)
        out["text"].append(name if len(name) <= chars else name[:chars - 1] + "…")
        out["color"].append("#ffffff" if data["status"][i] in NAME_ON_DARK else "#222222")
    return out


def comparison_figure(before, after, comparison, *, depth: int = 3, max_bars: int = 20_000,
                      width: int | None = None):
    """(figure, source): before above after on a shared axis, steps aligned at their starts."""
    first, second, offsets = aligned_offsets(before, after)
    top, top_labels = _bars(before, first, offsets, comparison.before_status, 0, depth, max_bars, "before")
    bottom, bottom_labels = _bars(after, second, offsets, comparison.after_status, len(top_labels),
                                  depth, max_bars, "after")
    data = {key: top[key] + bottom[key] if isinstance(top[key], list) else
            np.concatenate([top[key], bottom[key]]) for key in top}
    source = ColumnDataSource(data, name="nbprof_compare_bars")
    labels = top_labels + bottom_labels
    span = float(data["right"].max()) if len(data["right"]) else 1.0
    size = {"width": width} if width else {"sizing_mode": "stretch_width"}
    plot = figure(x_range=Range1d(0, span), y_range=Range1d(len(labels), 0),
                  height=min(120 + 22 * len(labels), 560), tools="xpan,xwheel_zoom,reset",
                  active_scroll="xwheel_zoom", name="nbprof_compare_plot", **size)
    quads = plot.quad(left="left", right="right", bottom="bottom", top="top", color="color",
                      line_color=None, source=source)
    plot.text(source=ColumnDataSource(bar_names(data, span), name="nbprof_compare_names"),
              x="x", y="y", text="text", text_color="color", text_align="center",
              text_baseline="middle", text_font_size=f"{NAME_FONT_PX}px")
    for boundary in (offsets[1:] / 1e6).tolist():  # where each aligned step begins
        plot.ray(x=boundary, y=0, length=len(labels), angle=-np.pi / 2, color="#888888",
                 line_dash="dashed", line_width=1)
    plot.yaxis.ticker = [i + 0.5 for i in range(len(labels))]
    plot.yaxis.major_label_overrides = {i + 0.5: label for i, label in enumerate(labels)}
    plot.xaxis.axis_label = "ms, each step from its start (step k of both runs aligned)"
    plot.add_tools(HoverTool(renderers=[quads], tooltips=[
        ("op", "@name"), ("run", "@run"), ("change", "@status"), ("duration", "@dur_us{0.000} µs")]))
    swatches = []
    for status, colour in STATUS_COLORS.items():
        swatch = plot.quad(left=[np.nan], right=[np.nan], bottom=[np.nan], top=[np.nan], color=colour)
        swatches.append(LegendItem(label=status, renderers=[swatch]))
    plot.add_layout(Legend(items=swatches, orientation="horizontal", label_text_font_size="11px",
                           padding=2, spacing=6), "above")
    return plot, source


def save_compare_html(before, after, path, *, title: str | None = None, row_limit: int = 40):
    """A standalone page (BokehJS inline: opens offline) of what changed from ``before`` to
    ``after``: the diff table and the aligned two-run figure. Written whole, then moved into place,
    so a failed write leaves any earlier page as it was."""
    from bokeh.embed import file_html
    from bokeh.layouts import column
    from bokeh.resources import INLINE

    from ..formats.atomic import make_folders, write_file
    from ..analysis.diff import compare

    comparison = compare(before, after)
    plot, _ = comparison_figure(before, after, comparison)
    text = comparison.report(row_limit=row_limit)
    page = column(html_pane(f"<pre style='font-size:12px'>{html_text(text)}</pre>"), plot,
                  sizing_mode="stretch_width")
    content = file_html(page, resources=INLINE, title=title or "nbprof diff")
    make_folders(path, "the diff page")
    return write_file(path, content, "the diff page"), comparison
