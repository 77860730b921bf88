"""The ``nbprof`` command: ``nbprof view TRACE... -o PAGE.html``, ``nbprof run [-o PAGE.html
--trace TRACE.json.gz --table] SCRIPT [ARGS...]``, ``nbprof ranks DIR``, ``nbprof convert IN... -o
DIR`` and ``nbprof diff BEFORE AFTER -o PAGE.html``.

``view`` of several files, a folder or a glob merges them as the ranks of one job. ``--trace``
may say ``{rank}``: under torchrun each rank writes its own file.

``run`` (run.py) profiles a Python script the way ``%%cudaprof`` profiles a cell; nbprof's
options come before the script, and everything after the script's path is the script's own.

No output may be one of the inputs, and every output path is checked before the work starts
(paths.py). Bad input, a path that can't be written, Ctrl-C: one line on stderr, no traceback.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from .paths import CliError, check_output, describe


def _parser() -> tuple[argparse.ArgumentParser, dict[str, bool]]:
    """The parser, and which of ``run``'s options take a value (to find where the script is)."""
    # allow_abbrev=False everywhere: "--out" must not be taken for "--output" (it may be the
    # script's own option, or a typo that would silently write somewhere else).
    parser = argparse.ArgumentParser(
        prog="nbprof", description="A GPU profiler's timeline as a standalone HTML page.",
        allow_abbrev=False)
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str, **kwargs) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=help, allow_abbrev=False, **kwargs)

    view = command("view", "draw a trace file (nbprof export, torch.profiler / Kineto JSON, "
                           ".json.gz) as a timeline page")
    view.add_argument("trace", nargs="+", help="the trace file; several files, a folder or a "
                                               "glob: the ranks of one job, merged")
    view.add_argument("-o", "--output", required=True, help="the HTML page to write")
    view.add_argument("--title", help="the page's title")
    view.add_argument("--full", action="store_true", help="embed every event, however many (past "
                      "5M events the page embeds a coarser level by default)")
    view.add_argument("--max-events", type=_positive, default=None, metavar="N",
                      help="embed at most N events (default 5000000); past it, coarser levels")
    view.add_argument("--max-size", type=_size, default=None, metavar="SIZE",
                      help="read at most this much uncompressed trace data (default 8G; "
                           "suffixes K, M, G, T)")
    run = command("run", "profile a Python script and write its timeline page",
                  usage="nbprof run [-h] [-o PAGE.html] [--trace TRACE] [--table] [--memory] [--title TITLE] "
                        "[--recorder {auto,native,torch}] "
                        "SCRIPT [ARGS ...]")
    run.add_argument("-o", "--output", metavar="PAGE.html", help="the HTML page to write (default: "
                     "SCRIPT.nbprof.html beside the script; {rank} becomes the process's rank)")
    run.add_argument("--trace", help="also write the trace (Chrome JSON, .json.gz compresses; "
                                     ".parquet; {rank} becomes the process's rank)")
    run.add_argument("--table", action="store_true", help="print the per-op summary table")
    run.add_argument("--memory", action="store_true", help="record every allocation and free")
    run.add_argument("--title", help="the page's title")
    run.add_argument("--recorder", choices=("auto", "native", "torch"), default="auto",
                     help="what records: nbprof's native observer where it builds (auto, the "
                          "default), only it (native), or torch's profiler (torch)")
    run.add_argument("script", help="the Python script to run; every argument after it is the "
                                    "script's own (its sys.argv), nbprof's options go before it")
    diff = command("diff", "what changed between two trace files: the op diff table and both "
                           "timelines aligned by step, as a page")
    diff.add_argument("before", help="the earlier trace file")
    diff.add_argument("after", help="the later trace file")
    diff.add_argument("-o", "--output", required=True, help="the HTML page to write")
    diff.add_argument("--title", help="the page's title")
    diff.add_argument("--row-limit", type=int, default=20, help="rows of the diff to print (-1: all)")
    ranks = command("ranks", "per-rank summary of a job's trace files (DuckDB over Parquet, one "
                             "file at a time) and its straggler")
    ranks.add_argument("traces", nargs="+", help="a folder of per-rank .parquet files (or JSON "
                                                 "traces, a glob, several paths)")
    ranks.add_argument("--memory-limit", default="1GB", type=_memory_limit,
                       help="DuckDB's memory limit (default 1GB)")
    ranks.add_argument("--json", action="store_true", help="print the rows as JSON")
    convert = command("convert", "write JSON traces as per-rank Parquet files, one process per core")
    convert.add_argument("traces", nargs="+", help="trace files, folders or globs")
    convert.add_argument("-o", "--output", required=True, help="the folder to write them into")
    convert.add_argument("-j", "--jobs", type=_positive, help="processes (default: one per core)")
    return parser, {option: action.nargs != 0 for action in run._actions
                    for option in action.option_strings}


def _split_run(argv: list[str], takes_value: dict[str, bool]) -> tuple[list[str], list[str]]:
    """``run``'s arguments up to the script's path (nbprof's) and after it (the script's)."""
    if not argv or argv[0] != "run":
        return argv, []
    from .run import script_position

    position = script_position(argv[1:], takes_value)
    if position is None:
        return argv, []
    return argv[:position + 2], argv[position + 2:]


def _positive(text: str) -> int:
    """A whole number of at least 1 (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _memory_limit(text: str) -> str:
    """DuckDB's memory limit, "4GB" or "512MiB" (argparse type): checked here, as it goes into
    DuckDB's SET statement."""
    if not re.fullmatch(r"\d+(\.\d+)?\s*([KMGT]i?B|B)", text.strip(), re.IGNORECASE):
        raise argparse.ArgumentTypeError(f"not a memory size: {text!r} (e.g. 1GB, 512MB, 2GiB)")
    return text.strip()


def _size(text: str) -> int:
    """A byte count from "8G", "512M", "100000" (argparse type)."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    number, unit = text.strip().upper().rstrip("IB"), ""
    if number[-1:] in units:
        number, unit = number[:-1], number[-1]
    try:
        size = int(float(number) * units[unit])
    except (ValueError, OverflowError):  # "x", "nan"; "inf", "1e400"
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (a whole number of bytes, or "
                                         "with K, M, G, T: e.g. 16G, 512M)") from None
    if size <= 0:
        raise argparse.ArgumentTypeError(f"the size must be positive, not {text!r}")
    return size


def _view(options) -> int:
    from .. import load, save_html
    from ..formats.chrome import DEFAULT_MAX_BYTES
    from ..ranks import trace_paths

    inputs = _existing(trace_paths(options.trace))
    page = check_output(options.output, "the timeline page", "-o",
                        inputs=inputs)  # before a load that may take minutes
    source = options.trace[0] if len(options.trace) == 1 else options.trace
    from ..formats.chrome.progress import StderrLine

    trace = load(source, max_bytes=options.max_size or DEFAULT_MAX_BYTES,
                 progress=StderrLine(source) if len(options.trace) == 1 else None)
    for note in trace.meta.get("notes") or ():  # what was repaired or left out, said once
        print(f"nbprof: note: {note}", file=sys.stderr)
    # the embedding budget (timeline/served.py): --full none, --max-events N another
    extra = {"max_embedded_events": None} if options.full else (
        {"max_embedded_events": options.max_events} if options.max_events is not None else {})
    path = save_html(trace, page, title=options.title or
                     f"nbprof: {' '.join(map(str, options.trace))}", **extra)
    print(f"nbprof: wrote {path} ({len(trace):,} CPU events, {len(trace.gpu_start_ns):,} GPU "
          "intervals)")
    return 0


def _diff(options) -> int:
    from .. import load
    from ..timeline.compare import save_compare_html

    page = check_output(options.output, "the diff page", "-o",
                        inputs=_existing([options.before, options.after]))
    before, after = load(options.before), load(options.after)
    path, comparison = save_compare_html(before, after, page,
                                         title=options.title or f"nbprof diff: {options.after}")
    print(comparison.report(row_limit=options.row_limit))
    print(f"nbprof: wrote {path}")
    return 0


def _existing(paths: list) -> list:
    """The input paths, each checked to exist before any output folder is made for them."""
    for path in paths:
        if not os.path.exists(path):
            raise CliError(f"no trace file {path}: check the path")
    return paths


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, run_takes_value = _parser()
    ours, script_args = _split_run(argv, run_takes_value)
    options = parser.parse_args(ours)
    try:
        return _command(options, script_args)
    except CliError as error:  # a bad command line, said before any work was done
        print(f"nbprof: {error}", file=sys.stderr)
        return 1
    except OSError as error:  # a file that can't be read, a path that can't be written
        print(f"nbprof: {describe(error)}", file=sys.stderr)
        return 1
    except ValueError as error:  # a bad trace file (TraceFormatError), bad ranks
        print(f"nbprof: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C while loading or drawing: the output, if any, is untouched
        print(f"nbprof: interrupted; {options.command} wrote nothing", file=sys.stderr)
        return 130


def _command(options, script_args: list[str]) -> int:
    if options.command == "view":
        return _view(options)
    if options.command == "diff":
        return _diff(options)
    if options.command in ("ranks", "convert"):
        from . import ranks as rank_cli

        return getattr(rank_cli, options.command)(options)
    from .run import run

    return run(options, script_args)
