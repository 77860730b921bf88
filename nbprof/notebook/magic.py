"""``%%cudaprof`` (a cell) and ``%cudaprof`` (one statement): run code under nbprof's profiler in the
user's namespace, then show the timeline widget under the cell's own output.

Options come from args.py; cell_transform.py hands IPython a cell with a syntax error as plain
code and one with top-level ``await`` as an awaited call of :func:`run_async`. One profile routine
(a coroutine) serves both: a cell without ``await`` runs it to its end in one call. torch and the
widget load only when a cell is profiled.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import sys
import time
import warnings
from dataclasses import dataclass

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from .args import CudaprofUsageError, help_text, parse_options, shadowing, split_line_magic

# Warnings issued from the profiler's own code (torch's profilers, nbprof's recorders) are noise to
# the user; warnings the cell's code triggers are attributed to the cell and still show.
_PROFILER_MODULES = r"(torch\.autograd\.profiler.*|torch\.profiler.*|nbprof\.(profiler|record).*)"
_TOP_LEVEL_AWAIT = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)


def register(ipython) -> None:
    """Called by ``%load_ext nbprof``."""
    ipython.register_magics(CudaprofMagics)
    from .cell_transform import install

    install(ipython)


@magics_class
class CudaprofMagics(Magics):
    @line_cell_magic
    def cudaprof(self, line: str, cell: str | None = None):
        """Profile the cell with nbprof and show its timeline. ``%cudaprof -h`` lists the options."""
        __tracebackhide__ = True  # a cell's traceback starts at the cell's own line
        if cell is None:
            line, cell = split_line_magic(line)
        prepared = _prepare(self.shell, line, cell)
        if prepared is None:
            return
        if prepared[0].is_async:  # only reached when the magic is called from code, not a cell
            raise UsageError("%%cudaprof: this code uses top-level await, which only a notebook "
                             "cell of its own can run (IPython's autoawait)")
        _run_to_end(profile_cell(self.shell, *prepared))


# `%%cudaprof?` shows the docstring: make it the parser's full help, so there is one source.
CudaprofMagics.cudaprof.__doc__ = f"{CudaprofMagics.cudaprof.__doc__}\n\n{help_text()}"


async def run_async(shell, line: str, cell: str) -> None:
    """A ``%%cudaprof`` cell with top-level ``await`` (cell_transform.py makes the cell this call,
    awaited, so IPython runs it in its event loop as it runs its own async cells)."""
    __tracebackhide__ = True
    prepared = _prepare(shell, line, cell)
    if prepared is not None:
        await profile_cell(shell, *prepared)


def _prepare(shell, line: str, cell: str):
    """Parse the options and compile the cell: (runner, options), or None when there is nothing to
    run (help, an empty cell). Raises UsageError, before anything ran, for what would fail later."""
    __tracebackhide__ = True
    try:
        options = parse_options(line)
    except CudaprofUsageError as error:
        # UsageError: IPython prints the message without a traceback, and the cell does not run.
        raise UsageError(str(error)) from None
    if options.help:
        print(help_text())
        return None
    for flag, name in (("-o", options.variable), ("--compare", options.compare)):
        if name in shell.user_ns_hidden:  # In, Out, get_ipython, exit...: IPython's own names
            raise UsageError(f"%%cudaprof {flag} {name}: {name} is one of IPython's own names; "
                             "choose another variable name")
    hidden = options.variable and not options.force and shadowing(options.variable, shell.user_ns)
    if hidden:  # -o print, -o torch: the trace would replace what the rest of the notebook calls
        raise UsageError(f"%%cudaprof -o {options.variable}: {hidden}; storing the Trace there "
                         "would replace it for the rest of the notebook. Choose another variable "
                         "name (or add --force); the cell did not run.")
    if options.compare:  # checked before the cell runs, so a typo costs no profile
        _trace_to_compare(shell, options.compare)
    if options.export:
        _check_export(options.export)
    runner = CellRunner(shell, cell)  # a SyntaxError stops here, before anything runs
    if runner.is_empty:
        print("%%cudaprof: nothing to profile: the cell has no code.")
        return None
    from ..record import profiler

    if profiler.is_active():
        raise UsageError("%%cudaprof can't nest: a profile is already active in this kernel "
                         "(an enclosing %%cudaprof cell or `with nbprof.profile()`). "
                         "Run this code without %%cudaprof, or end the other profile first.")
    return runner, options


def _run_to_end(coroutine):
    """Run a coroutine that never waits (the profile of a cell without ``await``) to its end, in
    this call, as IPython runs a synchronous cell."""
    __tracebackhide__ = True
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("%%cudaprof: the cell waited on an event loop")


class CellRunner:
    """A cell compiled once, as IPython compiles its own cells (its compiler, so the user's
    ``from __future__`` imports hold; top-level ``await`` under autoawait), then run any number of
    times in the user's namespace. ``run`` returns the value of a last bare expression, which the
    caller hands to the display hook (``Out[n]``) after profiling, so its repr is not profiled."""

    def __init__(self, shell, source: str):
        self._shell = shell
        python = shell.transform_cell(source)
        # Registered in linecache under the running cell's number, so tracebacks show the cell's
        # lines as IPython shows its own ("Cell In[5], line 2").
        filename = shell.compile.cache(python, number=_cell_number(shell), raw_code=source)
        tree = shell.transform_ast(shell.compile.ast_parse(python, filename=filename))
        body = tree.body
        self.is_empty = not body  # blank, or only comments
        last = body.pop() if body and isinstance(body[-1], ast.Expr) else None
        with shell.compile.extra_flags(_TOP_LEVEL_AWAIT if shell.autoawait else 0):
            self._body = shell.compile(ast.Module(body=body, type_ignores=[]), filename, "exec")
            self._last = None if last is None else shell.compile(
                ast.Expression(body=last.value), filename, "eval")
        self.is_async = any(code is not None and code.co_flags & inspect.CO_COROUTINE
                            for code in (self._body, self._last))

    async def run(self):
        __tracebackhide__ = True  # IPython leaves this frame out of the cell's traceback
        namespace = self._shell.user_global_ns, self._shell.user_ns
        done = eval(self._body, *namespace)
        if inspect.iscoroutine(done):  # top-level await: the cell is a coroutine to wait on
            await done
        if self._last is None:
            return None
        value = eval(self._last, *namespace)
        return (await value) if self._last.co_flags & inspect.CO_COROUTINE else value


def _cell_number(shell) -> int:
    """The number IPython gives the running cell (``In[n]``): the one in its ExecutionResult, as
    execution_count has already moved on when the cell is stored in the history."""
    result = getattr(shell.displayhook, "exec_result", None)
    count = getattr(result, "execution_count", None)
    return count if isinstance(count, int) else max(shell.execution_count - 1, 0)


@dataclass
class _Runs:
    """How many of the ``--repeat`` runs the cell completed (the note and the summary say so)."""

    requested: int
    completed: int = 0


async def profile_cell(shell, runner: CellRunner, options) -> None:
    """Warm up, profile ``options.repeat`` runs, then hand out the trace as the options ask; an
    exception or Ctrl-C in the cell still shows what was recorded, then propagates unchanged."""
    __tracebackhide__ = True
    from ..record.profiler import profile
    from ..record.interrupts import CtrlCInCellOnly

    for index in range(options.warmup):
        try:
            await runner.run()
        except BaseException:
            print(f"%%cudaprof: warm-up run {index + 1} of {options.warmup} raised (nothing was "
                  "profiled):", file=sys.stderr)
            raise
    session = profile(cuda=False if options.cpu_only else None, kernels=options.kernels,
                      record_shapes=options.record_shapes, with_stack=options.with_stack,
                      recorder=options.recorder, memory=options.memory)
    runs = _Runs(options.repeat)
    # From before the start to after the stop, Ctrl-C raises only inside the cell's own code: one
    # that landed between the start and the cell's try (or the cell's end and the stop) would leave
    # torch's profiler recording every op, with nothing left to stop it. Any other waits for the
    # profiler to be off and then ends the cell as an interrupt in it would.
    with CtrlCInCellOnly() as ctrl_c:
        _start(session)  # UsageError when it can't start: the cell has not run
        value = failure = None
        try:
            with ctrl_c.cell():
                value = await _run_repeats(runner, runs)
        except BaseException as error:  # Ctrl-C too: show what ran, then re-raise it
            failure = error
        with _quiet_profiler():
            session.__exit__(type(failure) if failure else None, failure,
                             failure.__traceback__ if failure else None)
        if ctrl_c.pending and failure is None:  # Ctrl-C while nbprof switched: the trace shows
            failure = KeyboardInterrupt()
    if failure is None:
        sys.displayhook(value)  # Out[n], as without the magic (None shows nothing)
    try:
        if session.trace is not None:
            if failure is not None and runs.requested > 1:  # the per-run summary counts only these
                session.trace.meta["repeat"] = {"runs": runs.requested,
                                                "completed": runs.completed}
            publish(shell, session.trace, options, note=_failure_note(failure, runs))
    except UsageError as error:  # --export failed; the cell's own exception, if any, comes first
        if failure is None:
            raise
        print(f"UsageError: {error}", file=sys.stderr)
    finally:
        if failure is not None:  # as without the magic, whatever showing the trace ran into
            raise failure


def _start(session) -> None:
    """Start the profile; what keeps it from starting is a UsageError (the cell has not run)."""
    from ..record.profiler import NestedProfileError

    # Only starting and stopping are quieted: the cell's own warnings (and any warning filters it
    # sets) must behave as without the magic.
    with _quiet_profiler():
        try:
            session.__enter__()
        except NestedProfileError as error:  # torch's own profiler is on
            raise UsageError(f"%%cudaprof can't nest: {error}") from None
        except RuntimeError as error:  # what was asked can't be recorded here (kernels=True
            # without a GPU)
            raise UsageError(f"%%cudaprof can't start: {error}") from None


async def _run_repeats(runner: CellRunner, runs: _Runs):
    """The cell's last value (of the last run); ``runs.completed`` counts the runs that ended."""
    __tracebackhide__ = True
    if runs.requested == 1:
        value = await runner.run()
        runs.completed = 1
        return value
    from torch.autograd.profiler import record_function

    from .repeats import run_marker

    value = None
    for index in range(runs.requested):
        with record_function(run_marker(index, runs.requested)):
            value = await runner.run()
        runs.completed += 1
    return value


@contextlib.contextmanager
def _quiet_profiler():
    """torch's warnings while nbprof starts or stops are dropped; nbprof's own ("nbprof: torch.profiler
    ended nbprof's recording...") become one plain line under the cell, without the file and line
    of the magic a RuntimeWarning would show."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", module=_PROFILER_MODULES)
        yield
    for warning in caught:
        text = str(warning.message)
        if text.startswith("nbprof: "):
            print(f"%%cudaprof: {text[len('nbprof: '):]}", file=sys.stderr)
        else:  # anything else, as it would have shown
            warnings.showwarning(warning.message, warning.category, warning.filename,
                                 warning.lineno)


def _failure_note(failure: BaseException | None, runs: _Runs) -> str | None:
    if failure is None:
        return None
    where = (f" in run {runs.completed + 1} of {runs.requested} ({runs.completed} of "
             f"{runs.requested} runs completed)") if runs.requested > 1 else ""
    if isinstance(failure, KeyboardInterrupt):
        return (f"Interrupted{where}: the timeline shows what ran before Ctrl-C. The profiler is "
                "off.")
    return f"The cell raised {type(failure).__name__}{where}: the timeline shows what ran before it."


def _trace_to_compare(shell, variable: str):
    from ..model import Trace

    if variable not in shell.user_ns:
        raise UsageError(f"--compare {variable}: there is no variable {variable!r}; profile the "
                         f"earlier run with %%cudaprof -o {variable} first")
    value = shell.user_ns[variable]
    if not isinstance(value, Trace):
        raise UsageError(f"--compare {variable}: {variable} is a {type(value).__name__}, not an "
                         "nbprof.Trace (from %%cudaprof -o VAR, nbprof.profile() or nbprof.load)")
    return value


def _check_export(path: str) -> None:
    """--export's path, before the cell runs: its folder exists and takes files."""
    import pathlib

    from ..formats.atomic import check_writable

    folder = pathlib.Path(path).parent
    try:
        if not folder.is_dir():
            raise FileNotFoundError(f"the folder {folder} does not exist")
        check_writable(path, "the Chrome trace")
    except OSError as error:
        raise UsageError(f"--export {path}: {error.strerror or error}. Give a path in a folder "
                         "that exists and that you can write to; the cell did not run.") from None


def _before(shell, options):
    """What the Compare tab compares with: --compare VAR, else the Trace that -o VAR held."""
    from ..model import Trace

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
        from ..formats.chrome import export_chrome_trace

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

    from .widget import TraceWidget

    name = options.variable or time.strftime("cudaprof-%Y%m%d-%H%M%S")
    display(TraceWidget(trace, name=name, sort_by=options.sort, note=note,
                        collapsed=note is not None, in_cell=True, **compare))


def _after_traceback(shell, show) -> None:
    """Run ``show`` once, after IPython has printed the failing cell's traceback (post_run_cell
    comes after it, still in the same cell), so the error reads first and the widget under it."""
    def once(_result=None):
        shell.events.unregister("post_run_cell", once)
        show()

    shell.events.register("post_run_cell", once)
