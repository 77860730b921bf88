"""Finding events by name for the widget's search box: pure functions over a Trace (no widgets)."""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from .events import Trace


class SearchResult(NamedTuple):
    event_ids: np.ndarray  # matching CPU events, in start order
    gpu_rows: np.ndarray  # matching GPU intervals (kernels, memcpy...), in start order
    message: str  # what the widget shows next to the box


def find_events(trace: Trace, pattern: str) -> SearchResult:
    """Events whose name contains ``pattern`` as a case-insensitive regex; a pattern that is not a
    valid regex is searched as plain text, and the message says so."""
    empty = np.zeros(0, np.int64)
    if not pattern:
        return SearchResult(empty, empty, "")
    note = ""
    try:
        regex = re.compile(pattern, re.IGNORECASE)
    except re.error as error:
        regex = re.compile(re.escape(pattern), re.IGNORECASE)
        note = f" (not a valid regex: {error.msg}; searched as text)"
    # Names are few (hundreds) and events many: match each name once, then select by name id.
    name_matches = np.fromiter((regex.search(name) is not None for name in trace.names),
                               dtype=bool, count=len(trace.names))
    if not name_matches.any():
        return SearchResult(empty, empty, f"no matches{note}")
    event_ids = np.flatnonzero(name_matches[trace.name_id])
    gpu_rows = np.flatnonzero(name_matches[trace.gpu_name_id])
    parts = [f"{len(event_ids):,} event{'s' * (len(event_ids) != 1)}"]
    if len(gpu_rows):
        # The timeline outlines CPU events only: say so rather than let the user hunt for them.
        parts.append(f"{len(gpu_rows):,} GPU interval{'s' * (len(gpu_rows) != 1)} (not outlined)")
    return SearchResult(event_ids, gpu_rows, " + ".join(parts) + note)


def events_named(trace: Trace, name: str) -> np.ndarray:
    """Ids of the CPU events called exactly ``name`` (a summary row's op)."""
    if name not in trace.names:
        return np.zeros(0, np.int64)
    return np.flatnonzero(trace.name_id == trace.names.index(name))
