"""The CLI's output paths, checked before any long work: never one of the inputs, never a device,
named with the suffix of what goes there (so swapped arguments can't overwrite a script), always
somewhere a file can be written; and the one-line text for an OSError (what failed, the path,
what to do)."""

from __future__ import annotations

import errno
import os
import pathlib

from ..formats.atomic import check_regular, check_writable, make_folders

PAGE_SUFFIXES = (".html", ".htm")
TRACE_SUFFIXES = (".json", ".json.gz", ".parquet")

# What to do, by errno: the reason alone ("Permission denied") leaves the user guessing.
_ADVICE = {
    errno.ENOSPC: "free space on that disk or write somewhere else",
    errno.EDQUOT: "free space (your disk quota is used up) or write somewhere else",
    errno.EFBIG: "the file is over a size limit (ulimit -f): raise it or write somewhere else",
    errno.EACCES: "give a path in a folder you can write to",
    errno.EPERM: "give a path in a folder you can write to",
    errno.EROFS: "that disk is read-only: give a path on another one",
    errno.ENOTDIR: "give a path whose folders are folders",
    errno.EISDIR: "give a file name, not a folder",
    errno.ENOENT: "check the path",
}


class CliError(Exception):
    """A bad command line: the message is the one line the user sees (after "nbprof: ")."""


def describe(error: OSError) -> str:
    """One line for an OSError: what failed, the path, what to do (no "[Errno 28]")."""
    reason = error.strerror or str(error)
    path = error.filename
    text = reason if path is None or str(path) in reason else f"{reason}: {path}"
    advice = _ADVICE.get(error.errno)
    return f"{text}; {advice}" if advice else text


def same_file(first, second) -> bool:
    """Whether two paths name one file: the same path once resolved (symlinks, "..", relative to
    the working folder), or two names (hard links) of one existing file."""
    if os.path.realpath(first) == os.path.realpath(second):
        return True
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist (yet): then they are different files
        return False


def check_output(path, what: str, option: str, inputs=(), suffixes=PAGE_SUFFIXES) -> pathlib.Path:
    """Raise CliError unless ``path`` may be written: it is none of ``inputs``, its name ends in one
    of ``suffixes``, it is a new file or a regular one (never a device, /dev/null included: the
    rename would replace it) and its folder takes files. ``option`` is how the command line named
    it (``-o``)."""
    target = pathlib.Path(path)
    for source in inputs:
        if same_file(target, source):
            raise CliError(f"{option} {target} is {source}, one of the inputs: writing it would "
                           f"replace that file; give {what} another name")
    try:  # a device, a pipe, a folder (or a symlink to one): said before the name's suffix
        check_regular(target, what)
    except OSError as error:
        raise CliError(describe(error)) from None
    if not str(target).lower().endswith(suffixes):
        raise CliError(f"{option} {target}: the name of {what} must end in {' or '.join(suffixes)}")
    try:
        # The folders are made now: the check then tries a real file in the real folder (asking
        # os.access about a folder not made yet says yes to root, even on a read-only disk).
        make_folders(target, what)
        check_writable(target, what)
    except OSError as error:
        raise CliError(describe(error)) from None
    return target


def check_distinct(outputs: dict[str, pathlib.Path]) -> None:
    """Two outputs of one command must not be one file (the second would replace the first)."""
    named = list(outputs.items())
    for index, (option, path) in enumerate(named):
        for other_option, other in named[index + 1:]:
            if same_file(path, other):
                raise CliError(f"{option} and {other_option} both name {path}: give each its own "
                               "file")
