"""Compile the native observer on first use, into a cache keyed by everything its .so depends on.

One translation unit against ATen's record_function.h, called through a plain C ABI (ctypes): a
single compiler call, ~4 s of CPU, no pybind11, no torch/extension.h (18 s of headers) and no
ninja (nothing to schedule for one file). torch's own extension cache is not keyed by torch's
version and ninja does not track torch's headers, so a torch upgrade would silently reuse a
stale .so that reads RecordFunction through inline accessors: the key here is torch's version
and git hash, its C++ ABI, Python's version, the compiler and a hash of the sources and flags.
The fast build reads two of RecordFunction's private members; where this torch's differ (that
compile fails), a second compile uses its public API only (:data:`variant` says which was built).

Where this machine cannot compile (no C++ compiler, as on some GPU machines), a library built
elsewhere against the same torch can be carried over: ``NBPROF_NATIVE_PREBUILT`` names a folder
of ``<prebuilt key>/libnbprof_observer.so`` (made with ``python -m nbprof.record.native.prebuild
TORCH_DIR FOLDER`` against that torch's wheel, unpacked: bench/gpu_native_prebuilt.sh). Its key is what the library
depends on: torch's version and git hash, its C++ ABI, the flags and the sources, not Python's
version or the compiler's name (the library speaks C through ctypes, and torch's C++ is the
same in every Python's wheel of one release): a library built for another torch is never
found, so never loaded.

Nothing here imports torch: :func:`start_background_build` runs at ``import nbprof`` (a thread
that waits on the compiler, which runs in its own process and finishes, renaming its
finished library into place, even if Python exits first), and :func:`library_path` awaits it at the first profile. Where it cannot build,
:func:`library_path` returns None and :data:`why_not` says what to install, in one line.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

HERE = Path(__file__).parent
# Every native source, in one place: the build compiles the .cpp files and keys on all of them.
SOURCES = ("observer.cpp", "observer.h", "memory.cpp", "memory.h", "gpu_events.cpp",
           "gpu_events.h", "ranges.cpp", "ranges.h", "python_calls.cpp", "python_calls.h")
LIBRARY = "libnbprof_observer.so"
# -DNDEBUG as torch's release builds: its headers' debug-only checks read fields the release
# library never sets (RecordFunction::inputs() would fail "outside the start callback").
FLAGS = ("-O2", "-DNDEBUG", "-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden", "-Wno-attributes")
# The observer reads two private members of RecordFunction (observer.cpp: an op's name by its
# schema's address, no strlen per op). A torch that renames them fails that compile; the build
# then compiles once more with RecordFunction's public API only, rather than no native recorder.
# Each variant has its own cache key; the second is only ever built after the first failed.
FAST, PUBLIC = "private-members", "public-api"
VARIANT_FLAGS = {FAST: (), PUBLIC: ("-DNBP_PUBLIC_API_ONLY",)}
NOTE_PUBLIC_API = ("The native recorder was built with RecordFunction's public API only: this "
                   "torch's private members differ from those nbprof reads, so each op's name "
                   "costs a strlen and a string lookup more (update nbprof for the faster build).")

_lock = threading.Lock()
_thread: threading.Thread | None = None
_result: Path | None = None
why_not = ""  # one line: why the native observer is not available
build_seconds: float | None = None  # the last compile's wall time here (None: found in the cache)
variant: str | None = None  # FAST or PUBLIC: which the library found or built is


def torch_dir() -> Path | None:
    """torch's package folder, found without importing torch (seconds, and ~300 MB)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def torch_identity(torch_path: Path) -> str:
    """torch's version and git hash, read from its version.py (the text that import would run)."""
    text = (torch_path / "version.py").read_text()
    lines = [line for line in text.splitlines()
             if line.startswith(("__version__", "git_version", "cuda", "hip"))]
    return ";".join(lines)


def cxx11_abi(torch_path: Path) -> int:
    """torch's _GLIBCXX_USE_CXX11_ABI, from its libc10 symbols (the new ABI mangles
    ``__cxx11``): importing torch to ask torch._C would cost the importer seconds."""
    library = torch_path / "lib" / "libc10.so"
    return int(b"__cxx11" in library.read_bytes())


def compiler() -> list[str]:
    return shlex.split(os.environ.get("CXX") or "c++")


def cache_root() -> Path:
    base = os.environ.get("NBPROF_NATIVE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "nbprof", "native")
    return Path(base)


def python_include() -> Path | None:
    """Python's C headers (Python.h), which with_stack's profile function needs (python_calls.cpp);
    None where this Python was installed without them (then with_stack goes through torch)."""
    include = sysconfig.get_paths().get("include")
    return Path(include) if include and (Path(include) / "Python.h").exists() else None


def python_headers_why_not() -> str:
    """"" where Python's headers are here, else what to install (one line)."""
    if python_include() is not None:
        return ""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    return (f"Python {version}'s C headers (Python.h) are missing: install python{version}-dev "
            f"(e.g. apt-get install python{version}-dev)")


def cache_key(torch_path: Path, which: str = FAST) -> str:
    digest = hashlib.sha256()
    for part in (torch_identity(torch_path), f"abi={cxx11_abi(torch_path)}",
                 f"python={sys.version_info[:2]}", f"python_include={python_include()}",
                 " ".join(compiler()), " ".join(FLAGS + VARIANT_FLAGS[which])):
        digest.update(part.encode() + b"\0")
    for source in SOURCES:
        digest.update((HERE / source).read_bytes())
    return digest.hexdigest()[:20]


def python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def headers_version(include: Path) -> str:
    """"3.12" for a Python include folder (its patchlevel.h)."""
    text = (include / "patchlevel.h").read_text()
    major, minor = (re.search(rf"#define PY_{part}_VERSION\s+(\d+)", text)[1]
                    for part in ("MAJOR", "MINOR"))
    return f"{major}.{minor}"


def prebuilt_key(torch_path: Path, python: str | None = None, which: str = FAST) -> str:
    """The key of a library carried from another machine: everything its bytes depend on. With
    ``python`` ("3.12") it holds with_stack's profile function, built for that Python only (its
    C API is per version); without, it records with_stack through torch's profiler."""
    digest = hashlib.sha256()
    for part in (torch_identity(torch_path), f"abi={cxx11_abi(torch_path)}",
                 " ".join(FLAGS + VARIANT_FLAGS[which]), f"python={python}"):
        digest.update(part.encode() + b"\0")
    for source in SOURCES:
        digest.update((HERE / source).read_bytes())
    return "torch-" + digest.hexdigest()[:20]


def prebuilt_library(torch_path: Path) -> tuple[Path, str] | None:
    """The carried library for this torch in ``$NBPROF_NATIVE_PREBUILT`` and its variant, if
    there is one."""
    folder = os.environ.get("NBPROF_NATIVE_PREBUILT")
    if not folder:
        return None
    for python in (python_version(), None):  # built for this Python first
        for which in VARIANT_FLAGS:
            found = Path(folder) / prebuilt_key(torch_path, python, which) / LIBRARY
            if found.is_file():
                return found, which
    return None


def prebuild(torch_path: Path, folder: Path, python_headers: Path | None = None) -> Path:
    """Compile the library against ``torch_path`` (a torch package folder: an unpacked wheel's
    ``torch/`` will do, it is never imported) into ``folder``, for a machine without a compiler;
    with with_stack's profile function only given the target Python's ``python_headers``; the
    public-API variant where the fast one does not compile against that torch."""
    python = headers_version(python_headers) if python_headers else None
    for which in VARIANT_FLAGS:
        target = Path(folder) / prebuilt_key(torch_path, python, which) / LIBRARY
        target.parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(compile_command(torch_path, target, python_headers, which))
        if done.returncode == 0:
            return target
        shutil.rmtree(target.parent, ignore_errors=True)
    raise RuntimeError(f"the native observer did not compile against {torch_path}")


_THIS_PYTHON = object()


def compile_command(torch_path: Path, output: Path, python_headers=_THIS_PYTHON,
                    which: str = FAST, sources=None) -> list[str]:
    """The compiler call that builds ``output``; ``sources``: other .cpp files than the
    observer's, built the same way against the same torch (tests' simulated CUDA device)."""
    include, lib = torch_path / "include", torch_path / "lib"
    if sources is None:
        sources = [HERE / s for s in SOURCES if s.endswith(".cpp")]
    python = python_include() if python_headers is _THIS_PYTHON else python_headers
    python_flags = ["-DNBP_PYTHON", "-isystem", str(python)] if python else []
    return [*compiler(), *FLAGS, *VARIANT_FLAGS[which],
            f"-D_GLIBCXX_USE_CXX11_ABI={cxx11_abi(torch_path)}",
            "-isystem", str(include), *python_flags,
            *(str(source) for source in sources),
            "-L", str(lib), "-lc10", "-ltorch_cpu", "-ldl",  # dlsym: gpu_events.cpp
            f"-Wl,-rpath,{lib}", "-o", str(output)]


API_DIFFERS = "this torch's RecordFunction API differs"


def _why_build_failed(command: list[str], output: str) -> str:
    tail = " ".join(output.strip().splitlines()[-1:])[:200]
    if shutil.which(command[0]) is None:
        return (f"no C++ compiler ({command[0]!r} not found): install g++ (e.g. apt-get install "
                "g++) or set CXX")
    if "record_function.h" in output and "No such file" in output:
        return "torch's C++ headers are missing (torch/include): reinstall torch from a wheel"
    if "error:" in output:
        return f"{API_DIFFERS} ({tail}): update nbprof or torch"
    return f"the compiler failed ({' '.join(command[:1])}: {tail or 'no output'}): install g++"


def _build() -> Path | None:
    global why_not, build_seconds, variant
    torch_path = torch_dir()
    if torch_path is None or not (torch_path / "include" / "ATen" / "record_function.h").exists():
        why_not = "torch's C++ headers were not found (torch/include): reinstall torch"
        return None
    targets = {which: cache_root() / cache_key(torch_path, which) / LIBRARY
               for which in VARIANT_FLAGS}
    for which, target in targets.items():
        if target.exists():
            variant = which
            return target
    carried = prebuilt_library(torch_path)
    if carried is not None:
        path, variant = carried
        return path
    started = time.perf_counter()
    built = _compile(torch_path, targets[FAST], FAST)
    if built is None and why_not.startswith(API_DIFFERS):
        built = _compile(torch_path, targets[PUBLIC], PUBLIC)
        variant = PUBLIC if built is not None else None
    else:
        variant = FAST if built is not None else None
    if built is None:
        if os.environ.get("NBPROF_NATIVE_PREBUILT"):
            why_not += (f"; and $NBPROF_NATIVE_PREBUILT holds no library for this torch (key "
                        f"{prebuilt_key(torch_path)}, or with with_stack for Python "
                        f"{python_version()}: {prebuilt_key(torch_path, python_version())})")
        return None
    why_not = ""
    build_seconds = time.perf_counter() - started
    return built


def _compile(torch_path: Path, target: Path, which: str) -> Path | None:
    """Compile one variant into ``target``; None (and :data:`why_not` says why) if it fails."""
    global why_not
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{LIBRARY}.{os.getpid()}.{threading.get_ident()}")
    command = compile_command(torch_path, partial, which=which)
    # The shell renames the finished file itself: a process that exits mid-build (a short CLI
    # command; this thread is a daemon) still leaves a whole library in the cache, never a
    # half one. Another process building the same key writes the same bytes.
    script = f"{shlex.join(command)} && mv -f {shlex.quote(str(partial))} {shlex.quote(str(target))}"
    try:
        done = subprocess.run(["sh", "-c", script], capture_output=True, text=True,
                              errors="replace")
    except OSError as error:
        why_not = _why_build_failed(command, str(error))
        return None
    if done.returncode != 0 or not target.exists():
        partial.unlink(missing_ok=True)
        why_not = _why_build_failed(command, done.stderr + done.stdout)
        return None
    return target


def _run() -> None:
    global _result
    try:
        _result = _build()
    except Exception as error:  # noqa: BLE001  a build must never break an import
        globals()["why_not"] = f"the native observer's build failed: {error}"


def start_background_build() -> None:
    """Start building (or finding) the library in a thread; returns at once. Idempotent."""
    global _thread
    if os.environ.get("NBPROF_NATIVE") == "0":
        return
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_run, name="nbprof-native-build", daemon=True)
            _thread.start()


# A cached library is found in milliseconds; a profile waits this long at most for a compile
# still running (first use, ~5-15 s) unless the native recorder was required.
FIRST_PROFILE_WAIT_S = 2.0
STILL_BUILDING = "it is still being compiled (first use, ~5-15 s; the next profile uses it)"


def library_path(wait: bool = True) -> Path | None:
    """The compiled library; None if it could not build (then :data:`why_not` says why) or,
    with ``wait=False``, if its first compile is still running after a short wait."""
    start_background_build()
    if _thread is None:
        globals()["why_not"] = "NBPROF_NATIVE=0 is set"
        return None
    _thread.join(None if wait else FIRST_PROFILE_WAIT_S)
    if _thread.is_alive():
        return None
    return _result


def still_building() -> bool:
    return _thread is not None and _thread.is_alive()


def forget() -> None:
    """Forget this process's build, so that the next :func:`library_path` builds or looks up
    again (tests: a changed CXX, source or cache folder)."""
    global _thread, _result, why_not, build_seconds, variant
    with _lock:
        if _thread is not None:
            _thread.join()
        _thread, _result, why_not, build_seconds, variant = None, None, "", None, None

