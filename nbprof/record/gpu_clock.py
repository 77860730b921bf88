"""The CUDA-event path's GPU clock: every legacy record's CUDA event put on the CPU clock, per
device, as exactly as the records allow. Pure: it only calls the records' methods (tests feed it
fakes that behave like torch's, failures included). See CUDA_EVENTS.md, "Anchor" and "Precision".

- **Anchors.** The recorder opens an empty range on each device right after enabling (and, when it
  can, again at stop, after the final synchronize). An anchor's event is taken to complete at its
  CPU time; with two, the GPU clock's drift against the CPU clock is fitted between them (linear:
  both anchors land on their CPU times, every event in between is measured from the nearer one in
  effect), so a 10-minute profile does not slide by the ~20-50 ppm two quartz clocks differ.
- **float32.** ``cuda_elapsed_us`` is cudaEventElapsedTime's float32 milliseconds: 5 minutes from
  an anchor that is a 31 us step. Each event is therefore measured from the previous one on its
  device (a short difference, exact to ~ns in float32) and the differences are summed in float64
  ns: the timestamps telescope, so only rounding adds up, as a random walk of ns.
- **A device first used inside the block** has no start anchor: its first event (on a device
  that had no context, so idle) is taken as one, and the drift is fitted as for any.
- **Measured anchor error.** An event cannot complete before it is recorded (torch reads the CPU
  time just before cudaEventRecord), so per device delta = max(CPU time - GPU time) over the
  records is a part of the anchor's latency that the records prove: when positive the device is
  shifted later by it, and it is reported in ``meta["gpu_clock"]``.
"""

from __future__ import annotations

import numpy as np


# 10 ppm over 0.1 s is 1 us: from there on, fitting the drift is worth an anchor's few us
FIRST_EVENT_MIN_SPAN_NS = 100_000_000


def place_cuda_events(records, cpu_ns: np.ndarray, device: np.ndarray, has_cuda: np.ndarray,
                      anchor_rows: np.ndarray):
    """Each record's CUDA event on the CPU clock (int64 ns, like ``cpu_ns``).

    ``records``: the legacy records; ``cpu_ns``, ``device``, ``has_cuda``: their columns;
    ``anchor_rows``: the rows of the anchors' pushes (any order, any number per device).
    Returns ``(gpu_ns, placed, clocks)``: ``placed`` is False where an event could not be timed
    (no anchor on its device, or torch refused the elapsed time); ``clocks`` is, per anchored
    device, ``{"anchor_error_ns", "drift_ppm", "anchors", "span_ns", "first_event_anchor",
    "untimed_events"}`` for
    ``meta["gpu_clock"]``.
    """
    return _place(cpu_ns, device, has_cuda, anchor_rows,
                  lambda rows, anchor_index: _chained_offsets(records, rows, anchor_index))


def place_event_offsets(cpu_ns: np.ndarray, device: np.ndarray, offset_ns: np.ndarray,
                        anchor_rows: np.ndarray):
    """:func:`place_cuda_events` for events already chained, column-wise (the native recorder:
    observer.cpp measures each event from the previous one on its device and sums in double):
    ``offset_ns`` is each event's float64 ns from any origin of its device, NaN where it could
    not be timed. Same returns."""
    has_offset = ~np.isnan(offset_ns)
    return _place(cpu_ns, device, has_offset, anchor_rows,
                  lambda rows, anchor_index: offset_ns[rows] - offset_ns[rows[anchor_index]])


def _place(cpu_ns, device, has_cuda, anchor_rows, chained_offsets):
    """The anchors, drift and anchor error per device; ``chained_offsets(rows, anchor_index)``
    gives the rows' float64 ns from the anchor's event (NaN: untimed)."""
    gpu_ns = np.zeros(len(cpu_ns), np.int64)
    placed = np.zeros(len(cpu_ns), np.bool_)
    anchor_rows = np.asarray(anchor_rows, np.int64)
    anchor_rows = anchor_rows[has_cuda[anchor_rows]]  # (CPU-mode records carry no events)
    clocks = {}
    for dev in np.unique(device[anchor_rows]).tolist():
        rows = np.flatnonzero(has_cuda & (device == dev))
        rows = rows[np.argsort(cpu_ns[rows], kind="stable")]  # recording order on this device
        anchors = anchor_rows[device[anchor_rows] == dev]
        anchors = anchors[np.argsort(cpu_ns[anchors], kind="stable")]
        # A device first used inside the block is anchored at stop only, and a single anchor
        # leaves the drift unfitted: hundreds of us at the start of a few seconds' profile (the
        # usual case of `nbprof run` and of a cell that makes the first CUDA tensor). It had no
        # context when profiling started, so its first event went onto an idle device: that
        # event is its start anchor (a late one is shifted out like any, see below).
        # Over a short span the drift is below the anchors' own latencies, which a fit would
        # only tilt the clock by.
        first_event_anchor = bool(cpu_ns[rows[0]] < cpu_ns[anchors[0]] and cpu_ns[anchors[-1]]
                                  - cpu_ns[rows[0]] >= FIRST_EVENT_MIN_SPAN_NS)
        if first_event_anchor:
            anchors = np.concatenate([rows[:1], anchors])
        first, last = int(anchors[0]), int(anchors[-1])
        offset_ns = chained_offsets(rows, int(np.flatnonzero(rows == first)[0]))
        timed = ~np.isnan(offset_ns)
        span_ns = int(cpu_ns[last] - cpu_ns[first])
        gpu_span_ns = offset_ns[np.flatnonzero(rows == last)[0]] if last != first else np.nan
        drift_ppm = None
        if span_ns > 0 and gpu_span_ns > 0:
            # Linear in the GPU offset: the first anchor at its CPU time, the last at its own.
            on_cpu = cpu_ns[first] + offset_ns * (span_ns / gpu_span_ns)
            drift_ppm = float((gpu_span_ns - span_ns) / span_ns * 1e6)
        else:
            on_cpu = cpu_ns[first] + offset_ns
        rows, on_cpu = rows[timed], np.rint(on_cpu[timed]).astype(np.int64)
        not_anchor = ~np.isin(rows, anchors)
        slack = cpu_ns[rows[not_anchor]] - on_cpu[not_anchor]
        anchor_error_ns = max(int(slack.max()), 0) if len(slack) else 0
        gpu_ns[rows] = on_cpu + anchor_error_ns
        placed[rows] = True
        clocks[dev] = {"anchor_error_ns": anchor_error_ns, "drift_ppm": drift_ppm,
                       "anchors": int(len(np.unique(cpu_ns[anchors]))),
                       "span_ns": span_ns if last != first else None,
                       "first_event_anchor": first_event_anchor,
                       # elapsed times torch refused (events from a CUDA-graph capture...): the
                       # recorder may have a CUDA error to clear after converting
                       "untimed_events": int((~timed).sum())}
    return gpu_ns, placed, clocks


def _chained_offsets(records, rows: np.ndarray, anchor_index: int) -> np.ndarray:
    """float64 ns of each row's event from the anchor's (NaN where torch would not time it),
    each measured from its neighbour towards the anchor: forward from the anchor, then back."""
    offset_ns = np.full(len(rows), np.nan)
    offset_ns[anchor_index] = 0.0
    chain = [records[row] for row in rows.tolist()]
    for indices in (range(anchor_index + 1, len(rows)), range(anchor_index - 1, -1, -1)):
        previous = anchor_index
        for index in indices:
            try:
                elapsed_us = chain[previous].cuda_elapsed_us(chain[index])
            except RuntimeError:  # an event torch cannot time (e.g. recorded during graph capture)
                continue
            offset_ns[index] = offset_ns[previous] + elapsed_us * 1000.0
            previous = index
    return offset_ns
