"""What the widget's panes and the --repeat summary compute from a Trace (no widgets, no torch)."""

import numpy as np
import pytest

from nbprof.notebook.details import details_html
from nbprof.events import KIND_KERNEL, Trace
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


def test_details_times_are_on_the_timelines_axis():
    trace = Trace.build(start_ns=[5_000, 7_000], end_ns=[9_000, 8_000], thread=[0, 0], name_id=[0, 1],
                        names=["outer", "inner"], threads=[(1, 1, "main")])
    html = details_html(trace, 1)  # the axis starts at the first event (5 us)
    assert "2.000us &rarr; 3.000us (<b>1.000us</b>)" in html


def test_repeat_table_shows_control_characters_as_escapes_in_aligned_rows():
    trace = two_run_trace()
    trace.names[2] = "aten::linear\n\x1b[2J"  # the op in both runs, renamed
    lines = repeat_table(trace).splitlines()
    assert any(line.startswith(r"aten::linear\n\x1b[2J ") for line in lines)
    assert all(ch.isprintable() for line in lines for ch in line)
    table_lines = lines[1:-1]  # after "Per run, over 2 runs:", rules, header and rows
    assert len({len(line) for line in table_lines}) == 1, lines
