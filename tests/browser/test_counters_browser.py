"""The counters / instants strip and the load notes (issue 7) in Debian's Chromium: drawn under
the main plot on its time axis, and text from the file shown as text (no script runs)."""

import json

import pytest

import nbprof
from nbprof.timeline import save_html

pytestmark = pytest.mark.browser

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
READY = ("() => window.Bokeh && Bokeh.documents.length && "
         "Bokeh.documents[0].get_model_by_name('nbprof_plot').tags.includes('nbprof-ready')")
HOSTILE = "<img src=x onerror=window.__pwned=1>"


def test_counters_instants_and_notes_draw_as_text(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    events = [
        {"ph": "X", "name": "step", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "i", "name": HOSTILE, "pid": 1, "tid": 1, "ts": 10, "s": "t"},
        {"ph": "C", "name": HOSTILE, "pid": 1, "ts": 0, "args": {"bytes": 10}},
        {"ph": "C", "name": HOSTILE, "pid": 1, "ts": 50, "args": {"bytes": 30}},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 5},  # unmatched: a note
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    page_path = save_html(nbprof.load(path), tmp_path / "page.html")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium",
                                             args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 800})
            errors = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(page_path.as_uri())
            page.wait_for_function(READY, timeout=30_000)
            drawn = page.evaluate("""() => {
              const doc = Bokeh.documents[0];
              const strip = doc.get_model_by_name('nbprof_counters');
              const view = Bokeh.index.find_one(strip);
              const steps = strip.renderers.filter(r => r.name === 'nbprof_counter');
              return {shared: strip.x_range === doc.get_model_by_name('nbprof_plot').x_range,
                      height: view.el.getBoundingClientRect().height,
                      // one series of 2 samples: 3 points of its step line
                      samples: steps.map(r => r.data_source.data.x.length),
                      // Bokeh draws each element in a shadow root
                      text: [...doc.all_models].filter(m => m.name === 'nbprof_load_note')
                        .map(m => { const el = Bokeh.index.find_one(m).el;
                                    return (el.shadowRoot || el).textContent; }).join(' | ')};
            }""")
            pwned = page.evaluate("() => window.__pwned")
            assert not errors, errors
        finally:
            browser.close()
    assert drawn["shared"] and drawn["height"] > 30 and drawn["samples"] == [3]
    assert "note: 1 B/E (begin/end) events found no partner" in drawn["text"]
    assert pwned is None
