// with_stack on the native path: every Python thread's function calls and returns, recorded
// through a C profile function (PyEval_SetProfile, as torch's Python tracer) into per-thread
// buffers, read back as slices. Ops get their stacks from the slices that enclose them
// (convert.py's python_stacks), exactly as on torch's path. Independent of observer.cpp: the
// op hot path gains nothing when with_stack is off. Every function here runs with the GIL held
// (ctypes.PyDLL), which also serialises the buffers: no lock anywhere.
#pragma once
#include <cstdint>

#include "observer.h"

extern "C" {

// Where nbp_py_fetch writes, one row per Python call (a frame still running at stop ends then).
struct NbpPySlices {
  int64_t* start_ns;  // Unix-epoch ns, the clock of the observer's ops
  int64_t* end_ns;
  int64_t* os_tid;
  int32_t* key;       // index into the code table (nbp_py_codes)
};

// 1 where built with Python's headers (else with_stack goes through torch's profiler)
NBP_API int nbp_py_available();
// torch.nn.Module.__call__'s code object (null: none): its calls are named after the module.
NBP_API void nbp_py_set_module_call(void* code);
// Every thread's calls from now on; the frames each other thread is in count as called now.
// hook_only: the profile function is installed and returns at once (what CPython's profiling
// hook costs alone, the floor of any tracer; benchmarks)
NBP_API int nbp_py_start(int hook_only);
// A thread started while recording (threading's profile hook): trace it from `frame` on.
NBP_API int nbp_py_trace_thread(void* frame);
// memory=True without with_stack: every other thread pushes its memory reporter at its next
// Python event (a one-shot profile function, which then puts back the thread's own and forwards
// it that event); -1: not done. nbp_py_unhook_memory: those not run yet put back theirs now.
NBP_API int nbp_py_hook_memory();
NBP_API void nbp_py_unhook_memory();
// Off on every thread (each gets back the profile function it had); returns the number of slices (then nbp_py_codes, nbp_py_fetch).
NBP_API int64_t nbp_py_stop();
// The code objects (owned references, until nbp_py_release) and each one's line: -1 for a call
// (named by the line its first instruction has, as torch names it), -2 for an nn.Module's call
// (the object is the module), else the line a frame was at when recording started.
NBP_API int64_t nbp_py_codes(void** code, int32_t* line, int64_t capacity);
NBP_API int64_t nbp_py_fetch(NbpPySlices* out, int64_t capacity);
NBP_API void nbp_py_release();
}
