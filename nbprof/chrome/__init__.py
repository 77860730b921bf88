"""Trace <-> Chrome trace JSON: :func:`export_chrome_trace`, :func:`chrome_trace_bytes`,
:func:`load` (nbprof's own exports and torch.profiler / Kineto traces) and
:class:`TraceFormatError`.

The work is split: export (writing), lanes (extra lanes for overlapping slices), read (parsing
and validating a file), loader (the shared part of loading and nbprof's own format), kineto
(torch.profiler / Kineto files), check (the checker).
"""

from __future__ import annotations

import pathlib

import numpy as np

from .export import chrome_trace_bytes, chrome_trace_dict, export_chrome_trace
from .kineto import KinetoLoad
from .loader import NbprofLoad, nbprof_block
from .read import TraceFormatError, paused_gc, phase_rows, pick, read_trace, x_slices
from ..events import Trace

__all__ = ["TraceFormatError", "chrome_trace_bytes", "chrome_trace_dict", "export_chrome_trace",
           "load"]


def load(path, *, align: bool = True) -> Trace:
    """A Trace from a Chrome trace file (``.json`` or ``.json.gz``, gzip recognised by its
    bytes): nbprof's own exports and torch.profiler / Kineto traces. Raises
    :class:`TraceFormatError` (naming the file, and the first bad event) for what it cannot
    read.

    From a Kineto file, every CPU-side X slice becomes an event and every GPU slice a kernel;
    a kernel's ``launch_id`` is the op around its cudaLaunchKernel call (not the runtime call
    itself), so ``FunctionEvent.kernels`` and ``key_averages()``' CUDA totals sit on aten ops,
    as in torch's own summaries. The loader module says how each link is found.

    A list of paths, a folder or a glob loads every file as one rank of a job and merges them
    (:mod:`nbprof.ranks`: lanes by rank, clocks aligned unless ``align=False``); a ``.parquet``
    file is one written by ``trace.to_parquet`` (:mod:`nbprof.columnar`)."""
    from .. import ranks

    if ranks.is_many(path):
        return ranks.load_many(path, load, align=align)
    if str(path).endswith(".parquet"):
        from ..columnar import read_parquet

        return read_parquet(path)
    with paused_gc():
        return _load(pathlib.Path(path))


def _load(path: pathlib.Path) -> Trace:
    data, events = read_trace(path)
    block = nbprof_block(data)
    if not events and block is None:
        raise TraceFormatError(f"{path}: 'traceEvents' is empty; there is nothing to load")
    rows = phase_rows(events)
    slices = x_slices(events, rows["X"], path)
    metadata = pick(events, rows["M"])
    flow_points = pick(events, np.concatenate([rows["s"], rows["f"]]))
    skipped = len(events) - sum(map(len, rows.values()))
    loader = NbprofLoad(block, slices) if block else KinetoLoad(data, slices, metadata)
    return loader.trace(flow_points, skipped=skipped)
