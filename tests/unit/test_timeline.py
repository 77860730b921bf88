"""The timeline's Bokeh models, lanes and interface, built from real and hand-made traces."""

import re

import numpy as np
import pytest

import nbprof
from nbprof.model import KIND_MEMCPY, Trace
from nbprof.timeline import Timeline, save_html, timeline
from nbprof.timeline.lanes import build_lanes


def two_thread_trace(**meta):
    # thread 0 nests b inside a; thread 1 one op; two kernels and a memcpy on two streams
    return Trace.build(
        start_ns=[0, 10, 5], end_ns=[50, 30, 60], thread=[0, 0, 1], name_id=[0, 1, 0],
        names=["aten::linear", "aten::mm", "sgemm", "Memcpy HtoD"],
        threads=[(1, 100, "MainThread"), (1, 101, "backward")],
        gpu_start_ns=[40, 45, 70], gpu_end_ns=[44, 80, 90], gpu_name_id=[2, 3, 2],
        gpu_device=[0, 0, 0], gpu_stream=[7, 9, 7], gpu_launch=[1, -1, 2],
        gpu_kind=[1, KIND_MEMCPY, 1], meta=meta)


def test_lanes_are_threads_then_streams():
    assert Timeline(two_thread_trace()).lanes == [
        "MainThread (100)", "backward (101)", "GPU 0 stream 7", "GPU 0 stream 9"]


def test_real_kineto_trace_has_its_threads_and_streams(shared_traces):
    trace = nbprof.load(shared_traces / "gpu_alexnet_kineto.json.gz")
    lanes = Timeline(trace).lanes
    streams = sorted({f"GPU {d} stream {s}" for d, s in zip(trace.gpu_device, trace.gpu_stream)})
    assert sorted(label for label in lanes if label.startswith("GPU")) == streams
    for thread in {trace.threads[t] for t in np.unique(trace.thread)}:
        assert any(thread.name in label for label in lanes), (thread, lanes)


def test_processes_are_named_when_there_are_several():
    trace = Trace.build(start_ns=[0, 1], end_ns=[5, 6], thread=[0, 1], name_id=[0, 0],
                        names=["op"], threads=[(1, 7, "main"), (2, 8, "main")], meta={"rank": 3})
    view = Timeline(trace)
    assert view.lanes == ["pid 1 · main (7)", "pid 2 · main (8)"]
    # labels stay short: the rank (and process) name the group the lanes are banded by
    assert build_lanes(trace).groups == ["rank 3 · pid 1", "rank 3 · pid 2"]
    assert view.note.html.startswith("rank 3 · ")


def test_empty_trace_says_no_events_recorded():
    view = Timeline(Trace.empty())
    assert "no events recorded" in view.note.html
    assert view.lanes == []


def test_cpu_only_trace_says_so_and_has_no_cuda_lanes():
    trace = Trace.build(start_ns=[0, 3], end_ns=[10, 3], thread=[0, 0], name_id=[0, 1],
                        names=["a", "zero"], threads=[(1, 1, "main")])
    view = Timeline(trace)
    assert "CPU only: no GPU work recorded" in view.note.html
    assert "GPU intervals" not in view.note.html  # no "0 GPU intervals"
    assert not any(label.startswith("GPU") for label in view.lanes)


def test_interface_changes_the_sources_the_browser_code_reads():
    view = Timeline(two_thread_trace())
    seen = []
    view.selection.on_change("data", lambda attr, old, new: seen.append(dict(new)))
    view.select(1)
    assert view.selection.data == {"event_id": [1], "kind": ["cpu"]} and seen
    view.select(0, kind="gpu")
    assert view.selection.data["kind"] == ["gpu"]
    view.select(None)
    assert view.selection.data["event_id"] == []
    view.highlight([0, 2])
    assert list(view.highlighted.data["event_id"]) == [0, 2]
    assert len(view.highlighted_gpu.data["gpu_row"]) == 0
    view.highlight([1], gpu_rows=[2, 0])
    assert list(view.highlighted.data["event_id"]) == [1]
    assert list(view.highlighted_gpu.data["gpu_row"]) == [2, 0]
    view.highlight([])
    assert len(view.highlighted.data["event_id"]) == len(view.highlighted_gpu.data["gpu_row"]) == 0
    view.set_filter(lanes=["GPU 0 stream 7"], min_duration_ns=5)
    assert view.filter.data["lane_visible"] == [False, False, True, False]
    assert view.filter.data["min_duration_ns"][0] == 5


def test_interface_rejects_what_is_not_in_the_trace():
    view = Timeline(two_thread_trace())
    with pytest.raises(ValueError, match="not in this trace"):
        view.highlight([99])
    with pytest.raises(ValueError, match=r"GPU rows \[3\] are not in this trace"):
        view.highlight([0], gpu_rows=[0, 3])
    with pytest.raises(ValueError, match=r"event ids \[-1\]"):
        view.highlight([-1])
    with pytest.raises(ValueError, match="unknown lanes"):
        view.set_filter(lanes=["GPU 5 stream 1"])
    with pytest.raises(ValueError, match="no gpu event 7"):
        view.select(7, kind="gpu")
    with pytest.raises(TypeError, match="nbprof.load"):
        Timeline("trace.json")


def test_timeline_returns_a_layout_with_overview_and_range_tool():
    from bokeh.models import RangeTool

    layout = nbprof.timeline(two_thread_trace())
    plot = layout.select_one({"name": "nbprof_plot"})
    overview = layout.select_one({"name": "nbprof_overview"})
    range_tool = overview.select_one(RangeTool)
    assert range_tool.x_range is plot.x_range
    tools = {type(tool).__name__: tool for tool in plot.tools}
    assert tools["WheelZoomTool"].dimensions == "width" and tools["PanTool"].dimensions == "width"
    assert {"BoxZoomTool", "ResetTool", "TapTool", "HoverTool"} <= set(tools)
    assert timeline(two_thread_trace()).select_one({"name": "nbprof_plot"}) is not plot


def test_legend_lists_the_families_present():
    from bokeh.models import Legend

    plot = Timeline(two_thread_trace()).plot
    labels = [item.label["value"] for item in plot.select_one(Legend).items]
    assert labels == ["CPU op", "kernel", "memcpy"]


def test_saved_page_is_standalone_and_carries_the_events(tmp_path):
    path = save_html(two_thread_trace(), tmp_path / "sub" / "page.html", title="my run")
    html = path.read_text()
    assert "<title>my run</title>" in html
    assert not re.search(r"<script[^>]+src=", html)  # BokehJS inline: opens offline
    assert "Bokeh" in html and "nbprof_rendered" in html


def test_cuda_event_op_intervals_sit_below_kernels_one_row_per_op_depth():
    # nbprof's own traces: a whole op's GPU interval (kind "op") nests like its op
    trace = Trace.build(start_ns=[0, 10], end_ns=[100, 50], thread=[0, 0], name_id=[0, 1],
                        names=["aten::linear", "aten::mm", "gemm"], threads=[(1, 1, "main")],
                        gpu_start_ns=[20, 30, 31], gpu_end_ns=[120, 70, 60], gpu_name_id=[0, 1, 2],
                        gpu_device=[0, 0, 0], gpu_stream=[7, 7, 7], gpu_launch=[0, 1, 1],
                        gpu_kind=[0, 0, 1])
    lanes = build_lanes(trace)
    assert lanes.labels == ["main (1)", "GPU 0 stream 7"]
    gpu_subs = lanes.row_sub[lanes.gpu_row].tolist()
    assert gpu_subs == [1, 2, 0]  # linear's interval, mm's interval (deeper), the kernel on top


def test_gpu_annotation_spans_sit_above_the_kernels_they_enclose():
    # Kineto's gpu_user_annotation (kind "other") spans kernels on the same stream: drawn on one
    # row they would cover the kernels
    trace = Trace.build(start_ns=[0], end_ns=[100], thread=[0], name_id=[0],
                        names=["aten::mm", "gemm", "ProfilerStep#1"], threads=[(1, 1, "main")],
                        gpu_start_ns=[0, 10, 40], gpu_end_ns=[200, 30, 60], gpu_name_id=[2, 1, 1],
                        gpu_device=[0, 0, 0], gpu_stream=[7, 7, 7], gpu_launch=[-1, 0, 0],
                        gpu_kind=[5, 1, 1])
    lanes = build_lanes(trace)
    assert lanes.row_sub[lanes.gpu_row].tolist() == [0, 1, 1]


def test_browser_code_is_found_where_a_wheel_puts_it(tmp_path):
    # A wheel holds js/ as nbprof/js (pyproject's force-include); no source tree beside it.
    import pathlib
    import shutil
    import subprocess
    import sys

    root = pathlib.Path(nbprof.__file__).resolve().parents[1]
    site = tmp_path / "site"
    shutil.copytree(root / "nbprof", site / "nbprof", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(root / "js", site / "nbprof" / "js")
    code = ("import nbprof.timeline.jsfiles as j, pathlib; folder = pathlib.Path(j.__file__)"
            ".parents[1] / 'js'; print(j.timeline_code() == '\\n'.join((folder / name).read_text() "
            "for name in j.TIMELINE_PARTS))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, env={"PYTHONPATH": str(site), "PATH": ""})
    assert done.stdout.strip() == "True", done.stderr


def test_an_op_keeps_its_colour_across_traces():
    from nbprof.timeline.data import encode_events

    def hash_of(names, name):
        trace = Trace.build(start_ns=range(len(names)), end_ns=range(1, len(names) + 1),
                            thread=[0] * len(names), name_id=range(len(names)), names=names,
                            threads=[(1, 1, "main")])
        _, info = encode_events(trace, build_lanes(trace))
        return info["name_hash"][info["names"].index(name)]

    assert hash_of(["aten::mm", "aten::add"], "aten::mm") == hash_of(["x", "y", "aten::mm"], "aten::mm")
    assert hash_of(["aten::mm", "aten::add"], "aten::mm") != hash_of(["aten::mm", "aten::add"], "aten::add")


def test_hover_details_carry_shapes_stack_and_launch_geometry():
    from nbprof.timeline.data import encode_events

    trace = Trace.build(start_ns=[0, 10], end_ns=[50, 20], thread=[0, 0], name_id=[0, 1],
                        names=["aten::mm", "aten::add", "gemm"], threads=[(1, 1, "main")],
                        shapes={0: [[2, 3], [3, 4]]}, stacks={0: ("train.py(12): step", "train.py(30): main")},
                        gpu_start_ns=[30], gpu_end_ns=[40], gpu_name_id=[2], gpu_device=[0],
                        gpu_stream=[7], gpu_launch=[0], gpu_kind=[1],
                        gpu_args={0: {"grid": [4, 1, 1], "block": [128, 1, 1], "correlation": 9}})
    _, info = encode_events(trace, build_lanes(trace))
    assert info["detail_texts"] == [
        "grid: [4, 1, 1] · block: [128, 1, 1]",
        "shapes: [[2, 3], [3, 4]] · at train.py(12): step ← train.py(30): main"]


def test_thread_labels_name_the_tid_once():
    trace = Trace.build(start_ns=[0, 1, 2], end_ns=[5, 6, 7], thread=[0, 1, 2], name_id=[0, 0, 0],
                        names=["op"], threads=[(1, 1, "worker1"), (1, 77, "thread 77 (python)"),
                                               (1, 5, "")])
    assert Timeline(trace).lanes == ["worker1 (1)", "thread 5", "thread 77 (python)"]


def test_a_broad_highlight_reaches_the_browser_as_binary_not_json():
    # What jupyter_bokeh sends per search keystroke: the document patch, its arrays as buffers.
    from bokeh.protocol import Protocol

    n = 200_000
    trace = Trace.build(start_ns=np.arange(n) * 10, end_ns=np.arange(n) * 10 + 5,
                        thread=np.zeros(n), name_id=np.zeros(n), names=["op", "k"],
                        threads=[(1, 1, "main")], gpu_start_ns=np.arange(n) * 10 + 6,
                        gpu_end_ns=np.arange(n) * 10 + 8, gpu_name_id=np.ones(n),
                        gpu_device=np.zeros(n), gpu_stream=np.zeros(n), gpu_launch=np.arange(n),
                        gpu_kind=np.ones(n))
    view = Timeline(trace)
    events = []
    view.layout.document.on_change(events.append)
    view.highlight(np.arange(n), gpu_rows=np.arange(0, n, 2))
    assert len(events) == 2  # one patch per source
    for event, count in zip(events, (n, n // 2)):
        message = Protocol().create("PATCH-DOC", [event])
        assert len(message.content_json) < 2_000
        assert sum(len(buffer.to_bytes()) for buffer in message.buffers) == 4 * count


def test_the_y_axis_opens_with_the_labels_the_browser_gives_it():
    # Bokeh's first layout then has the plot's final width (js/timeline_draw.js layoutLanes
    # sets these again): a group header per group where there are several, then its lanes
    tl = Timeline(two_thread_trace())
    labels = tl.plot.yaxis[0].major_label_overrides
    assert list(labels.values()) == ["▾ pid 1", "main thread", "backward", "▾ GPU 0",
                                     "GPU 0 · stream 7", "GPU 0 · stream 9"]
    assert tl.plot.yaxis[0].ticker.ticks == list(labels)


def test_a_thread_named_like_tex_is_left_to_the_browser(tmp_path):
    # as an axis label from Python, Bokeh would take it for TeX and put MathJax in the page
    trace = Trace.build(start_ns=[0], end_ns=[5], thread=[0], name_id=[0], names=["op"],
                        threads=[(1, 100, "$$x^2$$")])
    tl = Timeline(trace)
    assert tl.plot.yaxis[0].major_label_overrides == {}
    assert "BEGIN bokeh-mathjax" not in save_html(trace, tmp_path / "tex.html").read_text()
