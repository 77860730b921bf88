"""Columnar files and many ranks, side by side in one run.

1. Parquet round trip: a trace of --events events (../shared/traces/gpu_training_step_68k.json.gz
   tiled in time with fresh ids, its args kept) written as .json.gz and as .parquet; each loaded
   by ``nbprof.load`` in a fresh process (modules imported before the clock starts). Prints the
   load time ratio json.gz / parquet (target >= 10) and the size ratio parquet / json.gz (<= 1).
2. ``nbprof ranks DIR`` over --ranks folders of synthetic ranks of --rank-events events each (one
   tiled rank file, copied per rank with its rank column set and its times jittered), each run in
   a fresh process: wall time, time per rank (flat = linear in ranks) and peak RSS (target
   <= 2 GB).
3. Merge: ``nbprof.load`` of --merge-ranks of those rank files at once, against the sum of loading
   each alone (target <= 1.5x).

    .venv/bin/python bench/bench_ranks.py [--events 2000000] [--ranks 32,64,128]
        [--rank-events 1000000] [--merge-ranks 8] [--work bench/out/ranks]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import nbprof  # noqa: E402
from bench_timeline import SOURCE, tile  # noqa: E402

PRELOAD = "import nbprof, nbprof.formats.chrome, nbprof.formats.parquet, nbprof.ranks, pyarrow.parquet"


def tiled(events: int):
    """The source trace tiled to about ``events`` rows (CPU events + GPU intervals), args kept."""
    source = nbprof.load(SOURCE)
    copies = max(1, round(events / (len(source) + len(source.gpu_start_ns))))
    trace = tile(source, copies)
    n = len(source)
    trace.event_args = {row + copy * n: args for copy in range(copies)
                        for row, args in source.event_args.items()}
    return trace


def child(code: str) -> tuple[dict, float]:
    """Run ``code`` in a fresh Python (this tree first on the path); its last stdout line as
    JSON, and its peak RSS in GB: the child's own VmHWM, read as it ends (getrusage's maxrss
    would carry this process's peak across fork and exec)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    epilogue = ("\nimport re as _re\nprint('HWM', _re.search(r'VmHWM:\\s+(\\d+)', "
                "open('/proc/self/status').read()).group(1))")
    done = subprocess.run([sys.executable, "-c", code + epilogue], stdout=subprocess.PIPE,
                          env=env, cwd=ROOT, text=True)
    if done.returncode:
        sys.exit(f"child failed ({done.returncode}): {code}")
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-2]), int(lines[-1].split()[1]) / 1e6


def timed_load(path, repeats: int = 1, cpu: bool = False):
    """Best wall time of ``repeats`` loads in a fresh process (and its best CPU time if
    ``cpu``: on a shared machine wall time is noisy), and the events loaded."""
    code = (f"{PRELOAD}\nimport time, json\nbest = cpu = 1e9\nfor _ in range({repeats}):\n"
            f"    t0, c0 = time.perf_counter(), time.process_time()\n"
            f"    trace = nbprof.load({str(path)!r})\n"
            f"    best = min(best, time.perf_counter() - t0)\n"
            f"    cpu = min(cpu, time.process_time() - c0)\n"
            f"print(json.dumps({{'s': best, 'cpu': cpu, "
            f"'events': len(trace) + len(trace.gpu_start_ns)}}))")
    result, _rss = child(code)
    if cpu:
        return result["s"], result["cpu"], result["events"]
    return result["s"], result["events"]


def round_trip(events: int, work: pathlib.Path) -> None:
    trace = tiled(events)
    json_path, parquet_path = work / "big.json.gz", work / "big.parquet"
    start = time.perf_counter()
    trace.export_chrome_trace(json_path)
    export_s = time.perf_counter() - start
    start = time.perf_counter()
    trace.to_parquet(parquet_path)
    parquet_write_s = time.perf_counter() - start
    rows = len(trace) + len(trace.gpu_start_ns)
    del trace
    json_s, json_rows = timed_load(json_path)
    parquet_s, parquet_rows = timed_load(parquet_path, repeats=3)
    assert json_rows == parquet_rows == rows
    json_mb, parquet_mb = json_path.stat().st_size / 1e6, parquet_path.stat().st_size / 1e6
    print(f"[round trip] {rows:,} events: write .json.gz {export_s:.1f} s, .parquet "
          f"{parquet_write_s:.1f} s")
    print(f"[round trip] load .json.gz {json_s:.2f} s, .parquet {parquet_s:.3f} s: "
          f"parquet {json_s / parquet_s:.1f}x faster (target >= 10x)")
    print(f"[round trip] size .json.gz {json_mb:.1f} MB, .parquet {parquet_mb:.1f} MB: "
          f"parquet / json.gz = {parquet_mb / json_mb:.2f} (target <= 1)")
    json_path.unlink()
    parquet_path.unlink()


def rank_files(count: int, events: int, folder: pathlib.Path) -> list[pathlib.Path]:
    """``count`` synthetic rank files: one tiled trace, then per rank its rank column set and
    its times jittered (a rank's clock and pace differ a little), written with pyarrow."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from nbprof.formats.parquet import METADATA_KEY, ROW_GROUP, dumps, loads

    folder.mkdir(parents=True, exist_ok=True)
    first = folder / "step.rank0.parquet"
    tiled(events).to_parquet(first)
    table = pq.read_table(first)
    header = loads(table.schema.metadata[METADATA_KEY].decode())
    rng = np.random.default_rng(0)
    paths = [first]
    for rank in range(1, count):
        jitter = int(rng.integers(0, 2_000_000))
        shifted = table.set_column(table.schema.get_field_index("rank"), "rank",
                                   pa.array(np.full(table.num_rows, rank, np.int32)))
        for column in ("start_ns", "end_ns"):
            shifted = shifted.set_column(shifted.schema.get_field_index(column), column,
                                         pa.array(table.column(column).to_numpy() + jitter))
        header["meta"]["rank"] = rank  # what nbprof.load reads the rank from
        shifted = shifted.replace_schema_metadata({METADATA_KEY: dumps(header).encode()})
        path = folder / f"step.rank{rank}.parquet"
        pq.write_table(shifted, path, row_group_size=ROW_GROUP, compression="zstd")
        paths.append(path)
    return paths


def ranks_scale(counts: list[int], events: int, work: pathlib.Path) -> list[pathlib.Path]:
    paths = rank_files(max(counts), events, work / "all")
    per_rank = []
    for count in counts:
        folder = work / f"ranks{count}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        for path in paths[:count]:
            (folder / path.name).symlink_to(path)
        code = ("import time, json, sys\nfrom nbprof.cli import main\nt0 = time.perf_counter()\n"
                f"main(['ranks', {str(folder)!r}, '--json'])\n"
                "print(json.dumps({'s': time.perf_counter() - t0}))")
        result, rss_gb = child(code)
        per_rank.append(result["s"] / count)
        print(f"[nbprof ranks] {count} ranks x {events:,} events: {result['s']:.1f} s "
              f"({result['s'] / count:.3f} s per rank), peak RSS {rss_gb:.2f} GB (target <= 2 GB)")
    print(f"[nbprof ranks] time per rank, largest / smallest job: "
          f"{per_rank[-1] / per_rank[0]:.2f} (1.0 = linear in ranks)")
    return paths


def merge(paths: list[pathlib.Path]) -> None:
    alone = alone_cpu = 0.0
    for path in paths:  # best of 3, as the merged load below: first calls warm pyarrow up
        seconds, cpu, _rows = timed_load(path, repeats=3, cpu=True)
        alone += seconds
        alone_cpu += cpu
    code = (f"{PRELOAD}\nimport time, json\nbest = cpu = 1e9\nfor _ in range(3):\n"
            f"    t0, c0 = time.perf_counter(), time.process_time()\n"
            f"    trace = nbprof.load({[str(p) for p in paths]!r})\n"
            "    best = min(best, time.perf_counter() - t0)\n"
            "    cpu = min(cpu, time.process_time() - c0)\n"
            "print(json.dumps({'s': best, 'cpu': cpu, 'ranks': len(trace.meta['ranks'])}))")
    result, rss_gb = child(code)
    assert result["ranks"] == len(paths)
    print(f"[merge] {len(paths)} ranks (.parquet): loading each alone {alone:.2f} s in all, loading them "
          f"merged {result['s']:.2f} s: {result['s'] / alone:.2f}x (target <= 1.5x); CPU time "
          f"{alone_cpu:.2f} s alone, {result['cpu']:.2f} s merged: "
          f"{result['cpu'] / alone_cpu:.2f}x; peak RSS {rss_gb:.2f} GB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--ranks", default="32,64,128")
    parser.add_argument("--rank-events", type=int, default=1_000_000)
    parser.add_argument("--merge-ranks", type=int, default=8)
    parser.add_argument("--work", default=str(ROOT / "bench" / "out" / "ranks"))
    options = parser.parse_args()
    work = pathlib.Path(options.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    counts = sorted(int(count) for count in options.ranks.split(","))
    try:
        round_trip(options.events, work)
        paths = ranks_scale(counts, options.rank_events, work)
        merge(paths[:options.merge_ranks])
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
