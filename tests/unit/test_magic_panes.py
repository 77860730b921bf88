"""What the widget's panes and the --repeat summary compute from a Trace (no widgets, no torch)."""

import re

import numpy as np
import pytest

from nbprof.notebook.details import details_html
from nbprof.model import KIND_KERNEL, Trace
from nbprof.notebook.repeats import repeat_summary, repeat_table, run_marker
from nbprof.notebook.search import events_named, find_events

NAMES = [run_marker(0, 2), run_marker(1, 2), "aten::linear", "aten::addmm", "aten::relu",
         "volta_sgemm_128x64", "aten::relu_backward"]


def two_run_trace():
    """Two runs: run 1 has linear(addmm) 100+60 ns and relu 10; run 2 has linear 300(addmm 200) and
    two relus of 20; a backward relu on another thread in run 2; addmm launches a kernel each run."""
    rows = [  # (start, end, thread, name)
        (0, 1000, 0, 0), (100, 200, 0, 2), (120, 180, 0, 3), (300, 310, 0, 4),
        (2000, 3000, 0, 1), (2100, 2400, 0, 2), (2150, 2350, 0, 3), (2500, 2520, 0, 4),
        (2600, 2620, 0, 4), (2700, 2790, 1, 6),
        (5000, 5010, 0, 4),  # after the last run: belongs to no run
    ]
    start, end, thread, name = map(np.array, zip(*rows))
    return Trace.build(
        start_ns=start, end_ns=end, thread=thread, name_id=name, names=NAMES,
        threads=[(1, 11, "MainThread"), (1, 12, "autograd")],
        gpu_start_ns=[150, 2200], gpu_end_ns=[170, 2260], gpu_name_id=[5, 5], gpu_device=[0, 0],
        gpu_stream=[7, 7], gpu_launch=[2, 6], gpu_kind=[KIND_KERNEL] * 2,
        shapes={6: [[64, 256], [256, 256]]}, stacks={6: ("train.py(12): step", "model.py(3): forward")})


def test_repeat_summary_gives_mean_min_max_per_run():
    rows = {row.name: row for row in repeat_summary(two_run_trace())}
    assert not any(name.startswith("cudaprof run") for name in rows)
    linear = rows["aten::linear"]
    assert (linear.cpu_mean_us, linear.cpu_min_us, linear.cpu_max_us) == (0.2, 0.1, 0.3)
    relu = rows["aten::relu"]  # 10 ns in run 1, 2 x 20 ns in run 2; the one after the runs is left out
    assert (relu.calls_per_run, relu.cpu_min_us, relu.cpu_max_us) == (1.5, 0.01, 0.04)
    assert rows["aten::relu_backward"].cpu_mean_us == pytest.approx(0.045)  # other thread, run 2 only
    assert rows["aten::addmm"].cuda_mean_us == pytest.approx((0.02 + 0.06) / 2)
    assert list(rows)[0] == "aten::linear"  # largest mean CPU time first


def test_repeat_table_and_a_trace_without_runs():
    text = repeat_table(two_run_trace(), row_limit=2)
    assert "over 2 runs" in text and "CPU mean" in text and "aten::linear" in text
    assert "more rows" in text
    plain = Trace.build(start_ns=[0], end_ns=[5], thread=[0], name_id=[0], names=["x"],
                        threads=[(1, 1, "main")])
    with pytest.raises(ValueError, match="no '%%cudaprof --repeat' run markers"):
        repeat_summary(plain)


def test_a_cpu_only_trace_gets_no_columns_of_gpu_zeros(shared_traces):
    import nbprof
    from nbprof.analysis.range_summary import range_summary
    from nbprof.notebook.details import range_summary_html

    cpu_only = nbprof.load(shared_traces / "cpu_only_rank34.json.gz")
    assert "CUDA" not in cpu_only.table() and "gloo:all_reduce" in cpu_only.table()
    gpu = two_run_trace()
    assert "CUDA total" in gpu.table() and "CUDA mean" in repeat_table(gpu)
    runs = Trace.build(start_ns=[0, 10, 100, 110], end_ns=[50, 40, 150, 120], thread=[0] * 4,
                       name_id=[0, 2, 1, 2], names=NAMES, threads=[(1, 1, "main")])
    text = repeat_table(runs)
    assert "aten::linear" in text and "CUDA" not in text
    summary = range_summary(cpu_only, 0, int(cpu_only.end_ns.max()))
    assert "GPU" not in range_summary_html(cpu_only, summary)


def test_search_by_regex_text_and_case():
    trace = two_run_trace()
    result = find_events(trace, "relu")
    assert [trace.names[trace.name_id[i]] for i in result.event_ids] == [
        "aten::relu", "aten::relu", "aten::relu", "aten::relu_backward", "aten::relu"]
    assert result.message == "5 events"
    assert len(find_events(trace, "^aten::(linear|addmm)$").event_ids) == 4
    kernels = find_events(trace, "SGEMM")
    assert len(kernels.event_ids) == 0 and len(kernels.gpu_rows) == 2
    assert kernels.message == "0 events + 2 GPU intervals"
    broken = find_events(trace, "aten::relu(")  # not a regex: searched as text
    assert len(broken.event_ids) == 0 and "not a valid regex" in broken.message
    assert find_events(trace, "nothing-like-this").message == "no matches"
    assert find_events(trace, "").message == ""


def test_events_named_is_exact():
    trace = two_run_trace()
    assert len(events_named(trace, "aten::relu")) == 4
    assert len(events_named(trace, "aten::rel")) == 0


def test_details_show_what_the_trace_knows():
    trace = two_run_trace()
    addmm = int(events_named(trace, "aten::addmm")[1])
    html = details_html(trace, addmm)
    for expected in ("aten::addmm", "MainThread", "tid 11", "volta_sgemm_128x64", "stream 7",
                     "cuda:0", "[[64, 256], [256, 256]]", "model.py(3): forward",
                     "aten::linear &larr; cudaprof run 2/2"):
        assert expected in html, expected
    linear = int(events_named(trace, "aten::linear")[0])
    assert "Children (1)" in details_html(trace, linear)
    assert "no GPU interval" in details_html(trace, linear)
    assert "Click an event" in details_html(trace, None)


def test_details_escape_html_in_names():
    trace = Trace.build(start_ns=[0], end_ns=[5], thread=[0], name_id=[0], names=["<script>x</script>"],
                        threads=[(1, 1, "main")])
    assert "<script>" not in details_html(trace, 0)


def test_gpu_details_name_the_launching_op():
    from nbprof.notebook.details import gpu_details_html

    trace = two_run_trace()
    html = gpu_details_html(trace, 1)
    assert "volta_sgemm_128x64" in html and "stream 7" in html and "Launched by:" in html
    assert "aten::addmm" in html


def test_details_times_are_on_the_timelines_axis_to_the_microsecond():
    # the axis starts at the first event; positions to the µs, never "43.292s -> 43.292s"
    base = 43_000_000_000
    trace = Trace.build(start_ns=[base, base + 12_345_000], end_ns=[base + 50_000_000, base + 12_388_800],
                        thread=[0, 0], name_id=[0, 1], names=["outer", "inner"],
                        threads=[(1, 1, "main")])
    html = details_html(trace, 1)
    assert "12.345 ms → 12.389 ms, 43.8 µs" in html
    assert "0.000 ms → 50.000 ms, 50.000 ms" in details_html(trace, 0)


def test_times_read_at_a_glance_in_every_unit():
    from nbprof.notebook.details import format_duration, interval_text

    assert [format_duration(ns) for ns in (850, 43_800, 12_345_600, 2_345_000_000)] == [
        "850 ns", "43.8 µs", "12.346 ms", "2.345 s"]
    # past a second both ends keep the µs: two events 44 µs apart stay apart
    assert interval_text(43_292_118_000, 43_292_162_000, 0) == "43.292118 s → 43.292162 s, 44.0 µs"


# The stack torch records under %%cudaprof --with-stack in a real kernel (innermost first): the
# op's C call, the cell, the magic that ran it, then IPython, ipykernel, tornado and asyncio.
KERNEL_STACK = (
    "<built-in method mm of type object at 0x7f87f5ecea40>",
    "/tmp/ipykernel_4242/1234567.py(2): step",
    "/tmp/ipykernel_4242/3456789.py(0): <module>",
    "<built-in function exec>",
    "nbprof/notebook/magic.py(83): run",
    "nbprof/notebook/magic.py(106): profile_cell",
    "IPython/core/interactiveshell.py(2644): run_cell_magic",
    "/tmp/ipykernel_4242/3456789.py(1): <module>",
    "IPython/core/interactiveshell.py(3823): run_code",
    "ipykernel/zmqshell.py(540): run_cell",
    "tornado/gen.py(786): run",
    "asyncio/events.py(84): _run",
    "<frozen runpy>(88): _run_code",
)


def test_a_stack_shows_the_users_frames_and_names_notebook_cells():
    from nbprof.notebook.frames import fold_stack

    cells = {"/tmp/ipykernel_4242/1234567.py": 3, "/tmp/ipykernel_4242/3456789.py": 5}
    assert fold_stack(KERNEL_STACK, cells) == [
        "… 1 library frame", "cell [3], line 2: step", "cell [5]", "… 10 library frames"]
    # the user's own module and a package in between, in a plain IPython shell
    stack = ("torch/nn/modules/linear.py(124): forward", "train.py(12): step",
             "torch/nn/modules/module.py(1736): _call_impl",
             "/opt/venv/lib/python3.11/site-packages/accelerate/hooks.py(170): new_forward",
             "<ipython-input-7-644adb21c82a>(0): <module>",
             "nbprof/notebook/magic.py(83): run")
    assert fold_stack(stack, {}) == ["… 1 library frame", "train.py(12): step",
                                     "… 2 library frames", "cell [7]", "… 1 library frame"]
    # a trace loaded in another kernel: its cells are not in this one's map
    assert fold_stack(KERNEL_STACK[1:3], {}) == ["a notebook cell, line 2: step", "a notebook cell"]


def test_details_fold_the_stack_and_name_the_cell():
    trace = Trace.build(start_ns=[0], end_ns=[5], thread=[0], name_id=[0], names=["aten::mm"],
                        threads=[(1, 1, "main")], stacks={0: KERNEL_STACK})
    html = details_html(trace, 0, {"/tmp/ipykernel_4242/3456789.py": 5})
    assert "<code>cell [5]</code>" in html and "… 10 library frames</code>" in html
    # the folded frames show on hover, one a line
    assert "title='<built-in function exec>\nnbprof/notebook/magic.py(83): run" not in html  # escaped
    assert "title='&lt;built-in function exec&gt;\nnbprof/notebook/magic.py(83): run\n" in html
    visible = re.sub(r" title='[^']*'", "", html)  # what the pane shows without hovering
    assert "ipykernel_4242/3456789" not in visible and "interactiveshell" not in visible


def test_an_event_links_to_its_parents_children_and_launched_gpu_work():
    from nbprof.notebook.details import event_links, gpu_links

    trace = two_run_trace()
    addmm = int(events_named(trace, "aten::addmm")[1])
    parents, children, launched = event_links(trace, addmm)
    assert [(link.text, link.kind) for link in parents.links] == [("aten::linear", "cpu"),
                                                                  ("cudaprof run 2/2", "cpu")]
    assert children.label == "Children" and children.links == []
    assert launched.label == "Launched (1)"
    (kernel,) = launched.links
    assert (kernel.text, kernel.kind) == ("volta_sgemm_128x64", "gpu")
    assert trace.gpu_launch[kernel.row] == addmm
    (launcher,) = gpu_links(trace, kernel.row)[0].links
    assert (launcher.kind, launcher.row) == ("cpu", addmm)
    linear = parents.links[0].row
    assert [link.row for link in event_links(trace, linear)[1].links] == [addmm]


def test_repeat_table_shows_control_characters_as_escapes_in_aligned_rows():
    trace = two_run_trace()
    trace.names[2] = "aten::linear\n\x1b[2J"  # the op in both runs, renamed
    lines = repeat_table(trace).splitlines()
    assert any(line.startswith(r"aten::linear\n\x1b[2J ") for line in lines)
    assert all(ch.isprintable() for line in lines for ch in line)
    table_lines = lines[1:-1]  # after "Per run, over 2 runs:", rules, header and rows
    assert len({len(line) for line in table_lines}) == 1, lines


def test_the_summary_lists_ops_not_with_stacks_python_frames():
    from nbprof.notebook.summary import summary_html, summary_rows

    # --with-stack: Python frames are events of category python_function around the ops
    trace = Trace.build(start_ns=[0, 10, 20], end_ns=[100, 90, 30], thread=[0, 0, 0],
                        name_id=[0, 1, 2], names=["threading.py(1002): _bootstrap", "train.py(3): step",
                                                  "aten::mm"],
                        threads=[(1, 1, "main")], category=[2, 2, 0],
                        categories=("op", "user_annotation", "python_function"))
    assert [row["name"] for row in summary_rows(trace)] == ["aten::mm"]
    assert "_bootstrap" not in summary_html(trace) and "aten::mm" in summary_html(trace)


def test_a_runtime_call_shows_the_gpu_work_its_timeline_arrow_points_to(shared_traces):
    # a selected cudaLaunchKernel said "GPU: no GPU interval" and had no "Launched" link while the
    # timeline drew an arrow from it to its kernel (the arrows start at the runtime call)
    import nbprof
    from nbprof.notebook.details import event_links, gpu_details_html, gpu_links
    from nbprof.timeline.data import runtime_calls

    trace = nbprof.load(shared_traces / "gpu_alexnet_kineto.json.gz")
    arrows = runtime_calls(trace)  # per GPU interval, the call its arrow starts at
    calls = sorted(set(arrows[arrows >= 0].tolist()))
    assert len(calls) > 50
    for call in calls:
        launched = [row for label, links, _ in event_links(trace, call)
                    if label.startswith("Launched") for row in (link.row for link in links)]
        assert launched == np.flatnonzero(arrows == call).tolist()
        # the interval links back to the call: as "Runtime call" under its op, else "Launched by"
        back = {row.label: row.links[0].row for row in gpu_links(trace, launched[0])}
        assert back.get("Runtime call", back["Launched by"]) == call
    launch = next(call for call in calls if trace.names[trace.name_id[call]] == "cudaLaunchKernel")
    html = details_html(trace, launch)
    kernel = trace.names[trace.gpu_name_id[np.flatnonzero(arrows == launch)[0]]]
    assert "no GPU interval" not in html and "Launched (1)" in html
    assert html.count(kernel.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")) == 2
    assert "Runtime call: <code>cudaLaunchKernel</code>" in gpu_details_html(
        trace, int(np.flatnonzero(arrows == launch)[0]))


def test_details_list_every_arg_of_a_slice_as_text():
    # Kineto's Input Dims and External id, and any arg of a loaded file, as Perfetto lists them
    from nbprof.notebook.details import gpu_details_html

    hostile = "<img src=x onerror=alert(1)>"
    trace = Trace.build(start_ns=[0], end_ns=[50], thread=[0], name_id=[0], names=["aten::mm"],
                        threads=[(1, 1, "main")], gpu_start_ns=[10], gpu_end_ns=[20], gpu_name_id=[0],
                        gpu_device=[0], gpu_stream=[7], gpu_launch=[0], gpu_kind=[KIND_KERNEL],
                        event_args={0: {"Input Dims": [[64, 256], [256, 256]], "External id": 17,
                                        hostile: hostile, "long": "x" * 1000}},
                        gpu_args={0: {"grid": [8, 1, 1], "block": [128, 1, 1], "registers": 32}})
    html = details_html(trace, 0)
    for expected in ("<th style='text-align:left;vertical-align:top;padding-right:8px'>Args</th>",
                     ">Input Dims<", "[[64, 256], [256, 256]]", ">External id<", "<code>17</code>",
                     "&lt;img src=x onerror=alert(1)&gt;", "x" * 400 + "…"):
        assert expected in html, expected
    assert "<img" not in html and "x" * 401 not in html.split("title=")[0]
    gpu = gpu_details_html(trace, 0)
    assert ">grid<" in gpu and "[8, 1, 1]" in gpu and ">registers<" in gpu
