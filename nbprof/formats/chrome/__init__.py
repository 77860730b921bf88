"""Trace <-> Chrome trace JSON: :func:`export_chrome_trace`, :func:`chrome_trace_bytes`,
:func:`load` (nbprof's own exports and torch.profiler / Kineto traces) and
:class:`TraceFormatError`.

The work is split: export (writing), lanes (extra lanes for overlapping slices), read (parsing
and validating a file), loader (the shared part of loading and nbprof's own format), kineto
(torch.profiler / Kineto files), check (the checker).

Imports the model (and :mod:`nbprof.ranks` to merge many files); never torch, bokeh or IPython.
"""

from __future__ import annotations

import pathlib


from .export import chrome_trace_bytes, chrome_trace_dict, export_chrome_trace
from .kineto import KinetoLoad
from .loader import NbprofLoad, nbprof_block
from .gather import Gatherer
from .growing import give_back_freed_memory
from .progress import reporting
from .rawfile import DEFAULT_MAX_BYTES, TraceNotFoundError
from .read import LEFT_OUT, TraceFormatError, paused_gc
from .stream import EventChunks
from ...model import UNFINISHED_KEY, Trace

__all__ = ["DEFAULT_MAX_BYTES", "TraceFormatError", "TraceNotFoundError", "chrome_trace_bytes",
           "chrome_trace_dict", "export_chrome_trace", "load"]


def load(path, *, max_bytes: int = DEFAULT_MAX_BYTES, align: bool = True,
         progress=None) -> Trace:
    """A Trace from a Chrome trace file (``.json`` or ``.json.gz``, gzip recognised by its
    bytes): nbprof's own exports and torch.profiler / Kineto traces. Raises
    :class:`TraceFormatError` (naming the file) for a file it cannot read or with no event it
    can; one event never refuses a file: what it could read only after a repair (invalid
    UTF-8, a file cut off while it was written, a slice without a name) or had to leave out (a
    slice without a ts, ...: read.LEFT_OUT) is said in ``trace.meta["notes"]``. A slice without
    an end (an X without dur, a B without its E) is drawn to the end of the trace and marked
    unfinished (:mod:`nbprof.model.unfinished`).

    From a Kineto file, every CPU-side X slice (and B/E pair, and async slice: async_slices.py)
    becomes an event and every GPU slice a kernel; instant events become ``trace.instants`` and counters ``trace.counters``.
    A kernel's ``launch_id`` is the op around its cudaLaunchKernel call (not the runtime call
    itself), so ``FunctionEvent.kernels`` and ``key_averages()``' CUDA totals sit on aten ops,
    as in torch's own summaries. The loader module says how each link is found.

    ``max_bytes`` caps the uncompressed size read (8 GiB by default, per file; by default a
    ``.gz`` may also expand at most 50x past its first 256 MiB: real traces pack 7-14x), so that
    a gzip bomb or a runaway file fails fast instead of filling memory. The file is read and parsed
    in chunks (chrome/stream.py): its whole text is never in memory.

    ``progress``: a callable that hears ``(bytes read, total bytes)`` of the file as it is
    read; by default a load in a notebook shows a progress bar once it has taken a second
    (``progress=False``: none). See chrome/progress.py.

    A list of paths, a folder or a glob loads every file as one rank of a job and merges them
    (:mod:`nbprof.ranks`: lanes by rank, clocks aligned unless ``align=False``); a ``.parquet``
    file is one written by ``trace.to_parquet`` (:mod:`nbprof.formats.parquet`)."""
    from ... import ranks

    if ranks.is_many(path):
        try:
            return ranks.load_many(path, lambda one: load(one, max_bytes=max_bytes), align=align)
        except FileNotFoundError as error:  # an empty folder, a glob matching nothing
            if isinstance(error, TraceFormatError):
                raise
            raise TraceNotFoundError(str(error)) from None
    if str(path).endswith(".parquet"):
        from ..parquet import read_parquet

        return read_parquet(path)
    path = pathlib.Path(path)
    with paused_gc(), reporting(progress, path) as report:
        return _load(path, max_bytes if isinstance(max_bytes, int) else int(max_bytes), report)


def _load(path: pathlib.Path, max_bytes: int, progress=None) -> Trace:
    chunks = EventChunks(path, max_bytes, progress)
    gatherer = Gatherer(path)
    for base, events in chunks:
        gatherer.add(base, events)
        del events  # each chunk's structs go before the next is parsed
    found = gatherer.finish()
    give_back_freed_memory()  # the chunks' holes, before the Trace's columns are made
    repaired = {kind: found.slices.args.repaired.get(kind, 0) + found.repaired.get(kind, 0)
                for kind in {*found.slices.args.repaired, *found.repaired}}
    data, notes = chunks.data, chunks.notes_with(repaired)
    block, block_problem = nbprof_block(data)
    if not found.events and block is None:
        raise TraceFormatError(f"{path}: 'traceEvents' is empty; there is nothing to load")
    left_out = [f"{count} {LEFT_OUT[why]}" for why, count in found.left_out.items()]
    if found.not_objects:
        left_out.append(f"{found.not_objects} entries of 'traceEvents' were not JSON objects: left out")
    if (found.left_out.keys() - {"unnamed"} or found.not_objects) and _nothing_read(found):
        raise TraceFormatError(f"{path}: no event in the file could be read ({'; '.join(left_out)}"
                               f"); fix or remove those events, or export the trace again")
    loader = NbprofLoad(block, found.slices) if block else KinetoLoad(data, found.slices,
                                                                       found.metadata)
    loader.path = path
    loader.notes += notes
    if block_problem:
        loader.notes.append(block_problem)
    if found.filled_ids:
        loader.notes.append(f"{found.filled_ids} slices had no tid or no pid: each was put on its "
                            f"process's main thread (tid = pid; pid 0 where it had none), as "
                            f"Perfetto does")
    if found.big_args:
        loader.notes.append(f"{found.big_args} metadata, counter, instant, begin/end or async "
                            f"events had more than 1 MiB of args: their args were left out")
    if found.unmatched:
        loader.notes.append(f"{found.unmatched} B/E (begin/end) events found no partner on "
                            f"their thread and were left out")
    if found.unfinished:
        loader.notes.append(f"{found.unfinished} slices had no end in the file (an X without dur, "
                            f"a B without its E): drawn to the end of the trace, as Perfetto "
                            f"does, marked \"{UNFINISHED_KEY}\" in their args, and left out of "
                            f"the summary's times")
    loader.notes += found.async_notes
    loader.notes += left_out
    trace = loader.trace(found)
    if found.unfinished:
        trace.meta[UNFINISHED_KEY] = found.unfinished
    del found, loader
    give_back_freed_memory()
    return trace


def _nothing_read(found) -> bool:
    """No slice, instant, counter sample or memory event was read from the file."""
    return not (len(found.slices.ts) or found.instants.ts or found.instants.memory
                or found.counters.series)
