// A CUDA device simulated on the CPU, for tests only (as numba's simulator is for kernels): what
// nbprof's native recorder (nbprof/record/native/gpu_events.cpp) calls, and nothing else.
//
// What it shows: the recorder's C++ GPU path running for real on a machine without a GPU: its
// pools of events (created once, re-recorded, trimmed), the start/stop anchors, the event-to-event
// chain summed in double, the columns records.py reads, the device and stream of each op, and
// CUDA-graph capture. It is a GPU that runs each op the moment it is queued: an event is stamped
// with a monotonic clock (ns) when it is recorded, and elapsedTime is float32 ms, as CUDA's.
// It checks what CUDA checks where a mistake would only show on a device: an event recorded on
// another device's stream, a destroyed or never-recorded event, an event recorded while its
// stream captured a graph (never timeable), and counts each such misuse (sim_errors).
//
// What it cannot show: real queueing (an op's GPU interval later and longer than its CPU one),
// CUPTI's kernels, the caching allocator, real per-call costs: those are tests/gpu's.
//
// Loaded with ctypes.CDLL(path, mode=os.RTLD_GLOBAL) after torch: its static registrar makes it
// torch's CUDA DeviceGuardImpl (CPU-only torch registers none), and gpu_events.cpp finds its
// cudaStreamIsCapturing, cudaGetLastError and cudaEventRecord by dlsym(RTLD_DEFAULT, ...).
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <unordered_set>

#define SIM_API extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kDevices = 2;
constexpr int kStreams = 8;  // per device; id 0 is the default stream (native handle: null)
// cudaError_t values this file returns
constexpr int kSuccess = 0, kInvalidValue = 1, kInvalidDevice = 101,
              kInvalidResourceHandle = 400, kLaunchFailure = 719, kCaptureImplicit = 906;

struct SimStream {
  int device;
  int64_t id;
  std::atomic<bool> capturing{false};
};
SimStream g_streams[kDevices][kStreams];

struct SimEvent {
  int device;
  bool timing;
  bool recorded = false;
  bool captured = false;  // recorded into a graph being captured: never timeable
  int64_t stamp_ns = 0;
};

std::mutex g_mutex;  // the live events (cost does not matter here, every misuse is caught)
std::unordered_set<SimEvent*> g_live;
std::atomic<int64_t> g_created{0}, g_destroyed{0}, g_errors{0}, g_torch_records{0},
    g_raw_records{0}, g_device_calls{0}, g_captured_records{0}, g_records_to_fail{0};
std::atomic<double> g_rate[kDevices] = {{1.0}, {1.0}};  // each GPU clock's rate (drift)
const auto g_origin = std::chrono::steady_clock::now();

thread_local int tl_device = 0;
thread_local int64_t tl_stream[kDevices] = {};  // current stream id per device
thread_local int tl_last_error = kSuccess;      // CUDA's last error is per thread

int64_t gpu_now_ns(int device) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::steady_clock::now() - g_origin).count();
  return static_cast<int64_t>(static_cast<double>(ns) * g_rate[device].load());
}

int fail(int error) {
  g_errors++;
  tl_last_error = error;
  return error;
}

// torch's C10_CUDA_CHECK: a failed call's error is cleared, then thrown
void torch_check(int error, const char* call) {
  if (error == kSuccess) return;
  tl_last_error = kSuccess;
  TORCH_CHECK(false, "CUDA error ", error, " (sim: ", call, ")");
}

// A raw stream handle's stream: null and 1 (cudaStreamLegacy) are the current device's default
SimStream* stream_of(void* handle) {
  auto value = reinterpret_cast<uintptr_t>(handle);
  if (value <= 1) return &g_streams[tl_device][0];
  for (auto& device : g_streams)
    for (auto& stream : device)
      if (&stream == handle && stream.id != 0) return &stream;
  return nullptr;
}

bool device_captures(int device) {
  for (auto& stream : g_streams[device])
    if (stream.capturing.load()) return true;
  return false;
}

int record_event(SimEvent* event, void* handle) {
  std::lock_guard<std::mutex> lock(g_mutex);
  SimStream* stream = stream_of(handle);
  if (!stream || !g_live.count(event)) return fail(kInvalidResourceHandle);
  if (reinterpret_cast<uintptr_t>(handle) <= 1 && device_captures(stream->device))
    return fail(kCaptureImplicit);  // the legacy stream while another captures (global mode)
  if (event->device != stream->device) return fail(kInvalidResourceHandle);
  if (g_records_to_fail.load() > 0 && g_records_to_fail-- > 0) return fail(kLaunchFailure);
  event->recorded = true;
  event->captured = stream->capturing.load();  // a node in the user's graph
  g_captured_records += event->captured;
  event->stamp_ns = gpu_now_ns(event->device);
  return kSuccess;
}

void check_device(c10::DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < kDevices, "sim CUDA: invalid device ordinal ", int(index));
}

c10::Stream make_stream(int device, int64_t id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::CUDA, device), id);
}

struct SimGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::CUDA; }
  c10::Device exchangeDevice(c10::Device device) const override {
    c10::Device old = getDevice();
    setDevice(device);
    return old;
  }
  c10::Device getDevice() const override {
    g_device_calls++;
    return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(tl_device));
  }
  void setDevice(c10::Device device) const override {
    check_device(device.index());
    g_device_calls++;
    tl_device = device.index();
  }
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    if (device.index() >= 0 && device.index() < kDevices) tl_device = device.index();
  }
  c10::Stream getStream(c10::Device device) const override {
    int index = device.index() < 0 ? tl_device : device.index();
    check_device(index);
    return make_stream(index, tl_stream[index]);
  }
  c10::Stream getDefaultStream(c10::Device device) const override {
    check_device(device.index());
    return make_stream(device.index(), 0);
  }
  c10::Stream exchangeStream(c10::Stream stream) const override {
    check_device(stream.device_index());
    c10::Stream old = make_stream(stream.device_index(), tl_stream[stream.device_index()]);
    tl_stream[stream.device_index()] = stream.id();
    return old;
  }
  void* getStreamNativeHandle(const c10::Stream stream) const override {
    check_device(stream.device_index());
    TORCH_CHECK(stream.id() >= 0 && stream.id() < kStreams, "sim CUDA: unknown stream");
    return stream.id() == 0 ? nullptr : &g_streams[stream.device_index()][stream.id()];
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    if (!event) return;
    std::lock_guard<std::mutex> lock(g_mutex);
    auto* sim = static_cast<SimEvent*>(event);
    if (!g_live.erase(sim)) {
      fail(kInvalidResourceHandle);
      tl_last_error = kSuccess;  // C10_CUDA_CHECK_WARN
      return;
    }
    delete sim;
    g_destroyed++;
  }
  // As CUDAGuardImpl::record: on the stream's device, the event created where it is null, then
  // cudaEventRecord; the current device restored.
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "Event device index ", int(device_index), " does not match recording stream's "
                "device index ", int(stream.device_index()), ".");
    c10::Device original = getDevice();
    setDevice(stream.device());
    if (!*event) {
      auto* created = new SimEvent{stream.device_index(), flag != c10::EventFlag::PYTORCH_DEFAULT};
      std::lock_guard<std::mutex> lock(g_mutex);
      g_live.insert(created);
      g_created++;
      *event = created;
    }
    g_torch_records++;
    int error = record_event(static_cast<SimEvent*>(*event), getStreamNativeHandle(stream));
    setDevice(original);
    torch_check(error, "cudaEventRecord");
  }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }  // every op has run
  c10::DeviceIndex deviceCount() const noexcept override { return kDevices; }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  bool isStreamCapturing(const c10::Stream& stream) const override {
    getStreamNativeHandle(stream);  // checks the stream
    return g_streams[stream.device_index()][stream.id()].capturing.load();
  }
  void synchronizeEvent(void* event) const override {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_live.count(static_cast<SimEvent*>(event)))
      torch_check(fail(kInvalidResourceHandle), "cudaEventSynchronize");
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    check_device(device_index);
  }
  double elapsedTime(void* first, void* second,
                     const c10::DeviceIndex device_index) const override {
    TORCH_CHECK(first && second, "Both events must be recorded before calculating elapsed time.");
    check_device(device_index);
    std::lock_guard<std::mutex> lock(g_mutex);
    auto *a = static_cast<SimEvent*>(first), *b = static_cast<SimEvent*>(second);
    // cudaEventElapsedTime's refusals: unknown or never-recorded events, events from a graph
    // capture, events of two devices, events without timing
    bool valid = g_live.count(a) && g_live.count(b) && a->recorded && b->recorded &&
                 !a->captured && !b->captured && a->device == b->device && a->timing && b->timing;
    if (!valid) torch_check(fail(kInvalidResourceHandle), "cudaEventElapsedTime");
    return static_cast<double>(static_cast<float>((b->stamp_ns - a->stamp_ns) / 1e6));
  }
};

C10_REGISTER_GUARD_IMPL(CUDA, SimGuardImpl)

struct InitStreams {
  InitStreams() {
    for (int d = 0; d < kDevices; ++d)
      for (int s = 0; s < kStreams; ++s) {
        g_streams[d][s].device = d;
        g_streams[d][s].id = s;
      }
  }
} g_init_streams;

}  // namespace

// The CUDA runtime's own functions that gpu_events.cpp looks up (CUDA's signatures)
SIM_API int cudaStreamIsCapturing(void* handle, int* status) {
  std::lock_guard<std::mutex> lock(g_mutex);
  SimStream* stream = stream_of(handle);
  if (!stream || !status) return fail(kInvalidValue);
  if (reinterpret_cast<uintptr_t>(handle) <= 1 && device_captures(stream->device))
    return fail(kCaptureImplicit);
  *status = stream->capturing.load() ? 1 : 0;  // cudaStreamCaptureStatusActive : None
  return kSuccess;
}

SIM_API int cudaGetLastError() {
  int error = tl_last_error;
  tl_last_error = kSuccess;
  return error;
}

SIM_API int cudaPeekAtLastError() { return tl_last_error; }

SIM_API int cudaEventRecord(void* event, void* stream) {
  g_raw_records++;
  return record_event(static_cast<SimEvent*>(event), stream);
}

// The test's controls
SIM_API int sim_set_device(int device) {
  if (device < 0 || device >= kDevices) return fail(kInvalidDevice);
  tl_device = device;
  return kSuccess;
}
SIM_API int sim_set_stream(int device, int id) {  // the calling thread's current stream
  if (device < 0 || device >= kDevices || id < 0 || id >= kStreams) return fail(kInvalidValue);
  tl_stream[device] = id;
  return kSuccess;
}
SIM_API void sim_fail_records(int64_t count) {  // the next `count` event records fail
  g_records_to_fail.store(count);
}
SIM_API void* sim_stream_handle(int device, int id) {  // a raw cudaStream_t (0: the default)
  if (device < 0 || device >= kDevices || id <= 0 || id >= kStreams) return nullptr;
  return &g_streams[device][id];
}
SIM_API int sim_set_capturing(int device, int id, int on) {
  if (device < 0 || device >= kDevices || id < 0 || id >= kStreams) return fail(kInvalidValue);
  g_streams[device][id].capturing.store(on != 0);
  return kSuccess;
}
SIM_API int sim_set_clock_rate(int device, double rate) {
  if (device < 0 || device >= kDevices) return fail(kInvalidDevice);
  g_rate[device].store(rate);
  return kSuccess;
}
SIM_API int64_t sim_events_created() { return g_created.load(); }
SIM_API int64_t sim_events_destroyed() { return g_destroyed.load(); }
SIM_API int64_t sim_events_live() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return static_cast<int64_t>(g_live.size());
}
SIM_API int64_t sim_errors() { return g_errors.load(); }  // every CUDA call that failed
SIM_API int64_t sim_torch_records() { return g_torch_records.load(); }  // through the guard
SIM_API int64_t sim_raw_records() { return g_raw_records.load(); }  // cudaEventRecord direct
SIM_API int64_t sim_captured_records() { return g_captured_records.load(); }  // into a graph
SIM_API int64_t sim_device_calls() { return g_device_calls.load(); }  // getDevice/setDevice
