"""A CUDA device simulated on the CPU (sim_cuda.cpp) for the native recorder's GPU path, and a
way to run a test's script with it in a child process.

Registering a CUDA DeviceGuardImpl changes the whole torch process (autograd starts a thread per
device, torch's code sees a CUDA backend): every script that loads it runs in a child, so the
pytest process stays a plain CPU torch. The library is built with the observer's own compiler
command (nbprof/record/native/build.py) against the same torch, and cached by what it depends on.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from nbprof.record.native import build

HERE = Path(__file__).parent
SOURCE = HERE / "sim_cuda.cpp"
ROOT = HERE.parents[1]
LIBRARY = "libnbprof_sim_cuda.so"


def sim_library() -> Path:
    """The simulator's library, built on first use (~10 s) into nbprof's native cache."""
    torch_path = build.torch_dir()
    digest = hashlib.sha256()
    for part in (build.torch_identity(torch_path), f"abi={build.cxx11_abi(torch_path)}",
                 " ".join(build.compiler()), " ".join(build.FLAGS), SOURCE.read_text()):
        digest.update(part.encode() + b"\0")
    target = build.cache_root() / f"sim-cuda-{digest.hexdigest()[:20]}" / LIBRARY
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{LIBRARY}.{os.getpid()}")
    command = build.compile_command(torch_path, partial, python_headers=None, sources=[SOURCE])
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"the simulated CUDA device did not build:\n{done.stderr[-3000:]}")
    os.replace(partial, target)  # whole or not at all: another run may be building the same
    return target


def run_with_sim(script: str, timeout: float = 120) -> str:
    """Run ``script`` in a child Python with the simulated device loaded (``from
    tests.native_sim.device import sim``); its stdout. Fails with the child's output if it fails."""
    env = {**os.environ, "NBPROF_SIM_CUDA": str(sim_library()),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=timeout)
    assert done.returncode == 0, f"the child failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done.stdout
