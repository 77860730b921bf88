"""The summary table's columns and rows, shared by the live sortable table (js/summary_table.js)
and the static copy saved into the notebook (static.py). Plain values; no widgets here."""

from __future__ import annotations

import numpy as np

from ..timeline.html_text import html_text

from ..analysis.averages import (SORT_KEYS, format_us, has_events_and_kernels, key_averages, printable,
                        sort_rows)
from ..model import Trace
from ..analysis.gpu_agreement import ratio_cell

# (key, header, what the header's tooltip says); CUDA columns only for traces with GPU work.
_COLUMNS = (
    ("name", "Name", "op name"),
    ("cpu_time_total", "CPU total", "CPU time of all calls, ops nested in them included"),
    ("self_cpu_time_total", "Self CPU", "CPU time of all calls, ops nested in them excluded"),
    ("cpu_time_avg", "CPU avg", "CPU total / calls"),
    ("cuda_time_total", "CUDA total", "GPU time of the intervals these calls launched"),
    ("cuda_time_avg", "CUDA avg", "CUDA total / calls"),
    ("count", "Calls", "number of calls"),
)
# With CUDA events and CUPTI's kernels both (the GPU-truth cross-check), in place of the CUDA ones.
_EVENTS_AND_KERNELS = (
    ("gpu_events_total", "GPU (events)", "GPU time of these calls' CUDA-event intervals"),
    ("gpu_kernels_total", "GPU (kernels)",
     "the kernels, memcpys and memsets these calls (and the ops in them) ran, as a union"),
    ("events_per_kernels", "Events/kernels",
     "GPU (events) / GPU (kernels); ! where they are more than 10% apart"),
)
NAME_CHARS = 60  # a longer name is cut in the cell; the full one shows on hover


def summary_columns(trace: Trace) -> list[dict]:
    columns = [(key, title, tip) for key, title, tip in _COLUMNS
               if trace.has_gpu or not key.startswith("cuda")]
    if has_events_and_kernels(trace):
        at = [key for key, _, _ in columns].index("cuda_time_total")
        columns[at:at + 2] = _EVENTS_AND_KERNELS
    return [{"key": key, "title": title, "tip": tip} for key, title, tip in columns]


def cell(average, key: str) -> tuple[float, str]:
    """One summary cell: the number it sorts by and the text it shows."""
    if key == "events_per_kernels":
        ratio = average.events_per_kernels
        return (0.0, "-") if ratio is None else (ratio, ratio_cell(ratio).strip())
    value = getattr(average, key)
    return value, str(value) if key == "count" else format_us(value)


def op_averages(trace: Trace) -> list:
    """key_averages without ``--with-stack``'s Python frames: they are the ops' stacks (the
    details pane shows them), and as rows they bury the ops under the kernel's own threads."""
    if "python_function" not in trace.categories:
        return key_averages(trace)
    python = trace.categories.index("python_function")
    frames = {trace.names[i] for i in np.unique(trace.name_id[trace.category == python]).tolist()}
    return [average for average in key_averages(trace) if average.name not in frames]


def summary_rows(trace: Trace) -> list[dict]:
    """One dict per op name: the raw number of every column (for sorting) and its text."""
    rows = []
    for average in op_averages(trace):
        row = {"name": average.name, "label": printable(average.name)}
        # every key --sort accepts, shown as a column or not, and the cross-check's columns
        for key in (*SORT_KEYS[:-1], *(key for key, _, _ in _EVENTS_AND_KERNELS)):
            row[key], row[f"{key}_text"] = cell(average, key)
        rows.append(row)
    return rows


def summary_html(trace: Trace, sort_by: str = "cpu_time_total", row_limit: int = 50) -> str:
    """The summary as a plain HTML table (no script): what the saved notebook shows everywhere."""
    columns = summary_columns(trace)
    if sort_by not in {column["key"] for column in columns}:
        sort_by = "cpu_time_total"
    averages = sort_rows(op_averages(trace), sort_by)
    head = "".join(f"<th title='{html_text(column['tip'])}' style='text-align:{_align(column)};"
                   f"padding:2px 8px'>{html_text(column['title'])}</th>" for column in columns)
    body = []
    for average in averages[:row_limit]:
        name = printable(average.name)
        short = name if len(name) <= NAME_CHARS else name[:NAME_CHARS - 1] + "…"
        cells = [f"<td title='{html_text(name)}' style='text-align:left;padding:1px 8px'>"
                 f"<code>{html_text(short)}</code></td>"]
        for column in columns[1:]:
            _, text = cell(average, column["key"])
            cells.append(f"<td style='text-align:right;padding:1px 8px'>{text}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    more = (f"<p><i>{len(averages) - row_limit} more ops: re-run the cell for all of them.</i></p>"
            if len(averages) > row_limit else "")
    return (f"<table class='nbprof-static-summary' style='border-collapse:collapse;font-size:12px'>"
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}")


def _align(column: dict) -> str:
    return "left" if column["key"] == "name" else "right"
