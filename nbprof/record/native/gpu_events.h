// CUDA events per op for the native observer (gpu_events.cpp): a pool per (thread, device) of
// events created once (through torch's CUDA DeviceGuardImpl) and re-recorded (cudaEventRecord,
// looked up in the CUDA runtime torch loaded), so the build needs
// no CUDA toolkit headers and the same .so loads on CPU-only torch (there `unavailable()` says
// why and nothing here is ever called on the hot path).
#pragma once
#include <atomic>
#include <cstdint>
#include <vector>

namespace nbp_gpu {

constexpr int kMaxDevices = 16;
// observer.cpp's Flags that this file sets
constexpr uint8_t kFlagCapturing = 8, kFlagGpuError = 16, kFlagGpuEnd = 32;

struct Pool {
  std::vector<void*> events;  // cudaEvent_t, null until first recorded; [2i] start, [2i+1] end
  uint32_t used = 0;          // this session
};

struct Pools {
  Pool device[kMaxDevices];
  void begin_session() { for (auto& pool : device) pool.used = 0; }
};

extern std::atomic<bool> g_on;  // CUDA events are recorded this session
extern uint32_t g_depth;   // only ops at a depth below this get events

// Hot path (the op's own thread). record_start reserves the op's two pool slots and records
// the first on the current stream of the current device; nothing while that stream captures a
// CUDA graph (flags |= kFlagCapturing) or on an error (kFlagGpuError). record_end records the
// second on the same device's current stream.
void record_start(Pools& pools, uint32_t& event, int8_t& device, int64_t& stream, uint8_t& flags);
void record_end(Pools& pools, uint32_t event, int8_t device, uint8_t& flags);

// The same for a range on a stream torch may not know (a numba launch's): its raw cudaStream_t
// on `device` (-1: the current one). `stream` becomes torch's id for it (the current stream's,
// 0 for the legacy default stream, else the handle: torch's id of an external stream).
void record_start_on(Pools& pools, void* native_stream, int device, uint32_t& event,
                     int8_t& device_out, int64_t& stream, uint8_t& flags);
void record_end_on(Pools& pools, void* native_stream, uint32_t event, int8_t device,
                   uint8_t& flags);

// nullptr where CUDA events can be recorded here, else why not (one line)
const char* unavailable();
// Starts a session: anchors (synchronize, then an event) on each device in the mask. Throws.
void start(uint32_t depth, uint64_t anchor_devices);

// One event to place: its CPU time (approximate clock), the event, where its offset goes.
struct Mark {
  int64_t cpu;
  void* event;
  int64_t slot;
};
// At stop (recording off): synchronize every device in `devices` (plus the start anchors'),
// record a stop anchor on each, and add the anchors' marks. Returns the devices anchored.
uint64_t stop_anchors(uint64_t devices, std::vector<Mark>* marks, int64_t first_anchor_slot,
                      int64_t* anchor_cpu, int8_t* anchor_device, int64_t* anchors);
// Offsets in ns (double) of each mark's event from the device's earliest one, each measured
// from the previous one (float32 ms stays exact over short gaps) and summed in double; NaN
// where an event could not be timed.
void chain(int device, std::vector<Mark>& marks, double* offsets);

int64_t events_created(const Pools& pools);
// After a read: beyond `keep` events per device, the pool's events are destroyed.
void trim(Pools& pools, uint32_t keep);

}  // namespace nbp_gpu
