"""The widget where memory was recorded: a Memory tab whose peak and holders select their ops on
the timeline, and an area selection that says bytes allocated / freed / net per op name."""

import pathlib
import sys

import nbprof

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "unit"))
from test_memory import two_thread_trace  # noqa: E402


def test_the_memory_tab_shows_peaks_and_holders_and_clicks_select_their_ops():
    trace = two_thread_trace()
    widget = nbprof.widget(trace, name="m")
    titles = [widget.panes.get_title(i) for i in range(len(widget.panes.children))]
    assert "Memory" in titles
    text = " ".join(child.value for row in widget.memory.children
                    for child in getattr(row, "children", [row]) if hasattr(child, "value")
                    and isinstance(child.value, str))
    assert "CPU: 128.0 MiB at" in text and "cuda:0: 10.0 MiB at" in text
    buttons = {button.tooltip: button for button in widget.memory.buttons()}
    buttons["phase_alloc > aten::empty"].click()
    selected = widget.timeline.selection.data["event_id"][0]
    assert trace.names[trace.name_id[selected]] == "aten::empty"
    assert "aten::empty" in widget.details.value
    assert "Memory" not in [nbprof.widget(_no_memory(), name="n")
                            .panes.get_title(i) for i in range(2)]


def _no_memory():
    return nbprof.Trace.build(start_ns=[0], end_ns=[10], thread=[0], name_id=[0], names=["a"],
                              threads=[(1, 1, "t")])


def test_an_area_selection_says_bytes_allocated_freed_and_net_per_op():
    trace = two_thread_trace()
    widget = nbprof.widget(trace, name="m")
    widget.timeline.area_selection.data = {"start_ns": [200], "end_ns": [300]}  # phase_peak
    memory = widget.details.value.split("nbprof-range-memory")[1]
    rows = {cells[0]: cells[1:] for cells in (
        [cell.split(">", 1)[1].removeprefix("<code>").removesuffix("</code>")
         for cell in row.split("</td>")[:-1]] for row in memory.split("<tr>")[2:])}
    assert rows == {"aten::add": ["64.0 MiB", "0 B", "64.0 MiB"],
                    "phase_peak": ["0 B", "64.0 MiB", "-64.0 MiB"]}
