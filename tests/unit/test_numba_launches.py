"""numba.cuda launches inside nbprof.profile, on numba's simulator (tests/conftest.py sets
NUMBA_ENABLE_CUDASIM=1 where there is no GPU): real kernels from kernels/, real threads, a real
SIGINT, numba-cuda's real compiler lock."""

import inspect
import os
import signal
import subprocess
import sys
import threading

import pytest
import torch

import nbprof
from nbprof.profiler import is_active
from nbprof.record import numba_launches
from nbprof.record.numba_launches import NumbaLaunchRecorder

numba_cuda = pytest.importorskip("numba.cuda")
from numba.cuda.core import config as cuda_config  # noqa: E402

from kernels import numba_kernels, torch_numba  # noqa: E402

pytestmark = pytest.mark.skipif(not cuda_config.ENABLE_CUDASIM,
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
        assert event.args["grid"] == str(grid) and event.args["block"] == str(block)
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


def test_launch_path_restored_when_the_block_raises():
    before = launch_path()
    with pytest.raises(ValueError, match="in the block"):
        with nbprof.profile() as prof:
            numba_kernels.run_saxpy()
            raise ValueError("in the block")
    assert launch_path() is before and not is_active()
    assert len(numba_events(prof.trace)) == 1


def test_launch_path_restored_when_a_launch_raises():
    before = launch_path()
    with pytest.raises(Exception):
        with nbprof.profile() as prof:
            numba_kernels.saxpy[1, 4](1.0)  # wrong argument count: numba's own error
    assert launch_path() is before
    (event,) = numba_events(prof.trace)
    assert event.args["raised"]


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


def test_profile_works_without_numba_cuda():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", NO_NUMBA], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


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
assert (launch.args["grid"], launch.args["block"]) == ("(2, 1, 1)", "(32, 1, 1)"), launch.args
assert launch.args["arguments"] == "float64[64]" and launch.args["stream"] == "default"
assert launch.args["launched at"] == "<string>:13", launch.args
assert any("CPU slices only" in note for note in prof.trace.meta["notes"])
print("ok")
"""


def test_real_mode_launch_path_without_a_gpu():
    """numba's real launch path (not the simulator) runs here up to the CUDA driver: the wrapper
    on _LaunchConfiguration.__call__ records the launch and numba-cuda's compilation, and
    restores numba's own object."""
    env = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", REAL_MODE], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


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
    assert matmul.args["grid"] == "(2, 2, 1)"
    assert matmul.args["launched at"] == launch_line(module.run_matmul, "tiled_matmul")
