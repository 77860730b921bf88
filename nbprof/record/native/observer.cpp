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
#include <c10/util/Exception.h>

#include <pthread.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "gpu_events.h"
#include "memory.h"
#include "observer.h"

namespace {

// RecordFunction's name is a private std::variant: an op's schema (whose name lives as long as
// the op is registered) or a std::string of its own (backward nodes, user ranges). Reading it
// directly lets an op's name be interned by its schema's address alone (no strlen, no strcmp:
// ~20 ns per op) and a string's by its known length. An explicit instantiation may name a
// private member ([temp.spec.general]/6): Expose<Tag, &T::m> hands the member pointer out
// through a friend. A torch whose RecordFunction changes these members fails this build, and
// build.py then builds again with NBP_PUBLIC_API_ONLY: fn.name() and fn.isAsync() only (a strlen
// and the string's cache per op), with a note in the profile.
#ifndef NBP_PUBLIC_API_ONLY
template <typename Tag, typename Tag::type Member>
struct Expose {
  friend typename Tag::type member(Tag) { return Member; }
};
struct FnOf {
  using type = std::variant<std::string, at::RecordFunction::schema_ref_t> at::RecordFunction::*;
  friend type member(FnOf);
};
struct AsyncOf {
  using type = bool at::RecordFunction::*;
  friend type member(AsyncOf);
};
template struct Expose<FnOf, &at::RecordFunction::fn_>;
template struct Expose<AsyncOf, &at::RecordFunction::is_async_>;
#endif

constexpr size_t kChunk = 8192;      // records per chunk (~0.5 MB)
constexpr size_t kKeptChunks = 8;    // per thread, kept for the next profile after a read
constexpr size_t kNameCache = 256;   // slots of each name cache, per thread

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
  // Names: an id per distinct string. Two caches skip the hash table: ops' by their schema's
  // address (a schema is the op's for as long as it is registered), strings' by their length
  // and bytes, confirmed with memcmp (strings are copies, at addresses that repeat for
  // different names and change for the same one).
  std::deque<std::string> names;  // deque: stable addresses for the views below
  std::unordered_map<std::string_view, uint32_t> ids;
  struct OpSlot { const void* schema; uint32_t id; } op_cache[kNameCache];
  struct TextSlot { const char* name; size_t size; uint32_t id; } text_cache[kNameCache];
  // 1 while this thread runs a callback of ours: a stop waits for 0 before it reads or
  // recycles anything (quiesce_threads)
  std::atomic<uint32_t> inside{0};
  std::vector<int64_t> shapes;  // per record with inputs: n, then per input ndim (-1: none), dims
  nbp_gpu::Pools pools;         // (GPU) CUDA events per device, created once, re-recorded
};

std::mutex g_threads_mutex;  // registration (once per thread) and reads only
std::vector<ThreadBuf*> g_threads;
std::atomic<uint64_t> g_session{0};
std::atomic<bool> g_recording{false};
bool g_forked = false;
bool g_record_shapes = false;
std::atomic<bool> g_machinery_only{false};  // benchmarks: the callback runs and records nothing (torch's floor)
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

// Set as its thread ends: an op run later by another thread-local's destructor records
// nothing (its buffer may already be another thread's)
thread_local bool tl_gone __attribute__((tls_model("initial-exec"))) = false;

struct ThreadExit {  // a thread's end frees its buffer for a later thread once it was read
  ~ThreadExit() {
    tl_gone = true;
    if (tl_buf) tl_buf->exited.store(true);
    tl_buf = nullptr;
  }
};
thread_local ThreadExit tl_exit;

void clear_name_caches(ThreadBuf* tb) {
  std::memset(tb->op_cache, 0, sizeof(tb->op_cache));
  std::memset(tb->text_cache, 0, sizeof(tb->text_cache));
}

// The point where a thread runs its first op of a session: its buffer starts over. Other
// per-thread work of a session (issue 23's memory reporter) goes here too.
__attribute__((noinline)) void begin_thread_session(ThreadBuf* tb, uint64_t session) {
  tb->count.store(0, std::memory_order_relaxed);
  tb->depth = 0;
  tb->names.clear();
  tb->ids.clear();
  clear_name_caches(tb);
  tb->shapes.clear();
  tb->pools.begin_session();
  tb->session = session;
  nbp_memory_begin_thread(session);
}

__attribute__((noinline)) ThreadBuf* register_thread() {
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

uint32_t intern_slow(ThreadBuf* tb, std::string_view view) {
  auto found = tb->ids.find(view);
  if (found != tb->ids.end()) return found->second;
  auto id = static_cast<uint32_t>(tb->names.size());
  tb->names.emplace_back(view);
  tb->ids.emplace(std::string_view(tb->names.back()), id);
  return id;
}

// A string's id (backward nodes, user ranges): out of the ops' inline path
__attribute__((noinline)) uint32_t intern_text(ThreadBuf* tb, const char* data, size_t length) {
  // The slot hashes the length and some bytes, not the address: these strings are built per
  // op (autograd's "autograd::engine::evaluate_function: AddmmBackward0" on the heap, at an
  // address that changes from step to step). Backward nodes' names share prefixes and
  // suffixes: the 8 bytes before the last 8 tell them apart ("dmmBackw").
  uint64_t head = 0, tail = 0;
  std::memcpy(&head, data, length < 8 ? length : 8);
  if (length > 8) std::memcpy(&tail, data + (length > 16 ? length - 16 : 8), length > 16 ? 8 : length - 8);
  uint64_t key = (head ^ (tail * 31) ^ (length << 48)) * 0x9E3779B97F4A7C15ull;
  auto& slot = tb->text_cache[key >> 56];
  if (slot.size == length && slot.name && std::memcmp(slot.name, data, length) == 0)
    return slot.id;
  uint32_t id = intern_slow(tb, std::string_view(data, length));
  slot = {tb->names[id].data(), length, id};
  return id;
}


#ifdef NBP_PUBLIC_API_ONLY
inline uint32_t intern(ThreadBuf* tb, const at::RecordFunction& fn) {
  const char* name = fn.name();
  if (!name) name = "";
  return intern_text(tb, name, std::strlen(name));
}

inline bool is_async(const at::RecordFunction& fn) { return fn.isAsync(); }
#else
__attribute__((noinline)) uint32_t intern_op(ThreadBuf* tb, const at::RecordFunction& fn,
                                             const void* key) {
  const char* name = fn.name();
  uint32_t id = intern_slow(tb, name ? name : "");
  tb->op_cache[(reinterpret_cast<uintptr_t>(key) * 0x9E3779B97F4A7C15ull) >> 56] = {key, id};
  return id;
}

inline uint32_t intern(ThreadBuf* tb, const at::RecordFunction& fn) {
  const auto& descriptor = fn.*member(FnOf{});
  const auto* schema = std::get_if<at::RecordFunction::schema_ref_t>(&descriptor);
  if (C10_UNLIKELY(!schema)) {
    const std::string& text = std::get<std::string>(descriptor);
    return intern_text(tb, text.data(), text.size());
  }
  const void* key = &schema->get();
  const auto& slot = tb->op_cache[(reinterpret_cast<uintptr_t>(key) * 0x9E3779B97F4A7C15ull) >> 56];
  if (C10_LIKELY(slot.schema == key)) return slot.id;
  return intern_op(tb, fn, key);
}

inline bool is_async(const at::RecordFunction& fn) { return fn.*member(AsyncOf{}); }
#endif

__attribute__((noinline)) void record_shapes(ThreadBuf* tb, Record* r, const at::RecordFunction& fn) {
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

// Callbacks without a buffer of their thread (an async op ending on a thread that recorded
// nothing): rare, counted here for quiesce_threads.
std::atomic<uint32_t> g_inside_unbuffered{0};

// A thread's callback marks itself inside before it reads g_recording, and a stop clears
// g_recording before it waits for the marks (quiesce_threads): a callback either sees the
// stop or is waited for. The hot path pays two plain stores for this; the store-load order it
// needs across threads comes from quiesce_threads' process-wide barrier (membarrier).
struct Inside {
  std::atomic<uint32_t>& flag;
  explicit Inside(std::atomic<uint32_t>& f) : flag(f) {
    flag.store(1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler keeps the order
  }
  ~Inside() { flag.store(0, std::memory_order_release); }
};

__attribute__((noinline)) void next_chunk(ThreadBuf* tb, size_t chunk) {
  if (chunk == tb->chunks.size()) tb->chunks.push_back(nullptr);
  if (!tb->chunks[chunk])  // new, or freed by a read without its release
    tb->chunks[chunk] = static_cast<Record*>(::operator new(sizeof(Record) * kChunk));
}

inline Record* next_record(ThreadBuf* tb, size_t n) {
  // once per kChunk ops (a chunk kept from the last profile is there already)
  if (C10_UNLIKELY(n % kChunk == 0)) next_chunk(tb, n / kChunk);
  Record* r = tb->chunks[n / kChunk] + n % kChunk;
  // The next op's record: its line is fetched while this op runs, not when it starts (a
  // prefetch past the chunk's end is harmless: it never faults)
  __builtin_prefetch(r + 1, 1);
  return r;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (g_machinery_only.load(std::memory_order_relaxed)) return nullptr;
  ThreadBuf* tb = tl_buf;
  if (C10_UNLIKELY(!tb)) {
    if (!g_recording.load(std::memory_order_relaxed) || tl_gone) return nullptr;
    tb = register_thread();
  }
  Inside inside(tb->inside);
  if (!g_recording.load(std::memory_order_relaxed)) return nullptr;
  uint64_t session = g_session.load(std::memory_order_relaxed);
  if (C10_UNLIKELY(tb->session != session)) begin_thread_session(tb, session);
  size_t n = tb->count.load(std::memory_order_relaxed);
  Record* r = new (next_record(tb, n)) Record;
  r->end = 0;
  r->fn = &fn;
  r->seq = fn.seqNr();
  r->fwd_tid = fn.forwardThreadId();
  r->shapes_at = -1;
  r->stream = 0;
  r->name = intern(tb, fn);
  r->event = 0;
  uint32_t depth = tb->depth;
  r->depth = static_cast<uint16_t>(depth < 65535 ? depth : 65535);
  r->scope = static_cast<uint8_t>(fn.scope());
  r->flags = 0;
  r->device = -1;
  r->session = static_cast<uint8_t>(session);
  if (C10_UNLIKELY(g_record_shapes)) record_shapes(tb, r, fn);
  bool gpu = nbp_gpu::g_on.load(std::memory_order_relaxed) && depth < nbp_gpu::g_depth;
  tb->depth = depth + 1;
  r->start = static_cast<int64_t>(c10::getApproximateTime());
  // after the CPU time: an event cannot complete before that time (gpu_clock.py's anchor error)
  if (C10_UNLIKELY(gpu)) nbp_gpu::record_start(tb->pools, r->event, r->device, r->stream, r->flags);
  tb->count.store(n + 1, std::memory_order_release);
  return std::unique_ptr<at::ObserverContext>(r);
}

void end_record(const at::RecordFunction& fn, Record* r, ThreadBuf* tb, int64_t now) {
  if (r->fn != &fn || r->flags & kEnded) return;  // its slot holds a later op already
  r->end = now;
  uint8_t flags = kEnded;
  if (is_async(fn)) flags |= kAsync;
  if (!tb || fn.threadId() != tb->rf_tid) {
    flags |= kOtherThread;  // its pool is another thread's: no end event (CPU time only)
  } else if (r->session == static_cast<uint8_t>(tb->session)) {
    // (an op opened before a stop and closed after the next start: not this session's depth)
    if (tb->depth > 0) tb->depth--;
    if (r->device >= 0) nbp_gpu::record_end(tb->pools, r->event, r->device, flags);
  }
  r->flags |= flags;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  if (!ctx) return;  // not recorded (and the floor benchmark's callback reads no clock)
  int64_t now = static_cast<int64_t>(c10::getApproximateTime());
  ThreadBuf* tb = tl_buf;  // fn.threadId() is the starting thread's (inline, no call)
  if (C10_LIKELY(tb != nullptr)) {
    Inside inside(tb->inside);
    if (g_recording.load(std::memory_order_relaxed))
      end_record(fn, static_cast<Record*>(ctx), tb, now);
    return;
  }
  g_inside_unbuffered.fetch_add(1);  // seq_cst: ordered before the load below
  if (g_recording.load()) end_record(fn, static_cast<Record*>(ctx), nullptr, now);
  g_inside_unbuffered.fetch_sub(1, std::memory_order_release);
}

// At a stop, after g_recording went false: every callback that still saw it true has
// finished, so the buffers may be read and recycled. (A RecordFunction built before the stop
// still calls on_end later; it then sees g_recording false, or a slot that is not its own.)
void quiesce_threads() {
  // A forked child has one thread: marks of the parent's others were copied, never cleared.
  if (g_forked) return;
  // Makes every thread's earlier stores (its inside mark) visible here, and g_recording's
  // store visible to every thread, as a fence on each would (without one on the hot path).
  static const bool expedited =
      syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  if (!expedited || syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
    // No membarrier (an old kernel, a seccomp filter): store buffers drain within
    // microseconds and a context switch drains them, so a millisecond covers the same order.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<ThreadBuf*> threads;
  {
    std::lock_guard<std::mutex> lock(g_threads_mutex);
    threads = g_threads;
  }
  for (ThreadBuf* tb : threads)
    while (tb->inside.load(std::memory_order_acquire)) std::this_thread::yield();
  while (g_inside_unbuffered.load(std::memory_order_acquire)) std::this_thread::yield();
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
  } catch (const c10::Error& error) {  // torch's (a CUDA call it checks): not its C++ backtrace
    g_error = error.what_without_backtrace();
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

void* open(const char* name, void* native_stream, int device) {
  if (g_machinery_only.load(std::memory_order_relaxed)) return nullptr;
  ThreadBuf* tb = tl_buf;
  if (!tb) {
    if (!g_recording.load(std::memory_order_relaxed) || tl_gone) return nullptr;
    tb = register_thread();
  }
  Inside inside(tb->inside);
  if (!g_recording.load(std::memory_order_relaxed)) return nullptr;
  uint64_t session = g_session.load(std::memory_order_relaxed);
  if (tb->session != session) begin_thread_session(tb, session);
  size_t n = tb->count.load(std::memory_order_relaxed);
  Record* r = new (next_record(tb, n)) Record;
  if (!name) name = "";
  r->name = intern_text(tb, name, std::strlen(name));
  r->fn = r;  // no RecordFunction: the record is its own key (close() checks the session)
  r->seq = -1;
  r->fwd_tid = 0;
  r->scope = static_cast<uint8_t>(at::RecordScope::USER_SCOPE);
  r->depth = static_cast<uint16_t>(tb->depth < 65535 ? tb->depth : 65535);
  r->flags = 0;
  r->end = 0;
  r->shapes_at = -1;
  r->stream = 0;
  r->event = 0;
  r->device = -1;
  r->session = static_cast<uint8_t>(session);
  bool gpu = nbp_gpu::g_on.load(std::memory_order_relaxed) && tb->depth < nbp_gpu::g_depth;
  tb->depth++;
  r->start = static_cast<int64_t>(c10::getApproximateTime());
  if (gpu)  // after the CPU time, as an op's
    nbp_gpu::record_start_on(tb->pools, native_stream, device, r->event, r->device, r->stream,
                             r->flags);
  tb->count.store(n + 1, std::memory_order_release);
  return r;
}

bool close(void* record, void* native_stream) {
  int64_t now = static_cast<int64_t>(c10::getApproximateTime());
  auto* r = static_cast<Record*>(record);
  ThreadBuf* tb = tl_buf;
  if (!r || !tb) return false;
  Inside inside(tb->inside);
  if (!g_recording.load(std::memory_order_relaxed) ||
      tb->session != g_session.load(std::memory_order_relaxed) ||
      r->session != static_cast<uint8_t>(tb->session) || r->flags & kEnded)
    return false;  // opened in an earlier session: its slot may be another record's now
  r->end = now;
  r->flags |= kEnded;
  if (tb->depth > 0) tb->depth--;
  if (r->device >= 0)  // after the CPU time, on the stream the range started on
    nbp_gpu::record_end_on(tb->pools, native_stream, r->event, r->device, r->flags);
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
    g_machinery_only.store(machinery_only != 0);
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
  quiesce_threads();
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
    clear_name_caches(tb);
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
