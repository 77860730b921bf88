"""The widget's Compare tab: this run against an earlier one (re-running ``%%cudaprof -o t`` or
``--compare VAR``): the diff (analysis/diff.py) as a sortable table, each row's call path under
its name, a row click outlining that op's events on this run's timeline and zooming to them; and
the two runs' timelines one above the other, steps aligned at their starts, ops coloured by change
(timeline/compare.py)."""

from __future__ import annotations

import ipywidgets
import numpy as np

from ..analysis.averages import format_us, printable
from ..analysis.diff import STATUSES, _signed, compare
from ..timeline.html_text import html_text
from .view_range import outline_and_show


class ComparePane(ipywidgets.VBox):
    def __init__(self, before, after, label: str = "the previous run", row_limit: int = 15,
                 timeline=None):
        from jupyter_bokeh import BokehModel

        from ..timeline.compare import comparison_figure

        self.after, self.timeline = after, timeline
        self.comparison = compare(before, after, plain=True)
        self.text = self.comparison.report(row_limit=row_limit)
        self.by_name = diff_table(list(self.comparison.by_name), self.show_op, by_name=True)
        self.table = diff_table(list(self.comparison.table), self.show_op)
        self.by_name.add_class("nbprof-diff-by-name")
        self.table.add_class("nbprof-diff")
        figure, self.bars = comparison_figure(before, after, self.comparison)
        header = (f"<b>Compared with {html_text(label)}</b>: before {len(before):,} events, after "
                  f"{len(after):,} events; {html_text(self.text.splitlines()[0])}. Click a row to "
                  "see that op on this run's timeline. Below: before (top) and after, each step "
                  "from its start.")
        detail = html_text(" ".join([self.text.split("By call path:\n", 1)[-1].splitlines()[0],
                                     self.comparison.table.attrs.get("footer", "")]).strip())
        super().__init__([ipywidgets.HTML(header), self.by_name,
                          ipywidgets.HTML(f"<b>By call path</b>: {detail}"), self.table,
                          BokehModel(figure)])
        self.add_class("nbprof-compare")

    def show_op(self, key: str) -> None:
        """A diff row was clicked: outline this run's events of that op on that call path and zoom
        the timeline to them (none where the op was removed)."""
        from ..analysis.callpaths import CallPaths

        row = next(row for table in (self.by_name, self.table) for row in table.rows
                   if row["key"] == key)
        trace = self.after
        if self.timeline is None or row["name"] not in trace.names:
            return
        ids = np.flatnonzero(trace.name_id == trace.names.index(row["name"]))
        if row["call_path"] is None:  # a by-name row: all of that op's events
            outline_and_show(self.timeline, trace.start_ns[ids], trace.end_ns[ids], event_ids=ids)
            return
        paths = CallPaths(trace)
        texts = {p: paths.text(p) for p in np.unique(paths.of_event[ids]).tolist()}
        ids = ids[np.fromiter((texts[p] == row["call_path"] for p in paths.of_event[ids].tolist()),
                              bool, len(ids))]
        outline_and_show(self.timeline, trace.start_ns[ids], trace.end_ns[ids], event_ids=ids)


def diff_table(rows: list[dict], on_pick, by_name: bool = False):
    """The diff's rows (by call path, or ``by_name`` the roll-up) as a sortable table: by how much
    each changed, first."""
    from .overview import splitting_paths
    from .summary_table import SortableTable

    with_gpu = any(row["gpu_before_us"] or row["gpu_after_us"] for row in rows)
    per_step = not by_name and any(row["step"] is not None for row in rows)
    columns = [{"key": "name", "title": "Op", "tip": "op name" + (
                   "" if by_name else "; under it, its call path (and step)")},
               {"key": "status_order", "title": "Change", "tip": "slower, faster, added, removed, same"},
               {"key": "count_delta", "title": "Calls", "tip": "calls before -> after"}]
    if by_name:
        columns += [{"key": "cpu_after_us", "title": "CPU", "tip": "CPU time after, ops inside included"},
                    {"key": "cpu_delta_us", "title": "Δ CPU", "tip": "after - before"}]
    columns += [{"key": "self_cpu_after_us", "title": "Self CPU", "tip": "self CPU time after"},
                {"key": "self_cpu_delta_us", "title": "Δ Self CPU", "tip": "after - before"}]
    if with_gpu:
        columns += [{"key": "gpu_after_us", "title": "GPU", "tip": "GPU time after"},
                    {"key": "gpu_delta_us", "title": "Δ GPU", "tip": "after - before"}]
    columns.append({"key": "change_us", "title": "|Δ|", "tip": (
        "|Δ CPU| + |Δ GPU|" if by_name else "|Δ self CPU| + |Δ GPU|") + ": the order"})
    paths = [row.get("call_path") or "" for row in rows]
    shown = [""] * len(rows) if by_name else splitting_paths([row["name"] for row in rows], paths)
    table_rows = []
    for index, row in enumerate(rows):
        step = f"step {row['step'] + 1} · " if per_step and row["step"] is not None and row["step"] >= 0 else ""
        table_rows.append({
            "key": f"{'name' if by_name else 'path'}:{index}", "name": row["name"],
            "label": printable(row["name"]), "path": step + printable(shown[index]),
            "full_path": printable(paths[index]), "call_path": None if by_name else paths[index],
            "status_order": STATUSES.index(row["status"]), "status_order_text": row["status"],
            "count_delta": float(row["count_delta"]),
            "count_delta_text": f"{row['count_before']:g} -> {row['count_after']:g}",
            **{key: float(row[key]) for key in ("cpu_after_us", "cpu_delta_us", "self_cpu_after_us",
                                                "self_cpu_delta_us", "gpu_after_us", "gpu_delta_us",
                                                "change_us")},
            "cpu_after_us_text": format_us(row["cpu_after_us"]),
            "cpu_delta_us_text": _signed(row["cpu_delta_us"]).strip(),
            "self_cpu_after_us_text": format_us(row["self_cpu_after_us"]),
            "self_cpu_delta_us_text": _signed(row["self_cpu_delta_us"]).strip(),
            "gpu_after_us_text": format_us(row["gpu_after_us"]),
            "gpu_delta_us_text": _signed(row["gpu_delta_us"]).strip(),
            "change_us_text": format_us(row["change_us"])})
    return SortableTable(columns, table_rows, "change_us", on_pick)

