"""with_stack on the native recorder: Python calls as python_function slices and each op's stack,
as torch's path records them (and for threads started inside the block, which torch's misses)."""

from __future__ import annotations

import shutil
import threading

import numpy as np
import pytest
import torch

import nbprof
from nbprof.formats.chrome import export_chrome_trace
from nbprof.record import native
from nbprof.record.native import build
from nbprof.record.native.python_calls import PythonCalls

HERE = "test_native_stacks.py"


def inner(x):
    return x + 1


def outer(x):
    return inner(x) * 2


def in_range(x):
    return outer(x)


def worker_loop(go: threading.Event, done: threading.Event):
    go.wait()
    outer(torch.ones(3))
    done.set()


def spawned_worker():
    outer(torch.ones(5))


def workload(recorder: str):
    """f -> g -> ops on the main thread, a call inside a record_function range, a worker that
    was waiting before the block, and (inside the block) a thread started there."""
    go, done = threading.Event(), threading.Event()
    # a daemon: a profile that fails to start (go never set) must not hang the test process
    waiting = threading.Thread(target=worker_loop, args=(go, done), name="waiting-worker",
                               daemon=True)
    waiting.start()
    with nbprof.profile(cuda=False, with_stack=True, recorder=recorder) as prof:
        outer(torch.ones(4))
        with torch.profiler.record_function("my_range"):
            in_range(torch.ones(2))
        go.set()
        done.wait()
        spawned = threading.Thread(target=spawned_worker, name="spawned-worker")
        spawned.start()
        spawned.join()
    waiting.join()
    return prof.trace


def ours(stack) -> tuple:
    """This file's frames of a stack, innermost first, without the line's directory prefix."""
    return tuple(frame.split("/")[-1] for frame in stack if HERE in frame)


def op_stacks(trace, lane_name: str) -> list:
    """(op, this file's frames) for each op of a lane whose stack has any, in time order."""
    python = trace.categories.index("python_function")
    lane = [thread.name for thread in trace.threads].index(lane_name)
    found = []
    for row in range(len(trace)):
        if trace.thread[row] == lane and trace.category[row] != python:
            frames = ours(trace.stacks.get(row, ()))
            if frames:
                found.append((trace.names[trace.name_id[row]], frames))
    return found


def line_of(function) -> int:
    return function.__code__.co_firstlineno


@pytest.fixture(scope="module")
def traces():
    return workload("torch"), workload("native")


def torchs_path_records_frames(torch_trace=None) -> bool:
    """Whether torch's path (``recorder="torch"``) records Python frames with with_stack here:
    torch 2.11.0+cu130's profiler gives none (no python_function event, empty stacks; seen on a
    CPU machine, Python 3.12), so there is nothing to compare the native stacks against."""
    if torch_trace is None:
        with nbprof.profile(cuda=False, with_stack=True, recorder="torch") as prof:
            outer(torch.ones(1))
        torch_trace = prof.trace
    return "python_function" in torch_trace.categories and bool(
        (torch_trace.category == torch_trace.categories.index("python_function")).any())


def require_torchs_frames(torch_trace=None):
    if not torchs_path_records_frames(torch_trace):
        pytest.skip(f"torch {torch.__version__}'s profiler recorded no Python frame with "
                    "with_stack here: no reference to compare the native stacks with")


def test_each_ops_stack_names_the_functions_files_and_lines_as_torchs_path(traces):
    torch_trace, native_trace = traces
    require_torchs_frames(torch_trace)
    assert native_trace.meta["recorder"] == "native" and torch_trace.meta["recorder"] == "torch"
    assert not [note for note in native_trace.meta["notes"] if "with_stack" in note]
    g, f, r = (f"{HERE}({line_of(fn)}): {fn.__name__}" for fn in (inner, outer, in_range))
    main = op_stacks(native_trace, "MainThread")
    assert main == op_stacks(torch_trace, "MainThread")
    # x + 1 in g (and the copy it makes) inside f, then x * 2 in f; again inside the range
    assert ("aten::add", (g, f)) in main and ("aten::mul", (f,)) in main
    assert ("aten::add", (g, f, r)) in main and ("aten::mul", (f, r)) in main
    waiting = op_stacks(native_trace, "waiting-worker")
    # a frame already running at the start is named by the line it was at (go.wait()), as torch
    w = f"{HERE}({line_of(worker_loop) + 1}): worker_loop"
    assert waiting == op_stacks(torch_trace, "waiting-worker")
    assert ("aten::add", (g, f, w)) in waiting and ("aten::ones", (w,)) in waiting


def test_python_functions_are_slices_on_their_threads_lanes(traces):
    _, trace = traces
    python = trace.categories.index("python_function")
    lanes = {thread.name: lane for lane, thread in enumerate(trace.threads)}
    frames = {(trace.names[trace.name_id[row]].split("/")[-1],
               trace.threads[trace.thread[row]].name)
              for row in range(len(trace)) if trace.category[row] == python}
    assert (f"{HERE}({line_of(outer)}): outer", "MainThread") in frames
    assert (f"{HERE}({line_of(spawned_worker)}): spawned_worker", "spawned-worker") in frames
    assert not [name for name, _ in frames if "nbprof" in name]  # the profiler's own calls
    # an op's parent is the innermost Python call around it
    add = [row for row in range(len(trace)) if trace.names[trace.name_id[row]] == "aten::add"
           and trace.thread[row] == lanes["MainThread"]][0]
    assert trace.names[trace.name_id[trace.parent[add]]].endswith(": inner")


def test_a_thread_started_inside_the_block_has_its_own_stacks(traces):
    torch_trace, trace = traces
    g, f, s = (f"{HERE}({line_of(fn)}): {fn.__name__}" for fn in (inner, outer, spawned_worker))
    spawned = op_stacks(trace, "spawned-worker")
    assert ("aten::add", (g, f, s)) in spawned
    assert all(frames[-1] == s for _, frames in spawned)  # never another thread's frames
    assert not op_stacks(torch_trace, "spawned-worker")  # torch's tracer misses such threads


def test_chrome_export_carries_the_stacks_as_torchs_path_does(traces, tmp_path):
    import json

    require_torchs_frames(traces[0])
    exported = {}
    for trace in traces:
        path = export_chrome_trace(trace, tmp_path / f"{trace.meta['recorder']}.json")
        events = json.load(open(path))["traceEvents"]
        exported[trace.meta["recorder"]] = {
            (event["name"], ours(event["args"]["Call stack"]))
            for event in events if ours(event.get("args", {}).get("Call stack", ()))}
        assert any(event.get("cat") == "python_function" for event in events)
        assert nbprof.load(path).stacks == trace.stacks
    assert exported["native"] >= exported["torch"] and exported["torch"]


def test_after_an_interrupted_block_no_profile_function_is_left_on_any_thread():
    import sys

    hook_before = threading.getprofile()
    with pytest.raises(KeyboardInterrupt):
        with nbprof.profile(cuda=False, with_stack=True, recorder="native"):
            outer(torch.ones(2))
            assert sys.getprofile() is not None  # python_calls.cpp's, on this thread
            raise KeyboardInterrupt
    assert sys.getprofile() is None and threading.getprofile() is hook_before
    with nbprof.profile(cuda=False, with_stack=True, recorder="native") as prof:
        outer(torch.ones(2))
    assert any(frame.endswith(": outer") for stack in prof.trace.stacks.values() for frame in stack)


@pytest.fixture
def own_library():
    """The process's library, from the usual cache: built with this Python's headers."""
    return native.load()


@pytest.fixture
def carried(own_library, tmp_path, monkeypatch):
    """An empty cache and a folder for carried libraries (bench/gpu_native_prebuilt.sh)."""
    native.forget()
    monkeypatch.setenv("NBPROF_NATIVE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("NBPROF_NATIVE_PREBUILT", str(tmp_path / "carried"))
    yield tmp_path / "carried"
    native.forget()


def test_without_python_headers_with_stack_goes_through_torch_and_says_what_to_install(
        carried, monkeypatch):
    """A library built without Python's headers (here: carried, built without them, on a machine
    whose Python has none) records everything but with_stack, which torch's profiler records."""
    if shutil.which(build.compiler()[0]) is None:
        pytest.skip("no C++ compiler here to build the carried library with")
    library = build.prebuild(build.torch_dir(), carried)  # no python_headers: none in it
    monkeypatch.setenv("CXX", "false")
    monkeypatch.setattr(build, "python_include", lambda: None)
    with nbprof.profile(cuda=False, with_stack=True) as prof:
        outer(torch.ones(2))
    meta = prof.trace.meta
    assert meta["recorder"] == "torch"
    assert prof.trace.stacks or not torchs_path_records_frames(prof.trace)
    [note] = [note for note in meta["notes"] if "with_stack" in note]
    assert "-dev" in note and "Python.h" in note
    with pytest.raises(RuntimeError, match="-dev"):
        with nbprof.profile(cuda=False, with_stack=True, recorder="native"):
            pass
    with nbprof.profile(cuda=False, memory=True) as prof:  # the rest of the native recorder stays
        outer(torch.ones(2))
    assert prof.trace.meta["recorder"] == "native"
    # memory without the one-shot hooks on other threads (python_calls.cpp's): it says so
    [note] = [note for note in prof.trace.meta["notes"] if note.startswith("memory:")]
    assert "first op" in note and "-dev" in note
    assert prof.trace.meta["native"]["library"] == str(library)


def test_a_carried_library_built_for_this_python_is_found_first_and_records_with_stack(
        carried, own_library, monkeypatch):
    """prebuild(..., python_headers) keys its library by that Python's version (CPython's C API
    is per version): this Python finds it before a Python-less one of the same torch."""
    torch_path = build.torch_dir()
    own = own_library
    if own is None or not PythonCalls(own.path).available():
        pytest.skip("this Python's library has no with_stack here")
    assert build.prebuilt_key(torch_path, build.python_version()) != \
        build.prebuilt_key(torch_path)
    for python in (None, build.python_version()):  # the bytes of what prebuild makes with them
        folder = carried / build.prebuilt_key(torch_path, python)
        folder.mkdir(parents=True)
        shutil.copy(own.path, folder / build.LIBRARY)
    monkeypatch.setenv("CXX", "false")
    with nbprof.profile(cuda=False, with_stack=True, recorder="native") as prof:
        outer(torch.ones(2))
    assert build.prebuilt_key(torch_path, build.python_version()) in \
        prof.trace.meta["native"]["library"]
    assert any(frame.endswith(": outer") for stack in prof.trace.stacks.values()
               for frame in stack)


def test_memory_is_recorded_beside_the_stacks_from_each_threads_first_python_call():
    """with_stack's profile function replaces the memory reporter's one-shot thread hooks and
    does their work: a worker woken in the block whose first act frees a tensor (outside any op)
    has that free recorded, and its stack too."""
    wake, ready, handed = threading.Event(), threading.Event(), []

    def sleeper():
        ready.set()
        wake.wait()
        handed.clear()  # frees 8 MiB before this thread's first op
        outer(torch.ones(2))

    alive = threading.Thread(target=sleeper, name="sleeping worker")
    alive.start()
    ready.wait()
    with nbprof.profile(cuda=False, with_stack=True, memory=True) as prof:
        handed.append(torch.ones(2 << 20))
        wake.set()
        alive.join()
    trace, memory = prof.trace, prof.trace.memory
    assert trace.meta["recorder"] == "native"
    assert not [note for note in trace.meta["notes"] if note.startswith("memory:")]
    lane = [thread.name for thread in trace.threads].index("sleeping worker")
    rows = np.flatnonzero(memory.thread == lane)
    first_op = trace.start_ns[(trace.thread == lane) & (trace.category == 0)].min()
    assert -(8 << 20) in memory.bytes[rows[memory.time_ns[rows] < first_op]].tolist()
    woken = f"{HERE}({line_of(sleeper) + 2}): sleeper"  # where it waited: wake.wait()
    assert ("aten::add", (f"{HERE}({line_of(inner)}): inner", f"{HERE}({line_of(outer)}): outer",
                          woken)) in op_stacks(trace, "sleeping worker")


def generator(x):
    yield x + 1
    yield x * 2


def test_a_generator_resumed_is_named_by_the_line_it_resumes_at_as_on_torchs_path():
    def ops_in_generator(recorder):
        with nbprof.profile(cuda=False, with_stack=True, recorder=recorder) as prof:
            for _ in generator(torch.ones(2)):
                pass
        return [entry for entry in op_stacks(prof.trace, "MainThread")
                if entry[0] in ("aten::add", "aten::mul")]

    require_torchs_frames()
    line = line_of(generator)
    native_ops = ops_in_generator("native")
    assert native_ops == ops_in_generator("torch")
    assert native_ops == [("aten::add", (f"{HERE}({line}): generator",)),
                          ("aten::mul", (f"{HERE}({line + 1}): generator",))]


def test_a_models_ops_have_torchs_stacks_with_its_modules_named_as_torch_names_them():
    """Every op of a forward and backward, on every lane, has the stack torch's path gives it
    (nn.Module calls named "nn.Module: Linear_0"), but for torch's innermost C-function frame
    ("<built-in method ...>"), which the native tracer does not record."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    inputs = torch.randn(4, 8)

    def step():
        model(inputs).sum().backward()

    step()

    def ops(recorder):
        with nbprof.profile(cuda=False, with_stack=True, recorder=recorder) as prof:
            step()
        trace = prof.trace
        python = trace.categories.index("python_function")
        return [(trace.threads[trace.thread[row]].name, trace.names[trace.name_id[row]],
                 tuple(frame for frame in trace.stacks.get(row, ())
                       if not frame.startswith("<built-in")))
                for row in range(len(trace)) if trace.category[row] != python]

    require_torchs_frames()
    native_ops = ops("native")
    assert native_ops == ops("torch")
    linear = [stack for _, name, stack in native_ops if name == "aten::linear"]
    assert [stack[2] for stack in linear] == ["nn.Module: Linear_0", "nn.Module: Linear_1"]
