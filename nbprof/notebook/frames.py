"""An op's Python stack as the user wants to read it: their own frames, the machinery folded.

``--with-stack`` records every frame from the op up to the kernel's event loop: torch's C calls,
the magic that ran the cell, IPython, ipykernel, tornado, asyncio. Only the user's frames say
anything, so runs of library frames fold into one line ("… 14 library frames"), and a notebook
cell's frame names the cell ("cell [3], line 2") instead of IPython's compiled-cell file name
(``<ipython-input-3-…>`` in IPython, ``/tmp/ipykernel_…/….py`` in ipykernel). Pure: no IPython here;
the widget passes in IPython's file name -> cell number map (``shell.compile._filename_map``).
"""

from __future__ import annotations

import re
import sys

# torch names a Python frame "file(line): function", the file relative to its sys.path entry.
_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<function>.*)$", re.S)
_IPYTHON_INPUT = re.compile(r"^<ipython-input-(?P<number>\d+)-[0-9a-f]+>$")
_KERNEL_CELL = re.compile(r"(^|/)ipykernel_\d+/\d+\.py$")
# Packages that run the cell (and the profiler and torch itself): never what the user wrote.
_LIBRARIES = frozenset({
    "IPython", "ipykernel", "ipykernel_launcher", "jupyter_client", "jupyter_core", "tornado",
    "traitlets", "zmq", "comm", "ipywidgets", "anywidget", "jupyter_bokeh", "bokeh", "nbprof",
    "torch", "torchvision", "numba", "numpy", "debugpy", "_pydevd_bundle", "pydevd",
} | (set(sys.stdlib_module_names) - {"test"}))  # asyncio, threading, runpy (a test.py is the user's)
_SITE = re.compile(r"[/\\](site|dist)-packages[/\\]|[/\\]lib[/\\]python3[.\d]*[/\\]")


def fold_stack(frames, cell_numbers: dict | None = None) -> list[str]:
    """``frames`` (innermost first, as a trace stores them) as lines to show: the user's frames,
    notebook cells named by number, and one "… N library frames" line per run of the others.
    Everything from the first nbprof frame outwards (the magic running the cell, and whatever ran
    the magic) is machinery; it folds into the last line."""
    return [text for text, _folded_frames in folded_stack(frames, cell_numbers)]


def folded_stack(frames, cell_numbers: dict | None = None) -> list[tuple[str, tuple[str, ...]]]:
    """:func:`fold_stack`'s lines, each with the frames it folds (none for the user's own)."""
    cell_numbers = cell_numbers or {}
    frames = list(frames)
    runner = next((i for i, frame in enumerate(frames) if _top_package(frame) == "nbprof"),
                  len(frames))
    lines, folded = [], []
    for frame in frames[:runner]:
        cell = _cell_frame(frame, cell_numbers)
        if cell is None and _is_library(frame):
            folded.append(frame)
            continue
        if folded:
            lines.append((_folded(len(folded)), tuple(folded)))
            folded = []
        lines.append((cell or frame, ()))
    folded += frames[runner:]
    if folded:
        lines.append((_folded(len(folded)), tuple(folded)))
    return lines


def _folded(count: int) -> str:
    return f"… {count} library frame{'s' * (count != 1)}"


def _cell_frame(frame: str, cell_numbers: dict) -> str | None:
    """"cell [n], line k: function" for a frame in a notebook cell, else None. A cell's own
    top-level frame is recorded with line 0 (the line it was entered at), so no line is given."""
    match = _FRAME.match(frame)
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


def _top_package(frame: str) -> str:
    match = _FRAME.match(frame)
    file = match["file"] if match else frame
    return re.split(r"[/\\]", file.lstrip("/\\"), maxsplit=1)[0].removesuffix(".py")


def _is_library(frame: str) -> bool:
    """A frame of the machinery: C calls ("<built-in method ...>"), frozen modules, the packages
    above, the standard library and anything installed (site-packages)."""
    match = _FRAME.match(frame)
    if match is None or match["file"].startswith("<"):
        return True
    return _top_package(frame) in _LIBRARIES or bool(_SITE.search(match["file"]))
