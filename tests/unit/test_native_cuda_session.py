"""The native recorder with a Kineto session beside it (on a GPU: the CUDA activity only, for
CUPTI's kernels). CUPTI does not run here, so a real Kineto session with the CPU activity stands
in for it: the same start and stop. Started before the observer and stopped after it; after a
failed start nothing stays on."""

from __future__ import annotations

import pytest
import torch

from nbprof.record import native
from nbprof.record.kineto_cpu import KinetoCpuRecorder, KinetoRecords
from nbprof.record.native.recorder import NativeRecorder
from nbprof.record.torch_profilers import torch_profiler_active

pytestmark = pytest.mark.skipif(native.load() is None,
                                reason=f"native observer unavailable: {native.why_not()}")


def _torch_profiler_records() -> int:
    with torch.profiler.profile() as prof:
        torch.ones(3) + 1
    return len(prof.events())


def _events_of_a_session_left_on() -> int:
    """Ops run now, as a Kineto session still on would hand them to whoever stops it (0: none
    was on; torch warns that it found no session)."""
    torch.ones(3) + 1
    return len(torch.autograd._disable_profiler().events())


def test_the_session_records_beside_the_observer_and_is_off_after():
    recorder = NativeRecorder(native.load(), cuda_session=KinetoCpuRecorder(correlated=True))
    recorder.start()
    torch.ones(3) + 1
    records = recorder.stop()
    assert "aten::add" in records.names
    assert isinstance(recorder.cuda_records, KinetoRecords)
    assert "aten::add" in recorder.cuda_records.cpu.names
    # the observer's start and stop are nbprof's own windows (the anchors' CUDA calls there)
    assert len(recorder.windows) == 2 and all(start <= end for _, start, end in recorder.windows)
    assert not torch_profiler_active() and _torch_profiler_records()


def test_a_failed_observer_start_leaves_no_session_on():
    # CUDA events asked of a CPU-only torch: the observer refuses after the session started
    recorder = NativeRecorder(native.load(), gpu=True,
                              cuda_session=KinetoCpuRecorder(correlated=True))
    if not native.load().gpu_unavailable():
        pytest.skip("this torch can record CUDA events: the observer would start")
    with pytest.raises(RuntimeError, match="cannot record CUDA events"):
        recorder.start()
    assert recorder.cuda_records is None
    assert _events_of_a_session_left_on() == 0
    assert not torch_profiler_active() and _torch_profiler_records()
