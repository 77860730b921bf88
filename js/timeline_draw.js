// Level of detail: which bars the view shows, lane by lane and row by row.

const ROW_GPU_KERNEL = 2, ROW_GPU_OP = 3;  // info.row_kind, as nbprof/timeline/lanes.py names them

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

// Calls emit(row, first, count, left, right, busy, longest) for each bar of rows in [x0, x1] at
// nsPerPx; busy is the summed duration of a block's events (its shading says how full it is),
// longest the entry of its longest event (what its label names).
function sweep(S, rows, x0, x1, nsPerPx, minRealPx, emit) {
  const {start, dur, rowStart} = S;
  const minDur = S.minDuration, realNs = minRealPx * nsPerPx, gapNs = MERGE_GAP_PX * nsPerPx;
  for (const r of rows) {
    const hi = rowStart[r + 1];
    let first = -1, count = 0, blockStart = 0, blockEnd = 0, busy = 0, longest = -1;
    for (let i = firstInView(S, rowStart[r], hi, x0); i < hi && start[i] <= x1; i++) {
      const d = dur[i];
      if (d < minDur) continue;
      const s = start[i], e = s + d;
      if (e < x0) continue;
      // pre-merged entries (timeline_served.js) carry their event count and busy time
      const n = S.entryCount ? S.entryCount[i] : 1, b = S.entryCount ? S.entryBusy[i] : d;
      if (d >= realNs && n === 1) {
        if (count) emit(r, first, count, blockStart, blockEnd, busy, longest);
        count = 0;
        emit(r, i, 1, s, e, d, i);
      } else if (count && s - blockEnd < gapNs) {
        if (e > blockEnd) blockEnd = e;
        count += n;
        busy += b;
        if (d > dur[longest]) longest = i;
      } else {
        if (count) emit(r, first, count, blockStart, blockEnd, busy, longest);
        first = i; count = n; blockStart = s; blockEnd = e; busy = b; longest = i;
      }
    }
    if (count) emit(r, first, count, blockStart, blockEnd, busy, longest);
  }
}

function rowUnits(r) {
  return info.row_kind[r] === ROW_GPU_KERNEL ? KERNEL_ROW_UNITS : 1;
}

// Places one lane's rows from y down, keeping sub-rows above `cap`; returns the lane's height.
// A CPU lane's deeper ops lie inside the ones shown: their rows are not swept, but get the last
// kept row's place (for outlines and links). A GPU lane keeps its span and kernel rows whatever
// the cap, and draws deeper op-interval rows into its last kept row.
function placeLane(S, lane, y, cap, write) {
  const rows = S.laneRows[lane], gpu = info.lane_is_gpu[lane];
  let keep = cap;
  if (gpu) for (const r of rows) if (info.row_kind[r] !== ROW_GPU_OP) keep = Math.max(keep, info.row_sub[r] + 1);
  let offset = 0, lastY = y, lastH = 1;
  for (const r of rows) {  // in sub-row order
    const kept = info.row_sub[r] < keep;
    if (kept) { lastY = y + offset; lastH = rowUnits(r); offset += lastH; }
    if (write) {
      S.rowY[r] = lastY; S.rowH[r] = lastH;
      if (kept || gpu) S.drawnRows.push(r);
    }
  }
  return Math.max(offset, 1);
}

function layoutLanes(S) {
  const visible = filter.data.lane_visible;
  const lanes = info.labels.map((_, lane) => lane).filter((lane) => visible[lane]);
  const groups = [...new Set(lanes.map((lane) => info.groups[lane]))];
  // Group headers (click one to collapse its lanes into it) where there are several groups.
  const headers = groups.length > 1;
  const open = (lane) => !(headers && S.collapsedGroups.has(info.groups[lane]));
  // Lanes get one row per nesting depth while they fit; else every lane is cut to the deepest
  // `cap` rows that fit, down to 1 (its busy envelope). A taller plot grows them back.
  // Zoomed in y (Alt+wheel), the lanes are laid out for a taller plot and the y range shows a
  // window of them: cut lanes grow back.
  const room = (plot.inner_height > 0 ? plot.inner_height : plot.height) * S.laneZoom;
  const total = (cap) => (headers ? groups.length : 0) +
    lanes.filter(open).reduce((sum, lane) => sum + placeLane(S, lane, 0, cap, false), 0);
  let cap = Math.max(1, ...lanes.map((lane) => info.lane_height[lane]));
  S.uncutRows = total(cap);  // how far Alt+wheel may zoom the lanes: until none is cut, and 2x
  while (cap > 1 && total(cap) * ROW_PX > room) cap--;
  S.depthCap = cap;
  S.collapsed = cap === 1;
  S.rowY = new Float64Array(info.row_lane.length).fill(NaN);
  S.rowH = new Float64Array(info.row_lane.length).fill(1);
  S.unnamed = new Uint8Array(info.row_lane.length);
  S.drawnRows = [];
  S.headers = [];
  const spans = [], bands = {left: [], right: [], bottom: [], top: []};  // spans: what the y axis names
  const band = (bottom, top) => {
    bands.left.push(-1e18); bands.right.push(1e18); bands.bottom.push(bottom); bands.top.push(top);
  };
  let y = 0, group = null, shade = false, bandTop = 0, headerY = 0, headerNamed = false;
  const closeBand = () => { if (shade && y > bandTop) band(bandTop, y); };
  for (const lane of lanes) {
    if (info.groups[lane] !== group) {
      closeBand();
      if (group !== null) shade = !shade;
      group = info.groups[lane]; bandTop = y; headerNamed = false;
      if (headers) {
        const collapsed = S.collapsedGroups.has(group);
        const count = lanes.filter((l) => info.groups[l] === group).length;
        const title = info.group_titles[group] || group || "lanes";
        spans.push([y, y + 1, collapsed ? `▸ ${title} (${count} lane${count > 1 ? "s" : ""})` : `▾ ${title}`]);
        S.headers.push({top: y, bottom: y + 1, group});
        band(y, y + 1);
        headerY = y;
        y += 1;
      }
    }
    if (!open(lane)) {  // collapsed: its top rows drawn into the header, as one envelope
      for (const r of S.laneRows[lane]) {
        S.rowY[r] = headerY; S.rowH[r] = 1; S.unnamed[r] = headerNamed ? 1 : 0;
        if (info.lane_is_gpu[lane] || info.row_sub[r] === 0) S.drawnRows.push(r);
      }
      headerNamed = true;  // by the group's first lane: the others' names would cover its own
      continue;
    }
    const height = placeLane(S, lane, y, cap, true);
    spans.push([y, y + height, info.short_labels[lane]]);
    y += height;
  }
  closeBand();
  S.totalRows = Math.max(y, 1);
  S.labelSpans = spans;
  fill(bands_source, bands);
  showLaneWindow(S);
}

function showLaneWindow(S) {
  // The rows in view: all of them, or a 1/laneZoom window from S.laneTop when zoomed in y.
  const shown = S.totalRows / S.laneZoom;
  S.laneTop = Math.min(Math.max(S.laneTop, 0), S.totalRows - shown);
  plot.y_range.setv({start: S.laneTop + shown, end: S.laneTop, reset_start: S.totalRows, reset_end: 0});
  // Each lane and header is named at the middle of its part in view: zoomed in y, a tall lane
  // whose middle is off screen keeps its label.
  const ticks = [], labels = new Map(), bottom = S.laneTop + shown;
  for (const [top, end, label] of S.labelSpans) {
    if (end <= S.laneTop || top >= bottom) continue;
    const middle = (Math.max(top, S.laneTop) + Math.min(end, bottom)) / 2;
    ticks.push(middle);
    labels.set(middle, label);
  }
  ticker.ticks = ticks;
  yaxis.major_label_overrides = labels;
}

function drawView(S) {
  if (info.coarse) chooseEntries(S);  // the kernel's bars for this view, or the coarse level
  const x0 = plot.x_range.start, x1 = plot.x_range.end;
  const width = plot.inner_width > 0 ? plot.inner_width : 800;
  const nsPerPx = (x1 - x0) / width;
  const out = {left: [], right: [], bottom: [], top: [], color: [], alpha: [], name: [], lane: [],
               dur: [], count: [], id: [], gpu: [], details: [], launch: []};
  const text = {x: [], y: [], text: [], color: []};
  let gpuInView = 0;  // GPU intervals in view, merged or not: links for all while few
  const minBar = MIN_BAR_PX * nsPerPx;
  sweep(S, S.drawnRows, x0, x1, nsPerPx, MIN_REAL_PX, (r, first, count, left, right, busy, longest) => {
    const y = S.rowY[r], h = S.rowH[r], isGpu = info.row_is_gpu[r];
    const right_ = Math.max(right, left + minBar);
    out.left.push(left);
    out.right.push(right_);
    out.bottom.push(y + BAR_PAD);
    out.top.push(y + h - BAR_PAD);
    out.lane.push(info.labels[info.row_lane[r]]);
    out.dur.push(right - left);
    out.count.push(count);
    out.gpu.push(isGpu ? 1 : 0);
    if (isGpu) gpuInView += count;
    let name, color, alpha;
    if (count === 1) {
      name = info.names[S.name[first]];
      color = colorOf(S.family[first], S.name[first]);
      alpha = 1;
      out.id.push(S.eventId ? S.eventId[first] : S.id[first]);  // served: local -> trace id
      out.details.push(S.details[first]);
      const launcher = isGpu ? S.launchOf[first] : -1;
      out.launch.push(launcher >= 0 ? info.names[S.name[S.cpuEntry[launcher]]] : "");
    } else {
      // A block is shaded by how busy it is: a lane 20% busy should not read as solid work.
      const fraction = Math.min(1, busy / Math.max(right - left, 1));
      name = `${count} events, mostly ${info.names[S.name[longest]]}`;
      color = info.block_colors[S.family[first]];
      alpha = 0.3 + 0.7 * fraction;
      out.id.push(-1);
      out.details.push(`${Math.round(100 * fraction)}% busy; zoom in (or click) to see them one by one`);
      out.launch.push("");
    }
    out.name.push(name); out.color.push(color); out.alpha.push(alpha);
    // Its name inside the bar where it is wide enough, centred on the part in view.
    const shownLeft = Math.max(left, x0), shownRight = Math.min(right_, x1);
    const px = (shownRight - shownLeft) / nsPerPx;
    if (px >= LABEL_MIN_PX && !S.unnamed[r]) {
      let fitted = fitText(S, name, px - 6);
      // a block too narrow for "404 events, mostly …" still says how many it holds
      if (count > 1 && fitted !== name && textWidth(S, `${count} events`) <= px - 6) fitted = `${count} events`;
      if (fitted) {
        text.x.push((shownLeft + shownRight) / 2); text.y.push(y + h / 2);
        text.text.push(fitted); text.color.push(textColorOn(color, alpha));
      }
    }
  });
  S.filling = true;
  fill(rendered, out);
  rendered.selected.indices = [];
  S.filling = false;
  fill(labels_source, text);
  S.viewLinks = gpuInView <= VIEW_LINKS_MAX ? launchedInView(S, x0, x1) : [];
  S.barsDrawn = out.left.length;
  S.labelsDrawn = text.x.length;
  drawOverlays(S);
}

function launchedInView(S, x0, x1) {
  // The GPU entries in view that have a launch to link from (a few: the caller checked).
  const found = [];
  for (const r of S.drawnRows) {
    if (!info.row_is_gpu[r]) continue;
    for (let i = firstInView(S, S.rowStart[r], S.rowStart[r + 1], x0); i < S.rowStart[r + 1] && S.start[i] <= x1; i++)
      if (S.linkFrom[i] >= 0 && S.dur[i] >= S.minDuration && S.start[i] + S.dur[i] >= x0) found.push(i);
  }
  return found;
}

function drawOverview(S) {
  // The whole trace, every lane on one line: the envelope of what each lane did.
  const width = overview.inner_width > 0 ? overview.inner_width : 800;
  const nsPerPx = (info.span_ns || 1) / width;
  const out = {left: [], right: [], bottom: [], top: [], color: []};
  if (info.coarse) Object.assign(S, levelFor(S, nsPerPx));  // the whole trace: a coarse level
  const laneY = new Map();
  for (const r of S.drawnRows) {
    const lane = info.row_lane[r];
    if (!laneY.has(lane)) laneY.set(lane, laneY.size);
  }
  sweep(S, S.drawnRows, 0, info.span_ns, nsPerPx, Infinity, (r, first, count, left, right) => {
    const y = laneY.get(info.row_lane[r]);
    out.left.push(left); out.right.push(Math.max(right, left + nsPerPx));
    out.bottom.push(y + 0.1); out.top.push(y + 0.9);
    out.color.push(info.block_colors[S.family[first]]);
  });
  fill(overview_source, out);
  S.overviewLanes = Math.max(laneY.size, 1);
  if (info.coarse) restoreAnswer(S);  // back to what the view shows
  overview.y_range.setv({start: S.overviewLanes, end: 0});
  drawOverviewMarks(S);
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

function plotView() {
  try { return window.Bokeh.index.find_one(plot); } catch (error) { return null; }
}

function watchResize(S, view) {
  // Bokeh updates plot.inner_width/inner_height without change events, so a resized page (or a
  // notebook column) is noticed here: the LOD and the lane heights depend on the plot's size.
  if (typeof ResizeObserver === "undefined") return;
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
