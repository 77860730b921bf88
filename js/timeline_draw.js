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

function blockColumnNs(ns) {
  // The grid columns blocks end at: the power of two ns at most maxBlockPx pixels (2-4 px). Any
  // view's columns then split where a finer level's do, so a level swept in place of its events
  // draws the same blocks (nbprof/timeline/sweep.py block_column_ns: the same arithmetic).
  if (!(ns > 0) || ns === Infinity) return ns;
  return 2 ** Math.floor(Math.log2(ns * (1 + 1e-9)));
}

// Calls emit(row, first, count, left, right, busy, longest) for each bar of rows in [x0, x1] at
// nsPerPx; busy is the time a block's events cover (the union: its shading says how full it is),
// longest the entry of its longest event (what its label names). A block never runs past the
// maxBlockPx column of the grid it starts in.
function sweep(S, rows, x0, x1, nsPerPx, minRealPx, maxBlockPx, emit) {
  const {start, dur, rowStart} = S, longestDur = S.longestDur || dur;
  const minDur = S.minDuration, realNs = minRealPx * nsPerPx, gapNs = MERGE_GAP_PX * nsPerPx;
  const chunkNs = blockColumnNs(maxBlockPx * nsPerPx);
  for (const r of rows) {
    const hi = rowStart[r + 1];
    let first = -1, count = 0, blockStart = 0, blockEnd = 0, busy = 0, longest = -1, chunkEnd = 0;
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
      } else if (count && s - blockEnd < gapNs && s < chunkEnd) {
        // only what reaches past the block's end is new busy time (exact for an event;
        // nbprof/timeline/sweep.py splits a pre-merged entry that overlaps); the common case
        // first: this is the loop over every event in view
        if (s >= blockEnd) { busy += b; blockEnd = e; }
        else if (e > blockEnd) { busy += Math.max(0, b - (blockEnd - s)); blockEnd = e; }
        else busy += Math.max(0, b - d);
        count += n;
        if (longestDur[i] > longestDur[longest]) longest = i;
      } else {
        if (count) emit(r, first, count, blockStart, blockEnd, busy, longest);
        first = i; count = n; blockStart = s; blockEnd = e; busy = b; longest = i;
        chunkEnd = chunkNs > 0 ? (Math.floor(s / chunkNs) + 1) * chunkNs : Infinity;
      }
    }
    if (count) emit(r, first, count, blockStart, blockEnd, busy, longest);
  }
}

function longestDur(S, i) {
  // an entry's longest event's duration: its own, or a pre-merged block's (timeline_served.js)
  return S.longestDur ? S.longestDur[i] : S.dur[i];
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
  // Set only when they change: each set makes Bokeh lay the whole plot out again.
  const key = JSON.stringify([ticks, [...labels.values()]]);
  if (key === S.axisKey) return;
  S.axisKey = key;
  ticker.ticks = ticks;
  yaxis.major_label_overrides = labels;
}

function drawView(S) {
  if (info.coarse) chooseEntries(S);  // the kernel's bars for this view, or the coarse level
  const x0 = plot.x_range.start, x1 = plot.x_range.end;
  const width = plot.inner_width > 0 ? plot.inner_width : 800;
  const nsPerPx = (x1 - x0) / width;
  if (S.level) useLevelFor(S, nsPerPx, x0, x1);  // a big page's first level, or its events
  const out = {left: [], right: [], bottom: [], top: [], color: [], alpha: [], name: [], lane: [],
               dur: [], count: [], id: [], gpu: [], details: [], launch: []};
  const text = {x: [], y: [], text: [], color: []};
  let gpuInView = 0;  // GPU intervals in view, merged or not: links for all while few
  const minBar = MIN_BAR_PX * nsPerPx, gapNs = MERGE_GAP_PX * nsPerPx;
  const label = (r, left, right, name, count, color, alpha) => {
    // A name inside the bar where it is wide enough, centred on the part in view.
    const shownLeft = Math.max(left, x0), shownRight = Math.min(right, x1);
    const px = (shownRight - shownLeft) / nsPerPx;
    if (px < LABEL_MIN_PX || S.unnamed[r]) return;
    let fitted = fitText(S, name, px - 6);
    // a block too narrow for "404 events, mostly …" still says how many it holds
    if (count > 1 && fitted !== name && textWidth(S, `${count} events`) <= px - 6) fitted = `${count} events`;
    if (fitted) {
      text.x.push((shownLeft + shownRight) / 2); text.y.push(S.rowY[r] + S.rowH[r] / 2);
      text.text.push(fitted); text.color.push(textColorOn(color, alpha));
    }
  };
  // A block is shaded by how busy it is: a lane 20% busy should not read as solid work. Its
  // shade comes in SHADES steps: the next column of a run in the same step extends the bar
  // (a uniformly dense lane stays one bar: no more glyphs to paint than before).
  const SHADES = 4, step = (busy, span) => Math.round(SHADES * Math.min(1, busy / Math.max(span, 1)));
  let run = null;  // this row's adjacent blocks (no pixel of gap between): named as one
  const closeBar = () => {  // the run's last bar gets its name and shade
    const k = run.k, fraction = Math.min(1, run.kBusy / Math.max(run.kSpan, 1));
    out.name[k] = `${out.count[k]} events, mostly ${info.names[S.name[run.kLongest]]}`;
    out.alpha[k] = 0.3 + 0.7 * fraction;
    out.details[k] = `${Math.round(100 * fraction)}% busy; zoom in (or click) to see them one by one`;
  };
  const flushRun = () => {
    if (!run) return;
    closeBar();
    // Blocks end every MAX_BLOCK_PX columns, mostly too narrow to name: the run is named as one
    // block was before, "6095 events, mostly …" (its text built only where it fits: this runs
    // for every block in view).
    if ((Math.min(run.right, x1) - Math.max(run.left, x0)) / nsPerPx >= LABEL_MIN_PX) {
      const alpha = 0.3 + 0.7 * Math.min(1, run.busy / Math.max(run.right - run.left, 1));
      const name = run.k === out.left.length - 1 && out.left[run.k] === run.left ? out.name[run.k]
        : `${run.count} events, mostly ${info.names[S.name[run.longest]]}`;
      label(run.r, run.left, run.right, name, run.count, out.color[run.k], alpha);
    }
    run = null;
  };
  sweep(S, S.drawnRows, x0, x1, nsPerPx, MIN_REAL_PX, MAX_BLOCK_PX, (r, first, count, left, right, busy, longest) => {
    const y = S.rowY[r], h = S.rowH[r], isGpu = info.row_is_gpu[r];
    const right_ = Math.max(right, left + minBar);
    if (isGpu) gpuInView += count;
    if (count > 1 && run && run.r === r && left - run.right < gapNs) {  // the run's next column
      run.right = Math.max(run.right, right_); run.count += count; run.busy += busy;
      if (longestDur(S, longest) > longestDur(S, run.longest)) run.longest = longest;
      // The last bar reaches to this block (a gap under a pixel would draw as a pale seam), its
      // shade counting that gap as idle.
      const k = run.k;
      run.kSpan = Math.max(run.kSpan, left - out.left[k]);
      out.right[k] = Math.max(out.right[k], left);
      if (step(run.kBusy, run.kSpan) === step(busy, right - left)) {
        out.right[k] = Math.max(out.right[k], right_);
        out.dur[k] = Math.max(out.dur[k], right - out.left[k]);
        run.kSpan = Math.max(run.kSpan, out.dur[k]);
        out.count[k] += count; run.kBusy += busy;
        if (longestDur(S, longest) > longestDur(S, run.kLongest)) run.kLongest = longest;
        return;
      }
      closeBar();
    } else if (count > 1 || run) {
      flushRun();
    }
    out.left.push(left);
    out.right.push(right_);
    out.bottom.push(y + BAR_PAD);
    out.top.push(y + h - BAR_PAD);
    out.lane.push(info.labels[info.row_lane[r]]);
    out.dur.push(right - left);
    out.count.push(count);
    out.gpu.push(isGpu ? 1 : 0);
    if (count === 1) {
      const name = info.names[S.name[first]], color = colorOf(S.family[first], S.name[first]);
      out.name.push(name); out.color.push(color); out.alpha.push(1);
      out.id.push(S.eventId ? S.eventId[first] : S.id[first]);  // served: local -> trace id
      out.details.push(S.details[first]);
      const launcher = isGpu ? S.launchOf[first] : -1;
      const launchName = S.launchName ? S.launchName[first] :  // pre-merged entries say it
        launcher >= 0 ? S.name[S.cpuEntry[launcher]] : -1;
      out.launch.push(launchName >= 0 ? info.names[launchName] : "");
      label(r, left, right_, name, 1, color, 1);
    } else {
      out.name.push(""); out.alpha.push(1); out.details.push("");  // closeBar() writes them
      out.color.push(info.block_colors[S.family[first]]);
      out.id.push(-1);
      out.launch.push("");
      const k = out.left.length - 1;
      if (!run) run = {r, left, right: right_, count, busy, longest, k: 0, kBusy: 0, kLongest: 0, kSpan: 0};
      run.k = k; run.kBusy = busy; run.kLongest = longest; run.kSpan = right - left;
    }
  });
  flushRun();
  if (S.level) useEvents(S);  // its events (once decoded) for the outlines, links, taps
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
  else if (S.level) useLevelFor(S, nsPerPx, 0, info.span_ns);
  const laneY = new Map();
  for (const r of S.drawnRows) {
    const lane = info.row_lane[r];
    if (!laneY.has(lane)) laneY.set(lane, laneY.size);
  }
  sweep(S, S.drawnRows, 0, info.span_ns, nsPerPx, Infinity, Infinity, (r, first, count, left, right) => {
    const y = laneY.get(info.row_lane[r]);
    out.left.push(left); out.right.push(Math.max(right, left + nsPerPx));
    out.bottom.push(y + 0.1); out.top.push(y + 0.9);
    out.color.push(info.block_colors[S.family[first]]);
  });
  fill(overview_source, out);
  S.overviewLanes = Math.max(laneY.size, 1);
  if (info.coarse) restoreAnswer(S);  // back to what the view shows
  else if (S.level) useEvents(S);
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
