"""Names of OS threads: Python's names where Python knows the thread, else the kernel's."""

from __future__ import annotations

import sys
import threading


def python_thread_names() -> dict[int, str]:
    """OS thread id -> name, for the Python threads alive now."""
    return {thread.native_id: thread.name for thread in threading.enumerate()
            if thread.native_id is not None}


def os_thread_name(tid: int) -> str | None:
    """The kernel's name for a thread of this process (e.g. torch's ``pt_autograd_0``), if it
    is still alive and the platform says."""
    try:
        with open(f"/proc/self/task/{tid}/comm") as comm:
            return comm.read().strip() or None
    except OSError:
        return None


def name_threads(tids, known: dict[int, str]) -> dict[int, str]:
    """A name for each of ``tids``: ``known`` first, then the kernel's, else ``thread <tid>``."""
    return {int(tid): known.get(int(tid)) or os_thread_name(int(tid)) or f"thread {int(tid)}"
            for tid in tids}


def hand_over(hook, frame, event, arg) -> None:
    """From a one-shot profile function that threading's hook (``threading.setprofile``) put on a
    new thread: the thread's profile function becomes ``hook``, the one that was there before
    (a user's, or None), which gets this event too, as it would have without ours."""
    sys.setprofile(hook)
    if hook is not None:
        hook(frame, event, arg)


class ThreadNames:
    """Names of the Python threads seen between ``start()`` and ``stop()``: those alive at
    either end and those that started and ended in between (their Thread objects are gone by
    ``stop()``, so each new thread reports its own name on its first Python call)."""

    def __init__(self):
        self._names: dict[int, str] = {}
        self._previous_hook = None

    def start(self) -> None:
        self._names = python_thread_names()
        self._previous_hook = threading.getprofile()
        # threading installs this hook (sys.setprofile) in every thread it starts from now on;
        # it runs once, then hands over to whatever hook was there before.
        threading.setprofile(self._report_new_thread)

    def _report_new_thread(self, frame, event, arg):
        thread = threading.current_thread()
        self._names[thread.native_id] = thread.name
        hand_over(self._previous_hook, frame, event, arg)

    def stop(self) -> dict[int, str]:
        threading.setprofile(self._previous_hook)
        self._names.update(python_thread_names())
        return self._names
