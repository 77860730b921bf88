"""The one argument parser of ``%%cudaprof`` / ``%cudaprof`` (rule 7 of DESIGN.md).

Kept apart from magic.py so it imports nothing heavy (no torch, no IPython) and can be unit-tested alone.
"""

from __future__ import annotations

import argparse
import io
import keyword
import shlex

from ..analysis.averages import SORT_KEYS

PROG = "%%cudaprof"


class CudaprofUsageError(ValueError):
    """Bad options: the message holds the usage line and what was wrong."""


class _Parser(argparse.ArgumentParser):
    # argparse would print to stderr and exit the kernel's interpreter: raise instead.
    def error(self, message):
        raise CudaprofUsageError(f"{self.format_usage()}{self.prog}: error: {message}")


def _whole_number(text: str, minimum: int, rule: str) -> int:
    # argparse's own message for a ValueError names the converter ("invalid _positive_int
    # value"): say it in the user's terms instead.
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}: give a whole number") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{rule}, got {value}")
    return value


def _positive_int(text: str) -> int:
    return _whole_number(text, 1, "must be at least 1")


def _non_negative_int(text: str) -> int:
    return _whole_number(text, 0, "must be 0 or more")


def _row_limit(text: str) -> int:
    return _whole_number(text, -1, "must be -1 (all rows) or more")


def _identifier(text: str) -> str:
    # "class" is an identifier to str.isidentifier, yet `class = ...` is a SyntaxError: the
    # variable could be neither read nor written by the notebook's code.
    if not text.isidentifier() or keyword.iskeyword(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Python variable name" + (" (it is a keyword)" if
                                                         keyword.iskeyword(text) else ""))
    return text


def _chrome_path(text: str) -> str:
    if not (text.endswith(".json") or text.endswith(".json.gz")):
        raise argparse.ArgumentTypeError(
            f"{text!r}: a Chrome trace path must end in .json or .json.gz")
    return text


def argument_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG, add_help=False, allow_abbrev=False,
        description="Profile the cell (or, as %cudaprof, one statement) with nbprof's CUDA-event "
                    "profiler and show its timeline under the cell.",
        epilog="Example: %%cudaprof -o trace --warmup 1 --table")
    parser.add_argument("-h", "--help", action="store_true", help="show this help; the cell does not run")
    parser.add_argument("-o", dest="variable", metavar="VAR", type=_identifier,
                        help="store the Trace in the variable VAR of the notebook")
    parser.add_argument("--force", action="store_true",
                        help="let -o VAR replace a Python builtin (print, len) or an imported "
                             "module (torch) in the notebook")
    parser.add_argument("--export", metavar="PATH", type=_chrome_path,
                        help="also write a Chrome trace (.json or .json.gz) for Perfetto")
    parser.add_argument("--cpu-only", action="store_true", help="record CPU times only, even on a GPU")
    parser.add_argument("--kernels", dest="kernels", action="store_const", const=True, default=None,
                        help="on a GPU, require CUPTI's kernels beside the CUDA events")
    parser.add_argument("--no-kernels", dest="kernels", action="store_const", const=False,
                        help="on a GPU, CUDA events only (no CUPTI: the least overhead)")
    parser.add_argument("--record-shapes", action="store_true", help="record the input shapes of each op")
    parser.add_argument("--recorder", choices=("auto", "native", "torch"), default="auto",
                        help="what records: nbprof's native observer where it builds (auto), only it, or torch's profiler")
    parser.add_argument("--with-stack", action="store_true", help="record the Python stack of each op")
    parser.add_argument("--memory", action="store_true",
                        help="record every allocation and free (a memory lane per device)")
    parser.add_argument("--warmup", metavar="N", type=_non_negative_int, default=0,
                        help="run the cell N times unprofiled first")
    parser.add_argument("--repeat", metavar="N", type=_positive_int, default=1,
                        help="profile N runs; the summary gives the mean, min and max per op")
    parser.add_argument("--table", action="store_true", help="also print the summary table")
    parser.add_argument("--sort", metavar="KEY", choices=SORT_KEYS, default="cpu_time_total",
                        help=f"sort the summary by KEY, one of: {', '.join(SORT_KEYS)}")
    parser.add_argument("--row-limit", metavar="N", type=_row_limit, default=20,
                        help="rows in the printed summary (-1: all)")
    parser.add_argument("--no-display", action="store_true", help="show no timeline widget")
    parser.add_argument("--compare", metavar="VAR", type=_identifier,
                        help="add a Compare tab: what changed since the Trace in VAR (re-running a "
                             "cell with -o VAR compares with VAR's previous value by itself)")
    return parser


def shadowing(name: str, namespace: dict) -> str | None:
    """What binding ``name`` in ``namespace`` would hide that the notebook's code still needs (a
    builtin, an imported module), said for the error; None when nothing is."""
    import builtins
    import types

    value = namespace.get(name)
    if isinstance(value, types.ModuleType):
        return f"{name} is the module {value.__name__}, imported in this notebook"
    if name not in namespace and hasattr(builtins, name):
        return f"{name} is a Python builtin"
    return None


def parse_options(line: str) -> argparse.Namespace:
    """The options of a ``%%cudaprof`` line; raises CudaprofUsageError on bad input."""
    try:
        tokens = shlex.split(line)
    except ValueError as error:  # an unclosed quote
        raise CudaprofUsageError(f"{argument_parser().format_usage()}{PROG}: error: {error}") from None
    return argument_parser().parse_args(tokens)


def split_line_magic(line: str) -> tuple[str, str]:
    """``%cudaprof [options] STATEMENT``: the options part and the statement, which is kept verbatim
    (shlex would eat the statement's own quotes)."""
    parser = argument_parser()
    takes_value = {option: action.nargs != 0
                   for action in parser._actions for option in action.option_strings}
    lexer = shlex.shlex(io.StringIO(line), posix=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    options_end = 0
    expecting_value = False
    while True:
        token = lexer.get_token()
        if token is None or token == lexer.eof:
            return line, ""
        if expecting_value:
            expecting_value = False
        elif token == "--":
            return line[:options_end], line[lexer.instream.tell():].strip()
        elif token.startswith("-") and not _is_number(token):
            # "--export=x.json" and "-oVAR" carry their value in the token itself.
            expecting_value = takes_value.get(token, False)
        else:
            return line[:options_end], line[options_end:].strip()
        options_end = lexer.instream.tell()


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def help_text() -> str:
    return argument_parser().format_help()
