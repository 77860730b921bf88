"""Many ranks in one Trace: merging real rank files, clock alignment, the per-rank summary."""

import numpy as np
import pytest

import nbprof
from nbprof import ranks
from nbprof.cli.main import main
from nbprof.model import Thread, Trace
from nbprof.timeline.lanes import build_lanes
from blocked_imports import UI_AND_TORCH, run_without

RANK_FILES = ("gpu_sampled_rank0.json.gz", "gpu_sampled_rank1.json.gz")


@pytest.fixture(scope="module")
def singles(shared_traces):
    return [nbprof.load(shared_traces / name) for name in RANK_FILES]


@pytest.fixture(scope="module")
def merged(shared_traces):
    return nbprof.load([shared_traces / name for name in RANK_FILES])


def test_merge_keeps_every_event_of_every_rank(merged, singles):
    assert len(merged) == sum(map(len, singles))
    assert len(merged.gpu_start_ns) == sum(len(t.gpu_start_ns) for t in singles)
    assert merged.meta["merged_ranks"] == [0, 1]
    event_rank, gpu_rank = ranks.event_ranks(merged), ranks.gpu_ranks(merged)
    for rank, single in enumerate(singles):
        mine = event_rank == rank
        shift = merged.meta["ranks"][rank]["offset_ns"]
        # the same events, names and durations, moved by the rank's offset
        assert [merged.names[i] for i in merged.name_id[mine]] == \
            [single.names[i] for i in single.name_id]
        np.testing.assert_array_equal(merged.start_ns[mine], single.start_ns + shift)
        np.testing.assert_array_equal(merged.self_ns[mine], single.self_ns)
        assert (merged.gpu_start_ns[gpu_rank == rank] == np.sort(single.gpu_start_ns + shift)).all()


def test_merged_ids_stay_inside_their_rank(merged):
    event_rank, gpu_rank = ranks.event_ranks(merged), ranks.gpu_ranks(merged)
    has_parent = merged.parent >= 0
    assert (merged.start_ns[1:] >= merged.start_ns[:-1]).all()  # CPU start order kept
    assert (event_rank[merged.parent[has_parent]] == event_rank[has_parent]).all()
    assert (merged.thread[merged.parent[has_parent]] == merged.thread[has_parent]).all()
    launched = merged.gpu_launch >= 0
    assert launched.any()
    assert (event_rank[merged.gpu_launch[launched]] == gpu_rank[launched]).all()
    # the runtime call each kernel's link starts at: its own rank's, inside the launching op
    called = merged.gpu_call >= 0
    assert called.sum() > 2000
    call, op = merged.gpu_call[called], merged.gpu_launch[called]
    assert (event_rank[call] == gpu_rank[called]).all()
    assert ((merged.start_ns[call] >= merged.start_ns[op]) & (merged.end_ns[call] <= merged.end_ns[op])).all()


def test_lanes_are_grouped_by_rank_then_process(merged):
    lanes = build_lanes(merged)
    lane_ranks = [int(label.split(" · ")[0].split()[1]) for label in lanes.labels]
    assert lane_ranks == sorted(lane_ranks) and set(lane_ranks) == {0, 1}
    assert len(set(lanes.labels)) == len(lanes.labels)  # every rank has a "GPU 0 stream 7"
    assert all(group.startswith(label.split(" · ")[0])
               for label, group in zip(lanes.labels, lanes.groups))
    # each rank's CPU lanes come before its GPU lanes
    for rank in (0, 1):
        kinds = [gpu for label, gpu in zip(lanes.labels, lanes.is_gpu)
                 if label.startswith(f"rank {rank} ")]
        assert kinds == sorted(kinds) and any(kinds) and not all(kinds)


def test_clocks_are_aligned_by_base_then_collective_ends(merged, singles, shared_traces):
    rank0, rank1 = merged.meta["ranks"]
    bases = [t.meta["base_time_ns"] for t in singles]
    assert merged.meta["base_time_ns"] == min(bases)
    assert rank1["base_offset_ns"] == bases[1] - bases[0] and rank0["offset_ns"] == 0
    assert rank1["offset_ns"] == rank1["base_offset_ns"] + rank1["collective_offset_ns"]
    # these hosts' clocks agreed: the collectives move rank 1 by well under a millisecond
    assert abs(rank1["collective_offset_ns"]) < 1_000_000 and rank1["collectives_matched"] >= 4
    base_only = nbprof.load([shared_traces / name for name in RANK_FILES], align=False)
    assert base_only.meta["ranks"][1]["offset_ns"] == rank1["base_offset_ns"]


@pytest.mark.parametrize("skew_ns", [7_000_000, -30_000_000])
def test_a_host_clock_that_is_off_is_put_right_by_the_collectives(singles, merged, skew_ns):
    # rank 1's host clock off by skew_ns: its base says so, the collectives' ends do not
    skewed = Trace(**{name: getattr(singles[1], name) for name in _COLUMNS},
                   names=singles[1].names, threads=singles[1].threads,
                   categories=singles[1].categories,
                   meta={**singles[1].meta, "base_time_ns": singles[1].meta["base_time_ns"] + skew_ns})
    job = ranks.merge([singles[0], skewed], [0, 1])
    rank0, rank1 = job.meta["ranks"]
    assert rank1["base_offset_ns"] - rank0["base_offset_ns"] == \
        merged.meta["ranks"][1]["base_offset_ns"] + skew_ns
    # rank 1 lands where it did with the true clock, to the microsecond
    assert abs((rank1["offset_ns"] - rank0["offset_ns"]) - merged.meta["ranks"][1]["offset_ns"]) < 1_000


def _collectives(intervals_ms, name="gloo:all_reduce", base_time_ns=0):
    """One rank's trace: an op of ``name`` per (start, end) in ms, on one thread."""
    starts, ends = zip(*intervals_ms)
    return Trace.build(start_ns=np.rint(np.array(starts) * 1e6).astype(np.int64),
                       end_ns=np.rint(np.array(ends) * 1e6).astype(np.int64),
                       thread=[0] * len(starts), name_id=[0] * len(starts), names=[name],
                       threads=[Thread(pid=1, tid=1, name="MainThread")],
                       meta={"base_time_ns": base_time_ns})


def _rank_1_late_in_every_step(name):
    # One clock. Rank 1 arrives 50 ms late in each all-reduce and is done 0.1 ms later; rank 0,
    # which waited, is woken 2 ms after it ends, except in the second step: the ends say +2 ms,
    # the second step proves rank 1's clock can move at most +0.15 ms.
    rank0 = _collectives([(0, 52.1), (100, 150.15), (200, 252.1)], name)
    rank1 = _collectives([(50, 50.1), (150, 150.1), (250, 250.1)], name)
    return ranks.merge([rank0, rank1], [0, 1])


def test_the_collectives_never_move_a_rank_past_what_they_prove():
    job = _rank_1_late_in_every_step("gloo:all_reduce")
    assert job.meta["ranks"][1]["collective_offset_ns"] == 150_000
    # on the merged clock no all-reduce of rank 1 starts after rank 0's has ended
    rank1 = job.thread == 1
    assert (job.start_ns[rank1] <= job.end_ns[~rank1]).all()
    # a broadcast proves nothing of the kind (its root may be done before a receiver comes)
    broadcast = _rank_1_late_in_every_step("gloo:broadcast")
    assert broadcast.meta["ranks"][1]["collective_offset_ns"] == 2_000_000


_COLUMNS = ("start_ns", "end_ns", "thread", "name_id", "category", "depth", "parent", "self_ns",
            "gpu_start_ns", "gpu_end_ns", "gpu_name_id", "gpu_device", "gpu_stream", "gpu_launch",
            "gpu_kind")


def test_page_note_names_the_offsets(merged):
    from nbprof.timeline import Timeline

    note = Timeline(merged).note.html
    offset_us = merged.meta["ranks"][1]["offset_ns"] / 1e3
    assert "2 ranks merged" in note and f"rank 1 {offset_us:+,.1f} µs" in note


def test_rank_summary_of_the_merged_job(merged, singles):
    summary = merged.rank_summary()
    assert type(summary).__mro__[1].__name__ == "DataFrame"
    rows = summary.to_dict("records")
    assert [row["rank"] for row in rows] == [0, 1]
    for row, single in zip(rows, singles):
        alone = single.rank_summary().to_dict("records")[0]
        assert row == alone  # shifting a rank's clock changes none of its figures
        assert row["events"] == len(single) and row["wall_ns"] == single.duration_ns
        assert 0 < row["collective_ns"] < row["wall_ns"] and 0 < row["gpu_busy_ns"] < row["wall_ns"]
        assert len(row["steps"]) == 2  # its two ProfilerStep#N annotations
    expected = min(rows, key=lambda row: row["collective_ns"])["rank"]
    assert summary.attrs["straggler"] == expected and "collectives" in summary.attrs["reason"]
    text = repr(summary)  # printed: the text table, the straggler named below it
    assert f"Straggler: rank {expected}" in text and "In collectives" in text


def test_union_matches_a_brute_force_count():
    rng = np.random.default_rng(7)
    keys = rng.integers(0, 3, 200)
    starts = rng.integers(0, 1000, 200)
    ends = starts + rng.integers(0, 50, 200)
    got = ranks.union_ns(keys, starts, ends)
    for key in range(3):
        covered = np.zeros(1100, bool)
        for s, e in zip(starts[keys == key], ends[keys == key]):
            covered[s:e] = True
        assert got[key] == covered.sum()


def test_a_folder_or_a_glob_is_a_job(singles, tmp_path, shared_traces):
    for rank, single in enumerate(singles):
        single.export_chrome_trace(tmp_path / f"step.rank{rank}.json.gz")
    from_folder = nbprof.load(tmp_path)
    from_glob = nbprof.load(str(tmp_path / "*.json.gz"))
    assert from_folder.meta["merged_ranks"] == from_glob.meta["merged_ranks"] == [0, 1]
    assert len(from_folder) == len(from_glob) == sum(map(len, singles))


def test_rank_comes_from_meta_then_file_name_then_position():
    plain = Trace.empty()
    assert ranks.rank_of(Trace.empty({"rank": 5}), "x.rank2.json", 0) == 5
    assert ranks.rank_of(plain, "out/step.rank12.json.gz", 0) == 12
    assert ranks.rank_of(plain, "worker_rank-3.json", 0) == 3
    assert ranks.rank_of(plain, "trace.json", 4) == 4


def test_two_files_of_one_rank_are_refused(shared_traces):
    path = shared_traces / RANK_FILES[0]
    with pytest.raises(ValueError, match="two files say they are rank 0"):
        nbprof.load([path, path])


def test_an_empty_folder_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="no .json"):
        nbprof.load(tmp_path)


def test_distributed_meta_from_torchrun_environment():
    from nbprof.record.distributed import distributed_meta, expand_rank

    meta = distributed_meta({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1"})
    assert meta["rank"] == 3 and meta["world_size"] == 8 and meta["local_rank"] == 1
    assert meta["host"]
    assert distributed_meta({}) == {}
    assert expand_rank("out/step.rank{rank}.json.gz", meta) == "out/step.rank3.json.gz"


def test_cli_view_of_a_job(shared_traces, tmp_path, capsys):
    page = tmp_path / "job.html"
    args = [str(shared_traces / name) for name in RANK_FILES]
    assert main(["view", *args, "-o", str(page)]) == 0
    html = page.read_text()
    assert "2 ranks merged" in html and "rank 1 \\u00b7 GPU 1 stream 7" in html


def test_a_merged_job_exported_and_loaded_keeps_its_ranks(merged, tmp_path):
    again = nbprof.load(merged.export_chrome_trace(tmp_path / "job.json.gz"))
    assert again.meta["thread_rank"] == merged.meta["thread_rank"]
    assert build_lanes(again).labels == build_lanes(merged).labels
    assert again.rank_summary().to_dict("records") == merged.rank_summary().to_dict("records")


def test_merge_and_summary_need_no_torch_bokeh_pyarrow_or_duckdb():
    code = (
        "from nbprof import ranks\n"
        "from nbprof.model import Trace\n"
        "t = [Trace.build(start_ns=[0], end_ns=[5], thread=[0], name_id=[0], names=['gloo:all_reduce'],"
        " threads=[(1, 1, 'main')], meta={'rank': r, 'base_time_ns': 10 * r}) for r in (0, 1)]\n"
        "print(ranks.merge(t, [0, 1]).rank_summary().attrs['straggler'])\n")
    result = run_without(code, UI_AND_TORCH + ("pyarrow", "duckdb"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"
