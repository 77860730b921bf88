"""Putting the ranks' times on one clock.

Each file's times are ns from its own origin, ``meta["base_time_ns"]`` on its host's wall
clock. Shifting by the bases puts every rank on one wall clock; hosts' clocks disagree by up to
milliseconds, so the shift is refined by the collectives: a collective (all_reduce, ...) ends on
every rank at about the same moment, since none can leave before the last arrives. The k-th
collective of a name on one rank is matched with the k-th of that name on the reference rank
(the lowest), and the median difference of their ends is added to the shift.

Broadcasts' ends count too, though gloo's root is done ~20-100 µs before its receiver: leaving
them out (only the all-ranks collectives' ends) put a 2-rank DDP job on one host further from the
truth, 0 (mean |offset| 80 -> 227 µs over 8 runs at load 4-9): a 3-step run has only ~5 of those,
and their ends disagreed by up to a millisecond there (bench/RESULTS.md, "clock alignment").

The ends are only about the same: a rank that waited in a collective is woken after it ends, and on
a busy machine that takes milliseconds, so the median of the ends can be off by as much. What the
collectives prove is firmer: an all-reduce (all-gather, barrier...: op_names.ALL_RANKS_MEET) cannot
end on one rank before it started on another, so each matched pair bounds the shift. The refined
shift is kept inside those bounds (the nearest bound where the median falls outside: never further
from the true shift, which lies inside them).
"""

from __future__ import annotations

import numpy as np

from ..model import Trace
from .op_names import ALL_RANKS_MEET, COLLECTIVE

# How closely the ends of one collective agree across ranks once aligned: the width of the band
# of end differences that alignment looks for (NCCL ranks leave a collective within microseconds).
ALIGN_WINDOW_NS = 1_000_000


def collective_intervals(trace: Trace) -> dict:
    """name -> (starts, ends) (ns, in the order of their ends) of the trace's collectives: its GPU
    collective kernels when it has any (their ends are where the ranks meet), else its CPU
    collective ops."""
    collective_names = [i for i, name in enumerate(trace.names) if COLLECTIVE.search(name)]
    out = {}
    for name_column, start_column, end_column in (
            (trace.gpu_name_id, trace.gpu_start_ns, trace.gpu_end_ns),
            (trace.name_id, trace.start_ns, trace.end_ns)):
        rows = np.flatnonzero(np.isin(name_column, collective_names))
        if not len(rows):
            continue
        for name_id in np.unique(name_column[rows]).tolist():
            named = rows[name_column[rows] == name_id]
            named = named[np.argsort(end_column[named], kind="stable")]
            out[trace.names[name_id]] = (start_column[named], end_column[named])
        return out
    return out


def collective_offset(reference: dict, other: dict, other_shift_ns: int,
                      window_ns: int = ALIGN_WINDOW_NS) -> tuple[int, int]:
    """(ns to add to ``other``'s shift so its collectives end with ``reference``'s, how many
    collectives that rests on). ``reference`` is already on the merged clock; ``other`` gets
    ``other_shift_ns`` first (both as :func:`collective_intervals` gives them).

    Collectives are matched by name and order. A rank's profile may have missed some (sampled
    traces, a window that started late), which puts later pairs out of step, so the offset is not
    the plain median of the differences but the median of the densest cluster of them: the
    ``window_ns`` wide band that holds the most differences. It is then kept inside the bounds
    that the all-ranks collectives prove (the module's docstring), from the names both ranks hold
    the same number of (none missed, so the k-th is the k-th), where those bounds agree."""
    differences, lowest, highest = [], [], []
    for name, (starts, ends) in other.items():
        if name not in reference:
            continue
        reference_starts, reference_ends = reference[name]
        count = min(len(ends), len(reference_ends))
        differences.append(reference_ends[:count] - (ends[:count] + other_shift_ns))
        if ALL_RANKS_MEET.search(name) and len(ends) == len(reference_ends):
            # other's end no earlier than reference's start; reference's end no earlier than other's
            lowest.append(np.max(reference_starts - (ends + other_shift_ns)))
            highest.append(np.min(reference_ends - (starts + other_shift_ns)))
    if not differences:
        return 0, 0
    differences = np.sort(np.concatenate(differences))
    in_band = np.searchsorted(differences, differences + window_ns, side="right") - \
        np.arange(len(differences))
    first = int(np.argmax(in_band))
    cluster = differences[first:first + int(in_band[first])]
    offset = int(np.median(cluster))
    if lowest and max(lowest) <= min(highest):
        offset = min(max(offset, int(max(lowest))), int(min(highest)))
    return offset, len(cluster)


def clock_shifts(traces: list[Trace], align: bool = True) -> tuple[int, list[dict]]:
    """The merged origin (the earliest base) and, per trace, the shift applied to its times:
    ``base_offset_ns`` (its base minus the origin) plus ``collective_offset_ns``."""
    bases = [int(t.meta.get("base_time_ns") or 0) for t in traces]
    origin = min(bases) if bases else 0
    reference = None
    shifts = []
    for trace, base in zip(traces, bases):
        base_offset = base - origin
        intervals = collective_intervals(trace) if align else {}
        if reference is None:
            refined, matched = 0, 0
            reference = {name: (starts + base_offset, ends + base_offset)
                         for name, (starts, ends) in intervals.items()}
        else:
            refined, matched = collective_offset(reference, intervals, base_offset)
        shifts.append({"base_offset_ns": base_offset, "collective_offset_ns": refined,
                       "collectives_matched": matched, "offset_ns": base_offset + refined})
    return origin, shifts
