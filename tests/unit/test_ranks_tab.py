"""The widget's Ranks tab on a merged job: the summary, and a click on a rank filters the lanes."""

import pytest

import nbprof

RANK_FILES = ("gpu_sampled_rank0.json.gz", "gpu_sampled_rank1.json.gz")


@pytest.fixture(scope="module")
def widget(shared_traces):
    return nbprof.widget(nbprof.load([shared_traces / name for name in RANK_FILES]), name="job")


def test_a_merged_job_has_a_ranks_tab_with_the_summary(widget):
    titles = [widget.panes.get_title(i) for i in range(len(widget.panes.children))]
    assert "Ranks" in titles and widget.panes.children[titles.index("Ranks")] is widget.ranks
    html = widget.ranks.table.value
    assert "In collectives" in html and f"Straggler: rank {widget.ranks.summary.straggler}" in html
    assert [b.description for b in widget.ranks.buttons] == ["rank 0", "rank 1"]


def test_clicking_a_rank_shows_only_its_lanes(widget):
    lanes = widget.timeline.lanes
    widget.ranks.buttons[1].click()
    visible = widget.timeline.filter.data["lane_visible"]
    shown = [lane for lane, on in zip(lanes, visible) if on]
    assert shown and all(lane.startswith("rank 1 · ") for lane in shown)
    assert len(shown) == sum(lane.startswith("rank 1 · ") for lane in lanes)
    widget.ranks.all_ranks.click()
    assert all(widget.timeline.filter.data["lane_visible"])


def test_a_single_trace_has_no_ranks_tab(shared_traces):
    single = nbprof.widget(nbprof.load(shared_traces / RANK_FILES[0]))
    titles = [single.panes.get_title(i) for i in range(len(single.panes.children))]
    assert "Ranks" not in titles
