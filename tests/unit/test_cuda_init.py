"""CUDA's lazy initialisation inside a profiled block becomes a slice (nbprof/record/cuda_init.py).
No GPU here: torch.cuda is stood in for by a module that initialises as torch's does (once, slowly,
then a quick return), and the slice goes into a real profile's trace."""

import threading
import time
import types

import torch

import nbprof
from nbprof.model import CUDA_INIT_NAME
from nbprof.record.cuda_init import CATEGORY, CudaInitTiming


def stand_in_cuda(available=True, initialized=False, init_s=0.03):
    cuda = types.SimpleNamespace(calls=0)
    state = {"initialized": initialized}

    def _lazy_init():
        cuda.calls += 1
        if state["initialized"]:
            return
        time.sleep(init_s)  # creating the context: seconds on a real GPU
        state["initialized"] = True

    cuda.is_available = lambda: available
    cuda.is_initialized = lambda: state["initialized"]
    cuda._lazy_init = _lazy_init
    return cuda


def test_the_first_initialisation_in_the_block_is_timed_once_and_the_function_put_back():
    cuda = stand_in_cuda()
    original = cuda._lazy_init
    timing = CudaInitTiming(cuda)
    timing.start()
    assert cuda._lazy_init is not original
    cuda._lazy_init()
    cuda._lazy_init()  # already initialised: torch's quick return, no second slice
    timing.stop()
    assert cuda._lazy_init is original and cuda.calls == 2
    ((tid, start_ns, end_ns),) = timing.spans
    assert tid == threading.get_native_id() and end_ns - start_ns >= 30_000_000


def test_nothing_is_wrapped_without_cuda_or_once_it_is_initialised():
    for cuda in (stand_in_cuda(available=False), stand_in_cuda(initialized=True)):
        original = cuda._lazy_init
        timing = CudaInitTiming(cuda)
        timing.start()
        assert cuda._lazy_init is original
        timing.stop()


def test_a_wrapper_put_over_ours_stays():
    cuda = stand_in_cuda()
    timing = CudaInitTiming(cuda)
    timing.start()
    theirs = cuda._lazy_init = (lambda inner: lambda: inner())(cuda._lazy_init)
    timing.stop()
    assert cuda._lazy_init is theirs


def test_the_initialisation_is_a_slice_on_its_thread_in_the_trace():
    cuda = stand_in_cuda()
    timing = CudaInitTiming(cuda)
    with nbprof.profile(cuda=False) as prof:
        torch.ones(4).add(1)
        timing.start()
        cuda._lazy_init()
        timing.stop()
        torch.ones(4).mul(2)
    trace = timing.add_to(prof.trace, {})
    (init,) = [event for event in trace.events if event.name == CUDA_INIT_NAME]
    assert init.thread.tid == threading.get_native_id()
    assert init.cpu_interval.elapsed_ns() >= 30_000_000
    assert trace.categories[trace.category[init.id]] == CATEGORY
    assert {"aten::add", "aten::mul"} <= {event.name for event in trace.events}
    assert CudaInitTiming(stand_in_cuda()).add_to(prof.trace, {}) is prof.trace
    # the findings say it first, and nothing of it where it did not happen
    assert trace.findings()[0].startswith("CUDA initialization took")
    assert not any("CUDA initialization" in line for line in prof.trace.findings())
