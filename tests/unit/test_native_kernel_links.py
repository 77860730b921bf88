"""CUPTI's GPU work linked to the native recorder's ops (record/native/kernel_links.py), on real
torch.profiler recordings from GPUs (../shared/traces): each trace is split into what the native
observer would hold (the ops) and what a CUDA-only Kineto session gives (runtime and driver
calls, kernels, memcpys, memsets); the linker must put every activity on the op the trace's own
linkage names (torch's "External id", which the CUDA-only session does not have)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.kineto_split import cuda_only_records, ops_trace, split_kineto_file
from nbprof.model import KIND_KERNEL, KIND_MEMCPY, NO_ID
from nbprof.record.native.kernel_links import calls_of, innermost_ops, observer_marks, \
    with_cuda_activity

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
STEP = TRACES / "gpu_training_step_68k.json.gz"  # 2 threads (forward, autograd), 6,095 activities
TRITON = TRACES / "gpu_triton_kernel.json.gz"  # a driver call (cuLaunchKernel)
pytestmark = pytest.mark.skipif(not STEP.exists(), reason="needs ../shared/traces")


def _truth(ops, calls, activities, call):
    """Per activity, the op torch linked it to: the op of its External id on its call's thread."""
    by_key = {(int(tid), args.get("External id")): row
              for row, (tid, args) in enumerate(zip(ops["tid"], ops["args"]))}
    return np.array([by_key.get((int(calls["tid"][c]), args.get("External id")), -2)
                     for c, args in zip(call, activities["args"])])


@pytest.fixture(scope="module")
def step():
    return split_kineto_file(STEP)


@pytest.mark.parametrize("clock_offset_ns", [0, 2_000, -2_000])
def test_every_activity_lands_on_the_op_torch_linked_it_to(step, clock_offset_ns):
    ops, calls, activities, _ = step
    call = calls_of([a["correlation"] for a in activities["args"]],
                    [a["correlation"] for a in calls["args"]])
    assert (call >= 0).all()
    truth = _truth(ops, calls, activities, call)
    assert (truth >= 0).all() and len(set(calls["tid"][call].tolist())) == 2  # both threads
    # the two sides' clocks may differ by ~1 µs (each converts the TSC itself): the call's
    # midpoint keeps a launch inside its op through 2 µs either way
    middle = (calls["start"] + calls["end"]) // 2 + clock_offset_ns
    op = innermost_ops(ops["tid"], ops["start"], ops["end"], calls["tid"], middle)
    linked = op[call]
    wrong = np.flatnonzero(linked != truth)
    assert not len(wrong), [(activities["names"][k][:40], ops["names"][linked[k]],
                             ops["names"][truth[k]]) for k in wrong[:5]]


def test_innermost_not_outermost_and_none_outside():
    # thread 7: A [0, 100] holds B [10, 50] holds C [20, 30]; thread 8: D [0, 100]
    op_tid, start, end = [7, 7, 7, 8], [0, 10, 20, 0], [100, 50, 30, 100]
    tid = [7, 7, 7, 7, 8, 9, 7]
    time_ns = [25, 40, 60, 5, 25, 25, 150]
    assert innermost_ops(op_tid, start, end, tid, time_ns).tolist() == [2, 1, 0, 0, 3, -1, -1]


def test_the_trace_gets_call_rows_and_kernels_launched_by_their_ops(step):
    ops, calls, activities, categories = step
    base = int(min(ops["start"].min(), calls["start"].min()))
    trace = ops_trace(ops, base)
    # the observer's own calls, after each op's start where it recorded an event: left out
    first_ops = np.arange(0, len(ops["tid"]), 7)
    count = len(first_ops)
    own = dict(tid=np.repeat(ops["tid"][first_ops], 2),
               start=np.repeat(ops["start"][first_ops], 2) + np.tile([40, 300], count),
               end=np.repeat(ops["start"][first_ops], 2) + np.tile([250, 900], count),
               names=["cudaStreamIsCapturing", "cudaEventRecord"] * count,
               args=[{"correlation": 0}] * 2 * count)
    with_own = {key: (list(calls[key]) + list(own[key]) if key in ("names", "args")
                      else np.concatenate([calls[key], own[key]])) for key in calls}
    marks = observer_marks(ops["tid"][first_ops], ops["start"][first_ops],
                           ops["end"][first_ops], np.ones(len(first_ops), np.bool_),
                           np.zeros(len(first_ops), np.bool_))
    result = with_cuda_activity(trace, cuda_only_records(with_own, activities, categories),
                                base_time_ns=base, marks=marks, pid=1)

    assert result.meta["own_cuda_calls"] == 2 * count and result.meta["kernels"]
    # every runtime call of the file is a row on its thread's lane; the file's own
    # cudaEventRecords (torch's) stay
    names = np.asarray(result.names, dtype=object)[result.name_id]
    assert len(result) == len(trace) + len(calls["names"])
    assert (names == "cudaEventRecord").sum() == calls["names"].count("cudaEventRecord")
    lane_tids = np.array([thread.tid for thread in result.threads])
    new_lanes = set(lane_tids.tolist()) - set(ops["tid"].tolist())
    assert new_lanes == set(calls["tid"].tolist()) - set(ops["tid"].tolist())  # a thread of calls only

    assert len(result.gpu_start_ns) == len(activities["names"])
    assert (result.gpu_kind == KIND_KERNEL).sum() == categories.count("kernel")
    assert (result.gpu_kind == KIND_MEMCPY).sum() == categories.count("gpu_memcpy")
    assert (result.gpu_launch != NO_ID).all() and (result.gpu_call != NO_ID).all()
    # the launching op is the one torch named; the call is a runtime call inside it, same lane
    truth = {(int(tid), a["correlation"]): a.get("External id")
             for tid, a in zip(calls["tid"], calls["args"])}
    launch, call = result.gpu_launch, result.gpu_call
    assert (result.thread[launch] == result.thread[call]).all()
    assert (result.start_ns[launch] <= result.start_ns[call]).all()
    call_names = set(np.asarray(result.names, dtype=object)[result.name_id[call]].tolist())
    assert call_names <= {"cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync"}
    external = [result.event_args[int(op)]["External id"] for op in launch]
    kernel_external = sorted(a.get("External id") for a in activities["args"])
    assert sorted(external) == kernel_external
    assert all(result.gpu_args[k]["grid"] for k in np.flatnonzero(result.gpu_kind == KIND_KERNEL))
    # per-op CUDA totals: each op name's total is the time of the kernels launched under it
    cuda_us = {row.name: row.cuda_time_total for row in result.key_averages()}
    mm = np.flatnonzero(names[launch] == "aten::mm")
    assert len(mm) and cuda_us["aten::mm"] == pytest.approx(
        float((result.gpu_end_ns[mm] - result.gpu_start_ns[mm]).sum()) / 1e3, rel=1e-6)


def test_a_driver_launch_and_a_call_outside_every_op():
    ops, calls, activities, categories = split_kineto_file(TRITON)
    main = int(calls["tid"][0])
    keep = ops["tid"] == main
    ops = {key: (value[keep] if isinstance(value, np.ndarray) else
                 [v for v, k in zip(value, keep) if k]) for key, value in ops.items()}
    base = int(ops["start"].min())
    trace = ops_trace(ops, base)
    result = with_cuda_activity(trace, cuda_only_records(calls, activities, categories),
                                base_time_ns=base, pid=1)
    names = np.asarray(result.names, dtype=object)
    (kernel,) = np.flatnonzero(result.gpu_kind == KIND_KERNEL)
    assert names[result.gpu_name_id[kernel]] == "triton_poi_fused_add_cos_sin_0"
    assert names[result.name_id[result.gpu_call[kernel]]] == "cuLaunchKernel"
    launcher = int(result.gpu_launch[kernel])
    truth = activities["args"][0]["External id"]
    assert result.event_args[launcher]["External id"] == truth
    assert names[result.name_id[launcher]] != "cuLaunchKernel"
