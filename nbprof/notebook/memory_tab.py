"""The widget's "Memory" tab, where the trace recorded memory: each device's peak (when, in which
op) and what held memory then (trace.memory_peak / memory_holders), each with a button that
selects the op on the timeline and brings it into view."""

from __future__ import annotations

import ipywidgets

from ..analysis.averages import format_us, printable
from ..analysis.memory import OUTSIDE, format_bytes, memory_holders, memory_peak
from .details import timeline_origin_ns
from ..timeline.html_text import html_text

LABEL_CHARS = 70


def _button(text: str, row: int, on_op) -> ipywidgets.Widget:
    if row < 0:  # outside any op: nothing to select
        return ipywidgets.HTML(html_text(text))
    text = printable(text)
    button = ipywidgets.Button(description=text if len(text) <= LABEL_CHARS else
                               text[:LABEL_CHARS - 1] + "…", tooltip=text,
                               layout=ipywidgets.Layout(width="auto"))
    button.add_class("nbprof-memory-link")
    button.on_click(lambda _button: on_op(row))
    return button


class MemoryPane(ipywidgets.VBox):
    """``on_op(event id)`` is called when a peak's or a holder's op is clicked."""

    def __init__(self, trace, on_op):
        self.peak = memory_peak(trace, plain=True)
        self.holders = {peak["device"]: memory_holders(trace, device=peak["device"], limit=10,
                                                       plain=True) for peak in self.peak}
        origin = timeline_origin_ns(trace)
        rows = [ipywidgets.HTML("<b>Peak per device</b>")]
        for peak in self.peak:
            rows.append(ipywidgets.HBox([ipywidgets.HTML(html_text(
                f"{peak['device']}: {format_bytes(peak['peak_bytes'])} at "
                f"{format_us((peak['at_ns'] - origin) / 1e3)}, in")),
                _button(peak["op"] or OUTSIDE, int(peak["row"]), on_op)]))
        for device, holders in self.holders.items():
            rows.append(ipywidgets.HTML(f"<b>Held at the peak on {html_text(device)}</b>"))
            for holder in holders:
                rows.append(ipywidgets.HBox([
                    ipywidgets.HTML(html_text(f"{format_bytes(holder['bytes'])} in "
                                              f"{holder['count']} allocation(s) by")),
                    _button(holder["call_path"] or OUTSIDE, int(holder["row"]), on_op)]))
        super().__init__(rows)
        self.add_class("nbprof-memory-pane")

    def buttons(self) -> list[ipywidgets.Button]:
        return [child for row in self.children if isinstance(row, ipywidgets.HBox)
                for child in row.children if isinstance(child, ipywidgets.Button)]


def add_memory_tab(widget, panes: ipywidgets.Tab) -> None:
    """Adds the tab where ``widget.trace`` recorded memory."""
    if not len(widget.trace.memory):
        return
    widget.memory = MemoryPane(widget.trace, lambda row: widget.jump_to(row, "cpu"))
    panes.children = [*panes.children, widget.memory]
    panes.set_title(len(panes.children) - 1, "Memory")
