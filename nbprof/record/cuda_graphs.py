"""CUDA graphs inside a profiled block: capture leaves no CUDA error, a replay is a slice.

An event recorded on a capturing stream becomes a node of the graph and can never be timed
(cudaErrorCapturedEvent), and the failed query can leave an error that the next kernel launch
check reports as its own (CUDA_EVENTS.md). The legacy profiler records an event at every op, so
while nbprof records, a capture on the legacy profiler's thread pauses it (its records so far
are kept) and the capture's end resumes it: the captured ops stay as Kineto's CPU slices.
``CUDAGraph.replay`` is no op of torch's, so a replay inside the block is wrapped in a range
``CUDAGraph::replay``: a CPU slice with its events' GPU interval (and, with CUPTI, its kernels,
which carry the correlation of the cudaGraphLaunch inside it).
"""

from __future__ import annotations

import threading

import torch

REPLAY_NAME = "CUDAGraph::replay"


def _graph_class():
    graphs = getattr(torch.cuda, "graphs", None)
    return getattr(graphs, "CUDAGraph", None)


class GraphCaptures:
    """Between ``start()`` and ``stop()``, CUDAGraph's capture and replay go through nbprof.
    ``legacy``: the recorder to pause during a capture on its thread (pause()/resume()/thread_id),
    or None. ``paused_captures`` counts the captures that paused it."""

    def __init__(self, legacy=None, graph_class=None):
        self.legacy = legacy
        self.graph_class = graph_class or _graph_class()
        self.paused_captures = 0
        self._paused = False
        self._originals: dict = {}

    def start(self) -> None:
        if self.graph_class is None:
            return
        for name, wrapper in (("capture_begin", self._capture_begin),
                              ("capture_end", self._capture_end), ("replay", self._replay)):
            original = self.graph_class.__dict__.get(name)
            if original is not None:
                self._originals[name] = original
                setattr(self.graph_class, name, wrapper(original))

    def stop(self) -> None:
        for name, original in self._originals.items():
            setattr(self.graph_class, name, original)
        self._originals = {}  # a capture still open: the recorder's stop() knows it is paused

    def _on_legacy_thread(self) -> bool:
        return self.legacy is not None and threading.get_ident() == self.legacy.thread_id

    def _resume(self) -> None:
        self._paused = False
        self.legacy.resume()

    def _capture_begin(self, original):
        captures = self

        def capture_begin(self, *args, **kwargs):
            paused = False
            if captures._on_legacy_thread() and not captures._paused:
                captures.legacy.pause()
                captures._paused = paused = True
                captures.paused_captures += 1
            try:
                return original(self, *args, **kwargs)
            except BaseException:
                if paused:
                    captures._resume()
                raise

        return capture_begin

    def _capture_end(self, original):
        captures = self

        def capture_end(self, *args, **kwargs):
            try:
                return original(self, *args, **kwargs)
            finally:
                if captures._paused and captures._on_legacy_thread():
                    captures._resume()

        return capture_end

    def _replay(self, original):
        def replay(self, *args, **kwargs):
            with torch.autograd.profiler.record_function(REPLAY_NAME):
                return original(self, *args, **kwargs)

        return replay
