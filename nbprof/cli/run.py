"""``nbprof run [OPTIONS] SCRIPT [ARGS...]``: profile a script as ``%%cudaprof`` profiles a cell.

The script runs as ``__main__`` (runpy) with ``sys.argv`` set to it and its arguments, inside
``nbprof.profile()``. Every output path is checked before the script starts, so a typo costs no
run; a script that does not compile writes nothing (the last good page stays) and shows its error
as Python would. Once it has run (to its end, an exception, Ctrl-C, SIGTERM or SIGHUP), whatever
can be written is written and the rest said (a profile that took an hour is never lost to a full
disk: the trace goes to the temp folder if it can go nowhere else). Relative output paths are from
the folder nbprof started in, wherever the script moves; without -o the page is SCRIPT.nbprof.html
beside the script.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pathlib
import runpy
import sys
import tempfile
import time
import traceback
import warnings
import zipfile

from .paths import TRACE_SUFFIXES, CliError, check_distinct, check_output, describe
from .stops import _SIGINT_STATUS, StopSignals


def script_position(argv: list[str], takes_value: dict[str, bool]) -> int | None:
    """Where the script's path is in ``run``'s arguments: the first token that is not one of
    nbprof's options (or the one after ``--``). Everything after it belongs to the script, verbatim
    (argparse would drop a ``--`` there, and take ``-o`` for itself)."""
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--":
            return index + 1 if index + 1 < len(argv) else None
        if not token.startswith("-") or token == "-":
            return index
        if takes_value.get(token, False):  # "-o PAGE": the value is the next token
            index += 1
        index += 1
    return None


def run(options, script_args: list[str]) -> int:
    with StopSignals() as stops:
        return _run(options, script_args, stops)


def _run(options, script_args: list[str], stops: StopSignals) -> int:
    from ..record.distributed import distributed_meta, expand_rank

    # Paths as given on the command line mean from here, even if the script changes folder.
    start_folder = pathlib.Path.cwd()
    script = pathlib.Path(options.script)
    # A file, or (as for `python DIR`) a folder or zip holding __main__.py.
    if not (script.is_file() or (script / "__main__.py").is_file()):
        print(f"nbprof: no script {script}: give the path of a Python file (or of a folder with "
              "a __main__.py) to profile", file=sys.stderr)
        return 2
    if options.output is None and {"-o", "--output"} & {
            argument.split("=")[0] for argument in script_args}:
        raise CliError("nbprof's options go before the script (nbprof run -o PAGE.html SCRIPT "
                       "ARGS...); what follows the script is the script's own")
    planned = _outputs(options, expand_rank, distributed_meta(), start_folder)
    for option, path in planned.items():
        check_output(path, "the timeline page" if option == "-o" else "the trace", option,
                     inputs=[script], suffixes=(".html", ".htm") if option == "-o" else
                     TRACE_SUFFIXES)
    check_distinct(planned)
    if error := _compile_error(start_folder / script):  # never ran: nothing to write, or lose
        traceback.print_exception(type(error), error, None)
        return 1
    try:
        from .. import profile  # torch: seconds; Ctrl-C here has nothing to write yet
    except KeyboardInterrupt:
        print(f"nbprof: {stops.what()} before the script started; nothing was written",
              file=sys.stderr)
        return stops.status()
    exit_code, trace, interrupted = _profile_script(
        functools.partial(profile, recorder=options.recorder, memory=options.memory), script,
        script_args, start_folder)
    if trace is None:  # the profiler never started (Ctrl-C while it was starting)
        print(f"nbprof: {stops.what()} before the profile started; nothing was written",
              file=sys.stderr)
        return stops.status() if interrupted else exit_code or 1
    if interrupted:
        exit_code = stops.status()
    paths, done = _outputs(options, expand_rank, trace.meta, start_folder), []
    try:
        if interrupted:  # said here, inside the try: a second Ctrl-C right after it is caught
            again = "Ctrl-C again" if stops.number is None else "Ctrl-C"
            print(f"nbprof: {stops.what()}; writing what ran before it ({again} stops that)",
                  file=sys.stderr, flush=True)
        written_ok = _write_outputs(trace, options, paths, script, done)
    except KeyboardInterrupt:  # a second Ctrl-C: stop now; atomic writes leave no half file
        left = [str(path) for path in paths.values() if str(path) not in done]
        print(f"nbprof: {stops.what()} again: not written: {', '.join(left)} (no half file left)"
              + (f"; written: {', '.join(done)}" if done else ""), file=sys.stderr)
        return stops.status()
    for note in trace.meta.get("notes") or ():  # what the recording could not do, said once
        print(f"nbprof: note: {note}", file=sys.stderr)
    from ..record.overhead import describe_overhead

    if overhead := describe_overhead(trace.meta.get("overhead"), of="the run"):
        print(f"nbprof: {overhead}")
    if options.table:
        print(trace.table())
    return exit_code if written_ok or exit_code else 1


def _outputs(options, expand_rank, meta, start_folder: pathlib.Path) -> dict[str, pathlib.Path]:
    """The output paths, from the folder nbprof started in; without -o, SCRIPT.nbprof.html beside
    the script."""
    page = options.output or str(pathlib.Path(options.script).parent /
                                 f"{pathlib.Path(options.script).name}.nbprof.html")
    paths = {"-o": start_folder / expand_rank(page, meta)}
    if options.trace:
        paths["--trace"] = start_folder / expand_rank(options.trace, meta)
    return paths


def _compile_error(script: pathlib.Path) -> BaseException | None:
    """The error `python SCRIPT` stops at before running a line (a syntax error, null bytes, a
    bad encoding), or None. A zip's code is left to runpy."""
    source = script / "__main__.py" if script.is_dir() else script
    if zipfile.is_zipfile(source):
        return None
    try:
        code = source.read_bytes()  # bytes: compile honours a coding: line, as Python does
        compile(code, str(source), "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError) as error:  # UnicodeDecodeError: a ValueError;
        # RecursionError: nesting too deep to compile
        if isinstance(error, SyntaxError) and error.filename is None:
            print(f'  File "{source}"', file=sys.stderr)
        return error
    return None


def _profile_script(profile, script: pathlib.Path, script_args: list[str],
                    start_folder: pathlib.Path):
    """Run the script under the profiler: (the exit status `python SCRIPT` would have, the trace,
    whether Ctrl-C or a stopping signal ended it)."""
    # The profile's own warnings ("nbprof: torch.profiler ended nbprof's recording") are said once,
    # as notes after the run, not also as a RuntimeWarning pointing at this file.
    warnings.filterwarnings("ignore", message="nbprof: ", category=RuntimeWarning,
                            module=__name__)
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [str(script), *script_args]
    # As `python script.py` would: the script's folder first on the path (for a folder or zip,
    # runpy puts the folder itself there).
    if script.is_file() and not zipfile.is_zipfile(script):
        sys.path.insert(0, str(script.resolve().parent))
    exit_code, interrupted = 0, False
    prof = profile()
    try:
        with prof:
            # The absolute path, as `python SCRIPT` gives __file__ and the frames: the script may
            # change folder.
            runpy.run_path(str(start_folder / script), run_name="__main__")
    except SystemExit as stop:  # the script's own exit: keep its status, still write the page
        exit_code = _exit_status(stop.code)
    except Exception as error:  # the script failed: its traceback, then what ran before it
        _print_script_traceback(error, start_folder / script)
        print("nbprof: the script raised; the page shows what ran before it", file=sys.stderr,
              flush=True)
        exit_code = 1
    except KeyboardInterrupt:  # Ctrl-C (or SIGTERM) ends a long run: the page shows what ran
        exit_code, interrupted = _SIGINT_STATUS, True
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        with contextlib.suppress(OSError):  # for a caller in this process (the script is done)
            os.chdir(start_folder)
    return exit_code, prof.trace, interrupted


def _exit_status(code) -> int:
    """What Python makes of ``sys.exit(code)``: None is 0, a number is itself, anything else (a
    message) is printed to stderr and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr, flush=True)
    return 1


def _print_script_traceback(error: BaseException, script: pathlib.Path) -> None:
    """The traceback from the script's own frames on, as ``python SCRIPT`` prints it (without
    nbprof's and runpy's frames above them)."""
    tb = error.__traceback__
    path = str((script / "__main__.py" if script.is_dir() else script).resolve())
    while tb is not None and os.path.realpath(tb.tb_frame.f_code.co_filename) != path:
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb or error.__traceback__)


def _write_outputs(trace, options, paths: dict[str, pathlib.Path], script: pathlib.Path,
                   done: list[str]) -> bool:
    """The trace first (the data itself, and quick), then the page; each failure said with its
    path, and a trace that could go nowhere asked goes to the temp folder. True if all went;
    ``done`` collects what was written."""
    trace_path, page = paths.get("--trace"), paths["-o"]
    trace_ok = trace_path is None or _write("the trace", lambda: _save_trace(trace, trace_path),
                                            trace_path, done)
    page_ok = _write("the page", lambda: _save_page(trace, page, options, script), page, done)
    if not trace_ok or (trace_path is None and not page_ok):
        _rescue(trace, script, done)
    return trace_ok and page_ok


def _write(what: str, save, path: pathlib.Path, done: list[str]) -> bool:
    try:
        message = save()
    except OSError as error:  # its message says what could not be written, and where
        print(f"nbprof: {describe(error)}", file=sys.stderr, flush=True)
        return False
    except (ValueError, TypeError, RuntimeError) as error:  # drawing or exporting this trace failed
        print(f"nbprof: could not write {what} {path}: {type(error).__name__}: {error}",
              file=sys.stderr, flush=True)
        return False
    done.append(str(path))
    print(f"nbprof: wrote {message}", flush=True)
    return True


def _save_page(trace, page: pathlib.Path, options, script: pathlib.Path) -> str:
    from .. import save_html

    save_html(trace, page, title=options.title or f"nbprof: {script.name}")
    return f"{page} ({len(trace):,} CPU events, {len(trace.gpu_start_ns):,} GPU intervals)"


def _save_trace(trace, path: pathlib.Path) -> str:
    from ..formats.atomic import make_folders

    make_folders(path, "the trace")  # out/ of many ranks
    if str(path).lower().endswith(".parquet"):
        trace.to_parquet(path)
    else:
        trace.export_chrome_trace(path)
    return str(path)


def _rescue(trace, script: pathlib.Path, done: list[str]) -> None:
    """Keep the profile when the asked-for files could not be written: a .json.gz in the temp
    folder, from which ``nbprof view`` draws the page later."""
    rescue = pathlib.Path(tempfile.gettempdir()) / (
        f"nbprof-{script.stem}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json.gz")
    try:
        trace.export_chrome_trace(rescue)
    except OSError as error:
        print(f"nbprof: the profile is lost: could not save it in the temp folder either: "
              f"{describe(error)}", file=sys.stderr)
        return
    done.append(str(rescue))
    print(f"nbprof: saved the trace to {rescue} instead; `nbprof view {rescue} -o PAGE.html` "
          "draws its page", file=sys.stderr)
