"""What the native recorder's GPU path asks of CUDA per op, counted on the simulated device
(tests/native_sim): calls through torch's CUDA guard (getDevice/setDevice), events recorded
through torch's record and straight with cudaEventRecord, per op of 1000 'x + 1' ops, in a first
profile (the pool makes its events) and a second; then the anchor error and drift of 6 profiles
on 2 devices. Counts and the sim's own clock, not a GPU's time: bench/gpu_check.sh times it.

    PYTHONPATH=$PWD .venv/bin/python bench/native_sim_counts.py
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from tests.native_sim import run_with_sim  # noqa: E402

SCRIPT = """
import torch
from tests.native_sim.device import sim, record, idle_then_both_devices

def adds():
    x = torch.ones(4)
    for _ in range(200):
        x = x + 1

for profile in ("first", "second"):
    before = sim.counts()
    records, trace = record(adds)
    after, ops = sim.counts(), len(trace.gpu_launch)
    per_op = {key: round((after[key] - before[key]) / ops, 2)
              for key in ("device_calls", "torch_records", "raw_records")}
    print(f"{profile} profile, per op ({ops} ops): {per_op}")

sim.set_clock_rate(1, 1.001)
for _ in range(6):
    records, trace = record(idle_then_both_devices)
    print("anchor error ns, drift ppm (device 1 +1000 ppm):",
          {d: (c["anchor_error_ns"], round(c["drift_ppm"], 1))
           for d, c in trace.meta["gpu_clock"].items()})
"""

if __name__ == "__main__":
    print(run_with_sim(SCRIPT), end="")
