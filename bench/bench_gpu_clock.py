"""The CUDA-event path's GPU clock (nbprof/record/gpu_clock.py), side by side with the old placement
(each event measured straight from the one start anchor), on fake legacy records that behave like
torch's (float32 cudaEventElapsedTime: tests/unit/legacy_fakes.py). Arithmetic, no GPU: what it
shows is the error the clock's method adds; a real GPU adds its own timer's.

Prints, for a 10-minute profile with an op every 100 ms (a few us of jitter), the largest GPU-start
error against the truth: drift 0 or 40 ppm, with and without a stop anchor; and the conversion
time of 30k ops, both methods (the same number of elapsed-time queries: one per record).

Usage: .venv/bin/python bench/bench_gpu_clock.py
"""

from __future__ import annotations

import pathlib
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "unit")]

import nbprof.record.gpu_clock as gpu_clock  # noqa: E402
from legacy_fakes import ANCHOR, EPOCH_NS, Recording  # noqa: E402
from nbprof.record.convert import legacy_records_to_trace  # noqa: E402
from nbprof.model import Thread  # noqa: E402

SECOND = 1_000_000_000
CHAINED = gpu_clock._chained_offsets


def from_the_anchor(records, rows, anchor_index):
    """The old placement: each event's offset straight from the anchor (one float32 query)."""
    anchor = records[rows[anchor_index]]
    return np.array([anchor.cuda_elapsed_us(records[row]) * 1000.0 for row in rows.tolist()])


def long_profile(drift_ppm, stop_anchor):
    rec = Recording(drift_ppm=drift_ppm)
    rec.anchor(0, 1_000)
    jitter = np.random.default_rng(1).integers(0, 5_000, 6_000)
    for index, start in enumerate(range(SECOND, 600 * SECOND, SECOND // 10)):
        start += int(jitter[index])  # the events complete 500 ns after their records
        rec.op("aten::mm", start, start + 20_000, gpu=(start + 500, start + 20_500))
    if stop_anchor:
        rec.anchor(0, 600 * SECOND + 1_000)
    return rec


def convert(rec):
    return legacy_records_to_trace(list(rec.lists.values()), anchor_name=ANCHOR,
                                   base_time_ns=EPOCH_NS, starting_thread=Thread(1, 1, "main"))


def max_error_us(rec, method):
    gpu_clock._chained_offsets = method
    trace = convert(rec)
    # truth: each GPU start 500 ns after its CPU start, and those 500 ns are what no record
    # can prove, so the corrected clock puts the GPU start at the CPU start
    return float(np.abs(trace.gpu_start_ns - trace.start_ns[trace.gpu_launch]).max()) / 1e3


def main():
    for drift_ppm, stop_anchor in [(0, False), (40, False), (40, True)]:
        rec = long_profile(drift_ppm, stop_anchor)
        old, new = max_error_us(rec, from_the_anchor), max_error_us(rec, CHAINED)
        print(f"10 min, drift {drift_ppm} ppm, stop anchor {'yes' if stop_anchor else 'no '}: "
              f"max GPU-start error from the anchor {old:.1f} us, chained {new:.3f} us")
    rec = Recording()
    rec.anchor(0, 1_000)
    for index in range(30_000):
        start = 10_000 + index * 10_000
        rec.op("aten::mm", start, start + 3_000, gpu=(start + 500, start + 3_500))
    for label, method in [("from the anchor", from_the_anchor), ("chained", CHAINED)]:
        gpu_clock._chained_offsets = method
        best = min(_timed(rec) for _ in range(3))
        print(f"convert 30k ops (fake records), {label}: {best:.3f} s")
    gpu_clock._chained_offsets = CHAINED


def _timed(rec):
    start = time.perf_counter()
    convert(rec)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
