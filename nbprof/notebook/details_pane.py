"""The widget's Details pane: one event's details (details.py) with its parent, children and
launched GPU work as links that select and zoom to them; or, for an area selection, what ran in
that time range (range_summary.py)."""

from __future__ import annotations

import ipywidgets

from ..analysis.averages import printable
from ..model import Trace
from ..analysis.range_summary import range_summary
from .details import (HINT, LinkRow, details_html, event_links, gpu_details_html, gpu_links,
                      range_summary_html)

LINK_CHARS = 48  # a longer name is cut on its link; the tooltip has all of it
# Buttons that read as links: the pane is text to read, with some words to click.
STYLE = ("<style>.nbprof-details .nbprof-link { background: none; border: none; box-shadow: none; "
         "color: var(--jp-content-link-color, #1a73e8); text-decoration: underline; cursor: pointer; "
         "width: auto; height: auto; line-height: 1.4; padding: 0 4px; margin: 0; } "
         ".nbprof-details .nbprof-link-label { font-weight: bold; min-width: 110px; } "
         ".nbprof-details .nbprof-link-row { flex-flow: row wrap; align-items: baseline; }</style>")


def cell_numbers() -> dict:
    """IPython's compiled-cell file name -> execution count, to name cells in stacks; empty
    outside IPython. (``CachingCompiler.cache`` fills it, ipykernel's temp files included.)"""
    from IPython import get_ipython

    shell = get_ipython()
    return dict(getattr(getattr(shell, "compile", None), "_filename_map", None) or {})


class DetailsPane(ipywidgets.VBox):
    """``show(row, kind)`` an event, ``show_range(start_ns, end_ns)`` an area; a link click calls
    ``on_jump(row, kind)``. ``value`` is the pane's HTML (without the links' rows)."""

    def __init__(self, trace: Trace, on_jump):
        self.trace = trace
        self._on_jump = on_jump
        self.body = ipywidgets.HTML(HINT)
        self.links = ipywidgets.VBox()
        self.shown = None  # (row, kind) of the event shown, or None
        super().__init__([ipywidgets.HTML(STYLE), self.body, self.links])
        self.add_class("nbprof-details")

    @property
    def value(self) -> str:
        return self.body.value

    def show(self, row: int | None, kind: str = "cpu") -> None:
        numbers = cell_numbers()  # read now: cells run since the widget was made are known too
        self.shown = None if row is None else (int(row), kind)
        if row is None:
            self.body.value, rows = HINT, []
        elif kind == "gpu":
            self.body.value = gpu_details_html(self.trace, row, numbers, links=False)
            rows = gpu_links(self.trace, row)
        else:
            self.body.value = details_html(self.trace, row, numbers, links=False)
            rows = event_links(self.trace, row)
        self.links.children = [self._link_row(link_row) for link_row in rows]

    def show_range(self, start_ns: int, end_ns: int, shown=(None, None)) -> None:
        """The area's summary; ``shown``: (CPU, GPU) bool masks of what the lane filter shows."""
        summary = range_summary(self.trace, start_ns, end_ns, cpu_shown=shown[0], gpu_shown=shown[1])
        self.body.value = range_summary_html(self.trace, summary)
        self.links.children = []

    def link_buttons(self) -> list[ipywidgets.Button]:
        """Every link shown (for tests, and what a click in the browser reaches)."""
        return [child for row in self.links.children for child in row.children
                if isinstance(child, ipywidgets.Button)]

    def _link_row(self, row: LinkRow) -> ipywidgets.HBox:
        label = ipywidgets.HTML(row.label)  # nbprof's own words, never the trace's
        label.add_class("nbprof-link-label")
        items: list[ipywidgets.DOMWidget] = [label]
        for link in row.links:
            name = printable(link.text)
            button = ipywidgets.Button(description=name if len(name) <= LINK_CHARS
                                       else name[:LINK_CHARS - 1] + "…", tooltip=name)
            button.add_class("nbprof-link")
            button.on_click(lambda _button, link=link: self._on_jump(link.row, link.kind))
            items.append(button)
        if not row.links:
            items.append(ipywidgets.HTML("<i>top level</i>" if row.label == "Parents" else "<i>none</i>"))
        if row.more:
            items.append(ipywidgets.HTML(f"and {row.more:,} more"))
        box = ipywidgets.HBox(items)
        box.add_class("nbprof-link-row")
        return box
