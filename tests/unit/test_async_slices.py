"""Async slices (issue 24): b/e/n and legacy S/T/F read as Perfetto reads them, on async lanes per
process (threads of the Trace, listed in meta["async_threads"]), nested where they nest, drawn,
summarised, exported and loaded back exactly."""

import json
import random

import numpy as np
import pytest

import nbprof
from nbprof.formats.chrome.check import check_chrome_trace
from nbprof.timeline import Timeline


def load(tmp_path, events, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "name": "work", "pid": 1, "tid": 1, "ts": 0, "dur": 1000}, *events]}))
    return nbprof.load(path)


def async_slices(trace):
    """(name, start µs, end µs, depth, parent's name, lane name) of each async lane's event."""
    lanes = set(trace.meta.get("async_threads", ()))
    return sorted((event.name, event.cpu_interval.start_ns / 1000,
                   event.cpu_interval.end_ns / 1000,
                   event.depth, None if event.parent is None else trace.events[event.parent].name,
                   event.thread.name)
                  for event in trace.events if int(trace.thread[event.id]) in lanes)


def notes(trace):
    return " | ".join(trace.meta.get("notes", []))


def pair(begin: dict, end: dict, ts=(10, 30), name="req"):
    common = {"name": name, "pid": 1, "tid": 1}
    return [{**common, "ph": "b", "ts": ts[0], **begin}, {**common, "ph": "e", "ts": ts[1], **end}]


@pytest.mark.parametrize("ids", [
    {"id": 7}, {"id": "0x1f"}, {"id2": {"global": "0x1f"}}, {"id2": {"local": "0x1f"}},
    {"id": 7, "id2": {"local": "other"}},  # id wins over id2
], ids=["id-int", "id-string", "id2-global", "id2-local", "id-and-id2"])
def test_each_kind_of_id_pairs_a_begin_with_its_end(tmp_path, ids):
    events = pair({"cat": "net", "args": {"url": "a"}}, {"cat": "net", "args": {"code": 200}})
    trace = load(tmp_path, [{**event, **ids} for event in events])
    assert async_slices(trace) == [("req", 10, 30, 0, None, "req")]
    event = next(e for e in trace.events if e.name == "req")
    assert event.args == {"url": "a", "code": 200} and event.category == "net"
    assert event.thread.pid == 1 and event.thread != trace.events[0].thread
    assert "async" not in notes(trace)  # nothing left out, nothing skipped
    assert "phases nbprof does not read" not in notes(trace)


@pytest.mark.parametrize("ids", [{"id": ""}, {}, {"id2": {"local": ""}}, {"id2": "x"},
                                 {"id": [1]}], ids=["empty", "none", "empty-local",
                                                    "id2-not-object", "id-list"])
def test_an_async_event_without_an_id_is_left_out_with_a_note(tmp_path, ids):
    trace = load(tmp_path, [{**event, **ids} for event in pair({}, {})])
    assert async_slices(trace) == [] and len(trace) == 1
    assert "2 async events (b/e/S/T/F) without an id" in notes(trace)


def test_local_ids_are_per_process_and_global_ids_are_not(tmp_path):
    local = [{**e, "id2": {"local": "1"}} for e in pair({}, {}, name="local")]
    global_ = [{**e, "id2": {"global": "1"}} for e in pair({}, {"pid": 2}, name="global")]
    other_process = {"ph": "e", "name": "local", "pid": 2, "tid": 5, "ts": 20,
                     "id2": {"local": "1"}}
    trace = load(tmp_path, local + global_ + [other_process])
    # the global pair spans two processes: one track, drawn in its first event's process
    assert async_slices(trace) == [("global", 10, 30, 0, None, "global"),
                                   ("local", 10, 30, 0, None, "local")]
    assert {e.thread.pid for e in trace.events} == {1}
    # process 2's local end has no begin in its own process
    assert "1 async ends (e/F) found no open begin" in notes(trace)


def test_a_missing_cat_is_the_empty_category_and_part_of_the_track(tmp_path):
    same = pair({"id": 1}, {"id": 1}, name="nocat")
    split = pair({"id": 2, "cat": "a"}, {"id": 2}, ts=(40, 50), name="split")
    trace = load(tmp_path, same + split)
    assert async_slices(trace) == [("nocat", 10, 30, 0, None, "nocat")]
    assert trace.events[1].category == ""
    assert "1 async begins (b/S) never ended" in notes(trace)
    assert "1 async ends (e/F) found no open begin" in notes(trace)


def test_a_pair_across_threads_is_one_slice(tmp_path):
    trace = load(tmp_path, pair({"id": 1, "tid": 1}, {"id": 1, "tid": 2}))
    assert async_slices(trace) == [("req", 10, 30, 0, None, "req")]
    assert "no partner" not in notes(trace)


def test_unmatched_ends_and_ends_before_begins_are_left_out_with_a_note(tmp_path):
    events = [
        {"ph": "e", "name": "early", "id": 1, "pid": 1, "tid": 1, "ts": 5},  # before its begin
        {"ph": "b", "name": "early", "id": 1, "pid": 1, "tid": 1, "ts": 8},
        {"ph": "e", "name": "lonely", "id": 2, "pid": 1, "tid": 1, "ts": 9},
        {"ph": "b", "name": "open", "id": 3, "pid": 1, "tid": 1, "ts": 10},
        {"ph": "e", "name": "other name", "id": 3, "pid": 1, "tid": 1, "ts": 20},
        {"ph": "b", "name": "ok", "id": 4, "pid": 1, "tid": 1, "ts": 30},
        {"ph": "e", "name": "ok", "id": 4, "pid": 1, "tid": 1, "ts": None},  # no ts: left out
        {"ph": "e", "name": "ok", "id": 4, "pid": 1, "tid": 1, "ts": 45},
        {"ph": "b", "name": "nopid", "id": 5, "tid": 1, "ts": 1},
    ]
    trace = load(tmp_path, events)
    assert async_slices(trace) == [("ok", 30, 45, 0, None, "ok")]
    text = notes(trace)
    assert "2 async begins (b/S) never ended" in text  # early, open
    assert "3 async ends (e/F) found no open begin" in text  # early, lonely, other name
    assert "2 async events (b/e/S/T/F) without an id (id, id2.global or id2.local), a pid or " \
           "a numeric ts" in text


def test_pairs_nest_on_their_track_as_perfetto_stacks_them(tmp_path):
    def ev(ph, name, ts, **more):
        return {"ph": ph, "name": name, "id": 1, "cat": "c", "pid": 1, "tid": 1, "ts": ts, **more}

    events = [ev("b", "outer", 10), ev("b", "inner", 20), ev("e", "inner", 30),
              # an end closes the innermost open begin of its name, even under another one
              ev("b", "crossed", 40), ev("b", "later", 50), ev("e", "crossed", 60),
              ev("e", "later", 70), ev("e", "outer", 80),
              # an end without a name closes the innermost open begin
              ev("b", "unnamed end", 90), {**ev("e", None, 95), "name": None}]
    trace = load(tmp_path, events)
    assert async_slices(trace) == [
        ("crossed", 40, 60, 1, "outer", "outer"), ("inner", 20, 30, 1, "outer", "outer"),
        ("later", 50, 70, 2, "crossed", "outer"), ("outer", 10, 80, 0, None, "outer"),
        ("unnamed end", 90, 95, 0, None, "outer")]


def test_tracks_of_one_name_share_a_lane_unless_they_overlap(tmp_path):
    events = [*pair({"id": 1}, {"id": 1}, ts=(10, 30)), *pair({"id": 2}, {"id": 2}, ts=(20, 40)),
              *pair({"id": 3}, {"id": 3}, ts=(40, 50)), *pair({"id": 4}, {"id": 4}, ts=(60, 70),
                                                              name="other")]
    trace = load(tmp_path, events)
    assert async_slices(trace) == [("other", 60, 70, 0, None, "other"),
                                   ("req", 10, 30, 0, None, "req"),
                                   ("req", 20, 40, 0, None, "req (2)"),
                                   ("req", 40, 50, 0, None, "req")]
    assert [t.name for t in trace.threads] == ["thread 1", "req", "req (2)", "other"]
    assert trace.meta["async_threads"] == [1, 2, 3]


def test_legacy_start_step_finish_is_a_slice_split_at_its_steps(tmp_path):
    def ev(ph, ts, **more):
        return {"ph": ph, "name": "load", "id": "0x2", "pid": 1, "tid": 1, "ts": ts, **more}

    events = [ev("S", 10), ev("T", 20, args={"step": "parse"}), ev("T", 25, args={"step": "run"}),
              ev("F", 40), ev("S", 50), ev("F", 60), ev("T", 70)]
    trace = load(tmp_path, events)
    assert async_slices(trace) == [
        ("load", 10, 20, 1, "load", "load"), ("load", 10, 40, 0, None, "load"),
        ("load", 50, 60, 0, None, "load"),
        ("load:parse", 20, 25, 1, "load", "load"), ("load:run", 25, 40, 1, "load", "load")]
    assert "1 async steps (T) found no open S" in notes(trace)


def test_an_async_instant_lies_on_its_tracks_lane(tmp_path):
    events = [*pair({"id": 1}, {"id": 1}),
              {"ph": "n", "name": "mark", "id": 1, "pid": 1, "tid": 1, "ts": 15},
              {"ph": "n", "name": "no id", "pid": 1, "tid": 1, "ts": 16}]
    trace = load(tmp_path, events)
    lane = trace.meta["async_threads"][0]
    assert trace.instants.name == ["mark", "no id"]
    assert trace.instants.thread.tolist() == [lane, 0]


def the_same(trace, again):
    for column in ("start_ns", "end_ns", "thread", "depth", "parent", "self_ns"):
        assert np.array_equal(getattr(again, column), getattr(trace, column)), column
    assert [again.names[i] for i in again.name_id] == [trace.names[i] for i in trace.name_id]
    assert [again.categories[i] for i in again.category] == \
        [trace.categories[i] for i in trace.category]
    assert [e.args for e in again.events] == [e.args for e in trace.events]
    assert again.threads == trace.threads
    assert again.meta["async_threads"] == trace.meta["async_threads"]
    assert again.instants.name == trace.instants.name
    assert np.array_equal(again.instants.thread, trace.instants.thread)


def many_shapes():
    def ev(ph, name, ts, **more):
        return {"ph": ph, "name": name, "pid": 1, "tid": 1, "ts": ts, **more}

    return [
        ev("b", "req", 10, id=1, cat="net", args={"url": "a"}), ev("b", "sub", 12, id=1, cat="net"),
        ev("n", "mark", 13, id=1, cat="net"), ev("e", "sub", 14, id=1, cat="net", tid=3),
        ev("b", "crossed", 15, id=1, cat="net"), ev("e", "req", 20, id=1, cat="net"),
        ev("e", "crossed", 25, id=1, cat="net"),
        ev("b", "req", 18, id2={"local": "7"}), ev("e", "req", 22, id2={"local": "7"}),
        ev("b", "g", 1, id2={"global": "x"}, pid=2), ev("e", "g", 2, id2={"global": "x"}),
        ev("S", "legacy", 30, id="0x2"), ev("T", "legacy", 31, id="0x2", args={"step": "a"}),
        ev("F", "legacy", 33, id="0x2"),
        ev("e", "unmatched", 1, id=9), ev("b", "open", 2, id=9),
    ]


@pytest.mark.parametrize("name", ["again.json.gz", "again.parquet"])
def test_exports_of_async_slices_load_back_exactly(tmp_path, name):
    trace = load(tmp_path, many_shapes())
    assert len(async_slices(trace)) == 8
    path = tmp_path / name
    if name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
        trace.to_parquet(path)
    else:
        trace.export_chrome_trace(path)
        assert check_chrome_trace(path) == []
    again = nbprof.load(path)
    the_same(trace, again)
    assert async_slices(again) == async_slices(trace)


def test_the_summary_counts_async_slices(tmp_path):
    trace = load(tmp_path, many_shapes())
    counts = {row.key: row.count for row in trace.key_averages()}
    assert counts["req"] == 2 and counts["sub"] == 1 and counts["legacy:a"] == 1


def test_the_timeline_has_async_lanes_per_process_after_its_threads(tmp_path):
    trace = load(tmp_path, many_shapes())
    view = Timeline(trace)
    assert view.lanes == ["pid 1 · thread 1", "pid 1 · async · req", "pid 1 · async · req (2)",
                          "pid 1 · async · legacy", "pid 2 · async · g"]
    assert view.lane_labels == ["main thread", "async · req", "async · req (2)",
                                "async · legacy", "async · g"]


def test_ranks_merged_keep_their_async_lanes(tmp_path):
    first = load(tmp_path, many_shapes(), name="job.rank0.json")
    load(tmp_path, [{"ph": "X", "name": "more", "pid": 1, "tid": 2, "ts": 0, "dur": 5},
                    *many_shapes()], name="job.rank1.json")
    merged = nbprof.load(sorted(tmp_path.glob("job.rank*.json")))
    async_threads = merged.meta["async_threads"]
    assert [merged.threads[t].name for t in async_threads] == \
        [first.threads[t].name for t in first.meta["async_threads"]] * 2
    assert sum(label.endswith("async · req") for label in Timeline(merged).lanes) == 2


ODD_VALUES = [None, "", "x", "1", [], [1, 2], {}, {"a": [1]}, 0, -1, 1.5, 1e300, -1e300, 2 ** 70,
              -(2 ** 64), True, 4294967295, 1e16, {"global": "1"}, {"local": [1]},
              {"local": "2"}, "\u202e<b>"]


def test_hostile_async_events_load_with_notes_never_an_error(tmp_path):
    """Odd values in any field of async events among good ones: the file loads (what cannot
    be read is left out with a note), summarises, exports and loads back."""
    rng = random.Random(20261204)
    for case in range(120):
        events = []
        for _ in range(6):
            event = {"ph": rng.choice("beSTFn"), "name": rng.choice("ab"), "cat": "c",
                     "id": rng.choice([1, 2]), "pid": 1, "tid": 1, "ts": rng.randrange(100)}
            if rng.random() < 0.7:
                event[rng.choice(["name", "cat", "id", "id2", "pid", "tid", "ts", "args"])] = \
                    rng.choice(ODD_VALUES)
            events.append(event)
        trace = load(tmp_path, events)
        assert "phases nbprof does not read" not in notes(trace)  # each is read or noted
        trace.table()
        again = nbprof.load(trace.export_chrome_trace(tmp_path / "again.json"))
        assert len(again) == len(trace), (case, events)


def test_an_async_slice_is_not_cpu_busy_time(tmp_path):
    events = [{"ph": "X", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
              {"ph": "X", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 10},
              *pair({"id": 1, "ts": 5}, {"id": 1, "ts": 95}, name="fetch")]
    steps = load(tmp_path, events).steps()
    assert steps["cpu_busy_us"].tolist() == [10.0] and steps["wall_us"].tolist() == [100.0]


def test_lane_names_stay_unique_in_a_process(tmp_path):
    events = [*pair({"id": 1}, {"id": 1}, ts=(10, 30)), *pair({"id": 2}, {"id": 2}, ts=(20, 40)),
              *pair({"id": 3}, {"id": 3}, ts=(20, 40), name="req (2)")]
    trace = load(tmp_path, events)
    names = [trace.threads[t].name for t in trace.meta["async_threads"]]
    assert sorted(names) == ["req", "req (2)", "req (2) #2"]
    assert len(set(Timeline(trace).lanes)) == 4


@pytest.mark.parametrize("listed", [5, "1", [1.5, None, -1, 99, True], {"a": 1}])
def test_a_damaged_async_threads_entry_marks_no_lane(tmp_path, listed):
    trace = load(tmp_path, pair({"id": 1}, {"id": 1}))
    assert trace.async_thread_mask().tolist() == [False, True]
    trace.meta["async_threads"] = listed
    assert not trace.async_thread_mask().any()
    assert Timeline(trace).lane_labels == ["main thread", "req"]  # drawn as a thread


def test_an_end_names_the_begin_it_closes_as_perfetto_matches_them(tmp_path):
    def ev(ph, ts, **more):
        return {"ph": ph, "id": 1, "pid": 1, "tid": 1, "ts": ts, **more}

    events = [ev("b", 10), ev("e", 20, name="x"),  # a named end never closes a nameless begin
              ev("e", 30, name=""),  # an empty name is none: it closes the innermost
              ev("b", 40, name=7), ev("e", 50, name="7")]  # a number names as its text
    trace = load(tmp_path, events)
    # the track is named by its first event with a name, the unmatched end (as in Perfetto)
    assert async_slices(trace) == [("7", 40, 50, 0, None, "x"),
                                   ("[No name]", 10, 30, 0, None, "x")]
    assert "1 async ends (e/F) found no open begin" in notes(trace)
