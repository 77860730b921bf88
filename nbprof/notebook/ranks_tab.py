"""The widget's "Ranks" tab for a merged job: the per-rank summary, one button per rank that
shows only that rank's lanes (through the widget's lane filter), and "All ranks"."""

from __future__ import annotations

from ..timeline.html_text import html_text

import ipywidgets

from ..analysis.averages import format_us
from ..ranks import summarise_ranks
from ..ranks.summary import steps_cell


def lanes_of_rank(lanes, rank: int) -> list[str]:
    """The lane labels of one rank (a merged trace's lanes start "rank N · ")."""
    return [label for label in lanes if label.startswith(f"rank {rank} · ")]


def summary_html(summary) -> str:
    head = "".join(f"<th>{title}</th>" for title in (
        "Rank", "Wall", "CPU busy", "GPU busy", "In collectives", "Steps", "Step mean"))
    body = []
    for row in summary.rows:
        mean = format_us(sum(row.steps) / len(row.steps) / 1e3) if row.steps else "-"
        straggler = " class='nbprof-straggler'" if row.rank == summary.straggler else ""
        cells = [str(row.rank), *(format_us(v / 1e3) for v in (
            row.wall_ns, row.cpu_busy_ns, row.gpu_busy_ns, row.collective_ns)),
            steps_cell(len(row.steps), row.unfinished_steps), mean]
        body.append(f"<tr{straggler}>" + "".join(f"<td>{html_text(c)}</td>" for c in cells) + "</tr>")
    note = (f"<p><b>Straggler: rank {summary.straggler}</b> ({html_text(summary.reason)})</p>"
            if summary.straggler is not None else "")
    return f"<table class='nbprof-ranks'><tr>{head}</tr>{''.join(body)}</table>{note}"


class RanksPane(ipywidgets.VBox):
    """``on_rank(rank or None)`` is called when a rank's button (or "All ranks") is clicked."""

    def __init__(self, trace, on_rank):
        self.summary = summarise_ranks(trace)
        self.table = ipywidgets.HTML(summary_html(self.summary))
        self.buttons = [ipywidgets.Button(description=f"rank {row.rank}",
                                          tooltip=f"show only rank {row.rank}'s lanes",
                                          layout=ipywidgets.Layout(width="auto"))
                        for row in self.summary.rows]
        self.all_ranks = ipywidgets.Button(description="All ranks",
                                           layout=ipywidgets.Layout(width="auto"))
        for button, row in zip(self.buttons, self.summary.rows):
            button.on_click(lambda _button, rank=row.rank: on_rank(rank))
        self.all_ranks.on_click(lambda _button: on_rank(None))
        super().__init__([self.table, ipywidgets.HBox([*self.buttons, self.all_ranks],
                                                      layout=ipywidgets.Layout(flex_flow="row wrap"))])
        self.add_class("nbprof-ranks-pane")


def add_ranks_tab(widget, panes: ipywidgets.Tab) -> None:
    """Adds the tab to a merged job's widget (``widget.lane_filter`` and ``widget.trace``)."""
    if "thread_rank" not in widget.trace.meta:
        return

    def show_rank(rank):
        options = list(widget.lane_filter.options)
        widget.lane_filter.value = options if rank is None else lanes_of_rank(options, rank)

    widget.ranks = RanksPane(widget.trace, show_rank)
    panes.children = [*panes.children, widget.ranks]
    panes.set_title(len(panes.children) - 1, "Ranks")
