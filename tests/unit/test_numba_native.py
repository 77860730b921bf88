"""numba.cuda launches as the native recorder's own ranges (ranges.h): real kernels under numba's
simulator (tests/conftest.py), real torch ops, the real native library. Each test reads what the
native recorder itself recorded (its real ``stop`` wrapped to keep the records) as well as the
Trace a user gets; the torch path (recorder="torch") still gives the same slices."""

import threading

import numpy as np
import pytest
import torch

import nbprof
from nbprof.record import native
from nbprof.record.native.records import FLAG_ENDED, NativeLibrary

numba_cuda = pytest.importorskip("numba.cuda")
from numba.cuda.core import config as cuda_config  # noqa: E402

from kernels import numba_kernels, torch_numba  # noqa: E402
from tests.unit.test_numba_launches import run_in_real_mode  # noqa: E402

pytestmark = pytest.mark.skipif(not cuda_config.ENABLE_CUDASIM,
                                reason="the CPU tests run numba's simulator")


@pytest.fixture
def native_records(monkeypatch):
    """The records each native profile read (its real stop, kept)."""
    if native.load() is None:
        pytest.skip(f"the native recorder does not build here: {native.why_not()}")
    kept = []
    stop = NativeLibrary.stop

    def keeping_stop(self):
        records = stop(self)
        kept.append(records)
        return records

    monkeypatch.setattr(NativeLibrary, "stop", keeping_stop)
    return kept


def rows_named(records, name):
    return [row for row in range(len(records)) if records.names[records.name[row]] == name]


def numba_events(trace, prefix="numba::"):
    return [event for event in trace.events if event.name.startswith(prefix)]


def test_a_launch_is_a_native_range_nested_among_its_threads_ops(native_records):
    with nbprof.profile(recorder="native") as prof:
        with torch.autograd.profiler.record_function("step"):
            torch_numba.mixed_step()  # torch ops, the saxpy launch, torch ops
    records = native_records[-1]
    (launch_row,) = rows_named(records, "numba::saxpy")
    (step_row,) = rows_named(records, "step")
    assert records.thread[launch_row] == records.thread[step_row]
    assert records.os_tids[records.thread[launch_row]] == threading.get_native_id()
    assert records.depth[launch_row] == records.depth[step_row] + 1  # inside the user's range
    assert records.flags[launch_row] & FLAG_ENDED
    # in the thread's own order: after torch made x, y and out, before it summed out
    same_thread = records.thread == records.thread[launch_row]
    names = [records.names[records.name[row]] for row in np.flatnonzero(same_thread)]
    at = names.index("numba::saxpy")
    assert "aten::empty_like" in names[:at] and "aten::sum" in names[at:]

    trace = prof.trace
    assert trace.meta["recorder"] == "native"
    (launch,) = numba_events(trace)
    (step,) = [event for event in trace.events if event.name == "step"]
    assert launch.parent == step.id
    assert trace.categories[trace.category[launch.id]] == "numba"
    assert launch.cpu_interval.start_ns == records.start_ns[launch_row]  # the native record's
    before = [e for e in trace.events if e.name == "aten::empty_like"]
    after = [e for e in trace.events if e.name == "aten::sum"]
    assert before[0].cpu_interval.end_ns <= launch.cpu_interval.start_ns
    assert after[0].cpu_interval.start_ns >= launch.cpu_interval.end_ns
    assert launch.args["arguments"] == "float32, float32[512], float32[512], float32[512]"
    (kernel,) = launch.kernels  # simulated: its run on the CPU, the native range's interval
    assert kernel.interval == launch.cpu_interval


@pytest.mark.parametrize("recorder", ["native", "torch"])
def test_each_launch_has_the_args_of_the_torch_path(recorder, native_records):
    with nbprof.profile(recorder=recorder) as prof:
        numba_kernels.run_saxpy()
        numba_kernels.run_matmul()
    assert prof.trace.meta["recorder"] == recorder
    saxpy, matmul = sorted(numba_events(prof.trace), key=lambda event: event.cpu_interval.start_ns)
    assert (saxpy.name, matmul.name) == ("numba::saxpy", "numba::tiled_matmul")
    assert saxpy.args["grid"] == [8, 1, 1] and saxpy.args["block"] == [64, 1, 1]
    assert matmul.args["grid"] == [2, 2, 1] and matmul.args["block"] == [16, 16, 1]
    assert saxpy.args["stream"] == "default" and saxpy.args["shared memory (bytes)"] == 0
    assert saxpy.args["function"] == "kernels.numba_kernels.saxpy"
    assert saxpy.args["launched at"].startswith(numba_kernels.__file__)
    assert all(prof.trace.categories[prof.trace.category[e.id]] == "numba"
               for e in (saxpy, matmul))
    # the native path's slices are its records; the torch path's come from the wrapper's clock
    recorded = rows_named(native_records[-1], "numba::saxpy") if native_records else []
    assert len(recorded) == (recorder == "native")


def test_a_worker_threads_launches_are_ranges_on_its_lane(native_records):
    worker_tid = []

    def work():
        worker_tid.append(threading.get_native_id())
        with torch.autograd.profiler.record_function("worker step"):
            numba_kernels.run_saxpy()
            numba_kernels.run_block_sum()

    with nbprof.profile(recorder="native") as prof:
        worker = threading.Thread(target=work, name="numba-worker")
        worker.start()
        worker.join()
        numba_kernels.run_block_sum()
    records = native_records[-1]
    (saxpy_row,) = rows_named(records, "numba::saxpy")
    assert records.os_tids[records.thread[saxpy_row]] == worker_tid[0]
    assert sorted(records.os_tids[records.thread[row]]
                  for row in rows_named(records, "numba::block_sum")) == \
        sorted([worker_tid[0], threading.get_native_id()])
    trace = prof.trace
    (saxpy,) = numba_events(trace, "numba::saxpy")
    assert saxpy.thread.tid == worker_tid[0] and saxpy.thread.name == "numba-worker"
    (worker_step,) = [event for event in trace.events if event.name == "worker step"]
    on_worker = [e for e in numba_events(trace) if e.thread.tid == worker_tid[0]]
    assert len(on_worker) == 2 and all(e.parent == worker_step.id for e in on_worker)
    (main_sum,) = [e for e in numba_events(trace, "numba::block_sum")
                   if e.thread.tid == threading.get_native_id()]
    assert main_sum.args["grid"] == [4, 1, 1]


def test_a_launch_that_raises_closes_its_range_and_the_next_profile_runs(native_records):
    with pytest.raises(Exception) as raised:
        with nbprof.profile(recorder="native") as prof:
            try:
                numba_kernels.saxpy[1, 4](1.0)  # wrong argument count: numba's own error
            finally:
                torch.ones(3).add_(1)  # after the launch: not inside its range
    records = native_records[-1]
    (launch_row,) = rows_named(records, "numba::saxpy")
    assert records.flags[launch_row] & FLAG_ENDED
    (add_row,) = rows_named(records, "aten::add_")
    assert records.depth[add_row] == records.depth[launch_row] == 0
    (launch,) = numba_events(prof.trace)
    assert launch.args["raised"] == type(raised.value).__name__
    (add,) = [e for e in prof.trace.events if e.name == "aten::add_"]
    assert add.parent != launch.id and add.cpu_interval.start_ns >= launch.cpu_interval.end_ns

    with nbprof.profile(recorder="native") as again:  # the next cell records normally
        numba_kernels.run_saxpy()
    (launch,) = numba_events(again.trace)
    assert "raised" not in launch.args and len(rows_named(native_records[-1], "numba::saxpy")) == 1


def test_a_range_left_open_by_a_stop_ends_nothing_in_the_next_profile():
    """A range pushed in one session and popped after it stopped (a worker still launching when
    the profile ended) writes nothing into the next session's records."""
    library = native.load()
    if library is None:
        pytest.skip(f"the native recorder does not build here: {native.why_not()}")
    name, stream, push, pop = library.range_calls()
    kernel = name("numba::left_open")
    library.start()
    assert push(kernel, stream(0), -1) == 1
    first = library.stop()
    library.start()
    torch.ones(2)
    assert pop() == 0  # opened in the earlier session
    assert push(kernel, stream(0x7F00_0000_1230), -1) == 1 and pop() == 1
    second = library.stop()
    assert pop() == -1 and push(kernel, 0, -1) == 0 and pop() == 0  # nothing records now
    (left_open,) = rows_named(first, "numba::left_open")
    assert not first.flags[left_open] & FLAG_ENDED  # shown with no length, as an open op
    (closed,) = rows_named(second, "numba::left_open")
    assert second.flags[closed] & FLAG_ENDED and second.depth[closed] == 0
    assert second.end_ns[closed] >= second.start_ns[closed]


REAL_MODE = """
import numpy as np, torch, nbprof
from numba import cuda
from nbprof.record.native.records import FLAG_ENDED, NativeLibrary

kept, stop = [], NativeLibrary.stop
NativeLibrary.stop = lambda self: kept.append(stop(self)) or kept[-1]

@cuda.jit
def real_kernel(x):
    pass

with nbprof.profile(recorder="native") as prof:
    with torch.autograd.profiler.record_function("step"):
        try:
            real_kernel[2, 32](np.ones(64))  # compiles, then fails at the driver (no GPU)
        except Exception as error:
            raised = type(error).__name__
records = kept[-1]
names = [records.names[i] for i in records.name]
launch_row, step_row = names.index("numba::real_kernel"), names.index("step")
assert names.count("numba::real_kernel") == 1 and records.flags[launch_row] & FLAG_ENDED
assert records.depth[launch_row] == records.depth[step_row] + 1
(launch,) = [e for e in prof.trace.events if e.name == "numba::real_kernel"]
(compiling,) = [e for e in prof.trace.events if e.name == "numba::compile real_kernel"]
assert launch.cpu_interval.start_ns == records.start_ns[launch_row]
assert compiling.parent == launch.id and launch.args["raised"] == raised, launch.args
assert (launch.args["grid"], launch.args["block"]) == ([2, 1, 1], [32, 1, 1]), launch.args
print("ok")
"""


def test_real_modes_launch_path_records_a_native_range():
    """numba's real launch path (not the simulator) runs here up to the CUDA driver: its wrapper
    pushes and pops a native range around it (the path a GPU takes)."""
    if native.load() is None:
        pytest.skip(f"the native recorder does not build here: {native.why_not()}")
    run_in_real_mode(REAL_MODE)
