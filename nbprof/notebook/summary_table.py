"""The widget's Summary pane: key averages as a table that sorts on a header click
(js/summary_table.js); a row click calls ``on_pick(name)``."""

from __future__ import annotations

import anywidget
import traitlets

from ..analysis.averages import SORT_KEYS
from ..model import Trace
from ..timeline.jsfiles import js_path
from .summary import summary_columns, summary_rows


class SummaryTable(anywidget.AnyWidget):
    _esm = js_path("summary_table.js")
    columns = traitlets.List().tag(sync=True)
    rows = traitlets.List().tag(sync=True)  # sent once; the browser sorts them
    sort_key = traitlets.Unicode("cpu_time_total").tag(sync=True)
    descending = traitlets.Bool(True).tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)  # the picked op's name, kept through re-sorts

    def __init__(self, trace: Trace, sort_by: str, on_pick):
        if sort_by not in SORT_KEYS:
            raise ValueError(f"cannot sort by {sort_by!r}: choose one of {', '.join(SORT_KEYS)}")
        super().__init__(columns=summary_columns(trace), rows=summary_rows(trace), sort_key=sort_by,
                         descending=sort_by != "name")
        self._on_pick = on_pick
        self.observe(self._picked, names="selected")

    def ordered_names(self) -> list[str]:
        """Op names in the order the table shows them (what js/summary_table.js sorts to)."""
        key = self.sort_key
        rows = sorted(self.rows, key=lambda row: row[key], reverse=self.descending)
        return [row["name"] for row in rows]

    def _picked(self, change) -> None:
        if change["new"]:
            self._on_pick(change["new"])
