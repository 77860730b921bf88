"""Text from a trace file is never HTML: a hostile file's strings (rank, world size, op, thread,
process, device and kernel names, args, stacks, the file's own name) show as text in the saved
page and in the widget's panes, and no script in them runs."""

import json
from html.parser import HTMLParser

import pytest

import nbprof
from nbprof.timeline import save_html

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
