"""Recording memory: ``nbprof.profile(memory=True)`` through the native recorder's memory reporter
(every thread's allocations and frees), ``%%cudaprof --memory``, ``nbprof run --memory``, and the
torch path, which records none and says why."""

import sys
import threading

import numpy as np
import pytest
import torch

import nbprof
from nbprof.model import NO_ID
from nbprof.notebook.args import parse_options
from nbprof.record import native
from nbprof.record.profiler import NOTE_NO_MEMORY

MIB = 1 << 20


@pytest.fixture(scope="module")
def native_library():
    library = native.load()
    if library is None:
        pytest.skip(f"the native recorder does not build here: {native.why_not()}")
    return library


def known_workload():
    """64 MiB made in phase_alloc and freed in phase_free; a second 64 MiB in phase_peak's
    aten::add (the peak); a worker thread that allocates 4 MiB; a free outside any op."""
    def worker():
        with torch.profiler.record_function("worker_range"):
            w = torch.ones(MIB)
            del w

    with torch.profiler.record_function("phase_alloc"):
        a = torch.ones(16 * MIB)
        small = torch.ones(1000)
    with torch.profiler.record_function("phase_peak"):
        b = a + 1
    with torch.profiler.record_function("phase_free"):
        del a, b
    thread = threading.Thread(target=worker, name="allocating worker")
    thread.start()
    thread.join()
    del small  # outside any op: a Python del


@pytest.fixture(scope="module")
def recorded(native_library):
    with nbprof.profile(memory=True, cuda=False) as prof:
        known_workload()
    return prof.trace


def name_of(trace, op):
    return trace.names[trace.name_id[op]] if op >= 0 else None


def test_the_peak_is_the_two_64_mib_blocks_at_aten_add(recorded):
    assert recorded.meta["recorder"] == "native"
    peak = recorded.memory_peak()
    assert peak["device"].tolist() == ["CPU"]
    assert 128 * MIB + 4000 <= peak["peak_bytes"][0] < 128 * MIB + 64 * 1024  # + small's 4000 B
    assert peak["op"][0] == "aten::add"
    holders = recorded.memory_holders()
    held = dict(zip(holders["call_path"], holders["bytes"]))
    assert held["phase_peak > aten::add"] == 64 * MIB
    assert held["phase_alloc > aten::ones > aten::empty"] == 64 * MIB + 4000  # with small


def test_the_workers_allocations_are_on_its_lane_in_its_op(recorded):
    lanes = [thread.name for thread in recorded.threads]
    worker = lanes.index("allocating worker")
    memory = recorded.memory
    rows = np.flatnonzero(memory.thread == worker)
    assert memory.bytes[rows].tolist() == [4 * MIB, -4 * MIB]
    assert name_of(recorded, memory.op[rows[0]]) == "aten::empty"
    assert name_of(recorded, recorded.parent[recorded.parent[memory.op[rows[0]]]]) == "worker_range"


def test_frees_pair_with_their_allocations_and_a_del_is_outside_any_op(recorded):
    memory = recorded.memory
    partner = memory.partners()
    made = np.flatnonzero(memory.bytes == 64 * MIB)
    assert [name_of(recorded, memory.op[partner[row]]) for row in made] == ["phase_free"] * 2
    assert memory.addr[partner[made]].tolist() == memory.addr[made].tolist()
    small = np.flatnonzero(memory.bytes == -4000)
    assert len(small) == 1 and memory.op[small[0]] == NO_ID and partner[small[0]] != NO_ID


def test_a_torch_profiler_starts_on_a_thread_that_recorded_memory_before(native_library):
    go, ran, out = threading.Event(), threading.Event(), {}

    def worker():
        torch.ones(100) + 1  # an op in the session: this thread's allocations were reported
        ran.set()
        go.wait()
        try:
            with torch.profiler.profile(profile_memory=True) as prof:
                torch.ones(10)
            out["events"] = len(prof.events())
        except RuntimeError as error:
            out["error"] = str(error)

    with nbprof.profile(memory=True, cuda=False) as prof:
        thread = threading.Thread(target=worker)
        thread.start()
        ran.wait()
    go.set()
    thread.join()
    assert "error" not in out and out["events"] > 0
    assert (prof.trace.memory.bytes == 400).sum() == 2  # torch.ones(100) and its + 1
    assert not torch.autograd._profiler_enabled()


def test_the_torch_path_records_no_memory_and_says_why():
    with nbprof.profile(memory=True, recorder="torch") as prof:
        x = torch.ones(1 << 20)
        del x
    assert len(prof.trace.memory) == 0
    assert NOTE_NO_MEMORY in prof.trace.meta["notes"]


def test_without_memory_nothing_is_recorded_and_nothing_is_said():
    with nbprof.profile() as prof:
        torch.ones(1000) + 1
    assert len(prof.trace.memory) == 0
    assert NOTE_NO_MEMORY not in prof.trace.meta["notes"]


def test_the_magic_takes_memory():
    assert parse_options("--memory").memory and not parse_options("").memory


def test_nbprof_run_memory_writes_the_scripts_allocations(native_library, tmp_path, capsys):
    from nbprof.cli.main import main

    script = tmp_path / "allocate.py"
    script.write_text("import torch\nx = torch.ones(1 << 20)\ny = x * 2\n")
    trace_path = tmp_path / "t.json"
    assert main(["run", "-o", str(tmp_path / "p.html"), "--trace", str(trace_path), "--memory",
                 str(script)]) == 0
    trace = nbprof.load(trace_path)
    assert trace.memory_peak()["peak_bytes"].tolist()[0] >= 8 * MIB
    assert "nbprof_memory" in (tmp_path / "p.html").read_text()  # the page has the memory lane


def test_the_overhead_includes_the_memory_recording_and_its_calibration_is_left_out(recorded):
    overhead = recorded.meta["overhead"]
    assert overhead["per_memory_event_ns"] > 0
    assert overhead["memory_events"] == int((recorded.memory.thread == 0).sum()) > 0
    # the calibration's storages (64 B each, outside any op) are not the workload's
    assert not ((recorded.memory.bytes == 64) & (recorded.memory.op == NO_ID)).any()


def test_a_threads_frees_before_its_first_op_are_recorded(native_library):
    """Threads that run no op in the block: a worker alive before it, woken inside it, whose
    first act is dropping a tensor made in the block (a free outside any op), and a thread
    started inside it whose only act is the same. Their reporters were pushed at a thread's
    first op, so these frees were missed. (The CPU allocator reports no free of a block made
    before the profile: it never learnt its size.)"""
    wake, ready = threading.Event(), threading.Event()
    handed, base = [], torch.ones(10)

    def sleeper():
        ready.set()
        wake.wait()
        handed.clear()
        return base + 1.5  # 1.5 becomes a tensor (8 B) before aten::add starts

    alive = threading.Thread(target=sleeper, name="sleeping worker")
    alive.start()
    ready.wait()
    with nbprof.profile(memory=True, cuda=False) as prof:
        handed.append(torch.ones(2 * MIB))  # 8 MiB
        wake.set()
        alive.join()
        dropped = [torch.ones(MIB), torch.ones(MIB)]  # 4 MiB each
        late = threading.Thread(target=dropped.clear, name="late dropper")
        late.start()
        late.join()
    trace = prof.trace
    memory = trace.memory
    lanes = [thread.name for thread in trace.threads]
    late = np.flatnonzero(memory.thread == lanes.index("late dropper"))
    assert memory.bytes[late].tolist() == [-4 * MIB, -4 * MIB]
    assert (memory.op[late] == NO_ID).all()
    worker = lanes.index("sleeping worker")
    rows = np.flatnonzero(memory.thread == worker)
    first_op = trace.start_ns[trace.thread == worker].min()
    before = rows[memory.time_ns[rows] < first_op]
    assert memory.bytes[before].tolist() == [-8 * MIB, 8]  # the free, then the wrapped 1.5
    assert (memory.op[before] == NO_ID).all()


def test_a_python_profiler_on_the_thread_is_kept_and_other_threads_are_still_hooked(
        native_library):
    """The starting thread's sys.setprofile function stays (its reporter is pushed at the start)
    and costs nothing: a worker woken in the block still has its free before its first op
    recorded, and no note says otherwise."""
    calls, handed, wake, ready = [], [], threading.Event(), threading.Event()

    def user_profiler(frame, event, arg):
        calls.append(event)

    def sleeper():
        ready.set()
        wake.wait()
        handed.clear()

    alive = threading.Thread(target=sleeper, name="sleeping worker")
    alive.start()
    ready.wait()
    sys.setprofile(user_profiler)
    try:
        with nbprof.profile(memory=True, cuda=False) as prof:
            handed.append(torch.ones(2 * MIB))
            wake.set()
            alive.join()
        still = sys.getprofile()
    finally:
        sys.setprofile(None)
    assert still is user_profiler and calls
    assert not [note for note in prof.trace.meta["notes"] if note.startswith("memory:")]
    memory, lanes = prof.trace.memory, [thread.name for thread in prof.trace.threads]
    assert memory.bytes[memory.thread == lanes.index("sleeping worker")].tolist() == [-8 * MIB]
