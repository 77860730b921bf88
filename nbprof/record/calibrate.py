"""What one recorded op costs under the profilers that are on: empty ranges timed off and on.

Each empty range is one RecordFunction enter/exit (torch's cheapest op-shaped event: the same
callbacks every op runs, with nothing inside), called through the C entry points so that Python
adds as little as possible. Off is measured before the profilers start, on right after, as the
best of a few rounds (the least disturbed by other processes). The ranges are recorded like
any op: they carry the ``nbprof::`` prefix, which the converters never show, and the recorder
drops the Kineto rows of its own start-up window. Timed in this thread's CPU time: on a shared
machine wall time charges other processes' slices to whichever loop was running.
"""

from __future__ import annotations

from time import thread_time_ns

import torch

CALIBRATION_NAME = "nbprof::calibrate"
ROUNDS = 9  # many short rounds: the best of them misses the machine's noise (5 x 200 swung 26-1143 ns)
RANGES_PER_ROUND = 50


def best_per_range_ns() -> float:
    """The fastest round's time per empty range, in ns."""
    enter = torch._C._autograd._record_function_with_args_enter
    leave = torch._C._autograd._record_function_with_args_exit
    best = None
    for _ in range(ROUNDS):
        start = thread_time_ns()
        for _ in range(RANGES_PER_ROUND):
            leave(enter(CALIBRATION_NAME))
        elapsed = thread_time_ns() - start
        best = elapsed if best is None else min(best, elapsed)
    return best / RANGES_PER_ROUND


def per_op_overhead_ns(off_ns: float) -> float:
    """With the profilers on now: what each op costs more than ``off_ns`` (measured off)."""
    return max(best_per_range_ns() - off_ns, 0.0)
