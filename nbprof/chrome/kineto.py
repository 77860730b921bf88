"""The torch.profiler / Kineto half of the loader (see loader for what becomes what)."""

from __future__ import annotations

import math
from itertools import repeat

import numpy as np

from .loader import (FLOW_CATEGORIES, GPU_CATEGORY_KIND, RUNTIME_CATEGORIES, Load,
                          arg_values, category_flags)
from .read import pick
from ..events import KIND_OTHER, NO_ID, Trace


class KinetoLoad(Load):
    def __init__(self, data, slices, metadata):
        super().__init__(slices)
        self.data = data if isinstance(data, dict) else {}
        self.process_names, self.process_labels, self.thread_names = {}, {}, {}
        self.process_sort, self.thread_sort = {}, {}
        for event in metadata:
            args, pid, kind = event.args, event.pid, event.name
            args = args if isinstance(args, dict) else {}
            if kind == "process_name":
                self.process_names[pid] = str(args.get("name", ""))
            elif kind == "process_labels":
                self.process_labels[pid] = str(args.get("labels", ""))
            elif kind == "process_sort_index":
                self.process_sort[pid] = args.get("sort_index")
            elif kind == "thread_name":  # the last name given wins (Kineto renames threads)
                self.thread_names[(pid, event.tid)] = str(args.get("name", ""))
            elif kind == "thread_sort_index":
                self.thread_sort[(pid, event.tid)] = args.get("sort_index")
        self.pid_ids: dict = {}  # the file's pid -> an int pid (set with the threads)

    def gpu_rows_mask(self):
        cat, pid = self.slices.cat, self.slices.pid
        gpu_cat = category_flags(cat.table, GPU_CATEGORY_KIND)
        gpu_pid = np.array(["GPU" in self.process_labels.get(value, "") for value in pid.table]
                           or [False])
        return gpu_cat[cat.codes] | gpu_pid[pid.codes]

    def origin_us(self):
        return math.floor(float(self.slices.ts.min())) if len(self.slices.ts) else 0.0

    def thread_table(self, distinct):
        def order(key):  # numeric pids first, then by the file's sort indices
            pid, tid = key
            return (not isinstance(pid, int), _sortable(self.process_sort.get(pid, pid)),
                    _sortable(self.thread_sort.get(key, tid)))

        ordered = sorted(distinct, key=order)
        self.pid_ids = _int_ids(list(dict.fromkeys(pid for pid, _tid in ordered)))
        tid_ids = _int_ids([tid for _pid, tid in ordered])
        threads = [(self.pid_ids[pid], tid_ids[tid],
                    self.thread_names.get((pid, tid)) or _default_name(tid))
                   for pid, tid in ordered]
        lane = {key: index for index, key in enumerate(ordered)}
        return [lane[key] for key in distinct], threads

    def launches(self, cpu_rows, gpu_rows, cpu_args, gpu_args, flows):
        """Per GPU row, the CPU row (index into cpu_rows) of the runtime call that launched it."""
        runtime_rows = np.flatnonzero(self._runtime_mask(cpu_rows))
        # The last runtime call with a correlation wins, as Kineto writes one per launch.
        by_correlation = dict(zip(arg_values(pick(cpu_args, runtime_rows), "correlation"),
                                  runtime_rows.tolist()))
        by_correlation.pop(None, None)  # runtime calls without one
        launch = np.fromiter(map(by_correlation.get, arg_values(gpu_args, "correlation"),
                                 repeat(NO_ID)), np.int32, len(gpu_args))
        if (launch == NO_ID).any():
            self._link_by_external_id(launch, cpu_rows, cpu_args, gpu_args)
        if (launch == NO_ID).any() and flows:
            self._link_by_flows(launch, cpu_rows, gpu_rows, flows)
        unlinked = int((launch == NO_ID).sum())
        if unlinked:
            self.notes.append(f"{unlinked} GPU intervals have no launching event in the file")
        return launch

    def _link_by_flows(self, launch, cpu_rows, gpu_rows, flows):
        # For files whose slices lack correlation ids. A flow's s sits at its runtime slice's
        # ts on the same thread, its f at the GPU slice's ts on the same stream: both ends are
        # matched on (pid, tid, ts) exactly. A flow with one end missing links nothing.
        flows = [event for event in flows if str(event.cat).lower() in FLOW_CATEGORIES]
        s = self.slices
        every_row = np.arange(len(s.ts))
        pid, tid, ts = s.pid.values(every_row), s.tid.values(every_row), s.ts.tolist()
        # Keyed by where a flow's f lands; a kernel and an annotation starting together on one
        # stream share a key: the kernel (listed last) wins, as the flow is the kernel's.
        kinds = self.gpu_kinds(gpu_rows).tolist()
        landing = {(pid[row], tid[row], ts[row]): index
                   for _kind, index, row in sorted(
                       zip((kind != KIND_OTHER for kind in kinds), range(len(gpu_rows)),
                           gpu_rows.tolist()))}
        unlinked = {key: index for key, index in landing.items() if launch[index] == NO_ID}
        gpu_row_of_flow = {}
        for end in flows:
            if end.ph == "f":
                gpu_row = unlinked.get((end.pid, end.tid, _float(end.ts)))
                if gpu_row is not None:
                    gpu_row_of_flow[end.id] = gpu_row
        wanted = {(start.pid, start.tid, _float(start.ts)): gpu_row_of_flow[start.id]
                  for start in flows if start.ph == "s" and start.id in gpu_row_of_flow}
        if not wanted:
            return
        for index, row in enumerate(cpu_rows.tolist()):
            gpu_row = wanted.get((pid[row], tid[row], ts[row]))
            if gpu_row is not None and launch[gpu_row] == NO_ID:
                launch[gpu_row] = index

    def _link_by_external_id(self, launch, cpu_rows, cpu_args, gpu_args):
        # A GPU annotation (and a kernel whose runtime call is missing) shares its External id
        # with the CPU op or annotation it belongs to; runtime calls share it too: skip them.
        unlinked = np.flatnonzero(launch == NO_ID)
        wanted = arg_values(pick(gpu_args, unlinked), "External id")
        if not any(value is not None for value in wanted):
            return
        others = np.flatnonzero(~self._runtime_mask(cpu_rows))
        # The first op or annotation with an External id wins (reversed: a dict keeps the last).
        by_external = dict(zip(reversed(arg_values(pick(cpu_args, others), "External id")),
                               reversed(others.tolist())))
        by_external.pop(None, None)
        launch[unlinked] = np.fromiter(map(by_external.get, wanted, repeat(NO_ID)), np.int32,
                                       len(wanted))

    def _runtime_mask(self, cpu_rows) -> np.ndarray:
        """Which CPU rows are runtime/driver calls (cudaLaunchKernel, cuLaunchKernel, ...)."""
        cat = self.slices.cat
        return category_flags(cat.table, RUNTIME_CATEGORIES)[cat.codes[cpu_rows]]

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
        base_ns += int(data.get("baseTimeNanoseconds") or 0)
        meta = {"backend": "kineto", "base_time_ns": base_ns}
        distributed = data.get("distributedInfo")
        if isinstance(distributed, dict):
            for key in ("rank", "world_size"):
                if key in distributed:
                    meta[key] = distributed[key]
        devices = data.get("deviceProperties")
        if isinstance(devices, list) and devices:
            meta["device_names"] = {int(d["id"]): str(d.get("name", "")) for d in devices
                                    if isinstance(d, dict) and "id" in d}
        meta["process_names"] = {str(self.pid_ids[pid]): name
                                 for pid, name in self.process_names.items()
                                 if pid in self.pid_ids}
        # Whatever else the file's top level says (deviceProperties, distributedInfo, INFO, ...).
        meta["file_metadata"] = {key: value for key, value in data.items()
                                 if key != "traceEvents"}
        meta["notes"] = self.notes
        return meta


def _default_name(tid) -> str:
    # Kineto's own lanes have string tids ("PyTorch Profiler"): that string is their name.
    return tid if isinstance(tid, str) else f"thread {tid}"


def _float(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _sortable(value):
    return value if isinstance(value, (int, float)) else float("inf")


def _int_ids(values: list) -> dict:
    """An int for each pid or tid: ints (and numeric strings) as they are; other strings (Kineto's
    "Spans", "PyTorch Profiler") get ids past the largest int."""
    numeric = {}
    for value in values:
        if isinstance(value, int):
            numeric[value] = value
        elif isinstance(value, float) and value.is_integer():
            numeric[value] = int(value)
        elif isinstance(value, str) and value.lstrip("-").isdigit():
            numeric[value] = int(value)
    next_id = max(numeric.values(), default=0) + 1
    for value in values:
        if value not in numeric:
            numeric[value] = next_id
            next_id += 1
    return numeric
