// nbprof timeline: level-of-detail drawing of the hidden event columns (nbprof/timeline/).
// This file is the body of ONE Bokeh CustomJS that every trigger of a timeline shares: document
// ready, x-range change, tap, hover, and the selection/highlight/filter sources Python sets
// (`cb_obj` says which fired); a ResizeObserver redraws when the plot's size changes. Decoded
// state lives on the `rendered` source's JS object, so all triggers of one page (or one notebook
// widget) see the same state.
//
// Why: a million Bokeh glyphs take seconds per pan (TIMELINE_SCALE.md). Here all events stay in
// typed arrays; each view fills `rendered` with only what is in view: events at least MIN_REAL_PX
// wide as themselves, narrower neighbours with sub-pixel gaps merged into per-row busy blocks.
// Zoom in and every event becomes wide enough to be drawn as itself: nothing real stays hidden.

const MIN_REAL_PX = 3;       // an event at least this wide is always drawn as itself
const MERGE_GAP_PX = 1;      // narrower events closer than this merge into one busy block
const MIN_BAR_PX = 1;        // every bar is at least this wide: zero-length events stay visible
const ROW_PX = 12;           // height a sub-row needs before lanes collapse to their envelope
const VIEW_LINKS_MAX = 64;   // launch links for every op in view when at most this many
const FOCUS_LINKS_MAX = 2000;
const MARKS_MAX = 5000;
// Lanes, rows, names and column layout, parsed once per page (Python sends it as one JSON string).
const info = rendered.__nbprof_info || (rendered.__nbprof_info = JSON.parse(info_json));

function decodeVarints(bytes, offset, count, out) {
  // LEB128, as nbprof/timeline/packing.py writes it. Values stay below 2^53 (ns in a trace).
  let pos = offset;
  for (let i = 0; i < count; i++) {
    let value = 0, scale = 1, byte;
    do {
      byte = bytes[pos++];
      value += (byte & 0x7f) * scale;
      scale *= 128;
    } while (byte & 0x80);
    out[i] = value;
  }
  return out;
}

async function inflateBase64(text) {
  let packed;
  if (typeof Uint8Array.fromBase64 === "function") {
    packed = Uint8Array.fromBase64(text);
  } else {
    const binary = atob(text);
    packed = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) packed[i] = binary.charCodeAt(i);
  }
  const stream = new Blob([packed]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

function column(bytes, name, Type) {
  const [offset, , count] = info.layout[name];
  return decodeVarints(bytes, offset, count, new Type(count));
}

function decode(S, bytes) {
  const nRows = info.row_lane.length, nCpu = info.n_cpu, nGpu = info.n_gpu;
  const n = nCpu + nGpu;
  const rowCount = column(bytes, "row_count", Int32Array);
  const start = column(bytes, "start_gap", Float64Array);  // zigzag gap after the previous end
  const dur = column(bytes, "duration", Float64Array);
  const id = column(bytes, "id_delta", Int32Array);
  const name = column(bytes, "name_id", Int32Array);
  const family = column(bytes, "family", Uint8Array);
  const launchPlus1 = column(bytes, "gpu_launch", Int32Array);
  const rowStart = new Int32Array(nRows + 1);
  const rowOf = new Int32Array(n);
  // Running max of ends within each row: sorted, so a binary search finds the first event in view
  // even when an earlier, longer one overlaps later ones.
  const maxEnd = new Float64Array(n);
  const cpuEntry = new Int32Array(nCpu), gpuEntry = new Int32Array(nGpu);  // event id -> entry
  const launchOf = new Int32Array(n).fill(-1);  // per GPU entry: the launching CPU event id
  let gpuSeen = 0;
  for (let r = 0; r < nRows; r++) {
    const lo = rowStart[r], hi = lo + rowCount[r];
    rowStart[r + 1] = hi;
    const isGpu = info.row_is_gpu[r];
    let running = -Infinity;
    for (let i = lo; i < hi; i++) {
      const zigzag = start[i], gap = zigzag % 2 === 0 ? zigzag / 2 : -(zigzag + 1) / 2;
      start[i] = i > lo ? start[i - 1] + dur[i - 1] + gap : gap;
      if (i > lo) id[i] += id[i - 1];
      rowOf[i] = r;
      running = Math.max(running, start[i] + dur[i]);
      maxEnd[i] = running;
      if (isGpu) { gpuEntry[id[i]] = i; launchOf[i] = launchPlus1[gpuSeen++] - 1; }
      else cpuEntry[id[i]] = i;
    }
  }
  // Launch index: CPU event id -> the GPU entries it launched (CSR), for the links.
  const launchStart = new Int32Array(nCpu + 1);
  for (let i = 0; i < n; i++) if (launchOf[i] >= 0) launchStart[launchOf[i] + 1]++;
  for (let c = 0; c < nCpu; c++) launchStart[c + 1] += launchStart[c];
  const launched = new Int32Array(launchStart[nCpu]);
  const fill = launchStart.slice(0, nCpu);
  for (let i = 0; i < n; i++) if (launchOf[i] >= 0) launched[fill[launchOf[i]]++] = i;
  const details = new Array(n).fill("");
  const detailIds = column(bytes, "detail_entry", Int32Array);
  const detailTexts = column(bytes, "detail_text", Int32Array);
  for (let k = 0; k < detailIds.length; k++) details[detailIds[k]] = info.detail_texts[detailTexts[k]];
  Object.assign(S, {rowStart, rowOf, start, dur, id, name, family, maxEnd, cpuEntry, gpuEntry,
                    launchOf, launchStart, launched, details});
  const laneRows = info.labels.map(() => []);
  for (let r = 0; r < nRows; r++) laneRows[info.row_lane[r]].push(r);
  S.laneRows = laneRows;
}

function colorOf(family, nameId) {
  const palette = info.palettes[family];
  return palette[info.name_hash[nameId] % palette.length];
}

function firstInView(S, lo, hi, x0) {
  // first entry of [lo, hi) whose row-running max end reaches x0: every earlier one ends before
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (S.maxEnd[mid] < x0) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// Calls emit(row, first, count, left, right) for each bar of rows in [x0, x1] at nsPerPx.
function sweep(S, rows, x0, x1, nsPerPx, minRealPx, emit) {
  const {start, dur, rowStart} = S;
  const minDur = S.minDuration, realNs = minRealPx * nsPerPx, gapNs = MERGE_GAP_PX * nsPerPx;
  for (const r of rows) {
    const hi = rowStart[r + 1];
    let first = -1, count = 0, blockStart = 0, blockEnd = 0;
    for (let i = firstInView(S, rowStart[r], hi, x0); i < hi && start[i] <= x1; i++) {
      const d = dur[i];
      if (d < minDur) continue;
      const s = start[i], e = s + d;
      if (e < x0) continue;
      if (d >= realNs) {
        if (count) emit(r, first, count, blockStart, blockEnd);
        count = 0;
        emit(r, i, 1, s, e);
      } else if (count && s - blockEnd < gapNs) {
        if (e > blockEnd) blockEnd = e;
        count++;
      } else {
        if (count) emit(r, first, count, blockStart, blockEnd);
        first = i; count = 1; blockStart = s; blockEnd = e;
      }
    }
    if (count) emit(r, first, count, blockStart, blockEnd);
  }
}

function layoutLanes(S) {
  const visible = filter.data.lane_visible;
  const lanes = info.labels.map((_, lane) => lane).filter((lane) => visible[lane]);
  // Lanes get one sub-row per nesting depth while they fit; else every lane is cut to the
  // deepest `depthCap` rows that fit, down to 1 (its busy envelope): a CPU lane's deeper ops lie
  // inside the ones shown, a GPU lane's deeper rows are drawn into its last row.
  const room = plot.inner_height > 0 ? plot.inner_height : plot.height;
  const rowsWith = (cap) => lanes.reduce((sum, lane) => sum + Math.min(info.lane_height[lane], cap), 0);
  let depthCap = Math.max(1, ...lanes.map((lane) => info.lane_height[lane]));
  while (depthCap > 1 && rowsWith(depthCap) * ROW_PX > room) depthCap--;
  S.depthCap = depthCap;
  S.collapsed = depthCap === 1;
  S.rowY = new Float64Array(info.row_lane.length).fill(NaN);
  S.drawnRows = [];
  const ticks = [], labels = new Map(), bands = {left: [], right: [], bottom: [], top: []};
  let y = 0, group = null, shade = false, bandTop = 0;
  const closeBand = () => {
    if (shade && y > bandTop) {
      bands.left.push(-1e18); bands.right.push(1e18); bands.bottom.push(bandTop); bands.top.push(y);
    }
  };
  for (const lane of lanes) {
    if (info.groups[lane] !== group) {
      closeBand();
      if (group !== null) shade = !shade;
      group = info.groups[lane]; bandTop = y;
    }
    const height = Math.min(info.lane_height[lane], depthCap);
    for (const r of S.laneRows[lane]) {
      const sub = info.row_sub[r];
      if (!info.lane_is_gpu[lane] && sub >= depthCap) continue;
      S.rowY[r] = y + Math.min(sub, depthCap - 1);
      S.drawnRows.push(r);
    }
    ticks.push(y + height / 2);
    labels.set(y + height / 2, info.labels[lane]);
    y += height;
  }
  closeBand();
  S.totalRows = Math.max(y, 1);
  ticker.ticks = ticks;
  yaxis.major_label_overrides = labels;
  bands_source.data = bands;
  plot.y_range.setv({start: S.totalRows, end: 0, reset_start: S.totalRows, reset_end: 0});
}

function drawView(S) {
  const x0 = plot.x_range.start, x1 = plot.x_range.end;
  const width = plot.inner_width > 0 ? plot.inner_width : 800;
  const nsPerPx = (x1 - x0) / width;
  const out = {left: [], right: [], bottom: [], top: [], color: [], name: [], lane: [], start: [],
               dur: [], count: [], id: [], gpu: [], details: [], launch: []};
  const viewLinkOps = [];
  let viewLinks = 0;
  const minBar = MIN_BAR_PX * nsPerPx;
  sweep(S, S.drawnRows, x0, x1, nsPerPx, MIN_REAL_PX, (r, first, count, left, right) => {
    const y = S.rowY[r], isGpu = info.row_is_gpu[r];
    const nameText = info.names[S.name[first]];
    out.left.push(left);
    out.right.push(Math.max(right, left + minBar));
    out.bottom.push(y + 0.1);
    out.top.push(y + 0.9);
    out.lane.push(info.labels[info.row_lane[r]]);
    out.start.push(left);
    out.dur.push(right - left);
    out.count.push(count);
    out.gpu.push(isGpu ? 1 : 0);
    if (count === 1) {
      out.color.push(colorOf(S.family[first], S.name[first]));
      out.name.push(nameText);
      out.id.push(S.id[first]);
      out.details.push(S.details[first]);
      const launcher = isGpu ? S.launchOf[first] : -1;
      out.launch.push(launcher >= 0 ? info.names[S.name[S.cpuEntry[launcher]]] : "");
      if (!isGpu) {
        const links = S.launchStart[S.id[first] + 1] - S.launchStart[S.id[first]];
        if (links) { viewLinks += links; viewLinkOps.push(S.id[first]); }
      }
    } else {
      out.color.push(info.block_colors[S.family[first]]);
      out.name.push(`${count} events (first: ${nameText})`);
      out.id.push(-1);
      out.details.push("zoom in (or click) to see them one by one");
      out.launch.push("");
    }
  });
  S.filling = true;
  rendered.data = out;
  rendered.selected.indices = [];
  S.filling = false;
  S.viewLinkOps = viewLinks <= VIEW_LINKS_MAX ? viewLinkOps : [];
  S.barsDrawn = out.left.length;
  drawOverlays(S);
}

function entryOf(S, id, kind) {
  if (id === null || id === undefined || id < 0) return -1;
  if (kind === "gpu") return id < info.n_gpu ? S.gpuEntry[id] : -1;
  return id < info.n_cpu ? S.cpuEntry[id] : -1;
}

function addLinksFrom(S, cpuId, links, limit) {
  const from = S.cpuEntry[cpuId], y0 = S.rowY[S.rowOf[from]];
  for (let k = S.launchStart[cpuId]; k < S.launchStart[cpuId + 1] && links.x0.length < limit; k++) {
    const to = S.launched[k], y1 = S.rowY[S.rowOf[to]];
    if (Number.isNaN(y0) || Number.isNaN(y1)) continue;
    links.x0.push(S.start[from]); links.y0.push(y0 + 0.5);
    links.x1.push(S.start[to]); links.y1.push(y1 + 0.5);
  }
}

function focusLinks(S, entry, links) {
  // An op's links are those of the launches it made itself or through the ops nested in it.
  if (entry < 0) return;
  if (info.row_is_gpu[S.rowOf[entry]]) {
    const launcher = S.launchOf[entry];
    if (launcher >= 0) {
      const from = S.cpuEntry[launcher], y0 = S.rowY[S.rowOf[from]], y1 = S.rowY[S.rowOf[entry]];
      if (!Number.isNaN(y0) && !Number.isNaN(y1)) {
        links.x0.push(S.start[from]); links.y0.push(y0 + 0.5);
        links.x1.push(S.start[entry]); links.y1.push(y1 + 0.5);
      }
    }
    return;
  }
  const lane = info.row_lane[S.rowOf[entry]], end = S.start[entry] + S.dur[entry];
  for (let c = S.id[entry]; c < info.n_cpu && links.x0.length < FOCUS_LINKS_MAX; c++) {
    const e = S.cpuEntry[c];
    if (S.start[e] > end) break;
    if (info.row_lane[S.rowOf[e]] === lane && S.launchStart[c + 1] > S.launchStart[c])
      addLinksFrom(S, c, links, FOCUS_LINKS_MAX);
  }
}

function pushMark(S, marks, entry, color, minBar) {
  const y = S.rowY[S.rowOf[entry]];
  if (Number.isNaN(y)) return;
  const left = S.start[entry];
  marks.left.push(left); marks.right.push(Math.max(left + S.dur[entry], left + minBar));
  marks.bottom.push(y + 0.05); marks.top.push(y + 0.95); marks.line_color.push(color);
}

function drawOverlays(S) {
  const x0 = plot.x_range.start, x1 = plot.x_range.end;
  const width = plot.inner_width > 0 ? plot.inner_width : 800;
  const minBar = MIN_BAR_PX * (x1 - x0) / width;
  const marks = {left: [], right: [], bottom: [], top: [], line_color: []};
  const ids = highlight.data.event_id || [];
  for (let k = 0; k < ids.length && marks.left.length < MARKS_MAX; k++) {
    const entry = entryOf(S, ids[k], "cpu");
    if (entry >= 0 && S.start[entry] <= x1 && S.start[entry] + S.dur[entry] >= x0)
      pushMark(S, marks, entry, info.highlight_color, minBar);
  }
  const selectedIds = selection.data.event_id || [], kinds = selection.data.kind || [];
  const selected = selectedIds.length ? entryOf(S, selectedIds[0], kinds[0]) : -1;
  if (selected >= 0) pushMark(S, marks, selected, info.selection_color, minBar);
  marks_source.data = marks;
  const focus = {x0: [], y0: [], x1: [], y1: []};
  focusLinks(S, selected, focus);
  focusLinks(S, S.hovered === undefined ? -1 : S.hovered, focus);
  links_focus.data = focus;
  const view = {x0: [], y0: [], x1: [], y1: []};
  for (const c of S.viewLinkOps || []) addLinksFrom(S, c, view, VIEW_LINKS_MAX);
  links_view.data = view;
}

function drawOverview(S) {
  // The whole trace, every lane on one line: the envelope of what each lane did.
  const width = overview.inner_width > 0 ? overview.inner_width : 800;
  const nsPerPx = (info.span_ns || 1) / width;
  const out = {left: [], right: [], bottom: [], top: [], color: []};
  const laneY = new Map();
  const rows = [];
  for (const r of S.drawnRows) {
    const lane = info.row_lane[r];
    if (!laneY.has(lane)) laneY.set(lane, laneY.size);
    rows.push(r);
  }
  sweep(S, rows, 0, info.span_ns, nsPerPx, Infinity, (r, first, count, left, right) => {
    const y = laneY.get(info.row_lane[r]);
    out.left.push(left); out.right.push(Math.max(right, left + nsPerPx));
    out.bottom.push(y + 0.1); out.top.push(y + 0.9);
    out.color.push(info.block_colors[S.family[first]]);
  });
  overview_source.data = out;
  overview.y_range.setv({start: Math.max(laneY.size, 1), end: 0});
}

function readFilter(S) {
  const min = filter.data.min_duration_ns || [];
  S.minDuration = min.length ? Number(min[0]) : 0;
}

function redrawAll(S) {
  readFilter(S);
  layoutLanes(S);
  drawView(S);
  drawOverview(S);
  S.lastView = [plot.x_range.start, plot.x_range.end, plot.inner_width];
  S.drawnSize = [plot.inner_width, plot.inner_height];
}

function watchResize(S) {
  // Bokeh updates plot.inner_width/inner_height without change events, so a resized page (or a
  // notebook column) is noticed here: the LOD and the lane heights depend on the plot's size.
  let view = null;
  try { view = window.Bokeh.index.find_one(plot); } catch (error) { view = null; }
  if (!view || typeof ResizeObserver === "undefined") return;
  let pending = false;
  new ResizeObserver(() => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      if (plot.inner_width !== S.drawnSize[0] || plot.inner_height !== S.drawnSize[1]) redrawAll(S);
    });
  }).observe(view.el);
}

function onTap(S) {
  if (S.filling) return;
  const indices = rendered.selected.indices;
  if (!indices.length) {
    selection.data = {event_id: [], kind: []};
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
  selection.data = {event_id: [id], kind: [rendered.data.gpu[k] ? "gpu" : "cpu"]};
}

function onHover(S) {
  const indices = cb_data.index.indices;
  let entry = -1;
  if (indices.length) {
    const k = indices[0], id = rendered.data.id[k];
    entry = entryOf(S, id, rendered.data.gpu[k] ? "gpu" : "cpu");
  }
  if (entry !== (S.hovered === undefined ? -1 : S.hovered)) {
    S.hovered = entry;
    drawOverlays(S);
  }
}

function dispatch(S) {
  if (cb_obj === plot.x_range) {
    const view = [plot.x_range.start, plot.x_range.end, plot.inner_width];
    if (S.lastView && view.every((v, i) => v === S.lastView[i])) return;
    S.lastView = view;
    drawView(S);
  } else if (cb_obj === selection || cb_obj === highlight) {
    drawOverlays(S);
  } else if (cb_obj === rendered.selected) {
    onTap(S);
  } else if (cb_obj === hover) {
    onHover(S);
  } else {  // document ready, the filter: lanes may change
    redrawAll(S);
  }
}

{
  let S = rendered.__nbprof;
  if (!S) {
    S = rendered.__nbprof = {ready: false, minDuration: 0};
    const started = performance.now();
    inflateBase64(packed).then((bytes) => {
      const inflated = performance.now();
      decode(S, bytes);
      const decoded = performance.now();
      S.ready = true;
      redrawAll(S);
      // where the first view's time went (the benchmark reads it)
      S.timings = {inflate_ms: inflated - started, decode_ms: decoded - inflated,
                   first_draw_ms: performance.now() - decoded};
      watchResize(S);
      // A model property that tests and the notebook widget can wait on.
      plot.tags = [...plot.tags.filter((t) => t !== "nbprof-ready"), "nbprof-ready"];
    }).catch((error) => console.error("nbprof timeline: could not decode the events", error));
  }
  if (S.ready) dispatch(S);
}
