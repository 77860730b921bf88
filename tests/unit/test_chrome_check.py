"""The checker finds each rule an export must keep broken (so a clean report means something)."""

import copy

import pytest

from nbprof.formats.chrome.check import check_chrome_trace


def valid():
    return {"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "cpu"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
        {"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "CUDA"}},
        {"ph": "M", "name": "thread_name", "pid": 2, "tid": 7, "args": {"name": "stream 7"}},
        {"ph": "M", "name": "process_sort_index", "pid": 1, "tid": 0, "args": {"sort_index": 0}},
        {"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": 1, "args": {"sort_index": 0}},
        {"ph": "M", "name": "process_sort_index", "pid": 2, "tid": 0, "args": {"sort_index": 1}},
        {"ph": "M", "name": "thread_sort_index", "pid": 2, "tid": 7, "args": {"sort_index": 0}},
        {"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0},
        {"ph": "X", "name": "child", "pid": 1, "tid": 1, "ts": 2.5, "dur": 7.5},
        {"ph": "X", "name": "next", "pid": 1, "tid": 1, "ts": 10.0, "dur": 1.0},
        {"ph": "X", "name": "kernel", "pid": 2, "tid": 7, "ts": 12.001, "dur": 3.0},
        {"ph": "s", "id": 1, "cat": "ac2g", "name": "ac2g", "pid": 1, "tid": 1, "ts": 2.5},
        {"ph": "f", "id": 1, "cat": "ac2g", "name": "ac2g", "pid": 2, "tid": 7, "ts": 12.001,
         "bp": "e"},
    ]}


def broken(change):
    data = copy.deepcopy(valid())
    change(data["traceEvents"])
    return data


def test_a_valid_trace_has_no_problems(tmp_path):
    assert check_chrome_trace(valid()) == []
    assert check_chrome_trace(valid()["traceEvents"]) == []  # the bare-list form


@pytest.mark.parametrize("change, problem", [
    (lambda ev: ev.pop(1), "pid 1 tid 1 has no thread_name"),
    (lambda ev: ev.pop(2), "pid 2 has no process_name"),
    (lambda ev: ev.pop(6), "pid 2 has no process_sort_index"),
    (lambda ev: ev.pop(7), "pid 2 tid 7 has no thread_sort_index"),
    (lambda ev: ev[9].update(dur=9.0), "event 9 overlaps event 8 without nesting"),
    (lambda ev: ev[9].update(dur=-1), "event 9 (X 'child'): negative dur"),
    (lambda ev: ev[8].update(ts=float("nan")), "ts missing or not a finite number"),
    (lambda ev: ev[11].pop("dur"), "dur missing or not a finite number"),
    (lambda ev: ev.pop(13), "flow id 1 has only its s end"),
    (lambda ev: ev[12].update(ts=11.5), "event 12 (flow s, id 1) lies inside no X slice"),
    (lambda ev: ev[13].update(ts=12.5), "event 13 (flow f, id 1) is not at the start"),
    (lambda ev: ev[13].pop("bp"), 'lacks "bp": "e"'),
])
def test_each_broken_rule_is_reported(change, problem):
    problems = check_chrome_trace(broken(change))
    assert any(problem in p for p in problems), problems


def test_an_unreadable_path_is_a_problem_not_a_crash(tmp_path):
    (problem,) = check_chrome_trace(tmp_path / "missing.json")
    assert "no such file" in problem


def test_many_problems_of_one_kind_are_summarised():
    def overlap_many(events):
        events += [{"ph": "X", "name": f"o{i}", "pid": 1, "tid": 1, "ts": 20.0 + i, "dur": 1.5}
                   for i in range(20)]
    problems = check_chrome_trace(broken(overlap_many))
    assert len(problems) == 6 and problems[-1].startswith("... and 5 more")
