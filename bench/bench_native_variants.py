"""The native observer's two builds side by side in one process (build.py's variants): the fast
one, reading RecordFunction's private members, and the public-API one that a torch which renamed
them gets. Interleaved rounds (the order rotating) of 4k ``x = x + 1`` and of 20 steps of an MLP's
forward+backward; prints each build's in-loop overhead per event over no profiler (medians of the
rounds) and their ratio.

Usage: .venv/bin/python bench/bench_native_variants.py [--rounds N]   (compiles both: ~20 s)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from nbprof.record.native import build
from nbprof.record.native.records import NativeLibrary


def compiled_variants(folder: Path) -> dict:
    libraries = {}
    for which in build.VARIANT_FLAGS:
        target = folder / which / build.LIBRARY
        target.parent.mkdir()
        subprocess.run(build.compile_command(build.torch_dir(), target, which=which), check=True)
        libraries[which] = NativeLibrary(target)
    return libraries


def adds():
    x = torch.zeros(4)
    for _ in range(4000):
        x = x + 1


def mlp_steps(model=torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                        torch.nn.Linear(64, 1)), data=torch.randn(32, 64)):
    for _ in range(20):
        model(data).sum().backward()


def overhead_per_event(libraries: dict, work, rounds: int) -> tuple[int, dict]:
    seconds = {key: [] for key in ("none", *libraries)}
    events = 0
    for round_ in range(rounds):
        keys = list(seconds)
        for key in keys[round_ % len(keys):] + keys[:round_ % len(keys)]:
            if key != "none":
                libraries[key].start()
            started = time.perf_counter()
            work()
            seconds[key].append(time.perf_counter() - started)
            if key != "none":
                events = len(libraries[key].stop())
    unprofiled = statistics.median(seconds.pop("none"))
    return events, {key: (statistics.median(times) - unprofiled) / events * 1e9
                    for key, times in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=25)
    rounds = parser.parse_args().rounds
    torch.set_num_threads(1)
    folder = Path(tempfile.mkdtemp(prefix="nbprof-variants-"))
    try:
        libraries = compiled_variants(folder)
    finally:
        shutil.rmtree(folder)  # (each library stays mapped)
    for name, work in (("20k-event adds", adds), ("MLP x 20", mlp_steps)):
        events, per_event = overhead_per_event(libraries, work, rounds)
        figures = ", ".join(f"{key} +{ns:.0f} ns" for key, ns in per_event.items())
        ratio = per_event[build.PUBLIC] / per_event[build.FAST]
        print(f"{name} ({events} events a round): overhead per event {figures}; "
              f"public-api / private-members {ratio:.2f}x")


if __name__ == "__main__":
    main()
