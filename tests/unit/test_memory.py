"""Memory events: their ops, their frees, the levels per device, the answers and the round trips
(Chrome JSON, Parquet, a Kineto file torch.profiler wrote)."""

import json

import numpy as np
import pytest

import nbprof
from nbprof.model import NO_ID, MemoryEvents, Trace

MIB = 1 << 20
FIELDS = list(MemoryEvents.__dataclass_fields__)


def two_thread_trace() -> Trace:
    """Thread 0 (main): phase_alloc [0,100) > aten::empty [10,20); phase_peak [200,300) >
    aten::add [210,260). Thread 1 (worker): work [5,400) > aten::mul [50,60).
    Memory (CPU unless said): a 64 MiB block A made in aten::empty, freed at 350 outside any op;
    its address reused at 360 by 1 KiB never freed; 64 MiB B made in aten::add (the peak) and
    freed in phase_peak; the worker's 4 MiB in aten::mul freed in work; 2 MiB on cuda:0 with the
    allocator's totals; a free at 150 (between the main thread's ops) of memory allocated before the profile."""
    memory = MemoryEvents.build(
        time_ns=[15, 220, 280, 350, 360, 55, 70, 65, 150],
        bytes=[64 * MIB, 64 * MIB, -64 * MIB, -64 * MIB, 1024, 4 * MIB, -4 * MIB, 2 * MIB, -512],
        addr=[0xA000, 0xB000, 0xB000, 0xA000, 0xA000, 0xC000, 0xC000, 0xD000, 0xE000],
        device=[-1, -1, -1, -1, -1, -1, -1, 0, -1],
        thread=[0, 0, 0, 0, 0, 1, 1, 1, 0],
        allocated=[-1] * 7 + [10 * MIB, -1], reserved=[-1] * 7 + [20 * MIB, -1])
    return Trace.build(
        start_ns=[0, 10, 200, 210, 5, 50], end_ns=[100, 20, 300, 260, 400, 60],
        thread=[0, 0, 0, 0, 1, 1], name_id=[0, 1, 2, 3, 4, 5],
        names=["phase_alloc", "aten::empty", "phase_peak", "aten::add", "work", "aten::mul"],
        threads=[(10, 10, "MainThread"), (10, 11, "worker")], memory=memory)


def op_names(trace):
    return [trace.names[trace.name_id[op]] if op >= 0 else None for op in trace.memory.op.tolist()]


def test_each_event_is_tied_to_the_innermost_op_of_its_own_thread():
    trace = two_thread_trace()
    memory = trace.memory
    assert memory.time_ns.tolist() == [15, 55, 65, 70, 150, 220, 280, 350, 360]
    # the worker's op "work" spans 5..400, but the main thread's events are never its
    assert op_names(trace) == ["aten::empty", "aten::mul", "work", "work", None, "aten::add",
                               "phase_peak", None, None]
    assert memory.thread.tolist() == [0, 1, 1, 1, 0, 0, 0, 0, 0]


def test_frees_pair_with_their_allocations_by_address_in_time_order():
    memory = two_thread_trace().memory
    partner = memory.partners().tolist()
    # 0xA000: made at 15, freed at 350, reused at 360 (never freed); 0xE000's free has no alloc
    assert partner == [7, 3, NO_ID, 1, NO_ID, 6, 5, 0, NO_ID]


def test_levels_are_running_sums_on_the_cpu_and_the_allocators_own_on_cuda():
    memory = two_thread_trace().memory
    cpu = memory.device == -1
    assert memory.levels()[cpu].tolist() == np.cumsum(memory.bytes[cpu]).tolist()
    assert memory.levels()[~cpu].tolist() == [10 * MIB]
    assert memory.devices() == [-1, 0]


def test_peak_is_the_highest_level_per_device_with_the_op_running_then():
    trace = two_thread_trace()
    peak = trace.memory_peak()
    assert peak["device"].tolist() == ["CPU", "cuda:0"]
    # the CPU: both 64 MiB blocks at once, after the free of older memory (-512)
    assert peak["peak_bytes"].tolist() == [128 * MIB - 512, 10 * MIB]
    assert peak["at_ns"].tolist() == [220, 65]
    assert peak["op"].tolist() == ["aten::add", "work"]


def test_holders_are_the_allocations_alive_at_the_peak_by_call_path():
    trace = two_thread_trace()
    holders = trace.memory_holders()  # the CPU: its peak is the highest
    assert holders["call_path"].tolist() == ["phase_alloc > aten::empty", "phase_peak > aten::add"]
    assert holders["bytes"].tolist() == [64 * MIB, 64 * MIB]
    assert holders["count"].tolist() == [1, 1]
    assert trace.names[trace.name_id[holders["row"][0]]] == "aten::empty"
    gpu = trace.memory_holders(device="cuda:0")
    assert gpu["call_path"].tolist() == ["work"] and gpu["bytes"].tolist() == [2 * MIB]
    with pytest.raises(ValueError, match="no memory events on cuda:1"):
        trace.memory_holders(device="cuda:1")


def test_summary_per_op_and_outside_any_op():
    trace = two_thread_trace()
    rows = {(row["device"], row["op"]): row for row in trace.memory_summary().to_dict("records")}
    assert rows[("CPU", "aten::empty")]["allocated_bytes"] == 64 * MIB
    assert rows[("CPU", "phase_peak")]["freed_bytes"] == 64 * MIB
    outside = rows[("CPU", "(outside any op)")]
    assert (outside["allocations"], outside["allocated_bytes"], outside["freed_bytes"]) == \
        (1, 1024, 64 * MIB + 512)
    assert rows[("CPU", "work")]["net_bytes"] == -4 * MIB
    paths = trace.memory_summary(by="call_path")
    assert "work > aten::mul" in paths["call_path"].tolist()


def test_findings_name_the_peak_its_holders_and_what_was_never_freed():
    found = two_thread_trace().findings()
    peak = next(line for line in found if line.startswith("Memory peak on CPU"))
    assert "128.0 MiB in aten::add" in peak and "phase_alloc > aten::empty 64.0 MiB" in peak
    kept = next(line for line in found if "never freed" in line and "on CPU" in line)
    assert kept.startswith("1 allocation on CPU (1.0 KiB)")


def test_summary_table_gains_allocated_columns_only_with_memory():
    trace = two_thread_trace()
    table = trace.table()
    assert "Self allocated" in table and "Total allocated" in table
    line = next(line for line in table.splitlines() if line.startswith("phase_alloc"))
    assert line.split()[-5:-1] == ["0", "B", "64.0", "MiB"]  # its own: none; with aten::empty's
    assert "Self allocated" not in Trace.build(start_ns=[0], end_ns=[1], thread=[0], name_id=[0],
                                               names=["a"], threads=[(1, 1, "t")]).table()


def assert_same_memory(a, b):
    for name in FIELDS:
        left, right = getattr(a.memory, name), getattr(b.memory, name)
        assert left.dtype == right.dtype and left.tolist() == right.tolist(), name


def test_chrome_json_round_trip_is_exact_and_writes_kineto_events_and_counter_tracks(tmp_path):
    trace = two_thread_trace()
    path = trace.export_chrome_trace(tmp_path / "m.json")
    events = json.loads(open(path).read())["traceEvents"]
    memory = [e for e in events if e.get("name") == "[memory]"]
    assert len(memory) == 9 and {e["cat"] for e in memory} == {"cpu_instant_event"}
    first = memory[0]  # the 64 MiB of aten::empty, on the main thread
    assert (first["pid"], first["tid"], first["args"]["Bytes"], first["args"]["Addr"],
            first["args"]["Device Type"]) == (10, 10, 64 * MIB, 0xA000, 0)
    tracks = {e["name"] for e in events if e["ph"] == "C"}
    assert tracks == {"Memory CPU", "Memory cuda:0"}
    loaded = nbprof.load(path)
    assert_same_memory(trace, loaded)
    assert loaded.counters == []  # the level tracks are drawn from the events, not kept twice


def test_parquet_round_trip_is_exact(tmp_path):
    trace = two_thread_trace()
    loaded = nbprof.load(trace.to_parquet(tmp_path / "m.parquet"))
    assert_same_memory(trace, loaded)
    assert loaded.memory_peak().equals(trace.memory_peak())


def test_a_kineto_file_from_torch_profiler_loads_its_memory(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:  # thread-local
        with record_function("phase_alloc"):
            a = torch.ones(16 * MIB)  # 64 MiB of float32
        with record_function("phase_peak"):
            b = a + 1
        with record_function("phase_free"):
            del a, b
    path = tmp_path / "kineto.json"
    prof.export_chrome_trace(str(path))
    trace = nbprof.load(path)
    peak = trace.memory_peak()
    assert peak["device"].tolist() == ["CPU"]
    assert 128 * MIB <= peak["peak_bytes"][0] < 128 * MIB + 16 * 1024  # plus a few scalars
    assert peak["op"][0] == "aten::add"
    big = trace.memory.bytes == 64 * MIB
    assert [trace.names[trace.name_id[op]] for op in trace.memory.op[big]] == ["aten::empty", "aten::add"]
    frees = np.flatnonzero(trace.memory.bytes == -64 * MIB)
    assert {trace.names[trace.name_id[op]] for op in trace.memory.op[frees]} == {"phase_free"}
    partner = trace.memory.partners()
    assert sorted(partner[np.flatnonzero(big)].tolist()) == frees.tolist()
    holders = trace.memory_holders()
    assert holders["call_path"].tolist()[:2] == ["phase_peak > aten::add",
                                                  "phase_alloc > aten::ones > aten::empty"]
    again = nbprof.load(trace.export_chrome_trace(tmp_path / "again.json"))
    assert_same_memory(trace, again)


def test_bad_memory_events_are_left_out_with_a_note(tmp_path):
    events = [{"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
              {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5,
               "args": {"Bytes": 100, "Addr": 7, "Device Type": 0, "Device Id": -1}},
              {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 6,
               "args": {"Bytes": "lots", "Device Type": 0}},
              {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 7,
               "args": {"Bytes": 8, "Device Type": 13, "Device Id": 0}}]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace = nbprof.load(path)
    assert trace.memory.bytes.tolist() == [100] and op_names(trace) == ["op"]
    assert any("2 [memory] events" in note for note in trace.meta["notes"])
    assert len(trace.instants) == 0
