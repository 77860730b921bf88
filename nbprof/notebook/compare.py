"""The widget's Compare tab: this run against an earlier one (re-running ``%%cudaprof -o t`` or
``--compare VAR``): the diff (analysis/diff.py) as a sortable table, each row's call path under
its name, a row click outlining that op's events on this run's timeline and zooming to them; and
the two runs' timelines one above the other, steps aligned at their starts, ops coloured by change
(timeline/compare.py)."""

from __future__ import annotations

import ipywidgets
import numpy as np

from ..analysis.averages import format_us, printable
from ..analysis.diff import STATUSES, compare
from ..timeline.html_text import html_text
from .view_range import outline_and_show


class ComparePane(ipywidgets.VBox):
    def __init__(self, before, after, label: str = "the previous run", row_limit: int = 15,
                 timeline=None):
        from jupyter_bokeh import BokehModel

        from ..timeline.compare import comparison_figure

        self.after, self.timeline = after, timeline
        self.comparison = compare(before, after, plain=True)
        self.text = self.comparison.table.table(row_limit=row_limit)
        self.table = diff_table(list(self.comparison.table), self.show_op)
        self.table.add_class("nbprof-diff")
        figure, self.bars = comparison_figure(before, after, self.comparison)
        header = (f"<b>Compared with {html_text(label)}</b>: before {len(before):,} events, after "
                  f"{len(after):,} events; {html_text(self.text.splitlines()[0])}. Click a row to "
                  "see that op on this run's timeline. Below: before (top) and after, each step "
                  "from its start.")
        super().__init__([ipywidgets.HTML(header), self.table, BokehModel(figure)])
        self.add_class("nbprof-compare")

    def show_op(self, key: str) -> None:
        """A diff row was clicked: outline this run's events of that op on that call path and zoom
        the timeline to them (none where the op was removed)."""
        from ..analysis.callpaths import CallPaths

        row = next(row for row in self.table.rows if row["key"] == key)
        trace = self.after
        if self.timeline is None or row["name"] not in trace.names:
            return
        ids = np.flatnonzero(trace.name_id == trace.names.index(row["name"]))
        paths = CallPaths(trace)
        texts = {p: paths.text(p) for p in np.unique(paths.of_event[ids]).tolist()}
        ids = ids[np.fromiter((texts[p] == row["call_path"] for p in paths.of_event[ids].tolist()),
                              bool, len(ids))]
        outline_and_show(self.timeline, trace.start_ns[ids], trace.end_ns[ids], event_ids=ids)


def diff_table(rows: list[dict], on_pick):
    """The diff's rows as a sortable table: by how much each changed, first."""
    from .overview import splitting_paths
    from .summary_table import SortableTable

    with_gpu = any(row["gpu_before_us"] or row["gpu_after_us"] for row in rows)
    per_step = any(row["step"] is not None for row in rows)
    columns = [{"key": "name", "title": "Op", "tip": "op name; under it, its call path (and step)"},
               {"key": "status_order", "title": "Change", "tip": "slower, faster, added, removed, same"},
               {"key": "count_delta", "title": "Calls", "tip": "calls before -> after"},
               {"key": "self_cpu_after_us", "title": "Self CPU", "tip": "self CPU time after"},
               {"key": "self_cpu_delta_us", "title": "Δ Self CPU", "tip": "after - before"}]
    if with_gpu:
        columns += [{"key": "gpu_after_us", "title": "GPU", "tip": "GPU time after"},
                    {"key": "gpu_delta_us", "title": "Δ GPU", "tip": "after - before"}]
    columns.append({"key": "change_us", "title": "|Δ|", "tip": "|Δ self CPU| + |Δ GPU|: the order"})
    shown = splitting_paths([row["name"] for row in rows], [row["call_path"] for row in rows])
    table_rows = []
    for index, row in enumerate(rows):
        step = f"step {row['step'] + 1} · " if per_step and row["step"] is not None and row["step"] >= 0 else ""
        table_rows.append({
            "key": str(index), "name": row["name"], "label": printable(row["name"]),
            "path": step + printable(shown[index]), "full_path": printable(row["call_path"]),
            "call_path": row["call_path"],
            "status_order": STATUSES.index(row["status"]), "status_order_text": row["status"],
            "count_delta": float(row["count_delta"]),
            "count_delta_text": f"{row['count_before']:g} -> {row['count_after']:g}",
            **{key: float(row[key]) for key in ("self_cpu_after_us", "self_cpu_delta_us",
                                                "gpu_after_us", "gpu_delta_us", "change_us")},
            "self_cpu_after_us_text": format_us(row["self_cpu_after_us"]),
            "self_cpu_delta_us_text": _signed(row["self_cpu_delta_us"]),
            "gpu_after_us_text": format_us(row["gpu_after_us"]),
            "gpu_delta_us_text": _signed(row["gpu_delta_us"]),
            "change_us_text": format_us(row["change_us"])})
    return SortableTable(columns, table_rows, "change_us", on_pick)


def _signed(us: float) -> str:
    return ("+" if us > 0 else "-" if us < 0 else "") + format_us(abs(us))
