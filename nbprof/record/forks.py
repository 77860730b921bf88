"""Forked children of a profiled process (DataLoader workers) record nothing and print nothing.

``fork()`` copies the calling thread, profiler state included: a DataLoader worker forked inside
a block would run every op through the profiler's callbacks, and after CUDA was initialised each
one fails cudaGetDevice and prints "Exception in RecordFunction callback" to fd 2 (the notebook
shows a flood of red). The child's records are never read, so in a child forked while nbprof
records, RecordFunction is switched off on its (only) thread before any of its code runs.
"""

from __future__ import annotations

import os

import torch

_recording = False


def _quiet_child() -> None:
    if _recording:
        torch.autograd._enable_record_function(False)


if hasattr(os, "register_at_fork"):  # once per process: handlers cannot be removed
    os.register_at_fork(after_in_child=_quiet_child)


def set_recording(recording: bool) -> None:
    """Whether a child forked from now on is forked from inside a profile."""
    global _recording
    _recording = recording
