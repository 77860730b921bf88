"""nbprof.profile on the real torch here (CPU build): what a user checks after a block."""

import threading
import time

import pytest
import torch

import nbprof
from kernels.train_mlp import train
from nbprof.record.profiler import is_active


def add_ones(count, size=16):
    x = torch.zeros(size)
    for _ in range(count):
        x = x + 1
    return x


def events_named(trace, name):
    return [event for event in trace.events if event.name == name]


@pytest.fixture(scope="module")
def training_trace():
    before_ns = time.time_ns()
    with nbprof.profile() as prof:
        train(steps=2)
    return prof.trace, before_ns, time.time_ns()


def test_training_steps_are_recorded_nested_with_counts(training_trace):
    trace, _, _ = training_trace
    averages = {row.name: row for row in trace.key_averages()}
    # 3 hidden layers + the output layer, 2 steps: 8 linear layers forward.
    assert averages["aten::linear"].count == 8
    assert averages["aten::addmm"].count == 8
    for addmm in events_named(trace, "aten::addmm"):
        assert trace.event(addmm.parent).name == "aten::linear"
        assert addmm.depth == trace.event(addmm.parent).depth + 1
    linear = events_named(trace, "aten::linear")[0]
    assert 0 <= linear.self_cpu_time_total < linear.cpu_time_total
    assert averages["aten::mm"].count > 0  # backward ops are there too


def test_times_are_ns_from_a_wall_clock_base_inside_the_block(training_trace):
    trace, before_ns, after_ns = training_trace
    base = trace.meta["base_time_ns"]
    assert before_ns <= base <= after_ns
    assert trace.start_ns.min() >= 0
    assert base + trace.end_ns.max() <= after_ns
    assert (trace.end_ns >= trace.start_ns).all()


def test_meta_says_cpu_only_and_all_threads(training_trace):
    trace, _, _ = training_trace
    meta = trace.meta
    assert meta["backend"] == {"native": "native-cpu", "torch": "kineto-cpu"}[meta["recorder"]] and meta["cuda"] is False
    assert meta["all_threads"] is True
    assert any("CPU only" in note for note in meta["notes"])
    assert not trace.has_gpu


def test_the_starting_thread_is_the_first_lane_with_os_id_and_name(training_trace):
    trace, _, _ = training_trace
    main = trace.threads[0]
    assert main.tid == threading.get_native_id()
    assert main.name == threading.current_thread().name


def test_every_thread_running_torch_ops_gets_a_lane_with_its_name():
    started = threading.Event()
    go = threading.Event()

    def waiting_worker():
        started.set()
        go.wait()
        add_ones(7)

    early = threading.Thread(target=waiting_worker, name="early-worker")
    early.start()  # alive before profiling starts
    started.wait()
    with nbprof.profile() as prof:
        late = threading.Thread(target=add_ones, args=(5,), name="late-worker")
        late.start()
        late.join()  # started and finished inside the block
        go.set()
        early.join()
        add_ones(3)
    lanes = {thread.name: thread for thread in prof.trace.threads}
    assert lanes["early-worker"].tid == early.native_id
    assert lanes["late-worker"].tid == late.native_id
    adds_per_thread = {}
    for add in events_named(prof.trace, "aten::add"):
        adds_per_thread[add.thread.name] = adds_per_thread.get(add.thread.name, 0) + 1
    main = threading.current_thread().name
    assert adds_per_thread == {"early-worker": 7, "late-worker": 5, main: 3}


def test_shapes_and_stacks_when_asked():
    with nbprof.profile(record_shapes=True, with_stack=True) as prof:
        add_ones(2, size=5)
    add = events_named(prof.trace, "aten::add")[0]
    assert add.shapes[0] == [5]
    assert add.stack is not None and "add_ones" in add.stack[0]
    # An op inside an op has the same Python stack as its parent.
    to_copy = [event for event in prof.trace.events if event.name == "aten::_to_copy"][0]
    assert to_copy.stack == prof.trace.event(to_copy.parent).stack
    # The Python frames are the user's, not nbprof's own enter/exit machinery.
    assert not [name for name in prof.trace.names if "nbprof" in name]
    with nbprof.profile() as plain:
        add_ones(2)
    assert events_named(plain.trace, "aten::add")[0].shapes is None


def test_record_function_labels_hold_the_ops_inside_them():
    with nbprof.profile() as prof:
        with torch.profiler.record_function("forward pass"):
            add_ones(2)
    (label,) = events_named(prof.trace, "forward pass")
    assert label.category == "user_annotation" and label.depth == 0
    for add in events_named(prof.trace, "aten::add"):
        assert add.parent == label.id


def test_an_empty_block_gives_an_empty_trace_that_still_summarises():
    with nbprof.profile() as prof:
        pass
    assert len(prof.trace) == 0 and prof.trace.meta["backend"] in ("native-cpu", "kineto-cpu")
    assert prof.trace.key_averages() == []
    assert "Self CPU time total" in prof.trace.table()


def test_nested_profile_raises_and_the_outer_keeps_recording():
    with nbprof.profile() as outer:
        add_ones(2)
        with pytest.raises(RuntimeError, match="not reentrant"):
            with nbprof.profile():
                pass
        assert is_active()
        add_ones(3)
    assert not is_active()
    assert len(events_named(outer.trace, "aten::add")) == 5


def test_inside_torch_profiler_is_a_clear_error():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        with pytest.raises(RuntimeError, match="torch's profiler is already active"):
            with nbprof.profile():
                pass
    assert not is_active()


@pytest.mark.parametrize("error", [ValueError("boom"), KeyboardInterrupt()])
def test_an_error_in_the_block_propagates_and_keeps_what_was_recorded(error):
    prof = nbprof.profile()
    with pytest.raises(type(error)):
        with prof:
            add_ones(4)
            raise error
    assert not is_active() and not torch.autograd._profiler_enabled()
    assert len(events_named(prof.trace, "aten::add")) == 4
    with nbprof.profile() as again:  # the profiler can start again
        add_ones(1)
    assert len(events_named(again.trace, "aten::add")) == 1


def test_cuda_true_without_a_gpu_says_what_to_do():
    with pytest.raises(RuntimeError, match="cuda=None"):
        with nbprof.profile(cuda=True):
            pass
    assert not is_active()
    with pytest.raises(TypeError, match="cuda must be"):
        nbprof.profile(cuda="yes")


def test_a_users_thread_profile_hook_still_runs_and_is_restored():
    calls = []

    def user_hook(frame, event, arg):
        if event == "call":
            calls.append(threading.current_thread().name)

    threading.setprofile(user_hook)
    try:
        with nbprof.profile() as prof:
            worker = threading.Thread(target=add_ones, args=(2,), name="hooked-worker")
            worker.start()
            worker.join()
        assert threading.getprofile() is user_hook
        assert "hooked-worker" in calls  # nbprof's name probe handed over to the user's hook
        assert "hooked-worker" in [thread.name for thread in prof.trace.threads]
    finally:
        threading.setprofile(None)
