"""The memory lane past the embedding budget (nbprof/timeline/memory_served.py): the page carries
a reduced level, not every event, and the kernel answers a view with the points that draw it
exactly (every event where the view holds few)."""

import numpy as np
import pytest

from nbprof.model import MemoryEvents, Trace
from nbprof.timeline import Timeline
from nbprof.timeline.memory_served import EMBEDDED_BUCKETS, KEPT_PER_BUCKET

EVENTS = 200_000


@pytest.fixture(scope="module")
def trace():
    """A loop that allocates and frees blocks of random sizes, 10 ns apart, inside 1000 ops."""
    rng = np.random.default_rng(7)
    size = rng.integers(1, 1 << 20, EVENTS // 2) * 16
    n = len(size)
    memory = MemoryEvents.build(
        time_ns=np.arange(2 * n) * 10, bytes=np.stack([size, -size], axis=1).reshape(-1),
        addr=np.repeat(np.arange(n) % 64 + 1, 2) * 4096, device=np.full(2 * n, -1),
        thread=np.zeros(2 * n, np.int32))
    starts = np.arange(1000) * (20 * n // 1000)
    return Trace.build(start_ns=starts, end_ns=starts + 20 * n // 1000 - 1,
                       thread=np.zeros(1000, np.int32), name_id=np.zeros(1000, np.int32),
                       names=["step"], threads=[(1, 1, "main")], memory=memory)


def memory_args(timeline):
    callback = next(cb for cb in timeline.layout.document.callbacks._js_event_callbacks
                    ["document_ready"] if "devices" in cb.args)
    return callback.args


def test_past_the_budget_the_page_carries_a_reduced_level_and_says_so(trace):
    timeline = Timeline(trace, max_embedded_events=100_000)
    devices = memory_args(timeline)["devices"]
    embedded = sum(len(d["t"]) for d in devices)
    assert embedded <= KEPT_PER_BUCKET * EMBEDDED_BUCKETS
    assert sum(d["count"].sum() for d in devices) == EVENTS  # every event counted once
    assert "kernel draws each event" in timeline.layout.select_one({"name": "nbprof_memory"}).title.text
    within = memory_args(Timeline(trace, max_embedded_events=None))["devices"]
    assert sum(len(d["t"]) for d in within) == EVENTS


def test_the_served_page_is_small(trace, tmp_path):
    """The memory lane's share of the page: a reduced level's, not every event's."""
    without = Trace.build(start_ns=trace.start_ns, end_ns=trace.end_ns, thread=trace.thread,
                          name_id=trace.name_id, names=trace.names, threads=trace.threads)
    size = {name: Timeline(t, max_embedded_events=budget).save(tmp_path / f"{name}.html")
            .stat().st_size for name, t, budget in (("base", without, 100_000),
                                                      ("served", trace, 100_000),
                                                      ("full", trace, None))}
    assert size["served"] - size["base"] < (size["full"] - size["base"]) / 4
    assert size["served"] - size["base"] < 1_000_000


def test_a_view_is_answered_with_the_points_that_draw_it(trace):
    timeline = Timeline(trace, max_embedded_events=100_000)
    args = memory_args(timeline)
    level = trace.memory.levels()
    t = trace.memory.time_ns - timeline._origin_ns
    # a wide view: per pixel, the lowest and highest level and every event counted
    x0, x1, width = float(t[1000]), float(t[150_000]), 500
    args["request"].data = {"x0": [x0], "x1": [x1], "width": [width], "key": ["wide"]}
    answer = args["answer"].data
    assert answer["key"] == ["wide"]
    got = {f: answer[f][0] for f in ("t", "level", "count")}
    assert len(got["t"]) <= KEPT_PER_BUCKET * (width + 2)
    inside = (t >= x0) & (t < x1)
    pixel = np.floor((t[inside] - x0) * width / (x1 - x0)).astype(int)
    kept_pixel = np.floor((got["t"] - x0) * width / (x1 - x0)).astype(int)
    for p in (0, 137, 499):
        assert got["level"][kept_pixel == p].min() == level[inside][pixel == p].min()
        assert got["level"][kept_pixel == p].max() == level[inside][pixel == p].max()
    assert got["count"].sum() == np.count_nonzero(inside) + 2  # and the events either side
    # a narrow view: its events themselves
    x0, x1 = float(t[5000]), float(t[5100])
    args["request"].data = {"x0": [x0], "x1": [x1], "width": [800], "key": ["narrow"]}
    answer = args["answer"].data
    np.testing.assert_array_equal(answer["t"][0], t[4999:5101])
    np.testing.assert_array_equal(answer["level"][0], level[4999:5101])
    assert (answer["count"][0] == 1).all()
