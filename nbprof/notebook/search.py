"""Finding events by name for the widget's search box: pure functions over a Trace (no widgets)."""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from ..model import Trace


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
    parts = [_plural(len(event_ids), "event")]
    if len(gpu_rows):
        parts.append(_plural(len(gpu_rows), "GPU interval"))
    return SearchResult(event_ids, gpu_rows, " + ".join(parts) + note)


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'s' * (count != 1)}"


def events_named(trace: Trace, name: str) -> np.ndarray:
    """Ids of the CPU events called exactly ``name`` (a summary row's op)."""
    if name not in trace.names:
        return np.zeros(0, np.int64)
    return np.flatnonzero(trace.name_id == trace.names.index(name))


def gpu_launched_by(trace: Trace, event_ids: np.ndarray) -> np.ndarray:
    """GPU intervals launched by these CPU events or by ops nested in them, in start order: what
    clicking one of them links to on the timeline (a kernel's launcher is the innermost op, so
    aten::linear's kernels are launched by the aten::addmm inside it)."""
    chosen = np.zeros(len(trace), bool)
    chosen[event_ids] = True
    pending = np.flatnonzero(trace.gpu_launch >= 0)  # GPU rows not yet tied to a chosen op
    op = trace.gpu_launch[pending].astype(np.int64)  # their launcher, then its parent, ...
    found = [np.zeros(0, np.int64)]
    # One nesting level per step for all intervals at once: nesting is tens deep, not thousands.
    while len(pending):
        hit = chosen[op]
        found.append(pending[hit])
        pending, op = pending[~hit], trace.parent[op[~hit]].astype(np.int64)
        nested = op >= 0
        pending, op = pending[nested], op[nested]
    return np.sort(np.concatenate(found))
