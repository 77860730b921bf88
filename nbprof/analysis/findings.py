"""One-line findings in plain words, from the step breakdown and the kernel summary: where the GPU
sat idle and why, which step stands out, what dominates GPU time; where memory was recorded, its
peak and holders and what was never freed (memory.py). numpy only."""

from __future__ import annotations

import numpy as np

from .averages import format_us, name_cell
from .callpaths import canonical_names
from .memory import memory_findings
from ..model import CUDA_INIT_NAME, Trace
from .steps import IDLE_KINDS, StepBreakdown, blocking_call_at, breakdown, cpu_time_in

NAME_WIDTH = 60
_RUNTIME_PREFIXES = ("cuda", "hip", "cu")
WORTH_SAYING_PCT = 5.0  # idle below this share of a step is not a finding


def findings(trace: Trace, result: StepBreakdown | None = None, kernels=None) -> list[str]:
    """Plain sentences about ``trace``, most telling first."""
    from .kernel_summary import kernel_summary
    from .tables import records

    result = breakdown(trace) if result is None else result
    c, windows = result.columns, result.windows
    out: list[str] = []
    simulated = trace.meta.get("simulated")
    gpu = "Simulated GPU" if simulated else "GPU"
    if simulated:
        out.append(f"Simulated: {simulated} ran the kernels on the CPU, each inside its launch; "
                   "the GPU times, busy and idle here are the simulator's, not a GPU's.")
    if not trace.has_gpu:
        out.append("CPU only: no GPU work was recorded, so the steps show CPU time only.")
    idle = c["idle_host_ns"] + c["idle_sync_ns"] + c["idle_launch_ns"]
    span = c["gpu_span_ns"]
    share = np.divide(100.0 * idle, span, out=np.zeros(len(span)), where=span > 0)
    # a step still open when profiling stopped ran on past the profile: not one to compare
    share[windows.unfinished] = 0.0
    if len(share) and share.max() >= WORTH_SAYING_PCT:
        out.append(_idle_finding(trace, result, int(np.argmax(share)), float(share.max()), gpu))
    finished = np.flatnonzero(~windows.unfinished)
    out.extend(_step_outliers([windows.labels[i] for i in finished.tolist()], finished,
                              c["wall_ns"][finished], windows.start_ns, c["end_ns"]))
    init = _cuda_init_finding(trace)
    if init:
        out.insert(0, init)  # it explains a slow first step, and any gap before the GPU work
    busy, total_span = int(c["gpu_busy_ns"].sum()), int(span.sum())
    if busy:
        out.append(f"{gpu} busy {100.0 * busy / max(total_span, 1):.0f}% of the steps' GPU time "
                   f"({format_us(busy / 1e3)} of {format_us(total_span / 1e3)}).")
        memcpy, comm = int(c["memcpy_ns"].sum()), int(c["communication_ns"].sum())
        if memcpy >= 0.1 * busy:
            out.append(f"Memcpy / memset take {100.0 * memcpy / busy:.0f}% of GPU busy time.")
        if comm:
            out.append(f"Communication not hidden under compute: {100.0 * comm / busy:.0f}% of GPU "
                       "busy time.")
        top = records(kernels if kernels is not None else kernel_summary(trace, limit=1, plain=True))
        if top:
            row = top[0]
            launched = f" from {name_cell(row['op'], NAME_WIDTH)}" if row["op"] else ""
            launches = "launch" if row["count"] == 1 else "launches"
            out.append(f"Top kernel: {name_cell(row['name'], NAME_WIDTH)} takes {row['share_pct']:.0f}% "
                       f"of kernel time ({row['count']} {launches}{launched}).")
    out.extend(memory_findings(trace))
    return out


def _cuda_init_finding(trace: Trace) -> str | None:
    """CUDA's initialisation inside the trace, where it took a share worth saying."""
    if CUDA_INIT_NAME not in trace.names or not len(trace):
        return None
    rows = np.flatnonzero(trace.name_id == trace.names.index(CUDA_INIT_NAME))
    spent = int((trace.end_ns[rows] - trace.start_ns[rows]).sum())
    span = int(trace.end_ns.max() - trace.start_ns.min())
    if not span or 100.0 * spent / span < WORTH_SAYING_PCT:
        return None
    return (f"CUDA initialization took {format_us(spent / 1e3)} ({100.0 * spent / span:.0f}% of "
            "the trace): torch creates the CUDA context on first use, once per process, so a "
            "later run will not pay it.")


def _idle_finding(trace: Trace, result: StepBreakdown, step: int, share: float, gpu: str) -> str:
    label = result.windows.labels[step]
    in_step = result.gap_step == step
    kinds = result.gap_kind[in_step]
    lengths = (result.gap_end_ns - result.gap_start_ns)[in_step]
    per_kind = np.bincount(kinds, weights=lengths, minlength=len(IDLE_KINDS))
    kind = int(np.argmax(per_kind))
    where = f"step {step + 1}" if label in (f"step {step + 1}", "whole trace") else \
        f"step {step + 1} ({label})"
    head = f"{gpu} idle {share:.0f}% of {where}"
    if IDLE_KINDS[kind] == "launch":
        gaps = int((kinds == kind).sum())
        return (f"{head}, mostly launch gaps: {gaps} short gaps of "
                f"{format_us(per_kind[kind] / max(gaps, 1) / 1e3)} on average between pieces of "
                "work; fewer, larger kernels (fusion, CUDA graphs) would close them.")
    chosen = in_step.copy()
    chosen[in_step] = kinds == kind
    gap_start, gap_end = result.gap_start_ns[chosen], result.gap_end_ns[chosen]
    if IDLE_KINDS[kind] == "sync":
        return (f"{head}, mostly waiting on a sync: the CPU blocked in "
                f"{_blocking_call(trace, gap_start, gap_end)} until the GPU drained, then queued "
                f"nothing for {format_us(per_kind[kind] / 1e3)}.")
    spent = _where_cpu_was(trace, gap_start, gap_end, result.windows.marker_rows)
    return f"{head}, mostly host-bound: the CPU spent it in {spent}."


def _blocking_call(trace: Trace, gap_start, gap_end) -> str:
    """The outermost blocking call (aten::item rather than the cudaStreamSynchronize inside it)
    that waited for the GPU to drain at the start of these gaps, by the idle time after it."""
    rows = blocking_call_at(trace, gap_start, outermost=True)
    waited = rows >= 0
    if not waited.any():
        return "a blocking call"
    idle = np.bincount(trace.name_id[rows[waited]], weights=(gap_end - gap_start)[waited])
    return name_cell(trace.names[int(np.argmax(idle))], NAME_WIDTH)


def _where_cpu_was(trace: Trace, gap_start, gap_end, marker_rows) -> str:
    """The op the CPU spent most of these gaps in (its own time, not its children's)."""
    if not len(gap_start):
        return "nothing recorded"
    lo, hi = int(gap_start.min()), int(gap_end.max())
    rows = np.flatnonzero(trace.start_ns[:np.searchsorted(trace.start_ns, hi)] < hi)
    rows = rows[trace.end_ns[rows] > lo]
    spent = cpu_time_in(trace, gap_start, gap_end, rows)[rows]
    # step markers and spans around everything hold the Python time between ops
    spans_all = (trace.parent[rows] < 0) & (trace.end_ns[rows] - trace.start_ns[rows] >= hi - lo)
    around = np.isin(rows, marker_rows) | spans_all
    canonical, names = canonical_names(trace.names)
    by_name = np.bincount(canonical[trace.name_id[rows[~around]]], weights=spent[~around],
                          minlength=len(names))
    total = float((gap_end - gap_start).sum())
    if not len(by_name) or by_name.max() < 0.2 * total:
        return "Python code between ops (no op ran for most of it)"
    top = int(np.argmax(by_name))
    text = f"{name_cell(names[top], NAME_WIDTH)} ({100.0 * by_name[top] / total:.0f}%)"
    if names[top].startswith(_RUNTIME_PREFIXES):  # a runtime call: name the op that made it
        event = rows[~around][np.argmax(np.where(canonical[trace.name_id[rows[~around]]] == top,
                                                 spent[~around], -1))]
        parent = int(trace.parent[event])
        if parent >= 0:
            text = f"{name_cell(trace.names[trace.name_id[parent]], NAME_WIDTH)} > {text}"
    return text


def _step_outliers(labels: list[str], steps: np.ndarray, wall_ns: np.ndarray, start_ns: np.ndarray,
                   end_ns: np.ndarray) -> list[str]:
    """The longest and the shortest of the finished steps (``steps``: their indices, ``labels``
    and ``wall_ns`` theirs), where they differ from the median by 1.5x, by the wall time the step
    list and the bars show. ``start_ns`` / ``end_ns``: every step's window."""
    if len(wall_ns) < 3:
        return []
    median = float(np.median(wall_ns))
    longest, shortest = int(np.argmax(wall_ns)), int(np.argmin(wall_ns))
    # the GPU runs behind: a step's window reaches into the next one's, which then waits for it
    queued_behind = bool((start_ns[1:] < end_ns[:-1]).any())
    out = []
    for index in (longest, shortest):
        ratio = wall_ns[index] / median if median else 1.0
        first = steps[index] == 0
        if ratio >= 1.5 or ratio <= 1 / 1.5:
            why = "."
            if first and index == longest:
                why = "; a warm-up or a one-off (compilation, allocation)?"
            elif first and queued_behind:
                why = ("; it found the GPU idle, while each later step's GPU work queued behind "
                       "the step before it (their windows overlap: the GPU sets the pace).")
            out.append(f"{labels[index]} took {format_us(wall_ns[index] / 1e3)}, {ratio:.2f}x the "
                       f"median step ({format_us(median / 1e3)}){why}")
    return out
