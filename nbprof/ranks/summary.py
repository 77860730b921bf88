"""The per-rank summary: wall time, CPU and GPU busy, time inside collectives, steps, and the
straggler named. :mod:`nbprof.formats.ranks_sql` computes the same figures from Parquet files with
DuckDB.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..analysis.averages import KERNEL_WORK
from ..model import Trace, unfinished_rows
from .op_names import COLLECTIVE, STEP
from .owners import event_ranks, gpu_ranks


def union_ns(keys: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> dict:
    """Per key, the length of the union of its intervals. For intervals sorted by start, each
    adds what reaches past every earlier one's end: the same sum the DuckDB summary computes
    with a running max, so both agree to the ns."""
    out = {}
    if not len(keys):
        return out
    order = np.lexsort((ends, starts, keys))
    keys, starts, ends = keys[order], starts[order], ends[order]
    bounds = np.flatnonzero(np.diff(keys)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(keys)]):
        s, e = starts[lo:hi], ends[lo:hi]
        before = np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(e)[:-1]))
        out[int(keys[lo])] = int(np.clip(e - np.maximum(s, before), 0, None).sum())
    return out


@dataclass(frozen=True)
class RankRow:
    """One rank's figures, in ns."""

    rank: int
    events: int
    gpu_intervals: int
    wall_ns: int  # first start to last end, CPU or GPU
    cpu_busy_ns: int  # per thread, the time some op ran; summed over threads
    gpu_busy_ns: int  # per stream, the time some GPU work ran; summed over streams
    collective_ns: int  # per thread (CPU collective ops) or per stream (GPU collective kernels)
    step_collective_ns: int = 0  # the part of collective_ns inside this rank's ProfilerSteps
    steps: tuple = ()  # durations of its ProfilerStep#N annotations, in time order
    # ProfilerSteps still open when profiling stopped (model/unfinished.py): their time ran to the
    # end of the profile, not of the step, so they are not in ``steps`` (as trace.steps() says)
    unfinished_steps: int = 0


@dataclass(frozen=True)
class RankSummary:
    """The per-rank figures as computed (the Ranks tab reads them); :meth:`frame` is the answer
    ``rank_summary()`` gives."""

    rows: list
    straggler: int | None
    reason: str = ""
    notes: list = field(default_factory=list)

    def row(self, rank: int) -> RankRow:
        return next(row for row in self.rows if row.rank == rank)

    def frame(self):
        """A DataFrame, a row per rank (times in ns, ``steps`` each rank's step durations);
        ``attrs``: ``straggler``, ``reason``, ``notes``. Printed, the text table."""
        from ..analysis.tables import make_table

        names = [name for name in RankRow.__dataclass_fields__]
        columns = {name: [list(getattr(row, name)) if name == "steps" else getattr(row, name)
                          for row in self.rows] for name in names}
        footer = ([f"Straggler: rank {self.straggler} ({self.reason})"]
                  if self.straggler is not None else []) + list(self.notes)
        return make_table("RankSummary", columns, rank_text, attrs={
            "straggler": self.straggler, "reason": self.reason, "notes": list(self.notes),
            "footer": "\n".join(footer)})


def steps_cell(timed: int, unfinished: int) -> str:
    """A rank's step count as the text table and the Ranks tab show it: "4 (+1 unfinished)"."""
    return f"{timed} (+{unfinished} unfinished)" if unfinished else str(timed)


def rank_text(rows: list[dict], row_limit: int = -1) -> str:
    from ..analysis.averages import format_us, limit_rows, text_table

    headers = ["Rank", "Wall", "CPU busy", "GPU busy", "In collectives", "Steps", "Step mean",
               "Step max"]
    cells = [[str(r["rank"]), *(format_us(r[name] / 1e3) for name in (
        "wall_ns", "cpu_busy_ns", "gpu_busy_ns", "collective_ns")),
              steps_cell(len(r["steps"]), r.get("unfinished_steps", 0)),
              format_us(float(np.mean(r["steps"])) / 1e3) if len(r["steps"]) else "-",
              format_us(max(r["steps"]) / 1e3) if len(r["steps"]) else "-"]
             for r in limit_rows(rows, row_limit)]
    return "\n".join(text_table(headers, cells, name_width=8))


def name_straggler(rows: list[RankRow]) -> tuple[int | None, str]:
    """The rank the others wait for: in a collective every rank waits for the last to arrive, so
    the straggler is the one that spends the least time inside them; without collectives, the
    one with the longest wall time."""
    if len(rows) < 2:
        return None, ""
    # Inside the steps when every rank has some: the waits before the first step (rendezvous,
    # DDP's parameter broadcast) measure when each process got going, not who is slow.
    in_steps = all(row.steps and row.step_collective_ns for row in rows)
    waited = (lambda r: r.step_collective_ns) if in_steps else (lambda r: r.collective_ns)
    if any(waited(row) for row in rows):
        row = min(rows, key=lambda r: (waited(r), r.rank))
        others = np.median([waited(r) for r in rows if r is not row])
        where = "collectives during its steps" if in_steps else "collectives"
        return row.rank, (f"least time inside {where}: {waited(row) / 1e6:.3f} ms "
                          f"against a median of {others / 1e6:.3f} ms for the others")
    row = max(rows, key=lambda r: (r.wall_ns, -r.rank))
    return row.rank, f"longest wall time ({row.wall_ns / 1e6:.3f} ms) and no collectives seen"


def _starts_inside(starts: np.ndarray, span_starts: np.ndarray, span_ends: np.ndarray) -> np.ndarray:
    """Which of ``starts`` fall inside one of the spans (spans on one thread: they do not overlap,
    so the last span starting before a point is the only one that can hold it)."""
    if not len(span_starts):
        return np.zeros(len(starts), bool)
    order = np.argsort(span_starts, kind="stable")
    span_starts, span_ends = span_starts[order], span_ends[order]
    at = np.searchsorted(span_starts, starts, side="right") - 1
    return (at >= 0) & (starts < span_ends[np.maximum(at, 0)])


def rank_summary(trace: Trace):
    """Per rank: wall time, CPU busy, GPU busy, time inside collectives, ProfilerStep times (a
    DataFrame, see :meth:`RankSummary.frame`); and the straggler named (``attrs``). A
    single-rank trace gives one row."""
    return summarise_ranks(trace).frame()


def summarise_ranks(trace: Trace) -> RankSummary:
    """:func:`rank_summary`'s figures, as computed."""
    cpu_rank, gpu_rank = event_ranks(trace), gpu_ranks(trace)
    collective = np.array([bool(COLLECTIVE.search(n)) for n in trace.names] or [False])
    step = np.array([bool(STEP.match(n)) for n in trace.names] or [False])
    stream_keys = trace.gpu_stream_keys()
    # Lanes as one int64 key: rank in the high bits, thread (or device/stream key) below.
    cpu_key = (cpu_rank.astype(np.int64) << 40) | trace.thread.astype(np.int64)
    gpu_key = (gpu_rank.astype(np.int64) << 40) | (stream_keys & ((1 << 40) - 1))
    is_kernel_work = np.isin(trace.gpu_kind, KERNEL_WORK)
    rows = []
    for rank in sorted(set(cpu_rank.tolist()) | set(gpu_rank.tolist())):
        cpu = cpu_rank == rank
        gpu = gpu_rank == rank
        starts = np.concatenate([trace.start_ns[cpu], trace.gpu_start_ns[gpu]])
        ends = np.concatenate([trace.end_ns[cpu], trace.gpu_end_ns[gpu]])
        cpu_coll = cpu & collective[trace.name_id]
        gpu_coll = gpu & collective[trace.gpu_name_id]
        steps = cpu & step[trace.name_id]
        open_steps = np.zeros(len(trace), bool)
        open_steps[unfinished_rows(trace)] = True
        open_steps &= steps
        timed = steps & ~open_steps
        # GPU busy from kernels, memcpys and memsets where the rank has them: its per-op
        # CUDA-event intervals beside them hold the same work again, with queueing (steps.py's rule)
        gpu_work = gpu & is_kernel_work
        if not gpu_work.any():
            gpu_work = gpu
        if gpu_coll.any():
            coll_key, coll_start, coll_end = (gpu_key[gpu_coll], trace.gpu_start_ns[gpu_coll],
                                              trace.gpu_end_ns[gpu_coll])
        else:
            coll_key, coll_start, coll_end = (cpu_key[cpu_coll], trace.start_ns[cpu_coll],
                                              trace.end_ns[cpu_coll])
        coll = union_ns(coll_key, coll_start, coll_end)
        inside = _starts_inside(coll_start, trace.start_ns[steps], trace.end_ns[steps])
        step_coll = union_ns(coll_key[inside], coll_start[inside], coll_end[inside])
        rows.append(RankRow(
            rank=int(rank), events=int(cpu.sum()), gpu_intervals=int(gpu.sum()),
            wall_ns=int(ends.max() - starts.min()) if len(starts) else 0,
            cpu_busy_ns=sum(union_ns(cpu_key[cpu], trace.start_ns[cpu], trace.end_ns[cpu]).values()),
            gpu_busy_ns=sum(union_ns(gpu_key[gpu_work], trace.gpu_start_ns[gpu_work],
                                     trace.gpu_end_ns[gpu_work]).values()),
            collective_ns=sum(coll.values()), step_collective_ns=sum(step_coll.values()),
            steps=tuple((trace.end_ns[timed] - trace.start_ns[timed]).tolist()),
            unfinished_steps=int(open_steps.sum())))
    straggler, reason = name_straggler(rows)
    return RankSummary(rows, straggler, reason)
