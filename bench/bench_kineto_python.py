"""with_stack's Python functions through Kineto's saved trace (nbprof/record/kineto_python.py, the
route of a torch whose events() leaves them out, 2.11) against the other ways to the same rows,
side by side on one recording (a loop of MLP forward+backward steps under with_stack):

1. reading only the file's python_function slices (read_python_functions) / loading the whole
   file with nbprof.load (the streaming Chrome loader): how much the regex scan saves;
2. the save route's whole cost at stop (result.save + read_python_functions) / reading events()
   (read_records, with_stack): what the route adds on a torch that has both.

Reads and loads: the best of 3 interleaved rounds; the save and events() once (a result saves once).

Usage: .venv/bin/python bench/bench_kineto_python.py [--steps N]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import nbprof  # noqa: E402
from kernels.train_mlp import make_model  # noqa: E402
from nbprof.record.kineto_cpu import KinetoCpuRecorder, read_records  # noqa: E402
from nbprof.record.kineto_python import read_python_functions  # noqa: E402


ROUNDS = 3


def record(steps: int):
    model = make_model(width=64, device="cpu")
    inputs = torch.randn(32, 64)
    recorder = KinetoCpuRecorder(with_stack=True)
    recorder.start()
    for _ in range(steps):
        model(inputs).sum().backward()
    return torch.autograd._disable_profiler()


def seconds(work):
    start = time.perf_counter()
    value = work()
    return time.perf_counter() - start, value


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    steps = parser.parse_args().steps
    result = record(steps)
    events_s, records = seconds(lambda: read_records(result.events(), with_stack=True))
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "kineto.json"
        save_s, _ = seconds(lambda: result.save(str(path)))
        size = path.stat().st_size
        reads, loads = [], []
        for _ in range(ROUNDS):  # interleaved, the best of each: the machine is shared
            reads.append(seconds(lambda: read_python_functions(path)))
            loads.append(seconds(lambda: nbprof.load(path, progress=False)))
        (read_s, functions), (load_s, trace) = min(reads, key=lambda x: x[0]), \
            min(loads, key=lambda x: x[0])
    print(f"torch {torch.__version__}, {steps} MLP steps: {len(records.names):,} events "
          f"({int(records.is_python.sum()):,} Python functions in events(), "
          f"{len(functions.names):,} in the file), file {size / 1e6:.1f} MB")
    print(f"1. python_function slices only {read_s:.3f} s / whole file with nbprof.load "
          f"{load_s:.3f} s ({len(trace):,} events): {load_s / read_s:.1f}x faster")
    print(f"2. save route at stop: save {save_s:.3f} s + read {read_s:.3f} s / events() read "
          f"{events_s:.3f} s: {(save_s + read_s) / events_s:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
