"""The profiler's own CUDA runtime calls (torch's legacy event stub at every push and pop, and
whatever nbprof's recorder does in its own calls) are found among Kineto's CPU records; the
user's calls of the same names stay."""

import numpy as np
import pytest
from legacy_fakes import EPOCH_NS, Recording

from nbprof.record.convert import drop_own_cuda_calls
from nbprof.record.own_cuda_calls import legacy_event_times, own_cuda_calls
from nbprof.record.kineto_cpu import CpuRecords

T = EPOCH_NS
MAIN, OTHER = 7001, 7002


def rows():
    # (name, start from T, OS tid, the profiler's?): the stub reads the CPU time between
    # cudaEventCreate and cudaEventRecord; legacy records at 1_000, 5_000 and 20_000 on MAIN.
    return [
        ("cudaGetDevice", 960, MAIN, True),
        ("cudaEventCreate", 980, MAIN, True),
        ("aten::mm", 990, MAIN, False),
        ("cudaEventRecord", 1_001, MAIN, True),
        ("cudaLaunchKernel", 1_200, MAIN, False),
        ("cudaEventRecord", 1_500, MAIN, False),  # the user's torch.cuda.Event.record() after it
        ("cudaEventCreate", 4_900, MAIN, True),
        ("cudaEventRecord", 5_030, MAIN, True),
        ("cudaEventRecord", 1_001, OTHER, False),  # no legacy record on that thread
        ("cudaEventRecord", 19_400, MAIN, True),  # Kineto's clock 0.6 us behind torch's
        ("cudaDeviceSynchronize", 30_000, MAIN, True),  # inside nbprof's stop call
        ("nbprof::gpu_clock_anchor", 30_500, MAIN, True),
        ("cudaEventRecord", 30_510, MAIN, True),
        ("cudaEventRecord", 40_000, MAIN, False),  # after it: the user's again
        ("cudaEventRecord", 60_000, MAIN, False),  # far from any record
    ]


EVENT_TIMES = {MAIN: T + np.array([1_000, 5_000, 20_000])}
WINDOWS = [(MAIN, T + 29_000, T + 31_000)]


def test_each_legacy_record_claims_its_own_calls_and_the_users_stay():
    table = rows()
    own = own_cuda_calls([r[0] for r in table], T + np.array([r[1] for r in table]),
                         np.array([r[2] for r in table]), event_times=EVENT_TIMES,
                         windows=WINDOWS)
    assert own.tolist() == [r[3] for r in table]


def test_two_records_close_together_claim_one_call_each():
    # push and pop of a 300 ns op: two records, two cudaEventRecord calls, then the user's
    starts = T + np.array([1_100, 1_420, 1_600])
    own = own_cuda_calls(["cudaEventRecord"] * 3, starts, np.full(3, MAIN),
                         event_times={MAIN: T + np.array([1_000, 1_300])})
    assert own.tolist() == [True, True, False]


def test_kineto_records_lose_the_profilers_calls_and_keep_their_extras():
    table = rows()
    records = CpuRecords(
        names=[r[0] for r in table], start_ns=T + np.array([r[1] for r in table]),
        end_ns=T + np.array([r[1] for r in table]) + 5, tid=np.array([r[2] for r in table]),
        is_annotation=np.zeros(len(table), bool), is_python=np.zeros(len(table), bool),
        shapes={2: [[4, 4]]}, stacks={}, cuda_us=None)
    kept, dropped = drop_own_cuda_calls(records, event_times=EVENT_TIMES, windows=WINDOWS)
    assert dropped == sum(r[3] for r in table)
    assert kept.names == [r[0] for r in table if not r[3]]
    assert kept.shapes == {0: [[4, 4]]}  # aten::mm, now the first row
    same, none = drop_own_cuda_calls(records, event_times={}, windows=())
    assert none == 0 and same is records


def test_legacy_event_times_come_from_the_records_that_carry_an_event():
    rec = Recording()
    rec.anchor(0, 1_000)
    rec.op("aten::empty", 2_000, 2_100)  # no CUDA event: its stub made no calls
    rec.op("aten::mm", 3_000, 4_000, gpu=(3_500, 9_000), thread=2)
    times = legacy_event_times(list(rec.lists.values()))
    assert set(times) == {1, 2}
    # start_us() is a double of epoch us: ~0.25 us, well inside the 2 us tolerance
    assert (times[1] - T).tolist() == pytest.approx([1_000, 1_300], abs=300)  # anchor push, pop
    assert (times[2] - T).tolist() == pytest.approx([3_000, 4_000], abs=300)
