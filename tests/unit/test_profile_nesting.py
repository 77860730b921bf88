"""nbprof beside torch's own profilers, on the real torch here: neither destroys the other's trace.

Plus the neighbours: DataLoader worker processes (not recorded, said so; a forked worker prints
nothing) and the profiler's own cost in meta.
"""

import subprocess
import sys
import textwrap
import threading

import pytest
import torch
from torch.profiler import ProfilerActivity
from torch._C._profiler import _ExperimentalConfig

import nbprof
from nbprof.record.profiler import is_active
from tests.conftest import ROOT


def add_ones(count):
    x = torch.zeros(4)
    for _ in range(count):
        x = x + 1
    return x


def count_named(names, name):
    return sum(1 for each in names if each == name)


def all_threads_profiler():
    return torch.profiler.profile(activities=[ProfilerActivity.CPU],
                                  experimental_config=_ExperimentalConfig(profile_all_threads=True))


def test_an_all_threads_torch_profiler_around_nbprof_refuses_it_and_keeps_its_events():
    with all_threads_profiler() as users:
        add_ones(3)
        with pytest.raises(RuntimeError, match="torch's profiler is already active"):
            with nbprof.profile():
                add_ones(100)
        add_ones(2)
    assert not is_active()
    # Before the fix nbprof's stop popped the user's global session: 0 events.
    adds = count_named([event.name for event in users.events()], "aten::add")
    assert adds == 5


def test_a_thread_local_torch_profiler_on_another_thread_refuses_nbprof_too():
    started, release = threading.Event(), threading.Event()

    def users_thread():
        with torch.profiler.profile(activities=[ProfilerActivity.CPU]):
            started.set()
            release.wait(30)

    worker = threading.Thread(target=users_thread)
    worker.start()
    started.wait(30)
    try:
        with pytest.raises(RuntimeError, match="another thread"):
            with nbprof.profile():
                pass
    finally:
        release.set()
        worker.join()


@pytest.mark.parametrize("inner", ["torch.profiler", "torch.autograd.profiler"])
def test_torch_profiler_inside_nbprof_ends_it_with_a_warning_and_keeps_what_ran_before(inner):
    def users_profiler():
        if inner == "torch.profiler":
            return torch.profiler.profile(activities=[ProfilerActivity.CPU])
        return torch.autograd.profiler.profile()

    with pytest.warns(RuntimeWarning, match="torch.profiler was started inside this block"):
        with nbprof.profile() as prof:
            add_ones(4)
            with users_profiler() as users:
                add_ones(6)
            add_ones(1)
    assert not is_active()
    names = [prof.trace.names[i] for i in prof.trace.name_id]
    assert count_named(names, "aten::add") == 4  # was 0: the inner stop took nbprof's session
    assert any("torch.profiler" in note for note in prof.trace.meta["notes"])
    events = users.events() if inner == "torch.profiler" else users.function_events
    assert count_named([event.name for event in events], "aten::add") == 6
    assert not torch.autograd.profiler._is_profiler_enabled
    with nbprof.profile() as again:  # nothing left switched on or patched
        add_ones(2)
    assert count_named([again.trace.names[i] for i in again.trace.name_id], "aten::add") == 2
    assert not any("torch.profiler" in note for note in again.trace.meta["notes"])


def test_nbprof_marks_itself_as_a_torch_profiler_while_recording():
    assert not torch.autograd.profiler._is_profiler_enabled
    with nbprof.profile():
        assert torch.autograd.profiler._is_profiler_enabled
    assert not torch.autograd.profiler._is_profiler_enabled


def test_the_overhead_is_measured_and_close_to_a_measured_loop():
    import time

    def loop(count=1000):
        empty = torch.empty
        start = time.thread_time_ns()  # this thread's CPU: other processes' load left out
        for _ in range(count):
            empty(0)
        return (time.thread_time_ns() - start) / count

    def unrecorded_loop():  # RecordFunction off for this thread: the ops as with no profiler
        torch.autograd._enable_record_function(False)
        try:
            return loop()
        finally:
            torch.autograd._enable_record_function(True)

    loop()
    # Paired rounds a millisecond apart, inside the profile: the shared machine's slow and fast
    # spells (a range took 1.3 µs in some, 2.5 µs in others) fall on both rounds of a pair.
    with nbprof.profile() as prof:
        differences = [-unrecorded_loop() + loop() for _ in range(9)]
    overhead = prof.trace.meta["overhead"]
    measured = sorted(differences)[len(differences) // 2]
    assert overhead["per_op_ns"] > 0
    assert measured / 10 <= overhead["per_op_ns"] <= measured * 10, (overhead, measured)
    assert overhead["ops"] == 9000 and 0 < overhead["share"] <= 1
    # the calibration's own ranges are not in the user's trace
    assert set(prof.trace.names) == {"aten::empty"}


FORKED_LOADER = textwrap.dedent("""
    import torch, nbprof
    from torch.utils.data import DataLoader, Dataset

    class Squares(Dataset):
        def __len__(self):
            return 16

        def __getitem__(self, index):
            return torch.ones(2).mul(index)  # ops in the worker process

    with nbprof.profile() as prof:
        total = sum(float(batch.sum()) for batch in
                    DataLoader(Squares(), batch_size=4, num_workers=2,
                               multiprocessing_context="fork"))
    print(total)
    print([note for note in prof.trace.meta["notes"] if "DataLoader" in note])
""")


def test_a_fork_dataloader_in_the_block_prints_nothing_and_is_noted():
    child = subprocess.run([sys.executable, "-c", FORKED_LOADER], cwd=ROOT, capture_output=True,
                           timeout=300, text=True)
    assert child.returncode == 0, child.stderr
    total, notes = child.stdout.strip().splitlines()[-2:]
    assert float(total) == 2 * sum(range(16))
    assert "worker processes are not recorded" in notes
    assert "RecordFunction" not in child.stderr and "Exception" not in child.stderr


def test_a_torch_profiler_started_on_another_thread_inside_the_block_hands_over_too():
    counted = {}

    def users_thread():
        with torch.profiler.profile(activities=[ProfilerActivity.CPU]) as users:
            torch.ones(3).mul(2)
        counted["mul"] = count_named([event.name for event in users.events()], "aten::mul")

    with pytest.warns(RuntimeWarning, match="torch.profiler was started inside this block"):
        with nbprof.profile() as prof:
            add_ones(3)
            worker = threading.Thread(target=users_thread)
            worker.start()
            worker.join()
    assert counted == {"mul": 1}
    assert count_named([prof.trace.names[i] for i in prof.trace.name_id], "aten::add") == 3
    assert not torch.autograd.profiler._is_profiler_enabled and not is_active()
