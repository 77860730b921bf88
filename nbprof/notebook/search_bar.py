"""The widget's search bar: a regex box, previous / next arrows and the match count ("3 of 51 · 7
in view"). Matches (search.py finds them; a summary row's op too) are outlined on the timeline
and stepped through in time order; stepping to one selects it and brings it into view as its own
bar (Timeline.bring_into_view: at full zoom one event hides among merged blocks)."""

from __future__ import annotations

import ipywidgets
import numpy as np

from ..analysis.averages import printable
from ..timeline.html_text import html_text
from .search import events_named, find_events, gpu_launched_by
from .view_range import count_in_view, event_interval


class SearchBar(ipywidgets.HBox):
    """``on_step(row, kind)`` is called for each match stepped to (the widget shows its details)."""

    def __init__(self, trace, timeline, origin_ns: int, on_step):
        self.trace, self.timeline, self.origin_ns = trace, timeline, origin_ns
        self._on_step = on_step
        self.box = ipywidgets.Text(placeholder="search names (regex)", continuous_update=True,
                                   layout=ipywidgets.Layout(width="260px"))
        self.box.add_class("nbprof-search")
        self.count = ipywidgets.HTML()
        self.count.add_class("nbprof-match-count")
        self.previous = ipywidgets.Button(icon="arrow-up", tooltip="previous match",
                                          layout=ipywidgets.Layout(width="36px"))
        self.next = ipywidgets.Button(icon="arrow-down", tooltip="next match",
                                      layout=ipywidgets.Layout(width="36px"))
        # Matches, stepped through in time order (_order, made on the first step).
        self._matches = self._gpu_matches = np.zeros(0, np.int64)
        self._order, self._index = None, -1
        self._message = ""
        self.box.observe(lambda change: self.search(change["new"]), names="value")
        self.box.on_msg(self._on_box_message)  # Enter: the next match (as in a browser's find)
        self.previous.on_click(lambda _button: self.step(-1))
        self.next.on_click(lambda _button: self.step(+1))
        for end in ("start", "end"):  # a zoom or pan changes how many matches are in view
            timeline.plot.x_range.on_change(end, lambda _attr, _old, _new: self._show_count())
        super().__init__([self.box, self.previous, self.next, self.count],
                         layout=ipywidgets.Layout(align_items="center"))

    def search(self, pattern: str) -> None:
        result = find_events(self.trace, pattern)
        self._set_matches(result.event_ids, result.gpu_rows, result.message)

    def show_op(self, name: str) -> None:
        """A summary row was clicked: outline every event of that op and the GPU intervals they
        launched (through the ops nested in them too: what clicking one of them links to)."""
        ids = events_named(self.trace, name)
        gpu_rows = gpu_launched_by(self.trace, ids)
        launched = f" + {len(gpu_rows):,} GPU intervals they launched" if len(gpu_rows) else ""
        self._set_matches(ids, gpu_rows, f"{len(ids):,} events of {printable(name)}{launched}")

    def in_view(self) -> int:
        """Matches (CPU events and GPU intervals) that overlap the time range in view."""
        return count_in_view(self.trace, self.timeline, self.origin_ns, self._matches,
                             self._gpu_matches)

    def step(self, step: int) -> None:
        """Select the next (or previous) match, CPU event or GPU interval, in time order."""
        total = len(self._matches) + len(self._gpu_matches)
        if not total:
            return
        if self._order is None:  # sorted on the first step, not on every keystroke
            starts = np.concatenate([self.trace.start_ns[self._matches],
                                     self.trace.gpu_start_ns[self._gpu_matches]])
            self._order = np.argsort(starts, kind="stable")
        # Before the first step, "previous" goes to the last match (as "next" goes to the first).
        self._index = (self._index + step) % total if self._index >= 0 or step > 0 else total - 1
        k = int(self._order[self._index])
        if k < len(self._matches):
            kind, row = "cpu", int(self._matches[k])
        else:
            kind, row = "gpu", int(self._gpu_matches[k - len(self._matches)])
        self.timeline.select(row, kind=kind)
        # The browser knows the plot's width: it leaves a match that is its own bar in view where
        # it is, else centres on it, zoomed in until it is one (not lost in a merged block).
        self.timeline.bring_into_view(*event_interval(self.trace, row, kind))
        # The selection's on_change shows the details too, but not when the same match is stepped
        # to again (no change): and the user may have switched to another pane since.
        self._on_step(row, kind)
        self._show_count()

    def _on_box_message(self, _widget, content, _buffers) -> None:
        # The text box sends {"event": "submit"} on Enter (what the deprecated on_submit read).
        if content.get("event") == "submit":
            self.step(+1)

    def _set_matches(self, event_ids: np.ndarray, gpu_rows: np.ndarray, message: str) -> None:
        self.timeline.highlight(event_ids, gpu_rows)
        self._matches, self._gpu_matches, self._order = event_ids, gpu_rows, None
        self._index, self._message = -1, message
        self._show_count()

    def _show_count(self) -> None:
        """The search message, or "k of n" while stepping, with how many matches are in view."""
        total = len(self._matches) + len(self._gpu_matches)
        message = f"{self._index + 1} of {total:,}" if self._index >= 0 else self._message
        if total:
            message += f" · {self.in_view():,} in view"
        self.count.value = html_text(message)
