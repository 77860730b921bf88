"""Memory on the timeline (issue 23): what recording it costs, whether its peak is exact, and how a
million memory events draw and answer. Side by side in one run; figures in bench/RESULTS.md.

1. Recording cost per op on an allocating loop (20k ``y = x + 1``: 5 ops and 6 memory events an
   iteration), CPU time inside the block, best of interleaved rounds: torch.profiler (CPU,
   thread-local: the only mode in which torch records memory) with and without profile_memory,
   nbprof (native recorder) with and without memory=True. Target: nbprof's memory recording adds
   at most 0.5x what profile_memory=True adds to torch.profiler. Also each whole recorder with
   memory against no profiler.
2. Peak exact: a workload of known allocations (uint8 tensors of known sizes made and freed in a
   known order) against the running sum of those sizes.
3. 1M memory events (a synthetic trace: 200k ops on 4 threads, 1M allocations and frees): the
   wheel step (a 10% zoom, two frames) of the page with its memory lane against the same page
   without memory (target <= 1.5x), and memory_summary() + memory_peak() (target < 1 s).

    .venv/bin/python bench/bench_memory.py [--rounds 5] [--events 1000000] [--quick]
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
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402

import nbprof  # noqa: E402
from bench_timeline import AFTER_PAINT, CHROMIUM_ARGS, READY_NBPROF, STEP  # noqa: E402
from nbprof.model import MemoryEvents, Trace  # noqa: E402
from nbprof.timeline import Timeline  # noqa: E402

ITERATIONS = 20_000
OPS_PER_ITERATION = 5  # aten::add and the scalar's wrapping: aten::to, _to_copy, empty_strided, copy_
cpu_clock = time.process_time


def allocating_loop(count=ITERATIONS):
    x = torch.zeros(16)
    for _ in range(count):
        y = x + 1  # noqa: F841


def torch_profiler(memory):
    return lambda: torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                          profile_memory=memory)


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


PROFILERS = {
    "none": _Nothing,
    "torch.profiler": torch_profiler(False),
    "torch.profiler memory": torch_profiler(True),
    "nbprof": lambda: nbprof.profile(cuda=False, recorder="native"),
    "nbprof memory": lambda: nbprof.profile(cuda=False, recorder="native", memory=True),
}


def inside(make_profiler) -> float:
    with make_profiler():
        start = cpu_clock()
        allocating_loop()
        return cpu_clock() - start


def recording_cost(rounds: int) -> None:
    for make in PROFILERS.values():
        inside(make)  # warm-up: first calls are nobody's overhead
    seconds = {name: [] for name in PROFILERS}
    for _ in range(rounds):
        for name, make in PROFILERS.items():
            seconds[name].append(inside(make))
    best = {name: min(values) for name, values in seconds.items()}
    ops = ITERATIONS * OPS_PER_ITERATION
    per_op = {name: (value - best["none"]) / ops * 1e9 for name, value in best.items()}
    print(f"1. recording cost, {ITERATIONS:,} iterations of y = x + 1 ({ops:,} ops), best of "
          f"{rounds} interleaved rounds, CPU time:")
    for name, value in best.items():
        print(f"   {name:24s} {value / ITERATIONS * 1e6:6.2f} µs/iteration, +{per_op[name]:6.0f} ns/op")
    torch_memory = per_op["torch.profiler memory"] - per_op["torch.profiler"]
    ours_memory = per_op["nbprof memory"] - per_op["nbprof"]
    print(f"   memory's own added cost per op: nbprof {ours_memory:.0f} ns, torch.profiler "
          f"{torch_memory:.0f} ns: {ours_memory / torch_memory:.2f}x (target <= 0.5x)")
    print(f"   recording with memory, added per op: nbprof {per_op['nbprof memory']:.0f} ns, "
          f"torch.profiler {per_op['torch.profiler memory']:.0f} ns: "
          f"{per_op['nbprof memory'] / per_op['torch.profiler memory']:.2f}x")


def peak_exact() -> None:
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 8 << 20, 200).tolist()
    with nbprof.profile(cuda=False, recorder="native", memory=True) as prof:
        alive, running, peak = [], 0, 0
        for size in sizes:
            alive.append(torch.empty(size, dtype=torch.uint8))
            running += size
            peak = max(peak, running)
            if len(alive) > 5:
                running -= alive.pop(0).numel()
        del alive
    measured = int(prof.trace.memory_peak()["peak_bytes"][0])
    print(f"2. peak of 200 known allocations: nbprof {measured:,} B, running sum {peak:,} B: "
          f"{'exact' if measured == peak else f'off by {measured - peak:+,} B'}")


def synthetic(events: int, memory: bool) -> Trace:
    """200k ops on 4 threads over ~2 s; ``events`` allocations and frees in them (pairs by
    address, sizes 64 B..4 MiB, a slow rise to a peak and back)."""
    rng = np.random.default_rng(1)
    ops = 200_000
    start = np.sort(rng.integers(0, 2_000_000_000, ops))
    end = start + rng.integers(1_000, 20_000, ops)
    thread = rng.integers(0, 4, ops)
    memory_events = None
    if memory:
        pairs = events // 2
        size = rng.integers(64, 4 << 20, pairs)
        made = np.sort(rng.integers(0, 2_000_000_000, pairs))
        freed = made + rng.integers(1_000, 50_000_000, pairs)
        memory_events = MemoryEvents.build(
            time_ns=np.r_[made, freed], bytes=np.r_[size, -size],
            addr=np.r_[np.arange(pairs), np.arange(pairs)] * 4096 + (1 << 40),
            device=np.full(2 * pairs, -1), thread=np.tile(rng.integers(0, 4, pairs), 2))
    names = [f"aten::op{i}" for i in range(50)]
    return Trace.build(start_ns=start, end_ns=end, thread=thread, name_id=rng.integers(0, 50, ops),
                       names=names, threads=[(1, t, f"thread {t}") for t in range(4)],
                       memory=memory_events)


def answers(trace: Trace) -> None:
    start = time.perf_counter()
    import pandas  # noqa: F401  every table of the analysis is a DataFrame: imported once a session

    imported = time.perf_counter() - start
    start = time.perf_counter()
    trace.memory_summary()
    trace.memory_peak()
    elapsed = time.perf_counter() - start
    start = time.perf_counter()
    trace.memory_holders()
    holders = time.perf_counter() - start
    print(f"3b. memory_summary() + memory_peak() on {len(trace.memory):,} memory events: "
          f"{elapsed:.2f} s (target < 1 s; pandas' import before it, once a session: "
          f"{imported:.2f} s); memory_holders(): {holders:.2f} s")


def wheel_steps(with_memory: Trace, without: Trace, repeats: int) -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder:
        paths = {}
        for tag, trace in (("with memory", with_memory), ("without", without)):
            paths[tag] = Timeline(trace).save(pathlib.Path(folder) / f"{tag.replace(' ', '_')}.html")
        steps = {tag: [] for tag in paths}
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                                 args=CHROMIUM_ARGS)
            try:
                for _ in range(repeats):
                    for tag, path in paths.items():
                        page = browser.new_page(viewport={"width": 1400, "height": 900})
                        page.goto(path.as_uri(), timeout=600_000)
                        page.wait_for_function(READY_NBPROF, timeout=600_000, polling=50)
                        page.evaluate(AFTER_PAINT)
                        # from the widest view in: wide views are where merging works hardest
                        steps[tag].append(statistics.median(page.evaluate(STEP, ["zoom"])
                                                            for _ in range(8)))
                        page.close()
            finally:
                browser.close()
    # the busy shared machine only ever adds time: the best page load of each is its own cost
    ours, base = min(steps["with memory"]), min(steps["without"])
    print(f"3a. wheel step (10% zoom, two frames), {len(with_memory.memory):,} memory events: "
          f"{ours * 1e3:.0f} ms with the memory lane, {base * 1e3:.0f} ms without: "
          f"{ours / base:.2f}x (target <= 1.5x)")


def served_page(with_memory: Trace, without: Trace) -> None:
    """A page past its embedding budget (100k): its bytes with the memory lane reduced
    (memory_served.py), with every memory event embedded (as before it), and without memory;
    and the kernel's answer to a view of a tenth of the trace, 1400 px wide."""
    from nbprof.timeline import view

    budget = 100_000
    with tempfile.TemporaryDirectory() as folder:
        def size(trace, name):
            return Timeline(trace, max_embedded_events=budget).save(
                pathlib.Path(folder) / f"{name}.html").stat().st_size

        reduced, base = size(with_memory, "reduced"), size(without, "base")
        strip = view.memory_strip
        view.memory_strip = lambda *args, reduce=False: strip(*args, reduce=False)
        try:
            full = size(with_memory, "full")
        finally:
            view.memory_strip = strip
    timeline = Timeline(with_memory, max_embedded_events=budget)
    callback = next(cb for cb in timeline.layout.document.callbacks._js_event_callbacks
                    ["document_ready"] if "devices" in cb.args)
    span = float(with_memory.memory.time_ns[-1] - timeline._origin_ns)
    took = []
    for k in range(5):
        start = time.perf_counter()
        callback.args["request"].data = {"x0": [span * k / 10], "x1": [span * (k + 1) / 10],
                                         "width": [1400], "key": [str(k)]}
        took.append(time.perf_counter() - start)
    points = len(callback.args["answer"].data["t"][0])
    mb = 1e6
    print(f"3c. served page (budget {budget:,}), {len(with_memory.memory):,} memory events: "
          f"{reduced / mb:.1f} MB with the memory lane reduced, {full / mb:.1f} MB with every "
          f"memory event embedded, {base / mb:.1f} MB without memory (the lane's own bytes: "
          f"{(reduced - base) / mb:.2f} MB vs {(full - base) / mb:.1f} MB, "
          f"{(full - base) / max(reduced - base, 1):.0f}x smaller); the kernel's answer for a "
          f"view of a tenth, 1400 px: {statistics.median(took) * 1e3:.0f} ms (median of 5), "
          f"{points:,} points")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3, help="page loads of each, alternating")
    parser.add_argument("--quick", action="store_true", help="2 rounds, 100k events")
    parser.add_argument("--served-only", action="store_true",
                        help="the answers and the served page only (no recording, no browser)")
    options = parser.parse_args()
    if options.quick:
        options.rounds, options.events = 2, 100_000
    if not options.served_only:
        recording_cost(options.rounds)
        peak_exact()
    with_memory = synthetic(options.events, memory=True)
    answers(with_memory)
    without = synthetic(options.events, memory=False)
    served_page(with_memory, without)
    if options.served_only:
        return
    wheel_steps(with_memory, without, repeats=options.repeats)


if __name__ == "__main__":
    main()
