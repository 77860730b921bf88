"""The compact hidden columns: varints round-trip, and every event of a trace survives packing."""

import numpy as np
import pytest

from nbprof.model import Trace
from nbprof.timeline.data import encode_events
from nbprof.timeline.lanes import build_lanes
from nbprof.timeline.packing import pack_columns, read_varints, unpack_columns, varints


def test_varints_round_trip_small_and_huge_values():
    values = np.array([0, 1, 127, 128, 300, 16383, 16384, 2**32, 2**53 - 1], np.int64)
    data = varints(values)
    assert len(data) < values.nbytes  # small values take one or two bytes
    assert read_varints(data, len(values)).tolist() == values.tolist()


def test_varints_refuse_negative_values():
    with pytest.raises(ValueError, match="non-negative"):
        varints(np.array([3, -1]))


def test_packed_columns_come_back_whole():
    columns = {"a": np.arange(1000) * 7919, "b": np.zeros(0, np.int64), "c": np.array([5])}
    blob, layout = pack_columns(columns)
    back = unpack_columns(blob, layout)
    assert {k: v.tolist() for k, v in back.items()} == {k: v.tolist() for k, v in columns.items()}


def _events_in_blob(trace):
    """Rebuild (kind, id, start, duration) of every entry from the packed blob, as the browser does."""
    lanes = build_lanes(trace)
    blob, info = encode_events(trace, lanes)
    cols = {k: v.astype(np.int64) for k, v in unpack_columns(blob, info["layout"]).items()}
    bounds = np.concatenate([[0], np.cumsum(cols["row_count"])])
    found, launched_by = set(), {}
    gpu_launch = iter(cols["gpu_launch"] - 1)  # one per GPU entry, in entry order
    for row in range(len(info["row_lane"])):
        lo, hi = bounds[row], bounds[row + 1]
        zigzag, durations = cols["start_gap"][lo:hi], cols["duration"][lo:hi]
        gaps = np.where(zigzag % 2 == 0, zigzag // 2, -(zigzag + 1) // 2)
        starts = np.zeros(len(gaps), np.int64)
        for i in range(len(gaps)):  # start = previous end + gap, as js/timeline.js decodes it
            starts[i] = gaps[i] + (starts[i - 1] + durations[i - 1] if i else 0)
        starts += info["origin_ns"]
        ids = np.cumsum(cols["id_delta"][lo:hi])
        kind = "gpu" if info["row_is_gpu"][row] else "cpu"
        found |= {(kind, int(i), int(s), int(d)) for i, s, d in zip(ids, starts, durations)}
        if kind == "gpu":
            launched_by.update((int(i), int(next(gpu_launch))) for i in ids)
    return found, info, launched_by


def test_every_event_and_interval_is_in_the_page_data_exactly():
    rng = np.random.default_rng(1)
    n = 3000
    start = rng.integers(0, 10**10, n)  # 10 s: past uint32 ns, to catch precision loss
    end = start + rng.integers(0, 50_000, n)  # zero-length events included
    trace = Trace.build(start_ns=start, end_ns=end, thread=rng.integers(0, 3, n),
                        name_id=rng.integers(0, 4, n), names=list("abcd"),
                        threads=[(1, 10, "main"), (1, 11, "w1"), (2, 20, "w2")],
                        gpu_start_ns=start[:500] + 1000, gpu_end_ns=end[:500] + 2000,
                        gpu_name_id=np.zeros(500), gpu_device=np.zeros(500),
                        gpu_stream=rng.integers(7, 9, 500),
                        gpu_launch=np.where(np.arange(500) % 7, np.arange(500), -1),
                        gpu_kind=np.ones(500))
    found, info, launched_by = _events_in_blob(trace)
    expected = {("cpu", i, int(s), int(e - s)) for i, (s, e) in enumerate(zip(trace.start_ns, trace.end_ns))}
    expected |= {("gpu", i, int(s), int(e - s))
                 for i, (s, e) in enumerate(zip(trace.gpu_start_ns, trace.gpu_end_ns))}
    assert found == expected
    assert launched_by == dict(enumerate(trace.gpu_launch.tolist()))  # -1 where none is known
    assert info["n_cpu"] == n and info["n_gpu"] == 500


def _leb128(value: int) -> bytes:  # the format, one value at a time
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32, np.int64, np.uint64])
def test_varints_are_leb128_for_every_column_type(dtype):
    rng = np.random.default_rng(5)
    top = np.iinfo(dtype).max
    values = np.concatenate([rng.integers(0, min(top, 2**62), 500, dtype=np.int64).astype(dtype),
                             np.array([0, 127, 128, top], dtype)])
    assert varints(values) == b"".join(_leb128(int(v)) for v in values)
