"""The seed's mechanism: a CUDA event pair around every op, from torch's legacy profiler.

``ProfilerState.CUDA`` records, at each op's push and pop, the CPU time and a CUDA event on the
current stream of the current device. The seed measured every event against ``__start_profile``;
that record no longer carries a CUDA event, so right after enabling we open one empty
record_function per device on an idle GPU (synchronize first): its push is the device's anchor
(see CUDA_EVENTS.md). This module only switches the profiler and places anchors; the arithmetic
lives in :func:`nbprof.convert.legacy_records_to_trace`, which is tested without a GPU.
"""

from __future__ import annotations

import torch
from torch._C._profiler import _ExperimentalConfig
from torch.autograd import ProfilerConfig, ProfilerState

from .quiet import quiet_usdt

ANCHOR_NAME = "nbprof::gpu_clock_anchor"


def legacy_cuda_available() -> bool:
    """Whether this torch still has the legacy CUDA-event profiler (deprecated; may go)."""
    return (hasattr(torch._C._autograd, "_enable_profiler_legacy")
            and hasattr(ProfilerState, "CUDA"))


class LegacyCudaRecorder:
    """Turns the legacy CUDA-event profiler on (with anchors) and off; ``stop()`` returns
    torch's per-thread record lists."""

    anchor_name = ANCHOR_NAME

    def __init__(self, *, record_shapes: bool = False, with_stack: bool = False):
        self.record_shapes = record_shapes
        self.with_stack = with_stack
        self._config = ProfilerConfig(ProfilerState.CUDA, record_shapes, False, with_stack,
                                      False, False, _ExperimentalConfig())

    def start(self) -> None:
        with quiet_usdt():
            torch._C._autograd._enable_profiler_legacy(self._config)
        try:
            self._place_anchors()
        except BaseException:
            torch._C._autograd._disable_profiler_legacy()
            raise

    @staticmethod
    def _place_anchors() -> None:
        for device in range(torch.cuda.device_count()):
            with torch.cuda.device(device):
                # An idle device completes the anchor's event as soon as it is submitted, so its
                # GPU time corresponds to its CPU time up to the submission latency.
                torch.cuda.synchronize()
                for _ in range(5):  # a device's first events are slow to record (torch 1.x warmed up too)
                    with torch.autograd.profiler.record_function("nbprof::gpu_clock_warmup"): pass  # noqa: E701
                with torch.autograd.profiler.record_function(ANCHOR_NAME):
                    pass

    def stop(self):
        try:
            # Every event must have completed before elapsed times can be read.
            for device in range(torch.cuda.device_count()):
                torch.cuda.synchronize(device)
            self._place_anchors()  # the second anchor: the drift fit in nbprof/gpu_clock.py
        finally:
            with quiet_usdt():
                thread_lists = torch._C._autograd._disable_profiler_legacy()
        return thread_lists
