"""Lane names, group headers and plot sizing, the tools, runtime-call links and the sources the
browser code reads for area selection and bring_into_view (the Bokeh models, no browser)."""

import numpy as np
import pytest
from bokeh.models import BoxSelectTool, BoxZoomTool, PanTool, ResetTool, WheelZoomTool

import nbprof
from nbprof.events import Trace
from nbprof.timeline import Timeline
from nbprof.timeline.data import encode_events, runtime_calls
from nbprof.timeline.lanes import build_lanes, shown_tid
from nbprof.timeline.packing import unpack_columns


def test_short_labels_name_the_main_thread_and_number_the_others(shared_traces):
    trace = nbprof.load(shared_traces / "gpu_sampled_rank0.json.gz")
    view = Timeline(trace)
    assert view.lane_labels[:3] == ["main thread", "thread 2 · python3.8", "PyTorch Profiler"]
    assert view.lane_labels[3:] == [f"GPU 0 · stream {s}" for s in (7, 23, 25, 84, 203)]
    # the full names stay unique and name pid and tid: what the lane filter and tooltips use
    assert view.lanes[1] == "pid 4037 · thread 23695 (python3.8)"
    assert len(set(view.lanes)) == len(view.lanes)


def test_negative_kineto_thread_ids_are_shown_unsigned(shared_traces):
    trace = nbprof.load(shared_traces / "gpu_training_step_68k.json.gz")
    assert any(t.tid < 0 for t in trace.threads)  # the file really has one
    view = Timeline(trace)
    assert not any(ch == "-" for label in view.lanes + view.lane_labels for ch in label)
    assert "pid 1102 · thread 4047503360" in view.lanes
    # the main thread comes first in its process, the unnamed one is a small number
    assert view.lane_labels[:3] == ["main thread", "thread 2 · pt_autograd_0", "thread 3"]
    assert shown_tid(-1) == 2**32 - 1 and shown_tid(-2**40) == 2**64 - 2**40 and shown_tid(5) == 5


def test_group_headers_name_the_process():
    trace = Trace.build(start_ns=[0, 1, 2], end_ns=[5, 6, 7], thread=[0, 1, 2], name_id=[0, 0, 0],
                        names=["op"], threads=[(9, 9, "thread 9 (python3.11)"),
                                               (9, 12, "thread 12 (python3.11)"),
                                               (10, 10, "PyTorch Profiler")],
                        gpu_start_ns=[3], gpu_end_ns=[4], gpu_name_id=[0], gpu_device=[0],
                        gpu_stream=[7], gpu_launch=[0], gpu_kind=[1])
    lanes = build_lanes(trace)
    assert lanes.groups == ["pid 9", "pid 9", "pid 10", "GPU 0"]
    assert lanes.group_titles == {"pid 9": "pid 9 · python3.11", "pid 10": "pid 10", "GPU 0": "GPU 0"}
    assert lanes.short == ["main thread", "thread 2 · python3.11", "PyTorch Profiler", "GPU 0 · stream 7"]


def _lanes_trace(n_threads, depth=1):
    n = n_threads * depth
    thread = np.repeat(np.arange(n_threads), depth)
    start = np.tile(np.arange(depth) * 10, n_threads)
    return Trace.build(start_ns=start, end_ns=start[::-1] + 1000 if depth > 1 else start + 500,
                       thread=thread, name_id=np.zeros(n), names=["op"],
                       threads=[(1, 100 + t, f"worker{t}") for t in range(n_threads)],
                       gpu_start_ns=[100], gpu_end_ns=[200], gpu_name_id=[0], gpu_device=[0],
                       gpu_stream=[7], gpu_launch=[0], gpu_kind=[1])


def test_the_plot_height_follows_its_lanes():
    small, large = Timeline(_lanes_trace(5)), Timeline(_lanes_trace(30))
    # 5 CPU lanes + a GPU kernel lane (2 units) + 2 headers: every row unit gets >= 18 px
    units = 5 + 2 + 2
    assert small.plot.height >= 110 + 18 * units
    assert large.plot.height > small.plot.height
    assert Timeline(_lanes_trace(400)).plot.height <= 760  # deep traces are cut, not a 7000 px plot
    assert Timeline(_lanes_trace(3), height=300).plot.height == 300


def test_tools_reset_wheel_pan_and_box_zoom_are_buttons_and_change_x_only():
    plot = Timeline(_lanes_trace(2)).plot
    shown = [type(tool) for tool in plot.toolbar.tools if tool.visible]
    assert shown == [ResetTool, WheelZoomTool, PanTool, BoxZoomTool, BoxSelectTool]
    wheel = plot.select_one({"type": WheelZoomTool})
    assert wheel.modifiers == {"ctrl": True}  # plain wheel is the page's
    assert plot.toolbar.active_scroll is wheel
    for kind in (WheelZoomTool, PanTool, BoxZoomTool, BoxSelectTool):
        assert plot.select_one({"type": kind}).dimensions == "width"
    assert plot.toolbar_location == "right"  # "above" hid most tools behind its overflow menu


def kineto_launch_trace():
    # an op, the cudaLaunchKernel inside it, the kernel (same correlation); a second kernel
    # whose call is missing from the file
    return Trace.build(
        start_ns=[0, 10], end_ns=[100, 20], thread=[0, 0], name_id=[0, 1],
        names=["aten::mm", "cudaLaunchKernel", "sgemm"], category=[0, 1],
        categories=["cpu_op", "cuda_runtime"], threads=[(1, 1, "main")],
        event_args={1: {"correlation": 42}, 0: {"correlation": [1]}},
        gpu_start_ns=[30, 60], gpu_end_ns=[50, 70], gpu_name_id=[2, 2], gpu_device=[0, 0],
        gpu_stream=[7, 7], gpu_launch=[0, 0], gpu_kind=[1, 1],
        gpu_args={0: {"correlation": 42}, 1: {"correlation": {"x": 1}}})


def test_links_start_at_the_runtime_call_with_the_same_correlation():
    trace = kineto_launch_trace()
    assert runtime_calls(trace).tolist() == [1, -1]  # the op is not a runtime call; a dict id matches nothing
    packed, info = encode_events(trace, build_lanes(trace))
    columns = unpack_columns(packed, info["layout"])
    assert columns["gpu_runtime"].tolist() == [2, 0]  # the call's id + 1, per GPU entry
    assert columns["gpu_launch"].tolist() == [1, 1]


def test_a_real_trace_links_kernels_to_their_launch_calls(shared_traces):
    trace = nbprof.load(shared_traces / "gpu_alexnet_kineto.json.gz")
    calls = runtime_calls(trace)
    linked = calls >= 0
    assert linked.mean() > 0.9
    names = {trace.names[trace.name_id[c]] for c in calls[linked]}
    assert {"cudaLaunchKernel", "cudaMemcpyAsync"} <= names
    ops = trace.gpu_launch[linked]
    # each call lies inside the op its kernel is attributed to
    assert ((trace.start_ns[calls[linked]] >= trace.start_ns[ops]) &
            (trace.end_ns[calls[linked]] <= trace.end_ns[ops])).all()


def test_area_selection_and_view_requests_are_named_sources():
    view = Timeline(kineto_launch_trace())
    assert view.area_selection.name == "nbprof_area_selection"
    assert view.area_selection.data == {"start_ns": [], "end_ns": []}
    view.bring_into_view(30, 50)
    first = dict(view._view_request.data)
    view.bring_into_view(30, 50)  # the same match again must still reach the browser
    assert view._view_request.data["seq"] != first["seq"]
    assert view._view_request.data["start_ns"] == [30] and view._view_request.data["end_ns"] == [50]
    with pytest.raises(ValueError, match="ends before it starts"):
        view.bring_into_view(50, 30)
