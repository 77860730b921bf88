"""A profile loses nothing of the user's own profilers: the native recorder's thread hooks (memory's
one-shot hook, with_stack's profile function, threading's hook) leave every thread's profile
function as it was after the block, and the user's profiler keeps receiving its events."""

from __future__ import annotations

import cProfile
import pstats
import sys
import threading

import pytest
import torch

import nbprof
from nbprof.record import native
from nbprof.record.native.python_calls import PythonCalls


@pytest.fixture(scope="module", autouse=True)
def native_library():
    library = native.load()
    if library is None:
        pytest.skip(f"the native recorder does not build here: {native.why_not()}")
    return library


@pytest.fixture
def with_stack(native_library):
    if not PythonCalls(native_library.path).available():
        pytest.skip("this library records no with_stack here (no Python headers)")


def during_block(x):
    return x + 1


def after_block(x):
    return x * 2


class ProfiledWorker:
    """A worker thread that runs ``profiler`` ("cprofile" or "setprofile") from before the block
    to after it: calls during_block inside the block and after_block after it."""

    def __init__(self, profiler: str):
        self.profiler = profiler
        self.ready, self.wake, self.again, self.done = (threading.Event() for _ in range(4))
        self.events: list = []  # setprofile's: (event, function name)
        self.before = self.after = self.stats = None
        self.thread = threading.Thread(target=self.run, name=f"{profiler} worker")
        self.thread.start()
        self.ready.wait()

    def record(self, frame, event, arg):
        self.events.append((event, frame.f_code.co_name))

    def run(self):
        profile = cProfile.Profile() if self.profiler == "cprofile" else None
        if profile is not None:
            profile.enable()
        else:
            sys.setprofile(self.record)
        self.before = sys.getprofile()
        self.ready.set()
        self.wake.wait()
        during_block(torch.ones(3))
        self.done.set()
        self.again.wait()
        after_block(torch.ones(3))
        self.after = sys.getprofile()
        if profile is not None:
            profile.disable()
            self.stats = {name for _file, _line, name in pstats.Stats(profile).stats}
        else:
            sys.setprofile(None)

    def inside_block(self):
        self.wake.set()
        self.done.wait()

    def after_the_block(self):
        self.again.set()
        self.thread.join()

    def seen(self) -> set:
        if self.stats is not None:
            return self.stats
        return {name for event, name in self.events if event == "call"}


@pytest.mark.parametrize("profiler", ["cprofile", "setprofile"])
@pytest.mark.parametrize("options", [dict(memory=True), dict(with_stack=True),
                                     dict(memory=True, with_stack=True)], ids=str)
def test_a_worker_threads_profiler_keeps_profiling_through_the_block(profiler, options,
                                                                      native_library):
    if options.get("with_stack") and not PythonCalls(native_library.path).available():
        pytest.skip("this library records no with_stack here (no Python headers)")
    worker = ProfiledWorker(profiler)
    with nbprof.profile(cuda=False, recorder="native", **options) as prof:
        worker.inside_block()
    worker.after_the_block()
    assert worker.after is worker.before is not None
    assert {"during_block", "after_block"} <= worker.seen()
    assert prof.trace.meta["recorder"] == "native"
    if options.get("with_stack"):  # and the worker's calls are recorded all the same
        assert any(frame.endswith(": during_block") for stack in prof.trace.stacks.values()
                   for frame in stack)


def test_the_main_threads_setprofile_is_kept_and_sees_the_blocks_calls(with_stack):
    events = []

    def user_profiler(frame, event, arg):
        events.append((event, frame.f_code.co_name))

    sys.setprofile(user_profiler)
    try:
        with nbprof.profile(cuda=False, with_stack=True, memory=True, recorder="native") as prof:
            during_block(torch.ones(2))
        after_block(torch.ones(2))
        still = sys.getprofile()
    finally:
        sys.setprofile(None)
    assert still is user_profiler
    called = {name for event, name in events if event == "call"}
    assert {"during_block", "after_block"} <= called
    assert any(frame.endswith(": during_block") for stack in prof.trace.stacks.values()
               for frame in stack)


@pytest.mark.parametrize("options", [dict(memory=True), dict(with_stack=True)], ids=str)
def test_threadings_hook_is_kept_and_a_thread_started_in_the_block_keeps_it_after(
        options, native_library):
    if options.get("with_stack") and not PythonCalls(native_library.path).available():
        pytest.skip("this library records no with_stack here (no Python headers)")
    events, started, again = [], threading.Event(), threading.Event()

    def user_hook(frame, event, arg):
        events.append((event, frame.f_code.co_name))

    def spawned():
        during_block(torch.ones(2))
        started.set()
        again.wait()
        after_block(torch.ones(2))

    threading.setprofile(user_hook)
    try:
        with nbprof.profile(cuda=False, recorder="native", **options):
            thread = threading.Thread(target=spawned, name="spawned")
            thread.start()
            started.wait()
        hook_after = threading.getprofile()
        again.set()
        thread.join()
    finally:
        threading.setprofile(None)
    assert hook_after is user_hook
    called = {name for event, name in events if event == "call"}
    assert {"run", "during_block", "after_block"} <= called


def test_code_in_the_block_that_sets_its_own_profiler_and_puts_back_the_saved_one(with_stack):
    """sys.getprofile() in a with_stack block is the recorder's: code that saves it, profiles
    something itself and sets the saved one back (as profilers and debuggers do) runs without
    error, its own profiler sees its calls, and recording resumes after it."""
    seen = []

    def own(frame, event, arg):
        seen.append((event, frame.f_code.co_name))

    with nbprof.profile(cuda=False, with_stack=True, recorder="native") as prof:
        saved = sys.getprofile()
        sys.setprofile(own)
        during_block(torch.ones(2))
        sys.setprofile(saved)
        after_block(torch.ones(2))
    assert sys.getprofile() is None
    assert ("call", "during_block") in seen and ("call", "after_block") not in seen
    frames = {frame.split(": ")[-1] for stack in prof.trace.stacks.values() for frame in stack}
    assert "after_block" in frames and "during_block" not in frames


@pytest.mark.parametrize("options", [dict(memory=True), dict(with_stack=True)], ids=str)
def test_repeated_profiles_load_the_python_hooks_library_once(monkeypatch, options):
    # each start bound python_calls.cpp's functions anew (a ctypes.PyDLL and its function
    # pointers, ~40 µs): a loop of short profiles paid it every time
    import ctypes

    loads = []
    real = ctypes.PyDLL

    def counted(*args, **kwargs):
        loads.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(ctypes, "PyDLL", counted)
    x = torch.ones(4)
    for _ in range(3):
        with nbprof.profile(cuda=False, recorder="native", **options) as prof:
            during_block(x)
        assert "aten::add" in prof.trace.names
    assert len(loads) <= 1
