"""``nbprof.widget(trace)``: the timeline in an ipywidgets box with search, filters, details, the
summary table and an Export button. What ``%%cudaprof`` displays under a cell.

The panes' contents come from pure modules (search.py, details.py, analysis.py); this module only
wires widgets to them and to the Timeline (timeline/, the only place that builds Bokeh models).
"""

from __future__ import annotations

from ..html_text import html_text

import ipywidgets
import numpy as np

from ..analysis import printable
from .details import details_html, gpu_details_html, timeline_origin_ns
from .overview import add_answer_panes
from ..events import Trace
from .search import events_named, find_events, gpu_launched_by
from .lane_filter import LaneFilter
from .summary_table import SummaryTable

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
          ".jupyter-widgets-disconnected .nbprof-live { opacity: 0.4; pointer-events: none; }</style>")
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
                 compare_label: str = "the previous run", **timeline_options):
        from .bokeh_host import PlotHost
        from .export_panel import ExportPanel
        from ..timeline import Timeline

        self.trace = trace
        self.note = note
        self.timeline = Timeline(trace, **timeline_options)
        self.host = PlotHost(self.timeline.layout)
        self.plot = self.host.plot  # the jupyter_bokeh BokehModel the host shows
        # Search or summary matches, stepped through in time order (_match_order, made lazily).
        self._matches = self._gpu_matches = np.zeros(0, np.int64)
        self._match_order, self._match_index = None, -1
        self._count_message = ""
        self._origin_ns = timeline_origin_ns(trace)

        self._make_controls()
        self.details = ipywidgets.HTML(details_html(trace, None))
        self.details.add_class("nbprof-details")
        self.summary = SummaryTable(trace, sort_by, self.show_op)
        self.export = ExportPanel(trace, name, export_dir)
        panes = self._make_panes()
        add_answer_panes(self, compare_to, compare_label)  # Overview, Compare (notebook/overview.py)
        self.search.observe(lambda change: self.run_search(change["new"]), names="value")
        self.previous.on_click(lambda _button: self.step_match(-1))
        self.next.on_click(lambda _button: self.step_match(+1))
        self.lane_filter.observe(self._filter_changed, names="value")
        self.min_duration.observe(self._filter_changed, names="value")
        self.timeline.selection.on_change("data", self._selection_changed)
        for end in ("start", "end"):  # a zoom or pan changes how many matches are in view
            self.timeline.plot.x_range.on_change(end, lambda _attr, _old, _new: self._view_moved())

        restarted = ipywidgets.HTML(f"<span>{html_text(RESTARTED)}</span>")
        restarted.add_class("nbprof-restarted")
        header = [ipywidgets.HTML(_STYLE), restarted] + (
            [ipywidgets.HTML(f"<b>{html_text(note)}</b>")] if note else [])
        self.body = ipywidgets.VBox([self._toolbar, self._filters, self.host, panes,
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
        for needs_kernel in (self._toolbar, self._filters, self.summary, self.export):
            needs_kernel.add_class("nbprof-live")

    def _make_controls(self) -> None:
        """The search box with its arrows and match count, the lane and duration filters."""
        self.search = ipywidgets.Text(placeholder="search names (regex)", continuous_update=True,
                                      layout=ipywidgets.Layout(width="260px"))
        self.search.add_class("nbprof-search")
        self.match_count = ipywidgets.HTML()
        self.match_count.add_class("nbprof-match-count")
        self.previous = ipywidgets.Button(icon="arrow-up", tooltip="previous match",
                                          layout=ipywidgets.Layout(width="36px"))
        self.next = ipywidgets.Button(icon="arrow-down", tooltip="next match",
                                      layout=ipywidgets.Layout(width="36px"))
        self.lane_filter = LaneFilter(self.timeline.lanes, self.timeline.lane_groups)
        self.min_duration = ipywidgets.BoundedFloatText(value=0.0, min=0.0, max=1e12, step=1.0,
                                                        description="Min µs",
                                                        layout=ipywidgets.Layout(width="180px"))
        self.min_duration.add_class("nbprof-min-duration")
        self._toolbar = ipywidgets.HBox([self.search, self.previous, self.next, self.match_count],
                                        layout=ipywidgets.Layout(align_items="center"))
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
        self.panes = panes
        return panes

    def _show_body(self, shown: bool) -> None:
        self.body.layout.display = "" if shown else "none"
        self.expand.description = "Hide the timeline" if shown else "Show the timeline"

    # -- search -------------------------------------------------------------------------------

    def run_search(self, pattern: str) -> None:
        result = find_events(self.trace, pattern)
        self._set_matches(result.event_ids, result.gpu_rows)
        self._count_message = result.message
        self._show_count()

    def in_view(self) -> int:
        """Matches (CPU events and GPU intervals) that overlap the time range in view. The browser
        sends each zoom and pan to the kernel (jupyter_bokeh), so x_range is the user's view."""
        x_range = self.timeline.plot.x_range
        low, high = x_range.start + self._origin_ns, x_range.end + self._origin_ns
        trace = self.trace
        cpu = self._matches
        gpu = self._gpu_matches
        return int(np.count_nonzero((trace.start_ns[cpu] < high) & (trace.end_ns[cpu] > low))
                   + np.count_nonzero((trace.gpu_start_ns[gpu] < high) & (trace.gpu_end_ns[gpu] > low)))

    def _show_count(self) -> None:
        """The search message, with how many of the matches are in view when some are."""
        message = self._count_message
        if len(self._matches) + len(self._gpu_matches):
            message += f" · {self.in_view():,} in view"
        self.match_count.value = html_text(message)

    def show_op(self, name: str) -> None:
        """A summary row was clicked: outline every event of that op and the GPU intervals they
        launched (through the ops nested in them too: what clicking one of them links to)."""
        ids = events_named(self.trace, name)
        gpu_rows = gpu_launched_by(self.trace, ids)
        self._set_matches(ids, gpu_rows)
        launched = f" + {len(gpu_rows):,} GPU intervals they launched" if len(gpu_rows) else ""
        self._count_message = f"{len(ids):,} events of {printable(name)}{launched}"
        self._show_count()

    def _set_matches(self, event_ids: np.ndarray, gpu_rows: np.ndarray) -> None:
        self.timeline.highlight(event_ids, gpu_rows)
        self._matches, self._gpu_matches, self._match_order = event_ids, gpu_rows, None
        self._match_index = -1

    def step_match(self, step: int) -> None:
        """Select the next (or previous) match, CPU event or GPU interval, in time order."""
        total = len(self._matches) + len(self._gpu_matches)
        if not total:
            return
        if self._match_order is None:  # sorted on the first step, not on every keystroke
            starts = np.concatenate([self.trace.start_ns[self._matches],
                                     self.trace.gpu_start_ns[self._gpu_matches]])
            self._match_order = np.argsort(starts, kind="stable")
        self._match_index = (self._match_index + step) % total
        k = int(self._match_order[self._match_index])
        if k < len(self._matches):
            kind, row = "cpu", int(self._matches[k])
            start, end = self.trace.start_ns[row], self.trace.end_ns[row]
        else:
            kind, row = "gpu", int(self._gpu_matches[k - len(self._matches)])
            start, end = self.trace.gpu_start_ns[row], self.trace.gpu_end_ns[row]
        self.timeline.select(row, kind=kind)
        self._bring_into_view(int(start), int(end))
        # The selection's on_change shows the details too, but not when the same match is stepped
        # to again (no change): and the user may have switched to another pane since.
        self._show_details(row, kind)
        self.match_count.value = html_text(f"{self._match_index + 1} of {total:,}")

    def _bring_into_view(self, start_ns: int, end_ns: int) -> None:
        """Pan (keeping the zoom) so the interval is in view; zoom out if it is wider than the view."""
        x_range = self.timeline.plot.x_range
        origin = timeline_origin_ns(self.trace)
        start, end = start_ns - origin, end_ns - origin
        width = max(x_range.end - x_range.start, (end - start) * 1.2)
        if x_range.start <= start and end <= x_range.end and width == x_range.end - x_range.start:
            return
        middle = (start + end) / 2
        x_range.update(start=middle - width / 2, end=middle + width / 2)

    # -- filters and selection ----------------------------------------------------------------

    def _view_moved(self) -> None:
        if self._match_index < 0:  # while stepping, the count says "k of n"
            self._show_count()

    def _filter_changed(self, _change) -> None:
        lanes = list(self.lane_filter.value)
        self.timeline.set_filter(lanes=None if len(lanes) == len(self.lane_filter.options) else lanes,
                                 min_duration_ns=int(round((self.min_duration.value or 0.0) * 1e3)))

    def _selection_changed(self, _attr, _old, new) -> None:
        ids, kinds = list(new.get("event_id", [])), list(new.get("kind", []))
        self._show_details(int(ids[0]) if ids else None, kinds[0] if kinds else "cpu")

    def _show_details(self, event_id: int | None, kind: str = "cpu") -> None:
        if event_id is not None and kind == "gpu":
            self.details.value = gpu_details_html(self.trace, event_id)
        else:
            self.details.value = details_html(self.trace, event_id)
        if event_id is not None:
            self.panes.selected_index = 0

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
