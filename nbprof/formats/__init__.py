"""Trace <-> files: everything nbprof reads and writes.

- :mod:`.chrome`: Chrome trace JSON, nbprof's own exports and torch.profiler / Kineto files: the export,
  the streaming loader (``nbprof.load``) and the checker.
- :mod:`.parquet`: Parquet / Arrow files (``trace.to_parquet``, ``nbprof convert``), read back exactly.
- :mod:`.atomic`: the one way anything is written: a temporary file beside the target, renamed over it.

Imports the model (:mod:`nbprof.model`) and nothing above it: no torch, bokeh or IPython.
"""
