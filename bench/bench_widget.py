"""The notebook widget, side by side in one run:

1. Speed: a cell that records ~100k events (20k ``x = x + 1`` on 16 floats: Kineto records 5
   events per add). nbprof: from the end of the cell's code to the widget's data being ready
   (profiler stop and conversion, ``nbprof.widget``: timeline, BokehModel, summary, and the display
   bundle with its text fallback). torch.profiler: the same loop, then ``prof.events()`` plus
   ``prof.key_averages().table()`` (the issue's baseline); a second ratio also counts torch's stop.
   Imports are warmed first on both sides (they are paid once per kernel).
2. Size: a notebook holding the widget of ~1M events against one holding a naive ``BokehModel`` of
   the same events (one quad per event in one ColumnDataSource, names as strings, hover), each
   written as JupyterLab saves it: the output bundle plus the widget state in the metadata. Two
   traces: ../shared/traces/gpu_training_step_68k tiled (as bench_timeline.py does; its copies
   repeat, which flatters compression) and a recorded 1M-event cell (timings that do not repeat).
   The notebooks also hold the BokehJS load each side publishes (nbprof: the two bundles it needs;
   naive: ``output_notebook(INLINE)``, as the 57 MB notebook in ENVIRONMENT.md); the ratio of the
   widgets alone is printed too.
3. Search message: what one keystroke of a broad search ("aten::", most of the tiled trace's
   events) sends to the browser, the highlighted ids as a JSON list against an int32 buffer.

    .venv/bin/python bench/bench_widget.py [--ops 20000] [--events 1000000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import gc
import json
import pathlib
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import torch  # noqa: E402

import nbprof  # noqa: E402
from nbprof.formats.chrome import load  # noqa: E402
from nbprof.notebook.search import find_events  # noqa: E402

SOURCE = ROOT.parent / "shared" / "traces" / "gpu_training_step_68k.json.gz"


def add_loop(ops: int) -> None:
    x = torch.ones(16)
    for _ in range(ops):
        x = x + 1


def nbprof_seconds(ops: int) -> tuple[float, int]:
    """Cell end -> widget data ready, with nbprof."""
    session = nbprof.profile()
    session.__enter__()
    add_loop(ops)
    cell_end = time.perf_counter()
    session.__exit__(None, None, None)
    widget = nbprof.widget(session.trace, name="bench")
    widget._repr_mimebundle_()  # what display() sends: widget view + text/html fallback
    seconds = time.perf_counter() - cell_end
    return seconds, len(session.trace)


def torch_seconds(ops: int) -> tuple[float, float, int]:
    """(events() + key_averages().table(), the same plus the profiler's stop) with torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU])
    prof.__enter__()
    add_loop(ops)
    cell_end = time.perf_counter()
    prof.__exit__(None, None, None)
    stopped = time.perf_counter()
    events = prof.events()
    prof.key_averages().table(sort_by="cpu_time_total", row_limit=20)
    done = time.perf_counter()
    return done - stopped, done - cell_end, len(events)


def bench_speed(ops: int, rounds: int) -> float:
    add_loop(1000)  # warm torch's dispatcher before either side is timed
    import jupyter_bokeh  # noqa: F401  (bokeh's and the widgets' one-off imports, once per kernel)
    from nbprof.notebook.widget import TraceWidget  # noqa: F401
    nbprof_best, torch_best, torch_stop_best = float("inf"), float("inf"), float("inf")
    for _ in range(rounds):  # alternate, so drift on this shared machine hits both sides
        gc.collect()
        seconds, events = nbprof_seconds(ops)
        nbprof_best = min(nbprof_best, seconds)
        gc.collect()
        summary, with_stop, torch_events = torch_seconds(ops)
        torch_best, torch_stop_best = min(torch_best, summary), min(torch_stop_best, with_stop)
    print(f"speed: a cell of {ops:,} adds ({events:,} nbprof events, {torch_events:,} torch events), "
          f"best of {rounds}")
    print(f"  nbprof  cell end -> widget data ready            {nbprof_best:8.3f} s")
    print(f"  torch   prof.events() + key_averages().table()    {torch_best:8.3f} s")
    print(f"  torch   the same plus the profiler's stop         {torch_stop_best:8.3f} s")
    ratio = nbprof_best / torch_best
    print(f"  ratio nbprof / torch (events + table)  {ratio:.3f}x   (target <= 0.25x)")
    print(f"  ratio nbprof / torch (stop + events + table)  {nbprof_best / torch_stop_best:.3f}x")
    return ratio


def naive_widget(trace):
    """The naive BokehModel: one quad per event in one source, names as strings, one row per
    (thread, depth) and per GPU stream."""
    from bokeh.models import ColumnDataSource, HoverTool
    from bokeh.plotting import figure
    from jupyter_bokeh import BokehModel

    cpu_row = trace.thread.astype(np.int64) * (int(trace.depth.max()) + 1) + trace.depth
    gpu_key = trace.gpu_device.astype(np.int64) * 100_000 + trace.gpu_stream
    _, gpu_row = np.unique(gpu_key, return_inverse=True)
    rows = np.concatenate([np.unique(cpu_row, return_inverse=True)[1],
                           gpu_row + len(np.unique(cpu_row))])
    starts = np.concatenate([trace.start_ns, trace.gpu_start_ns])
    ends = np.concatenate([trace.end_ns, trace.gpu_end_ns])
    origin = starts.min()
    names = np.array(trace.names, dtype=object)[np.concatenate([trace.name_id, trace.gpu_name_id])]
    source = ColumnDataSource({"left": (starts - origin) / 1e3, "right": (ends - origin) / 1e3,
                               "bottom": rows + 0.1, "top": rows + 0.9, "name": names.tolist(),
                               "dur": (ends - starts) / 1e3})
    plot = figure(tools="xpan,xwheel_zoom,reset,tap", sizing_mode="stretch_width", height=600)
    bars = plot.quad(source=source, left="left", right="right", bottom="bottom", top="top")
    plot.add_tools(HoverTool(renderers=[bars], tooltips=[("name", "@name"), ("dur", "@dur us")]))
    return BokehModel(plot)


def bokehjs_load_outputs(load) -> list:
    """The display outputs a BokehJS loader publishes (they are saved in the notebook too)."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    from nbformat.v4 import new_output

    InteractiveShell.instance()
    with capture_output() as captured:
        load()
    return [new_output("display_data", data=output.data) for output in captured.outputs]


def nbprof_bokehjs() -> None:
    """The BokehJS the notebook's first static copy carries (nbprof/notebook/static.py)."""
    from IPython.display import publish_display_data

    from nbprof.notebook.bokeh_host import bokehjs_source

    publish_display_data({"text/html": f"<script type='text/javascript'>{bokehjs_source()}</script>"})


def naive_bokehjs() -> None:
    from bokeh.io import output_notebook
    from bokeh.resources import INLINE

    output_notebook(INLINE, hide_banner=True)  # what ENVIRONMENT.md's naive 57 MB notebook did


def notebook_bytes(widget, folder: pathlib.Path, tag: str, load_outputs=()) -> int:
    """Bytes of a notebook holding ``widget``'s output and its widget state, as Lab saves it."""
    import nbformat
    from ipywidgets.embed import dependency_state
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    bundle = widget._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    cell = new_code_cell("%%cudaprof\n...",
                         outputs=[*load_outputs, new_output("display_data", data=data)])
    book = new_notebook(cells=[cell])
    book.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": dependency_state(widget), "version_major": 2, "version_minor": 0}}
    path = folder / f"{tag}.ipynb"
    nbformat.write(book, path)
    return path.stat().st_size


def tiled_trace(events: int):
    from bench_timeline import tile

    base = load(SOURCE)
    copies = max(1, round(events / (len(base) + len(base.gpu_start_ns))))
    return tile(base, copies)


def recorded_trace(events: int):
    """A real recording of ~``events`` events (adds; real timing noise, unlike tiled copies, which
    compress unrealistically well)."""
    with nbprof.profile() as prof:
        add_loop(events // 5)
    return prof.trace


def bench_size(trace, label: str) -> float:
    total = len(trace) + len(trace.gpu_start_ns)
    with tempfile.TemporaryDirectory() as folder:
        folder = pathlib.Path(folder)
        started = time.perf_counter()
        ours_widget = nbprof.widget(trace, name="bench")
        ours = notebook_bytes(ours_widget, folder, "nbprof")
        ours_seconds = time.perf_counter() - started
        ours_loaded = notebook_bytes(ours_widget, folder, "nbprof_load", bokehjs_load_outputs(nbprof_bokehjs))
        started = time.perf_counter()
        naive_model = naive_widget(trace)
        naive = notebook_bytes(naive_model, folder, "naive")
        naive_seconds = time.perf_counter() - started
        naive_loaded = notebook_bytes(naive_model, folder, "naive_load", bokehjs_load_outputs(naive_bokehjs))
    ratio = ours_loaded / naive_loaded
    print(f"size: a notebook holding the widget of {total:,} events "
          f"({len(trace):,} CPU + {len(trace.gpu_start_ns):,} GPU), {label}")
    print(f"  nbprof   widget only {ours / 1e6:7.2f} MB, with its BokehJS load {ours_loaded / 1e6:7.2f} MB"
          f"   (built and saved in {ours_seconds:.1f} s)")
    print(f"  naive    widget only {naive / 1e6:7.2f} MB, with its BokehJS load {naive_loaded / 1e6:7.2f} MB"
          f"   (built and saved in {naive_seconds:.1f} s)")
    print(f"  ratio nbprof / naive  {ratio:.3f}x with the BokehJS loads, {ours / naive:.3f}x widgets only"
          f"   (target <= 0.2x)")
    return ratio


def patch_message(widget, data: dict) -> tuple[int, float]:
    """(bytes, seconds) of what jupyter_bokeh sends when the highlight source takes ``data``: the
    PATCH-DOC message's JSON parts plus its binary buffers (widgets.py, ``_document_patched``)."""
    from bokeh.protocol import Protocol

    events = []
    document = widget.timeline.layout.document
    document.on_change(events.append)
    try:
        widget.timeline.highlighted.data = data
    finally:
        document.remove_on_change(events.append)
    started = time.perf_counter()
    message = Protocol().create("PATCH-DOC", events)
    size = (len(message.header_json) + len(message.metadata_json) + len(message.content_json)
            + sum(len(buffer.to_bytes()) for buffer in message.buffers))
    return size, time.perf_counter() - started


def bench_search_message(trace, pattern: str = "aten::") -> float:
    """One search keystroke's message to the browser: the highlighted ids as a Python list (what
    Timeline.highlight sent before) against the int32 array it sends now (a binary buffer)."""
    widget = nbprof.widget(trace, name="bench")
    ids = find_events(trace, pattern).event_ids
    as_list, list_seconds = patch_message(widget, {"event_id": ids.tolist()})
    as_array, array_seconds = patch_message(widget, {"event_id": ids.astype(np.int32)})
    print(f"search message: {pattern!r} matches {len(ids):,} of {len(trace):,} CPU events")
    print(f"  ids as a list (before)   {as_list / 1e6:7.2f} MB, built in {list_seconds * 1e3:6.1f} ms")
    print(f"  ids as int32 (now)       {as_array / 1e6:7.2f} MB, built in {array_seconds * 1e3:6.1f} ms")
    print(f"  ratio now / before  {as_array / as_list:.3f}x bytes, {array_seconds / list_seconds:.3f}x time")
    return as_array / as_list


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=20_000, help="adds in the cell (x5 events)")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    results = {"speed_ratio": bench_speed(args.ops, args.rounds)}
    tiled = tiled_trace(args.events)
    results["search_message_ratio"] = bench_search_message(tiled)
    results["size_ratio_tiled"] = bench_size(tiled, "the 68k training-step trace tiled")
    del tiled
    gc.collect()
    results["size_ratio_recorded"] = bench_size(recorded_trace(args.events),
                                                "a recorded cell of adds (real timing noise)")
    print(json.dumps({key: round(value, 4) for key, value in results.items()}))


if __name__ == "__main__":
    main()
