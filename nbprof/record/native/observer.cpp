// nbprof's RecordFunction observer: every thread's ops into per-thread buffers, read back as
// columns through a plain C ABI (ctypes), so the build needs only ATen's record_function.h
// (~3 s), not torch/extension.h and pybind11 (~18 s). Why each choice: shared/RECORDER.md.
//
// Hot path (start/end of every op on every thread): no lock and no allocation. A record is its
// own at::ObserverContext, constructed in place in its thread's chunk; torch "deletes" it at the
// op's end through a no-op operator delete. Chunks stay allocated across profiles (fresh memory
// cost ~30 ns/op in page faults) and are trimmed after each read.
#include <ATen/record_function.h>
#include <c10/util/ApproximateClock.h>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpu_events.h"
#include "memory.h"
#include "observer.h"

namespace {

constexpr size_t kChunk = 8192;      // records per chunk (~0.5 MB)
constexpr size_t kKeptChunks = 8;    // per thread, kept for the next profile after a read
constexpr size_t kNameCache = 256;   // name pointer -> id slots per thread

enum Flags : uint8_t {
  kAsync = 1,          // RecordFunction::isAsync(): may end anywhere, CPU time only
  kOtherThread = 2,    // ended on another thread than it started on
  kEnded = 4,          // its end callback ran while recording
  kCapturing = 8,      // (GPU) started while its stream captured a CUDA graph
  kGpuError = 16,      // (GPU) an event could not be recorded
  kGpuEnd = 32,        // (GPU) its end event was recorded (its start's: device >= 0)
};
static_assert(kCapturing == nbp_gpu::kFlagCapturing && kGpuError == nbp_gpu::kFlagGpuError &&
              kGpuEnd == nbp_gpu::kFlagGpuEnd, "gpu_events.h's flags are observer.cpp's");

struct Record final : at::ObserverContext {
  // torch deletes the context at the op's end; the record stays in its chunk.
  static void operator delete(void*) noexcept {}
  int64_t start;      // approximate clock (TSC), converted at read
  int64_t end;
  const void* fn;     // its RecordFunction: an op still open across stop/start must not end
                      // the record that took its slot. Two live RecordFunctions never share an
                      // address, and a slot's new op, once ended, is flagged kEnded.
  int64_t seq;        // sequence number: backward node <-> forward op
  uint64_t fwd_tid;   // RecordFunction thread id of the forward op (backward nodes)
  int64_t shapes_at;  // offset in the thread's shape stream, -1 without shapes
  int64_t stream;     // (GPU) the stream its events went on (c10::StreamId)
  uint32_t name;      // id in the thread's name table
  uint32_t event;     // (GPU) its start event's index in its thread's pool; the end's is next
  uint16_t depth;
  uint8_t scope;
  uint8_t flags;
  int8_t device;      // (GPU) the device of its events, -1: none
  uint8_t session;    // (GPU) its session's low bits: an op still open at a stop must not
                      // record its end into a pool slot the next session gave another op
};

struct ThreadBuf {
  std::vector<Record*> chunks;  // kChunk records each
  std::atomic<size_t> count{0};  // records this session (owner writes, reader acquires)
  uint64_t session = 0;          // the session these records belong to
  int64_t os_tid = 0;
  uint64_t rf_tid = 0;
  uint32_t depth = 0;
  std::atomic<bool> exited{false};
  // Names: an id per distinct string. A pointer cache skips the hash, but pointers repeat
  // for different names (copies on the stack), so a hit is confirmed with strcmp.
  std::deque<std::string> names;  // deque: stable addresses for the views below
  std::unordered_map<std::string_view, uint32_t> ids;
  struct Slot { const char* ptr; uint32_t id; } cache[kNameCache];
  std::vector<int64_t> shapes;  // per record with inputs: n, then per input ndim (-1: none), dims
  nbp_gpu::Pools pools;         // (GPU) CUDA events per device, created once, re-recorded
};

std::mutex g_threads_mutex;  // registration (once per thread) and reads only
std::vector<ThreadBuf*> g_threads;
std::atomic<uint64_t> g_session{0};
std::atomic<bool> g_recording{false};
bool g_forked = false;
bool g_record_shapes = false;
bool g_machinery_only = false;  // benchmarks: the callback runs and records nothing (torch's floor)
at::CallbackHandle g_handle = 0;
std::unique_ptr<c10::ApproximateClockToUnixTimeConverter> g_clock;
std::string g_error;
// GPU (nbp_gpu_configure): asked for the next session, and what its stop placed
bool g_gpu_wanted = false;
uint32_t g_gpu_depth = UINT32_MAX;
uint64_t g_gpu_anchor_devices = 0;
bool g_gpu_session = false;
std::vector<double> g_gpu_offsets;  // per row: start, end offset (ns); then the anchors'
int64_t g_gpu_rows = 0;
int64_t g_anchor_cpu[2 * nbp_gpu::kMaxDevices];
int8_t g_anchor_device[2 * nbp_gpu::kMaxDevices];
int64_t g_anchors = 0;
std::string g_gpu_error;
constexpr uint32_t kKeptEvents = 1 << 16;  // per (thread, device), kept for the next profile
// initial-exec: read without a __tls_get_addr call on every op (8 bytes of static TLS)
thread_local ThreadBuf* tl_buf __attribute__((tls_model("initial-exec"))) = nullptr;

struct ThreadExit {  // a thread's end frees its buffer for a later thread once it was read
  ~ThreadExit() { if (tl_buf) tl_buf->exited.store(true); }
};
thread_local ThreadExit tl_exit;

// The point where a thread runs its first op of a session: its buffer starts over. Other
// per-thread work of a session (issue 23's memory reporter) goes here too.
void begin_thread_session(ThreadBuf* tb, uint64_t session) {
  tb->count.store(0, std::memory_order_relaxed);
  tb->depth = 0;
  tb->names.clear();
  tb->ids.clear();
  std::memset(tb->cache, 0, sizeof(tb->cache));
  tb->shapes.clear();
  tb->pools.begin_session();
  tb->session = session;
  nbp_memory_begin_thread(session);
}

ThreadBuf* register_thread() {
  (void)&tl_exit;  // odr-use: constructs the guard on this thread
  std::lock_guard<std::mutex> lock(g_threads_mutex);
  ThreadBuf* tb = nullptr;
  uint64_t session = g_session.load();
  for (ThreadBuf* old : g_threads) {  // an exited thread's buffer, read already
    if (old->exited.load() && old->session != session) { tb = old; break; }
  }
  if (!tb) {
    tb = new ThreadBuf();
    g_threads.push_back(tb);
  }
  tb->exited.store(false);
  tb->os_tid = static_cast<int64_t>(syscall(SYS_gettid));
  tb->rf_tid = at::RecordFunction::currentThreadId();
  tb->session = 0;
  tl_buf = tb;
  return tb;
}

uint32_t intern(ThreadBuf* tb, const char* name) {
  if (!name) name = "";
  // The slot hashes the pointer with the name's length and some of its bytes: backward nodes'
  // names ("autograd::engine::evaluate_function: AddmmBackward0", "AddmmBackward0", then
  // "...: ReluBackward0") all come at one stack address and would evict each other from a slot
  // of the pointer alone. The 8 bytes before the last 8 tell those apart ("dmmBackw").
  size_t length = std::strlen(name);
  uint64_t head = 0, tail = 0;
  std::memcpy(&head, name, length < 8 ? length : 8);
  if (length > 8) std::memcpy(&tail, name + (length > 16 ? length - 16 : 8), length > 16 ? 8 : length - 8);
  uint64_t key = (reinterpret_cast<uintptr_t>(name) ^ head ^ (tail * 31) ^ (length << 48)) *
                 0x9E3779B97F4A7C15ull;
  auto& slot = tb->cache[key >> 56];
  if (slot.ptr == name && std::strcmp(tb->names[slot.id].c_str(), name) == 0) return slot.id;
  std::string_view view(name);
  auto found = tb->ids.find(view);
  uint32_t id;
  if (found != tb->ids.end()) {
    id = found->second;
  } else {
    id = static_cast<uint32_t>(tb->names.size());
    tb->names.emplace_back(view);
    tb->ids.emplace(std::string_view(tb->names.back()), id);
  }
  slot = {name, id};
  return id;
}

void record_shapes(ThreadBuf* tb, Record* r, const at::RecordFunction& fn) {
  auto inputs = fn.inputs();
  r->shapes_at = static_cast<int64_t>(tb->shapes.size());
  tb->shapes.push_back(static_cast<int64_t>(inputs.size()));
  for (const auto& input : inputs) {
    if (input.isTensor() && input.toTensor().defined()) {
      auto sizes = input.toTensor().sizes();
      tb->shapes.push_back(static_cast<int64_t>(sizes.size()));
      tb->shapes.insert(tb->shapes.end(), sizes.begin(), sizes.end());
    } else {
      tb->shapes.push_back(-1);
    }
  }
}

// The calling thread's buffer, its session begun, and its next record (published by the
// caller's count.store(n + 1)): an op's (on_start) or a range's (nbp_range::open).
Record* next_record(ThreadBuf*& tb, uint64_t& session, size_t& n) {
  tb = tl_buf ? tl_buf : register_thread();
  session = g_session.load(std::memory_order_relaxed);
  if (tb->session != session) begin_thread_session(tb, session);
  n = tb->count.load(std::memory_order_relaxed);
  size_t chunk = n / kChunk;
  if (chunk == tb->chunks.size()) {  // once per kChunk ops, and rarely after the first profile
    tb->chunks.push_back(static_cast<Record*>(::operator new(sizeof(Record) * kChunk)));
  }
  return new (tb->chunks[chunk] + n % kChunk) Record();
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (!g_recording.load(std::memory_order_relaxed) || g_machinery_only) return nullptr;
  ThreadBuf* tb;
  uint64_t session;
  size_t n;
  Record* r = next_record(tb, session, n);
  r->name = intern(tb, fn.name());
  r->fn = &fn;
  r->seq = fn.seqNr();
  r->fwd_tid = fn.forwardThreadId();
  r->scope = static_cast<uint8_t>(fn.scope());
  r->depth = static_cast<uint16_t>(tb->depth < 65535 ? tb->depth : 65535);
  r->flags = 0;
  r->end = 0;
  r->shapes_at = -1;
  r->device = -1;
  if (g_record_shapes) record_shapes(tb, r, fn);
  bool gpu = nbp_gpu::g_on.load(std::memory_order_relaxed) && tb->depth < nbp_gpu::g_depth;
  r->session = static_cast<uint8_t>(session);
  tb->depth++;
  r->start = static_cast<int64_t>(c10::getApproximateTime());
  // after the CPU time: an event cannot complete before that time (gpu_clock.py's anchor error)
  if (gpu) nbp_gpu::record_start(tb->pools, r->event, r->device, r->stream, r->flags);
  tb->count.store(n + 1, std::memory_order_release);
  return std::unique_ptr<at::ObserverContext>(r);
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  int64_t now = static_cast<int64_t>(c10::getApproximateTime());
  if (!ctx || !g_recording.load(std::memory_order_relaxed)) return;
  auto* r = static_cast<Record*>(ctx);
  if (r->fn != &fn || r->flags & kEnded) return;
  r->end = now;
  uint8_t flags = kEnded;
  if (fn.isAsync()) flags |= kAsync;
  ThreadBuf* tb = tl_buf;  // fn.threadId() is the starting thread's (inline, no call)
  if (!tb || fn.threadId() != tb->rf_tid) {
    flags |= kOtherThread;  // its pool is another thread's: no end event (CPU time only)
  } else {
    if (tb->depth > 0) tb->depth--;
    if (r->device >= 0 && r->session == static_cast<uint8_t>(tb->session))
      nbp_gpu::record_end(tb->pools, r->event, r->device, flags);
  }
  r->flags |= flags;
}

void child_after_fork() {  // a forked child (DataLoader worker) records nothing
  g_forked = true;
  g_recording.store(false);
}

template <typename F>
int guarded(F body) {
  try {
    body();
    return 0;
  } catch (const std::exception& error) {
    g_error = error.what();
  } catch (...) {
    g_error = "unknown C++ exception";
  }
  return -1;
}

// At stop (recording off, g_threads_mutex held): synchronize, anchor, and each event's offset
// from its device's earliest, in the row order of nbp_fetch.
void place_gpu_events(int64_t total) {
  std::vector<nbp_gpu::Mark> marks[nbp_gpu::kMaxDevices];
  uint64_t devices = 0;
  uint64_t session = g_session.load();
  int64_t row = 0;
  for (ThreadBuf* tb : g_threads) {
    if (tb->session != session) continue;
    size_t n = tb->count.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i, ++row) {
      const Record& r = tb->chunks[i / kChunk][i % kChunk];
      if (r.device < 0) continue;
      auto& events = tb->pools.device[r.device].events;
      devices |= uint64_t{1} << r.device;
      marks[r.device].push_back({r.start, events[r.event], 2 * row});
      if ((r.flags & kGpuEnd) && (r.flags & kEnded))
        marks[r.device].push_back({r.end, events[r.event + 1], 2 * row + 1});
    }
  }
  g_gpu_offsets.assign(2 * total + 2 * nbp_gpu::kMaxDevices, std::nan(""));
  g_gpu_rows = total;
  devices = nbp_gpu::stop_anchors(devices, marks, 2 * total, g_anchor_cpu, g_anchor_device,
                                  &g_anchors);
  for (int d = 0; d < nbp_gpu::kMaxDevices; ++d)
    if (devices >> d & 1) nbp_gpu::chain(d, marks[d], g_gpu_offsets.data());
}

}  // namespace

namespace nbp_range {  // observer.h: ranges.cpp's hook

void* open(const char* name, Events* events) {
  events->pools = nullptr;
  if (!g_recording.load(std::memory_order_relaxed) || g_machinery_only) return nullptr;
  ThreadBuf* tb;
  uint64_t session;
  size_t n;
  Record* r = next_record(tb, session, n);
  r->name = intern(tb, name);
  r->fn = r;  // no RecordFunction: the record is its own key (close() checks the session)
  r->seq = -1;
  r->fwd_tid = 0;
  r->scope = static_cast<uint8_t>(at::RecordScope::USER_SCOPE);
  r->depth = static_cast<uint16_t>(tb->depth < 65535 ? tb->depth : 65535);
  r->flags = 0;
  r->end = 0;
  r->shapes_at = -1;
  r->device = -1;
  r->session = static_cast<uint8_t>(session);
  if (nbp_gpu::g_on.load(std::memory_order_relaxed) && tb->depth < nbp_gpu::g_depth)
    *events = {&tb->pools, &r->event, &r->device, &r->stream, &r->flags};
  tb->depth++;
  r->start = static_cast<int64_t>(c10::getApproximateTime());  // the caller's events come after
  tb->count.store(n + 1, std::memory_order_release);
  return r;
}

bool close(void* record) {
  int64_t now = static_cast<int64_t>(c10::getApproximateTime());
  auto* r = static_cast<Record*>(record);
  ThreadBuf* tb = tl_buf;
  if (!r || !tb || !g_recording.load(std::memory_order_relaxed) ||
      tb->session != g_session.load(std::memory_order_relaxed) ||
      r->session != static_cast<uint8_t>(tb->session) || r->flags & kEnded)
    return false;  // opened in an earlier session: its slot may be another record's now
  r->end = now;
  r->flags |= kEnded;
  if (tb->depth > 0) tb->depth--;
  return true;
}

}  // namespace nbp_range

extern "C" {

int nbp_abi_version() { return NBP_ABI_VERSION; }

const char* nbp_last_error() { return g_error.c_str(); }

int nbp_start(int record_shapes, int machinery_only) {
  static std::once_flag atfork;
  std::call_once(atfork, [] { pthread_atfork(nullptr, nullptr, child_after_fork); });
  if (g_forked) { g_error = "a forked child records nothing"; return -1; }
  if (g_recording.load()) { g_error = "already recording"; return -1; }
  return guarded([&] {
    g_record_shapes = record_shapes != 0;
    g_machinery_only = machinery_only != 0;
    g_clock = std::make_unique<c10::ApproximateClockToUnixTimeConverter>();
    g_gpu_session = false;
    g_gpu_error.clear();
    g_gpu_offsets.clear();
    g_gpu_rows = g_anchors = 0;
    nbp_gpu::g_on.store(false);
    bool gpu = g_gpu_wanted && !g_machinery_only;
    g_gpu_wanted = false;  // asked per profile
    if (gpu) {  // before the session: its anchors are no ops
      nbp_gpu::start(g_gpu_depth, g_gpu_anchor_devices);
      g_gpu_session = true;
    }
    nbp_memory_start(g_session.fetch_add(1) + 1);
    at::RecordFunctionCallback callback(on_start, on_end);
    callback.needsInputs(g_record_shapes).needsOutputs(false).needsIds(false)
        .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                 at::RecordScope::USER_SCOPE});
    g_recording.store(true);
    g_handle = at::addGlobalCallback(callback);
  });
}

int64_t nbp_stop() {
  g_recording.store(false);
  nbp_gpu::g_on.store(false);  // whatever happens below, no later session records events unasked
  nbp_memory_stop();
  if (g_handle) {
    guarded([] { at::removeCallback(g_handle); });
    g_handle = 0;
  }
  std::lock_guard<std::mutex> lock(g_threads_mutex);
  int64_t total = 0;
  uint64_t session = g_session.load();
  for (ThreadBuf* tb : g_threads) {
    if (tb->session == session) total += tb->count.load(std::memory_order_acquire);
  }
  if (g_gpu_session) {
    g_gpu_session = false;
    if (guarded([&] { place_gpu_events(total); }) != 0) {
      g_gpu_error = g_error;  // the CPU records stand; no GPU times
      g_gpu_offsets.assign(2 * total, std::nan(""));
      g_gpu_rows = total;
      g_anchors = 0;
    }
  }
  return total;
}

int64_t nbp_names_size() {
  std::lock_guard<std::mutex> lock(g_threads_mutex);
  int64_t bytes = 0;
  uint64_t session = g_session.load();
  for (ThreadBuf* tb : g_threads) {
    if (tb->session != session) continue;
    for (const auto& name : tb->names) bytes += static_cast<int64_t>(name.size()) + 1;
  }
  return bytes;
}

int64_t nbp_fetch(NbpColumns* out, int64_t capacity) {
  std::lock_guard<std::mutex> lock(g_threads_mutex);
  auto to_unix = g_clock ? g_clock->makeConverter() : nullptr;
  uint64_t session = g_session.load();
  int64_t row = 0, name_base = 0, thread_index = 0;
  char* names = out->names;
  int64_t shape_row = 0;
  for (ThreadBuf* tb : g_threads) {
    if (tb->session != session) continue;
    size_t n = tb->count.load(std::memory_order_acquire);
    out->thread_os_tid[thread_index] = tb->os_tid;
    out->thread_rf_tid[thread_index] = static_cast<int64_t>(tb->rf_tid);
    bool open = false;  // in the chunk being read: an op not ended yet
    for (size_t i = 0; i < n && row < capacity; ++i, ++row) {
      const Record& r = tb->chunks[i / kChunk][i % kChunk];
      out->start_ns[row] = to_unix(r.start);
      out->end_ns[row] = r.flags & kEnded ? to_unix(r.end) : out->start_ns[row];
      out->thread[row] = static_cast<int32_t>(thread_index);
      out->name[row] = static_cast<int32_t>(name_base + r.name);
      out->seq[row] = r.seq;
      out->fwd_tid[row] = static_cast<int64_t>(r.fwd_tid);
      out->depth[row] = r.depth;
      out->scope[row] = r.scope;
      out->flags[row] = r.flags;
      if (out->gpu_start) {
        bool placed = row < g_gpu_rows;
        out->gpu_start[row] = placed ? g_gpu_offsets[2 * row] : std::nan("");
        out->gpu_end[row] = placed ? g_gpu_offsets[2 * row + 1] : std::nan("");
        out->device[row] = r.device;
        out->stream[row] = r.stream;
      }
      if (r.shapes_at >= 0 && out->shapes && shape_row < out->shape_rows) {
        out->shape_row[shape_row] = row;
        out->shape_at[shape_row++] = out->shapes_base[thread_index] + r.shapes_at;
      }
      // Last, as r is not used after: a chunk read past the kept few goes now (the profile's
      // peak memory would otherwise be the columns' and the chunks' together). An op still
      // open would write its end into its chunk later: that chunk is never freed.
      open |= !(r.flags & kEnded);
      if ((i + 1) % kChunk == 0 || i + 1 == n) {
        size_t chunk = i / kChunk;
        if (chunk >= kKeptChunks) {
          if (!open) ::operator delete(tb->chunks[chunk]);
          tb->chunks[chunk] = nullptr;
        }
        open = false;
      }
    }
    if (out->shapes) {
      std::memcpy(out->shapes + out->shapes_base[thread_index], tb->shapes.data(),
                  tb->shapes.size() * sizeof(int64_t));
    }
    for (const auto& name : tb->names) {
      std::memcpy(names, name.c_str(), name.size() + 1);
      names += name.size() + 1;
    }
    name_base += static_cast<int64_t>(tb->names.size());
    thread_index++;
  }
  out->threads = thread_index;
  out->name_count = name_base;
  return row;
}

int64_t nbp_thread_count() {
  std::lock_guard<std::mutex> lock(g_threads_mutex);
  uint64_t session = g_session.load();
  int64_t threads = 0;
  for (ThreadBuf* tb : g_threads) threads += tb->session == session;
  return threads;
}

int64_t nbp_shapes_size(int64_t* per_thread, int64_t* records_with_shapes) {
  // Offsets of each thread's shape stream in one array, and how many records carry shapes.
  std::lock_guard<std::mutex> lock(g_threads_mutex);
  uint64_t session = g_session.load();
  int64_t total = 0, records = 0, index = 0;
  for (ThreadBuf* tb : g_threads) {
    if (tb->session != session) continue;
    per_thread[index++] = total;
    total += static_cast<int64_t>(tb->shapes.size());
    size_t n = tb->count.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i) records += tb->chunks[i / kChunk][i % kChunk].shapes_at >= 0;
  }
  *records_with_shapes = records;
  return total;
}

void nbp_release() {
  // After a read: names and shapes go; chunks beyond a few per thread go back to the system
  // (a 10M-op profile must not keep 0.5 GB: nbp_fetch frees those it read), the rest stay
  // faulted in for the next profile.
  std::lock_guard<std::mutex> lock(g_threads_mutex);
  if (g_recording.load()) return;
  for (ThreadBuf* tb : g_threads) {
    size_t n = tb->count.load();
    while (tb->chunks.size() > kKeptChunks) {  // read ones were freed by nbp_fetch
      Record* chunk = tb->chunks.back();
      size_t first = (tb->chunks.size() - 1) * kChunk;
      bool open = false;
      for (size_t i = first; chunk && i < n && i < first + kChunk; ++i)
        open |= !(chunk[i - first].flags & kEnded);
      if (chunk && !open) ::operator delete(chunk);
      tb->chunks.pop_back();
    }
    tb->count.store(0);
    tb->names.clear();
    tb->ids.clear();
    std::memset(tb->cache, 0, sizeof(tb->cache));
    std::vector<int64_t>().swap(tb->shapes);
    if (!g_forked) nbp_gpu::trim(tb->pools, kKeptEvents);  // a forked child touches no CUDA
  }
  std::vector<double>().swap(g_gpu_offsets);
  g_gpu_rows = 0;
}

int64_t nbp_retained_bytes() {
  std::lock_guard<std::mutex> lock(g_threads_mutex);
  int64_t bytes = 0;
  for (ThreadBuf* tb : g_threads)
    for (Record* chunk : tb->chunks) bytes += chunk ? kChunk * sizeof(Record) : 0;
  return bytes;
}

const char* nbp_gpu_unavailable() {
  const char* why = nbp_gpu::unavailable();
  return why ? why : "";
}

int nbp_gpu_configure(int on, int64_t depth, uint64_t anchor_devices) {
  if (g_recording.load()) { g_error = "already recording"; return -1; }
  if (on) {
    if (const char* why = nbp_gpu::unavailable()) { g_error = why; return -1; }
  }
  g_gpu_wanted = on != 0;
  g_gpu_depth = depth < 0 || depth > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(depth);
  g_gpu_anchor_devices = anchor_devices;
  return 0;
}

int64_t nbp_gpu_anchors(int64_t* cpu_ns, int8_t* device, double* offset_ns) {
  auto to_unix = g_clock ? g_clock->makeConverter() : nullptr;
  for (int64_t i = 0; i < g_anchors; ++i) {
    cpu_ns[i] = to_unix(g_anchor_cpu[i]);
    device[i] = g_anchor_device[i];
    size_t slot = static_cast<size_t>(2 * g_gpu_rows + i);
    offset_ns[i] = slot < g_gpu_offsets.size() ? g_gpu_offsets[slot] : std::nan("");
  }
  return g_anchors;
}

const char* nbp_gpu_error() { return g_gpu_error.c_str(); }

int64_t nbp_gpu_events() {
  std::lock_guard<std::mutex> lock(g_threads_mutex);
  int64_t count = 0;
  for (ThreadBuf* tb : g_threads) count += nbp_gpu::events_created(tb->pools);
  return count;
}

}  // extern "C"
