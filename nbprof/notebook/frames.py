"""An op's Python stack as the user wants to read it: their own frames, the machinery folded.

``--with-stack`` records every frame from the op up to the kernel's event loop: torch's C calls,
the magic that ran the cell, IPython, ipykernel, tornado, asyncio. Only the user's frames say
anything, so runs of library frames fold into one line ("… 14 library frames"), and a notebook
cell's frame names the cell ("cell [3], line 2") instead of IPython's compiled-cell file name
(``<ipython-input-3-…>`` in IPython, ``/tmp/ipykernel_…/….py`` in ipykernel). Pure: no IPython here;
the widget passes in IPython's file name -> cell number map (``shell.compile._filename_map``).
"""

from __future__ import annotations

from ..record.python_frames import cell_label, is_library, top_package


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
    runner = next((i for i, frame in enumerate(frames) if top_package(frame) == "nbprof"),
                  len(frames))
    lines, folded = [], []
    for frame in frames[:runner]:
        cell = cell_label(frame, cell_numbers)
        if cell is None and is_library(frame):
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
