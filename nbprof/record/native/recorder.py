"""The native observer as one of ``nbprof.profile``'s recorders (the same start/stop as the
torch ones), and the choice between it and torch's path."""

from __future__ import annotations

from . import build, load, memory_records, why_not
from .python_calls import PythonCalls
from .records import ABI_VERSION

RECORDERS = ("auto", "native", "torch")


class NativeRecorder:
    """Every thread's ops through nbprof's own RecordFunction observer."""

    all_threads = True

    def __init__(self, library, *, record_shapes: bool = False, memory: bool = False,
                 gpu: bool = False, gpu_depth: int | None = None, anchor_devices=(),
                 python_calls: PythonCalls | None = None):
        self.library = library
        self.record_shapes = record_shapes
        self.python_calls = python_calls  # with_stack: every thread's Python calls
        self.gpu, self.gpu_depth, self.anchor_devices = gpu, gpu_depth, list(anchor_devices)
        self.memory = memory and memory_records.has_memory(library)
        self.memory_records = None  # what the memory reporter read at the stop

    def start(self) -> None:
        if memory_records.has_memory(self.library):
            memory_records.enable(self.library, self.memory)
        self.library.start(self.record_shapes, gpu=self.gpu, gpu_depth=self.gpu_depth,
                           anchor_devices=self.anchor_devices)
        if self.python_calls is not None:
            try:
                self.python_calls.start()
            except BaseException:
                self.library.stop()
                raise

    def pause_memory(self, paused: bool) -> None:
        memory_records.pause(self.library, paused)

    def stop(self):
        python = None
        if self.python_calls is not None:
            try:
                python = self.python_calls.stop()  # first: the observer's stop is no Python call
            except BaseException:
                self.library.stop()
                raise
        records = self.library.stop()
        if python is not None:  # (NamedTuple._replace would count rows: NativeRecords' len)
            records = type(records)(**{**records._asdict(), "python": python})
        if self.memory:
            self.memory_records = memory_records.read(self.library)
        return records

    def meta(self) -> dict:
        return {"recorder": "native",
                "native": {"abi": ABI_VERSION, "library": self.library.path,
                           "build_seconds": build.build_seconds,
                           **({"gpu_depth": self.gpu_depth} if self.gpu else {})}}


def native_or_why(recorder: str, *, with_stack: bool, record_shapes: bool, memory: bool = False,
                  gpu: bool = False, gpu_depth: int | None = None, anchor_devices=()):
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
            why = build.python_headers_why_not() or "built without Python's headers"
            if recorder == "native":
                raise RuntimeError(f"recorder='native' cannot record with_stack here: {why}")
            return None, f"with_stack: recorded through torch's profiler ({why})."
    return NativeRecorder(library, record_shapes=record_shapes, memory=memory, gpu=gpu,
                          gpu_depth=gpu_depth, anchor_devices=anchor_devices,
                          python_calls=python_calls), ""
