"""In a child process of tests/native_sim: the simulated CUDA device loaded into torch
(``sim``), and its controls. Import it before anything asks torch for its CUDA guard."""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
import time

import torch  # noqa: F401  first: the simulator registers itself in torch's c10

_lib = ctypes.CDLL(os.environ["NBPROF_SIM_CUDA"], mode=os.RTLD_GLOBAL)
for _name in ("sim_events_created", "sim_events_destroyed", "sim_events_live", "sim_errors",
              "sim_torch_records", "sim_raw_records", "sim_device_calls",
              "sim_captured_records"):
    getattr(_lib, _name).restype = ctypes.c_int64
_lib.sim_stream_handle.restype = ctypes.c_void_p
_lib.sim_stream_handle.argtypes = [ctypes.c_int, ctypes.c_int]
_lib.sim_set_clock_rate.argtypes = [ctypes.c_int, ctypes.c_double]
_lib.sim_fail_records.argtypes = [ctypes.c_int64]


class SimDevice:
    """The calling thread's current device and stream, captures, and what the device saw."""

    lib = _lib

    def set_device(self, device: int) -> None:
        assert _lib.sim_set_device(device) == 0

    def set_stream(self, device: int, stream: int) -> None:
        assert _lib.sim_set_stream(device, stream) == 0

    def stream_handle(self, device: int, stream: int) -> int:
        """A raw cudaStream_t of a non-default stream (0 is the default stream's)."""
        return _lib.sim_stream_handle(device, stream)

    @contextlib.contextmanager
    def capturing(self, device: int, stream: int):
        assert _lib.sim_set_capturing(device, stream, 1) == 0
        try:
            yield
        finally:
            _lib.sim_set_capturing(device, stream, 0)

    def set_clock_rate(self, device: int, rate: float) -> None:
        """The device's clock runs ``rate`` times as fast as the CPU's (1.001: +1000 ppm)."""
        assert _lib.sim_set_clock_rate(device, rate) == 0

    def fail_records(self, count: int) -> None:
        """The next ``count`` event records fail (cudaErrorLaunchFailure), as on a sick device."""
        _lib.sim_fail_records(count)

    def last_error(self) -> int:
        """cudaPeekAtLastError on this thread: what a user's next launch check would report."""
        return _lib.cudaPeekAtLastError()

    def counts(self) -> dict:
        return {name: getattr(_lib, f"sim_{name}")() for name in (
            "events_created", "events_destroyed", "events_live", "errors", "torch_records",
            "raw_records", "device_calls", "captured_records")}


sim = SimDevice()


def idle_then_both_devices(idle_s: float = 0.15) -> None:
    """20 ops on device 0, idle, 20 on device 1, idle: the anchors' workload (a span of ~0.3 s,
    where 1000 ppm of drift is 300 us, and each anchor recorded after an idle device)."""
    x = torch.ones(4)
    for device in (0, 1):
        sim.set_device(device)
        for _ in range(20):
            x = x + 1
        time.sleep(idle_s)
    sim.set_device(0)


def record(work, *, anchor_devices=(0, 1), gpu_depth=None):
    """``work()`` recorded as ``nbprof.profile(recorder="native", cuda=True)`` records it
    (profiler.py's _native_gpu: native_or_why, the NativeRecorder, native_records_to_trace),
    without its calibration and numba parts: (the NativeRecords, the Trace)."""
    from nbprof.record.native.recorder import native_or_why
    from nbprof.record.native.to_trace import native_records_to_trace

    recorder, _ = native_or_why("native", with_stack=False, record_shapes=False, gpu=True,
                                gpu_depth=gpu_depth, anchor_devices=anchor_devices)
    base_time_ns = time.time_ns()
    recorder.start()
    try:
        work()
    finally:
        records = recorder.stop()
    trace = native_records_to_trace(records, base_time_ns=base_time_ns, thread_names={},
                                    pid=os.getpid(), first_tid=threading.get_native_id(),
                                    meta={"notes": []})
    return records, trace
