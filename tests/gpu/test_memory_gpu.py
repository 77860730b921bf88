"""Memory on a real GPU: the caching allocator's levels in the trace against torch's own counters
(torch.cuda.memory_allocated / max_memory_allocated), through nbprof's native recorder
(cuda=False: its CPU observer; the memory reporter sees the CUDA allocator on every thread) and
through its GPU path (recorder="native": CUDA events per op) and through a Kineto file
torch.profiler wrote (thread-local mode). Run by bench/gpu_check.sh, early."""

import threading

import numpy as np
import pytest
import torch

import nbprof
from nbprof.record import native

pytestmark = pytest.mark.gpu

BLOCK = 512  # the caching allocator rounds every block to this


def workload():
    a = torch.ones(8 << 20, device="cuda")  # 32 MiB
    b = a * 2  # the peak: both
    del a
    c = torch.empty(1 << 20, device="cuda")  # 4 MiB, alive at the end
    torch.cuda.synchronize()
    return b, c


def check_levels(trace, peak_expected, end_expected):
    memory = trace.memory
    on_gpu = memory.device == torch.cuda.current_device()
    assert on_gpu.any(), trace.meta.get("notes")
    peak = trace.memory_peak()
    row = peak["device"].tolist().index(f"cuda:{torch.cuda.current_device()}")
    assert abs(int(peak["peak_bytes"][row]) - peak_expected) < BLOCK
    assert abs(int(memory.levels()[np.flatnonzero(on_gpu)[-1]]) - end_expected) < BLOCK
    assert peak["op"][row] in ("aten::mul", "aten::empty_strided", "aten::empty")


def test_native_memory_levels_match_torchs_counters():
    if native.load() is None:
        pytest.skip(f"the native recorder does not build here: {native.why_not()}")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    with nbprof.profile(memory=True, cuda=False) as prof:
        kept = workload()
    check_levels(prof.trace, torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated())
    del kept


def test_the_native_gpu_path_records_every_threads_cuda_allocations():
    """recorder="native" on a GPU (CUDA events per op), memory on: the same levels, and a
    worker thread's CUDA allocation on its own lane."""
    library = native.load()
    if library is None or library.gpu_unavailable():
        pytest.skip(f"the native recorder's GPU path is not available here: "
                    f"{native.why_not() or library.gpu_unavailable()}")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    made = []

    def worker():
        made.append(torch.empty(1 << 20, device="cuda"))  # 4 MiB

    with nbprof.profile(memory=True, recorder="native") as prof:
        kept = workload()
        thread = threading.Thread(target=worker, name="cuda worker")
        thread.start()
        thread.join()
        torch.cuda.synchronize()
    trace = prof.trace
    assert trace.meta["backend"] == "native-cuda-events"
    check_levels(trace, torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated())
    lane = [t.name for t in trace.threads].index("cuda worker")
    mine = (trace.memory.thread == lane) & (trace.memory.device >= 0)
    # the allocator reports the block it hands out: a cached block up to 1 MiB larger than
    # asked is handed out whole (it splits only a remainder over 1 MiB)
    [allocated] = trace.memory.bytes[mine].tolist()
    assert 4 << 20 <= allocated < (4 << 20) + (1 << 20)
    del kept
    made.clear()


def test_a_kineto_file_with_cuda_memory_loads_the_allocators_levels(tmp_path):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities, profile_memory=True) as prof:
        kept = workload()
    path = tmp_path / "cuda_memory.json"
    prof.export_chrome_trace(str(path))
    check_levels(nbprof.load(path), torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated())
    del kept
