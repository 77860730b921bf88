"""with_stack's Python functions from Kineto's own trace file, for a torch whose ``events()``
leaves them out.

torch 2.11's ``_disable_profiler().events()`` holds no Python function events (its
``_KinetoEvent`` has no ``is_python_function``), yet the trace Kineto writes (``result.save``,
what ``export_chrome_trace`` writes) holds every one, on the OS thread id that ``events()``
gives the ops (``device_resource_id``). So the trace is saved to a temporary folder (removed
after) and only its Python function slices are read, with one regex over Kineto's own layout
(``"ph": "X", "cat": "python_function", "name": ..., "pid": .., "tid": .., "ts": .., "dur": ..``
in that order, whitespace between as 2.11 or 2.13 writes it; times in µs with three decimals,
read as integers: no float rounding): the ops, kernels and
args around them are never parsed, so a file of 10^6 ops costs a scan of its bytes. The file is
read a block at a time. The rows join the ops' :class:`CpuRecords` as torch 2.13's do, and
convert.py nests them and builds each op's stack from them as it does there.
"""

from __future__ import annotations

import pathlib
import re
import tempfile
from typing import NamedTuple

import numpy as np
import orjson

_BLOCK_BYTES = 16 << 20
# More than one slice's head (a frame's name is a path and a function): a slice whose category
# starts before a block's last _KEEP_BYTES is read whole from that block.
_KEEP_BYTES = 1 << 20
_CATEGORY = b'"python_function"'
# From the category on: a literal the scan finds in C, and no other category can match (Kineto
# writes "ph" and "cat" before "name"; a python_function slice is always an X slice).
_SLICE = re.compile(
    rb'"python_function",\s*"name":\s*("[^"\\]*+(?:\\.[^"\\]*+)*+"),\s*'
    rb'"pid":\s*-?\d+,\s*"tid":\s*(-?\d+),\s*"ts":\s*(-?\d+)(?:\.(\d{1,3})\d*)?,\s*'
    rb'"dur":\s*(\d+)(?:\.(\d{1,3})\d*)?')
_BASE_TIME = re.compile(rb'"baseTimeNanoseconds":\s*(\d+)')


class PythonFunctions(NamedTuple):
    """Kineto's Python function slices, one row each, in the file's order."""

    names: list  # "file(line): function", as torch names them
    start_ns: np.ndarray  # int64, the ops' clock (Unix-epoch ns)
    end_ns: np.ndarray  # int64
    tid: np.ndarray  # int64, OS thread id
    unread: int  # python_function slices whose text is not in Kineto's layout: left out


def events_hold_python(events) -> bool:
    """Whether this torch's ``events()`` carries with_stack's Python functions (2.13's
    ``_KinetoEvent.is_python_function``); else they are only in Kineto's saved trace."""
    if len(events):
        return hasattr(type(events[0]), "is_python_function")
    import torch

    return hasattr(torch._C._autograd._KinetoEvent, "is_python_function")


def saved_python_functions(result) -> PythonFunctions:
    """The Python function slices of a stopped Kineto session (``_disable_profiler()``'s
    result), through its saved trace. Raises OSError where the trace cannot be written."""
    with tempfile.TemporaryDirectory(prefix="nbprof-kineto-") as folder:
        path = pathlib.Path(folder) / "kineto.json"
        result.save(str(path))
        return read_python_functions(path)


def _ns(whole: list, fraction: list) -> np.ndarray:
    """Decimal µs as text (whole part, up to 3 fraction digits) -> int64 ns, exactly."""
    whole_us = np.array(whole, dtype=np.bytes_).astype(np.int64) if whole else \
        np.zeros(0, np.int64)
    padded = [(digits or b"").ljust(3, b"0") for digits in fraction]
    ns = np.array(padded, dtype=np.bytes_).astype(np.int64) if padded else np.zeros(0, np.int64)
    return whole_us * 1000 + np.where(whole_us < 0, -ns, ns)


def read_python_functions(path, block_bytes: int = _BLOCK_BYTES,
                          keep_bytes: int = _KEEP_BYTES) -> PythonFunctions:
    """The Python function slices of a trace file Kineto wrote (plain JSON), read
    ``block_bytes`` at a time; ``keep_bytes``: more than one slice's head."""
    rows, found, base_ns = [], 0, None
    with open(path, "rb") as file:
        carried = b""
        while True:
            block = file.read(block_bytes)
            text = carried + block if carried else block
            if base_ns is None:  # a top-level key before the events: in the first block
                base = _BASE_TIME.search(text)
                base_ns = int(base.group(1)) if base else 0  # none: ts in epoch µs
            # A slice's text ends before the next category: the slices before the last category
            # are whole. Where that one is not near the end (or none is), its slice is whole
            # too, and only a category cut in two can be left: fewer bytes than the literal,
            # which no match or count here includes, carried on.
            end = len(text)
            last = text.rfind(_CATEGORY) if block else -1
            if last >= 0 and last >= len(text) - keep_bytes:
                end = last
            rows += _SLICE.findall(text, 0, end)
            found += text.count(_CATEGORY, 0, end)
            if not block:
                break
            carried = text[end:] if end < len(text) else text[len(text) - len(_CATEGORY) + 1:]
    names, tids, starts, start_fractions, durations, duration_fractions = \
        map(list, zip(*rows)) if rows else ([],) * 6
    start_ns = _ns(starts, start_fractions) + base_ns
    tid = np.array(tids, dtype=np.bytes_).astype(np.int64) if tids else np.zeros(0, np.int64)
    decoded = orjson.loads(b"[" + b",".join(names) + b"]") if names else []
    return PythonFunctions(decoded, start_ns, start_ns + _ns(durations, duration_fractions), tid,
                           found - len(rows))


def with_python_functions(records, functions: PythonFunctions):
    """:class:`CpuRecords` with ``functions`` appended as Python rows (as torch 2.13's
    ``events()`` gives them: no shapes, stacks or annotation flag of their own)."""
    count = len(functions.names)
    cuda_us = None if records.cuda_us is None else \
        np.concatenate([records.cuda_us, np.full(count, -1.0)])
    return records._replace(
        names=records.names + functions.names,
        start_ns=np.concatenate([records.start_ns, functions.start_ns]),
        end_ns=np.concatenate([records.end_ns, functions.end_ns]),
        tid=np.concatenate([records.tid, functions.tid]),
        is_annotation=np.concatenate([records.is_annotation, np.zeros(count, np.bool_)]),
        is_python=np.concatenate([records.is_python, np.ones(count, np.bool_)]),
        cuda_us=cuda_us)
