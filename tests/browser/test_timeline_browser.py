"""The timeline page in Debian's Chromium: drawn, lanes and group headers, hover, wheel and keys,
level of detail, names in bars, links from runtime calls, search marks, area selection.

Models are read through ``Bokeh.documents`` / ``Bokeh.index`` (Bokeh draws text on a canvas).
"""

import numpy as np
import pytest
from PIL import Image

import nbprof
from nbprof.model import Trace
from nbprof.timeline import Timeline, save_html
from nbprof.timeline.data import runtime_calls

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
window.nbX = () => [nb('nbprof_plot').x_range.start, nb('nbprof_plot').x_range.end];
window.nbY = () => [nb('nbprof_plot').y_range.start, nb('nbprof_plot').y_range.end];
window.nbState = () => nb('nbprof_rendered').__nbprof;
window.nbAxis = () => [...nb('nbprof_plot').left[0].major_label_overrides.entries()];
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


def axis(page):
    """The y axis' labels top to bottom: (lane labels, group header labels)."""
    entries = sorted(page.evaluate("nbAxis()"))
    headers = [label for _, label in entries if label[0] in "▾▸"]
    return [label for _, label in entries if label[0] not in "▾▸"], headers


def rendered(page):
    return page.evaluate("() => { const d = nb('nbprof_rendered').data; return {id: [...d.id], "
                         "gpu: [...d.gpu], count: [...d.count], name: [...d.name], dur: [...d.dur], "
                         "left: [...d.left], right: [...d.right], top: [...d.top], "
                         "bottom: [...d.bottom]}; }")


def test_alexnet_page_is_drawn_with_its_threads_and_streams(browser, alexnet, artifacts):
    trace, path = alexnet
    page = open_page(browser, path)
    labels, headers = axis(page)
    # Kineto's "PyTorch Profiler (0)" span is the trace's metadata: no lane, no process of its own
    assert labels == Timeline(trace).lane_labels == ["main thread", "GPU 0 · stream 7",
                                                     "GPU 0 · stream 20", "GPU 0 · stream -1"]
    assert headers == ["▾ rank 0 · pid 2869224 · python3.10", "▾ rank 0 · GPU 0"]
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
    # the full lane name, and the op that launched it
    lane = f"GPU {trace.gpu_device[kernel]} stream {trace.gpu_stream[kernel]}"
    assert page.get_by_text(lane, exact=True).first.is_visible()
    assert page.get_by_text(trace.names[trace.name_id[trace.gpu_launch[kernel]]], exact=True).first.is_visible()
    # hovering a kernel draws the link from its cudaLaunchKernel, and outlines the op around it
    call = int(runtime_calls(trace)[kernel])
    assert trace.names[trace.name_id[call]] == "cudaLaunchKernel"
    links = page.evaluate("() => { const d = nb('nbprof_links_focus').data; return [[...d.x0], [...d.x1]]; }")
    assert links == [[trace.start_ns[call] - origin], [start - origin]]
    marks = page.evaluate("() => { const d = nb('nbprof_marks').data; return [[...d.left], [...d.line_color]]; }")
    assert marks == [[trace.start_ns[trace.gpu_launch[kernel]] - origin], ["#d62728"]]
    page.close()


def test_tooltip_and_bar_names_show_hostile_text_as_text(browser, tmp_path):
    hostile = '"><img src=x onerror="window.pwned=1">'
    trace = Trace.build(start_ns=[0], end_ns=[1000], thread=[0], name_id=[0], names=[hostile],
                        threads=[(1, 1, hostile)])
    page = open_page(browser, save_html(trace, tmp_path / "hostile.html"))
    assert page.evaluate("() => [...nb('nbprof_labels').data.text]") == [hostile]  # canvas text
    x, y = page.evaluate("nbScreen(500, 0.5)")
    page.mouse.move(x - 5, y)
    page.mouse.move(x, y)
    page.get_by_text(hostile, exact=True).first.wait_for(state="visible", timeout=5000)
    assert page.evaluate("window.pwned") is None
    page.close()


def test_the_tooltip_has_no_empty_rows(browser, tmp_path, artifacts):
    trace = Trace.build(start_ns=[0], end_ns=[1000], thread=[0], name_id=[0], names=["plain op"],
                        threads=[(1, 1, "main")])
    page = open_page(browser, save_html(trace, tmp_path / "plain.html"))
    x, y = page.evaluate("nbScreen(500, 0.5)")
    page.mouse.move(x - 5, y)
    page.mouse.move(x, y)
    page.get_by_text("plain op", exact=True).first.wait_for(state="visible", timeout=5000)
    page.screenshot(path=artifacts / "timeline_tooltip_rows.png")
    assert page.get_by_text("duration", exact=True).first.is_visible()
    # an op with no details, launched by nothing: those rows are not shown at all
    for row in ("details", "launched by"):
        assert not page.get_by_text(row, exact=True).first.is_visible()
    page.close()


def click_cpu_event(page, event_id, lo, hi):
    """Zoom to lo..hi (plot x), click the CPU event's bar, wait for the selection."""
    page.evaluate(f"nbSetX({lo - (hi - lo) * 0.1}, {hi + (hi - lo) * 0.1})")
    bars = rendered(page)
    k = next(i for i in range(len(bars["id"])) if not bars["gpu"][i] and bars["id"][i] == event_id)
    x, y = page.evaluate(f"nbScreen({(bars['left'][k] + bars['right'][k]) / 2}, {bars['top'][k] - 0.4})")
    page.mouse.click(x, y)
    page.wait_for_function("() => nb('nbprof_selection').data.event_id.length > 0", timeout=5000)


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
    click_cpu_event(page, op, lo, hi)
    assert page.evaluate("() => [...nb('nbprof_selection').data.event_id]") == [op]
    links = page.evaluate("() => nb('nbprof_links_focus').data.x0.length")
    assert links >= kernels >= 1
    page.mouse.move(5, 5)  # away, so only the selection's links stay
    page.screenshot(path=artifacts / "timeline_click_links.png")
    page.close()


def test_clicking_a_runtime_call_selects_its_kernels(browser, alexnet, artifacts):
    trace, path = alexnet
    page = open_page(browser, path)
    calls = runtime_calls(trace)
    call = int(next(c for c in calls if c >= 0 and trace.names[trace.name_id[c]] == "cudaLaunchKernel"))
    kernels = np.flatnonzero(calls == call).tolist()
    origin = min(trace.start_ns.min(), trace.gpu_start_ns.min())
    lo = trace.start_ns[call] - origin
    hi = max(trace.end_ns[call], trace.gpu_end_ns[kernels].max()) - origin
    click_cpu_event(page, call, lo, hi)
    selected = page.evaluate("() => { const d = nb('nbprof_selection').data; return [[...d.event_id], [...d.kind]]; }")
    assert selected == [[call, *kernels], ["cpu", *["gpu"] * len(kernels)]]
    links = page.evaluate("() => [...nb('nbprof_links_focus').data.x0]")
    assert links == [trace.start_ns[call] - origin] * len(kernels)
    page.mouse.move(5, 5)
    page.screenshot(path=artifacts / "timeline_runtime_call_selected.png")
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


# Holds back every inflate until the test calls nbRelease(): a big page (whose level is not
# compressed) between its first view and its decoded events, for as long as the test needs.
HOLD_EVENTS = """(() => {
  const Inflate = window.DecompressionStream;
  const released = new Promise((resolve) => { window.nbRelease = resolve; });
  window.DecompressionStream = function (format) {
    const inflate = new Inflate(format);
    const gate = new TransformStream({async transform(chunk, controller) {
      await released;
      controller.enqueue(chunk);
    }});
    gate.readable.pipeTo(inflate.writable);
    return {writable: gate.writable, readable: inflate.readable};
  };
})();"""


def test_a_big_page_opens_on_its_level_and_draws_events_zoomed_into_once_decoded(browser, tmp_path):
    trace = busy_trace(200_000)  # 220k events: past FIRST_LEVEL_MIN_EVENTS
    path = save_html(trace, tmp_path / "big.html")
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.add_init_script(HOLD_EVENTS)
    page.goto(path.as_uri())
    page.wait_for_function(READY, timeout=30_000)
    page.evaluate(HELPERS)
    # Ready with the events still held back: the first view is the level's, and every event is
    # in one of its bars.
    assert page.evaluate("!nbState().events && nbState().level !== undefined")
    first_view, first = page.evaluate("nbX()"), rendered(page)
    assert sum(first["count"]) == len(trace) + len(trace.gpu_start_ns)
    assert len(first["id"]) < 5_000  # busy blocks, not 220k glyphs
    # Zoomed into a block, finer than the level: the level's bars meanwhile, then every event
    # in view as itself once the events are decoded.
    middle = trace.duration_ns // 2
    window = (middle, middle + 200_000)
    page.evaluate(f"nbSetX({window[0]}, {window[1]})")
    assert page.evaluate("nbState().waitingForEvents")
    assert set(rendered(page)["count"]) != {1}
    # a search match in there, marked once the events are in (it is inside a level block now)
    match = int(np.flatnonzero(trace.start_ns >= window[0] + 50_000)[0])
    page.evaluate(f"nb('nbprof_highlight').data = {{event_id: [{match}]}}")
    page.evaluate("nbRelease()")
    page.wait_for_function("() => nbState().events && !nbState().waitingForEvents")
    bars = rendered(page)
    in_view = np.flatnonzero((trace.start_ns <= window[1]) & (trace.end_ns >= window[0]))
    gpu_in_view = np.flatnonzero((trace.gpu_start_ns <= window[1]) & (trace.gpu_end_ns >= window[0]))
    assert len(in_view) > 20 and set(bars["count"]) == {1}
    assert sorted(i for i, gpu in zip(bars["id"], bars["gpu"]) if not gpu) == in_view.tolist()
    assert sorted(i for i, gpu in zip(bars["id"], bars["gpu"]) if gpu) == gpu_in_view.tolist()
    marks = page.evaluate("() => [...nb('nbprof_marks').data.left]")
    assert marks == [trace.start_ns[match] - min(trace.start_ns.min(), trace.gpu_start_ns.min())]
    assert page.evaluate("nb('nbprof_overview_marks').data.left.length") == 1
    # a kernel's hover names the op that launched it
    kernel = next(k for k, gpu in enumerate(bars["gpu"]) if gpu)
    assert page.evaluate(f"nb('nbprof_rendered').data.launch[{kernel}]") == \
        trace.names[trace.name_id[trace.gpu_launch[bars["id"][kernel]]]]
    # Back to the first view, drawn from the events now: the same bars as the level gave
    page.evaluate(f"nbSetX({first_view[0]}, {first_view[1]})")
    assert rendered(page) == first
    assert not errors, errors
    page.close()


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
    page.keyboard.down("Control")  # plain wheel scrolls the page: Ctrl+wheel zooms
    for _ in range(6):
        page.mouse.wheel(0, -400)
        page.wait_for_timeout(50)
    page.keyboard.up("Control")
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
    assert "no events recorded" in page.evaluate("() => nb('nbprof_note').html")
    assert page.evaluate("() => nb('nbprof_rendered').data.left.length") == 0
    page.close()
    cpu_only = Trace.build(start_ns=[0, 400, 1_000_000], end_ns=[300, 400, 1_000_050],
                           thread=[0, 0, 0], name_id=[0, 1, 0], names=["work", "instant"],
                           threads=[(1, 1, "main")])
    page = open_page(browser, save_html(cpu_only, tmp_path / "cpu.html"))
    assert "CPU only: no GPU work recorded" in page.evaluate("() => nb('nbprof_note').html")
    assert page.get_by_text("CPU only: no GPU work recorded").is_visible()  # bold, in the note
    # The note is no widget: a standalone page loads BokehJS's main bundle only.
    assert page.evaluate("() => Bokeh.Widgets === undefined && Bokeh.Models !== undefined")
    assert axis(page) == (["main"], [])  # one group: no header
    page.evaluate("nbSetX(0, 1000)")  # the zero-length event among real ones: still a bar
    bars = rendered(page)
    instant = bars["id"].index(1)
    assert bars["count"][instant] == 1 and bars["right"][instant] > bars["left"][instant]
    page.screenshot(path=artifacts / "timeline_cpu_only.png")
    page.close()


def test_the_diff_page_shows_its_table_without_the_widgets_bundle(browser, shared_traces, tmp_path):
    from nbprof.timeline.compare import save_compare_html

    before = nbprof.load(shared_traces / "gpu_sampled_rank0.json.gz")
    after = nbprof.load(shared_traces / "gpu_sampled_rank1.json.gz")
    path, _ = save_compare_html(before, after, tmp_path / "diff.html")
    page = browser.new_page(viewport={"width": 1200, "height": 800})
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(path.as_uri())
    page.wait_for_function("() => window.Bokeh && Bokeh.documents.length && "
                           "Bokeh.index.find_one(Bokeh.documents[0].get_model_by_name('nbprof_compare_plot'))")
    assert page.get_by_text("nbprof diff by name:").is_visible()  # the table, drawn as text
    assert page.get_by_text("nccl:all_to_all").first.is_visible()
    # the table is no widget: the page loads BokehJS's main bundle only (as the timeline's)
    assert page.evaluate("() => Bokeh.Widgets === undefined && Bokeh.Models !== undefined")
    assert not errors, errors
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
    assert axis(page) == (["worker1", "GPU 0 · stream 7"], ["▾ pid 1", "▾ GPU 0"])
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
    assert left == start and bottom == pytest.approx(bars["bottom"][bar] - 0.05)  # the same row
    page.screenshot(path=artifacts / "timeline_gpu_match_outlined.png")
    page.close()


@pytest.mark.parametrize("name", ["gpu_sampled_rank1.json.gz", "gpu_triton_kernel.json.gz",
                                  "rocm_mi250_train.json.gz", "cpu_only_rank34.json.gz"])
def test_every_shared_trace_draws(browser, shared_traces, tmp_path, artifacts, name):
    trace = nbprof.load(shared_traces / name)
    page = open_page(browser, save_html(trace, tmp_path / "page.html"))
    labels, _ = axis(page)
    assert labels == Timeline(trace).lane_labels and labels
    assert page.evaluate("() => nb('nbprof_rendered').data.left.length") > 0
    assert any(label.startswith("GPU") for label in labels) == trace.has_gpu
    page.screenshot(path=artifacts / f"timeline_{name.split('.')[0]}.png")
    page.close()


# -- navigation: wheel, keys, tools ---------------------------------------------------------------

def test_plain_wheel_scrolls_the_page_ctrl_or_meta_zooms_shift_pans(browser, alexnet, artifacts):
    _, path = alexnet
    page = browser.new_page(viewport={"width": 1200, "height": 420})  # the page is taller: it scrolls
    page.goto(path.as_uri())
    page.wait_for_function(READY, timeout=30_000)
    page.evaluate(HELPERS)
    view, y_range = page.evaluate("nbX()"), page.evaluate("nbY()")
    x, y = page.evaluate(f"nbScreen({(view[0] + view[1]) / 2}, 3)")
    page.mouse.move(x, y)
    page.mouse.wheel(0, 200)
    page.wait_for_timeout(400)
    assert page.evaluate("window.scrollY") > 0  # the page moved ...
    assert page.evaluate("nbX()") == view  # ... and the timeline did not zoom
    page.evaluate("window.scrollTo(0, 0)")
    page.wait_for_timeout(100)
    for modifier in ("Control", "Meta"):
        before = page.evaluate("nbX()")
        page.mouse.move(x, y)
        page.keyboard.down(modifier)
        page.mouse.wheel(0, -300)
        page.keyboard.up(modifier)
        page.wait_for_timeout(300)
        after = page.evaluate("nbX()")
        assert after[1] - after[0] < 0.9 * (before[1] - before[0]), modifier
        assert page.evaluate("window.scrollY") == 0 and page.evaluate("nbY()") == y_range
    before = page.evaluate("nbX()")
    page.keyboard.down("Shift")
    page.mouse.wheel(0, 200)
    page.keyboard.up("Shift")
    page.wait_for_timeout(300)
    after = page.evaluate("nbX()")
    assert after[0] > before[0] and after[1] - after[0] == pytest.approx(before[1] - before[0])
    assert page.evaluate("window.scrollY") == 0
    page.screenshot(path=artifacts / "timeline_wheel.png")
    page.close()


def test_keys_zoom_pan_and_escape_clears_the_selection(browser, tmp_path):
    trace = busy_trace(4000, seed=5)
    view = Timeline(trace)
    view.select(10)
    page = open_page(browser, view.save(tmp_path / "keys.html"))
    page.evaluate(f"nbSetX(0, {trace.duration_ns})")
    x, y = page.evaluate(f"nbScreen({trace.duration_ns / 2}, 4.5)")  # the GPU lane's empty top
    page.mouse.move(x, y)
    page.evaluate("() => Bokeh.index.find_one(nb('nbprof_plot')).canvas_view.events_el.focus()")

    def press(key):
        before = page.evaluate("nbX()")
        page.keyboard.press(key)
        page.wait_for_timeout(100)
        return before, page.evaluate("nbX()")

    for key in ("w", "ArrowUp"):
        before, after = press(key)
        assert after[1] - after[0] == pytest.approx(0.8 * (before[1] - before[0]))
    for key in ("s", "ArrowDown"):
        before, after = press(key)
        assert after[1] - after[0] == pytest.approx((before[1] - before[0]) / 0.8)
    page.keyboard.press("w")
    page.keyboard.press("w")
    for key, sign in (("d", 1), ("ArrowRight", 1), ("a", -1), ("ArrowLeft", -1)):
        before, after = press(key)
        assert after[0] - before[0] == pytest.approx(sign * 0.15 * (before[1] - before[0]))
    assert page.evaluate("() => nb('nbprof_selection').data.event_id.length") == 1
    page.keyboard.press("Escape")
    page.wait_for_function("() => nb('nbprof_selection').data.event_id.length === 0", timeout=3000)
    page.close()


def test_all_tools_are_buttons_and_box_zoom_keeps_the_lanes(browser, tmp_path, artifacts):
    trace = busy_trace(4000, seed=6)
    page = open_page(browser, save_html(trace, tmp_path / "tools.html"))
    overflowed = page.evaluate("() => Bokeh.index.find_one(nb('nbprof_plot').toolbar)._overflow_menu.items.length")
    assert overflowed == 0  # no "⋮": every tool has its button
    names = page.evaluate("() => nb('nbprof_plot').toolbar.tools.filter((t) => t.visible).map((t) => t.type)")
    assert names == ["ResetTool", "WheelZoomTool", "PanTool", "BoxZoomTool", "BoxSelectTool"]
    y_range, labels = page.evaluate("nbY()"), axis(page)
    page.evaluate("() => { const p = nb('nbprof_plot'); p.toolbar.active_drag = "
                  "p.toolbar.tools.find((t) => t.type === 'BoxZoomTool'); }")
    start = page.evaluate(f"nbScreen({trace.duration_ns * 0.2}, 1.5)")
    end = page.evaluate(f"nbScreen({trace.duration_ns * 0.4}, 2.5)")  # a box over two lanes
    page.mouse.move(*start)
    page.mouse.down()
    page.mouse.move((start[0] + end[0]) / 2, end[1], steps=3)
    page.mouse.move(*end, steps=3)
    page.mouse.up()
    page.wait_for_timeout(300)
    x = page.evaluate("nbX()")
    assert x[0] == pytest.approx(trace.duration_ns * 0.2, rel=0.05)
    assert x[1] == pytest.approx(trace.duration_ns * 0.4, rel=0.05)
    assert page.evaluate("nbY()") == y_range and axis(page) == labels  # every lane still in view
    page.screenshot(path=artifacts / "timeline_box_zoom.png")
    page.close()


# -- reading the timeline ---------------------------------------------------------------------------

def test_names_are_drawn_inside_wide_bars_cut_to_fit(browser, alexnet, artifacts):
    trace, path = alexnet
    page = open_page(browser, path)
    page.evaluate(f"nbSetX(0, {trace.duration_ns})")
    labels = page.evaluate("() => { const d = nb('nbprof_labels').data; return "
                           "{x: [...d.x], y: [...d.y], text: [...d.text]}; }")
    bars = rendered(page)
    assert len(labels["text"]) >= 5
    width = page.evaluate("nb('nbprof_plot').inner_width")
    ns_per_px = trace.duration_ns / width
    fits = page.evaluate("""(texts) => { const c = document.createElement('canvas').getContext('2d');
        c.font = '11px sans-serif'; return texts.map((t) => c.measureText(t).width); }""", labels["text"])
    cut = 0
    for x, y, text, px in zip(labels["x"], labels["y"], labels["text"], fits):
        # the bar under the label: its name, whole or cut with "…", and it fits inside the bar
        k = next(k for k in range(len(bars["id"])) if bars["left"][k] <= x <= bars["right"][k]
                 and bars["top"][k] - 0.9 <= y <= bars["top"][k])
        shown = (min(bars["right"][k], trace.duration_ns) - max(bars["left"][k], 0)) / ns_per_px
        assert shown >= 30 and px <= shown
        if bars["count"][k] > 1 and text == f"{bars['count'][k]} events":
            continue  # a block too narrow for "N events, mostly ...": the count alone
        if text.endswith("…"):
            cut += 1
            assert bars["name"][k].startswith(text[:-1]) and bars["name"][k] != text[:-1]
        else:
            assert text == bars["name"][k]
    assert cut >= 1  # "[param|pytorch.model.alex_net|...]" does not fit whole in narrower bars
    # zoomed in, narrower events get their names too
    before = len(labels["text"])
    middle = trace.duration_ns * 0.7
    page.evaluate(f"nbSetX({middle}, {middle + trace.duration_ns / 200})")
    assert page.evaluate("nbState().labelsDrawn") > 0
    page.evaluate(f"nbSetX(0, {trace.duration_ns})")
    assert page.evaluate("nbState().labelsDrawn") == before
    page.screenshot(path=artifacts / "timeline_names_in_bars.png")
    page.close()


def test_a_merged_block_names_its_longest_event(browser, tmp_path):
    trace = busy_trace(20_000, seed=4)
    page = open_page(browser, save_html(trace, tmp_path / "blocks.html"))
    bars = rendered(page)
    origin = min(trace.start_ns.min(), trace.gpu_start_ns.min())
    checked = 0
    for k in range(len(bars["id"])):
        if bars["count"][k] < 20 or bars["gpu"][k]:
            continue
        thread = int(round(bars["top"][k] - 0.9))  # one row per worker, below its header
        lane = np.flatnonzero(trace.thread == thread - 1)
        inside = lane[(trace.start_ns[lane] - origin >= bars["left"][k]) &
                      (trace.end_ns[lane] - origin <= bars["left"][k] + bars["dur"][k])]
        assert len(inside) == bars["count"][k]
        longest = inside[np.argmax(trace.end_ns[inside] - trace.start_ns[inside])]
        assert bars["name"][k] == f"{bars['count'][k]} events, mostly {trace.names[trace.name_id[longest]]}"
        checked += 1
    assert checked >= 3
    page.close()


def test_group_headers_collapse_and_expand_on_click(browser, alexnet, artifacts):
    trace, path = alexnet
    page = open_page(browser, path)
    labels, headers = axis(page)
    ticks = dict((label, y) for y, label in page.evaluate("nbAxis()"))
    gpu_header = "▾ rank 0 · GPU 0"
    x, y = page.evaluate(f"nbScreen(nbX()[0], {ticks[gpu_header]})")
    page.mouse.click(x - 40, y)  # on the header's label, left of the plot
    page.wait_for_timeout(200)
    collapsed, collapsed_headers = axis(page)
    assert collapsed == [label for label in labels if not label.startswith("GPU")]
    assert "▸ rank 0 · GPU 0 (3 lanes)" in collapsed_headers
    # the collapsed group still shows its lanes' work, in the header row
    bars = rendered(page)
    header_y = dict((label, y) for y, label in page.evaluate("nbAxis()"))["▸ rank 0 · GPU 0 (3 lanes)"]
    assert any(gpu and abs(top - 0.1 - (header_y + 0.5)) < 0.51 for gpu, top in zip(bars["gpu"], bars["top"]))
    page.screenshot(path=artifacts / "timeline_group_collapsed.png")
    x, y = page.evaluate(f"nbScreen(nbX()[0], {header_y})")
    page.mouse.click(x - 40, y)
    page.wait_for_timeout(200)
    assert axis(page) == (labels, headers)
    page.close()


def test_lanes_have_room_and_grow_back_in_a_taller_plot(browser, alexnet, tmp_path, artifacts):
    trace = busy_trace(4000, seed=7)
    page = open_page(browser, save_html(trace, tmp_path / "small.html"))
    entries = sorted(page.evaluate("nbAxis()"))
    px_per_unit = page.evaluate("nb('nbprof_plot').inner_height / Math.abs(nbY()[0] - nbY()[1])")
    assert px_per_unit >= 16  # 4 worker lanes, a GPU lane and 2 headers: no squeezing
    gpu = next(y for y, label in entries if label.startswith("GPU"))
    kernel_rows = page.evaluate("nbState().rowH.filter((h, r) => nbState().rowY[r] + h / 2 === %s)" % gpu)
    assert list(kernel_rows.values() if isinstance(kernel_rows, dict) else kernel_rows) == [2]
    page.screenshot(path=artifacts / "timeline_small_trace.png")
    page.close()
    # A deep trace in a short plot is cut to fit; given room, its lanes grow back.
    deep, _ = alexnet
    page = open_page(browser, save_html(deep, tmp_path / "short.html", height=260))
    cut = page.evaluate("nbState().depthCap")
    deepest = max(Timeline(deep).lane_labels and [int(d) for d in deep.depth]) + 1
    assert cut < deepest
    page.evaluate("nb('nbprof_plot').height = 900")
    page.wait_for_function(f"() => nbState().depthCap > {cut}", timeout=5000)
    assert page.evaluate("nbState().depthCap") == deepest
    page.close()


def test_links_for_everything_in_view_only_while_readable(browser, tmp_path):
    trace = busy_trace(20_000, seed=8)
    page = open_page(browser, save_html(trace, tmp_path / "links.html"))
    origin = min(trace.start_ns.min(), trace.gpu_start_ns.min())
    assert page.evaluate("() => nb('nbprof_links_view').data.x0.length") == 0  # 2000 kernels: none
    assert page.evaluate("() => nb('nbprof_rendered').data.gpu.filter((g, k) => g && "
                         "nb('nbprof_rendered').data.count[k] === 1).length") > 0  # though some are bars
    window = (trace.gpu_start_ns[100] - origin - 1000, trace.gpu_start_ns[140] - origin)
    page.evaluate(f"nbSetX({window[0]}, {window[1]})")
    in_view = np.flatnonzero((trace.gpu_start_ns - origin <= window[1]) & (trace.gpu_end_ns - origin >= window[0]))
    links = page.evaluate("() => { const d = nb('nbprof_links_view').data; return [...d.x1]; }")
    assert sorted(links) == sorted((trace.gpu_start_ns[in_view] - origin).tolist())
    page.close()


# -- search support and area selection --------------------------------------------------------------

def test_bring_into_view_zooms_until_a_merged_match_is_its_own_bar(browser, tmp_path, artifacts):
    trace = busy_trace(60_000, seed=9)
    view = Timeline(trace)
    origin = min(trace.start_ns.min(), trace.gpu_start_ns.min())
    match = 31_234
    view.highlight([match, 100, 50_000])
    page = open_page(browser, view.save(tmp_path / "search.html"))
    assert match not in rendered(page)["id"]  # at full zoom it is inside a merged block
    # the overview strip has a tick at every match
    ticks = page.evaluate("() => [...nb('nbprof_overview_marks').data.left]")
    width = page.evaluate("nb('nbprof_overview').inner_width")
    per_px = (trace.duration_ns) / width
    assert len(ticks) == 3
    for tick, event in zip(sorted(ticks), sorted([match, 100, 50_000])):
        assert abs(tick - (trace.start_ns[event] - origin)) <= 2 * per_px
    page.screenshot(path=artifacts / "timeline_search_ticks.png")
    start, end = int(trace.start_ns[match]), int(trace.end_ns[match])
    page.evaluate(f"() => {{ nb('nbprof_view_request').data = {{start_ns: [{start - origin}], "
                  f"end_ns: [{end - origin}], seq: [1]}}; }}")
    bars = rendered(page)
    k = bars["id"].index(match)
    assert bars["count"][k] == 1 and not bars["gpu"][k]
    x = page.evaluate("nbX()")
    assert x[0] <= start - origin and end - origin <= x[1]
    # already its own bar in view: asking again moves nothing
    page.evaluate(f"() => {{ nb('nbprof_view_request').data = {{start_ns: [{start - origin}], "
                  f"end_ns: [{end - origin}], seq: [2]}}; }}")
    assert page.evaluate("nbX()") == x
    page.close()
    # set from Python before the page opens: the saved page opens on it
    view.bring_into_view(start, end)
    page = open_page(browser, view.save(tmp_path / "search2.html"))
    assert match in rendered(page)["id"]
    page.close()


def test_shift_drag_and_box_select_set_the_area_selection(browser, tmp_path, artifacts):
    trace = busy_trace(4000, seed=10)
    page = open_page(browser, save_html(trace, tmp_path / "area.html"))
    origin = min(trace.start_ns.min(), trace.gpu_start_ns.min())
    span = trace.duration_ns
    x_before = page.evaluate("nbX()")
    a = page.evaluate(f"nbScreen({span * 0.3}, 1.5)")
    b = page.evaluate(f"nbScreen({span * 0.6}, 3.5)")
    page.keyboard.down("Shift")
    page.mouse.move(*a)
    page.mouse.down()
    page.mouse.move(*b, steps=4)
    page.mouse.up()
    page.keyboard.up("Shift")
    page.wait_for_function("() => nb('nbprof_area_selection').data.start_ns.length === 1", timeout=3000)
    area = page.evaluate("() => { const d = nb('nbprof_area_selection').data; return [d.start_ns[0], d.end_ns[0]]; }")
    per_px = span / page.evaluate("nb('nbprof_plot').inner_width")
    assert abs(area[0] - (origin + span * 0.3)) <= 2 * per_px
    assert abs(area[1] - (origin + span * 0.6)) <= 2 * per_px
    assert page.evaluate("nbX()") == x_before  # the drag did not pan
    band = page.evaluate("() => [...nb('nbprof_area_band').data.left]")
    assert band == [area[0] - origin]
    page.screenshot(path=artifacts / "timeline_area_selection.png")
    page.evaluate("() => Bokeh.index.find_one(nb('nbprof_plot')).canvas_view.events_el.focus()")
    page.keyboard.press("Escape")
    page.wait_for_function("() => nb('nbprof_area_selection').data.start_ns.length === 0", timeout=3000)
    assert page.evaluate("() => nb('nbprof_area_band').data.left.length") == 0
    # the box select tool does the same without Shift
    page.evaluate("() => { const p = nb('nbprof_plot'); p.toolbar.active_drag = "
                  "p.toolbar.tools.find((t) => t.type === 'BoxSelectTool'); }")
    page.mouse.move(*a)
    page.mouse.down()
    page.mouse.move(*b, steps=4)
    page.mouse.up()
    page.wait_for_function("() => nb('nbprof_area_selection').data.start_ns.length === 1", timeout=3000)
    area2 = page.evaluate("() => { const d = nb('nbprof_area_selection').data; return [d.start_ns[0], d.end_ns[0]]; }")
    assert area2 == pytest.approx(area, abs=2 * per_px)
    page.close()


# -- in a real JupyterLab ---------------------------------------------------------------------------

LAB_NOTEBOOK = "timeline_navigation.ipynb"
# The live widget's timeline (not its hidden static copy), and the element that scrolls the notebook.
LAB_HELPERS = """
window.nbLive = () => { for (const view of Bokeh.index.roots) {
    if (!view.el.closest('.nbprof-widget')) continue;
    const plot = [...view.model.document.all_models].find(m => (m.tags || []).includes('nbprof-ready'));
    if (plot) return {plot, doc: view.model.document, view: Bokeh.index.find_one(plot)};
  } return null; };
window.nbLiveScreen = (x, y) => { const {view} = nbLive(); const r = view.el.getBoundingClientRect();
  return [r.left + view.frame.x_scale.compute(x), r.top + view.frame.y_scale.compute(y)]; };
window.nbLiveX = () => { const {plot} = nbLive(); return [plot.x_range.start, plot.x_range.end]; };
window.nbScroller = () => { let e = nbLive().view.el;
  while (e && !(e.scrollHeight > e.clientHeight && /auto|scroll/.test(getComputedStyle(e).overflowY)))
    e = e.parentElement || e.getRootNode().host;  // Bokeh's views sit in shadow roots
  return e; };
true;
"""


def test_in_jupyterlab_wheel_scrolls_the_notebook_ctrl_zooms_keys_and_names(browser, lab, shared_traces,
                                                                            artifacts):
    import nbformat
    from jupyter_lab import (PANEL, READY_JS, open_notebook, run_all_cells, start_kernel_session,
                             wait_until_all_cells_ran)

    url, root = lab
    filler = "\n\n".join(f"Paragraph {i}: the notebook goes on around the timeline." for i in range(14))
    notebook = nbformat.v4.new_notebook(metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}})
    notebook.cells = [nbformat.v4.new_markdown_cell(filler), nbformat.v4.new_code_cell(
        f"import nbprof\nnbprof.widget(nbprof.load({str(shared_traces / 'gpu_alexnet_kineto.json.gz')!r}))"),
        nbformat.v4.new_markdown_cell(filler), nbformat.v4.new_markdown_cell(filler)]
    nbformat.write(notebook, root / LAB_NOTEBOOK)
    start_kernel_session(url, LAB_NOTEBOOK)
    # the module's Chromium (a second sync Playwright cannot start beside it)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(60_000)
    try:
        open_notebook(page, url, LAB_NOTEBOOK)
        run_all_cells(page)
        wait_until_all_cells_ran(page)  # Lab may drop cells under load
        page.wait_for_selector(f"{PANEL} .nbprof-widget", timeout=120_000)
        page.wait_for_function(READY_JS, timeout=60_000)
        page.evaluate(LAB_HELPERS)
        page.wait_for_function("() => nbLive() !== null", timeout=30_000)
        page.evaluate("() => nbLive().view.el.scrollIntoView({block: 'center'})")
        page.wait_for_timeout(500)
        cells = page.locator(f"{PANEL} .jp-Cell").count()
        view = page.evaluate("nbLiveX()")
        x, y = page.evaluate(f"nbLiveScreen({(view[0] + view[1]) / 2}, 3)")
        # Plain wheel over the timeline scrolls the notebook; the timeline does not zoom.
        top = page.evaluate("nbScroller().scrollTop")
        page.mouse.move(x, y)
        page.mouse.wheel(0, 250)
        page.wait_for_timeout(600)
        assert page.evaluate("nbScroller().scrollTop") > top + 100
        assert page.evaluate("nbLiveX()") == view
        # Ctrl+wheel zooms (x only) and leaves the notebook where it is.
        page.evaluate("() => nbLive().view.el.scrollIntoView({block: 'center'})")
        page.wait_for_timeout(500)
        x, y = page.evaluate(f"nbLiveScreen({(view[0] + view[1]) / 2}, 3)")
        page.mouse.move(x, y)
        top = page.evaluate("nbScroller().scrollTop")
        page.keyboard.down("Control")
        page.mouse.wheel(0, -300)
        page.keyboard.up("Control")
        page.wait_for_timeout(600)
        zoomed = page.evaluate("nbLiveX()")
        assert zoomed[1] - zoomed[0] < 0.9 * (view[1] - view[0])
        assert abs(page.evaluate("nbScroller().scrollTop") - top) < 2
        # Keys with the timeline focused: A pans, W zooms; Lab's own A (insert a cell) stays off.
        page.evaluate("() => nbLive().view.canvas_view.events_el.focus()")
        page.keyboard.press("a")
        page.wait_for_timeout(300)
        panned = page.evaluate("nbLiveX()")
        assert panned[0] < zoomed[0] and panned[1] - panned[0] == pytest.approx(zoomed[1] - zoomed[0])
        page.keyboard.press("w")
        page.wait_for_timeout(300)
        narrower = page.evaluate("nbLiveX()")
        assert narrower[1] - narrower[0] == pytest.approx(0.8 * (panned[1] - panned[0]))
        assert page.locator(f"{PANEL} .jp-Cell").count() == cells
        # Names inside the wide bars, drawn in the live widget.
        page.evaluate(f"() => nbLive().plot.x_range.setv({{start: 0, end: {view[1]}}})")
        page.wait_for_timeout(500)
        names = page.evaluate("() => [...nbLive().doc.get_model_by_name('nbprof_labels').data.text]")
        assert len(names) >= 5 and "aten::to" in names
        page.locator(f"{PANEL} .nbprof-widget").first.screenshot(path=str(artifacts / "lab_timeline_names.png"))
    except Exception:
        page.screenshot(path=str(artifacts / "lab_timeline_failed.png"))
        raise
    finally:
        page.close()


def test_alt_wheel_zooms_the_lanes_so_cut_lanes_grow_back_and_reset_undoes_it(browser, alexnet, tmp_path, artifacts):
    trace, _ = alexnet
    page = open_page(browser, save_html(trace, tmp_path / "short_y.html", height=260))
    cut, x = page.evaluate("nbState().depthCap"), page.evaluate("nbX()")
    deepest = int(trace.depth.max()) + 1
    assert cut < deepest
    px, py = page.evaluate(f"nbScreen({(x[0] + x[1]) / 2}, 1)")
    page.mouse.move(px, py)
    page.keyboard.down("Alt")
    for _ in range(4):
        page.mouse.wheel(0, -300)
        page.wait_for_timeout(100)
    page.keyboard.up("Alt")
    page.wait_for_timeout(300)
    assert page.evaluate("nbState().depthCap") == deepest  # every nesting level is back
    y = page.evaluate("nbY()")
    assert abs(y[0] - y[1]) < page.evaluate("nbState().totalRows")  # a window of the lanes
    assert page.evaluate("nbX()") == x  # y only
    assert axis(page)[0] == ["main thread"]  # the lane in view keeps its label, in view
    assert min(y) < page.evaluate("nbAxis()[0][0]") < max(y)
    page.screenshot(path=artifacts / "timeline_lanes_zoomed_in_y.png")
    # Alt+Shift+wheel scrolls the lanes down
    top = min(y)
    page.keyboard.down("Alt")
    page.keyboard.down("Shift")
    page.mouse.wheel(0, 200)
    page.keyboard.up("Shift")
    page.keyboard.up("Alt")
    page.wait_for_timeout(300)
    assert min(page.evaluate("nbY()")) > top
    # the reset tool: all lanes in the plot again, cut to fit
    page.evaluate("() => { const p = nb('nbprof_plot'); Bokeh.index.find_one(p).reset(); }")
    page.wait_for_function(f"() => nbState().depthCap === {cut}", timeout=5000)
    assert sorted(page.evaluate("nbY()")) == [0, page.evaluate("nbState().totalRows")]
    page.close()


def test_narrow_blocks_say_how_many_events_they_hold(browser, shared_traces, tmp_path, artifacts):
    import re

    trace = nbprof.load(shared_traces / "gpu_training_step_68k.json.gz")
    page = open_page(browser, save_html(trace, tmp_path / "step.html"))
    texts = page.evaluate("() => [...nb('nbprof_labels').data.text]")
    counts = [t for t in texts if re.fullmatch(r"\d+ events", t)]
    assert counts  # blocks too narrow for "N events, mostly aten::..." keep their count
    assert not [t for t in texts if re.fullmatch(r"\d+ even.*…", t)]  # never "404 even…"
    page.screenshot(path=artifacts / "timeline_training_step.png")
    page.close()


def tick_labels(page):
    """The x axis' tick labels as the page draws them now."""
    page.wait_for_timeout(150)  # the axis lays out its ticks on the next frame
    return page.evaluate("""() => { const plot = nb('nbprof_plot'), axis = plot.below[0];
        const view = [...Bokeh.index.find_one(plot).renderer_views.values()].find(v => v.model === axis);
        return axis.formatter.doFormat(view.tick_coords.major[0], {loc: 0}); }""")


def test_the_time_axis_reads_at_every_zoom_and_opens_on_the_gpu_work(browser, alexnet, artifacts):
    import re

    trace, path = alexnet
    page = open_page(browser, path)
    origin = int(trace.start_ns.min())
    span = int(max(trace.end_ns.max(), trace.gpu_end_ns.max())) - origin
    # alexnet's first 30 s are set-up (no GPU work): the page opens on the GPU's work, all of it
    start, end = page.evaluate("nbX()")
    assert start > 0.5 * span and start < trace.gpu_start_ns.min() - origin
    assert end >= trace.gpu_end_ns.max() - origin
    assert all(re.fullmatch(r"\d+ s", label) for label in tick_labels(page)), tick_labels(page)
    # 100 µs, 43 s into the trace: the first tick in full, the others after it
    page.evaluate("nbSetX(43279260000, 43279360000)")
    labels = tick_labels(page)
    page.screenshot(path=artifacts / "timeline_axis_zoomed_in.png")
    assert re.fullmatch(r"43\.2792\d+ s", labels[0]), labels
    assert labels[1:] and all(re.fullmatch(r"\+\d+ µs", label) for label in labels[1:]), labels
    page.evaluate("nbSetX(1000, 3001000)")  # near the start, plain labels in the unit that fits
    assert all(re.fullmatch(r"\d+(\.\d+)? ms", label) for label in tick_labels(page)), tick_labels(page)
    # the reset tool shows the whole trace
    page.evaluate("() => Bokeh.index.find_one(nb('nbprof_plot')).reset()")
    page.wait_for_timeout(200)
    assert page.evaluate("nbX()") == [0, span]
    page.close()


def test_ctrl_wheel_zooms_in_and_out_by_the_same_factor(browser, alexnet):
    _, path = alexnet
    page = open_page(browser, path)
    view = page.evaluate("nbX()")
    x, y = page.evaluate(f"nbScreen({(view[0] + view[1]) / 2}, 3)")
    page.mouse.move(x, y)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -300)
    page.wait_for_timeout(200)
    zoomed = page.evaluate("nbX()")
    page.mouse.wheel(0, 300)
    page.wait_for_timeout(200)
    page.keyboard.up("Control")
    assert zoomed[1] - zoomed[0] < 0.9 * (view[1] - view[0])
    assert page.evaluate("nbX()") == pytest.approx(view, rel=1e-6, abs=1)
    page.close()


def test_a_collapsed_group_writes_no_name_over_another(browser, shared_traces, tmp_path, artifacts):
    trace = nbprof.load(shared_traces / "gpu_training_step_68k.json.gz")
    page = open_page(browser, save_html(trace, tmp_path / "collapsed.html"))
    header, header_y = next((label, y) for y, label in page.evaluate("nbAxis()")
                            if label.startswith("▾ rank 0 · pid 1102"))
    x, y = page.evaluate(f"nbScreen(nbX()[0], {header_y})")
    page.mouse.click(x - 40, y)  # collapse the process: its 3 thread lanes into the header row
    page.wait_for_function("() => nbAxis().some(([y, label]) => label.startsWith('▸'))")
    page.screenshot(path=artifacts / "timeline_collapsed_names.png")
    # the names written in the header row, as spans of screen pixels
    spans = page.evaluate(f"""() => {{
        const d = nb('nbprof_labels').data, ctx = document.createElement('canvas').getContext('2d');
        ctx.font = '11px sans-serif';
        const spans = [];
        for (let i = 0; i < d.text.length; i++) {{
          if (Math.abs(d.y[i] - ({header_y} + 0.5)) > 0.5) continue;
          const [x] = nbScreen(d.x[i], d.y[i]), half = ctx.measureText(d.text[i]).width / 2;
          spans.push([x - half, x + half, d.text[i]]);
        }}
        return spans.sort((a, b) => a[0] - b[0]); }}""")
    assert spans, "the header row names its first lane's bars"
    overlapping = [(a[2], b[2]) for a, b in zip(spans, spans[1:]) if b[0] < a[1]]
    assert not overlapping
    page.close()


def test_async_slices_are_drawn_on_their_lanes(browser, tmp_path, artifacts):
    import json

    events = [{"ph": "X", "name": "work", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
              {"ph": "b", "name": "request", "id": 1, "pid": 1, "tid": 1, "ts": 10},
              {"ph": "b", "name": "parse", "id": 1, "pid": 1, "tid": 2, "ts": 20},
              {"ph": "e", "name": "parse", "id": 1, "pid": 1, "tid": 2, "ts": 40},
              {"ph": "e", "name": "request", "id": 1, "pid": 1, "tid": 3, "ts": 90}]
    source = tmp_path / "async.json"
    source.write_text(json.dumps({"traceEvents": events}))
    trace = nbprof.load(source)
    page = open_page(browser, save_html(trace, tmp_path / "async.html"))
    labels, _ = axis(page)
    assert labels == Timeline(trace).lane_labels == ["main thread", "async · request"]
    drawn = rendered(page)
    assert sorted(drawn["name"]) == ["parse", "request", "work"]
    by_name = dict(zip(drawn["name"], drawn["top"]))
    assert by_name["work"] < by_name["request"] < by_name["parse"]  # its lane, then nested below
    page.screenshot(path=artifacts / "timeline_async.png")
    page.close()


def test_a_dense_gpu_lane_is_shaded_by_how_busy_each_few_pixels_are(browser, tmp_path):
    # 100 ns kernels every 200 ns for 400 µs (50% busy), then every 600 ns for 300 µs (17%: gaps
    # under a pixel), 100 µs idle, 50% again: the whole lane used to be one solid-looking block
    # "2500 events" beside another; now each stretch is drawn as busy as it is.
    starts = np.concatenate([np.arange(0, 400_000, 200), np.arange(400_000, 700_000, 600),
                             np.arange(800_000, 1_000_000, 200)])
    n = len(starts)
    trace = Trace.build(start_ns=[0], end_ns=[10], thread=[0], name_id=[0], names=["op", "sgemm"],
                        threads=[(1, 100, "MainThread")], gpu_start_ns=starts,
                        gpu_end_ns=starts + 100, gpu_name_id=np.ones(n), gpu_device=np.zeros(n),
                        gpu_stream=np.full(n, 7), gpu_launch=np.full(n, -1), gpu_kind=np.ones(n))
    page = open_page(browser, save_html(trace, tmp_path / "dense.html"))
    bars = page.evaluate("() => { const d = nb('nbprof_rendered').data; return {gpu: [...d.gpu], "
                         "count: [...d.count], left: [...d.left], right: [...d.right], "
                         "alpha: [...d.alpha], details: [...d.details]}; }")
    gpu = [k for k in range(len(bars["gpu"])) if bars["gpu"][k]]
    assert sum(bars["count"][k] for k in gpu) == n

    def shades(lo, hi):  # the busy fractions of the bars centred in [lo, hi]
        return [(bars["alpha"][k] - 0.3) / 0.7 for k in gpu
                if lo <= (bars["left"][k] + bars["right"][k]) / 2 <= hi]

    # (a bar's edge may take in a column of its neighbour: centres away from the changes)
    dense, sparse = shades(10_000, 390_000), shades(410_000, 690_000)
    again = shades(810_000, 990_000)
    assert dense and sparse and again
    assert all(abs(f - 0.5) < 0.08 for f in dense + again), (dense, again)
    assert all(f < 0.3 for f in sparse), sparse
    assert not [k for k in gpu if bars["right"][k] > 700_200 and bars["left"][k] < 800_000]
    assert any(bars["details"][k].startswith("5") and "% busy" in bars["details"][k] for k in gpu)
    # the stretch with no pixel of gap is still named as one: how many events it holds
    texts = page.evaluate("() => [...nb('nbprof_labels').data.text]")
    assert any(t.startswith("2500 events") for t in texts), texts
    page.close()
