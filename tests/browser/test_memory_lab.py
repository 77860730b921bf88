"""Memory in a real JupyterLab (Playwright, Debian's Chromium): ``%%cudaprof --memory`` shows a
memory lane under the threads and a Memory tab; the tab's holder button and a click on an
allocation in the lane both select that op (the Details pane names it)."""

import os

import pytest
from jupyter_lab import (CHROMIUM, CHROMIUM_ARGS, PANEL, open_notebook, run_lab,
                         write_notebook)
from jupyter_lab import READY_JS as _READY_JS
from jupyter_lab import run_all_cells as _run_all_cells
from jupyter_lab import wait_until_all_cells_ran

pytestmark = pytest.mark.browser
NOTEBOOK = "memory.ipynb"
CELLS = [
    "%load_ext nbprof",
    "import torch\nMIB = 1 << 20",
    "%%cudaprof --memory --cpu-only -o t\n"
    "with torch.profiler.record_function('phase_alloc'):\n"
    "    a = torch.ones(16 * MIB)\n"
    "with torch.profiler.record_function('phase_peak'):\n"
    "    b = a + 1\n"
    "with torch.profiler.record_function('phase_free'):\n"
    "    del a, b",
    # past its budget: the memory lane's reduced level, each view served by the kernel
    "import numpy as np\nimport nbprof\nfrom nbprof.model import MemoryEvents, Trace\n"
    "n = 200_000\n"
    "memory = MemoryEvents.build(time_ns=np.arange(n) * 10 + 5, bytes=np.where(np.arange(n) % 2 "
    "== 0, 1024, -1024), addr=np.arange(n) // 2, device=np.full(n, -1), thread=np.zeros(n))\n"
    "big = Trace.build(start_ns=[0], end_ns=[n * 10 + 10], thread=[0], name_id=[0], "
    "names=['loop'], threads=[(1, 1, 'MainThread')], memory=memory)\n"
    "nbprof.widget(big, name='big', max_embedded_events=100_000)",
]


@pytest.fixture(scope="module")
def page(tmp_path_factory, artifacts):
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: `make chromium` installs Debian's Chromium")
    base = tmp_path_factory.mktemp("memory_lab")
    root = base / "notebooks"
    root.mkdir()
    write_notebook(root, NOTEBOOK, CELLS)
    with run_lab(base, root, NOTEBOOK) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1400, "height": 1200}).new_page()
        page.set_default_timeout(60_000)
        open_notebook(page, url, NOTEBOOK)
        try:
            _run_all_cells(page)
            wait_until_all_cells_ran(page, timeout_ms=180_000)
            page.wait_for_selector(f"{PANEL} .nbprof-widget", timeout=180_000)
            page.wait_for_function(_READY_JS, timeout=60_000)
        except Exception:
            page.screenshot(path=str(artifacts / "memory_lab_failed_start.png"))
            raise
        yield page
        page.screenshot(path=str(artifacts / "memory_lab_final.png"))
        browser.close()


def _details(widget):
    widget.locator(".lm-TabBar-tab:has-text('Details')").first.click()
    return widget.locator(".nbprof-details")


_SCROLL_JS = """() => new Promise((done) => {
    for (const doc of Bokeh.documents) {
        const strip = doc.get_model_by_name('nbprof_memory');
        const view = strip && Bokeh.index.find_one(strip);
        if (view && view.el.getBoundingClientRect().width) {  // the first shown widget's lane
            view.el.scrollIntoView({block: "center"});
            break;
        }
    }
    requestAnimationFrame(() => requestAnimationFrame(done));
})"""
_POINT_JS = """(what) => {
    for (const doc of Bokeh.documents) {
        const strip = doc.get_model_by_name('nbprof_memory');
        if (!strip) continue;
        const points = doc.get_model_by_name('nbprof_memory_points');
        const index = points.data.what.indexOf(what);
        if (index < 0) continue;  // another widget's lane
        const view = Bokeh.index.find_one(strip);
        const box = view.el.getBoundingClientRect();
        if (!box.width) continue;  // the saved static copy, not shown beside the live widget
        return [box.left + view.frame.x_scale.compute(points.data.x[index]),
                box.top + view.frame.y_scale.compute(points.data.y[index])];
    }
    return null;
}"""


def test_a_click_on_an_allocation_in_the_memory_lane_selects_its_op(page, artifacts):
    widget = page.locator(f"{PANEL} .nbprof-widget").first
    page.evaluate(_SCROLL_JS)
    point = page.evaluate(_POINT_JS, "+64.0 MiB in aten::add")
    assert point is not None
    page.mouse.click(*point)
    page.wait_for_function(f"""() => {{
        const d = document.querySelector("{PANEL} .nbprof-details");
        return d && d.innerText.includes('aten::add'); }}""", timeout=30_000)
    _details(widget).screenshot(path=str(artifacts / "memory_lane_click.png"))


def test_the_memory_tab_shows_the_peak_and_a_holder_selects_its_op(page, artifacts):
    widget = page.locator(f"{PANEL} .nbprof-widget").first
    widget.locator(".lm-TabBar-tab:has-text('Memory')").first.click()
    pane = widget.locator(".nbprof-memory-pane")
    pane.wait_for()
    text = pane.inner_text()
    assert "CPU: 128.0 MiB at" in text and "Held at the peak on CPU" in text
    pane.screenshot(path=str(artifacts / "memory_tab.png"))
    pane.locator(".nbprof-memory-link[title='phase_alloc > aten::ones > aten::empty']").click()
    page.wait_for_function(f"""() => {{
        const d = document.querySelector("{PANEL} .nbprof-details");
        return d && d.innerText.includes('aten::empty'); }}""", timeout=30_000)


_SERVED_DOC = """[...Bokeh.index.roots].map(view => view.model.document).find(doc =>
    doc.get_model_by_name('nbprof_memory_request') &&
    [...Bokeh.index.roots].some(v => v.model.document === doc && v.el.closest('.nbprof-widget')))"""


def test_past_its_budget_the_kernel_serves_the_memory_lanes_view(page, artifacts):
    """The reduced page shows a few points for a 400 ns view; the kernel's answer, every event
    in it (each 1 KiB allocation or free "in loop")."""
    page.wait_for_function(f"() => {{ const doc = {_SERVED_DOC}; return doc && "
                           "doc.get_model_by_name('nbprof_memory_points').data.x.length > 0; }",
                           timeout=120_000)
    page.evaluate(f"""() => {{ const doc = {_SERVED_DOC};
        doc.get_model_by_name('nbprof_plot').x_range.setv({{start: 1000, end: 1400}}); }}""")
    try:
        page.wait_for_function(f"""() => {{ const doc = {_SERVED_DOC};
            const what = doc.get_model_by_name('nbprof_memory_points').data.what;
            return what.length >= 38 && what.every(w => w.endsWith(' in loop')); }}""",
                               timeout=60_000)
    except Exception:
        page.screenshot(path=str(artifacts / "memory_lab_served_failed.png"))
        raise
    what = page.evaluate(f"() => [...{_SERVED_DOC}.get_model_by_name('nbprof_memory_points')"
                         ".data.what]")
    assert 38 <= len(what) <= 42 and set(what) == {"+1.0 KiB in loop", "-1.0 KiB in loop"}
