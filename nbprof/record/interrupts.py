"""Hold Ctrl-C back while torch's profiler is switched on or off.

A KeyboardInterrupt that lands between torch turning its profiler on and nbprof noting it (or in
the middle of turning it off) leaves torch's profiler recording every op of every thread, with no
block left to stop it: each op then costs ~5x and memory grows until the next profile. So the
switch runs with SIGINT caught and remembered, and the interrupt is delivered right after it.
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
    if threading.current_thread() is not threading.main_thread():
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
