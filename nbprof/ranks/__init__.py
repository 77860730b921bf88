"""Many ranks of one distributed job: merge their traces into one, align their clocks, summarise.

numpy and the standard library only (the model's rule): reading the files is the formats' job
(``nbprof.load`` hands this package Traces, and a ``load_one`` to read each file of a job); the
DuckDB summary over Parquet files is :mod:`nbprof.formats.ranks_sql`. What a recording rank writes
about itself is :mod:`nbprof.record.distributed`.

How a merged Trace says which rank owns what (plain JSON-able meta, so exports keep it):
- ``meta["thread_rank"]``: the rank of each entry of ``trace.threads``;
- ``meta["gpu_devices"]``: ``[merged device, rank, device in its own file]`` per GPU device. Every
  rank's GPU 0 is a GPU 0, so the merged trace numbers devices afresh (what ``gpu_device`` holds)
  and this table maps them back;
- ``meta["ranks"]``: per rank its source file, host, and the clock offsets applied.

The parts, each usable alone:
- :mod:`.files`: which files make a job (paths, folders, globs) and which rank each is;
- :mod:`.owners`: the rank of each thread, event and GPU interval of a (merged) trace;
- :mod:`.clocks`: the shift that puts each rank on the merged clock (bases, then collectives);
- :mod:`.merging`: the merged Trace itself, and ``load_many`` (files -> one Trace);
- :mod:`.summary`: per-rank figures and the straggler;
- :mod:`.op_names`: the collective and step name patterns (shared with the DuckDB summary).
This package re-exports their public names, so ``nbprof.ranks.merge`` and the like are the API.

Imports the model and the analysis (kernel kinds, tables) and nothing else of nbprof's: the
formats import this package (to merge a job's files, to write each row's rank), never the reverse;
never torch, bokeh or IPython.
"""

from .clocks import ALIGN_WINDOW_NS, clock_shifts, collective_intervals, collective_offset
from .files import TRACE_SUFFIXES, is_many, rank_of, trace_paths
from .merging import combine_sparse, load_many, merge, merged_note
from .op_names import COLLECTIVE_PATTERN, STEP_PATTERN
from .owners import event_ranks, gpu_ranks, meta_rank, own_devices, thread_ranks
from .summary import RankRow, RankSummary, name_straggler, rank_summary, summarise_ranks, union_ns

__all__ = [
    "ALIGN_WINDOW_NS", "COLLECTIVE_PATTERN", "STEP_PATTERN", "TRACE_SUFFIXES",
    "RankRow", "RankSummary", "clock_shifts", "collective_intervals", "collective_offset",
    "combine_sparse", "event_ranks", "gpu_ranks", "is_many",
    "load_many", "meta_rank", "merge", "merged_note", "name_straggler", "own_devices", "rank_of",
    "rank_summary", "summarise_ranks", "thread_ranks", "trace_paths", "union_ns",
]
