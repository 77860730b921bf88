"""Slices that have no end in their source (a Chrome trace's X without dur, a B without its E).

Perfetto and chrome://tracing draw such a slice to the end of the trace; so does nbprof: the loader
gives it that end, and marks it with an arg, ``args[UNFINISHED_KEY]``, which the details pane shows
and every export keeps (Chrome JSON, Parquet). Its duration is not known, so the summary
(``key_averages``, ``table``) leaves it out of the times. ``meta[UNFINISHED_KEY]`` says how many a
trace holds; without it none is looked for, so a trace without them pays nothing.
"""

from __future__ import annotations

import numpy as np

UNFINISHED_KEY = "unfinished"
UNFINISHED_TEXT = "no end in the file: drawn to the end of the trace"


def unfinished_rows(trace) -> np.ndarray:
    """The rows (sorted) of the trace's unfinished slices."""
    if not trace.meta.get(UNFINISHED_KEY) or not len(trace):
        return np.zeros(0, np.int64)
    # Each ends where its trace ends, so it is the last end of its thread (to the µs its file's
    # times are rounded to): only those few rows' args are read (args may be stored compressed,
    # and reading every row's would cost seconds).
    last_end = np.full(len(trace.threads), np.iinfo(np.int64).min)
    np.maximum.at(last_end, trace.thread, trace.end_ns)
    candidates = np.flatnonzero(trace.end_ns >= last_end[trace.thread] - 1_000)
    return np.array([row for row in candidates.tolist()
                     if isinstance(args := trace.event_args.get(row), dict)
                     and UNFINISHED_KEY in args], np.int64)


def finished_mask(trace) -> np.ndarray | None:
    """Which rows have an end of their own; None when every row has (the common case)."""
    rows = unfinished_rows(trace)
    if not len(rows):
        return None
    mask = np.ones(len(trace), bool)
    mask[rows] = False
    return mask
