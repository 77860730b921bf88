"""legacy_records_to_trace on fake records that behave like torch's legacy CUDA-event records
(tests/unit/legacy_fakes.py), and on torch's own records in CPU mode."""

import pytest
from legacy_fakes import ANCHOR, ANCHOR_LATENCY_NS, EPOCH_NS, Recording

from nbprof.record.convert import legacy_records_to_trace
from nbprof.model import Thread

STARTING = Thread(pid=4242, tid=4242, name="MainThread")


def convert(recording, **options):
    return legacy_records_to_trace(list(recording.lists.values()), anchor_name=ANCHOR,
                                   base_time_ns=EPOCH_NS, starting_thread=STARTING, **options)


@pytest.fixture
def recording():
    rec = Recording()
    rec.anchor(0, 1_000)
    rec.anchor(1, 1_500)
    rec.op("aten::empty", 3_000, 3_400)  # a view/alloc op: no CUDA event
    rec.op("aten::mm", 5_000, 9_000, gpu=(5_300, 45_000))
    # Queued behind the mm: its GPU work starts long after its CPU side returned.
    rec.op("aten::relu", 10_000, 12_000, gpu=(45_000, 47_500))
    rec.op("aten::add", 13_000, 14_000, gpu=(13_400, 15_400), device=1)
    rec.op("aten::mul", 16_000, 17_000, gpu=(47_500, 48_000), pop_has_event=False)
    # Backward ops come in a second thread list (autograd's worker).
    rec.op("aten::mm_backward", 60_000, 70_000, gpu=(60_500, 90_000), thread=2)
    return rec


def gpu_of(trace, name):
    (event,) = [e for e in trace.events if e.name == name]
    return event, event.kernels


def test_each_op_with_cuda_gets_a_gpu_interval_on_the_cpu_clock(recording):
    trace = convert(recording)
    # Both devices' origins cancel. Of the anchor's 2 us latency the records prove all but the
    # smallest gap between a record's CPU time and its event (device 0: mm's push, 300 ns;
    # device 1: add's push, 400 ns): the device is shifted by the rest.
    left = {0: 300, 1: 400}
    expected = {"aten::mm": (5_300, 45_000, 0), "aten::relu": (45_000, 47_500, 0),
                "aten::add": (13_400, 15_400, 1), "aten::mm_backward": (60_500, 90_000, 0)}
    for name, (gpu_start, gpu_end, device) in expected.items():
        event, kernels = gpu_of(trace, name)
        assert len(kernels) == 1, name
        kernel = kernels[0]
        assert kernel.name == name and kernel.kind == "op" and kernel.device == device
        assert kernel.launch_id == event.id
        # ~250 ns: torch gives the records' epoch only as a double of us (see below).
        assert kernel.interval.start_ns == pytest.approx(gpu_start - left[device], abs=250)
        assert kernel.interval.end_ns == pytest.approx(gpu_end - left[device], abs=250)
        assert kernel.interval.elapsed_ns() == pytest.approx(gpu_end - gpu_start, abs=2)
    clock = trace.meta["gpu_clock"]
    assert clock[0]["anchor_error_ns"] == ANCHOR_LATENCY_NS - left[0]
    assert clock[1]["anchor_error_ns"] == ANCHOR_LATENCY_NS - left[1]


def test_cpu_intervals_are_exact_ns_apart_and_placed_from_the_base_time(recording):
    trace = convert(recording)
    mm, _ = gpu_of(trace, "aten::mm")
    empty, _ = gpu_of(trace, "aten::empty")
    # Differences between records are exact; the whole trace's placement against the wall
    # clock is as good as start_us(), a double of epoch microseconds (~0.25 us steps).
    assert mm.cpu_interval.elapsed_ns() == 4_000
    assert mm.cpu_interval.start_ns - empty.cpu_interval.start_ns == 2_000
    assert mm.cpu_interval.start_ns == pytest.approx(5_000, abs=250)
    assert trace.meta["base_time_ns"] == EPOCH_NS


def test_queued_op_starts_on_the_gpu_after_its_cpu_side_ended(recording):
    event, kernels = gpu_of(convert(recording), "aten::relu")
    assert kernels[0].interval.start_ns > event.cpu_interval.end_ns


def test_ops_without_cuda_events_or_with_a_missing_one_get_none_and_a_note(recording):
    trace = convert(recording)
    assert gpu_of(trace, "aten::empty")[1] == ()
    assert gpu_of(trace, "aten::mul")[1] == ()
    assert trace.meta["gpu_clock"][0]["untimed_events"] == 0  # mul's pop has none to time
    assert any("could not time" in note for note in trace.meta["notes"])
    assert ANCHOR not in trace.names  # anchors are the profiler's, not the user's
    assert len(trace) == 6


def test_backward_thread_gets_its_own_lane_and_the_starting_thread_its_os_id(recording):
    trace = convert(recording)
    assert trace.threads[0] == STARTING
    backward, _ = gpu_of(trace, "aten::mm_backward")
    assert backward.thread != STARTING and "autograd" in backward.thread.name
    assert gpu_of(trace, "aten::mm")[0].thread == STARTING


def test_a_range_that_ends_on_another_device_gets_no_interval_and_a_note():
    rec = Recording()
    rec.anchor(0, 1_000)
    rec.anchor(1, 1_200)
    # A record_function opened on device 0 and closed after `torch.cuda.set_device(1)`: torch
    # refuses to time events across devices.
    rec.op("switch", 5_000, 9_000, gpu=(5_300, 8_000))
    rec.lists[1][-1]._device = 1
    rec.op("aten::mm", 6_000, 7_000, gpu=(6_300, 7_500))
    trace = convert(rec)
    assert gpu_of(trace, "switch")[1] == ()
    assert len(gpu_of(trace, "aten::mm")[1]) == 1
    assert any("could not time" in note for note in trace.meta["notes"])


def test_a_device_without_anchor_gets_no_interval_and_a_note():
    rec = Recording()
    rec.anchor(0, 1_000)
    rec.op("aten::mm", 5_000, 9_000, gpu=(5_300, 8_000), device=1)
    trace = convert(rec)
    assert len(trace.kernels) == 0 and len(trace) == 1
    assert any("without an anchor" in note for note in trace.meta["notes"])


def test_an_op_still_open_at_stop_is_kept_with_no_length():
    rec = Recording()
    rec.anchor(0, 1_000)
    rec.op("aten::mm", 5_000, 9_000, gpu=(5_300, 8_000))
    rec.lists[1].pop()  # its pop never came: profiling stopped inside it
    trace = convert(rec)
    (event,) = trace.events
    assert event.cpu_interval.elapsed_ns() == 0 and event.kernels == ()
    assert any("not ended" in note for note in trace.meta["notes"])


def test_shapes_are_kept_when_asked(recording):
    event, _ = gpu_of(convert(recording, record_shapes=True), "aten::mm")
    assert event.shapes == [[4, 4], [4, 4]]
    event, _ = gpu_of(convert(recording), "aten::mm")
    assert event.shapes is None


def test_float32_elapsed_time_keeps_microseconds_a_second_from_the_anchor():
    rec = Recording()
    rec.anchor(0, 1_000)
    second = 1_000_000_000
    rec.op("aten::mm", second, second + 5_000, gpu=(second + 1_000, second + 6_000))
    (kernel,) = convert(rec).kernels
    # 1 us of the anchor's latency is proven (the mm's records), 1 us is not
    assert kernel.interval.start_ns == pytest.approx(second, abs=350)
    assert kernel.interval.elapsed_ns() == pytest.approx(5_000, abs=5)


def test_no_records_gives_an_empty_trace():
    trace = legacy_records_to_trace([], anchor_name=ANCHOR, base_time_ns=EPOCH_NS,
                                    starting_thread=STARTING)
    assert len(trace) == 0 and trace.meta["base_time_ns"] == EPOCH_NS


def test_real_legacy_records_of_this_torch_convert_on_the_cpu_side():
    # The same converter on torch's own legacy records (ProfilerState.CPU: no CUDA events here),
    # so the record methods it calls, push/pop pairing, the clock and shapes are torch's, not fakes'.
    import time

    import torch
    from torch._C._profiler import _ExperimentalConfig
    from torch.autograd import ProfilerConfig, ProfilerState

    config = ProfilerConfig(ProfilerState.CPU, True, False, False, False, False,
                            _ExperimentalConfig())
    before_ns = time.time_ns()
    torch._C._autograd._enable_profiler_legacy(config)
    try:
        with torch.autograd.profiler.record_function(ANCHOR):
            pass
        x = torch.ones(4, 4)
        torch.mm(x, x)
    finally:
        thread_lists = torch._C._autograd._disable_profiler_legacy()
    after_ns = time.time_ns()
    trace = legacy_records_to_trace(thread_lists, anchor_name=ANCHOR, base_time_ns=before_ns,
                                    starting_thread=STARTING, record_shapes=True)
    events = {event.name: event for event in trace.events}
    assert ANCHOR not in events and not trace.has_gpu and trace.threads == [STARTING]
    assert events["aten::mm"].shapes == [[4, 4], [4, 4]]
    assert events["aten::fill_"].parent == events["aten::ones"].id  # nested from push/pop pairs
    for event in trace.events:  # on time.time_ns's clock, inside the block
        assert 0 <= event.cpu_interval.start_ns <= event.cpu_interval.end_ns <= after_ns - before_ns
