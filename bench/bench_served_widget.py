"""Kernel-served level of detail in a real JupyterLab: zoom and pan steps of nbprof.widget past the
5M-event embedding budget, timed in the browser from setting the plot's x_range until the bars the
kernel served for that range are drawn and painted. Issue 11's target: a step <= 0.5 s at 100M.

Each size gets its own notebook whose cell builds bench_bigview's synthetic trace of N events and
shows ``nbprof.widget(trace)``; the sizes run one after the other in one JupyterLab and one
Chromium (each kernel is shut down before the next size starts: 100M takes ~8 GB). Per step:
- coarse: setting x_range, which redraws the embedded coarse level at once (synchronous)
- debounce: until the browser asks the kernel (it waits for the view to rest 100 ms)
- kernel: the kernel's answer (sweep and packing), and its whole handling of the request, sending
  the answer included (from a timer the cell wraps around Served)
- to_kernel, back: the request's way to the kernel's handler (waiting there behind the messages
  before it) and the answer's way back into the browser (jupyter_bokeh's sync, the websocket)
- decode, draw: inflating and decoding the answer, then drawView setting the bars
- step: from setting x_range until two frames after the served bars were set

    PYTHONPATH=. /work/main/.venv/bin/python bench/bench_served_widget.py --sizes 10000000,100000000
    PYTHONPATH=. /work/main/.venv/bin/python bench/bench_served_widget.py --memory 10000000
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))

from jupyter_lab import (CHROMIUM, CHROMIUM_ARGS, PANEL, READY_JS, api, open_notebook,  # noqa: E402
                         run_all_cells, running_lab, start_kernel_session)

TARGET_S = 0.5
# Steps: (label, the new view's width in ns (negative: that fraction of the current one), how far
# its centre moves, in new widths). Absolute widths, so both sizes draw the same kind of view: from
# per-row blocks (1 s) to a few thousand bars (10-100 ms) and events one by one (1 ms).
MS = 1_000_000
STEPS = [("zoom 1.25x", -0.8, 0), ("zoom to 1 s", 1000 * MS, 0), ("zoom to 100 ms", 100 * MS, 0),
         ("pan 10%", -1, 0.1), ("zoom to 10 ms", 10 * MS, 0), ("pan -30%", -1, -0.3),
         ("zoom to 1 ms", MS, 0), ("pan 10%", -1, 0.1), ("zoom out to 30 ms", 30 * MS, 0),
         ("pan 50%", -1, 0.5), ("zoom out to 3 s", 3000 * MS, 0)]
LIVE_DOC = """[...Bokeh.index.roots].find(view => view.el.closest('.nbprof-widget') &&
    view.model.document.get_model_by_name('nbprof_plot')).model.document"""
FIRST_ANSWER = f"""() => {{ const doc = {LIVE_DOC};
  return (doc.get_model_by_name('nbprof_rendered').__nbprof.answers || 0) >= 1; }}"""
STEP_JS = f"""async ([width, shift]) => {{
  const doc = {LIVE_DOC}, plot = doc.get_model_by_name('nbprof_plot');
  const rendered = doc.get_model_by_name('nbprof_rendered'), S = rendered.__nbprof;
  const before = S.answers || 0, {{start, end}} = plot.x_range, span = end - start;
  const frames = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const t0 = performance.now();
  const wide = width > 0 ? width : -width * span, centre = (start + end) / 2 + shift * wide;
  plot.x_range.setv({{start: centre - wide / 2, end: centre + wide / 2}});
  const set = performance.now();
  const prefix = `${{plot.x_range.start}}|${{plot.x_range.end}}|`;  // the view's key (timeline_served.js)
  const served = () => (S.answers || 0) > before && S.answerTimes.key.startsWith(prefix);
  while (!served()) {{
    if (performance.now() - t0 > 120000) return null;
    await new Promise(r => setTimeout(r, 5));
  }}
  await frames();
  const T = S.answerTimes;
  return {{key: T.key, bars: rendered.data.left.length, coarse: set - t0, debounce: T.asked - set,
          round_trip: T.arrived - T.asked, decode: T.decoded - T.arrived, draw: T.drawn - T.decoded,
          drawn: T.drawn - t0, step: performance.now() - t0, asked_epoch: performance.timeOrigin + T.asked,
          t0_epoch: performance.timeOrigin + t0}};
}}"""


def notebook(events: int, log: pathlib.Path) -> str:
    """One cell: the synthetic trace and its widget, with Served's answers timed into ``log``."""
    cell = f"""import sys, time
sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'bench')!r}]
import nbprof
from nbprof.timeline.served import Served
from bench_bigview import synthetic_trace

def _timed(method, field):
    def timed(self, request):
        wall, started = time.time(), time.perf_counter()
        result = method(self, request)
        took, key = time.perf_counter() - started, (request.get("key") or [""])[0]
        with open({str(log)!r}, "a") as log:
            log.write(f"{{field}}\\t{{key}}\\t{{took}}\\t{{wall}}\\n")
        return result
    return timed

def _timed_sync(method):  # every change the browser syncs to the kernel, and its time there
    def timed(self, widget, content, buffers):
        wall, started = time.time(), time.perf_counter()
        method(self, widget, content, buffers)
        what = f"{{content.get('kind', '')}} {{content.get('attr', '')}}"
        with open({str(log)!r}, "a") as log:
            log.write(f"sync\\t{{what}}\\t{{time.perf_counter() - started}}\\t{{wall}}\\n")
    return timed

# Once per kernel: Run All may have run this cell twice (run_all_cells clicks again when no cell
# shows it started within 30 s), and at 100M a second build costs minutes and gigabytes.
if "shown" not in globals():
    from jupyter_bokeh.widgets import BokehModel
    BokehModel._sync_model = _timed_sync(BokehModel._sync_model)
    Served.answer = _timed(Served.answer, "answer")  # the sweep and packing
    Served._answer_request = _timed(Served._answer_request, "handled")  # and sending it
    started = time.perf_counter()
    trace = synthetic_trace({events})
    made = time.perf_counter()
    shown = nbprof.widget(trace)
    built = f"trace {{made - started:.1f}} s, widget {{time.perf_counter() - made:.1f}} s"
print(built)
shown"""
    return json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "metadata": {},
                                  "outputs": [], "source": cell}],
                       "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                   "language": "python"}},
                       "nbformat": 4, "nbformat_minor": 5})


def kernel_times(log: pathlib.Path) -> dict:
    """{(field, key): seconds}, the last of each (jupyter_bokeh calls back twice: a repeat is
    answered with None, and its time is not the answer's)."""
    times: dict = {"sync": []}
    for line in log.read_text().splitlines() if log.exists() else []:
        field, key, seconds, wall = line.split("\t")
        if field == "sync":
            times["sync"].append((key, float(seconds) * 1000, float(wall) * 1000))
            continue
        times.setdefault((field, key), (float(seconds), float(wall)))  # the first answered
    return times


def measure(browser, url: str, root: pathlib.Path, events: int) -> dict:
    name, log = f"served_{events}.ipynb", root / f"served_{events}.log"
    (root / name).write_text(notebook(events, log))
    session = start_kernel_session(url, name)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(600_000)
    started = time.perf_counter()
    try:
        open_notebook(page, url, name)
        run_all_cells(page)
        page.wait_for_selector(f"{PANEL} .nbprof-widget", timeout=1_200_000)
        page.wait_for_function(READY_JS, timeout=600_000, polling=100)
        page.wait_for_function(FIRST_ANSWER, timeout=600_000, polling=100)
        shown = time.perf_counter() - started
        printed = page.locator(f"{PANEL} .jp-OutputArea-output pre").first.text_content()
        page.wait_for_timeout(1000)  # let the first view's answer settle
        steps = []
        for label, width, shift in STEPS:
            step = page.evaluate(STEP_JS, [width, shift])
            if step is None:
                raise RuntimeError(f"{label}: no served answer within 120 s")
            step["label"] = label
            steps.append(step)
            page.wait_for_timeout(300)
        times = kernel_times(log)
        for step in steps:
            nothing = (float("nan"), float("nan"))
            step["kernel"] = times.get(("answer", step["key"]), nothing)[0] * 1000
            handled, wall = times.get(("handled", step["key"]), nothing)
            step["handled"] = handled * 1000
            step["to_kernel"] = wall * 1000 - step["asked_epoch"]
            step["back"] = step["round_trip"] - step["to_kernel"] - step["handled"]
            # what the kernel handled from the step's start until the request (its queue)
            before = [(what, took) for what, took, at in times["sync"]
                      if step["t0_epoch"] <= at < wall * 1000]
            step["synced"] = sum(took for _, took in before)
            step["sync_what"] = ", ".join(f"{what} {took:.0f}" for what, took in before)
        return {"shown_s": shown, "printed": printed.strip(), "steps": steps}
    finally:
        page.close()
        api(url, f"/api/sessions/{session['id']}", "DELETE")  # frees the kernel's memory


COLUMNS = ("coarse", "debounce", "to_kernel", "synced", "kernel", "handled", "back", "decode", "draw",
           "drawn", "step")


def report(results: dict) -> None:
    sizes = list(results)
    for events, result in results.items():
        print(f"\n{events:,} events: widget shown (ready and first answer) in {result['shown_s']:.1f} s "
              f"({result['printed']}); per step, ms:")
        print(f"{'step':18} {'bars':>7}" + "".join(f"{c:>10}" for c in COLUMNS))
        for step in result["steps"]:
            print(f"{step['label']:18} {step['bars']:7,}" + "".join(f"{step[c]:10.1f}" for c in COLUMNS))
            print(f"    the kernel before the request, ms: {step['sync_what']}")
    print(f"\nside by side, step s ({', '.join(f'{e:,}' for e in sizes)}):")
    for i, (label, _, _) in enumerate(STEPS):
        print(f"{label:18}" + "".join(f"{results[e]['steps'][i]['step'] / 1000:10.3f}" for e in sizes))
    for events in sizes:
        worst = max(step["step"] for step in results[events]["steps"]) / 1000
        print(f"{events:,}: worst step {worst:.3f} s (target <= {TARGET_S} s): "
              f"{'met' if worst <= TARGET_S else 'NOT met'}")


def kernel_memory(events: int) -> None:
    """What the widget's kernel allocates to build it (numpy, tracemalloc) beside its parts: the
    Timeline, the Overview's step breakdown, and then opening the Overview tab (built only then,
    since 2026-12-03); no browser."""
    import gc
    import tracemalloc

    sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
    import nbprof
    from bench_bigview import synthetic_trace
    from nbprof.analysis.steps import breakdown
    from nbprof.timeline import Timeline

    trace = synthetic_trace(events)
    nbprof.widget(synthetic_trace(1000), max_embedded_events=100)  # compile numba's code first
    print(f"\nkernel memory, {events:,} synthetic events (numpy's allocations: peak, kept)")
    for label, build in (("Timeline(trace)", Timeline), ("steps.breakdown(trace)", breakdown),
                         ("nbprof.widget(trace)", nbprof.widget)):
        gc.collect()
        tracemalloc.start()
        started = time.perf_counter()
        built = build(trace)
        took, (kept, peak) = time.perf_counter() - started, tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(f"{label:24} {took:6.1f} s  peak {peak / 1e6:7,.0f} MB  kept {kept / 1e6:7,.0f} MB")
        if label.startswith("nbprof.widget"):  # what its display adds: the static copy's bundle
            from nbprof.notebook.static import static_bundle

            started = time.perf_counter()
            static_bundle(built.timeline, sort_by=built.summary.sort_key, text=built._text_summary())
            print(f"{'  then its static copy':24} {time.perf_counter() - started:6.1f} s")
        lazy = getattr(built, "lazy_panes", {}).get("Overview")
        if lazy is not None:  # built when its tab is first opened (notebook/overview.py)
            tracemalloc.start()
            started = time.perf_counter()
            lazy.pane  # noqa: B018 (builds it)
            took, (kept, peak) = time.perf_counter() - started, tracemalloc.get_traced_memory()
            tracemalloc.stop()
            print(f"{'  then Overview opened':24} {took:6.1f} s  peak {peak / 1e6:7,.0f} MB  "
                  f"kept {kept / 1e6:7,.0f} MB")
        del built


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000000,100000000", help="events per notebook, in order")
    parser.add_argument("--memory", type=int, default=0,
                        help="only the kernel's build memory, on this many events (no browser)")
    options = parser.parse_args()
    if options.memory:
        return kernel_memory(options.memory)
    from playwright.sync_api import sync_playwright

    results = {}
    with tempfile.TemporaryDirectory() as base, running_lab(pathlib.Path(base)) as (url, root):
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for events in (int(size) for size in options.sizes.split(",")):
                results[events] = measure(browser, url, root, events)
                print(f"{events:,}: done", flush=True)
            browser.close()
    report(results)


if __name__ == "__main__":
    main()
