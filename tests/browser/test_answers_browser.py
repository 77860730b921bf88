"""The Overview and Compare tabs in a real JupyterLab (Playwright, Debian's Chromium): picking a
step in the Overview zooms the timeline to exactly that step; re-running the ``-o t`` cell with a
bigger workload adds a Compare tab whose diff names the op that got slower."""

import json
import os

import pytest
from jupyter_lab import CHROMIUM, CHROMIUM_ARGS, PANEL, run_lab, write_notebook
from jupyter_lab import READY_JS as _READY_JS
from jupyter_lab import run_all_cells as _run_all_cells
from jupyter_lab import wait_until_all_cells_ran

pytestmark = pytest.mark.browser
NOTEBOOK = "answers.ipynb"
PROFILED = ("%%cudaprof -o t\n"
            "for step in range(3):\n"
            "    with torch.profiler.record_function(f'ProfilerStep#{step}'):\n"
            "        torch.ones(SIZE, SIZE).mul(2).sum()")
CELLS = [
    "%load_ext nbprof",
    "import json, torch\nSIZE = 8",
    PROFILED,
    # where each step of the first run lies on its timeline's x axis (ns since the first event)
    "from nbprof.notebook.details import timeline_origin_ns\n"
    "origin = timeline_origin_ns(t)\n"
    "steps = t.steps()\n"
    "json.dump([[int(s - origin), int(e - origin)] for s, e in zip(steps['start_ns'], steps['end_ns'])],"
    " open('steps.json', 'w'))",
    "SIZE = 2000",  # each mul ~1000x the first run's: no preemption of that run can hide it
    PROFILED,
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("answers_lab")
    root = base / "notebooks"
    root.mkdir()
    write_notebook(root, NOTEBOOK, CELLS)
    with run_lab(base, root, NOTEBOOK) as url:
        yield url, root


@pytest.fixture(scope="module")
def page(lab, artifacts):
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: `make chromium` installs Debian's Chromium")
    url, root = lab
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.set_default_timeout(60_000)
        page.goto(f"{url}/lab/tree/{NOTEBOOK}?reset")
        page.wait_for_selector(f"{PANEL} .jp-Notebook-ExecutionIndicator[data-status='idle']",
                               state="attached")
        try:
            _run_all_cells(page)
            wait_until_all_cells_ran(page, timeout_ms=180_000)
            page.wait_for_function(f"() => document.querySelectorAll('{PANEL} .nbprof-widget').length == 2",
                                   timeout=180_000)
            page.wait_for_function(_READY_JS, timeout=60_000)
        except Exception:
            page.screenshot(path=str(artifacts / "answers_browser_failed_start.png"))
            raise
        yield page, root
        page.screenshot(path=str(artifacts / "answers_browser_final.png"))
        browser.close()


_X_RANGES_JS = """() => Bokeh.documents.map(doc => doc.get_model_by_name('nbprof_plot'))
    .filter(plot => plot).map(plot => [plot.x_range.start, plot.x_range.end])"""


def test_picking_a_step_in_the_overview_zooms_the_timeline_to_it(page, artifacts):
    page, root = page
    windows = json.loads((root / "steps.json").read_text())
    assert len(windows) == 3
    first = page.locator(f"{PANEL} .nbprof-widget").first
    first.locator(".lm-TabBar-tab:has-text('Overview')").first.click()
    overview = first.locator(".nbprof-overview")
    overview.wait_for()
    assert "ProfilerStep" in overview.inner_text()
    assert windows[1] not in page.evaluate(_X_RANGES_JS)
    overview.locator(".nbprof-steps select").select_option(index=1)
    page.wait_for_function(f"() => ({_X_RANGES_JS})().some(r => r[0] == {windows[1][0]} && "
                           f"r[1] == {windows[1][1]})", timeout=30_000)
    overview.screenshot(path=str(artifacts / "answers_overview.png"))


def test_the_rerun_cell_has_a_compare_tab_naming_the_slower_op(page, artifacts):
    page, _ = page
    second = page.locator(f"{PANEL} .nbprof-widget").nth(1)
    second.locator(".lm-TabBar-tab:has-text('Compare')").first.click()
    diff = second.locator(".nbprof-diff")
    diff.wait_for()
    diff.locator("tbody tr").first.wait_for()
    assert "previous value of t" in second.locator(".nbprof-compare").inner_text()
    rows = diff.locator("tbody tr").all_inner_texts()  # a sortable table: a row per op and path
    slower = [row for row in rows if "slower" in row]
    by_name = second.locator(".nbprof-diff-by-name tbody tr").all_inner_texts()  # leads the tab
    assert any("slower" in row and "aten::mul" in row for row in by_name)
    assert any("aten::mul" in line or "aten::ones" in line or "aten::fill_" in line for line in slower)
    bars = page.evaluate("""() => Math.max(0, ...Bokeh.documents.map(doc => {
        const source = doc.get_model_by_name('nbprof_compare_bars');
        return source ? source.data.left.length : 0; }))""")
    assert bars > 0
    second.locator(".nbprof-compare").screenshot(path=str(artifacts / "answers_compare.png"))


_BAR_POINT_JS = """(index) => {
    for (const doc of Bokeh.documents) {
        const plot = doc.get_model_by_name('nbprof_steps_plot');
        if (!plot) continue;
        const view = Bokeh.index.find_one(plot);
        const label = plot.x_range.factors[index];
        const source = doc.get_model_by_name('nbprof_step_bars');
        const box = view.el.getBoundingClientRect();
        if (!box.width) continue;  // the other widget's Overview, not shown
        const x = view.frame.x_scale.compute(plot.x_range.synthetic(label));
        const y = view.frame.y_scale.compute(source.data.cpu_busy_ms[index] / 2);
        return [box.left + x, box.top + y];
    }
    return null;
}"""


def test_tapping_a_steps_bar_zooms_the_timeline_to_it(page, artifacts):
    page, root = page
    windows = json.loads((root / "steps.json").read_text())
    first = page.locator(f"{PANEL} .nbprof-widget").first
    first.locator(".lm-TabBar-tab:has-text('Overview')").first.click()
    first.locator(".nbprof-overview").scroll_into_view_if_needed()
    point = page.evaluate(_BAR_POINT_JS, 0)
    assert point is not None
    page.mouse.click(*point)
    page.wait_for_function(f"() => ({_X_RANGES_JS})().some(r => r[0] == {windows[0][0]} && "
                           f"r[1] == {windows[0][1]})", timeout=30_000)
