"""The op and kernel names read as collectives and as training steps: one pattern each.

The DuckDB summary (:mod:`nbprof.formats.ranks_sql`) matches the same patterns, so it counts what the
in-memory summary counts.
"""

import re

# Names of collective ops and kernels: torch's c10d ops, NCCL's and gloo's record_function names,
# NCCL's kernels. RE2 (DuckDB's regexp_matches) reads both patterns as Python's re does.
COLLECTIVE_PATTERN = (r"nccl|gloo|c10d::|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all"
                      r"|broadcast|barrier")
COLLECTIVE = re.compile(COLLECTIVE_PATTERN, re.IGNORECASE)
STEP_PATTERN = r"^ProfilerStep#\d+$"
STEP = re.compile(STEP_PATTERN)
