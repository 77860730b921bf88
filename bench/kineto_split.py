"""A real torch.profiler recording (Kineto's Chrome JSON, ../shared/traces) split into what nbprof's
native recorder with a CUDA-only Kineto session would hold: the ops (the observer's side), the
runtime and driver calls and the GPU activities (CUPTI's side, with CUPTI's correlation only).
The kernel-links tests check the linker against the file's own linkage with these; bench_native's
``--kernel-links`` times the linker on them. numpy and nbprof only."""

from __future__ import annotations

import decimal
import gzip
import json
from pathlib import Path

import numpy as np

from nbprof.model import Thread, Trace
from nbprof.record.kineto_cpu import CpuRecords, DeviceRecords, KinetoRecords, device_kind

GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")


def split_kineto_file(path: Path):
    """(ops, calls, activities, the activities' categories) of a Kineto file: columns (tid,
    start, end, names, args), times in epoch ns as integers (µs with decimals in the file: read
    exactly, a float64 keeps ~0.25 µs there)."""
    with gzip.open(path) as file:
        events = json.load(file, parse_float=decimal.Decimal)["traceEvents"]
    slices = [e for e in events if e.get("ph") == "X"]

    def ns(value):
        return int(decimal.Decimal(value) * 1000)

    def columns(rows):
        return dict(tid=np.array([int(e["tid"]) for e in rows], np.int64),
                    start=np.array([ns(e["ts"]) for e in rows], np.int64),
                    end=np.array([ns(e["ts"] + e["dur"]) for e in rows], np.int64),
                    names=[e["name"] for e in rows], args=[e.get("args", {}) for e in rows])

    return (columns([e for e in slices if e.get("cat") in ("cpu_op", "user_annotation")]),
            columns([e for e in slices if e.get("cat") in ("cuda_runtime", "cuda_driver")]),
            columns([e for e in slices if e.get("cat") in GPU_WORK]),
            [e["cat"] for e in slices if e.get("cat") in GPU_WORK])


def cuda_only_records(calls, activities, categories) -> KinetoRecords:
    """What a CUDA-only Kineto session hands back: calls with CUPTI's correlation, activities
    with no op correlation (0) and CUPTI's own in runtime_correlation."""
    count = len(calls["names"])
    cpu = CpuRecords(calls["names"], calls["start"], calls["end"], calls["tid"],
                     np.zeros(count, np.bool_), np.zeros(count, np.bool_), {}, {}, None)
    devices = DeviceRecords(
        activities["names"], activities["start"], activities["end"],
        np.array([a.get("device", 0) for a in activities["args"]], np.int64),
        np.array([a.get("stream", 0) for a in activities["args"]], np.int64),
        np.zeros(len(activities["names"]), np.int64),
        [device_kind(category, name) for category, name in zip(categories, activities["names"])],
        {row: {"grid": a["grid"]} for row, a in enumerate(activities["args"]) if "grid" in a},
        np.array([a["correlation"] for a in activities["args"]], np.int64))
    correlation = np.array([a["correlation"] for a in calls["args"]], np.int64)
    return KinetoRecords(cpu, correlation, devices, {})


def ops_trace(ops, base_ns: int, pid: int = 1) -> Trace:
    """The observer's side as a Trace (times from ``base_ns``), each op keeping the file's
    External id in its args: the linkage to check the linker against."""
    tids = sorted(set(ops["tid"].tolist()))
    names = sorted(set(ops["names"]))
    return Trace.build(start_ns=ops["start"] - base_ns, end_ns=ops["end"] - base_ns,
                       thread=np.searchsorted(tids, ops["tid"]),
                       name_id=np.searchsorted(names, ops["names"]), names=names,
                       threads=[Thread(pid, tid, f"t{tid}") for tid in tids],
                       event_args={row: {"External id": args.get("External id")}
                                   for row, args in enumerate(ops["args"])})
