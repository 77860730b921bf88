"""numba.cuda launches inside nbprof.profile, on numba's simulator (tests/conftest.py sets
NUMBA_ENABLE_CUDASIM=1 where there is no GPU): real kernels from kernels/, real threads, a real
SIGINT, numba-cuda's real compiler lock."""

import contextlib
import inspect
import os
import signal
import subprocess
import sys
import threading
import time
import types

import numpy as np
import pytest
import torch

import nbprof
from nbprof.record.profiler import is_active
from nbprof.record import numba_launches
from nbprof.record.numba_launches import NumbaLaunchRecorder

numba_cuda = pytest.importorskip("numba.cuda")
from numba.cuda.core import config as cuda_config  # noqa: E402

from kernels import numba_kernels, torch_numba  # noqa: E402

# The tests that launch kernels run numba's simulator; those on fakes of the GPU path run anywhere.
simulator = pytest.mark.skipif(not cuda_config.ENABLE_CUDASIM,
                               reason="the CPU tests run numba's simulator")


def launch_path():
    """The object numba runs for every launch (what the profile swaps while it records)."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    return FakeCUDAKernel.__dict__["__call__"]


def launch_line(run, kernel_name: str) -> str:
    """``file:line`` of the line in ``run`` that launches ``kernel_name``."""
    lines, first = inspect.getsourcelines(run)
    offset = next(i for i, line in enumerate(lines) if f"{kernel_name}[" in line)
    return f"{inspect.getsourcefile(run)}:{first + offset}"


def numba_events(trace, prefix="numba::"):
    return [event for event in trace.events if event.name.startswith(prefix)]


EXPECTED = {  # kernel -> (grid, block) that its run_* launches with its default sizes
    "saxpy": ((8, 1, 1), (64, 1, 1)),
    "tiled_matmul": ((2, 2, 1), (16, 16, 1)),
    "block_sum": ((4, 1, 1), (128, 1, 1)),
    "stencil_2d": ((2, 2, 1), (16, 16, 1)),
}


@simulator
def test_every_kernel_is_a_slice_with_its_launch_configuration_and_line():
    before = launch_path()
    with nbprof.profile() as prof:  # numba only: no torch op in the block
        numba_kernels.run_all()
    assert launch_path() is before
    trace = prof.trace
    by_name = {}
    for event in numba_events(trace):
        by_name.setdefault(event.name, []).append(event)
    assert set(by_name) == {f"numba::{name}" for name in EXPECTED}
    assert len(by_name["numba::stencil_2d"]) == 2  # two Jacobi steps
    for name, (grid, block) in EXPECTED.items():
        event = by_name[f"numba::{name}"][0]
        assert event.args["grid"] == list(grid) and event.args["block"] == list(block)  # as Kineto's
        assert event.args["stream"] == "default"
        run = numba_kernels.RUNS[name]
        assert event.args["launched at"] == launch_line(run, name)
        assert event.thread.tid == threading.get_native_id()
        # the simulated GPU interval is the launch's own CPU interval, linked to it
        (kernel,) = event.kernels
        assert kernel.interval == event.cpu_interval and kernel.name == event.name
    saxpy = by_name["numba::saxpy"][0]
    assert saxpy.args["arguments"] == "float32, float32[512], float32[512], float32[512]"
    assert by_name["numba::tiled_matmul"][0].args["arguments"] == ", ".join(["float32[32, 32]"] * 3)
    assert any("GPU timings are simulated" in note for note in trace.meta["notes"])


@simulator
def test_the_details_pane_shows_a_launchs_configuration_on_its_slice_and_its_gpu_interval():
    from nbprof.notebook.details import details_html, gpu_details_html

    with nbprof.profile() as prof:
        numba_kernels.run_saxpy()
    trace = prof.trace
    (launch,) = numba_events(trace)
    (gpu_row,) = np.flatnonzero(trace.gpu_launch == launch.id).tolist()
    assert trace.gpu_args[gpu_row]["grid"] == [8, 1, 1]  # an integer list, as Kineto stores it
    line = launch_line(numba_kernels.RUNS["saxpy"], "saxpy")
    for html in (details_html(trace, launch.id), gpu_details_html(trace, gpu_row)):
        for expected in (">grid<", "[8, 1, 1]", ">block<", "[64, 1, 1]", ">stream<", "default",
                         ">shared memory (bytes)<", "<code>0</code>", ">arguments<",
                         "float32, float32[512], float32[512], float32[512]", ">launched at<", line):
            assert expected in html, expected


@simulator
def test_numba_and_torch_in_one_block_nest_and_order():
    with nbprof.profile() as prof:
        with torch.autograd.profiler.record_function("step"):
            torch_numba.mixed_step()
    events = prof.trace.events
    (step,) = [event for event in events if event.name == "step"]
    (launch,) = numba_events(prof.trace)
    assert launch.parent == step.id  # nested under the user's annotation by time
    torch_ops = [event for event in events if event.name.startswith("aten::")]
    assert any(op.cpu_interval.end_ns <= launch.cpu_interval.start_ns for op in torch_ops)
    assert any(op.cpu_interval.start_ns >= launch.cpu_interval.end_ns for op in torch_ops)
    assert launch.args["arguments"] == "float32, float32[512], float32[512], float32[512]"


@simulator
def test_findings_on_a_simulator_trace_say_simulated_and_blame_no_sync():
    # the kernel runs inside its launch; the quick aten::item after it waited for no GPU. It was
    # "the CPU blocked in aten::item until the GPU drained, then queued nothing for 1.071s"
    with nbprof.profile() as prof:
        torch_numba.mixed_step()
        time.sleep(0.05)  # a pause with no op: the (simulated) GPU idles while Python runs
        torch_numba.mixed_step()
    trace = prof.trace
    assert "simulator" in trace.meta["simulated"]
    said = trace.findings()
    assert said[0].startswith("Simulated: numba.cuda simulator (NUMBA_ENABLE_CUDASIM=1) ran the kernels")
    assert not any("blocked in" in line or "waiting on a sync" in line for line in said)
    assert all(row["idle_sync_us"] == 0 for row in trace.steps().to_dict("records"))
    assert any(line.startswith("Simulated GPU busy") for line in said)


@simulator
def test_a_worker_threads_launch_is_on_that_threads_lane():
    worker_tid = []

    def work():
        worker_tid.append(threading.get_native_id())
        numba_kernels.run_saxpy()

    with nbprof.profile() as prof:
        worker = threading.Thread(target=work, name="numba-worker")
        worker.start()
        worker.join()
        numba_kernels.run_block_sum()
    saxpy, = numba_events(prof.trace, "numba::saxpy")
    block_sum, = numba_events(prof.trace, "numba::block_sum")
    assert saxpy.thread.tid == worker_tid[0] and saxpy.thread.name == "numba-worker"
    assert block_sum.thread.tid == threading.get_native_id()
    assert prof.trace.threads.index(saxpy.thread) != prof.trace.threads.index(block_sum.thread)


@simulator
def test_launch_path_restored_when_the_block_raises():
    before = launch_path()
    with pytest.raises(ValueError, match="in the block"):
        with nbprof.profile() as prof:
            numba_kernels.run_saxpy()
            raise ValueError("in the block")
    assert launch_path() is before and not is_active()
    assert len(numba_events(prof.trace)) == 1


@simulator
def test_launch_path_restored_when_a_launch_raises():
    before = launch_path()
    with pytest.raises(Exception):
        with nbprof.profile() as prof:
            numba_kernels.saxpy[1, 4](1.0)  # wrong argument count: numba's own error
    assert launch_path() is before
    (event,) = numba_events(prof.trace)
    assert event.args["raised"]


@simulator
def test_ctrl_c_during_a_launch_restores_the_launch_path():
    before = launch_path()
    main = threading.main_thread().ident
    assert threading.get_ident() == main
    # A real SIGINT while the simulator runs the matmul (it takes over a second here).
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    with pytest.raises(KeyboardInterrupt):
        with nbprof.profile() as prof:
            timer.start()
            numba_kernels.run_matmul()
    timer.join()
    assert launch_path() is before and not is_active()
    (event,) = numba_events(prof.trace)
    assert event.args["raised"] == "KeyboardInterrupt"
    with nbprof.profile() as again:  # the next block records normally
        numba_kernels.run_saxpy()
    assert len(numba_events(again.trace)) == 1


@simulator
def test_ctrl_c_as_the_profile_stops_restores_the_launch_path(monkeypatch):
    before = launch_path()
    stop = NumbaLaunchRecorder.stop

    def interrupted_stop(self):
        os.kill(os.getpid(), signal.SIGINT)  # lands while nbprof switches recording off
        return stop(self)

    monkeypatch.setattr(NumbaLaunchRecorder, "stop", interrupted_stop)
    with pytest.raises(KeyboardInterrupt):
        with nbprof.profile() as prof:
            numba_kernels.run_saxpy()
    assert launch_path() is before and not is_active()
    assert len(numba_events(prof.trace)) == 1  # held until the trace was built


@simulator
def test_compiler_lock_becomes_a_compile_slice():
    from numba.cuda.core.compiler_lock import global_compiler_lock

    with nbprof.profile() as prof:
        with global_compiler_lock:  # what numba-cuda holds while it compiles a kernel
            with global_compiler_lock:  # reentrant: one slice, the outermost
                numba_kernels.run_saxpy()
    (compile_slice,) = numba_events(prof.trace, "numba::compile")
    (launch,) = numba_events(prof.trace, "numba::saxpy")
    assert launch.parent == compile_slice.id
    from numba.cuda.core import event

    assert not event._registered["numba-cuda:compiler_lock"]  # nothing listens after the profile


@simulator
def test_launches_outside_a_profile_are_not_recorded():
    with nbprof.profile() as prof:
        pass
    numba_kernels.run_saxpy()
    assert not numba_events(prof.trace)
    assert not any("numba" in note for note in prof.trace.meta["notes"])  # no numba, no notes


def test_source_location_of_a_plain_file():
    assert numba_launches.source_location("/x/y.py", 7) == "/x/y.py:7"
    assert numba_launches.source_location("<ipython-input-12-abcdef>", 3) == "cell [12], line 3"


NO_NUMBA = """
import sys
sys.modules["numba.cuda"] = None  # numba-cuda not installed: `import numba.cuda` fails
import torch, nbprof
with nbprof.profile() as prof:
    torch.ones(3) + 1
notes = prof.trace.meta["notes"]
assert any("numba.cuda kernel launches were not recorded" in note for note in notes), notes
assert any(event.name == "aten::add" for event in prof.trace.events)
print("ok")
"""


BROKEN_NUMBA = """
import sys

class BrokenBinding:  # numba-cuda installed, but its CUDA binding fails as it is imported
    def find_spec(self, name, path=None, target=None):
        if name == "numba.cuda":
            raise RuntimeError("cuda-bindings 12.x does not match the driver")

sys.meta_path.insert(0, BrokenBinding())
import torch, nbprof
with nbprof.profile() as prof:
    torch.ones(3) + 1
notes = prof.trace.meta["notes"]
assert any("not recorded: numba.cuda cannot be imported (RuntimeError: cuda-bindings" in note
           for note in notes), notes
assert any(event.name == "aten::add" for event in prof.trace.events)
print("ok")
"""


@pytest.mark.parametrize("script", [NO_NUMBA, BROKEN_NUMBA], ids=["not installed", "broken"])
def test_profile_works_without_numba_cuda(script):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@simulator
def test_a_launch_in_an_ipython_cell_names_the_cell_and_line():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    cell = ("import numpy as np, nbprof\n"
            "from kernels import numba_kernels\n"
            "x = np.ones(16, np.float32)\n"
            "with nbprof.profile() as numba_cell_prof:\n"
            "    numba_kernels.saxpy[2, 8](np.float32(1), x, x, x)\n")
    number = shell.execution_count
    assert shell.run_cell(cell, store_history=True).success
    (launch,) = numba_events(shell.user_ns["numba_cell_prof"].trace)
    assert launch.args["launched at"] == f"cell [{number}], line 5"


REAL_MODE = """
import numpy as np, nbprof
from numba import cuda
from numba.cuda import dispatcher

@cuda.jit
def real_kernel(x):
    pass

before = dispatcher._LaunchConfiguration.__dict__["__call__"]
with nbprof.profile() as prof:
    try:
        real_kernel[2, 32](np.ones(64))  # line 13: compiles, then fails at the driver (no GPU)
    except Exception as error:
        raised = type(error).__name__
assert dispatcher._LaunchConfiguration.__dict__["__call__"] is before
(launch,) = [e for e in prof.trace.events if e.name == "numba::real_kernel"]
(compiling,) = [e for e in prof.trace.events if e.name == "numba::compile real_kernel"]
assert compiling.parent == launch.id, (compiling, launch)
assert launch.args["raised"] == raised, launch.args
assert (launch.args["grid"], launch.args["block"]) == ([2, 1, 1], [32, 1, 1]), launch.args
assert launch.args["arguments"] == "float64[64]" and launch.args["stream"] == "default"
assert launch.args["launched at"] == "<string>:13", launch.args
assert any("CPU slices only" in note for note in prof.trace.meta["notes"])
print("ok")
"""


def run_in_real_mode(script: str) -> None:
    """``script`` in a child process with numba in real mode (not the simulator), which runs
    here up to the CUDA driver; it prints "ok"."""
    env = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", script], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@simulator
def test_real_mode_launch_path_without_a_gpu():
    """numba's real launch path (not the simulator) runs here up to the CUDA driver: the wrapper
    on _LaunchConfiguration.__call__ records the launch and numba-cuda's compilation, and
    restores numba's own object."""
    run_in_real_mode(REAL_MODE)


@simulator
def test_nbprof_run_records_a_scripts_kernels_and_exports_them(tmp_path):
    from kernels import numba_kernels as module

    page, exported = tmp_path / "run.html", tmp_path / "run.json.gz"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-m", "nbprof.cli", "run", "-o", str(page), "--trace",
                           str(exported), module.__file__], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    loaded = nbprof.load(exported)
    names = {loaded.names[i] for i in loaded.name_id}
    assert {f"numba::{name}" for name in EXPECTED} <= names
    (matmul,) = numba_events(loaded, "numba::tiled_matmul")
    assert matmul.args["grid"] == [2, 2, 1]
    assert matmul.args["launched at"] == launch_line(module.run_matmul, "tiled_matmul")


# -- the GPU path on fakes: torch's stream routing, numba's events and their anchor ------------
#
# No GPU here: torch (a CPU build) and numba's simulator cannot run these paths, so fakes stand in
# for torch.cuda and numba.cuda where they would touch the device, and fail the way those do.

from cuda.core import Stream as CoreStream  # noqa: E402  (what numba-cuda's launch holds)

from nbprof.model import Trace  # noqa: E402
from nbprof.record.numba_gpu import (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD,  # noqa: E402
                                     NumbaEventClock, TorchLaunchTiming, match_launches_to_ops,
                                     place_on_cpu_clock, torch_stream_to_enter)

USER_STREAM = 0x7F3A_2000_0010  # a cudaStream_t a user created (numba's cuda.stream())
TORCH_SIDE_STREAM = 0x7F3A_2000_0990  # a torch.cuda.Stream() the user made current


class FakeTorchStream:
    """torch.cuda.Stream / ExternalStream: a raw handle on a device."""

    def __init__(self, cuda_stream, device):
        self.cuda_stream, self.device = cuda_stream, device


class FakeTorchCuda:
    """torch.cuda's stream API as far as the launch path uses it, with torch's checks."""

    def __init__(self):
        self.current = {0: 0}  # device -> torch's current raw stream
        self.made = []  # the streams torch was asked to wrap

    def ExternalStream(self, stream_ptr, device=None):  # noqa: N802
        if not isinstance(stream_ptr, int):  # pybind11: "incompatible function arguments"
            raise TypeError(f"stream_ptr must be an int, not {type(stream_ptr).__name__}")
        self.made.append(("external", stream_ptr, device))
        return FakeTorchStream(stream_ptr, device)

    def default_stream(self, device=None):
        self.made.append(("default", 0, device))
        return FakeTorchStream(0, device)

    def current_stream(self, device=None):
        return FakeTorchStream(self.current[device or 0], device or 0)

    @contextlib.contextmanager
    def stream(self, stream):  # torch.cuda.StreamContext
        if stream is None:  # torch: a no-op for None
            yield
            return
        previous = self.current[stream.device]  # torch reads stream.device: a non-stream fails
        self.current[stream.device] = stream.cuda_stream
        try:
            yield
        finally:
            self.current[stream.device] = previous


class FakeTorch:
    """The torch attributes TorchLaunchTiming takes: _RecordFunctionFast, the thread-local
    _profiler_enabled, _cuda_getCurrentRawStream, torch.cuda's streams."""

    def __init__(self):
        self.cuda = FakeTorchCuda()
        self.covered_threads = {threading.get_ident()}  # the legacy profiler is thread-local
        self.opened = []  # (name, torch's current stream when it opened, start_ns, end_ns)
        self.open_now = 0
        fake = self

        class RecordFunctionFast:
            def __init__(self, name, input_values=None, keyword_values=None):
                if not isinstance(name, str):
                    raise TypeError("_RecordFunctionFast: name must be a str")
                self.name = name

            def __enter__(self):
                fake.open_now += 1
                self.start_ns = time.time_ns()
                self.stream = fake.cuda.current[0]  # where the profiler records its events

            def __exit__(self, *exc_info):
                fake.open_now -= 1
                fake.opened.append((self.name, self.stream, self.start_ns, time.time_ns()))

        self._C = types.SimpleNamespace(
            _profiler=types.SimpleNamespace(_RecordFunctionFast=RecordFunctionFast),
            _cuda_getCurrentRawStream=lambda device: fake.cuda.current[device])
        self.autograd = types.SimpleNamespace(
            _profiler_enabled=lambda: threading.get_ident() in fake.covered_threads)


class FakeDispatcher:
    def __init__(self, function):
        self.py_func = function
        self.overloads = {}


class FakeLaunch:
    """A configured launch as numba-cuda 0.30.4 builds it (_LaunchConfiguration): its stream is
    a cuda.core Stream (driver._to_core_stream)."""

    def __init__(self, handle, grid=(4, 1, 1), block=(64, 1, 1)):
        self.dispatcher = FakeDispatcher(numba_kernels.saxpy.py_func)
        self.griddim, self.blockdim, self.sharedmem = grid, block, 0
        self.stream = CoreStream.from_handle(handle)


def test_torch_stream_to_enter_for_each_kind_of_stream():
    # numba's default stream is torch's default (legacy) stream: nothing to switch...
    assert torch_stream_to_enter(0, torch_current=0, per_thread_default=False) is None
    # ...unless the user made another torch stream current: then torch's default is entered
    assert torch_stream_to_enter(0, TORCH_SIDE_STREAM, per_thread_default=False) == 0
    assert torch_stream_to_enter(CU_STREAM_LEGACY, 0, per_thread_default=False) is None
    # the per-thread default stream: numba's explicit one, or stream 0 under PTDS
    assert torch_stream_to_enter(CU_STREAM_PER_THREAD, 0, False) == CU_STREAM_PER_THREAD
    assert torch_stream_to_enter(0, 0, per_thread_default=True) == CU_STREAM_PER_THREAD
    assert torch_stream_to_enter(USER_STREAM, 0, False) == USER_STREAM
    assert torch_stream_to_enter(USER_STREAM, USER_STREAM, False) is None  # already torch's


def test_launches_on_a_covered_thread_open_a_record_function_on_their_own_stream():
    fake = FakeTorch()
    recorder = NumbaLaunchRecorder(gpu=True)
    recorder.torch_timing = TorchLaunchTiming(fake, device=0, per_thread_default=False)
    launched_on = []

    def numba_launch(launch_config, *args):  # numba's own __call__: what stream is torch's now?
        launched_on.append(fake.cuda.current[0])
        if args and args[0] == "fail":
            raise ValueError("numba's launch failed")

    wrapped = recorder._launch_wrapper(numba_launch)
    wrapped(FakeLaunch(0))
    wrapped(FakeLaunch(CU_STREAM_PER_THREAD))
    wrapped(FakeLaunch(USER_STREAM))
    wrapped(FakeLaunch(USER_STREAM))  # the wrapped stream is made once
    with fake.cuda.stream(FakeTorchStream(TORCH_SIDE_STREAM, 0)):
        wrapped(FakeLaunch(0))  # numba's default stream while torch's current is another
        with pytest.raises(ValueError):
            wrapped(FakeLaunch(USER_STREAM), "fail")
        assert fake.cuda.current[0] == TORCH_SIDE_STREAM  # the user's choice survives a failure
    worker = threading.Thread(target=wrapped, args=(FakeLaunch(USER_STREAM),))
    worker.start()
    worker.join()  # a thread torch's profiler does not record: no record_function

    assert launched_on == [0, CU_STREAM_PER_THREAD, USER_STREAM, USER_STREAM, 0, USER_STREAM, 0]
    assert [(name, stream) for name, stream, *_ in fake.opened] == [
        ("numba::saxpy", 0), ("numba::saxpy", CU_STREAM_PER_THREAD), ("numba::saxpy", USER_STREAM),
        ("numba::saxpy", USER_STREAM), ("numba::saxpy", 0), ("numba::saxpy", USER_STREAM)]
    assert fake.cuda.made == [("external", CU_STREAM_PER_THREAD, 0), ("external", USER_STREAM, 0),
                              ("default", 0, 0)]
    assert fake.open_now == 0 and fake.cuda.current == {0: 0}  # nothing left switched
    timed_by = [launch[11] for launch in recorder.launches]
    assert timed_by == [numba_launches.TORCH_TIMED] * 6 + [None]  # the worker: numba's events


def test_a_torch_timed_launch_is_its_record_functions_op_on_its_stream():
    """add_to: the op torch's profiler recorded for the record_function becomes the launch's
    slice (no second slice), with the launch's args; its GPU interval moves to the launch's
    stream (the legacy records say none) and starts after a compilation inside the launch."""
    from numba.cuda.core.compiler_lock import global_compiler_lock

    fake = FakeTorch()
    recorder = NumbaLaunchRecorder(gpu=True)
    recorder.torch_timing = TorchLaunchTiming(fake, device=0, per_thread_default=False)
    recorder._events, recorder._lock_event = numba_launches._numba_cuda_config_and_events()[1:]
    recorder._listen_for_compiles()

    def numba_launch(launch_config, *args):
        if launch_config.stream.handle and int(launch_config.stream.handle) == USER_STREAM:
            with global_compiler_lock:  # numba-cuda compiling the first launch
                time.sleep(0.002)

    base_ns = time.time_ns()
    try:
        wrapped = recorder._launch_wrapper(numba_launch)
        wrapped(FakeLaunch(0))
        wrapped(FakeLaunch(USER_STREAM, grid=(8, 1, 1)))
    finally:
        recorder.stop()
    # What legacy_records_to_trace makes of the two record_functions (and a torch op): each op's
    # GPU interval from its CUDA event pair, on stream 0 (the legacy records carry no stream).
    ops = [(name, start - base_ns, end - base_ns) for name, _, start, end in fake.opened]
    ops.append(("aten::add", ops[-1][2] + 1_000, ops[-1][2] + 2_000))
    trace = Trace.build(
        start_ns=[op[1] for op in ops], end_ns=[op[2] for op in ops], thread=[0] * 3,
        name_id=[0, 0, 1], names=["numba::saxpy", "aten::add"],
        threads=[nbprof.Thread(os.getpid(), threading.get_native_id(), "MainThread")],
        gpu_start_ns=[op[1] + 500 for op in ops[:2]], gpu_end_ns=[op[2] + 9_000 for op in ops[:2]],
        gpu_name_id=[0, 0], gpu_device=[0, 0], gpu_stream=[0, 0], gpu_launch=[0, 1],
        gpu_kind=[0, 0], meta={"base_time_ns": base_ns, "notes": []})

    trace = recorder.add_to(trace)
    launches = numba_events(trace, "numba::saxpy")
    assert len(launches) == 2  # the ops themselves: no duplicate slice per launch
    on_default, on_user = launches
    assert on_default.args["stream"] == "default" and on_user.args["stream"] == hex(USER_STREAM)
    assert on_user.args["grid"] == [8, 1, 1]
    assert on_user.args["launched at"].endswith(f"test_numba_launches.py:{launch_line_no()}")
    (default_gpu,), (user_gpu,) = on_default.kernels, on_user.kernels
    assert default_gpu.stream == 0 and user_gpu.stream != 0
    assert user_gpu.args["grid"] == [8, 1, 1] and user_gpu.args["launched at"] == on_user.args["launched at"]
    compiles = [e for e in trace.events if e.name == "numba::compile saxpy"]
    (compiling,) = compiles
    assert compiling.parent == on_user.id
    assert user_gpu.interval.start_ns >= compiling.cpu_interval.end_ns  # the kernel, not the JIT
    assert default_gpu.interval.start_ns == on_default.cpu_interval.start_ns + 500  # untouched
    assert not any("missing from its records" in note for note in trace.meta["notes"])


def launch_line_no() -> int:
    """The line of the second ``wrapped(FakeLaunch(USER_STREAM...`` above."""
    test = test_a_torch_timed_launch_is_its_record_functions_op_on_its_stream
    lines, first = inspect.getsourcelines(test)
    return first + next(i for i, line in enumerate(lines) if "grid=(8, 1, 1))" in line)


def test_match_launches_to_ops():
    # launches (CPU intervals) in any order; each op lies inside its launch, up to 1 us of
    # rounding (torch's epoch-us doubles); a launch whose op is missing gets -1
    launch_start, launch_end = [5_000, 0, 10_000, 20_000], [9_000, 4_000, 14_000, 24_000]
    op_start, op_end = [10_400, 300, 4_900, 30_000], [13_000, 3_600, 8_000, 31_000]
    assert match_launches_to_ops(launch_start, launch_end, op_start, op_end).tolist() == \
        [2, 1, 0, -1]
    # two launches of one kernel at the same time (two threads): each gets its own op
    assert sorted(match_launches_to_ops([0, 0], [10_000, 10_000], [100, 200],
                                        [9_000, 9_500]).tolist()) == [0, 1]


class CudaAPIError(RuntimeError):
    """numba.cuda.cudadrv.driver.CudaAPIError as cuEventElapsedTime raises it."""

    def __init__(self, code, message):
        super().__init__(f"[{code}] Call to cuEventElapsedTime results in {message}")


class FakeDevice:
    """numba.cuda's event API on a device whose clock runs from its own origin; an event
    completes ``LATENCY_NS`` after it is recorded (the device is idle)."""

    ORIGIN_NS = 123_456_789_000  # the GPU clock's origin has nothing to do with the CPU's
    LATENCY_NS = 3_000

    def __init__(self):
        fake = self

        class Event:
            def __init__(self, timing=True):
                self.gpu_ns = None

            def record(self, stream=0):
                if stream and int(stream.handle) == 0xBAD:  # a stream of another context
                    raise CudaAPIError(400, "CUDA_ERROR_INVALID_HANDLE")
                self.gpu_ns = time.time_ns() - fake.cpu_epoch_ns + fake.ORIGIN_NS + fake.LATENCY_NS

        self.cpu_epoch_ns = time.time_ns()
        self.event = Event
        self.synchronize = lambda: None
        self.get_current_device = lambda: types.SimpleNamespace(id=0)

    @staticmethod
    def event_elapsed_time(first, second):
        if first.gpu_ns is None or second.gpu_ns is None:  # cuEventRecord never called
            raise CudaAPIError(400, "CUDA_ERROR_INVALID_HANDLE")
        return float(np.float32((second.gpu_ns - first.gpu_ns) / 1e6))  # float ms, as CUDA's


def test_place_on_cpu_clock_cancels_the_gpu_clocks_origin():
    device = FakeDevice()
    anchor, start, end = device.event(), device.event(), device.event()
    anchor_ns = time.time_ns()
    anchor.record()
    start.gpu_ns = anchor.gpu_ns + 2_000_000  # 2 ms after the anchor, on the GPU's clock
    end.gpu_ns = start.gpu_ns + 250_000
    start_ns, end_ns = place_on_cpu_clock(anchor_ns, anchor, start, end, device.event_elapsed_time)
    assert abs(start_ns - (anchor_ns + 2_000_000)) <= 1_000  # float32 ms: ~0.1 us at 2 ms
    assert abs((end_ns - start_ns) - 250_000) <= 100
    with pytest.raises(CudaAPIError, match="INVALID_HANDLE"):
        place_on_cpu_clock(anchor_ns, anchor, device.event(), end, device.event_elapsed_time)


def test_launches_timed_by_numbas_events_land_on_the_cpu_clock():
    """A thread torch's profiler does not record: the real wrapper records numba's event pair on
    the launch's stream, add_to places it through the anchor; a stream numba cannot record on
    (another context) leaves the launch untimed, with a note, and the launch itself runs."""
    device = FakeDevice()
    recorder = NumbaLaunchRecorder(gpu=True)
    recorder._clock = NumbaEventClock(device)
    ran = []
    wrapped = recorder._launch_wrapper(lambda launch_config, *args: ran.append(1))
    base_ns = time.time_ns()
    wrapped(FakeLaunch(USER_STREAM))
    wrapped(FakeLaunch(0xBAD))
    trace = recorder.add_to(Trace.empty({"base_time_ns": base_ns, "notes": []}))
    assert len(ran) == 2
    timed, untimed = numba_events(trace)
    (gpu,) = timed.kernels
    latency = FakeDevice.LATENCY_NS
    cpu = timed.cpu_interval
    assert cpu.start_ns <= gpu.interval.start_ns <= cpu.end_ns + latency
    assert gpu.interval.end_ns <= timed.cpu_interval.end_ns + latency + 1_000
    assert gpu.stream != 0 and not untimed.kernels
    assert any("1 numba launches could not be timed" in note for note in trace.meta["notes"])


def test_a_late_anchor_is_shifted_out_as_far_as_the_launches_prove_it():
    """The anchor's event completes its submission latency after the CPU time read for it, so
    every launch lands that much early (an H200: a GPU start 1.9 us before its launch's CPU
    start). No start event can complete before its launch began: the lead is shifted out."""
    device = FakeDevice()
    recorder = NumbaLaunchRecorder(gpu=True)
    recorder._clock = NumbaEventClock(device)
    recorder._clock.anchor.gpu_ns += 50_000  # the anchor ran 50 us late
    wrapped = recorder._launch_wrapper(lambda launch_config, *args: None)
    base_ns = time.time_ns()
    for _ in range(3):
        wrapped(FakeLaunch(USER_STREAM))
    trace = recorder.add_to(Trace.empty({"base_time_ns": base_ns, "notes": []}))
    timed = numba_events(trace)
    leads = [event.kernels[0].interval.start_ns - event.cpu_interval.start_ns for event in timed]
    assert min(leads) >= 0, leads  # unshifted, each would lead by ~50 us
    assert min(leads) <= FakeDevice.LATENCY_NS + 20_000, leads


# -- CUPTI's kernel names back to launches: real names from numba-cuda's own compiler ----------

MANGLE = """
import json
from numba import cuda, types
from numba.cuda.compiler import compile_cuda  # typing and lowering: no GPU, no CUDA toolkit
from kernels import numba_kernels as k

def make_local():
    @cuda.jit
    def scale_ab(out):  # '_ab' reads as a hex escape: names are compared escaped
        out[0] = 2
    return scale_ab

f32 = types.float32
vector, matrix = f32[::1], f32[:, ::1]
signatures = {"saxpy": (f32, vector, vector, vector), "tiled_matmul": (matrix,) * 3,
              "block_sum": (vector, vector), "stencil_2d": (matrix, matrix)}
kernels = {name: getattr(k, name) for name in signatures}
kernels["local"], signatures["local"] = make_local(), (types.int64[::1],)
names = {}
for name, kernel in kernels.items():
    compiled = compile_cuda(kernel.py_func, types.void, signatures[name], cc=(8, 0))
    function = kernel.py_func
    names[name] = [compiled.fndesc.mangled_name, f"{function.__module__}.{function.__qualname__}",
                   function.__qualname__]
print(json.dumps(names))
"""


@pytest.fixture(scope="module")
def real_mangled_names():
    """Each kernels/ kernel's entry name as numba-cuda 0.30.4 mangles it (real mode, in a child
    process: this one runs the simulator), with its module-qualified name and qualname."""
    import json

    env = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", MANGLE], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_numba_kernel_of_maps_real_mangled_names_to_their_launches(real_mangled_names):
    from nbprof.record.numba_names import known_numba_launches, numba_kernel_of

    names = real_mangled_names
    assert names["saxpy"][0].startswith("_ZN7kernels13numba_kernels5saxpyB")
    # What a profile's launches carry: the function always, entry names in real mode only.
    by_function = known_numba_launches(
        [(f"numba::{qualname}", {"function": function}) for _, function, qualname in names.values()]
        + [("numba::compile saxpy", {"function": "kernels.numba_kernels.saxpy"})])
    by_entry = known_numba_launches([("numba::saxpy", {"entry names": names["saxpy"][0]})])
    for name, (mangled, _, qualname) in names.items():
        assert numba_kernel_of(mangled, by_function) == f"numba::{qualname}", name
    assert numba_kernel_of(names["saxpy"][0], by_entry) == "numba::saxpy"
    assert numba_kernel_of(names["tiled_matmul"][0], by_entry) is None  # not launched
    assert names["local"][2] == "make_local.<locals>.scale_ab"
    # a kernel numba did not make, or a name that is no mangled name at all
    for other in ("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEEEEvi",
                  "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>"
                  ">(int, at::native::FillFunctor<float>)", "ampere_sgemm_128x64_nn", "_ZN7kern",
                  ""):
        assert numba_kernel_of(other, by_function) is None, other


def test_numba_kernel_of_maps_kinetos_demangled_names(real_mangled_names):
    """Kineto demangles CUPTI's names (abi::__cxa_demangle); c++filt demangles the same way."""
    import shutil

    from nbprof.record.numba_names import known_numba_launches, numba_kernel_of

    if shutil.which("c++filt") is None:
        pytest.skip("no c++filt to demangle with")
    mangled = [mangled for mangled, _, _ in real_mangled_names.values()]
    done = subprocess.run(["c++filt"], input="\n".join(mangled), capture_output=True, text=True,
                          timeout=60)
    demangled = dict(zip(real_mangled_names, done.stdout.splitlines()))
    assert demangled["saxpy"].startswith("kernels::numba_kernels::saxpy[abi:v")
    known = known_numba_launches([(f"numba::{qualname}", {"function": function})
                                  for _, function, qualname in real_mangled_names.values()])
    for name, (_, _, qualname) in real_mangled_names.items():
        assert numba_kernel_of(demangled[name], known) == f"numba::{qualname}", demangled[name]


@simulator
def test_a_simulated_launch_names_its_function_for_the_kernel_mapping():
    with nbprof.profile() as prof:
        numba_kernels.run_saxpy()
    (launch,) = numba_events(prof.trace)
    assert launch.args["function"] == "kernels.numba_kernels.saxpy"


def test_gpu_timing_that_cannot_start_leaves_cpu_slices_and_a_note():
    """numba sees a GPU but its context is broken (cuEventCreate fails): the launches are still
    recorded, untimed, and the notes say why."""
    device = FakeDevice()

    def broken_event(timing=True):
        raise CudaAPIError(201, "CUDA_ERROR_INVALID_CONTEXT")

    device.event, device.is_available = broken_event, lambda: True
    recorder = NumbaLaunchRecorder(gpu=True)
    recorder._start_gpu_timing(device)
    wrapped = recorder._launch_wrapper(lambda launch_config, *args: None)
    wrapped(FakeLaunch(0))
    trace = recorder.add_to(Trace.empty({"base_time_ns": time.time_ns(), "notes": []}))
    (launch,) = numba_events(trace)
    assert not launch.kernels
    assert any("CPU slices only (numba's CUDA events failed: CudaAPIError" in note
               for note in trace.meta["notes"]), trace.meta["notes"]


def test_a_torch_timed_launch_missing_from_torchs_records_keeps_its_slice():
    fake = FakeTorch()
    recorder = NumbaLaunchRecorder(gpu=True)
    recorder.torch_timing = TorchLaunchTiming(fake, device=0, per_thread_default=False)
    recorder._launch_wrapper(lambda launch_config, *args: None)(FakeLaunch(USER_STREAM))
    trace = recorder.add_to(Trace.empty({"base_time_ns": time.time_ns(), "notes": []}))
    (launch,) = numba_events(trace)
    assert launch.args["stream"] == hex(USER_STREAM) and not launch.kernels
    assert any("1 numba launches timed by torch's profiler are missing" in note
               for note in trace.meta["notes"])


def test_real_legacy_records_of_torch_timed_launches_become_their_slices():
    """torch's real legacy profiler (its CPU state: this torch has no CUDA) records the real
    _RecordFunctionFast around each launch; legacy_records_to_trace converts them and add_to
    finds each launch's op on the CPU clock (torch's times against time.time_ns, within 1 us).
    A launch on a stream this torch cannot wrap (ExternalStream raises) keeps its own slice."""
    from torch._C._profiler import _ExperimentalConfig
    from torch.autograd import ProfilerConfig, ProfilerState

    from nbprof.record.convert import legacy_records_to_trace

    recorder = NumbaLaunchRecorder(gpu=True)
    timing = recorder.torch_timing = TorchLaunchTiming(torch, device=0, per_thread_default=False)
    timing._current_handle = lambda device: 0  # torch's current stream: its default (no CUDA here)
    wrapped = recorder._launch_wrapper(lambda launch_config, *args: torch.ones(4) + 1)
    base_ns = time.time_ns()
    torch._C._autograd._enable_profiler_legacy(ProfilerConfig(
        ProfilerState.CPU, False, False, False, False, False, _ExperimentalConfig()))
    try:
        for _ in range(3):
            wrapped(FakeLaunch(0))
        wrapped(FakeLaunch(USER_STREAM))  # torch.cuda.ExternalStream: "compiled without CUDA"
    finally:
        thread_lists = torch._C._autograd._disable_profiler_legacy()
    starting = nbprof.Thread(os.getpid(), threading.get_native_id(), "MainThread")
    trace = legacy_records_to_trace(thread_lists, anchor_name="nbprof::no_anchor",
                                    base_time_ns=base_ns, starting_thread=starting,
                                    meta={"notes": []})
    trace = recorder.add_to(trace)
    saxpys = numba_events(trace, "numba::saxpy")
    assert len(saxpys) == 4, saxpys
    assert [event.args["stream"] for event in saxpys] == ["default"] * 3 + [hex(USER_STREAM)]
    assert all(event.args["grid"] == [4, 1, 1] for event in saxpys)
    for launch in saxpys[:3]:  # the ops torch recorded: the torch op inside each is its child
        children = {event.name for event in trace.events if event.parent == launch.id}
        assert {"aten::ones", "aten::add"} <= children, children
    assert not any("missing from its records" in note for note in trace.meta["notes"])


def test_both_torch_profilers_records_of_torch_timed_launches_become_their_slices():
    """As nbprof records on a GPU (Kineto on every thread, then the legacy profiler on the
    starting thread; here in its CPU state): the launching thread's launches are torch-timed and
    become the joined ops, found on the lane of the thread that launched them; a worker thread's
    launch (torch's legacy profiler does not record it) is its own slice on its own lane."""
    from torch.autograd import ProfilerState

    from nbprof.record.match_events import gpu_records_to_trace
    from nbprof.record.cuda_events import ANCHOR_NAME, CudaRecorder

    starting = nbprof.Thread(os.getpid(), threading.get_native_id(), "MainThread")
    profilers = CudaRecorder(kernels=False, legacy_state=ProfilerState.CPU)
    profilers.start()
    try:
        recorder = NumbaLaunchRecorder(gpu=True)
        assert numba_launches._legacy_profiler_on(torch)  # what start() checks on a GPU
        timing = recorder.torch_timing = TorchLaunchTiming(torch, 0, per_thread_default=False)
        timing._current_handle = lambda device: 0  # no CUDA streams in this torch
        wrapped = recorder._launch_wrapper(lambda launch_config, *args: torch.ones(4) + 1)
        for _ in range(5):
            wrapped(FakeLaunch(0))
        worker = threading.Thread(target=wrapped, args=(FakeLaunch(0),), name="numba-worker")
        worker.start()
        worker.join()
    finally:
        records = profilers.stop()
    trace = gpu_records_to_trace(records, anchor_name=ANCHOR_NAME,
                                 base_time_ns=records.windows[0][1], starting_thread=starting,
                                 thread_names={worker.native_id: "numba-worker"},
                                 kernels_why_not="kernels=False was asked", meta={"notes": []})
    trace = recorder.add_to(trace)
    saxpys = numba_events(trace, "numba::saxpy")
    assert len(saxpys) == 6, saxpys  # one slice per launch: the ops themselves, and the worker's
    assert [event.thread.tid for event in saxpys].count(starting.tid) == 5
    (on_worker,) = [event for event in saxpys if event.thread.tid == worker.native_id]
    assert all(event.args["grid"] == [4, 1, 1] for event in saxpys)
    for launch in saxpys:  # torch's record_function ops, and one slice nbprof made itself
        category = trace.categories[trace.category[launch.id]]
        assert (category == "numba") == (launch is on_worker), (launch, category)
        children = {event.name for event in trace.events if event.parent == launch.id}
        assert "aten::add" in children  # Kineto records every thread's torch ops
    assert not any("missing from its records" in note for note in trace.meta["notes"])


def cupti_trace(kernel_names, base_ns, first_start_ns):
    """A trace as main's join leaves it with CUPTI on: kernels no op launched (launch -1) on
    CUDA stream 7, named as CUPTI names them, 1 ms apart."""
    count = len(kernel_names)
    starts = [first_start_ns + 1_000_000 * k for k in range(count)]
    return Trace.build(
        start_ns=(), end_ns=(), thread=(), name_id=(), names=list(kernel_names), threads=(),
        gpu_start_ns=starts, gpu_end_ns=[start + 50_000 for start in starts],
        gpu_name_id=list(range(count)), gpu_device=[0] * count, gpu_stream=[7] * count,
        gpu_launch=[-1] * count, gpu_kind=[1] * count,  # KIND_KERNEL
        meta={"base_time_ns": base_ns, "notes": []})


def test_cupti_kernels_no_op_launched_link_to_the_numba_launches_that_ran_them(
        real_mangled_names):
    """A worker thread's launches (no record_function there, so Kineto links their kernels to no
    op): each CUPTI kernel with numba's mangled name goes to its launch, in order; a torch kernel
    and a kernel nobody launched here stay unlinked; counts that disagree link nothing."""
    saxpy_entry = real_mangled_names["saxpy"][0]
    torch_kernel = ("void at::native::vectorized_elementwise_kernel<4, "
                    "at::native::FillFunctor<float>>")
    matmul_entry = real_mangled_names["tiled_matmul"][0]
    for kernel_names, linked in (([saxpy_entry] * 3 + [torch_kernel, matmul_entry], 3),
                                 ([saxpy_entry] * 2, 0)):
        recorder = NumbaLaunchRecorder(gpu=True)
        recorder._clock = NumbaEventClock(FakeDevice())
        wrapped = recorder._launch_wrapper(lambda launch_config, *args: None)
        base_ns = time.time_ns()
        for _ in range(3):
            wrapped(FakeLaunch(0))
        trace = recorder.add_to(cupti_trace(kernel_names, base_ns, time.time_ns() - base_ns))
        launches = numba_events(trace, "numba::saxpy")
        cupti = [[k for k in launch.kernels if k.kind == "kernel"] for launch in launches]
        assert sum(map(len, cupti)) == linked
        if linked:
            assert all(len(kernels) == 1 for kernels in cupti)
            starts = [kernels[0].interval.start_ns for kernels in cupti]
            assert starts == sorted(starts)  # the k-th kernel to the k-th launch
            assert {kernels[0].stream for kernels in cupti} == {7}  # CUPTI's stream, kept
        else:
            assert any("2 CUPTI kernels of numba functions could not be paired" in note
                       for note in trace.meta["notes"])
        unlinked = [row for row in range(len(trace.gpu_start_ns)) if trace.gpu_launch[row] < 0]
        assert len(unlinked) == len(kernel_names) - linked
