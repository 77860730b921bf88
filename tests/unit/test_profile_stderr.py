"""Kineto's USDT lines must not reach a notebook's stderr; everything else written to fd 2 must.

Runs a real child Python and reads its real stderr: the lines come from C, below sys.stderr.
"""

import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEPARATOR = "----- nbprof from here -----"

CHILD = textwrap.dedent(f"""
    import os, sys, torch, nbprof
    from nbprof.record.quiet import quiet_usdt
    # The control: torch's own profiler prints the lines here (else the test proves nothing).
    with torch.profiler.profile():
        torch.ones(1)
    print({SEPARATOR!r}, file=sys.stderr, flush=True)
    with nbprof.profile() as prof:
        torch.ones(3) + 1
        os.write(2, b"from C inside the block\\n")
    print("python stderr after", file=sys.stderr, flush=True)
    with quiet_usdt():  # what Kineto writes at start/stop, plus a real error line
        os.write(2, b"USDT:2026-12-02 13:58:09 6399:6399 SyncActivityProfilerHandler.cpp:52] "
                    b"profiler_start\\nkept: a real error\\n")
    print(len(prof.trace))
""")


def test_no_usdt_lines_but_other_stderr_survives():
    child = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True,
                           timeout=120, check=True)
    torch_part, nbprof_part = child.stderr.decode().split(SEPARATOR)
    assert "profiler_start" in torch_part and "profiler_stop" in torch_part
    assert "USDT" not in nbprof_part and "profiler_st" not in nbprof_part
    assert "from C inside the block" in nbprof_part
    assert "python stderr after" in nbprof_part
    assert "kept: a real error" in nbprof_part
    assert int(child.stdout.split()[-1]) >= 3
