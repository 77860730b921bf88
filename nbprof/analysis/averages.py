"""Pure functions over a Trace: per-name summaries and the text table. No torch, bokeh or IPython."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import numpy as np

from ..model import KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET, KIND_OP, Trace, finished_mask

SORT_KEYS = ("cpu_time_total", "self_cpu_time_total", "cuda_time_total", "count",
             "cpu_time_avg", "self_cpu_time_avg", "cuda_time_avg", "name")


@dataclass(frozen=True)
class KeyAverage:
    """One row of the summary: every event of one name, times in microseconds."""

    name: str
    count: int
    cpu_time_total: float
    self_cpu_time_total: float
    cuda_time_total: float
    # With CUDA events and kernels in one trace (gpu_agreement.py): the events' GPU time and the
    # union of the kernels under the same calls (their nested ops' included), side by side.
    gpu_events_total: float = 0.0
    gpu_kernels_total: float = 0.0
    gpu_events_checked_total: float = 0.0  # events of the calls that have kernels too

    @property
    def events_per_kernels(self) -> float | None:
        """The cross-check's ratio over the calls with both (None: no call has kernels)."""
        return self.gpu_events_checked_total / self.gpu_kernels_total if self.gpu_kernels_total else None

    @property
    def key(self) -> str:
        return self.name

    @property
    def cpu_time_avg(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time_avg(self) -> float:
        return self.self_cpu_time_total / self.count if self.count else 0.0

    @property
    def cuda_time_avg(self) -> float:
        return self.cuda_time_total / self.count if self.count else 0.0


def key_averages(trace: Trace, sort_by: str = "cpu_time_total") -> list[KeyAverage]:
    """Per event name: count, CPU total, self CPU total and CUDA total (the GPU time of the
    intervals its events launched: kernels only, where the trace has kernels beside CUDA-event
    intervals, which then go to ``gpu_events_total`` beside ``gpu_kernels_total``), sorted by
    ``sort_by``, largest first. Unfinished slices (no end in their file) are left out: their
    time is not known (model/unfinished.py)."""
    _check_sort_key(sort_by)
    names = len(trace.names)
    finished = finished_mask(trace)
    name_id = trace.name_id if finished is None else trace.name_id[finished]
    count = np.bincount(name_id, minlength=names)
    cpu_ns = np.bincount(name_id, weights=_finished(trace.end_ns - trace.start_ns, finished),
                         minlength=names)
    self_ns = np.bincount(name_id, weights=_finished(trace.self_ns, finished), minlength=names)
    both = has_events_and_kernels(trace)
    launched = (trace.gpu_launch >= 0) & ((trace.gpu_kind != KIND_OP) if both else True)
    cuda_ns = np.bincount(trace.name_id[trace.gpu_launch[launched]],
                          weights=(trace.gpu_end_ns - trace.gpu_start_ns)[launched],
                          minlength=names)
    events_us = kernels_us = checked_us = [0.0] * names
    if both:
        from .gpu_agreement import op_gpu_times

        times = op_gpu_times(trace)
        op_names = trace.name_id[times.op]
        event_ns = times.event_end_ns - times.event_start_ns
        events_us = (np.bincount(op_names, weights=event_ns, minlength=names) / 1e3).tolist()
        kernels_us = (np.bincount(op_names, weights=times.kernels_ns, minlength=names)
                      / 1e3).tolist()
        # the ratio compares the calls that have both (gpu_agreement's rows): a call on CPU
        # tensors has events but no kernel, and would make its name's ratio look off
        checked_us = (np.bincount(op_names, weights=np.where(times.kernels_ns > 0, event_ns, 0),
                                  minlength=names) / 1e3).tolist()
    # plain floats (tolist), so rows print and serialise like any Python numbers
    cpu_us, self_us, cuda_us = (cpu_ns / 1e3).tolist(), (self_ns / 1e3).tolist(), (cuda_ns / 1e3).tolist()
    rows = [KeyAverage(trace.names[i], int(count[i]), cpu_us[i], self_us[i], cuda_us[i],
                       events_us[i], kernels_us[i], checked_us[i])
            for i in np.flatnonzero(count).tolist()]
    return sort_rows(rows, sort_by)


def _finished(column: np.ndarray, finished: np.ndarray | None) -> np.ndarray:
    return column if finished is None else column[finished]


KERNEL_WORK = (KIND_KERNEL, KIND_MEMCPY, KIND_MEMSET)


def gpu_work_kinds(trace: Trace) -> tuple:
    """The GPU intervals that measure GPU work: kernels, memcpys and memsets where the trace has
    them (per-op CUDA-event intervals beside them would count the same work again, with the
    queueing and gaps they hold), else the per-op CUDA-event intervals too."""
    return KERNEL_WORK if np.isin(trace.gpu_kind, KERNEL_WORK).any() else (KIND_OP, *KERNEL_WORK)


def has_events_and_kernels(trace: Trace) -> bool:
    """Whether the trace has per-op CUDA-event intervals and other GPU work (kernels) both."""
    return bool((trace.gpu_kind == KIND_OP).any() and np.isin(trace.gpu_kind, KERNEL_WORK).any())


def sort_rows(rows, sort_by: str):
    _check_sort_key(sort_by)
    if sort_by == "name":
        return sorted(rows, key=lambda row: row.name)
    return sorted(rows, key=lambda row: getattr(row, sort_by), reverse=True)


def _check_sort_key(sort_by: str) -> None:
    if sort_by not in SORT_KEYS:
        raise ValueError(f"cannot sort by {sort_by!r}: choose one of {', '.join(SORT_KEYS)}")


def gpu_busy_ns(trace: Trace, kinds=None) -> int:
    """Time each GPU stream had work, summed over streams; ``kinds``: only the GPU intervals of
    these kinds (GPU_KINDS indices). A plain sum of the intervals would count twice what nests: a
    parent op's CUDA-event interval holds its children's, an annotation's GPU span holds its
    kernels."""
    busy = 0
    chosen = np.ones(len(trace.gpu_kind), np.bool_) if kinds is None else np.isin(trace.gpu_kind, kinds)
    lanes = trace.gpu_stream_keys()
    for lane in np.unique(lanes[chosen]):
        rows = chosen & (lanes == lane)  # GPU rows are in start order, so each lane's are too
        starts, ends = trace.gpu_start_ns[rows], np.maximum.accumulate(trace.gpu_end_ns[rows])
        # a block of overlapping intervals starts where an interval begins after all before it ended
        new_block = np.concatenate(([True], starts[1:] > ends[:-1]))
        block_ends = np.concatenate((ends[np.flatnonzero(new_block)[1:] - 1], ends[-1:]))
        busy += int((block_ends - starts[new_block]).sum())
    return busy


def busy_lines(trace: Trace) -> list[str]:
    """GPU busy time, each from what measures it: the per-op CUDA-event intervals (which also hold
    queueing and gaps between an op's kernels) apart from the kernels, memcpys and memsets."""
    lines = []
    if (trace.gpu_kind == KIND_OP).any():
        lines.append("GPU busy (op events): "
                     f"{format_us(gpu_busy_ns(trace, [KIND_OP]) / 1e3)} (per stream, summed)")
    if np.isin(trace.gpu_kind, KERNEL_WORK).any():
        lines.append("GPU busy (kernels): "
                     f"{format_us(gpu_busy_ns(trace, KERNEL_WORK) / 1e3)} (per stream, summed)")
    return lines


def format_us(us: float) -> str:
    """A duration in the unit that reads best: 12.345us, 1.234ms, 2.345s."""
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def printable(name: str) -> str:
    """A name safe to print in one table cell: control characters shown as escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def text_table(headers: list[str], rows: list[list[str]], name_width: int = 55) -> list[str]:
    """The lines of a text table between rules: the first column (a name) made printable, cut to
    ``name_width`` terminal columns and aligned left, the other cells aligned right. Widths count
    the columns a terminal shows (a CJK character takes two), so the columns stay straight. The
    summary table and the ``--repeat`` table share it."""
    lines = [[name_cell(row[0], name_width), *row[1:]] for row in rows]
    widths = [max([display_width(headers[i])] + [display_width(line[i]) for line in lines])
              for i in range(len(headers))]
    rule = "  ".join("-" * width for width in widths)

    def fmt(cells):
        padded = []
        for i, (cell, width) in enumerate(zip(cells, widths)):
            pad = " " * (width - display_width(cell))
            padded.append(cell + pad if i == 0 else pad + cell)
        return "  ".join(padded)

    return [rule, fmt(headers), rule, *map(fmt, lines), rule]


def _char_width(char: str) -> int:
    """Terminal columns of one character: 2 for wide and full-width (CJK), 0 for combining marks."""
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in "WF" else 1


def display_width(text: str) -> int:
    """The columns ``text`` takes in a terminal (``len`` for ASCII)."""
    return len(text) if text.isascii() else sum(map(_char_width, text))


def name_cell(name: str, width: int) -> str:
    """A name fit for one cell of a text table: printable, and cut to ``width`` terminal columns."""
    name = printable(name)
    if display_width(name) <= width:
        return name
    kept, used = [], 0
    for char in name:
        used += _char_width(char)
        if used > width - 3:
            break
        kept.append(char)
    return "".join(kept) + "..."


def limit_rows(rows: list, row_limit: int | None) -> list:
    """The first ``row_limit`` rows; all of them for None or a negative limit."""
    return rows if row_limit is None or row_limit < 0 else rows[:row_limit]


def table(trace: Trace, sort_by: str = "cpu_time_total", row_limit: int = 20,
          name_width: int = 55) -> str:
    """The summary as a text table, like torch's ``key_averages().table()``; with CUDA events and
    kernels both, their GPU times side by side and a flag where they disagree (> 10%)."""
    rows = key_averages(trace, sort_by)
    shown = limit_rows(rows, row_limit)
    finished = finished_mask(trace)
    if finished is None:
        total_cpu = float((trace.end_ns - trace.start_ns)[trace.depth == 0].sum()) / 1e3
    else:  # the self times left when the unfinished are out: the rows' shares add up to 100%
        total_cpu = float(trace.self_ns[finished].sum()) / 1e3
    both = has_events_and_kernels(trace)
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total", "CPU time avg", "CUDA total",
               "CUDA time avg", "# of Calls"]
    if both:
        from .gpu_agreement import ratio_cell

        headers[5:7] = ["GPU (events)", "GPU (kernels)", "Events/kernels"]
    if not trace.has_gpu:  # CPU only: no column of zeros
        del headers[5:7]
    cells = []
    for row in shown:
        gpu = [format_us(row.cuda_time_total), format_us(row.cuda_time_avg)]
        if not trace.has_gpu:
            gpu = []
        elif both:
            gpu = [format_us(row.gpu_events_total), format_us(row.gpu_kernels_total),
                   "-" if row.events_per_kernels is None else ratio_cell(row.events_per_kernels)]
        cells.append([row.name,
                      f"{100.0 * row.self_cpu_time_total / total_cpu if total_cpu else 0.0:.2f}%",
                      format_us(row.self_cpu_time_total), format_us(row.cpu_time_total),
                      format_us(row.cpu_time_avg), *gpu, str(row.count)])
    if len(trace.memory):
        from .memory import allocated_per_name, format_bytes

        headers[-1:-1] = ["Self allocated", "Total allocated"]
        own, total = allocated_per_name(trace)
        name_id = {name: index for index, name in enumerate(trace.names)}
        for row, cell in zip(shown, cells):
            at = name_id[row.name]
            cell[-1:-1] = [format_bytes(own[at]), format_bytes(total[at])]
    out = [*text_table(headers, cells, name_width), f"Self CPU time total: {format_us(total_cpu)}"]
    out += busy_lines(trace)
    if both:
        from .gpu_agreement import FLAG_NOTE

        out.append(FLAG_NOTE)
    if finished is not None:
        out.append(f"{len(trace) - int(finished.sum())} unfinished slices (no end in the file) "
                   f"are left out of these times")
    if len(rows) > len(shown):
        out.append(f"({len(rows) - len(shown)} more rows; pass row_limit=-1 for all)")
    return "\n".join(out)
