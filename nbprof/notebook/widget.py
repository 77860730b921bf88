"""``nbprof.widget(trace)``: the timeline in an ipywidgets box with search, filters, details, the
summary table and an Export button. What ``%%cudaprof`` displays under a cell.

The panes' contents come from pure modules (search.py, details.py, the analysis package); this module only
wires widgets to them and to the Timeline (timeline/, the only place that builds Bokeh models).
"""

from __future__ import annotations

import ipywidgets

from ..model import Trace
from ..timeline.html_text import html_text
from ..record.overhead import describe_overhead
from .details import timeline_origin_ns
from .details_pane import STYLE as DETAILS_STYLE, DetailsPane
from .lane_filter import LaneFilter
from .overview import add_answer_panes
from .search_bar import SearchBar
from .summary_table import SummaryTable
from .view_range import event_interval

# The restart note shows once ipywidgets marks the widget disconnected (kernel restarted or
# stopped); it replaces a broken-link icon per control, and the controls that need the kernel dim.
_STYLE = ("<style>.nbprof-export { width: auto; flex: 0 0 auto; } "
          ".nbprof-export-status a { color: var(--jp-content-link-color, #1a73e8); "
          "text-decoration: underline; } "
          ".nbprof-restarted { display: none; color: #b00; font-weight: bold; } "
          ".jupyter-widgets-disconnected .nbprof-restarted, "
          ".nbprof-restarted.jupyter-widgets-disconnected { display: block; } "
          ".nbprof-widget .jupyter-widgets-disconnected::before, "
          ".nbprof-widget.jupyter-widgets-disconnected::before { display: none; } "
          ".jupyter-widgets-disconnected .nbprof-live { opacity: 0.4; pointer-events: none; } "
          # a tab never opened before the restart: nothing will compute it now
          ".nbprof-tab-restarted { display: none; color: #b00; font-weight: bold; } "
          ".jupyter-widgets-disconnected .nbprof-tab-restarted { display: inline; } "
          ".jupyter-widgets-disconnected .nbprof-computing { display: none; }</style>")
RESTARTED = "kernel restarted: re-run the cell to search and export"


def widget(trace: Trace, *, name: str = "trace", sort_by: str = "cpu_time_total",
           note: str | None = None, export_dir=None, collapsed: bool = False,
           compare_to: Trace | None = None, compare_label: str = "the previous run",
           **timeline_options) -> "TraceWidget":
    """The interactive timeline of ``trace``. ``name`` names the exported file (``<name>.json.gz``,
    written in ``export_dir``, by default the kernel's working directory: the notebook's folder).
    ``compare_to``: an earlier Trace, for a Compare tab (what changed since).
    ``timeline_options`` go to the Timeline (``max_embedded_events``: past it the kernel serves
    the level of detail, timeline/served.py)."""
    if not isinstance(trace, Trace):
        raise TypeError(f"nbprof.widget needs an nbprof.Trace, got {type(trace).__name__}: "
                        "profile with %%cudaprof -o VAR or nbprof.profile(), or read a file with nbprof.load")
    if compare_to is not None and not isinstance(compare_to, Trace):
        raise TypeError(f"compare_to must be an nbprof.Trace, got {type(compare_to).__name__}")
    return TraceWidget(trace, name=name, sort_by=sort_by, note=note, export_dir=export_dir,
                       collapsed=collapsed, compare_to=compare_to, compare_label=compare_label,
                       **timeline_options)


def _per_run_text(trace: Trace) -> str | None:
    from .repeats import repeat_table, run_windows

    return repeat_table(trace, row_limit=-1) if len(run_windows(trace)[0]) else None


class TraceWidget(ipywidgets.VBox):
    """Toolbar (search, lane filter, minimum duration), timeline, details, summary, export."""

    def __init__(self, trace: Trace, *, name: str, sort_by: str, note: str | None, export_dir=None,
                 collapsed: bool = False, compare_to: Trace | None = None,
                 compare_label: str = "the previous run", in_cell: bool = False,
                 **timeline_options):
        from .bokeh_host import PlotHost
        from .export_panel import ExportPanel
        from ..timeline import Timeline

        self.trace = trace
        self.note = note
        self.timeline = Timeline(trace, **timeline_options)
        self.host = PlotHost(self.timeline.layout)
        self.plot = self.host.plot  # the jupyter_bokeh BokehModel the host shows
        self._origin_ns = timeline_origin_ns(trace)

        self._make_controls()
        self.details = DetailsPane(trace, self.jump_to)
        self.summary = SummaryTable(trace, sort_by, self.show_op)
        self.export = ExportPanel(trace, name, export_dir)
        panes = self._make_panes()
        add_answer_panes(self, compare_to, compare_label)  # Overview, Compare (notebook/overview.py)
        self.lane_filter.observe(self._filter_changed, names="value")
        self.min_duration.observe(self._filter_changed, names="value")
        self.timeline.selection.on_change("data", self._selection_changed)
        # The timeline's area selection (Shift+drag or box select): its range's summary.
        self.timeline.area_selection.on_change("data", lambda _attr, _old, new: self._area_changed(new))

        restarted = ipywidgets.HTML(f"<span>{html_text(RESTARTED)}</span>")
        restarted.add_class("nbprof-restarted")
        # "profiler overhead ≈ ..., ~9% of this cell" only under the cell that was profiled
        overhead = describe_overhead(trace.meta.get("overhead"),
                                     of="this cell" if in_cell else "the profiled code")
        header = [ipywidgets.HTML(_STYLE + DETAILS_STYLE), restarted] + (
            [ipywidgets.HTML(f"<b>{html_text(note)}</b>")] if note else []) + (
            [ipywidgets.HTML(html_text(overhead))] if overhead else [])
        self.body = ipywidgets.VBox([self.search_bar, self._filters, self.host, panes,
                                     self.export])
        # Collapsed under a failed cell's traceback: the error reads first, one click shows the rest.
        self.expand = ipywidgets.ToggleButton(value=not collapsed, description="Show the timeline",
                                              icon="chevron-down", layout=ipywidgets.Layout(
                                                  width="auto", display="" if collapsed else "none"))
        self.expand.add_class("nbprof-expand")
        self.expand.observe(lambda change: self._show_body(change["new"]), names="value")
        self._show_body(not collapsed)
        super().__init__([*header, self.expand, self.body])
        self.add_class("nbprof-widget")
        for needs_kernel in (self.search_bar, self._filters, self.summary, self.export,
                             self.details.links):
            needs_kernel.add_class("nbprof-live")

    def _make_controls(self) -> None:
        """The search bar (box, arrows, match count), the lane and duration filters."""
        self.search_bar = SearchBar(self.trace, self.timeline, self._origin_ns, self._show_details)
        bar = self.search_bar
        self.search, self.previous, self.next, self.match_count = bar.box, bar.previous, bar.next, bar.count
        self.lane_filter = LaneFilter(self.timeline.lanes, self.timeline.lane_groups,
                                      self.timeline.lane_labels)
        self.min_duration = ipywidgets.BoundedFloatText(value=0.0, min=0.0, max=1e12, step=1.0,
                                                        description="Min µs",
                                                        layout=ipywidgets.Layout(width="180px"))
        self.min_duration.add_class("nbprof-min-duration")
        self._filters = ipywidgets.HBox([self.lane_filter, self.min_duration],
                                        layout=ipywidgets.Layout(align_items="flex-start"))

    def _make_panes(self) -> ipywidgets.Tab:
        """Details, Summary and, for ``--repeat`` traces, Per run (mean / min / max per op)."""
        self.per_run = _per_run_text(self.trace)
        panes = ipywidgets.Tab([self.details, self.summary] + (
            [ipywidgets.HTML(f"<pre class='nbprof-per-run'>{html_text(self.per_run)}</pre>")]
            if self.per_run else []))
        for index, title in enumerate(("Details", "Summary", "Per run")[:len(panes.children)]):
            panes.set_title(index, title)
        panes.selected_index = len(panes.children) - 1
        from .ranks_tab import add_ranks_tab

        add_ranks_tab(self, panes)  # a merged job's ranks
        from .memory_tab import add_memory_tab

        add_memory_tab(self, panes)  # where memory was recorded
        self.panes = panes
        return panes

    @property
    def overview(self):
        """The Overview tab's pane (overview.py), built on first use."""
        return self.lazy_panes["Overview"].pane

    @property
    def compare(self):
        """The Compare tab's pane (compare.py), built on first use; None without ``compare_to``."""
        lazy = self.lazy_panes.get("Compare")
        return None if lazy is None else lazy.pane

    def _show_body(self, shown: bool) -> None:
        self.body.layout.display = "" if shown else "none"
        self.expand.description = "Hide the timeline" if shown else "Show the timeline"

    # -- navigation: the search bar (search_bar.py) and the details links ---------------------

    def show_op(self, name: str) -> None:
        """A summary row was clicked: its op's events (and the GPU work they launched) outlined."""
        self.search_bar.show_op(name)

    def in_view(self) -> int:
        return self.search_bar.in_view()

    def jump_to(self, row: int, kind: str = "cpu") -> None:
        """A link in the details pane: select that event and bring it into view as its own bar."""
        self.timeline.select(row, kind=kind)
        self._show_details(row, kind)
        self.timeline.bring_into_view(*event_interval(self.trace, row, kind))

    # -- filters and selection ----------------------------------------------------------------

    def _filter_changed(self, _change) -> None:
        lanes = list(self.lane_filter.value)
        self.timeline.set_filter(lanes=None if len(lanes) == len(self.lane_filter.options) else lanes,
                                 min_duration_ns=int(round((self.min_duration.value or 0.0) * 1e3)))

    def _selection_changed(self, _attr, _old, new) -> None:
        ids, kinds = list(new.get("event_id", [])), list(new.get("kind", []))
        self._show_details(int(ids[0]) if ids else None, kinds[0] if kinds else "cpu")

    def _show_details(self, event_id: int | None, kind: str = "cpu") -> None:
        self.details.show(event_id, kind)
        if event_id is not None:
            self.panes.selected_index = 0

    def _area_changed(self, data) -> None:
        """An area selection summarises its time range in the details pane; clearing it brings
        back the selected event's details."""
        starts, ends = list(data.get("start_ns", [])), list(data.get("end_ns", []))
        if starts and ends:
            self.details.show_range(int(starts[0]), int(ends[0]), self.timeline.shown())
            self.panes.selected_index = 0
        else:
            self.details.show(*(self.details.shown or (None, "cpu")))

    # -- outside a widget front end -------------------------------------------------------------

    def _ipython_display_(self) -> None:
        """Two outputs: the static copy (static.py), which front ends without the live widget
        show, then the widget, which hides the copy where it draws."""
        from IPython.display import publish_display_data

        from .static import static_bundle

        static_id, bundle = static_bundle(self.timeline, sort_by=self.summary.sort_key,
                                          note=self.note, text=self._text_summary())
        self.host.static_id = static_id
        publish_display_data(bundle, metadata={"nbprof": {"static_copy": static_id}})
        publish_display_data(self._repr_mimebundle_())

    def _text_summary(self) -> str:
        table = self.trace.table(sort_by=self.summary.sort_key)
        if self.per_run:
            table = f"{self.per_run}\n\n{table}"
        note = (f"nbprof timeline: {len(self.trace):,} events, "
                f"{len(self.trace.gpu_start_ns):,} GPU intervals.")
        if self.note:  # the cell raised or was interrupted: say so outside the widget too
            note = f"{self.note}\n{note}"
        return f"{note}\n{table}"

    def _repr_mimebundle_(self, **kwargs):
        """The widget view, and one line of text: the static copy before it holds the summary
        (front ends without the widget show both texts)."""
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = (f"nbprof timeline widget ({len(self.trace):,} events): interactive "
                                "with a running kernel; the output before it is its saved copy.")
        return bundle
