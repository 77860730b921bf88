// nbprof's own ranges (ranges.cpp) through the C ABI, beside observer.h's: a range that is no
// torch op (a numba launch) recorded on the calling thread as its ops are. records.py calls them
// through ctypes; keep both in step (the build's cache key includes this file).
//
// A push passes small ints only: ctypes converts those without argtypes, ~230 ns cheaper per
// launch than a pointer and a handle through argtypes (bench/RESULTS.md, issue 19's numba part).
#pragma once
#include <cstdint>

#include "observer.h"

extern "C" {

// The id of a range name / of a raw cudaStream_t (0: the legacy default stream, id 0), made once
// per name or stream for the process; -1 when the table is full (then record no range).
NBP_API int32_t nbp_range_name(const char* name);
NBP_API int32_t nbp_range_stream(uint64_t stream);
// Opens a range on the calling thread (nested among its ops by depth and time): 1 if recorded,
// 0 when nothing records. In a session with CUDA events (at the range's depth) a pooled event is
// recorded on the stream of `device` (-1: the current one) after the CPU start time. Every push
// is paired with an nbp_range_pop.
NBP_API int nbp_range_push(int32_t name, int32_t stream, int32_t device);
// Closes the calling thread's innermost open range (its end event on its stream after the CPU
// end time): 1 if recorded, 0 if not (nothing records, or opened in an earlier session), -1 if
// none is open.
NBP_API int nbp_range_pop();
}
