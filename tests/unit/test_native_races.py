"""The native observer while other threads run ops through its stops and starts: a stop
waits for every callback still running before it reads and recycles the buffers, and an op
open across a stop and the next start stays out of the next profile. Skipped where the
observer cannot build (no compiler)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch.autograd.profiler import record_function

from nbprof.record import native

pytestmark = pytest.mark.skipif(native.load() is None,
                                reason=f"native observer unavailable: {native.why_not()}")

ROOT = Path(__file__).resolve().parents[2]

# In a child process: a race that corrupts the heap kills the process, not the test run.
_STOPS_WHILE_THREADS_RUN = textwrap.dedent("""
    import sys, threading, time
    import torch
    from nbprof.record import native

    lib = native.load()
    done = threading.Event()

    def worker(k):
        x, i = torch.zeros(8), 0
        while not done.is_set():  # each op runs without the GIL: beside the stops below
            i += 1
            if i % 3 == 0:
                with torch.autograd.profiler.record_function("span"):
                    x = x + 1
            else:
                x = x * 1.0001 + k
            if i % 50 == 0:
                torch.ones(i % 7 + 1)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for thread in threads:
        thread.start()
    bad, rows = [], 0
    try:
        for cycle in range(120):
            lib.start(record_shapes=cycle % 5 == 0)
            time.sleep(0.0005 * (cycle % 4))
            records = lib.stop()
            rows += len(records)
            names = {records.names[i] for i in records.name}
            unknown = {name for name in names if not name.startswith("aten::") and name != "span"}
            ended = (records.flags & 4) != 0
            if unknown:
                bad.append(f"cycle {cycle}: names {sorted(unknown)[:3]}")
            if (records.end_ns[ended] < records.start_ns[ended]).any():
                bad.append(f"cycle {cycle}: an end before its start")
            if len(records) and records.thread.max() >= len(records.os_tids):
                bad.append(f"cycle {cycle}: a thread index past the thread table")
    finally:
        done.set()
        for thread in threads:
            thread.join()
    print("rows", rows, "bad", bad)
    sys.exit(1 if bad or not rows else 0)
""")


def test_stops_and_starts_while_threads_run_ops_read_whole_profiles():
    """Three threads loop ops and ranges while the main thread starts and stops the observer
    120 times. Before the stop waited for running callbacks, a thread could still intern a name
    or grow its chunks while the stop read or recycled them: a crash or garbage within ~100
    cycles on the 2-core VM."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get(
        "PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", _STOPS_WHILE_THREADS_RUN], capture_output=True,
                          text=True, env=env, timeout=240)
    output = (done.stdout + done.stderr)[-2000:]
    assert done.returncode == 0, output
    assert "bad []" in done.stdout, output


def test_an_op_open_across_profiles_leaves_the_next_profiles_depths_alone():
    """A range opened in one profile and closed inside the next: its end must not count as
    the end of one of the next profile's ops (the depth of what follows, which decides which
    ops get CUDA events with ``gpu_depth``)."""
    library = native.load()
    x = torch.ones(1)
    spanning = record_function("spanning")
    library.start()
    for _ in range(20):  # the range's record lies past the next profile's first ones
        x + 1
    spanning.__enter__()
    library.stop()
    library.start()
    with record_function("outer"):
        spanning.__exit__(None, None, None)
        x + 1
    records = library.stop()
    depth = {records.names[records.name[row]]: int(records.depth[row])
             for row in range(len(records))}
    assert "spanning" not in depth
    assert (depth["outer"], depth["aten::add"]) == (0, 1)
