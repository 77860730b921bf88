"""SIGTERM and SIGHUP (a scheduler's time limit, ``timeout``, a closed terminal) end ``nbprof run``
as Ctrl-C does: what ran is written. Python's default would end the process at once and lose the
whole profile. (SIGKILL and ``os._exit`` cannot be caught: nothing is written then.)

Each signal is handed to whatever handles SIGINT at that moment, so the profiler's own holding of
Ctrl-C around its switch (record/interrupts.py) holds these too.
"""

from __future__ import annotations

import signal
import threading

_SIGINT_STATUS = 130  # the shell's exit status for a process ended by Ctrl-C


class StopSignals:
    """Within the block, SIGTERM and SIGHUP raise KeyboardInterrupt (through SIGINT's handler);
    ``number`` is the first such signal that came (None: none, or only Ctrl-C)."""

    def __init__(self):
        self.number: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is not threading.main_thread():
            return self  # only the main thread receives signals (and may set their handlers)
        for number in (signal.SIGTERM, signal.SIGHUP):
            previous = signal.getsignal(number)
            if previous == signal.SIG_IGN:  # nohup's SIGHUP: ignored on purpose, still ignored
                continue
            if previous is None:  # set from C before Python started: could not be put back
                continue
            self._previous[number] = signal.signal(number, self._as_ctrl_c)
        return self

    def __exit__(self, *_exception) -> None:
        for number, previous in self._previous.items():
            signal.signal(number, previous)

    def _as_ctrl_c(self, number, frame) -> None:
        if self.number is None:
            self.number = number
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):  # Python's default raises KeyboardInterrupt; nbprof's may hold it
            handler(signal.SIGINT, frame)
        else:  # SIGINT ignored (a background job of a script): the stop must still happen
            raise KeyboardInterrupt

    def what(self) -> str:
        """What stopped the run, for the messages: "interrupted" (Ctrl-C) or "stopped by SIGTERM"."""
        return "interrupted" if self.number is None else \
            f"stopped by {signal.Signals(self.number).name}"

    def status(self) -> int:
        """The exit status a shell gives a process this signal ended: 128 + its number."""
        return _SIGINT_STATUS if self.number is None else 128 + self.number
