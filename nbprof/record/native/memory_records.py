"""The native memory reporter (memory.cpp, issue 23) through ctypes: switched on with a profile,
its events read as numpy columns after the stop, and made the Trace's memory columns.

Only the CPU and CUDA are kept (other devices' events are counted in a note). Each event's
thread is the lane of its OS thread; its op is found in the Trace (model/memory.py).
"""

from __future__ import annotations

import ctypes
import threading
from typing import NamedTuple

import numpy as np

from ...model import NO_ID, MemoryEvents, Thread, Trace
from ...model.memory import attributed
from ..threads import hand_over

DEVICE_TYPE_CPU, DEVICE_TYPE_CUDA = 0, 1  # c10::DeviceType
_P64, _PU64, _P16 = (ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_uint64),
                     ctypes.POINTER(ctypes.c_int16))
_FIELDS = (("time_ns", np.int64, _P64), ("bytes", np.int64, _P64), ("addr", np.uint64, _PU64),
           ("allocated", np.int64, _P64), ("reserved", np.int64, _P64),
           ("device_type", np.int16, _P16), ("device_index", np.int16, _P16),
           ("os_tid", np.int64, _P64))


class _Columns(ctypes.Structure):  # memory.h's NbpMemoryColumns, field for field
    _fields_ = [(name, kind) for name, _dtype, kind in _FIELDS]


class MemoryRecords(NamedTuple):
    time_ns: np.ndarray  # Unix-epoch ns
    bytes: np.ndarray
    addr: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray
    device_type: np.ndarray
    device_index: np.ndarray
    os_tid: np.ndarray


def has_memory(library) -> bool:
    """Whether this build of the observer has the memory reporter."""
    return hasattr(library.lib, "nbp_memory_enable")


def enable(library, enabled: bool) -> None:
    """Whether the next start records memory too. Once on, torch's profilers free their
    thread's slot before they start (see leave_before_torch_profilers)."""
    library.lib.nbp_memory_enable.argtypes = [ctypes.c_int]
    library.lib.nbp_memory_enable(int(enabled))
    if enabled:
        leave_before_torch_profilers(library)


def pause(library, paused: bool) -> None:
    """Reports paused (the calibration's rounds without them) or not."""
    library.lib.nbp_memory_pause.argtypes = [ctypes.c_int]
    library.lib.nbp_memory_pause(int(paused))


_left = False


def leave_before_torch_profilers(library) -> None:
    """A reporter stays in a thread's profiler slot after a session until that thread
    allocates again, and a thread-local torch profiler refuses to start over it ("Profiler is
    already enabled on this thread"): torch's start points (the ones the hand-over wraps) first
    free their own thread's slot, for the rest of the process. Once."""
    global _left
    if _left:
        return
    from ..torch_profilers import _START_POINTS

    leave = library.lib.nbp_memory_leave_thread
    leave.restype = None
    for module, name in _START_POINTS:
        original = getattr(module, name)

        def start_point(*args, _original=original, **kwargs):
            leave()
            return _original(*args, **kwargs)

        start_point.__wrapped__ = original
        setattr(module, name, start_point)
    _left = True


NOTE_UNHOOKED = ("memory: other Python threads' allocations are recorded from their first op of "
                 "the block only ({error}).")


def hook_threads(library):
    """Every Python thread pushes its reporter at its next Python call or return, before it can
    allocate outside an op (its first op would, but a del or a wrapped scalar comes earlier):
    python_calls.cpp's one-shot profile function on each other thread alive now (which then gives
    the thread back its own profile function, cProfile's or a debugger's, and forwards it that
    event), and threading's hook for those started during the session. After the start (the hook
    pushes only while recording). Returns (undo, note): ``undo()`` gives threading and every
    thread whose hook has not run yet back their own; ``note`` is why other threads were left
    as they were."""
    from .python_calls import PythonCalls, python_calls_why_not

    calls = PythonCalls(library.path)
    if not calls.available():
        return (lambda: None), NOTE_UNHOOKED.format(error=python_calls_why_not())
    if calls.lib.nbp_py_hook_memory() != 0:
        return (lambda: None), NOTE_UNHOOKED.format(error="out of memory")
    previous = threading.getprofile()
    enter = library.lib.nbp_memory_enter_thread
    enter.restype = None

    def first_call(frame, event, arg):  # a thread started during the session: its first call
        enter()
        hand_over(previous, frame, event, arg)

    threading.setprofile(first_call)

    def undo():
        threading.setprofile(previous)
        calls.lib.nbp_py_unhook_memory()

    return undo, ""


def read(library) -> MemoryRecords:
    """The last session's events (after its stop); the reporter's buffers are released."""
    lib = library.lib
    lib.nbp_memory_count.restype = ctypes.c_int64
    lib.nbp_memory_fetch.argtypes = [ctypes.POINTER(_Columns), ctypes.c_int64]
    lib.nbp_memory_fetch.restype = ctypes.c_int64
    lib.nbp_memory_release.restype = None
    try:
        count = int(lib.nbp_memory_count())
        columns = {name: np.empty(count, dtype) for name, dtype, _kind in _FIELDS}
        out = _Columns(*(columns[name].ctypes.data_as(kind) for name, _dtype, kind in _FIELDS))
        rows = int(lib.nbp_memory_fetch(ctypes.byref(out), count))
        return MemoryRecords(**{name: column[:rows] for name, column in columns.items()})
    finally:
        lib.nbp_memory_release()


def memory_of(records: MemoryRecords, trace: Trace, base_time_ns: int,
              drop_windows=(), thread_names=None) -> MemoryEvents:
    """The Trace's memory columns: times from ``base_time_ns``, the thread of each OS thread id,
    the op found in ``trace``. ``drop_windows``: (os tid, start, end) Unix-ns windows whose
    events are nbprof's own (its calibration's allocations). A thread that allocated or freed
    but ran no op gets a lane of its own in ``trace.threads``, named from ``thread_names``
    (OS tid -> name)."""
    keep = np.isin(records.device_type, (DEVICE_TYPE_CPU, DEVICE_TYPE_CUDA))
    other = int((~keep).sum())
    if other:
        trace.meta.setdefault("notes", []).append(
            f"{other} memory events on devices other than the CPU and CUDA were left out.")
    for tid, start, end in drop_windows:
        keep &= ~((records.os_tid == tid) & (records.time_ns >= start) & (records.time_ns <= end))
    lane_of = {thread.tid: lane for lane, thread in enumerate(trace.threads)}
    tids, inverse = np.unique(records.os_tid[keep], return_inverse=True)
    pid = trace.threads[0].pid if trace.threads else 0
    for tid in tids.tolist():
        if tid not in lane_of:
            lane_of[tid] = len(trace.threads)
            trace.threads.append(Thread(pid, tid, (thread_names or {}).get(tid, f"thread {tid}")))
    lanes = np.array([lane_of.get(int(tid), NO_ID) for tid in tids.tolist()], np.int32)
    device = np.where(records.device_type[keep] == DEVICE_TYPE_CPU, -1, records.device_index[keep])
    memory = MemoryEvents.build(
        time_ns=records.time_ns[keep] - base_time_ns, bytes=records.bytes[keep],
        addr=records.addr[keep], device=device,
        thread=lanes[inverse.reshape(-1)] if len(tids) else np.zeros(0, np.int32),
        allocated=records.allocated[keep], reserved=records.reserved[keep])
    return attributed(memory, trace)
