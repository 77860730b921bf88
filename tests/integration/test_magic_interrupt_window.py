"""Ctrl-C at every line nbprof runs while a %%cudaprof cell's profiler is on, not only inside the
cell: between the profiler's start and the cell, and between the cell's end and the stop.

A sys.settrace hook counts the line events (in every frame, nbprof's, contextlib's, the cell's)
that run while torch's profiler is on, and at the k-th sends a real SIGINT to this process, as
Jupyter's interrupt button does. A KeyboardInterrupt raised by the hook itself would land where no
Ctrl-C can (Python turns SIGINT into KeyboardInterrupt only through the handler in force, which
nbprof replaces while it switches the profiler); the real signal goes through that handler. Every
k is tried, from the first line after torch's profiler came on to the last before it went off:
each time the cell ends in KeyboardInterrupt, the profiler is off, and the next cell profiles."""

import os
import signal
import sys

import pytest
import torch
from IPython.utils.capture import capture_output

from nbprof.record import profiler
from test_magic_shell import names, shell  # noqa: F401  (the IPython shell with nbprof loaded: a fixture)

CELL = "%%cudaprof --no-display -o window\nwindow_ran = torch.ones(4) + 1"
AFTER = "%%cudaprof --no-display -o after_window\nafter_ran = torch.ones(2) * 2"


def profiler_on() -> bool:
    return profiler.is_active() or torch.autograd._profiler_enabled()


class CtrlCAtLine:
    """A trace function: a real SIGINT at the ``at``-th line event that runs while the profiler
    is on (``at=None``: none; it only counts and records where the lines were)."""

    def __init__(self, at: int | None):
        self.at = at
        self.lines = []  # (file, line, function) of each counted line event
        self.sent_under = None  # SIGINT's handler in force when the hook sent it (a failure says)

    def __call__(self, frame, event, _arg):
        if event == "line" and (self.at is None or len(self.lines) < self.at) and profiler_on():
            code = frame.f_code
            self.lines.append((os.path.basename(code.co_filename), frame.f_lineno, code.co_name))
            if len(self.lines) == self.at:
                self.sent_under = signal.getsignal(signal.SIGINT)
                os.kill(os.getpid(), signal.SIGINT)
        return self


def run_traced(shell, cell, hook):
    with capture_output() as captured:
        sys.settrace(hook)
        try:
            result = shell.run_cell(cell)
        finally:
            sys.settrace(None)
    return result, captured


def ops_still_recorded() -> int:
    """How many ops a profiler left running records (then it is stopped). All-threads Kineto is
    process-wide, which torch.autograd._profiler_enabled() (thread-local) does not see."""
    torch.ones(2).add(1)
    leftover = torch.autograd._disable_profiler()  # only warns when nothing is running
    return sum(1 for event in leftover.events() if event.name() == "aten::add")


@pytest.fixture(scope="module")
def window(shell):  # noqa: F811
    """Where the lines that run while the profiler is on are: one uninterrupted run."""
    shell.run_cell("import torch")
    hook = CtrlCAtLine(None)
    result, _ = run_traced(shell, CELL, hook)
    assert result.success, result.error_in_exec
    assert ("<module>" in {function for _, _, function in hook.lines})  # the cell's own line
    return hook.lines


def test_the_window_holds_nbprofs_lines_before_and_after_the_cell(window):
    files = [name for name, _, _ in window]
    assert "magic.py" in files and "profiler.py" in files
    cell = [function for _, _, function in window].index("<module>")
    assert 0 < cell < len(window) - 1  # lines run before the cell and after it


def problems_after_ctrl_c(shell, at: int, cell_ran: bool) -> list[str]:  # noqa: F811
    shell.user_ns.pop("window_ran", None)
    hook, handler = CtrlCAtLine(at), signal.getsignal(signal.SIGINT)
    result, captured = run_traced(shell, CELL, hook)
    found = [] if isinstance(result.error_in_exec, KeyboardInterrupt) else [
        f"the cell ended in {result.error_in_exec!r}, not KeyboardInterrupt (SIGINT's handler "
        f"before the cell: {handler!r}; the hook " + (
            f"sent SIGINT with {hook.sent_under!r} in force)" if len(hook.lines) == at else
            f"never sent SIGINT: it saw {len(hook.lines)} lines with the profiler on)")]
    if "Interrupted" not in captured.stdout:  # the note says so, the trace is kept
        found.append("no note that the cell was interrupted")
    if ("window_ran" in shell.user_ns) != cell_ran:  # a Ctrl-C before the cell: it does not run
        found.append("the cell ran" if not cell_ran else "the cell did not run")
    if profiler._state_lock.locked():  # the next profile would wait for it forever
        return found + ["nbprof's state lock stayed held"]
    if profiler_on() or ops_still_recorded():
        return found + ["the profiler stayed on"]
    with capture_output():
        after = shell.run_cell(AFTER)
    if not (after.success and "aten::mul" in names(shell.user_ns["after_window"])):
        found.append(f"the next cell did not profile: {after.error_in_exec!r}")
    return found


def test_ctrl_c_at_any_line_while_the_profiler_is_on_leaves_it_off(shell, window):  # noqa: F811
    cell_line = [function for _, _, function in window].index("<module>") + 1
    for at in range(1, len(window) + 1):
        found = problems_after_ctrl_c(shell, at, cell_ran=at > cell_line)
        # The first case that goes wrong ends the test: what it left on would spoil the next ones.
        assert found == [], f"Ctrl-C at {window[at - 1]} (line event {at} of {len(window)})"


def test_a_sigint_handler_the_cell_installs_stays_as_without_the_magic(shell):  # noqa: F811
    shell.run_cell("import signal, torch")
    previous = signal.getsignal(signal.SIGINT)
    try:
        with capture_output():
            result = shell.run_cell("%%cudaprof --no-display\nsignal.signal(signal.SIGINT, "
                                    "signal.SIG_IGN)\nignored = torch.ones(2) + 1")
        assert result.success and signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)  # (not a fixed one: that hid a suite-wide cause)
    result, _ = run_traced(shell, CELL, CtrlCAtLine(None))  # and the magic still profiles
    assert result.success and "aten::add" in names(shell.user_ns["window"])
