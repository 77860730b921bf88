"""The op and kernel names read as collectives and as training steps: one pattern each.

The DuckDB summary (:mod:`nbprof.formats.ranks_sql`) matches the same patterns, so it counts what
the in-memory summary counts.
"""

import re

# Names of collective ops and kernels: torch's c10d ops, NCCL's and gloo's record_function names,
# NCCL's kernels. RE2 (DuckDB's regexp_matches) reads both patterns as Python's re does.
COLLECTIVE_PATTERN = (r"nccl|gloo|c10d::|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all"
                      r"|broadcast|barrier")
COLLECTIVE = re.compile(COLLECTIVE_PATTERN, re.IGNORECASE)
# The collectives every rank is inside at once: none can end on a rank before every other rank has
# started it (each needs every rank's data). Only where the interval is the exchange itself: gloo's
# ops (run on its worker thread) and NCCL's kernels; not the c10d:: or nccl: CPU ops, which enqueue
# the work and return, nor broadcast, reduce or send/recv (a root may be done before a receiver
# comes).
ALL_RANKS_MEET = re.compile(r"^gloo:(all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|barrier)"
                            r"|^nccl\w*Kernel_(AllReduce|AllGather|ReduceScatter)", re.IGNORECASE)
STEP_PATTERN = r"^ProfilerStep#\d+$"
STEP = re.compile(STEP_PATTERN)
