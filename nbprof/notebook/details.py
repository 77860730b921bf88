"""The widget's details pane: what the trace knows about one event, as HTML (no widgets here)."""

from __future__ import annotations

from ..html_text import html_text

from ..analysis import format_us
from ..events import Trace

CHILDREN_SHOWN = 12


def timeline_origin_ns(trace: Trace) -> int:
    """Where the timeline's x axis starts: the first event, CPU or GPU (timeline/data.py's origin).
    Details give times on that axis, so they match what the user reads under the bars."""
    starts = [int(column.min()) for column in (trace.start_ns, trace.gpu_start_ns) if len(column)]
    return min(starts) if starts else 0


def _interval(start_ns: int, end_ns: int, origin_ns: int) -> str:
    return (f"{format_us((start_ns - origin_ns) / 1e3)} &rarr; {format_us((end_ns - origin_ns) / 1e3)} "
            f"(<b>{format_us((end_ns - start_ns) / 1e3)}</b>)")


def details_html(trace: Trace, event_id: int | None) -> str:
    """Name, thread, CPU interval, GPU intervals with stream, shapes, stack, parent chain, children."""
    if event_id is None:
        return "<i>Click an event on the timeline (or use search / the summary) to see its details.</i>"
    event = trace.event(event_id)
    origin = timeline_origin_ns(trace)
    rows = [("Name", f"<code>{html_text(event.name)}</code>"),
            ("Thread", html_text(f"{event.thread.name or 'thread'} (pid {event.thread.pid}, "
                              f"tid {event.thread.tid})")),
            ("CPU", _interval(*event.cpu_interval, origin) + f", self {format_us(event.self_cpu_ns / 1e3)}")]
    if event.kernels:
        gpu = "<br>".join(
            f"{html_text(k.kind)} <code>{html_text(k.name)}</code> on cuda:{html_text(k.device)} "
            f"stream {html_text(k.stream)}: "
            + _interval(*k.interval, origin) for k in event.kernels)
        rows.append(("GPU", gpu))
    else:
        rows.append(("GPU", "<i>no GPU interval</i>"))
    if event.shapes is not None:
        rows.append(("Shapes", f"<code>{html_text(str(event.shapes))}</code>"))
    if event.stack:
        rows.append(("Stack", "<br>".join(f"<code>{html_text(frame)}</code>" for frame in event.stack)))
    chain = []
    parent = event.parent
    while parent is not None:
        chain.append(html_text(trace.names[trace.name_id[parent]]))
        parent = int(trace.parent[parent])
        parent = None if parent < 0 else parent
    rows.append(("Parents", " &larr; ".join(chain) if chain else "<i>top level</i>"))
    children = trace.children(event_id)
    if children:
        names = ", ".join(html_text(trace.names[trace.name_id[c]]) for c in children[:CHILDREN_SHOWN])
        more = f" and {len(children) - CHILDREN_SHOWN} more" if len(children) > CHILDREN_SHOWN else ""
        rows.append((f"Children ({len(children)})", names + more))
    else:
        rows.append(("Children", "<i>none</i>"))
    body = "".join(f"<tr><th style='text-align:left;vertical-align:top;padding-right:8px'>{key}</th>"
                   f"<td style='text-align:left'>{value}</td></tr>" for key, value in rows)
    return f"<table class='nbprof-details'>{body}</table>"


def gpu_details_html(trace: Trace, row: int) -> str:
    """A GPU interval: kind, name, device and stream, interval, what the source knows, and the
    details of the op that launched it."""
    kernel = trace.kernel(row)
    lines = [f"{html_text(kernel.kind)} <code>{html_text(kernel.name)}</code> on cuda:{html_text(kernel.device)} "
             f"stream {html_text(kernel.stream)}: {_interval(*kernel.interval, timeline_origin_ns(trace))}"]
    if kernel.args:
        lines.append(html_text(", ".join(f"{key}: {value}" for key, value in kernel.args.items())))
    if kernel.launch_id is None:
        lines.append("<i>the trace does not say which op launched it</i>")
        return "<br>".join(lines)
    return "<br>".join(lines) + "<br><b>Launched by:</b>" + details_html(trace, kernel.launch_id)
