"""nbprof's own recorder: a RecordFunction observer in C++ (observer.cpp), built on first use.

- :mod:`.build`: compiles it into a cache keyed by torch, ABI, Python and sources; in the
  background from ``import nbprof``; says why not where it cannot (no compiler, no headers).
- :mod:`.records`: the library through ctypes; ``stop()`` reads numpy columns.
- :mod:`.to_trace`: those columns -> a Trace, in numpy; with CUPTI's calls and kernels from a
  CUDA-only Kineto session linked to the ops by :mod:`.kernel_links` (by the call's thread and time).
- :mod:`.python_calls`: with_stack's Python calls (python_calls.cpp, a C profile function) as
  slices; :mod:`.to_trace` makes them python_function events and each op's stack.
- :mod:`.prebuild`: the library built here for a machine without a compiler (``NBPROF_NATIVE_PREBUILT``).

:func:`load` is the one entry point for the profiler: the loaded library, or None and a
one-line reason (``why_not()``), where the torch path records instead.
"""

from __future__ import annotations

import threading

from . import build

_lock = threading.Lock()
_library = None
_why_not = ""


def load(wait: bool = True):
    """The observer's library (loaded once per process), or None if it cannot be had here (or,
    with ``wait=False``, not yet: its first compile still runs)."""
    global _library, _why_not
    with _lock:
        if _library is None:
            path = build.library_path(wait)
            if path is None:
                _why_not = build.STILL_BUILDING if build.still_building() else build.why_not
                return None
            from .records import NativeLibrary

            try:
                _library = NativeLibrary(path)
            except (OSError, RuntimeError, AttributeError) as error:  # e.g. a .so that cannot resolve torch's
                _why_not = f"the native observer would not load ({error}): reinstall nbprof"
                return None
        return _library


def why_not() -> str:
    return _why_not or build.why_not


def forget() -> None:
    """Tests: look the library up again (a changed source, torch or CXX). A library already
    loaded stays mapped in this process (a .so cannot be unloaded safely)."""
    global _library, _why_not
    with _lock:
        _library, _why_not = None, ""
        build.forget()
