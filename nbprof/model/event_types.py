"""The model's value types: Interval, Thread, the per-event views FunctionEvent and Kernel, what kind
a GPU interval is, and the trace-wide extras Instants and CounterSeries.

numpy and the standard library only (rule 1 of DESIGN.md). :class:`nbprof.model.trace.Trace` holds the
events column-wise and builds these views on demand; import them all from :mod:`nbprof.model`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

NO_ID = -1  # "none" in the integer id columns (parent, launch)

# What a GPU interval is. OP: a whole op's GPU interval measured by a CUDA event pair (the seed's
# mechanism): it may span several kernels. The rest come from traces that saw kernels one by one.
GPU_KINDS = ("op", "kernel", "memcpy", "memset", "sync", "other")
KIND_OP, KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET, KIND_SYNC, KIND_OTHER = range(len(GPU_KINDS))

# The slice nbprof adds where torch initialised CUDA inside a profile (record/cuda_init.py): no op
# of torch's runs meanwhile, and the findings name it.
CUDA_INIT_NAME = "CUDA initialization (torch.cuda._lazy_init)"


class Interval(NamedTuple):
    """A half-open span of time, in integer nanoseconds from the trace's origin."""

    start_ns: int
    end_ns: int

    def elapsed_ns(self) -> int:
        return self.end_ns - self.start_ns

    def elapsed_us(self) -> float:
        return (self.end_ns - self.start_ns) / 1000.0


class Thread(NamedTuple):
    """A CPU thread: its process id, OS thread id and name."""

    pid: int
    tid: int
    name: str


class Kernel(NamedTuple):
    """One GPU interval (a kernel, a memcpy, a memset, or a whole op's CUDA-event interval)."""

    name: str
    interval: Interval
    device: int
    stream: int
    launch_id: int | None  # id of the FunctionEvent that launched it, None where the source does not say
    kind: str  # one of GPU_KINDS
    args: dict | None = None  # what the source knows beyond that: grid, block, bytes, correlation


@dataclass(frozen=True)
class FunctionEvent:
    """One CPU-side op, as the seed named it; a view built from a Trace's columns."""

    id: int
    name: str
    thread: Thread
    cpu_interval: Interval
    kernels: tuple[Kernel, ...]
    parent: int | None
    depth: int
    self_cpu_ns: int
    category: str = "op"
    shapes: Any = None
    stack: tuple[str, ...] | None = None
    args: dict | None = field(default=None, compare=False)

    @property
    def cpu_time_total(self) -> float:
        return self.cpu_interval.elapsed_us()

    @property
    def self_cpu_time_total(self) -> float:
        return self.self_cpu_ns / 1000.0

    @property
    def cuda_time_total(self) -> float:
        return sum((kernel.interval.elapsed_us() for kernel in self.kernels), 0.0)

    @property
    def key(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return (
            f"<FunctionEvent id={self.id} name={self.name!r} thread={self.thread.tid} "
            f"cpu_time={self.cpu_time_total:.3f}us cuda_time={self.cuda_time_total:.3f}us>"
        )


@dataclass(frozen=True)
class Instants:
    """Instant events (markers): when, what, and on which thread (an index into
    ``Trace.threads``; NO_ID for a process- or trace-wide instant). Rows in time order."""

    time_ns: np.ndarray  # int64
    name: list  # str per row
    thread: np.ndarray  # int32

    @classmethod
    def empty(cls) -> "Instants":
        return cls(np.zeros(0, np.int64), [], np.zeros(0, np.int32))

    def __len__(self) -> int:
        return len(self.time_ns)


@dataclass(frozen=True)
class CounterSeries:
    """One counter's samples (a Chrome "C" event's arg over time, e.g. allocated memory):
    ``name`` is the counter, ``series`` the arg key, ``pid`` the process it belongs to.
    A value holds from its time until the next sample."""

    name: str
    series: str
    pid: int
    time_ns: np.ndarray  # int64, increasing
    values: np.ndarray  # float64

