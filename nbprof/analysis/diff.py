"""``nbprof.diff(before, after)``: what changed between two traces, op by op.

Ops are matched by call path (name and parent chain, callpaths.py), and by step where both traces
have steps (steps.py: step k of one against step k of the other; ops outside every step count as
step "-"). Per match: calls, CPU time, self CPU time and GPU time (of the intervals the ops
launched), before / after / delta; ops on one side only are "added" or "removed". Rows are sorted
by ``change_us`` = |delta self CPU| + |delta GPU|, how much the op's own time moved (inclusive CPU
time would rank every enclosing op above the op that changed). numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .callpaths import CallPaths
from ..model import Trace
from .steps import find_steps
from .tables import make_table

STATUSES = ("slower", "faster", "added", "removed", "same")
# A match is "same" unless its own time moved by more than both of these.
SAME_FRACTION = 0.05
SAME_NS = 1_000


@dataclass(frozen=True)
class _Side:
    """Per (step, path) of one trace: calls and times (ns), and the keys to match on."""

    keys: list[tuple]
    names: list[str]
    count: np.ndarray
    cpu_ns: np.ndarray
    self_ns: np.ndarray
    gpu_ns: np.ndarray
    cell_of_event: np.ndarray  # per event, its index in keys


def _aggregate(trace: Trace, by_step: bool) -> _Side:
    paths = CallPaths(trace)
    n = len(trace)
    if by_step:
        step = find_steps(trace).of_times(trace.start_ns)
    else:
        step = np.full(n, -1, np.int64)
    cell = (step + 1) * max(len(paths), 1) + paths.of_event
    unique, first, group = np.unique(cell, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    cells = len(unique)
    launched = trace.gpu_launch >= 0
    gpu_ns = np.bincount(group[trace.gpu_launch[launched]],
                         weights=(trace.gpu_end_ns - trace.gpu_start_ns)[launched], minlength=cells)
    texts = paths.texts()
    path_of_cell = paths.of_event[first]
    step_of_cell = unique // max(len(paths), 1) - 1
    return _Side(
        keys=[(int(s), texts[p]) for s, p in zip(step_of_cell.tolist(), path_of_cell.tolist())],
        names=[paths.names[paths.name[p]] for p in path_of_cell.tolist()],
        count=np.bincount(group, minlength=cells),
        cpu_ns=np.bincount(group, weights=trace.end_ns - trace.start_ns, minlength=cells),
        self_ns=np.bincount(group, weights=trace.self_ns, minlength=cells),
        gpu_ns=gpu_ns, cell_of_event=group)


def diff(before: Trace, after: Trace, *, by_step: bool | None = None):
    """The op-by-op difference from ``before`` to ``after`` (a DataFrame with pandas, else a list of
    row dicts; ``.table()`` for text). ``by_step``: match per step (default: where both traces
    have steps of their own, not just "whole trace")."""
    return compare(before, after, by_step=by_step).table


@dataclass(frozen=True)
class Comparison:
    """The diff table, and each event's status (an index into STATUSES) on both sides: what the
    Compare tab colours the two timelines by."""

    table: object
    by_step: bool
    before_status: np.ndarray
    after_status: np.ndarray


def compare(before: Trace, after: Trace, *, by_step: bool | None = None,
            plain: bool = False) -> Comparison:
    for which, trace in (("before", before), ("after", after)):
        if not isinstance(trace, Trace):
            raise TypeError(f"nbprof.diff needs two nbprof.Trace, got {type(trace).__name__} as "
                            f"{which}: profile with %%cudaprof -o VAR or read a file with nbprof.load")
    if by_step is None:
        by_step = all(find_steps(t).source != "whole trace" for t in (before, after))
    old, new = _aggregate(before, by_step), _aggregate(after, by_step)
    index_old = {key: i for i, key in enumerate(old.keys)}
    keys = old.keys + [key for key in new.keys if key not in index_old]
    index_all = {key: i for i, key in enumerate(keys)}
    index_new = {key: i for i, key in enumerate(new.keys)}
    at_old = np.array([index_old.get(key, -1) for key in keys], np.int64)
    at_new = np.array([index_new.get(key, -1) for key in keys], np.int64)

    def pick(values, at):
        return np.where(at >= 0, np.asarray(values, float)[np.maximum(at, 0)] if len(values) else 0, 0.0)

    columns = {"step": [step for step, _ in keys],
               "name": [old.names[i] if i >= 0 else new.names[j] for i, j in zip(at_old, at_new)],
               "call_path": [path for _, path in keys]}
    for metric, attribute in (("count", "count"), ("cpu", "cpu_ns"), ("self_cpu", "self_ns"),
                              ("gpu", "gpu_ns")):
        was, now = pick(getattr(old, attribute), at_old), pick(getattr(new, attribute), at_new)
        scale, unit = (1, "") if metric == "count" else (1e3, "_us")
        columns[f"{metric}_before{unit}"] = was / scale
        columns[f"{metric}_after{unit}"] = now / scale
        columns[f"{metric}_delta{unit}"] = (now - was) / scale
    own_before = columns["self_cpu_before_us"] + columns["gpu_before_us"]
    own_delta = columns["self_cpu_delta_us"] + columns["gpu_delta_us"]
    change = np.abs(columns["self_cpu_delta_us"]) + np.abs(columns["gpu_delta_us"])
    status = np.select(
        [at_new < 0, at_old < 0,
         (change * 1e3 <= SAME_NS) | (change <= SAME_FRACTION * own_before), own_delta > 0],
        [STATUSES.index("removed"), STATUSES.index("added"), STATUSES.index("same"),
         STATUSES.index("slower")], STATUSES.index("faster"))
    columns["status"] = [STATUSES[code] for code in status.tolist()]
    columns["change_us"] = change
    order = np.argsort(-change, kind="stable")
    columns = {name: [values[i] for i in order.tolist()] if isinstance(values, list) else
               np.asarray(values)[order] for name, values in columns.items()}
    if not by_step:
        columns["step"] = [None] * len(order)
    new_cells = np.array([index_all[key] for key in new.keys], np.int64)
    return Comparison(table=make_table("Diff", columns, diff_text, plain), by_step=by_step,
                      before_status=status[old.cell_of_event],
                      after_status=status[new_cells[new.cell_of_event]] if len(new_cells) else
                      np.zeros(0, np.int64))


def diff_text(rows: list[dict], row_limit: int = 20, name_width: int = 50) -> str:
    """The diff as text: status, step, op (the tail of its call path), calls, self CPU, GPU."""
    from .averages import format_us, limit_rows, text_table

    def signed(us):
        return ("+" if us > 0 else "-" if us < 0 else " ") + format_us(abs(us))

    shown = limit_rows(rows, row_limit)
    per_step = any(row["step"] is not None for row in rows)
    with_gpu = any(row["gpu_before_us"] or row["gpu_after_us"] for row in rows)  # else no GPU columns
    headers = ["Op (call path tail)", "Status", *(["Step"] if per_step else []), "Calls",
               "Self CPU before", "after", "delta", *(["GPU before", "after", "delta"] if with_gpu else [])]
    cells = [[_path_tail(row["call_path"]), row["status"],
              *([("-" if row["step"] < 0 else str(row["step"] + 1))] if per_step else []),
              f"{row['count_before']:g} -> {row['count_after']:g}",
              format_us(row["self_cpu_before_us"]), format_us(row["self_cpu_after_us"]),
              signed(row["self_cpu_delta_us"]),
              *([format_us(row["gpu_before_us"]), format_us(row["gpu_after_us"]),
                 signed(row["gpu_delta_us"])] if with_gpu else [])] for row in shown]
    counts = {status: sum(row["status"] == status for row in rows) for status in STATUSES}
    head = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])
    out = [f"nbprof diff: {len(rows)} ops matched by call path{' and step' if per_step else ''} "
           f"({head}); sorted by |delta self CPU| + |delta GPU|", *text_table(headers, cells, name_width)]
    if len(rows) > len(shown):
        out.append(f"({len(rows) - len(shown)} more rows; pass row_limit=-1 for all)")
    return "\n".join(out)


def _path_tail(path: str, levels: int = 2) -> str:
    parts = path.split(" > ")
    return " > ".join(parts[-levels:]) if len(parts) <= levels else "... > " + " > ".join(parts[-levels:])
