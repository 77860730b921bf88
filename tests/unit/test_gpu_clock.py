"""The GPU clock of the CUDA-event path (nbprof/record/gpu_clock.py through legacy_records_to_trace), on
fake records shaped like torch 2.13's legacy ones (legacy_fakes.py): the measured anchor error,
drift between a start and a stop anchor, float32 elapsed times far from the anchor, and the
ranges that must get CPU time only."""

import numpy as np
import pytest
from legacy_fakes import ANCHOR, EPOCH_NS, Recording

from nbprof.record.convert import legacy_records_to_trace
from nbprof.model import Thread

STARTING = Thread(pid=4242, tid=4242, name="MainThread")
SECOND = 1_000_000_000
MINUTES_10 = 600 * SECOND


def convert(recording):
    return legacy_records_to_trace(list(recording.lists.values()), anchor_name=ANCHOR,
                                   base_time_ns=EPOCH_NS, starting_thread=STARTING)


def gpu_starts(trace):
    """name -> GPU start (ns) of its op's event interval."""
    return {trace.names[trace.name_id[op]]: int(start)
            for op, start in zip(trace.gpu_launch, trace.gpu_start_ns)}


def test_a_late_anchor_is_measured_and_its_device_shifted_back_onto_the_cpu_clock():
    rec = Recording()
    rec.anchor(0, 1_000, latency_ns=3_000)  # its event completed 3 us after its CPU time
    rec.anchor(1, 1_200, latency_ns=1_000)
    # On an idle GPU an event completes just after it is recorded (here 500 ns), the pop's too.
    rec.op("aten::add", 10_000, 12_000, gpu=(10_500, 12_500))
    rec.op("aten::mm", 20_000, 21_000, gpu=(20_500, 90_000))
    rec.op("aten::relu", 22_000, 23_000, gpu=(90_000, 95_000))  # queued: no constraint
    rec.op("aten::mul", 30_000, 31_000, gpu=(30_500, 31_500), device=1)
    trace = convert(rec)
    clock = trace.meta["gpu_clock"]
    # An event cannot complete before it is recorded: max(CPU time - GPU time) over the
    # records is the part of the anchor's latency that the records prove.
    assert clock[0]["anchor_error_ns"] == pytest.approx(2_500, abs=5)
    assert clock[1]["anchor_error_ns"] == pytest.approx(500, abs=5)
    starts = gpu_starts(trace)
    for name, true_start, slack in [("aten::add", 10_500, 500), ("aten::mm", 20_500, 500),
                                    ("aten::relu", 90_000, 500), ("aten::mul", 30_500, 500)]:
        # Left: what is unprovable (the idle GPU's own 500 / 800 ns); placement is ~250 ns.
        assert starts[name] == pytest.approx(true_start - slack, abs=260), name
    assert not any("late" in note for note in trace.meta["notes"])  # 2.5 us: as expected
    for event in trace.events:  # no GPU interval starts before its op was recorded
        for kernel in event.kernels:
            assert kernel.interval.start_ns >= event.cpu_interval.start_ns


def test_clock_drift_is_fitted_between_the_start_and_stop_anchors_over_ten_minutes():
    rec = Recording(drift_ppm=40.0)  # the GPU's clock runs 40 ppm fast: 24 ms in 10 minutes
    rec.anchor(0, 1_000)
    step = 50_000_000
    for start in range(SECOND, MINUTES_10, step):  # an op every 50 ms, the GPU idle between
        rec.op("aten::mm", start, start + 20_000, gpu=(start + 500, start + 20_500))
    rec.anchor(0, MINUTES_10 + 1_000)  # placed at stop, after the final synchronize
    trace = convert(rec)
    # (float32 rounding of 12k equal 50 ms steps adds a linear 0.01 ppm: the fit takes it too)
    assert trace.meta["gpu_clock"][0]["drift_ppm"] == pytest.approx(40.0, abs=0.05)
    assert trace.meta["gpu_clock"][0]["anchors"] == 2
    (mm_id,) = [i for i, name in enumerate(trace.names) if name == "aten::mm"]
    true_start = trace.start_ns + 500  # every op's event completed 500 ns after its push
    gpu_start = trace.gpu_start_ns[trace.gpu_launch.argsort()]
    error_ns = gpu_start - (true_start - 500)  # the idle GPU's 500 ns cannot be proven
    assert abs(error_ns).max() < 1_000  # a microsecond, 10 minutes in
    durations = trace.gpu_end_ns - trace.gpu_start_ns
    assert abs(durations - 20_000).max() < 5  # 20 us of GPU time, to the ns despite the drift
    assert (trace.name_id == mm_id).sum() == len(durations)


def test_a_single_anchor_keeps_microseconds_far_from_it_despite_float32_elapsed_times():
    # cudaEventElapsedTime returns float32 ms: 5 minutes from the anchor that is a 31 us step.
    rec = Recording()
    rec.anchor(0, 1_000)
    # A loop's steps jitter by microseconds (so float32's rounding errors do not all lean one
    # way, as they would for identical steps: the drift fit absorbs that case, see above).
    jitter = np.random.default_rng(0).integers(0, 5_000, 3_000)
    for index, start in enumerate(range(SECOND, 300 * SECOND, 100_000_000)):
        start += int(jitter[index])
        rec.op("aten::mm", start, start + 20_000, gpu=(start + 2_500, start + 22_500))
        rec.op("aten::add", start + 30_000, start + 31_000, gpu=(start + 30_700, start + 31_700))
    trace = convert(rec)
    mm = trace.name_id[trace.gpu_launch] == trace.names.index("aten::mm")
    expected = trace.start_ns[trace.gpu_launch] + 2_500 - 700  # add's 700 ns slack is unproven
    error_ns = trace.gpu_start_ns[mm] - expected[mm]
    assert trace.start_ns.max() > 299 * SECOND and abs(error_ns).max() < 1_000
    assert trace.meta["gpu_clock"][0]["drift_ppm"] is None
    assert any("one anchor" in note for note in trace.meta["notes"])


def test_a_device_anchored_only_at_stop_is_placed_backwards_from_that_anchor():
    rec = Recording()
    rec.anchor(0, 1_000)
    rec.op("aten::mm", 5_000, 6_000, gpu=(5_400, 9_000), device=1)  # no context at start
    rec.anchor(1, 50_000)
    (kernel,) = convert(rec).kernels
    assert kernel.device == 1
    assert kernel.interval == pytest.approx((5_000, 8_600), abs=260)  # 400 ns slack unproven


def test_a_device_first_used_inside_the_block_gets_its_drift_fitted_from_its_first_event():
    # What an H200 showed for `nbprof run` of a script that makes its first CUDA tensor: the
    # device is anchored at stop only. With 40 ppm of drift, a single anchor 10 s later put the
    # first ops 400 us off; its first event (the device had no context: idle) is the start anchor.
    rec = Recording(drift_ppm=40.0)
    step = 100_000_000
    for start in range(SECOND, 11 * SECOND, step):  # an op every 100 ms, the GPU idle between
        rec.op("aten::mm", start, start + 20_000, gpu=(start + 500, start + 20_500))
    rec.anchor(0, 11 * SECOND + 1_000)
    trace = convert(rec)
    clock = trace.meta["gpu_clock"][0]
    assert clock["first_event_anchor"] and clock["anchors"] == 2
    assert clock["drift_ppm"] == pytest.approx(40.0, abs=0.5)
    error_ns = trace.gpu_start_ns[trace.gpu_launch.argsort()] - trace.start_ns
    # 400 us with one anchor; now what the two anchors' latencies differ by (0.5 and 2 us)
    assert abs(error_ns).max() < 2_000, abs(error_ns).max()
    assert any("first used inside the block" in note for note in trace.meta["notes"])
    assert not any("one anchor" in note for note in trace.meta["notes"])


def test_async_ranges_and_cross_thread_pops_get_cpu_time_only_in_one_note():
    rec = Recording()
    rec.anchor(0, 1_000)
    rec.op("c10d::allreduce_", 5_000, 40_000, gpu=(5_500, 30_000), is_async=True)
    rec.op("work", 6_000, 50_000, gpu=(6_500, 45_000), pop_thread=2)  # ended by another thread
    rec.op("aten::mm", 7_000, 8_000, gpu=(7_500, 20_000))
    trace = convert(rec)
    timed = {trace.names[trace.name_id[op]] for op in trace.gpu_launch}
    assert timed == {"aten::mm"}
    assert {trace.names[i] for i in trace.name_id} == {"c10d::allreduce_", "work", "aten::mm"}
    work = [e for e in trace.events if e.name == "work"][0]
    assert work.cpu_interval.elapsed_ns() == 44_000
    notes = [note for note in trace.meta["notes"] if "CPU time only" in note]
    assert len(notes) == 1 and notes[0].startswith("2 ")


def test_an_op_whose_events_end_before_they_start_gets_no_interval_never_a_clamped_one():
    rec = Recording()
    rec.anchor(0, 1_000)
    # The pop's event went on another stream (the current stream changed inside the op) and
    # completed before the push's: a negative interval is not GPU time.
    rec.op("switch_streams", 5_000, 9_000, gpu=(20_000, 6_000))
    rec.op("aten::mm", 10_000, 11_000, gpu=(20_000, 25_000))
    trace = convert(rec)
    assert [trace.names[trace.name_id[op]] for op in trace.gpu_launch] == ["aten::mm"]
    assert (trace.gpu_end_ns > trace.gpu_start_ns).all()
    assert any("ended before" in note for note in trace.meta["notes"])


def test_warm_up_records_before_the_anchor_are_the_profilers_not_the_users():
    rec = Recording()
    for index in range(5):
        rec.op("nbprof::gpu_clock_warmup", 100 + 100 * index, 150 + 100 * index,
               gpu=(5_000 + index, 5_000 + index))
    rec.anchor(0, 1_000)
    rec.op("aten::mm", 5_000, 6_000, gpu=(5_500, 9_000))
    trace = convert(rec)
    assert trace.names == ["aten::mm"] and len(trace.kernels) == 1


def test_a_very_late_anchor_is_said_in_a_note():
    rec = Recording()
    rec.anchor(0, 1_000, latency_ns=200_000)  # e.g. the first event on a cold device
    rec.op("aten::add", 300_000, 301_000, gpu=(300_500, 301_500))
    trace = convert(rec)
    assert trace.meta["gpu_clock"][0]["anchor_error_ns"] == pytest.approx(199_500, abs=5)
    assert any("199.5 us late" in note for note in trace.meta["notes"])


def test_an_event_torch_will_not_time_breaks_no_chain():
    rec = Recording()
    rec.anchor(0, 1_000)
    rec.op("aten::mm", 5_000, 6_000, gpu=(5_500, 9_000))
    rec.op("captured", 10_000, 11_000, gpu=(12_000, 13_000))  # recorded during graph capture
    rec.op("aten::relu", 14_000, 15_000, gpu=(14_500, 16_000))
    rec.lists[1][-4].captured = True  # the push of "captured"
    trace = convert(rec)
    assert set(gpu_starts(trace)) == {"aten::mm", "aten::relu"}
    assert gpu_starts(trace)["aten::relu"] == pytest.approx(14_000, abs=260)  # 500 ns slack
    assert trace.meta["gpu_clock"][0]["untimed_events"] == 1
    assert any("could not time" in note for note in trace.meta["notes"])
