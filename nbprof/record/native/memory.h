// The C ABI of memory.cpp (issue 23): every thread's allocations and frees, read as columns
// through ctypes by native/records.py. Keep both in step.
#pragma once
#include <cstdint>

#include "observer.h"

extern "C" {

struct NbpMemoryColumns {
  int64_t* time_ns;    // Unix-epoch ns (the observer's clock)
  int64_t* bytes;      // < 0: a free
  uint64_t* addr;
  int64_t* allocated;  // the allocator's totals (CPU: counted since profiling began)
  int64_t* reserved;
  int16_t* device_type;  // c10::DeviceType: 0 CPU, 1 CUDA, ...
  int16_t* device_index;
  int64_t* os_tid;     // the thread that allocated or freed
};

// Whether the next nbp_start records memory too (set before it; off again at nbp_stop).
NBP_API void nbp_memory_enable(int enabled);
NBP_API int64_t nbp_memory_count();
NBP_API int64_t nbp_memory_fetch(NbpMemoryColumns* out, int64_t capacity);
NBP_API void nbp_memory_release();
// Before a torch profiler starts on this thread: its slot is freed of a reporter left from a
// session (torch refuses to start over anything in it).
NBP_API void nbp_memory_leave_thread();
// This thread's reporter, pushed now when recording (a thread's first op does it otherwise).
NBP_API void nbp_memory_enter_thread();
// The profiler's calibration: allocations timed with reports paused (1) and not (0).
NBP_API void nbp_memory_pause(int paused);
}

// Called by observer.cpp at a thread's first op of a session, and around start/stop.
void nbp_memory_begin_thread(uint64_t session);
void nbp_memory_start(uint64_t session);
void nbp_memory_stop();
