"""Lane names, group headers and plot sizing, the tools, runtime-call links and the sources the
browser code reads for area selection and bring_into_view (the Bokeh models, no browser)."""

import json

import numpy as np
import pytest
from bokeh.models import BoxSelectTool, BoxZoomTool, PanTool, ResetTool, WheelZoomTool

import nbprof
from nbprof.model import Trace
from nbprof.timeline import Timeline
from nbprof.timeline.data import encode_events, runtime_calls
from nbprof.timeline.lanes import build_lanes, shown_tid
from nbprof.timeline.packing import unpack_columns
from nbprof.timeline.view import view_onto


def test_short_labels_name_the_main_thread_and_number_the_others(shared_traces):
    trace = nbprof.load(shared_traces / "gpu_sampled_rank0.json.gz")
    view = Timeline(trace)
    # Kineto's "PyTorch Profiler" span is the trace's metadata, not a lane
    assert view.lane_labels[:2] == ["main thread", "thread 2 · python3.8"]
    assert view.lane_labels[2:] == [f"GPU 0 · stream {s}" for s in (7, 23, 25, 84, 203)]
    # the full names stay unique: what the lane filter and tooltips use
    assert view.lanes[1] == "thread 23695 (python3.8)"  # one process: no pid needed
    assert len(set(view.lanes)) == len(view.lanes)


def test_negative_kineto_thread_ids_are_shown_unsigned(shared_traces):
    trace = nbprof.load(shared_traces / "gpu_training_step_68k.json.gz")
    assert any(t.tid < 0 for t in trace.threads)  # the file really has one
    view = Timeline(trace)
    assert not any(ch == "-" for label in view.lanes + view.lane_labels for ch in label)
    assert "thread 4047503360" in view.lanes  # one process (the span's "Spans" was another)
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


def never_decode_one_value(monkeypatch):
    # A decode per event was most of a million-event page's build (issue 22): the page must
    # read the loaded args a block at a time, for just the keys it shows
    from nbprof.formats.chrome.args import ArgsStore

    def value(self, slot):
        raise AssertionError("the page decoded one event's args")

    monkeypatch.setattr(ArgsStore, "value", value)


def test_a_loaded_trace_keeps_its_hover_texts_and_call_links_without_a_decode_per_event(
        tmp_path, monkeypatch):
    built = Trace.build(
        start_ns=[0, 10, 60], end_ns=[100, 20, 70], thread=[0, 0, 0], name_id=[0, 1, 3],
        names=["aten::mm", "cudaLaunchKernel", "sgemm", "aten::add"], category=[0, 1, 0],
        categories=["cpu_op", "cuda_runtime"], threads=[(1, 1, "main")],
        event_args={1: {"correlation": 42}}, shapes={0: [[2, 3], [3, 4]], 2: [[7]]},
        stacks={0: ("train.py(12): step", "train.py(30): main"), 2: ("train.py(31): main",)},
        gpu_start_ns=[30, 80], gpu_end_ns=[50, 90], gpu_name_id=[2, 2], gpu_device=[0, 0],
        gpu_stream=[7, 7], gpu_launch=[0, 2], gpu_kind=[1, 1],
        gpu_args={0: {"grid": [4, 1, 1], "block": [128, 1, 1], "correlation": 42},
                  1: {"bytes": 4096, "correlation": 43}})
    trace = nbprof.load(nbprof.formats.chrome.export_chrome_trace(built, tmp_path / "t.json"))
    never_decode_one_value(monkeypatch)
    packed, info = encode_events(trace, build_lanes(trace))
    assert info["detail_texts"] == [
        "bytes: 4096", "grid: [4, 1, 1] · block: [128, 1, 1]",
        "shapes: [[2, 3], [3, 4]] · at train.py(12): step ← train.py(30): main",
        "shapes: [[7]] · at train.py(31): main"]
    columns = unpack_columns(packed, info["layout"])
    assert columns["gpu_runtime"].tolist() == [2, 0]  # the call paired by its correlation id
    assert trace.gpu_call.tolist() == [1, -1]


def test_a_real_trace_has_every_hover_text_it_had_without_a_decode_per_event(
        shared_traces, monkeypatch):
    from nbprof.timeline.data import detail_texts
    from nbprof.timeline.served import Served

    trace = nbprof.load(shared_traces / "gpu_sampled_rank0.json.gz")
    # what each event's own args say, read one at a time as a click on it does
    expected = {("cpu", row): f"shapes: {shapes}" for row, shapes in trace.shapes.items() if shapes}
    for row in range(len(trace.gpu_start_ns)):
        args = trace.kernel(row).args or {}
        parts = [f"{key}: {args[key]}" for key in ("grid", "block", "bytes") if key in args]
        if parts:
            expected[("gpu", row)] = " · ".join(parts)
    assert len(expected) > 3000
    never_decode_one_value(monkeypatch)
    details = detail_texts(trace)
    found = {("cpu", row): details.texts[code]
             for row, code in zip(details.cpu_rows.tolist(), details.cpu_codes.tolist())}
    found.update({("gpu", row): details.texts[code]
                  for row, code in zip(details.gpu_rows.tolist(), details.gpu_codes.tolist())})
    assert found == expected
    lanes = build_lanes(trace)
    encode_events(trace, lanes)
    # Past the budget the kernel answers each view: it formats the texts of the events an
    # answer draws as themselves, not the whole trace's when it starts
    from nbprof.formats.chrome.args import LazyArgs
    coded = LazyArgs.coded
    monkeypatch.setattr(LazyArgs, "coded", lambda *args: pytest.fail("texts built up front"))
    served = Served(trace, lanes, budget=1000)
    monkeypatch.setattr(LazyArgs, "coded", coded)
    view = served.answer({"x0": [0.0], "x1": [float(served.columns.span_ns)], "width": [1e9],
                          "min_duration": [0], "key": ["k"]})
    meta = json.loads(view["meta"][0])
    columns = unpack_columns(view["packed"][0], meta["layout"])
    counts = columns["row_count"].astype(np.int64)
    row = np.repeat(np.arange(len(counts)), counts)
    # each entry's trace id: deltas within its row
    event_id = np.concatenate([np.cumsum(part) for part in np.split(
        columns["event_id_delta"].astype(np.int64), np.cumsum(counts)[:-1])])
    kind = np.where(lanes.row_is_gpu[row], "gpu", "cpu")
    shown = {(kind[entry], int(event_id[entry])): meta["detail_texts"][text]
             for entry, text in zip(columns["detail_entry"].tolist(),
                                    columns["detail_text"].tolist())}
    assert len(shown) > 100
    assert shown == {key: expected[key] for key, count in zip(
        zip(kind.tolist(), event_id.tolist()), columns["count"].tolist())
        if count == 1 and key in expected}


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


def test_bring_into_view_zooms_onto_a_sliver_and_leaves_a_readable_match_alone():
    bounds = (-100.0, 1_000_100.0)
    # a 1 µs match in a 1 ms view (1 px of 1000): centred at 4x its length, at least 2 µs
    assert view_onto((0, 1_000_000), 500_000, 501_000, 1000, bounds) == (498_500, 502_500)
    # 50 µs of a 1 ms view is 50 px: readable, nothing moves
    assert view_onto((0, 1_000_000), 500_000, 550_000, 1000, bounds) is None
    # out of view: moves to it even where it would be wide enough
    assert view_onto((0, 100_000), 500_000, 550_000, 1000, bounds) == (425_000, 625_000)
    # a match wider than a 4x view of it still fits whole; the bounds hold
    assert view_onto((0, 10_000), 999_000, 1_000_000, 1000, bounds) == (996_100, 1_000_100)
    view = Timeline(kineto_launch_trace())
    view.bring_into_view(60, 70)  # the second kernel, 10 ns: the kernel hears the new range at once
    x_range = view.plot.x_range
    assert x_range.start <= 60 and 70 <= x_range.end and x_range.end - x_range.start <= 2_000


def _mixed_trace():
    """CPU ops nested 0-3 deep on 3 threads; GPU intervals of every kind on 3 devices and
    streams -1, 7, 13 and 2**30, op intervals launched from ops at every depth."""
    from nbprof.model import GPU_KINDS

    rng = np.random.default_rng(3)
    n, k = 3_000, 4_000
    start = np.sort(rng.integers(0, 10**7, n))
    return Trace(start_ns=start, end_ns=start + 10, thread=rng.integers(0, 3, n).astype(np.int32),
                 name_id=np.zeros(n, np.int32), category=np.zeros(n, np.uint8),
                 depth=rng.integers(0, 4, n).astype(np.int16), parent=np.full(n, -1, np.int32),
                 self_ns=np.full(n, 10), gpu_start_ns=np.sort(rng.integers(0, 10**7, k)),
                 gpu_end_ns=np.sort(rng.integers(0, 10**7, k)) + 10**7,
                 gpu_name_id=np.zeros(k, np.int32), gpu_device=rng.integers(0, 3, k).astype(np.int16),
                 gpu_stream=rng.choice(np.array([-1, 7, 13, 2**30], np.int32), k),
                 gpu_launch=rng.integers(-1, n, k).astype(np.int32),
                 gpu_kind=rng.integers(0, len(GPU_KINDS), k).astype(np.uint8), names=["op"],
                 threads=[(1, 1, "MainThread"), (1, 2, "worker"), (1, 3, "loader")])


def test_draw_rows_are_the_lane_and_depth_pairs_in_use_in_lane_order(monkeypatch):
    from nbprof.timeline import lanes as lanes_module

    trace = _mixed_trace()
    lanes = build_lanes(trace)
    pairs = list(zip(lanes.row_lane.tolist(), lanes.row_sub.tolist()))
    assert pairs == sorted(set(pairs)) and len(pairs) > 3 * 4  # every row once, lane by lane
    # a CPU event's row is its thread's lane at its depth; every row holds entries
    lane_of = {lanes.labels.index(name): name for name in lanes.labels}
    cpu_lane_names = [lane_of[lane] for lane in lanes.row_lane[lanes.cpu_row].tolist()]
    thread_names = [trace.threads[t].name for t in trace.thread.tolist()]
    assert all(thread in lane for thread, lane in zip(thread_names, cpu_lane_names))
    assert lanes.row_sub[lanes.cpu_row].tolist() == trace.depth.tolist()
    used = np.zeros(len(pairs), bool)
    used[lanes.cpu_row], used[lanes.gpu_row] = True, True
    assert used.all()
    # stream -1 sorts last within its device, as Trace.gpu_stream_keys' unsigned keys do
    gpu_labels = [label for label in lanes.labels if label.startswith("GPU")]
    assert gpu_labels[:4] == ["GPU 0 stream 7", "GPU 0 stream 13", "GPU 0 stream 1073741824",
                              "GPU 0 stream -1"]
    # per-event rows take 4 bytes, not 8: at 10^8 events that is 400 MB less
    assert lanes.cpu_row.dtype == lanes.gpu_row.dtype == np.int32
    assert lanes.row_lane[lanes.cpu_row].dtype == np.int32  # the per-event lanes the filter keeps
    # the dense (lane, depth) table and the sort it replaced (kept for deep traces) agree
    monkeypatch.setattr(lanes_module, "_DENSE_ROW_CELLS", 0)
    sorted_lanes = build_lanes(trace)
    for field in ("row_lane", "row_sub", "row_kind", "cpu_row", "gpu_row"):
        assert getattr(sorted_lanes, field).tolist() == getattr(lanes, field).tolist(), field
