#!/usr/bin/env bash
# GPU checks in under 8 minutes (imports first; each step has a timeout: its own upper bound, or
# what is left of TOTAL_BUDGET (480 s from the script's start) if that is less, so the steps
# first in line, the native recorder's, get their time and the last ones what remains: 60
# native build, 120 native GPU tests, 60 native bench, 240 GPU tests, 100 bench, 60 numba, 30
# probe, 45 demo, 90 native CPU tests s; NATIVE_*_TIMEOUT, TESTS_TIMEOUT, BENCH_TIMEOUT, NUMBA_TIMEOUT...
# change a bound, TOTAL_BUDGET the total; PYTEST_ARGS, e.g. --deselect ID, passes on to pytest):
#   0. every module the tests import (bokeh.embed, IPython.core.interactiveshell, jupyter_bokeh,
#      anywidget, ipywidgets, numba.cuda, pyarrow...), so a missing wheel fails in seconds, not
#      after minutes of tests (PARTIAL=1 runs the torch-only tests anyway, and exits 2)
#   0b. the native recorder's build (compiler, seconds) against this torch (its CPU tests, with
#      with_stack's under that Python, run last: step 6);
#      without a compiler (no ${CXX:-c++}, nor g++) the library carried in .native-prebuilt (made
#      here by bench/gpu_native_prebuilt.sh against this torch's wheel; name it in `carry`), which
#      build.py loads only if its key (torch's version, git hash, ABI; the sources) matches
#   1a. pytest -m gpu tests/gpu/test_native_gpu.py tests/gpu/test_numba_native_gpu.py
#      tests/gpu/test_memory_gpu.py, alone first (the native recorder's CUDA events, CUPTI's kernels
#      linked to its ops against torch.profiler's own links, and numba launches as its ranges:
#      issue 19; memory: the caching allocator's levels against torch's counters: issue 23)
#   1b. bench/bench_native.py --gpu   (the native recorder's CUDA events vs torch.profiler CPU+CUDA;
#      events + CUPTI kernels linked, and the other way to link them; nbprof's legacy path today;
#      its events vs CUPTI per queued mm and its anchor error)
#   1. pytest -m gpu tests/gpu   (events vs CUPTI per op, side stream, second thread, 60 s clock,
#      GPU sleep, backward, CUDA graph, fork DataLoader, %%cudaprof; -s: every figure printed)
#   2. bench/bench_record.py --gpu   (overhead vs torch.profiler with CUPTI, events only vs the
#      seed's ~4 us/op, exit time, event vs CUPTI agreement, anchor error)
#   3. bench/bench_numba.py --split   (per-launch cost of numba.cuda kernels profiled vs not, on
#      the torch path and as native ranges (recorder=native: target +3 us), and each part's
#      share: CUPTI, the CUDA-event profiler; needs numba-cuda)
#   4. bench/gpu_probe.py   (what torch's profilers record raw here: thread ids, correlation ids)
#   5. make demo's profile (nbprof run kernels/train_mlp.py) -> demo.html, to look at
#   6. the native recorder's CPU tests (tests/unit/test_native_{recorder,build,stacks}.py)
# Without a GPU (torch.cuda.is_available() False) it says so, runs 0 and 0b's build only (its CPU
# tests too with CPU_TESTS=1), skips every GPU step and exits 3.
#
# Logs go to $OUT (or bench/out/gpu), as each step runs (a run cut short still returns what
# finished), in 7 files at most (the device tool returns 8): setup.log (environment, install,
# native build and CPU tests, a STEP line per step), gpu_tests_native.log, gpu_bench_native.log,
# gpu_tests.log, gpu_bench.log (bench_record, bench_numba, gpu_probe in turn), demo.html, and
# summary.md: each figure against its target and each test's result (bench/gpu_summary.py,
# rewritten after every step, printed at the end).
#
# The GPU machine's python3 (3.12, torch 2.11 CUDA) has numba and pytest but not bokeh, IPython
# & co. nbprof is used from this checkout (PYTHONPATH), never pip-installed (that would pull
# torch). Missing packages are installed into $SITE (default /tmp/site) from wheels carried in
# $WHEELS (default .whl/, git-ignored): each missing one and its own missing needs, since pip
# there reaches no index.
# A carried wheel of a package the machine already has (jinja2, pillow...) is skipped: on
# PYTHONPATH it would shadow the machine's copy, which its torch and numba were built against.
# numpy is the exception (REPLACED below): carry numpy==2.4.6, as nbprof pins numpy < 2.5.
# Prepare them here with `bash bench/gpu_wheels.sh` (the set that ran there, into .whl/), and name
# `.whl` in the run tool's `carry`. Without them only the tests that need just torch run
# (tests/gpu/test_cuda_events.py), and summary.md names what was left out.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
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
SITE="${SITE:-/tmp/site}"
LOGS="${OUT:-bench/out/gpu}"
mkdir -p "$LOGS"
# a rerun here: no log of an earlier run may be summarised as this one's
rm -f "$LOGS"/*.log "$LOGS/summary.md" "$LOGS/demo.html" "$LOGS/demo.txt"
SETUP="$LOGS/setup.log"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
# A step's command under its timeout (a hung CUDA call that ignores SIGTERM is killed 10 s later)
run_for() {
    local bound=$1
    shift
    timeout -k 10 "$(within "$bound")" "$@"
}
# One line per step in setup.log, and the summary rewritten from every log so far
step() {
    echo "STEP | $1 | $2 | ${3:-}" >> "$SETUP"
    "$PY" bench/gpu_summary.py "$LOGS" || echo "bench/gpu_summary.py failed" >&2
}
finish() {
    "$PY" bench/gpu_summary.py "$LOGS" --print || cat "$SETUP"
    rm -f "$LOGS/demo.txt"  # in summary.md: what comes back from a device run is 8 files at most
    exit "$1"
}

{
    date -u
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/GPU: /'
    else
        echo "GPU: none seen (no nvidia-smi)"
    fi
    "$PY" -c 'import sys, torch, numpy, numba; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), "numpy", numpy.__version__, "numba", numba.__version__)'
    "$PY" -m pip list 2>/dev/null | grep -i -E '^(numba|numba-cuda|narwhals|pandas|pyarrow|cuda-bindings|cuda-python) '
    echo "tools: $(for tool in "${CXX:-c++}" g++ nvcc ninja; do printf '%s=%s ' "$tool" "$(command -v "${tool%% *}" || echo none)"; done)"
    "$PY" -c 'import sysconfig, pathlib; include = sysconfig.get_paths()["include"]; print("Python headers:", include, "(Python.h there)" if (pathlib.Path(include) / "Python.h").exists() else "(no Python.h: with_stack records through torch)")'
} 2>&1 | tee "$SETUP"

# module:package pairs the GPU tests import beyond torch and numpy: the very modules (a package
# can import while its submodule fails on a missing dependency)
NEEDS="pytest:pytest IPython.core.interactiveshell:ipython bokeh.embed:bokeh jupyter_bokeh:jupyter_bokeh ipywidgets:ipywidgets anywidget:anywidget numba.cuda:numba-cuda pyarrow:pyarrow orjson:orjson msgspec:msgspec lz4:lz4 pandas:pandas"
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
    # shellcheck disable=SC2086  # one argument per wheel
    [ -z "$absent" ] || "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target "$SITE" $absent 2>&1 | tee -a "$SETUP"
    export PYTHONPATH="$PYTHONPATH:$SITE"
    missing=$(missing_modules)
fi
echo "missing after install: ${missing:-none}" | tee -a "$SETUP"
TORCH_AFTER=$("$PY" -c 'import torch; print(torch.__version__, torch.__file__)')
if [ "$TORCH_BEFORE" != "$TORCH_AFTER" ]; then
    step install 2 "torch changed ($TORCH_BEFORE -> $TORCH_AFTER): a carried wheel shadows it; remove it"
    finish 2
fi
if echo "$missing" | grep -q '^pytest:'; then
    step install 2 "pytest is missing and not in $WHEELS: carry wheels (see the top of this script)"
    finish 2
fi
tests="tests/gpu"
left_out=""
status=0
if [ -n "$missing" ]; then
    if [ "${PARTIAL:-0}" != 1 ]; then
        step install 2 "MISSING: $(echo "$missing" | tr '\n' ' ')- carry their wheels (top of this script)"
        finish 2
    fi
    tests="tests/gpu/test_cuda_events.py tests/gpu/test_gpu_clock_on_device.py"  # torch only
    left_out=" (left out: the tests/gpu that need more than torch, missing $(echo "$missing" | tr '\n' ' '))"
    status=2
fi
step install 0 "missing after install: ${missing:-none}"

gpu=$("$PY" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)
if [ "$gpu" != 1 ]; then
    echo "NO GPU: torch.cuda.is_available() is False here; the GPU steps (1a-5) are skipped" | tee -a "$SETUP"
fi

# The native recorder (issue 19) against this machine's torch, in its first seconds: the compiler,
# the build's time into an empty cache, then its CPU tests (its GPU tests run with tests/gpu).
export NBPROF_NATIVE_CACHE="${NBPROF_NATIVE_CACHE:-/tmp/nbprof-native}"
compiler_word=$(echo "${CXX:-c++}" | cut -d' ' -f1)
if ! command -v "$compiler_word" >/dev/null 2>&1 && [ -z "${CXX:-}" ] && command -v g++ >/dev/null 2>&1; then
    export CXX=g++  # a machine with g++ (nvcc's host compiler) but no `c++` alternative
    compiler_word=g++
fi
if command -v "$compiler_word" >/dev/null 2>&1; then
    compiler="$(${CXX:-c++} --version 2>&1 | head -n 1)"
    compiler="${compiler:-$compiler_word}"
elif [ -d .native-prebuilt ]; then
    export NBPROF_NATIVE_PREBUILT="$PWD/.native-prebuilt"
    compiler="none ($compiler_word not found): the carried library, if built for this torch: $(ls .native-prebuilt | tr '\n' ' ')"
else
    compiler="none ($compiler_word not found), and no .native-prebuilt carried (bench/gpu_native_prebuilt.sh)"
fi
echo "compiler: $compiler" | tee -a "$SETUP"
native_build() {
    run_for "${NATIVE_BUILD_TIMEOUT:-60}" "$PY" -c 'import time, torch
from nbprof.record import native
from nbprof.record.native import build
start = time.perf_counter(); library = native.load()
took = f"compiled in {build.build_seconds:.1f} s" if build.build_seconds else "found (cache or carried)"
print("native build:", "ok" if library else "FAILED", f"{time.perf_counter() - start:.1f} s,",
      (took + ",") if library else "", f"variant {build.variant},", native.why_not() or "", library.path if library else "")
print("native CUDA events:", (library.gpu_unavailable() or "yes") if library else "no library")
import sys; sys.exit(0 if library else 1)' 2>&1 | grep --line-buffered -v '^USDT:' | tee -a "$SETUP"
    return "${PIPESTATUS[0]}"
}
native_build
native_build_rc=$?
if [ "$native_build_rc" -ne 0 ] && [ -z "${NBPROF_NATIVE_PREBUILT:-}" ] && [ -d .native-prebuilt ]; then
    # a compiler that is there but cannot build (no libstdc++ headers, an old g++): the carried
    # library, which needs glibc >= 2.34 (built on Debian 12)
    export NBPROF_NATIVE_PREBUILT="$PWD/.native-prebuilt"
    compiler="$compiler, which FAILED: the carried library instead"
    echo "native build failed with $compiler_word: trying the carried .native-prebuilt" | tee -a "$SETUP"
    native_build
    native_build_rc=$?
fi
step "0b. native build" "$native_build_rc" "$compiler"
# The native recorder's CPU tests under this machine's torch and Python: last on a GPU (they
# compile a few variants, ~1 min on 2 cores: the GPU rows go first); without a GPU with CPU_TESTS=1
native_cpu_tests() {
    run_for "${NATIVE_TESTS_TIMEOUT:-90}" "$PY" -m pytest -q -p no:cacheprovider tests/unit/test_native_recorder.py tests/unit/test_native_build.py tests/unit/test_native_stacks.py 2>&1 | grep --line-buffered -v '^USDT:' | tail -n 15 | tee -a "$SETUP"
    local rc=${PIPESTATUS[0]}
    step "6. native CPU tests" "$rc" "$(grep -E '(passed|failed|error)' "$SETUP" | tail -n 1)"
    return "$rc"
}
if [ "$gpu" != 1 ]; then
    [ "${CPU_TESTS:-0}" = 1 ] && native_cpu_tests
    step "1a-5. GPU steps" skipped "NO GPU: torch.cuda.is_available() is False"
    finish 3
fi

per_test=""  # a hung test fails alone instead of eating the whole run's time
"$PY" -c 'import pytest_timeout' 2>/dev/null && per_test="--timeout 100"
# The native recorder's CUDA events (new C++ never run on a device before): alone first, so that
# a crash there costs its own tests, not the whole GPU suite's.
# Memory on the GPU (issue 23: the allocator's levels through the native reporter) goes with
# them: cheap, and new C++ run on a device for the first time too.
# shellcheck disable=SC2086  # $per_test, $tests and $PYTEST_ARGS are lists of arguments
run_for "${NATIVE_GPU_TESTS_TIMEOUT:-120}" "$PY" -m pytest -m gpu tests/gpu/test_native_gpu.py tests/gpu/test_numba_native_gpu.py tests/gpu/test_memory_gpu.py -v -s -p no:cacheprovider $per_test 2>&1 | grep --line-buffered -v '^USDT:' | tee "$LOGS/gpu_tests_native.log"
native_tests_rc=${PIPESTATUS[0]}
[ "$native_tests_rc" -eq 0 ] || status=1
step "1a. native + memory GPU tests" "$native_tests_rc"

run_for "${NATIVE_BENCH_TIMEOUT:-60}" "$PY" bench/bench_native.py --gpu --rounds 3 2>&1 | grep --line-buffered -v '^USDT:' | tee "$LOGS/gpu_bench_native.log"
native_bench_rc=${PIPESTATUS[0]}
[ "$native_bench_rc" -eq 0 ] || status=1
step "1b. bench_native.py --gpu" "$native_bench_rc"

# shellcheck disable=SC2086
run_for "${TESTS_TIMEOUT:-240}" "$PY" -m pytest -m gpu $tests --ignore tests/gpu/test_native_gpu.py --ignore tests/gpu/test_numba_native_gpu.py --ignore tests/gpu/test_memory_gpu.py -v -s -p no:cacheprovider $per_test ${PYTEST_ARGS:-} 2>&1 | grep --line-buffered -v '^USDT:' | tee "$LOGS/gpu_tests.log"
tests_rc=${PIPESTATUS[0]}
[ "$tests_rc" -eq 0 ] || status=1
step "1. tests/gpu, the rest" "$tests_rc" "$tests$left_out"

BENCH="$LOGS/gpu_bench.log"
echo "==== bench/bench_record.py --gpu --rounds 3 --profile-exit" > "$BENCH"
run_for "${BENCH_TIMEOUT:-100}" "$PY" bench/bench_record.py --gpu --rounds 3 --profile-exit 2>&1 | grep --line-buffered -v '^USDT:' | tee -a "$BENCH"
bench_rc=${PIPESTATUS[0]}
[ "$bench_rc" -eq 0 ] || status=1
step "2. bench_record.py --gpu" "$bench_rc"

echo "==== bench/bench_numba.py --rounds 5 --split" >> "$BENCH"
run_for "${NUMBA_TIMEOUT:-60}" "$PY" bench/bench_numba.py --rounds 5 --split 2>&1 | grep --line-buffered -v '^USDT:' | tee -a "$BENCH"
numba_rc=${PIPESTATUS[0]}
[ "$numba_rc" -eq 0 ] || status=1
step "3. bench_numba.py --split" "$numba_rc"

echo "==== bench/gpu_probe.py" >> "$BENCH"
run_for "${PROBE_TIMEOUT:-30}" "$PY" bench/gpu_probe.py 2>&1 | grep --line-buffered -v '^USDT:' | tee -a "$BENCH"
step "4. gpu_probe.py" "${PIPESTATUS[0]}"

# make demo's profile on the GPU: the page a user opens, with its CUDA lanes (look at it after)
# and its Chrome export, checked and loaded back (the trace stays here: 8 files come back at most)
run_for "${DEMO_TIMEOUT:-45}" "$PY" -m nbprof.cli run -o "$LOGS/demo.html" \
    --trace /tmp/nbprof-demo.json.gz --table kernels/train_mlp.py 2>&1 | grep --line-buffered -v '^USDT:' \
    | tail -n 30 > "$LOGS/demo.txt"
demo_rc=${PIPESTATUS[0]}
"$PY" -c 'import nbprof, sys; from nbprof.formats.chrome.check import check_chrome_trace as check
path = "/tmp/nbprof-demo.json.gz"; problems = check(path); trace = nbprof.load(path)
print("export:", problems or "valid", "| loaded back:", trace, len(trace.kernels), "GPU intervals")
sys.exit(1 if problems or not len(trace.kernels) else 0)' >> "$LOGS/demo.txt" 2>&1 || demo_rc=1
[ "$demo_rc" -eq 0 ] || status=1
step "5. demo (nbprof run kernels/train_mlp.py)" "$demo_rc" "$LOGS/demo.html"
native_cpu_tests || status=1
finish $status
