"""with_stack's Python frames read from Kineto's saved trace (kineto_python.py), the route a torch
whose events() leaves them out (2.11) takes: forced here on a torch that has both, and compared
with events()' own Python function events of the same recording."""

import functools
import os
import tempfile
import threading

import numpy as np
import pytest
import torch

from nbprof.record.convert import CPU_CATEGORIES, cpu_records_to_trace, keep_rows
from nbprof.record.kineto_cpu import (KinetoCpuRecorder, read_records,
                                      records_with_saved_python)
from nbprof.record.kineto_python import events_hold_python, read_python_functions

BASE_NS = 1_790_000_000_000_000_000


def _model_step(model, data):
    loss = model(data).pow(2).sum()
    loss.backward()
    return loss


def _record():
    """A stopped Kineto session (with_stack) over a model's forward and backward on this thread
    and on one that was running before it started."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    data = torch.randn(4, 8)
    go, done = threading.Event(), threading.Event()

    def other_thread():
        go.wait()
        _model_step(model, data)
        done.set()

    worker = threading.Thread(target=other_thread)
    worker.start()
    recorder = KinetoCpuRecorder(with_stack=True)
    recorder.start()
    try:
        go.set()
        assert done.wait(30)
        for _ in range(2):
            _model_step(model, data)
    finally:
        result = torch.autograd._disable_profiler()
    worker.join()
    return result, worker.native_id


def _trace(records):
    return cpu_records_to_trace(records, base_time_ns=BASE_NS, pid=os.getpid(),
                                thread_names={}, first_tid=threading.get_native_id())


def _python_slices(trace):
    python = CPU_CATEGORIES.index("python_function")
    return sorted((trace.names[trace.name_id[row]], trace.threads[trace.thread[row]].tid,
                   int(trace.start_ns[row]), int(trace.end_ns[row]), int(trace.depth[row]))
                  for row in np.flatnonzero(trace.category == python))


def _op_stacks(trace):
    return {(trace.names[trace.name_id[row]], trace.threads[trace.thread[row]].tid,
             int(trace.start_ns[row])): stack for row, stack in trace.stacks.items()}


@pytest.mark.skipif(not events_hold_python([]),
                    reason="this torch's events() holds no Python functions to compare with")
def test_python_frames_from_the_saved_trace_match_those_of_events():
    result, worker_tid = _record()
    events = result.events()
    from_events = read_records(events, with_stack=True)
    assert from_events.is_python.any()
    ops_only = keep_rows(from_events, ~from_events.is_python)
    from_file, note = records_with_saved_python(ops_only, result)
    assert note is None

    expected, found = _trace(from_events), _trace(from_file)
    slices = _python_slices(found)
    assert slices == _python_slices(expected)
    names = {name for name, *_ in slices}
    assert "nn.Module: Linear_0" in names or any("linear" in name.lower() for name in names)
    assert {tid for _, tid, *_ in slices} == {threading.get_native_id(), worker_tid}
    assert max(depth for *_, depth in slices) >= 2  # frames nest in frames
    stacks = _op_stacks(found)
    assert stacks == _op_stacks(expected)
    addmm = [stack for (name, *_), stack in stacks.items() if name == "aten::addmm"]
    assert addmm and all(any("_model_step" in frame for frame in stack) for stack in addmm)


def test_a_trace_that_cannot_be_saved_leaves_the_ops_and_says_what_to_do(monkeypatch, tmp_path):
    result, _ = _record()
    records = read_records(result.events())
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no such folder"))
    kept, note = records_with_saved_python(records, result)
    assert kept is records
    assert note.startswith("Python frames were not recorded")
    assert "-dev" in note and "torch >= 2.13" in note


def test_slices_split_across_blocks_and_those_in_another_layout_are_counted(tmp_path):
    result, _ = _record()
    path = tmp_path / "kineto.json"
    result.save(str(path))
    whole = read_python_functions(path)
    assert len(whole.names) > 20 and whole.unread == 0
    # blocks of 1000 bytes: most slices start in one block and end in the next
    pieces = read_python_functions(path, block_bytes=1000, keep_bytes=700)
    assert pieces.names == whole.names and pieces.unread == 0
    for column in ("start_ns", "end_ns", "tid"):
        assert np.array_equal(getattr(pieces, column), getattr(whole, column))
    text = path.read_text()
    # a field nbprof does not expect between "cat" and "name": that slice is not read
    path.write_text(text.replace('"python_function",', '"python_function", "new": 1,', 1))
    assert read_python_functions(path).unread == 1


def _profiled_steps():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    data = torch.randn(4, 8)
    import nbprof

    with nbprof.profile(recorder="torch", with_stack=True) as prof:
        _model_step(model, data)
    return prof.trace


def test_a_profile_takes_the_saved_route_where_events_lack_python(monkeypatch, tmp_path):
    from nbprof.record import kineto_cpu

    monkeypatch.setattr(kineto_cpu, "events_hold_python", lambda events: False)  # as on 2.11
    trace = _profiled_steps()
    stacks = [trace.stacks.get(row, ()) for row in range(len(trace))
              if trace.names[trace.name_id[row]] == "aten::addmm"]
    assert stacks and all(any("_model_step" in frame for frame in stack) for stack in stacks)
    assert not [note for note in trace.meta["notes"] if "Python" in note]

    # the trace's folder cannot be made (the profile's own temporary files still can)
    monkeypatch.setattr(tempfile, "TemporaryDirectory", functools.partial(
        tempfile.TemporaryDirectory, dir=tmp_path / "no such folder"))
    trace = _profiled_steps()
    assert "aten::addmm" in trace.names  # the ops stay
    assert [note for note in trace.meta["notes"] if note.startswith("Python frames were not")]


def test_the_cuda_event_paths_records_get_the_frames_with_no_correlation(monkeypatch):
    """CudaRecorder's Kineto part (correlated: CPU rows with correlation ids, as on a GPU)."""
    from nbprof.record import kineto_cpu

    monkeypatch.setattr(kineto_cpu, "events_hold_python", lambda events: False)  # as on 2.11
    torch.manual_seed(0)
    model, data = torch.nn.Linear(8, 1), torch.randn(4, 8)
    recorder = KinetoCpuRecorder(with_stack=True, correlated=True)
    recorder.start()
    _model_step(model, data)
    records = recorder.stop()
    cpu = records.cpu
    assert len(records.correlation) == len(cpu.names) == len(cpu.tid)
    frames = np.flatnonzero(cpu.is_python)
    assert any("_model_step" in cpu.names[row] for row in frames)
    assert not records.correlation[frames].any() and records.correlation[~cpu.is_python].any()
