"""The native observer through ctypes: switch it on and off, read its records as numpy columns.

:class:`NativeRecords` is what a profile read: one row per op or range, columns only (no Python
object per op), and small per-thread and name tables. The library's buffers are handed back by
:meth:`NativeLibrary.release` as soon as the columns exist.
"""

from __future__ import annotations

import ctypes
from typing import NamedTuple

import numpy as np

# at::RecordScope's values (ATen/record_function.h), the ones the callback asks for
SCOPE_FUNCTION, SCOPE_BACKWARD, SCOPE_USER = 0, 1, 7
# observer.cpp's Flags
FLAG_ASYNC, FLAG_OTHER_THREAD, FLAG_ENDED, FLAG_CAPTURING, FLAG_GPU_ERROR = 1, 2, 4, 8, 16
FLAG_GPU_END = 32
ABI_VERSION = 3  # observer.h's NBP_ABI_VERSION
MAX_ANCHORS = 32  # observer.cpp: two per device, 16 devices

_P64, _P32 = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int32)
_P16, _P8 = ctypes.POINTER(ctypes.c_uint16), ctypes.POINTER(ctypes.c_uint8)
_PS8, _PF64 = ctypes.POINTER(ctypes.c_int8), ctypes.POINTER(ctypes.c_double)


class _Columns(ctypes.Structure):  # observer.h's NbpColumns, field for field
    _fields_ = [("start_ns", _P64), ("end_ns", _P64), ("thread", _P32), ("name", _P32),
                ("seq", _P64), ("fwd_tid", _P64), ("depth", _P16), ("scope", _P8),
                ("flags", _P8), ("thread_os_tid", _P64), ("thread_rf_tid", _P64),
                ("names", ctypes.c_char_p), ("shapes", _P64), ("shapes_base", _P64),
                ("shape_row", _P64), ("shape_at", _P64), ("shape_rows", ctypes.c_int64),
                ("threads", ctypes.c_int64), ("name_count", ctypes.c_int64),
                ("gpu_start", _PF64), ("gpu_end", _PF64), ("device", _PS8), ("stream", _P64)]


class GpuRecords(NamedTuple):
    """A GPU profile's events: offsets in ns from each device's earliest event (NaN: none),
    measured event to event and summed in double (observer.cpp), placed by gpu_clock.py."""
    start_offset_ns: np.ndarray  # float64 per row
    end_offset_ns: np.ndarray  # float64 per row
    device: np.ndarray  # int8 per row, -1: no events
    stream: np.ndarray  # int64 per row: c10::StreamId
    anchor_cpu_ns: np.ndarray  # int64, Unix-epoch ns
    anchor_device: np.ndarray  # int8
    anchor_offset_ns: np.ndarray  # float64
    error: str  # why no GPU time was placed ("" if it was)


class NativeRecords(NamedTuple):
    start_ns: np.ndarray  # int64, Unix-epoch ns
    end_ns: np.ndarray  # int64 (= start for an op still open at stop)
    thread: np.ndarray  # int32: index into os_tids / rf_tids
    name: np.ndarray  # int32: index into names (may repeat a name: tables are per thread)
    seq: np.ndarray  # int64, -1 where none
    fwd_tid: np.ndarray  # int64: RecordFunction thread id of a backward node's forward op
    depth: np.ndarray  # uint16, per thread
    scope: np.ndarray  # uint8, at::RecordScope
    flags: np.ndarray  # uint8, FLAG_*
    os_tids: np.ndarray  # int64 per thread table entry
    rf_tids: np.ndarray  # int64 per thread table entry
    names: list  # str
    shapes: dict  # row -> list of input shapes (record_shapes only)
    gpu: GpuRecords | None = None  # a profile with CUDA events only
    python: object = None  # python_calls.PythonSlices: with_stack's Python calls, else None

    def __len__(self) -> int:
        return len(self.start_ns)


def _pointer(array: np.ndarray, kind):
    return array.ctypes.data_as(kind)


class NativeLibrary:
    """The loaded observer. One per process: its state (the callback, the buffers) is global."""

    def __init__(self, path):
        lib = ctypes.CDLL(str(path))
        lib.nbp_abi_version.restype = ctypes.c_int
        if lib.nbp_abi_version() != ABI_VERSION:
            raise RuntimeError(f"{path} speaks ABI {lib.nbp_abi_version()}, not {ABI_VERSION}")
        lib.nbp_last_error.restype = ctypes.c_char_p
        lib.nbp_start.argtypes, lib.nbp_start.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        for name in ("nbp_stop", "nbp_thread_count", "nbp_names_size", "nbp_retained_bytes"):
            getattr(lib, name).restype = ctypes.c_int64
        lib.nbp_shapes_size.argtypes, lib.nbp_shapes_size.restype = [_P64, _P64], ctypes.c_int64
        lib.nbp_fetch.argtypes = [ctypes.POINTER(_Columns), ctypes.c_int64]
        lib.nbp_fetch.restype = ctypes.c_int64
        lib.nbp_release.restype = None
        lib.nbp_gpu_unavailable.restype = lib.nbp_gpu_error.restype = ctypes.c_char_p
        lib.nbp_gpu_configure.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_uint64]
        lib.nbp_gpu_configure.restype = ctypes.c_int
        lib.nbp_gpu_anchors.argtypes = [_P64, _PS8, _PF64]
        lib.nbp_gpu_anchors.restype = lib.nbp_gpu_events.restype = ctypes.c_int64
        lib.nbp_range_name.argtypes, lib.nbp_range_name.restype = [ctypes.c_char_p], ctypes.c_int32
        lib.nbp_range_stream.argtypes = [ctypes.c_uint64]
        lib.nbp_range_stream.restype = ctypes.c_int32
        # nbp_range_push and nbp_range_pop keep no argtypes: three small ints (C int), each call
        # ~230 ns cheaper than through argtypes (ranges.h)
        self.lib = lib
        self._gpu = False
        self.path = str(path)

    def gpu_unavailable(self) -> str:
        """"" where this process can record CUDA events per op, else why not (one line)."""
        return self.lib.nbp_gpu_unavailable().decode(errors="replace")

    def created_events(self) -> int:
        """CUDA events the observer's pools hold (created once, re-recorded by later profiles)."""
        return int(self.lib.nbp_gpu_events())

    def range_calls(self):
        """(name, stream, push, pop) for ranges.h's own ranges (a numba launch on its thread):
        ``name(text)`` and ``stream(raw handle)`` give the small ids (-1: a table is full) that
        ``push(name id, stream id, device)`` takes (device -1: the current one), each looked up
        once; ``pop()`` closes the thread's innermost range. A push returns 1 where it was
        recorded (0: nothing records) and is always paired with a pop."""
        lib = self.lib

        def name(text: str) -> int:
            return lib.nbp_range_name(text.encode("utf-8", "replace"))

        return name, lib.nbp_range_stream, lib.nbp_range_push, lib.nbp_range_pop

    def start(self, record_shapes: bool = False, machinery_only: bool = False, *,
              gpu: bool = False, gpu_depth: int | None = None, anchor_devices=()) -> None:
        """``machinery_only``: the callback runs and records nothing (benchmarks: the floor).
        ``gpu``: a CUDA event pair per op at a depth below ``gpu_depth`` (None: every op), with
        start anchors on ``anchor_devices`` (those with a CUDA context)."""
        mask = sum(1 << device for device in anchor_devices if 0 <= device < 16)
        depth = -1 if gpu_depth is None else int(gpu_depth)
        if self.lib.nbp_gpu_configure(int(gpu), depth, mask) != 0:
            raise RuntimeError(f"nbprof's native observer cannot record CUDA events: "
                               f"{self.lib.nbp_last_error().decode(errors='replace')}")
        self._gpu = gpu
        if self.lib.nbp_start(int(record_shapes), int(machinery_only)) != 0:
            raise RuntimeError(f"nbprof's native observer could not start: "
                               f"{self.lib.nbp_last_error().decode(errors='replace')}")

    def stop(self) -> NativeRecords:
        """Switch the observer off and read what it recorded; its buffers are released."""
        try:
            return self._read(self.lib.nbp_stop())
        finally:
            self.lib.nbp_release()

    def retained_bytes(self) -> int:
        """Buffer memory the observer keeps for the next profile (already faulted in)."""
        return int(self.lib.nbp_retained_bytes())

    def _read(self, count: int) -> NativeRecords:
        threads = int(self.lib.nbp_thread_count())
        columns = dict(start_ns=np.empty(count, np.int64), end_ns=np.empty(count, np.int64),
                       thread=np.empty(count, np.int32), name=np.empty(count, np.int32),
                       seq=np.empty(count, np.int64), fwd_tid=np.empty(count, np.int64),
                       depth=np.empty(count, np.uint16), scope=np.empty(count, np.uint8),
                       flags=np.empty(count, np.uint8))
        os_tids, rf_tids = np.zeros(threads, np.int64), np.zeros(threads, np.int64)
        names = ctypes.create_string_buffer(max(int(self.lib.nbp_names_size()), 1))
        shapes_base = np.zeros(max(threads, 1), np.int64)
        with_shapes = np.zeros(1, np.int64)
        shapes_size = int(self.lib.nbp_shapes_size(_pointer(shapes_base, _P64),
                                                   _pointer(with_shapes, _P64)))
        shapes = np.empty(shapes_size, np.int64)
        shape_row = np.empty(int(with_shapes[0]), np.int64)
        shape_at = np.empty(int(with_shapes[0]), np.int64)
        gpu = self._gpu and count >= 0
        gpu_columns = dict(start_offset_ns=np.empty(count if gpu else 0),
                           end_offset_ns=np.empty(count if gpu else 0),
                           device=np.empty(count if gpu else 0, np.int8),
                           stream=np.empty(count if gpu else 0, np.int64))
        out = _Columns(
            *(_pointer(columns[key], kind) for key, kind in (
                ("start_ns", _P64), ("end_ns", _P64), ("thread", _P32), ("name", _P32),
                ("seq", _P64), ("fwd_tid", _P64), ("depth", _P16), ("scope", _P8),
                ("flags", _P8))),
            _pointer(os_tids, _P64), _pointer(rf_tids, _P64),
            ctypes.cast(names, ctypes.c_char_p),
            _pointer(shapes, _P64) if shapes_size else None, _pointer(shapes_base, _P64),
            _pointer(shape_row, _P64), _pointer(shape_at, _P64), len(shape_row), 0, 0,
            *((_pointer(gpu_columns[key], kind) if gpu else None) for key, kind in (
                ("start_offset_ns", _PF64), ("end_offset_ns", _PF64), ("device", _PS8),
                ("stream", _P64))))
        rows = int(self.lib.nbp_fetch(ctypes.byref(out), count))
        gpu_records = self._read_gpu(gpu_columns, rows) if gpu else None
        self._gpu = False
        name_list = [name.decode("utf-8", "replace")
                     for name in names.raw.split(b"\0")[:out.name_count]]
        return NativeRecords(**{key: value[:rows] for key, value in columns.items()},
                             os_tids=os_tids, rf_tids=rf_tids, names=name_list,
                             shapes=_decode_shapes(shapes, shape_row, shape_at),
                             gpu=gpu_records)

    def _read_gpu(self, columns: dict, rows: int) -> GpuRecords:
        cpu_ns, device = np.zeros(MAX_ANCHORS, np.int64), np.zeros(MAX_ANCHORS, np.int8)
        offset_ns = np.zeros(MAX_ANCHORS)
        anchors = int(self.lib.nbp_gpu_anchors(_pointer(cpu_ns, _P64), _pointer(device, _PS8),
                                               _pointer(offset_ns, _PF64)))
        return GpuRecords(**{key: value[:rows] for key, value in columns.items()},
                          anchor_cpu_ns=cpu_ns[:anchors], anchor_device=device[:anchors],
                          anchor_offset_ns=offset_ns[:anchors],
                          error=self.lib.nbp_gpu_error().decode(errors="replace"))


def _decode_shapes(stream: np.ndarray, rows: np.ndarray, starts: np.ndarray) -> dict:
    """row -> [shape per input] ([] for an input that is no tensor, as Kineto writes it)."""
    values = stream.tolist()
    found = {}
    for row, at in zip(rows.tolist(), starts.tolist()):
        count, at = values[at], at + 1
        shapes = []
        for _ in range(count):
            ndim, at = values[at], at + 1
            if ndim < 0:
                shapes.append([])
            else:
                shapes.append(values[at:at + ndim])
                at += ndim
        if shapes:
            found[row] = shapes
    return found
