"""The native observer as one of ``nbprof.profile``'s recorders (the same start/stop as the
torch ones), and the choice between it and torch's path."""

from __future__ import annotations

import contextlib
import threading
import time

from . import build, load, memory_records, why_not
from .python_calls import PythonCalls, python_calls_why_not
from .records import ABI_VERSION

RECORDERS = ("auto", "native", "torch")


class NativeRecorder:
    """Every thread's ops through nbprof's own RecordFunction observer; on a GPU with
    ``cuda_session`` (a Kineto session with the CUDA activity only: CUPTI's calls and kernels,
    kernel_links.py links them to the ops), started before the observer and stopped after it."""

    all_threads = True

    def __init__(self, library, *, record_shapes: bool = False, memory: bool = False,
                 gpu: bool = False, gpu_depth: int | None = None, anchor_devices=(),
                 cuda_session=None, cuda_required: bool = False,
                 python_calls: PythonCalls | None = None):
        self.library = library
        self.record_shapes = record_shapes
        self.python_calls = python_calls  # with_stack: every thread's Python calls
        self.gpu, self.gpu_depth, self.anchor_devices = gpu, gpu_depth, list(anchor_devices)
        self.memory = memory and memory_records.has_memory(library)
        self.memory_records = None  # what the memory reporter read at the stop
        self.variant = build.variant  # which build of the library load() found
        self.notes = [build.NOTE_PUBLIC_API] if self.variant == build.PUBLIC else []  # for the meta
        self._unhook = lambda: None
        self.cuda_session, self.cuda_required = cuda_session, cuda_required
        self.cuda_error = ""  # why CUPTI's session did not start (kernels not required)
        self.cuda_records = None  # what it recorded (KinetoRecords), read at the stop
        self.windows: list = []  # (OS tid, start, end) epoch ns: the anchors' own CUDA calls
        self._cuda_on = False

    def start(self) -> None:
        if self.cuda_session is not None:
            try:
                self.cuda_session.start()
                self._cuda_on = True
            except RuntimeError as error:  # CUPTI refused (permissions, another session)
                if self.cuda_required:
                    raise
                self.cuda_error = str(error)
        try:
            if memory_records.has_memory(self.library):
                memory_records.enable(self.library, self.memory)
            with self._window():
                self.library.start(self.record_shapes, gpu=self.gpu, gpu_depth=self.gpu_depth,
                                   anchor_devices=self.anchor_devices)
        except BaseException:
            self._stop_cuda()  # nothing stays on after a failed start
            self.cuda_records = None
            raise
        if self.python_calls is not None:
            try:
                self.python_calls.start()
            except BaseException:
                self._stop_observer()
                raise
        if self.memory and self.python_calls is None:  # else with_stack's profile function
            self._unhook, note = memory_records.hook_threads(self.library)  # pushes them
            self.notes += [note] if note else []

    def pause_memory(self, paused: bool) -> None:
        memory_records.pause(self.library, paused)

    def stop(self):
        self._unhook()
        self._unhook = lambda: None
        python = None
        try:
            if self.python_calls is not None:  # first: the observer's stop is no Python call
                python = self.python_calls.stop()
        finally:
            records = self._stop_observer()
        if python is not None:  # (NamedTuple._replace would count rows: NativeRecords' len)
            records = type(records)(**{**records._asdict(), "python": python})
        return records

    def _stop_observer(self):
        try:
            with self._window():  # the stop anchors' synchronize and events
                records = self.library.stop()
            if self.memory:
                self.memory_records = memory_records.read(self.library)
        finally:
            self._stop_cuda()  # after the observer: the last kernels have run by then
        return records

    def _stop_cuda(self) -> None:
        if self._cuda_on:
            self._cuda_on = False
            self.cuda_records = self.cuda_session.stop()

    @contextlib.contextmanager
    def _window(self):
        start = time.time_ns()
        try:
            yield
        finally:
            self.windows.append((threading.get_native_id(), start, time.time_ns()))

    def meta(self) -> dict:
        return {"recorder": "native",
                "native": {"abi": ABI_VERSION, "library": self.library.path,
                           "build_seconds": build.build_seconds, "variant": self.variant,
                           **({"gpu_depth": self.gpu_depth} if self.gpu else {})}}


def native_or_why(recorder: str, *, with_stack: bool, record_shapes: bool, memory: bool = False,
                  gpu: bool = False, gpu_depth: int | None = None, anchor_devices=(),
                  cuda_session=None, cuda_required: bool = False):
    """(NativeRecorder, "") where the native recorder records this profile; else (None, the
    one-line note saying why torch's path records it). ``recorder="native"`` raises instead.
    ``gpu``: with a CUDA event pair per op (only asked with ``recorder="native"`` so far)."""
    if recorder not in RECORDERS:
        raise ValueError(f"recorder must be one of {', '.join(map(repr, RECORDERS))}, "
                         f"not {recorder!r}")
    if recorder == "torch":
        return None, ""
    library = load(wait=recorder == "native")
    if library is None:
        reason = why_not()
        if recorder == "native":
            raise RuntimeError(f"recorder='native': nbprof's native recorder is not available "
                               f"here: {reason}")
        return None, f"Recorded through torch's profiler: nbprof's native recorder is not " \
                     f"available ({reason})."
    if gpu and library.gpu_unavailable():
        raise RuntimeError(f"recorder='native' cannot record CUDA events here: "
                           f"{library.gpu_unavailable()}. Use cuda=False or recorder='torch'.")
    python_calls = None
    if with_stack:
        python_calls = PythonCalls(library.path)
        if not python_calls.available():
            why = python_calls_why_not()
            if recorder == "native":
                raise RuntimeError(f"recorder='native' cannot record with_stack here: {why}")
            return None, f"with_stack: recorded through torch's profiler ({why})."
    return NativeRecorder(library, record_shapes=record_shapes, memory=memory, gpu=gpu,
                          gpu_depth=gpu_depth, anchor_devices=anchor_devices,
                          cuda_session=cuda_session, cuda_required=cuda_required,
                          python_calls=python_calls), ""
