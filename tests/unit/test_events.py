"""The model: sorting, nesting, self time and views, on hand-made columns."""

import numpy as np
import pytest

from nbprof import Interval, Trace
from blocked_imports import run_without


def small_trace():
    # thread 0: a [0,50) holds b [10,30) which holds c [20,25); a again [100,150)
    # thread 1: b [5,60); one GPU interval launched by the b on thread 0
    return Trace.build(
        start_ns=[0, 10, 20, 100, 5], end_ns=[50, 30, 25, 150, 60], thread=[0, 0, 0, 0, 1],
        name_id=[0, 1, 2, 0, 1], names=["a", "b", "c"],
        threads=[(1, 1, "main"), (1, 2, "worker")],
        gpu_start_ns=[40], gpu_end_ns=[70], gpu_name_id=[1], gpu_device=[0], gpu_stream=[7],
        gpu_launch=[1], gpu_kind=[0])


def test_events_come_in_cpu_start_order_with_nesting_and_self_time():
    trace = small_trace()
    events = list(trace.events)
    assert [e.cpu_interval.start_ns for e in events] == [0, 5, 10, 20, 100]
    a, worker_b, b, c, a2 = events
    assert (b.parent, b.depth) == (a.id, 1)
    assert (c.parent, c.depth) == (b.id, 2)
    assert worker_b.parent is None and worker_b.thread.name == "worker"
    assert a.self_cpu_ns == 50 - 20
    assert b.self_cpu_ns == 20 - 5
    assert trace.children(a.id) == [b.id]


def test_launch_ids_follow_the_sort():
    trace = small_trace()
    (kernel,) = trace.kernels
    launcher = trace.events[kernel.launch_id]
    assert launcher.name == "b" and launcher.thread.tid == 1
    assert launcher.kernels == (kernel,)
    assert launcher.cuda_time_total == pytest.approx(0.030)


def test_overlapping_slices_that_do_not_nest_keep_their_time():
    trace = Trace.build(start_ns=[0, 40], end_ns=[50, 90], thread=[0, 0], name_id=[0, 0],
                        names=["x"], threads=[(1, 1, "t")])
    first, second = trace.events
    assert second.parent == first.id
    assert first.self_cpu_ns == 40  # only the 10 ns inside it are charged to the child
    assert second.cpu_time_total == pytest.approx(0.05)


def test_interval_units():
    assert Interval(1_000, 3_500).elapsed_us() == 2.5
    assert Interval(1_000, 3_500).elapsed_ns() == 2_500


def test_empty_trace():
    trace = Trace.empty()
    assert len(trace) == 0 and list(trace.kernels) == [] and trace.duration_ns == 0
    assert "Name" in trace.table()


def test_columns_must_agree_in_length():
    with pytest.raises(ValueError, match="rows"):
        Trace(start_ns=[0], end_ns=[1, 2], thread=[0], name_id=[0], category=[0], depth=[0],
              parent=[-1], self_ns=[1], gpu_start_ns=[], gpu_end_ns=[], gpu_name_id=[],
              gpu_device=[], gpu_stream=[], gpu_launch=[], gpu_kind=[], names=["x"],
              threads=[(1, 1, "t")])


def test_key_averages_and_table():
    trace = small_trace()
    rows = {row.name: row for row in trace.key_averages()}
    assert rows["a"].count == 2 and rows["a"].cpu_time_total == pytest.approx(0.1)
    assert rows["b"].cuda_time_total == pytest.approx(0.03)
    assert rows["a"].self_cpu_time_total == pytest.approx(0.08)
    text = trace.table(sort_by="self_cpu_time_total", row_limit=2)
    assert text.index("a ") < text.index("b ")
    assert "1 more rows" in text
    with pytest.raises(ValueError, match="choose one of"):
        trace.table(sort_by="bogus")


def test_model_imports_no_torch_bokeh_or_ipython():
    code = (
        "import nbprof, nbprof.model, nbprof.analysis\n"
        "import nbprof.analysis.steps, nbprof.analysis.kernel_summary, nbprof.analysis.findings, nbprof.analysis.diff\n"
        "t = nbprof.Trace.build(start_ns=[0], end_ns=[5], thread=[0], name_id=[0], names=['x'],"
        " threads=[(1, 1, 'main')])\n"
        "print(t.table())\n"
        "print(t.steps().table(), t.kernel_summary().table(), t.findings(), nbprof.diff(t, t).table())\n"
    )
    result = run_without(code)
    assert result.returncode == 0, result.stderr
    assert "x" in result.stdout


def test_gpu_busy_time_counts_nested_and_overlapping_intervals_once():
    from nbprof.analysis.averages import gpu_busy_ns

    # stream 7: [0,100) holds [10,20); [150,160) apart; stream 8: [0,50) counts on its own
    trace = Trace.build(
        start_ns=[0], end_ns=[1], thread=[0], name_id=[0], names=["op"], threads=[(1, 1, "t")],
        gpu_start_ns=[0, 10, 150, 0], gpu_end_ns=[100, 20, 160, 50], gpu_name_id=[0] * 4,
        gpu_device=[0] * 4, gpu_stream=[7, 7, 7, 8], gpu_launch=[-1] * 4, gpu_kind=[0] * 4)
    assert gpu_busy_ns(trace) == 100 + 10 + 50
    assert "GPU busy (op events): 0.160us (per stream, summed)" in trace.table()


def test_table_rows_stay_one_line_and_aligned_with_control_characters_in_names():
    # a name with a newline, a tab, an escape sequence and a bell: each must read as an escape,
    # or the row would break over lines or repaint the terminal
    odd = "x\ny\tz\x1b[31m\x07é"
    trace = Trace.build(start_ns=[0, 10], end_ns=[5, 12], thread=[0, 0], name_id=[0, 1],
                        names=[odd, "plain"], threads=[(1, 1, "main")])
    lines = trace.table().splitlines()
    row = next(line for line in lines if line.startswith("x"))
    assert row.startswith(r"x\ny\tz\x1b[31m\x07é")
    assert all(ch.isprintable() for line in lines for ch in line)
    widths = {len(line) for line in lines[:5]}  # rules, header and the two rows
    assert len(widths) == 1, lines


def test_table_columns_stay_straight_with_wide_characters_in_names():
    # CJK characters take two terminal columns and combining accents none: the numbers after a
    # name like 行列積 must start in the same column as every other row's, and a long wide name is
    # cut to the column's width, not to its character count
    from nbprof.analysis.averages import display_width, table

    names = ["行列積", "e\u0301tape", "plain", "長" * 40]
    trace = Trace.build(start_ns=[0, 10, 20, 30], end_ns=[5, 12, 25, 38], thread=[0] * 4,
                        name_id=[0, 1, 2, 3], names=names, threads=[(1, 1, "main")])
    lines = table(trace, name_width=30).splitlines()
    assert len({display_width(line) for line in lines[:8]}) == 1, lines
    rule = lines[0].split("  ")
    assert display_width(rule[0]) <= 30
    wide = next(line for line in lines if line.startswith("長"))
    assert wide.startswith("長" * 13 + "...")  # 13 wide characters + "..." fill 29 of 30 columns
    assert display_width("行列積") == 6 and display_width("e\u0301") == 1


def test_dir_lists_the_lazy_public_names_without_importing_them():
    # a notebook's tab completion offers what dir(nbprof) lists: nbprof.pro<TAB> must find profile
    import subprocess
    import sys

    code = ("import sys, nbprof\n"
            "print(sorted(set(nbprof.__all__) - set(dir(nbprof))), 'torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.split() == ["[]", "False"], result.stderr


def test_summary_numbers_are_plain_python_floats():
    trace = small_trace()
    row = trace.key_averages()[0]
    assert type(row.cpu_time_total) is float and type(row.cuda_time_total) is float
    assert "np.float64" not in repr(row)
    assert type(trace.events[0].cuda_time_total) is float


def test_stream_keys_group_streams_and_split_back_negative_ones_too():
    from nbprof.model import split_stream_key

    trace = Trace.build(
        start_ns=[0], end_ns=[1], thread=[0], name_id=[0], names=["op"], threads=[(1, 1, "t")],
        gpu_start_ns=[0, 1, 2, 3], gpu_end_ns=[1, 2, 3, 4], gpu_name_id=[0] * 4,
        gpu_device=[0, 0, 1, 0], gpu_stream=[7, -1, 7, 7], gpu_launch=[-1] * 4, gpu_kind=[1] * 4)
    keys = trace.gpu_stream_keys()
    assert len(set(keys.tolist())) == 3
    assert [split_stream_key(key) for key in keys] == [(0, 7), (0, -1), (1, 7), (0, 7)]
