"""%%cudaprof's Overview and Compare tabs in a real IPython shell with real torch: re-running a
``-o VAR`` cell compares with VAR's previous Trace; ``--compare VAR`` names the earlier run."""

import ipywidgets
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output
from test_magic_shell import shell  # noqa: F401  (the IPython shell with nbprof loaded: a fixture)

from nbprof.record import profiler

# Widget.widgets is the registry the displayed view points into (deprecated, still the way there)
pytestmark = pytest.mark.filterwarnings("ignore:Widget.widgets is deprecated")

CELL = ("import torch\nfor step in range(2):\n"
        "    with torch.profiler.record_function(f'ProfilerStep#{step}'):\n"
        "        torch.ones(SIZE, SIZE).mul(2).sum()\n")


def shown_widget(shell, cell):
    with capture_output() as captured:
        result = shell.run_cell(cell)
    assert result.success, result.error_in_exec
    view = next(o for o in captured.outputs if "application/vnd.jupyter.widget-view+json" in o.data)
    return ipywidgets.Widget.widgets[view.data["application/vnd.jupyter.widget-view+json"]["model_id"]]


def titles(widget):
    return [widget.panes.get_title(i) for i in range(len(widget.panes.children))]


def test_rerunning_a_cell_with_o_adds_a_compare_tab_against_the_previous_value(shell):
    shell.user_ns.pop("answers_t", None)
    shell.user_ns["SIZE"] = 8
    first = shown_widget(shell, "%%cudaprof -o answers_t\n" + CELL)
    assert titles(first) == ["Details", "Summary", "Overview"]  # nothing to compare with yet
    assert [row["step"] for row in first.overview.steps] == ["ProfilerStep#0", "ProfilerStep#1"]
    before = shell.user_ns["answers_t"]
    shell.user_ns["SIZE"] = 400
    second = shown_widget(shell, "%%cudaprof -o answers_t\n" + CELL)
    assert titles(second)[-1] == "Compare"
    assert second.compare is not None and "previous value of answers_t" in second.compare.children[0].value
    assert shell.user_ns["answers_t"] is not before
    assert "aten::mul" in second.compare.text and "slower" in second.compare.text
    second.overview.zoom_to(1)
    row = second.overview.steps[1]
    origin = second.timeline._origin_ns
    assert (second.timeline.plot.x_range.start, second.timeline.plot.x_range.end) == (
        row["start_ns"] - origin, row["end_ns"] - origin)


def test_compare_names_an_earlier_trace_and_a_bad_name_stops_before_the_cell_runs(shell):
    shell.user_ns["SIZE"] = 8
    with capture_output():
        shell.run_cell("%%cudaprof -o answers_base --no-display\n" + CELL)
    widget = shown_widget(shell, "%%cudaprof --compare answers_base\n" + CELL)
    assert titles(widget)[-1] == "Compare"
    for name, message in (("answers_missing", "there is no variable 'answers_missing'"),
                          ("SIZE", "SIZE is a int, not an nbprof.Trace")):
        with capture_output():
            result = shell.run_cell(f"%%cudaprof --compare {name}\nanswers_not_run = 1")
        assert isinstance(result.error_in_exec, UsageError)
        assert message in str(result.error_in_exec)
        assert "answers_not_run" not in shell.user_ns
    assert not profiler.is_active()
