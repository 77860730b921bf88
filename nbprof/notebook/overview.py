"""The widget's Overview and Compare tabs, added to its panes by :func:`add_answer_panes`, each
built when its tab is first opened.

Overview: a stacked bar per step (timeline/overview.py), the steps as a list, the top kernels and
copies as sortable tables (each row's call path under its name), and the findings. Picking a step
in the list, or tapping its bar, zooms the timeline to that step; clicking a kernel row outlines its
intervals and zooms to them. The contents come from the pure modules (steps, kernel_summary, findings).
"""

from __future__ import annotations

import ipywidgets
import numpy as np

from ..timeline.html_text import html_text
from ..analysis.averages import format_us, printable
from ..analysis.callpaths import CallPaths
from ..analysis.findings import findings
from ..analysis.kernel_summary import kernel_summary
from ..analysis.steps import breakdown, step_name, step_table
from ..analysis.tables import records
from .view_range import outline_and_show


class OverviewPane(ipywidgets.VBox):
    """Steps, top kernels and findings of one trace; ``zoom_to(step)`` drives the timeline."""

    def __init__(self, trace, timeline):
        from jupyter_bokeh import BokehModel

        from ..timeline.overview import step_bars

        self.trace, self.timeline = trace, timeline
        result = breakdown(trace)
        self.steps = records(step_table(result, plain=True))
        # one call-path table for both kernel tables (each would build its own: ~0.75 s at 10M)
        paths = CallPaths(trace)
        kernels = kernel_summary(trace, limit=10, plain=True, paths=paths)
        self.findings = findings(trace, result, kernels)
        figure, self.bars = step_bars(self.steps, has_gpu=trace.has_gpu)
        self.bars.selected.on_change("indices", self._bar_tapped)
        self.step_list = ipywidgets.Select(
            options=[(self._step_label(i, row), i) for i, row in enumerate(self.steps)], value=None,
            rows=min(6, max(len(self.steps), 1)), layout=ipywidgets.Layout(width="100%"))
        self.step_list.add_class("nbprof-steps")
        self.step_list.observe(lambda change: self.zoom_to(change["new"]), names="value")
        found = "".join(f"<li>{html_text(line)}</li>" for line in self.findings) or "<li>nothing stands out</li>"
        findings_html = ipywidgets.HTML(f"<ul class='nbprof-findings' style='margin:2px 0'>{found}</ul>")
        self._paths = paths
        if trace.has_gpu:
            memory = kernel_summary(trace, memory=True, limit=5, plain=True, paths=paths)
            self.kernel_table = gpu_work_table(records(kernels), self.show_gpu_work)
            self.memory_table = gpu_work_table(records(memory), self.show_gpu_work, first_key=len(kernels))
            kernel_tables = [self.kernel_table, ipywidgets.HTML("<b>Memcpy / memset</b>"),
                             self.memory_table]
            for table in (self.kernel_table, self.memory_table):
                table.add_class("nbprof-kernels")
        else:
            self.kernel_table = self.memory_table = None
            kernel_tables = [ipywidgets.HTML("<i>no GPU work recorded</i>")]
        source = self.steps[0]["source"] if self.steps else "none"
        super().__init__([findings_html, ipywidgets.HTML(f"<b>Steps</b> (from {html_text(source)}; pick "
                                                         "one, or tap its bar, to zoom the timeline to it)"),
                          BokehModel(figure), self.step_list,
                          ipywidgets.HTML("<b>Top GPU work</b> (click a row to see it on the timeline)"),
                          *kernel_tables])
        self.add_class("nbprof-overview")

    @staticmethod
    def _step_label(index: int, row: dict) -> str:
        idle = f", GPU idle {row['gpu_idle_pct']:.0f}%" if row["gpu_busy_us"] else ""
        return (f"{index + 1}: {step_name(row)} · wall {format_us(row['wall_us'])} (CPU part "
                f"{format_us(row['cpu_wall_us'])}), CPU busy "
                f"{format_us(row['cpu_busy_us'])}, GPU busy {format_us(row['gpu_busy_us'])}{idle}")

    def zoom_to(self, index) -> None:
        """Show step ``index`` (0-based) across the whole timeline; None does nothing."""
        if index is None:
            return
        row = self.steps[int(index)]
        self.timeline.show_range(int(row["start_ns"]), int(row["end_ns"]))
        if self.step_list.value != index:
            self.step_list.value = index

    def show_gpu_work(self, key: str) -> None:
        """A row of the GPU work tables was clicked: outline its intervals (that name, launched
        from that call path) and zoom the timeline to them."""
        row = next(row for table in (self.kernel_table, self.memory_table) for row in table.rows
                   if row["key"] == key)
        trace = self.trace
        rows = np.flatnonzero(trace.gpu_name_id == trace.names.index(row["name"]))
        launch = trace.gpu_launch[rows].astype(np.int64)
        path = np.where(launch >= 0, self._paths.of_event[np.maximum(launch, 0)] if len(trace) else -1, -1)
        texts = {p: self._paths.text(p) for p in np.unique(path).tolist()}
        rows = rows[np.fromiter((texts[p] == row["call_path"] for p in path.tolist()), bool, len(rows))]
        outline_and_show(self.timeline, trace.gpu_start_ns[rows], trace.gpu_end_ns[rows], gpu_rows=rows)

    def _bar_tapped(self, _attr, _old, new) -> None:
        if new:
            self.zoom_to(int(new[0]))


TAB_RESTARTED = "kernel restarted: re-run the cell to compute this tab"


# The GPU work tables' columns ("name" is the text column; the others sort as numbers).
GPU_WORK_COLUMNS = [
    {"key": "name", "title": "Name", "tip": "kernel, memcpy or memset; under it, the call path that launched it"},
    {"key": "count", "title": "Calls", "tip": "how many ran"},
    {"key": "total_us", "title": "Total", "tip": "GPU time of all of them"},
    {"key": "mean_us", "title": "Mean", "tip": "total / calls"},
    {"key": "share_pct", "title": "Share", "tip": "of all the GPU work of this kind"},
]


PATH_SEPARATOR = " > "


def splitting_paths(names: list[str], paths: list[str]) -> list[str]:
    """What to show of each row's call path: for a name on several rows, the path from where it
    parts from the others' ("… > measure|forward > aten::linear > aten::addmm"); for a name on
    one row, the op that launched it."""
    parts = [path.split(PATH_SEPARATOR) if path else [] for path in paths]
    shown = []
    for index, name in enumerate(names):
        others = [parts[other] for other in range(len(names)) if other != index and names[other] == name]
        own = parts[index]
        if not others:
            shown.append(own[-1] if own else "")
            continue
        common = max(_common_prefix(own, other) for other in others)
        cut = min(common, max(len(own) - 1, 0))
        shown.append(("… > " if cut else "") + PATH_SEPARATOR.join(own[cut:]))
    return shown


def _common_prefix(a: list, b: list) -> int:
    length = 0
    while length < min(len(a), len(b)) and a[length] == b[length]:
        length += 1
    return length


def gpu_work_table(rows: list[dict], on_pick, first_key: int = 0):
    """A sortable table of kernel_summary's rows; each row keeps its call path (rows of one name
    differ by it: it is shown under the name)."""
    from .summary_table import SortableTable

    table_rows = []
    shown = splitting_paths([row["name"] for row in rows], [row["call_path"] for row in rows])
    for index, row in enumerate(rows):
        table_rows.append({
            "key": str(first_key + index), "name": row["name"], "label": printable(row["name"]),
            "path": printable(shown[index]), "full_path": printable(row["call_path"]),
            "call_path": row["call_path"],
            "count": int(row["count"]), "count_text": f"{int(row['count']):,}",
            "total_us": float(row["total_us"]), "total_us_text": format_us(row["total_us"]),
            "mean_us": float(row["mean_us"]), "mean_us_text": format_us(row["mean_us"]),
            "share_pct": float(row["share_pct"]), "share_pct_text": f"{row['share_pct']:.1f}%"})
    return SortableTable(GPU_WORK_COLUMNS, table_rows, "total_us", on_pick)


class LazyPane(ipywidgets.VBox):
    """A tab's place in the panes, its pane built the first time it is asked for (``pane``): when
    the user opens the tab, or code reads it. Why: the Overview's analyses (steps, call paths,
    kernel tables, findings) were ~40% of the widget's build at 10M events (2.5 s of 7), all before
    the timeline could show, and their 445 MB peak stacked on the kept Timeline's."""

    def __init__(self, build):
        # After a kernel restart nothing computes it: the widget's style swaps in the restart note.
        super().__init__([ipywidgets.HTML(
            f"<i class='nbprof-computing'>computing…</i><span class='nbprof-tab-restarted'>"
            f"{html_text(TAB_RESTARTED)}</span>")])
        self._build, self._pane = build, None

    @property
    def pane(self):
        if self._pane is None:
            try:
                self._pane = self._build()
            except Exception as error:  # say so in the tab, not "computing…" for ever
                self.children = [ipywidgets.HTML(
                    f"<i>could not compute this tab: {html_text(f'{type(error).__name__}: {error}')}</i>")]
                raise
            self.children = [self._pane]
        return self._pane


def add_answer_panes(widget, compare_to=None, compare_label: str = "the previous run") -> None:
    """Append the Overview (and, given a trace to compare with, the Compare) tab to the widget's
    panes, keeping the pane it shows. Each is built when its tab is first opened (LazyPane);
    ``widget.overview`` / ``widget.compare`` build it too."""
    from .compare import ComparePane

    panes = widget.panes
    shown = panes.selected_index
    extra = [("Overview", LazyPane(lambda: OverviewPane(widget.trace, widget.timeline)))]
    if compare_to is not None:
        extra.append(("Compare", LazyPane(lambda: ComparePane(compare_to, widget.trace, compare_label,
                                                              timeline=widget.timeline))))
    widget.lazy_panes = dict(extra)
    titles = [panes.get_title(i) for i in range(len(panes.children))]
    panes.children = [*panes.children, *(pane for _, pane in extra)]
    for index, title in enumerate([*titles, *(title for title, _ in extra)]):
        panes.set_title(index, title)
    panes.selected_index = shown

    def opened(change) -> None:
        index = change["new"]
        if index is not None and isinstance(panes.children[index], LazyPane):
            panes.children[index].pane  # noqa: B018 (builds it, and fills the tab)

    panes.observe(opened, names="selected_index")
