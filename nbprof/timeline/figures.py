"""The two Bokeh figures of a timeline: the main plot (lanes, bars, marks, links, legend) and the
overview strip with its range tool. Their sources are filled by js/timeline.js."""

from __future__ import annotations

from bokeh.models import (Arrow, BoxSelectTool, BoxZoomTool, CustomJSHover, CustomJSTickFormatter,
                          FixedTicker, HoverTool, Label, Legend, LegendItem, PanTool, Range1d,
                          RangeTool, ResetTool, TapTool, VeeHead, WheelZoomTool)
from bokeh.core.properties import value
from bokeh.plotting import figure

from .lanes import FAMILIES

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
LINK_COLOR = "#d62728"  # focus links, and the op around a linked runtime call
AREA_COLOR = "#1f77b4"
# Names inside bars: the JS measures with this canvas font, so the Text glyph must use the same.
LABEL_FONT_PX, LABEL_FONT_FAMILY = 11, "sans-serif"
LABEL_FONT = f"{LABEL_FONT_PX}px {LABEL_FONT_FAMILY}"
# The plot's height follows its lanes: px per row unit (a CPU depth; a GPU kernel row is 2 units,
# js/timeline.js KERNEL_ROW_UNITS), plus toolbar, legend and axis.
ROW_PX = 18
KERNEL_ROW_UNITS = 2
PLOT_CHROME_PX = 110
PLOT_HEIGHT_RANGE = (220, 760)

def _format_ns(seconds_digits: int) -> str:
    """A hover formatter: ns, µs, ms or s as fits, 3 decimals, or ``seconds_digits`` in seconds."""
    return f"""
const a = Math.abs(value);
if (a >= 1e9) return (value / 1e9).toFixed({seconds_digits}) + " s";
if (a >= 1e6) return (value / 1e6).toFixed(3) + " ms";
if (a >= 1e3) return (value / 1e3).toFixed(3) + " µs";
return value.toFixed(0) + " ns";
"""


# A start late in a long trace needs more digits than a duration: "30.542 s" cannot tell apart
# the kernels a user has zoomed in on; "30.542463 s" can.
_FORMAT_DURATION, _FORMAT_START = _format_ns(3), _format_ns(6)
_TICK_NS = """
// Time since the trace's start, in the unit that fits the tick spacing. Zoomed in far from the
// start (20 µs ticks 43 s in), labels would need 7+ digits to differ ("43.27926 s"): the first tick
// then gives the time in full, the others the time after it ("+20 µs"), as Perfetto does.
const units = [[1, "ns"], [1e3, "µs"], [1e6, "ms"], [1e9, "s"]];
const step = ticks.length > 1 ? Math.abs(ticks[1] - ticks[0]) : (Math.abs(tick) || 1);
const unitFor = (size) => { let u = 0; while (u < 3 && size >= units[u + 1][0]) u++; return u; };
const text = (value, u, stepIn) => {
  const [scale, unit] = units[u];
  const digits = Math.min(9, Math.max(0, Math.ceil(-Math.log10(stepIn / scale) - 1e-9)));
  return (value / scale).toFixed(digits) + " " + unit;
};
const biggest = Math.max(...ticks.map(Math.abs));
if (biggest / step < 1e4) return text(tick, unitFor(biggest), step);  // short: one unit for all
const first = ticks[0];
if (index === 0) return text(first, unitFor(biggest), step);
return "+" + text(tick - first, unitFor(step), step);
"""
# A bar's left edge is its start (only its right edge is widened to stay visible): no start column.
# Rows whose value is empty (no details, not launched) are hidden by the style: each such row's
# data-v attribute holds its value. Bokeh escapes every @field, in text and attributes alike.
_TOOLTIP = """<div class="nbprof-tip" style="max-width: 520px; font-size: 12px; line-height: 1.35">
<div style="font-weight: bold; overflow-wrap: anywhere">@name</div>
<div data-v="@lane"><span class="k">lane</span> <span>@lane</span></div>
<div><span class="k">start</span> <span>@left{custom}</span></div>
<div><span class="k">duration</span> <span>@dur{custom}</span></div>
<div data-v="@details"><span class="k">details</span> <span>@details</span></div>
<div data-v="@launch"><span class="k">launched by</span> <span>@launch</span></div>
<style>.nbprof-tip div[data-v=""] { display: none } .nbprof-tip .k { color: #666 }</style>
</div>"""


def plot_height(units: int) -> int:
    """A height that gives every lane room (a small trace is not squeezed into 130 px), within
    PLOT_HEIGHT_RANGE (deeper lanes are cut to fit, and grow back in a taller plot)."""
    low, high = PLOT_HEIGHT_RANGE
    return int(min(max(low, PLOT_CHROME_PX + ROW_PX * units), high))


def main_plot(sources: dict, *, span: int, rows: int, height: int, size: dict, families,
              empty: bool, view: tuple[int, int] | None = None) -> tuple:
    """The lanes plot; returns (plot, hover tool, y ticker) for the browser code to drive. It opens
    on ``view`` (ns on the axis) if given, else the whole span; reset shows the whole span."""
    pad = span * 0.02
    start, end = view or (0, span)
    x_range = Range1d(start, end, bounds=(-pad, span + pad), min_interval=10, reset_start=0,
                      reset_end=span)
    hover = HoverTool(tooltips=_TOOLTIP, formatters={
        "@left": CustomJSHover(code=_FORMAT_START), "@dur": CustomJSHover(code=_FORMAT_DURATION)},
        visible=False)  # always on: no button
    # Plain wheel is the page's (scrolling the notebook); Ctrl+wheel and pinch zoom, in x only.
    wheel = WheelZoomTool(dimensions="width", modifiers={"ctrl": True}, name="nbprof_wheel_zoom")
    pan = PanTool(dimensions="width")
    # Box zoom and box select change x only: lane labels never leave the view.
    box_zoom = BoxZoomTool(dimensions="width", name="nbprof_box_zoom")
    box_select = BoxSelectTool(dimensions="width", name="nbprof_box_select",
                               description="Area selection (or Shift+drag)")
    tap = TapTool(visible=False)
    plot = figure(x_range=x_range, y_range=Range1d(rows, 0), height=height,
                  tools=[ResetTool(), wheel, pan, box_zoom, box_select, tap, hover],
                  toolbar_location="right", name="nbprof_plot", **size)
    plot.toolbar.logo = None
    plot.toolbar.active_scroll = wheel
    plot.toolbar.active_drag = pan
    plot.xaxis.formatter = CustomJSTickFormatter(code=_TICK_NS)
    plot.xgrid.grid_line_alpha = 0.4
    plot.ygrid.visible = False
    ticker = FixedTicker(ticks=[])
    plot.yaxis.ticker = ticker
    plot.yaxis.major_label_text_font_size = "11px"
    edges = {"left": "left", "right": "right", "bottom": "bottom", "top": "top"}
    drawn_only(plot.quad(source=sources["bands"], fill_color="#000000", fill_alpha=0.04,
                         line_color=None, level="underlay", **edges))
    bars = plot.quad(source=sources["rendered"], fill_color="color", fill_alpha="alpha",
                     line_color=None, selection_fill_alpha="alpha", nonselection_fill_alpha="alpha",
                     hover_fill_alpha=0.7,
                     hover_line_color="black", name="nbprof_bars", **edges)
    bars.muted_glyph = None
    hover.renderers = tap.renderers = [bars]
    drawn_only(plot.text(source=sources["labels"], x="x", y="y", text="text", text_color="color",
                         text_align="center", text_baseline="middle",
                         text_font=value(LABEL_FONT_FAMILY), text_font_size=f"{LABEL_FONT_PX}px",
                         name="nbprof_bar_labels"))
    # The area selection's band; box select "selects" in it, never in the bars.
    area = plot.quad(source=sources["area_band"], left="left", right="right", bottom=-1e9, top=1e9,
                     fill_color=AREA_COLOR, fill_alpha=0.12, line_color=AREA_COLOR, line_alpha=0.6,
                     level="underlay")
    box_select.renderers = [drawn_only(area)]
    drawn_only(plot.quad(source=sources["marks"], fill_color=None, line_color="line_color",
                         line_width=2, **edges))
    for source, color, width, head in ((sources["links_view"], "#555555", 1, 6),
                                       (sources["links_focus"], LINK_COLOR, 2, 8)):
        plot.add_layout(Arrow(source=source, x_start="x0", y_start="y0", x_end="x1", y_end="y1",
                              line_color=color, line_width=width, line_alpha=0.5 if width == 1 else 1,
                              end=VeeHead(size=head, fill_color=color, line_color=color)))
    _add_legend(plot, families)
    if empty:
        plot.add_layout(Label(x=span / 2, y=0.5, text="no events recorded", text_align="center",
                              text_font_size="16px"))
    return plot, hover, ticker


def overview_plot(source, marks, plot, *, span: int, size: dict):
    """The whole trace in a strip, every lane one line, with a range tool on the main x range."""
    pad = span * 0.02
    overview = figure(x_range=Range1d(-pad, span + pad), y_range=Range1d(1, 0), height=70,
                      tools=[], toolbar_location=None, name="nbprof_overview", **size)
    drawn_only(overview.quad(source=source, left="left", right="right", bottom="bottom", top="top",
                             fill_color="color", line_color=None))
    # every search/summary match as a tick (js/timeline_overlays.js drawOverviewMarks)
    drawn_only(overview.quad(source=marks, left="left", right="right", bottom="bottom", top="top",
                             fill_color=HIGHLIGHT_COLOR, line_color=None, fill_alpha=0.9))
    overview.yaxis.visible = False
    overview.xaxis.formatter = CustomJSTickFormatter(code=_TICK_NS)
    overview.grid.visible = False
    overview.add_tools(RangeTool(x_range=plot.x_range))
    return overview


def drawn_only(renderer):
    """A renderer nothing selects, hovers or mutes: no glyphs for those states. BokehJS builds a
    view (and reads its styles) for each glyph a renderer has; a page of a dozen renderers spent
    tens of ms of its first second on views never drawn."""
    renderer.selection_glyph = renderer.nonselection_glyph = renderer.muted_glyph = None
    return renderer


def _add_legend(plot, families) -> None:
    # One swatch renderer, a row per family (of NaNs: nothing drawn in the plot, but the legend
    # has a glyph to sample): a renderer and source per family made the page slower to open.
    families = sorted(families)
    nan = [float("nan")] * len(families)
    swatch = drawn_only(plot.quad(left=nan, right=nan, bottom=nan, top=nan, line_color=None,
                                  fill_color=[PALETTES[family][0] for family in families]))
    items = [LegendItem(label=FAMILIES[family], renderers=[swatch], index=k)
             for k, family in enumerate(families)]
    if items:
        plot.add_layout(Legend(items=items, orientation="horizontal", location="top_left",
                               label_text_font_size="11px", padding=2, spacing=6), "above")
