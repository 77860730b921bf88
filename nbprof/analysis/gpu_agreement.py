"""``trace.gpu_agreement()``: each op's CUDA-event interval against the kernels it really ran.

With the legacy CUDA events and CUPTI's kernels in one trace, every op that has both can be
checked: its event interval (push to pop on its stream) against the union of the kernels,
memcpys and memsets that it and the ops nested in it launched on the events' device. They agree when the op's GPU
work is its kernels; they part when the events also hold queueing and launch gaps, or when
the work went to a stream the events did not bracket (a side stream, NCCL's). numpy only.

Per op: ``start_offset_us`` = first kernel's start - event start, ``end_offset_us`` = event end -
last kernel's end (both >= 0 when the events bracket the kernels), ``ratio`` = event time / kernel
time, and ``disagree`` where that ratio is more than 10% away from 1.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .averages import KERNEL_WORK
from ..model import KIND_OP, Trace
from ..model.intervals import merge_by_group
from .tables import make_table

DISAGREE = 0.10  # event time and kernel time more than 10% apart


class OpGpuTimes(NamedTuple):
    """Per op with a CUDA-event interval (``op``: event ids, ascending): the event's interval and
    its subtree's kernels: union length and first start / last end (``kernels_ns`` 0 and the
    bounds equal to the event's where it has none)."""

    op: np.ndarray
    event_start_ns: np.ndarray
    event_end_ns: np.ndarray
    kernels_ns: np.ndarray
    kernels_start_ns: np.ndarray
    kernels_end_ns: np.ndarray


def op_gpu_times(trace: Trace) -> OpGpuTimes:
    """Event interval and subtree kernels of every op that has an event interval."""
    events = np.flatnonzero((trace.gpu_kind == KIND_OP) & (trace.gpu_launch >= 0))
    op = trace.gpu_launch[events].astype(np.int64)
    ops, first = np.unique(op, return_index=True)
    event_start = np.full(len(trace), np.iinfo(np.int64).max)
    event_end = np.full(len(trace), np.iinfo(np.int64).min)
    np.minimum.at(event_start, op, trace.gpu_start_ns[events])  # (one interval per op, but
    np.maximum.at(event_end, op, trace.gpu_end_ns[events])  # a loaded file may split one)
    event_device = np.full(len(trace), -1, np.int64)  # -1: no event interval
    event_device[op] = trace.gpu_device[events]

    kernel_op, kernel_row = _subtree_pairs(trace, np.flatnonzero(
        np.isin(trace.gpu_kind, KERNEL_WORK) & (trace.gpu_launch >= 0)))
    # only the kernels on the events' device: work sent to another GPU is not what they timed
    keep = event_device[kernel_op] == trace.gpu_device[kernel_row]
    block_op, block_start, block_end = merge_by_group(
        kernel_op[keep], trace.gpu_start_ns[kernel_row[keep]], trace.gpu_end_ns[kernel_row[keep]])
    kernels_ns = np.bincount(block_op, weights=block_end - block_start,
                             minlength=len(trace)).astype(np.int64)
    kernels_start, kernels_end = event_start.copy(), event_end.copy()
    if len(block_op):  # blocks come sorted by op, then start
        starts = np.flatnonzero(np.r_[True, block_op[1:] != block_op[:-1]])
        ends = np.r_[starts[1:] - 1, len(block_op) - 1]
        kernels_start[block_op[starts]] = block_start[starts]
        kernels_end[block_op[ends]] = block_end[ends]
    return OpGpuTimes(ops, event_start[ops], event_end[ops], kernels_ns[ops],
                      kernels_start[ops], kernels_end[ops])


class OneOp(NamedTuple):
    events_ns: int  # the op's CUDA-event interval
    kernels_ns: int  # the union of its subtree's kernels, memcpys and memsets on that device
    ratio: float  # events / kernels
    disagree: bool


def op_agreement(trace: Trace, op: int) -> OneOp | None:
    """:func:`op_gpu_times` for one op (the details pane's click), or None where the op lacks an
    event interval or kernels. Walks up from the kernels, not over all ops: one click stays cheap."""
    events = np.flatnonzero((trace.gpu_kind == KIND_OP) & (trace.gpu_launch == op))
    if not len(events):
        return None
    device = trace.gpu_device[events[0]]
    kernel_op, kernel_row = _subtree_pairs(trace, np.flatnonzero(
        np.isin(trace.gpu_kind, KERNEL_WORK) & (trace.gpu_launch >= 0) & (trace.gpu_device == device)))
    under = kernel_row[kernel_op == op]
    _, block_start, block_end = merge_by_group(
        np.zeros(len(under), np.int64), trace.gpu_start_ns[under], trace.gpu_end_ns[under])
    kernels_ns = int((block_end - block_start).sum())
    if not kernels_ns:
        return None
    events_ns = int(trace.gpu_end_ns[events].max() - trace.gpu_start_ns[events].min())
    ratio = events_ns / kernels_ns
    return OneOp(events_ns, kernels_ns, ratio, bool(disagrees(ratio)))


def _subtree_pairs(trace: Trace, kernel_rows: np.ndarray):
    """(op, kernel row) for each kernel and every op above its launching op, one depth level
    per numpy pass (kernels x depth pairs)."""
    ops, rows = [], []
    op = trace.gpu_launch[kernel_rows].astype(np.int64)
    while len(op):
        ops.append(op)
        rows.append(kernel_rows)
        parent = trace.parent[op].astype(np.int64)
        kernel_rows, op = kernel_rows[parent >= 0], parent[parent >= 0]
    if not ops:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(ops), np.concatenate(rows)


NONE_COMPARED = ("No op has both a CUDA-event interval and kernels: the cross-check needs a GPU "
                 "profile with the events and CUPTI's kernels (nbprof.profile(kernels=True)).")


def gpu_agreement(trace: Trace, *, by: str = "name", plain: bool = False):
    """Event interval vs kernels (see the module's docstring): a DataFrame per op name
    (``by="name"``) or per op (``by="op"``); ``attrs["events_only"]``: how many ops had an event
    interval but no kernel in their subtree (not compared)."""
    if by not in ("name", "op"):
        raise ValueError(f"gpu_agreement: by={by!r}; use by='name' or by='op'")
    times = op_gpu_times(trace)
    both = times.kernels_ns > 0
    op = times.op[both]
    event_ns = (times.event_end_ns - times.event_start_ns)[both]
    kernels_ns = times.kernels_ns[both]
    ratio = event_ns / kernels_ns
    events_only = int((~both).sum())
    attrs = {"events_only": events_only}
    if events_only and len(op):
        attrs["footer"] = (f"{events_only} ops with CUDA-event intervals launched no kernel "
                           "(CPU-side ops, or kernels CUPTI did not see): not compared.")
    if by == "op":
        names = [trace.names[i] for i in trace.name_id[op].tolist()]
        return make_table("GpuAgreementOps", {
            "id": op, "name": names,
            "events_us": event_ns / 1e3, "kernels_us": kernels_ns / 1e3,
            "start_offset_us": (times.kernels_start_ns - times.event_start_ns)[both] / 1e3,
            "end_offset_us": (times.event_end_ns - times.kernels_end_ns)[both] / 1e3,
            "ratio": ratio, "disagree": disagrees(ratio),
        }, _ops_text, plain, attrs)

    name_id, group = np.unique(trace.name_id[op], return_inverse=True)
    group = group.reshape(-1)
    events_total = np.bincount(group, weights=event_ns, minlength=len(name_id))
    kernels_total = np.bincount(group, weights=kernels_ns, minlength=len(name_id))
    order = np.argsort(-kernels_total, kind="stable")
    name_ratio = events_total[order] / kernels_total[order]
    return make_table("GpuAgreement", {
        "name": [trace.names[i] for i in name_id[order].tolist()],
        "count": np.bincount(group, minlength=len(name_id))[order],
        "events_us": events_total[order] / 1e3, "kernels_us": kernels_total[order] / 1e3,
        "ratio": name_ratio,
        "disagreeing_ops": np.bincount(group, weights=disagrees(ratio),
                                       minlength=len(name_id))[order].astype(np.int64),
        "disagree": disagrees(name_ratio),
    }, _names_text, plain, attrs)


def disagrees(ratio) -> np.ndarray:
    """Where event time and kernel time are more than 10% apart."""
    return np.abs(np.asarray(ratio, np.float64) - 1.0) > DISAGREE


def ratio_cell(ratio: float) -> str:
    """A ratio for a text table, with the flag the footnote explains."""
    return f"{ratio:.2f}{' !' if disagrees(ratio) else '  '}"


FLAG_NOTE = ("! : GPU (events) and GPU (kernels) differ by more than 10%: the op's CUDA events "
             "also hold queueing and launch gaps, or its kernels ran on a stream they did not "
             "bracket (trace.gpu_agreement() has each op).")


def _names_text(rows: list[dict], row_limit: int = 20, name_width: int = 55) -> str:
    from .averages import format_us, limit_rows, text_table

    if not rows:
        return NONE_COMPARED
    headers = ["Name", "Ops", "GPU (events)", "GPU (kernels)", "Events/kernels", "Disagreeing ops"]
    cells = [[row["name"], str(row["count"]), format_us(row["events_us"]),
              format_us(row["kernels_us"]), ratio_cell(row["ratio"]),
              str(row["disagreeing_ops"])] for row in limit_rows(rows, row_limit)]
    return "\n".join([*text_table(headers, cells, name_width), FLAG_NOTE])


def _ops_text(rows: list[dict], row_limit: int = 20, name_width: int = 55) -> str:
    from .averages import format_us, limit_rows, text_table

    if not rows:
        return NONE_COMPARED
    headers = ["Name", "Id", "GPU (events)", "GPU (kernels)", "Start offset", "End offset",
               "Events/kernels"]
    cells = [[row["name"], str(row["id"]), format_us(row["events_us"]),
              format_us(row["kernels_us"]), f"{row['start_offset_us']:.3f}us",
              f"{row['end_offset_us']:.3f}us", ratio_cell(row["ratio"])]
             for row in limit_rows(rows, row_limit)]
    return "\n".join([*text_table(headers, cells, name_width), FLAG_NOTE])
