// Triggers: tap, hover, box select and the dispatch of every event this CustomJS is attached to.

function onTap(S) {
  if (S.filling) return;
  const indices = rendered.selected.indices;
  if (!indices.length) {
    clearSelection();
    return;
  }
  const k = indices[0], id = rendered.data.id[k];
  if (id < 0) {
    // A merged block: zoom to it, where its events are drawn one by one.
    const left = rendered.data.left[k], right = rendered.data.left[k] + rendered.data.dur[k];
    const pad = (right - left) * 0.05 + 1;
    plot.x_range.setv({start: left - pad, end: right + pad});
    return;
  }
  const kind = rendered.data.gpu[k] ? "gpu" : "cpu";
  // A runtime call selects the kernels it launched too (after itself: the first is the click).
  const kernels = kind === "cpu" ? callKernels(S, entryOf(S, id, "cpu")) : [];
  // an entry's trace id (served entries carry local ids: timeline_served.js)
  const traceId = (e) => (S.eventId ? S.eventId[e] : S.id[e]);
  selection.data = {event_id: [id, ...kernels.map(traceId)],
                    kind: [kind, ...kernels.map(() => "gpu")]};
}

function onHover(S) {
  const indices = cb_data.index.indices;
  let entry = -1;
  if (indices.length) {
    const k = indices[0], id = rendered.data.id[k];
    entry = entryOf(S, id, rendered.data.gpu[k] ? "gpu" : "cpu");
  }
  if (entry !== S.hovered) {
    S.hovered = entry;
    drawOverlays(S);
  }
}

function onViewRequest(S) {
  const {start_ns, end_ns} = view_request.data;
  if (start_ns && start_ns.length) bringIntoView(S, Number(start_ns[0]), Number(end_ns[0]));
}

function dispatch(S) {
  if (cb_obj === plot.x_range) {
    const view = [plot.x_range.start, plot.x_range.end, plot.inner_width];
    if (S.lastView && view.every((v, i) => v === S.lastView[i])) return;
    S.lastView = view;
    drawView(S);
  } else if (cb_obj === highlight || cb_obj === highlight_gpu) {
    drawOverlays(S);
    drawOverviewMarks(S);
  } else if (cb_obj === selection || cb_obj === area_selection) {
    drawOverlays(S);
  } else if (cb_obj === view_request) {
    onViewRequest(S);
  } else if (cb_obj === rendered.selected) {
    onTap(S);
  } else if (cb_obj === hover) {
    onHover(S);
  } else if (cb_obj && cb_obj.event_name === "reset") {
    resetLanes(S);  // the reset tool: every lane in view again
  } else if (cb_obj && cb_obj.event_name === "selectiongeometry") {
    // the box select tool: an area selection over its x extent
    const {x0, x1} = cb_obj.geometry;
    if (cb_obj.final && x0 !== undefined) setArea(Math.min(x0, x1), Math.max(x0, x1));
  } else if (cb_obj === served_answer) {  // the kernel's bars for a view (timeline_served.js)
    onServedAnswer(S);
  } else {  // document ready, the filter: lanes may change
    redrawAll(S);
  }
}

// Where the first view's time went (the benchmark reads S.timings) and the model property that
// tests and the notebook widget wait on.
function opened(S, started, inflated, decoded) {
  S.ready = true;
  redrawAll(S);
  onViewRequest(S);  // a range asked for before the page opened (a saved page)
  S.timings = {inflate_ms: inflated - started, decode_ms: decoded - inflated,
               first_draw_ms: performance.now() - decoded};
  const view = plotView();
  if (view) { watchResize(S, view); installInput(S, view); }
  plot.tags = [...plot.tags.filter((t) => t !== "nbprof-ready"), "nbprof-ready"];
}

function nextTask() {
  // a task of its own (a MessageChannel's message: setTimeout chains are clamped to 4 ms)
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => resolve();
    channel.port2.postMessage(0);
  });
}

async function inSlices(steps, sliceMs) {
  // run a generator's steps, giving the browser its frames and input at least every sliceMs
  let since = performance.now();
  for (const _ of steps) {  // eslint-disable-line no-unused-vars
    if (performance.now() - since > sliceMs) {
      await nextTask();
      since = performance.now();
    }
  }
}

async function openEvents(S) {
  const started = performance.now(), level = !info.coarse && info.first_level;
  const width = plot.inner_width > 0 ? plot.inner_width : 800, {start, end} = plot.x_range;
  if (level && !S.minDuration && (end - start) / width >= level.ns_per_px && start <= 0 &&
      end >= info.span_ns) {
    // A big page opening on the whole trace: the first view from the level's few thousand bars
    // (the same as the events'), then the events, a few ms at a time (first_level.py says why).
    // (The level is not compressed: no inflate to wait on.)
    // Drawn now, before Bokeh's first paint: the plot has its final width already (its y axis
    // opened with these labels: view.py); if not, the resize redraws it.
    const bytes = base64Bytes(level.packed);
    const inflated = performance.now();
    S.level = {nsPerPx: level.ns_per_px, entries: decodeEntries(bytes, level.meta)};
    opened(S, started, inflated, performance.now());
    // the events after the first paint (a frame, or 100 ms: a hidden page gets no frames)
    await new Promise((resolve) => {
      requestAnimationFrame(() => setTimeout(resolve, 0));
      setTimeout(resolve, 100);
    });
    const events = {};
    await inSlices(decodeSteps(events, await inflateInSlices(packed, 32768)), 8);
    // the level's own columns (counts, local ids) are not the events': cleared when they swap in
    S.events = Object.assign(Object.fromEntries(Object.keys(S.level.entries).map((k) => [k, undefined])),
                             events);
    Object.assign(S, S.events);
    S.timings.events_ms = performance.now() - started;
    if (S.waitingForEvents && S.minDuration) {  // the overview too: its level ignored the minimum
      S.waitingForEvents = false;
      redrawAll(S);
    } else {
      // the view if the level did not draw it exactly; search marks and the selection of events
      // inside the level's blocks (the overview of the whole trace from the level is exact)
      if (S.waitingForEvents) drawView(S); else drawOverlays(S);
      S.waitingForEvents = false;
      drawOverviewMarks(S);
    }
    return;
  }
  const bytes = await inflateBase64(packed);
  const inflated = performance.now();
  if (info.coarse) await initCoarse(S, bytes); else decode(S, bytes);
  opened(S, started, inflated, performance.now());
}

{
  let S = rendered.__nbprof;
  if (!S) {
    S = rendered.__nbprof = {ready: false, minDuration: 0, hovered: -1, collapsedGroups: new Set(),
                                laneZoom: 1, laneTop: 0, laneRows: laneRowsOf()};
    // The lanes and their y axis first: Bokeh lays the plot out for its labels while the events
    // inflate, so the first view is drawn at the plot's final width (not drawn twice).
    readFilter(S);
    layoutLanes(S);
    openEvents(S).catch((error) => console.error("nbprof timeline: could not decode the events", error));
  } else if (S.ready) {
    installInput(S, plotView());  // a view drawn again (a notebook output re-shown) gets them too
    dispatch(S);
  }
}
