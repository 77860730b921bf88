"""nbprof.diff on two real CPU recordings (one op slower, one added) and on built traces."""

import numpy as np
import pytest

import nbprof
from nbprof.model import Trace
from nbprof.analysis.tables import records


def _record(size: int, add_sigmoid: bool):
    import torch

    x, small = torch.randn(size, size), torch.randn(64, 64)
    big = torch.randn(1500, 1500)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the machine is shared: one thread keeps small ops small
    try:
        with nbprof.profile(cuda=False) as prof:
            for step in range(2):
                with torch.profiler.record_function(f"ProfilerStep#{step}"):
                    torch.relu(small)
                    x @ x
                    if add_sigmoid:
                        torch.sigmoid(big)
    finally:
        torch.set_num_threads(threads)
    return prof.trace


def test_diff_of_two_recordings_puts_the_slower_op_and_the_added_op_at_the_top():
    pytest.importorskip("torch")
    before = _record(64, add_sigmoid=False)
    after = _record(640, add_sigmoid=True)  # the matmul does 1000x the work; sigmoid is new
    table = records(nbprof.diff(before, after, by="call_path"))
    top = {(row["name"], row["status"]) for row in table[:4]}
    assert ("aten::sigmoid", "added") in top
    assert ("aten::mm", "slower") in top
    mm = next(row for row in table if row["name"] == "aten::mm")
    assert mm["self_cpu_after_us"] > mm["self_cpu_before_us"]
    assert mm["call_path"] == "ProfilerStep#* > aten::matmul > aten::mm"
    assert mm["step"] in (0, 1) and mm["count_before"] == mm["count_after"] == 1  # matched per step
    text = nbprof.diff(before, after, by="call_path").table(row_limit=5)
    assert "aten::sigmoid" in text and "added" in text
    by_name = {row["name"]: row for row in records(nbprof.diff(before, after))}
    assert by_name["aten::sigmoid"]["status"] == "added" and by_name["aten::mm"]["status"] == "slower"
    assert by_name["ProfilerStep#*"]["count_after"] == 2  # the numbered markers share one name


def build(events):
    names = sorted({e[0] for e in events})
    return Trace.build(start_ns=[e[1] * 1000 for e in events], end_ns=[e[2] * 1000 for e in events],
                       thread=[0] * len(events), name_id=[names.index(e[0]) for e in events],
                       names=names, threads=[(1, 1, "main")])


def test_ops_are_matched_by_call_path_and_unmatched_ones_are_added_or_removed():
    before = build([("outer", 0, 100), ("aten::add", 10, 20), ("other", 200, 300),
                    ("aten::add", 210, 220), ("gone", 400, 410)])
    after = build([("outer", 0, 100), ("aten::add", 10, 50), ("other", 200, 300),
                   ("aten::add", 210, 220), ("new", 400, 450)])
    table = records(nbprof.diff(before, after, by="call_path"))
    by_path = {row["call_path"]: row for row in table}
    assert by_path["outer > aten::add"]["status"] == "slower"
    assert by_path["outer > aten::add"]["self_cpu_delta_us"] == pytest.approx(30)
    assert by_path["other > aten::add"]["status"] == "same"  # the same name elsewhere: unchanged
    assert by_path["new"]["status"] == "added" and by_path["gone"]["status"] == "removed"
    assert by_path["outer"]["status"] == "faster"  # its own time shrank as its child grew
    changes = [row["change_us"] for row in table]
    assert changes == sorted(changes, reverse=True)
    assert table[0]["call_path"] in ("new", "outer > aten::add")
    assert all(row["step"] is None for row in table)  # neither trace has steps


def test_diff_wants_traces():
    with pytest.raises(TypeError, match="two nbprof.Trace"):
        nbprof.diff(build([("a", 0, 1)]), "trace.json")


def test_diff_matches_per_step_where_both_have_steps(shared_traces):
    trace = nbprof.load(shared_traces / "gpu_training_step_68k.json.gz")
    table = records(nbprof.diff(trace, trace, by="call_path"))
    assert {row["status"] for row in table} == {"same"}
    assert {row["step"] for row in table} >= {0, 1, 2, 3, 4}
    assert sum(row["count_after"] for row in table) == len(trace)
    assert np.isclose(sum(row["gpu_after_us"] for row in table),
                      float((trace.gpu_end_ns - trace.gpu_start_ns)[trace.gpu_launch >= 0].sum()) / 1e3)


def test_the_diff_leads_with_a_roll_up_by_name():
    # aten::item waits 290 us more for the GPU in each of three places: per call path each is a
    # small row; by name it is the change (inclusive CPU +870 us, self CPU only +3 us)
    def run(wait):
        events = []
        for k, parent in enumerate(("forward", "loss", "log")):
            at = 1000 * k
            events += [(parent, at, at + 400), ("aten::item", at + 10, at + 20 + wait),
                       ("cudaStreamSynchronize", at + 12, at + 18 + wait), ("aten::add", at + 350, at + 360)]
        return build(events)

    before, after = run(0), run(290)
    rows = records(nbprof.diff(before, after))
    assert [row["name"] for row in rows[:2]] == ["aten::item", "cudaStreamSynchronize"]
    item = rows[0]
    assert (item["status"], item["count_before"], item["count_after"]) == ("slower", 3, 3)
    assert item["cpu_delta_us"] == pytest.approx(870) and item["self_cpu_delta_us"] == pytest.approx(0)
    assert {row["name"]: row["status"] for row in rows}["aten::add"] == "same"
    with pytest.raises(ValueError, match="by='name'"):
        nbprof.diff(before, after, by="op")


def test_the_diff_of_two_shared_traces_names_ops_not_the_profilers_span(shared_traces):
    # Kineto's whole-trace "PyTorch Profiler (0)" span led the diff (+290 ms on HTA's pair)
    from nbprof.analysis.diff import compare

    before, after = (nbprof.load(shared_traces / f"gpu_sampled_rank{rank}.json.gz") for rank in (0, 1))
    lines = compare(before, after).report(row_limit=3).splitlines()
    assert lines[0].startswith("nbprof diff by name: 202 ops (")
    assert lines[4].split()[:2] == ["nccl:all_reduce", "faster"]
    assert lines[5].split()[:2] == ["nccl:all_to_all", "slower"]
    assert "By call path:" in lines
    assert not any("PyTorch Profiler" in line for line in lines)
    for trace in (before, after):
        assert trace.meta["profiler_spans"] == [
            {"name": "PyTorch Profiler (0)", "start_ns": 0, "end_ns": trace.meta["profiler_spans"][0]["end_ns"]}]
        assert not any("PyTorch Profiler" in event.name for event in trace.events)
        assert not any(thread.name == "PyTorch Profiler" for thread in trace.threads)  # no lane
        assert "PyTorch Profiler" not in trace.table(row_limit=-1)
