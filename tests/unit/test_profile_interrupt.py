"""Ctrl-C while nbprof itself starts or stops torch's profiler (not while the block runs).

A real SIGINT is sent at the worst moments: just before the recorder turns torch's profiler off,
and just after it has turned it on, before nbprof has noted that it is recording.
"""

import os
import signal
import subprocess
import sys

import pytest
import torch

import nbprof
from nbprof.record.profiler import is_active


def add_ones(count):
    x = torch.zeros(4)
    for _ in range(count):
        x = x + 1
    return x


def interrupt_before(method):
    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        return method(*args, **kwargs)

    return interrupted


def interrupt_after(method):
    def interrupted(*args, **kwargs):
        result = method(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        return result

    return interrupted


def adds(trace):
    return sum(1 for event in trace.events if event.name == "aten::add")


def ops_still_recorded() -> int:
    """How many ops a profiler left running records (then it is stopped). All-threads Kineto is
    process-wide, which torch.autograd._profiler_enabled() (thread-local) does not see."""
    add_ones(2)
    leftover = torch.autograd._disable_profiler()  # only warns when nothing is running
    return sum(1 for event in leftover.events() if event.name() == "aten::add")


def assert_profiler_off_and_usable():
    assert not is_active() and not torch.autograd._profiler_enabled()
    assert ops_still_recorded() == 0
    with nbprof.profile() as again:
        add_ones(2)
    assert adds(again.trace) == 2


def test_ctrl_c_during_stop_leaves_the_profiler_off_and_keeps_the_trace():
    prof = nbprof.profile()
    with pytest.raises(KeyboardInterrupt):
        with prof:
            add_ones(3)
            prof._recorder.stop = interrupt_before(prof._recorder.stop)
    assert adds(prof.trace) == 3  # the interrupt waited for the trace, then came through
    assert_profiler_off_and_usable()


def test_ctrl_c_during_start_leaves_the_profiler_off():
    prof = nbprof.profile()
    recorder, meta = prof._choose_backend()
    recorder.start = interrupt_after(recorder.start)
    prof._choose_backend = lambda legacy=True: (recorder, meta)
    with pytest.raises(KeyboardInterrupt):
        with prof:
            pytest.fail("the block must not run after an interrupted start")
    assert prof.trace is None
    assert_profiler_off_and_usable()


class InterruptOnRelease:
    """nbprof's state lock (a real one), with a real SIGINT sent as it is released: Python raises
    the KeyboardInterrupt at its next check, just after the release, when the start is done but
    __enter__ has not yet returned (the ``with`` block, and so __exit__, not yet entered)."""

    def __init__(self, lock):
        self.lock = lock
        self.armed = True

    def __enter__(self):
        return self.lock.__enter__()

    def __exit__(self, *exception):
        self.lock.__exit__(*exception)
        if self.armed and is_active():  # the start's release, not a failed start's or the stop's
            self.armed = False
            os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_after_the_start_before_enter_returns_leaves_the_profiler_off(monkeypatch):
    from nbprof.record import profiler

    monkeypatch.setattr(profiler, "_state_lock", InterruptOnRelease(profiler._state_lock))
    with pytest.raises(KeyboardInterrupt):
        with nbprof.profile():
            pytest.fail("the block must not run after an interrupted start")
    assert not profiler._state_lock.armed  # the interrupt came where it was meant to
    assert_profiler_off_and_usable()


def test_ctrl_c_tests_hold_when_pytest_starts_as_a_background_job():
    """A shell without job control starts `make test &` with SIGINT ignored, which Python keeps:
    every real SIGINT of these tests then vanished (a full run failed so, at its first Ctrl-C
    test). The suite's conftest installs Python's handler, as Jupyter's kernel does for a cell."""
    test = f"{__file__}::test_ctrl_c_during_start_leaves_the_profiler_off"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test]
    run = subprocess.run(["sh", "-c", '"$@" & wait "$!"', "sh", *command],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
