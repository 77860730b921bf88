// nbprof's own ranges (ranges.h): a numba launch as a record of its thread, through observer.cpp's
// hook (nbp_range::open/close), with a CUDA event pair from the thread's pool on the launch's own
// stream (gpu_events.cpp). Why: a record_function plus numba's event wrappers cost +26/+73 us
// per launch on an H200 (bench/RESULTS.md, "GPU"); this is two C calls.
#include "ranges.h"

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

constexpr int32_t kMaxNames = 1 << 16;
constexpr int32_t kMaxStreams = 1 << 12;

// id -> name / stream, written once under the mutex before the id is handed out, then read
// without a lock by every push (untouched slots cost no memory: they are never faulted in)
std::mutex g_tables_mutex;
std::unordered_map<std::string, int32_t> g_name_ids;
std::unordered_map<uint64_t, int32_t> g_stream_ids;
const char* g_names[kMaxNames];
void* g_streams[kMaxStreams];
std::atomic<int32_t> g_name_count{0}, g_stream_count{1};  // stream 0: the legacy default stream

struct Open {
  void* record;  // null: pushed while nothing recorded (its pop does nothing)
  void* stream;
};
thread_local std::vector<Open> tl_open;  // this thread's open ranges, innermost last

template <typename Key, typename Value, typename Make>
int32_t table_id(std::unordered_map<Key, int32_t>& ids, std::atomic<int32_t>& count,
                 int32_t capacity, const Key& key, Value* slots, Make make) {
  std::lock_guard<std::mutex> lock(g_tables_mutex);
  auto found = ids.find(key);
  if (found != ids.end()) return found->second;
  int32_t id = count.load();
  if (id >= capacity) return -1;
  slots[id] = make(key);
  ids.emplace(key, id);
  count.store(id + 1, std::memory_order_release);
  return id;
}

}  // namespace

extern "C" {

int32_t nbp_range_name(const char* name) {
  try {
    return table_id(g_name_ids, g_name_count, kMaxNames, std::string(name ? name : ""), g_names,
                    [](const std::string& key) { return strdup(key.c_str()); });  // kept for good
  } catch (...) {
    return -1;
  }
}

int32_t nbp_range_stream(uint64_t stream) {
  if (stream == 0) return 0;
  try {
    return table_id(g_stream_ids, g_stream_count, kMaxStreams, stream, g_streams,
                    [](uint64_t key) { return reinterpret_cast<void*>(key); });
  } catch (...) {
    return -1;
  }
}

int nbp_range_push(int32_t name, int32_t stream, int32_t device) {
  if (name < 0 || name >= g_name_count.load(std::memory_order_acquire) || stream < 0 ||
      stream >= g_stream_count.load(std::memory_order_acquire))
    name = -1;  // not an id these tables gave: the range is paired, not recorded
  Open open{nullptr, g_streams[stream < 0 || name < 0 ? 0 : stream]};
  try {
    if (name >= 0) open.record = nbp_range::open(g_names[name], open.stream, device);
  } catch (...) {  // out of memory: the range goes unrecorded, its pop still pairs with it
    open.record = nullptr;
  }
  try {
    tl_open.push_back(open);
  } catch (...) {
    return 0;
  }
  return open.record != nullptr;
}

int nbp_range_pop() {
  if (tl_open.empty()) return -1;
  Open open = tl_open.back();
  tl_open.pop_back();
  // close() reads the CPU end time first, then the end event goes on the range's stream
  return open.record && nbp_range::close(open.record, open.stream) ? 1 : 0;
}

}  // extern "C"
