"""``%%cudaprof`` (a cell) and ``%cudaprof`` (one statement): run code under nbprof's profiler in the
user's namespace, then show the timeline widget under the cell's own output.

Options come from args.py. torch and the widget load only when a cell is profiled.
"""

from __future__ import annotations

import ast
import contextlib
import sys
import time
import warnings

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from .args import CudaprofUsageError, help_text, parse_options, split_line_magic

# Warnings issued from the profiler's own code (torch's profilers, nbprof's recorders) are noise to
# the user; warnings the cell's code triggers are attributed to the cell and still show.
_PROFILER_MODULES = r"(torch\.autograd\.profiler.*|torch\.profiler.*|nbprof\.(profiler|record).*)"


def register(ipython) -> None:
    """Called by ``%load_ext nbprof``."""
    ipython.register_magics(CudaprofMagics)


@magics_class
class CudaprofMagics(Magics):
    @line_cell_magic
    def cudaprof(self, line: str, cell: str | None = None):
        """Profile the cell with nbprof and show its timeline. ``%cudaprof -h`` lists the options."""
        __tracebackhide__ = True  # a cell's traceback starts at the cell's own line
        if cell is None:
            line, cell = split_line_magic(line)
        try:
            options = parse_options(line)
        except CudaprofUsageError as error:
            # UsageError: IPython prints the message without a traceback, and the cell does not run.
            raise UsageError(str(error)) from None
        if options.help:
            print(help_text())
            return
        if options.compare:  # checked before the cell runs, so a typo costs no profile
            _trace_to_compare(self.shell, options.compare)
        runner = CellRunner(self.shell, cell)  # a SyntaxError stops here, before anything runs
        if runner.is_empty:
            print("%%cudaprof: nothing to profile: the cell has no code.")
            return
        from .. import profiler

        if profiler.is_active():
            raise UsageError("%%cudaprof can't nest: a profile is already active in this kernel "
                             "(an enclosing %%cudaprof cell or `with nbprof.profile()`). "
                             "Run this code without %%cudaprof, or end the other profile first.")
        profile_cell(self.shell, runner, options)


# `%%cudaprof?` shows the docstring: make it the parser's full help, so there is one source.
CudaprofMagics.cudaprof.__doc__ = f"{CudaprofMagics.cudaprof.__doc__}\n\n{help_text()}"


class CellRunner:
    """A cell compiled once, then run any number of times in the user's namespace. ``run`` returns
    the value of a last bare expression, which the caller hands to the display hook (``Out[n]``)
    after profiling, so the value's repr is not profiled."""

    def __init__(self, shell, source: str):
        self._shell = shell
        python = shell.transform_cell(source)
        # Registered in linecache, so tracebacks show the cell's lines as In[n]; IPython has already
        # counted the running cell (execution_count is the next one's number) when it stores history.
        filename = shell.compile.cache(python, number=max(shell.execution_count - 1, 0))
        tree = shell.transform_ast(ast.parse(python, filename=filename))
        body = tree.body
        self.is_empty = not body  # blank, or only comments
        last = body.pop() if body and isinstance(body[-1], ast.Expr) else None
        self._body = compile(ast.Module(body=body, type_ignores=[]), filename, "exec")
        self._last = None if last is None else compile(ast.Expression(body=last.value), filename, "eval")

    def run(self):
        __tracebackhide__ = True  # IPython leaves this frame out of the cell's traceback
        exec(self._body, self._shell.user_global_ns, self._shell.user_ns)
        if self._last is not None:
            return eval(self._last, self._shell.user_global_ns, self._shell.user_ns)
        return None


def profile_cell(shell, runner: "CellRunner", options) -> None:
    """Warm up, profile ``options.repeat`` runs, then hand out the trace as the options ask; an
    exception or Ctrl-C in the cell still shows what was recorded, then propagates unchanged."""
    __tracebackhide__ = True
    from ..profiler import profile

    for _ in range(options.warmup):
        runner.run()
    failure = None
    session = profile(cuda=False if options.cpu_only else None, kernels=options.kernels,
                      record_shapes=options.record_shapes, with_stack=options.with_stack)
    # Only starting and stopping are quieted: the cell's own warnings (and any warning filters it
    # sets) must behave as without the magic.
    with _quiet_profiler():
        try:
            session.__enter__()
        except RuntimeError as error:  # torch's own profiler is on: the cell has not run
            raise UsageError(f"%%cudaprof can't nest: {error}") from None
    value = None
    try:
        value = _run_repeats(runner, options.repeat)
    except BaseException as error:  # Ctrl-C too: show what ran, then re-raise it
        failure = error
    with _quiet_profiler():
        try:
            session.__exit__(type(failure) if failure else None, failure,
                             failure.__traceback__ if failure else None)
        except KeyboardInterrupt as interrupt:  # Ctrl-C while stopping: held until the trace was
            failure = failure or interrupt      # built and the profiler off, so show the trace too
    if failure is None:
        sys.displayhook(value)  # Out[n], as without the magic (None shows nothing)
    try:
        if session.trace is not None:
            publish(shell, session.trace, options, note=_failure_note(failure))
    except UsageError as error:  # --export failed; the cell's own exception, if any, comes first
        if failure is None:
            raise
        print(f"UsageError: {error}", file=sys.stderr)
    finally:
        if failure is not None:  # as without the magic, whatever showing the trace ran into
            raise failure


def _run_repeats(runner: CellRunner, repeat: int):
    """The cell's last value (of the last run)."""
    __tracebackhide__ = True
    if repeat == 1:
        return runner.run()
    from torch.autograd.profiler import record_function

    from .repeats import run_marker

    value = None
    for index in range(repeat):
        with record_function(run_marker(index, repeat)):
            value = runner.run()
    return value


@contextlib.contextmanager
def _quiet_profiler():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module=_PROFILER_MODULES)
        yield


def _failure_note(failure: BaseException | None) -> str | None:
    if failure is None:
        return None
    if isinstance(failure, KeyboardInterrupt):
        return "Interrupted: the timeline shows what ran before Ctrl-C. The profiler is off."
    return (f"The cell raised {type(failure).__name__}: the timeline shows what ran before it.")


def _trace_to_compare(shell, variable: str):
    from ..events import Trace

    if variable not in shell.user_ns:
        raise UsageError(f"--compare {variable}: there is no variable {variable!r}; profile the "
                         f"earlier run with %%cudaprof -o {variable} first")
    value = shell.user_ns[variable]
    if not isinstance(value, Trace):
        raise UsageError(f"--compare {variable}: {variable} is a {type(value).__name__}, not an "
                         "nbprof.Trace (from %%cudaprof -o VAR, nbprof.profile() or nbprof.load)")
    return value


def _before(shell, options):
    """What the Compare tab compares with: --compare VAR, else the Trace that -o VAR held."""
    from ..events import Trace

    if options.compare:
        return _trace_to_compare(shell, options.compare), options.compare
    previous = shell.user_ns.get(options.variable) if options.variable else None
    return (previous, f"the previous value of {options.variable}") if isinstance(previous, Trace) \
        else (None, None)


def publish(shell, trace, options, note: str | None = None) -> None:
    """Store, print, export and display the trace, as the options say."""
    before, before_label = _before(shell, options)
    if options.variable:
        shell.user_ns[options.variable] = trace
    if options.repeat > 1 and (options.table or options.no_display):  # else the widget shows it
        from .repeats import repeat_table

        print(repeat_table(trace, row_limit=options.row_limit))
    if options.table:
        print(trace.table(sort_by=options.sort, row_limit=options.row_limit))
    if note and options.no_display:
        print(note)
    if options.no_display and not options.variable and not options.export:
        print("Note: %%cudaprof --no-display without -o VAR (or --export PATH) discards the trace; "
              "add -o VAR to keep it.")
    if not options.no_display:
        compare = {"compare_to": before, "compare_label": before_label or "the previous run"}
        if not _recorded_ops(trace):
            print("%%cudaprof: the cell ran no torch ops, so there is no timeline to show "
                  "(nbprof records torch ops and the GPU work they launch).")
        elif note is None:
            _show_widget(trace, options, note, **compare)
        else:  # under the cell's traceback, which IPython prints after the cell's outputs
            _after_traceback(shell, lambda: _show_widget(trace, options, note, **compare))
    if options.export:  # last: a bad path must not cost the user the widget or the variable
        from ..chrome import export_chrome_trace

        try:
            print(f"Chrome trace written to {export_chrome_trace(trace, options.export)}")
        except OSError as error:
            raise UsageError(f"--export could not write {options.export}: {error.strerror or error}. "
                             "Give a path in a folder that exists and that you can write to.") from None


def _recorded_ops(trace) -> int:
    """CPU events and GPU intervals, without ``--repeat``'s own run markers."""
    from .repeats import run_windows

    return len(trace) - len(run_windows(trace)[0]) + len(trace.gpu_start_ns)


def _show_widget(trace, options, note: str | None, **compare) -> None:
    from IPython.display import display

    from .widget import widget

    name = options.variable or time.strftime("cudaprof-%Y%m%d-%H%M%S")
    display(widget(trace, name=name, sort_by=options.sort, note=note, collapsed=note is not None,
                   **compare))


def _after_traceback(shell, show) -> None:
    """Run ``show`` once, after IPython has printed the failing cell's traceback (post_run_cell
    comes after it, still in the same cell), so the error reads first and the widget under it."""
    def once(_result=None):
        shell.events.unregister("post_run_cell", once)
        show()

    shell.events.register("post_run_cell", once)
