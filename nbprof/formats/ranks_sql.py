"""The per-rank summary of a job too big for one machine's memory: DuckDB over per-rank Parquet
files (``trace.to_parquet`` / ``nbprof convert``), one file at a time, so memory holds one rank's
columns at most (DuckDB spills past ``memory_limit``) and time grows with the number of ranks.

It computes exactly what :func:`nbprof.ranks.rank_summary` does in memory (a test holds them
equal): the union of each lane's intervals as the sum of what each interval reaches past the
running max of the ends before it.
"""

from __future__ import annotations

import pathlib

from ..analysis.averages import KERNEL_WORK
from ..ranks import (COLLECTIVE_PATTERN, STEP_PATTERN, RankRow, RankSummary, name_straggler,
                     rank_of, summarise_ranks, trace_paths)

_KERNEL_WORK = ", ".join(str(int(kind)) for kind in KERNEL_WORK)
_SUMMARY = f"""
WITH raw AS (SELECT * FROM read_parquet($path)),
kernels AS (  -- ranks with kernels, memcpys or memsets: their GPU busy comes from those alone
    SELECT rank, bool_or(gpu AND gpu_kind IN ({_KERNEL_WORK})) AS has_kernels FROM raw GROUP BY rank),
t AS (
    SELECT gpu, rank, start_ns, end_ns, name,
           CASE WHEN gpu THEN (CAST(device AS BIGINT) << 32) | (CAST(stream AS BIGINT) & 4294967295)
                ELSE CAST(thread AS BIGINT) END AS lane,
           regexp_matches(name, '{COLLECTIVE_PATTERN}', 'i') AS collective,
           NOT gpu OR NOT coalesce(has_kernels, false) OR gpu_kind IN ({_KERNEL_WORK}) AS work
    FROM raw JOIN kernels USING (rank)),
busy AS (
    SELECT *, max(end_ns) OVER (PARTITION BY rank, gpu, work, lane ORDER BY start_ns, end_ns
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
    FROM t),
coll AS (
    SELECT *, max(end_ns) OVER (PARTITION BY rank, gpu, lane ORDER BY start_ns, end_ns
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
    FROM t WHERE collective),
per_rank AS (
    SELECT rank, count(*) FILTER (WHERE NOT gpu) AS events, count(*) FILTER (WHERE gpu) AS gpus,
           max(end_ns) - min(start_ns) AS wall_ns,
           sum(greatest(end_ns - greatest(start_ns, coalesce(before, start_ns)), 0))
               FILTER (WHERE NOT gpu) AS cpu_busy,
           sum(greatest(end_ns - greatest(start_ns, coalesce(before, start_ns)), 0))
               FILTER (WHERE gpu AND work) AS gpu_busy
    FROM busy GROUP BY rank),
per_rank_coll AS (
    SELECT rank, count(*) FILTER (WHERE gpu) AS gpu_collectives,
           sum(greatest(end_ns - greatest(start_ns, coalesce(before, start_ns)), 0))
               FILTER (WHERE gpu) AS gpu_coll,
           sum(greatest(end_ns - greatest(start_ns, coalesce(before, start_ns)), 0))
               FILTER (WHERE NOT gpu) AS cpu_coll
    FROM coll GROUP BY rank),
steps AS (
    SELECT rank, start_ns AS step_start, end_ns AS step_end FROM t
    WHERE NOT gpu AND regexp_matches(name, $step)),
coll_in_steps AS (  -- collectives starting inside one of their rank's steps (ranks/summary.py's rule)
    SELECT t.* FROM t ASOF JOIN steps s ON t.rank = s.rank AND t.start_ns >= s.step_start
    WHERE t.collective AND t.start_ns < s.step_end),
coll_in_steps_busy AS (
    SELECT *, max(end_ns) OVER (PARTITION BY rank, gpu, lane ORDER BY start_ns, end_ns
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
    FROM coll_in_steps),
per_rank_step_coll AS (
    SELECT rank,
           sum(greatest(end_ns - greatest(start_ns, coalesce(before, start_ns)), 0))
               FILTER (WHERE gpu) AS gpu_coll,
           sum(greatest(end_ns - greatest(start_ns, coalesce(before, start_ns)), 0))
               FILTER (WHERE NOT gpu) AS cpu_coll
    FROM coll_in_steps_busy GROUP BY rank)
SELECT p.rank, p.events, p.gpus, p.wall_ns, p.cpu_busy, p.gpu_busy, c.gpu_collectives,
       c.gpu_coll, c.cpu_coll, sc.gpu_coll, sc.cpu_coll
FROM per_rank p LEFT JOIN per_rank_coll c USING (rank) LEFT JOIN per_rank_step_coll sc USING (rank)
ORDER BY p.rank
"""

# A step still open when profiling stopped (its args carry the unfinished mark) is counted, not timed.
_STEPS = r"""
WITH s AS (SELECT rank, start_ns, end_ns, coalesce(json_exists(args, '$.unfinished'), false) AS open
           FROM read_parquet($path) WHERE NOT gpu AND regexp_matches(name, $step))
SELECT rank, list(end_ns - start_ns ORDER BY start_ns, end_ns - start_ns DESC) FILTER (WHERE NOT open),
       count(*) FILTER (WHERE open)
FROM s GROUP BY rank
"""


def _connect(memory_limit: str, threads: int | None):
    from .parquet import require

    duckdb = require("duckdb")

    connection = duckdb.connect(":memory:")
    connection.execute(f"SET memory_limit = '{memory_limit}'")
    if threads:
        connection.execute(f"SET threads = {int(threads)}")
    connection.execute("SET preserve_insertion_order = false")  # lets big sorts spill
    return connection


def file_rows(connection, path) -> list[RankRow]:
    """The summary rows of the ranks in one Parquet file."""
    steps = {rank: (durations, unfinished) for rank, durations, unfinished in connection.execute(
        _STEPS, {"path": str(path), "step": STEP_PATTERN}).fetchall()}
    rows = []
    summary = connection.execute(_SUMMARY, {"path": str(path), "step": STEP_PATTERN}).fetchall()
    for (rank, events, gpus, wall, cpu_busy, gpu_busy, gpu_collectives, gpu_coll,
         cpu_coll, step_gpu_coll, step_cpu_coll) in summary:
        durations, unfinished = steps.get(rank, ((), 0))
        rows.append(RankRow(
            rank=int(rank), events=int(events), gpu_intervals=int(gpus), wall_ns=int(wall or 0),
            cpu_busy_ns=int(cpu_busy or 0), gpu_busy_ns=int(gpu_busy or 0),
            collective_ns=int((gpu_coll if gpu_collectives else cpu_coll) or 0),
            step_collective_ns=int((step_gpu_coll if gpu_collectives else step_cpu_coll) or 0),
            steps=tuple(int(step) for step in durations or ()),
            unfinished_steps=int(unfinished)))
    return rows


def rank_summary(sources, *, memory_limit: str = "1GB", threads: int | None = None,
                 progress=None):
    """Per-rank summary of Parquet trace files (a folder, a glob, or a list), with DuckDB, one
    file at a time. Other trace files (JSON) are loaded one at a time and summarised in memory.
    A DataFrame, as ``trace.rank_summary()`` gives (the straggler in ``attrs``)."""
    return summarise_files(sources, memory_limit=memory_limit, threads=threads,
                           progress=progress).frame()


def summarise_files(sources, *, memory_limit: str = "1GB", threads: int | None = None,
                    progress=None) -> RankSummary:
    """:func:`rank_summary`'s figures, as computed."""
    from .chrome import load

    paths = trace_paths(sources)
    connection = _connect(memory_limit, threads)
    rows: list[RankRow] = []
    try:
        for index, path in enumerate(paths):
            if pathlib.Path(path).name.endswith(".parquet"):
                from .parquet import read_header

                read_header(path)  # a clear error for a Parquet file nbprof did not write
                rows += file_rows(connection, path)
            else:
                trace = load(path)
                trace.meta["rank"] = rank_of(trace, path, index)
                rows += summarise_ranks(trace).rows
            if progress:
                progress(index + 1, len(paths), path)
            if len({row.rank for row in rows}) < len(rows):
                raise ValueError(f"{path} holds a rank that an earlier file holds too: give "
                                 "files of different ranks (nbprof convert names them rankN)")
    finally:
        connection.close()
    rows.sort(key=lambda row: row.rank)
    straggler, reason = name_straggler(rows)
    return RankSummary(rows, straggler, reason)
