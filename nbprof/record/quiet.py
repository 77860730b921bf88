"""Silence Kineto's ``USDT: ... profiler_start`` / ``profiler_stop`` lines, and nothing else.

Kineto writes them from C to file descriptor 2 each time profiling starts or stops; a notebook
shows them as red stderr text under the cell. Python-level redirection cannot catch C writes, so
fd 2 itself is pointed at a temporary file for the duration of the call, then restored, and every
line that is not that noise is written back to the real fd 2.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

USDT_NOISE = re.compile(rb"^USDT:.*\bprofiler_(start|stop)\b.*$")


def strip_usdt_noise(output: bytes) -> bytes:
    """``output`` without Kineto's profiler_start/stop lines."""
    kept = [line for line in output.splitlines(keepends=True)
            if not USDT_NOISE.match(line.rstrip(b"\r\n"))]
    return b"".join(kept)


@contextlib.contextmanager
def quiet_usdt():
    """Run the block with fd 2 captured; re-emit what it wrote, minus the USDT noise."""
    sys.stderr.flush()
    try:
        saved_fd = os.dup(2)
    except OSError:  # no fd 2 (some embedded interpreters): nothing to silence
        yield
        return
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            capture.seek(0)
            rest = memoryview(strip_usdt_noise(capture.read()))
            while rest:  # a pipe may take less than all of it at once
                rest = rest[os.write(2, rest):]
