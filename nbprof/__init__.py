"""nbprof: a GPU profiler's timeline inside the notebook.

``%load_ext nbprof`` then ``%%cudaprof`` on a cell; or, from Python::

    with nbprof.profile() as prof:
        model(x).sum().backward()
    prof.trace.table()
    nbprof.save_html(prof.trace, "timeline.html")

Importing nbprof is cheap: torch, numba, bokeh and ipywidgets load when first used.
"""

from .model import FunctionEvent, Interval, Kernel, Thread, Trace

__version__ = "0.1.0"

# nbprof's native recorder compiles (or is found in its cache) in the background from here, so
# that a first profile rarely waits for it; nothing of torch is imported for it.
from .record.native.build import start_background_build as _start_native_build  # noqa: E402

_start_native_build()

__all__ = [
    "FunctionEvent", "Interval", "Kernel", "Thread", "Trace", "TraceFormatError",
    "diff", "load", "profile", "rank_summary", "save_html", "timeline", "widget",
    "load_ipython_extension",
]

# name -> module that defines it; imported on first use (torch and bokeh take seconds to import).
_LAZY = {
    "diff": "analysis.diff",
    "profile": "record.profiler",
    "load": "formats.chrome",
    "TraceFormatError": "formats.chrome",
    "timeline": "timeline",
    "save_html": "timeline",
    "widget": "notebook.widget",
    "rank_summary": "formats.ranks_sql",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'nbprof' has no attribute {name!r}")


def __dir__():
    # Tab completion in a notebook lists dir(nbprof): without this, the lazy names (profile, load,
    # widget...) would not be offered until first used.
    return sorted(set(globals()) | set(__all__))


def load_ipython_extension(ipython):
    """``%load_ext nbprof``: registers ``%%cudaprof`` / ``%cudaprof``."""
    from .notebook.magic import register

    register(ipython)
