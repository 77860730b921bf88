"""Loading a huge Kineto JSON: nbprof's streaming load against ``json.load``, side by side.

The file: ../shared/traces/gpu_training_step_68k.json.gz's events tiled in time until the text
reaches --mb megabytes, each copy with fresh ids (External id, correlation, flow id) and times,
written as a plain .json under --work (deleted afterwards). With --shapes the tiled trace is
gpu_sampled_rank0.json.gz instead, recorded with record_shapes: 42% of its events (87% of its
cpu_ops) carry "Input Dims" and "Input type", which the 68k trace has none of. --profile adds a
third child: nbprof.load under cProfile, its top functions by own time and the share of the args'
shapes path (the args of the rows with shapes or a stack, read for their keys). Each reader runs in a fresh Python
(modules imported before the clock starts); its peak RSS is the child's VmHWM. Prints
time nbprof / json.load (target <= 0.5) and peak RSS / file size (target <= 0.35; json.load is
~4.8x).

    .venv/bin/python bench/bench_load.py [--mb 1100] [--work /tmp/nbprof_bench_load] [--shapes]
        [--profile]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pathlib
import shutil
import subprocess
import sys

import orjson

ROOT = pathlib.Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "traces"
SOURCE, SHAPES_SOURCE = TRACES / "gpu_training_step_68k.json.gz", TRACES / "gpu_sampled_rank0.json.gz"
ID_KEYS = ("External id", "correlation", "Ev Idx")


def build(path: pathlib.Path, megabytes: float, source: pathlib.Path = SOURCE) -> int:
    """Write ``source``'s events tiled as a Kineto file; the number of events in it."""
    data = orjson.loads(gzip.decompress(source.read_bytes()))
    events = data.pop("traceEvents")
    slices = [event for event in events if event.get("ph") != "M"]
    metadata = [event for event in events if event.get("ph") == "M"]
    times = [event["ts"] for event in slices if isinstance(event.get("ts"), (int, float))]
    span = max(times) - min(times) + 1000.0
    id_step = 1 + max([event["args"].get(key, 0) for event in slices
                       if isinstance(event.get("args"), dict) for key in ID_KEYS
                       if isinstance(event["args"].get(key), int)] +
                      [event["id"] for event in slices if isinstance(event.get("id"), int)])
    head = orjson.dumps(data)[:-1] + b',"traceEvents":[\n'
    written, count, copy = 0, 0, 0
    with open(path, "wb") as out:
        out.write(head)
        out.write(b",\n".join(map(orjson.dumps, metadata)))
        count += len(metadata)
        while written < megabytes * 1e6:
            shift, ids = copy * span, copy * id_step
            tiled = []
            for event in slices:
                event = dict(event)
                if isinstance(event.get("ts"), (int, float)):
                    event["ts"] = event["ts"] + shift
                if isinstance(event.get("id"), int):
                    event["id"] += ids
                args = event.get("args")
                if isinstance(args, dict) and any(key in args for key in ID_KEYS):
                    event["args"] = {key: value + ids if key in ID_KEYS and isinstance(value, int)
                                     else value for key, value in args.items()}
                tiled.append(event)
            text = b",\n".join(map(orjson.dumps, tiled))
            out.write(b",\n" + text)
            written += len(text)
            count += len(tiled)
            copy += 1
        out.write(b"\n]}\n")
    return count


def child(code: str) -> tuple[dict, int]:
    """Run ``code`` in a fresh Python; its JSON line (with its whole CPU time, s, added: on a
    shared machine wall time is noisy) and its peak RSS (bytes)."""
    # Peak RSS: the child's VmHWM as it ends. getrusage's ru_maxrss would carry this process's
    # peak (it built the file) across fork and exec; VmHWM starts afresh at exec.
    epilogue = ("\nimport resource as _r, re as _re\n_u = _r.getrusage(_r.RUSAGE_SELF)\n"
                "print('CPU', _u.ru_utime + _u.ru_stime)\nprint('HWM', _re.search("
                "r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))")
    done = subprocess.run([sys.executable, "-c", code + epilogue], stdout=subprocess.PIPE,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, text=True)
    if done.returncode:
        sys.exit(f"child failed ({done.returncode}): {code}")
    lines = done.stdout.strip().splitlines()
    result = json.loads(lines[-3])
    result["cpu"] = float(lines[-2].split()[1])
    return result, int(lines[-1].split()[1]) * 1024


def settled(path: pathlib.Path) -> None:
    """The fresh file flushed to disk and read once, so that neither reader pays for the
    kernel writing it back (the first runs' nbprof, read right after the build, waited ~60 s
    of its wall time on writeback) and both find it in the page cache."""
    os.sync()
    with open(path, "rb") as stream:
        while stream.read(1 << 24):
            pass


def profiled(path: pathlib.Path) -> None:
    """nbprof.load under cProfile in a fresh Python: the top functions by own time, and the
    share of the whole load that the args' shapes path (ArgsStore's keys-only check) took."""
    code = (f"import cProfile, pstats, io, json, nbprof, nbprof.formats.chrome\n"
            f"profile = cProfile.Profile()\nprofile.enable()\n"
            f"nbprof.load({str(path)!r})\nprofile.disable()\n"
            f"stats = pstats.Stats(profile, stream=io.StringIO())\n"
            f"total = sum(row[2] for row in stats.stats.values())\n"
            f"shapes = sum(row[3] for key, row in stats.stats.items()\n"
            f"             if key[0].endswith('args.py') and key[2] == '_only_split')\n"
            f"top = sorted(stats.stats.items(), key=lambda item: -item[1][2])[:8]\n"
            f"print(json.dumps({{'total': total, 'shapes': shapes, 'top': ["
            f"[f'{{k[0].split(\"/\")[-1]}}:{{k[2]}}', r[2]] for k, r in top]}}))")
    result, _rss = child(code)
    print(f"[load] cProfile: nbprof.load {result['total']:.1f} s (profiled), the shapes path "
          f"(args.py _only_split, cumulative) {result['shapes']:.2f} s = "
          f"{result['shapes'] / result['total']:.1%}")
    for name, seconds in result["top"]:
        print(f"[load]   own time {seconds:6.2f} s  {name}")


def measure(path: pathlib.Path) -> None:
    settled(path)
    size = path.stat().st_size
    json_code = (f"import json, time\nt0 = time.perf_counter()\n"
                 f"with open({str(path)!r}) as f: data = json.load(f)\n"
                 f"print(json.dumps({{'s': time.perf_counter() - t0, "
                 f"'events': len(data['traceEvents'])}}))")
    nbprof_code = (f"import nbprof, nbprof.formats.chrome, time, json\nt0 = time.perf_counter()\n"
                   f"trace = nbprof.load({str(path)!r})\n"
                   f"print(json.dumps({{'s': time.perf_counter() - t0, "
                   f"'events': len(trace) + len(trace.gpu_start_ns)}}))")
    base_code = "import nbprof, nbprof.formats.chrome, json\nprint(json.dumps({}))"
    base, base_rss = child(base_code)
    loaded, nbprof_rss = child(nbprof_code)
    parsed, json_rss = child(json_code)
    print(f"[load] {size / 1e6:,.0f} MB Kineto JSON, {parsed['events']:,} events "
          f"({loaded['events']:,} slices and kernels loaded)")
    print(f"[load] time: json.load {parsed['s']:.1f} s, nbprof.load {loaded['s']:.1f} s: "
          f"{loaded['s'] / parsed['s']:.2f}x (target <= 0.5x); CPU time of each whole process "
          f"(imports too) {base['cpu']:.1f} s idle, json {parsed['cpu']:.1f} s, nbprof "
          f"{loaded['cpu']:.1f} s: {(loaded['cpu'] - base['cpu']) / parsed['cpu']:.2f}x")
    print(f"[load] peak RSS: json.load {json_rss / 1e6:,.0f} MB ({json_rss / size:.2f}x the file), "
          f"nbprof.load {nbprof_rss / 1e6:,.0f} MB ({nbprof_rss / size:.2f}x the file; target "
          f"<= 0.35x); python + nbprof imported alone {base_rss / 1e6:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=1100)
    parser.add_argument("--work", default="/tmp/nbprof_bench_load")
    parser.add_argument("--shapes", action="store_true",
                        help="tile gpu_sampled_rank0 (ops with Input Dims) instead of the 68k trace")
    parser.add_argument("--profile", action="store_true",
                        help="also run nbprof.load under cProfile: where its time goes")
    options = parser.parse_args()
    work = pathlib.Path(options.work)
    work.mkdir(parents=True, exist_ok=True)
    path = work / "huge_kineto.json"
    try:
        build(path, options.mb, SHAPES_SOURCE if options.shapes else SOURCE)
        measure(path)
        if options.profile:
            profiled(path)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
