// What is drawn over the bars: highlight and selection outlines, launch-to-GPU links, the area
// selection, and the matches' ticks on the overview strip.

function entryOf(S, id, kind) {
  if (id === null || id === undefined || id < 0) return -1;
  if (S.localIds) id = S.localIds.get(kind === "gpu" ? "gpu" : "cpu", id);  // served: local ids
  if (id < 0) return -1;
  if (kind === "gpu") return id < (S.nGpu ?? info.n_gpu) ? S.gpuEntry[id] : -1;
  return id < (S.nCpu ?? info.n_cpu) ? S.cpuEntry[id] : -1;
}

function rowMiddle(S, entry) {
  const r = S.rowOf[entry];
  return S.rowY[r] + S.rowH[r] / 2;
}

function pushLink(S, links, from, to) {
  // from the runtime call's (else the op's) start to its GPU interval's start; nothing when a
  // lane is hidden
  if (from < 0 || links.x0.length >= FOCUS_LINKS_MAX) return;
  const y0 = rowMiddle(S, from), y1 = rowMiddle(S, to);
  if (Number.isNaN(y0) || Number.isNaN(y1)) return;
  links.x0.push(S.start[from]); links.y0.push(y0);
  links.x1.push(S.start[to]); links.y1.push(y1);
}

function pushMark(S, marks, entry, color, minBar) {
  if (entry < 0 || marks.left.length >= MARKS_MAX) return;
  const r = S.rowOf[entry], y = S.rowY[r];
  if (Number.isNaN(y)) return;
  const left = S.start[entry];
  marks.left.push(left); marks.right.push(Math.max(left + S.dur[entry], left + minBar));
  marks.bottom.push(y + BAR_PAD / 2); marks.top.push(y + S.rowH[r] - BAR_PAD / 2);
  marks.line_color.push(color);
}

function callKernels(S, entry) {
  // The GPU entries a runtime call (cudaLaunchKernel, cudaMemcpyAsync...) launched.
  if (entry < 0 || info.row_is_gpu[S.rowOf[entry]]) return [];
  const c = S.id[entry];
  return Array.from(S.callLaunched.subarray(S.callStart[c], S.callStart[c + 1]));
}

function focusLinks(S, entry, links, marks, minBar) {
  // A kernel: the link from its runtime call, and the op around that call outlined. A runtime
  // call: links to its kernels. An op: the links of the launches made in it.
  if (entry < 0) return;
  if (info.row_is_gpu[S.rowOf[entry]]) {
    pushLink(S, links, S.linkFrom[entry], entry);
    if (S.launchOf[entry] >= 0) pushMark(S, marks, S.cpuEntry[S.launchOf[entry]], info.link_color, minBar);
    return;
  }
  const kernels = callKernels(S, entry);
  if (kernels.length) {
    for (const k of kernels) pushLink(S, links, entry, k);
    if (S.launchOf[kernels[0]] >= 0) pushMark(S, marks, S.cpuEntry[S.launchOf[kernels[0]]], info.link_color, minBar);
    return;
  }
  const lane = info.row_lane[S.rowOf[entry]], end = S.start[entry] + S.dur[entry];
  for (let c = S.id[entry]; c < (S.nCpu ?? info.n_cpu) && links.x0.length < FOCUS_LINKS_MAX; c++) {
    const e = S.cpuEntry[c];
    if (S.start[e] > end) break;
    if (info.row_lane[S.rowOf[e]] !== lane) continue;
    for (let k = S.launchStart[c]; k < S.launchStart[c + 1]; k++)
      pushLink(S, links, S.linkFrom[S.launched[k]], S.launched[k]);
  }
}

function drawOverlays(S) {
  const x0 = plot.x_range.start, x1 = plot.x_range.end;
  const width = plot.inner_width > 0 ? plot.inner_width : 800;
  const minBar = MIN_BAR_PX * (x1 - x0) / width;
  const marks = {left: [], right: [], bottom: [], top: [], line_color: []};
  // Search and summary matches: CPU events and GPU intervals alike, those in view.
  for (const [ids, kind] of [[highlight.data.event_id, "cpu"], [highlight_gpu.data.gpu_row, "gpu"]]) {
    for (let k = 0; k < (ids || []).length && marks.left.length < MARKS_MAX; k++) {
      const entry = entryOf(S, ids[k], kind);
      if (entry >= 0 && S.start[entry] <= x1 && S.start[entry] + S.dur[entry] >= x0)
        pushMark(S, marks, entry, info.highlight_color, minBar);
    }
  }
  // The selection: what was clicked (or selected from Python) first, then what it selects.
  const selectedIds = selection.data.event_id || [], kinds = selection.data.kind || [];
  const selected = selectedIds.length ? entryOf(S, selectedIds[0], kinds[0]) : -1;
  const focus = {x0: [], y0: [], x1: [], y1: []};
  focusLinks(S, selected, focus, marks, minBar);
  if (S.hovered !== selected) focusLinks(S, S.hovered, focus, marks, minBar);
  for (let k = 0; k < selectedIds.length; k++)
    pushMark(S, marks, entryOf(S, selectedIds[k], kinds[k]), info.selection_color, minBar);
  for (const k of callKernels(S, selected)) pushMark(S, marks, k, info.selection_color, minBar);
  fill(marks_source, marks);
  fill(links_focus, focus);
  const view = {x0: [], y0: [], x1: [], y1: []};
  for (const k of S.viewLinks || []) pushLink(S, view, S.linkFrom[k], k);
  fill(links_view, view);
  const area = area_selection.data;
  fill(area_band, area.start_ns && area.start_ns.length ?
    {left: [area.start_ns[0] - info.origin_ns], right: [area.end_ns[0] - info.origin_ns]} :
    {left: [], right: []});
}

function drawOverviewMarks(S) {
  // Every match as a tick on the strip, merged per pixel: a 500k-match search stays cheap.
  const width = Math.max(1, Math.round(overview.inner_width > 0 ? overview.inner_width : 800));
  const nsPerPx = (info.span_ns || 1) / width;
  const hit = new Uint8Array(width + 1);
  let any = false;
  for (const [ids, kind] of [[highlight.data.event_id, "cpu"], [highlight_gpu.data.gpu_row, "gpu"]]) {
    for (let k = 0; k < (ids || []).length; k++) {
      const entry = entryOf(S, ids[k], kind);
      if (entry < 0) continue;
      hit[Math.min(width, Math.max(0, Math.floor(S.start[entry] / nsPerPx)))] = 1;
      any = true;
    }
  }
  const ticks = {left: [], right: [], bottom: [], top: []};
  if (any) {
    for (let px = 0; px <= width; px++) {
      if (!hit[px]) continue;
      let end = px;
      while (end < width && hit[end + 1]) end++;
      ticks.left.push(px * nsPerPx); ticks.right.push((end + 1) * nsPerPx + nsPerPx);
      ticks.bottom.push(0); ticks.top.push(S.overviewLanes || 1);
      px = end;
    }
  }
  fill(overview_marks, ticks);
}
