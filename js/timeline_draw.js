// Level of detail: which bars the view shows, lane by lane and row by row.

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

// Calls emit(row, first, count, left, right, busy) for each bar of rows in [x0, x1] at nsPerPx;
// busy is the summed duration of a block's events (its shading says how full it is).
function sweep(S, rows, x0, x1, nsPerPx, minRealPx, emit) {
  const {start, dur, rowStart} = S;
  const minDur = S.minDuration, realNs = minRealPx * nsPerPx, gapNs = MERGE_GAP_PX * nsPerPx;
  for (const r of rows) {
    const hi = rowStart[r + 1];
    let first = -1, count = 0, blockStart = 0, blockEnd = 0, busy = 0;
    for (let i = firstInView(S, rowStart[r], hi, x0); i < hi && start[i] <= x1; i++) {
      const d = dur[i];
      if (d < minDur) continue;
      const s = start[i], e = s + d;
      if (e < x0) continue;
      // pre-merged entries (timeline_served.js) carry their event count and busy time
      const n = S.entryCount ? S.entryCount[i] : 1, b = S.entryCount ? S.entryBusy[i] : d;
      if (d >= realNs && n === 1) {
        if (count) emit(r, first, count, blockStart, blockEnd, busy);
        count = 0;
        emit(r, i, 1, s, e, d);
      } else if (count && s - blockEnd < gapNs) {
        if (e > blockEnd) blockEnd = e;
        count += n;
        busy += b;
      } else {
        if (count) emit(r, first, count, blockStart, blockEnd, busy);
        first = i; count = n; blockStart = s; blockEnd = e; busy = b;
      }
    }
    if (count) emit(r, first, count, blockStart, blockEnd, busy);
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
  if (info.coarse) chooseEntries(S);  // the kernel's bars for this view, or the coarse level
  const x0 = plot.x_range.start, x1 = plot.x_range.end;
  const width = plot.inner_width > 0 ? plot.inner_width : 800;
  const nsPerPx = (x1 - x0) / width;
  const out = {left: [], right: [], bottom: [], top: [], color: [], alpha: [], name: [], lane: [],
               dur: [], count: [], id: [], gpu: [], details: [], launch: []};
  const viewLinkOps = [];
  let viewLinks = 0;
  const minBar = MIN_BAR_PX * nsPerPx;
  sweep(S, S.drawnRows, x0, x1, nsPerPx, MIN_REAL_PX, (r, first, count, left, right, busy) => {
    const y = S.rowY[r], isGpu = info.row_is_gpu[r];
    const nameText = info.names[S.name[first]];
    out.left.push(left);
    out.right.push(Math.max(right, left + minBar));
    out.bottom.push(y + 0.1);
    out.top.push(y + 0.9);
    out.lane.push(info.labels[info.row_lane[r]]);
    out.dur.push(right - left);
    out.count.push(count);
    out.gpu.push(isGpu ? 1 : 0);
    if (count === 1) {
      out.color.push(colorOf(S.family[first], S.name[first]));
      out.alpha.push(1);
      out.name.push(nameText);
      out.id.push(S.eventId ? S.eventId[first] : S.id[first]);  // served: local -> trace id
      out.details.push(S.details[first]);
      const launcher = isGpu ? S.launchOf[first] : -1;
      out.launch.push(launcher >= 0 ? info.names[S.name[S.cpuEntry[launcher]]] : "");
      if (!isGpu) {
        const links = S.launchStart[S.id[first] + 1] - S.launchStart[S.id[first]];
        if (links) { viewLinks += links; viewLinkOps.push(S.id[first]); }
      }
    } else {
      // A block is shaded by how busy it is: a lane 20% busy should not read as solid work.
      const fraction = Math.min(1, busy / Math.max(right - left, 1));
      out.color.push(info.block_colors[S.family[first]]);
      out.alpha.push(0.3 + 0.7 * fraction);
      out.name.push(`${count} events (first: ${nameText})`);
      out.id.push(-1);
      out.details.push(`${Math.round(100 * fraction)}% busy; zoom in (or click) to see them one by one`);
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
  overview_source.data = out;
  if (info.coarse) restoreAnswer(S);  // back to what the view shows
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
