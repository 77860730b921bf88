"""Only the GPUs in use are touched, and CUDA graph captures pause the CUDA-event profiler.

Device selection is a pure function fed fakes shaped like torch.cuda's answers. The capture
pause runs torch's real Kineto + legacy profilers (the legacy one in its CPU state here) around a
stand-in graph class with CUDAGraph's three methods: the real one needs a GPU (tests/gpu has it).
"""

import os
import threading

import torch
from torch.autograd import ProfilerState

from nbprof.model import Thread
from nbprof.record.match_events import gpu_records_to_trace
from nbprof.record.cuda_events import (ANCHOR_NAME, CudaRecorder, devices_in_use,
                                       stop_anchor_devices)
from nbprof.record.cuda_graphs import REPLAY_NAME, GraphCaptures


def test_only_devices_with_a_primary_context_are_used():
    contexts = {0: True, 1: False, 2: True, 3: False}
    assert devices_in_use(4, True, contexts.get) == [0, 2]
    assert devices_in_use(4, False, contexts.get) == []  # CUDA not initialised: none in use
    assert devices_in_use(4, True, None) == []  # a torch without the query (CPU build)
    assert devices_in_use(0, True, contexts.get) == []


def test_a_device_first_used_inside_the_block_is_anchored_at_stop():
    assert stop_anchor_devices([0], [0, 3]) == [0, 3]
    assert stop_anchor_devices([], []) == []


class StandInGraph:
    """CUDAGraph's capture/replay surface; ``capture_begin`` may fail like a real one can."""

    fail = False

    def capture_begin(self, pool=None, capture_error_mode="global"):
        if self.fail:
            raise RuntimeError("operation not permitted when stream is capturing")

    def capture_end(self):
        pass

    def replay(self):
        torch.ones(2).neg()  # stands for the graph's work


def legacy_names(lists):
    return [record.name() for records in lists for record in records if record.kind() == "push"]


def test_a_capture_pauses_the_event_profiler_and_a_replay_is_a_slice():
    recorder = CudaRecorder(kernels=False, legacy_state=ProfilerState.CPU)
    recorder.start()
    graphs = GraphCaptures(recorder.legacy, StandInGraph)
    graphs.start()
    try:
        torch.ones(2).add(1)
        graph = StandInGraph()
        graph.capture_begin()
        torch.ones(2).mul(3)  # "captured": no event may be recorded now
        graph.capture_end()
        torch.ones(2).sub(1)
        graph.replay()
    finally:
        graphs.stop()
        records = recorder.stop()
    assert graphs.paused_captures == 1
    assert StandInGraph.replay.__qualname__ == "StandInGraph.replay"  # restored
    pushed = legacy_names(records.legacy_lists)
    assert "aten::add" in pushed and "aten::sub" in pushed and "aten::mul" not in pushed
    starting = Thread(os.getpid(), threading.get_native_id(), "MainThread")
    trace = gpu_records_to_trace(records, anchor_name=ANCHOR_NAME,
                                 base_time_ns=records.windows[0][1], starting_thread=starting,
                                 thread_names={}, meta={"notes": []})
    names = [event.name for event in trace.events]
    assert "aten::mul" in names  # the captured op is still a CPU slice, from Kineto
    (replay,) = [event for event in trace.events if event.name == REPLAY_NAME]
    assert trace.event(trace.children(replay.id)[0]).name in ("aten::ones", "aten::neg")
    assert trace.meta["event_matching"]["legacy_ops_unmatched"] == 0


def test_a_failed_capture_resumes_and_a_block_ending_inside_one_stops_cleanly():
    recorder = CudaRecorder(kernels=False, legacy_state=ProfilerState.CPU)
    recorder.start()
    graphs = GraphCaptures(recorder.legacy, StandInGraph)
    graphs.start()
    try:
        StandInGraph.fail = True
        try:
            StandInGraph().capture_begin()
        except RuntimeError:
            pass
        StandInGraph.fail = False
        torch.ones(2).add(1)  # recorded again: the failed capture resumed the profiler
        StandInGraph().capture_begin()  # never ended
    finally:
        graphs.stop()
        records = recorder.stop()
    assert "aten::add" in legacy_names(records.legacy_lists)
    assert not torch.autograd._profiler_enabled()
    assert StandInGraph.__dict__["capture_begin"].__qualname__ == "StandInGraph.capture_begin"
