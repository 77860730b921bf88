"""nbprof's native recorder against torch.profiler on the same workload, and its life cycle:
fork, Ctrl-C, repeated profiles. Skipped where the observer cannot build (no compiler)."""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np
import pytest
import torch

import nbprof
from nbprof.record import native

pytestmark = pytest.mark.skipif(native.load() is None,
                                reason=f"native observer unavailable: {native.why_not()}")


def _workload():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    x = torch.randn(4, 8)

    def worker():
        y = torch.ones(3)
        for _ in range(5):
            y = y * 2

    def forked(t):
        return t.sin() + 1

    with torch.autograd.profiler.record_function("my_range"):
        model(x).sum().backward()
    thread = threading.Thread(target=worker, name="worker")
    thread.start()
    thread.join()
    future = torch.jit.fork(forked, x)
    torch.jit.wait(future)


def _profiled(recorder):
    _workload()  # warm: lazy inits (autograd's engine, the thread pools) happen once
    with nbprof.profile(recorder=recorder, cuda=False) as prof:
        _workload()
    return prof.trace


def _by_thread_name(trace):
    lanes = {index: thread.name for index, thread in enumerate(trace.threads)}
    found = {}
    for row in range(len(trace)):
        name = trace.names[trace.name_id[row]]
        parent = int(trace.parent[row])
        parent_name = trace.names[trace.name_id[parent]] if parent >= 0 else None
        found.setdefault(lanes[int(trace.thread[row])], Counter())[(name, parent_name)] += 1
    return found


def test_native_records_what_torch_profiler_records():
    native_trace, torch_trace = _profiled("native"), _profiled("torch")
    assert native_trace.meta["recorder"] == "native" and torch_trace.meta["recorder"] == "torch"
    mine, theirs = _by_thread_name(native_trace), _by_thread_name(torch_trace)
    # the same threads (the main thread under its name, the worker), the same ops under the
    # same parents on each
    assert mine.keys() == theirs.keys() and "worker" in mine
    for thread in mine:
        assert mine[thread] == theirs[thread], thread
    assert ("my_range", None) in mine[native_trace.threads[0].name]
    user = native_trace.categories.index("user_annotation")
    ranges = [native_trace.names[native_trace.name_id[row]]
              for row in np.flatnonzero(native_trace.category == user)]
    assert ranges == ["my_range"]
    # self times: none negative, and each thread's add up to its top-level ops' total
    assert (native_trace.self_ns >= 0).all()
    for lane in range(len(native_trace.threads)):
        rows = native_trace.thread == lane
        top = rows & (native_trace.parent < 0)
        total = (native_trace.end_ns[top] - native_trace.start_ns[top]).sum()
        assert native_trace.self_ns[rows].sum() == total


def test_backward_nodes_link_to_their_forward_ops():
    trace = _profiled("native")
    args = trace.event_args
    backward = {row: value for row, value in args.items() if "Fwd thread id" in value}
    forward = {value["Sequence number"]: row for row, value in args.items()
               if "Fwd thread id" not in value}
    names = [trace.names[trace.name_id[row]] for row in backward]
    assert any("AddmmBackward0" in name for name in names), names
    for row, value in backward.items():
        assert value["Sequence number"] in forward, trace.names[trace.name_id[row]]
    addmm = [row for row in backward
             if trace.names[trace.name_id[row]].endswith("AddmmBackward0")]
    linked = {trace.names[trace.name_id[forward[args[row]["Sequence number"]]]] for row in addmm}
    assert linked == {"aten::addmm"}


def test_record_shapes_on_the_native_path():
    x = torch.ones(3, 5)
    with nbprof.profile(record_shapes=True, cuda=False) as prof:
        torch.add(x, x)
    trace = prof.trace
    assert trace.meta["recorder"] == "native"
    rows = [row for row in range(len(trace)) if trace.names[trace.name_id[row]] == "aten::add"]
    assert [trace.shapes[row] for row in rows] == [[[3, 5], [3, 5], []]]


def test_a_forked_dataloader_worker_records_nothing_and_prints_nothing(capfd):
    data = torch.utils.data.TensorDataset(torch.arange(8.0))
    loader = torch.utils.data.DataLoader(data, batch_size=2, num_workers=2,
                                         multiprocessing_context="fork")
    with nbprof.profile(cuda=False) as prof:
        total = sum(float(batch[0].sum()) for batch in loader)
        torch.ones(2) + 1
    assert total == 28.0
    trace = prof.trace
    assert trace.meta["recorder"] == "native"
    assert "aten::add" in trace.names
    assert {thread.pid for thread in trace.threads} == {__import__("os").getpid()}
    assert "Exception" not in capfd.readouterr().err


def test_ctrl_c_inside_the_block_keeps_what_ran_and_turns_the_recorder_off():
    prof = nbprof.profile(cuda=False)
    with pytest.raises(KeyboardInterrupt):
        with prof:
            torch.ones(2) + 1
            raise KeyboardInterrupt
    assert not nbprof.record.profiler.is_active()
    assert prof.trace.meta["recorder"] == "native" and "aten::add" in prof.trace.names
    with nbprof.profile(cuda=False) as again:
        torch.ones(2) * 3
    assert "aten::mul" in again.trace.names and "aten::add" not in again.trace.names


def test_a_hundred_profiles_do_not_grow_the_recorder():
    library = native.load()
    x = torch.ones(4)

    def one():
        with nbprof.profile(cuda=False) as prof:
            for _ in range(50):
                torch.add(x, 1)
        return Counter(prof.trace.names[i] for i in prof.trace.name_id)["aten::add"]

    counts = [one() for _ in range(10)]
    retained = library.retained_bytes()
    counts += [one() for _ in range(90)]
    assert counts == [50] * 100
    assert library.retained_bytes() == retained


def test_records_of_an_op_open_across_profiles_stay_apart():
    """A range still open when one profile ends, closed in the next: its end must not land on
    the new profile's record that took its slot."""
    from torch.autograd.profiler import record_function

    outer = record_function("spanning")
    with nbprof.profile(cuda=False) as first:
        outer.__enter__()
    with nbprof.profile(cuda=False) as second:
        outer.__exit__(None, None, None)
        torch.ones(1) + 1
    assert "spanning" in first.trace.names
    assert "spanning" not in second.trace.names
    assert (second.trace.end_ns >= second.trace.start_ns).all()


def test_a_profile_longer_than_the_kept_buffers_reads_every_record():
    """Past the chunks kept for the next profile (8 x 8192 records), each chunk is freed as it is
    read: every record still comes back whole, and the next profile starts clean."""
    x = torch.zeros(4)
    with nbprof.profile(cuda=False) as prof:
        for _ in range(30_000):  # 5 records each: 150k
            x = x + 1
    trace = prof.trace
    names = Counter(trace.names[i] for i in trace.name_id)
    assert names["aten::add"] == 30_000 and names["aten::copy_"] == 30_000
    assert (trace.end_ns >= trace.start_ns).all() and (trace.self_ns >= 0).all()
    block = trace.end_ns.max() - trace.start_ns.min()
    assert ((trace.end_ns - trace.start_ns) <= block).all()
    with nbprof.profile(cuda=False) as again:
        torch.ones(1) + 1
    assert Counter(again.trace.names[i] for i in again.trace.name_id)["aten::add"] == 1
