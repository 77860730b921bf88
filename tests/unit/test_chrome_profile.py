"""A real recording (nbprof.profile over torch, CPU only here) survives export and load."""

import threading

import numpy as np
import pytest

import nbprof
from nbprof.formats.chrome import export_chrome_trace
from nbprof.formats.chrome.check import check_chrome_trace

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def recorded():
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    inputs = torch.randn(4, 8)

    def step():
        model(inputs).sum().backward()

    with nbprof.profile(cuda=False, record_shapes=True, with_stack=True) as prof:
        step()
        worker = threading.Thread(target=step, name="worker ünï \"quoted\"")
        worker.start()
        worker.join()
    return prof.trace


def test_a_recorded_trace_round_trips_through_a_valid_export(tmp_path, recorded):
    assert len(recorded) > 50 and recorded.shapes and recorded.stacks
    path = export_chrome_trace(recorded, tmp_path / "recorded.json.gz")
    assert check_chrome_trace(path) == []
    loaded = nbprof.load(path)
    for column in ("start_ns", "end_ns", "thread", "depth", "parent", "self_ns", "category"):
        assert np.array_equal(getattr(loaded, column), getattr(recorded, column)), column
    assert [loaded.names[i] for i in loaded.name_id] == \
        [recorded.names[i] for i in recorded.name_id]
    assert loaded.threads == recorded.threads
    assert "worker ünï \"quoted\"" in [thread.name for thread in loaded.threads]
    assert loaded.meta == recorded.meta
    assert loaded.stacks == recorded.stacks
    assert {row: list(map(list, shapes)) for row, shapes in loaded.shapes.items()} == \
        {row: list(map(list, shapes)) for row, shapes in recorded.shapes.items()}
    assert loaded.table(row_limit=5) == recorded.table(row_limit=5)


def test_loads_what_this_torch_profiler_writes(tmp_path):
    # The Kineto format of the torch installed here, CPU only, with shapes.
    import json

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True) as prof:
        torch.nn.functional.linear(torch.randn(4, 8), torch.randn(3, 8)).sum()
    path = str(tmp_path / "torch.json")
    prof.export_chrome_trace(path)
    xs = [e for e in json.load(open(path))["traceEvents"] if e["ph"] == "X"]
    # Kineto's span of the whole profile is trace metadata, not an op
    ops = [e for e in xs if not e["name"].startswith("PyTorch Profiler")]
    trace = nbprof.load(path)
    assert len(ops) == len(xs) - 1 and len(trace) == len(ops) and trace.meta["backend"] == "kineto"
    assert [span["name"] for span in trace.meta["profiler_spans"]] == [
        e["name"] for e in xs if e["name"].startswith("PyTorch Profiler")]
    linear = next(e for e in trace.events if e.name == "aten::linear")
    assert linear.shapes == [[4, 8], [3, 8], []]
    children = [trace.events[child].name for child in trace.children(linear.id)]
    assert children == ["aten::t", "aten::matmul"]  # no bias: linear = t + matmul
    assert check_chrome_trace(export_chrome_trace(trace, tmp_path / "again.json")) == []
