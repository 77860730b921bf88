// with_stack on the native path (python_calls.h): Python calls and returns of every thread.
//
// Why a profile function and not a walk of the frames at each op: torch's path shows Python
// functions as slices on the timeline (python_function) and derives each op's stack from the
// slices around it; only calls and returns give those. The cost is per Python call, not per
// op: a loop of tensor arithmetic pays nothing, a Module's forward pays its Python calls, as
// under torch's tracer (bench_native.py --with-stack measures both against it).
//
// Built without Python's headers (build.py defines NBP_PYTHON only where Python.h is), the
// functions say "unavailable" and nbprof records with_stack through torch's profiler.
#include "python_calls.h"

#include "memory.h"

#ifdef NBP_PYTHON
#include <Python.h>
#include <frameobject.h>
#include <pthread.h>

#include <c10/util/ApproximateClock.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

namespace {

struct Event {
  int64_t time;  // approximate clock (TSC), converted at fetch as the observer's
  int32_t key;   // a call's code (index into g_codes), -1: a return
};

// A thread's profile function before ours (cProfile's, a debugger's, sys.setprofile's): ours
// forwards it every event and gives it back at the stop, so a profile loses nothing.
struct Previous {
  Py_tracefunc func = nullptr;
  PyObject* obj = nullptr;  // an owned reference
};

Previous previous_of(PyThreadState* ts) {
  Py_XINCREF(ts->c_profileobj);
  return {ts->c_profilefunc, ts->c_profileobj};
}

int forward(const Previous& previous, PyFrameObject* frame, int what, PyObject* arg) {
  return previous.func ? previous.func(previous.obj, frame, what, arg) : 0;
}

// PyEval_SetProfile sets the current thread's: `ts` is made current meanwhile.
void set_profile(PyThreadState* ts, Py_tracefunc func, PyObject* obj) {
  PyThreadState* me = PyThreadState_Get();
  if (ts != me) PyThreadState_Swap(ts);
  PyEval_SetProfile(func, obj);
  if (ts != me) PyThreadState_Swap(me);
}

struct ThreadCalls {
  int64_t os_tid;
  Previous previous;
  std::vector<Event> events;
  bool entered = false;  // its memory reporter pushed (memory.cpp), at its first call or return
};

struct Code {
  PyObject* code;  // an owned reference: its address cannot be reused while recording
  int32_t line;    // -1: a call (named by its first instruction's line at read), kModule: an
};                 // nn.Module called (`code` is the module), else the line a frame was at

constexpr int32_t kModule = -2;

struct Slice {
  int64_t start, end, os_tid;
  int32_t key;
};

constexpr size_t kCache = 1024;  // code pointer -> key slots: a call is one probe, no hashing

std::vector<std::unique_ptr<ThreadCalls>> g_threads;
std::vector<Code> g_codes;
std::unordered_map<PyObject*, int32_t> g_call_keys;            // line -1
std::unordered_map<PyObject*, std::vector<int32_t>> g_at_keys;  // seeded frames, a few
struct Slot { PyObject* code; int32_t key; } g_cache[kCache];
std::unordered_map<PyObject*, int32_t> g_module_keys;        // module instance -> key
PyObject* g_module_call = nullptr;  // nn.Module.__call__'s code: a module's call, named after it
std::vector<Slice> g_slices;
std::unique_ptr<c10::ApproximateClockToUnixTimeConverter> g_clock;
bool g_on = false;
bool g_forked = false;
bool g_hook_only = false;  // benchmarks: the profile function runs and records nothing

int32_t new_key(PyObject* code, int32_t line) {
  Py_INCREF(code);
  g_codes.push_back({code, line});
  return static_cast<int32_t>(g_codes.size() - 1);
}

int32_t call_key(PyObject* code) {
  Slot& slot = g_cache[(reinterpret_cast<uintptr_t>(code) >> 4) % kCache];
  if (slot.code == code) return slot.key;
  auto found = g_call_keys.find(code);
  int32_t key = found != g_call_keys.end() ? found->second : (g_call_keys[code] = new_key(code, -1));
  slot = {code, key};
  return key;
}

int32_t frame_key(PyObject* code, int32_t line) {
  auto& keys = g_at_keys[code];
  for (int32_t key : keys)
    if (g_codes[key].line == line) return key;
  keys.push_back(new_key(code, line));
  return keys.back();
}

// torch's tracer names a module's call "nn.Module: Linear_0" (its class and which instance of
// that class, in order of first call): the frame's `self` is the key, the name is made at read.
int32_t module_key(PyFrameObject* frame, PyObject* code) {
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* self = PyFrame_GetVarString(frame, "self");
#else
  PyObject* locals = PyFrame_GetLocals(frame);
  PyObject* self = locals ? PyMapping_GetItemString(locals, "self") : nullptr;
  Py_XDECREF(locals);
#endif
  if (!self) {
    PyErr_Clear();
    return call_key(code);
  }
  auto found = g_module_keys.find(self);
  int32_t key = found != g_module_keys.end() ? found->second
                                            : (g_module_keys[self] = new_key(self, kModule));
  Py_DECREF(self);
  return key;
}

PyObject* resume(PyObject* capsule, PyObject* args);
PyMethodDef g_resume = {"nbprof_python_calls", resume, METH_VARARGS,
                        "nbprof's with_stack recorder (sys.setprofile of it resumes it)"};

// The profile function's object, what sys.getprofile() returns while recording: a function of
// the thread's ThreadCalls (in a capsule), so that code in the block that saves sys.getprofile()
// and sets it back later (around its own profiling) gets recording back (resume).
ThreadCalls* calls_of(PyObject* hook) {
  return static_cast<ThreadCalls*>(PyCapsule_GetPointer(PyCFunction_GET_SELF(hook), nullptr));
}

int on_event(PyObject* hook, PyFrameObject* frame, int what, PyObject* arg) {
  if (g_hook_only) return 0;
  ThreadCalls* thread = calls_of(hook);
  if (g_forked) {  // a forked child (DataLoader worker) records nothing: off on first use
    Previous previous = thread->previous;
    PyEval_SetProfile(previous.func, previous.obj);
    return forward(previous, frame, what, arg);
  }
  if (what != PyTrace_CALL && what != PyTrace_RETURN) {  // C calls: not recorded
    return forward(thread->previous, frame, what, arg);
  }
  if (!thread->entered) {  // what the memory reporter's own one-shot hook would do here
    thread->entered = true;
    nbp_memory_enter_thread();  // nothing unless memory is recorded
  }
  int32_t key = -1;  // a return (also when the frame unwinds an exception)
  if (what == PyTrace_CALL) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    auto* object = reinterpret_cast<PyObject*>(code);
    // A generator or coroutine is "called" again at each resume: torch names it by the line it
    // resumes at (a yield's), so it is keyed by that line; any other call by its code alone.
    key = object == g_module_call ? module_key(frame, object)
          : code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)
              ? frame_key(object, PyFrame_GetLineNumber(frame))
              : call_key(object);
    Py_DECREF(code);
  }
  thread->events.push_back({static_cast<int64_t>(c10::getApproximateTime()), key});
  return forward(thread->previous, frame, what, arg);
}

// Trace `ts` from now on; the frames it is in (`frame` outwards, a new reference or null)
// count as called now, so that its later ops find them around them.
void trace(PyThreadState* ts, PyFrameObject* frame, int64_t now) {
  g_threads.push_back(std::make_unique<ThreadCalls>());
  ThreadCalls* calls = g_threads.back().get();
  calls->os_tid = static_cast<int64_t>(ts->native_thread_id);
  calls->previous = previous_of(ts);
  calls->events.reserve(1 << 12);
  std::vector<PyFrameObject*> frames;
  for (PyFrameObject* f = frame; f; f = PyFrame_GetBack(f)) frames.push_back(f);
  for (auto f = frames.rbegin(); f != frames.rend(); ++f) {  // outermost first
    PyCodeObject* code = PyFrame_GetCode(*f);
    calls->events.push_back({now, frame_key(reinterpret_cast<PyObject*>(code),
                                            PyFrame_GetLineNumber(*f))});
    Py_DECREF(code);
    Py_DECREF(*f);
  }
  PyObject* capsule = PyCapsule_New(calls, nullptr, nullptr);
  PyObject* hook = capsule ? PyCFunction_New(&g_resume, capsule) : nullptr;
  Py_XDECREF(capsule);  // the hook holds it
  if (!hook) { PyErr_Clear(); return; }
  set_profile(ts, on_event, hook);
  Py_DECREF(hook);  // the thread state holds it
}

// The recording's hook if `hook` is one (sys.getprofile() of a thread it is on, or was, as set
// back by sys.setprofile) and it is still this session's, on its own thread; else null.
ThreadCalls* ours(PyObject* hook, PyThreadState* ts) {
  if (!hook || !PyCFunction_Check(hook) || PyCFunction_GET_FUNCTION(hook) != g_resume.ml_meth) {
    return nullptr;
  }
  ThreadCalls* calls = calls_of(hook);
  for (auto& thread : g_threads) {
    if (thread.get() == calls) {
      return calls->os_tid == static_cast<int64_t>(ts->native_thread_id) ? calls : nullptr;
    }
  }
  return nullptr;  // an earlier session's
}

// The hook called as a Python profile function: sys.setprofile(hook) put it back. The C profile
// function takes over again from this event on (none once its session is over).
PyObject* resume(PyObject* capsule, PyObject* args) {
  PyObject *frame, *arg;
  const char* event;
  if (!PyArg_ParseTuple(args, "O!sO", &PyFrame_Type, &frame, &event, &arg)) return nullptr;
  PyThreadState* ts = PyThreadState_Get();
  PyObject* hook = ts->c_profileobj;
  if (!hook || !PyCFunction_Check(hook) || PyCFunction_GET_SELF(hook) != capsule) {
    // called some other way (not as this thread's profile function): nothing
    Py_RETURN_NONE;
  }
  if (!g_on || !ours(hook, ts)) {
    PyEval_SetProfile(nullptr, nullptr);
    Py_RETURN_NONE;
  }
  Py_INCREF(hook);
  PyEval_SetProfile(on_event, hook);
  static const char* const kEvents[] = {"call", "exception", "line", "return", "c_call",
                                        "c_exception", "c_return", "opcode"};  // PyTrace_*
  int what = static_cast<int>(std::find_if(std::begin(kEvents), std::end(kEvents),
      [&](const char* name) { return std::strcmp(name, event) == 0; }) - std::begin(kEvents));
  int result = what < 8 ? on_event(hook, reinterpret_cast<PyFrameObject*>(frame), what,
                                   arg == Py_None ? nullptr : arg) : 0;
  Py_DECREF(hook);
  if (result != 0) return nullptr;
  Py_RETURN_NONE;
}

// Each thread's calls matched with their returns; a frame still running ends at `stop`. Frames
// outermost first where they tie (Trace.build's sort keeps the order of ties).
void match(ThreadCalls& calls, int64_t stop) {
  std::vector<Event> open;
  for (const Event& event : calls.events) {
    if (event.key >= 0) {
      open.push_back(event);
    } else if (!open.empty()) {  // a return from a frame older than the tracing: nothing
      g_slices.push_back({open.back().time, event.time, calls.os_tid, open.back().key});
      open.pop_back();
    }
  }
  for (const Event& event : open) g_slices.push_back({event.time, stop, calls.os_tid, event.key});
  std::vector<Event>().swap(calls.events);
}

// memory=True without with_stack: each other thread's one-shot profile function pushes its memory
// reporter at its next Python event (memory.cpp), then gives the thread back the profile function
// it had, forwarding it this event. Its capsule holds that Previous.
constexpr const char* kPrevious = "nbprof.previous_profile";

void free_previous(PyObject* capsule) {
  auto* previous = static_cast<Previous*>(PyCapsule_GetPointer(capsule, kPrevious));
  Py_XDECREF(previous->obj);
  delete previous;
}

void give_back(PyThreadState* ts, PyObject* capsule) {
  Previous previous = *static_cast<Previous*>(PyCapsule_GetPointer(capsule, kPrevious));
  Py_XINCREF(previous.obj);  // setting it frees the capsule, and the capsule's reference
  set_profile(ts, previous.func, previous.obj);
  Py_XDECREF(previous.obj);
}

int memory_hook(PyObject* capsule, PyFrameObject* frame, int what, PyObject* arg) {
  nbp_memory_enter_thread();
  Previous previous = *static_cast<Previous*>(PyCapsule_GetPointer(capsule, kPrevious));
  Py_XINCREF(previous.obj);
  give_back(PyThreadState_Get(), capsule);
  int result = forward(previous, frame, what, arg);
  Py_XDECREF(previous.obj);
  return result;
}

void child_after_fork() {
  g_forked = true;
  g_on = false;
}

}  // namespace

extern "C" {

int nbp_py_available() { return 1; }

void nbp_py_set_module_call(void* code) {
  Py_XINCREF(static_cast<PyObject*>(code));
  Py_XDECREF(g_module_call);
  g_module_call = static_cast<PyObject*>(code);
}

int nbp_py_start(int hook_only) {
  static bool atfork = (pthread_atfork(nullptr, nullptr, child_after_fork), true);
  (void)atfork;
  if (g_on || g_forked) return -1;
  nbp_py_release();
  g_hook_only = hook_only != 0;
  g_clock = std::make_unique<c10::ApproximateClockToUnixTimeConverter>();
  int64_t now = static_cast<int64_t>(c10::getApproximateTime());
  PyThreadState* me = PyThreadState_Get();
  for (PyThreadState* ts = PyInterpreterState_ThreadHead(PyThreadState_GetInterpreter(me)); ts;
       ts = PyThreadState_Next(ts)) {
    // The starting thread's frames are the caller of nbprof.profile and nbprof's own: as on
    // torch's path, its stacks hold the calls made inside the block. Other threads are
    // somewhere in their work: a worker's loop is its ops' stack.
    trace(ts, ts == me ? nullptr : PyThreadState_GetFrame(ts), now);
  }
  g_on = true;
  return 0;
}

int nbp_py_trace_thread(void* frame) {
  if (!g_on || !frame) return -1;
  auto* f = static_cast<PyFrameObject*>(frame);
  Py_INCREF(f);
  trace(PyThreadState_Get(), f, static_cast<int64_t>(c10::getApproximateTime()));
  return 0;
}

int64_t nbp_py_stop() {
  if (!g_on) return -1;
  g_on = false;
  int64_t stop = static_cast<int64_t>(c10::getApproximateTime());
  PyThreadState* me = PyThreadState_Get();
  for (PyThreadState* ts = PyInterpreterState_ThreadHead(PyThreadState_GetInterpreter(me)); ts;
       ts = PyThreadState_Next(ts)) {
    ThreadCalls* calls = ours(ts->c_profileobj, ts);
    if (!calls) continue;  // another profiler's since: left alone
    set_profile(ts, calls->previous.func, calls->previous.obj);  // the one it had before
  }
  for (auto& calls : g_threads) {
    match(*calls, stop);
    Py_CLEAR(calls->previous.obj);
  }
  g_threads.clear();
  return static_cast<int64_t>(g_slices.size());
}

int nbp_py_hook_memory() {
  PyThreadState* me = PyThreadState_Get();
  for (PyThreadState* ts = PyInterpreterState_ThreadHead(PyThreadState_GetInterpreter(me)); ts;
       ts = PyThreadState_Next(ts)) {
    if (ts == me) continue;  // its reporter was pushed at the start
    auto* previous = new Previous(previous_of(ts));
    PyObject* capsule = PyCapsule_New(previous, kPrevious, free_previous);
    if (!capsule) {
      PyErr_Clear();
      Py_XDECREF(previous->obj);
      delete previous;
      return -1;
    }
    set_profile(ts, memory_hook, capsule);
    Py_DECREF(capsule);  // the thread state holds it
  }
  return 0;
}

void nbp_py_unhook_memory() {
  PyThreadState* me = PyThreadState_Get();
  for (PyThreadState* ts = PyInterpreterState_ThreadHead(PyThreadState_GetInterpreter(me)); ts;
       ts = PyThreadState_Next(ts)) {
    if (ts->c_profilefunc == memory_hook) give_back(ts, ts->c_profileobj);
  }
}

int64_t nbp_py_codes(void** code, int32_t* line, int64_t capacity) {
  int64_t count = static_cast<int64_t>(g_codes.size());
  for (int64_t i = 0; i < count && i < capacity; ++i) {
    code[i] = g_codes[i].code;
    line[i] = g_codes[i].line;
  }
  return count;
}

int64_t nbp_py_fetch(NbpPySlices* out, int64_t capacity) {
  auto to_unix = g_clock ? g_clock->makeConverter() : nullptr;
  int64_t rows = 0;
  for (const Slice& slice : g_slices) {
    if (rows == capacity) break;
    out->start_ns[rows] = to_unix(slice.start);
    out->end_ns[rows] = to_unix(slice.end);
    out->os_tid[rows] = slice.os_tid;
    out->key[rows++] = slice.key;
  }
  return rows;
}

void nbp_py_release() {
  if (g_on) return;
  for (const Code& code : g_codes) Py_DECREF(code.code);
  std::vector<Code>().swap(g_codes);
  g_call_keys.clear();
  g_at_keys.clear();
  g_module_keys.clear();
  std::fill(std::begin(g_cache), std::end(g_cache), Slot{nullptr, 0});
  std::vector<Slice>().swap(g_slices);
  g_threads.clear();
}

}  // extern "C"

#else  // no Python headers: with_stack goes through torch's profiler (build.py says why)

extern "C" {
int nbp_py_available() { return 0; }
int nbp_py_start(int) { return -1; }
int nbp_py_trace_thread(void*) { return -1; }
int nbp_py_hook_memory() { return -1; }
void nbp_py_unhook_memory() {}
void nbp_py_set_module_call(void*) {}
int64_t nbp_py_stop() { return -1; }
int64_t nbp_py_codes(void**, int32_t*, int64_t) { return 0; }
int64_t nbp_py_fetch(NbpPySlices*, int64_t) { return 0; }
void nbp_py_release() {}
}

#endif
