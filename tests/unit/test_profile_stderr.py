"""Kineto's USDT lines must not reach a notebook's stderr; everything else written to fd 2 must.

Runs a real child Python and reads its real stderr: the lines come from C, below sys.stderr.
"""

import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import os, sys, torch, nbprof
    from nbprof.record.quiet import quiet_usdt
    with nbprof.profile() as prof:
        torch.ones(3) + 1
        os.write(2, b"from C inside the block\\n")
    print("python stderr after", file=sys.stderr, flush=True)
    with quiet_usdt():  # what Kineto writes at start/stop, plus a real error line
        os.write(2, b"USDT:2026-12-02 13:58:09 6399:6399 SyncActivityProfilerHandler.cpp:52] "
                    b"profiler_start\\nkept: a real error\\n")
    print(len(prof.trace))
""")


def run_child():
    return subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True,
                          timeout=120, check=True)


def test_no_usdt_lines_but_other_stderr_survives():
    child = run_child()
    stderr = child.stderr.decode()
    assert "USDT" not in stderr and "profiler_start" not in stderr
    assert "profiler_stop" not in stderr
    assert "from C inside the block" in stderr
    assert "python stderr after" in stderr
    assert "kept: a real error" in stderr
    assert int(child.stdout.split()[-1]) >= 3


def test_torch_does_print_usdt_lines_without_nbprof():
    # The check above means something only if torch here prints them at all.
    child = subprocess.run(
        [sys.executable, "-c", "import torch\nwith torch.profiler.profile(): torch.ones(1)"],
        capture_output=True, timeout=120, check=True)
    assert b"profiler_start" in child.stderr
