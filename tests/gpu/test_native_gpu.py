"""nbprof's native recorder on a GPU (recorder="native"): its pooled CUDA event pairs per op
against torch.cuda.Event pairs and CUPTI, the pool (a second profile creates no event), CUDA
graph capture, autograd's device thread, the anchor. Skipped without CUDA or the observer."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from torch._C._profiler import _ExperimentalConfig

import nbprof
from nbprof.model import KIND_KERNEL, KIND_OP
from nbprof.record import native
from nbprof.record.kineto_cpu import device_kind, kernels_supported
from nbprof.record.match_events import is_runtime_call
from nbprof.record.native.to_trace import native_records_to_trace

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

SIZE = 2048
ANCHOR_ERROR_NS = 5_000  # the target


@pytest.fixture(scope="module")
def library():
    lib = native.load()
    if lib is None:
        pytest.skip(f"native observer unavailable: {native.why_not()}")
    assert lib.gpu_unavailable() == "", lib.gpu_unavailable()
    return lib


def _intervals(trace, name):
    """(GPU start, GPU end) in ns of each op's CUDA-event interval whose op is `name`, in time
    order (not the kernels CUPTI records beside them, kernels=None)."""
    rows = [k for k, op in enumerate(trace.gpu_launch)
            if trace.gpu_kind[k] == KIND_OP and trace.names[trace.name_id[op]] == name]
    return [(int(trace.gpu_start_ns[k]), int(trace.gpu_end_ns[k])) for k in rows]


def _matrices():
    a = torch.randn(SIZE, SIZE, device="cuda")
    b = torch.randn(SIZE, SIZE, device="cuda")
    for _ in range(3):
        torch.mm(a, b)
    torch.cuda.synchronize()
    return a, b


def test_event_intervals_match_a_cuda_event_pair_per_op(library):
    a, b = _matrices()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(25)]
    with nbprof.profile(recorder="native") as prof:
        for start, end in pairs[:20]:
            start.record()
            torch.mm(a, b)
            end.record()
        for k, (start, end) in enumerate(pairs[20:]):
            with torch.autograd.profiler.record_function(f"sleep{k}"):
                start.record()
                torch.cuda._sleep(100_000 * (k + 1))  # GPU cycles: ~50-300 us
                end.record()
    torch.cuda.synchronize()
    trace = prof.trace
    assert trace.meta["recorder"] == "native" and trace.meta["backend"] == "native-cuda-events"
    mm = _intervals(trace, "aten::mm")
    sleeps = [_intervals(trace, f"sleep{k}")[0] for k in range(5)]
    assert len(mm) == 20
    for (start, end), (gpu_start, gpu_end) in zip(pairs, mm + sleeps):
        reference_ns = start.elapsed_time(end) * 1e6
        measured_ns = gpu_end - gpu_start
        print(f"event pair {reference_ns / 1e3:.1f} us, native {measured_ns / 1e3:.1f} us")
        assert abs(measured_ns - reference_ns) <= max(5_000, 0.02 * reference_ns)
    starts = [start for start, _ in mm]
    assert starts == sorted(starts) and all(s >= e for (_, e), (s, _) in zip(mm, mm[1:]))


def test_event_intervals_agree_with_cupti_for_long_queued_ops(library):
    a, b = _matrices()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as cupti:
        library.start(gpu=True, anchor_devices=[torch.cuda.current_device()])
        for _ in range(21):
            torch.mm(a, b)  # queued: each waits for the previous one
        records = library.stop()
    base = int(records.start_ns.min())
    trace = native_records_to_trace(records, base_time_ns=base, thread_names={}, pid=0,
                                    meta={"notes": []})
    # the first mm starts on the GPU the start's anchor left idle: its events also hold its own
    # launch (tens of us), so it is no queued op; the other 20 are
    native_us = sorted((end - start) / 1e3 for start, end in _intervals(trace, "aten::mm")[1:])
    # Kineto's raw events: with the CUDA activity only, the kernels have no CPU op to hang on
    kernels = sorted((event for event in cupti.profiler.kineto_results.events()
                      if event.device_type() == torch.autograd.DeviceType.CUDA),
                     key=lambda event: event.start_ns())
    kernel_us = sorted(event.duration_ns() / 1e3 for event in kernels[1:])[-20:]
    assert len(native_us) == 20 and len(kernel_us) == 20
    print("native", native_us[:3], "cupti", kernel_us[:3])
    for measured, kernel in zip(native_us, kernel_us):
        assert kernel >= 50
        assert abs(measured - kernel) <= 0.02 * kernel


def test_a_second_profile_creates_no_event(library):
    x = torch.ones(1024, device="cuda")
    for _ in range(2):
        with nbprof.profile(recorder="native"):
            for _ in range(200):
                x = x + 1
        created = library.created_events()
    with nbprof.profile(recorder="native") as prof:
        for _ in range(200):
            x = x + 1
    assert library.created_events() == created
    assert len(_intervals(prof.trace, "aten::add")) == 200


def test_graph_capture_records_no_event_and_the_next_kernel_runs(library):
    x = torch.ones(1024, device="cuda")
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up before capture, as torch's docs say
        x * 3
    torch.cuda.current_stream().wait_stream(side)
    with nbprof.profile(recorder="native") as prof:
        with torch.cuda.graph(graph):
            y = x * 3
        graph.replay()
        z = x + 1
        torch.cuda.synchronize()  # a pending error from capture would surface here
    assert torch.equal(y, x * 3) and torch.equal(z, x + 1)
    trace = prof.trace
    assert "aten::mul" in trace.names and not _intervals(trace, "aten::mul")
    assert len(_intervals(trace, "aten::add")) == 1
    assert any("captured a CUDA graph" in note for note in trace.meta["notes"])


def test_autograd_device_thread_has_gpu_intervals(library):
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 1)).cuda()
    x = torch.randn(64, 256, device="cuda")
    with nbprof.profile(recorder="native") as prof:
        model(x).sum().backward()
    trace = prof.trace
    backward_lanes = {int(trace.thread[op]) for op in trace.gpu_launch
                      if "Backward" in trace.names[trace.name_id[op]]}
    assert backward_lanes and 0 not in backward_lanes, "backward ran on autograd's device thread"


def test_anchor_error_and_idle_placement(library):
    x = torch.ones(1024, device="cuda")
    torch.cuda.synchronize()
    with nbprof.profile(recorder="native") as prof:
        for _ in range(20):
            x.add_(1)
            torch.cuda.synchronize()
    trace = prof.trace
    clock = trace.meta["gpu_clock"][torch.cuda.current_device()]
    print("gpu clock", clock)
    assert clock["anchors"] == 2 and 0 <= clock["anchor_error_ns"] <= ANCHOR_ERROR_NS
    adds = [row for row in range(len(trace)) if trace.names[trace.name_id[row]] == "aten::add_"]
    events = trace.gpu_kind == KIND_OP
    starts = dict(zip(trace.gpu_launch[events].tolist(), trace.gpu_start_ns[events].tolist()))
    assert len(adds) == 20 and all(starts[row] >= trace.start_ns[row] - 5_000 for row in adds)


needs_cupti = pytest.mark.skipif(not kernels_supported(), reason="this torch has no CUPTI")


def _kernel_launchers(trace):
    """(kernel name, the name of the op it is linked to), in the kernels' start order."""
    rows = np.flatnonzero(trace.gpu_kind == KIND_KERNEL)
    return [(trace.names[trace.gpu_name_id[k]], trace.names[trace.name_id[trace.gpu_launch[k]]])
            for k in rows]


def _is_kernel(event) -> bool:
    """A Kineto GPU row is a kernel, as nbprof classifies it: torch 2.11's _KinetoEvent has no
    activity_type() (2.13's has), so there the name tells, as in kineto_cpu.read_kineto_records."""
    activity = getattr(event, "activity_type", None)
    return device_kind(activity() if activity else "", event.name(),
                       bool(event.is_user_annotation())) == "kernel"


def _workload(model, x, a, b):
    for _ in range(5):
        torch.mm(a, b)
    with torch.autograd.profiler.record_function("step"):
        model(x).sum().backward()
    torch.cuda.synchronize()


@needs_cupti
def test_kernels_land_on_the_ops_torch_profiler_links_them_to(library):
    """The same workload under torch.profiler (CPU+CUDA: torch's own correlation) and under
    the native recorder with kernels (CUDA-only Kineto, linked by thread and time): every kernel
    in the same order, on an op of the same name; autograd's thread included."""
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 1)).cuda()
    x = torch.randn(64, 256, device="cuda")
    a, b = _matrices()
    _workload(model, x, a, b)  # warm: module loads, cuBLAS handles
    activity = torch.profiler.ProfilerActivity
    with torch.profiler.profile(activities=[activity.CPU, activity.CUDA],
                                experimental_config=_ExperimentalConfig(
                                    profile_all_threads=True)) as reference:
        _workload(model, x, a, b)
    expected = []
    by_id = {}
    for event in reference.profiler.kineto_results.events():
        if event.device_type() == torch.autograd.DeviceType.CPU and \
                not is_runtime_call(event.name()):  # a call's id is CUPTI's: another space
            by_id.setdefault(event.correlation_id(), event.name())
    for event in sorted(reference.profiler.kineto_results.events(), key=lambda e: e.start_ns()):
        if event.device_type() == torch.autograd.DeviceType.CUDA and _is_kernel(event):
            expected.append((event.name(), by_id.get(event.linked_correlation_id(), "?")))
    with nbprof.profile(recorder="native", kernels=True) as prof:
        _workload(model, x, a, b)
    trace = prof.trace
    assert trace.meta["recorder"] == "native" and trace.meta["kernels"], trace.meta["notes"]
    found = _kernel_launchers(trace)
    print(f"{len(found)} kernels; first: {found[:3]}; own CUDA calls left out: "
          f"{trace.meta['own_cuda_calls']}")
    assert found == expected
    names = np.asarray(trace.names, dtype=object)
    kernels = np.flatnonzero(trace.gpu_kind == KIND_KERNEL)
    # every kernel's call is a launch: the runtime's or the driver's, with its Ex forms (cuBLAS
    # launches Hopper's cluster kernels through cuLaunchKernelEx)
    calls = set(names[trace.name_id[trace.gpu_call[kernels]]])
    assert calls and all(re.match(r"cu(da)?Launch\w*Kernel", call) for call in calls), calls
    # the observer's own calls (2 per event, 4 per op) are none of the rows
    rows = names[trace.name_id]
    assert not (rows == "cudaEventRecord").any() and not (rows == "cudaStreamIsCapturing").any()
    lanes = {int(trace.thread[trace.gpu_launch[k]]) for k in kernels}
    assert lanes - {0}, "autograd's device thread launched kernels too"


@needs_cupti
def test_events_and_kernels_agree_per_op_and_kernels_none_records_them(library):
    a, b = _matrices()
    with nbprof.profile(recorder="native") as prof:  # kernels=None: CUPTI where torch has it
        for _ in range(20):
            torch.mm(a, b)  # queued: each waits for the previous one
        torch.cuda.synchronize()
    trace = prof.trace
    assert trace.meta["kernels"]
    print(trace.gpu_agreement())
    kernels = np.flatnonzero(trace.gpu_kind == KIND_KERNEL)
    ops = trace.gpu_launch[kernels]
    events = np.flatnonzero(trace.gpu_kind == KIND_OP)
    event_ns = dict(zip(trace.gpu_launch[events].tolist(),
                        (trace.gpu_end_ns[events] - trace.gpu_start_ns[events]).tolist()))
    mm = sorted(set(ops.tolist()), key=lambda op: trace.start_ns[op])
    assert len(mm) == 20 and {trace.names[trace.name_id[op]] for op in mm} == {"aten::mm"}
    for op in mm[1:]:  # the first starts on an idle GPU: its events hold its launch too
        own = kernels[ops == op]  # cuBLAS may run more than one kernel for an mm
        span_ns = int(trace.gpu_end_ns[own].max() - trace.gpu_start_ns[own].min())
        assert span_ns >= 50_000 and abs(event_ns[op] - span_ns) <= 0.02 * span_ns


def test_kernels_false_records_events_only_and_says_so(library):
    x = torch.ones(1024, device="cuda")
    with nbprof.profile(recorder="native", kernels=False) as prof:
        for _ in range(10):
            x = x + 1
    trace = prof.trace
    assert not (trace.gpu_kind == KIND_KERNEL).any() and len(_intervals(trace, "aten::add")) == 10
    assert any("kernels=False" in note for note in trace.meta["notes"])


@needs_cupti
def test_torch_profiler_inside_a_native_block_with_kernels_takes_over_cleanly(library):
    x = torch.ones(1024, device="cuda")
    with pytest.warns(RuntimeWarning):
        with nbprof.profile(recorder="native", kernels=True) as prof:
            x = x + 1
            with torch.profiler.profile() as inner:
                x = x + 1
    assert any(event.name == "aten::add" for event in inner.events())
    assert len(_intervals(prof.trace, "aten::add")) == 1
    with nbprof.profile(recorder="native", kernels=True) as again:  # nothing was left on
        x = x + 1
    assert len(_intervals(again.trace, "aten::add")) == 1 and again.trace.meta["kernels"]
