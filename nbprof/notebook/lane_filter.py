"""The widget's lane filter: a checkbox per lane, in a row per group (process, rank, GPU) whose
own checkbox turns the whole group on or off. ``value`` is the tuple of lanes shown, in order."""

from __future__ import annotations

import ipywidgets
import traitlets

ALL_OFF = "Every lane is hidden: tick one to see the timeline."


class LaneFilter(ipywidgets.VBox):
    value = traitlets.Tuple()  # the lanes shown; set it, or tick boxes in the browser

    def __init__(self, lanes: list[str], groups: list[str], labels: list[str] | None = None):
        """``lanes``: full names (the values); ``labels``: what each box says (the group's row
        already names the process or GPU), the full name on hover."""
        self.options = tuple(lanes)
        self._syncing = False  # a group box setting its lanes' boxes must not echo back
        self._lane_boxes = {lane: ipywidgets.Checkbox(value=True, description=label, indent=False,
                                                      tooltip=lane,
                                                      layout=ipywidgets.Layout(width="auto"))
                            for lane, label in zip(lanes, labels or lanes)}
        self._group_boxes, rows = {}, []
        for group in dict.fromkeys(groups):
            members = [lane for lane, lane_group in zip(lanes, groups) if lane_group == group]
            box = ipywidgets.Checkbox(value=True, description=f"{group or 'lanes'}:", indent=False,
                                      layout=ipywidgets.Layout(width="auto"))
            box.add_class("nbprof-lane-group")
            box.observe(lambda change, members=members: self._group_ticked(members, change["new"]),
                        names="value")
            self._group_boxes[group] = (box, members)
            rows.append(ipywidgets.HBox([box, *(self._lane_boxes[lane] for lane in members)],
                                        layout=ipywidgets.Layout(flex_flow="row wrap")))
        for box in self._lane_boxes.values():
            box.observe(self._lane_ticked, names="value")
        self.message = ipywidgets.HTML()
        self.message.add_class("nbprof-lanes-off")
        super().__init__([*rows, self.message], value=self.options)
        self.add_class("nbprof-lane-filter")

    def _group_ticked(self, members: list[str], shown: bool) -> None:
        if self._syncing:
            return
        self._set({lane: shown for lane in members})

    def _lane_ticked(self, _change) -> None:
        if not self._syncing:
            self.value = tuple(lane for lane in self.options if self._lane_boxes[lane].value)

    @traitlets.observe("value")
    def _value_changed(self, change) -> None:
        unknown = set(change["new"]) - set(self.options)
        if unknown:
            raise ValueError(f"unknown lanes {sorted(unknown)}; the lanes are {list(self.options)}")
        wanted = set(change["new"])
        self._set({lane: lane in wanted for lane in self.options})
        self.message.value = "" if wanted else f"<b>{ALL_OFF}</b>"

    def _set(self, shown: dict[str, bool]) -> None:
        """Tick the boxes as ``shown`` says, the group boxes to match, then update ``value``."""
        self._syncing = True
        try:
            for lane, on in shown.items():
                self._lane_boxes[lane].value = on
            for box, members in self._group_boxes.values():
                box.value = all(self._lane_boxes[lane].value for lane in members)
        finally:
            self._syncing = False
        self.value = tuple(lane for lane in self.options if self._lane_boxes[lane].value)
