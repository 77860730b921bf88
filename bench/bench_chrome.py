"""Chrome export and load, side by side in one run (bench/RESULTS.md, "Core: Chrome export and load").

1. ``nbprof.load`` of ../shared/traces/gpu_training_step_68k.json.gz against a bare
   ``json.load(gzip.open(...))`` of the same file (target: ratio <= 1.5), also against json.load
   with the garbage collector paused (as nbprof.load runs), and how nbprof's time splits
   between parsing (gunzip + msgspec) and turning the JSON into a Trace (target: converting
   under half of json.load). It runs first, before torch is imported (see main).
2. Export of ~100k events: 20k ``x = x + 1`` recorded by torch.profiler (CPU only) and exported
   with torch's own ``prof.export_chrome_trace``, against the same block recorded by
   nbprof.profile and exported by nbprof, to .json and to .json.gz (target: ratio <= 1.0), and
   the size of nbprof's .json over its .json.gz (target >= 8).

Each figure is the median of --rounds interleaved rounds, in process CPU time (the machine is
shared and noisy).
Usage: .venv/bin/python bench/bench_chrome.py [--rounds N]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nbprof  # noqa: E402
from nbprof.formats.chrome import export_chrome_trace  # noqa: E402
from nbprof.formats.chrome.read import paused_gc, read_trace  # noqa: E402

ADD_OPS = 20_000
TRACE_68K = ROOT.parent / "shared" / "traces" / "gpu_training_step_68k.json.gz"


def add_loop():
    import torch

    x = torch.zeros(16)
    for _ in range(ADD_OPS):
        x = x + 1


def timed(call) -> float:
    # Process CPU time, not wall time: on this shared machine other people's load swung wall
    # times by 2x between rounds, and every side measured here runs on this process's CPU.
    start = time.process_time()
    call()
    return time.process_time() - start


def torch_export_seconds(path: str) -> tuple[float, int]:
    """Records the block under torch.profiler (CPU) and times its own export to ``path``
    (torch saves a profile once, so each export needs its own recording)."""
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        add_loop()
    seconds = timed(lambda: prof.export_chrome_trace(path))
    events = sum(1 for e in json.load(_open(path))["traceEvents"] if e.get("ph") == "X")
    return seconds, events


def _open(path):
    return gzip.open(path) if path.endswith(".gz") else open(path, "rb")


def bench_export(rounds: int, folder: str) -> None:
    with nbprof.profile(cuda=False) as prof:
        add_loop()
    trace = prof.trace
    export_chrome_trace(trace, os.path.join(folder, "warm.json"))  # numba's first call
    ratios = {".json": [], ".json.gz": []}
    seconds = {key: ([], []) for key in ratios}
    for _ in range(rounds):
        for suffix in ratios:
            torch_path = os.path.join(folder, f"torch{suffix}")
            nbprof_path = os.path.join(folder, f"nbprof{suffix}")
            torch_s, torch_events = torch_export_seconds(torch_path)
            nbprof_s = timed(lambda: export_chrome_trace(trace, nbprof_path))
            ratios[suffix].append(nbprof_s / torch_s)
            seconds[suffix][0].append(torch_s)
            seconds[suffix][1].append(nbprof_s)
    print(f"2. Export of {len(trace):,} nbprof events vs torch's {torch_events:,} X events "
          f"(20k x = x + 1, CPU only), median of {rounds} rounds:")
    for suffix, values in ratios.items():
        torch_s, nbprof_s = (statistics.median(v) for v in seconds[suffix])
        print(f"   {suffix:8s} torch.profiler export_chrome_trace {torch_s:.3f} s, nbprof "
              f"{nbprof_s:.3f} s: nbprof/torch = {statistics.median(values):.2f}x "
              f"(target <= 1.0x)")
    plain = os.path.getsize(os.path.join(folder, "nbprof.json"))
    packed = os.path.getsize(os.path.join(folder, "nbprof.json.gz"))
    torch_plain = os.path.getsize(os.path.join(folder, "torch.json"))
    print(f"   sizes: nbprof .json {plain / 1e6:.1f} MB, .json.gz {packed / 1e6:.2f} MB: "
          f".json/.json.gz = {plain / packed:.1f}x (target >= 8x); torch's .json "
          f"{torch_plain / 1e6:.1f} MB")


def bench_load(rounds: int) -> None:
    def bare_json_load():
        with gzip.open(TRACE_68K) as stream:
            json.load(stream)

    def json_load_without_gc():  # stricter: json.load spared the collector, as nbprof is
        with paused_gc():
            bare_json_load()

    def parse_only():
        with paused_gc():
            read_trace(TRACE_68K)

    nbprof.load(TRACE_68K)  # warm: imports, numba's cached functions
    times = {"json.load": [], "nbprof.load": [], "parse": [], "json.load, no GC": []}
    for _ in range(rounds):
        times["json.load"].append(timed(bare_json_load))
        times["nbprof.load"].append(timed(lambda: nbprof.load(TRACE_68K)))
        times["parse"].append(timed(parse_only))
        times["json.load, no GC"].append(timed(json_load_without_gc))
    ratio = statistics.median(n / j for n, j in zip(times["nbprof.load"], times["json.load"]))
    strict = statistics.median(n / j for n, j in zip(times["nbprof.load"],
                                                     times["json.load, no GC"]))
    # Converting's share per round (nbprof.load less parsing, over that round's json.load),
    # then the median: each round's three times were taken under the same load.
    converting = statistics.median((n - p) / j for n, p, j in zip(
        times["nbprof.load"], times["parse"], times["json.load"]))
    bare, load, parse, bare_no_gc = (statistics.median(times[key]) for key in times)
    trace = nbprof.load(TRACE_68K)
    print(f"1. Load of {TRACE_68K.name} ({len(trace):,} events, {len(trace.kernels):,} GPU "
          f"intervals), median of {rounds} rounds:")
    print(f"   gzip.open + json.load {bare:.3f} s, nbprof.load {load:.3f} s: "
          f"nbprof.load/json.load = {ratio:.2f}x (target <= 1.5x)")
    print(f"   stricter, json.load with the garbage collector paused (as nbprof.load runs): "
          f"{bare_no_gc:.3f} s: nbprof.load/json.load = {strict:.2f}x")
    print(f"   nbprof.load = parsing (gunzip + msgspec) {parse:.3f} s + converting to a Trace "
          f"{load - parse:.3f} s (converting/json.load = {converting:.2f}x, target < 0.5x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    # Load first, before torch is imported: torch's many objects would make every garbage
    # collection inside json.load slower, flattering nbprof.load (which pauses the collector).
    bench_load(args.rounds)
    with tempfile.TemporaryDirectory() as folder:
        bench_export(args.rounds, folder)


if __name__ == "__main__":
    main()
