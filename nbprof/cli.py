"""The ``nbprof`` command: ``nbprof view TRACE... -o PAGE.html``, ``nbprof run SCRIPT [ARGS] -o
PAGE.html [--trace TRACE.json.gz] [--table]``, ``nbprof ranks DIR``, ``nbprof convert IN... -o
DIR`` and ``nbprof diff BEFORE AFTER -o PAGE.html``.

``view`` of several files, a folder or a glob merges them as the ranks of one job. ``--trace``
may say ``{rank}``: under torchrun each rank writes its own file.

``run`` profiles a Python script the way ``%%cudaprof`` profiles a cell: the script runs as
``__main__`` (runpy) with ``sys.argv`` set to it and its arguments, inside ``nbprof.profile()``.
Arguments nbprof does not know go to the script; put them after ``--`` when they clash.
"""

from __future__ import annotations

import argparse
import pathlib
import runpy
import sys
import traceback


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nbprof", description="A GPU profiler's timeline as a standalone HTML page.")
    commands = parser.add_subparsers(dest="command", required=True)
    view = commands.add_parser("view", help="draw a trace file (nbprof export, torch.profiler / "
                                            "Kineto JSON, .json.gz) as a timeline page")
    view.add_argument("trace", nargs="+", help="the trace file; several files, a folder or a "
                                               "glob: the ranks of one job, merged")
    view.add_argument("-o", "--output", required=True, help="the HTML page to write")
    view.add_argument("--title", help="the page's title")
    view.add_argument("--full", action="store_true", help="embed every event, however many (past "
                      "5M events the page embeds a coarser level by default)")
    view.add_argument("--max-events", type=int, default=None, metavar="N",
                      help="embed at most N events (default 5000000); past it, coarser levels")
    view.add_argument("--max-size", type=_size, default=None, metavar="SIZE",
                      help="read at most this much uncompressed trace data (default 8G; "
                           "suffixes K, M, G, T)")
    run = commands.add_parser("run", help="profile a Python script and write its timeline page")
    run.add_argument("script", help="the Python script to run")
    run.add_argument("-o", "--output", required=True, help="the HTML page to write ({rank} "
                                                            "becomes the process's rank)")
    run.add_argument("--trace", help="also write the trace (Chrome JSON, .json.gz compresses; "
                                     ".parquet; {rank} becomes the process's rank)")
    run.add_argument("--table", action="store_true", help="print the per-op summary table")
    run.add_argument("--title", help="the page's title")
    diff = commands.add_parser("diff", help="what changed between two trace files: the op diff "
                                            "table and both timelines aligned by step, as a page")
    diff.add_argument("before", help="the earlier trace file")
    diff.add_argument("after", help="the later trace file")
    diff.add_argument("-o", "--output", required=True, help="the HTML page to write")
    diff.add_argument("--title", help="the page's title")
    diff.add_argument("--row-limit", type=int, default=20, help="rows of the diff to print (-1: all)")
    ranks = commands.add_parser("ranks", help="per-rank summary of a job's trace files (DuckDB "
                                              "over Parquet, one file at a time) and its straggler")
    ranks.add_argument("traces", nargs="+", help="a folder of per-rank .parquet files (or JSON "
                                                 "traces, a glob, several paths)")
    ranks.add_argument("--memory-limit", default="1GB", help="DuckDB's memory limit (default 1GB)")
    ranks.add_argument("--json", action="store_true", help="print the rows as JSON")
    convert = commands.add_parser("convert", help="write JSON traces as per-rank Parquet files, "
                                                  "one process per core")
    convert.add_argument("traces", nargs="+", help="trace files, folders or globs")
    convert.add_argument("-o", "--output", required=True, help="the folder to write them into")
    convert.add_argument("-j", "--jobs", type=int, help="processes (default: one per core)")
    return parser


def _split_script_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """Everything after ``--`` belongs to the script, untouched."""
    if "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1:]
    return argv, []


def _size(text: str) -> int:
    """A byte count from "8G", "512M", "100000" (argparse type)."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    number, unit = text.strip().upper().rstrip("IB"), ""
    if number[-1:] in units:
        number, unit = number[:-1], number[-1]
    try:
        size = int(float(number) * units[unit])
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 16G, 512M)") from None
    if size <= 0:
        raise argparse.ArgumentTypeError(f"the size must be positive, not {text!r}")
    return size


def _view(options) -> int:
    from . import load, save_html
    from .chrome import DEFAULT_MAX_BYTES

    source = options.trace[0] if len(options.trace) == 1 else options.trace
    trace = load(source, max_bytes=options.max_size or DEFAULT_MAX_BYTES)
    for note in trace.meta.get("notes") or ():  # what was repaired or left out, said once
        print(f"nbprof: note: {note}", file=sys.stderr)
    # the embedding budget (timeline/served.py): --full none, --max-events N another
    extra = {"max_embedded_events": None} if options.full else (
        {"max_embedded_events": options.max_events} if options.max_events else {})
    path = save_html(trace, options.output, title=options.title or
                     f"nbprof: {' '.join(map(str, options.trace))}", **extra)
    print(f"nbprof: wrote {path} ({len(trace):,} CPU events, {len(trace.gpu_start_ns):,} GPU "
          "intervals)")
    return 0


def _diff(options) -> int:
    from . import load
    from .timeline.compare import save_compare_html

    before, after = load(options.before), load(options.after)
    path, comparison = save_compare_html(before, after, options.output,
                                         title=options.title or f"nbprof diff: {options.after}")
    print(comparison.table.table(row_limit=options.row_limit))
    print(f"nbprof: wrote {path}")
    return 0


def _run(options, script_args: list[str]) -> int:
    from . import profile, save_html

    script = pathlib.Path(options.script)
    if not script.is_file():
        print(f"nbprof: no script {script}: give the path of a Python file to profile",
              file=sys.stderr)
        return 2
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [str(script), *script_args]
    sys.path.insert(0, str(script.resolve().parent))  # as `python script.py` would
    exit_code = 0
    prof = profile()
    try:
        with prof:
            runpy.run_path(str(script), run_name="__main__")
    except SystemExit as stop:  # the script's own exit: keep its status, still write the page
        exit_code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except Exception:  # the script failed: say where (its traceback), then show what ran before
        traceback.print_exc()
        print("nbprof: the script raised; the page shows what ran before it", file=sys.stderr)
        exit_code = 1
    except KeyboardInterrupt:  # Ctrl-C ends a long run early: the page still shows what ran
        print("nbprof: interrupted; the page shows what ran before Ctrl-C", file=sys.stderr)
        exit_code = 130  # the shell's code for a SIGINT
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    trace = prof.trace
    if trace is None:  # the profiler never started (interrupted while starting): nothing to show
        return exit_code or 1
    from .ranks import expand_rank

    path = save_html(trace, expand_rank(options.output, trace.meta),
                     title=options.title or f"nbprof: {script.name}")
    print(f"nbprof: wrote {path} ({len(trace):,} CPU events, {len(trace.gpu_start_ns):,} GPU "
          "intervals)")
    if options.trace:
        written = expand_rank(options.trace, trace.meta)
        pathlib.Path(written).parent.mkdir(parents=True, exist_ok=True)  # out/ of many ranks
        if written.endswith(".parquet"):
            trace.to_parquet(written)
        else:
            trace.export_chrome_trace(written)
        print(f"nbprof: wrote {written}")
    if options.table:
        print(trace.table())
    return exit_code


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, script_args = _split_script_args(argv)
    parser = _parser()
    options, unknown = parser.parse_known_args(ours)
    if unknown and options.command != "run":
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    from . import TraceFormatError

    try:
        if options.command == "view":
            return _view(options)
        if options.command == "diff":
            return _diff(options)
        if options.command in ("ranks", "convert"):
            from . import rank_cli

            return getattr(rank_cli, options.command)(options)
        return _run(options, unknown + script_args)
    except (TraceFormatError, OSError, ValueError) as error:  # a bad trace file or ranks, a path
        # that can't be written
        print(f"nbprof: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
