"""The model: Interval, FunctionEvent, Kernel, Thread and the column-wise Trace.

numpy and the standard library only (rule 1 of DESIGN.md): the analysis, the exporters and the
timeline all work on a Trace's columns, so a trace of a million events costs arrays, not objects.
Per-event objects (FunctionEvent, Kernel) are built on demand, as views.

Times are integer nanoseconds from the trace's origin (``meta["base_time_ns"]`` is that origin on
the wall clock, ``time.time_ns()``'s epoch); microseconds appear only at the edges.

Its modules, re-exported here so that ``from nbprof.model import ...`` is the one import the rest of
the package and its users write:
- :mod:`nbprof.model.event_types`: Interval, Thread, Kernel, FunctionEvent, the GPU kinds, NO_ID,
  Instants, CounterSeries;
- :mod:`nbprof.model.trace`: Trace, its EventList and KernelList views, split_stream_key;
- :mod:`nbprof.model.memory`: MemoryEvents (allocations and frees as columns), device names;
- :mod:`nbprof.model.nesting` (depth and parent of each row), :mod:`nbprof.model.intervals` (unions,
  overlaps);
- :mod:`nbprof.model.unfinished`: slices with no end in their file, drawn to the end and marked.

It imports nothing of nbprof's above it. The one reach upward is the Trace's convenience methods
(``trace.steps()``, ``trace.export_chrome_trace()``...), each a one-line import inside the method.
"""

from .event_types import (CUDA_INIT_NAME, GPU_KINDS, KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET, KIND_OP, KIND_OTHER,
                          KIND_SYNC, NO_ID, CounterSeries, FunctionEvent, Instants, Interval,
                          Kernel, Thread)
from .memory import CPU_DEVICE, MemoryEvents, device_code, device_name
from .trace import EventList, KernelList, Trace, split_stream_key
from .unfinished import UNFINISHED_KEY, finished_mask, unfinished_rows

__all__ = [
    "CUDA_INIT_NAME", "GPU_KINDS", "KIND_KERNEL", "KIND_MEMCPY", "KIND_MEMSET", "KIND_OP", "KIND_OTHER", "KIND_SYNC",
    "NO_ID", "CounterSeries", "EventList", "FunctionEvent", "Instants", "Interval", "Kernel",
    "KernelList", "Thread", "Trace", "split_stream_key", "CPU_DEVICE", "MemoryEvents",
    "device_code", "device_name", "UNFINISHED_KEY", "finished_mask", "unfinished_rows",
]
