// See gpu_events.h. CUDA goes through c10::impl::getDeviceGuardImpl(CUDA) (record to make an
// event, elapsedTime, synchronizeDevice, destroyEvent): its interface is in c10's headers on every
// torch build. The one call it lacks on torch 2.11 (isStreamCapturing, added in 2.13, and in the
// middle of the vtable: this .so is built per torch) is cudaStreamIsCapturing, looked up in the
// CUDA runtime torch already loaded, as is cudaEventRecord, which re-records the pools' events
// without torch's per-call device juggling. Why each choice: shared/RECORDER.md.
#include "gpu_events.h"

#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/ApproximateClock.h>
#include <c10/util/Exception.h>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace nbp_gpu {

std::atomic<bool> g_on{false};
uint32_t g_depth = std::numeric_limits<uint32_t>::max();

namespace {

using IsCapturing = int (*)(void* stream, int* status);  // cudaError_t, cudaStreamCaptureStatus
using GetLastError = int (*)();
using EventRecord = int (*)(void* event, void* stream);  // cudaEventRecord
IsCapturing g_is_capturing = nullptr;
GetLastError g_get_last_error = nullptr;
EventRecord g_event_record = nullptr;
const c10::impl::DeviceGuardImplInterface* g_cuda = nullptr;
std::string g_why;
void* g_anchor[kMaxDevices][2] = {};  // per device: start and stop anchors, re-recorded too
int64_t g_anchor_cpu[kMaxDevices][2] = {};
uint64_t g_start_anchored = 0;

// A function of the CUDA runtime torch loaded (cudaStreamIsCapturing, cudaGetLastError,
// cudaEventRecord)
void* find_in_cudart(const char* symbol) {
  if (void* found = dlsym(RTLD_DEFAULT, symbol)) return found;
  // torch loads its CUDA runtime privately (RTLD_LOCAL): find it by soname, never load one
  for (const char* name : {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
                           "libcudart.so"}) {
    if (void* handle = dlopen(name, RTLD_LAZY | RTLD_NOLOAD)) {
      void* found = dlsym(handle, symbol);
      dlclose(handle);  // RTLD_NOLOAD took a reference: torch still holds its own
      if (found) return found;
    }
  }
  return nullptr;
}

c10::Stream stream_of(int8_t device) {
  return g_cuda->getStream(c10::Device(c10::DeviceType::CUDA, device));
}

// false while the stream (a raw cudaStream_t) captures a CUDA graph, or its state cannot be
// read (e.g. the legacy default stream while another stream captures): no event then
bool may_record_on(void* native_stream) {
  int status = 0;
  if (g_is_capturing(native_stream, &status) != 0) {
    g_get_last_error();  // ours: the next kernel launch check must not report it as its own
    return false;
  }
  return status == 0;
}

bool may_record(const c10::Stream& stream) {
  return may_record_on(g_cuda->getStreamNativeHandle(stream));
}

// null (torch's default stream), cudaStreamLegacy and cudaStreamPerThread name a stream of
// whichever device is current when they are used
bool device_relative(void* native_stream) {
  return reinterpret_cast<uintptr_t>(native_stream) <= 2;
}

// An event on `stream` (`native_stream`: its handle). One the pool made already (every op's
// after the pool's first profile) goes straight to cudaEventRecord: torch's record gets and
// sets the current device around it (~3 cudaGetDevice per call) and checks its GPU trace. A
// device-relative handle needs its device current: `on_current_device` where the caller knows,
// else one getDevice; where it is not, and for an event not made yet, torch's record (which
// makes it, on the stream's device).
void record_on(void** event, const c10::Stream& stream, void* native_stream,
               bool on_current_device = false) {
  if (*event && g_event_record &&
      (!device_relative(native_stream) || on_current_device ||
       g_cuda->getDevice().index() == stream.device_index())) {
    if (g_event_record(*event, native_stream) == 0) return;
    g_get_last_error();  // ours: the next kernel launch check must not report it as its own
    throw std::runtime_error("cudaEventRecord failed");
  }
  g_cuda->record(event, stream, stream.device_index(), c10::EventFlag::BACKEND_DEFAULT);
}

void record_on(void** event, const c10::Stream& stream) {
  record_on(event, stream, g_cuda->getStreamNativeHandle(stream));
}

}  // namespace

const char* unavailable() {
  if (g_cuda) return nullptr;
  try {
    if (!c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) {
      g_why = "this torch has no CUDA support (a CPU-only build)";
      return g_why.c_str();
    }
    auto* cuda = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
    if (cuda->deviceCount() <= 0) {  // CPU-only torch may register a stub with no device
      g_why = "torch sees no CUDA device";
      return g_why.c_str();
    }
    g_is_capturing = reinterpret_cast<IsCapturing>(find_in_cudart("cudaStreamIsCapturing"));
    g_get_last_error = reinterpret_cast<GetLastError>(find_in_cudart("cudaGetLastError"));
    // (without it every event goes through torch's record, and numba's ranges get none)
    g_event_record = reinterpret_cast<EventRecord>(find_in_cudart("cudaEventRecord"));
    if (!g_is_capturing || !g_get_last_error) {
      g_why = "cudaStreamIsCapturing was not found in the CUDA runtime torch loaded";
      return g_why.c_str();
    }
    g_cuda = cuda;
    return nullptr;
  } catch (const c10::Error& error) {  // torch's: its message, not its C++ backtrace
    g_why = std::string("CUDA could not be queried: ") + error.what_without_backtrace();
    return g_why.c_str();
  } catch (const std::exception& error) {
    g_why = std::string("CUDA could not be queried: ") + error.what();
    return g_why.c_str();
  }
}

void record_start(Pools& pools, uint32_t& event, int8_t& device, int64_t& stream,
                  uint8_t& flags) {
  try {
    c10::Device current = g_cuda->getDevice();
    if (current.index() < 0 || current.index() >= kMaxDevices) {
      flags |= kFlagGpuError;
      return;
    }
    c10::Stream on = g_cuda->getStream(current);
    void* native_stream = g_cuda->getStreamNativeHandle(on);
    if (!may_record_on(native_stream)) {
      flags |= kFlagCapturing;
      return;
    }
    Pool& pool = pools.device[current.index()];
    if (pool.used + 2 > pool.events.size())  // only while the pool grows (a first profile)
      pool.events.resize(std::max<size_t>(pool.events.size() * 2, 64), nullptr);
    record_on(&pool.events[pool.used], on, native_stream, true);
    event = pool.used;
    pool.used += 2;
    device = static_cast<int8_t>(current.index());
    stream = on.id();
  } catch (...) {
    flags |= kFlagGpuError;
  }
}

void record_end(Pools& pools, uint32_t event, int8_t device, uint8_t& flags) {
  try {
    c10::Stream on = stream_of(device);
    void* native_stream = g_cuda->getStreamNativeHandle(on);
    if (!may_record_on(native_stream)) {
      flags |= kFlagCapturing;
      return;
    }
    record_on(&pools.device[device].events[event + 1], on, native_stream);
    flags |= kFlagGpuEnd;
  } catch (...) {
    flags |= kFlagGpuError;
  }
}

namespace {

// The pool slot's event re-recorded on a raw stream of its device; created first (on torch's
// current stream of that device, through `record` as every op's) where the slot has none, and
// not while that stream captures a graph (the event would become a node of the user's graph).
bool record_raw(void*& event, void* native_stream, int8_t device) {
  if (!g_event_record) throw std::runtime_error("no cudaEventRecord in the CUDA runtime");
  if (!may_record_on(native_stream)) return false;  // capturing a CUDA graph: no event
  if (!event) {
    c10::Stream current = stream_of(device);
    if (!may_record(current)) return false;
    record_on(&event, current);
  }
  if (g_event_record(event, native_stream) != 0) {
    g_get_last_error();
    throw std::runtime_error("cudaEventRecord failed");
  }
  return true;
}

}  // namespace

void record_start_on(Pools& pools, void* native_stream, int device, uint32_t& event,
                     int8_t& device_out, int64_t& stream, uint8_t& flags) {
  try {
    if (device < 0) device = g_cuda->getDevice().index();
    if (device < 0 || device >= kMaxDevices) {
      flags |= kFlagGpuError;
      return;
    }
    Pool& pool = pools.device[device];
    if (pool.used + 2 > pool.events.size())
      pool.events.resize(std::max<size_t>(pool.events.size() * 2, 64), nullptr);
    if (!record_raw(pool.events[pool.used], native_stream, static_cast<int8_t>(device))) {
      flags |= kFlagCapturing;
      return;
    }
    event = pool.used;
    pool.used += 2;
    device_out = static_cast<int8_t>(device);
    c10::Stream current = stream_of(static_cast<int8_t>(device));
    auto handle = reinterpret_cast<uintptr_t>(native_stream);
    // 0 and CU_STREAM_LEGACY (1) are the legacy default stream: torch's default, id 0
    stream = native_stream == g_cuda->getStreamNativeHandle(current) ? current.id()
             : handle <= 1 ? 0 : static_cast<int64_t>(handle);
  } catch (...) {
    flags |= kFlagGpuError;
  }
}

void record_end_on(Pools& pools, void* native_stream, uint32_t event, int8_t device,
                   uint8_t& flags) {
  try {
    if (!record_raw(pools.device[device].events[event + 1], native_stream, device)) {
      flags |= kFlagCapturing;
      return;
    }
    flags |= kFlagGpuEnd;
  } catch (...) {
    flags |= kFlagGpuError;
  }
}

// An anchor on device d (0: the profile's start, 1: its stop): the CPU time, then an event on an
// idle device, which completes as soon as it is recorded.
void record_anchor(int d, int which) {
  g_cuda->synchronizeDevice(static_cast<c10::DeviceIndex>(d));
  c10::Stream on = stream_of(static_cast<int8_t>(d));
  void*& anchor = g_anchor[d][which];
  // Once before the CPU time, and waited for: the event made (a first profile) and the path to
  // it warm, so that only the record itself lies between the CPU time and the event
  record_on(&anchor, on);
  g_cuda->synchronizeEvent(anchor);
  g_anchor_cpu[d][which] = static_cast<int64_t>(c10::getApproximateTime());
  record_on(&anchor, on);
}

void start(uint32_t depth, uint64_t anchor_devices) {
  if (const char* why = unavailable()) throw std::runtime_error(why);
  g_depth = depth;
  g_start_anchored = 0;
  for (int d = 0; d < kMaxDevices; ++d) {
    if (!(anchor_devices >> d & 1)) continue;
    record_anchor(d, 0);
    g_start_anchored |= uint64_t{1} << d;
  }
  g_on.store(true);
}

uint64_t stop_anchors(uint64_t devices, std::vector<Mark>* marks, int64_t first_anchor_slot,
                      int64_t* anchor_cpu, int8_t* anchor_device, int64_t* anchors) {
  g_on.store(false);
  devices |= g_start_anchored;
  int64_t slot = first_anchor_slot, count = 0;
  for (int d = 0; d < kMaxDevices; ++d) {
    if (!(devices >> d & 1)) continue;
    record_anchor(d, 1);
    g_cuda->synchronizeEvent(g_anchor[d][1]);
    for (int which = 0; which < 2; ++which) {
      if (which == 0 && !(g_start_anchored >> d & 1)) continue;
      marks[d].push_back({g_anchor_cpu[d][which], g_anchor[d][which], slot++});
      anchor_cpu[count] = g_anchor_cpu[d][which];
      anchor_device[count++] = static_cast<int8_t>(d);
    }
  }
  *anchors = count;
  return devices;
}

void chain(int device, std::vector<Mark>& marks, double* offsets) {
  std::stable_sort(marks.begin(), marks.end(),
                   [](const Mark& a, const Mark& b) { return a.cpu < b.cpu; });
  void* previous = nullptr;
  double previous_ns = 0.0;
  for (const Mark& mark : marks) {
    double offset = std::numeric_limits<double>::quiet_NaN();
    if (!previous) {
      offset = 0.0;  // the origin: the earliest event recorded on this device
    } else {
      try {
        offset = previous_ns +
                 g_cuda->elapsedTime(previous, mark.event, static_cast<c10::DeviceIndex>(device)) *
                     1e6;
      } catch (...) {  // never recorded, or not timeable: skipped, the chain goes on
      }
    }
    offsets[mark.slot] = offset;
    if (!std::isnan(offset)) {
      previous = mark.event;
      previous_ns = offset;
    }
  }
}

int64_t events_created(const Pools& pools) {
  int64_t count = 0;
  for (const Pool& pool : pools.device)
    for (void* event : pool.events) count += event != nullptr;
  return count;
}

void trim(Pools& pools, uint32_t keep) {
  if (!g_cuda) return;
  for (int d = 0; d < kMaxDevices; ++d) {
    Pool& pool = pools.device[d];
    for (size_t i = keep; i < pool.events.size(); ++i)
      g_cuda->destroyEvent(pool.events[i], static_cast<c10::DeviceIndex>(d));  // noexcept
    if (pool.events.size() > keep) {
      pool.events.resize(keep);
      pool.events.shrink_to_fit();
    }
    pool.used = 0;
  }
}

}  // namespace nbp_gpu
