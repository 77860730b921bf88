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
from bench.figures import figure  # noqa: E402
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


def nbprof_cpu():
    return nbprof.profile(cuda=False)


PROFILERS = {"none": contextlib.nullcontext, "torch.profiler": torch_cpu_profiler,
             "nbprof": nbprof_cpu}


# CPU seconds of this process, not wall time: on these shared 2-core machines other people's
# jobs take the cores away for whole seconds, which wall time charges to whoever was running.
# Every CPU-side cost measured here (the op, torch's callbacks, the conversion) is CPU time.
# The GPU figures use wall time: waiting on the GPU is their point.
cpu_clock = time.process_time


def time_inside(make_profiler, workload, clock=cpu_clock) -> float:
    """Seconds the workload takes inside the profiler's block (enter and exit not counted)."""
    with make_profiler():
        start = clock()
        workload()
        elapsed = clock() - start
    return elapsed


def overhead_rounds(workload, rounds: int, profilers=None, clock=cpu_clock) -> dict:
    """Seconds per profiler, one per interleaved round, after a warm-up round (first-call costs
    are nobody's overhead)."""
    profilers = profilers or PROFILERS
    for make_profiler in profilers.values():
        time_inside(make_profiler, workload, clock)
    seconds = {name: [] for name in profilers}
    for _ in range(rounds):
        for name, make_profiler in profilers.items():
            gc.collect()
            seconds[name].append(time_inside(make_profiler, workload, clock))
    return seconds


def in_loop_overhead(workload, rounds: int, profilers=None, clock=cpu_clock) -> dict:
    """Best seconds per profiler over interleaved rounds: on a shared machine noise only ever
    adds time, so the minimum is the steadiest estimate of each one's own cost."""
    seconds = overhead_rounds(workload, rounds, profilers, clock)
    return {name: min(values) for name, values in seconds.items()}


def report_overhead(label: str, best: dict, ops: int) -> float:
    none = best["none"]
    torch_us = (best["torch.profiler"] - none) / ops * 1e6
    ours_us = (best["nbprof"] - none) / ops * 1e6
    ratio = ours_us / torch_us
    print(f"{label}: no profiler {none / ops * 1e6:.2f} us/op; overhead torch.profiler "
          f"+{torch_us:.2f} us/op, nbprof +{ours_us:.2f} us/op -> nbprof/torch = {ratio:.2f}x "
          f"(target <= 1.2x)")
    return ratio


def count_ops(workload) -> int:
    with nbprof.profile(cuda=False) as prof:
        workload()
    return int((prof.trace.depth == 0).sum())


def torch_exit_to_summary(torch_profiler=torch_cpu_profiler) -> tuple[float, int]:
    with torch_profiler() as torch_prof:
        add_loop()
        left_block = cpu_clock()
    events = torch_prof.events()
    torch_prof.key_averages()
    return cpu_clock() - left_block, len(events)


def nbprof_exit_to_summary(recorder: str = "auto") -> tuple[float, int]:
    with nbprof.profile(cuda=False, recorder=recorder) as prof:
        add_loop()
        left_block = cpu_clock()
    prof.trace.key_averages()
    return cpu_clock() - left_block, len(prof.trace)


def exit_to_summary(rounds: int, torch_profiler=torch_cpu_profiler, recorder: str = "auto",
                    target: float = 30) -> float:
    """Best of ``rounds`` (interleaved) seconds from the block's last statement to torch's
    FunctionEvents + key averages, and to nbprof's Trace + key averages (issue 19: >= 30x)."""
    add_loop(2_000)
    torch_runs, our_runs = [], []
    for _ in range(rounds):
        gc.collect()
        torch_runs.append(torch_exit_to_summary(torch_profiler))
        gc.collect()
        our_runs.append(nbprof_exit_to_summary(recorder))
    (torch_seconds, torch_events), (ours_seconds, our_events) = min(torch_runs), min(our_runs)
    print(f"exit to summary, {ADD_OPS} x = x + 1 (best of {rounds}): torch.profiler "
          f"{torch_events} events in {torch_seconds:.2f} s (exit + events() + key_averages()); "
          f"nbprof ({recorder} recorder) {our_events} events in {ours_seconds:.4f} s (exit + Trace "
          f"+ key_averages()) -> {torch_seconds / ours_seconds:.1f}x faster (target >= {target:g}x)")
    return torch_seconds / ours_seconds


def legacy_conversion() -> float:
    """The CUDA-event path's conversion, on the legacy profiler's CPU-mode records (the same
    record objects, minus the CUDA events, whose elapsed-time queries are not counted), against
    torch's own parse of the same records into FunctionEvents."""
    from torch._C._profiler import _ExperimentalConfig
    from torch.autograd import ProfilerConfig, ProfilerState
    from torch.autograd.profiler_legacy import _parse_legacy_records

    from nbprof.record.convert import legacy_records_to_trace
    from nbprof.model import Thread

    config = ProfilerConfig(ProfilerState.CPU, False, False, False, False, False,
                            _ExperimentalConfig())
    base_time_ns = time.time_ns()
    torch._C._autograd._enable_profiler_legacy(config)
    add_loop()
    thread_lists = torch._C._autograd._disable_profiler_legacy()
    start = cpu_clock()
    torch_events = _parse_legacy_records(thread_lists)
    torch_seconds = cpu_clock() - start
    start = cpu_clock()
    trace = legacy_records_to_trace(thread_lists, anchor_name="none", base_time_ns=base_time_ns,
                                    starting_thread=Thread(0, 0, "MainThread"))
    trace.key_averages()
    ours_seconds = cpu_clock() - start
    print(f"legacy records -> events, {ADD_OPS} x = x + 1 (CPU mode): torch's parse "
          f"{len(torch_events)} FunctionEvents in {torch_seconds:.2f} s; nbprof {len(trace)} "
          f"events + key_averages() in {ours_seconds:.3f} s -> {torch_seconds / ours_seconds:.1f}x")
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
    profiler = nbprof.profile(cuda=False)
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
    parser.add_argument("--gpu", action="store_true", help="only the GPU figures")
    parser.add_argument("--profile-exit", action="store_true",
                        help="with --gpu: where leaving a block of 20k GPU ops spends its time")
    args = parser.parse_args()
    rounds = 3 if args.quick else args.rounds
    torch.set_num_threads(1)  # one core's work per op: the other core absorbs the machine's noise
    print(f"torch {torch.__version__}, {rounds} interleaved rounds, best of each; CPU figures in "
          "process CPU time, GPU figures in wall time")
    if not args.gpu:
        cpu_figures(rounds, args.quick)
    if torch.cuda.is_available():
        gpu_figures(rounds)
        if args.profile_exit:
            profile_gpu_exit()
    elif args.gpu:
        print("--gpu: no CUDA device here (torch.cuda.is_available() is False)")
        return 1
    else:
        print("GPU figures: skipped, no CUDA device (run bench/gpu_check.sh on a GPU machine)")
    return 0


def cpu_figures(rounds: int, quick: bool) -> None:
    report_overhead(f"in-loop, {ADD_OPS} x = x + 1 (16 floats)",
                    in_loop_overhead(add_loop, rounds), ADD_OPS)
    model, inputs = make_model(64, device="cpu"), torch.randn(16, 64)

    def mlp():
        mlp_loop(model, inputs)

    report_overhead(f"in-loop, MLP forward+backward (per top-level op, {count_ops(mlp)})",
                    in_loop_overhead(mlp, rounds), count_ops(mlp))
    exit_to_summary(1 if quick else 2)
    legacy_conversion()
    memory_per_event(40_000 if quick else 200_000)


def profile_gpu_exit(lines: int = 25) -> None:
    """cProfile of nbprof.profile's exit (records -> Trace) after 20k ``x = x + 1`` on the GPU."""
    import cProfile
    import pstats

    x = torch.zeros(16, device="cuda")
    profiler = cProfile.Profile()
    with nbprof.profile():
        for _ in range(ADD_OPS):
            x = x + 1
        torch.cuda.synchronize()
        profiler.enable()
    profiler.disable()
    print(f"nbprof.profile exit after {ADD_OPS} GPU ops, by cumulative time:")
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(lines)


def torch_cuda_profiler():
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    return torch.profiler.profile(activities=activities)


def gpu_figures(rounds: int) -> None:
    """The GPU rows of issue 8's targets, each printed with its ratio."""
    print(f"GPU: {torch.cuda.get_device_name()}")

    def cuda_adds(count=ADD_OPS):
        x = torch.zeros(16, device="cuda")
        for _ in range(count):
            x = x + 1
        torch.cuda.synchronize()

    # The seed's mechanism alone (the legacy profiler, a CUDA event pair per op, no Kineto): what
    # the events cost on this machine, beside the ~4 us/op its docstring quoted for another one.
    seed = lambda: torch.autograd.profiler_legacy.profile(use_cuda=True)  # noqa: E731
    profilers = {"none": contextlib.nullcontext, "torch.profiler": torch_cuda_profiler,
                 "nbprof": nbprof.profile,
                 "nbprof events only": lambda: nbprof.profile(kernels=False),
                 "legacy profiler alone": seed}
    best = in_loop_overhead(cuda_adds, rounds, profilers, clock=time.perf_counter)
    none = best["none"]
    per_op = {name: (seconds - none) / ADD_OPS * 1e6 for name, seconds in best.items()}
    print(f"GPU in-loop, {ADD_OPS} x = x + 1 on cuda: no profiler {none / ADD_OPS * 1e6:.2f} "
          f"us/op; overhead torch.profiler (CPU+CUDA, CUPTI) +{per_op['torch.profiler']:.2f} "
          f"us/op, nbprof events + CUPTI +{per_op['nbprof']:.2f} us/op -> nbprof/torch = "
          f"{per_op['nbprof'] / per_op['torch.profiler']:.2f}x (target <= 1.2x); nbprof events "
          f"only +{per_op['nbprof events only']:.2f} us/op (target <= the seed's ~4 us/op); the "
          f"seed's legacy profiler alone here +{per_op['legacy profiler alone']:.2f} us/op")
    figure("nbprof.profile() (auto) events + CUPTI / torch.profiler CPU+CUDA, per op (issue 8)",
           per_op["nbprof"] / per_op["torch.profiler"], 1.2)
    figure("nbprof.profile() (auto) events only, added per op (issue 8)",
           per_op["nbprof events only"], 4.0, " us")

    with torch_cuda_profiler() as torch_prof:
        cuda_adds()
        left_block = time.perf_counter()
    torch_prof.key_averages()
    torch_seconds = time.perf_counter() - left_block
    with nbprof.profile() as prof:
        cuda_adds()
        left_block = time.perf_counter()
    prof.trace.key_averages()
    ours_seconds = time.perf_counter() - left_block
    print(f"GPU exit to summary, {ADD_OPS} x = x + 1 on cuda: torch.profiler {torch_seconds:.2f} "
          f"s; nbprof {len(prof.trace)} events, {len(prof.trace.kernels)} GPU intervals in "
          f"{ours_seconds:.2f} s -> {torch_seconds / ours_seconds:.1f}x; "
          f"meta overhead: {prof.trace.meta.get('overhead')}")
    figure(f"GPU exit to summary, {ADD_OPS} ops: torch.profiler / nbprof (auto)",
           torch_seconds / ours_seconds, unit="x", digits=1)
    mm_agreement("auto", target_percent=5.0)


def mm_agreement(recorder: str, target_percent: float) -> None:
    """20 queued 2048x2048 mm under ``nbprof.profile(recorder=...)`` (kernels=None: CUPTI where
    torch has it): the event intervals' total against a torch.cuda.Event pair around each mm,
    each op's event interval against its kernels (those after the first: it starts on an idle
    GPU, its events also hold its launch), and the GPU clock's anchor error."""
    a, b = torch.randn(2048, 2048, device="cuda"), torch.randn(2048, 2048, device="cuda")
    # Warm first: the first run of 2026-12-04 timed the reference on a GPU still raising its
    # clocks (13.6 ms for what took 7.2 ms a moment later). The reference brackets each mm with
    # its own event pair, as the CUDA-event profiler does, so the two totals measure one thing.
    for _ in range(50):
        torch.relu(torch.mm(a, b))
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(20)]
    torch.cuda.synchronize()
    for start, end in pairs:
        start.record()
        torch.mm(a, b)
        end.record()
        torch.relu(a)
    torch.cuda.synchronize()
    reference_us = sum(start.elapsed_time(end) for start, end in pairs) * 1000
    with nbprof.profile(recorder=recorder) as prof:
        for _ in range(20):
            torch.relu(torch.mm(a, b))
        torch.cuda.synchronize()
    trace = prof.trace
    label = f"recorder={recorder} ({trace.meta.get('recorder')})"
    events_us = sum(trace.kernel(row).interval.elapsed_us() for row in range(len(trace.kernels))
                    if trace.kernel(row).kind == "op" and trace.kernel(row).name == "aten::mm")
    print(f"GPU time of 20 2048x2048 mm (each beside a relu), {label}: nbprof events "
          f"{events_us:.0f} us / a torch.cuda.Event pair around each {reference_us:.0f} us = "
          f"{events_us / reference_us:.3f}")
    for device, clock in (trace.meta.get("gpu_clock") or {}).items():
        print(f"GPU {device} clock, {label}: anchor error {clock['anchor_error_ns'] / 1000:.2f} us "
              f"(target <= 5 us), drift {clock['drift_ppm']} ppm, {clock['anchors']} anchors")
        figure(f"{label}: GPU {device} anchor error", clock["anchor_error_ns"] / 1000, 5.0, " us")
    if not trace.meta.get("kernels"):
        print("event vs CUPTI: no kernels recorded here:", " ".join(trace.meta["notes"]))
        figure(f"{label}: event vs CUPTI, queued mm >= 50 us, worst |events/kernels - 1|",
               float("nan"), target_percent, "%")
        return
    from nbprof.analysis.gpu_agreement import gpu_agreement
    from nbprof.analysis.tables import records

    rows = [row for row in records(gpu_agreement(trace, by="op", plain=True))
            if row["kernels_us"] >= 50]
    # the block's first mm starts on an idle GPU: its events also hold its own launch
    worst = max(abs(row["ratio"] - 1) for row in rows[1:]) if len(rows) > 1 else float("nan")
    print(f"event vs CUPTI, {label}, {len(rows)} ops with >= 50 us of kernels: the first (idle "
          f"GPU, its launch inside its events) {rows[0]['ratio'] if rows else float('nan'):.2f}x; "
          f"the rest, worst |events/kernels - 1| = {worst * 100:.2f}% (target <= "
          f"{target_percent}%); per op: {[round(row['ratio'], 4) for row in rows]}")
    figure(f"{label}: event vs CUPTI, queued mm >= 50 us, worst |events/kernels - 1|",
           worst * 100, target_percent, "%")

if __name__ == "__main__":
    sys.exit(main())
