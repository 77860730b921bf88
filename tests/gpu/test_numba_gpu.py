"""numba.cuda launches on a real GPU inside nbprof.profile: GPU intervals against numba's own
CUDA events around the same launches, torch and numba in order on one stream, a launch on a
non-default stream on its own lane, the first launch's compilation as a child slice."""

import numpy as np
import pytest
import torch

import nbprof

pytestmark = pytest.mark.gpu

cuda = pytest.importorskip("numba.cuda")


@pytest.fixture(scope="module")
def kernels():
    from kernels import numba_kernels

    if numba_kernels.SIMULATOR or not cuda.is_available():
        pytest.skip("needs numba.cuda on a GPU (not the simulator)")
    return numba_kernels


def launches(trace, name):
    return [event for event in trace.events if event.name == name]


def device_arrays(kernels):
    """Each kernel with its launch configuration and device arguments (GPU-sized)."""
    rng = np.random.default_rng(0)
    n, size, tile = 1 << 24, 2048, kernels.TILE
    x, y = (cuda.to_device(rng.random(n, np.float32)) for _ in range(2))
    out = cuda.device_array(n, np.float32)
    a, b = (cuda.to_device(rng.random((size, size), np.float32)) for _ in range(2))
    c = cuda.device_array((size, size), np.float32)
    partial = cuda.device_array(n // kernels.REDUCE_THREADS, np.float32)
    grid_in, grid_out = cuda.to_device(rng.random((size, size), np.float32)), \
        cuda.device_array((size, size), np.float32)
    return {
        "saxpy": (kernels.saxpy, n // 256, 256, (np.float32(2), x, y, out)),
        "tiled_matmul": (kernels.tiled_matmul, (size // tile, size // tile), (tile, tile),
                         (a, b, c)),
        "block_sum": (kernels.block_sum, n // kernels.REDUCE_THREADS, kernels.REDUCE_THREADS,
                      (x, partial)),
        "stencil_2d": (kernels.stencil_2d, (size // 16, size // 16), (16, 16),
                       (grid_in, grid_out)),
    }


def test_each_kernels_interval_matches_numbas_own_events(kernels):
    work = device_arrays(kernels)
    for kernel, grid, block, args in work.values():  # compile outside the comparison
        kernel[grid, block](*args)
    cuda.synchronize()
    measured = {}
    with nbprof.profile() as prof:
        for name, (kernel, grid, block, args) in work.items():
            for _ in range(5):
                start, end = cuda.event(), cuda.event()
                start.record()
                kernel[grid, block](*args)
                end.record()
                measured.setdefault(name, []).append((start, end))
    cuda.synchronize()
    for name, pairs in measured.items():
        events = launches(prof.trace, f"numba::{name}")
        assert len(events) == len(pairs)
        for event, (start, end) in zip(events, pairs):
            (interval,) = event.kernels
            own_ns = cuda.event_elapsed_time(start, end) * 1e6
            assert abs(interval.interval.elapsed_ns() - own_ns) <= 0.10 * own_ns, (name, own_ns)
            assert event.cpu_interval.start_ns <= interval.interval.start_ns


def test_torch_and_numba_on_one_stream_in_order(kernels):
    from kernels import torch_numba

    torch_numba.mixed_step()  # compile first
    torch.cuda.synchronize()
    with nbprof.profile() as prof:
        torch_numba.mixed_step()
    trace = prof.trace
    (saxpy,) = launches(trace, "numba::saxpy")
    (gpu,) = saxpy.kernels
    relu = [k for e in launches(trace, "aten::relu") for k in e.kernels]
    total = [k for e in launches(trace, "aten::sum") for k in e.kernels]
    assert relu and total
    slack_ns = 5_000  # the two anchors' submission latencies
    assert relu[0].interval.end_ns <= gpu.interval.start_ns + slack_ns
    assert gpu.interval.end_ns <= total[0].interval.start_ns + slack_ns


def test_a_launch_on_a_non_default_stream_lands_on_that_stream(kernels):
    kernel, grid, block, args = device_arrays(kernels)["saxpy"]
    kernel[grid, block](*args)
    stream = cuda.stream()
    with nbprof.profile() as prof:
        kernel[grid, block, stream](*args)
        kernel[grid, block](*args)
    on_stream, on_default = launches(prof.trace, "numba::saxpy")
    handle = getattr(stream.handle, "value", stream.handle)  # ctypes in older numba.cuda
    assert on_stream.args["stream"] == hex(int(handle))
    assert on_default.args["stream"] == "default"
    assert on_stream.kernels[0].stream != 0 and on_default.kernels[0].stream == 0


def test_the_first_launch_shows_its_compilation(kernels):
    @cuda.jit
    def fresh_kernel(out):  # a new function: numba has not compiled it yet
        i = cuda.grid(1)
        if i < out.size:
            out[i] = i

    out = cuda.device_array(1 << 20, np.float32)
    with nbprof.profile() as prof:
        fresh_kernel[(1 << 20) // 256, 256](out)
    (launch,) = launches(prof.trace, "numba::test_the_first_launch_shows_its_compilation."
                                     "<locals>.fresh_kernel")
    compiles = [e for e in prof.trace.events if e.name.startswith("numba::compile")]
    assert compiles and compiles[0].parent == launch.id
    # the GPU interval is the kernel's, not the JIT's
    assert launch.kernels[0].interval.elapsed_ns() < compiles[0].cpu_interval.elapsed_ns()
    assert np.array_equal(out.copy_to_host()[:4], [0, 1, 2, 3])
    assert "fresh_kernel" in launch.args["entry names"]  # the mangled name CUPTI would report
