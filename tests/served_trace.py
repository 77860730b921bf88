"""A hand-built trace for the served level-of-detail tests (tests/unit, tests/browser)."""

import numpy as np

from nbprof.model import KIND_MEMCPY, Trace


def hand_built_trace():
    """Two threads (nested ops: long parents, bursts of tiny children, zero-length ones), two GPU
    streams (back-to-back kernels, an overlap, a long memcpy), on a ~1 ms span."""
    starts, ends, threads, names = [], [], [], []
    for thread, base in ((0, 0), (1, 37)):
        for parent in range(6):
            left = base + parent * 150_000
            starts.append(left), ends.append(left + 120_000), threads.append(thread)
            names.append(parent % 3)
            for child in range(40):  # a burst: 1-900 ns children with 0-3 µs gaps
                child_start = left + 100 + child * 2_500 + (child * 37 % 11) * 190
                starts.append(child_start)
                ends.append(child_start + (child * 7919 % 900) * (child % 5 != 0))
                threads.append(thread), names.append(3 + child % 4)
    order = np.lexsort((-np.asarray(ends), starts))
    gpu_start = [1_000 + k * 3_000 for k in range(200)] + [5_000, 400_000]
    gpu_end = [s + 2_000 + (k % 7) * 400 for k, s in enumerate(gpu_start[:200])] + [9_500, 760_000]
    return Trace.build(
        start_ns=np.asarray(starts)[order], end_ns=np.asarray(ends)[order],
        thread=np.asarray(threads)[order], name_id=np.asarray(names)[order],
        names=["step", "forward", "backward", "aten::add", "aten::mul", "aten::mm", "aten::relu",
               "sgemm", "Memcpy HtoD"],
        threads=[(1, 100, "MainThread"), (1, 101, "worker")],
        gpu_start_ns=gpu_start, gpu_end_ns=gpu_end, gpu_name_id=[7] * 201 + [8],
        gpu_device=[0] * 202, gpu_stream=[7] * 201 + [9], gpu_launch=[-1] * 202,
        gpu_kind=[1] * 201 + [KIND_MEMCPY])
