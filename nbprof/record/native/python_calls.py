"""with_stack on the native path: python_calls.cpp's Python calls and returns, read back as
slices named as torch's Python tracer names them ("file(line): function", the file without its
sys.path prefix, the line the function's first instruction has).

Every thread that exists at the start is traced from the frames it is in; a thread started while
recording (``threading.Thread``) from its first call, through threading's profile hook (torch's
tracer records no thread started after it).
"""

from __future__ import annotations

import ctypes
import functools
import sys
import threading
from typing import NamedTuple

import numpy as np

from ..threads import hand_over
from .build import python_headers_why_not

_P64, _P32 = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int32)


class _Slices(ctypes.Structure):  # python_calls.h's NbpPySlices
    _fields_ = [("start_ns", _P64), ("end_ns", _P64), ("os_tid", _P64), ("key", _P32)]


class PythonSlices(NamedTuple):
    """One row per Python call (a frame still running at stop ends then)."""

    start_ns: np.ndarray  # int64, Unix-epoch ns (the ops' clock)
    end_ns: np.ndarray  # int64
    os_tid: np.ndarray  # int64
    name: np.ndarray  # int32: index into names
    names: list  # "file(line): function"

    def __len__(self) -> int:
        return len(self.start_ns)


def _path_prefixes() -> list[str]:
    """The prefixes torch's tracer strips from file names (sys.path, site-packages, torch's
    parent), longest first: the same names on both paths."""
    try:
        from torch.profiler.python_tracer import _prefix_regex
        return _prefix_regex()
    except (ImportError, AssertionError):  # another torch: its names are kept whole
        return []


MODULE_CALL = -2  # python_calls.h: the key's object is an nn.Module called


def frame_name(code, line: int, prefixes: list[str]) -> str:
    """``line`` -1: a call, named by the line of its code's first instruction that has one
    (what torch's tracer reads at the call: the ``def`` line, 0 for a module or a notebook
    cell)."""
    if line < 0:
        line = next((line for _, _, line in code.co_lines() if line is not None), 0)
    filename = code.co_filename
    for prefix in prefixes:
        if filename.startswith(prefix):
            filename = filename[len(prefix):]
            break
    return f"{filename}({line}): {code.co_name}"


def python_calls_why_not() -> str:
    """Why the library has no Python profile function (built without Python's headers), and what
    to do."""
    return python_headers_why_not() or ("the library was built elsewhere without this Python's "
                                        "headers: prebuild it with --python-include")


@functools.cache
def _bound(path: str):
    """python_calls.cpp's functions in the library at ``path``, typed: bound once per library
    (a PyDLL and its function pointers cost ~40 µs, and every with_stack or memory start asks)."""
    lib = ctypes.PyDLL(path)
    lib.nbp_py_available.restype = lib.nbp_py_start.restype = ctypes.c_int
    lib.nbp_py_start.argtypes = [ctypes.c_int]
    lib.nbp_py_trace_thread.argtypes, lib.nbp_py_trace_thread.restype = [ctypes.py_object], \
        ctypes.c_int
    lib.nbp_py_stop.restype = lib.nbp_py_codes.restype = lib.nbp_py_fetch.restype = \
        ctypes.c_int64
    lib.nbp_py_codes.argtypes = [ctypes.POINTER(ctypes.c_void_p), _P32, ctypes.c_int64]
    lib.nbp_py_fetch.argtypes = [ctypes.POINTER(_Slices), ctypes.c_int64]
    lib.nbp_py_release.restype = lib.nbp_py_unhook_memory.restype = None
    lib.nbp_py_hook_memory.restype = ctypes.c_int
    lib.nbp_py_set_module_call.argtypes, lib.nbp_py_set_module_call.restype = \
        [ctypes.c_void_p], None
    return lib


class PythonCalls:
    """python_calls.cpp through ctypes.PyDLL: each call holds the GIL, which the profile
    function's buffers rely on (no lock of their own). One per session (it keeps the hook it
    replaced); the library's binding is shared."""

    def __init__(self, path):
        self.lib = _bound(str(path))
        self._previous_hook = None

    def available(self) -> bool:
        return bool(self.lib.nbp_py_available())

    def _trace_new_thread(self, frame, event, arg):
        """threading's profile hook, run once by each thread started while recording: the hook
        that was there before takes this call (the profile's thread names, a user's), then the C
        profile function takes over from this call on, forwarding each event to the thread's
        own profile function."""
        hand_over(self._previous_hook, frame, event, arg)
        self.lib.nbp_py_trace_thread(frame)  # nothing once recording has stopped meanwhile

    def start(self, hook_only: bool = False) -> None:
        """``hook_only``: the profile function runs and records nothing (benchmarks: the floor)."""
        module = sys.modules.get("torch.nn.modules.module")  # a module's call: its own name
        call = getattr(getattr(getattr(module, "Module", None), "__call__", None), "__code__", None)
        self.lib.nbp_py_set_module_call(id(call) if call is not None else None)
        if self.lib.nbp_py_start(int(hook_only)) != 0:
            raise RuntimeError("nbprof's Python call recorder is already on (or this is a "
                               "forked child)")
        self._previous_hook = threading.getprofile()
        threading.setprofile(self._trace_new_thread)

    def stop(self) -> PythonSlices:
        threading.setprofile(self._previous_hook)
        self._previous_hook = None
        count = int(self.lib.nbp_py_stop())
        try:
            return self._read(max(count, 0))
        finally:
            self.lib.nbp_py_release()

    def _read(self, count: int) -> PythonSlices:
        keys = int(self.lib.nbp_py_codes(None, None, 0))
        codes, lines = (ctypes.c_void_p * keys)(), np.empty(keys, np.int32)
        self.lib.nbp_py_codes(codes, lines.ctypes.data_as(_P32), keys)
        prefixes = _path_prefixes()
        # the library holds a reference to each object until nbp_py_release
        objects = [ctypes.cast(code, ctypes.py_object).value for code in codes]
        instances: dict[str, int] = {}  # per class name: its modules numbered in call order
        names = []
        for thing, line in zip(objects, lines.tolist()):
            if line == MODULE_CALL:
                kind = type(thing).__name__
                instances[kind] = instances.get(kind, -1) + 1
                names.append(f"nn.Module: {kind}_{instances[kind]}")
            else:
                names.append(frame_name(thing, line, prefixes))
        columns = dict(start_ns=np.empty(count, np.int64), end_ns=np.empty(count, np.int64),
                       os_tid=np.empty(count, np.int64), name=np.empty(count, np.int32))
        out = _Slices(*(columns[key].ctypes.data_as(kind) for key, kind in (
            ("start_ns", _P64), ("end_ns", _P64), ("os_tid", _P64), ("name", _P32))))
        rows = int(self.lib.nbp_py_fetch(ctypes.byref(out), count))
        return PythonSlices(**{key: value[:rows] for key, value in columns.items()}, names=names)
