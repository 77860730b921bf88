#!/usr/bin/env bash
# The native observer built here for the lent GPU machine's torch (2.11.0+cu130), for a machine
# without a C++ compiler: bench/gpu_check.sh then loads it from .native-prebuilt (name it in the
# device tool's `carry`, beside .whl). It is found by a key of torch's version, git hash and C++
# ABI, the flags and the sources (nbprof/record/native/build.py, prebuilt_key): a library built
# for another torch or from other sources is never loaded. Needs only that torch's wheel, of any
# Python (its C++ libraries are the same): its include/, lib/libc10.so, lib/libtorch_cpu.so and
# version.py are unpacked (~0.5 GB; `pip download torch==2.11.0 --no-deps` fetched it, 0.5 GB).
set -euo pipefail
cd "$(dirname "$0")/.."
WHEEL="${TORCH_WHEEL:-/tmp/torch211/torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl}"
UNPACKED="${UNPACKED:-/tmp/nbprof-torch-headers/$(basename "$WHEEL" .whl)}"
if [ ! -f "$UNPACKED/torch/version.py" ]; then
    mkdir -p "$UNPACKED"
    unzip -q -o "$WHEEL" 'torch/include/*' torch/lib/libc10.so torch/lib/libtorch_cpu.so \
        torch/version.py -d "$UNPACKED"
fi
# NBPROF_NATIVE=0: importing nbprof must not start a build for this machine's own torch
# PYTHON_INCLUDE: the GPU machine's Python headers (3.12: /root/.pyenv/versions/3.12.1/include/python3.12
# here) for with_stack's profile function; unset, with_stack records through torch's profiler there
NBPROF_NATIVE=0 PYTHONPATH="$PWD" "${PYTHON:-.venv/bin/python}" -m nbprof.record.native.prebuild \
    "$UNPACKED/torch" .native-prebuilt ${PYTHON_INCLUDE:+--python-include "$PYTHON_INCLUDE"}
