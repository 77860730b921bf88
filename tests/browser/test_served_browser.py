"""Served level of detail in Chromium: a page past its embedding budget draws its coarse level,
asks for the view it settles on, and once given the kernel's answer draws exactly what a page
with every event draws (the same bars, names and ids; highlights of events in view too)."""

import pytest

from nbprof.timeline import Timeline
from served_trace import hand_built_trace
from test_timeline_browser import browser, open_page  # noqa: F401 (a fixture)

pytestmark = pytest.mark.browser

DRAWN = ("() => { const d = nb('nbprof_rendered').data; return {left: [...d.left], "
         "right: [...d.right], bottom: [...d.bottom], count: [...d.count], id: [...d.id], "
         "gpu: [...d.gpu], name: [...d.name], color: [...d.color], alpha: [...d.alpha]}; }")
FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
MARKS = "() => [...nb('nbprof_marks').data.left]"


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("served")
    trace = hand_built_trace()
    full = Timeline(trace, max_embedded_events=None)
    coarse = Timeline(trace, max_embedded_events=100)
    return full.save(folder / "full.html"), coarse, coarse.save(folder / "coarse.html")


def answer_the_request(page, served):
    """Do what the kernel does through jupyter_bokeh: read the browser's view request, write
    the answer into served_answer."""
    page.wait_for_function("() => { const d = nb('nbprof_served_request').data; return d.key && "
                           "d.key.length && d.key[0] === [nb('nbprof_plot').x_range.start, "
                           "nb('nbprof_plot').x_range.end, nb('nbprof_plot').inner_width, 0]"
                           ".join('|'); }", timeout=10_000)
    request = page.evaluate("() => { const d = nb('nbprof_served_request').data; "
                            "return Object.fromEntries(Object.entries(d).map(([k, v]) => [k, [...v]])); }")
    answer = served.answer(request)
    answered = page.evaluate("() => nb('nbprof_rendered').__nbprof.answers || 0")
    page.evaluate("(answer) => { nb('nbprof_served_answer').data = answer; }", answer)
    page.wait_for_function(f"() => (nb('nbprof_rendered').__nbprof.answers || 0) > {answered}")
    page.evaluate(FRAMES)


@pytest.mark.parametrize("view", [None, (150_050.5, 260_000.25), (151_000.0, 152_500.0)])
def test_served_answer_draws_what_the_full_page_draws(browser, pages, view):  # noqa: F811
    full_path, coarse, coarse_path = pages
    full, served_page = open_page(browser, full_path), open_page(browser, coarse_path)
    if view:
        for page in (full, served_page):
            page.evaluate("([start, end]) => nbSetX(start, end)", list(view))
            page.evaluate(FRAMES)
    expected = full.evaluate(DRAWN)
    before = served_page.evaluate(DRAWN)
    assert sum(before["count"]) > 0 and before != expected  # the coarse level: fewer, merged bars
    answer_the_request(served_page, coarse.served)
    assert served_page.evaluate(DRAWN) == expected
    # a highlight of events in view marks the same bars on both pages (trace ids, not local ones)
    ids = [i for i in expected["id"] if i >= 0][:5]
    for page in (full, served_page):
        page.evaluate("(ids) => { nb('nbprof_highlight').data = {event_id: ids}; }", ids)
    assert sorted(served_page.evaluate(MARKS)) == sorted(full.evaluate(MARKS)) and ids
    full.close(), served_page.close()


def test_coarse_page_alone_keeps_its_level_and_note(browser, pages):  # noqa: F811
    _, coarse, coarse_path = pages
    page = open_page(browser, coarse_path)
    assert "showing" in page.evaluate("() => nb('nbprof_note').html")
    # the coarser levels came along, and the whole view is drawn from the coarsest that fits
    levels = page.evaluate("() => nb('nbprof_rendered').__nbprof.coarser.map((l) => l.nsPerPx)")
    assert levels and levels == sorted(levels)
    assert len(levels) == len(coarse.served.page()[1]["coarser"])
    page.evaluate("() => nbSetX(100000, 400000)")
    page.evaluate(FRAMES)
    drawn = page.evaluate(DRAWN)
    assert drawn["left"] and all(right >= left for left, right in zip(drawn["left"], drawn["right"]))
    page.close()
