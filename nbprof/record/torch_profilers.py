"""nbprof beside torch's own profilers: never take theirs over, hand over when theirs starts.

torch keeps one process-wide Python flag, ``torch.autograd.profiler._is_profiler_enabled``, that
every torch profiler sets on start (an all-threads Kineto session lives in a global C++ slot that
``torch.autograd._profiler_enabled()`` does not see: that check only sees this thread's profiler).
nbprof refuses to start when either says yes, and sets the flag itself while it records, so
torch's compiled code (inductor, dynamo) annotates its kernels for nbprof as it does for
torch.profiler.

A torch.profiler started inside an nbprof block would pop nbprof's Kineto session (the table in
CUDA_EVENTS.md): nbprof's trace came back empty with no word. So while nbprof records, the entry
points torch's profilers call to start (looked up as module globals at each call) run a hand-over
first: nbprof ends its own session, keeping what it recorded, and the user's profiler then starts
on a clean slate and records normally. The hand-over is noted and warned about at nbprof's stop.
"""

from __future__ import annotations

import threading

import torch
import torch.autograd.profiler as autograd_profiler
import torch.autograd.profiler_legacy as profiler_legacy

# (module, attribute): how torch.profiler.profile, torch.autograd.profiler.profile, emit_nvtx/
# emit_itt and torch.autograd.profiler_legacy.profile switch themselves on.
_START_POINTS = ((autograd_profiler, "_prepare_profiler"), (autograd_profiler, "_enable_profiler"),
                 (profiler_legacy, "_enable_profiler_legacy"))


def torch_profiler_active() -> bool:
    """Whether any torch profiler records now, on any thread."""
    return bool(autograd_profiler._is_profiler_enabled) or torch.autograd._profiler_enabled()


class HandOver:
    """While started: the torch-profiler flag is set, and a torch profiler starting calls
    ``end_own_session()`` once, before it switches itself on. ``stop()`` undoes both and says
    whether a torch profiler took over."""

    def __init__(self, end_own_session):
        self._end_own_session = end_own_session
        self._originals: list = []
        self._lock = threading.Lock()
        self.taken_over = False
        self.flag_lost = False  # a torch profiler stopped inside without starting through us

    def start(self) -> None:
        autograd_profiler._set_is_profiler_enabled(True)
        for module, name in _START_POINTS:
            original = getattr(module, name)
            self._originals.append((module, name, original))
            setattr(module, name, self._before(original))

    def _before(self, original):
        def start_point(*args, **kwargs):
            with self._lock:
                if not self.taken_over:
                    self._restore()
                    try:
                        self._end_own_session()
                        self.taken_over = True
                    except Exception:  # noqa: BLE001  nbprof's session goes on (a thread-local
                        pass  # one started elsewhere); torch then says what it thinks of this
            return original(*args, **kwargs)

        start_point.__wrapped__ = original
        return start_point

    def _restore(self) -> None:
        for module, name, original in self._originals:
            if getattr(getattr(module, name), "__wrapped__", None) is original:
                setattr(module, name, original)  # not if someone wrapped it again since
        self._originals = []

    def stop(self) -> bool:
        with self._lock:
            self._restore()
            if not self.taken_over:  # else the flag is the user's profiler's now
                self.flag_lost = not autograd_profiler._is_profiler_enabled
                autograd_profiler._set_is_profiler_enabled(False)
            return self.taken_over
