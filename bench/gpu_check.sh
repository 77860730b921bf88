#!/usr/bin/env bash
# GPU checks in under 8 minutes (imports first; each step has a timeout: its own upper bound, or
# what is left of TOTAL_BUDGET (480 s from the script's start) if that is less, so the steps
# first in line, the native recorder's, get their time and the last ones what remains: 60 + 60
# native build and CPU tests, 120 native GPU tests, 60 native bench, 240 GPU tests, 100 bench,
# 60 numba, 30 probe, 45 demo s; NATIVE_*_TIMEOUT, TESTS_TIMEOUT, BENCH_TIMEOUT, NUMBA_TIMEOUT...
# change a bound, TOTAL_BUDGET the total; PYTEST_ARGS, e.g. --deselect ID, passes on to pytest):
#   0. every module the tests import (bokeh.embed, IPython.core.interactiveshell, jupyter_bokeh,
#      anywidget, ipywidgets, numba.cuda, pyarrow...), so a missing wheel fails in seconds, not
#      after minutes of tests (PARTIAL=1 runs the torch-only tests anyway, and exits 2)
#   0b. the native recorder's build (compiler, seconds) and its CPU tests (with_stack's too, under
#      that Python), against this torch;
#      without a compiler (no ${CXX:-c++}) the library carried in .native-prebuilt (made here by
#      bench/gpu_native_prebuilt.sh against this torch's wheel; name it in `carry`), which
#      build.py loads only if its key (torch's version, git hash, ABI; the sources) matches
#   1a. pytest -m gpu tests/gpu/test_native_gpu.py tests/gpu/test_numba_native_gpu.py
#      tests/gpu/test_memory_gpu.py, alone first (the native recorder's CUDA events, CUPTI's kernels
#      linked to its ops against torch.profiler's own links, and numba launches as its ranges:
#      issue 19; memory: the caching allocator's levels against torch's counters: issue 23)
#   1b. bench/bench_native.py --gpu   (the native recorder's CUDA events vs torch.profiler CPU+CUDA;
#      events + CUPTI kernels linked, and the other way to link them; nbprof's legacy path today)
#   1. pytest -m gpu tests/gpu   (events vs CUPTI per op, side stream, second thread, 60 s clock,
#      GPU sleep, backward, CUDA graph, fork DataLoader, %%cudaprof; -s: every figure printed)
#   2. bench/bench_record.py --gpu   (overhead vs torch.profiler with CUPTI, events only vs the
#      seed's ~4 us/op, exit time, event vs CUPTI agreement, anchor error)
#   3. bench/bench_numba.py --split   (per-launch cost of numba.cuda kernels profiled vs not, on
#      the torch path and as native ranges (recorder=native: target +3 us), and each part's
#      share: CUPTI, the CUDA-event profiler; needs numba-cuda)
#   4. bench/gpu_probe.py   (what torch's profilers record raw here: thread ids, correlation ids)
#   5. make demo's profile (nbprof run kernels/train_mlp.py) -> demo.html, to look at
# Logs go to $OUT (or bench/out/gpu); summary.log says what ran and how it ended.
#
# The GPU machine's python3 (3.12, torch 2.11 CUDA) has numba and pytest but not bokeh, IPython
# & co. nbprof is used from this checkout (PYTHONPATH), never pip-installed (that would pull
# torch). Missing packages are installed into /tmp/site from wheels carried in $WHEELS (default
# .whl/, git-ignored): each missing one and its own missing needs, since pip there reaches no index.
# A carried wheel of a package the machine already has (jinja2, pillow...) is skipped: on
# PYTHONPATH it would shadow the machine's copy, which its torch and numba were built against.
# numpy is the exception (REPLACED below): carry numpy==2.4.6, as nbprof pins numpy < 2.5.
# Prepare them here with `bash bench/gpu_wheels.sh` (the set that ran there, into .whl/), and name
# `.whl` in the run tool's `carry`. Without them only the tests that need just torch run
# (tests/gpu/test_cuda_events.py), and summary.log names what was left out.
set -uo pipefail
cd "$(dirname "$0")/.."
deadline=$((SECONDS + ${TOTAL_BUDGET:-480}))
# a step's timeout: its own bound ($1), or what is left of the total if less (at least 1 s: a
# step past the total is cut at once, and its log says so by its timeout's rc 124)
within() {
    local left=$((deadline - SECONDS))
    [ "$left" -lt 1 ] && left=1
    [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}
PY="${PYTHON:-python3}"
WHEELS="${WHEELS:-.whl}"
LOGS="${OUT:-bench/out/gpu}"
mkdir -p "$LOGS"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
    "$PY" -c 'import sys, torch, numpy, numba; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), "numpy", numpy.__version__, "numba", numba.__version__)'
    "$PY" -m pip list 2>/dev/null | grep -i -E '^(numba|numba-cuda|narwhals|pandas|pyarrow|cuda-bindings|cuda-python) ' 
} 2>&1 | tee "$LOGS/environment.log"

# module:package pairs the GPU tests import beyond torch and numpy: the very modules (a package
# can import while its submodule fails on a missing dependency)
NEEDS="pytest:pytest IPython.core.interactiveshell:ipython bokeh.embed:bokeh jupyter_bokeh:jupyter_bokeh ipywidgets:ipywidgets anywidget:anywidget numba.cuda:numba-cuda pyarrow:pyarrow orjson:orjson"
missing_modules() {
    for pair in $NEEDS; do
        "$PY" -c "import ${pair%%:*}" 2>/dev/null || echo "$pair"
    done
}
TORCH_BEFORE=$("$PY" -c 'import torch; print(torch.__version__, torch.__file__)')
missing=$(missing_modules)
if [ -n "$missing" ] && [ -d "$WHEELS" ]; then
    absent=$("$PY" - "$WHEELS" <<'PYTHON'
import importlib.metadata, pathlib, sys
# Installed over the machine's copy all the same: its numba-cuda 0.30.4 fails on its numpy 2.5
# (np.row_stack is gone; seen 2026-12-04), and nbprof pins numpy < 2.5 for that reason.
REPLACED = {"numpy"}
for wheel in sorted(pathlib.Path(sys.argv[1]).glob("*.whl")):
    name = wheel.name.split("-")[0].lower()
    if name in ("torch", "triton") or name.startswith("nvidia"):  # never the machine's torch
        print(f"skipped {wheel.name}: the machine's own torch stack stays", file=sys.stderr)
        continue
    if name in REPLACED:
        print(wheel)
        continue
    try:
        importlib.metadata.distribution(wheel.name.split("-")[0])
        print(f"skipped {wheel.name}: already installed", file=sys.stderr)
    except importlib.metadata.PackageNotFoundError:
        print(wheel)
PYTHON
)
    [ -z "$absent" ] || "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target /tmp/site $absent 2>&1 | tee "$LOGS/install.log"
    export PYTHONPATH="$PYTHONPATH:/tmp/site"
    missing=$(missing_modules)
fi
echo "missing after install: ${missing:-none}" | tee -a "$LOGS/install.log"
TORCH_AFTER=$("$PY" -c 'import torch; print(torch.__version__, torch.__file__)')
if [ "$TORCH_BEFORE" != "$TORCH_AFTER" ]; then
    echo "torch changed ($TORCH_BEFORE -> $TORCH_AFTER): a carried wheel shadows it; remove it" | tee "$LOGS/summary.log"
    exit 2
fi
if echo "$missing" | grep -q '^pytest:'; then
    echo "pytest is missing and not in $WHEELS: carry wheels (see the top of this script)" | tee "$LOGS/summary.log"
    exit 2
fi
tests="tests/gpu"
left_out=""
status=0
if [ -n "$missing" ]; then
    echo "MISSING: $(echo $missing | tr '\n' ' ')- carry their wheels (top of this script)" | tee "$LOGS/summary.log"
    [ "${PARTIAL:-0}" = 1 ] || exit 2
    tests="tests/gpu/test_cuda_events.py tests/gpu/test_gpu_clock_on_device.py"  # torch only
    left_out=" (left out: the tests/gpu that need more than torch, missing $(echo $missing | tr '\n' ' '))"
    status=2
fi

# The native recorder (issue 19) against this machine's torch, in its first seconds: the compiler,
# the build's time into an empty cache, then its CPU tests (its GPU tests run with tests/gpu).
export NBPROF_NATIVE_CACHE="${NBPROF_NATIVE_CACHE:-/tmp/nbprof-native}"
# (out of the piped block below: a pipe's block is a subshell, and every later step needs this)
compiler_word=$(echo "${CXX:-c++}" | cut -d' ' -f1)
if command -v "$compiler_word" >/dev/null 2>&1; then
    compiler="$(${CXX:-c++} --version 2>&1 | head -n 1)"
elif [ -d .native-prebuilt ]; then
    export NBPROF_NATIVE_PREBUILT="$PWD/.native-prebuilt"
    compiler="none ($compiler_word not found): the carried library, if built for this torch: $(ls .native-prebuilt | tr '\n' ' ')"
else
    compiler="none ($compiler_word not found), and no .native-prebuilt carried (bench/gpu_native_prebuilt.sh)"
fi
{
    echo "compiler: $compiler"
    timeout "$(within "${NATIVE_BUILD_TIMEOUT:-60}")" "$PY" -c 'import time, torch
from nbprof.record import native
from nbprof.record.native import build
start = time.perf_counter(); library = native.load()
print("native build:", "ok" if library else "FAILED", f"{time.perf_counter() - start:.1f} s",
      build.build_seconds, native.why_not(), library.path if library else "")'
    timeout "$(within "${NATIVE_TESTS_TIMEOUT:-60}")" "$PY" -m pytest -q -p no:cacheprovider tests/unit/test_native_recorder.py tests/unit/test_native_build.py tests/unit/test_native_stacks.py 2>&1 | tail -n 3
} 2>&1 | grep -v '^USDT:' | tee "$LOGS/native.log"

per_test=""  # a hung test fails alone instead of eating the whole run's time
"$PY" -c 'import pytest_timeout' 2>/dev/null && per_test="--timeout 100"
# The native recorder's CUDA events (new C++ never run on a device before): alone first, so that
# a crash there costs its own tests, not the whole GPU suite's.
# Memory on the GPU (issue 23: the allocator's levels through the native reporter) goes with
# them: cheap, and new C++ run on a device for the first time too.
timeout "$(within "${NATIVE_GPU_TESTS_TIMEOUT:-120}")" "$PY" -m pytest -m gpu tests/gpu/test_native_gpu.py tests/gpu/test_numba_native_gpu.py tests/gpu/test_memory_gpu.py -v -s -p no:cacheprovider $per_test 2>&1 | grep -v '^USDT:' | tee "$LOGS/gpu_tests_native.log"
native_tests_rc=${PIPESTATUS[0]}
[ "$native_tests_rc" -eq 0 ] || status=1

timeout "$(within "${NATIVE_BENCH_TIMEOUT:-60}")" "$PY" bench/bench_native.py --gpu --rounds 3 2>&1 | grep -v '^USDT:' | tee "$LOGS/gpu_bench_native.log"
native_bench_rc=${PIPESTATUS[0]}
[ "$native_bench_rc" -eq 0 ] || status=1

timeout "$(within "${TESTS_TIMEOUT:-240}")" "$PY" -m pytest -m gpu $tests --ignore tests/gpu/test_native_gpu.py --ignore tests/gpu/test_numba_native_gpu.py --ignore tests/gpu/test_memory_gpu.py -v -s -p no:cacheprovider $per_test ${PYTEST_ARGS:-} 2>&1 | grep -v '^USDT:' | tee "$LOGS/gpu_tests.log"
tests_rc=${PIPESTATUS[0]}
[ "$tests_rc" -eq 0 ] || status=1

timeout "$(within "${BENCH_TIMEOUT:-100}")" "$PY" bench/bench_record.py --gpu --rounds 3 --profile-exit 2>&1 | grep -v '^USDT:' | tee "$LOGS/gpu_bench.log"
bench_rc=${PIPESTATUS[0]}
[ "$bench_rc" -eq 0 ] || status=1

timeout "$(within "${NUMBA_TIMEOUT:-60}")" "$PY" bench/bench_numba.py --rounds 5 --split 2>&1 | grep -v '^USDT:' | tee "$LOGS/gpu_bench_numba.log"
numba_rc=${PIPESTATUS[0]}
[ "$numba_rc" -eq 0 ] || status=1

timeout "$(within "${PROBE_TIMEOUT:-30}")" "$PY" bench/gpu_probe.py 2>&1 | grep -v '^USDT:' | tee "$LOGS/gpu_probe.log"

# make demo's profile on the GPU: the page a user opens, with its CUDA lanes (look at it after)
# and its Chrome export, checked and loaded back (the trace stays here: 8 files come back at most)
timeout "$(within "${DEMO_TIMEOUT:-45}")" "$PY" -m nbprof.cli run -o "$LOGS/demo.html" \
    --trace /tmp/nbprof-demo.json.gz --table kernels/train_mlp.py 2>&1 | grep -v '^USDT:' \
    | tail -n 30 > "$LOGS/demo.txt"
demo_rc=${PIPESTATUS[0]}
"$PY" -c 'import nbprof, sys; from nbprof.formats.chrome.check import check_chrome_trace as check
path = "/tmp/nbprof-demo.json.gz"; problems = check(path); trace = nbprof.load(path)
print("export:", problems or "valid", "| loaded back:", trace, len(trace.kernels), "GPU intervals")
sys.exit(1 if problems or not len(trace.kernels) else 0)' >> "$LOGS/demo.txt" 2>&1 || demo_rc=1
[ "$demo_rc" -eq 0 ] || status=1

echo "gpu tests: rc=$tests_rc, $tests$left_out: $(tail -n 1 "$LOGS/gpu_tests.log")" | tee "$LOGS/summary.log"
echo "native gpu tests: rc=$native_tests_rc: $(tail -n 1 "$LOGS/gpu_tests_native.log")" | tee -a "$LOGS/summary.log"
echo "gpu bench: rc=$bench_rc" | tee -a "$LOGS/summary.log"
echo "native gpu bench: rc=$native_bench_rc: $(grep -h '^native events /' "$LOGS/gpu_bench_native.log")" | tee -a "$LOGS/summary.log"
echo "native recorder: $(grep -h 'native build\|passed\|failed' "$LOGS/native.log" | tr '\n' ' ')" | tee -a "$LOGS/summary.log"
echo "gpu numba bench: rc=$numba_rc: $(grep -h 'recorder=' "$LOGS/gpu_bench_numba.log" | tr -s ' ' | tr '\n' ';')" | tee -a "$LOGS/summary.log"
{ echo "demo on the GPU: rc=$demo_rc ($LOGS/demo.html), its output's end:"; cat "$LOGS/demo.txt"; } \
    | tee -a "$LOGS/summary.log"
rm -f "$LOGS/demo.txt"  # in summary.log: what comes back from a device run is 8 files at most
exit $status
