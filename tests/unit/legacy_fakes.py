"""Fake legacy CUDA-event records that behave like torch 2.13's (``torch._C._autograd``'s
``ProfilerEvent``, read through the same methods), for the converter's tests.

Each fake knows its true CPU time (epoch ns) and, when it has a CUDA event, the event's time on
its device's own clock: an arbitrary origin per device (cudaEventElapsedTime only gives
differences), optionally running fast or slow against the CPU clock (``drift_ppm``). Failures
are torch's: no event -> "Events were not recorded for CUDA", events on two devices -> "not on
the same device", an event from a CUDA-graph capture -> a CUDA error; elapsed GPU time is float32 milliseconds, as cudaEventElapsedTime returns it.
"""

import numpy as np

ANCHOR = "nbprof::test_anchor"
EPOCH_NS = 1_796_000_000_123_456_789  # the CPU clock is the wall clock
GPU_ORIGIN_NS = {0: 987_654_321_000, 1: 5_000}  # each device's clock starts anywhere
ANCHOR_LATENCY_NS = 2_000  # the anchor's event completes 2 us after its CPU time


class FakeRecord:
    def __init__(self, kind, name, handle, thread_id, cpu_ns, device=-1, gpu_ns=None,
                 is_async=False):
        self._kind, self._name, self._handle, self._thread = kind, name, handle, thread_id
        self.cpu_ns, self._device, self.gpu_ns, self._async = cpu_ns, device, gpu_ns, is_async
        self.captured = False  # recorded on a stream during CUDA-graph capture: never timed

    def kind(self):
        return self._kind

    def name(self):
        return "" if self._kind == "pop" else self._name  # torch's pops carry no name

    def handle(self):
        return self._handle

    def thread_id(self):
        return self._thread

    def has_cuda(self):
        return self.gpu_ns is not None

    def device(self):
        return self._device

    def is_async(self):
        return self._async

    def start_us(self):
        return self.cpu_ns / 1000.0  # a double: epoch us loses sub-us digits, as torch's does

    def cpu_elapsed_us(self, other):
        return (other.cpu_ns - self.cpu_ns) / 1000.0

    def cuda_elapsed_us(self, other):
        if not (self.has_cuda() and other.has_cuda()):
            raise RuntimeError("Events were not recorded for CUDA")
        if self._device != other._device:
            raise RuntimeError("Events are not on the same device")
        if self.captured or other.captured:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
        elapsed_ms = np.float32((other.gpu_ns - self.gpu_ns) / 1e6)  # cudaEventElapsedTime
        return float(elapsed_ms) * 1000.0

    def shapes(self):
        return [[4, 4], [4, 4]] if self._name == "aten::mm" else []

    def stack(self):
        return []


class Recording:
    """Builds record lists: ``op(...)`` adds a push/pop pair given true CPU and GPU times (ns
    from EPOCH_NS on the CPU clock); ``drift_ppm`` makes every device's clock run that much fast."""

    def __init__(self, drift_ppm=0.0):
        self.lists = {1: [FakeRecord("mark", "__start_profile", 0, 1, EPOCH_NS)]}
        self.handle = 0
        self.drift = drift_ppm * 1e-6

    def on_device(self, device, ns):
        return None if ns is None else GPU_ORIGIN_NS[device] + round(ns * (1 + self.drift))

    def op(self, name, cpu_start, cpu_end, gpu=None, device=0, thread=1, pop_has_event=True,
           is_async=False, pop_thread=None):
        self.handle += 1
        gpu_start, gpu_end = gpu if gpu else (None, None)
        pop_thread = thread if pop_thread is None else pop_thread
        self.lists.setdefault(thread, []).append(FakeRecord(
            "push", name, self.handle, thread, EPOCH_NS + cpu_start, device if gpu else -1,
            self.on_device(device, gpu_start), is_async))
        self.lists.setdefault(pop_thread, []).append(FakeRecord(
            "pop", name, self.handle, pop_thread, EPOCH_NS + cpu_end, device if gpu else -1,
            self.on_device(device, gpu_end) if pop_has_event else None, is_async))

    def anchor(self, device, cpu_ns, latency_ns=ANCHOR_LATENCY_NS, name=ANCHOR):
        self.op(name, cpu_ns, cpu_ns + 300, (cpu_ns + latency_ns,) * 2, device)
