"""The torch.profiler / Kineto half of the loader (see loader for what becomes what)."""

from __future__ import annotations

import math
import re
from collections import defaultdict, deque

import numpy as np

from .args import MISSING
from .loader import (GPU_CATEGORY_KIND, RUNTIME_CATEGORIES, Load, category_flags, int_ids,
                     matches)
from .read import canonical_id, hashable
from ...model import KIND_OTHER, NO_ID, Trace

_BLOCK_ROWS = 1 << 18


class KinetoLoad(Load):
    def __init__(self, data, slices, metadata):
        super().__init__(slices)
        self.data = data if isinstance(data, dict) else {}
        self.process_names, self.process_labels, self.thread_names = {}, {}, {}
        self.process_sort, self.thread_sort = {}, {}
        for event in metadata:
            if not (hashable(event.pid) and hashable(event.tid)):
                continue  # names a lane no slice can be on
            args, pid, kind = event.args, canonical_id(event.pid), event.name
            tid = canonical_id(event.tid)
            args = args if isinstance(args, dict) else {}
            if kind == "process_name":
                self.process_names[pid] = str(args.get("name", ""))
            elif kind == "process_labels":
                self.process_labels[pid] = str(args.get("labels", ""))
            elif kind == "process_sort_index":
                self.process_sort[pid] = args.get("sort_index")
            elif kind == "thread_name":  # the last name given wins (Kineto renames threads)
                self.thread_names[(pid, tid)] = str(args.get("name", ""))
            elif kind == "thread_sort_index":
                self.thread_sort[(pid, tid)] = args.get("sort_index")
        self.pid_ids: dict = {}  # the file's pid -> an int pid (set with the threads)

    def gpu_rows_mask(self):
        cat, pid = self.slices.cat, self.slices.pid
        gpu_cat = category_flags(cat.table, GPU_CATEGORY_KIND)
        gpu_pid = np.array([_is_gpu_label(self.process_labels.get(value, ""))
                            for value in pid.table] or [False])
        return gpu_cat[cat.codes] | gpu_pid[pid.codes]

    def metadata_rows_mask(self):
        # Kineto's span of the whole profile, "PyTorch Profiler (0)" (cat "Trace"), on a lane
        # of its own: trace metadata, not an op (it would lead every diff and summary)
        cat, name = self.slices.cat, self.slices.name
        span_name = np.array([str(value).startswith("PyTorch Profiler") for value in name.table]
                             or [False])
        return category_flags(cat.table, ("trace",))[cat.codes] & span_name[name.codes]

    def origin_us(self):
        return math.floor(float(self.slices.ts.min())) if len(self.slices.ts) else 0.0

    def thread_table(self, distinct):
        def order(key):  # numeric pids first, then by the file's sort indices
            pid, tid = key
            return (not isinstance(pid, int), _sortable(self.process_sort.get(pid, pid)),
                    _sortable(self.thread_sort.get(key, tid)))

        ordered = sorted(distinct, key=order)
        self.pid_ids = int_ids(list(dict.fromkeys(pid for pid, _tid in ordered)))
        tid_ids = int_ids([tid for _pid, tid in ordered])
        threads = [(self.pid_ids[pid], tid_ids[tid],
                    self.thread_names.get((pid, tid)) or _default_name(tid))
                   for pid, tid in ordered]
        lane = {key: index for index, key in enumerate(ordered)}
        self.lane_index = lane
        return [lane[key] for key in distinct], threads

    def counter_pid(self, pid) -> int:
        if pid in self.pid_ids:
            return self.pid_ids[pid]
        return super().counter_pid(pid)

    def launches(self, cpu_rows, gpu_rows, flows, start_ns, origin_us):
        """Per GPU row, the CPU row (index into cpu_rows) of the runtime call that launched it."""
        is_runtime = self._runtime_mask(cpu_rows)
        # The last runtime call with a correlation wins, as Kineto writes one per launch.
        launch = matches(self.slices.args.ids["correlation"], cpu_rows, is_runtime, gpu_rows,
                          last_wins=True)
        if (launch == NO_ID).any():
            self._link_by_external_id(launch, cpu_rows, gpu_rows, is_runtime)
        del is_runtime
        if (launch == NO_ID).any() and flows:
            self._link_by_flows(launch, cpu_rows, gpu_rows, flows, start_ns, origin_us)
        unlinked = int((launch == NO_ID).sum())
        if unlinked:
            self.notes.append(f"{unlinked} GPU intervals have no launching event in the file")
        return launch

    def _link_by_flows(self, launch, cpu_rows, gpu_rows, flows, start_ns, origin_us):
        # For files whose slices lack correlation ids. A flow's s sits at its runtime slice's
        # ts on the same thread, its f at the GPU slice's ts on the same stream: both ends are
        # matched on (pid, tid, ts) exactly, the ts as the trace's ns.
        # A flow with one end missing links nothing.
        s = self.slices
        every_row = np.arange(len(start_ns))
        pid, tid, ts = s.pid.values(every_row), s.tid.values(every_row), start_ns.tolist()
        # Keyed by where a flow's f lands; a kernel and an annotation starting together on one
        # stream share a key: the kernel (listed last) wins, as the flow is the kernel's.
        kinds = self.gpu_kinds(gpu_rows).tolist()
        landing = {(pid[row], tid[row], ts[row]): index
                   for _kind, index, row in sorted(
                       zip((kind != KIND_OTHER for kind in kinds), range(len(gpu_rows)),
                           gpu_rows.tolist()))}
        unlinked = {key: index for key, index in landing.items() if launch[index] == NO_ID}
        wanted = {}  # (pid, tid, ts) of a flow's s -> the GPU row its f lands on
        for start, end in self._flow_pairs(flows, origin_us):
            gpu_row = unlinked.get(end)
            if gpu_row is not None:
                wanted[start] = gpu_row
        if not wanted:
            return
        for index, row in enumerate(cpu_rows.tolist()):
            gpu_row = wanted.get((pid[row], tid[row], ts[row]))
            if gpu_row is not None and launch[gpu_row] == NO_ID:
                launch[gpu_row] = index

    def _flow_pairs(self, flows, origin_us) -> list:
        """The (pid, tid, ts) of each ac2g flow's s and f, paired by id *and* time: a file may
        reuse an id, so each f takes the earliest s of its id still open before it (kernels
        run in launch order). An f with several s open is counted as ambiguous in a note."""
        by_id = defaultdict(list)
        unusable = flows.unusable
        for flow_id, is_end, where in flows.ends(origin_us):
            # f after s on ties: a flow's ends can share a ts
            by_id[flow_id].append((where[2], is_end, where))
        pairs, ambiguous = [], 0
        for ends in by_id.values():
            ends.sort(key=lambda end: (end[0], end[1]))
            open_starts = deque()
            for _at, is_end, where in ends:
                if not is_end:
                    open_starts.append(where)
                elif open_starts:
                    ambiguous += len(open_starts) > 1
                    pairs.append((open_starts.popleft(), where))
        if unusable:
            self.notes.append(f"{unusable} flow events had a list or an object for id, pid or "
                              f"tid, or no numeric ts: they link nothing")
        if ambiguous:
            self.notes.append(f"{ambiguous} flow ends (f) had several flow starts (s) of their "
                              f"id open before them: each was paired with the earliest, which "
                              f"may be the wrong launch")
        return pairs

    def _link_by_external_id(self, launch, cpu_rows, gpu_rows, is_runtime):
        # A GPU annotation (and a kernel whose runtime call is missing) shares its External id
        # with the CPU op or annotation it belongs to; runtime calls share it too: skip them.
        unlinked = np.flatnonzero(launch == NO_ID)
        # The first op or annotation with an External id wins.
        found = matches(self.slices.args.ids["external_id"], cpu_rows, ~is_runtime,
                         gpu_rows[unlinked], last_wins=False)
        launch[unlinked] = found

    def runtime_calls(self, cpu_rows, gpu_rows, launch):
        # Before finish() moves them up to the op around them, the launches that landed on a
        # runtime call (by correlation or by a flow) are the calls themselves
        if not len(cpu_rows):
            return np.full(len(launch), NO_ID, np.int32)
        landed = self._runtime_mask(cpu_rows)[np.maximum(launch, 0)] & (launch >= 0)
        return np.where(landed, launch, NO_ID).astype(np.int32)

    def finish(self, trace: Trace) -> Trace:
        """Move each launch from the runtime call up to the op around it (see loader)."""
        runtime = category_flags(trace.categories, RUNTIME_CATEGORIES)
        launched = np.flatnonzero(trace.gpu_launch >= 0)
        current = trace.gpu_launch[launched].astype(np.int64)
        while len(current):
            up = trace.parent[current]
            climb = runtime[trace.category[current]] & (up >= 0)
            if not climb.any():
                break
            current[climb] = up[climb]
        trace.gpu_launch[launched] = current
        return trace

    def meta(self, base_ns):
        data = self.data
        base_ns += self._file_base_ns()
        meta = {"backend": "kineto", "base_time_ns": base_ns}
        distributed = data.get("distributedInfo")
        if isinstance(distributed, dict):
            for key in ("rank", "world_size"):
                value = distributed.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 31:
                    meta[key] = value
                elif value is not None:  # a rank names lanes and merges files: a number or nothing
                    self.notes.append(f"distributedInfo.{key} {str(value)[:80]!r} is not a rank "
                                      "number: ignored")
        devices = data.get("deviceProperties")
        if isinstance(devices, list) and devices:
            meta["device_names"] = names = {}
            for device in devices:
                number = _as_device(device.get("id")) if isinstance(device, dict) else None
                if number is None:
                    self.notes.append(f"a deviceProperties entry has no device number for an "
                                      f"id: {str(device)[:80]}; its name was not used")
                else:
                    names[number] = str(device.get("name", ""))
        meta["process_names"] = {str(self.pid_ids[pid]): name
                                 for pid, name in self.process_names.items()
                                 if hashable(pid) and pid in self.pid_ids}
        # Whatever else the file's top level says (deviceProperties, distributedInfo, INFO, ...).
        meta["file_metadata"] = {key: value for key, value in data.items()
                                 if key != "traceEvents"}
        meta["notes"] = self.notes
        return meta

    def _file_base_ns(self) -> int:
        value = self.data.get("baseTimeNanoseconds")
        if value is None:
            return 0
        number = _as_device(value, limit=1 << 62)
        if number is None:
            self.notes.append(f"the file's baseTimeNanoseconds ({str(value)[:40]!r}) is no "
                              f"whole number of ns: the trace's wall-clock start is unknown")
            return 0
        return number


def _as_device(value, limit=1 << 15):
    """An int id (a device number, a ns count) from a file's number or numeric string; None
    for anything else or beyond ``limit``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and -limit <= value < limit else None


_GPU_LABEL = re.compile(r"\s*GPU\s*\d+\s*")


def _is_gpu_label(labels: str) -> bool:
    """Whether a process_labels value (comma-separated labels) has one that is Kineto's
    "GPU <n>": a label that merely mentions a GPU ("no GPU here") keeps a CPU process's
    slices CPU events."""
    return any(_GPU_LABEL.fullmatch(label) for label in labels.split(","))


def _default_name(tid) -> str:
    # Kineto's own lanes have string tids ("PyTorch Profiler"): that string is their name.
    return tid if isinstance(tid, str) else f"thread {tid}"


def _sortable(value):
    return value if isinstance(value, (int, float)) else float("inf")


