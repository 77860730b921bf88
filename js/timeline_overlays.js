// What is drawn over the bars: highlight and selection outlines, launch-to-GPU links.

function entryOf(S, id, kind) {
  if (id === null || id === undefined || id < 0) return -1;
  if (S.localIds) id = S.localIds.get(kind === "gpu" ? "gpu" : "cpu", id);  // served: local ids
  if (id < 0) return -1;
  if (kind === "gpu") return id < (S.nGpu ?? info.n_gpu) ? S.gpuEntry[id] : -1;
  return id < (S.nCpu ?? info.n_cpu) ? S.cpuEntry[id] : -1;
}

function pushLink(S, links, from, to) {
  // from a launching op's start to its GPU interval's start; nothing when a lane is hidden
  const y0 = S.rowY[S.rowOf[from]], y1 = S.rowY[S.rowOf[to]];
  if (Number.isNaN(y0) || Number.isNaN(y1)) return;
  links.x0.push(S.start[from]); links.y0.push(y0 + 0.5);
  links.x1.push(S.start[to]); links.y1.push(y1 + 0.5);
}

function addLinksFrom(S, cpuId, links, limit) {
  const from = S.cpuEntry[cpuId];
  for (let k = S.launchStart[cpuId]; k < S.launchStart[cpuId + 1] && links.x0.length < limit; k++)
    pushLink(S, links, from, S.launched[k]);
}

function focusLinks(S, entry, links) {
  // An op's links are those of the launches it made itself or through the ops nested in it.
  if (entry < 0) return;
  if (info.row_is_gpu[S.rowOf[entry]]) {
    const launcher = S.launchOf[entry];
    if (launcher >= 0) pushLink(S, links, S.cpuEntry[launcher], entry);
    return;
  }
  const lane = info.row_lane[S.rowOf[entry]], end = S.start[entry] + S.dur[entry];
  for (let c = S.id[entry]; c < (S.nCpu ?? info.n_cpu) && links.x0.length < FOCUS_LINKS_MAX; c++) {
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
  // Search and summary matches: CPU events and GPU intervals alike, those in view.
  for (const [ids, kind] of [[highlight.data.event_id, "cpu"], [highlight_gpu.data.gpu_row, "gpu"]]) {
    for (let k = 0; k < (ids || []).length && marks.left.length < MARKS_MAX; k++) {
      const entry = entryOf(S, ids[k], kind);
      if (entry >= 0 && S.start[entry] <= x1 && S.start[entry] + S.dur[entry] >= x0)
        pushMark(S, marks, entry, info.highlight_color, minBar);
    }
  }
  const selectedIds = selection.data.event_id || [], kinds = selection.data.kind || [];
  const selected = selectedIds.length ? entryOf(S, selectedIds[0], kinds[0]) : -1;
  if (selected >= 0) pushMark(S, marks, selected, info.selection_color, minBar);
  marks_source.data = marks;
  const focus = {x0: [], y0: [], x1: [], y1: []};
  focusLinks(S, selected, focus);
  focusLinks(S, S.hovered, focus);
  links_focus.data = focus;
  const view = {x0: [], y0: [], x1: [], y1: []};
  for (const c of S.viewLinkOps || []) addLinksFrom(S, c, view, VIEW_LINKS_MAX);
  links_view.data = view;
}
