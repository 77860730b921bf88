"""GPU intervals for numba launches on a real GPU: through nbprof's native recorder where it
records (:class:`NativeRanges`), else two ways.

- **the native recorder's own ranges** (ranges.h): each launch is a range of its thread in the
  recorder's buffers, exactly like an op (its clock, depth, nesting), and in a session with CUDA
  events a pooled event pair on the launch's own stream, placed with the ops' (same anchors).

- **torch's legacy profiler**, on the threads it records (the one that started the profile and
  torch's autograd workers): the launch runs inside a record_function named like its slice, so
  the profiler's CUDA event pair brackets it and the interval is placed through the same anchor
  as every torch op's (exact ordering against them). The profiler records its events on torch's
  *current* stream, so for a launch on another stream that stream is made current first
  (``torch.cuda.stream(torch.cuda.ExternalStream(handle))``): :func:`torch_stream_to_enter`.
  The record_function's op is then matched back to its launch (:func:`match_launches_to_ops`).
- **numba's own events** on every other thread: a ``cuda.event()`` pair recorded on the launch's
  stream, placed on the CPU clock through an anchor event recorded at the profile's start on an
  idle device (:func:`place_on_cpu_clock`). One anchor per device context serves all its
  streams: ``cuEventElapsedTime`` compares events of any streams of one context, and a stream
  first seen mid-profile could not be anchored on an idle device anyway.
"""

from __future__ import annotations

import contextlib
from time import time_ns

import numpy as np

# cuda.h's special stream handles (CUstream values): CU_STREAM_LEGACY is the legacy default
# stream, torch's default stream; CU_STREAM_PER_THREAD the calling thread's default stream.
CU_STREAM_LEGACY = 1
CU_STREAM_PER_THREAD = 2
TORCH_DEFAULT_STREAM = 0  # torch's default stream's raw handle (cudaStream_t 0)
MATCH_SLACK_NS = 1_000  # torch's CPU times are epoch us in a double: good to ~0.25 us
_EVENT_CHUNK = 128  # CUDA events are created in chunks: creating one costs more than a launch
_NO_SWITCH = contextlib.nullcontext()


def torch_stream_to_enter(launch_handle: int, torch_current: int,
                          per_thread_default: bool) -> int | None:
    """The stream torch must make current so that its profiler's events land on the launch's
    stream: None when torch's current stream already is it, ``TORCH_DEFAULT_STREAM`` for torch's
    default stream, else the raw handle to wrap in ``torch.cuda.ExternalStream``.

    ``launch_handle`` 0 is numba's default stream: the legacy default stream, unless cuda-python
    runs with per-thread default streams (``CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM=1``), where
    it is the thread's own. ``torch_current``: torch's current raw stream on the launch's device.
    """
    if launch_handle == 0:
        target = CU_STREAM_PER_THREAD if per_thread_default else TORCH_DEFAULT_STREAM
    elif launch_handle == CU_STREAM_LEGACY:
        target = TORCH_DEFAULT_STREAM  # the same stream as torch's default
    else:
        target = launch_handle
    return None if target == torch_current else target


class TorchLaunchTiming:
    """A record_function on the launch's stream, for threads where torch's legacy profiler
    records. ``torch`` is the module (tests hand in fakes that fail as torch does)."""

    def __init__(self, torch, device: int, per_thread_default: bool):
        self.record_function = (getattr(torch._C._profiler, "_RecordFunctionFast", None)
                                or torch.autograd.profiler.record_function)  # ~2 us vs ~20 us
        self.covers_this_thread = torch.autograd._profiler_enabled  # thread-local in torch
        self._cuda = torch.cuda
        current = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self._current_handle = current or (lambda device: torch.cuda.current_stream(device)
                                           .cuda_stream)
        self.device = device
        self.per_thread_default = per_thread_default
        self._streams: dict[int, object] = {}  # raw handle -> torch stream, made once

    def stream_context(self, launch_handle: int):
        """A context that makes the launch's stream torch's current one for the launch (a no-op
        when it already is); None when torch cannot wrap that stream (then the launch is timed
        with numba's events instead)."""
        target = torch_stream_to_enter(launch_handle, self._current_handle(self.device),
                                       self.per_thread_default)
        if target is None:
            return _NO_SWITCH
        stream = self._streams.get(target)
        if stream is None:
            try:
                stream = (self._cuda.default_stream(self.device) if target == TORCH_DEFAULT_STREAM
                          else self._cuda.ExternalStream(target, device=self.device))
            except Exception:  # noqa: BLE001  (a profiler never breaks the user's launch)
                return None
            self._streams[target] = stream
        return self._cuda.stream(stream)


class EventPool:
    """Timing CUDA events handed out in pairs; all are read after the profile."""

    def __init__(self, cuda):
        self._cuda = cuda
        self._free: list = []

    def fill(self) -> None:
        self._free = [(self._cuda.event(timing=True), self._cuda.event(timing=True))
                      for _ in range(_EVENT_CHUNK)]

    def pair(self):
        if not self._free:
            self.fill()
        return self._free.pop()


class NumbaEventClock:
    """numba's events for launches torch's profiler does not record, and the anchor that puts
    them on the CPU clock: recorded on the device numba is current on, when the profile starts."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.pool = EventPool(cuda)
        self.pool.fill()  # the first chunk now, not in the first launch
        self.anchor = cuda.event(timing=True)
        # An idle device completes the anchor as soon as it is submitted: its GPU time is the
        # CPU time read just before, up to the submission latency.
        cuda.synchronize()
        self.anchor_ns = time_ns()
        self.anchor.record()
        self.device = int(cuda.get_current_device().id)

    def interval(self, events, base_ns: int) -> tuple[int, int]:
        """The launch's (start_ns, end_ns) from ``base_ns``; raises what numba raises for events
        that cannot be timed."""
        start_ns, end_ns = place_on_cpu_clock(self.anchor_ns, self.anchor, events[0], events[1],
                                              self.cuda.event_elapsed_time)
        return start_ns - base_ns, end_ns - base_ns


def place_on_cpu_clock(anchor_cpu_ns: int, anchor, start, end, elapsed_ms) -> tuple[int, int]:
    """(start_ns, end_ns) on the CPU clock of the GPU work between the events ``start`` and
    ``end``: GPU start = the anchor's CPU time + elapsed(anchor, start), end = start +
    elapsed(start, end). ``elapsed_ms`` is numba's ``event_elapsed_time`` (float milliseconds);
    whatever origin the GPU clock has cancels out. Its errors (an event never recorded, events of
    two contexts) propagate."""
    start_ns = anchor_cpu_ns + round(elapsed_ms(anchor, start) * 1_000_000)
    return start_ns, start_ns + max(round(elapsed_ms(start, end) * 1_000_000), 0)


def match_launches_to_ops(launch_start_ns, launch_end_ns, op_start_ns, op_end_ns,
                          slack_ns: int = MATCH_SLACK_NS) -> np.ndarray:
    """For each launch, the index of the op (its record_function, same name) that lies inside
    it, or -1: the launch's CPU interval encloses its record_function's, up to ``slack_ns`` of
    clock rounding. Each op goes to one launch; launches and ops in any order."""
    op_start_ns, op_end_ns = np.asarray(op_start_ns, np.int64), np.asarray(op_end_ns, np.int64)
    by_start = np.argsort(op_start_ns, kind="stable")
    sorted_starts = op_start_ns[by_start]
    taken = np.zeros(len(by_start), np.bool_)
    matched = np.full(len(launch_start_ns), -1, np.int64)
    for launch in np.argsort(np.asarray(launch_start_ns, np.int64), kind="stable").tolist():
        first, last = int(launch_start_ns[launch]) - slack_ns, int(launch_end_ns[launch]) + slack_ns
        position = int(np.searchsorted(sorted_starts, first))
        while position < len(by_start) and sorted_starts[position] <= last:
            op = int(by_start[position])
            if not taken[position] and op_end_ns[op] <= last:
                taken[position] = True
                matched[launch] = op
                break
            position += 1
    return matched


def record_function_ops(trace, timed: dict) -> dict:
    """{launch: row in ``trace`` of its record_function's op} for ``timed``, {launch: (OS thread
    id, slice name, start_ns, end_ns)} of the launches torch's profiler timed; a launch whose op
    is missing is left out. Where a thread's lane holds as many ops of that name as it launched,
    they pair up in order (one thread runs its launches one after another; Kineto's clock may
    differ from ``time.time_ns`` by more than rounding); otherwise by time
    (:func:`match_launches_to_ops`) among that name's ops on every lane: the legacy records know
    torch's autograd workers by torch's own small ids, not OS ids."""
    groups: dict = {}
    for launch, (tid, name, start_ns, end_ns) in timed.items():
        groups.setdefault((tid, name), []).append((start_ns, launch, end_ns))
    name_ids = {name: index for index, name in enumerate(trace.names)}
    lane_tids = np.array([thread.tid for thread in trace.threads], np.int64)
    row_tids = lane_tids[trace.thread] if len(lane_tids) else np.zeros(0, np.int64)
    found, taken = {}, set()
    for (tid, name), launches in groups.items():
        if name not in name_ids:
            continue
        launches.sort()
        rows = np.flatnonzero(trace.name_id == name_ids[name])
        on_lane = rows[row_tids[rows] == tid]
        if len(on_lane) == len(launches):
            pairs = zip(launches, on_lane[np.argsort(trace.start_ns[on_lane], kind="stable")])
            found.update({launch: int(row) for (_, launch, _), row in pairs})
            taken.update(on_lane.tolist())
            continue
        free = np.array([row for row in rows.tolist() if row not in taken], np.int64)
        matched = match_launches_to_ops([start for start, _, _ in launches],
                                        [end for _, _, end in launches],
                                        trace.start_ns[free], trace.end_ns[free])
        for (_, launch, _), op in zip(launches, matched.tolist()):
            if op >= 0:
                found[launch] = int(free[op])
                taken.add(int(free[op]))
    return found


class NativeRanges:
    """A numba launch as a native range: ``begin(qualname, raw stream handle)`` pushes the range
    ``<prefix><qualname>`` (True where it was recorded; None where it could not be pushed, so no
    pop), ``end()`` pops it. The ids of names and streams are looked up once each: a push passes
    three small ints."""

    def __init__(self, library, prefix: str):
        self._name_id, self._stream_id, self._push, self.end = library.range_calls()
        self._prefix = prefix
        self._names: dict[str, int] = {}
        self._streams: dict[int, int] = {0: 0}

    def begin(self, qualname: str, handle: int):
        name_id = self._names.get(qualname)
        if name_id is None:
            name_id = self._names[qualname] = self._name_id(self._prefix + qualname)
        stream_id = self._streams.get(handle)
        if stream_id is None:
            stream_id = self._streams[handle] = self._stream_id(handle)
        if name_id < 0 or stream_id < 0:  # a table full (65536 names, 4096 streams): a plain slice
            return None
        return self._push(name_id, stream_id, -1) == 1  # -1: the current device, numba's

