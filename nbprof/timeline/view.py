"""The Timeline: Bokeh models around the hidden event columns, driven by js/timeline.js."""

from __future__ import annotations

import pathlib

from bokeh.document import Document
from bokeh.layouts import column
from bokeh.models import (Arrow, BoxZoomTool, ColumnDataSource, CustomJS, CustomJSHover,
                          CustomJSTickFormatter, Div, FixedTicker, HoverTool, Label, Legend,
                          LegendItem, PanTool, Range1d, RangeTool, ResetTool, TapTool, VeeHead,
                          WheelZoomTool)
from bokeh.plotting import figure

import orjson

from ..events import Trace
from .data import encode_events
from .jsfiles import read_js
from .lanes import FAMILIES, build_lanes, cpu_families, gpu_families

# Stable colours: each family its own hues; an op name picks one of them by hash.
PALETTES = (
    ("#4e79a7", "#5b8fc7", "#3b6ea5", "#6b9bd1", "#2f5f8f", "#7aa6d6", "#41729f", "#88b0dd"),
    ("#8c8c8c", "#9e9e9e", "#7a7a7a", "#ababab"),
    ("#9467bd", "#a57fcb", "#8456b0", "#b592d6"),
    ("#f28e2b", "#e15759", "#ff9d5c", "#d4623a", "#f4a261", "#e76f51", "#ffb07c", "#c8553d"),
    ("#59a14f", "#6fb463", "#4a8f42", "#82c276"),
    ("#edc948", "#e6b800", "#f2d16b"),
    ("#17becf", "#2aa198", "#4fc3c9", "#0e9aa7", "#76d7d8", "#148f94"),
    ("#9c755f", "#b08a73"),
)
# Merged busy blocks: a darker shade of the family, so they read as "many events" not one op.
BLOCK_COLORS = ("#2f4b6e", "#5f5f5f", "#5e3f80", "#a85a12", "#3a6b33", "#9c8420", "#0c6f78", "#6b4f3f")
HIGHLIGHT_COLOR = "#ff00aa"
SELECTION_COLOR = "#000000"
ROW_PX = 14

_FORMAT_NS = """
const a = Math.abs(value);
if (a >= 1e9) return (value / 1e9).toFixed(3) + " s";
if (a >= 1e6) return (value / 1e6).toFixed(3) + " ms";
if (a >= 1e3) return (value / 1e3).toFixed(3) + " µs";
return value.toFixed(0) + " ns";
"""
_TICK_NS = """
// The unit follows the tick spacing, moved up while the numbers would get long (30.54245 s,
// not 30542450 µs); every tick of a view gets the same unit.
const step = ticks.length > 1 ? Math.abs(ticks[1] - ticks[0]) : (Math.abs(tick) || 1);
const biggest = Math.max(...ticks.map(Math.abs));
const units = [[1, "ns"], [1e3, "µs"], [1e6, "ms"], [1e9, "s"]];
let u = 0;
while (u < 3 && step >= units[u + 1][0]) u++;
while (u < 3 && biggest / units[u][0] >= 1e4) u++;
const [scale, unit] = units[u];
const digits = Math.min(9, Math.max(0, Math.ceil(-Math.log10(step / scale) - 1e-9)));
return (tick / scale).toFixed(digits) + " " + unit;
"""
_TOOLTIPS = [("name", "@name"), ("lane", "@lane"), ("start", "@start{custom}"),
             ("duration", "@dur{custom}"), ("details", "@details"), ("launched by", "@launch")]


def _empty(*names) -> dict:
    return {name: [] for name in names}


class Timeline:
    """A Bokeh timeline of one Trace; see the package docstring for the interface."""

    def __init__(self, trace: Trace, *, height: int | None = None, width: int | None = None):
        if not isinstance(trace, Trace):
            raise TypeError(f"Timeline wants an nbprof.Trace, got {type(trace).__name__}: "
                            "load a file with nbprof.load(path) or profile with nbprof.profile()")
        self.trace = trace
        lanes = build_lanes(trace)
        packed, info = encode_events(trace, lanes)
        info.update(palettes=PALETTES, block_colors=BLOCK_COLORS, highlight_color=HIGHLIGHT_COLOR,
                    selection_color=SELECTION_COLOR)
        self._labels = list(lanes.labels)
        span = max(info["span_ns"], 1)
        total_rows = sum(info["lane_height"]) or 1
        plot_height = height or min(max(240, 120 + ROW_PX * total_rows), 640)
        size = {"width": width} if width else {"sizing_mode": "stretch_width"}

        self.selection = ColumnDataSource(_empty("event_id", "kind"), name="nbprof_selection")
        self.highlighted = ColumnDataSource(_empty("event_id"), name="nbprof_highlight")
        self.filter = ColumnDataSource({"lane_visible": [True] * len(self._labels),
                                        "min_duration_ns": [0] * len(self._labels)},
                                       name="nbprof_filter")
        self.rendered = ColumnDataSource(_empty(
            "left", "right", "bottom", "top", "color", "name", "lane", "start", "dur", "count",
            "id", "gpu", "details", "launch"), name="nbprof_rendered")
        marks = ColumnDataSource(_empty("left", "right", "bottom", "top", "line_color"),
                                 name="nbprof_marks")
        links_focus = ColumnDataSource(_empty("x0", "y0", "x1", "y1"), name="nbprof_links_focus")
        links_view = ColumnDataSource(_empty("x0", "y0", "x1", "y1"), name="nbprof_links_view")
        bands = ColumnDataSource(_empty("left", "right", "bottom", "top"), name="nbprof_bands")
        overview_source = ColumnDataSource(_empty("left", "right", "bottom", "top", "color"),
                                           name="nbprof_overview_bars")

        pad = span * 0.02
        x_range = Range1d(0, span, bounds=(-pad, span + pad), min_interval=10)
        hover = HoverTool(tooltips=_TOOLTIPS, formatters={
            "@start": CustomJSHover(code=_FORMAT_NS), "@dur": CustomJSHover(code=_FORMAT_NS)})
        wheel = WheelZoomTool(dimensions="width")
        pan = PanTool(dimensions="width")
        plot = figure(x_range=x_range, y_range=Range1d(total_rows, 0), height=plot_height,
                      tools=[pan, wheel, BoxZoomTool(), ResetTool(), TapTool(), hover],
                      toolbar_location="above", name="nbprof_plot", **size)
        plot.toolbar.active_scroll = wheel
        plot.toolbar.active_drag = pan
        plot.xaxis.formatter = CustomJSTickFormatter(code=_TICK_NS)
        plot.xgrid.grid_line_alpha = 0.4
        plot.ygrid.visible = False
        ticker = FixedTicker(ticks=[])
        plot.yaxis.ticker = ticker
        plot.yaxis.major_label_text_font_size = "11px"
        plot.quad(source=bands, left="left", right="right", bottom="bottom", top="top",
                  fill_color="#000000", fill_alpha=0.04, line_color=None, level="underlay")
        bars = plot.quad(source=self.rendered, left="left", right="right", bottom="bottom",
                         top="top", fill_color="color", line_color=None, selection_fill_alpha=1.0,
                         nonselection_fill_alpha=1.0, hover_fill_alpha=0.7,
                         hover_line_color="black", name="nbprof_bars")
        hover.renderers = [bars]
        plot.select_one(TapTool).renderers = [bars]
        plot.quad(source=marks, left="left", right="right", bottom="bottom", top="top",
                  fill_color=None, line_color="line_color", line_width=2)
        plot.add_layout(Arrow(source=links_view, x_start="x0", y_start="y0", x_end="x1",
                              y_end="y1", line_color="#555555", line_alpha=0.5, line_width=1,
                              end=VeeHead(size=6, fill_color="#555555", line_color="#555555")))
        plot.add_layout(Arrow(source=links_focus, x_start="x0", y_start="y0", x_end="x1",
                              y_end="y1", line_color="#d62728", line_width=2,
                              end=VeeHead(size=8, fill_color="#d62728", line_color="#d62728"),
                              name="nbprof_links"))
        self._add_legend(plot)
        if not len(trace) and not trace.has_gpu:
            plot.add_layout(Label(x=span / 2, y=0.5, text="no events recorded",
                                  text_align="center", text_font_size="16px"))

        overview = figure(x_range=Range1d(-pad, span + pad), y_range=Range1d(1, 0), height=70,
                          tools=[], toolbar_location=None, name="nbprof_overview", **size)
        overview.quad(source=overview_source, left="left", right="right", bottom="bottom",
                      top="top", fill_color="color", line_color=None)
        overview.yaxis.visible = False
        overview.xaxis.formatter = CustomJSTickFormatter(code=_TICK_NS)
        overview.grid.visible = False
        range_tool = RangeTool(x_range=plot.x_range)
        overview.add_tools(range_tool)

        callback = CustomJS(code=read_js("timeline.js"), args=dict(
            packed=packed, info_json=orjson.dumps(info).decode(), plot=plot, overview=overview,
            rendered=self.rendered, overview_source=overview_source, marks_source=marks,
            links_focus=links_focus, links_view=links_view, bands_source=bands,
            selection=self.selection, highlight=self.highlighted, filter=self.filter,
            ticker=ticker, yaxis=plot.yaxis[0], hover=hover))
        plot.x_range.js_on_change("start", callback)
        plot.x_range.js_on_change("end", callback)
        for source in (self.selection, self.highlighted, self.filter):
            source.js_on_change("data", callback)
        self.rendered.selected.js_on_change("indices", callback)
        hover.callback = callback

        self.plot, self.overview = plot, overview
        self.note = Div(text=self._note_html(), name="nbprof_note")
        self.layout = column(self.note, plot, overview, name="nbprof_timeline", **(
            {"sizing_mode": "stretch_width"} if not width else {}))
        document = Document()
        document.add_root(self.layout)
        document.js_on_event("document_ready", callback)

    def save(self, path, *, title: str | None = None) -> pathlib.Path:
        """This timeline, with its current selection, highlight and filter, as one standalone
        HTML page (BokehJS inline: opens offline)."""
        from bokeh.embed import file_html
        from bokeh.resources import INLINE

        path = pathlib.Path(path)
        html = file_html(self.layout.document, resources=INLINE,
                         title=title or f"nbprof timeline: {self.trace.meta.get('source', 'trace')}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(html, encoding="utf-8")
        return path

    def _note_html(self) -> str:
        trace = self.trace
        if not len(trace) and not trace.has_gpu:
            return "<b>no events recorded</b>"
        rank, world = trace.meta.get("rank"), trace.meta.get("world_size")
        where = "" if rank is None else f"rank {rank}" + (f" of {world}" if world else "") + " · "
        text = where + (f"{len(trace):,} CPU events · {len(trace.gpu_start_ns):,} GPU intervals · "
                f"{trace.duration_ns / 1e6:,.3f} ms")
        if not trace.has_gpu:
            text += " · <b>CPU only: no GPU work recorded</b>"
        return text

    def _add_legend(self, plot) -> None:
        present = set(cpu_families(self.trace).tolist()) | set(gpu_families(self.trace).tolist())
        items = []
        for family in sorted(present):
            # one row of NaNs: nothing drawn in the plot, but the legend has a glyph to sample
            swatch = plot.quad(left=[float("nan")], right=[float("nan")], bottom=[float("nan")],
                               top=[float("nan")], fill_color=PALETTES[family][0], line_color=None)
            items.append(LegendItem(label=FAMILIES[family], renderers=[swatch]))
        if items:
            plot.add_layout(Legend(items=items, orientation="horizontal", location="top_left",
                                   label_text_font_size="11px", padding=2, spacing=6), "above")

    # -- what the notebook widget drives: model properties that js/timeline.js reads ----------

    @property
    def lanes(self) -> list[str]:
        return list(self._labels)

    def highlight(self, event_ids) -> None:
        """Outline these CPU events (search or summary-row matches); an empty list clears."""
        ids = [int(i) for i in (event_ids if event_ids is not None else [])]
        bad = [i for i in ids if not 0 <= i < len(self.trace)]
        if bad:
            raise ValueError(f"event ids {bad[:5]} are not in this trace (0..{len(self.trace) - 1})")
        self.highlighted.data = {"event_id": ids}

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
