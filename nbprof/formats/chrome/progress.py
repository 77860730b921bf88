"""Progress of a long load: a line on stderr (the CLI) or an ipywidgets bar (a notebook).

``nbprof.load(path, progress=...)`` takes a callable ``(bytes read, total bytes)``. Given none,
a load inside a notebook's kernel shows a FloatProgress bar once it has run DELAY_S; elsewhere
it stays quiet (a library prints nothing unasked); ``progress=False`` silences the bar. Both
reporters show nothing for a load that ends within DELAY_S, and update at most every
UPDATE_S. ipywidgets is imported only when a bar is shown.
"""

from __future__ import annotations

import contextlib
import sys
import time

from .rawfile import size_text

DELAY_S = 1.0
UPDATE_S = 0.2


class _Throttled:
    """Calls ``show(done, total)`` once DELAY_S has passed, then at most every UPDATE_S; on
    close, once more with the last figures (so a bar that was shown ends full)."""

    def __init__(self, delay_s: float):
        self.started = time.monotonic()
        self.delay_s = delay_s
        self.shown_at = None
        self.last = (0, 0)

    def __call__(self, done: int, total: int) -> None:
        self.last = (done, total)
        now = time.monotonic()
        if now - self.started < self.delay_s:
            return
        if self.shown_at is not None and now - self.shown_at < UPDATE_S:
            return
        self.shown_at = now
        self.show(done, total)

    def close(self) -> None:
        if self.shown_at is not None:
            self.show(*self.last)
            self.end()

    def show(self, done: int, total: int) -> None:
        raise NotImplementedError

    def end(self) -> None:
        pass


class StderrLine(_Throttled):
    """``loading NAME: 120 MiB of 1.02 GiB (11%)`` on one line of stderr, rewritten in place;
    only where stderr is a terminal unless ``always``."""

    def __init__(self, name, stream=None, always: bool = False, delay_s: float = DELAY_S):
        super().__init__(delay_s)
        self.name, self.stream = name, stream or sys.stderr
        if not (always or getattr(self.stream, "isatty", lambda: False)()):
            self.delay_s = float("inf")  # never shown

    def show(self, done: int, total: int) -> None:
        share = f" ({100 * done / total:.0f}%)" if total else ""
        self.stream.write(f"\rnbprof: loading {self.name}: {size_text(done)} of "
                          f"{size_text(total)}{share}")
        self.stream.flush()

    def end(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


class NotebookBar(_Throttled):
    """An ipywidgets FloatProgress under the cell, shown once the load has run ``delay_s``
    and closed when it ends."""

    def __init__(self, name, delay_s: float = DELAY_S):
        super().__init__(delay_s)
        self.name, self.bar = name, None

    def show(self, done: int, total: int) -> None:
        if self.bar is None:
            import ipywidgets
            from IPython.display import display

            self.bar = ipywidgets.FloatProgress(min=0, max=max(total, 1),
                                                description="loading", bar_style="info")
            display(self.bar)
        self.bar.value = min(done, self.bar.max)
        self.bar.description = size_text(done)

    def end(self) -> None:
        self.bar.close()


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (IPython alone, a terminal, has no widgets)."""
    if "ipykernel" not in sys.modules:
        return False
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


@contextlib.contextmanager
def reporting(progress, path):
    """The callable a load reports to (None for none), closed when the load ends."""
    if progress is None and in_notebook():
        progress = NotebookBar(getattr(path, "name", path))
    if not callable(progress):
        yield None
        return
    try:
        yield progress
    finally:
        close = getattr(progress, "close", None)
        if close is not None:
            close()
