"""Memory across ranks: two ranks' traces recorded with memory, written to files, loaded as one
job. Each rank keeps its own memory events and devices ("rank 1 · CPU"), its own peak, holders
and lane, through the merge and through the merged trace's Chrome and Parquet files."""

import numpy as np
import pytest
import torch

import nbprof
from nbprof.record import native
from nbprof.timeline import Timeline

MIB = 1 << 20


@pytest.fixture(scope="module")
def rank_files(tmp_path_factory):
    if native.load() is None:
        pytest.skip(f"the native recorder does not build here: {native.why_not()}")
    folder = tmp_path_factory.mktemp("job")
    singles = []
    for rank, mib in ((0, 8), (1, 24)):  # rank 1 peaks higher
        with nbprof.profile(memory=True, cuda=False) as prof:
            with torch.profiler.record_function(f"rank{rank}_alloc"):
                kept = torch.ones(mib * MIB // 4)
            del kept
        path = folder / f"step.rank{rank}.json.gz"
        prof.trace.export_chrome_trace(path)
        singles.append(nbprof.load(path))
    return folder, singles


def test_each_ranks_memory_survives_the_merge(rank_files):
    folder, singles = rank_files
    merged = nbprof.load(folder)
    assert merged.meta["merged_ranks"] == [0, 1]
    memory = merged.memory
    assert len(memory) == sum(len(single.memory) for single in singles)
    names = [nbprof.model.device_name(d, merged.meta) for d in memory.devices()]
    assert names == ["rank 0 · CPU", "rank 1 · CPU"]
    thread_rank = np.array(merged.meta["thread_rank"])
    for rank, single in enumerate(singles):
        shift = merged.meta["ranks"][rank]["offset_ns"]
        mine = memory.device == memory.devices()[rank]
        np.testing.assert_array_equal(memory.bytes[mine], single.memory.bytes)
        np.testing.assert_array_equal(memory.time_ns[mine], single.memory.time_ns + shift)
        assert (thread_rank[memory.thread[mine]] == rank).all()
        ops = memory.op[mine]
        assert [merged.names[merged.name_id[o]] if o >= 0 else None for o in ops] == \
            [single.names[single.name_id[o]] if o >= 0 else None for o in single.memory.op]
    peak = merged.memory_peak()
    assert peak["device"].tolist() == ["rank 0 · CPU", "rank 1 · CPU"]
    assert peak["peak_bytes"].tolist() == [int(s.memory_peak()["peak_bytes"][0]) for s in singles]
    assert 24 * MIB <= peak["peak_bytes"][1] < 25 * MIB
    holders = merged.memory_holders(device="rank 0 · CPU")
    assert "rank0_alloc > aten::ones > aten::empty" in holders["call_path"].tolist()
    assert "rank1_alloc" in merged.memory_holders()["call_path"][0]  # the highest peak's
    with pytest.raises(ValueError, match="rank N · CPU"):
        merged.memory_holders(device="CPU")
    summary = merged.memory_summary()
    assert set(summary["device"]) == {"rank 0 · CPU", "rank 1 · CPU"}


def test_the_merged_memory_lanes_are_named_per_rank(rank_files):
    folder, _singles = rank_files
    timeline = Timeline(nbprof.load(folder))
    labels = timeline.layout.select_one({"name": "nbprof_memory"}).yaxis.major_label_overrides
    assert sorted(labels.values()) == ["memory rank 0 · CPU", "memory rank 1 · CPU"]


@pytest.mark.parametrize("suffix", [".json.gz", ".parquet"])
def test_a_merged_traces_file_keeps_each_ranks_memory(rank_files, tmp_path, suffix):
    folder, _singles = rank_files
    merged = nbprof.load(folder)
    path = tmp_path / f"job{suffix}"
    if suffix == ".parquet":
        merged.to_parquet(path)
    else:
        merged.export_chrome_trace(path)
    again = nbprof.load(path)
    assert again.memory_peak()["device"].tolist() == ["rank 0 · CPU", "rank 1 · CPU"]
    np.testing.assert_array_equal(again.memory.bytes, merged.memory.bytes)
    np.testing.assert_array_equal(again.memory.device, merged.memory.device)
