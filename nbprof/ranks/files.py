"""Which files make a job and which rank each is.

A rank is named, in this order, by the file's own meta (nbprof's recording writes it, Kineto
writes distributedInfo), by a number after "rank" in the file's name, or by its place among the
files.
"""

from __future__ import annotations

import os
import pathlib
import re

from ..model import Trace
from .owners import meta_rank

_RANK_IN_NAME = re.compile(r"rank[_\-.]?(\d+)", re.IGNORECASE)
_RANK_LIMIT = 1 << 31  # ranks are int32 in the columns, as owners.meta_rank allows
TRACE_SUFFIXES = (".json", ".json.gz", ".parquet")


def trace_paths(sources) -> list[pathlib.Path]:
    """The trace files named by a path, a folder (its .json/.json.gz/.parquet files), a glob, or a
    list of those, in rank-file order (sorted)."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    paths: list[pathlib.Path] = []
    for source in sources:
        source = pathlib.Path(source)
        if source.is_dir():
            found = sorted(p for p in source.iterdir() if p.name.endswith(TRACE_SUFFIXES))
            if not found:
                raise FileNotFoundError(f"{source}: no .json, .json.gz or .parquet trace in it")
            paths += found
        elif not source.exists() and any(c in str(source) for c in "*?["):  # a file's own
            # name may hold "[" or "*": a path that exists is taken as it is, never as a pattern
            found = sorted(pathlib.Path(source.anchor or ".").glob(
                str(source.relative_to(source.anchor)) if source.anchor else str(source)))
            if not found:
                raise FileNotFoundError(f"{source}: the pattern matches no file")
            paths += found
        else:
            paths.append(source)
    return paths


def is_many(source) -> bool:
    """Whether ``nbprof.load(source)`` means several ranks (a list, a folder or a glob)."""
    if isinstance(source, (list, tuple)):
        return True
    text = str(source)
    if pathlib.Path(text).is_file():  # a file whose name has a "[" is still one file
        return False
    return pathlib.Path(text).is_dir() or any(c in text for c in "*?[")


def rank_of(trace: Trace, path, position: int) -> int:
    """A file's rank: its own meta (Kineto's distributedInfo, nbprof's recording), else a number
    after "rank" in its name, else its position among the files."""
    rank = meta_rank(trace)
    if rank >= 0:
        return rank
    found = _RANK_IN_NAME.search(pathlib.Path(str(path)).name)
    if not found:
        return position
    if int(found.group(1)) >= _RANK_LIMIT:
        raise ValueError(f"{path}: {found.group(1)} after \"rank\" in its name is too large for a "
                         f"rank (at most {_RANK_LIMIT - 1}); rename the file rankN")
    return int(found.group(1))
