"""numba.cuda launches as the native recorder's ranges on a real GPU (issue 19): each launch's GPU
interval comes from its range's pooled event pair on the launch's own stream, against CUPTI's
kernel and numba's own event pair; on a worker thread; on torch's current side stream, in order
with torch's ops on that stream. Skipped without CUDA, numba.cuda on a GPU, or the observer."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import nbprof
from nbprof.record import native
from nbprof.record.native.to_trace import native_records_to_trace
from nbprof.record.numba_launches import NumbaLaunchRecorder

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

cuda = pytest.importorskip("numba.cuda")


@pytest.fixture(scope="module")
def kernels():
    from kernels import numba_kernels

    if numba_kernels.SIMULATOR or not cuda.is_available():
        pytest.skip("needs numba.cuda on a GPU (not the simulator)")
    library = native.load()
    if library is None:
        pytest.skip(f"native observer unavailable: {native.why_not()}")
    return numba_kernels


def matmul_launch(kernels, size=2048):
    rng = np.random.default_rng(0)
    a, b = (cuda.to_device(rng.random((size, size), np.float32)) for _ in range(2))
    c = cuda.device_array((size, size), np.float32)
    blocks = size // kernels.TILE
    launch = kernels.tiled_matmul[(blocks, blocks), (kernels.TILE, kernels.TILE)]
    launch(a, b, c)  # compiled outside what is measured
    cuda.synchronize()
    return lambda: launch(a, b, c)


def gpu_intervals(trace, name):
    """The CUDA-event GPU intervals (kind op) of the launches named ``name``, in time order."""
    found = [(kernel, event) for event in trace.events if event.name == name
             for kernel in event.kernels if kernel.kind == "op"]
    return sorted(found, key=lambda pair: pair[0].interval.start_ns)


def test_each_launchs_range_interval_agrees_with_cupti(kernels):
    """20 queued 2048^2 matmuls (each waits for the one before, ~ms each): the native range's
    event pair brackets each kernel within 2% of CUPTI's duration. The recorder and the launch
    path run as nbprof.profile runs them, inside torch.profiler (CUDA activity only: CUPTI)."""
    library = native.load()
    launch = matmul_launch(kernels)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as cupti:
        library.start(gpu=True, anchor_devices=[torch.cuda.current_device()])
        numba_launches = NumbaLaunchRecorder(gpu=True, native=library)
        numba_launches.start()
        try:
            for _ in range(20):
                launch()
        finally:
            numba_launches.stop()
            records = library.stop()
    base = int(records.start_ns.min())
    trace = native_records_to_trace(records, base_time_ns=base, thread_names={}, pid=0,
                                    meta={"notes": []})
    trace = numba_launches.add_to(trace)
    timed = gpu_intervals(trace, "numba::tiled_matmul")
    native_us = sorted(kernel.interval.elapsed_ns() / 1e3 for kernel, _ in timed)
    ran = [event for event in cupti.profiler.kineto_results.events()
           if event.device_type() == torch.autograd.DeviceType.CUDA]
    kernel_us = sorted(event.duration_ns() / 1e3 for event in ran)[-20:]
    print("\nnative ranges (us):", native_us[:3], "CUPTI kernels (us):", kernel_us[:3])
    assert len(native_us) == 20 and len(kernel_us) == 20
    for measured, reference in zip(native_us, kernel_us):
        assert reference >= 50
        assert abs(measured - reference) <= 0.02 * reference
    for kernel, event in timed:  # the event starts after its launch began, on the CPU clock
        assert event.cpu_interval.start_ns <= kernel.interval.start_ns
        assert kernel.args["grid"] == [128, 128, 1] and event.args["stream"] == "default"
    assert library.created_events() > 0


@pytest.mark.parametrize("where", ["main", "worker"])
def test_a_launchs_interval_sits_inside_numbas_own_event_pair(kernels, where):
    launch = matmul_launch(kernels)
    pairs = []

    def work():
        for _ in range(5):
            start, end = cuda.event(), cuda.event()
            start.record()
            launch()
            end.record()
            pairs.append((start, end))

    with nbprof.profile(recorder="native") as prof:
        if where == "main":
            work()
        else:
            worker = threading.Thread(target=work, name="numba-worker")
            worker.start()
            worker.join()
    cuda.synchronize()
    assert prof.trace.meta["recorder"] == "native"
    timed = gpu_intervals(prof.trace, "numba::tiled_matmul")
    assert len(timed) == 5, prof.trace.meta["notes"]
    for (kernel, event), (start, end) in zip(timed, pairs):
        own_ns = cuda.event_elapsed_time(start, end) * 1e6
        assert 0.98 * own_ns - 2_000 <= kernel.interval.elapsed_ns() <= own_ns * 1.02 + 2_000
        assert (event.thread.name == "numba-worker") == (where == "worker")


def test_a_launch_on_torchs_current_side_stream_is_in_order_with_its_ops(kernels):
    from kernels import torch_numba

    torch_numba.mixed_step()  # compile first
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with nbprof.profile(recorder="native") as prof:
        with torch.cuda.stream(side):
            torch_numba.mixed_step()  # relu, saxpy on torch's current stream (side), sum
    trace = prof.trace
    ((saxpy, launch),) = gpu_intervals(trace, "numba::saxpy")
    (relu, _), *_ = gpu_intervals(trace, "aten::relu")
    (total, _), *_ = gpu_intervals(trace, "aten::sum")
    assert launch.args["stream"] == hex(side.cuda_stream)
    assert saxpy.stream == relu.stream == total.stream  # one stream, torch's id for it
    slack_ns = 1_000  # one anchor for torch's ops and the launch: only event rounding is left
    assert relu.interval.end_ns <= saxpy.interval.start_ns + slack_ns
    assert saxpy.interval.end_ns <= total.interval.start_ns + slack_ns
