"""Trace <-> files: everything nbprof reads and writes.

- :mod:`.chrome`: Chrome trace JSON, nbprof's own exports and torch.profiler / Kineto files: the export,
  the streaming loader (``nbprof.load``) and the checker.
- :mod:`.parquet`: Parquet / Arrow files (``trace.to_parquet``, ``nbprof convert``), read back exactly.
- :mod:`.ranks_sql`: the per-rank summary of a job's files (``nbprof.rank_summary``, ``nbprof
  ranks``): DuckDB over Parquet files, one file at a time: a job too big for memory is summarised.
- :mod:`.atomic`: the one way anything is written: a temporary file beside the target, renamed over it.

Imports the model, :mod:`nbprof.ranks` (a job's files load as one merged Trace; each row's rank is
written) and :mod:`nbprof.analysis` (the kernel kinds the summary counts), and nothing above them:
no torch, bokeh or IPython.
"""
