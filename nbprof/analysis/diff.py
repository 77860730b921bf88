"""``nbprof.diff(before, after)``: what changed between two traces, by op name, then by call path.

The answer leads with a roll-up by op name (numbered step markers share one: ``ProfilerStep#*``):
per name, calls, inclusive CPU time (an op nested in one of its own name counts once), self CPU
time and GPU time (of the intervals its ops launched), before / after / delta, sorted by
``change_us`` = |delta CPU| + |delta GPU|: the change a user sees on the timeline ("aten::item
took 300 ms more"). ``by="call_path"`` gives the detail: ops matched by call path (name and
parent chain, callpaths.py), and by step where both traces have steps (steps.py: step k of one
against step k of the other; ops outside every step count as step "-", and so do those of a step
still open when profiling stopped in either trace: its times end with the profile, not the step,
and the table's footer says which were left out), sorted by |delta self
CPU| + |delta GPU|, how much the op's own time moved (inclusive time would rank every enclosing
op above the op that changed). Ops on one side only are "added" or "removed". numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .callpaths import CallPaths, canonical_names
from ..model import Trace
from .steps import StepWindows, find_steps
from .tables import make_table

STATUSES = ("slower", "faster", "added", "removed", "same")
# A match is "same" unless its own time moved by more than both of these.
SAME_FRACTION = 0.05
SAME_NS = 1_000
# (column prefix, attribute of a side's totals)
METRICS = (("count", "count"), ("cpu", "cpu_ns"), ("self_cpu", "self_ns"), ("gpu", "gpu_ns"))


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


def _aggregate(trace: Trace, windows: StepWindows | None, left_out: np.ndarray) -> _Side:
    """``windows``: the steps to match by (None: not by step); ``left_out``: steps whose ops count
    as outside every step."""
    paths = CallPaths(trace)
    n = len(trace)
    if windows is not None:
        step = windows.of_times(trace.start_ns)
        step[np.isin(step, left_out)] = -1
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


def diff(before: Trace, after: Trace, *, by: str = "name", by_step: bool | None = None):
    """What changed from ``before`` to ``after``: a DataFrame (with ``.table()`` for text), by op
    name (``by="name"``, the default), or by call path (``by="call_path"``; ``by_step``: match
    per step, default where both traces have steps of their own, not just "whole trace")."""
    if by not in ("name", "call_path"):
        raise ValueError(f"nbprof.diff: by={by!r}; use by='name' (the roll-up) or by='call_path'")
    comparison = compare(before, after, by_step=by_step)
    return comparison.by_name if by == "name" else comparison.table


@dataclass(frozen=True)
class Comparison:
    """The diff table, and each event's status (an index into STATUSES) on both sides: what the
    Compare tab colours the two timelines by."""

    table: object  # by call path (and step)
    by_step: bool
    before_status: np.ndarray
    after_status: np.ndarray
    by_name: object  # the roll-up by op name

    def report(self, row_limit: int = 20) -> str:
        """The roll-up by name, then the call-path detail, as text (the CLI, the Compare tab)."""
        return (self.by_name.table(row_limit=row_limit) + "\n\nBy call path:\n"
                + self.table.table(row_limit=row_limit))


def compare(before: Trace, after: Trace, *, by_step: bool | None = None,
            plain: bool = False) -> Comparison:
    for which, trace in (("before", before), ("after", after)):
        if not isinstance(trace, Trace):
            raise TypeError(f"nbprof.diff needs two nbprof.Trace, got {type(trace).__name__} as "
                            f"{which}: profile with %%cudaprof -o VAR or read a file with nbprof.load")
    windows = [find_steps(before), find_steps(after)]
    if by_step is None:
        by_step = all(w.source != "whole trace" for w in windows)
    left_out, footer = _unfinished_steps(windows) if by_step else (np.zeros(0, np.int64), "")
    old, new = (_aggregate(trace, steps if by_step else None, left_out)
                for trace, steps in zip((before, after), windows))
    keys, at_old, at_new, columns = _matched(old.keys, new.keys, old, new, METRICS)
    index_all = {key: i for i, key in enumerate(keys)}
    columns = {"step": [step for step, _ in keys],
               "name": [old.names[i] if i >= 0 else new.names[j] for i, j in zip(at_old, at_new)],
               "call_path": [path for _, path in keys], **columns}
    change = np.abs(columns["self_cpu_delta_us"]) + np.abs(columns["gpu_delta_us"])
    status = _status(at_old, at_new, change, columns["self_cpu_before_us"] + columns["gpu_before_us"],
                     columns["self_cpu_delta_us"] + columns["gpu_delta_us"])
    columns = _sorted(columns, status, change)
    if not by_step:
        columns["step"] = [None] * len(change)
    new_cells = np.array([index_all[key] for key in new.keys], np.int64)
    return Comparison(table=make_table("Diff", columns, diff_text, plain, attrs={
                          "left_out_steps": left_out.tolist(), "footer": footer}), by_step=by_step,
                      before_status=status[old.cell_of_event],
                      after_status=status[new_cells[new.cell_of_event]] if len(new_cells) else
                      np.zeros(0, np.int64),
                      by_name=_by_name(before, after, plain))


def _unfinished_steps(windows: list[StepWindows]) -> tuple[np.ndarray, str]:
    """The steps (indices) unfinished in either trace, left out of the step comparison, and the
    line that says so."""
    left_out = sorted({int(i) for w in windows for i in np.flatnonzero(w.unfinished)})
    said = [f"step {step + 1} is left out (unfinished in "
            + " and ".join(side for side, w in zip(("before", "after"), windows)
                           if step < len(w) and w.unfinished[step])
            + ")" for step in left_out]
    footer = ("; ".join(said) + ": still open when profiling stopped, its ops count as step \"-\""
              if said else "")
    return np.array(left_out, np.int64), footer


def _matched(old_keys: list, new_keys: list, old, new, metrics):
    """Keys of both sides (``before``'s first, then those only ``after`` has), where each is on
    either side (-1: absent), and per metric (name, attribute of ``old``/``new``) its before /
    after / delta columns (times in µs)."""
    index_old = {key: i for i, key in enumerate(old_keys)}
    keys = old_keys + [key for key in new_keys if key not in index_old]
    index_new = {key: i for i, key in enumerate(new_keys)}
    at_old = np.array([index_old.get(key, -1) for key in keys], np.int64)
    at_new = np.array([index_new.get(key, -1) for key in keys], np.int64)

    def pick(values, at):
        return np.where(at >= 0, np.asarray(values, float)[np.maximum(at, 0)] if len(values) else 0, 0.0)

    columns = {}
    for metric, attribute in metrics:
        was, now = pick(getattr(old, attribute), at_old), pick(getattr(new, attribute), at_new)
        scale, unit = (1, "") if metric == "count" else (1e3, "_us")
        columns[f"{metric}_before{unit}"] = was / scale
        columns[f"{metric}_after{unit}"] = now / scale
        columns[f"{metric}_delta{unit}"] = (now - was) / scale
    return keys, at_old, at_new, columns


def _status(at_old, at_new, change, own_before, own_delta) -> np.ndarray:
    return np.select(
        [at_new < 0, at_old < 0,
         (change * 1e3 <= SAME_NS) | (change <= SAME_FRACTION * own_before), own_delta > 0],
        [STATUSES.index("removed"), STATUSES.index("added"), STATUSES.index("same"),
         STATUSES.index("slower")], STATUSES.index("faster"))


def _sorted(columns: dict, status: np.ndarray, change: np.ndarray) -> dict:
    """The columns with status and change_us, the biggest change first."""
    columns["status"] = [STATUSES[code] for code in status.tolist()]
    columns["change_us"] = change
    order = np.argsort(-change, kind="stable")
    return {name: [values[i] for i in order.tolist()] if isinstance(values, list) else
            np.asarray(values)[order] for name, values in columns.items()}


@dataclass(frozen=True)
class _Names:
    """Per op name (canonical) of one trace: calls and times (ns)."""

    names: list[str]
    count: np.ndarray
    cpu_ns: np.ndarray
    self_ns: np.ndarray
    gpu_ns: np.ndarray


def _name_totals(trace: Trace) -> _Names:
    canonical, table = canonical_names(trace.names)
    name = canonical[trace.name_id] if len(trace) else np.zeros(0, np.int64)
    count = np.bincount(name, minlength=len(table))
    parent = trace.parent
    # an op inside one of its own name (aten::add > aten::add) is already in its time
    nested = (parent >= 0) & (name == name[np.maximum(parent, 0)]) if len(trace) else \
        np.zeros(0, bool)
    cpu = np.bincount(name[~nested], weights=(trace.end_ns - trace.start_ns)[~nested],
                      minlength=len(table))
    launched = trace.gpu_launch >= 0
    gpu = np.bincount(name[trace.gpu_launch[launched]],
                      weights=(trace.gpu_end_ns - trace.gpu_start_ns)[launched], minlength=len(table))
    present = np.flatnonzero(count)
    return _Names(names=[table[i] for i in present.tolist()], count=count[present],
                  cpu_ns=cpu[present], self_ns=np.bincount(name, weights=trace.self_ns,
                                                           minlength=len(table))[present],
                  gpu_ns=gpu[present])


def _by_name(before: Trace, after: Trace, plain: bool):
    old, new = _name_totals(before), _name_totals(after)
    keys, at_old, at_new, columns = _matched(old.names, new.names, old, new, METRICS)
    columns = {"name": keys, **columns}
    change = np.abs(columns["cpu_delta_us"]) + np.abs(columns["gpu_delta_us"])
    status = _status(at_old, at_new, change, columns["cpu_before_us"] + columns["gpu_before_us"],
                     columns["cpu_delta_us"] + columns["gpu_delta_us"])
    return make_table("DiffByName", _sorted(columns, status, change), by_name_text, plain)


def _signed(us: float) -> str:
    from .averages import format_us

    return ("+" if us > 0 else "-" if us < 0 else " ") + format_us(abs(us))


def _status_counts(rows: list[dict]) -> str:
    counts = {status: sum(row["status"] == status for row in rows) for status in STATUSES}
    return ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])


def by_name_text(rows: list[dict], row_limit: int = 20, name_width: int = 50) -> str:
    """The roll-up by name as text: status, calls, CPU (inclusive), self CPU, GPU."""
    from .averages import format_us, limit_rows, text_table

    shown = limit_rows(rows, row_limit)
    with_gpu = any(row["gpu_before_us"] or row["gpu_after_us"] for row in rows)
    headers = ["Op", "Status", "Calls", "CPU before", "after", "delta", "Self CPU delta",
               *(["GPU before", "after", "delta"] if with_gpu else [])]
    cells = [[row["name"], row["status"], f"{row['count_before']:g} -> {row['count_after']:g}",
              format_us(row["cpu_before_us"]), format_us(row["cpu_after_us"]),
              _signed(row["cpu_delta_us"]), _signed(row["self_cpu_delta_us"]),
              *([format_us(row["gpu_before_us"]), format_us(row["gpu_after_us"]),
                 _signed(row["gpu_delta_us"])] if with_gpu else [])] for row in shown]
    out = [f"nbprof diff by name: {len(rows)} ops ({_status_counts(rows)}); sorted by "
           "|delta CPU| + |delta GPU|", *text_table(headers, cells, name_width)]
    if len(rows) > len(shown):
        out.append(f"({len(rows) - len(shown)} more rows; pass row_limit=-1 for all)")
    return "\n".join(out)


def diff_text(rows: list[dict], row_limit: int = 20, name_width: int = 50) -> str:
    """The diff as text: status, step, op (the tail of its call path), calls, self CPU, GPU."""
    from .averages import format_us, limit_rows, text_table

    shown = limit_rows(rows, row_limit)
    per_step = any(row["step"] is not None for row in rows)
    with_gpu = any(row["gpu_before_us"] or row["gpu_after_us"] for row in rows)  # else no GPU columns
    headers = ["Op (call path tail)", "Status", *(["Step"] if per_step else []), "Calls",
               "Self CPU before", "after", "delta", *(["GPU before", "after", "delta"] if with_gpu else [])]
    cells = [[_path_tail(row["call_path"]), row["status"],
              *([("-" if row["step"] < 0 else str(row["step"] + 1))] if per_step else []),
              f"{row['count_before']:g} -> {row['count_after']:g}",
              format_us(row["self_cpu_before_us"]), format_us(row["self_cpu_after_us"]),
              _signed(row["self_cpu_delta_us"]),
              *([format_us(row["gpu_before_us"]), format_us(row["gpu_after_us"]),
                 _signed(row["gpu_delta_us"])] if with_gpu else [])] for row in shown]
    out = [f"nbprof diff: {len(rows)} ops matched by call path{' and step' if per_step else ''} "
           f"({_status_counts(rows)}); sorted by |delta self CPU| + |delta GPU|",
           *text_table(headers, cells, name_width)]
    if len(rows) > len(shown):
        out.append(f"({len(rows) - len(shown)} more rows; pass row_limit=-1 for all)")
    return "\n".join(out)


def _path_tail(path: str, levels: int = 2) -> str:
    parts = path.split(" > ")
    return " > ".join(parts[-levels:]) if len(parts) <= levels else "... > " + " > ".join(parts[-levels:])
