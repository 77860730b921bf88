"""Hostile files against nbprof.load's memory (issue 21): the peak of loading a small .gz that
holds one huge token, whitespace run or never-ending event, in a fresh Python each.

Each case is a .json.gz of at most 10 MB (gzip level 9 packs a run ~1000:1) whose text holds a
run of --sizes MiB where a trace file can hold one: a string (in args, as a name, before and
after the events list, escaped), a number, whitespace (between events, after a comma, inside
an event, before the list, after the JSON) and text without an event's end (a list of small
tokens in args or after the list, many strings). nbprof.load either loads the file (whitespace
outside strings is skipped, not kept) or refuses it with TraceFormatError naming the byte; its
peak RSS (the child's VmHWM) must stay under 1 GB whatever the size. Prints each case and the
worst one.

    .venv/bin/python bench/bench_hostile_memory.py [--sizes 30,1024] [--work DIR]
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zlib

LIMIT_MB = 1000
MAX_GZIP_BYTES = 10_000_000


def event(ts: int, tail: bytes = b"") -> bytes:
    return b'{"ph":"X","name":"a","cat":"cpu_op","pid":1,"tid":1,"ts":%d,"dur":1%s}' % (ts, tail)


def open_args(value_start: bytes) -> bytes:
    """An event cut where its args' value begins (the case closes it)."""
    return event(0, b',"args":{"v":' + value_start)[:-1]


TINY = event(1) + b","
CASES = {
    "string in args": lambda n: [b"[", open_args(b'"'), (b"a", n), b'"}}', b",", event(2), b"]"],
    "escaped string": lambda n: [b"[", open_args(b'"'), (b"\\n", n), b'"}}', b"]"],
    "string as a name": lambda n: [b'[{"ph":"X","pid":1,"tid":1,"ts":0,"dur":1,"name":"',
                                   (b"b", n), b'"}]'],
    "number in args": lambda n: [b"[", open_args(b"1"), (b"7", n), b"}}", b"]"],
    "string before the list": lambda n: [b'{"x":"', (b"a", n), b'","traceEvents":[', event(0),
                                         b"]}"],
    "string after the list": lambda n: [b'{"traceEvents":[', event(0), b'],"x":"', (b"a", n),
                                        b'"}'],
    "spaces between events": lambda n: [b'{"traceEvents":[', event(0), (b" ", n), b",",
                                        event(2), b"]}"],
    "newlines after a comma": lambda n: [b"[", event(0), b",", (b"\n", n), event(2), b"]"],
    "tabs inside an event": lambda n: [b"[", open_args(b""), (b"\t", n), b"1}}", b",", event(2),
                                       b"]"],
    "spaces before the list": lambda n: [b'{"x":1,', (b" ", n), b'"traceEvents":[', event(0),
                                         b"]}"],
    "spaces after the JSON": lambda n: [b"[", event(0), b",", event(2), b"]", (b" ", n)],
    "list of zeros in args": lambda n: [b"[", open_args(b"[0"), (b",0", n), b"]}}", b"]"],
    "list of zeros after the list": lambda n: [b'{"traceEvents":[', event(0), b'],"x":[0',
                                               (b",0", n), b"]}"],
    "many strings after the list": lambda n: [b'{"traceEvents":[', event(0), b'],"x":[',
                                              (b'"a",', n), b'"a"]}'],
    "many strings in nbprof's block": lambda n: [b'{"traceEvents":[', event(0), b'],"nbprof":'
                                                 b'{"version":1,"x":[', (b'"a",', n), b'"a"]}}'],
    "many strings in an M event": lambda n: [b'[', event(0), b',{"ph":"M","name":"thread_name",'
                                             b'"pid":1,"tid":1,"args":{"x":[', (b'"a",', n),
                                             b'"a"]}}]'],
    # no long token at all: memory grows with the events kept, so only a bound on how far a gzip
    # may expand keeps a small file small
    "many identical tiny events": lambda n: [b"[", (TINY, n - n % len(TINY)), event(2), b"]"],
    "many ints in a counter": lambda n: [b'[', event(0), b',{"ph":"C","name":"c","pid":1,'
                                         b'"ts":0,"args":{"x":[', (b'1000000,', n), b'1]}}]'],
}


def write_gzip(path: pathlib.Path, parts) -> int:
    """``parts`` (bytes, or (pattern, n): n bytes of the pattern repeated) as a .json.gz, a
    block at a time; its size."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as out:
        for part in parts:
            if isinstance(part, tuple):
                pattern, count = part
                block = pattern * ((16 << 20) // len(pattern))
                for start in range(0, count, len(block)):
                    out.write(packer.compress(block[:count - start]))
            else:
                out.write(packer.compress(part))
        out.write(packer.flush())
    return path.stat().st_size


CHILD = """
import re, sys, time
import nbprof
start = time.perf_counter()
try:
    trace = nbprof.load(sys.argv[1], progress=False)
    outcome = f"loaded {len(trace)} events"
except nbprof.TraceFormatError as error:
    outcome = "refused: " + str(error).split(": ", 1)[1][:70]
seconds = time.perf_counter() - start
peak = int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)) // 1024
print(f"{peak}\\t{seconds:.1f}\\t{outcome}")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="30,1024", help="run lengths to try, MiB")
    parser.add_argument("--only", default="", help="a substring of the case names to run")
    parser.add_argument("--work", default=None,
                        help="where the cases are written (default: a new temporary folder)")
    args = parser.parse_args()
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="nbprof_hostile_"))
    work.mkdir(parents=True, exist_ok=True)
    worst = (0, "")
    print(f"{'case':30} {'MiB':>6} {'gz MB':>6} {'peak MB':>8} {'s':>6}  outcome")
    try:
        for size in [int(size) for size in args.sizes.split(",")]:
            for name, parts in CASES.items():
                if args.only not in name:
                    continue
                path = work / "case.json.gz"
                packed = write_gzip(path, parts(size << 20))
                if packed > MAX_GZIP_BYTES:
                    print(f"{name:30} {size:6} {packed / 1e6:6.1f}  (over 10 MB packed: skipped)")
                    continue
                done = subprocess.run([sys.executable, "-c", CHILD, str(path)], text=True,
                                      capture_output=True, timeout=1800)
                if done.returncode:
                    print(f"{name:30} {size:6} failed: {done.stderr.strip()[-300:]}")
                    worst = (10 ** 9, f"{name}, {size} MiB: failed")
                    continue
                peak, seconds, outcome = done.stdout.strip().split("\t")
                print(f"{name:30} {size:6} {packed / 1e6:6.1f} {int(peak):8} {seconds:>6}  "
                      f"{outcome}", flush=True)
                worst = max(worst, (int(peak), f"{name}, {size} MiB"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"worst: {worst[1]}: peak {worst[0]} MB (target < {LIMIT_MB} MB): "
          f"{'ok' if worst[0] < LIMIT_MB else 'OVER'}")


if __name__ == "__main__":
    main()
