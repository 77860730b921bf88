"""The hidden event columns a timeline page carries, and the small tables js/timeline.js reads.

Every CPU event and GPU interval becomes one entry of a draw row (see lanes.py); entries go row by
row, each row in start order (event ids are in start order, so sorting by (row, id) is enough).
Times are ns from the trace's first event. Built with numpy over whole columns: no loop per event.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model import Trace
from .lanes import FAMILY_RUNTIME, Lanes, cpu_families, gpu_families, name_hashes
from .packing import pack_columns


def _deltas_within_rows(values: np.ndarray, first_of_row: np.ndarray) -> np.ndarray:
    deltas = np.diff(values, prepend=0)
    deltas[first_of_row] = values[first_of_row]
    return deltas


def _gaps_within_rows(start: np.ndarray, end: np.ndarray, first_of_row: np.ndarray) -> np.ndarray:
    """Each start as the gap after the previous event's end in its row (the first: after 0),
    zigzag-coded (overlaps make negative gaps). Back-to-back events give tiny gaps, so this packs
    far smaller than start deltas, which repeat the previous duration."""
    gaps = start - np.concatenate([[0], end[:-1]])
    gaps[first_of_row] = start[first_of_row]
    return np.where(gaps >= 0, 2 * gaps, -2 * gaps - 1)


STACK_FRAMES_SHOWN = 3
GPU_DETAIL_KEYS = ("grid", "block", "bytes")


@dataclass(frozen=True)
class DetailTexts:
    """Hover text for the events the trace knows more about: shapes, Python stack, grid and
    block, bytes. ``texts`` are the distinct texts, sorted; ``cpu_rows`` (event ids) and
    ``gpu_rows`` (GPU rows), each sorted, have the code of theirs in ``cpu_codes`` / ``gpu_codes``.
    Per-event ids (correlation) are left out: unique per kernel, they would make every text its
    own entry in the page's text table."""

    texts: list
    cpu_rows: np.ndarray
    cpu_codes: np.ndarray
    gpu_rows: np.ndarray
    gpu_codes: np.ndarray

    def codes(self, ids: np.ndarray, is_gpu: np.ndarray) -> np.ndarray:
        """The text code of each event (``ids``: event ids or GPU rows, as ``is_gpu`` says); -1
        where it has none."""
        out = np.full(len(ids), -1, np.int64)
        for gpu, rows, codes in ((False, self.cpu_rows, self.cpu_codes),
                                 (True, self.gpu_rows, self.gpu_codes)):
            where = np.flatnonzero(is_gpu == gpu)
            if len(rows) and len(where):
                at = np.minimum(np.searchsorted(rows, ids[where]), len(rows) - 1)
                out[where] = np.where(rows[at] == ids[where], codes[at], -1)
        return out


def detail_texts(trace: Trace, cpu_ids=None, gpu_rows=None) -> DetailTexts:
    """The trace's hover texts, formatted once per distinct value, not once per event: a loaded
    file's args are decoded a block at a time for just the keys shown (formats' ``coded``).
    With ``cpu_ids`` and ``gpu_rows`` (sorted), only those events' (the few a served view
    shows as themselves)."""
    def only(mapping, rows):
        return mapping if rows is None else _subset(mapping, rows)

    cpu_rows, cpu_codes, cpu_texts = _joined([
        *_texts(only(trace.shapes, cpu_ids), [None],
                lambda _key, shapes: f"shapes: {shapes}" if shapes else None),
        # the innermost frames say where in the user's code the op ran
        *_texts(only(trace.stacks, cpu_ids), [None], lambda _key, stack: "at " + " ← ".join(
            map(str, stack[:STACK_FRAMES_SHOWN])) if stack else None)])
    gpu_rows, gpu_codes, gpu_texts = _joined(_texts(only(trace.gpu_args, gpu_rows),
                                                    GPU_DETAIL_KEYS,
                                                    lambda key, value: f"{key}: {value}"))
    texts = sorted(set(cpu_texts) | set(gpu_texts))
    index = {text: code for code, text in enumerate(texts)}
    cpu_index = np.array([index[text] for text in cpu_texts] or [-1], np.int64)
    gpu_index = np.array([index[text] for text in gpu_texts] or [-1], np.int64)
    return DetailTexts(texts, cpu_rows, cpu_index[cpu_codes], gpu_rows, gpu_index[gpu_codes])


def _subset(mapping, rows: np.ndarray):
    """``mapping`` (row -> value) for just ``rows``: a loaded file's stays undecoded."""
    if hasattr(mapping, "subset"):
        return mapping.subset(rows)
    return {row: mapping[row] for row in rows.tolist() if row in mapping}


def _texts(mapping, keys, text_of) -> list:
    """Per key of ``keys`` (None: the value itself): the rows of ``mapping`` (row -> value)
    whose value's ``key`` ``text_of(key, value)`` gives a text for (None: none), sorted; each
    one's code into the distinct texts; those texts."""
    if hasattr(mapping, "coded"):  # a loaded file's: decoded per distinct value
        coded = mapping.coded(tuple(keys))
    else:  # built in memory (recorded, hand-made): the values are here already
        items = sorted(mapping.items(), key=lambda item: item[0])
        coded = []
        for key in keys:
            pairs = [(row, value if key is None else value[key]) for row, value in items
                     if key is None or (isinstance(value, dict) and key in value)]
            coded.append((np.array([row for row, _value in pairs], np.int64),
                          np.arange(len(pairs)), [value for _row, value in pairs]))
    out = []
    for key, (rows, codes, values) in zip(keys, coded):
        table = {}
        recode = np.array([-1 if text is None else table.setdefault(text, len(table))
                           for text in (text_of(key, value) for value in values)] or [-1],
                          np.int64)
        codes = recode[codes]
        keep = codes >= 0
        out.append((np.asarray(rows, np.int64)[keep], codes[keep], list(table)))
    return out


def _joined(parts: list) -> tuple[np.ndarray, np.ndarray, list]:
    """Several (rows, codes, texts) of _texts as one: each row's texts joined with " · ", in
    the order of ``parts``; each distinct combination formatted once."""
    rows = np.unique(np.concatenate([part[0] for part in parts]))
    if not len(rows):
        return rows, np.zeros(0, np.int64), []
    # each row's combination as one number (a digit per part, 0: none), so one np.unique
    # finds the distinct ones; parts' tables are small beside 2^63
    sizes = [len(part[2]) + 1 for part in parts]
    combined = np.zeros(len(rows), np.int64)
    for (part_rows, codes, _texts), size in zip(parts, sizes):
        combined *= size
        combined[np.searchsorted(rows, part_rows)] += codes + 1
    distinct, codes = np.unique(combined, return_inverse=True)
    texts = []
    for number in distinct.tolist():
        digits = []
        for size in reversed(sizes):
            number, digit = divmod(number, size)
            digits.append(digit - 1)
        texts.append(" · ".join(part[2][digit] for part, digit in zip(parts, reversed(digits))
                                if digit >= 0))
    return rows, codes.reshape(-1).astype(np.int64), texts


def runtime_calls(trace: Trace) -> np.ndarray:
    """Per GPU interval, the runtime call that launched it (cudaLaunchKernel, cuLaunchKernel,
    cudaMemcpyAsync...; -1 where unknown): ``trace.gpu_call``, which the loader pairs by
    correlation id. ``gpu_launch`` names the op around that call; links start at the call
    itself, as Perfetto's flows do. A trace built in memory whose args dicts carry correlation
    ids (and no ``gpu_call``) is paired from those dicts; a loaded file's args are never walked."""
    if (trace.gpu_call >= 0).any() or not (isinstance(trace.event_args, dict) and
                                           isinstance(trace.gpu_args, dict)):
        return trace.gpu_call
    found = np.full(len(trace.gpu_start_ns), -1, np.int32)  # kept by Served: 4 B an interval
    if not trace.event_args or not trace.gpu_args:
        return found
    is_runtime = cpu_families(trace) == FAMILY_RUNTIME

    def correlation(args):  # a file's id may be anything: only numbers and strings match
        value = args.get("correlation") if isinstance(args, dict) else None
        return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None

    by_correlation = {}
    for event, args in trace.event_args.items():
        if is_runtime[event] and correlation(args) is not None:
            by_correlation[correlation(args)] = event
    for row, args in trace.gpu_args.items():
        found[row] = by_correlation.get(correlation(args), -1)
    return found


def encode_events(trace: Trace, lanes: Lanes) -> tuple[str, dict]:
    n_cpu, n_gpu = len(trace), len(trace.gpu_start_ns)
    starts = np.concatenate([trace.start_ns, trace.gpu_start_ns])
    ends = np.concatenate([trace.end_ns, trace.gpu_end_ns])
    origin = int(starts.min()) if len(starts) else 0
    span = int(ends.max()) - origin if len(ends) else 0
    rows = np.concatenate([lanes.cpu_row, lanes.gpu_row])
    # A row holds CPU events or GPU intervals, never both, each in id order: a stable sort by
    # row alone is the (row, id) order (a radix sort on int16, where a lexsort took two passes)
    order = np.argsort(rows.astype(np.int16) if len(lanes.row_lane) < 2 ** 15 else rows,
                       kind="stable")
    rows = rows[order]
    ids = np.where(order < n_cpu, order, order - n_cpu)
    first_of_row = np.flatnonzero(np.diff(rows, prepend=-1))
    start_rel = starts[order] - origin
    durations = np.maximum(ends[order] - starts[order], 0)
    is_gpu_entry = order >= n_cpu

    details = detail_texts(trace)
    # entry position of each CPU event / GPU interval, to place the sparse details
    entry_of = np.empty(n_cpu + n_gpu, np.int64)
    entry_of[order] = np.arange(len(order))

    columns = {
        "row_count": np.bincount(rows, minlength=len(lanes.row_lane)),
        "start_gap": _gaps_within_rows(start_rel, start_rel + durations, first_of_row),
        "duration": durations,
        "id_delta": _deltas_within_rows(ids, first_of_row),
        "name_id": np.concatenate([trace.name_id, trace.gpu_name_id])[order],
        "family": np.concatenate([cpu_families(trace), gpu_families(trace)])[order],
        # per GPU entry, in entry order: the launching event's id + 1 (0: unknown)
        "gpu_launch": trace.gpu_launch.astype(np.int64)[order[is_gpu_entry] - n_cpu] + 1,
        "gpu_runtime": runtime_calls(trace)[order[is_gpu_entry] - n_cpu] + 1,  # the same, its call
        "detail_entry": np.concatenate([entry_of[details.cpu_rows],
                                        entry_of[n_cpu + details.gpu_rows]]),
        "detail_text": np.concatenate([details.cpu_codes, details.gpu_codes]),
    }
    packed, layout = pack_columns(columns)
    info = {"layout": layout, "n_cpu": n_cpu, "n_gpu": n_gpu, "origin_ns": origin, "span_ns": span,
            **lane_info(trace, lanes), "detail_texts": details.texts}
    return packed, info


def lane_info(trace: Trace, lanes: Lanes) -> dict:
    """What the browser knows of lanes, rows and names: the same whichever events a page carries
    (served.py's coarser level uses it too)."""
    lane_height = np.zeros(len(lanes.labels), np.int64)
    np.maximum.at(lane_height, lanes.row_lane, lanes.row_sub + 1)
    return {
        "labels": lanes.labels, "short_labels": lanes.short, "groups": lanes.groups,
        "group_titles": lanes.group_titles, "row_kind": lanes.row_kind.tolist(),
        "lane_is_gpu": lanes.is_gpu.tolist(),
        "lane_height": lane_height.tolist(), "row_lane": lanes.row_lane.tolist(),
        "row_sub": lanes.row_sub.tolist(), "row_is_gpu": lanes.row_is_gpu.tolist(),
        "names": list(trace.names), "name_hash": name_hashes(trace.names).tolist(),
    }
