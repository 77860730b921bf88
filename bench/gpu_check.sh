#!/usr/bin/env bash
# GPU checks for the recording core, in one run of at most ~8 minutes:
#   1. pytest -m gpu tests/gpu   (CUDA-event intervals vs launches, vs torch.cuda.Event, sleep, backward)
#   2. bench/bench_record.py --gpu   (overhead and exit time vs torch.profiler with CUPTI)
# Logs go to $OUT (or bench/out/gpu); a summary line per step is printed at the end.
#
# The GPU machine's python3 has torch (CUDA) and numba but maybe not pytest; nbprof itself is used
# from this checkout (PYTHONPATH), so bokeh & co. are not needed. What is missing is installed from
# wheels carried in $WHEELS (default .whl/, git-ignored), e.g. prepared on a networked machine with
#   pip download pytest -d .whl        (pure-Python wheels: any Python 3 will do)
# and carried with the run tool's `carry: [".whl"]`.
set -uo pipefail
cd "$(dirname "$0")/.."
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
} 2>&1 | tee "$LOGS/environment.log"

need() {  # need MODULE PACKAGE: import MODULE, else install PACKAGE from the carried wheels
    "$PY" -c "import $1" 2>/dev/null && return 0
    if [ -d "$WHEELS" ]; then
        "$PY" -m pip install -q --no-index --find-links "$WHEELS" "$2" 2>&1 | tee -a "$LOGS/install.log"
    else
        echo "$2 is missing and no wheels in $WHEELS: carry them (pip download $2 -d $WHEELS)" | tee -a "$LOGS/install.log"
    fi
    "$PY" -c "import $1"
}
need pytest pytest || exit 2
need numba numba || exit 2

status=0
timeout 300 "$PY" -m pytest -m gpu tests/gpu -v -p no:cacheprovider 2>&1 | tee "$LOGS/gpu_tests.log"
tests_rc=${PIPESTATUS[0]}
[ "$tests_rc" -eq 0 ] || status=1

timeout 150 "$PY" bench/bench_record.py --gpu --rounds 5 2>&1 | grep -v '^USDT:' | tee "$LOGS/gpu_bench.log"
bench_rc=${PIPESTATUS[0]}
[ "$bench_rc" -eq 0 ] || status=1

echo "gpu tests: rc=$tests_rc ($(tail -n 1 "$LOGS/gpu_tests.log"))" | tee "$LOGS/summary.log"
echo "gpu bench: rc=$bench_rc" | tee -a "$LOGS/summary.log"
exit $status
