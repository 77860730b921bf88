"""The widget's panes at scale, side by side with trace.key_averages() on the same trace: an area
selection's summary (nbprof/analysis/range_summary.py) over a tenth of the trace and over all of it, and
the details pane showing one event with its links (a click's whole cost in the kernel). The trace:
../shared/traces/gpu_training_step_68k.json.gz tiled (bench_timeline.tile) to ~1M CPU events.
Each figure is the median of 5 runs after a warm-up. No target: what a click or a drag costs.

    .venv/bin/python bench/bench_panes.py [--events 1000000]
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import nbprof  # noqa: E402
from bench_answers import median_seconds  # noqa: E402  (median of 5 after a warm-up)
from bench_timeline import SOURCE, tile  # noqa: E402
from nbprof.analysis.range_summary import range_summary  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    args = parser.parse_args()
    base = nbprof.load(SOURCE)
    trace = tile(base, max(1, math.ceil(args.events / len(base))))
    print(f"{len(trace):,} CPU events, {len(trace.gpu_start_ns):,} GPU intervals")
    first, last = int(trace.start_ns.min()), int(trace.end_ns.max())
    tenth = (first + (last - first) * 45 // 100, first + (last - first) * 55 // 100)

    from nbprof.notebook.details_pane import DetailsPane

    pane = DetailsPane(trace, on_jump=lambda row, kind: None)
    # an op with children and launched kernels, in the middle of the trace
    launched = np.flatnonzero(trace.gpu_launch >= 0)
    event = int(trace.gpu_launch[launched[len(launched) // 2]])
    figures = {
        "trace.key_averages()": median_seconds(trace.key_averages),
        "range_summary, a tenth of the trace": median_seconds(lambda: range_summary(trace, *tenth)),
        "range_summary, the whole trace": median_seconds(lambda: range_summary(trace, first, last)),
        "details pane: show one event + links": median_seconds(lambda: pane.show(event)),
    }
    baseline = figures["trace.key_averages()"]
    for name, seconds in figures.items():
        print(f"{name:40s} {seconds * 1e3:8.1f} ms   {seconds / baseline:5.2f}x key_averages")


if __name__ == "__main__":
    main()
