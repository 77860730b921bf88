// The wheel, the keyboard, Shift+drag and group headers, as DOM listeners on the plot's element.
//
// Plain wheel scrolls the page or notebook: Bokeh's wheel zoom tool wants Ctrl (and Chromium
// sends a trackpad pinch as Ctrl+wheel), and without it Bokeh leaves the event to the page. ⌘ +
// wheel zooms and Shift + wheel pans here. With the timeline focused (click it) the keys work as
// in Perfetto: W/S zoom, A/D pan, the arrows the same, Esc clears the selection.

function setX(S, start, end) {
  // The view, kept inside the x range's bounds and no narrower than its min_interval.
  const [lo, hi] = plot.x_range.bounds || [-Infinity, Infinity];
  let width = Math.max(end - start, plot.x_range.min_interval || 1);
  width = Math.min(width, hi - lo);
  start = Math.min(Math.max(start, lo), hi - width);
  plot.x_range.setv({start, end: start + width});
}

function zoomAt(S, factor, x) {
  const {start, end} = plot.x_range;
  setX(S, x - (x - start) * factor, x + (end - x) * factor);
}

function panBy(S, ns) {
  setX(S, plot.x_range.start + ns, plot.x_range.end + ns);
}

function clearSelection() {
  selection.data = {event_id: [], kind: []};
  area_selection.data = {start_ns: [], end_ns: []};
}

function bringIntoView(S, start, end) {
  // A search match: where it is already drawn as its own bar, nothing moves; else the view
  // centres on it, narrowed (never widened, unless the match is wider) until it is a bar.
  const x0 = plot.x_range.start, x1 = plot.x_range.end;
  const width = plot.inner_width > 0 ? plot.inner_width : 800;
  const dur = Math.max(end - start, 1), nsPerPx = (x1 - x0) / width;
  const inView = start >= x0 && end <= x1;
  if (inView && dur >= MIN_REAL_PX * nsPerPx) return;
  let span = x1 - x0;
  if (dur < MIN_REAL_PX * nsPerPx) span = dur * width / (8 * MIN_REAL_PX);  // ~24 px wide
  span = Math.max(span, dur * 1.2);
  const middle = (start + end) / 2;
  setX(S, middle - span / 2, middle + span / 2);
}

function toggleGroup(S, group) {
  if (S.collapsedGroups.has(group)) S.collapsedGroups.delete(group);
  else S.collapsedGroups.add(group);
  redrawAll(S);
}

function installInput(S, view) {
  if (!view || S.inputView === view) return;
  S.inputView = view;
  const el = view.el, target = view.canvas_view.events_el;
  // JupyterLab's command-mode keys (A inserts a cell, D D deletes one) must not fire while the
  // timeline has focus: Lumino skips elements marked so, and the handler stops the event too.
  target.setAttribute("data-lm-suppress-shortcuts", "true");
  const local = (event) => {
    const rect = el.getBoundingClientRect();
    const sx = event.clientX - rect.left, sy = event.clientY - rect.top, box = view.frame.bbox;
    return {sx, sy, inFrame: sx >= box.left && sx <= box.right && sy >= box.top && sy <= box.bottom,
            inAxis: sx < box.left && sy >= box.top && sy <= box.bottom,
            x: view.frame.x_scale.invert(sx), y: view.frame.y_scale.invert(sy)};
  };
  const headerAt = (y) => (S.headers || []).find((h) => y >= h.top && y < h.bottom);

  el.addEventListener("wheel", (event) => {
    if (event.ctrlKey) return;  // Bokeh's wheel zoom tool (and a pinch)
    const zoom = event.metaKey, pan = event.shiftKey;
    if (!zoom && !pan) return;  // the page scrolls
    const at = local(event);
    if (!at.inFrame) return;
    event.preventDefault();
    event.stopPropagation();
    const unit = event.deltaMode === 1 ? 16 : event.deltaMode === 2 ? plot.inner_width : 1;
    const nsPerPx = (plot.x_range.end - plot.x_range.start) / Math.max(plot.inner_width, 1);
    if (zoom) zoomAt(S, Math.exp(event.deltaY * unit * 0.002), at.x);
    else panBy(S, (event.deltaX || event.deltaY) * unit * nsPerPx);  // Shift turns Y into X on some systems
  }, {capture: true, passive: false});

  el.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const {start, end} = plot.x_range, width = end - start;
    const middle = S.pointerX !== undefined && S.pointerX >= start && S.pointerX <= end ?
      S.pointerX : (start + end) / 2;  // zoom around the pointer, as Perfetto does
    switch (event.key.toLowerCase()) {
      case "w": case "arrowup": zoomAt(S, KEY_ZOOM, middle); break;
      case "s": case "arrowdown": zoomAt(S, 1 / KEY_ZOOM, middle); break;
      case "a": case "arrowleft": panBy(S, -KEY_PAN * width); break;
      case "d": case "arrowright": panBy(S, KEY_PAN * width); break;
      case "escape": clearSelection(); break;
      default: return;
    }
    event.preventDefault();
    event.stopPropagation();
  });

  el.addEventListener("pointermove", (event) => {
    const at = local(event);
    S.pointerX = at.inFrame ? at.x : undefined;
    el.style.cursor = at.inAxis && headerAt(at.y) ? "pointer" : "";
  });

  el.addEventListener("click", (event) => {
    const at = local(event);
    const header = at.inAxis ? headerAt(at.y) : null;
    if (header) toggleGroup(S, header.group);
  });

  // Shift+drag: an area selection over a time range (Bokeh's pan never sees the drag).
  el.addEventListener("pointerdown", (event) => {
    const at = local(event);
    if (at.inFrame) target.focus({preventScroll: true});
    if (!event.shiftKey || event.button !== 0 || !at.inFrame) return;
    event.preventDefault();
    event.stopPropagation();
    const from = at.x;
    const move = (e) => {
      const x = local(e).x;
      area_band.data = {left: [Math.min(from, x)], right: [Math.max(from, x)]};
    };
    const up = (e) => {
      window.removeEventListener("pointermove", move, true);
      window.removeEventListener("pointerup", up, true);
      const x = local(e).x, nsPerPx = (plot.x_range.end - plot.x_range.start) / Math.max(plot.inner_width, 1);
      if (Math.abs(x - from) >= 3 * nsPerPx) setArea(Math.min(from, x), Math.max(from, x));
      else drawOverlays(S);
    };
    window.addEventListener("pointermove", move, true);
    window.addEventListener("pointerup", up, true);
  }, {capture: true});
}

function setArea(left, right) {
  // In the trace's own times, as tl.area_selection documents.
  area_selection.data = {start_ns: [Math.round(left + info.origin_ns)],
                         end_ns: [Math.round(right + info.origin_ns)]};
}
