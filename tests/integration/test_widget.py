"""nbprof.widget on a real recording, driven from Python as the browser's events would drive it."""

import json
import re

import numpy as np
import pytest
import torch

import nbprof
from nbprof.formats.chrome.check import check_chrome_trace


@pytest.fixture(scope="module")
def trace():
    with nbprof.profile(record_shapes=True) as prof:
        x = torch.ones(8, 8)
        for _ in range(30):
            x = torch.relu(x @ x / 8 + 1)
    return prof.trace


def test_search_counts_highlights_and_steps_through_matches(trace):
    widget = nbprof.widget(trace, name="steps")
    widget.search.value = "^aten::relu$"  # what typing in the box does
    assert widget.match_count.value == "30 events · 30 in view"  # the whole trace is in view
    assert len(widget.timeline.highlighted.data["event_id"]) == 30
    widget.next.click()
    widget.next.click()
    assert widget.match_count.value.startswith("2 of 30 · ")
    second = widget.timeline.selection.data["event_id"][0]
    assert trace.names[trace.name_id[second]] == "aten::relu"
    assert "aten::relu" in widget.details.value and widget.panes.selected_index == 0
    x_range = widget.timeline.plot.x_range
    origin = int(trace.start_ns.min())
    assert x_range.start <= trace.start_ns[second] - origin <= x_range.end
    widget.previous.click()
    widget.previous.click()
    assert widget.match_count.value.startswith("30 of 30 · ")  # wraps around
    widget.search.value = ""
    assert len(widget.timeline.highlighted.data["event_id"]) == 0 and widget.match_count.value == ""


def _record_view_requests(timeline) -> list:
    """The ranges the widget asks the timeline to bring into view (the browser then zooms: the
    browser tests check that part), passed on to the real method."""
    requests, bring_into_view = [], timeline.bring_into_view
    timeline.bring_into_view = lambda start, end: (requests.append((start, end)),
                                                   bring_into_view(start, end))
    return requests


def test_stepping_brings_each_match_into_view_and_the_count_says_how_many_are_in_view(trace):
    widget = nbprof.widget(trace)
    requests = _record_view_requests(widget.timeline)
    x_range = widget.timeline.plot.x_range
    widget.search.value = "^aten::relu$"
    widget.next.click()
    widget.next.click()
    relu = np.flatnonzero(trace.name_id == trace.names.index("aten::relu"))
    assert requests == [(int(trace.start_ns[r]), int(trace.end_ns[r])) for r in relu[:2]]
    # the kernel moved its x range onto the match at once (the browser refines it with the
    # plot's real width), and the count follows that view
    origin = widget._origin_ns
    assert x_range.start <= trace.start_ns[relu[1]] - origin and trace.end_ns[relu[1]] - origin <= x_range.end
    in_view = widget.in_view()
    assert 1 <= in_view < 30 and widget.match_count.value == f"2 of 30 · {in_view} in view"
    # the browser zoomed onto the second relu and told the kernel its new range
    x_range.update(start=int(trace.start_ns[relu[1]]) - origin - 10,
                   end=int(trace.end_ns[relu[1]]) - origin + 10)
    assert widget.match_count.value == "2 of 30 · 1 in view"


def test_the_match_count_says_how_many_are_in_view(trace):
    widget = nbprof.widget(trace)
    widget.search.value = "^aten::relu$"
    relu = np.flatnonzero(trace.name_id == trace.names.index("aten::relu"))
    origin = int(min(trace.start_ns.min(), trace.gpu_start_ns.min(initial=trace.start_ns.min())))
    # what a zoom in the browser sends the kernel: a window over the first ten relus
    start, end = trace.start_ns[relu[0]] - origin, trace.end_ns[relu[9]] - origin
    widget.timeline.plot.x_range.update(start=start, end=end)
    assert widget.match_count.value == "30 events · 10 in view"


def test_summary_is_sortable_and_a_row_highlights_its_op(trace):
    widget = nbprof.widget(trace)
    summary = widget.summary
    assert [c["key"] for c in summary.columns] == ["name", "cpu_time_total", "self_cpu_time_total",
                                                    "cpu_time_avg", "count"]  # CPU only: no CUDA
    summary.sort_key = "count"  # a header click
    counts = {row["name"]: row["count"] for row in summary.rows}
    assert [counts[n] for n in summary.ordered_names()] == sorted(counts.values(), reverse=True)
    summary.descending = False  # the same header again
    assert [counts[n] for n in summary.ordered_names()] == sorted(counts.values())
    summary.selected = "aten::matmul"  # a click on the row
    ids = widget.timeline.highlighted.data["event_id"]
    assert len(ids) == 30 and {trace.names[trace.name_id[i]] for i in ids} == {"aten::matmul"}
    assert widget.match_count.value == "30 events of aten::matmul · 30 in view"


@pytest.fixture(scope="module")
def alexnet(shared_traces):
    return nbprof.load(shared_traces / "gpu_alexnet_kineto.json.gz")


def test_search_outlines_gpu_matches_and_steps_through_them_in_time_order(alexnet):
    widget = nbprof.widget(alexnet)
    kernels = np.flatnonzero(np.char.find([n.lower() for n in alexnet.names], "gemm") >= 0)
    gpu_rows = np.flatnonzero(np.isin(alexnet.gpu_name_id, kernels))
    cpu_ids = np.flatnonzero(np.isin(alexnet.name_id, kernels))
    assert len(gpu_rows) > 1  # the test needs GPU matches
    widget.search.value = "gemm"
    assert list(widget.timeline.highlighted_gpu.data["gpu_row"]) == gpu_rows.tolist()
    assert list(widget.timeline.highlighted.data["event_id"]) == cpu_ids.tolist()
    assert "not outlined" not in widget.match_count.value
    assert f"{len(gpu_rows)} GPU intervals" in widget.match_count.value
    starts = []
    for _ in range(len(gpu_rows) + len(cpu_ids)):
        widget.next.click()
        (row,), (kind,) = widget.timeline.selection.data["event_id"], widget.timeline.selection.data["kind"]
        starts.append((alexnet.gpu_start_ns if kind == "gpu" else alexnet.start_ns)[row])
        if kind == "gpu":
            assert row in gpu_rows and "Launched by" in widget.details.value
    assert starts == sorted(starts)
    widget.search.value = ""
    assert len(widget.timeline.highlighted_gpu.data["gpu_row"]) == 0


def test_a_summary_row_outlines_the_gpu_intervals_its_op_launched(alexnet):
    widget = nbprof.widget(alexnet)
    widget.summary.selected = "aten::addmm"  # the op that launches the Linear layers' gemms
    addmm = np.flatnonzero(alexnet.name_id == alexnet.names.index("aten::addmm"))
    launched = np.flatnonzero(np.isin(alexnet.gpu_launch, addmm))
    assert len(launched) and list(widget.timeline.highlighted_gpu.data["gpu_row"]) == launched.tolist()
    assert widget.match_count.value == (f"{len(addmm)} events of aten::addmm + {len(launched)} GPU "
                                        f"intervals they launched · {len(addmm) + len(launched)} in view")
    # aten::linear launches nothing itself: its row outlines what the addmm inside it launched
    widget.summary.selected = "aten::linear"
    assert set(launched) <= set(widget.timeline.highlighted_gpu.data["gpu_row"])


def test_details_links_select_and_bring_into_view_parent_children_and_launched_kernels(alexnet):
    widget = nbprof.widget(alexnet)
    requests = _record_view_requests(widget.timeline)
    addmm = int(np.flatnonzero(alexnet.name_id == alexnet.names.index("aten::addmm"))[0])
    widget.timeline.selection.data = {"event_id": [addmm], "kind": ["cpu"]}  # a tap
    links = {button.description: button for button in widget.details.link_buttons()}
    parent = int(alexnet.parent[addmm])
    assert alexnet.names[alexnet.name_id[parent]] in links  # aten::linear
    kernel_row = int(np.flatnonzero(alexnet.gpu_launch == addmm)[0])
    kernel = next(b for b in widget.details.link_buttons()
                  if b.tooltip == alexnet.names[alexnet.gpu_name_id[kernel_row]])
    kernel.click()  # a launched kernel: the GPU interval is selected, brought into view, detailed
    assert widget.timeline.selection.data == {"event_id": [kernel_row], "kind": ["gpu"]}
    assert requests == [(int(alexnet.gpu_start_ns[kernel_row]), int(alexnet.gpu_end_ns[kernel_row]))]
    assert "Launched by" in widget.details.value
    # two links back: the op that launched it, and the runtime call the timeline's arrow starts at
    launcher, call = widget.details.link_buttons()
    assert launcher.tooltip == "aten::addmm" and call.tooltip == "cudaLaunchKernel"
    launcher.click()  # back to the op that launched it
    assert widget.timeline.selection.data == {"event_id": [addmm], "kind": ["cpu"]}
    assert requests[-1] == (int(alexnet.start_ns[addmm]), int(alexnet.end_ns[addmm]))
    child = next(b for b in widget.details.link_buttons()
                 if b.tooltip == alexnet.names[alexnet.name_id[alexnet.children(addmm)[0]]])
    child.click()
    assert widget.timeline.selection.data["event_id"] == [alexnet.children(addmm)[0]]
    assert "µs" in widget.details.value and "s → " in widget.details.value


def test_an_area_selection_summarises_its_range_in_the_details(alexnet):
    from nbprof.timeline.html_text import html_text
    from nbprof.notebook.details import NUMBER
    from nbprof.analysis.range_summary import range_summary

    widget = nbprof.widget(alexnet)
    widget.timeline.select(5)
    widget.panes.selected_index = 1
    start = int(alexnet.gpu_start_ns[10])
    end = int(alexnet.gpu_end_ns[40])
    widget.timeline.area_selection.data = {"start_ns": [start], "end_ns": [end]}  # a drag
    html = widget.details.value
    assert widget.panes.selected_index == 0 and "Selected range" in html
    summary = range_summary(alexnet, start, end)
    top_gpu = summary.gpu.rows[0]
    assert (f"<code>{html_text(top_gpu.name)}</code></td><td style='{NUMBER}'>"
            f"{top_gpu.count:,}</td>") in html
    assert f"{summary.cpu.events:,} CPU events, {summary.gpu.events:,} GPU intervals" in html
    assert html.count("<tr>") == len(summary.cpu.rows) + len(summary.gpu.rows) + 2  # + headers
    widget.timeline.area_selection.data = {"start_ns": [], "end_ns": []}  # cleared
    assert "Selected range" not in widget.details.value
    assert html_text(alexnet.names[alexnet.name_id[5]]) in widget.details.value


def test_an_area_selection_counts_only_what_the_lane_filter_shows(alexnet):
    widget = nbprof.widget(alexnet)
    start, end = int(alexnet.gpu_start_ns[10]), int(alexnet.gpu_end_ns[40])
    widget.timeline.area_selection.data = {"start_ns": [start], "end_ns": [end]}
    assert ", 0 GPU intervals" not in widget.details.value  # the GPU lanes are shown
    gpu_group = next(g for g in widget.timeline.lane_groups if "GPU" in g)
    widget.lane_filter._group_boxes[gpu_group][0].value = False  # the user hides the GPU lanes
    widget.timeline.area_selection.data = {"start_ns": [start], "end_ns": [end + 1]}  # a new drag
    assert ", 0 GPU intervals" in widget.details.value and "Selected range" in widget.details.value


def test_with_stack_the_details_show_the_users_frames_and_the_cell_number():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbprof")
    with capture_output():
        shell.run_cell("import torch\ndef step(x):\n    return torch.mm(x, x)\n", store_history=True)
        defined_in = shell.execution_count - 1
        result = shell.run_cell("%%cudaprof --with-stack -o stack_trace --no-display\n"
                                "x = torch.ones(4, 4)\ny = step(x)\n", store_history=True)
    assert result.success
    profiled_in = shell.execution_count - 1
    trace = shell.user_ns["stack_trace"]
    mm = int(np.flatnonzero(trace.name_id == trace.names.index("aten::mm"))[0])
    widget = nbprof.widget(trace)
    widget.timeline.selection.data = {"event_id": [mm], "kind": ["cpu"]}
    stack = widget.details.value.split("Stack</th>")[1].split("</td>")[0]
    lines = [re.sub(r"<[^>]+>", "", line) for line in stack.split("<br>")]  # the text shown
    assert f"cell [{defined_in}], line 2: step" in lines and f"cell [{profiled_in}]" in lines
    assert lines[-1] == f"cell [{profiled_in}]"  # the machinery that ran the cell is not kept
    assert not any("ipython-input" in line or "IPython" in line or "nbprof" in line for line in lines)
    # the summary lists ops, not the Python frames of every thread the kernel runs
    names = {row["name"] for row in widget.summary.rows}
    assert "aten::mm" in names and not any(".py(" in name for name in names)
    # the Python frames are its stack, not parents to click through
    assert not any("magic.py" in button.tooltip or "ipython-input" in button.tooltip
                   for button in widget.details.link_buttons())


def test_a_tap_on_the_timeline_shows_the_details(trace):
    widget = nbprof.widget(trace)
    matmul = int(np.flatnonzero(trace.name_id == trace.names.index("aten::matmul"))[0])
    widget.timeline.selection.data = {"event_id": [matmul], "kind": ["cpu"]}  # as the browser sets it
    assert "aten::matmul" in widget.details.value and "[8, 8]" in widget.details.value
    assert widget.panes.selected_index == 0


def test_filters_reach_the_timeline(trace):
    widget = nbprof.widget(trace)
    lane = widget.lane_filter.options[0]
    widget.min_duration.value = 2.5
    assert widget.timeline.filter.data["min_duration_ns"][0] == 2500
    widget.lane_filter.value = ()
    assert widget.timeline.filter.data["lane_visible"] == [False] * len(widget.lane_filter.options)
    widget.lane_filter.value = (lane,)
    assert widget.timeline.filter.data["lane_visible"][0] is True


def test_export_writes_one_valid_chrome_trace_that_a_second_click_replaces(trace, tmp_path):
    widget = nbprof.widget(trace, name="cell", export_dir=tmp_path)
    widget.export.button.click()
    assert widget.export.status.value.startswith("Wrote")
    (tmp_path / "cell.json.gz").write_bytes(b"stale")
    widget.export.button.click()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cell.json.gz"]  # no cell-2, no partial
    assert widget.export.status.value.startswith("Replaced")
    assert check_chrome_trace(str(tmp_path / "cell.json.gz")) == []
    assert len(nbprof.load(tmp_path / "cell.json.gz")) == len(trace)
    assert "<a href='https://ui.perfetto.dev'" in widget.export.status.value


def test_export_to_a_missing_folder_says_so_in_the_widget(trace, tmp_path):
    widget = nbprof.widget(trace, name="cell", export_dir=tmp_path / "gone")
    widget.export.button.click()  # must not raise
    assert "Could not write" in widget.export.status.value
    assert "choose another folder" in widget.export.status.value  # and how (export_dir=)
    assert "sent" in widget.export.status.value  # the browser download still goes out


def test_the_display_bundle_has_a_text_fallback(trace):
    bundle = nbprof.widget(trace)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "events): interactive with a running kernel" in bundle["text/plain"]


def test_display_puts_a_static_copy_before_the_widget_and_bokehjs_in_one_copy(trace, monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display
    from IPython.utils.capture import capture_output

    from nbprof.notebook import static
    from nbprof.notebook.bokeh_host import bokehjs_source

    InteractiveShell.instance()
    monkeypatch.setattr(static, "_bokehjs_cell", "")  # a fresh kernel
    cell = {"id": "cell-a"}
    monkeypatch.setattr(static, "_running_cell_id", lambda: cell["id"])
    outputs = []
    for cell_id in ("cell-a", "cell-b", "cell-a"):  # two cells, then the first one again
        cell["id"] = cell_id
        widget = nbprof.widget(trace)
        with capture_output() as captured:
            display(widget)
        copy, view = captured.outputs
        assert "application/vnd.jupyter.widget-view+json" in view.data
        html = copy.data["text/html"]
        assert f"data-nbprof-id='{widget.host.static_id}'" in html  # the live widget hides it
        assert "nbprof-static-summary" in html and "aten::matmul" in html
        # the embedded document ends at its own </script>: nothing in it closes the tag early
        item = json.loads(html.split("nbprof-static-item'>")[1].split("</script>")[0])
        assert item["root_id"] == widget.timeline.layout.id
        outputs.append(bokehjs_source()[:2000] in html)
    # BokehJS once per notebook: in the first cell's copy, and again when that cell re-runs
    # (its old output is replaced), never in another cell's.
    assert outputs == [True, False, True]


def test_widget_refuses_what_is_not_a_trace():
    with pytest.raises(TypeError, match="needs an nbprof.Trace"):
        nbprof.widget({"traceEvents": []})


def test_nbprof_widget_stays_the_function_after_the_magic_imported_its_module():
    import importlib

    importlib.import_module("nbprof.notebook.widget")  # what %%cudaprof does
    from nbprof.notebook.magic import publish  # noqa: F401

    assert callable(nbprof.widget) and nbprof.widget.__name__ == "widget"


def test_an_empty_trace_still_makes_a_widget():
    from nbprof.model import Trace

    widget = nbprof.widget(Trace.empty())
    assert "0 events" in widget._text_summary()
    widget.search.value = "anything"
    assert widget.match_count.value == "no matches"
    widget.next.click()  # nothing to step through: no error
    assert widget.summary.rows == []


def test_bokehjs_bundles_are_those_the_notebooks_bokeh_models_use(trace):
    # A model from a bundle that was not loaded would fail in the browser ("Model ... does not
    # exist"); a bundle that nothing uses is sent and parsed at every page load for nothing.
    from bokeh.embed.bundle import _all_objs, _use_gl, _use_mathjax, _use_tables, _use_widgets

    from nbprof.notebook.bokeh_host import BOKEHJS_COMPONENTS
    from nbprof.notebook.overview import add_answer_panes

    widget = nbprof.widget(trace)
    add_answer_panes(widget, compare_to=trace)
    shown = [widget.timeline.layout, *(widget.lazy_panes[tab].pane.bars.document.roots[0]
                                       for tab in ("Overview", "Compare"))]  # the bars' figures
    models = _all_objs(shown)
    assert {"nbprof_steps_plot", "nbprof_compare_plot"} <= {model.name for model in models}
    needed = {"bokeh"} | {bundle for bundle, used in (
        ("bokeh-widgets", _use_widgets(models)), ("bokeh-tables", _use_tables(models)),
        ("bokeh-gl", _use_gl(models)), ("bokeh-mathjax", _use_mathjax(models))) if used}
    assert needed == set(BOKEHJS_COMPONENTS)


def test_the_lane_filter_is_checkboxes_by_group_and_keeps_the_details(alexnet):
    widget = nbprof.widget(alexnet)
    lanes = widget.lane_filter
    groups = widget.timeline.lane_groups
    assert len(set(groups)) >= 2  # CPU process and GPU lanes: one row of boxes each
    # each box says its short label (its row names the group), the full name on hover
    boxes = [lanes._lane_boxes[lane] for lane in lanes.options]
    assert [box.description for box in boxes] == widget.timeline.lane_labels
    assert [box.tooltip for box in boxes] == list(lanes.options)
    widget.timeline.select(0)
    details = widget.details.value
    gpu_group = next(g for g in groups if "GPU" in g)
    box, members = lanes._group_boxes[gpu_group]
    box.value = False  # untick the GPU group: its lanes go, the others stay
    assert set(lanes.value) == {lane for lane, g in zip(lanes.options, groups) if g != gpu_group}
    visible = widget.timeline.filter.data["lane_visible"]
    assert [not v for v, g in zip(visible, groups) if g == gpu_group] == [True] * len(members)
    assert widget.details.value == details and widget.timeline.selection.data["event_id"] == [0]
    assert lanes.message.value == ""
    for lane in lanes.options:  # every lane off, one box at a time
        lanes._lane_boxes[lane].value = False
    assert lanes.value == () and "Every lane is hidden" in lanes.message.value
    assert not any(widget.timeline.filter.data["lane_visible"])
    lanes._lane_boxes[members[0]].value = True  # one lane back: its group box stays unticked
    assert lanes.value == (members[0],) and lanes.message.value == ""
    assert box.value is (len(members) == 1)


def test_the_overview_and_compare_tabs_are_built_when_first_opened(alexnet, monkeypatch):
    from nbprof.notebook import overview

    calls = []
    real = overview.OverviewPane
    monkeypatch.setattr(overview, "OverviewPane", lambda *args: calls.append(args) or real(*args))
    widget = nbprof.widget(alexnet, compare_to=alexnet)
    titles = [widget.panes.get_title(i) for i in range(len(widget.panes.children))]
    tab = widget.panes.children[titles.index("Overview")]
    assert calls == [] and "computing" in tab.children[0].value  # not built with the widget
    widget.panes.selected_index = titles.index("Overview")  # what the tab's click syncs
    assert len(calls) == 1 and tab.children == (widget.overview,) and len(calls) == 1
    assert "nbprof-overview" in widget.overview._dom_classes and widget.overview.steps
    compare_tab = widget.panes.children[titles.index("Compare")]
    assert "computing" in compare_tab.children[0].value
    widget.panes.selected_index = titles.index("Compare")
    assert compare_tab.children == (widget.compare,) and "nbprof-compare" in widget.compare._dom_classes


def test_a_tab_whose_pane_fails_to_build_says_so():
    from nbprof.notebook.overview import LazyPane

    def fails():
        raise ValueError("no <steps>")

    lazy = LazyPane(fails)
    with pytest.raises(ValueError):
        lazy.pane  # noqa: B018
    assert "could not compute this tab: ValueError: no &lt;steps&gt;" in lazy.children[0].value


def test_the_compare_tab_is_a_sortable_table_whose_rows_zoom_to_their_events(shared_traces):
    before = nbprof.load(shared_traces / "gpu_sampled_rank0.json.gz")
    after = nbprof.load(shared_traces / "gpu_sampled_rank1.json.gz")
    widget = nbprof.widget(after, compare_to=before)
    table = widget.compare.table
    rows = {row["key"]: row for row in table.rows}
    order = table.ordered_keys()
    changes = [rows[key]["change_us"] for key in order]
    assert changes == sorted(changes, reverse=True)  # the biggest change first
    table.sort_key, table.descending = "count_delta", False  # what a header click syncs
    assert [rows[key]["count_delta"] for key in table.ordered_keys()] == sorted(
        row["count_delta"] for row in table.rows)
    # rows of one name tell their call paths apart
    by_name = {}
    for row in table.rows:
        by_name.setdefault(row["name"], []).append(row["path"])
    assert any(len(paths) > 1 and len(set(paths)) == len(paths) for paths in by_name.values())
    # a click outlines that op's events on this run's timeline and zooms to them
    pick = next(row for row in (rows[key] for key in order) if row["status_order_text"] != "removed"
                and row["name"] in after.names)
    x_range = widget.timeline.plot.x_range
    width = x_range.end - x_range.start
    table.selected = pick["key"]
    ids = widget.timeline.highlighted.data["event_id"]
    assert len(ids) and all(after.names[after.name_id[i]] == pick["name"] for i in ids)
    assert x_range.end - x_range.start < width
    # the roll-up by name comes first; its row outlines every event of that op
    by_name = widget.compare.by_name
    assert widget.compare.children.index(by_name) < widget.compare.children.index(table)
    top = next(row for row in by_name.rows if row["key"] == by_name.ordered_keys()[0])
    by_name.selected = top["key"]
    named = after.names.index(top["name"])
    assert len(widget.timeline.highlighted.data["event_id"]) == int((after.name_id == named).sum())
