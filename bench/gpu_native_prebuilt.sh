#!/usr/bin/env bash
# The native observer built here for the lent GPU machine's torch (2.11.0+cu130), for a machine
# without a C++ compiler: bench/gpu_check.sh then loads it from .native-prebuilt (name it in the
# device tool's `carry`, beside .whl). It is found by a key of torch's version, git hash and C++
# ABI, the flags and the sources (nbprof/record/native/build.py, prebuilt_key): a library built
# for another torch or from other sources is never loaded. Needs only that torch's wheel, of any
# Python (its C++ libraries are the same): its include/, lib/libc10.so, lib/libtorch_cpu.so and
# version.py are unpacked (~0.5 GB; `pip download torch==2.11.0 --no-deps` fetched it, 0.5 GB).
#
# Two libraries: one without Python's headers (with_stack then records through torch's profiler,
# which on torch 2.11 records no Python frame), and one with_stack's profile function built for
# the GPU machine's Python (3.12.3 there, /opt/torch/.venv) from a Python 3.12's headers here
# (PYTHON_INCLUDE, default: pyenv's 3.12 where it is installed): that Python finds it first.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEEL="${TORCH_WHEEL:-/tmp/torch211/torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl}"
UNPACKED="${UNPACKED:-/tmp/nbprof-torch-headers/$(basename "$WHEEL" .whl)}"
# a Python with nbprof's needs (numpy): the checkout's venv, or the main checkout's from a worktree
PYTHON="${PYTHON:-$(for p in .venv/bin/python "$(git rev-parse --git-common-dir)/../.venv/bin/python"; do [ -x "$p" ] && echo "$p" && break; done)}"
[ -n "$PYTHON" ] || { echo "no .venv/bin/python here: set PYTHON" >&2; exit 1; }
if [ -z "${PYTHON_INCLUDE+set}" ]; then
    for candidate in "$(pyenv root 2>/dev/null)"/versions/3.12*/include/python3.12 /usr/include/python3.12; do
        [ -f "$candidate/Python.h" ] && PYTHON_INCLUDE="$candidate" && break
    done
fi
if [ ! -f "$UNPACKED/torch/version.py" ]; then
    mkdir -p "$UNPACKED"
    unzip -q -o "$WHEEL" 'torch/include/*' torch/lib/libc10.so torch/lib/libtorch_cpu.so \
        torch/version.py -d "$UNPACKED"
fi
rm -rf .native-prebuilt  # libraries of older sources would only travel, never load
# NBPROF_NATIVE=0: importing nbprof must not start a build for this machine's own torch
NBPROF_NATIVE=0 PYTHONPATH="$PWD" "$PYTHON" -m nbprof.record.native.prebuild "$UNPACKED/torch" .native-prebuilt
if [ -n "${PYTHON_INCLUDE:-}" ]; then
    NBPROF_NATIVE=0 PYTHONPATH="$PWD" "$PYTHON" -m nbprof.record.native.prebuild "$UNPACKED/torch" \
        .native-prebuilt --python-include "$PYTHON_INCLUDE"
else
    echo "no Python 3.12 headers found here (PYTHON_INCLUDE): with_stack goes through torch there" >&2
fi
