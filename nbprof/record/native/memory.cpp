// Every thread's allocations and frees (issue 23), through the slot c10's allocators report to.
//
// c10::reportMemoryUsageToProfiler reads only the thread-local PROFILER_STATE slot, so torch's
// all-threads session sees no allocation (pytorch#192290). Here, at a thread's first op of a
// session (observer.cpp calls nbp_memory_begin_thread), a Reporter is pushed into that slot
// when it is empty (never over torch's own state): the thread's allocators then report to it,
// and ThreadLocalState carries it into autograd's and at::launch's threads. Its config is
// Disabled, so torch.autograd._profiler_enabled() still reads False.
//
// A thread's first allocation of a session may come before its first op (a wrapped scalar, a
// Python del, a worker woken from a queue): memory_records.py also has every Python thread run
// nbp_memory_enter_thread at its next Python call or return (python_calls.cpp's one-shot profile
// function on each thread at the start, threading's hook on each thread started during the
// session).
//
// Hot path (every allocation and free of a thread that ran an op): no lock, no allocation
// but a chunk per kChunk events. A Reporter pushed on another thread than the one that stops
// is popped by that thread itself (the slot is the thread's own): at its next allocation after
// the session, or when a torch profiler is about to start on it (torch refuses to start over
// anything in the slot; memory_records.py has torch's start points call
// nbp_memory_leave_thread first).
#include "memory.h"

#include <c10/core/Allocator.h>
#include <c10/util/ApproximateClock.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/csrc/profiler/orchestration/observer.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

namespace {

constexpr size_t kChunk = 4096;  // events per chunk (~200 KB)

struct Event {
  int64_t time;  // approximate clock, converted at read
  int64_t bytes;
  uint64_t addr;
  int64_t allocated;
  int64_t reserved;
  int16_t device_type;
  int16_t device_index;
};

struct MemoryThread {
  std::vector<Event*> chunks;
  std::atomic<size_t> count{0};
  uint64_t session = 0;
  int64_t os_tid = 0;
};

std::mutex g_mutex;  // registration (once per thread and session) and reads only
std::vector<MemoryThread*> g_threads;
std::atomic<bool> g_enabled{false};    // asked for the next session
std::atomic<bool> g_recording{false};  // this session records memory
std::atomic<bool> g_paused{false};     // the calibration's "off" rounds
std::atomic<uint64_t> g_session{0};
std::unique_ptr<c10::ApproximateClockToUnixTimeConverter> g_clock;
thread_local MemoryThread* tl_thread = nullptr;

MemoryThread* this_thread() {
  uint64_t session = g_session.load(std::memory_order_relaxed);
  MemoryThread* mt = tl_thread;
  if (mt && mt->session == session) return mt;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!mt) {
    mt = new MemoryThread();  // kept for the process: a thread's next session reuses it
    mt->os_tid = static_cast<int64_t>(syscall(SYS_gettid));
    g_threads.push_back(mt);
    tl_thread = mt;
  }
  mt->count.store(0, std::memory_order_relaxed);
  mt->session = session;
  return mt;
}

using torch::profiler::impl::ActiveProfilerType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

void pop_if_ours(const c10::DebugInfoBase* reporter);

struct Reporter final : torch::profiler::impl::ProfilerStateBase {
  Reporter() : ProfilerStateBase(ProfilerConfig(ProfilerState::Disabled)) {}

  void reportMemoryUsage(void* ptr, int64_t bytes, size_t allocated, size_t reserved,
                         c10::Device device) override {
    if (!g_recording.load(std::memory_order_relaxed)) return;
    MemoryThread* mt = this_thread();
    size_t n = mt->count.load(std::memory_order_relaxed);
    if (n / kChunk == mt->chunks.size()) {
      mt->chunks.push_back(static_cast<Event*>(::operator new(sizeof(Event) * kChunk)));
    }
    Event& e = mt->chunks[n / kChunk][n % kChunk];
    e.time = static_cast<int64_t>(c10::getApproximateTime());
    e.bytes = bytes;
    e.addr = reinterpret_cast<uint64_t>(ptr);
    e.allocated = static_cast<int64_t>(allocated);
    e.reserved = static_cast<int64_t>(reserved);
    e.device_type = static_cast<int16_t>(device.type());
    e.device_index = static_cast<int16_t>(device.index());
    mt->count.store(n + 1, std::memory_order_release);
  }

  bool memoryProfilingEnabled() const override {
    if (g_recording.load(std::memory_order_relaxed)) {
      return !g_paused.load(std::memory_order_relaxed);
    }
    pop_if_ours(this);  // the session is over: this thread's slot is freed at its first chance
    return false;
  }

  ActiveProfilerType profilerType() override { return ActiveProfilerType::NONE; }
};

// Per thread, the reporter it pushed (kept alive here: popping inside a report must not free
// the object being called), or null.
thread_local std::shared_ptr<Reporter> tl_pushed;

void pop_if_ours(const c10::DebugInfoBase* reporter) {
  if (!tl_pushed || tl_pushed.get() != reporter) return;  // a copy on an autograd thread
  try {
    if (c10::ThreadLocalDebugInfo::_peek(c10::DebugInfoKind::PROFILER_STATE).get() == reporter) {
      c10::ThreadLocalDebugInfo::_pop(c10::DebugInfoKind::PROFILER_STATE);
    }
  } catch (...) {
    // another kind of debug info sits on top (a guard still open): the next report tries again
    return;
  }
  // released at the thread's next session (a destructor here would free the caller's object)
}

}  // namespace

void nbp_memory_begin_thread(uint64_t /*session*/) {
  if (!g_recording.load(std::memory_order_relaxed)) return;
  if (tl_pushed && c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE) ==
                       tl_pushed.get()) {
    return;  // still there from the last session (its thread ran no allocation since)
  }
  if (c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE)) return;  // torch's own
  tl_pushed = std::make_shared<Reporter>();
  c10::ThreadLocalDebugInfo::_push(c10::DebugInfoKind::PROFILER_STATE, tl_pushed);
}

void nbp_memory_start(uint64_t session) {
  g_session.store(session);
  bool on = g_enabled.load();
  if (on) g_clock = std::make_unique<c10::ApproximateClockToUnixTimeConverter>();
  g_recording.store(on);
  nbp_memory_begin_thread(session);  // the starting thread, before its first op
}

void nbp_memory_stop() {
  g_recording.store(false);
  if (tl_pushed) pop_if_ours(tl_pushed.get());  // the stopping thread's own, at once
}

extern "C" {

void nbp_memory_enable(int enabled) { g_enabled.store(enabled != 0); }

void nbp_memory_pause(int paused) { g_paused.store(paused != 0); }

void nbp_memory_enter_thread() {
  try {
    nbp_memory_begin_thread(g_session.load(std::memory_order_relaxed));
  } catch (...) {
    // no reporter on this thread: its first op tries again
  }
}

void nbp_memory_leave_thread() {
  if (!g_recording.load() && tl_pushed) pop_if_ours(tl_pushed.get());
}

int64_t nbp_memory_count() {
  std::lock_guard<std::mutex> lock(g_mutex);
  uint64_t session = g_session.load();
  int64_t total = 0;
  for (MemoryThread* mt : g_threads) {
    if (mt->session == session) total += mt->count.load(std::memory_order_acquire);
  }
  return total;
}

int64_t nbp_memory_fetch(NbpMemoryColumns* out, int64_t capacity) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_clock) return 0;
  auto to_unix = g_clock->makeConverter();
  uint64_t session = g_session.load();
  int64_t row = 0;
  for (MemoryThread* mt : g_threads) {
    if (mt->session != session) continue;
    size_t n = mt->count.load(std::memory_order_acquire);
    for (size_t i = 0; i < n && row < capacity; ++i, ++row) {
      const Event& e = mt->chunks[i / kChunk][i % kChunk];
      out->time_ns[row] = to_unix(e.time);
      out->bytes[row] = e.bytes;
      out->addr[row] = e.addr;
      out->allocated[row] = e.allocated;
      out->reserved[row] = e.reserved;
      out->device_type[row] = e.device_type;
      out->device_index[row] = e.device_index;
      out->os_tid[row] = mt->os_tid;
    }
  }
  return row;
}

void nbp_memory_release() {
  // After a read: all but one chunk per thread go back to the system.
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_recording.load()) return;
  for (MemoryThread* mt : g_threads) {
    while (mt->chunks.size() > 1) {
      ::operator delete(mt->chunks.back());
      mt->chunks.pop_back();
    }
    mt->count.store(0);
  }
}

}  // extern "C"
