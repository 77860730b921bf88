"""Ctrl-C while nbprof itself starts or stops torch's profiler (not while the block runs).

A real SIGINT is sent at the worst moments: just before the recorder turns torch's profiler off,
and just after it has turned it on, before nbprof has noted that it is recording.
"""

import os
import signal

import pytest
import torch

import nbprof
from nbprof.profiler import is_active


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
