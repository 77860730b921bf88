"""What torch's two profilers record on this GPU, raw: the facts nbprof's GPU path rests on.

CUDA_EVENTS.md marks some of them inferred from torch's source ([I]); this prints them as a GPU
machine shows them, for the three cases a first GPU run left unexplained (2026-12-04):
1. backward: which legacy thread lists arrive, with which thread ids, and what Kineto maps them to;
2. a second Python thread: its ops' and runtime calls' correlation ids, its kernels' links;
3. a CUDA graph replayed inside a record_function range: its kernels' links;
4. backward again once a second thread has run ops, as in the test suite.

Usage (on a GPU machine; bench/gpu_check.sh runs it): python3 bench/gpu_probe.py
"""

from __future__ import annotations

import collections
import pathlib
import sys
import threading

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from kernels.train_mlp import train  # noqa: E402
from nbprof.record.match_events import is_runtime_call  # noqa: E402
from nbprof.record.cuda_events import CudaRecorder  # noqa: E402


def record(work):
    recorder = CudaRecorder(kernels=True)
    recorder.start()
    try:
        work()
        torch.cuda.synchronize()
    finally:
        records = recorder.stop()
    return records


def legacy_threads(records) -> None:
    for index, records_of_thread in enumerate(records.legacy_lists or []):
        pushes = [r for r in records_of_thread if r.kind() == "push"]
        ids = collections.Counter(r.thread_id() for r in records_of_thread)
        with_cuda = sum(r.has_cuda() for r in pushes)
        names = [r.name() for r in pushes if "Backward" in r.name()][:3] or \
            [r.name() for r in pushes][:3]
        print(f"  legacy list {index}: {len(records_of_thread)} records, thread ids {dict(ids)}, "
              f"{len(pushes)} pushes ({with_cuda} with CUDA events), e.g. {names}")
    kineto = records.kineto
    print("  Kineto os_tids (small id -> OS tid):", kineto.os_tids)
    by_tid = collections.Counter(kineto.cpu.tid.tolist())
    for tid, count in by_tid.items():
        names = [n for n, t in zip(kineto.cpu.names, kineto.cpu.tid.tolist())
                 if t == tid and "Backward" in n][:3]
        print(f"  Kineto CPU rows on OS tid {tid}: {count}, backward e.g. {names}")


def links(records, label: str) -> None:
    kineto = records.kineto
    cpu = kineto.cpu
    by_tid = collections.defaultdict(list)
    for name, tid, correlation in zip(cpu.names, cpu.tid.tolist(), kineto.correlation.tolist()):
        by_tid[tid].append((name, correlation))
    for tid, rows in by_tid.items():
        calls = [row for row in rows if is_runtime_call(row[0])]
        ops = [row for row in rows if not is_runtime_call(row[0])]
        print(f"  {label}: OS tid {tid}: {len(ops)} ops (e.g. {ops[:3]}), {len(calls)} runtime "
              f"calls (e.g. {calls[:4]})")
    devices = kineto.devices
    runtime = devices.runtime_correlation
    print(f"  {label}: {len(devices.names)} device rows; (name, linked, CUPTI id):",
          [(n[:30], int(c), int(r)) for n, c, r in zip(devices.names, devices.correlation,
                                                       runtime)][:8])


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to probe")
        return 0
    train(steps=1)  # warm: cuBLAS, lazy module loads
    print("1. backward (kernels/train_mlp.py, one step)")
    legacy_threads(record(lambda: train(steps=1)))

    print("2. a second Python thread")
    x = torch.randn(256, 256, device="cuda")
    x.relu()

    def second_thread():
        thread = threading.Thread(target=lambda: [x.relu() for _ in range(3)], name="second")
        thread.start()
        thread.join()

    links(record(second_thread), "second thread")

    print("3. a CUDA graph replayed inside a record_function range")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            (x @ x).relu()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        (x @ x).relu()

    def replay():
        with torch.autograd.profiler.record_function("probe::replay"):
            graph.replay()

    links(record(replay), "graph replay")

    # In the test suite a second thread had run ops before the backward test, and there the map
    # of small ids pointed autograd's records at a lane with none of its ops (a fresh process, 1.
    # above, mapped it right): the same order here, for the next GPU to show why.
    print("4. backward again, after a second thread ran ops")
    legacy_threads(record(lambda: train(steps=1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
