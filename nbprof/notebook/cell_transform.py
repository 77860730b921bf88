"""An input transformer for ``%%cudaprof`` cells, so that they compile and run as IPython's own:

- a cell whose code has a syntax error becomes that code: IPython itself reports the error, as it
  does for a cell without the magic (no frames of IPython's or nbprof's, the right ``In[n]``);
- a cell with top-level ``await`` becomes ``await ...run_async(...)``: IPython sees an async cell
  (``should_run_async``) and runs it in its event loop (the kernel's, in Jupyter) as it runs its
  own, instead of the magic's synchronous call, in which ``await`` is a SyntaxError.

Other cells are left alone for IPython's cell-magic transform. Installed by ``%load_ext nbprof``
into ``input_transformers_cleanup`` (run on the raw cell, before the magic transform).
"""

from __future__ import annotations

import ast
import re

from .args import CudaprofUsageError, parse_options, split_line_magic

_CELL_MAGIC = re.compile(r"%%cudaprof(?:[ \t]+(.*))?$")
_LINE_MAGIC = re.compile(r"%cudaprof[ \t]+(.*)$")
_TOP_LEVEL_AWAIT = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)


class CudaprofCellTransform:
    # IPython's check_complete (is the typed input a whole cell yet?) must not run this: a cell
    # being typed is often not valid code yet.
    has_side_effects = True

    def __init__(self, shell):
        self.shell = shell

    def __call__(self, lines: list[str]) -> list[str]:
        split = _split(lines)
        if split is None:
            return lines
        line, code = split
        try:
            if parse_options(line).help:
                return lines
        except CudaprofUsageError:  # the magic says what is wrong with the options
            return lines
        python = self.shell.transform_cell(code)
        try:
            # With IPython's flags (the user's __future__ imports), as IPython will compile it.
            flags = self.shell.compile.flags | (_TOP_LEVEL_AWAIT if self.shell.autoawait else 0)
            compile(python, "<cell>", "exec", flags=flags, dont_inherit=True)
        except (SyntaxError, ValueError, OverflowError):  # what IPython reports at compile time
            return code.splitlines(keepends=True)
        if not self.shell.should_run_async(code, transformed_cell=python):
            return lines
        return [f"await __import__({__package__ + '.magic'!r}, fromlist=['run_async'])"
                f".run_async(get_ipython(), {line!r}, {code!r})\n"]


def _split(lines: list[str]) -> tuple[str, str] | None:
    """(options, code) of a ``%%cudaprof`` cell, or of a cell that is one ``%cudaprof`` line."""
    if not lines:
        return None
    cell = _CELL_MAGIC.match(lines[0].rstrip("\r\n"))
    if cell:
        return cell.group(1) or "", "".join(lines[1:])
    statement = _LINE_MAGIC.match(lines[0].rstrip("\r\n"))
    if statement and not "".join(lines[1:]).strip():
        line, code = split_line_magic(statement.group(1))
        return (line, code) if code.strip() else None
    return None


def install(shell) -> None:
    """Add the transform once (``%reload_ext`` replaces it, rather than adding a second)."""
    transforms = shell.input_transformers_cleanup
    transforms[:] = [t for t in transforms if type(t).__name__ != CudaprofCellTransform.__name__]
    transforms.append(CudaprofCellTransform(shell))
