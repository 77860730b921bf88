"""The native recorder's CUDA events on the CPU: its columns (offsets chained per device in
observer.cpp) placed on the CPU clock by gpu_clock.py, and a clean refusal where torch has no
CUDA. The events themselves are checked on a device: tests/gpu/test_native_gpu.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nbprof.record import native
from nbprof.record.native.records import FLAG_CAPTURING, FLAG_ENDED, FLAG_GPU_END, GpuRecords, \
    NativeRecords
from nbprof.record.native.to_trace import native_records_to_trace

T0 = 1_700_000_000_000_000_000
ORIGIN = 123_456_789.0  # the GPU offsets' origin: any value, it must cancel out


def _records(flags, start_ns, end_ns, device, start_offset, end_offset, anchors, error=""):
    count = len(flags)
    anchor_cpu, anchor_offset = zip(*anchors)
    return NativeRecords(
        start_ns=np.array(start_ns, np.int64), end_ns=np.array(end_ns, np.int64),
        thread=np.zeros(count, np.int32), name=np.arange(count, dtype=np.int32),
        seq=np.full(count, -1, np.int64), fwd_tid=np.zeros(count, np.int64),
        depth=np.zeros(count, np.uint16), scope=np.zeros(count, np.uint8),
        flags=np.array(flags, np.uint8), os_tids=np.array([11], np.int64),
        rf_tids=np.array([1], np.int64), names=[f"aten::op{i}" for i in range(count)], shapes={},
        gpu=GpuRecords(start_offset_ns=ORIGIN + np.array(start_offset, float),
                       end_offset_ns=ORIGIN + np.array(end_offset, float),
                       device=np.array(device, np.int8), stream=np.zeros(count, np.int64),
                       anchor_cpu_ns=np.array(anchor_cpu, np.int64),
                       anchor_device=np.zeros(len(anchors), np.int8),
                       anchor_offset_ns=ORIGIN + np.array(anchor_offset, float), error=error))


def test_event_offsets_become_gpu_intervals_on_the_cpu_clock():
    ended = FLAG_ENDED | FLAG_GPU_END
    # op0 runs at once; op1 is queued behind it (GPU start after its CPU end); op2 ran while its
    # stream captured a CUDA graph: no events. Anchors at CPU 0 and 1 ms, the GPU offsets 1:1.
    records = _records(
        flags=[ended, ended, FLAG_ENDED | FLAG_CAPTURING],
        start_ns=[T0 + 1_000, T0 + 3_000, T0 + 5_000], end_ns=[T0 + 2_000, T0 + 4_000, T0 + 6_000],
        device=[0, 0, -1], start_offset=[1_500, 60_000, np.nan],
        end_offset=[51_500, 200_000, np.nan], anchors=[(T0, 0.0), (T0 + 1_000_000, 1_000_000.0)])
    trace = native_records_to_trace(records, base_time_ns=T0, thread_names={}, pid=1,
                                    meta={"notes": []})
    assert trace.gpu_start_ns.tolist() == [1_500, 60_000]
    assert trace.gpu_end_ns.tolist() == [51_500, 200_000]
    assert [trace.names[trace.name_id[row]] for row in trace.gpu_launch] == ["aten::op0",
                                                                             "aten::op1"]
    clock = trace.meta["gpu_clock"][0]
    assert clock["anchors"] == 2 and clock["anchor_error_ns"] == 0 and abs(clock["drift_ppm"]) < 1
    assert any("captured a CUDA graph" in note for note in trace.meta["notes"])


def test_a_late_anchor_is_shifted_by_what_the_records_prove():
    # op0's event reads 2 us before its CPU time: impossible, so the anchor was >= 2 us late.
    records = _records(flags=[FLAG_ENDED | FLAG_GPU_END], start_ns=[T0 + 10_000],
                       end_ns=[T0 + 20_000], device=[0], start_offset=[8_000],
                       end_offset=[30_000], anchors=[(T0, 0.0)])
    trace = native_records_to_trace(records, base_time_ns=T0, thread_names={}, pid=1,
                                    meta={"notes": []})
    assert trace.meta["gpu_clock"][0]["anchor_error_ns"] == 2_000
    assert trace.gpu_start_ns.tolist() == [10_000] and trace.gpu_end_ns.tolist() == [32_000]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a torch without CUDA")
def test_cuda_events_are_refused_cleanly_without_cuda():
    library = native.load()
    if library is None:
        pytest.skip(f"native observer unavailable: {native.why_not()}")
    assert "CUDA" in library.gpu_unavailable()
    with pytest.raises(RuntimeError, match="cannot record CUDA events: this torch has no CUDA"):
        library.start(gpu=True)
    library.start()  # nothing was left half on: the next profile records
    x = torch.ones(3)
    x = x + 1
    records = library.stop()
    assert "aten::add" in records.names and records.gpu is None
    assert library.created_events() == 0


def test_gpu_times_lost_at_stop_keep_the_cpu_ops_and_say_why():
    records = _records(flags=[FLAG_ENDED | FLAG_GPU_END], start_ns=[T0 + 10_000],
                       end_ns=[T0 + 20_000], device=[0], start_offset=[np.nan],
                       end_offset=[np.nan], anchors=[(T0, np.nan)],
                       error="CUDA error: an illegal memory access was encountered")
    trace = native_records_to_trace(records, base_time_ns=T0, thread_names={}, pid=1,
                                    meta={"notes": []})
    assert len(trace) == 1 and len(trace.gpu_start_ns) == 0
    assert any("No GPU time was placed: CUDA error" in note for note in trace.meta["notes"])


def test_gpu_depth_must_be_a_depth():
    import nbprof

    with pytest.raises(ValueError, match="gpu_depth must be None"):
        nbprof.profile(recorder="native", gpu_depth=-1)


def test_cuptis_kernels_join_the_events_and_the_observers_own_calls_leave():
    """A CUDA-only Kineto session's rows beside the native records: the kernels go to the ops
    whose launch calls they came from; the observer's own calls after each op's start and end
    (where it recorded events, or only asked whether the stream captures) are left out, a user's
    cudaEventRecord stays."""
    from nbprof.model import KIND_KERNEL, KIND_OP
    from nbprof.record.kineto_cpu import CpuRecords, DeviceRecords, KinetoRecords

    ended = FLAG_ENDED | FLAG_GPU_END
    starts = [T0 + 100_000, T0 + 300_000, T0 + 500_000]
    ends = [T0 + 200_000, T0 + 400_000, T0 + 600_000]
    records = _records(flags=[ended, ended, FLAG_ENDED | FLAG_CAPTURING], start_ns=starts,
                       end_ns=ends, device=[0, 0, -1], start_offset=[100_000, 300_000, np.nan],
                       end_offset=[200_000, 400_000, np.nan],
                       anchors=[(T0, 0.0), (T0 + 1_000_000, 1_000_000.0)])
    own = [("cudaStreamIsCapturing", 200), ("cudaEventRecord", 600)]
    calls = [(name, at + delay, 0) for at in (starts[0], ends[0], starts[1], ends[1])
             for name, delay in own] + [("cudaStreamIsCapturing", starts[2] + 200, 0)]
    calls += [("cudaLaunchKernel", starts[0] + 10_000, 1), ("cudaLaunchKernel", starts[1] + 10_000, 2),
              ("cudaEventRecord", ends[2] + 50_000, 3)]  # the user's, 50 us after op2
    names, call_start, correlation = zip(*calls)
    call_start = np.array(call_start, np.int64)
    count = len(calls)
    cuda = KinetoRecords(
        CpuRecords(list(names), call_start, call_start + 3_000, np.full(count, 11, np.int64),
                   np.zeros(count, np.bool_), np.zeros(count, np.bool_), {}, {}, None),
        np.array(correlation, np.int64),
        DeviceRecords(["gemm", "add_kernel"], np.array([T0 + 120_000, T0 + 320_000]),
                      np.array([T0 + 190_000, T0 + 390_000]), np.zeros(2, np.int64),
                      np.zeros(2, np.int64), np.zeros(2, np.int64), ["kernel", "kernel"], {},
                      np.array([1, 2], np.int64)), {})
    trace = native_records_to_trace(records, base_time_ns=T0, thread_names={}, pid=1,
                                    meta={"notes": []}, cuda=cuda)
    names = [trace.names[i] for i in trace.name_id]
    assert names == ["aten::op0", "cudaLaunchKernel", "aten::op1", "cudaLaunchKernel",
                     "aten::op2", "cudaEventRecord"]
    assert trace.meta["own_cuda_calls"] == 9
    kernels = np.flatnonzero(trace.gpu_kind == KIND_KERNEL)
    assert [names[op] for op in trace.gpu_launch[kernels]] == ["aten::op0", "aten::op1"]
    assert [names[call] for call in trace.gpu_call[kernels]] == ["cudaLaunchKernel"] * 2
    assert (trace.gpu_kind == KIND_OP).sum() == 2 and trace.parent[1] == 0
    # the event intervals' lane is never a CUPTI stream's (here 0, as the events' first stream)
    event_streams = set(trace.gpu_stream[trace.gpu_kind == KIND_OP].tolist())
    assert not event_streams & set(trace.gpu_stream[kernels].tolist())
