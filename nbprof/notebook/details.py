"""The widget's details pane contents: what the trace knows about one event, as HTML, and the
events it links to (parent, children, launched GPU work) as plain values. No widgets here
(details_pane.py makes the links clickable)."""

from __future__ import annotations

import json
from typing import NamedTuple

import numpy as np

from ..analysis.averages import has_events_and_kernels, printable
from ..model import Trace
from ..analysis.gpu_agreement import op_agreement
from ..timeline.html_text import html_text
from ..timeline.lanes import is_runtime_category
from .frames import folded_stack

PYTHON = "python_function"  # the category of with_stack's Python-frame events (convert.py)
CHILDREN_SHOWN = 12  # links per row; the rest are counted
HINT = "<i>Click an event on the timeline (or use search / the summary) to see its details.</i>"


def timeline_origin_ns(trace: Trace) -> int:
    """Where the timeline's x axis starts: the first event, CPU or GPU (timeline/data.py's origin).
    Details give times on that axis, so they match what the user reads under the bars."""
    starts = [int(column.min()) for column in (trace.start_ns, trace.gpu_start_ns) if len(column)]
    return min(starts) if starts else 0


def format_offset(offset_ns: int, scale_ns: int | None = None) -> str:
    """A time since the trace's start, to the µs: "12.345 ms", "43.292118 s". ``scale_ns`` picks
    the unit (so both ends of an interval share one)."""
    if abs(scale_ns if scale_ns is not None else offset_ns) >= 1_000_000_000:
        return f"{offset_ns / 1e9:.6f} s"
    return f"{offset_ns / 1e6:.3f} ms"


def format_duration(duration_ns: int) -> str:
    """A duration that reads at a glance: "850 ns", "43.8 µs", "12.346 ms", "2.345 s"."""
    if duration_ns < 1_000:
        return f"{duration_ns} ns"
    if duration_ns < 1_000_000:
        return f"{duration_ns / 1e3:.1f} µs"
    if duration_ns < 1_000_000_000:
        return f"{duration_ns / 1e6:.3f} ms"
    return f"{duration_ns / 1e9:.3f} s"


def interval_text(start_ns: int, end_ns: int, origin_ns: int) -> str:
    """"12.345 ms → 12.389 ms, 43.8 µs": both ends since the trace's start, then how long."""
    start, end = int(start_ns) - origin_ns, int(end_ns) - origin_ns
    return (f"{format_offset(start, end)} → {format_offset(end, end)}, "
            f"{format_duration(int(end_ns) - int(start_ns))}")


class Link(NamedTuple):
    text: str  # what the link says (plain text: the pane escapes it)
    kind: str  # "cpu" (an event id) or "gpu" (a row of the GPU columns)
    row: int


class LinkRow(NamedTuple):
    label: str  # "Parent", "Children (30)", "Launched (2)"
    links: list[Link]
    more: int  # how many more there are than links


def _correlation(args):
    """The runtime call's and its GPU work's shared id (Kineto's ``correlation``), if usable."""
    value = args.get("correlation") if isinstance(args, dict) else None
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


def launched_gpu_rows(trace: Trace, event_id: int) -> list[int]:
    """The GPU intervals an event launched. A runtime call (cudaLaunchKernel) launched those of
    its correlation id, though the trace gives them to the op around it (``gpu_launch``, as
    torch's key_averages counts them); the timeline's arrows start at the call, and so do these."""
    own = trace._launched_by(event_id).tolist()
    if own or not is_runtime_category(trace.categories[trace.category[event_id]]):
        return own
    correlation = _correlation(trace.event_args.get(event_id))
    if correlation is None:
        return []
    op = int(trace.parent[event_id])  # the op the launch was moved up to (kineto.finish)
    while op >= 0 and is_runtime_category(trace.categories[trace.category[op]]):
        op = int(trace.parent[op])
    return [row for row in (trace._launched_by(op).tolist() if op >= 0 else [])
            if _correlation(trace.gpu_args.get(row)) == correlation]


def runtime_call_of(trace: Trace, row: int) -> int | None:
    """The runtime call inside a GPU interval's launching op that made it (same correlation id),
    None where the op is that call or the trace does not say."""
    op, correlation = int(trace.gpu_launch[row]), _correlation(trace.gpu_args.get(row))
    if op < 0 or correlation is None:
        return None
    # the op's subtree: its thread's runtime calls starting inside it (CPU rows are sorted by
    # start), numpy-filtered, as an annotation around a loop holds millions of events
    lo = np.searchsorted(trace.start_ns, trace.start_ns[op], side="left")
    hi = np.searchsorted(trace.start_ns, trace.end_ns[op], side="right")
    rows = np.arange(lo, hi)
    runtime = np.array([is_runtime_category(name) for name in trace.categories] or [False])
    rows = rows[(trace.thread[rows] == trace.thread[op]) & runtime[trace.category[rows]] & (rows != op)]
    # the launch comes just before its work starts: the last calls before it first
    before = np.searchsorted(trace.start_ns[rows], trace.gpu_start_ns[row], side="right")
    for event in np.concatenate([rows[:before][::-1], rows[before:]]).tolist():
        if _correlation(trace.event_args.get(event)) == correlation:
            return event
    return None


def event_links(trace: Trace, event_id: int) -> list[LinkRow]:
    """The events one CPU event leads to: its parent chain (innermost first), its children, and
    the GPU intervals it launched. With ``--with-stack`` the Python frames around an op are events
    too; they are its stack (shown folded), not parents to click through."""
    python = trace.categories.index(PYTHON) if PYTHON in trace.categories else -1
    chain, parent = [], int(trace.parent[event_id])
    while parent >= 0:
        if trace.category[parent] != python:
            chain.append(Link(trace.names[trace.name_id[parent]], "cpu", parent))
        parent = int(trace.parent[parent])
    children = trace.children(event_id)
    launched = launched_gpu_rows(trace, event_id)
    rows = [LinkRow("Parents", chain, 0),
            LinkRow(f"Children ({len(children)})" if children else "Children",
                    [Link(trace.names[trace.name_id[c]], "cpu", c) for c in children[:CHILDREN_SHOWN]],
                    max(len(children) - CHILDREN_SHOWN, 0))]
    if launched:
        rows.append(LinkRow(f"Launched ({len(launched)})",
                            [Link(trace.names[trace.gpu_name_id[g]], "gpu", g)
                             for g in launched[:CHILDREN_SHOWN]],
                            max(len(launched) - CHILDREN_SHOWN, 0)))
    return rows


def gpu_links(trace: Trace, row: int) -> list[LinkRow]:
    launch = int(trace.gpu_launch[row])
    if launch < 0:
        return []
    rows = [LinkRow("Launched by", [Link(trace.names[trace.name_id[launch]], "cpu", launch)], 0)]
    call = runtime_call_of(trace, row)
    if call is not None:  # where the timeline's arrow starts
        rows.append(LinkRow("Runtime call", [Link(trace.names[trace.name_id[call]], "cpu", call)], 0))
    return rows


def _table(rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th style='text-align:left;vertical-align:top;padding-right:8px'>{key}</th>"
                   f"<td style='text-align:left'>{value}</td></tr>" for key, value in rows)
    return f"<table class='nbprof-details-table'>{body}</table>"


def _links_as_text(rows: list[LinkRow]) -> list[tuple[str, str]]:
    """Link rows as plain table rows (for the HTML-only view)."""
    out = []
    for row in rows:
        if not row.links:
            out.append((row.label, "<i>top level</i>" if row.label == "Parents" else "<i>none</i>"))
            continue
        separator = " &larr; " if row.label == "Parents" else ", "
        text = separator.join(html_text(link.text) for link in row.links)
        out.append((html_text(row.label), text + (f" and {row.more} more" if row.more else "")))
    return out


def details_html(trace: Trace, event_id: int | None, cell_numbers: dict | None = None, *,
                 links: bool = True) -> str:
    """Name, thread, CPU interval, GPU intervals with stream, shapes, the user's stack and (unless
    ``links=False``: the pane shows them as links) parents and children. ``cell_numbers``: IPython's
    compiled-cell file name -> cell number, to name notebook cells in the stack."""
    if event_id is None:
        return HINT
    event = trace.event(event_id)
    origin = timeline_origin_ns(trace)
    rows = [("Name", f"<code>{html_text(event.name)}</code>"),
            ("Thread", html_text(f"{event.thread.name or 'thread'} (pid {event.thread.pid}, "
                                 f"tid {event.thread.tid})")),
            ("CPU", html_text(interval_text(*event.cpu_interval, origin)
                              + f"; self {format_duration(event.self_cpu_ns)}"))]
    kernels = event.kernels or [trace.kernel(row) for row in launched_gpu_rows(trace, event_id)]
    if kernels:
        rows.append(("GPU", "<br>".join(_kernel_line(kernel, origin) for kernel in kernels)))
    else:
        rows.append(("GPU", "<i>no GPU interval</i>"))
    if has_events_and_kernels(trace) and (both := op_agreement(trace, event_id)) is not None:
        # the cross-check (trace.gpu_agreement()): the op's CUDA events against its kernels
        rows.append(("GPU time", html_text(
            f"events {format_duration(both.events_ns)} · kernels {format_duration(both.kernels_ns)}"
            f" · ratio {both.ratio:.2f}" + (": more than 10% apart (the events also hold "
                                            "queueing or launch gaps)" if both.disagree else ""))))
    if event.shapes is not None:
        rows.append(("Shapes", f"<code>{html_text(str(event.shapes))}</code>"))
    if event.args:
        rows.append(("Args", args_html(event.args)))
    if event.stack:
        # a folded line lists its frames on hover
        rows.append(("Stack", "<br>".join(
            f"<code{_title(chr(10).join(hidden))}>{html_text(line)}</code>"
            for line, hidden in folded_stack(event.stack, cell_numbers))))
    if links:
        rows += _links_as_text(event_links(trace, event_id))
    return _table(rows)


ARG_CHARS = 400  # a longer value is cut; its whole text is on hover


def args_html(args) -> str:
    """An event's args as a key/value table, as Perfetto lists them: every arg a file or a
    recorder gave (Kineto's Input Dims, External id, a numba launch's grid and block...). Keys
    and values are the file's text: escaped, never markup."""
    if not isinstance(args, dict):
        return f"<code>{html_text(_arg_text(args))}</code>"
    rows = []
    for key, value in args.items():
        text = _arg_text(value)
        shown = text if len(text) <= ARG_CHARS else text[:ARG_CHARS] + "…"
        rows.append(f"<tr><td style='text-align:left;vertical-align:top;padding-right:8px'>"
                    f"{html_text(key)}</td><td style='text-align:left'><code"
                    f"{_title(text if shown != text else '')}>{html_text(shown)}</code></td></tr>")
    return f"<table class='nbprof-args'>{''.join(rows)}</table>"


def _arg_text(value) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # a circular or otherwise unprintable value
        return repr(value)


def _title(text: str) -> str:
    return f" title='{html_text(text)}'" if text else ""


def _kernel_line(kernel, origin: int) -> str:
    return (f"{html_text(kernel.kind)} <code>{html_text(kernel.name)}</code> on "
            f"cuda:{html_text(kernel.device)} stream {html_text(kernel.stream)}: "
            + html_text(interval_text(*kernel.interval, origin)))


def gpu_details_html(trace: Trace, row: int, cell_numbers: dict | None = None, *,
                     links: bool = True) -> str:
    """A GPU interval: kind, name, device and stream, interval, what the source knows, and the
    details of the op that launched it."""
    kernel = trace.kernel(row)
    lines = [_kernel_line(kernel, timeline_origin_ns(trace))]
    if kernel.args:
        lines.append(args_html(kernel.args))
    call = runtime_call_of(trace, row)
    if call is not None:
        lines.append(f"Runtime call: <code>{html_text(trace.names[trace.name_id[call]])}</code> "
                     + html_text(interval_text(trace.start_ns[call], trace.end_ns[call],
                                               timeline_origin_ns(trace))))
    if kernel.launch_id is None:
        lines.append("<i>the trace does not say which op launched it</i>")
        return "<br>".join(lines)
    return ("<br>".join(lines) + "<br><b>Launched by:</b>"
            + details_html(trace, kernel.launch_id, cell_numbers, links=links))


NUMBER = "text-align:right;white-space:nowrap;padding:0 0 0 12px"  # a number never wraps


def range_summary_html(trace: Trace, summary) -> str:
    """An area selection's summary (range_summary.py): the range, then per name the count and the
    time inside it, CPU and GPU apart."""
    origin = timeline_origin_ns(trace)
    head = (f"<b>Selected range</b> {html_text(interval_text(summary.start_ns, summary.end_ns, origin))}"
            f": {summary.cpu.events:,} CPU events"
            + (f", {summary.gpu.events:,} GPU intervals" if trace.has_gpu else ""))
    parts = [f"<div class='nbprof-range-head'>{head}</div>"]
    for side, title, noun in ((summary.cpu, "CPU", "events"), (summary.gpu, "GPU", "intervals")):
        if not side.events:
            if side is summary.cpu or trace.has_gpu:
                parts.append(f"<div><i>no {title} {noun} in this range</i></div>")
            continue
        rows = "".join(
            f"<tr><td title='{html_text(printable(row.name))}' style='text-align:left;max-width:420px;"
            f"overflow:hidden;text-overflow:ellipsis;white-space:nowrap'><code>"
            f"{html_text(printable(row.name))}</code></td><td style='{NUMBER}'>{row.count:,}</td>"
            f"<td style='{NUMBER}'>{html_text(format_duration(row.inside_ns))}</td></tr>"
            for row in side.rows)
        more = (f"<div><i>and {side.names - len(side.rows):,} more names</i></div>"
                if side.names > len(side.rows) else "")
        parts.append(
            f"<table class='nbprof-range-{title.lower()}' style='border-collapse:collapse'>"
            f"<thead><tr><th style='text-align:left'>{title}: {side.names:,} names</th>"
            f"<th style='{NUMBER}'>Count</th>"
            f"<th style='{NUMBER}'>Time inside</th></tr></thead><tbody>{rows}</tbody></table>{more}")
    if len(trace.memory):
        parts.append(_memory_in_range_html(trace, summary.start_ns, summary.end_ns))
    return "".join(parts)


def _memory_in_range_html(trace: Trace, start_ns: int, end_ns: int) -> str:
    """Bytes allocated, freed and net per op name inside the area (memory.py)."""
    from ..analysis.memory import format_bytes, memory_in_range

    found = memory_in_range(trace, start_ns, end_ns)
    if not found:
        return "<div><i>no memory events in this range</i></div>"
    rows = "".join(
        f"<tr><td style='text-align:left'><code>{html_text(printable(row['op']))}</code></td>"
        + "".join(f"<td style='{NUMBER}'>{html_text(format_bytes(row[key]))}</td>"
                  for key in ("allocated_bytes", "freed_bytes", "net_bytes")) + "</tr>"
        for row in found)
    return (f"<table class='nbprof-range-memory' style='border-collapse:collapse'><thead><tr>"
            f"<th style='text-align:left'>Memory: op</th><th style='{NUMBER}'>Allocated</th>"
            f"<th style='{NUMBER}'>Freed</th><th style='{NUMBER}'>Net</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>")
