"""The timeline page in Debian's Chromium: drawn, lanes, hover, wheel zoom, level of detail, links.

Models are read through ``Bokeh.documents`` / ``Bokeh.index`` (Bokeh draws text on a canvas).
"""

import numpy as np
import pytest
from PIL import Image

import nbprof
from nbprof.events import Trace
from nbprof.timeline import Timeline, save_html

pytestmark = pytest.mark.browser

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
READY = ("() => window.Bokeh && Bokeh.documents.length && "
         "Bokeh.documents[0].get_model_by_name('nbprof_plot').tags.includes('nbprof-ready')")
# Page helpers: the models by name, and a data point's position on the screen.
HELPERS = """
window.nb = (name) => Bokeh.documents[0].get_model_by_name(name);
window.nbScreen = (x, y) => {
  const view = Bokeh.index.find_one(nb('nbprof_plot'));
  const rect = view.el.getBoundingClientRect();
  return [rect.left + view.frame.x_scale.compute(x), rect.top + view.frame.y_scale.compute(y)];
};
window.nbSetX = (start, end) => nb('nbprof_plot').x_range.setv({start, end});
true;  // (an expression that ends in a function would be called by Playwright)
"""


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def open_page(browser, path):
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(path.as_uri())
    page.wait_for_function(READY, timeout=30_000)
    page.evaluate(HELPERS)
    assert not errors, errors
    return page


@pytest.fixture(scope="module")
def alexnet(shared_traces, tmp_path_factory):
    trace = nbprof.load(shared_traces / "gpu_alexnet_kineto.json.gz")
    path = save_html(trace, tmp_path_factory.mktemp("pages") / "alexnet.html")
    return trace, path


def rendered(page):
    return page.evaluate("() => { const d = nb('nbprof_rendered').data; return {id: [...d.id], "
                         "gpu: [...d.gpu], count: [...d.count], name: [...d.name], "
                         "left: [...d.left], right: [...d.right], top: [...d.top]}; }")


def test_alexnet_page_is_drawn_with_its_threads_and_streams(browser, alexnet, artifacts):
    trace, path = alexnet
    page = open_page(browser, path)
    labels = page.evaluate("() => [...nb('nbprof_plot').left[0].major_label_overrides.values()]")
    assert labels == Timeline(trace).lanes
    for device, stream in set(zip(trace.gpu_device.tolist(), trace.gpu_stream.tolist())):
        assert f"GPU {device} stream {stream}" in labels
    for thread in {trace.threads[t] for t in np.unique(trace.thread)}:
        assert any(thread.name in label for label in labels)
    shot = artifacts / "timeline_alexnet.png"
    page.screenshot(path=shot)
    box = page.evaluate("() => { const r = Bokeh.index.find_one(nb('nbprof_plot')).el"
                        ".getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }")
    pixels = np.asarray(Image.open(shot).convert("RGB").crop(tuple(int(v) for v in box)))
    coloured = (np.ptp(pixels.astype(int), axis=2) > 60).mean()  # saturated pixels: bars, not text
    assert coloured > 0.05, f"the plot looks blank ({coloured:.1%} coloured pixels)"
    assert page.evaluate("() => nb('nbprof_overview_bars').data.left.length") > len(labels)
    page.close()


def test_hovering_a_kernel_shows_its_name(browser, alexnet, artifacts):
    trace, path = alexnet
    page = open_page(browser, path)
    kernel = int(np.flatnonzero(trace.gpu_kind == 1)[0])
    name = trace.names[trace.gpu_name_id[kernel]]
    start, end = int(trace.gpu_start_ns[kernel]), int(trace.gpu_end_ns[kernel])
    origin = min(trace.start_ns.min(), trace.gpu_start_ns.min())
    page.evaluate(f"nbSetX({start - origin - (end - start)}, {end - origin + (end - start)})")
    bars = rendered(page)
    k = next(i for i in range(len(bars["id"])) if bars["gpu"][i] and bars["id"][i] == kernel)
    x, y = page.evaluate(f"nbScreen({(bars['left'][k] + bars['right'][k]) / 2}, {bars['top'][k] - 0.4})")
    page.mouse.move(x - 5, y)
    page.mouse.move(x, y)
    page.wait_for_timeout(300)
    page.screenshot(path=artifacts / "timeline_hover_kernel.png")
    tooltip = page.get_by_text(name, exact=True)
    tooltip.first.wait_for(state="visible", timeout=5000)
    # the start to the µs, 30 s into the trace: enough to tell neighbouring kernels apart
    assert start - origin >= 1e9
    assert page.get_by_text(f"{(start - origin) / 1e9:.6f} s", exact=True).first.is_visible()
    if trace.gpu_launch[kernel] >= 0:  # hovering a kernel also draws the link from its launch
        assert page.evaluate("() => nb('nbprof_links_focus').data.x0.length") == 1
    page.close()


def test_clicking_an_op_draws_links_to_its_kernels(browser, alexnet, artifacts):
    trace, path = alexnet
    page = open_page(browser, path)
    launches = trace.gpu_launch[trace.gpu_launch >= 0]
    op = int(launches[0])
    kernels = int((trace.gpu_launch == op).sum())
    origin = min(trace.start_ns.min(), trace.gpu_start_ns.min())
    rows = trace.gpu_launch == op
    lo = min(trace.start_ns[op], trace.gpu_start_ns[rows].min()) - origin
    hi = max(trace.end_ns[op], trace.gpu_end_ns[rows].max()) - origin
    page.evaluate(f"nbSetX({lo - (hi - lo) * 0.1}, {hi + (hi - lo) * 0.1})")
    bars = rendered(page)
    k = next(i for i in range(len(bars["id"])) if not bars["gpu"][i] and bars["id"][i] == op)
    x, y = page.evaluate(f"nbScreen({(bars['left'][k] + bars['right'][k]) / 2}, {bars['top'][k] - 0.4})")
    page.mouse.click(x, y)
    page.wait_for_function("() => nb('nbprof_selection').data.event_id.length > 0", timeout=5000)
    assert page.evaluate("() => [...nb('nbprof_selection').data.event_id]") == [op]
    links = page.evaluate("() => nb('nbprof_links_focus').data.x0.length")
    assert links >= kernels >= 1
    page.mouse.move(5, 5)  # away, so only the selection's links stay
    page.screenshot(path=artifacts / "timeline_click_links.png")
    page.close()


def busy_trace(n=60_000, seed=0):
    """Four threads of back-to-back 1-20 µs ops (and a GPU stream): far more than a view can draw."""
    rng = np.random.default_rng(seed)
    durations = rng.integers(1_000, 20_000, n)
    thread = np.arange(n) % 4
    start = np.zeros(n, np.int64)
    for t in range(4):  # each thread's ops one after another, a small gap between
        mine = thread == t
        start[mine] = np.cumsum(durations[mine] + 200) - durations[mine]
    return Trace.build(start_ns=start, end_ns=start + durations, thread=thread,
                       name_id=rng.integers(0, 30, n), names=[f"op{i}" for i in range(30)],
                       threads=[(1, 100 + t, f"worker{t}") for t in range(4)],
                       gpu_start_ns=start[::10] + 500, gpu_end_ns=start[::10] + 1500,
                       gpu_name_id=np.zeros(n // 10), gpu_device=np.zeros(n // 10),
                       gpu_stream=np.full(n // 10, 7), gpu_launch=np.arange(0, n, 10),
                       gpu_kind=np.ones(n // 10))


def test_wheel_zoom_swaps_in_every_event_in_view(browser, tmp_path, artifacts):
    trace = busy_trace()
    page = open_page(browser, save_html(trace, tmp_path / "busy.html"))
    whole = rendered(page)
    assert len(whole["id"]) < len(trace) / 4  # zoomed out: busy blocks, not 60k glyphs
    assert max(whole["count"]) > 50
    # Clicking a busy block zooms to it (where its events are drawn one by one).
    page.evaluate("nbSetX(0, 20_000_000)")
    blocks = rendered(page)
    block = int(np.argmax(blocks["count"]))
    assert blocks["count"][block] > 1
    x, y = page.evaluate(f"nbScreen({(blocks['left'][block] + blocks['right'][block]) / 2}, "
                         f"{blocks['top'][block] - 0.4})")
    page.mouse.click(x, y)
    page.wait_for_function("() => { const r = nb('nbprof_plot').x_range; return r.end - r.start < "
                           f"{(blocks['right'][block] - blocks['left'][block]) * 1.2 + 10}; }}")
    page.evaluate(f"nbSetX(0, {trace.duration_ns})")
    x_before = page.evaluate("() => [nb('nbprof_plot').x_range.start, nb('nbprof_plot').x_range.end]")
    x, y = page.evaluate(f"nbScreen({(x_before[0] + x_before[1]) / 2}, 0.5)")
    page.mouse.move(x, y)
    for _ in range(6):
        page.mouse.wheel(0, -400)
        page.wait_for_timeout(50)
    page.wait_for_timeout(300)
    x_after = page.evaluate("() => [nb('nbprof_plot').x_range.start, nb('nbprof_plot').x_range.end]")
    assert x_after[1] - x_after[0] < (x_before[1] - x_before[0]) / 2
    # ... and the wheel swapped in finer detail: smaller blocks, more events drawn as themselves
    zoomed = rendered(page)
    assert max(zoomed["count"]) < max(whole["count"])
    assert zoomed["count"].count(1) > whole["count"].count(1)
    # Zoomed in to a window a few hundred µs wide: every event in it is drawn as itself.
    middle = trace.duration_ns // 2
    window = (middle, middle + 400_000)
    page.evaluate(f"nbSetX({window[0]}, {window[1]})")
    bars = rendered(page)
    page.screenshot(path=artifacts / "timeline_zoomed_in.png")
    in_view = np.flatnonzero((trace.start_ns <= window[1]) & (trace.end_ns >= window[0]))
    gpu_in_view = np.flatnonzero((trace.gpu_start_ns <= window[1]) & (trace.gpu_end_ns >= window[0]))
    assert len(in_view) > 50 and set(bars["count"]) == {1}
    drawn_cpu = sorted(i for i, gpu in zip(bars["id"], bars["gpu"]) if not gpu)
    drawn_gpu = sorted(i for i, gpu in zip(bars["id"], bars["gpu"]) if gpu)
    assert drawn_cpu == in_view.tolist() and drawn_gpu == gpu_in_view.tolist()
    # A narrower window: the view is redrawn for the new width (Bokeh sends no event for it).
    page.set_viewport_size({"width": 700, "height": 800})
    page.wait_for_function("() => nb('nbprof_rendered').__nbprof.drawnSize[0] === "
                           "nb('nbprof_plot').inner_width && nb('nbprof_plot').inner_width < 700")
    page.close()


def test_empty_and_cpu_only_pages_say_so_and_keep_zero_length_events(browser, tmp_path, artifacts):
    page = open_page(browser, save_html(Trace.empty(), tmp_path / "empty.html"))
    assert "no events recorded" in page.evaluate("() => nb('nbprof_note').text")
    assert page.evaluate("() => nb('nbprof_rendered').data.left.length") == 0
    page.close()
    cpu_only = Trace.build(start_ns=[0, 400, 1_000_000], end_ns=[300, 400, 1_000_050],
                           thread=[0, 0, 0], name_id=[0, 1, 0], names=["work", "instant"],
                           threads=[(1, 1, "main")])
    page = open_page(browser, save_html(cpu_only, tmp_path / "cpu.html"))
    assert "CPU only: no GPU work recorded" in page.evaluate("() => nb('nbprof_note').text")
    labels = page.evaluate("() => [...nb('nbprof_plot').left[0].major_label_overrides.values()]")
    assert labels == ["main (1)"]
    page.evaluate("nbSetX(0, 1000)")  # the zero-length event among real ones: still a bar
    bars = rendered(page)
    instant = bars["id"].index(1)
    assert bars["count"][instant] == 1 and bars["right"][instant] > bars["left"][instant]
    page.screenshot(path=artifacts / "timeline_cpu_only.png")
    page.close()


def test_filter_highlight_and_selection_set_in_python_show_in_the_page(browser, tmp_path):
    trace = busy_trace(4000, seed=2)
    view = Timeline(trace)
    view.set_filter(lanes=["worker1 (101)", "GPU 0 stream 7"], min_duration_ns=10_000)
    on_worker1 = np.flatnonzero(trace.thread == 1)
    view.highlight(on_worker1[:3])
    launcher = int(trace.gpu_launch[0])
    view.select(launcher)
    page = open_page(browser, view.save(tmp_path / "filtered.html"))
    labels = page.evaluate("() => [...nb('nbprof_plot').left[0].major_label_overrides.values()]")
    assert labels == ["worker1 (101)", "GPU 0 stream 7"]
    window = (0, int(trace.end_ns[on_worker1[5]]))
    page.evaluate(f"nbSetX({window[0]}, {window[1]})")
    bars = rendered(page)
    long_enough = (trace.end_ns - trace.start_ns >= 10_000) & (trace.thread == 1)
    expected = np.flatnonzero(long_enough & (trace.start_ns <= window[1]) & (trace.end_ns >= window[0]))
    assert sorted(i for i, gpu in zip(bars["id"], bars["gpu"]) if not gpu) == expected.tolist()
    marks = page.evaluate("() => [...nb('nbprof_marks').data.line_color]")
    assert marks.count("#ff00aa") == 3 and marks.count("#000000") == (1 if trace.thread[launcher] == 1 else 0)
    page.close()


def test_gpu_matches_are_outlined_zoomed_out_and_in(browser, tmp_path, artifacts):
    trace = busy_trace(4000, seed=3)
    origin = min(trace.start_ns.min(), trace.gpu_start_ns.min())
    view = Timeline(trace)
    view.highlight([], gpu_rows=[1, 2, 300])
    page = open_page(browser, view.save(tmp_path / "gpu_highlight.html"))

    def outlined():
        marks = page.evaluate("() => { const d = nb('nbprof_marks').data; return "
                              "{left: [...d.left], bottom: [...d.bottom], color: [...d.line_color]}; }")
        return sorted((left, bottom) for left, bottom, color in
                      zip(marks["left"], marks["bottom"], marks["color"]) if color == "#ff00aa")

    # Zoomed out the GPU lane is busy blocks, yet each match is outlined as itself.
    assert [left for left, _ in outlined()] == sorted(trace.gpu_start_ns[[1, 2, 300]] - origin)
    # Set live in the page, as the notebook widget does; then zoomed in, on the drawn bar.
    page.evaluate("() => { nb('nbprof_highlight_gpu').data = {gpu_row: [2]}; }")
    start, end = int(trace.gpu_start_ns[2] - origin), int(trace.gpu_end_ns[2] - origin)
    page.evaluate(f"nbSetX({start - 5_000}, {end + 5_000})")
    bars = rendered(page)
    bar = next(k for k in range(len(bars["id"])) if bars["gpu"][k] and bars["id"][k] == 2)
    ((left, bottom),) = outlined()
    assert left == start and bottom == pytest.approx(bars["top"][bar] - 0.85)  # the same row
    page.screenshot(path=artifacts / "timeline_gpu_match_outlined.png")
    page.close()


@pytest.mark.parametrize("name", ["gpu_sampled_rank1.json.gz", "gpu_triton_kernel.json.gz",
                                  "rocm_mi250_train.json.gz", "cpu_only_rank34.json.gz"])
def test_every_shared_trace_draws(browser, shared_traces, tmp_path, artifacts, name):
    trace = nbprof.load(shared_traces / name)
    page = open_page(browser, save_html(trace, tmp_path / "page.html"))
    labels = page.evaluate("() => [...nb('nbprof_plot').left[0].major_label_overrides.values()]")
    assert labels == Timeline(trace).lanes and labels
    assert page.evaluate("() => nb('nbprof_rendered').data.left.length") > 0
    assert any(label.startswith("GPU") for label in labels) == trace.has_gpu
    page.screenshot(path=artifacts / f"timeline_{name.split('.')[0]}.png")
    page.close()
