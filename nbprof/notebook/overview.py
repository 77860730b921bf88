"""The widget's Overview and Compare tabs, added to its panes by :func:`add_answer_panes`, each
built when its tab is first opened.

Overview: a stacked bar per step (timeline/overview.py), the steps as a list, the top kernels and
copies, and the findings. Picking a step in the list, or tapping its bar, zooms the timeline to
that step. The contents come from the pure modules (steps, kernel_summary, findings).
"""

from __future__ import annotations

from ..timeline.html_text import PRE_STYLE, html_text

import ipywidgets

from ..analysis.averages import format_us
from ..analysis.callpaths import CallPaths
from ..analysis.findings import findings
from ..analysis.kernel_summary import kernel_summary
from ..analysis.steps import breakdown, step_table
from ..analysis.tables import records


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
        tables = kernels.table()
        if trace.has_gpu:
            memory = kernel_summary(trace, memory=True, limit=5, plain=True, paths=paths)
            tables += "\n\nMemcpy / memset:\n" + memory.table()
        kernel_html = ipywidgets.HTML(
            f"<pre class='nbprof-kernels' style='{PRE_STYLE}'>{html_text(tables)}</pre>"
            if trace.has_gpu else "<i>no GPU work recorded</i>")
        source = self.steps[0]["source"] if self.steps else "none"
        super().__init__([findings_html, ipywidgets.HTML(f"<b>Steps</b> (from {html_text(source)}; pick "
                                                         "one, or tap its bar, to zoom the timeline to it)"),
                          BokehModel(figure), self.step_list, ipywidgets.HTML("<b>Top GPU work</b>"),
                          kernel_html])
        self.add_class("nbprof-overview")

    @staticmethod
    def _step_label(index: int, row: dict) -> str:
        idle = f", GPU idle {row['gpu_idle_pct']:.0f}%" if row["gpu_busy_us"] else ""
        return (f"{index + 1}: {row['step']} · wall {format_us(row['wall_us'])} (CPU part "
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

    def _bar_tapped(self, _attr, _old, new) -> None:
        if new:
            self.zoom_to(int(new[0]))


class LazyPane(ipywidgets.VBox):
    """A tab's place in the panes, its pane built the first time it is asked for (``pane``): when
    the user opens the tab, or code reads it. Why: the Overview's analyses (steps, call paths,
    kernel tables, findings) were ~40% of the widget's build at 10M events (2.5 s of 7), all before
    the timeline could show, and their 445 MB peak stacked on the kept Timeline's."""

    def __init__(self, build):
        super().__init__([ipywidgets.HTML("<i>computing…</i>")])
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
        extra.append(("Compare", LazyPane(lambda: ComparePane(compare_to, widget.trace, compare_label))))
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
