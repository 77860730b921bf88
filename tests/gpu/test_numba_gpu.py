"""numba.cuda launches on a real GPU inside nbprof.profile: GPU intervals against numba's own
CUDA events around the same launches (on the launching thread, timed by torch's record_function,
and on a worker thread, timed by numba's events), torch and numba in order on one stream, a
launch on a non-default stream on that stream, the first launch's compilation as a child slice,
and CUPTI's kernel names mapped back to the launches."""

import threading

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


def event_interval(event):
    """The launch's (or op's) CUDA-event GPU interval; CUPTI's kernels, where recorded (kernels
    on by default on a GPU), are the other kind linked to it."""
    (interval,) = [kernel for kernel in event.kernels if kernel.kind == "op"]
    return interval


def cupti_kernels(event):
    return [kernel for kernel in event.kernels if kernel.kind == "kernel"]


def on_thread(where, work):
    """Run ``work`` on this thread (torch's legacy profiler records it) or on a worker thread
    (it does not: numba's own events time the launches there)."""
    if where == "main":
        return work()
    failures = []

    def run():
        try:
            work()
        except BaseException as error:  # noqa: BLE001  (re-raised on the test's thread)
            failures.append(error)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    if failures:
        raise failures[0]


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


@pytest.mark.parametrize("where", ["main", "worker"])
def test_each_kernels_interval_matches_numbas_own_events(kernels, where):
    work = device_arrays(kernels)
    for kernel, grid, block, args in work.values():  # compile outside the comparison
        kernel[grid, block](*args)
    cuda.synchronize()
    measured = {}

    def launch_all():
        for name, (kernel, grid, block, args) in work.items():
            for _ in range(5):
                start, end = cuda.event(), cuda.event()
                start.record()
                kernel[grid, block](*args)
                end.record()
                measured.setdefault(name, []).append((start, end))

    with nbprof.profile() as prof:
        on_thread(where, launch_all)
    cuda.synchronize()
    for name, pairs in measured.items():
        events = launches(prof.trace, f"numba::{name}")
        assert len(events) == len(pairs)
        for event, (start, end) in zip(events, pairs):
            interval = event_interval(event)
            own_ns = cuda.event_elapsed_time(start, end) * 1e6
            # nbprof's events sit inside the test's pair on the same stream; the pair also holds
            # the launch itself wherever the GPU was idle (on an H200 the first saxpy's pair was
            # 17% longer than nbprof's), so only the kernels bound nbprof's interval from below
            assert interval.interval.elapsed_ns() <= own_ns * 1.02 + 2_000, (name, own_ns)
            for ran in cupti_kernels(event):
                assert interval.interval.elapsed_ns() >= 0.98 * ran.interval.elapsed_ns(), name
            assert event.cpu_interval.start_ns <= interval.interval.start_ns
            assert event.args["grid"] and event.args["stream"] == "default"


def test_torch_and_numba_on_one_stream_in_order(kernels):
    from kernels import torch_numba

    torch_numba.mixed_step()  # compile first
    torch.cuda.synchronize()
    with nbprof.profile() as prof:
        torch_numba.mixed_step()
    trace = prof.trace
    (saxpy,) = launches(trace, "numba::saxpy")
    gpu = event_interval(saxpy)
    relu = [event_interval(e) for e in launches(trace, "aten::relu")]
    total = [event_interval(e) for e in launches(trace, "aten::sum")]
    assert relu and total
    slack_ns = 1_000  # one anchor for torch's ops and the launch: only event rounding is left
    assert relu[0].interval.end_ns <= gpu.interval.start_ns + slack_ns
    assert gpu.interval.end_ns <= total[0].interval.start_ns + slack_ns
    assert gpu.stream == relu[0].stream == total[0].stream  # torch's current stream, both


@pytest.mark.parametrize("where", ["main", "worker"])
def test_a_launch_on_a_non_default_stream_lands_on_that_stream(kernels, where):
    """A long matmul then a saxpy on a torch stream (non-blocking: the default stream does not
    wait for it). Timed on that stream, the saxpy starts after the matmul and is short; timed on
    the idle default stream by mistake, it would start at once and overlap the matmul."""
    work = device_arrays(kernels)
    matmul, grid, block, matmul_args = work["tiled_matmul"]
    saxpy, saxpy_grid, saxpy_block, saxpy_args = work["saxpy"]
    matmul[grid, block](*matmul_args)
    saxpy[saxpy_grid, saxpy_block](*saxpy_args)
    cuda.synchronize()
    side = torch.cuda.Stream()  # created cudaStreamNonBlocking
    stream = cuda.external_stream(side.cuda_stream)

    def launch_both():
        matmul[grid, block, stream](*matmul_args)
        saxpy[saxpy_grid, saxpy_block, stream](*saxpy_args)
        saxpy[saxpy_grid, saxpy_block](*saxpy_args)  # and one on the default stream

    with nbprof.profile() as prof:
        on_thread(where, launch_both)
    (long,) = launches(prof.trace, "numba::tiled_matmul")
    on_stream, on_default = launches(prof.trace, "numba::saxpy")
    assert on_stream.args["stream"] == hex(side.cuda_stream) == long.args["stream"]
    assert on_default.args["stream"] == "default"
    long_gpu, saxpy_gpu, default_gpu = map(event_interval, (long, on_stream, on_default))
    assert saxpy_gpu.stream == long_gpu.stream != 0 and default_gpu.stream == 0
    assert saxpy_gpu.interval.start_ns >= long_gpu.interval.end_ns - 1_000
    assert saxpy_gpu.interval.elapsed_ns() < long_gpu.interval.elapsed_ns()


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
    assert event_interval(launch).interval.elapsed_ns() < compiles[0].cpu_interval.elapsed_ns()
    assert event_interval(launch).interval.start_ns >= compiles[0].cpu_interval.end_ns
    assert np.array_equal(out.copy_to_host()[:4], [0, 1, 2, 3])
    assert "fresh_kernel" in launch.args["entry names"]  # the mangled name CUPTI would report


@pytest.mark.parametrize("where", ["main", "worker"])
def test_cuptis_kernels_link_to_their_launches(kernels, where):
    """With CUPTI (kernels=True): on the launching thread Kineto links the kernel to the launch's
    record_function op by correlation; on a worker, nbprof pairs it through numba's mangled name.
    Either way each launch has its one kernel, whose name numba_kernel_of maps back."""
    from nbprof.record.kineto_cpu import kernels_supported
    from nbprof.record.numba_names import known_numba_launches, numba_kernel_of

    if not kernels_supported():
        pytest.skip("this torch has no CUPTI")
    kernel, grid, block, args = device_arrays(kernels)["saxpy"]
    kernel[grid, block](*args)
    cuda.synchronize()

    def launch_three():
        for _ in range(3):
            kernel[grid, block](*args)

    with nbprof.profile(kernels=True) as prof:
        on_thread(where, launch_three)
    saxpys = launches(prof.trace, "numba::saxpy")
    assert len(saxpys) == 3
    print("\nnotes:", prof.trace.meta["notes"], "\nsaxpy GPU rows:",
          [[(k.kind, k.name[:30]) for k in launch.kernels] for launch in saxpys])
    known = known_numba_launches([(launch.name, launch.args) for launch in saxpys])
    by_function = known_numba_launches([(launch.name, {"function": launch.args["function"]})
                                        for launch in saxpys])
    for launch in saxpys:
        (ran,) = cupti_kernels(launch)
        assert numba_kernel_of(ran.name, known) == numba_kernel_of(ran.name, by_function) \
            == "numba::saxpy", ran.name
        assert ran.interval.elapsed_ns() <= event_interval(launch).interval.elapsed_ns() * 1.1
