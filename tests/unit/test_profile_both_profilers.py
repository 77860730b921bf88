"""Both of torch's profilers at once, as nbprof runs them on a GPU, here with the legacy profiler
in its CPU state (no CUDA events on this machine): the real start/stop order, torch's real
records, the real thread ids, and the join of the two into one Trace."""

import os
import threading

import torch
from torch.autograd import ProfilerState

from nbprof.model import Thread
from nbprof.record.match_events import gpu_records_to_trace
from nbprof.record.cuda_events import ANCHOR_NAME, CudaRecorder


def work():
    x = torch.ones(8, requires_grad=True)
    (x * 2).relu().sum().backward()


def test_kineto_and_the_legacy_profiler_record_together_and_pair_up():
    starting = Thread(os.getpid(), threading.get_native_id(), "MainThread")
    recorder = CudaRecorder(kernels=False, legacy_state=ProfilerState.CPU)
    recorder.start()
    try:
        assert recorder.legacy_error is None  # Kineto first, then legacy: both accepted
        work()
        side = threading.Thread(target=lambda: torch.ones(3).add(1), name="side")
        side.start()
        side.join()
    finally:
        records = recorder.stop()
    assert records.legacy_lists and len(records.kineto.cpu.names)
    trace = gpu_records_to_trace(records, anchor_name=ANCHOR_NAME,
                                 base_time_ns=records.windows[0][1], starting_thread=starting,
                                 thread_names={side.native_id: "side"},
                                 kernels_why_not="kernels=False was asked", meta={"notes": []})
    names_by_lane = {}
    for event in trace.events:
        names_by_lane.setdefault(event.thread.tid, set()).add(event.name)
    assert "aten::add" in names_by_lane[side.native_id]  # the other thread: from Kineto
    assert "aten::mul" in names_by_lane[starting.tid]
    assert any("Backward" in name for name in set().union(*names_by_lane.values()))
    # every op of the legacy threads found its Kineto twin, and the other way round
    assert trace.meta["event_matching"] == {"intervals_without_op": 0,
                                            "legacy_ops_unmatched": 0, "kineto_ops_unmatched": 0}
    assert any("Kernels not recorded one by one (kernels=False" in n for n in trace.meta["notes"])
    assert not torch.autograd._profiler_enabled()


def test_a_torch_profiler_taking_over_on_another_thread_stops_kineto_then_legacy_at_exit():
    recorder = CudaRecorder(kernels=False, legacy_state=ProfilerState.CPU)
    recorder.start()
    work()
    results = []
    other = threading.Thread(target=lambda: results.append(recorder.stop()))
    other.start()
    other.join()
    assert results == [None] and recorder.pending  # the thread-local part is still on
    records = recorder.stop()
    assert not recorder.pending and records.legacy_lists and len(records.kineto.cpu.names)
    assert not torch.autograd._profiler_enabled()
