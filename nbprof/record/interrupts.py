"""Hold Ctrl-C back while torch's profiler is switched on or off.

A KeyboardInterrupt that lands between torch turning its profiler on and nbprof noting it (or in
the middle of turning it off) leaves torch's profiler recording every op of every thread, with no
block left to stop it: each op then costs ~5x and memory grows until the next profile. So the
switch runs with SIGINT caught and remembered, and the interrupt is delivered right after it.

:class:`CtrlCInCellOnly` does the same for all of ``%%cudaprof``'s own code around a cell.
"""

from __future__ import annotations

import contextlib
import signal
import threading


class HeldInterrupts:
    """What came while held: ``interrupted`` says whether Ctrl-C was pressed."""

    def __init__(self):
        self.interrupted = False
        self._frame = None

    def _hold(self, signum, frame):
        self.interrupted = True
        self._frame = frame


@contextlib.contextmanager
def interrupts_held():
    """Run the block with SIGINT held; afterwards deliver it as the handler before would have.
    Only the main thread receives signals: elsewhere the block runs as it is."""
    held = HeldInterrupts()
    # getsignal is None where C set the handler before Python started (an embedding program):
    # signal.signal cannot put such a handler back, so it is left in place, unheld
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is None:
        yield held
        return
    previous = signal.signal(signal.SIGINT, held._hold)
    try:
        yield held
    finally:
        signal.signal(signal.SIGINT, previous)
    if held.interrupted:
        if callable(previous):  # Python's default raises KeyboardInterrupt; IPython's may differ
            previous(signal.SIGINT, held._frame)
        elif previous == signal.SIG_DFL:
            signal.raise_signal(signal.SIGINT)


class CtrlCInCellOnly:
    """SIGINT while ``%%cudaprof`` profiles a cell: a KeyboardInterrupt inside the cell's own code
    (``with gate.cell():``), as without the magic; one that comes while nbprof starts the profiler,
    goes from the start into the cell, or from the cell to the stop is remembered (``pending``)
    and handed out once the profiler is off. Every line outside the cell is nbprof's own, so no
    Ctrl-C can land between the start and the cell's ``try`` and leave torch's profiler on.
    Only the main thread receives signals: elsewhere nothing changes."""

    def __init__(self):
        self.pending = False
        self._in_cell = False
        self._previous = None

    def __enter__(self) -> "CtrlCInCellOnly":
        # A Python handler (Python's default raises KeyboardInterrupt, IPython's may differ) is
        # kept for the cell; SIG_IGN and SIG_DFL mean Ctrl-C raises nothing, so they stay as they are.
        if threading.current_thread() is threading.main_thread() and \
                callable(signal.getsignal(signal.SIGINT)):
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *_exception) -> None:
        # A handler the cell installed itself stays, as it would without the magic.
        if self._previous is not None and signal.getsignal(signal.SIGINT) == self._handle:
            signal.signal(signal.SIGINT, self._previous)

    @contextlib.contextmanager
    def cell(self):
        """The cell's code: Ctrl-C raises here, one that came before it too (it waited for this)."""
        try:
            self._in_cell = True
            if self.pending:
                self.pending = False
                raise KeyboardInterrupt
            yield
        finally:
            self._in_cell = False

    def _handle(self, signum, frame):
        if self._in_cell:
            self._previous(signum, frame)
        else:
            self.pending = True
