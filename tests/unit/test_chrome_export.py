"""Chrome export: valid by construction, and nbprof.load gives the same Trace back."""

import gzip
import json

import numpy as np
import orjson
import pytest

import nbprof
from nbprof import Trace
from nbprof.formats.chrome import chrome_trace_bytes, export_chrome_trace
from nbprof.formats.chrome.check import check_chrome_trace
from nbprof.model import GPU_KINDS

AWKWARD = ['quote " and \\ backslash', "new\nline\ttab", "ctl \x00\x01\x1f\x7f", "ünïcødé 名前 🚀",
           "</script><b>"]


def sample_trace(names=("aten::linear", "aten::t", "aten::addmm", "cudaLaunchKernel")) -> Trace:
    """Given in start order, so ids are the positions below. Thread 0: linear [0,100) holds t
    [10,20) and addmm [30,90) (which holds an awkward name [40,45)); a second linear [95,130)
    overlaps the first without nesting (a real-trace quirk). Thread 1: addmm [5,50). GPU: a
    kernel per addmm on two streams of device 0, a memcpy on device 1, and two whole-op
    intervals on one stream that overlap without nesting."""
    all_names = list(names) + AWKWARD
    return Trace.build(
        start_ns=[0, 5, 10, 30, 40, 95], end_ns=[100, 50, 20, 90, 45, 130],
        thread=[0, 1, 0, 0, 0, 0], name_id=[0, 2, 1, 2, 4, 0], category=[0, 1, 0, 0, 0, 0],
        names=all_names, threads=[(4242, 4242, "MainThread"), (4242, 4300, AWKWARD[0])],
        categories=["cpu_op", "user_annotation"],
        gpu_start_ns=[52, 60, 200, 300, 310], gpu_end_ns=[70, 80, 260, 400, 420],
        gpu_name_id=[6, 5, 8, 2, 7], gpu_device=[0, 0, 1, 0, 0], gpu_stream=[8, 7, 7, 9, 9],
        gpu_launch=[1, 3, -1, 3, 0],
        gpu_kind=[GPU_KINDS.index(k) for k in ("kernel", "kernel", "memcpy", "op", "op")],
        meta={"backend": "cuda_events", "base_time_ns": 1_700_000_000_123_456_789,
              "device_names": {0: "NVIDIA H100", 1: "NVIDIA H100"}, "notes": ["a note"]},
        event_args={3: {"External id": 7, "what": AWKWARD[1]}},
        gpu_args={1: {"grid": [4, 1, 1], "block": [256, 1, 1], "correlation": 11}},
        shapes={3: [[64, 256], [256, 256]]}, stacks={0: ("model.py(12): forward", AWKWARD[3])})


def columns(trace):
    names = [trace.names[i] for i in trace.name_id]
    gpu_names = [trace.names[i] for i in trace.gpu_name_id]
    return {name: getattr(trace, name).tolist() for name in (
        "start_ns", "end_ns", "thread", "category", "depth", "parent", "self_ns",
        "gpu_start_ns", "gpu_end_ns", "gpu_device", "gpu_stream", "gpu_launch", "gpu_kind")
    } | {"names": names, "gpu_names": gpu_names}


def assert_same_trace(loaded: Trace, original: Trace):
    assert columns(loaded) == columns(original)
    assert loaded.threads == original.threads
    assert [loaded.categories[c] for c in loaded.category] == \
        [original.categories[c] for c in original.category]
    assert loaded.meta == original.meta
    assert loaded.event_args == original.event_args
    assert {row: list(map(list, v)) for row, v in loaded.shapes.items()} == \
        {row: list(map(list, v)) for row, v in original.shapes.items()}
    assert loaded.stacks == original.stacks
    for row, args in original.gpu_args.items():
        assert loaded.gpu_args[row].items() >= args.items()


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_export_then_load_gives_the_same_trace(tmp_path, suffix):
    trace = sample_trace()
    path = export_chrome_trace(trace, tmp_path / f"trace{suffix}")
    assert path == str(tmp_path / f"trace{suffix}")
    raw = open(path, "rb").read()
    assert (raw[:2] == b"\x1f\x8b") == suffix.endswith(".gz")
    assert check_chrome_trace(path) == []
    assert_same_trace(nbprof.load(path), trace)
    # the method on Trace goes the same way
    assert trace.export_chrome_trace(tmp_path / f"again{suffix}").endswith(suffix)


def test_awkward_names_survive_export_and_load(tmp_path):
    trace = sample_trace()
    loaded = nbprof.load(export_chrome_trace(trace, tmp_path / "t.json"))
    names = set(loaded.names[i] for i in np.concatenate([loaded.name_id, loaded.gpu_name_id]))
    assert set(AWKWARD) <= names
    assert loaded.threads[1].name == AWKWARD[0]
    assert loaded.event_args[3]["what"] == AWKWARD[1]
    assert loaded.stacks[0][1] == AWKWARD[3]
    # the file is strict JSON that Python's own parser accepts too
    json.loads(open(tmp_path / "t.json", encoding="utf-8").read())


def test_m_events_name_and_order_every_process_and_thread():
    data = orjson.loads(chrome_trace_bytes(sample_trace()))
    meta = [e for e in data["traceEvents"] if e["ph"] == "M"]
    process_names = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    thread_names = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta
                    if e["name"] == "thread_name"}
    sorted_lanes = {(e["pid"], e["tid"]) for e in meta if e["name"] == "thread_sort_index"}
    assert {e["pid"] for e in meta if e["name"] == "process_sort_index"} == set(process_names)
    assert sorted_lanes == set(thread_names)
    gpu_pid = data["nbprof"]["gpu_pid"]
    assert process_names[gpu_pid] == "CUDA" and gpu_pid != 4242
    assert thread_names[(4242, 4242)] == "MainThread"
    gpu_lanes = sorted(name for (pid, _tid), name in thread_names.items() if pid == gpu_pid)
    # stream 9 holds per-op CUDA-event intervals only: no real stream, and the name says so
    assert gpu_lanes == ["cuda:0 (op events)", "cuda:0 (op events) (overlapping 1)",
                         "cuda:0 stream 7", "cuda:0 stream 8", "cuda:1 stream 7"]


def test_overlapping_slices_go_to_an_extra_tid_instead_of_being_dropped():
    data = orjson.loads(chrome_trace_bytes(sample_trace()))
    xs = [e for e in data["traceEvents"] if e["ph"] == "X"]
    linear = [e for e in xs if e["name"] == "aten::linear" and e["cat"] == "cpu_op"]
    assert len(linear) == 2 and linear[0]["tid"] == 4242 and linear[1]["tid"] not in (4242, 4300)
    assert data["nbprof"]["extra_tids"] == [[4242, linear[1]["tid"], 0]]
    gpu_ops = [e for e in xs if e["cat"] == "gpu_op"]
    assert len({e["tid"] for e in gpu_ops}) == 2
    assert len(xs) == len(sample_trace()) + len(sample_trace().kernels)


def test_x_events_carry_times_in_microseconds_with_ns_precision_and_args():
    trace = sample_trace()
    data = orjson.loads(chrome_trace_bytes(trace))
    assert data["displayTimeUnit"] == "ns"
    assert data["baseTimeNanoseconds"] == trace.meta["base_time_ns"]
    addmm = next(e for e in data["traceEvents"] if e["ph"] == "X" and e["name"] == "aten::addmm"
                 and e["tid"] == 4242)
    assert (addmm["ts"], addmm["dur"]) == (0.03, 0.06)
    assert addmm["args"] == {"External id": 7, "what": AWKWARD[1],
                             "Input Dims": [[64, 256], [256, 256]]}
    kernel = next(e for e in data["traceEvents"] if e["ph"] == "X" and e["cat"] == "kernel"
                  and e["args"]["stream"] == 7)
    assert kernel["args"] == {"grid": [4, 1, 1], "block": [256, 1, 1], "correlation": 11,
                              "device": 0, "stream": 7}
    assert trace.event_args[3] == {"External id": 7, "what": AWKWARD[1]}  # not modified


def test_a_flow_per_launch_from_the_cpu_slice_to_the_gpu_slice():
    trace = sample_trace()
    data = orjson.loads(chrome_trace_bytes(trace))
    events = data["traceEvents"]
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    launched = int((trace.gpu_launch >= 0).sum())
    assert len(starts) == len(ends) == launched == 4
    for flow_id, end in ends.items():
        start = starts[flow_id]
        assert end["bp"] == "e" and start["cat"] == end["cat"] == "ac2g"
        kernel = trace.kernels[flow_id]
        launcher = trace.events[kernel.launch_id]
        assert start["ts"] == launcher.cpu_interval.start_ns / 1000
        assert end["ts"] == kernel.interval.start_ns / 1000


def test_gzip_is_much_smaller_and_bytes_match_the_file(tmp_path):
    trace = sample_trace()
    plain, packed = chrome_trace_bytes(trace), chrome_trace_bytes(trace, gzip=True)
    assert gzip.decompress(packed) == plain
    export_chrome_trace(trace, tmp_path / "t.json.gz")
    assert gzip.decompress((tmp_path / "t.json.gz").read_bytes()) == plain


def test_empty_trace_round_trips(tmp_path):
    empty = Trace.empty(meta={"backend": "cuda_events", "base_time_ns": 5})
    loaded = nbprof.load(export_chrome_trace(empty, tmp_path / "empty.json"))
    assert len(loaded) == 0 and len(loaded.kernels) == 0 and loaded.meta == empty.meta


def test_unwritable_path_raises_an_error_naming_it_and_keeps_the_trace(tmp_path):
    trace = sample_trace()
    before = columns(trace)
    missing_dir = tmp_path / "no" / "such" / "dir" / "t.json"
    with pytest.raises(FileNotFoundError, match="cannot write the Chrome trace") as error:
        export_chrome_trace(trace, missing_dir)
    assert str(missing_dir) in str(error.value)
    # a parent that is a file (chmod would not stop root, who runs the tests here)
    (tmp_path / "a_file").write_text("")
    under_a_file = tmp_path / "a_file" / "t.json.gz"
    with pytest.raises(NotADirectoryError, match="cannot write the Chrome trace") as error:
        export_chrome_trace(trace, under_a_file)
    assert str(under_a_file) in str(error.value)
    assert columns(trace) == before
    assert not missing_dir.exists()


def test_a_path_without_a_json_suffix_is_refused_with_advice(tmp_path):
    with pytest.raises(ValueError, match=r"\*\.json or \*\.json\.gz"):
        export_chrome_trace(sample_trace(), tmp_path / "trace.txt")


def test_an_nbprof_file_out_of_order_loads_with_the_right_launches(tmp_path):
    # The block's launch ids are positions in the file; a file whose slices are not in start
    # order (edited, or written by another tool) must still tie each kernel to its launcher.
    trace = sample_trace()
    data = orjson.loads(chrome_trace_bytes(trace))
    events = data["traceEvents"]
    gpu_pid = data["nbprof"]["gpu_pid"]
    cpu = [e for e in events if e["ph"] == "X" and e["pid"] != gpu_pid]
    gpu = [e for e in events if e["ph"] == "X" and e["pid"] == gpu_pid]
    others = [e for e in events if e["ph"] != "X"]
    data["traceEvents"] = others + cpu[::-1] + gpu[::-1]
    launch = data["nbprof"]["gpu_launch"][::-1]
    data["nbprof"]["gpu_launch"] = [len(cpu) - 1 - i if i >= 0 else -1 for i in launch]
    path = tmp_path / "shuffled.json"
    path.write_bytes(orjson.dumps(data))
    loaded = nbprof.load(path)
    assert columns(loaded) == columns(trace)


def test_serialising_in_chunks_gives_the_same_json(monkeypatch):
    import nbprof.formats.chrome.export as chrome_export

    trace = sample_trace()
    whole = chrome_export.chrome_trace_dict(trace)
    monkeypatch.setattr(chrome_export, "CHUNK_ROWS", 2)  # chunk edges inside every section
    assert json.loads(chrome_trace_bytes(trace)) == json.loads(orjson.dumps(
        whole, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY))
