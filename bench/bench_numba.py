"""Per-launch cost of numba.cuda kernels while nbprof profiles, against the same launches outside
a profile, side by side in one run (rounds alternate, so machine noise hits both alike).

Target (issues 10, 19): at most +3 us per launch on a GPU (numba's own launch costs 6.6-14 us),
and zero outside a profile (numba's launch path is then numba's own object: the identity tests).
Issue 19: with nbprof's native recorder each launch is one of its ranges (a push and a pop
through ctypes, on a GPU a pooled CUDA event pair on the launch's stream) instead of torch's
record_function and numba's events.

Figures printed:
1. end to end: a small saxpy launched N times, not profiled vs inside
   ``nbprof.profile(recorder="torch")`` and ``nbprof.profile(recorder="native")`` (on a GPU the
   native one records its CUDA events, and the torch one is what "auto" records there); on a
   GPU (numba real mode) the kernels are synchronised once per round; under the simulator
   (``NUMBA_ENABLE_CUDASIM=1``, set here when there is no GPU) a launch runs a Python thread per
   CUDA thread, so its cost dwarfs the recording and the figure is noisy;
2. the recording alone: nbprof's real-mode launch wrapper around a launch that does nothing
   (numba's own work excluded; no CUDA events, which a GPU adds), the part nbprof adds per launch;
3. the same with torch's record_function under the legacy profiler (the launching thread's path);
3n. the same as the native recorder's range while it records (issue 19's path; no CUDA events),
   side by side with 2 and 3 in alternating rounds;
4. with --split on a GPU: the launches under torch.profiler with CUPTI, under nbprof without CUPTI
   and under nbprof, each against none: which part of nbprof's cost is whose.

5. a native range's push + pop through ctypes as the wrapper makes it (three small ints, no
   argtypes) against the same call through argtypes.

On a GPU the launching thread is recorded by torch's legacy profiler, so its launches are timed
by a record_function on their stream; a worker thread's by numba's own event pair: figure 1 is
printed for both (``--thread main`` / ``worker`` / ``both``).

Usage: .venv/bin/python bench/bench_numba.py [--gpu] [--launches N] [--rounds R] [--thread T]
  [--split]
  --gpu: numba real mode on the GPU (the default where /dev/nvidiactl exists; with --gpu and no
  GPU it says so and exits 2); without a GPU, numba's simulator.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import statistics
import sys
import threading
import time

ASKED_GPU = "--gpu" in sys.argv[1:]
if not ASKED_GPU and not os.path.exists("/dev/nvidiactl"):
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")  # before numba.cuda is imported

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

import nbprof  # noqa: E402
from bench.figures import figure  # noqa: E402
from kernels.numba_kernels import SIMULATOR, saxpy  # noqa: E402
from nbprof.record.numba_launches import NumbaLaunchRecorder  # noqa: E402


# CPU seconds of this process where the launch is CPU work (the simulator, the recording alone):
# on these shared 2-core machines other jobs take the cores for whole seconds, which wall time
# would charge to whoever was running. On a GPU, wall time (the launches are asynchronous).
clock = time.process_time if SIMULATOR else time.perf_counter


def launch_loop(count: int, args, threads: int) -> float:
    """Seconds per launch of ``count`` saxpy launches (synchronised at the end on a GPU)."""
    start = clock()
    for _ in range(count):
        saxpy[1, threads](*args)
    if not SIMULATOR:
        cuda.synchronize()
    return (clock() - start) / count


def on_thread(where: str, work):
    """``work()``'s result, run on this thread (``main``) or on a fresh worker thread."""
    if where == "main":
        return work()
    result = []
    worker = threading.Thread(target=lambda: result.append(work()), name="bench-worker")
    worker.start()
    worker.join()
    return result[0]


# native: its CUDA events only, as the +3 us target was set (kernels=None would add CUPTI now)
PROFILES = {"torch": lambda: nbprof.profile(recorder="torch"),
            "native": lambda: nbprof.profile(recorder="native", kernels=False)}


def end_to_end(launches: int, rounds: int, where: str = "main") -> dict:
    """Median seconds per launch not profiled ("none") and under each of PROFILES, in
    alternating rounds."""
    threads = 4 if SIMULATOR else 256
    if SIMULATOR:
        args = (np.float32(2), *(np.ones(threads, np.float32) for _ in range(3)))
    else:
        args = (np.float32(2), *(cuda.device_array(threads, np.float32) for _ in range(3)))
    launch_loop(3, args, threads)  # compile / warm up
    seconds = {"none": [], **{name: [] for name in PROFILES}}
    for _ in range(rounds):
        seconds["none"].append(on_thread(where, lambda: launch_loop(launches, args, threads)))
        for name, make in PROFILES.items():
            with make():
                seconds[name].append(on_thread(where, lambda: launch_loop(launches, args,
                                                                          threads)))
    return {name: statistics.median(values) for name, values in seconds.items()}


class _DoNothingLaunch:
    """What numba's wrapper reads from a launch configuration, for a launch that does nothing."""

    class dispatcher:  # noqa: N801
        @staticmethod
        def py_func():
            pass

    griddim, blockdim, stream, sharedmem = (4, 1, 1), (64, 1, 1), 0, 0


def _do_nothing(launch_config, *args):
    return None


def wrapper_paths() -> dict:
    """name -> (the recorder, its real-mode wrapper around a launch that does nothing, the context
    it records in): the wrapper's own cost on each path."""
    import torch
    from torch._C._profiler import _ExperimentalConfig
    from torch.autograd import ProfilerConfig, ProfilerState

    from nbprof.record import native
    from nbprof.record.numba_gpu import TorchLaunchTiming

    alone = NumbaLaunchRecorder(gpu=False)
    paths = {"2. the slice alone (its list)":
             (alone, alone._launch_wrapper(_do_nothing), contextlib.nullcontext)}
    # The launching thread's path on the torch recorder: torch's real _RecordFunctionFast while
    # torch's legacy profiler records the thread, its CPU state here (no CUDA events: a GPU adds
    # a cudaEventRecord at each end); without CUDA, the current-stream query is the default's.
    recorder = NumbaLaunchRecorder(gpu=False)
    timing = recorder.torch_timing = TorchLaunchTiming(torch, device=0, per_thread_default=False)
    if not torch.cuda.is_available():
        timing._current_handle = lambda device: 0
    state = ProfilerState.CUDA if torch.cuda.is_available() else ProfilerState.CPU

    @contextlib.contextmanager
    def legacy_profiler():
        torch._C._autograd._enable_profiler_legacy(
            ProfilerConfig(state, False, False, False, False, False, _ExperimentalConfig()))
        try:
            yield
        finally:
            torch._C._autograd._disable_profiler_legacy()

    paths["3. torch path: record_function"] = (recorder, recorder._launch_wrapper(_do_nothing),
                                               legacy_profiler)
    library = native.load()
    if library is None:
        print(f"   (no native recorder here: {native.why_not()})")
        return paths

    @contextlib.contextmanager
    def native_recording():
        library.start()  # its CPU state: a GPU session adds the range's event pair
        try:
            yield
        finally:
            library.stop()

    ranges = NumbaLaunchRecorder(gpu=False, native=library)
    paths["3n. native path: its range"] = (ranges, ranges._launch_wrapper(_do_nothing),
                                           native_recording)
    return paths


def wrappers_side_by_side(launches: int, rounds: int) -> dict:
    """Median CPU seconds per launch of the bare launch ("bare") and of each wrapper path, each
    recording in its own context, in alternating rounds."""
    paths = wrapper_paths()
    config = _DoNothingLaunch()
    args = (np.float32(2), np.ones(4, np.float32), np.ones(4, np.float32), np.ones(4, np.float32))
    seconds = {"bare": [], **{name: [] for name in paths}}
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(launches):
            _do_nothing(config, *args)
        seconds["bare"].append((time.process_time() - start) / launches)
        for name, (recorder, wrapped, recording) in paths.items():
            recorder.clear()
            with recording():
                start = time.process_time()
                for _ in range(launches):
                    wrapped(config, *args)
                seconds[name].append((time.process_time() - start) / launches)
    return {name: statistics.median(values) for name, values in seconds.items()}


def push_pop_calls(calls: int, rounds: int) -> dict | None:
    """CPU ns per push + pop of a native range while the recorder records (no CUDA events): as
    the wrapper calls them (three small ints, no ctypes argtypes) and through argtypes (what a
    pointer and a 64-bit handle would need), alternating rounds. None without the recorder."""
    import ctypes

    from nbprof.record import native

    library = native.load()
    if library is None:
        return None
    name, stream, push, pop = library.range_calls()
    typed = ctypes.CDLL(library.path).nbp_range_push  # a second function object: its own argtypes
    typed.argtypes, typed.restype = [ctypes.c_int32] * 3, ctypes.c_int
    name_id, stream_id = name("numba::bench"), stream(0)
    ns = {"small ints, no argtypes": [], "argtypes": []}
    library.start()
    try:
        for _ in range(rounds):
            for label, call in (("small ints, no argtypes", push), ("argtypes", typed)):
                start = time.process_time()
                for _ in range(calls):
                    call(name_id, stream_id, -1)
                    pop()
                ns[label].append((time.process_time() - start) / calls * 1e9)
    finally:
        library.stop()
    return {label: statistics.median(values) for label, values in ns.items()}


def split(launches: int, rounds: int, where: str) -> dict:
    """Seconds per launch under each part of what nbprof switches on, medians of alternating
    rounds: where a profiled launch's added cost comes from (CUPTI's tracing of the launch and of
    numba's event records, the CUDA-event profiler, nbprof's wrapper)."""
    import torch

    threads = 256
    args = (np.float32(2), *(cuda.device_array(threads, np.float32) for _ in range(3)))
    launch_loop(3, args, threads)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    parts = {"none": contextlib.nullcontext,
             "torch.profiler (CPU + CUPTI)": lambda: torch.profiler.profile(activities=activities),
             "nbprof, no CUPTI": lambda: nbprof.profile(kernels=False),
             "nbprof": nbprof.profile,
             "nbprof native (events)": lambda: nbprof.profile(recorder="native", kernels=False)}
    seconds = {name: [] for name in parts}
    for _ in range(rounds):
        for name, make in parts.items():
            with make():
                seconds[name].append(on_thread(where, lambda: launch_loop(launches, args,
                                                                          threads)))
    return {name: statistics.median(values) for name, values in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true",
                        help="numba real mode on the GPU (exit 2 if there is none)")
    parser.add_argument("--launches", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--wrapper-launches", type=int, default=50_000,
                        help="launches per round of figures 2-3n")
    parser.add_argument("--thread", choices=("main", "worker", "both"), default="both")
    parser.add_argument("--split", action="store_true",
                        help="on a GPU, also each part's share of a profiled launch's cost")
    options = parser.parse_args()
    if options.gpu and (SIMULATOR or not cuda.is_available()):
        print("bench_numba --gpu: numba.cuda sees no GPU (or NUMBA_ENABLE_CUDASIM is set): run it "
              "on a machine with one, or drop --gpu for the simulator")
        sys.exit(2)
    mode = "numba.cuda simulator (CPU)" if SIMULATOR else "numba.cuda on the GPU"
    launches = options.launches or (200 if SIMULATOR else 5000)
    timed_by = {"main": "torch's record_function" if not SIMULATOR else "simulated",
                "worker": "numba's events" if not SIMULATOR else "simulated"}
    places = ("main", "worker") if options.thread == "both" else (options.thread,)
    for where in places:
        seconds = end_to_end(launches, options.rounds, where)
        plain = seconds.pop("none")
        print(f"1. {mode}, {where} thread: {launches} saxpy launches x {options.rounds} rounds "
              f"(median), not profiled {plain * 1e6:.2f} us per launch")
        for name, profiled in seconds.items():
            how = {"torch": f"GPU timing: {timed_by[where]}",
                   "native": "its range" + (", CUDA events" if not SIMULATOR else "")}[name]
            print(f"   recorder={name:6s} ({how}) added {(profiled - plain) * 1e6:+8.2f} us per "
                  f"launch ({profiled / plain:.3f}x)   target: <= +3 us on a GPU")
            if not SIMULATOR:
                figure(f"numba launch, {where} thread, recorder={name}: added per launch",
                       (profiled - plain) * 1e6, 3.0, " us")
    if options.split and not SIMULATOR:
        for where in places:
            parts = split(launches, options.rounds, where)
            none = parts.pop("none")
            print(f"4. where it goes, {where} thread: {launches} saxpy launches x {options.rounds} "
                  f"rounds (median), not profiled {none * 1e6:.2f} us per launch")
            for name, value in parts.items():
                print(f"   {name:30s} {(value - none) * 1e6:+10.2f} us per launch")
    print("2-3n. the wrapper's own cost (nbprof's real-mode wrapper around a launch that does "
          "nothing, 4 arguments, CPU time; no CUDA events), each path side by side, "
          f"{options.wrapper_launches} launches x {options.rounds} rounds (median)")
    seconds = wrappers_side_by_side(options.wrapper_launches, options.rounds)
    bare = seconds.pop("bare")
    for name, recorded in seconds.items():
        print(f"   {name:34s} added {(recorded - bare) * 1e6:+8.2f} us per launch")
    torch_path, native_path = (seconds.get("3. torch path: record_function"),
                               seconds.get("3n. native path: its range"))
    if torch_path and native_path:
        print(f"   native path / torch path: {(native_path - bare) / (torch_path - bare):.2f}x")
    calls = push_pop_calls(options.wrapper_launches, options.rounds)
    if calls:
        print(f"5. a native range's push + pop through ctypes, recording (CPU ns, median of "
              f"{options.rounds} rounds x {options.wrapper_launches})")
        for label, value in calls.items():
            print(f"   {label:24s} {value:8.0f} ns")


if __name__ == "__main__":
    main()
