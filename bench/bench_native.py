"""nbprof's native recorder (issue 19) against torch.profiler, CPU, side by side in one run.

Prints (targets from issue 19, "Must reach"):
1. in-loop overhead per op, native / torch.profiler (CPU activities, all threads): <= 0.5x,
   beside the floor any observer pays: torch's callback machinery with a callback that records nothing
   (and reads no clock), for 20k ``x = x + 1`` and an MLP's forward+backward (nbprof's torch path
   beside, for scale); from the median of each profiler's rounds (the best beside it);
2. block exit -> summarised Trace (key_averages), 100k events: >= 30x faster than
   torch.profiler's exit + events() + key_averages();
3. a 10M-op block: peak memory added by profiling <= 200 B per op (VmHWM of a child process
   against the same block unprofiled);
4. first build (an empty cache) < 30 s, cached load < 0.1 s (child processes).

With ``--with-stack`` only the with_stack rows (issue 19, ``--with-stack``): in-loop overhead per
op of the native recorder recording Python calls against torch.profiler(with_stack=True), CPU
activities, all threads: <= 0.5x, for the same two workloads.

With ``--gpu`` (bench/gpu_check.sh, a lent GPU) only the GPU rows, side by side in one run, wall
time per ``x = x + 1`` on a CUDA tensor: native CUDA events without CUPTI vs torch.profiler
(CPU+CUDA activities, all threads) <= 0.5x; native events with CUPTI kernels linked to the ops
(``nbprof.profile(recorder="native", kernels=True)``: a Kineto session with the CUDA activity
only beside the observer) <= 1.0x, beside the other way to link them (the observer + Kineto's
CPU side and CUPTI, torch's own correlation); and what nbprof's path costs today (Kineto +
torch's legacy CUDA events).

With ``--kernel-links`` (CPU) what the two ways of linking CUPTI's kernels to the native ops cost
where a CPU can tell: per event in the loop, the observer alone (the CUDA-only session adds no
callback per op; CUPTI's own cost is the same for both ways and only a GPU shows it) against
the observer + Kineto's CPU side (all threads); and at the exit, linking a real GPU trace's
activities (../shared/traces, 68k events) by thread and time.

Usage: .venv/bin/python bench/bench_native.py [--rounds N] [--big-ops N] [--skip-build] [--gpu]
       [--kernel-links] [--with-stack]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch._C._profiler import _ExperimentalConfig  # noqa: E402

import nbprof  # noqa: E402
from nbprof.model import KIND_KERNEL  # noqa: E402
from nbprof.record import native  # noqa: E402
from bench import bench_record  # noqa: E402
from bench.bench_record import (ADD_OPS, add_loop, in_loop_overhead, mlp_loop,  # noqa: E402
                                mm_agreement, overhead_rounds)
from bench.figures import figure  # noqa: E402
from kernels.train_mlp import make_model  # noqa: E402


def torch_all_threads():
    return torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                  experimental_config=_ExperimentalConfig(profile_all_threads=True))


@contextlib.contextmanager
def machinery_only():
    """torch's RecordFunction machinery with a callback that records nothing: any observer's floor."""
    library = native.load()
    library.start(machinery_only=True)
    try:
        yield
    finally:
        library.stop()


PROFILERS = {"none": contextlib.nullcontext, "torch.profiler": torch_all_threads,
             "machinery only": machinery_only,
             "native": lambda: nbprof.profile(cuda=False, recorder="native"),
             "nbprof torch path": lambda: nbprof.profile(cuda=False, recorder="torch")}


def events_of(workload) -> int:
    with nbprof.profile(cuda=False, recorder="native") as prof:
        workload()
    return len(prof.trace)


def overhead(label, workload, rounds) -> float:
    """Overhead per event, from the best and from the median of each profiler's rounds; the
    median's ratio is the figure (the best of a noisy profiler can be one lucky round)."""
    events = events_of(workload)
    seconds = overhead_rounds(workload, rounds, PROFILERS)
    ratios = {}
    for how, reduce in (("best", min), ("median", statistics.median)):
        took = {name: reduce(values) for name, values in seconds.items()}
        none = took["none"]
        per = {name: (value - none) / events * 1e9 for name, value in took.items()}
        ratios[how] = per["native"] / per["torch.profiler"]
        print(f"{label} ({events} events, {how} of {rounds}): no profiler {none / events * 1e9:.0f} "
              f"ns/event; overhead torch.profiler +{per['torch.profiler']:.0f} ns, native "
              f"+{per['native']:.0f} ns (of which torch's callback machinery alone "
              f"+{per['machinery only']:.0f} ns), nbprof torch path +{per['nbprof torch path']:.0f} "
              f"ns -> native/torch.profiler = {ratios[how]:.2f}x (target <= 0.5x)")
    return ratios["median"]


def profile_hook_only() -> contextlib.ExitStack:
    """The native recorder with CPython's profiling hook installed on every thread, returning
    at once: what any tracer of Python calls pays before recording anything."""
    from nbprof.record.native.python_calls import PythonCalls

    calls = PythonCalls(native.load().path)
    block = contextlib.ExitStack()
    block.enter_context(nbprof.profile(cuda=False, recorder="native"))
    calls.start(hook_only=True)
    block.callback(calls.stop)  # first out, then the profile
    return block


STACK_PROFILERS = {
    "none": contextlib.nullcontext,
    "torch.profiler with_stack": lambda: torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True,
        experimental_config=_ExperimentalConfig(profile_all_threads=True)),
    "native with_stack": lambda: nbprof.profile(cuda=False, recorder="native", with_stack=True),
    "torch.profiler": torch_all_threads,
    "native": lambda: nbprof.profile(cuda=False, recorder="native"),
    "native + hook only": profile_hook_only}


def with_stack_overhead(label, workload, rounds) -> float:
    """Per op (the ops of the workload, not its Python calls: those are what with_stack adds),
    from the best and the median of each profiler's rounds (the median's ratio is the figure,
    as overhead()'s)."""
    ops = events_of(workload)
    seconds = overhead_rounds(workload, rounds, STACK_PROFILERS)
    ratios = {how: with_stack_line(label, ops, how, rounds, {
        name: reduce(values) for name, values in seconds.items()})
        for how, reduce in (("best", min), ("median", statistics.median))}
    return ratios["median"]


def with_stack_line(label, ops, how, rounds, took) -> float:
    none_ns = took["none"] / ops * 1e9
    per = {name: (value - took["none"]) / ops * 1e9 for name, value in took.items()}
    ratio = per["native with_stack"] / per["torch.profiler with_stack"]
    # what with_stack itself adds on each side (its Python calls), beside the ops' recording
    ours = per["native with_stack"] - per["native"]
    theirs = per["torch.profiler with_stack"] - per["torch.profiler"]
    print(f"{label} ({ops} ops, {how} of {rounds}): no profiler {none_ns:.0f} ns/op; "
          f"overhead torch.profiler(with_stack) +{per['torch.profiler with_stack']:.0f} ns, "
          f"native with_stack +{per['native with_stack']:.0f} ns -> native/torch.profiler = "
          f"{ratio:.2f}x (target <= 0.5x); with_stack's own part: native +{ours:.0f} ns "
          f"(of which CPython's profiling hook alone +{per['native + hook only'] - per['native']:.0f};"
          f" without it +{per['native']:.0f}), torch.profiler +{theirs:.0f} ns (without it "
          f"+{per['torch.profiler']:.0f})")
    return ratio


def with_stack_exit(label, workload, rounds) -> float:
    """Seconds from the block's last statement to its Trace under with_stack (best of
    interleaved rounds): nbprof's torch path (where with_stack went before) against native."""
    from bench.bench_record import cpu_clock

    def exit_seconds(recorder):
        gc.collect()
        prof = nbprof.profile(cuda=False, recorder=recorder, with_stack=True)
        with prof:
            workload()
            start = cpu_clock()
        return cpu_clock() - start, len(prof.trace)

    runs = {"torch": [], "native": []}
    for _ in range(rounds):
        for recorder, seconds in runs.items():
            seconds.append(exit_seconds(recorder))
    (torch_s, torch_events), (native_s, native_events) = min(runs["torch"]), min(runs["native"])
    print(f"{label}, exit to Trace with_stack (best of {rounds}): nbprof torch path {torch_s:.3f} s "
          f"({torch_events} events), native {native_s:.3f} s ({native_events} events) -> "
          f"{torch_s / native_s:.1f}x faster")
    return torch_s / native_s


def exit_to_summary(rounds) -> float:
    return bench_record.exit_to_summary(rounds, torch_profiler=torch_all_threads, recorder="native")


_BIG = """
import sys, torch, nbprof
sys.path.insert(0, {root!r})
from bench.bench_record import add_loop
iterations, profiled = {iterations}, {profiled}
with nbprof.profile(cuda=False, recorder="native"):  # both runs: the same modules and caches
    add_loop(1000)
if profiled:
    with nbprof.profile(cuda=False, recorder="native") as prof:
        add_loop(iterations)
    events = len(prof.trace)
else:
    add_loop(iterations)
    events = 0
peak = [line for line in open("/proc/self/status") if line.startswith("VmHWM")][0].split()[1]
print(events, int(peak) * 1024)
"""


def big_block(iterations) -> float:
    runs = {}
    for profiled in (False, True):
        code = _BIG.format(root=str(ROOT), iterations=iterations, profiled=profiled)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        if done.returncode:
            print(done.stderr[-2000:])
            raise SystemExit("the big block failed")
        runs[profiled] = tuple(map(int, done.stdout.split()[-2:]))
    events, peak = runs[True]
    added = (peak - runs[False][1]) / events
    print(f"{events:,} events in one block: peak RSS {peak / 2**20:.0f} MiB against "
          f"{runs[False][1] / 2**20:.0f} MiB unprofiled -> {added:.0f} B per event added "
          f"(target <= 200)")
    return added


_LOAD = """
import time, torch
from nbprof.record import native
start = time.perf_counter()
library = native.load()
print(time.perf_counter() - start, library is not None)
"""


def build_and_load() -> None:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "NBPROF_NATIVE_CACHE": cache}
        for label in ("first build (empty cache)", "cached load"):
            done = subprocess.run([sys.executable, "-c", _LOAD], capture_output=True, text=True,
                                  env=env)
            seconds, ok = done.stdout.split()[-2:]
            print(f"{label}: {float(seconds):.3f} s wall, built={ok} (targets: build < 30 s, "
                  "cached load < 0.1 s)")


def gpu_rows(rounds: int, iterations: int = 5_000) -> None:
    activity = torch.profiler.ProfilerActivity
    device = torch.cuda.current_device()
    library = native.load()
    print(f"GPU {torch.cuda.get_device_name(device)}; native build {native.build.build_seconds} s;"
          f" CUDA events here: {library.gpu_unavailable() or 'yes'}")

    @contextlib.contextmanager
    def native_events(depth=None, kineto_cpu=False):
        """The observer's events alone (its raw start/stop), or inside torch.profiler CPU+CUDA:
        the other way to link kernels (torch's correlation on Kineto's CPU rows)."""
        with (torch.profiler.profile(
                activities=[activity.CPU, activity.CUDA],
                experimental_config=_ExperimentalConfig(profile_all_threads=True))
              if kineto_cpu else contextlib.nullcontext()):
            library.start(gpu=True, gpu_depth=depth, anchor_devices=[device])
            try:
                yield
            finally:
                library.stop()

    profilers = {
        "none": contextlib.nullcontext,
        "torch.profiler CPU+CUDA": lambda: torch.profiler.profile(
            activities=[activity.CPU, activity.CUDA],
            experimental_config=_ExperimentalConfig(profile_all_threads=True)),
        "native events": native_events,
        "native events + CUPTI": lambda: nbprof.profile(recorder="native", kernels=True),
        "native events + Kineto CPU+CUDA": lambda: native_events(kineto_cpu=True),
        "native, no events": lambda: nbprof.profile(cuda=False, recorder="native"),
        "nbprof today (legacy events + Kineto)": lambda: nbprof.profile(recorder="torch"),
    }
    x = torch.zeros(16, device="cuda")

    def workload():
        y = x
        for _ in range(iterations):
            y = y + 1
        torch.cuda.synchronize()

    created_before = library.created_events()
    best = in_loop_overhead(workload, rounds, profilers, clock=time.perf_counter)
    none = best["none"]
    per = {name: (seconds - none) / iterations * 1e6 for name, seconds in best.items()}
    peer = per["torch.profiler CPU+CUDA"]
    print(f"{iterations} x = x + 1 on CUDA, best of {rounds}, wall: no profiler "
          f"{none / iterations * 1e6:.2f} us/op")
    for name, us in per.items():
        if name != "none":
            print(f"  {name}: +{us:.2f} us/op = {us / peer:.2f}x torch.profiler")
    print(f"native events / torch.profiler = {per['native events'] / peer:.2f}x (target <= 0.5x); "
          f"native events + CUPTI = {per['native events + CUPTI'] / peer:.2f}x (target <= 1.0x; "
          f"the other way, + Kineto's CPU side: "
          f"{per['native events + Kineto CPU+CUDA'] / peer:.2f}x); "
          f"nbprof today = {per['nbprof today (legacy events + Kineto)'] / peer:.2f}x")
    figure("native CUDA events (no CUPTI) / torch.profiler CPU+CUDA, per op",
           per["native events"] / peer, 0.5)
    figure("native events + CUPTI kernels / torch.profiler CPU+CUDA, per op",
           per["native events + CUPTI"] / peer, 1.0)
    figure("nbprof's legacy path (events + Kineto) / torch.profiler CPU+CUDA, per op",
           per["nbprof today (legacy events + Kineto)"] / peer)
    with nbprof.profile(recorder="native", kernels=True) as prof:
        workload()
        leave = time.perf_counter()
    trace = prof.trace
    print(f"native events + CUPTI, one block: {int((trace.gpu_kind == KIND_KERNEL).sum())} kernels "
          f"linked, {int((trace.gpu_launch[trace.gpu_kind == KIND_KERNEL] >= 0).sum())} to an op; "
          f"exit -> Trace {time.perf_counter() - leave:.3f} s; own CUDA calls left out: "
          f"{trace.meta.get('own_cuda_calls')}")
    print(f"CUDA events in the pools: {library.created_events()} "
          f"({library.created_events() - created_before} created by {rounds + 1} rounds)")
    mm_agreement("native", target_percent=2.0)


def kernel_links(rounds: int) -> None:
    """The CPU side of the two ways to link CUPTI's kernels to the native ops."""
    from tests.unit.test_native_kernel_links import STEP, _kineto, _ops_trace, _split
    from nbprof.record.native.kernel_links import with_cuda_activity

    events = events_of(add_loop)
    profilers = {"none": contextlib.nullcontext,
                 "native": native_raw,
                 "native + Kineto CPU": lambda: native_raw(kineto_cpu=True),
                 "torch.profiler": torch_all_threads}
    best = in_loop_overhead(add_loop, rounds, profilers)
    per = {name: (seconds - best["none"]) / events * 1e9 for name, seconds in best.items()}
    print(f"{ADD_OPS} x = x + 1 ({events} events, best of {rounds}), CPU time per event: "
          f"native +{per['native']:.0f} ns (with a CUDA-only session: no more callbacks), "
          f"native + Kineto's CPU side +{per['native + Kineto CPU']:.0f} ns, torch.profiler "
          f"+{per['torch.profiler']:.0f} ns -> the CPU side adds "
          f"{per['native + Kineto CPU'] / per['native']:.2f}x the native cost")
    ops, calls, activities, categories = _split(STEP)
    base = int(ops["start"].min())
    trace, kineto = _ops_trace(ops, base), _kineto(calls, activities, categories)
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        linked = with_cuda_activity(trace, kineto, base_time_ns=base)
        seconds.append(time.perf_counter() - start)
    print(f"linking {len(activities['names'])} activities of {len(calls['names'])} calls to "
          f"{len(trace)} ops by thread and time, into the Trace: {min(seconds) * 1e3:.1f} ms "
          f"(best of {rounds}; {int((linked.gpu_launch >= 0).sum())} linked)")


@contextlib.contextmanager
def native_raw(kineto_cpu=False):
    """The observer (its raw start/stop), alone or beside Kineto's CPU side (all threads): how
    kernels would be linked through torch's correlation, less CUPTI (the same both ways)."""
    library = native.load()
    with torch_all_threads() if kineto_cpu else contextlib.nullcontext():
        library.start()
        try:
            yield
        finally:
            library.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--big-ops", type=int, default=10_000_000, help="events of the big block")
    parser.add_argument("--skip-build", action="store_true")
    parser.add_argument("--gpu", action="store_true", help="only the GPU rows (a lent GPU)")
    parser.add_argument("--kernel-links", action="store_true",
                        help="only the CPU side of linking CUPTI's kernels to native ops")
    parser.add_argument("--with-stack", action="store_true", help="only the with_stack rows")
    options = parser.parse_args()
    if options.gpu:
        if not torch.cuda.is_available():
            raise SystemExit("bench_native --gpu: no CUDA device here (torch.cuda.is_available() "
                             "is False): run it on a GPU machine (bench/gpu_check.sh)")
        if native.load() is None:
            raise SystemExit(f"bench_native --gpu: the native recorder is not available here: "
                             f"{native.why_not()}")
        gpu_rows(options.rounds)
        return
    if options.kernel_links:
        torch.set_num_threads(1)
        kernel_links(options.rounds)
        return
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs; CPU time of this process")
    if options.with_stack:
        with_stack_overhead(f"{ADD_OPS} x = x + 1", add_loop, options.rounds)
        model = make_model(width=64, device="cpu")
        inputs = torch.randn(32, 64)
        with_stack_overhead("MLP forward+backward x 100", lambda: mlp_loop(model, inputs, 100),
                            options.rounds)
        with_stack_exit("MLP forward+backward x 100", lambda: mlp_loop(model, inputs, 100),
                        max(3, options.rounds // 2))
        return
    overhead(f"{ADD_OPS} x = x + 1", add_loop, options.rounds)
    model = make_model(width=64, device="cpu")
    inputs = torch.randn(32, 64)
    overhead("MLP forward+backward x 100", lambda: mlp_loop(model, inputs, 100), options.rounds)
    exit_to_summary(max(3, options.rounds // 2))
    big_block(options.big_ops // 5)  # x = x + 1 records 5 events
    if not options.skip_build:
        build_and_load()


if __name__ == "__main__":
    main()
