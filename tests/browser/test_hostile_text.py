"""Text from a trace file is never HTML: a hostile file's strings (rank, world size, op, thread,
process, device and kernel names, args, stacks, the file's own name) show as text in the saved
page and in the widget's panes, and no script in them runs."""

import json
from html.parser import HTMLParser

import pytest

import nbprof
from nbprof.timeline import save_html

from jupyter_lab import open_in_chromium
from test_timeline_browser import CHROMIUM_ARGS, READY

IMG = "<img src=x onerror=window.__pwned=1>"
SCRIPT = "</script><script>window.__pwned=2</script>"
HOSTILE = IMG + SCRIPT


def hostile_file(folder):
    name = folder / f"{IMG}.json"
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "proc " + HOSTILE}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "thr " + HOSTILE}},
        {"ph": "X", "cat": "cpu_op", "name": "op " + HOSTILE, "pid": 1, "tid": 7, "ts": 0,
         "dur": 400, "args": {"External id": 1, HOSTILE: HOSTILE, "Input Dims": [[2, 2]],
                              "Call stack": "frame " + HOSTILE}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 7,
         "ts": 10, "dur": 20, "args": {"correlation": 5, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": "kernel " + HOSTILE, "pid": 0, "tid": 7, "ts": 50,
         "dur": 300, "args": {"correlation": 5, "device": 0, "stream": 7, "grid": [1, 1, 1]}},
        {"ph": "i", "s": "t", "name": "mark " + HOSTILE, "pid": 1, "tid": 7, "ts": 5},
        {"ph": "C", "name": "mem " + HOSTILE, "pid": 1, "ts": 1, "args": {HOSTILE: 3}},
    ]
    name.write_text(json.dumps({
        "traceEvents": events,
        "distributedInfo": {"rank": IMG, "world_size": SCRIPT},
        "deviceProperties": [{"id": 0, "name": "dev " + HOSTILE}],
    }))
    return name


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return nbprof.load(hostile_file(tmp_path_factory.mktemp("hostile")))


class _Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


def elements(html: str) -> list[str]:
    parser = _Elements()
    parser.feed(html)
    return parser.tags


@pytest.mark.parametrize("rank_in_meta", [False, True])
def test_the_saved_page_runs_no_script_from_the_file(trace, tmp_path, artifacts, rank_in_meta):
    sync_api = pytest.importorskip("playwright.sync_api")
    if rank_in_meta:  # a recording's or nbprof file's meta, which the page's header shows
        trace.meta.update(rank=IMG, world_size=SCRIPT)
    page_path = save_html(trace, tmp_path / "hostile.html")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.goto(page_path.as_uri())
        page.wait_for_function(READY, timeout=30_000)
        plot = page.locator(".bk-Figure, .bk-figure").first
        box = plot.bounding_box()
        for fx in (0.1, 0.3, 0.5, 0.7, 0.9):  # hover and click across the lanes
            for fy in (0.2, 0.4, 0.6, 0.8):
                page.mouse.move(box["x"] + box["width"] * fx, box["y"] + box["height"] * fy)
                page.mouse.click(box["x"] + box["width"] * fx, box["y"] + box["height"] * fy)
        page.wait_for_timeout(300)
        page.screenshot(path=str(artifacts / "hostile_page.png"))
        assert page.evaluate("() => window.__pwned") is None
        assert page.locator("img[src=x]").count() == 0
        # The note saying the hostile rank was ignored shows it as text (locators see through
        # Bokeh's shadow roots).
        assert page.get_by_text("is not a rank number", exact=False).first.inner_text().count(
            "<img src=x") == 1
        browser.close()


def test_the_widget_panes_escape_the_file_text(trace):
    from nbprof.notebook.details import details_html, gpu_details_html

    op = next(event for event in trace.events if event.name.startswith("op "))
    from nbprof.notebook.static import static_bundle
    from nbprof.notebook.summary import summary_html
    from nbprof.timeline import Timeline

    panes = [details_html(trace, op.id), gpu_details_html(trace, 0), summary_html(trace)]
    # The saved copy a reopened notebook shows: its markup outside the embedded JSON.
    static = static_bundle(Timeline(trace), sort_by="cpu_time_total", note=HOSTILE)[1]["text/html"]
    outside_json = static.split("<script type='application/json'")[0] + static.split("</script>")[-1]
    panes.append(outside_json)
    assert SCRIPT not in static  # nowhere, the embedded JSON included (it writes <\\/script>)
    widget = nbprof.widget(trace)
    bundle = widget._repr_mimebundle_() if hasattr(widget, "_repr_mimebundle_") else {}
    html_parts = panes + [value for key, value in (bundle or {}).items()
                          if key == "text/html" and isinstance(value, str)]
    for child in _walk(widget):
        value = getattr(child, "value", None)
        if isinstance(value, str) and type(child).__name__ == "HTML":
            html_parts.append(value)
    assert len(html_parts) > 3
    for html in html_parts:
        assert "img" not in elements(html), html
        assert "<script>window.__pwned" not in html
    assert any("&lt;img src=x" in html for html in html_parts)


def _walk(widget):
    yield widget
    for child in getattr(widget, "children", ()):
        yield from _walk(child)


# Names that end or re-open a <script> element, or a comment, or a line in JavaScript: each one
# must stay inside the JSON it is in. "<!--<script>" beat the copy's old "</" escaping: the
# element ran on past its end tag and swallowed every later cell of an exported notebook.
# In groups: a "-->" later in the same JSON would end the comment and hide the harm.
SCRIPT_BREAKERS = [["<!--<script>", "a\u2028b\u2029c"],
                   ["<!-- open", "<script>window.__pwned=4</script>", "</SCRIPT\t>"],
                   ["</script><script>window.__pwned=3</script>", "]]> --> <![CDATA[",
                    "&lt;x&gt; & <b>b</b>"]]

# Every Bokeh document of the page: drawn, and the names its timeline holds.
DOCUMENT_NAMES = """() => Bokeh.documents.map((doc) => {
  const plot = doc.get_model_by_name('nbprof_plot');
  const rendered = doc.get_model_by_name('nbprof_rendered');
  return {ready: plot.tags.includes('nbprof-ready'),
          names: rendered.__nbprof_info ? rendered.__nbprof_info.names : null};
})"""


def script_breaking_trace(names):
    import numpy as np

    from nbprof.model import Trace

    n = len(names)
    return Trace.build(start_ns=np.arange(n) * 1000, end_ns=np.arange(n) * 1000 + 800,
                       thread=np.zeros(n, np.int32), name_id=np.arange(n), names=list(names),
                       threads=[nbprof.Thread(1, 1, "main")])


def test_an_exported_notebook_keeps_every_cell_after_a_copy_with_script_breaking_names(tmp_path):
    """As `jupyter nbconvert --to html` lays out a notebook: cells one after another, each
    profiled cell's output the static copy (the first one carrying BokehJS)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    from nbprof.notebook import static
    from nbprof.timeline import Timeline

    static._bokehjs_cell = ""  # as in a fresh kernel: the first copy carries BokehJS
    cells = []
    for index, names in enumerate(SCRIPT_BREAKERS):
        copy = static.static_bundle(Timeline(script_breaking_trace(names)),
                                    sort_by="cpu_time_total")[1]["text/html"]
        cells.append(f"<div class='cell'><div class='jp-OutputArea-child'>{copy}</div></div>"
                     f"<p class='after-cell'>text of cell {index + 1}</p>")
    page_path = tmp_path / "exported.html"
    page_path.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>" +
                         "".join(cells) +
                         "<p id='last'>the end of the notebook</p></body></html>")
    with sync_api.sync_playwright() as playwright:
        browser, page, errors = open_in_chromium(playwright, page_path)
        page.wait_for_function("() => window.Bokeh && Bokeh.documents.length === 3 && "
                               "Bokeh.documents.every((doc) => doc.get_model_by_name("
                               "'nbprof_plot').tags.includes('nbprof-ready'))", timeout=60_000)
        assert page.locator("p.after-cell").all_inner_texts() == [
            "text of cell 1", "text of cell 2", "text of cell 3"]
        assert page.locator("#last").inner_text() == "the end of the notebook"
        assert page.locator(".nbprof-static").count() == 3
        documents = page.evaluate(DOCUMENT_NAMES)  # each copy drew, with every name
        assert [sorted(document["names"]) for document in documents] == [
            sorted(names) for names in SCRIPT_BREAKERS]
        assert all(document["ready"] for document in documents)
        summaries = page.locator(".nbprof-static details").all_inner_texts()
        assert len(summaries) == 3 and all(names[0] in text for names, text in zip(
            SCRIPT_BREAKERS, summaries))
        assert page.evaluate("() => window.__pwned") is None and not errors, errors
        browser.close()


def test_the_standalone_page_keeps_script_breaking_names(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    every_name = sum(SCRIPT_BREAKERS, [])
    page_path = save_html(script_breaking_trace(every_name), tmp_path / "names.html")
    with sync_api.sync_playwright() as playwright:
        browser, page, errors = open_in_chromium(playwright, page_path)
        page.wait_for_function(READY, timeout=30_000)
        (document,) = page.evaluate(DOCUMENT_NAMES)
        assert document["ready"] and sorted(document["names"]) == sorted(every_name)
        assert page.evaluate("() => window.__pwned") is None and not errors, errors
        browser.close()
