"""An area selection's summary: per name, events overlapping a time range and their time inside it."""

import subprocess
import sys

from nbprof.model import KIND_KERNEL, Trace
from nbprof.analysis.range_summary import RangeRow, range_summary


def trace():
    """main thread: step 0..1000 with mm 100..400 and mm 600..900 inside; a relu 950..960 on
    another thread; GPU: two gemm kernels 300..500 and 700..800, a copy 900..1200."""
    names = ["step", "aten::mm", "aten::relu", "gemm", "Memcpy HtoD"]
    return Trace.build(
        start_ns=[0, 100, 600, 950], end_ns=[1000, 400, 900, 960], thread=[0, 0, 0, 1],
        name_id=[0, 1, 1, 2], names=names, threads=[(1, 11, "MainThread"), (1, 12, "worker")],
        gpu_start_ns=[300, 700, 900], gpu_end_ns=[500, 800, 1200], gpu_name_id=[3, 3, 4],
        gpu_device=[0] * 3, gpu_stream=[7] * 3, gpu_launch=[1, 2, -1], gpu_kind=[KIND_KERNEL] * 3)


def test_times_are_clipped_to_the_range_and_grouped_by_name():
    summary = range_summary(trace(), 200, 750)
    # step: 550 inside; mm 200..400 (200) + 600..750 (150); relu is outside
    assert summary.cpu.rows == [RangeRow("step", 1, 550), RangeRow("aten::mm", 2, 350)]
    assert (summary.cpu.events, summary.cpu.names, summary.cpu.inside_ns) == (3, 2, 900)
    # gemm 300..500 (200) + 700..750 (50); the copy starts after the range
    assert summary.gpu.rows == [RangeRow("gemm", 2, 250)]
    assert summary.gpu.events == 2


def test_a_range_dragged_right_to_left_and_one_covering_everything():
    assert range_summary(trace(), 750, 200) == range_summary(trace(), 200, 750)
    whole = range_summary(trace(), -10, 10_000)
    assert whole.cpu.rows == [RangeRow("step", 1, 1000), RangeRow("aten::mm", 2, 600),
                              RangeRow("aten::relu", 1, 10)]
    # a tie on time: more events first
    assert whole.gpu.rows == [RangeRow("gemm", 2, 300), RangeRow("Memcpy HtoD", 1, 300)]


def test_an_event_that_only_touches_the_range_is_not_in_it():
    summary = range_summary(trace(), 400, 600)  # the mms end at 400 and start at 600
    assert [row.name for row in summary.cpu.rows] == ["step"]


def test_the_top_names_only_and_how_many_more():
    names = [f"op{i}" for i in range(20)]
    many = Trace.build(start_ns=list(range(0, 200, 10)), end_ns=[i * 10 + 1 + i for i in range(20)],
                       thread=[0] * 20, name_id=list(range(20)), names=names,
                       threads=[(1, 1, "main")])
    summary = range_summary(many, 0, 1_000, top=15)
    assert len(summary.cpu.rows) == 15 and summary.cpu.names == 20
    assert summary.cpu.rows[0] == RangeRow("op19", 1, 20)  # the longest first
    assert summary.gpu.rows == [] and summary.gpu.events == 0


def test_an_empty_trace():
    summary = range_summary(Trace.empty(), 0, 10)
    assert summary.cpu.rows == [] and summary.cpu.events == 0 and summary.gpu.inside_ns == 0


def test_the_module_imports_no_torch_bokeh_or_ipython():
    code = ("import sys\nfor name in ('torch', 'bokeh', 'IPython'): sys.modules[name] = None\n"
            "import nbprof.analysis.range_summary\nprint('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "ok", result.stderr
