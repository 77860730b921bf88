"""Putting the ranks' times on one clock.

Each file's times are ns from its own origin, ``meta["base_time_ns"]`` on its host's wall
clock. Shifting by the bases puts every rank on one wall clock; hosts' clocks disagree by up to
milliseconds, so the shift is refined by the collectives: a collective (all_reduce, ...) ends on
every rank at about the same moment, since none can leave before the last arrives. The k-th
collective of a name on one rank is matched with the k-th of that name on the reference rank
(the lowest), and the median difference of their ends is added to the shift.
"""

from __future__ import annotations

import numpy as np

from ..model import Trace
from .op_names import COLLECTIVE

# How closely the ends of one collective agree across ranks once aligned: the width of the band
# of end differences that alignment looks for (NCCL ranks leave a collective within microseconds).
ALIGN_WINDOW_NS = 1_000_000


def collective_ends(trace: Trace) -> dict:
    """name -> ends (ns, in time order) of the trace's collectives: its GPU collective kernels
    when it has any (their ends are where the ranks meet), else its CPU collective ops."""
    collective_names = [i for i, name in enumerate(trace.names) if COLLECTIVE.search(name)]
    out = {}
    for name_column, end_column in ((trace.gpu_name_id, trace.gpu_end_ns),
                                    (trace.name_id, trace.end_ns)):
        rows = np.flatnonzero(np.isin(name_column, collective_names))
        if not len(rows):
            continue
        for name_id in np.unique(name_column[rows]).tolist():
            ends = np.sort(end_column[rows[name_column[rows] == name_id]])
            out[trace.names[name_id]] = ends
        return out
    return out


def collective_offset(reference: dict, other: dict, other_shift_ns: int,
                      window_ns: int = ALIGN_WINDOW_NS) -> tuple[int, int]:
    """(ns to add to ``other``'s shift so its collectives end with ``reference``'s, how many
    collectives that rests on). ``reference`` is already on the merged clock; ``other`` gets
    ``other_shift_ns`` first.

    Collectives are matched by name and order. A rank's profile may have missed some (sampled
    traces, a window that started late), which puts later pairs out of step, so the offset is not
    the plain median of the differences but the median of the densest cluster of them: the
    ``window_ns`` wide band that holds the most differences."""
    differences = []
    for name, ends in other.items():
        if name in reference:
            count = min(len(ends), len(reference[name]))
            differences.append(reference[name][:count] - (ends[:count] + other_shift_ns))
    if not differences:
        return 0, 0
    differences = np.sort(np.concatenate(differences))
    in_band = np.searchsorted(differences, differences + window_ns, side="right") - \
        np.arange(len(differences))
    first = int(np.argmax(in_band))
    cluster = differences[first:first + int(in_band[first])]
    return int(np.median(cluster)), len(cluster)


def clock_shifts(traces: list[Trace], align: bool = True) -> tuple[int, list[dict]]:
    """The merged origin (the earliest base) and, per trace, the shift applied to its times:
    ``base_offset_ns`` (its base minus the origin) plus ``collective_offset_ns``."""
    bases = [int(t.meta.get("base_time_ns") or 0) for t in traces]
    origin = min(bases) if bases else 0
    reference = None
    shifts = []
    for trace, base in zip(traces, bases):
        base_offset = base - origin
        ends = collective_ends(trace) if align else {}
        if reference is None:
            refined, matched = 0, 0
            reference = {name: e + base_offset for name, e in ends.items()}
        else:
            refined, matched = collective_offset(reference, ends, base_offset)
        shifts.append({"base_offset_ns": base_offset, "collective_offset_ns": refined,
                       "collectives_matched": matched, "offset_ns": base_offset + refined})
    return origin, shifts
