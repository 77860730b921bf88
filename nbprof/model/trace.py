"""The column-wise Trace: everything one profile recorded, as numpy columns.

numpy and the standard library only (rule 1 of DESIGN.md): the analysis, the exporters and the
timeline all work on a Trace's columns, so a trace of a million events costs arrays, not objects.
Per-event objects (FunctionEvent, Kernel) are built on demand, as views; EventList and KernelList
hand them out as sequences. Import from :mod:`nbprof.model`, which re-exports all of this.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .event_types import GPU_KINDS, NO_ID, FunctionEvent, Instants, Interval, Kernel, Thread
from .memory import MemoryEvents, attributed


def split_stream_key(key) -> tuple[int, int]:
    """(device, stream) of a key made by :meth:`Trace.gpu_stream_keys`."""
    key = int(key)
    stream = key & 0xFFFFFFFF
    return key >> 32, stream - (1 << 32) if stream >= 1 << 31 else stream  # streams can be -1


def _column(values, dtype) -> np.ndarray:
    array = np.ascontiguousarray(values, dtype=dtype)
    if array.ndim != 1:
        raise ValueError("trace columns must be one-dimensional")
    return array


class Trace:
    """Everything one profile recorded, stored column-wise.

    Build one with :meth:`Trace.build`, which sorts the events into CPU start order and works out
    nesting; the constructor takes columns that are already sorted and nested (as the converters
    and loaders produce them).

    Event columns (one row per CPU-side op, in CPU start order; the row index is the event's id):
      ``start_ns``, ``end_ns`` (int64), ``thread`` (int32, into ``threads``), ``name_id`` (int32, into
      ``names``), ``category`` (uint8, into ``categories``), ``depth`` (int16), ``parent`` (int32,
      NO_ID at the top), ``self_ns`` (int64).
    GPU columns (one row per GPU interval, in start order): ``gpu_start_ns``, ``gpu_end_ns``
      (int64), ``gpu_name_id`` (int32, into ``names``), ``gpu_device`` (int16), ``gpu_stream``
      (int32), ``gpu_launch`` (int32, an event id or NO_ID), ``gpu_kind`` (uint8, into GPU_KINDS),
      ``gpu_call`` (int32: the runtime/driver call that launched it, cudaLaunchKernel and the like,
      inside the ``gpu_launch`` op; NO_ID where the source does not say, as recorders don't).
    Sparse extras, keyed by row: ``event_args``, ``gpu_args`` (dicts), ``shapes``, ``stacks``.
    Beside the slices: ``instants`` (markers, :class:`Instants`) and ``counters`` (a list of
    :class:`CounterSeries`), empty unless a loaded file had them; ``memory``
    (:class:`MemoryEvents`: every allocation and free, with its op), empty unless memory was
    recorded.
    """

    __slots__ = (
        "start_ns", "end_ns", "thread", "name_id", "category", "depth", "parent", "self_ns",
        "gpu_start_ns", "gpu_end_ns", "gpu_name_id", "gpu_device", "gpu_stream", "gpu_launch",
        "gpu_kind", "gpu_call", "names", "threads", "categories", "meta", "event_args", "gpu_args",
        "shapes", "stacks", "instants", "counters", "memory", "_kernels_by_launch",
    )

    def __init__(self, *, start_ns, end_ns, thread, name_id, category, depth, parent, self_ns,
                 gpu_start_ns, gpu_end_ns, gpu_name_id, gpu_device, gpu_stream, gpu_launch,
                 gpu_kind, names, threads, categories=("op",), meta=None, event_args=None,
                 gpu_args=None, shapes=None, stacks=None, instants=None, counters=(), memory=None,
                 gpu_call=None):
        self.start_ns = _column(start_ns, np.int64)
        self.end_ns = _column(end_ns, np.int64)
        self.thread = _column(thread, np.int32)
        self.name_id = _column(name_id, np.int32)
        self.category = _column(category, np.uint8)
        self.depth = _column(depth, np.int16)
        self.parent = _column(parent, np.int32)
        self.self_ns = _column(self_ns, np.int64)
        self.gpu_start_ns = _column(gpu_start_ns, np.int64)
        self.gpu_end_ns = _column(gpu_end_ns, np.int64)
        self.gpu_name_id = _column(gpu_name_id, np.int32)
        self.gpu_device = _column(gpu_device, np.int16)
        self.gpu_stream = _column(gpu_stream, np.int32)
        self.gpu_launch = _column(gpu_launch, np.int32)
        self.gpu_kind = _column(gpu_kind, np.uint8)
        self.gpu_call = np.full(len(self.gpu_start_ns), NO_ID, np.int32) if gpu_call is None \
            else _column(gpu_call, np.int32)
        self.names = list(names)
        self.threads = [Thread(*t) for t in threads]
        self.categories = list(categories)
        self.meta = dict(meta or {})
        self.event_args = event_args or {}
        self.gpu_args = gpu_args or {}
        self.shapes = shapes or {}
        self.stacks = stacks or {}
        self.instants = instants if instants is not None else Instants.empty()
        self.counters = list(counters)
        self.memory = memory if memory is not None else MemoryEvents.empty()
        self._kernels_by_launch = None
        self._check()

    def _check(self) -> None:
        n, k = len(self.start_ns), len(self.gpu_start_ns)
        for column in ("end_ns", "thread", "name_id", "category", "depth", "parent", "self_ns"):
            if len(getattr(self, column)) != n:
                raise ValueError(f"event column {column} has {len(getattr(self, column))} rows, not {n}")
        for column in ("gpu_end_ns", "gpu_name_id", "gpu_device", "gpu_stream", "gpu_launch",
                       "gpu_kind", "gpu_call"):
            if len(getattr(self, column)) != k:
                raise ValueError(f"GPU column {column} has {len(getattr(self, column))} rows, not {k}")

    # -- building ---------------------------------------------------------------------------

    @classmethod
    def build(cls, *, start_ns, end_ns, thread, name_id, names, threads, category=None,
              categories=("op",), gpu_start_ns=(), gpu_end_ns=(), gpu_name_id=(), gpu_device=(),
              gpu_stream=(), gpu_launch=(), gpu_kind=(), meta=None, event_args=None,
              gpu_args=None, shapes=None, stacks=None, instants=None,
              counters=(), memory=None, gpu_call=None) -> "Trace":
        """A Trace from unsorted columns: sorts events (and GPU intervals) by start, remaps the
        launch ids and the sparse extras to the new order, and computes nesting and self time;
        ``memory`` (:class:`MemoryEvents`) gets each event's op found in the sorted events."""
        from .nesting import nest

        start_ns = _column(start_ns, np.int64)
        end_ns = _column(end_ns, np.int64)
        thread = _column(thread, np.int32)
        n = len(start_ns)
        category = np.zeros(n, np.uint8) if category is None else _column(category, np.uint8)
        # CPU start order; on ties the longer (enclosing) event first, so parents precede children.
        order = np.lexsort((-(end_ns - start_ns), start_ns))
        new_id = np.empty(n, np.int32)
        new_id[order] = np.arange(n, dtype=np.int32)
        start_ns, end_ns, thread = start_ns[order], end_ns[order], thread[order]
        depth, parent, self_ns = nest(start_ns, end_ns, thread)

        gpu_start_ns = _column(gpu_start_ns, np.int64)
        gpu_order = np.lexsort((_column(gpu_end_ns, np.int64), gpu_start_ns))
        def new_ids(ids):  # event ids in the new order, NO_ID stays
            ids = _column(ids, np.int32)
            return np.where(ids >= 0, new_id[np.clip(ids, 0, max(n - 1, 0))] if n else NO_ID,
                            NO_ID).astype(np.int32)

        launch = new_ids(gpu_launch)
        call = None if gpu_call is None else new_ids(gpu_call)[gpu_order]
        new_gpu_row = np.empty(len(gpu_order), np.int64)
        new_gpu_row[gpu_order] = np.arange(len(gpu_order))

        def remap(sparse, new_rows):
            return {int(new_rows[row]): value for row, value in (sparse or {}).items()}

        trace = cls(
            start_ns=start_ns, end_ns=end_ns, thread=thread,
            name_id=_column(name_id, np.int32)[order], category=category[order],
            depth=depth, parent=parent, self_ns=self_ns,
            gpu_start_ns=gpu_start_ns[gpu_order],
            gpu_end_ns=_column(gpu_end_ns, np.int64)[gpu_order],
            gpu_name_id=_column(gpu_name_id, np.int32)[gpu_order],
            gpu_device=_column(gpu_device, np.int16)[gpu_order],
            gpu_stream=_column(gpu_stream, np.int32)[gpu_order],
            gpu_launch=launch[gpu_order], gpu_kind=_column(gpu_kind, np.uint8)[gpu_order],
            names=names, threads=threads, categories=categories, meta=meta,
            event_args=remap(event_args, new_id), gpu_args=remap(gpu_args, new_gpu_row),
            shapes=remap(shapes, new_id), stacks=remap(stacks, new_id),
            instants=instants, counters=counters, gpu_call=call,
        )
        if memory is not None:
            trace.memory = attributed(memory, trace)
        return trace

    @classmethod
    def empty(cls, meta=None) -> "Trace":
        return cls.build(start_ns=(), end_ns=(), thread=(), name_id=(), names=(), threads=(),
                         meta=meta)

    # -- the public API -----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.start_ns)

    def __repr__(self) -> str:
        return (f"<nbprof.Trace {len(self)} events, {len(self.gpu_start_ns)} GPU intervals, "
                f"{len(self.threads)} threads, backend={self.meta.get('backend')!r}>")

    @property
    def events(self) -> "EventList":
        """FunctionEvent views in CPU start order, built as they are read."""
        return EventList(self)

    @property
    def kernels(self) -> "KernelList":
        """Every GPU interval (kernel, memcpy, memset, per-op CUDA-event interval), in start order."""
        return KernelList(self)

    @property
    def duration_ns(self) -> int:
        ends = [a.max() for a in (self.end_ns, self.gpu_end_ns) if len(a)]
        starts = [a.min() for a in (self.start_ns, self.gpu_start_ns) if len(a)]
        return int(max(ends) - min(starts)) if ends else 0

    @property
    def has_gpu(self) -> bool:
        return len(self.gpu_start_ns) > 0

    def async_thread_mask(self) -> np.ndarray:
        """Per thread, whether it is an async lane (a file's async slices: its thread is their
        track's lane, not an OS thread), as ``meta["async_threads"]`` lists them; entries that
        name no thread (a hand-edited file) are ignored."""
        mask = np.zeros(len(self.threads), bool)
        listed = self.meta.get("async_threads")
        if isinstance(listed, list):
            mask[[t for t in listed if isinstance(t, int) and not isinstance(t, bool)
                  and 0 <= t < len(mask)]] = True
        return mask

    def gpu_stream_keys(self) -> np.ndarray:
        """One int64 per GPU interval naming its (device, stream), so streams can be grouped with
        numpy; :func:`split_stream_key` turns a key back into the pair."""
        return (self.gpu_device.astype(np.int64) << 32) | (self.gpu_stream.astype(np.int64) & 0xFFFFFFFF)

    def event(self, index: int) -> FunctionEvent:
        index = int(index)
        if not -len(self) <= index < len(self):
            raise IndexError(f"event {index} out of range for a trace of {len(self)} events")
        index %= len(self)
        parent = int(self.parent[index])
        return FunctionEvent(
            id=index,
            name=self.names[self.name_id[index]],
            thread=self.threads[self.thread[index]],
            cpu_interval=Interval(int(self.start_ns[index]), int(self.end_ns[index])),
            kernels=tuple(self.kernel(row) for row in self._launched_by(index)),
            parent=None if parent == NO_ID else parent,
            depth=int(self.depth[index]),
            self_cpu_ns=int(self.self_ns[index]),
            category=self.categories[self.category[index]],
            shapes=self.shapes.get(index),
            stack=self.stacks.get(index),
            args=self.event_args.get(index),
        )

    def kernel(self, row: int) -> Kernel:
        row = int(row)
        launch = int(self.gpu_launch[row])
        return Kernel(
            name=self.names[self.gpu_name_id[row]],
            interval=Interval(int(self.gpu_start_ns[row]), int(self.gpu_end_ns[row])),
            device=int(self.gpu_device[row]),
            stream=int(self.gpu_stream[row]),
            launch_id=None if launch == NO_ID else launch,
            kind=GPU_KINDS[self.gpu_kind[row]],
            args=self.gpu_args.get(row),
        )

    def _launched_by(self, index: int) -> np.ndarray:
        if self._kernels_by_launch is None:
            # GPU rows grouped by launching event, so a view finds its kernels by binary search.
            order = np.argsort(self.gpu_launch, kind="stable")
            self._kernels_by_launch = (self.gpu_launch[order], order)
        launches, rows = self._kernels_by_launch
        lo, hi = np.searchsorted(launches, [index, index + 1])
        return rows[lo:hi]

    def children(self, index: int) -> list[int]:
        return np.flatnonzero(self.parent == index).tolist()

    def key_averages(self):
        from ..analysis.averages import key_averages

        return key_averages(self)

    def table(self, sort_by: str = "cpu_time_total", row_limit: int = 20) -> str:
        from ..analysis.averages import table

        return table(self, sort_by=sort_by, row_limit=row_limit)

    def gpu_agreement(self, by: str = "name"):
        """Each op's CUDA-event interval against the kernels it and its nested ops ran, per op name
        (or ``by="op"``): offsets and ratio, flagged beyond 10% (see nbprof/analysis/gpu_agreement.py)."""
        from ..analysis.gpu_agreement import gpu_agreement

        return gpu_agreement(self, by=by)

    def steps(self, launch_gap_us: float = 10.0):
        """The steps of a training loop and where each one's time went (see nbprof/analysis/steps.py)."""
        from ..analysis.steps import steps

        return steps(self, launch_gap_us=launch_gap_us)

    def kernel_summary(self, *, memory: bool = False, limit: int | None = 20):
        """Top kernels (``memory=True``: memcpy / memset) by GPU time, with the launching op."""
        from ..analysis.kernel_summary import kernel_summary

        return kernel_summary(self, memory=memory, limit=limit)

    def findings(self) -> list[str]:
        """One-line findings in plain words: GPU idle and why, outlier steps, the top kernel."""
        from ..analysis.findings import findings

        return findings(self)

    def memory_summary(self, by: str = "op", limit: int | None = 20):
        """Per op name (``by="call_path"``: per call path): allocations, bytes allocated, freed,
        net and the largest allocation (see nbprof/analysis/memory.py)."""
        from ..analysis.memory import memory_summary

        return memory_summary(self, by=by, limit=limit)

    def memory_peak(self):
        """Per device ("CPU", "cuda:0"): the peak level, when, and the op running then."""
        from ..analysis.memory import memory_peak

        return memory_peak(self)

    def memory_holders(self, device=None, limit: int | None = 20):
        """What held memory at ``device``'s peak (the device with the highest peak by default):
        the allocations alive then, per op and call path that made them."""
        from ..analysis.memory import memory_holders

        return memory_holders(self, device=device, limit=limit)

    def export_chrome_trace(self, path) -> str:
        from ..formats.chrome import export_chrome_trace

        return export_chrome_trace(self, path)

    def rank_summary(self):
        """Per rank: wall time, CPU and GPU busy, time in collectives, steps; the straggler."""
        from ..ranks import rank_summary

        return rank_summary(self)

    def to_parquet(self, path) -> str:
        """Write the trace as one Parquet file (pyarrow); ``nbprof.load`` reads it back exactly."""
        from ..formats.parquet import write_parquet

        return write_parquet(self, path)

    def to_arrow(self):
        """The events and GPU intervals as one pyarrow Table (a ``kind`` column tells them apart)."""
        from ..formats.parquet import to_arrow

        return to_arrow(self)

    def to_pandas(self):
        """:meth:`to_arrow` as a pandas DataFrame, names as a categorical column."""
        return self.to_arrow().to_pandas()

    @property
    def nbytes(self) -> int:
        """Bytes held by the columns (the sparse extras and string tables are counted apart)."""
        return sum(getattr(self, name).nbytes for name in self.__slots__
                   if isinstance(getattr(self, name, None), np.ndarray))


class EventList(Sequence):
    """A read-only sequence of FunctionEvent views over a Trace."""

    __slots__ = ("_trace",)

    def __init__(self, trace: Trace):
        self._trace = trace

    def __len__(self) -> int:
        return len(self._trace)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._trace.event(i) for i in range(*index.indices(len(self)))]
        return self._trace.event(index)


class KernelList(Sequence):
    """A read-only sequence of Kernel views over a Trace's GPU columns."""

    __slots__ = ("_trace",)

    def __init__(self, trace: Trace):
        self._trace = trace

    def __len__(self) -> int:
        return len(self._trace.gpu_start_ns)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._trace.kernel(i) for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(f"GPU interval {index} out of range ({len(self)})")
        return self._trace.kernel(index % len(self))
