// The C ABI between observer.cpp and native/records.py (ctypes): keep both in step, and bump
// NBP_ABI_VERSION with any change (the build's cache key includes this file anyway).
#pragma once
#include <cstdint>

#define NBP_ABI_VERSION 3
// The build hides every other symbol (-fvisibility=hidden): only these are the ABI.
#define NBP_API __attribute__((visibility("default")))

extern "C" {

// Where nbp_fetch writes: one row per record, plus per-thread and name tables. The caller sizes
// every array from nbp_stop(), nbp_thread_count(), nbp_names_size() and nbp_shapes_size().
struct NbpColumns {
  int64_t* start_ns;       // Unix-epoch ns (torch's profilers' clock)
  int64_t* end_ns;         // = start where the op had not ended
  int32_t* thread;         // index into the thread tables
  int32_t* name;           // index into the names (all threads' tables, one after the other)
  int64_t* seq;            // sequence number (-1: none)
  int64_t* fwd_tid;        // forward op's RecordFunction thread id (backward nodes), else 0
  uint16_t* depth;
  uint8_t* scope;          // at::RecordScope
  uint8_t* flags;          // see Flags in observer.cpp
  int64_t* thread_os_tid;  // per thread
  int64_t* thread_rf_tid;  // per thread: RecordFunction's small id
  char* names;             // NUL-terminated names, back to back
  int64_t* shapes;         // shape streams of all threads (null: not wanted)
  int64_t* shapes_base;    // per thread: its stream's offset in shapes
  int64_t* shape_row;      // per record with shapes: its row
  int64_t* shape_at;       // ... and where its shapes start in shapes
  int64_t shape_rows;      // capacity of shape_row / shape_at
  int64_t threads;         // out: threads written
  int64_t name_count;      // out: names written
  // GPU (null: not wanted): each op's start and end event in ns from its device's earliest
  // event (NaN: none), its device (-1: none) and stream (c10::StreamId)
  double* gpu_start;
  double* gpu_end;
  int8_t* device;
  int64_t* stream;
};

NBP_API int nbp_abi_version();
NBP_API const char* nbp_last_error();
// machinery_only: the callback is registered and returns at once (what torch's RecordFunction
// machinery costs alone, the floor of any observer; benchmarks)
NBP_API int nbp_start(int record_shapes, int machinery_only);
NBP_API int64_t nbp_stop();
NBP_API int64_t nbp_thread_count();
NBP_API int64_t nbp_names_size();
NBP_API int64_t nbp_shapes_size(int64_t* per_thread, int64_t* records_with_shapes);
NBP_API int64_t nbp_fetch(NbpColumns* out, int64_t capacity);
NBP_API void nbp_release();
NBP_API int64_t nbp_retained_bytes();

// CUDA events per op (gpu_events.h). "" where they can be recorded here, else why not.
NBP_API const char* nbp_gpu_unavailable();
// For the next nbp_start only: events on ops at depth < depth (-1: every op), start anchors on
// the devices in the mask (those with a CUDA context). -1 (nbp_last_error) without CUDA.
NBP_API int nbp_gpu_configure(int on, int64_t depth, uint64_t anchor_devices);
// After nbp_stop: the anchors (Unix ns, device, offset in ns as the ops'); at most 32.
NBP_API int64_t nbp_gpu_anchors(int64_t* cpu_ns, int8_t* device, double* offset_ns);
// After nbp_stop: why no GPU times were placed ("" if they were)
NBP_API const char* nbp_gpu_error();
// CUDA events the pools hold (a second profile creates none)
NBP_API int64_t nbp_gpu_events();
}

// ranges.cpp's hook into the observer (C++ only, not the ABI): a range that is no RecordFunction
// (a numba launch) becomes a record of the calling thread exactly as an op does: its buffer,
// clock, depth and session, and its CUDA events where the session records them at its depth, on
// its raw stream `native_stream` of `device` (-1: the current one). Both events are recorded
// inside the observer's guard, as an op's: a stop never reads or recycles a record or a pool
// that a range is still writing.
namespace nbp_range {
// Opens the record (nullptr: not recording).
void* open(const char* name, void* native_stream, int device);
// Ends it on the thread that opened it; false (nothing written) for a record of an earlier
// session, or when recording stopped.
bool close(void* record, void* native_stream);
}  // namespace nbp_range
