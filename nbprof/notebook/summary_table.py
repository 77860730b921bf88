"""Sortable tables (js/summary_table.js): a header click sorts, a row click calls ``on_pick(key)``,
full names on hover. The Summary pane's key averages, and the Overview's and Compare's tables."""

from __future__ import annotations

import anywidget
import traitlets

from ..analysis.averages import SORT_KEYS
from ..model import Trace
from ..timeline.jsfiles import js_path
from .summary import summary_columns, summary_rows


class SortableTable(anywidget.AnyWidget):
    """``columns``: dicts of key, title, tip ("name" is the text column). ``rows``: dicts with each
    column's number (what it sorts by) and ``<key>_text`` (what it shows), ``name`` and ``label``,
    optionally ``key`` (what a click picks; else the name) and ``path`` (a line under the name: the
    call path that tells apart rows of one name)."""

    _esm = js_path("summary_table.js")
    columns = traitlets.List().tag(sync=True)
    rows = traitlets.List().tag(sync=True)  # sent once; the browser sorts them
    sort_key = traitlets.Unicode("cpu_time_total").tag(sync=True)
    descending = traitlets.Bool(True).tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)  # the picked row's key, kept through re-sorts

    def __init__(self, columns: list[dict], rows: list[dict], sort_key: str, on_pick,
                 descending: bool | None = None):
        super().__init__(columns=columns, rows=rows, sort_key=sort_key,
                         descending=sort_key != "name" if descending is None else descending)
        self._on_pick = on_pick
        self.observe(self._picked, names="selected")

    def ordered_keys(self) -> list[str]:
        """Row keys in the order the table shows them (what js/summary_table.js sorts to)."""
        key = self.sort_key
        rows = sorted(self.rows, key=lambda row: row[key], reverse=self.descending)
        return [row.get("key", row["name"]) for row in rows]

    def _picked(self, change) -> None:
        if change["new"]:
            self._on_pick(change["new"])


class SummaryTable(SortableTable):
    """The Summary pane: key averages by op name; a row click picks that op's name."""

    def __init__(self, trace: Trace, sort_by: str, on_pick):
        if sort_by not in SORT_KEYS:
            raise ValueError(f"cannot sort by {sort_by!r}: choose one of {', '.join(SORT_KEYS)}")
        super().__init__(summary_columns(trace), summary_rows(trace), sort_by, on_pick)

    def ordered_names(self) -> list[str]:
        """Op names in the order the table shows them."""
        return self.ordered_keys()
