"""Kernel-served level of detail in a real JupyterLab: a widget past its embedding budget asks its
kernel for each view it settles on (through jupyter_bokeh's synced document) and draws the bars
the kernel computes, which are exactly what the browser's sweep over every event would draw."""

import json
import pathlib

import pytest
from jupyter_lab import (CHROMIUM, CHROMIUM_ARGS, PANEL, READY_JS, open_notebook, run_all_cells,
                         start_kernel_session, wait_until_all_cells_ran)
from served_trace import hand_built_trace

from nbprof.timeline.lanes import build_lanes
from nbprof.timeline.sweep import row_columns, view_bars

pytestmark = pytest.mark.browser

NOTEBOOK = "served_widget.ipynb"
TESTS = pathlib.Path(__file__).resolve().parents[1]
# The live widget's timeline document (not the static copy before it).
LIVE_DOC = """[...Bokeh.index.roots].find(view => view.el.closest('.nbprof-widget') &&
    view.model.document.get_model_by_name('nbprof_plot')).model.document"""
STATE = f"""() => {{ const doc = {LIVE_DOC}, plot = doc.get_model_by_name('nbprof_plot');
  const r = doc.get_model_by_name('nbprof_rendered'), d = r.data;
  return {{answers: r.__nbprof.answers || 0, x0: plot.x_range.start, x1: plot.x_range.end,
          width: plot.inner_width, left: [...d.left], right: [...d.right], count: [...d.count],
          id: [...d.id], note: doc.get_model_by_name('nbprof_note').html}}; }}"""


def notebook_json() -> str:
    cell = (f"import sys; sys.path.insert(0, {str(TESTS)!r})\n"
            "import nbprof\nfrom served_trace import hand_built_trace\n"
            "nbprof.widget(hand_built_trace(), max_embedded_events=100)")
    return json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "metadata": {},
                                  "outputs": [], "source": cell}],
                       "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                   "language": "python"}},
                       "nbformat": 4, "nbformat_minor": 5})


def expected_bars(state):
    trace = hand_built_trace()
    bars = view_bars(row_columns(trace, build_lanes(trace)), state["x0"], state["x1"], state["width"])
    return sorted(zip(bars.left.tolist(), bars.count.tolist()))


def test_the_kernel_serves_each_view_the_widget_settles_on(lab, artifacts):
    from playwright.sync_api import sync_playwright

    url, root = lab
    (root / NOTEBOOK).write_text(notebook_json())
    start_kernel_session(url, NOTEBOOK)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        try:
            open_notebook(page, url, NOTEBOOK)
            run_all_cells(page)
            wait_until_all_cells_ran(page)  # Lab may drop cells under load
            page.wait_for_selector(f"{PANEL} .nbprof-widget", timeout=120_000)
            page.wait_for_function(READY_JS, timeout=60_000)
            # the first view: the kernel's answer replaces the coarse level
            page.wait_for_function(f"() => ({STATE})().answers >= 1", timeout=30_000)
            state = page.evaluate(STATE)
            assert "showing" in state["note"] and "bars for" in state["note"]
            assert sorted(zip(state["left"], state["count"])) == expected_bars(state)
            # zoom onto one burst of tiny ops: a new answer, with those ops one by one
            page.evaluate(f"() => {{ const plot = ({LIVE_DOC}).get_model_by_name('nbprof_plot');"
                          " plot.x_range.setv({start: 150000, end: 160000}); }")
            page.wait_for_function(f"() => {{ const s = ({STATE})(); return s.answers >= 2 && "
                                   "s.x0 === 150000; }", timeout=30_000)
            page.wait_for_timeout(300)  # a repeat answer for the same view changes nothing
            state = page.evaluate(STATE)
            assert sorted(zip(state["left"], state["count"])) == expected_bars(state)
            assert sum(1 for count in state["count"] if count == 1) >= 10  # the ops themselves
        except Exception:
            page.screenshot(path=str(artifacts / "served_widget_failed.png"))
            raise
        finally:
            browser.close()
