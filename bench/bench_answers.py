"""Steps, kernel summary and diff at scale, side by side with key_averages() on the same traces.

The traces: ../shared/traces/gpu_training_step_68k.json.gz (39k CPU events + 6k GPU intervals)
tiled with fresh ids and times (bench_timeline.tile) to ~1M CPU events for trace.steps() and
trace.kernel_summary() (targets: <= 0.5 s each), and to ~100k for nbprof.diff(before, after)
(target: <= 1 s), where ``after`` is the same tiling with each op's self time and each GPU
interval's length jittered (so most matches change, as between two real runs). Each figure is the
median of 5 runs after a warm-up; the ratio is to trace.key_averages() on the same trace.

    .venv/bin/python bench/bench_answers.py [--events 1000000] [--diff-events 100000]
"""

from __future__ import annotations

import argparse
import math
import pathlib
import statistics
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import nbprof  # noqa: E402
from bench_timeline import SOURCE, tile  # noqa: E402
from nbprof.model import Trace  # noqa: E402

RUNS = 5


def median_seconds(function) -> float:
    function()  # warm-up: imports (pandas), caches
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def jittered(trace: Trace, seed: int = 0) -> Trace:
    """The same events, each op's self time and each GPU interval's length scaled by 0.8..1.2."""
    rng = np.random.default_rng(seed)
    gpu_length = trace.gpu_end_ns - trace.gpu_start_ns
    columns = {name: getattr(trace, name) for name in (
        "start_ns", "end_ns", "thread", "name_id", "category", "depth", "parent", "gpu_start_ns",
        "gpu_name_id", "gpu_device", "gpu_stream", "gpu_launch", "gpu_kind")}
    return Trace(**columns, self_ns=(trace.self_ns * rng.uniform(0.8, 1.2, len(trace))).astype(np.int64),
                 gpu_end_ns=trace.gpu_start_ns + (gpu_length * rng.uniform(0.8, 1.2, len(gpu_length)))
                 .astype(np.int64), names=trace.names, threads=trace.threads,
                 categories=trace.categories, meta=trace.meta)


def report(what: str, seconds: float, baseline: float, target: float, events: int) -> bool:
    ok = seconds <= target
    print(f"{what:<34} {events:>9,} events  {seconds:7.3f} s  (key_averages {baseline:.3f} s, "
          f"ratio {seconds / baseline:5.1f}x)  target <= {target} s: {'met' if ok else 'MISSED'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--diff-events", type=int, default=100_000)
    options = parser.parse_args()
    base = nbprof.load(SOURCE)
    big = tile(base, math.ceil(options.events / len(base)))
    small = tile(base, math.ceil(options.diff_events / len(base)))
    after = jittered(small)
    print(f"source {SOURCE.name}: {len(base):,} CPU events; big {len(big):,} CPU + "
          f"{len(big.gpu_start_ns):,} GPU; diff traces {len(small):,} CPU + {len(small.gpu_start_ns):,} GPU")
    averages_big = median_seconds(big.key_averages)
    averages_small = median_seconds(lambda: (small.key_averages(), after.key_averages()))
    results = [
        report("trace.steps()", median_seconds(big.steps), averages_big, 0.5, len(big)),
        report("trace.kernel_summary()", median_seconds(big.kernel_summary), averages_big, 0.5, len(big)),
        report("kernel_summary(memory=True)", median_seconds(lambda: big.kernel_summary(memory=True)),
               averages_big, 0.5, len(big)),
        report("nbprof.diff(before, after)", median_seconds(lambda: nbprof.diff(small, after)),
               averages_small, 1.0, len(small)),
    ]
    steps = big.steps()
    print(f"(steps found: {len(steps)} from {steps['source'][0] if len(steps) else '-'}; "
          f"findings: {len(big.findings())})")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
