"""The quickstart notebook in a real JupyterLab, driven by Playwright and Debian's Chromium: the
%%cudaprof widget draws its timeline, search counts matches, a summary row highlights its op's
events, and Export writes the file beside the notebook and delivers a browser download."""

import pathlib
import shutil
import time

import pytest
from jupyter_lab import (CHROMIUM, CHROMIUM_ARGS, PANEL, READY_JS, open_notebook, run_all_cells,
                         start_kernel_session, wait_until_all_cells_ran)

import nbprof
from nbprof.formats.chrome.check import check_chrome_trace

pytestmark = pytest.mark.browser

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOK = "quickstart.ipynb"


@pytest.fixture(scope="module")
def page(lab, artifacts):
    from playwright.sync_api import sync_playwright

    url, root = lab
    shutil.copy(ROOT / "notebooks" / NOTEBOOK, root / NOTEBOOK)
    start_kernel_session(url, NOTEBOOK)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
        page = context.new_page()
        page.set_default_timeout(60_000)
        open_notebook(page, url, NOTEBOOK)
        try:
            run_all_cells(page)
            # Under load Lab may run the first cells and drop the rest: they are run again
            wait_until_all_cells_ran(page)
            page.wait_for_selector(f"{PANEL} .nbprof-widget", timeout=120_000)
            page.wait_for_function(READY_JS, timeout=60_000)
        except Exception:
            page.screenshot(path=str(artifacts / "notebook_browser_failed_start.png"))
            raise
        page.locator(f"{PANEL} .nbprof-widget").first.scroll_into_view_if_needed()
        yield page, root
        page.screenshot(path=str(artifacts / "notebook_browser_final.png"), full_page=False)
        browser.close()


def _source_ids(page, name):
    """The "event_id" column of a named ColumnDataSource, as the browser has it."""
    return page.evaluate("""(name) => {
        for (const doc of Bokeh.documents) {
            const source = doc.get_model_by_name(name);
            if (source) return Array.from(source.data.event_id || []);
        }
        return null;
    }""", name)


def test_timeline_is_drawn(page, artifacts):
    page, _ = page
    widget = page.locator(f"{PANEL} .nbprof-widget").first
    widget.screenshot(path=str(artifacts / "notebook_widget.png"))
    drawn = page.evaluate("""() => {
        for (const doc of Bokeh.documents) {
            const bars = doc.get_model_by_name("nbprof_rendered");
            if (bars) return bars.data.left.length;
        }
        return 0;
    }""")
    assert drawn > 0  # the rendered source holds bars: the timeline drew events
    canvas_pixels = page.evaluate("""() => {
        // Bokeh draws inside shadow roots: walk them to find the canvases.
        const canvases = [];
        const walk = (node) => {
            for (const child of node.querySelectorAll('*')) {
                if (child.tagName === 'CANVAS') canvases.push(child);
                if (child.shadowRoot) walk(child.shadowRoot);
            }
        };
        walk(document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden) .nbprof-widget'));
        let inked = 0;
        for (const canvas of canvases) {
            const ctx = canvas.getContext('2d'); if (!ctx || !canvas.width) continue;
            const pixels = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
            for (let i = 0; i < pixels.length; i += 4) if (pixels[i + 3] && pixels[i] < 200) inked++;
        }
        return inked;
    }""")
    assert canvas_pixels > 1000


def test_search_updates_the_match_count_and_highlights(page, artifacts):
    page, _ = page
    search = page.locator(f"{PANEL} .nbprof-search input").first
    search.fill("")
    search.type("relu", delay=30)
    count = page.locator(f"{PANEL} .nbprof-match-count").first
    # Each keystroke is a search ("r", "re", ...): wait until the count and the outlines settle.
    matches = _settled_count(page, count)
    assert matches > 0
    search.fill("^aten::addmm$")  # a regex: 3 Linear layers x 3 training steps
    count.locator("text=/^9 events · 9 in view$/").wait_for()
    page.wait_for_function(f"() => {_SOURCE_LEN_JS}('nbprof_highlight') === 9")
    # A zoom in the page onto the first third of the trace (one of the 3 steps' worth of time):
    # the kernel hears the new range and counts the matches in it.
    page.evaluate("""() => { const doc = [...Bokeh.index.roots].find(view =>  // the live widget's
            view.el.closest('.nbprof-widget') && view.model.document.get_model_by_name("nbprof_plot")
        ).model.document;  // not a static copy's, nor the Overview tab's
        const plot = doc.get_model_by_name("nbprof_plot");
        const {start, end} = plot.x_range; plot.x_range.setv({start, end: start + (end - start) / 3}); }""")
    count.locator("text=/^9 events · [0-8] in view$/").wait_for()
    page.locator(f"{PANEL} .nbprof-widget button[title='next match']").first.click()
    count.locator("text=/^1 of 9 · [1-9] in view$/").wait_for()  # stepped to, zoomed onto
    page.locator(f"{PANEL} .nbprof-widget").first.screenshot(path=str(artifacts / "notebook_search.png"))


def _settled_count(page, count, timeout_s=30.0) -> int:
    """The match count once it has stopped changing and the timeline outlines that many events."""
    deadline, last, stable = time.monotonic() + timeout_s, None, 0
    while time.monotonic() < deadline:
        text = count.inner_text().strip()
        outlined = page.evaluate(f"() => {_SOURCE_LEN_JS}('nbprof_highlight')")
        number = int(text.split()[0].replace(",", "")) if text[:1].isdigit() else None
        state = (number, outlined)
        stable = stable + 1 if state == last and number == outlined else 0
        if stable >= 4:
            return number
        last = state
        time.sleep(0.25)
    raise AssertionError(f"the match count never settled: {last}")


# The notebook shows two widgets (the profiled cell's and a reloaded trace's), one Bokeh document
# each; only the first is driven, so the longest list across documents is the one that changed.
_SOURCE_LEN_JS = """((name) => Math.max(-1, ...Bokeh.documents.map(doc => {
    const s = doc.get_model_by_name(name); return s ? (s.data.event_id || []).length : -1; })))"""


def test_clicking_a_summary_row_highlights_that_ops_events(page, artifacts):
    page, _ = page
    page.locator(f"{PANEL} .nbprof-widget .lm-TabBar-tab:has-text('Summary')").first.click()
    table = page.locator(f"{PANEL} .nbprof-summary-table").first
    table.locator("tr[data-name='aten::addmm']").click()
    count = page.locator(f"{PANEL} .nbprof-match-count").first
    count.locator("text=/events of aten::addmm/").wait_for()
    expected = int(count.inner_text().split()[0].replace(",", ""))
    assert expected == 9  # 3 Linear layers x 3 training steps
    page.wait_for_function(f"() => {_SOURCE_LEN_JS}('nbprof_highlight') === {expected}")
    page.locator(f"{PANEL} .nbprof-widget").first.screenshot(path=str(artifacts / "notebook_summary_click.png"))


def _calls_column(table) -> list[int]:
    return [int(text) for text in table.locator("tbody tr td:last-child").all_inner_texts()]


def test_a_header_click_sorts_the_summary_both_ways_keeping_the_selected_row(page, artifacts):
    page, _ = page
    page.locator(f"{PANEL} .nbprof-widget .lm-TabBar-tab:has-text('Summary')").first.click()
    table = page.locator(f"{PANEL} .nbprof-summary-table").first
    headers = table.locator("th").all_inner_texts()
    assert not any("CUDA" in header for header in headers)  # a CPU-only trace
    table.locator("tr[data-name='aten::addmm']").click()
    table.locator("th[data-key='count']").click()
    page.wait_for_function("(t) => t.querySelector(\"th[data-key='count']\").textContent.includes('▼')",
                           arg=table.element_handle())
    calls = _calls_column(table)
    assert calls == sorted(calls, reverse=True) and calls[0] > calls[-1]
    table.locator("th[data-key='count']").click()  # again: the other way
    page.wait_for_function("(t) => t.querySelector(\"th[data-key='count']\").textContent.includes('▲')",
                           arg=table.element_handle())
    assert _calls_column(table) == sorted(calls)
    assert table.locator("tr.selected").get_attribute("data-name") == "aten::addmm"
    name = table.locator("tr[data-name] td:first-child").first
    assert name.get_attribute("title") == name.inner_text()  # the full name on hover
    # no horizontal scrollbar at this width (the page is 1400 px wide, the table narrower)
    assert table.evaluate("(t) => t.scrollWidth <= t.clientWidth")
    table.screenshot(path=str(artifacts / "notebook_summary_sorted.png"))


def test_export_writes_beside_the_notebook_and_downloads(page, artifacts, tmp_path):
    page, root = page
    before = set(root.glob("*.json.gz"))
    with page.expect_download(timeout=60_000) as download_info:
        page.locator(f"{PANEL} .nbprof-export").first.click()
    download = download_info.value
    assert download.suggested_filename == "trace.json.gz"  # named after -o trace
    downloaded = tmp_path / download.suggested_filename
    download.save_as(downloaded)
    status = page.locator(f"{PANEL} .nbprof-export-status").first
    status.locator("text=/Wrote/").wait_for()
    assert "ui.perfetto.dev" in status.inner_text()
    written = set(root.glob("*.json.gz")) - before
    assert [path.name for path in written] == ["trace.json.gz"]
    assert downloaded.read_bytes() == (root / "trace.json.gz").read_bytes()
    assert check_chrome_trace(str(downloaded)) == []
    trace = nbprof.load(downloaded)
    assert len(trace) > 100 and "aten::addmm" in trace.names
    page.locator(f"{PANEL} .nbprof-widget").first.screenshot(path=str(artifacts / "notebook_export.png"))


def test_a_selection_in_the_browser_reaches_the_details_pane(page, artifacts):
    page, _ = page
    # What the timeline's tap handler does in the page; the kernel hears it through jupyter_bokeh.
    page.evaluate("""() => { for (const doc of Bokeh.documents) {
        const selection = doc.get_model_by_name("nbprof_selection");
        if (selection) selection.data = {event_id: [0], kind: ["cpu"]}; } }""")
    details = page.locator(f"{PANEL} .nbprof-details").first
    details.locator("text=Parents").wait_for()  # the pane switched from its hint to an event
    assert "Thread" in details.inner_text() and "MainThread" in details.inner_text()
    page.locator(f"{PANEL} .nbprof-widget").first.screenshot(path=str(artifacts / "notebook_details.png"))


def test_the_minimum_duration_filter_thins_the_timeline(page, artifacts):
    page, _ = page
    # bars drawn per timeline (document); only the first widget's filter changes
    count_bars = """() => Bokeh.documents.map(doc => doc.get_model_by_name("nbprof_rendered"))
        .filter(bars => bars).map(bars => bars.data.left.length)"""
    before = page.evaluate(count_bars)
    box = page.locator(f"{PANEL} .nbprof-min-duration input").first
    box.fill("1000")  # hide everything shorter than 1 ms
    box.press("Enter")
    page.wait_for_function(f"() => ({count_bars})().some((n, i) => n < {before}[i])")
    page.locator(f"{PANEL} .nbprof-widget").first.screenshot(path=str(artifacts / "notebook_min_duration.png"))
    box.fill("0")
    box.press("Enter")
    page.wait_for_function(f"(before) => JSON.stringify(({count_bars})()) === JSON.stringify(before)",
                           arg=before)
