"""The Compare tab's two-run figure: only lanes that hold bars, and names inside the bars."""

import numpy as np

import nbprof
from nbprof.analysis.diff import compare
from nbprof.timeline.compare import comparison_figure


def lane_labels(plot):
    return list(plot.yaxis[0].major_label_overrides.values())


def test_cpu_only_runs_get_no_gpu_lanes_and_no_empty_depths(shared_traces):
    trace = nbprof.load(shared_traces / "cpu_only_rank34.json.gz")
    plot, source = comparison_figure(trace, trace, compare(trace, trace))
    labels = lane_labels(plot)
    assert labels and not any("GPU" in label for label in labels)
    # every lane holds a bar
    rows = {int(bottom) for bottom in np.floor(source.data["bottom"])}
    assert rows == set(range(len(labels)))


def test_bars_wide_enough_carry_their_names_cut_to_fit(shared_traces):
    before = nbprof.load(shared_traces / "gpu_sampled_rank0.json.gz")
    after = nbprof.load(shared_traces / "gpu_sampled_rank1.json.gz")
    plot, source = comparison_figure(before, after, compare(before, after))
    assert sum("GPU" in label for label in lane_labels(plot)) == 2  # a GPU lane per run
    names = plot.select_one({"name": "nbprof_compare_names"}).data
    assert any(text.startswith("ProfilerStep#551") for text in names["text"])
    span = max(source.data["right"])
    bars = source.data
    for x, y, text in zip(names["x"], names["y"], names["text"]):  # inside its bar, fitting in it
        bar = next(i for i in range(len(bars["name"]))
                   if bars["left"][i] <= x <= bars["right"][i] and bars["bottom"][i] <= y <= bars["top"][i]
                   and bars["name"][i].startswith(text.rstrip("…")))
        width_px = (bars["right"][bar] - bars["left"][bar]) / span * 900
        assert len(text) * 6 <= width_px
