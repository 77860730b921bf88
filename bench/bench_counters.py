"""A page with many counter series (issue 21): ``save_html`` of a trace holding 10,000 counter
series against the same trace with 10, side by side in one run. Every series shares one line
glyph (timeline/counters.py); with a glyph per series 10,000 took 163 s.

Each series: 20 samples of one counter ("C" event) on pid 1, beside one slice. Prints each
build's median of ``--repeats`` (alternating the two sizes) and their ratio.

    .venv/bin/python bench/bench_counters.py [--many 10000] [--few 10] [--repeats 3]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nbprof.model import CounterSeries, Trace  # noqa: E402
from nbprof.timeline import save_html  # noqa: E402

SAMPLES = 20


def trace_with_counters(count: int) -> Trace:
    rng = np.random.default_rng(0)
    times = np.arange(SAMPLES, dtype=np.int64) * 1000
    counters = [CounterSeries(name=f"counter {i}", series="value", pid=1, time_ns=times,
                              values=rng.random(SAMPLES)) for i in range(count)]
    return Trace.build(start_ns=[0], end_ns=[SAMPLES * 1000], thread=[0], name_id=[0],
                       names=["step"], threads=[(1, 1, "main")], counters=counters)


def build_seconds(trace: Trace, folder: pathlib.Path) -> float:
    started = time.perf_counter()
    save_html(trace, folder / "page.html")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--many", type=int, default=10_000)
    parser.add_argument("--few", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    traces = {size: trace_with_counters(size) for size in (args.few, args.many)}
    times = {size: [] for size in traces}
    with tempfile.TemporaryDirectory() as folder:
        build_seconds(traces[args.few], pathlib.Path(folder))  # warm-up: imports, numba's cache
        for _ in range(args.repeats):
            for size, trace in traces.items():
                times[size].append(build_seconds(trace, pathlib.Path(folder)))
    few, many = (statistics.median(times[size]) for size in (args.few, args.many))
    print(f"save_html, {args.few:,} counter series:   {few:.2f} s (median of {args.repeats})")
    print(f"save_html, {args.many:,} counter series: {many:.2f} s (median of {args.repeats})")
    print(f"ratio {args.many:,} / {args.few:,} series: {many / few:.2f}x")


if __name__ == "__main__":
    main()
