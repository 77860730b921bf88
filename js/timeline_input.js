// The wheel, the keyboard, Shift+drag and group headers, as DOM listeners on the plot's element.
//
// Plain wheel scrolls the page or notebook. Ctrl + wheel (Chromium sends a trackpad pinch so) and
// ⌘ + wheel zoom here, by exp(±k·delta): a notch in and a notch out land where they started
// (Bokeh's own wheel zoom scales by 1 ∓ k·delta, which does not). Shift + wheel pans; Alt + wheel zooms the lanes in y (lanes cut to fit grow
// back), Alt + Shift + wheel scrolls them. With the timeline focused (click it) the keys work as
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
  // A search match, as nbprof/timeline/view.py's view_onto decides (again here, with the plot's
  // real width): where it is already LABEL_MIN_PX wide in view (a bar with its name), nothing
  // moves; else the view centres on it at 4x its length (at least 2 µs), never wider than it was.
  const x0 = plot.x_range.start, x1 = plot.x_range.end;
  const width = plot.inner_width > 0 ? plot.inner_width : 800;
  const length = Math.max(end - start, 1);
  const inView = start >= x0 && end <= x1;
  if (inView && length * width / Math.max(x1 - x0, 1e-9) >= LABEL_MIN_PX) return;
  let span = Math.max(4 * length, 2000);
  if (inView) span = Math.min(span, x1 - x0);
  span = Math.max(span, 1.2 * length);
  const middle = (start + end) / 2;
  setX(S, middle - span / 2, middle + span / 2);
}

function zoomLanes(S, factor, fraction) {
  // Alt+wheel: lanes get taller (and cut lanes grow back) around the row at `fraction` of the
  // plot's height; 1 shows every lane in the plot again.
  const most = Math.max(1, 2 * S.uncutRows * ROW_PX / Math.max(plot.inner_height, 1));
  const zoom = Math.min(most, Math.max(1, S.laneZoom * factor));
  if (zoom === S.laneZoom) return;
  const anchor = (S.laneTop + fraction * S.totalRows / S.laneZoom) / S.totalRows;
  S.laneZoom = zoom;
  layoutLanes(S);  // for the new room; then keep the row under the pointer where it was
  S.laneTop = anchor * S.totalRows - fraction * S.totalRows / zoom;
  showLaneWindow(S);
  drawView(S);
}

function scrollLanes(S, rows) {
  S.laneTop += rows;
  showLaneWindow(S);
}

function resetLanes(S) {
  S.laneZoom = 1; S.laneTop = 0;
  redrawAll(S);
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
    const zoom = event.ctrlKey || event.metaKey, pan = event.shiftKey, lanes = event.altKey;
    if (!zoom && !pan && !lanes) return;  // the page scrolls
    const at = local(event);
    if (!at.inFrame) return;
    event.preventDefault();
    event.stopPropagation();
    const unit = event.deltaMode === 1 ? 16 : event.deltaMode === 2 ? plot.inner_width : 1;
    if (lanes) {  // Alt: the lanes, in y. Alt+Shift scrolls them, Alt zooms them.
      const delta = (event.deltaY || event.deltaX) * unit;
      if (pan) scrollLanes(S, delta / Math.max(plot.inner_height, 1) * S.totalRows / S.laneZoom);
      else zoomLanes(S, Math.exp(-delta * 0.002), (at.sy - view.frame.bbox.top) / Math.max(plot.inner_height, 1));
      return;
    }
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
      fill(area_band, {left: [Math.min(from, x)], right: [Math.max(from, x)]});
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
