"""CUDA's lazy initialisation inside a profiled block, shown as a slice of its own.

torch creates the CUDA context on first use, in ``torch.cuda._lazy_init`` (torch's C++ calls it
through the module attribute too). That is no op of torch's, so neither profiler records it: on
an H200, `nbprof run` of a script making its first CUDA tensor showed a 3.8 s gap with nothing in
it. While nbprof records on a machine whose CUDA is not initialised yet, the function is wrapped
to time its first real run, and the trace gets a slice ``CUDA_INIT_NAME`` on the calling thread.
"""

from __future__ import annotations

import threading
import time

from ..model.event_types import CUDA_INIT_NAME
CATEGORY = "cuda_runtime"  # drawn as the CUDA runtime calls are
INIT_ARGS = {"what": "torch creates the CUDA context and loads its libraries on first use; "
                     "no op of torch's runs meanwhile"}


class CudaInitTiming:
    """``start()`` wraps ``cuda._lazy_init`` when CUDA is there but not initialised; ``stop()``
    puts it back (unless someone wrapped it again since). ``spans``: (OS tid, start ns, end ns)
    on the wall clock."""

    def __init__(self, cuda):
        self.cuda = cuda  # the torch.cuda module (tests hand in one that behaves like it)
        self.spans: list = []
        self._original = None

    def start(self) -> None:
        cuda = self.cuda
        if not cuda.is_available() or cuda.is_initialized():
            return
        original = cuda._lazy_init
        spans = self.spans

        def _lazy_init():
            if cuda.is_initialized():  # every later call: torch's own quick return
                return original()
            start_ns = time.time_ns()
            try:
                return original()
            finally:
                spans.append((threading.get_native_id(), start_ns, time.time_ns()))

        _lazy_init.__wrapped__ = original
        self._original = original
        cuda._lazy_init = _lazy_init

    def stop(self) -> None:
        original, self._original = self._original, None
        if original is not None and \
                getattr(self.cuda._lazy_init, "__wrapped__", None) is original:
            self.cuda._lazy_init = original

    def add_to(self, trace, known_names: dict):
        """``trace`` with a slice per timed initialisation (none: ``trace`` itself)."""
        if not self.spans:
            return trace
        from .numba_rows import NewRows  # rows appended to a finished trace, rebuilt once

        base = int(trace.meta.get("base_time_ns", 0))
        rows = NewRows(trace, trace.meta.get("pid"), known_names, 0, category=CATEGORY)
        for tid, start_ns, end_ns in self.spans:
            rows.cpu(tid, start_ns - base, end_ns - base, CUDA_INIT_NAME, dict(INIT_ARGS))
        return rows.build(trace.meta)
