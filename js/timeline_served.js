// Past the embedding budget (nbprof/timeline/served.py): the page's entries are a coarse level
// (bars of the whole trace, pre-merged, each with its event count and busy time), and the kernel
// answers each view the browser settles on with that view's exact bars. Both decode into the
// same entry arrays as a full page's events (decode() with their own layout), and drawView
// sweeps whichever set matches the view: the same code draws them. `info.coarse` turns this on.

const SERVED_DEBOUNCE_MS = 100;  // ask the kernel once the view has rested this long

function decodeEntries(bytes, meta) {
  const T = {};
  decodeMeta = meta;
  try {
    decode(T, bytes);
    T.entryCount = column(bytes, "count", Int32Array);
    T.eventId = column(bytes, "event_id_delta", Int32Array);
    T.entryBusy = new Float64Array(T.entryCount.length);
    const blockBusy = column(bytes, "block_busy", Float64Array);
    for (let i = 0, k = 0; i < T.entryBusy.length; i++)
      T.entryBusy[i] = T.entryCount[i] === 1 ? T.dur[i] : blockBusy[k++];
    // a block is named after its longest event (the sweep compares their durations), and a
    // kernel says which op launched it even where that op is in a block
    T.longestDur = Float64Array.from(T.dur);
    const longest = column(bytes, "longest_dur", Float64Array);
    for (let i = 0, k = 0; i < T.longestDur.length; i++) if (T.entryCount[i] !== 1) T.longestDur[i] = longest[k++];
    T.launchName = new Int32Array(T.entryCount.length).fill(-1);
    const launchName = column(bytes, "gpu_launch_name", Int32Array);
    for (let i = 0, k = 0; i < T.launchName.length; i++)
      if (info.row_is_gpu[T.rowOf[i]]) T.launchName[i] = launchName[k++] - 1;
  } finally {
    decodeMeta = info;
  }
  for (let r = 0; r + 1 < T.rowStart.length; r++)
    for (let i = T.rowStart[r] + 1; i < T.rowStart[r + 1]; i++) T.eventId[i] += T.eventId[i - 1];
  // Entries carry local ids (the answer's own per-id tables stay small); the trace's ids, which
  // highlights and the selection use, map to them by binary search: local ids are numbered in
  // trace-id order, so each kind's trace ids by local id are sorted. (A Map of 5M entries took
  // seconds to fill.)
  T.nCpu = meta.n_cpu; T.nGpu = meta.n_gpu;
  T.traceIds = {cpu: new Float64Array(T.nCpu), gpu: new Float64Array(T.nGpu)};
  for (let i = 0; i < T.eventId.length; i++)
    T.traceIds[info.row_is_gpu[T.rowOf[i]] ? "gpu" : "cpu"][T.id[i]] = T.eventId[i];
  T.localIds = {get: (kind, traceId) => localIdOf(T, kind, traceId)};
  return T;
}

function localIdOf(T, kind, traceId) {
  // the local id of trace event `traceId` if it is an entry of its own (-1: not, or in a block)
  const ids = T.traceIds[kind];
  let lo = 0, hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ids[mid] < traceId) lo = mid + 1; else hi = mid;
  }
  if (lo >= ids.length || ids[lo] !== traceId) return -1;
  const entry = kind === "gpu" ? T.gpuEntry[lo] : T.cpuEntry[lo];
  return T.entryCount[entry] === 1 ? lo : -1;
}

async function initCoarse(S, bytes) {
  S.embedded = decodeEntries(bytes, info);
  Object.assign(S, S.embedded);
  // Coarser levels, coarsest last: a view at least as coarse as one sweeps it (the same bars
  // but for the counts of blocks across the view's edges, which include events out of view).
  S.coarser = [];
  for (const level of info.coarser || [])
    S.coarser.push({nsPerPx: level.ns_per_px,
                    entries: decodeEntries(await inflateBase64(level.packed), level.meta)});
}

function levelFor(S, nsPerPx) {
  let entries = S.embedded;
  for (const level of S.coarser || []) if (level.nsPerPx <= nsPerPx) entries = level.entries;
  return entries;
}

// A big embedded page (nbprof/timeline/first_level.py) draws its views from its first level's bars
// until its events are decoded (timeline_main.js), then from the events. The level gives the
// events' own bars for a view at least as coarse as itself that holds the whole trace (a level
// block across an edge of a narrower view counts its events out of view too) and no minimum
// duration; a view it does not draw exactly is drawn again once the events are in.
function levelServes(S, nsPerPx) {
  return !S.minDuration && nsPerPx >= S.level.nsPerPx;
}

function useLevelFor(S, nsPerPx, x0, x1) {
  if (S.events) {
    Object.assign(S, S.events);
    return;
  }
  if (!levelServes(S, nsPerPx) || x0 > 0 || x1 < info.span_ns) S.waitingForEvents = true;
  Object.assign(S, S.level.entries);
}

function useEvents(S) {
  // the events for what is not a sweep (outlines, links, taps, hover), once they are decoded
  if (S.events) Object.assign(S, S.events);
}

function viewKey() {
  const width = plot.inner_width > 0 ? plot.inner_width : 800;
  const min = filter.data.min_duration_ns || [];
  return [plot.x_range.start, plot.x_range.end, width, min.length ? Number(min[0]) : 0].join("|");
}

// The view's entries into S: the kernel's answer if it is for exactly this view (true), else
// the level the view reads (false).
function useViewEntries(S, key) {
  if (S.answer && S.answer.key === key) {
    Object.assign(S, S.answer.entries);
    return true;
  }
  const [x0, x1, width] = key.split("|").map(Number);
  Object.assign(S, levelFor(S, (x1 - x0) / width));
  return false;
}

function chooseEntries(S) {
  // The kernel's answer for this view, else the coarse level (and ask for the answer).
  const key = viewKey();
  if (useViewEntries(S, key)) return;
  clearTimeout(S.requestTimer);
  S.requestTimer = setTimeout(() => {
    if (viewKey() !== key || S.requested === key) return;
    S.requested = key;
    S.askedAt = performance.now();
    const [x0, x1, width, minDuration] = key.split("|").map(Number);
    // which page asks: the kernel answers a view once per page (not twice for one change)
    if (!S.pageId) S.pageId = Math.random().toString(36).slice(2);
    served_request.data = {x0: [x0], x1: [x1], width: [width], min_duration: [minDuration], key: [key],
                           page: [S.pageId]};
  }, SERVED_DEBOUNCE_MS);
}

function restoreAnswer(S) {
  // After the overview swept its own level: back to the view's entries (taps, hover and links
  // read S), without asking the kernel again.
  useViewEntries(S, viewKey());
}

function onServedAnswer(S) {
  const data = served_answer.data;
  if (!data.key || !data.key.length) return;
  const key = data.key[0], meta = JSON.parse(data.meta[0]), arrived = performance.now();
  inflateBase64(data.packed[0]).then((bytes) => {
    S.answer = {key, entries: decodeEntries(bytes, meta)};
    const decoded = performance.now();
    if (viewKey() === key) drawView(S);
    // where a step's time went, for the benchmark (bench/bench_served_widget.py): asked (after
    // the debounce), the answer's arrival, decoded, drawn (the bars set; Bokeh paints next frame)
    S.answerTimes = {key, asked: S.requested === key ? S.askedAt : NaN, arrived, decoded,
                     drawn: performance.now()};
    S.answers = (S.answers || 0) + 1;  // tests and the benchmark count them
  }).catch((error) => console.error("nbprof timeline: could not decode the kernel's bars", error));
}
