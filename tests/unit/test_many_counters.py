"""Many counter series (issue 21): the strip draws every series with one line glyph, so a page
with 10,000 series builds in seconds (bench/bench_counters.py times it)."""

import numpy as np

import nbprof
from nbprof.model import CounterSeries, Trace


def many_counters(count: int) -> Trace:
    times = np.arange(5, dtype=np.int64) * 1000
    counters = [CounterSeries(name=f"queue {i}", series="value", pid=1, time_ns=times,
                              values=np.arange(5, dtype=np.float64) * (i + 1))
                for i in range(count)]
    return Trace.build(start_ns=[0], end_ns=[5000], thread=[0], name_id=[0], names=["step"],
                       threads=[(1, 1, "main")], counters=counters)


def test_ten_thousand_series_are_one_glyph():
    layout = nbprof.timeline(many_counters(10_000))
    strip = layout.select_one({"name": "nbprof_counters"})
    assert len(strip.renderers) == 2  # the steps' line and the samples the hover reads
    line = strip.select_one({"name": "nbprof_counter"}).data_source.data
    # each series' 5 samples as 9 step points, the series apart by a NaN each
    assert len(line["x"]) == 10_000 * 9 + 9_999
    assert int(np.isnan(line["y"]).sum()) == 9_999
    samples = strip.select_one({"name": "nbprof_counter_samples"}).data_source.data
    assert len(samples["value"]) == 50_000 and samples["name"][-1] == "queue 9999 (pid 1)"
    assert samples["value"][-1] == 4 * 10_000
    hover = [tool for tool in strip.tools if tool.renderers == [strip.select_one(
        {"name": "nbprof_counter_samples"})]]
    assert [tool.mode for tool in hover] == ["mouse"]  # not 10,000 tooltips down a vline
    # the strip stays a height a browser draws; labels thin out instead of overlapping
    assert strip.height <= 2800 + 30
    assert 0 < len(strip.yaxis[0].ticker.ticks) < 10_000


def test_a_step_holds_its_value_until_the_next_sample():
    trace = many_counters(1)
    line = nbprof.timeline(trace).select_one({"name": "nbprof_counter"}).data_source.data
    assert line["x"].tolist() == [0, 1000, 1000, 2000, 2000, 3000, 3000, 4000, 4000]
    y = line["y"]
    assert y[0] == y[1] and y[2] == y[3] and y[0] > y[2]  # rows grow downward
