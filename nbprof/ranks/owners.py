"""Which rank owns each row of a trace: its threads, events and GPU intervals.

A merged Trace says so in its meta (see :mod:`nbprof.ranks`); a single rank's trace by its own
``meta["rank"]`` (or -1 where it names none).
"""

from __future__ import annotations

import numpy as np

from ..model import Trace


def meta_rank(trace: Trace) -> int:
    """The trace's own rank from its meta, or -1: only a whole number counts (a file may say
    anything there)."""
    rank = trace.meta.get("rank")
    if isinstance(rank, (int, np.integer)) and not isinstance(rank, bool) and 0 <= rank < 1 << 31:
        return int(rank)
    return -1


def thread_ranks(trace: Trace) -> np.ndarray:
    """The rank of each entry of ``trace.threads`` (int32; -1 where the trace names none)."""
    listed = trace.meta.get("thread_rank")
    if isinstance(listed, list) and len(listed) == len(trace.threads):
        return np.array(listed, np.int32)
    return np.full(len(trace.threads), meta_rank(trace), np.int32)


def gpu_ranks(trace: Trace) -> np.ndarray:
    """The rank of each GPU interval (int32; -1 where the trace names none)."""
    table = trace.meta.get("gpu_devices")
    if not table:
        return np.full(len(trace.gpu_start_ns), meta_rank(trace), np.int32)
    size = max(device for device, _rank, _own in table) + 1
    rank_of_device = np.full(max(size, int(trace.gpu_device.max(initial=0)) + 1), -1, np.int32)
    for device, rank, _own in table:
        rank_of_device[device] = rank
    return rank_of_device[trace.gpu_device]


def own_devices(trace: Trace) -> dict:
    """merged device -> (rank, the device's number in its own file); {} for a single trace."""
    return {device: (rank, own) for device, rank, own in trace.meta.get("gpu_devices") or []}


def event_ranks(trace: Trace) -> np.ndarray:
    return thread_ranks(trace)[trace.thread] if len(trace) else np.zeros(0, np.int32)
