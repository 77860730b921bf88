"""The widget's panes in a real JupyterLab and Chromium at 1000 px: the summary table fits with its
header over its columns (CPU-only and GPU traces), details links select and zoom, a --with-stack
stack names the cell, the export message with its Perfetto link stays beside the button, and the
lane filter says when every lane is off. Screenshots go to test-artifacts/."""

import pathlib

import nbformat
import pytest
from jupyter_lab import (CHROMIUM, CHROMIUM_ARGS, PANEL, READY_JS, open_notebook, run_all_cells,
                         start_kernel_session, wait_until_all_cells_ran)

pytestmark = pytest.mark.browser

NOTEBOOK = "panes.ipynb"
SHARED = pathlib.Path(__file__).resolve().parents[3] / "shared" / "traces"
CELLS = [
    "%load_ext nbprof\nimport torch, nbprof",
    "def step(x):\n    return torch.relu(x @ x / 32 + 1)",
    "%%cudaprof --with-stack -o cpu_trace\nx = torch.ones(32, 32)\nfor _ in range(20):\n    x = step(x)",
    f"gpu_trace = nbprof.load({str(SHARED / 'gpu_alexnet_kineto.json.gz')!r})\n"
    "nbprof.widget(gpu_trace, name='alexnet')",
]
CPU, GPU = 0, 1  # the two widgets, in page order

# The Bokeh document of the n-th live widget on the page (not a static copy's).
_DOC_JS = """(n) => { const widget = document.querySelectorAll(
        '.jp-NotebookPanel:not(.lm-mod-hidden) .nbprof-widget')[n];
    const view = [...Bokeh.index.roots].find(v => v.el.closest('.nbprof-widget') === widget
        && v.model.document.get_model_by_name('nbprof_plot'));
    return view.model.document; }"""


@pytest.fixture(scope="module")
def page(lab, artifacts):
    from playwright.sync_api import sync_playwright

    url, root = lab
    notebook = nbformat.v4.new_notebook(metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}})
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    nbformat.write(notebook, root / NOTEBOOK)
    start_kernel_session(url, NOTEBOOK)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1000, "height": 900})
        page.set_default_timeout(60_000)
        open_notebook(page, url, NOTEBOOK)
        try:
            run_all_cells(page)
            wait_until_all_cells_ran(page)  # Lab may drop cells under load
            page.wait_for_function(f"() => document.querySelectorAll('{PANEL} .nbprof-widget')"
                                   ".length === 2", timeout=120_000)
            page.wait_for_function(READY_JS, timeout=60_000)
        except Exception:
            page.screenshot(path=str(artifacts / "panes_failed_start.png"))
            raise
        page.screenshot(path=str(artifacts / "panes_page_1000px.png"))
        yield page, root
        browser.close()


def _widget(page, n):
    widget = page.locator(f"{PANEL} .nbprof-widget").nth(n)
    widget.scroll_into_view_if_needed()
    return widget


def _tab(widget, title):
    widget.locator(f".lm-TabBar-tab:has-text('{title}')").first.click()


# Per column: the header cell's and the first row's cell's left and right edges, and whether the
# header's text fits its cell; and whether the table scrolls sideways.
_LAYOUT_JS = """(el) => {
    const ths = [...el.querySelectorAll('thead th')];
    const tds = [...el.querySelector('tbody tr').children];
    const edges = (cells) => cells.map(c => { const r = c.getBoundingClientRect();
                                              return [Math.round(r.left), Math.round(r.right)]; });
    return {scrolls: el.scrollWidth > el.clientWidth, width: el.clientWidth,
            heads: edges(ths), cells: edges(tds),
            clipped: ths.filter(th => th.scrollWidth > th.clientWidth + 1).map(th => th.textContent),
            cut: [...el.querySelectorAll('tbody td.num')].filter(td => td.scrollWidth > td.clientWidth)
                .map(td => td.textContent)};
}"""


@pytest.mark.parametrize("n, cuda", [(CPU, False), (GPU, True)], ids=["cpu_only_trace", "kernel_trace"])
def test_the_summary_fits_at_1000px_with_its_header_over_its_columns(page, artifacts, n, cuda):
    page, _ = page
    widget = _widget(page, n)
    _tab(widget, "Summary")
    table = widget.locator(".nbprof-summary-table")
    table.locator("tbody tr").first.wait_for()
    headers = table.locator("th").all_inner_texts()
    assert any("CUDA" in header for header in headers) is cuda
    layout = table.evaluate(_LAYOUT_JS)
    table.screenshot(path=str(artifacts / f"panes_summary_{'gpu' if cuda else 'cpu'}_1000px.png"))
    assert not layout["scrolls"], layout
    assert layout["heads"] == layout["cells"], layout  # every header sits over its column
    assert layout["clipped"] == [], layout  # and its title is readable, not cut
    assert layout["cut"] == [], layout  # no number cut short
    name = table.locator("tbody tr td:first-child").first
    assert name.get_attribute("title") == name.inner_text()  # the full name on hover


def test_a_details_link_selects_and_zooms_to_the_kernel_an_op_launched(page, artifacts):
    page, _ = page
    widget = _widget(page, GPU)
    x_width = f"""() => {{ const plot = ({_DOC_JS})({GPU}).get_model_by_name('nbprof_plot');
                           return plot.x_range.end - plot.x_range.start; }}"""
    before = page.evaluate(x_width)
    # What a tap on an addmm bar does: the timeline's selection source (jupyter_bokeh syncs it).
    page.evaluate(f"""() => {{ const doc = ({_DOC_JS})({GPU});
        const names = doc.get_model_by_name('nbprof_selection');
        names.data = {{event_id: [{_first_addmm()}], kind: ['cpu']}}; }}""")
    details = widget.locator(".nbprof-details")
    launched = details.locator(".nbprof-link-row:has-text('Launched') .nbprof-link").first
    launched.wait_for()
    kernel_name = launched.get_attribute("title")
    launched.click()
    page.wait_for_function(f"""() => {{ const s = ({_DOC_JS})({GPU}).get_model_by_name('nbprof_selection');
        return s.data.kind[0] === 'gpu'; }}""")
    details.locator(".nbprof-link-row:has-text('Launched by') .nbprof-link").wait_for()
    assert kernel_name.split("<")[0][:30] in details.inner_text()
    page.wait_for_function(f"() => ({x_width})() < {before} / 10")  # zoomed onto it
    text = details.inner_text()
    assert "µs" in text and " → " in text
    details.screenshot(path=str(artifacts / "panes_details_link.png"))


def _first_addmm() -> int:
    import numpy as np

    import nbprof

    trace = nbprof.load(SHARED / "gpu_alexnet_kineto.json.gz")
    return int(np.flatnonzero(trace.name_id == trace.names.index("aten::addmm"))[0])


def test_a_with_stack_event_shows_the_users_frames_and_its_cell(page, artifacts):
    page, _ = page
    widget = _widget(page, CPU)
    search = widget.locator(".nbprof-search input")
    search.fill("^aten::mm$")
    count = widget.locator(".nbprof-match-count")
    count.locator("text=/^20 events · 20 in view$/").wait_for()
    widget.locator("button[title='next match']").click()
    count.locator("text=/^1 of 20 · [0-9]+ in view$/").wait_for()
    details = widget.locator(".nbprof-details")
    details.locator("text=/cell \\[2\\], line 1: step/").wait_for()  # the def in the second cell
    text = details.inner_text()
    assert "cell [3]" in text  # the cell is the outermost frame: what ran it is not the user's
    assert "ipykernel_" not in text and "interactiveshell" not in text
    details.screenshot(path=str(artifacts / "panes_stack.png"))


def test_enter_in_search_steps_to_the_next_match_and_previous_starts_at_the_last(page):
    page, _ = page
    widget = _widget(page, CPU)
    search = widget.locator(".nbprof-search input")
    count = widget.locator(".nbprof-match-count")
    search.fill("^aten::relu$")
    count.locator("text=/^20 events · 20 in view$/").wait_for()
    search.press("Enter")
    count.locator("text=/^1 of 20 · /").wait_for()
    search.press("Enter")
    count.locator("text=/^2 of 20 · /").wait_for()
    search.fill("^aten::mm$")  # a new search: the first "previous" goes to its last match
    count.locator("text=/^20 events · /").wait_for()
    widget.locator("button[title='previous match']").click()
    count.locator("text=/^20 of 20 · /").wait_for()


def test_the_export_message_and_its_perfetto_link_sit_beside_the_button(page, artifacts):
    page, root = page
    widget = _widget(page, CPU)
    button = widget.locator(".nbprof-export")
    # The button at the bottom edge of the window, where a user scrolling down meets it: the
    # message that appears beside it must not grow out of view.
    button.evaluate("(b) => b.scrollIntoView({block: 'end'})")
    with page.expect_download(timeout=60_000):
        button.click()
    status = widget.locator(".nbprof-export-status")
    status.locator("text=/Wrote/").wait_for()
    link = status.locator("a[href='https://ui.perfetto.dev']")
    assert link.inner_text() == "https://ui.perfetto.dev"
    assert link.get_attribute("target") == "_blank"
    viewport = page.viewport_size
    box, button_box = status.bounding_box(), button.bounding_box()
    assert 0 <= box["y"] and box["y"] + box["height"] <= viewport["height"]  # in view
    assert box["x"] >= button_box["x"] + button_box["width"] - 1  # to the button's right
    assert box["y"] < button_box["y"] + button_box["height"]  # on its row
    assert (root / "cpu_trace.json.gz").exists()
    widget.screenshot(path=str(artifacts / "panes_export.png"))


def test_every_lane_off_says_so_and_the_details_stay(page, artifacts):
    page, _ = page
    widget = _widget(page, CPU)
    details = widget.locator(".nbprof-details")
    before = details.inner_text()
    groups = widget.locator(".nbprof-lane-group input")
    for index in range(groups.count()):
        groups.nth(index).uncheck()
    message = widget.locator(".nbprof-lanes-off")
    message.locator("text=Every lane is hidden").wait_for()
    widget.screenshot(path=str(artifacts / "panes_lanes_off.png"))
    page.wait_for_function(f"""() => !({_DOC_JS})({CPU}).get_model_by_name('nbprof_filter')
        .data.lane_visible.some(v => v)""")
    _tab(widget, "Details")
    assert details.inner_text() == before
    groups.first.check()
    message.locator("text=Every lane is hidden").wait_for(state="detached")


def _x_width(page, n):
    return page.evaluate(f"""() => {{ const plot = ({_DOC_JS})({n}).get_model_by_name('nbprof_plot');
                                     return plot.x_range.end - plot.x_range.start; }}""")


def test_stepping_to_a_hidden_match_zooms_onto_it(page, artifacts):
    page, _ = page
    widget = _widget(page, GPU)
    page.evaluate(f"""() => {{ const plot = ({_DOC_JS})({GPU}).get_model_by_name('nbprof_plot');
        plot.x_range.setv({{start: 0, end: 43.5e9}}); }}""")  # the whole 43 s trace
    before = _x_width(page, GPU)
    widget.locator(".nbprof-search input").fill("sgemm")
    count = widget.locator(".nbprof-match-count")
    count.locator("text=/GPU intervals · [0-9]+ in view$/").wait_for()
    widget.locator("button[title='next match']").click()
    # a µs kernel in a 43 s view is a sliver inside a merged block: the view zooms onto it
    page.wait_for_function(f"() => ({_DOC_JS})({GPU}).get_model_by_name('nbprof_plot').x_range"
                           f".end - ({_DOC_JS})({GPU}).get_model_by_name('nbprof_plot').x_range.start"
                           f" < {before} / 100")
    count.locator("text=/^1 of [0-9]+ · [1-9][0-9]* in view$/").wait_for()
    widget.screenshot(path=str(artifacts / "panes_search_zoomed.png"))


def test_an_area_selection_lists_what_ran_in_it(page, artifacts):
    import nbprof
    from nbprof.analysis.range_summary import range_summary

    page, _ = page
    widget = _widget(page, GPU)
    trace = nbprof.load(SHARED / "gpu_alexnet_kineto.json.gz")
    start, end = int(trace.gpu_start_ns[10]), int(trace.gpu_end_ns[40])
    # what a Shift+drag over the timeline sets (js/timeline_input.js), in the trace's own times
    page.evaluate(f"""() => {{ ({_DOC_JS})({GPU}).get_model_by_name('nbprof_area_selection').data =
        {{start_ns: [{start}], end_ns: [{end}]}}; }}""")
    details = widget.locator(".nbprof-details")
    details.locator("text=Selected range").wait_for()
    summary = range_summary(trace, start, end)
    text = details.inner_text()
    assert f"{summary.cpu.events:,} CPU events, {summary.gpu.events:,} GPU intervals" in text
    rows = details.locator("table.nbprof-range-gpu tbody tr")
    assert rows.count() == len(summary.gpu.rows)
    assert rows.first.locator("td").nth(1).inner_text() == f"{summary.gpu.rows[0].count:,}"
    details.screenshot(path=str(artifacts / "panes_area_selection.png"))


def test_the_overviews_gpu_work_table_sorts_and_a_row_click_zooms_to_its_kernels(page, artifacts):
    page, _ = page
    widget = _widget(page, GPU)
    _tab(widget, "Overview")
    table = widget.locator(".nbprof-kernels").first
    table.locator("tbody tr").first.wait_for()
    layout = table.evaluate(_LAYOUT_JS)
    assert not layout["scrolls"] and layout["heads"] == layout["cells"], layout
    # a name on several rows shows the call path that tells them apart; the whole on hover
    first = table.locator("tbody tr").first.locator("td").first
    name, path = first.inner_text().split("\n")[:2]
    assert "ampere_sgemm" in name and ("warmup" in path or "measure" in path)
    assert first.get_attribute("title").startswith(name + "\n")
    # a row click outlines its kernels on the timeline and zooms to them (3 calls in one forward)
    page.evaluate(f"""() => {{ const plot = ({_DOC_JS})({GPU}).get_model_by_name('nbprof_plot');
        plot.x_range.setv({{start: 0, end: 43.5e9}}); }}""")  # the whole 43 s trace
    before = _x_width(page, GPU)
    table.locator("tbody tr").first.click()
    page.wait_for_function(f"() => ({_DOC_JS})({GPU}).get_model_by_name('nbprof_highlight_gpu')"
                           ".data.gpu_row.length === 3")
    page.wait_for_function(f"() => {{ const p = ({_DOC_JS})({GPU}).get_model_by_name('nbprof_plot');"
                           f" return p.x_range.end - p.x_range.start < {before} / 100; }}")
    widget.screenshot(path=str(artifacts / "panes_overview_gpu_table.png"))
    # sorted by total GPU time; a header click sorts by calls, largest first
    calls = lambda: [int(t.replace(",", "")) for t in table.locator("tbody tr td:nth-child(2)").all_inner_texts()]
    assert calls() != sorted(calls(), reverse=True)
    table.locator("th", has_text="Calls").click()
    table.locator("th", has_text="Calls ▼").wait_for()
    assert calls() == sorted(calls(), reverse=True)
