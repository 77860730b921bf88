"""The Timeline: Bokeh models around the hidden event columns, driven by js/timeline.js."""

from __future__ import annotations

import pathlib

import numpy as np
import orjson
from bokeh.document import Document
from bokeh.layouts import column
from bokeh.models import ColumnDataSource, CustomJS
from bokeh.models.dom import HTML
from bokeh.embed.util import contains_tex_string

from ..formats.atomic import make_folders, write_file
from .html_text import html_pane, html_text
from ..model import Trace
from .counters import extra_rows
from .data import encode_events
from .first_level import first_level
from .memory_lane import memory_strip
from .figures import (BLOCK_COLORS, HIGHLIGHT_COLOR, KERNEL_ROW_UNITS, LABEL_FONT, LINK_COLOR,
                      PALETTES, SELECTION_COLOR, main_plot, overview_plot, plot_height)
from .jsfiles import timeline_code
from .served import DEFAULT_MAX_EMBEDDED, served_past_budget, served_sources
from .lanes import ROW_GPU_KERNEL, build_lanes, cpu_families, gpu_families


def _empty(*names) -> dict:
    return {name: [] for name in names}


# Highlighted ids travel as int32 arrays: Bokeh ships those as binary buffers, where a list of
# 500k ints (a broad search) would be a multi-megabyte JSON message per keystroke.
_NO_IDS = np.zeros(0, np.int32)


def _checked_ids(ids, size: int, what: str) -> np.ndarray:
    ids = np.asarray(ids if ids is not None else (), dtype=np.int64).ravel()
    bad = ids[(ids < 0) | (ids >= size)]
    if len(bad):
        raise ValueError(f"{what} {bad[:5].tolist()} are not in this trace (0..{size - 1})")
    return ids.astype(np.int32)


_DRAWN = {
    "marks": ("left", "right", "bottom", "top", "line_color"),
    "links_focus": ("x0", "y0", "x1", "y1"),
    "links_view": ("x0", "y0", "x1", "y1"),
    "bands": ("left", "right", "bottom", "top"),
    "overview_bars": ("left", "right", "bottom", "top", "color"),
    "overview_marks": ("left", "right", "bottom", "top"),
    "labels": ("x", "y", "text", "color"),
    "area_band": ("left", "right"),
}


def _axis_labels(lanes) -> list[str]:
    """The lanes' labels and, where there are several groups, their open headers' (as
    js/timeline_draw.js layoutLanes names them)."""
    labels, group = [], None
    several = len(set(lanes.groups)) > 1
    for lane, short in enumerate(lanes.short):
        if several and lanes.groups[lane] != group:
            group = lanes.groups[lane]
            labels.append(f"▾ {lanes.group_titles.get(group) or group or 'lanes'}")
        labels.append(short)
    return labels


def _row_units(lanes) -> int:
    """The plot's rows in units as js/timeline_draw.js lays them out uncut: a header per group
    (where there are several), a unit per row, two for a GPU kernel row."""
    units = np.where(lanes.row_kind == ROW_GPU_KERNEL, KERNEL_ROW_UNITS, 1).sum()
    groups = len(set(lanes.groups))
    return int(units) + (groups if groups > 1 else 0)


# bring_into_view's rule (js/timeline_input.js bringIntoView applies it again with the plot's real
# width): a match is readable once it is LABEL_MIN_PX wide (it carries its name); else the view
# centres on it at MATCH_VIEW_FACTOR times its length (at least MIN_MATCH_VIEW_NS), never wider
# than the view was. Python assumes a notebook-wide plot until the browser knows better.
LABEL_MIN_PX, MATCH_VIEW_FACTOR, MIN_MATCH_VIEW_NS, ASSUMED_PLOT_PX = 30, 4, 2_000, 1000


def view_onto(view: tuple[float, float], start: float, end: float, width_px: float,
              bounds: tuple[float, float]) -> tuple[float, float] | None:
    """The x range that shows start..end readably, or None where ``view`` already does."""
    x0, x1 = view
    length = max(end - start, 1)
    in_view = x0 <= start and end <= x1
    if in_view and length * width_px / max(x1 - x0, 1e-9) >= LABEL_MIN_PX:
        return None
    span = max(MATCH_VIEW_FACTOR * length, MIN_MATCH_VIEW_NS)
    if in_view:
        span = min(span, x1 - x0)
    span = min(max(span, 1.2 * length), bounds[1] - bounds[0])
    left = min(max((start + end) / 2 - span / 2, bounds[0]), bounds[1] - span)
    return left, left + span


# A trace whose GPU work starts late (after CUDA initialisation, data loading) and fills only part
# of it opens on that work: the set-up would otherwise squeeze the work into a few pixels.
WORK_STARTS_AFTER, WORK_SHORTER_THAN, WORK_PAD = 0.3, 0.6, 0.02


def work_window(trace: Trace, origin_ns: int, span_ns: int) -> tuple[int, int] | None:
    """The GPU work's extent (from the launch of its first interval), on the x axis (ns since
    ``origin_ns``), where it starts late in the trace and fills little of it; else None."""
    if not trace.has_gpu or span_ns <= 0:
        return None
    start, end = int(trace.gpu_start_ns.min()), int(trace.gpu_end_ns.max())
    launches = trace.gpu_launch[trace.gpu_launch >= 0]
    if len(launches):
        start = min(start, int(trace.start_ns[launches].min()))
    start, end = start - origin_ns, end - origin_ns
    if start < WORK_STARTS_AFTER * span_ns or end - start > WORK_SHORTER_THAN * span_ns:
        return None
    pad = int(WORK_PAD * (end - start))
    return max(start - pad, 0), min(end + pad, span_ns)


class Timeline:
    """A Bokeh timeline of one Trace; see the package docstring for the interface."""

    def __init__(self, trace: Trace, *, height: int | None = None, width: int | None = None,
                 max_embedded_events: int | None = DEFAULT_MAX_EMBEDDED):
        if not isinstance(trace, Trace):
            raise TypeError(f"Timeline wants an nbprof.Trace, got {type(trace).__name__}: "
                            "load a file with nbprof.load(path) or profile with nbprof.profile()")
        self.trace = trace
        lanes = build_lanes(trace)
        # Past the budget the page embeds a coarser level and the kernel serves each view (served.py).
        self.served = served_past_budget(trace, lanes, max_embedded_events)
        packed, info = self.served.page() if self.served else encode_events(trace, lanes)
        if not self.served:  # a big page draws its first views from a level (first_level.py)
            info["first_level"] = first_level(trace, lanes)
        info.update(palettes=PALETTES, block_colors=BLOCK_COLORS, highlight_color=HIGHLIGHT_COLOR,
                    selection_color=SELECTION_COLOR, link_color=LINK_COLOR, label_font=LABEL_FONT)
        self._labels = list(lanes.labels)
        self._short = list(lanes.short)
        self._groups = list(lanes.groups)
        self._lanes = lanes  # each event's draw row and each row's lane: what shown() reads
        self._origin_ns = int(info["origin_ns"])  # the x axis is ns since this time
        self._fixed_width = bool(width)
        span = max(info["span_ns"], 1)
        self._work = work_window(trace, self._origin_ns, span)
        total_rows = _row_units(lanes) or 1
        height = height or plot_height(total_rows)
        size = {"width": width} if width else {"sizing_mode": "stretch_width"}

        self.selection = ColumnDataSource(_empty("event_id", "kind"), name="nbprof_selection")
        self.area_selection = ColumnDataSource(_empty("start_ns", "end_ns"),
                                               name="nbprof_area_selection")
        # A range bring_into_view asks the browser to show (it knows the plot's width in px).
        self._view_request = ColumnDataSource(_empty("start_ns", "end_ns", "seq"),
                                              name="nbprof_view_request")
        # Two sources, not one: CPU ids and GPU rows differ in number, and a source's columns
        # must be equally long.
        self.highlighted = ColumnDataSource({"event_id": _NO_IDS}, name="nbprof_highlight")
        self.highlighted_gpu = ColumnDataSource({"gpu_row": _NO_IDS}, name="nbprof_highlight_gpu")
        self.filter = ColumnDataSource({"lane_visible": [True] * len(self._labels),
                                        "min_duration_ns": [0] * len(self._labels)},
                                       name="nbprof_filter")
        self.rendered = ColumnDataSource(_empty(
            "left", "right", "bottom", "top", "color", "alpha", "name", "lane", "dur", "count",
            "id", "gpu", "details", "launch"), name="nbprof_rendered")
        # What the browser code fills: busy/real bars, outlines, links, group bands, the strip.
        sources = {"rendered": self.rendered, **{name: ColumnDataSource(_empty(*columns),
                                                                        name=f"nbprof_{name}")
                   for name, columns in _DRAWN.items()}}
        families = set(cpu_families(trace).tolist()) | set(gpu_families(trace).tolist())
        plot, hover, ticker = main_plot(sources, span=span, view=self._work, rows=total_rows,
                                        height=height,
                                        size=size, families=families,
                                        empty=not len(trace) and not trace.has_gpu)
        overview = overview_plot(sources["overview_bars"], sources["overview_marks"], plot,
                                 span=span, size=size)
        # The y axis opens with the labels js/timeline_draw.js layoutLanes gives it (where does
        # not matter, only how wide they are): Bokeh's first layout then has the plot's final
        # width, and the browser draws the first view into Bokeh's first paint, not twice.
        # (Not a label Bokeh would take for TeX: the page would carry MathJax for it.)
        named = _axis_labels(lanes)
        if not any(contains_tex_string(label) for label in named):
            ticker.ticks = [k + 0.5 for k in range(len(named))]
            plot.yaxis.major_label_overrides = {k + 0.5: label for k, label in enumerate(named)}

        callback = CustomJS(code=timeline_code(), args=dict(
            packed=packed, info_json=orjson.dumps(info).decode(), plot=plot, overview=overview,
            rendered=self.rendered, overview_source=sources["overview_bars"],
            marks_source=sources["marks"], links_focus=sources["links_focus"],
            links_view=sources["links_view"], bands_source=sources["bands"],
            selection=self.selection, highlight=self.highlighted,
            highlight_gpu=self.highlighted_gpu, filter=self.filter,
            ticker=ticker, yaxis=plot.yaxis[0], hover=hover,
            overview_marks=sources["overview_marks"], labels_source=sources["labels"],
            area_band=sources["area_band"], area_selection=self.area_selection,
            view_request=self._view_request, **served_sources(self.served)))
        plot.x_range.js_on_change("start", callback)
        plot.x_range.js_on_change("end", callback)
        for source in (self.selection, self.highlighted, self.highlighted_gpu, self.filter,
                       self.area_selection, self._view_request):
            source.js_on_change("data", callback)
        plot.js_on_event("selectiongeometry", callback)  # the box select tool
        plot.js_on_event("reset", callback)  # the reset tool also undoes a zoom of the lanes
        self.rendered.selected.js_on_change("indices", callback)
        hover.callback = callback
        if self.served:
            self.served.connect(callback)

        self.plot, self.overview = plot, overview
        self.note = HTML(html=self._note_html(), name="nbprof_note")  # html_pane: no Div
        above, below = extra_rows(trace, plot, size)  # notes; counters and instants
        self._memory_served = self.served is not None or (
            max_embedded_events is not None and len(trace.memory) > max_embedded_events)
        memory, memory_callback = memory_strip(trace, plot, size, self.selection,
                                               self._origin_ns, reduce=self._memory_served)
        note = html_pane(self.note, styles={"margin": "5px"})  # a Div's margin
        self.layout = column(note, *above, plot, *([memory] if memory else []), *below,
                             overview, name="nbprof_timeline", **(
                                 {"sizing_mode": "stretch_width"} if not width else {}))
        document = Document()
        document.add_root(self.layout)
        document.js_on_event("document_ready", callback)
        if memory_callback:
            document.js_on_event("document_ready", memory_callback)

    def save(self, path, *, title: str | None = None) -> pathlib.Path:
        """This timeline, with its current selection, highlight and filter, as one standalone
        HTML page (BokehJS inline: opens offline)."""
        from bokeh.embed import file_html
        from bokeh.resources import INLINE

        path = pathlib.Path(path)
        html = file_html(self.layout.document, resources=INLINE,
                         title=title or f"nbprof timeline: {self.trace.meta.get('source', 'trace')}",
                         suppress_callback_warning=self.served is not None or  # kernel-only
                         self._memory_served)  # serving
        make_folders(path, "the timeline page")
        return write_file(path, html, "the timeline page")  # a failure keeps any earlier page

    def _note_html(self) -> str:
        trace = self.trace
        if not len(trace) and not trace.has_gpu:
            return "<b>no events recorded</b>"
        rank, world = trace.meta.get("rank"), trace.meta.get("world_size")
        where = "" if rank is None else f"rank {rank}" + (f" of {world}" if world else "") + " · "
        where = html_text(where)  # meta may come from a file: text, never markup
        gpu = f"{len(trace.gpu_start_ns):,} GPU intervals · " if trace.has_gpu else ""
        text = where + f"{len(trace):,} CPU events · {gpu}{trace.duration_ns / 1e6:,.3f} ms"
        if not trace.has_gpu:
            text += " · <b>CPU only: no GPU work recorded</b>"
        if self._work:
            start, end = (value / 1e9 for value in self._work)
            text += (f"<br>Showing the GPU work, {start:.3f} s to {end:.3f} s; the reset tool (⟲) "
                     "shows the whole trace, and the strip below it all.")
        from ..ranks import merged_note

        if merged_note(trace):
            text += "<br>" + html_text(merged_note(trace))
        if self.served:
            text += "<br>" + html_text(self.served.note())
        return text

    # -- what the notebook widget drives: model properties that js/timeline.js reads ----------

    @property
    def lanes(self) -> list[str]:
        return list(self._labels)

    @property
    def lane_labels(self) -> list[str]:
        """What the y axis shows for each lane of ``lanes``: "main thread", "GPU 0 · stream 7"."""
        return list(self._short)

    @property
    def lane_groups(self) -> list[str]:
        """Each lane's group (process, rank, GPU), in the order of ``lanes``."""
        return list(self._groups)

    def show_range(self, start_ns: int, end_ns: int) -> None:
        """Zoom the x axis to ``start_ns``..``end_ns``, in the trace's own times (its columns')."""
        if end_ns <= start_ns:
            raise ValueError(f"an empty range {start_ns}..{end_ns}: end must come after start")
        self.plot.x_range.update(start=int(start_ns) - self._origin_ns, end=int(end_ns) - self._origin_ns)

    def bring_into_view(self, start_ns: int, end_ns: int) -> None:
        """Show ``start_ns``..``end_ns`` (the trace's own times) as a bar of its own, wide enough
        for its name: nothing moves where it already is one in view; else the view centres on it,
        zoomed in (a match hidden in a merged block comes out). The x range is set here (so the
        kernel knows the view at once), and the browser checks again with the plot's real width.
        Works live and in saved pages."""
        if end_ns < start_ns:
            raise ValueError(f"a range {start_ns}..{end_ns} that ends before it starts")
        start, end = int(start_ns) - self._origin_ns, int(end_ns) - self._origin_ns
        x_range = self.plot.x_range
        moved = view_onto((x_range.start, x_range.end), start, end,
                          self.plot.width if self._fixed_width else ASSUMED_PLOT_PX, x_range.bounds)
        if moved:
            x_range.update(start=moved[0], end=moved[1])
        seq = (self._view_request.data.get("seq") or [0])[0] + 1  # a repeat is still a change
        self._view_request.data = {"start_ns": [start], "end_ns": [end], "seq": [seq]}

    def highlight(self, event_ids, gpu_rows=()) -> None:
        """Outline these CPU events and GPU intervals (rows of ``trace.gpu_start_ns``): search or
        summary-row matches. Empty clears."""
        cpu = _checked_ids(event_ids, len(self.trace), "event ids")
        gpu = _checked_ids(gpu_rows, len(self.trace.gpu_start_ns), "GPU rows")
        # Each assignment is a message to the browser and a redraw there: skip what stays empty.
        if len(cpu) or len(self.highlighted.data["event_id"]):
            self.highlighted.data = {"event_id": cpu}
        if len(gpu) or len(self.highlighted_gpu.data["gpu_row"]):
            self.highlighted_gpu.data = {"gpu_row": gpu}

    def set_filter(self, *, lanes=None, min_duration_ns: int = 0) -> None:
        """Show only these lanes (labels from ``.lanes``, None = all) and events at least this long."""
        if lanes is None:
            visible = [True] * len(self._labels)
        else:
            wanted = set(lanes)
            unknown = sorted(wanted - set(self._labels))
            if unknown:
                raise ValueError(f"unknown lanes {unknown}; the timeline's lanes are {self._labels}")
            visible = [label in wanted for label in self._labels]
        if min_duration_ns < 0:
            raise ValueError("min_duration_ns must be >= 0")
        self.filter.data = {"lane_visible": visible,
                            "min_duration_ns": [int(min_duration_ns)] * len(self._labels)}

    def shown(self) -> tuple[np.ndarray, np.ndarray]:
        """Which CPU events and GPU intervals the filter shows now (bool per event, per GPU
        interval): in a visible lane and at least its minimum duration long."""
        visible = np.asarray(self.filter.data.get("lane_visible") or [True] * len(self._labels), bool)
        shortest = (self.filter.data.get("min_duration_ns") or [0])[0]
        trace, lanes = self.trace, self._lanes
        row_visible = visible[lanes.row_lane]
        return (row_visible[lanes.cpu_row] & (trace.end_ns - trace.start_ns >= shortest),
                row_visible[lanes.gpu_row] & (trace.gpu_end_ns - trace.gpu_start_ns >= shortest))

    def select(self, event_id, kind: str = "cpu") -> None:
        """Select a CPU event (kind="cpu") or GPU interval (kind="gpu"): outlined, links drawn.
        None clears. The browser's tap sets the same ``selection`` source."""
        if event_id is None:
            self.selection.data = {"event_id": [], "kind": []}
            return
        size = len(self.trace) if kind == "cpu" else len(self.trace.gpu_start_ns)
        if kind not in ("cpu", "gpu") or not 0 <= int(event_id) < size:
            raise ValueError(f"no {kind} event {event_id} in this trace (kind is 'cpu' or 'gpu')")
        self.selection.data = {"event_id": [int(event_id)], "kind": [kind]}
