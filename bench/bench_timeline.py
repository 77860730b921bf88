"""Timeline at a million events: nbprof's page against a naive Bokeh page, side by side.

The trace: ../shared/traces/gpu_training_step_68k.json.gz (39k CPU events + 6k GPU intervals)
tiled in time until it holds ~1M events. The naive page: one quad per event in one
ColumnDataSource, the same lanes (rows) and hover fields, BokehJS inline. Both pages open in
headless Chromium; we time the page until drawn, a wheel-zoom step and a pan step (range set,
then two animation frames: the repaint is in), the Python build and the page size, and count
the glyphs of the first view and the bytes of the notebook widget state (a
jupyter_bokeh.BokehModel). Then the same at ~100k events. Build and browser figures are medians
of 3 alternating runs of each page (after a warm-up build).
Prints ratios nbprof / naive (smaller is better).

    .venv/bin/python bench/bench_timeline.py [--events 1000000] [--small 100000]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nbprof  # noqa: E402
from nbprof.model import Trace  # noqa: E402
from nbprof.timeline import Timeline, save_html  # noqa: E402
from nbprof.timeline.lanes import build_lanes  # noqa: E402
from nbprof.timeline.view import PALETTES  # noqa: E402

REPEATS = 3  # page loads per page and size
SOURCE = ROOT.parent / "shared" / "traces" / "gpu_training_step_68k.json.gz"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def tile(trace: Trace, copies: int) -> Trace:
    """``copies`` back-to-back copies of ``trace``: still sorted, so the columns just concatenate."""
    shift = trace.duration_ns + 1_000_000
    n, k = len(trace), len(trace.gpu_start_ns)
    offsets = np.arange(copies, dtype=np.int64)

    def times(column):
        return (column[None, :] + (offsets * shift)[:, None]).ravel()

    def ids(column, size):  # id columns: shifted per copy, NO_ID stays
        tiled = (column[None, :].astype(np.int64) + (offsets * size)[:, None]).ravel()
        return np.where(np.tile(column, copies) < 0, -1, tiled)

    return Trace(
        start_ns=times(trace.start_ns), end_ns=times(trace.end_ns),
        thread=np.tile(trace.thread, copies), name_id=np.tile(trace.name_id, copies),
        category=np.tile(trace.category, copies), depth=np.tile(trace.depth, copies),
        parent=ids(trace.parent, n), self_ns=np.tile(trace.self_ns, copies),
        gpu_start_ns=times(trace.gpu_start_ns), gpu_end_ns=times(trace.gpu_end_ns),
        gpu_name_id=np.tile(trace.gpu_name_id, copies), gpu_device=np.tile(trace.gpu_device, copies),
        gpu_stream=np.tile(trace.gpu_stream, copies), gpu_launch=ids(trace.gpu_launch, n),
        gpu_kind=np.tile(trace.gpu_kind, copies), names=trace.names, threads=trace.threads,
        categories=trace.categories, meta=trace.meta,
        gpu_args={row + c * k: args for c in range(copies) for row, args in trace.gpu_args.items()})


def naive_page(trace: Trace, path: pathlib.Path) -> pathlib.Path:
    """One quad per event in one ColumnDataSource, the same rows and hover fields."""
    from bokeh.embed import file_html
    from bokeh.resources import INLINE

    path.write_text(file_html(naive_plot(trace), resources=INLINE, title="naive"), encoding="utf-8")
    return path


def naive_plot(trace: Trace):
    from bokeh.models import ColumnDataSource, HoverTool, Range1d
    from bokeh.plotting import figure

    lanes = build_lanes(trace)
    row_y = np.zeros(len(lanes.row_lane))
    lane_top = np.concatenate([[0], np.cumsum(np.bincount(lanes.row_lane))])[:-1]
    row_y[:] = lane_top[lanes.row_lane] + lanes.row_sub
    starts = np.concatenate([trace.start_ns, trace.gpu_start_ns]).astype(np.float64)
    ends = np.concatenate([trace.end_ns, trace.gpu_end_ns]).astype(np.float64)
    origin = starts.min()
    y = row_y[np.concatenate([lanes.cpu_row, lanes.gpu_row])]
    names = np.array(trace.names, dtype=object)[np.concatenate([trace.name_id, trace.gpu_name_id])]
    lane_names = np.array(lanes.labels, dtype=object)[lanes.row_lane[np.concatenate([lanes.cpu_row, lanes.gpu_row])]]
    colors = np.array(PALETTES[0], dtype=object)[np.concatenate([trace.name_id, trace.gpu_name_id]) % 8]
    source = ColumnDataSource({
        "left": starts - origin, "right": ends - origin, "bottom": y + 0.1, "top": y + 0.9,
        "name": names.tolist(), "lane": lane_names.tolist(), "color": colors.tolist(),
        "dur": ends - starts})
    plot = figure(x_range=Range1d(0, ends.max() - origin), y_range=Range1d(y.max() + 1, 0),
                  tools="xpan,xwheel_zoom,box_zoom,reset,tap", sizing_mode="stretch_width",
                  height=600, name="nbprof_plot")
    bars = plot.quad(source=source, left="left", right="right", bottom="bottom", top="top",
                     fill_color="color")
    plot.add_tools(HoverTool(renderers=[bars], tooltips=[("name", "@name"), ("lane", "@lane"),
                                                         ("start", "@left"), ("duration", "@dur")]))
    return plot


def widget_megabytes(layout) -> float:
    """What a notebook stores for the plot as a jupyter_bokeh.BokehModel (its widget state)."""
    from bokeh.core.json_encoder import serialize_json
    from jupyter_bokeh import BokehModel

    return len(serialize_json(BokehModel(layout).render_bundle)) / 1e6


# Time from navigation start until the first view is painted.
READY_NBPROF = ("() => window.Bokeh && Bokeh.documents.length && "
                "Bokeh.documents[0].get_model_by_name('nbprof_plot').tags.includes('nbprof-ready')")
READY_NAIVE = "() => window.Bokeh && Bokeh.documents.length && Bokeh.documents[0].is_idle"
AFTER_PAINT = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))"
# Bars the browser draws in the first (whole-trace) view.
GLYPHS = """() => { const doc = Bokeh.documents[0], ours = doc.get_model_by_name('nbprof_rendered');
  if (ours) return ours.data.left.length;
  return [...doc.all_models].filter(m => m.data && m.data.left).reduce((n, m) => n + m.data.left.length, 0); }"""
STEP = """async ([kind]) => {
  const range = Bokeh.documents[0].get_model_by_name('nbprof_plot').x_range;
  const [start, end] = [range.start, range.end], span = end - start;
  const t0 = performance.now();
  if (kind === 'zoom') range.setv({start: start + span * 0.1, end: end - span * 0.1});
  else range.setv({start: start + span * 0.1, end: end + span * 0.1});
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return (performance.now() - t0) / 1000;
}"""


def browse(browser, path: pathlib.Path, ready: str) -> dict:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(path.as_uri(), timeout=300_000)
    page.wait_for_function(ready, timeout=300_000, polling=50)
    result = {"ready_s": page.evaluate(AFTER_PAINT) / 1000, "glyphs": page.evaluate(GLYPHS)}
    timings = page.evaluate("() => { const r = Bokeh.documents[0].get_model_by_name('nbprof_rendered');"
                            " return r ? r.__nbprof.timings : null; }")
    if timings and path.stem.endswith("large"):
        print(f"  nbprof first view of {path.name}: " +
              ", ".join(f"{key} {value:.0f}" for key, value in timings.items()))
    result["zoom_s"] = page.evaluate(STEP, ["zoom"])
    result["pan_s"] = page.evaluate(STEP, ["pan"])
    result["zoom2_s"] = page.evaluate(STEP, ["zoom"])
    page.close()
    return result


def measure(trace: Trace, out: pathlib.Path, tag: str, browser) -> dict:
    def build(make, path):  # median of 3 builds, alternating with the other page's
        started = time.perf_counter()
        make(trace, path)
        return time.perf_counter() - started

    ours, naive = out / f"nbprof_{tag}.html", out / f"naive_{tag}.html"
    builds = [(build(save_html, ours), build(naive_page, naive)) for _ in range(REPEATS)]
    ours_build = statistics.median(b[0] for b in builds)
    naive_build = statistics.median(b[1] for b in builds)
    rows = {"build_s": (ours_build, naive_build),
            "page_MB": (ours.stat().st_size / 1e6, naive.stat().st_size / 1e6),
            "widget_MB": (widget_megabytes(Timeline(trace).layout),
                          widget_megabytes(naive_plot(trace)))}
    # Alternate the pages and keep each figure's median: the first page a fresh browser opens
    # pays its cold start, and the machine is shared.
    ours_runs, naive_runs = [], []
    for _ in range(REPEATS):
        ours_runs.append(browse(browser, ours, READY_NBPROF))
        naive_runs.append(browse(browser, naive, READY_NAIVE))
    for key in ours_runs[0]:
        rows[key] = (statistics.median(run[key] for run in ours_runs),
                     statistics.median(run[key] for run in naive_runs))
    return rows


def report(title: str, events: int, rows: dict) -> None:
    print(f"\n{title}: {events:,} events (CPU events + GPU intervals)")
    print(f"{'':10} {'nbprof':>10} {'naive':>10} {'ratio':>8}")
    for key, (ours, naive) in rows.items():
        print(f"{key:10} {ours:10.3f} {naive:10.3f} {ours / naive:8.3f}x" if key != "glyphs" else
              f"{key:10} {ours:10,d} {naive:10,d} {ours / naive:8.3f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=100_000)
    options = parser.parse_args()
    from playwright.sync_api import sync_playwright

    base = nbprof.load(SOURCE)
    with tempfile.TemporaryDirectory() as folder:  # first-use costs (imports, BokehJS read) apart
        save_html(tile(base, 1), pathlib.Path(folder) / "warm.html")
        naive_page(tile(base, 1), pathlib.Path(folder) / "warm_naive.html")
    per_copy = len(base) + len(base.gpu_start_ns)
    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        for target, title in ((options.small, "small"), (options.events, "large")):
            trace = tile(base, max(1, round(target / per_copy)))
            events = len(trace) + len(trace.gpu_start_ns)
            report(title, events, measure(trace, pathlib.Path(folder), title, browser))
        browser.close()


if __name__ == "__main__":
    main()
