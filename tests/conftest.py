import os
import pathlib
import signal

import pytest

# numba.cuda reads NUMBA_ENABLE_CUDASIM once, when it is first imported (nbprof.profile imports
# it): without an NVIDIA device the whole session runs numba kernels on numba's CPU simulator.
if not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

# The Ctrl-C tests send real SIGINTs and expect Python's KeyboardInterrupt, as in a Jupyter kernel
# (ipykernel installs this handler while a cell runs) or a terminal. A shell without job control
# starts a background job (`make test &`, a CI step run that way) with SIGINT ignored, and Python
# then keeps it ignored: every such SIGINT would vanish and those tests fail. nbprof itself is right
# to drop them there (the process ignores Ctrl-C with or without it), so the suite sets the handler.
signal.signal(signal.SIGINT, signal.default_int_handler)
# Likewise `nohup` starts the suite with SIGHUP ignored, which the `nbprof run` children inherit
# (and nbprof keeps a nohup's SIGHUP ignored on purpose): the stop-signal tests' SIGHUP would
# vanish and their script loop until the timeout. A terminal's default, as a user's shell has it.
signal.signal(signal.SIGHUP, signal.SIG_DFL)

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Real torch.profiler traces live beside the project's root, read in place (never copied in).
SHARED_TRACES = ROOT.parent / "shared" / "traces"


@pytest.fixture(scope="session")
def shared_traces() -> pathlib.Path:
    if not SHARED_TRACES.is_dir():
        pytest.fail(f"{SHARED_TRACES} is missing: the real traces in ../shared/traces are needed")
    return SHARED_TRACES


@pytest.fixture(scope="session")
def artifacts() -> pathlib.Path:
    path = ROOT / "test-artifacts"
    path.mkdir(exist_ok=True)
    return path


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if item.get_closest_marker("gpu") is not None:  # not "gpu" in keywords: a folder named gpu matches
            item.add_marker(skip)
