"""Served level of detail (nbprof/timeline/served.py, sweep.py): the kernel's bars for a view are exactly what
the browser's sweep (js/timeline_draw.js) draws from every event, and a page past its embedding
budget carries a coarser level and says so."""

import numpy as np
import orjson
import pytest

import nbprof
from nbprof.model import Trace
from nbprof.timeline import Timeline
from nbprof.timeline.data import encode_events
from nbprof.timeline.lanes import build_lanes
from nbprof.timeline.packing import unpack_columns
from nbprof.timeline.served import Served, served_past_budget
from nbprof.timeline.sweep import coarser_levels, row_columns, view_bars
from served_trace import hand_built_trace


def decoded_entries(packed, layout, row_is_gpu):
    """The page's entries as js/timeline_decode.js rebuilds them (starts from zigzag gaps, ids
    from deltas), with each entry's count and busy time when the page carries them."""
    columns = unpack_columns(packed, layout)
    counts = columns["row_count"].astype(np.int64)
    gaps = columns["start_gap"].astype(np.int64)
    duration = columns["duration"].astype(np.int64)
    id_delta = columns["id_delta"].astype(np.int64)
    start, ids, rows = np.zeros(len(gaps), np.int64), np.zeros(len(gaps), np.int64), []
    i = 0
    for row, count in enumerate(counts):
        for k in range(count):
            gap = gaps[i] // 2 if gaps[i] % 2 == 0 else -(gaps[i] + 1) // 2
            start[i] = start[i - 1] + duration[i - 1] + gap if k else gap
            ids[i] = ids[i - 1] + id_delta[i] if k else id_delta[i]
            rows.append(row)
            i += 1
    rows = np.asarray(rows, np.int64)
    count = columns.get("count", np.ones(len(start))).astype(np.int64)
    busy = duration.copy()
    busy[count != 1] = columns.get("block_busy", np.zeros(0, np.int64))
    event_id = columns.get("event_id_delta", id_delta).astype(np.int64)
    for i in range(1, len(event_id)):
        if rows[i] == rows[i - 1]:
            event_id[i] += event_id[i - 1]
    return {"rows": rows, "start": start, "dur": duration, "id": ids, "count": count,
            "busy": busy, "event_id": event_id, "gpu": np.asarray(row_is_gpu, bool)[rows]}


def js_sweep(entries, x0, x1, width, min_duration=0):
    """js/timeline_draw.js's sweep, line by line: (row, gpu?, trace id of the first event, count,
    left, right, busy) per bar."""
    ns_per_px = (x1 - x0) / width
    real_ns, gap_ns = 3 * ns_per_px, 1 * ns_per_px
    chunk_ns = 2.0 ** np.floor(np.log2(4 * ns_per_px * (1 + 1e-9)))  # blockColumnNs
    out = []
    rows = entries["rows"]
    for row in np.unique(rows):
        where = np.flatnonzero(rows == row)
        running, max_end = -np.inf, []
        for i in where:
            running = max(running, entries["start"][i] + entries["dur"][i])
            max_end.append(running)
        lo = int(np.searchsorted(max_end, x0))
        first = count = block_start = block_end = busy = chunk_end = 0

        def bar(i, n, left, right, b):
            out.append((int(row), bool(entries["gpu"][i]), int(entries["event_id"][i]), int(n),
                        int(left), int(right), int(b)))

        for i in where[lo:]:
            s, d = entries["start"][i], entries["dur"][i]
            if s > x1:
                break
            e = s + d
            if d < min_duration or e < x0:
                continue
            n, b = entries["count"][i], entries["busy"][i]
            if d >= real_ns and n == 1:
                if count:
                    bar(first, count, block_start, block_end, busy)
                count = 0
                bar(i, 1, s, e, d)
            elif count and s - block_end < gap_ns and s < chunk_end:
                busy += max(0, b - max(0, min(e, block_end) - s))
                block_end = max(block_end, e)
                count += n
            else:
                if count:
                    bar(first, count, block_start, block_end, busy)
                first, count, block_start, block_end, busy = i, n, s, e, b
                chunk_end = (np.floor(s / chunk_ns) + 1) * chunk_ns
        if count:
            bar(first, count, block_start, block_end, busy)
    return out


def served_tuples(trace, columns, bars, row_is_gpu):
    index = columns.order[bars.first]
    gpu = index >= len(trace)
    ids = np.where(gpu, index - len(trace), index)
    return [(int(r), bool(g), int(i), int(c), int(left), int(right), int(b)) for r, g, i, c, left,
            right, b in zip(bars.row, gpu, ids, bars.count, bars.left, bars.right, bars.busy)]


VIEWS = [  # (x0, x1, width): the whole trace, zoomed on a burst, an edge, fractional ranges
    (0.0, 1_000_000.0, 1200), (0.0, 1_000_000.0, 97), (150_050.5, 260_000.25, 800),
    (151_000.0, 152_500.0, 1200), (-5_000.0, 40_000.0, 300), (899_000.0, 2_000_000.0, 640),
    (300_000.0, 300_001.0, 1000), (120_000.0, 200_000.0, 500)]  # x0 on a parent's end


@pytest.mark.parametrize("min_duration", [0, 500])
def test_served_bars_equal_the_browsers_sweep_over_every_event(min_duration):
    trace = hand_built_trace()
    lanes = build_lanes(trace)
    packed, info = encode_events(trace, lanes)  # what a full page embeds
    page = decoded_entries(packed, info["layout"], lanes.row_is_gpu)
    columns = row_columns(trace, lanes)
    for x0, x1, width in VIEWS:
        expected = js_sweep(page, x0, x1, width, min_duration)
        bars = view_bars(columns, x0, x1, width, min_duration)
        assert served_tuples(trace, columns, bars, lanes.row_is_gpu) == expected, (x0, x1, width)
    # the views exercise both kinds of bar
    whole = js_sweep(page, *VIEWS[0])
    assert any(bar[3] > 1 for bar in whole) and any(bar[3] == 1 for bar in whole)


def test_an_answer_redrawn_by_the_browser_gives_the_same_bars():
    trace = hand_built_trace()
    served = Served(trace, build_lanes(trace), budget=100)
    for x0, x1, width in VIEWS:
        request = {"x0": [x0], "x1": [x1], "width": [width], "min_duration": [500],
                   "key": [f"{x0}|{x1}|{width}"]}
        answer = served.answer(request)
        assert answer["key"] == request["key"]
        meta = orjson.loads(answer["meta"][0])
        entries = decoded_entries(answer["packed"][0], meta["layout"], served.lanes.row_is_gpu)
        bars = view_bars(served.columns, x0, x1, width, 500)
        assert js_sweep(entries, x0, x1, width, 500) == served_tuples(
            trace, served.columns, bars, served.lanes.row_is_gpu)
        assert meta["n_cpu"] + meta["n_gpu"] == len(bars)
        assert served.answer(request) is None  # jupyter_bokeh's second call for the same change


def test_past_the_budget_the_page_embeds_a_coarse_level_and_says_so():
    trace = hand_built_trace()
    events = len(trace) + len(trace.gpu_start_ns)
    full = Timeline(trace, max_embedded_events=None)
    assert full.served is None and "showing" not in full.note.html
    view = Timeline(trace, max_embedded_events=120)
    coarse = view.served.coarse
    assert 0 < len(coarse) <= 120
    assert int(coarse.count.sum()) == events  # every event is in one bar
    assert f"showing {len(coarse):,} bars for {events:,} events" in view.note.html
    assert "nbprof view --full" in view.note.html
    # the coarse level is the whole trace's bars at its resolution
    resolution = view.served.resolution_ns
    again = view_bars(view.served.columns, 0, view.served.columns.span_ns,
                      view.served.columns.span_ns / resolution)
    assert np.array_equal(again.left, coarse.left) and np.array_equal(again.count, coarse.count)
    # a finer resolution would not fit
    finer = view_bars(view.served.columns, 0, view.served.columns.span_ns,
                      view.served.columns.span_ns / (resolution / 2))
    assert resolution == 1 or len(finer) > 120
    with pytest.raises(ValueError, match="max_embedded_events must be at least 1"):
        Timeline(trace, max_embedded_events=0)


def test_the_view_request_source_gets_its_answer():
    # jupyter_bokeh syncs the browser's write to served_request; the kernel's callback answers
    trace = hand_built_trace()
    view = Timeline(trace, max_embedded_events=100)
    view.served.request.data = {"x0": [0.0], "x1": [50_000.0], "width": [900.0],
                                "min_duration": [0], "key": ["0|50000|900|0"]}
    answer = view.served.answer_source.data
    assert answer["key"] == ["0|50000|900|0"]
    entries = decoded_entries(answer["packed"][0], orjson.loads(answer["meta"][0])["layout"],
                              view.served.lanes.row_is_gpu)
    assert entries["count"].sum() == sum(bar[3] for bar in js_sweep(entries, 0.0, 50_000.0, 900))
    view.served.request.data = {"x0": ["nonsense"]}  # a malformed request changes nothing
    assert view.served.answer_source.data["key"] == ["0|50000|900|0"]


def gpu_stream_trace(starts, ends):
    """One GPU stream of kernels at these times (and one CPU op: a trace has a thread)."""
    return Trace.build(start_ns=[0], end_ns=[10], thread=[0], name_id=[0], names=["op", "sgemm"],
                       threads=[(1, 100, "MainThread")], gpu_start_ns=starts, gpu_end_ns=ends,
                       gpu_name_id=[1] * len(starts), gpu_device=[0] * len(starts),
                       gpu_stream=[7] * len(starts), gpu_launch=[-1] * len(starts),
                       gpu_kind=[1] * len(starts))


def overlapping_kernels():
    """3000 narrow kernels with sub-pixel gaps, many overlapping the one before, and a few long
    ones: blocks of a coarse level overlap where a grid column cuts them."""
    rng = np.random.default_rng(5)
    starts = np.cumsum(rng.integers(0, 300, 3000))
    ends = starts + rng.integers(20, 600, 3000) + 50_000 * (rng.random(3000) < 0.002)
    return gpu_stream_trace(starts, ends)


@pytest.mark.parametrize("make_trace", [hand_built_trace, overlapping_kernels])
def test_views_read_through_the_coarse_level_give_the_same_bars(make_trace):
    # A view at least as coarse as the level reads its blocks (a whole block as one unit, a block
    # across the view's edge, a grid column's edge or overlapping the open block event by event):
    # the bars must not change.
    trace = make_trace()
    lanes = build_lanes(trace)
    packed, info = encode_events(trace, lanes)
    page = decoded_entries(packed, info["layout"], lanes.row_is_gpu)
    served = Served(trace, lanes, budget=150)
    level = served.level
    assert (level.bars.count > 1).any() and level.ns_per_px > 1
    chain = coarser_levels(level, served.columns, factor=2, smallest=10)  # levels 2x apart
    assert len(chain) >= 3 and len(chain[-1].bars) < len(level.bars)
    span = served.columns.span_ns
    rng = np.random.default_rng(11)
    by_level = 0
    for _ in range(150):
        x0 = float(rng.uniform(-0.1, 0.9) * span)
        width = int(rng.integers(20, 1500))
        x1 = x0 + max(float(rng.uniform(0.001, 1.2) * span), level.ns_per_px * width)
        if rng.random() < 0.3:  # edges exactly on an event's start or end
            x0 = float(page["start"][rng.integers(len(page["start"]))])
            x1 = max(x1, x0 + level.ns_per_px * width)
        expected = js_sweep(page, x0, x1, width)
        by_level += (x1 - x0) / width >= level.ns_per_px
        for levels in ((level,), chain):  # the page's level alone; coarser ones too
            bars = view_bars(served.columns, x0, x1, width, levels=levels)
            assert served_tuples(trace, served.columns, bars, lanes.row_is_gpu) == expected, (
                x0, x1, width, len(levels))
    assert by_level >= 140  # (a few land just under it by rounding)


def test_nbprof_view_takes_the_budget_and_full(shared_traces, tmp_path, capsys):
    from nbprof.cli.main import main

    source = str(shared_traces / "gpu_alexnet_kineto.json.gz")
    coarse, full = tmp_path / "coarse.html", tmp_path / "full.html"
    assert main(["view", source, "-o", str(coarse), "--max-events", "100"]) == 0
    assert main(["view", source, "-o", str(full), "--full"]) == 0
    assert "events (over the 100-event budget)" in coarse.read_text()  # the page's note
    assert "events (over the" not in full.read_text()
    for bad in ("-3", "0"):  # one usage line, as for any bad option (0 once meant the default)
        with pytest.raises(SystemExit) as stopped:
            main(["view", source, "-o", str(tmp_path / "bad.html"), "--max-events", bad])
        assert stopped.value.code == 2
        assert f"--max-events: must be at least 1, not {bad}" in capsys.readouterr().err


@pytest.mark.parametrize("budget", [3, 1])
def test_a_budget_under_the_number_of_rows_gives_a_bar_per_row(shared_traces, budget):
    # 16 events on 4 rows: no resolution fits 3 bars, and coarsening stops at one bar per row
    # (it used to double the resolution for ever)
    trace = nbprof.load(shared_traces / "cpu_only_rank34.json.gz")
    lanes = build_lanes(trace)
    served = served_past_budget(trace, lanes, budget)
    rows = len(set(lanes.cpu_row.tolist()) | set(lanes.gpu_row.tolist()))
    assert len(served.coarse.left) == rows and sum(served.coarse.count) == len(trace)


def test_a_trace_of_one_instant_in_time_has_a_level_too():
    trace = Trace.build(start_ns=[5] * 6, end_ns=[5] * 6, thread=[0] * 6, name_id=[0] * 6,
                        names=["tick"], threads=[(1, 1, "main")])
    served = served_past_budget(trace, build_lanes(trace), 2)
    assert sum(served.coarse.count) == 6


def test_a_view_is_answered_once_per_page_that_asks():
    # jupyter_bokeh runs a change's callback twice: one answer; a second page showing the same
    # output (a re-shown cell, another tab) asking for that view gets its own answer
    served = Timeline(hand_built_trace(), max_embedded_events=100).served
    request = {"x0": [0.0], "x1": [50_000.0], "width": [900.0], "min_duration": [0],
               "key": ["0|50000|900|0"], "page": ["first"]}
    assert served.answer(request) is not None
    assert served.answer(request) is None  # the same change, again
    assert served.answer({**request, "page": ["second"]})["key"] == ["0|50000|900|0"]


def test_a_dense_lane_draws_how_busy_each_few_pixels_are():
    # At 1 µs a pixel: 40 µs of 100 ns kernels every 200 ns (50% busy), at once 30 µs of 100 ns
    # kernels every 900 ns (11% busy; gaps under 1 px), an 8 µs gap, then 50% busy again. The
    # whole lane used to be one block "N events" (its gaps under 1 px merged): now each block
    # covers at most 4 px and says how busy that part is.
    dense = lambda lo, hi, every: np.arange(lo, hi, every)  # noqa: E731
    starts = np.concatenate([dense(0, 40_000, 200), dense(40_000, 70_000, 900),
                             dense(78_000, 100_000, 200)])
    trace = gpu_stream_trace(starts, starts + 100)
    lanes = build_lanes(trace)
    columns = row_columns(trace, lanes)
    x0, x1, width = 0.0, 100_000.0, 100  # 1000 ns a pixel
    bars = view_bars(columns, x0, x1, width)
    gpu = lanes.row_is_gpu[bars.row]
    blocks = gpu & (bars.count > 1)
    assert blocks.sum() >= 20 and bars.count[gpu].sum() == len(starts)
    left, right, busy = bars.left[blocks], bars.right[blocks], bars.busy[blocks]
    assert (right - left <= 4 * 1000).all()
    for lo, hi, b in zip(left, right, busy):  # busy: the time its kernels cover
        inside = (starts >= lo) & (starts < hi)
        assert b == 100 * inside.sum()
    fraction = busy / (right - left)
    in_gap = (right > 70_100) & (left < 78_000)
    assert not in_gap.any()  # the gap draws no bar
    assert (np.abs(fraction[right <= 40_000] - 0.5) < 0.05).all()
    assert (fraction[(left >= 40_000) & (right <= 70_000)] < 0.25).all()
    assert (np.abs(fraction[left >= 78_000] - 0.5) < 0.05).all()
    # the browser's sweep over the page's events draws the same, and so does one through a
    # coarse level
    packed, info = encode_events(trace, lanes)
    page = decoded_entries(packed, info["layout"], lanes.row_is_gpu)
    assert served_tuples(trace, columns, bars, lanes.row_is_gpu) == js_sweep(page, x0, x1, width)
    served = Served(trace, lanes, budget=300)
    assert served.level.ns_per_px <= 1000
    again = view_bars(served.columns, x0, x1, width, levels=(served.level,))
    assert served_tuples(trace, columns, again, lanes.row_is_gpu) == js_sweep(page, x0, x1, width)
