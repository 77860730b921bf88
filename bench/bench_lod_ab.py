"""The 1M-event page's wheel and pan step, this tree against another (e.g. main), side by side.

Each tree builds bench_timeline.py's ~1M-event page (the shared 68k trace tiled) with its own
nbprof, in a fresh Python; one headless Chromium then opens the two pages in turn, REPEATS times
each, and times page ready, then STEPS zoom steps (in and back out in turn) and STEPS pan steps
(STEPS_JS), and counts the bars of the first view.
Prints medians over all loads and steps and the ratio this / other (smaller is better). With --screenshots DIR, also saves
each tree's page of the 68k trace itself at full zoom (DIR/this.png, DIR/other.png).

    git worktree add --detach /tmp/before main   # or: git archive main | tar -x -C /tmp/before
    PYTHONPATH=. .venv/bin/python bench/bench_lod_ab.py --other /tmp/before [--events 1000000]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
REPEATS = 4
STEPS = 20
BUILD = """
import pathlib, sys
sys.path.insert(0, {tree!r} + "/bench")
import nbprof, bench_timeline as bt
assert nbprof.__file__.startswith({tree!r}), nbprof.__file__
base = nbprof.load(bt.SOURCE)
per_copy = len(base) + len(base.gpu_start_ns)
nbprof.timeline.save_html(bt.tile(base, max(1, round({events} / per_copy))), pathlib.Path({page!r}))
nbprof.timeline.save_html(base, pathlib.Path({small!r}))
"""


def build(tree: pathlib.Path, folder: pathlib.Path, tag: str, events: int) -> tuple:
    page, small = folder / f"{tag}_large.html", folder / f"{tag}_68k.html"
    env = dict(os.environ, PYTHONPATH=str(tree))
    subprocess.run([sys.executable, "-c", BUILD.format(tree=str(tree), events=events, page=str(page),
                                                       small=str(small))],
                   env=env, check=True, cwd=tree)
    return page, small


# STEPS wheel-like steps, zooming in by 10% and back out in turn, then STEPS pans of 10%: per step
# the synchronous part (the range change runs the sweep and fills the source) and the whole step
# until two animation frames later (painted), in ms.
STEPS_JS = """async ([steps]) => {
  const range = Bokeh.documents[0].get_model_by_name('nbprof_plot').x_range;
  const frames = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const out = {zoom_sync_ms: [], zoom_ms: [], pan_sync_ms: [], pan_ms: []};
  for (let i = 0; i < 2 * steps; i++) {
    const kind = i < steps ? 'zoom' : 'pan';
    const [start, end] = [range.start, range.end], span = end - start;
    const t0 = performance.now();
    if (kind === 'pan') range.setv({start: start + span * 0.1, end: end + span * 0.1});
    else if (i % 2 === 0) range.setv({start: start + span * 0.1, end: end - span * 0.1});
    else range.setv({start: start - span * 0.125, end: end + span * 0.125});
    const t1 = performance.now();
    await frames();
    out[kind + '_sync_ms'].push(t1 - t0); out[kind + '_ms'].push(performance.now() - t0);
  }
  return out;
}"""


def browse(browser, path: pathlib.Path) -> dict:
    import bench_timeline as bt

    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(path.as_uri(), timeout=300_000)
    page.wait_for_function(bt.READY_NBPROF, timeout=300_000, polling=50)
    result = {"ready_s": [page.evaluate(bt.AFTER_PAINT) / 1000], "bars": [page.evaluate(bt.GLYPHS)]}
    result.update(page.evaluate(STEPS_JS, [STEPS]))
    page.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", required=True, type=pathlib.Path, help="the tree to compare with")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--screenshots", type=pathlib.Path)
    options = parser.parse_args()
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_timeline as bt
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as folder, sync_playwright() as playwright:
        folder = pathlib.Path(folder)
        pages = {"this": build(ROOT, folder, "this", options.events),
                 "other": build(options.other.resolve(), folder, "other", options.events)}
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                             args=bt.CHROMIUM_ARGS)
        runs = {"this": {}, "other": {}}
        for repeat in range(REPEATS):  # alternating, in ABBA order: the machine is shared, and
            # the first page of a pair measured slower in either tree
            for tag in ("this", "other") if repeat % 2 == 0 else ("other", "this"):
                for key, values in browse(browser, pages[tag][0]).items():
                    runs[tag].setdefault(key, []).extend(values)
        print(f"\n~{options.events:,} events, medians of {REPEATS} page loads each "
              f"({STEPS} steps of each kind a load)")
        print(f"{'':10} {'this':>10} {'other':>10} {'ratio':>8}")
        for key in runs["this"]:
            this = statistics.median(runs["this"][key])
            other = statistics.median(runs["other"][key])
            print(f"{key:10} {this:10.4f} {other:10.4f} {this / other:8.3f}x")
        if options.screenshots:
            options.screenshots.mkdir(parents=True, exist_ok=True)
            for tag in runs:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(pages[tag][1].as_uri())
                page.wait_for_function(bt.READY_NBPROF, timeout=120_000, polling=50)
                page.evaluate(bt.AFTER_PAINT)
                page.screenshot(path=str(options.screenshots / f"{tag}.png"), full_page=True)
                page.close()
        browser.close()


if __name__ == "__main__":
    main()
