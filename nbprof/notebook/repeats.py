"""``%%cudaprof --repeat N``: per-op mean, min and max over N profiled runs of one cell.

The magic profiles the N runs in one session, each wrapped in a marker op named ``run_marker(i, N)``;
events are assigned to the run whose marker window holds their start (runs are sequential, so this also
covers autograd's backward threads). numpy only, like the analysis package.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..analysis.averages import format_us, limit_rows, text_table
from ..model import Trace
# The markers are read by the step finder too, so they live with it (pure, outside notebook/).
from ..analysis.steps import MARKER_PREFIX, run_marker, run_windows  # noqa: F401  (the magic imports them here)


@dataclass(frozen=True)
class RepeatRow:
    """One op over the runs: calls per run and CPU / CUDA time per run, in microseconds."""

    name: str
    calls_per_run: float
    cpu_mean_us: float
    cpu_min_us: float
    cpu_max_us: float
    cuda_mean_us: float


def repeat_summary(trace: Trace) -> list[RepeatRow]:
    """Per op name, mean / min / max over the runs, largest mean CPU time first."""
    marker_ids, run_start, run_end = run_windows(trace)
    if len(run_start) == 0:
        raise ValueError("this trace holds no '%%cudaprof --repeat' run markers")
    runs = completed_runs(trace)  # a run the cell raised in is left out: its ops are partial
    if runs == 0:
        raise ValueError("no '%%cudaprof --repeat' run of this trace completed")
    run_start, run_end = run_start[:runs], run_end[:runs]
    names = len(trace.names)
    run_of_event = _run_of(trace.start_ns, run_start, run_end)
    inside = run_of_event >= 0
    cell = run_of_event[inside] * names + trace.name_id[inside]
    calls = np.bincount(cell, minlength=runs * names).reshape(runs, names)
    cpu_ns = np.bincount(cell, weights=(trace.end_ns - trace.start_ns)[inside],
                         minlength=runs * names).reshape(runs, names)
    launched = trace.gpu_launch >= 0
    launch = trace.gpu_launch[launched]
    gpu_run = run_of_event[launch]
    gpu_cell = gpu_run[gpu_run >= 0] * names + trace.name_id[launch][gpu_run >= 0]
    gpu_ns = (trace.gpu_end_ns - trace.gpu_start_ns)[launched][gpu_run >= 0]
    cuda_ns = np.bincount(gpu_cell, weights=gpu_ns, minlength=runs * names).reshape(runs, names)
    seen = np.flatnonzero(calls.sum(axis=0))
    seen = seen[~np.isin(seen, marker_ids)]
    rows = [RepeatRow(trace.names[i], float(calls[:, i].mean()), cpu_ns[:, i].mean() / 1e3,
                      cpu_ns[:, i].min() / 1e3, cpu_ns[:, i].max() / 1e3, cuda_ns[:, i].mean() / 1e3)
            for i in seen]
    return sorted(rows, key=lambda row: row.cpu_mean_us, reverse=True)


def completed_runs(trace: Trace) -> int:
    """How many of the trace's runs completed: all of them, unless the magic noted that the cell
    raised (or was interrupted) in one."""
    windows = len(run_windows(trace)[1])
    noted = (trace.meta.get("repeat") or {}).get("completed")
    return min(noted, windows) if isinstance(noted, int) and noted >= 0 else windows


def _run_of(start_ns: np.ndarray, run_start: np.ndarray, run_end: np.ndarray) -> np.ndarray:
    """Index of the run window holding each start, -1 outside every window."""
    run = np.searchsorted(run_start, start_ns, side="right") - 1
    valid = run >= 0
    valid[valid] = start_ns[valid] < run_end[run[valid]]
    return np.where(valid, run, -1)


def repeat_table(trace: Trace, row_limit: int = 20, name_width: int = 55) -> str:
    """The repeat summary as text: CPU time per run (mean, min, max), calls and CUDA time per run."""
    runs, windows = completed_runs(trace), len(run_windows(trace)[1])
    requested = (trace.meta.get("repeat") or {}).get("runs", windows)
    if runs == 0:
        return f"No run of the {requested} completed, so there is no per-run summary."
    rows = repeat_summary(trace)
    shown = limit_rows(rows, row_limit)
    gpu = trace.has_gpu  # CPU only: no column of zeros
    headers = ["Name", "CPU mean", "CPU min", "CPU max", *["CUDA mean"] * gpu, "Calls/run"]
    cells = [[row.name, format_us(row.cpu_mean_us), format_us(row.cpu_min_us),
              format_us(row.cpu_max_us), *[format_us(row.cuda_mean_us)] * gpu,
              f"{row.calls_per_run:g}"] for row in shown]
    over = f"{runs} runs" if runs == requested else f"the {runs} of {requested} runs that completed"
    out = [f"Per run, over {over}:", *text_table(headers, cells, name_width)]
    if len(rows) > len(shown):
        out.append(f"({len(rows) - len(shown)} more rows; --row-limit -1 shows all)")
    return "\n".join(out)
