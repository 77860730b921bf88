"""Recording: nbprof.profile against torch.profiler (CPU-only), side by side in one run.

Prints three figures (see bench/RESULTS.md, "Core: recording and conversion"):
1. in-loop overhead per op, nbprof / torch.profiler (target <= 1.2x), for 20k ``x = x + 1`` and for
   an MLP forward+backward;
2. from leaving the block to a ready Trace and its key_averages(), ~100k events, torch.profiler's
   exit + prof.events() + prof.key_averages() / nbprof's (target >= 10x);
3. bytes a Trace of ~1M events holds, per event (target <= 100).

Usage: .venv/bin/python bench/bench_record.py [--rounds N] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import pathlib
import sys
import time
import tracemalloc

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import nbprof  # noqa: E402
from kernels.train_mlp import make_model  # noqa: E402

ADD_OPS = 20_000


def add_loop(count=ADD_OPS):
    x = torch.zeros(16)
    for _ in range(count):
        x = x + 1


def mlp_loop(model, inputs, steps=100):
    for _ in range(steps):
        model(inputs).sum().backward()


def torch_cpu_profiler():
    return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])


PROFILERS = {"none": contextlib.nullcontext, "torch.profiler": torch_cpu_profiler,
             "nbprof": nbprof.profile}


def time_inside(make_profiler, workload) -> float:
    """Seconds the workload takes inside the profiler's block (enter and exit not counted)."""
    with make_profiler():
        start = time.perf_counter()
        workload()
        elapsed = time.perf_counter() - start
    return elapsed


def in_loop_overhead(workload, rounds: int) -> dict:
    """Best seconds per profiler over interleaved rounds: on a shared machine noise only ever
    adds time, so the minimum is the steadiest estimate of each one's own cost."""
    for make_profiler in PROFILERS.values():  # warm-up: first-call costs are nobody's overhead
        time_inside(make_profiler, workload)
    seconds = {name: [] for name in PROFILERS}
    for _ in range(rounds):
        for name, make_profiler in PROFILERS.items():
            gc.collect()
            seconds[name].append(time_inside(make_profiler, workload))
    return {name: min(values) for name, values in seconds.items()}


def report_overhead(label: str, medians: dict, ops: int) -> float:
    none = medians["none"]
    torch_us = (medians["torch.profiler"] - none) / ops * 1e6
    ours_us = (medians["nbprof"] - none) / ops * 1e6
    ratio = ours_us / torch_us
    print(f"{label}: no profiler {none / ops * 1e6:.2f} us/op; overhead torch.profiler "
          f"+{torch_us:.2f} us/op, nbprof +{ours_us:.2f} us/op -> nbprof/torch = {ratio:.2f}x "
          f"(target <= 1.2x)")
    return ratio


def count_ops(workload) -> int:
    with nbprof.profile() as prof:
        workload()
    return int((prof.trace.depth == 0).sum())


def torch_exit_to_summary() -> tuple[float, int]:
    with torch_cpu_profiler() as torch_prof:
        add_loop()
        left_block = time.perf_counter()
    events = torch_prof.events()
    torch_prof.key_averages()
    return time.perf_counter() - left_block, len(events)


def nbprof_exit_to_summary() -> tuple[float, int]:
    with nbprof.profile() as prof:
        add_loop()
        left_block = time.perf_counter()
    prof.trace.key_averages()
    return time.perf_counter() - left_block, len(prof.trace)


def exit_to_summary(rounds: int) -> float:
    """Best of ``rounds`` (interleaved) seconds from the block's last statement to torch's
    FunctionEvents + key averages, and to nbprof's Trace + key averages."""
    add_loop(2_000)
    torch_runs, our_runs = [], []
    for _ in range(rounds):
        gc.collect()
        torch_runs.append(torch_exit_to_summary())
        gc.collect()
        our_runs.append(nbprof_exit_to_summary())
    (torch_seconds, torch_events), (ours_seconds, our_events) = min(torch_runs), min(our_runs)
    print(f"exit to summary, {ADD_OPS} x = x + 1 (best of {rounds}): torch.profiler "
          f"{torch_events} events in {torch_seconds:.2f} s (exit + events() + key_averages()); "
          f"nbprof {our_events} events in {ours_seconds:.3f} s (exit + Trace + key_averages()) "
          f"-> {torch_seconds / ours_seconds:.1f}x faster (target >= 10x)")
    return torch_seconds / ours_seconds


def deep_size(value, seen=None) -> int:
    """Bytes of a value and of the containers and strings it holds (numpy arrays: their data)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    if hasattr(value, "nbytes") and hasattr(value, "dtype"):
        return sys.getsizeof(value)  # numpy counts the data it owns in getsizeof
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(deep_size(k, seen) + deep_size(v, seen) for k, v in value.items())
    elif isinstance(value, (list, tuple, set)):
        size += sum(deep_size(item, seen) for item in value)
    return size


def memory_per_event(ops: int) -> float:
    """Bytes per event a Trace holds: what the conversion leaves allocated (tracemalloc counts
    numpy buffers too), and a walk over its columns, tables, meta and extras."""
    gc.collect()
    profiler = nbprof.profile()
    with contextlib.ExitStack() as stack:
        stack.enter_context(profiler)
        add_loop(ops)
        gc.collect()
        tracemalloc.start()
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    trace = profiler.trace
    walked = sum(deep_size(getattr(trace, slot)) for slot in trace.__slots__
                 if getattr(trace, slot, None) is not None)
    events = len(trace)
    print(f"memory: a Trace of {events} events holds {held / events:.1f} bytes/event "
          f"(tracemalloc) / {walked / events:.1f} bytes/event (walk over its fields) "
          f"(target <= 100)")
    return max(held, walked) / events


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="fewer rounds, 200k-event memory")
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds
    torch.set_num_threads(1)  # one core's work per op: the other core absorbs the machine's noise
    print(f"torch {torch.__version__}, {rounds} interleaved rounds, best of each")
    report_overhead(f"in-loop, {ADD_OPS} x = x + 1 (16 floats)",
                    in_loop_overhead(add_loop, rounds), ADD_OPS)
    model, inputs = make_model(64, device="cpu"), torch.randn(16, 64)

    def mlp():
        mlp_loop(model, inputs)

    report_overhead(f"in-loop, MLP forward+backward (per top-level op, {count_ops(mlp)})",
                    in_loop_overhead(mlp, rounds), count_ops(mlp))
    exit_to_summary(1 if args.quick else 2)
    memory_per_event(40_000 if args.quick else 200_000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
