"""Parquet and Arrow: an exact round trip, atomic writes, and the folder read by DuckDB and
pyarrow.dataset the way a cluster would read it."""

import numpy as np
import pytest

import nbprof
from nbprof import ranks
from nbprof.cli.main import main
from nbprof.formats.parquet import ColumnarFormatError
from nbprof.model import Trace

RANK_FILES = ("gpu_sampled_rank0.json.gz", "gpu_sampled_rank1.json.gz", "cpu_only_rank34.json.gz")


def assert_same_trace(a: Trace, b: Trace):
    for name in Trace.__slots__:
        if name == "_kernels_by_launch":
            continue
        left, right = getattr(a, name), getattr(b, name)
        if isinstance(left, np.ndarray):
            assert left.dtype == right.dtype and np.array_equal(left, right), name
        elif name == "instants":
            assert left.name == right.name, name
            assert np.array_equal(left.time_ns, right.time_ns), name
            assert np.array_equal(left.thread, right.thread), name
        elif name == "counters":
            assert [(c.name, c.series, c.pid) for c in left] == \
                [(c.name, c.series, c.pid) for c in right], name
            for c, d in zip(left, right):
                assert np.array_equal(c.time_ns, d.time_ns) and np.array_equal(c.values, d.values)
        else:
            assert dict(left) == dict(right) if hasattr(left, "items") else left == right, name
    assert a.events[:50] == b.events[:50] and a.kernels[:50] == b.kernels[:50]


@pytest.fixture(scope="module")
def step_trace(shared_traces):
    return nbprof.load(shared_traces / "gpu_training_step_68k.json.gz")


def test_parquet_round_trip_is_exact(step_trace, tmp_path):
    path = step_trace.to_parquet(tmp_path / "step.parquet")
    again = nbprof.load(path)
    assert_same_trace(step_trace, again)
    assert again.event_args[1] == step_trace.event_args[1]
    kernel = next(row for row, args in step_trace.gpu_args.items() if "grid" in args)
    assert kernel in again.gpu_args and again.gpu_args[kernel]["grid"] == \
        step_trace.gpu_args[kernel]["grid"]


def test_a_file_written_before_the_runtime_call_column_still_reads(step_trace, tmp_path):
    import pyarrow.parquet as pq

    assert (step_trace.gpu_call >= 0).sum() > 1000  # each kernel's launching runtime call
    path = step_trace.to_parquet(tmp_path / "step.parquet")
    pq.write_table(pq.read_table(path).drop_columns(["call"]), path)  # as files of before
    again = nbprof.load(path)
    assert (again.gpu_call == -1).all()
    assert np.array_equal(again.gpu_launch, step_trace.gpu_launch)


def test_a_loaded_traces_args_are_written_a_block_at_a_time_in_row_order(shared_traces,
                                                                          tmp_path, monkeypatch):
    # A loaded trace keeps its args compressed in the file's order; they are written in blocks
    # of that order and put back in row order. Small blocks: many of them, each out of order.
    from nbprof.formats.chrome.args import LazyArgs

    blocks = LazyArgs.encoded_blocks
    monkeypatch.setattr(LazyArgs, "encoded_blocks",
                        lambda self, encode: blocks(self, encode, rows_per_block=97))
    trace = nbprof.load(shared_traces / "gpu_sampled_rank0.json.gz")  # shapes on most ops
    assert len(trace.event_args) > 10 * 97 and len(trace.shapes) > 10 * 97
    again = nbprof.load(trace.to_parquet(tmp_path / "rank0.parquet"))
    assert dict(again.event_args) == dict(trace.event_args)
    assert dict(again.gpu_args) == dict(trace.gpu_args)
    assert dict(again.shapes) == dict(trace.shapes)


def test_args_with_an_int_past_64_bits_round_trip_exactly(tmp_path):
    # JSON allows any int; a file may hold one (orjson writes none and reads it as a float)
    path = tmp_path / "big.json"
    path.write_text('{"traceEvents": [{"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": 1.0, '
                    '"dur": 2.0, "args": {"x": 1180591620717411303424, "y": [1.5, null]}}]}')
    trace = nbprof.load(path)
    again = nbprof.load(trace.to_parquet(tmp_path / "big.parquet"))
    assert again.event_args[0] == {"x": 2 ** 70, "y": [1.5, None]} == trace.event_args[0]


def test_round_trip_keeps_shapes_stacks_tuples_and_int_keys(tmp_path):
    trace = Trace.build(
        start_ns=[0, 10, 20], end_ns=[100, 15, 30], thread=[0, 0, 1], name_id=[0, 1, 2],
        names=["outer", "inner \u00e9\n", "other"], threads=[(1, 2, "main"), (1, 3, "worker")],
        gpu_start_ns=[12], gpu_end_ns=[40], gpu_name_id=[1], gpu_device=[0], gpu_stream=[7],
        gpu_launch=[1], gpu_kind=[1],
        meta={"backend": "test", "device_names": {0: "GPU zero"}, "notes": ["a"],
              "pair": (1, (2, 3)), "rank": 2},
        shapes={0: [[2, 3], []], 1: ((4,),)}, stacks={0: ("f.py(1): f", "g.py(2): g")},
        event_args={2: {"x": [1, 2.5, None, True]}}, gpu_args={0: {"stream": 7}})
    again = nbprof.load(trace.to_parquet(tmp_path / "t.parquet"))
    assert_same_trace(trace, again)
    assert again.meta["device_names"] == {0: "GPU zero"} and again.meta["pair"] == (1, (2, 3))
    assert again.shapes[1] == ((4,),) and again.stacks[0] == ("f.py(1): f", "g.py(2): g")
    assert again.event(0).stack == ("f.py(1): f", "g.py(2): g")


def test_a_merged_job_round_trips_with_its_ranks(shared_traces, tmp_path):
    job = nbprof.load([shared_traces / name for name in RANK_FILES[:2]])
    again = nbprof.load(job.to_parquet(tmp_path / "job.parquet"))
    assert_same_trace(job, again)
    assert again.rank_summary().to_dict("records") == job.rank_summary().to_dict("records")


def test_arrow_and_pandas_views(step_trace):
    table = step_trace.to_arrow()
    assert table.num_rows == len(step_trace) + len(step_trace.gpu_start_ns)
    frame = step_trace.to_pandas()
    cpu = frame[~frame["gpu"]]
    assert list(cpu["name"][:3]) == [step_trace.names[i] for i in step_trace.name_id[:3]]
    assert frame["gpu"].sum() == len(step_trace.gpu_start_ns)
    assert frame.loc[frame["gpu"], "thread"].isna().all()  # a CPU-only column, null on GPU rows


def test_a_failed_write_leaves_the_old_file(step_trace, tmp_path):
    path = tmp_path / "t.parquet"
    step_trace.to_parquet(path)
    before = path.read_bytes()
    broken = Trace.empty(meta={"unwritable": object()})
    with pytest.raises(TypeError):
        broken.to_parquet(path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["t.parquet"]


def test_a_parquet_file_nbprof_did_not_write_is_refused_clearly(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), other)
    with pytest.raises(ColumnarFormatError, match="not one nbprof wrote"):
        nbprof.load(other)
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"not parquet at all")
    with pytest.raises(ColumnarFormatError, match="not a readable Parquet file"):
        nbprof.load(garbage)


@pytest.fixture(scope="module")
def parquet_job(shared_traces, tmp_path_factory):
    folder = tmp_path_factory.mktemp("job")
    assert main(["convert", *(str(shared_traces / name) for name in RANK_FILES),
                 "-o", str(folder), "--jobs", "2"]) == 0
    return folder


def test_convert_writes_one_file_per_rank(parquet_job):
    assert sorted(p.name for p in parquet_job.iterdir()) == sorted(
        name.replace(".json.gz", ".parquet") for name in RANK_FILES)


def test_duckdb_summary_equals_the_in_memory_one(parquet_job, shared_traces):
    from_duckdb = nbprof.rank_summary(parquet_job)
    in_memory = nbprof.load([shared_traces / name for name in RANK_FILES]).rank_summary()
    assert list(from_duckdb["rank"]) == [0, 1, 34]
    assert from_duckdb.to_dict("records") == in_memory.to_dict("records")
    assert from_duckdb.attrs["straggler"] == in_memory.attrs["straggler"] is not None
    assert all(row["cpu_busy_ns"] > 0 and row["steps"] for row in from_duckdb.to_dict("records"))


def test_cli_ranks_prints_the_summary(parquet_job, capsys):
    assert main(["ranks", str(parquet_job)]) == 0
    out = capsys.readouterr().out
    assert "Straggler: rank" in out and "34" in out


def test_pyarrow_dataset_reads_the_folder_as_one_table(parquet_job, shared_traces):
    import pyarrow.dataset as ds

    dataset = ds.dataset(parquet_job, format="parquet")
    singles = [nbprof.load(shared_traces / name) for name in RANK_FILES]
    assert dataset.count_rows() == sum(len(t) + len(t.gpu_start_ns) for t in singles)
    rank1 = dataset.to_table(filter=(ds.field("rank") == 1) & ~ds.field("gpu"),
                             columns=["start_ns", "end_ns", "name"])
    assert rank1.num_rows == len(singles[1])
    assert rank1.column("name").to_pylist()[:5] == [singles[1].names[i]
                                                    for i in singles[1].name_id[:5]]


def test_rank_summary_of_json_files_loads_one_at_a_time(shared_traces):
    summary = nbprof.rank_summary([shared_traces / name for name in RANK_FILES[:2]])
    assert summary.to_dict("records") == [ranks.rank_summary(nbprof.load(shared_traces / name)).to_dict("records")[0]
                                  for name in RANK_FILES[:2]]


def test_merging_parquet_ranks_keeps_their_args_exact(parquet_job, shared_traces):
    from_parquet = nbprof.load(sorted(parquet_job.glob("gpu_sampled_rank*.parquet")))
    from_json = nbprof.load([shared_traces / name for name in RANK_FILES[:2]])
    assert type(from_parquet.event_args).__name__ == "LazyRows"  # merged without decoding
    for name in ("event_args", "gpu_args", "shapes", "stacks"):
        assert dict(getattr(from_parquet, name)) == dict(getattr(from_json, name)), name


def test_gpu_busy_comes_from_kernels_beside_op_events_in_memory_and_in_duckdb(tmp_path):
    # nbprof's own GPU traces hold both: an op's CUDA-event interval (0..100 on the events' lane)
    # and its kernel (10..30 on stream 7); busy is the kernel's 20 ns, not 100 + 20
    from nbprof.model import GPU_KINDS

    op, kernel = GPU_KINDS.index("op"), GPU_KINDS.index("kernel")
    trace = Trace.build(start_ns=[0], end_ns=[5], thread=[0], name_id=[0], names=["aten::mm", "gemm"],
                        threads=[(1, 1, "main")], gpu_start_ns=[0, 10], gpu_end_ns=[100, 30],
                        gpu_name_id=[0, 1], gpu_device=[0, 0], gpu_stream=[0, 7], gpu_launch=[0, 0],
                        gpu_kind=[op, kernel], meta={"rank": 0})
    [in_memory] = trace.rank_summary().to_dict("records")
    assert in_memory["gpu_busy_ns"] == 20 and in_memory["gpu_intervals"] == 2
    trace.to_parquet(tmp_path / "rank0.parquet")
    assert nbprof.rank_summary(tmp_path).to_dict("records") == trace.rank_summary().to_dict("records")
    events_only = Trace.build(start_ns=[0], end_ns=[5], thread=[0], name_id=[0], names=["aten::mm"],
                              threads=[(1, 1, "main")], gpu_start_ns=[0], gpu_end_ns=[100],
                              gpu_name_id=[0], gpu_device=[0], gpu_stream=[0], gpu_launch=[0],
                              gpu_kind=[op], meta={"rank": 0})
    assert events_only.rank_summary()["gpu_busy_ns"][0] == 100  # no kernels: the events measure it
    events_only.to_parquet(tmp_path / "rank0.parquet")
    assert nbprof.rank_summary(tmp_path)["gpu_busy_ns"][0] == 100


# -- issue 21: a damaged nbprof Parquet file is one TraceFormatError from load itself --------

def _damaged_header(header):
    import json
    return json.dumps(header).encode()


PARQUET_DAMAGE = {
    "metadata without events": lambda h: _damaged_header({k: v for k, v in h.items()
                                                          if k != "events"}),
    "a shortened name table": lambda h: _damaged_header({**h, "names": h["names"][:2]}),
    "a shortened thread table": lambda h: _damaged_header({**h, "threads": h["threads"][:0]}),
    "a shortened category table": lambda h: _damaged_header({**h, "categories": []}),
    "names that are not strings": lambda h: _damaged_header({**h, "names": [1] * len(h["names"])}),
    "meta that is a list": lambda h: _damaged_header({**h, "meta": []}),
    "counters of two lengths": lambda h: _damaged_header(
        {**h, "counters": [{"name": "m", "series": "a", "pid": 1, "time_ns": [1, 2],
                            "values": [1.0]}]}),
    "metadata that is not JSON": lambda h: b'{"format": "nbprof-columnar-1", "events": ',
    "metadata that is not UTF-8": lambda h: b"\xff\xfe{}",
    "metadata that is a list": lambda h: b"[1, 2]",
}


@pytest.mark.parametrize("damage", list(PARQUET_DAMAGE))
def test_a_damaged_nbprof_parquet_file_is_refused_by_load(shared_traces, tmp_path, damage):
    import json

    import pyarrow.parquet as pq

    good = tmp_path / "good.parquet"
    nbprof.load(shared_traces / "rocm_mi250_train.json.gz").to_parquet(good)
    table = pq.read_table(good)
    header = json.loads(table.schema.metadata[b"nbprof"])
    bad = tmp_path / "bad.parquet"
    pq.write_table(table.replace_schema_metadata({b"nbprof": PARQUET_DAMAGE[damage](header)}),
                   bad)
    with pytest.raises(nbprof.TraceFormatError) as caught:
        nbprof.load(bad)
    message = str(caught.value)
    assert message.startswith(f"{bad}: ") and "damaged" in message[len(str(bad)):]


def test_nothing_to_load_is_a_trace_format_error_naming_the_path(tmp_path):
    from nbprof.formats.chrome import TraceNotFoundError

    (tmp_path / "empty").mkdir()
    (tmp_path / "other.txt").write_text("x")
    for source in (tmp_path / "empty", str(tmp_path / "run_*.json"), tmp_path / "gone.parquet",
                   tmp_path / "gone.json.gz", str(tmp_path / "empty" / "*.parquet")):
        with pytest.raises(nbprof.TraceFormatError) as caught:
            nbprof.load(source)
        assert str(source) in str(caught.value)
        assert isinstance(caught.value, (TraceNotFoundError, FileNotFoundError))
