"""Slices without an end in their file (a Chrome X without dur, a B without its E) are kept, drawn
to the end of the trace as Perfetto and chrome://tracing draw them, marked unfinished in their args
(the details pane shows it), left out of the summary's times, and kept by every export."""

import json

import numpy as np
import pytest

import nbprof
from nbprof import ranks
from nbprof.formats.chrome import export_chrome_trace
from nbprof.formats.chrome.check import check_chrome_trace
from nbprof.model import UNFINISHED_KEY, unfinished_rows
from nbprof.model.unfinished import UNFINISHED_TEXT
from nbprof.notebook.details import details_html

END_NS = 120_000  # the instant at 120 µs is the last thing in the file


def x(name, ts, dur, tid=1, **args):
    event = {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}
    return {**event, "args": args} if args else event


def job_file(tmp_path, no_dur=lambda event: event.pop("dur"), name="t.json"):
    events = [
        x("done", 0, 10),
        x("open_x", 20, None, a=1),  # its dur spoiled by ``no_dur``
        x("child", 30, 5),
        {"ph": "B", "name": "open_b", "cat": "user", "pid": 1, "tid": 2, "ts": 5,
         "args": {"k": "v"}},
        {"ph": "B", "name": "closed_b", "pid": 1, "tid": 2, "ts": 6},
        {"ph": "E", "pid": 1, "tid": 2, "ts": 8},
        x("last", 40, 60, tid=3),
        {"ph": "i", "name": "mark", "pid": 1, "tid": 3, "ts": 120, "s": "t"},
    ]
    no_dur(events[1])
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def by_name(trace) -> dict:
    return {trace.names[trace.name_id[row]]: row for row in range(len(trace))}


def assert_unfinished(trace):
    rows = by_name(trace)
    assert unfinished_rows(trace).tolist() == sorted([rows["open_x"], rows["open_b"]])
    for name, start_ns, args in (("open_x", 20_000, {"a": 1}), ("open_b", 5_000, {"k": "v"})):
        row = rows[name]
        assert (trace.start_ns[row], trace.end_ns[row]) == (start_ns, END_NS)
        assert trace.event_args[row] == {**args, UNFINISHED_KEY: UNFINISHED_TEXT}
    # what happened after an unfinished slice began, on its thread, happened inside it
    assert trace.parent[rows["child"]] == rows["open_x"]
    assert trace.parent[rows["closed_b"]] == rows["open_b"]
    for name in ("done", "child", "closed_b", "last"):
        assert UNFINISHED_KEY not in (trace.event_args.get(rows[name]) or {})
    assert trace.meta[UNFINISHED_KEY] == 2


@pytest.mark.parametrize("chunk_bytes", [None, 64])  # one chunk, and a chunk per event or two
@pytest.mark.parametrize("no_dur", [lambda e: e.pop("dur"), lambda e: e.update(dur=None),
                                    lambda e: e.update(dur="soon"), lambda e: e.update(dur=True)],
                         ids=["missing", "null", "text", "boolean"])
def test_slices_without_an_end_are_drawn_to_the_end_of_the_trace(tmp_path, monkeypatch, no_dur,
                                                                  chunk_bytes):
    from nbprof.formats.chrome import stream

    if chunk_bytes:
        monkeypatch.setattr(stream, "CHUNK_BYTES", chunk_bytes)
    trace = nbprof.load(job_file(tmp_path, no_dur))
    assert len(trace) == 6
    assert_unfinished(trace)
    assert "2 slices had no end in the file (an X without dur, a B without its E): drawn to the " \
        "end of the trace" in " ".join(trace.meta["notes"])


def test_the_details_pane_says_a_slice_is_unfinished(tmp_path):
    trace = nbprof.load(job_file(tmp_path))
    shown = details_html(trace, by_name(trace)["open_x"])
    assert UNFINISHED_KEY in shown and UNFINISHED_TEXT in shown
    assert UNFINISHED_TEXT not in details_html(trace, by_name(trace)["child"])


def test_the_summary_leaves_their_unknown_times_out(tmp_path):
    trace = nbprof.load(job_file(tmp_path))
    rows = {row.name: row for row in trace.key_averages()}
    assert set(rows) == {"done", "child", "closed_b", "last"}
    assert rows["child"].cpu_time_total == 5.0 and rows["last"].self_cpu_time_total == 60.0
    table = trace.table(row_limit=-1)
    assert "2 unfinished slices (no end in the file) are left out of these times" in table
    # the shares are of the time the finished slices account for: they add up to 100%
    shares = [float(line.split()[1].rstrip("%")) for line in table.splitlines()
              if line.split() and line.split()[0] in rows]
    assert sum(shares) == pytest.approx(100, abs=0.05)


def test_they_round_trip_through_chrome_json_parquet_and_a_merge(tmp_path):
    trace = nbprof.load(job_file(tmp_path))
    exported = export_chrome_trace(trace, tmp_path / "again.json.gz")
    assert check_chrome_trace(exported) == []
    again = nbprof.load(exported)
    assert_unfinished(again)
    pytest.importorskip("pyarrow")
    trace.to_parquet(tmp_path / "t.parquet")
    assert_unfinished(nbprof.load(tmp_path / "t.parquet"))
    job = ranks.merge([trace, again], [0, 1])
    assert job.meta[UNFINISHED_KEY] == 4 and len(unfinished_rows(job)) == 4
    assert all(job.event_args[row][UNFINISHED_KEY] == UNFINISHED_TEXT
               for row in unfinished_rows(job).tolist())


def test_args_that_are_not_an_object_are_kept_beside_the_mark(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "name": "listed", "pid": 1, "tid": 1, "ts": 0, "args": [1, 2]},
        {"ph": "X", "name": "empty", "pid": 1, "tid": 2, "ts": 1, "args": {}},
        {"ph": "X", "name": "theirs", "pid": 1, "tid": 3, "ts": 2, "args": {"unfinished": 0}},
        x("ends", 0, 50, tid=4)]}))
    trace = nbprof.load(path)
    rows = by_name(trace)
    assert trace.event_args[rows["listed"]] == {"args": [1, 2], UNFINISHED_KEY: UNFINISHED_TEXT}
    assert trace.event_args[rows["empty"]] == {UNFINISHED_KEY: UNFINISHED_TEXT}
    assert trace.event_args[rows["theirs"]] == {UNFINISHED_KEY: UNFINISHED_TEXT}  # ours wins
    assert np.all(trace.end_ns[[rows["listed"], rows["empty"], rows["theirs"]]] == 50_000)


def test_a_trace_without_them_looks_for_none(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [x("a", 0, 5), x("b", 1, 2)]}))
    trace = nbprof.load(path)
    assert UNFINISHED_KEY not in trace.meta and len(unfinished_rows(trace)) == 0
    assert "unfinished" not in trace.table()


def training_file(tmp_path, name, last_open: bool):
    """Four steps of 100 µs (aten::mm then aten::add) and a fifth: still open when profiling
    stopped (``last_open``: no dur, only its aten::mm ran, the file ends at 460 µs), else whole."""
    events = []
    for step in range(5):
        start = 100 * step
        events += [x(f"ProfilerStep#{step + 1}", start, 100), x("aten::mm", start + 1, 49)]
        if not (last_open and step == 4):
            events.append(x("aten::add", start + 50, 40))
    if last_open:
        events[-2].pop("dur")
        events.append({"ph": "i", "name": "stop", "pid": 1, "tid": 1, "ts": 460, "s": "t"})
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return nbprof.load(path)


def test_a_step_still_open_when_profiling_stopped_is_shown_unfinished_and_left_out(tmp_path):
    from nbprof.analysis.tables import records
    from nbprof.notebook.overview import OverviewPane
    from nbprof.timeline.overview import step_bars

    trace = training_file(tmp_path, "open.json", last_open=True)
    steps = records(trace.steps())
    assert [row["step"] for row in steps] == [f"ProfilerStep#{k}" for k in range(1, 6)]
    assert [row["unfinished"] for row in steps] == [False] * 4 + [True]
    assert steps[4]["cpu_wall_us"] == pytest.approx(60)  # it ran (at least) to the stop
    text = trace.steps().table()
    assert "ProfilerStep#5 (unfinished)" in text
    assert "ProfilerStep#5 is unfinished: still open when profiling stopped" in text
    # its 60 µs against four of 100 µs is no "short step": the findings say nothing of it
    assert not [line for line in trace.findings() if "median step" in line]
    assert "(unfinished)" in OverviewPane._step_label(4, steps[4])
    _, bars = step_bars(steps, has_gpu=False)
    assert bars.data["label"][4] == "5: ProfilerStep#5 (unfinished)"
    # the diff compares step k with step k: not the cut fifth step with a whole one
    whole = training_file(tmp_path, "whole.json", last_open=False)
    for before, after in ((trace, whole), (whole, trace)):
        by_path = records(nbprof.diff(before, after, by="call_path"))
        assert {row["step"] for row in by_path} == {0, 1, 2, 3, -1}
        assert all(row["status"] == "same" for row in by_path if row["step"] >= 0)
        assert "step 5 is left out (unfinished in " in nbprof.diff(before, after, by="call_path").table()


def test_the_rank_summary_leaves_an_unfinished_step_out_of_its_step_times_in_memory_and_duckdb(tmp_path):
    trace = training_file(tmp_path, "open.json", last_open=True)
    trace.meta["rank"] = 0
    [row] = trace.rank_summary().to_dict("records")
    assert row["steps"] == [100_000] * 4 and row["unfinished_steps"] == 1  # as trace.steps() says
    assert "4 (+1 unfinished)" in trace.rank_summary().table()
    from nbprof.notebook.ranks_tab import summary_html
    from nbprof.ranks.summary import summarise_ranks

    assert "<td>4 (+1 unfinished)</td>" in summary_html(summarise_ranks(trace))  # the Ranks tab
    pytest.importorskip("pyarrow")
    pytest.importorskip("duckdb")
    folder = tmp_path / "parquet"
    folder.mkdir()
    trace.to_parquet(folder / "rank0.parquet")
    assert nbprof.rank_summary(folder).to_dict("records") == trace.rank_summary().to_dict("records")


def test_the_idle_finding_does_not_name_an_unfinished_step():
    # four steps whose kernel keeps the GPU busy 96% of each; the fifth was still open at the stop,
    # its one kernel done 10 µs in: "GPU idle 90% of step 5" would describe the stop, not the step
    from nbprof.model import GPU_KINDS, Trace

    us = 1000
    starts, ends, names, kernels = [], [], [], []
    for step in range(5):
        start = 100 * step
        starts += [start, start + 1]
        ends += [start + 100, start + 5]
        names += [step + 1, 0]  # ProfilerStep#N, then aten::mm
        kernels.append((start + 2, start + 98) if step < 4 else (start + 2, start + 10))
    trace = Trace.build(
        start_ns=[t * us for t in starts], end_ns=[t * us for t in ends], thread=[0] * 10,
        name_id=names, names=["aten::mm", *(f"ProfilerStep#{k}" for k in range(1, 6))],
        threads=[(1, 1, "main")], gpu_start_ns=[a * us for a, _ in kernels],
        gpu_end_ns=[b * us for _, b in kernels], gpu_name_id=[0] * 5, gpu_device=[0] * 5,
        gpu_stream=[7] * 5, gpu_launch=[1, 3, 5, 7, 9], gpu_kind=[GPU_KINDS.index("kernel")] * 5,
        event_args={8: {UNFINISHED_KEY: UNFINISHED_TEXT}}, meta={UNFINISHED_KEY: 1})
    assert [row["unfinished"] for row in trace.steps().to_dict("records")] == [False] * 4 + [True]
    assert not [line for line in trace.findings() if "idle" in line]
