"""What one recorded op costs under the profilers that are on: empty ranges timed off and on.

Each empty range is one RecordFunction enter/exit (torch's cheapest op-shaped event: the same
callbacks every op runs, with nothing inside), called through the C entry points so that Python
adds as little as possible. Measured right after the profilers start, in rounds that alternate
RecordFunction off for this thread (``torch.autograd._enable_record_function``: no callback
runs, as with no profiler) and on: each pair of rounds lies within a fraction of a millisecond,
so a shared machine's slow and fast spells (here a range took 1.3 µs in some, 2.5 µs in others)
fall on both of a pair, and the median difference is the profilers' cost. Timed in this
thread's CPU time. The ranges recorded carry the ``nbprof::`` prefix, which the converters
never show, and the recorder drops the Kineto rows of its own start-up window.
"""

from __future__ import annotations

import statistics
from time import thread_time_ns

import torch

CALIBRATION_NAME = "nbprof::calibrate"
# Pairs of rounds, off then on. The difference is ~0.3 µs a range against ~1.5 µs of the range's
# own Python call, and a busy host's jitter moves a round by as much: with 9 pairs the median
# fell to 0 now and then (a test caught it twice in an hour); 25 pairs cost ~5 ms at start.
ROUNDS = 25
RANGES_PER_ROUND = 50


def _per_range_ns() -> float:
    enter = torch._C._autograd._record_function_with_args_enter
    leave = torch._C._autograd._record_function_with_args_exit
    start = thread_time_ns()
    for _ in range(RANGES_PER_ROUND):
        leave(enter(CALIBRATION_NAME))
    return (thread_time_ns() - start) / RANGES_PER_ROUND


def _per_allocation_ns() -> float:
    storage = torch.UntypedStorage  # an allocation and a free through c10's CPU allocator, no op
    start = thread_time_ns()
    for _ in range(RANGES_PER_ROUND):
        storage(64)
    return (thread_time_ns() - start) / RANGES_PER_ROUND


def per_memory_event_ns(pause) -> float:
    """With memory recorded now: what each allocation or free costs more, from rounds with the
    reports paused (``pause(True)``) and not. The calibration's own events are nbprof's: the
    profiler leaves out the events of this thread in its window."""
    differences = []
    for _ in range(ROUNDS):
        pause(True)
        try:
            off = _per_allocation_ns()
        finally:
            pause(False)
        differences.append((_per_allocation_ns() - off) / 2)  # an allocation and its free
    return max(statistics.median(differences), 0.0)


def per_op_overhead_ns() -> float:
    """With the profilers on now: what each op costs more than it would without them."""
    differences = []
    for _ in range(ROUNDS):
        torch.autograd._enable_record_function(False)
        try:
            off = _per_range_ns()
        finally:
            torch.autograd._enable_record_function(True)
        differences.append(_per_range_ns() - off)
    return max(statistics.median(differences), 0.0)
