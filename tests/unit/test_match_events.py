"""Kineto's ops + the legacy CUDA-event intervals + CUPTI's kernels -> one Trace, on fakes shaped
like torch 2.13's records (legacy_fakes.py for the legacy side; Kineto's as read_kineto_records
hands them out), mismatches included; and the pure matching on its own."""

import numpy as np
from legacy_fakes import ANCHOR, EPOCH_NS, Recording

from nbprof.model import GPU_KINDS, Thread
from nbprof.record.match_events import (NOTE_NO_CUPTI_KERNELS, gpu_records_to_trace,
                                 match_by_name_and_order, rows_in_trace)
from nbprof.record.cuda_events import CudaRecords
from nbprof.record.kineto_cpu import CpuRecords, DeviceRecords, KinetoRecords
from blocked_imports import run_without

T = EPOCH_NS
MAIN, AUTOGRAD, WORKER = 7001, 7002, 7003  # OS tids; torch's small ids are 1, 2 (and 3)
STARTING = Thread(4242, MAIN, "MainThread")
US = 1_000

# (name, legacy CPU start, end, true GPU start, end, legacy thread, correlation)
OPS = [("aten::mm", 10 * US, 12 * US, 15 * US, 40 * US, 1, 11),
       ("aten::relu", 13 * US, 14 * US, 40 * US, 45 * US, 1, 12),
       ("aten::mm", 20 * US, 22 * US, 45 * US, 70 * US, 1, 13),
       ("MmBackward0", 30 * US, 31 * US, 70 * US, 90 * US, 2, 14)]
OS_TID = {1: MAIN, 2: AUTOGRAD, 3: WORKER}


def legacy_lists():
    rec = Recording()
    rec.anchor(0, 1 * US, latency_ns=0)
    for name, start, end, gpu_start, gpu_end, thread, _ in OPS:
        rec.op(name, start, end, gpu=(gpu_start, gpu_end), thread=thread)
    return list(rec.lists.values())


def kineto_records(ops=OPS, extra=(), extra_devices=()):
    """Kineto's view: the same ops 200 ns earlier (its callback runs first), each op's
    cudaLaunchKernel, the legacy stub's own cudaEventRecord after each push and pop, nbprof's
    anchor, and an op on a plain Python thread that the legacy profiler never sees."""
    rows = [("nbprof::gpu_clock_anchor", 1 * US, 1 * US + 300, MAIN, 0)]
    for name, start, end, _, _, thread, correlation in ops:
        tid = OS_TID[thread]
        # a runtime call's own correlation id is CUPTI's: here it collides with the next op's
        rows += [(name, start - 200, end + 100, tid, correlation),
                 ("cudaLaunchKernel", start + 600, start + 900, tid, correlation + 1),
                 ("cudaEventRecord", start + 300, start + 400, tid, 0),
                 ("cudaEventRecord", end + 200, end + 300, tid, 0)]
    rows += [("aten::add", 50 * US, 51 * US, WORKER, 15), *extra]
    cpu = CpuRecords(
        names=[r[0] for r in rows], start_ns=T + np.array([r[1] for r in rows]),
        end_ns=T + np.array([r[2] for r in rows]), tid=np.array([r[3] for r in rows]),
        is_annotation=np.array([r[0].startswith("nbprof::") for r in rows]),
        is_python=np.zeros(len(rows), bool), shapes={}, stacks={}, cuda_us=None)
    correlation = np.array([r[4] for r in rows])
    devices = [("gemm_kernel", 15 * US + 500, 39 * US, 11, "kernel"),
               ("relu_kernel", 40 * US + 200, 44 * US, 12, "kernel"),
               ("gemm_kernel", 45 * US + 300, 69 * US, 13, "kernel"),
               ("gemm_bwd_kernel", 70 * US + 400, 89 * US, 14, "kernel"),
               ("Memcpy HtoD (Pageable -> Device)", 95 * US, 96 * US, 0, "memcpy"),
               *extra_devices]
    # CUPTI's own id, shared with the launching runtime call (correlation + 1 in the rows above)
    runtime = [d[5] if len(d) > 5 else (d[3] + 1 if d[3] else 0) for d in devices]
    device_records = DeviceRecords(
        [d[0] for d in devices], T + np.array([d[1] for d in devices]),
        T + np.array([d[2] for d in devices]), np.zeros(len(devices), np.int64),
        np.full(len(devices), 7), np.array([d[3] for d in devices]), [d[4] for d in devices],
        {0: {"grid": [64, 1, 1], "block": [256, 1, 1]}, 4: {"bytes": 4096}}, np.array(runtime))
    return KinetoRecords(cpu, correlation, device_records, dict(OS_TID))


def convert(kineto, kernels_asked=True, legacy=True):
    records = CudaRecords(legacy_lists() if legacy else None, kineto,
                          [(MAIN, T, T + 5 * US)], kernels_asked)
    return gpu_records_to_trace(records, anchor_name=ANCHOR, base_time_ns=T,
                                starting_thread=STARTING,
                                thread_names={MAIN: "MainThread", AUTOGRAD: "pt_autograd_0",
                                              WORKER: "loader"}, meta={"notes": []})


def gpu_rows_of(trace, event_id, kind):
    return [row for row in np.flatnonzero(trace.gpu_launch == event_id)
            if GPU_KINDS[trace.gpu_kind[row]] == kind]


def named(trace, name):
    return [e for e in trace.events if e.name == name]


def test_every_thread_from_kineto_each_legacy_op_with_its_event_interval():
    trace = convert(kineto_records())
    lanes = {thread.tid for thread in trace.threads}
    assert lanes == {MAIN, AUTOGRAD, WORKER}
    assert trace.threads[0] == STARTING
    for name, _, _, gpu_start, gpu_end, thread, _ in OPS:
        candidates = [e for e in named(trace, name) if e.thread.tid == OS_TID[thread]]
        intervals = [trace.kernel(row).interval for e in candidates
                     for row in gpu_rows_of(trace, e.id, "op")]
        assert any(abs(i.start_ns - gpu_start) <= 1_000 and abs(i.end_ns - gpu_end) <= 1_000
                   for i in intervals), (name, intervals)
    (add,) = named(trace, "aten::add")
    assert not gpu_rows_of(trace, add.id, "op")  # a plain thread: Kineto only, no events
    assert trace.meta["event_matching"] == {"intervals_without_op": 0,
                                            "legacy_ops_unmatched": 0, "kineto_ops_unmatched": 0}


def test_kernels_link_to_their_ops_by_correlation_with_grid_and_block():
    trace = convert(kineto_records())
    first_mm = min(named(trace, "aten::mm"), key=lambda e: e.cpu_interval.start_ns)
    (kernel_row,) = gpu_rows_of(trace, first_mm.id, "kernel")
    kernel = trace.kernel(kernel_row)
    assert kernel.name == "gemm_kernel" and kernel.stream == 7
    assert kernel.args == {"grid": [64, 1, 1], "block": [256, 1, 1]}
    (backward,) = named(trace, "MmBackward0")
    assert [trace.kernel(r).name for r in gpu_rows_of(trace, backward.id, "kernel")] == \
        ["gemm_bwd_kernel"]
    memcpy = [trace.kernel(r) for r in range(len(trace.gpu_start_ns))
              if GPU_KINDS[trace.gpu_kind[r]] == "memcpy"]
    assert len(memcpy) == 1 and memcpy[0].launch_id is None and memcpy[0].args == {"bytes": 4096}
    assert trace.meta["kernels"] is True


def test_autograds_records_find_their_lane_by_its_ops_when_the_id_map_points_elsewhere():
    # Kineto's small-id -> OS-tid map pointed autograd's id at another lane (here the loader's);
    # the lane holding its ops wins
    trace = convert(kineto_records()._replace(os_tids={1: MAIN, 2: WORKER}))
    (backward,) = named(trace, "MmBackward0")
    (row,) = gpu_rows_of(trace, backward.id, "op")
    assert abs(trace.kernel(row).interval.start_ns - 70 * US) <= 1_000
    assert trace.meta["event_matching"] == {"intervals_without_op": 0,
                                            "legacy_ops_unmatched": 0, "kineto_ops_unmatched": 0}
    # and the event stub's own calls on autograd's thread are found there and left out
    assert "cudaEventRecord" not in [trace.names[i] for i in trace.name_id]
    assert trace.meta["own_cuda_calls"] == convert(kineto_records()).meta["own_cuda_calls"]


def test_kernels_no_op_links_go_to_the_range_around_their_runtime_call():
    # Seen on an H200 (torch 2.11): a graph replayed inside a record_function range alone, and
    # ops of a second Python thread, got kernels whose linked correlation is 0. CUPTI's own id
    # still ties each kernel to its runtime call, and the call's enclosing slice launched it.
    extra = [("CUDAGraph::replay", 100 * US, 110 * US, MAIN, 31),
             ("cudaGraphLaunch", 101 * US, 108 * US, MAIN, 900),
             ("aten::relu", 120 * US, 125 * US, WORKER, 32),
             # its runtime call's CUPTI id is also an op's torch id (11): kept apart by name
             ("cudaLaunchKernel", 121 * US, 123 * US, WORKER, 11),
             ("cudaLaunchKernel", 130 * US, 131 * US, WORKER, 950)]  # inside no slice
    devices = [("graph_gemm", 111 * US, 115 * US, 0, "kernel", 900),
               ("graph_relu", 115 * US, 116 * US, 0, "kernel", 900),
               ("thread_relu", 124 * US, 126 * US, 0, "kernel", 11),
               ("lonely_kernel", 132 * US, 133 * US, 0, "kernel", 950)]
    trace = convert(kineto_records(extra=extra, extra_devices=devices))
    (replay,) = named(trace, "CUDAGraph::replay")
    assert sorted(trace.kernel(r).name for r in gpu_rows_of(trace, replay.id, "kernel")) == \
        ["graph_gemm", "graph_relu"]
    (relu,) = [e for e in named(trace, "aten::relu") if e.thread.tid == WORKER]
    assert [trace.kernel(r).name for r in gpu_rows_of(trace, relu.id, "kernel")] == \
        ["thread_relu"]
    first_mm = min(named(trace, "aten::mm"), key=lambda e: e.cpu_interval.start_ns)
    assert [trace.kernel(r).name for r in gpu_rows_of(trace, first_mm.id, "kernel")] == \
        ["gemm_kernel"]  # torch's own link still wins where there is one
    (lonely,) = [trace.kernel(r) for r in range(len(trace.gpu_start_ns))
                 if trace.names[trace.gpu_name_id[r]] == "lonely_kernel"]
    assert trace.names[trace.name_id[lonely.launch_id]] == "cudaLaunchKernel"


def test_the_profilers_own_calls_and_ranges_are_left_out_the_users_kept():
    trace = convert(kineto_records())
    assert "cudaEventRecord" not in [trace.names[i] for i in trace.name_id]
    assert not any(name.startswith("nbprof::") for name in (trace.names[i] for i in trace.name_id))
    assert len(named(trace, "cudaLaunchKernel")) == len(OPS)
    assert trace.meta["own_cuda_calls"] == 2 * len(OPS) + 1  # + the anchor in nbprof's window


def test_mismatches_are_matched_by_time_and_the_rest_counted():
    # Kineto missed the relu and saw an aten::mm the legacy profiler did not (counts differ)
    ops = [op for op in OPS if op[0] != "aten::relu"]
    extra = [("aten::mm", 60 * US, 61 * US, MAIN, 21)]
    trace = convert(kineto_records(ops, extra))
    counts = trace.meta["event_matching"]
    assert counts["legacy_ops_unmatched"] == 1 and counts["intervals_without_op"] == 1
    assert counts["kineto_ops_unmatched"] == 1
    assert any("did not all pair up" in note for note in trace.meta["notes"])
    by_start = sorted((e for e in named(trace, "aten::mm") if e.thread.tid == MAIN),
                      key=lambda e: e.cpu_interval.start_ns)
    starts = [[trace.kernel(r).interval.start_ns for r in gpu_rows_of(trace, e.id, "op")]
              for e in by_start]
    assert [len(s) for s in starts] == [1, 1, 0]  # the extra one gets none, never a neighbour's
    assert abs(starts[0][0] - 15 * US) <= 1_000 and abs(starts[1][0] - 45 * US) <= 1_000


def test_no_kernels_where_cupti_recorded_none_says_why_and_keeps_the_events():
    kineto = kineto_records()
    empty = DeviceRecords([], np.zeros(0, np.int64), np.zeros(0, np.int64),
                          np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                          [], {}, np.zeros(0, np.int64))
    trace = convert(kineto._replace(devices=empty))
    assert NOTE_NO_CUPTI_KERNELS in trace.meta["notes"] and trace.meta["kernels"] is False
    assert {GPU_KINDS[k] for k in trace.gpu_kind} == {"op"}
    assert len(trace.gpu_start_ns) == len(OPS)
    off = convert(kineto._replace(devices=empty), kernels_asked=False)
    assert any("Kernels not recorded one by one" in note for note in off.meta["notes"])


def test_without_the_legacy_part_kernels_remain_and_a_note_says_so():
    trace = convert(kineto_records(), legacy=False)
    assert {GPU_KINDS[k] for k in trace.gpu_kind} == {"kernel", "memcpy"}
    assert any("would not start beside Kineto" in note for note in trace.meta["notes"])


def test_match_by_name_and_order_per_thread():
    left = match_by_name_and_order([1, 1, 1, 2], ["a", "b", "a", "a"], [10, 20, 30, 15],
                                   [1, 2, 1, 1], ["a", "a", "b", "a"], [9, 14, 19, 29])
    assert left.tolist() == [0, 2, 3, 1]
    # counts differ: nearest in time both ways, the odd one out unmatched
    odd = match_by_name_and_order([1, 1], ["a", "a"], [100, 300], [1, 1, 1], ["a"] * 3,
                                  [95, 200, 296])
    assert odd.tolist() == [0, 2]
    assert match_by_name_and_order([1], ["a"], [5], [2], ["a"], [5]).tolist() == [-1]


def test_rows_in_trace_follow_the_build_order_and_skip_dropped_rows():
    from nbprof.model import Trace

    starts = np.array([50, 10, 10, 30])
    ends = np.array([60, 40, 40, 35])  # rows 1 and 2 are twins (same thread and times)
    trace = Trace.build(start_ns=starts[[0, 1, 2]], end_ns=ends[[0, 1, 2]],
                        thread=[0, 0, 0], name_id=[0, 1, 2], names=["x", "y", "z"],
                        threads=[Thread(1, 77, "t")])
    found = rows_in_trace(trace, [77, 77, 77, 77], starts + 1000, ends + 1000, 1000)
    assert [trace.names[trace.name_id[r]] for r in found[:3]] == ["x", "y", "z"]
    assert found[3] == -1


def test_the_join_and_the_overhead_wording_import_no_torch():
    code = (
        "import nbprof.record.match_events as m, nbprof.record.overhead as o\n"
        "t = m.Trace.build(start_ns=[0], end_ns=[5], thread=[0], name_id=[0], names=['x'],"
        " threads=[(1, 1, 'main')])\n"
        "g = m.with_gpu(t, start_ns=[1], end_ns=[4], names=['k'], device=[0], stream=[7],"
        " launch=[0], kinds=['kernel'])\n"
        "print(g.kernel(0).name, o.describe_overhead(o.overhead_meta(2100, 10, 10**6)))\n"
    )
    result = run_without(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "k"


def test_device_rows_are_classified_by_activity_type_or_else_by_name():
    from nbprof.record.kineto_cpu import device_kind

    assert device_kind("kernel", "void gemm<...>") == "kernel"
    assert device_kind("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)") == "memcpy"
    assert device_kind("gpu_memset", "Memset (Device)") == "memset"
    assert device_kind("gpu_user_annotation", "forward") is None
    assert device_kind("overhead", "Instrumentation") is None
    # a torch whose events name no activity type
    assert device_kind("", "Memcpy DtoD (Device -> Device)") == "memcpy"
    assert device_kind("", "ampere_sgemm_128x64_nn") == "kernel"
    assert device_kind("", "forward", is_annotation=True) is None


def test_rows_in_trace_pairs_the_kth_record_of_a_key_with_the_kth_row_of_it():
    # against the plain reading of the rule, on random traces with repeated keys and records
    # that the trace does not hold (another thread, more copies than the trace has)
    from nbprof.model import Trace

    rng = np.random.default_rng(7)
    tids = [7001, 7002, 7003]
    for _ in range(200):
        n = int(rng.integers(1, 40))
        start = rng.integers(0, 12, n)
        trace = Trace.build(start_ns=start, end_ns=start + rng.integers(0, 3, n),
                            thread=rng.integers(0, 3, n), name_id=np.zeros(n, int), names=["op"],
                            threads=[Thread(1, tid, str(tid)) for tid in tids])
        m = int(rng.integers(0, 50))
        rec_tid = rng.choice(tids + [7004], m)
        rec_start = rng.integers(0, 12, m)
        rec_end = rec_start + rng.integers(0, 3, m)
        rows = {}
        for row in range(len(trace)):
            key = (tids[trace.thread[row]], int(trace.start_ns[row]), int(trace.end_ns[row]))
            rows.setdefault(key, []).append(row)
        expected, seen = [], {}
        for key in zip(rec_tid.tolist(), rec_start.tolist(), rec_end.tolist()):
            k = seen[key] = seen.get(key, -1) + 1
            expected.append(rows[key][k] if k < len(rows.get(key, [])) else -1)
        found = rows_in_trace(trace, rec_tid, rec_start + T, rec_end + T, T)
        assert found.tolist() == expected


def test_two_autograd_lanes_keep_their_mapped_lanes_unless_those_hold_too_few_of_their_ops():
    from nbprof.model import Trace
    from nbprof.record.match_events import legacy_lane_os_tids

    def lanes(rows, threads):  # rows: (lane, name)
        names = sorted({name for _, name in rows})
        return Trace.build(start_ns=np.arange(len(rows)), end_ns=np.arange(len(rows)) + 1,
                           thread=[lane for lane, _ in rows],
                           name_id=[names.index(name) for _, name in rows], names=names,
                           threads=threads)

    # legacy: the starting thread, then autograd threads with torch's small ids 2 and 3
    legacy = lanes([(0, "aten::mm")] + [(1, "MmBackward0")] * 3 + [(1, "AddBackward0")] +
                   [(2, "MmBackward0")] * 2,
                   [Thread(1, MAIN, "main"), Thread(1, 2, "2"), Thread(1, 3, "3")])
    # Kineto missed one of thread 2's ops, so lane 7004 (thread 3's) holds more of thread 2's
    # names than thread 2's own lane does: the map still wins, each lane is used once
    kineto = lanes([(0, "aten::mm")] + [(1, "MmBackward0")] * 3 + [(2, "MmBackward0")] * 4 +
                   [(2, "AddBackward0")],
                   [Thread(1, MAIN, "main"), Thread(1, AUTOGRAD, "a"), Thread(1, 7004, "b")])
    names = [kineto.names[i] for i in kineto.name_id]
    tids = np.asarray([thread.tid for thread in kineto.threads])[kineto.thread]
    good_map = {2: AUTOGRAD, 3: 7004}
    assert legacy_lane_os_tids(legacy, MAIN, good_map, names, tids).tolist() == \
        [MAIN, AUTOGRAD, 7004]
    # a map pointing at a lane with none of the ops (as on the H200) gives way to the ops
    bad_map = {2: WORKER, 3: WORKER}
    assert legacy_lane_os_tids(legacy, MAIN, bad_map, names, tids).tolist() == \
        [MAIN, 7004, AUTOGRAD]
