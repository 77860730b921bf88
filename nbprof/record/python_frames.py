"""Python frames as torch's ``with_stack`` tracer names them ("file(line): function"): which are
the user's own, and a notebook cell's named as the user knows it ("cell [3], line 2: step").

``with_stack`` records every frame of every thread: the kernel's idle threads (threading's
bootstrap, tornado, asyncio, selectors), IPython and nbprof's magic around the cell. Only the
user's frames say anything. Pure: IPython is read through ``sys.modules`` when it is running.
"""

from __future__ import annotations

import re
import sys

import numpy as np

FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<function>.*)$", re.S)
_IPYTHON_INPUT = re.compile(r"^<ipython-input-(?P<number>\d+)-[0-9a-f]+>$")
_KERNEL_CELL = re.compile(r"(^|/)ipykernel_\d+/\d+\.py$")
# A frame already named after its cell (cell_label): the user's.
_CELL_LABEL = re.compile(r"^(cell \[\d+\]|a notebook cell)(,|:|$)")
# Packages that run the cell (and the profiler and torch itself): never what the user wrote.
_LIBRARIES = frozenset({
    "IPython", "ipykernel", "ipykernel_launcher", "jupyter_client", "jupyter_core", "tornado",
    "traitlets", "zmq", "comm", "ipywidgets", "anywidget", "jupyter_bokeh", "bokeh", "nbprof",
    "torch", "torchvision", "numba", "numpy", "debugpy", "_pydevd_bundle", "pydevd",
} | (set(sys.stdlib_module_names) - {"test"}))  # asyncio, threading, runpy (a test.py is the user's)
_SITE = re.compile(r"[/\\](site|dist)-packages[/\\]|[/\\]lib[/\\]python3[.\d]*[/\\]")


def shell_cell_numbers() -> dict:
    """IPython's map of each cell's compiled file name to its number (``In[n]``); empty outside
    IPython. IPython's and ipykernel's compilers both keep it."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return dict(getattr(getattr(shell, "compile", None), "_filename_map", None) or {})


def cell_label(frame: str, cell_numbers: dict) -> str | None:
    """"cell [n], line k: function" for a frame in a notebook cell, else None. A cell's own
    top-level frame is recorded with line 0 (the line it was entered at), so no line is given."""
    match = FRAME.match(frame)
    if match is None:
        return None
    file, line, function = match["file"], int(match["line"]), match["function"]
    number = cell_numbers.get(file)
    if number is None:  # torch may have cut a prefix off the file name
        number = next((n for name, n in cell_numbers.items() if name.endswith("/" + file)), None)
    if number is None:
        ipython = _IPYTHON_INPUT.match(file)
        if ipython is None and not _KERNEL_CELL.search(file):
            return None
        label = f"cell [{ipython['number']}]" if ipython else "a notebook cell"
    else:
        label = f"cell [{number}]"
    if line:
        label += f", line {line}"
    return label if function == "<module>" else f"{label}: {function}"


def top_package(frame: str) -> str:
    match = FRAME.match(frame)
    file = match["file"] if match else frame
    return re.split(r"[/\\]", file.lstrip("/\\"), maxsplit=1)[0].removesuffix(".py")


def is_library(frame: str) -> bool:
    """A frame of the machinery: C calls ("<built-in method ...>"), frozen modules, the packages
    above, the standard library and anything installed (site-packages). A cell's frame is not."""
    if _CELL_LABEL.match(frame):
        return False
    match = FRAME.match(frame)
    if match is None or match["file"].startswith("<"):
        return True
    return top_package(frame) in _LIBRARIES or bool(_SITE.search(match["file"]))


def is_users(frame: str, cell_numbers: dict) -> bool:
    """The user's own frame: a notebook cell's, or code that is no library's."""
    return cell_label(frame, cell_numbers) is not None or not is_library(frame)


def users_rows(is_python: np.ndarray, is_users_row: np.ndarray, parent: np.ndarray,
               depth: np.ndarray) -> np.ndarray:
    """Which rows to keep: every op, and the Python frames the user's code ran (their own and
    the calls they made), not the machinery around them. Rows are nested (``parent``, ``depth``)."""
    inside = is_python & is_users_row
    for level in range(1, int(depth.max(initial=0)) + 1):  # parents are one level up
        rows = np.flatnonzero(depth == level)
        inside[rows] |= inside[parent[rows]]
    return ~is_python | inside
