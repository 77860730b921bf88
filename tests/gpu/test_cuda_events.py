"""The CUDA-event profiler on a real GPU: what a user checks on the timeline.

Run with ``pytest -m gpu tests/gpu`` (bench/gpu_check.sh does); skipped without CUDA.
"""

import pytest
import torch

import nbprof
from kernels.train_mlp import train

pytestmark = pytest.mark.gpu

ANCHOR_ERROR_NS = 5_000  # the anchor's own submission latency: a few microseconds


def events_named(trace, name):
    return [event for event in trace.events if event.name == name]


@pytest.fixture(scope="module")
def matmul_trace():
    a = torch.randn(512, 512, device="cuda")
    torch.cuda.synchronize()
    with nbprof.profile() as prof:
        b = a
        for _ in range(5):
            b = torch.relu(a @ b) / 512
        torch.cuda.synchronize()
    return prof.trace


def test_the_backend_is_cuda_events(matmul_trace):
    meta = matmul_trace.meta
    assert meta["backend"] == "cuda-events" and meta["cuda"] is True
    assert meta["all_threads"] is False
    assert any("thread-local" in note for note in meta["notes"])
    assert meta["device_names"][0] == torch.cuda.get_device_name(0)
    assert not any("could not time" in note for note in meta["notes"]), meta["notes"]


def test_ops_that_launch_kernels_have_gpu_intervals_after_their_launch(matmul_trace):
    launching = events_named(matmul_trace, "aten::mm") + events_named(matmul_trace, "aten::relu")
    assert len(launching) == 10
    for event in launching:
        (kernel,) = event.kernels
        assert kernel.kind == "op" and kernel.device == torch.cuda.current_device()
        assert kernel.interval.elapsed_ns() > 0
    for row in range(len(matmul_trace.kernels)):
        kernel = matmul_trace.kernel(row)
        launch = matmul_trace.event(kernel.launch_id)
        assert kernel.interval.start_ns >= launch.cpu_interval.start_ns - ANCHOR_ERROR_NS, \
            (launch.name, kernel.interval, launch.cpu_interval)
    assert "nbprof::gpu_clock_anchor" not in matmul_trace.names


def test_matmul_gpu_time_agrees_with_cuda_event_timing():
    a = torch.randn(2048, 2048, device="cuda")
    b = torch.randn(2048, 2048, device="cuda")

    def matmuls():
        for _ in range(20):
            torch.mm(a, b)

    matmuls()  # warm-up (cuBLAS handles, kernel selection)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    matmuls()
    end.record()
    torch.cuda.synchronize()
    reference_us = start.elapsed_time(end) * 1000
    with nbprof.profile() as prof:
        matmuls()
    profiled_us = sum(row.cuda_time_total for row in prof.trace.key_averages()
                      if row.name == "aten::mm")
    assert profiled_us == pytest.approx(reference_us, rel=0.10)


def test_after_a_gpu_sleep_the_next_op_starts_on_the_gpu_after_its_cpu_end():
    x = torch.ones(16, device="cuda")
    torch.cuda.synchronize()
    with nbprof.profile() as prof:
        torch.cuda._sleep(50_000_000)  # tens of ms of GPU time: the queue backs up
        x.add_(1)
        torch.cuda.synchronize()
    (add,) = events_named(prof.trace, "aten::add_")
    (kernel,) = add.kernels
    assert kernel.interval.start_ns > add.cpu_interval.end_ns


def test_backward_ops_have_gpu_intervals():
    with nbprof.profile() as prof:
        train(steps=1)
    backward = [event for event in prof.trace.events
                if "Backward" in event.name and event.kernels]
    assert backward, "no backward op got a GPU interval"
    assert prof.trace.key_averages()  # summaries work on the GPU trace
    cuda_total = sum(row.cuda_time_total for row in prof.trace.key_averages())
    assert cuda_total > 0


def test_cpu_only_on_a_gpu_machine_when_asked():
    with nbprof.profile(cuda=False) as prof:
        torch.ones(4, device="cuda") + 1
    assert prof.trace.meta["backend"] == "kineto-cpu" and not prof.trace.has_gpu
    assert any("cuda=False" in note for note in prof.trace.meta["notes"])
