"""The memory lanes in Debian's Chromium: a step curve per device under the threads, drawn for the
view only (a pixel's events merged), the peak marked, a click on an allocation selecting its op."""

import sys
import pathlib

import numpy as np
import pytest

from nbprof.model import MemoryEvents, Trace
from nbprof.timeline import save_html
from jupyter_lab import open_in_chromium

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "unit"))
from test_memory import MIB, two_thread_trace  # noqa: E402

pytestmark = pytest.mark.browser

READY = ("() => window.Bokeh && Bokeh.documents.length && "
         "Bokeh.documents[0].get_model_by_name('nbprof_plot').tags.includes('nbprof-ready') && "
         "Bokeh.documents[0].get_model_by_name('nbprof_memory_points').data.x.length > 0")
STATE = """() => {
  const doc = Bokeh.documents[0], get = (name) => doc.get_model_by_name(name);
  const points = get('nbprof_memory_points').data;
  return {points: points.x.length, what: [...points.what], level: [...points.level],
          device: [...points.device], op: [...points.op],
          line: get('nbprof_memory_line').data.x.length,
          peak: [...get('nbprof_memory_peak').data.text],
          shared: get('nbprof_memory').x_range === get('nbprof_plot').x_range,
          selection: [...get('nbprof_selection').data.event_id]};
}"""


def many_events_trace(n=200_000) -> Trace:
    """One op holding n allocations and frees of 1 KiB blocks in pairs; one 64 MiB block in the
    middle makes the peak."""
    time_ns = np.arange(n, dtype=np.int64) * 10 + 5
    size = np.where(np.arange(n) % 2 == 0, 1024, -1024)
    size[n // 2] = 64 * MIB
    size[n // 2 + 1] = -64 * MIB
    addr = np.arange(n) // 2
    return Trace.build(start_ns=[0], end_ns=[n * 10 + 10], thread=[0], name_id=[0],
                       names=["loop"], threads=[(1, 1, "MainThread")],
                       memory=MemoryEvents.build(time_ns=time_ns, bytes=size, addr=addr,
                                                 device=np.full(n, -1), thread=np.zeros(n)))


def open_page(playwright, path):
    browser, page, errors = open_in_chromium(playwright, path, height=900)
    page.wait_for_function(READY, timeout=30_000)
    return browser, page, errors


def test_the_memory_lane_draws_each_event_hovers_and_selects_its_op(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    trace = two_thread_trace()
    path = save_html(trace, tmp_path / "page.html")
    with sync_api.sync_playwright() as playwright:
        browser, page, errors = open_page(playwright, path)
        try:
            state = page.evaluate(STATE)
            # a click on the 64 MiB allocation of aten::add selects that op
            index = state["what"].index("+64.0 MiB in aten::add")
            page.evaluate(f"""() => {{
              const points = Bokeh.documents[0].get_model_by_name('nbprof_memory_points');
              points.selected.indices = [{index}];
            }}""")
            page.wait_for_function("() => Bokeh.documents[0].get_model_by_name('nbprof_selection')"
                                   ".data.event_id.length > 0", timeout=10_000)
            selected = page.evaluate(STATE)["selection"]
            assert not errors, errors
        finally:
            browser.close()
    assert state["shared"] and state["points"] == len(trace.memory)
    assert sorted(set(state["device"])) == ["CPU", "cuda:0"]
    assert state["peak"] == ["peak 128.0 MiB", "peak 10.0 MiB"]
    assert state["level"][index] == "128.0 MiB"
    add = trace.names.index("aten::add")
    assert selected == [int(np.flatnonzero(trace.name_id == add)[0])]


def test_a_wide_view_of_many_events_merges_them_per_pixel_and_keeps_the_peak(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    trace = many_events_trace()
    path = save_html(trace, tmp_path / "page.html")
    with sync_api.sync_playwright() as playwright:
        browser, page, errors = open_page(playwright, path)
        try:
            wide = page.evaluate(STATE)
            # zoomed in on 40 events: each drawn on its own
            page.evaluate("""() => {
              const plot = Bokeh.documents[0].get_model_by_name('nbprof_plot');
              plot.x_range.setv({start: 1000, end: 1400});
            }""")
            page.wait_for_function("() => Bokeh.documents[0].get_model_by_name("
                                   "'nbprof_memory_points').data.x.length < 100", timeout=10_000)
            narrow = page.evaluate(STATE)
            assert not errors, errors
        finally:
            browser.close()
    assert wide["points"] <= 1200 and wide["line"] <= 4 * 1200 + 4
    assert "64.0 MiB" in " ".join(wide["level"])  # the peak survives the merging
    assert any(what.startswith("1") and "events: +" in what for what in wide["what"])
    assert 38 <= narrow["points"] <= 42 and all(" in loop" in what for what in narrow["what"])


def test_a_page_past_its_budget_draws_the_reduced_level_with_its_counts(tmp_path):
    """memory_served.py's reduced level (no kernel here: the page's own level): the peak and
    every event's count survive, and a step the browser asks the kernel for is left as it is."""
    sync_api = pytest.importorskip("playwright.sync_api")
    trace = many_events_trace()
    path = save_html(trace, tmp_path / "page.html", max_embedded_events=100_000)
    with sync_api.sync_playwright() as playwright:
        browser, page, errors = open_page(playwright, path)
        try:
            wide = page.evaluate(STATE)
            asked = page.evaluate("""() => new Promise(r => setTimeout(() => r(
              Bokeh.documents[0].get_model_by_name('nbprof_memory_request').data), 300))""")
            assert not errors, errors
        finally:
            browser.close()
    assert wide["points"] <= 1200
    assert "64.0 MiB" in " ".join(wide["level"])
    counted = sum(int(what.split(" events")[0]) if " events" in what else 1
                  for what in wide["what"])
    assert counted == len(trace.memory)
    assert asked["x0"] and asked["width"]  # the view it rests on, for a kernel to answer
