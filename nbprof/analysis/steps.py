"""``trace.steps()``: the steps of a training loop and where each one's time went.

Steps come from, in this order: ``ProfilerStep#N`` annotations (torch.profiler's ``prof.step()``);
the runs of ``%%cudaprof --repeat N`` (marker ops named by :func:`run_marker`); a repeating pattern
of top-level ops on the busiest thread (``Optimizer.step`` boundaries, else the shortest period of
the top-level op sequence); else the whole trace is one step.

A step still open when profiling stopped (its ``ProfilerStep#N``, or the last op of a pattern step,
has no end in its file: model/unfinished.py) is marked ``unfinished``: its times run only to the
end of the profile, so it is shown as such and left out of what compares steps (the findings'
outlier and idle steps, nbprof.diff's step k against step k).

Per step: wall time (the step's window: from its CPU start to the end of its CPU part or of the
GPU work it launched, whichever is later, as HTA does, so both parts lie inside it; the GPU runs
behind the CPU, so the windows of a GPU-bound loop overlap), the CPU part's own length, CPU busy (the union of every thread's ops in it), GPU
busy (the union of the GPU work its ops launched, per device, never the sum), that busy time split
into compute / communication / memcpy, and the GPU's idle time split by why:

* **sync**: a blocking CPU call (``cudaDeviceSynchronize``, ``aten::item``, a synchronous memcpy...)
  was running when the GPU drained: it began before the gap and lasted until it (the CPU waited
  for the queue to drain, so the GPU sat idle until the CPU queued work again). A quick call that
  merely ends near, or runs inside, a gap did not wait for anything. A simulator's trace (numba's
  ``NUMBA_ENABLE_CUDASIM``, ``meta["simulated"]``) has none: its kernels run inside their launch;
* **launch**: a gap shorter than ``launch_gap_us`` between two pieces of work: launch latency
  (the CPU keeps up; each launch costs this much);
* **host**: any other gap: nothing was queued because the CPU was busy elsewhere (Python, ops
  that launch nothing): the step is host-bound there.

GPU idle is counted in each step's GPU window, a part of its window that no other step's GPU
window shares: from when its CPU part began and the work of the steps before it was done, to where
the next step's opens (at most to the step's end). So busy + idle never exceed the step's wall
time on one GPU; the rest of the window (``gpu_other_us``) the GPU spent on the work of the steps
before it. With several GPUs busy and idle add up over them (GPU time). numpy only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .averages import gpu_work_kinds
from ..model import KIND_MEMCPY, KIND_MEMSET, NO_ID, Trace, unfinished_rows
from ..model.intervals import covered_ns, gaps_in_windows, merge_by_group, union_ns_by_group
from .tables import make_table

# -- the --repeat run markers (the magic writes them, the steps and the repeat summary read them) --

MARKER_PREFIX = "cudaprof run "
_MARKER = re.compile(re.escape(MARKER_PREFIX) + r"(\d+)/(\d+)$")
_PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_OPTIMIZER_STEP = re.compile(r"^Optimizer\.step")
# CPU calls that block until the GPU has drained its queue (or a stream of it).
SYNC_CALLS = re.compile(r"(?i)synchroni[sz]e|^(cuda|hip)Memcpy(2D|3D)?(Peer)?$|"
                        r"^aten::(item|_local_scalar_dense)$")
COMMUNICATION = re.compile(r"(?i)nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|"
                           r"sendrecv|broadcast|c10d::")

IDLE_KINDS = ("host", "sync", "launch")
SOURCES = ("ProfilerStep", "repeat", "pattern", "whole trace")
DEFAULT_LAUNCH_GAP_US = 10.0


def run_marker(index: int, runs: int) -> str:
    """The name of the marker op around run ``index`` (0-based) of ``runs``."""
    return f"{MARKER_PREFIX}{index + 1}/{runs}"


def run_windows(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Marker name ids, start and end (ns) of each ``--repeat`` run, in time order."""
    rows = _named_rows(trace, _MARKER)
    return trace.name_id[rows], trace.start_ns[rows], trace.end_ns[rows]


def _named_rows(trace: Trace, pattern: re.Pattern) -> np.ndarray:
    ids = [i for i, name in enumerate(trace.names) if pattern.match(name)]
    rows = np.flatnonzero(np.isin(trace.name_id, ids))
    if len(rows):  # a marker nested in another of its kind (a duplicated annotation) is not a step
        nested = np.isin(trace.parent[rows], rows)
        rows = rows[~nested]
    return rows


# -- finding the steps ---------------------------------------------------------------------------

@dataclass(frozen=True)
class StepWindows:
    """The steps of a trace: label, CPU window (ns) and where they came from (one of SOURCES)."""

    labels: list[str]
    start_ns: np.ndarray
    end_ns: np.ndarray
    source: str
    marker_rows: np.ndarray  # the events that define the steps (left out of CPU busy)
    unfinished: np.ndarray | None = None  # per step: still open when profiling stopped

    def __post_init__(self):
        if self.unfinished is None:
            object.__setattr__(self, "unfinished", np.zeros(len(self.labels), bool))

    def __len__(self) -> int:
        return len(self.labels)

    def of_times(self, times_ns: np.ndarray) -> np.ndarray:
        """The step holding each time, -1 outside every step."""
        index = np.searchsorted(self.start_ns, times_ns, side="right") - 1
        inside = index >= 0
        inside[inside] = np.asarray(times_ns)[inside] < self.end_ns[index[inside]]
        return np.where(inside, index, -1)


def find_steps(trace: Trace) -> StepWindows:
    """The steps of ``trace`` from the first source that has them (see the module's docstring)."""
    for pattern, source in ((_PROFILER_STEP, "ProfilerStep"), (_MARKER, "repeat")):
        marker = _named_rows(trace, pattern)
        name_ids, start, end = trace.name_id[marker], trace.start_ns[marker], trace.end_ns[marker]
        if len(start):
            rows = np.flatnonzero(np.isin(trace.name_id, np.unique(name_ids)))
            rows = rows[np.isin(trace.start_ns[rows], start)]
            # The ranks of one job (a merged trace) each mark step N at about the same time: where
            # windows of one label overlap they are one step, from the first start to the last end.
            unique_ids, which = np.unique(name_ids, return_inverse=True)
            label_of, first, last = merge_by_group(which.reshape(-1), start, end)
            order = np.argsort(first, kind="stable")
            label_of, first, last = label_of[order], first[order], last[order]
            # a merged step is unfinished where one of its markers (a rank's) is
            still_open = np.isin(marker, unfinished_rows(trace))
            open_label, open_start = which.reshape(-1)[still_open], start[still_open]
            unfinished = np.zeros(len(first), bool)
            for label, at in zip(open_label.tolist(), open_start.tolist()):
                unfinished |= (label_of == label) & (first <= at) & (at < last)
            labels = [trace.names[i] for i in unique_ids[label_of]]
            if source == "repeat":
                labels = [f"run {label[len(MARKER_PREFIX):]}" for label in labels]
            return StepWindows(labels, first, last, source, rows, unfinished)
    pattern = _pattern_steps(trace)
    if pattern is not None:
        return pattern
    if not len(trace) and not trace.has_gpu:
        return StepWindows([], np.zeros(0, np.int64), np.zeros(0, np.int64), "whole trace",
                           np.zeros(0, np.int64))
    starts = [a.min() for a in (trace.start_ns, trace.gpu_start_ns) if len(a)]
    ends = [a.max() for a in (trace.end_ns, trace.gpu_end_ns) if len(a)]
    return StepWindows(["whole trace"], np.array([min(starts)], np.int64),
                       np.array([max(ends)], np.int64), "whole trace", np.zeros(0, np.int64))


def _pattern_steps(trace: Trace) -> StepWindows | None:
    """Steps from the top-level ops of the busiest thread: each ends with an ``Optimizer.step``,
    else the top-level sequence of op names repeats with some period (the shortest one)."""
    top = np.flatnonzero(trace.parent == NO_ID)
    if len(top) < 2:
        return None
    busy = np.bincount(trace.thread[top], weights=(trace.end_ns - trace.start_ns)[top])
    top = top[trace.thread[top] == int(np.argmax(busy))]
    names = trace.name_id[top]
    optimizer_ids = [i for i, name in enumerate(trace.names) if _OPTIMIZER_STEP.match(name)]
    ends = np.flatnonzero(np.isin(names, optimizer_ids))
    if len(ends) >= 2:
        # step k runs from the op after optimizer step k-1 to the end of optimizer step k
        firsts = np.concatenate([[0], ends[:-1] + 1])
        return _steps_of(trace, top, firsts, ends)
    period = _shortest_period(names)
    if period is None:
        return None
    copies = len(names) // period
    firsts = np.arange(copies) * period
    return _steps_of(trace, top, firsts, firsts + period - 1)


def _shortest_period(sequence: np.ndarray, tries: int = 64) -> int | None:
    """The shortest p such that the sequence is at least two copies of its first p items (a
    shorter, unfinished copy may follow); None if there is none. Candidates are where the first
    item comes again."""
    n = len(sequence)
    for period in np.flatnonzero(sequence == sequence[0])[1:tries + 1].tolist():
        if 2 * period > n:
            break
        if np.array_equal(sequence[period:], sequence[:n - period]):
            return period
    return None


def _steps_of(trace: Trace, top: np.ndarray, firsts: np.ndarray, lasts: np.ndarray) -> StepWindows:
    start = trace.start_ns[top[firsts]]
    end = trace.end_ns[top[lasts]]
    return StepWindows([f"step {k + 1}" for k in range(len(start))], start.astype(np.int64),
                       end.astype(np.int64), "pattern", np.zeros(0, np.int64),
                       np.isin(top[lasts], unfinished_rows(trace)))


# -- where each step's time went --------------------------------------------------------------

def _holds_step(trace: Trace, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per CPU event: does it hold a whole step (and then is a span around steps, as Kineto's
    trace-wide slice)? It does if it starts at or before the first step starting at or after it
    and ends after that step's end; an op that is exactly one step (a pattern of one op) still
    counts. A function of its own so its per-event temporaries (5 x 8 B an event) are freed
    before breakdown's unions allocate theirs: at 100M events the widget's peak memory is set here."""
    holds = np.zeros(len(trace), bool)
    if len(start):
        covering = np.searchsorted(start, trace.start_ns, side="left")
        has = covering < len(start)
        covering = covering[has]
        event_end = trace.end_ns[has]
        holds[has] = (event_end >= end[covering]) & (
            (trace.start_ns[has] < start[covering]) | (event_end > end[covering]))
    return holds


def _cpu_busy(trace: Trace, windows: StepWindows) -> np.ndarray:
    """Per step, CPU busy: the union, over threads, of the outermost ops in the step (their
    children lie inside them); the step markers and spans that hold the whole step do not count,
    nor do async slices (a request in flight is no thread's work; formats/chrome/async_slices)."""
    start, end = windows.start_ns, windows.end_ns
    excluded = trace.async_thread_mask()[trace.thread]
    excluded[windows.marker_rows] = True
    step_of_event = windows.of_times(trace.start_ns)
    excluded |= _holds_step(trace, start, end)
    parent = trace.parent
    outermost = ~excluded & ((parent == NO_ID) | excluded[np.maximum(parent, 0)])
    rows = np.flatnonzero(outermost & (step_of_event >= 0))
    return union_ns_by_group(step_of_event[rows], trace.start_ns[rows],
                             np.minimum(trace.end_ns[rows], end[step_of_event[rows]]), len(windows))


def _launched_at(trace: Trace, work: np.ndarray) -> np.ndarray:
    """Per GPU interval in ``work``: when its launching op started (else when it started)."""
    launch = trace.gpu_launch[work]
    return np.where(launch >= 0, trace.start_ns[np.maximum(launch, 0)] if len(trace) else 0,
                    trace.gpu_start_ns[work])


@dataclass(frozen=True)
class StepBreakdown:
    """Per step columns (ns) and the GPU's idle gaps with their kind (index into IDLE_KINDS)."""

    windows: StepWindows
    columns: dict
    gap_step: np.ndarray
    gap_start_ns: np.ndarray
    gap_end_ns: np.ndarray
    gap_kind: np.ndarray


def breakdown(trace: Trace, windows: StepWindows | None = None,
              launch_gap_us: float = DEFAULT_LAUNCH_GAP_US) -> StepBreakdown:
    windows = find_steps(trace) if windows is None else windows
    steps = len(windows)
    start, end = windows.start_ns, windows.end_ns

    cpu_busy = _cpu_busy(trace, windows)

    # GPU work belongs to the step whose op launched it (else to the step it starts in). Kernels
    # measure it where the trace has them: an op's CUDA-event interval beside them also holds the
    # queueing and gaps between its kernels.
    kind = trace.gpu_kind
    work = np.flatnonzero(np.isin(kind, gpu_work_kinds(trace)))
    gpu_step = windows.of_times(_launched_at(trace, work))
    work, gpu_step = work[gpu_step >= 0], gpu_step[gpu_step >= 0]
    gpu_start, gpu_end = trace.gpu_start_ns[work], trace.gpu_end_ns[work]
    step_end = end.copy()  # the step's window ends with its CPU part or its GPU work, later one
    np.maximum.at(step_end, gpu_step, gpu_end)
    gpu_start = np.maximum(gpu_start, start[gpu_step])  # a clock skew must not reach before the step
    devices = np.unique(trace.gpu_device[work]) if len(work) else np.zeros(0, np.int16)
    device_index = np.searchsorted(devices, trace.gpu_device[work])
    group = gpu_step * max(len(devices), 1) + device_index  # per (step, device)
    del gpu_step
    groups = steps * max(len(devices), 1)

    comm_names = np.array([bool(COMMUNICATION.search(name)) for name in trace.names] or [False])
    is_comm = comm_names[trace.gpu_name_id[work]]
    is_memory = np.isin(kind[work], (KIND_MEMCPY, KIND_MEMSET))
    is_compute = ~is_comm & ~is_memory

    def union(mask):
        if mask.all():  # no copies of every interval (the peak memory of a large trace's widget)
            per_group = union_ns_by_group(group, gpu_start, gpu_end, groups)
        else:
            per_group = union_ns_by_group(group[mask], gpu_start[mask], gpu_end[mask], groups)
        return per_group.reshape(steps, -1).sum(axis=1) if steps else per_group

    # Where classes overlap (a copy under a kernel on another stream) the time counts once:
    # compute first, then communication, then memcpy, so the three add up to GPU busy.
    compute = union(is_compute)
    compute_or_comm = union(is_compute | is_comm)
    busy = union(np.ones(len(work), bool))

    # Idle gaps: the GPU's gaps (no work of any step on the device), cut into the steps' GPU
    # windows. Work runs behind the CPU, so step k's window opens when both its CPU step has begun
    # and the work of the steps before it has ended, and closes where step k+1's opens.
    window_start, window_end = _gpu_windows(start, step_end)
    if len(devices) and steps:
        block_device, block_start, block_end = merge_by_group(device_index, gpu_start, gpu_end)
        gap_device, gap_start, gap_end = gaps_in_windows(
            np.full(len(devices), window_start[0]), np.full(len(devices), window_end[-1]),
            block_device, block_start, block_end)
        gap_step, gap_start, gap_end = _cut(gap_start, gap_end, window_start, window_end)
    else:  # nothing ran on a GPU: no GPU idle either (a CPU-only trace)
        gap_step = gap_start = gap_end = np.zeros(0, np.int64)
    gpu_span = (window_end - window_start) * len(devices)
    gap_kind = _idle_kinds(trace, gap_start, gap_end, launch_gap_us)
    idle = {name: np.bincount(gap_step[gap_kind == index], weights=(gap_end - gap_start)[gap_kind == index],
                              minlength=steps)[:steps].astype(np.int64)
            for index, name in enumerate(IDLE_KINDS)}
    columns = {
        "end_ns": step_end, "wall_ns": step_end - start, "cpu_wall_ns": end - start,
        "cpu_busy_ns": cpu_busy, "gpu_busy_ns": busy,
        "compute_ns": compute, "communication_ns": compute_or_comm - compute,
        "memcpy_ns": busy - compute_or_comm, "gpu_span_ns": gpu_span,
        # the step's window outside its GPU window: the GPU ran the steps before it (or nothing)
        "gpu_other_ns": np.maximum((step_end - start) * len(devices) - gpu_span, 0),
        **{f"idle_{name}_ns": idle[name] for name in IDLE_KINDS},
    }
    return StepBreakdown(windows, columns, gap_step, gap_start, gap_end, gap_kind)


def _gpu_windows(start: np.ndarray, step_end: np.ndarray):
    """Per step, the span of GPU time it owns: from when its CPU part began and the work of every
    step before it was done, to where the next step's opens, never past the step's own end (so
    that busy + idle fit in its wall time)."""
    if not len(start):
        return start, start
    done_before = np.concatenate([[start[0]], np.maximum.accumulate(step_end)[:-1]])
    window_start = np.maximum(np.maximum.accumulate(start), done_before)
    window_end = np.minimum(np.append(window_start[1:], step_end[-1]), step_end)
    return window_start, np.maximum(window_end, window_start)


def _cut(gap_start, gap_end, window_start, window_end):
    """Gaps cut at the windows' bounds: (window, start, end) of each piece inside a window."""
    first = np.searchsorted(window_start, gap_start, side="right") - 1
    last = np.searchsorted(window_start, gap_end, side="left") - 1
    pieces = np.maximum(last - first + 1, 0)
    gap = np.repeat(np.arange(len(gap_start)), pieces)
    window = np.repeat(first, pieces) + (np.arange(len(gap)) - np.repeat(np.cumsum(pieces) - pieces, pieces))
    valid = window >= 0
    gap, window = gap[valid], window[valid]
    piece_start = np.maximum(gap_start[gap], window_start[window])
    piece_end = np.minimum(gap_end[gap], window_end[window])
    real = piece_end > piece_start
    return window[real], piece_start[real], piece_end[real]


def _idle_kinds(trace: Trace, gap_start, gap_end, launch_gap_us: float) -> np.ndarray:
    """Per idle gap, its kind (index into IDLE_KINDS)."""
    kinds = np.zeros(len(gap_start), np.int64)  # host
    kinds[gap_end - gap_start < launch_gap_us * 1e3] = IDLE_KINDS.index("launch")
    kinds[blocking_call_at(trace, gap_start, launch_gap_us) >= 0] = IDLE_KINDS.index("sync")
    return kinds


def blocking_call_at(trace: Trace, gap_start, slack_us: float = DEFAULT_LAUNCH_GAP_US,
                     outermost: bool = False) -> np.ndarray:
    """Per gap, the blocking call (a row) that waited for the GPU to drain at its start: one that
    began before the gap and ran until it (to within ``slack_us``: the CPU and GPU clocks are
    aligned only that well), the longest-running such call; -1 where none did. ``outermost``:
    aten::item rather than the cudaStreamSynchronize inside it. None on a simulated trace."""
    gap_start = np.asarray(gap_start, np.int64)
    found = np.full(len(gap_start), -1, np.int64)
    if trace.meta.get("simulated"):
        return found
    sync_ids = [i for i, name in enumerate(trace.names) if SYNC_CALLS.search(name)]
    rows = np.flatnonzero(np.isin(trace.name_id, sync_ids))
    if outermost:
        rows = rows[~np.isin(trace.parent[rows], rows)]
    if not len(rows) or not len(gap_start):
        return found
    rows = rows[np.argsort(trace.start_ns[rows], kind="stable")]
    ends = trace.end_ns[rows]
    reach = np.maximum.accumulate(ends)  # per row: the latest end of a call begun by then
    reacher = np.maximum.accumulate(np.where(ends == reach, np.arange(len(rows)), 0))
    before = np.searchsorted(trace.start_ns[rows], gap_start, side="left") - 1
    has = before >= 0
    last = np.maximum(before, 0)
    covers = has & (reach[last] >= gap_start - int(slack_us * 1e3))
    found[covers] = rows[reacher[last[covers]]]
    return found


def cpu_time_in(trace: Trace, gap_start, gap_end, rows: np.ndarray | None = None) -> np.ndarray:
    """Per event (of ``rows``, default all), its self time inside the gaps: what the CPU was
    doing while the GPU sat idle. The gaps must be disjoint and sorted."""
    rows = np.arange(len(trace)) if rows is None else rows
    inside = covered_ns(gap_start, gap_end, trace.start_ns[rows], trace.end_ns[rows])
    total = np.zeros(len(trace), np.int64)
    total[rows] = inside
    children = rows[trace.parent[rows] >= 0]
    # self = inclusive minus the children's inclusive (as self time is everywhere)
    return total - np.bincount(trace.parent[children], weights=total[children],
                               minlength=len(trace))[:len(trace)].astype(np.int64)


# -- the table ------------------------------------------------------------------------------

STEP_COLUMNS = ("wall", "cpu_wall", "cpu_busy", "gpu_busy", "compute", "communication", "memcpy", "gpu_idle",
                "idle_host", "idle_sync", "idle_launch")


def steps(trace: Trace, launch_gap_us: float = DEFAULT_LAUNCH_GAP_US):
    """The step table of ``trace``: a DataFrame (``.table()``, and printing it, give it as text).
    Times in microseconds; ``start_ns`` / ``end_ns`` are the step's window (its CPU part and the
    GPU work it launched), ``cpu_end_ns`` where its CPU part ended; ``unfinished``: the step was
    still open when profiling stopped, so its times end with the profile, not with the step."""
    return step_table(breakdown(trace, launch_gap_us=launch_gap_us))


def step_table(result: StepBreakdown, plain: bool = False):
    windows, c = result.windows, result.columns
    idle = c["idle_host_ns"] + c["idle_sync_ns"] + c["idle_launch_ns"]
    span = c["gpu_span_ns"]
    columns = {
        "step": list(windows.labels), "source": [windows.source] * len(windows),
        "unfinished": windows.unfinished.tolist(),
        "start_ns": windows.start_ns, "end_ns": c["end_ns"], "cpu_end_ns": windows.end_ns,
        "wall_us": c["wall_ns"] / 1e3, "cpu_wall_us": c["cpu_wall_ns"] / 1e3,
        "cpu_busy_us": c["cpu_busy_ns"] / 1e3,
        "gpu_busy_us": c["gpu_busy_ns"] / 1e3, "compute_us": c["compute_ns"] / 1e3,
        "communication_us": c["communication_ns"] / 1e3, "memcpy_us": c["memcpy_ns"] / 1e3,
        "gpu_idle_us": idle / 1e3, "gpu_other_us": c["gpu_other_ns"] / 1e3, "idle_host_us": c["idle_host_ns"] / 1e3,
        "idle_sync_us": c["idle_sync_ns"] / 1e3, "idle_launch_us": c["idle_launch_ns"] / 1e3,
        "gpu_idle_pct": np.divide(100.0 * idle, span, out=np.zeros(len(span)), where=span > 0),
    }
    return make_table("Steps", columns, steps_text, plain)


def steps_text(rows: list[dict], row_limit: int = -1) -> str:
    from .averages import format_us, limit_rows, text_table

    headers = ["Step", "Wall", "CPU part", "CPU busy", "GPU busy", "Compute", "Comm", "Memcpy", "GPU idle",
               "host", "sync", "launch"]
    cells = [[step_name(row), *(format_us(row[f"{name}_us"]) for name in STEP_COLUMNS)]
             for row in limit_rows(rows, row_limit)]
    source = rows[0]["source"] if rows else "none"
    open_steps = [row["step"] for row in rows if row.get("unfinished")]
    said = [f"{', '.join(open_steps)} {'is' if len(open_steps) == 1 else 'are'} unfinished: still "
            "open when profiling stopped, so its times run to the end of the profile; left out of "
            "the findings and of nbprof.diff's step comparison"] if open_steps else []
    return "\n".join([f"{len(rows)} steps (from {source}); wall: from the step's CPU start to the end "
                      "of its CPU part or of the GPU work it launched; GPU idle split by why: "
                      "host-bound, waiting on a sync, launch gaps", *said, *text_table(headers, cells, 30)])


def step_name(row: dict) -> str:
    """A step's label as the list, the bars and the text show it: marked when it is unfinished."""
    return f"{row['step']} (unfinished)" if row.get("unfinished") else row["step"]
