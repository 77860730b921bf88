// The memory lanes (nbprof/timeline/memory_lane.py): per device the level as a step curve, drawn
// from hidden typed arrays for what is in view only, like the bars (TIMELINE_SCALE.md): where a
// view holds more events than pixels, each pixel's events become one vertical stroke from their
// lowest to their highest level and one hover point that says how many they are.
//
// args: devices (per device: t, level, bytes (Float64Array), name (Int32Array: an index into
// names, -1 outside any op), op (Int32Array: the op's event id, -1), row, peak, label), names,
// x_range, plot, line, points, selection, request, answer. Runs on x-range changes, document
// ready, a tap and an answer.
//
// A reduced level (memory_served.py: past the embedding budget) gives per point count, made and
// freed (the events it stands for) instead of blocks; the page then asks the kernel (request)
// for the view it rests on and draws the answer while the view stays there.

const S = (window.__nbprof_memory = window.__nbprof_memory || new WeakMap());
let state = S.get(line);
if (!state) {
  state = {view: null, answer: null, asked: null, timer: null};
  S.set(line, state);
}

function lowerBound(a, x) {
  let lo = 0, hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (a[mid] < x) lo = mid + 1; else hi = mid;
  }
  return lo;
}

function fmtBytes(v) {
  const sign = v < 0 ? "-" : "";
  let x = Math.abs(v);
  for (const unit of ["B", "KiB", "MiB", "GiB"]) {
    if (x < 1024 || unit === "GiB") return sign + (unit === "B" ? x.toFixed(0) : x.toFixed(1)) + " " + unit;
    x /= 1024;
  }
}

// Lowest and highest level, bytes made and freed, and the largest event of d's events [i, j):
// the whole blocks of BLOCK events from their precomputed aggregates, the ends one by one.
function rangeStats(d, i, j) {
  const B = d.block, level = d.level, bytes = d.bytes;
  const r = {lo: Infinity, hi: -Infinity, made: 0, freed: 0, big: i, count: j - i};
  const one = (k) => {
    const v = level[k];
    if (v < r.lo) r.lo = v;
    if (v > r.hi) r.hi = v;
    if (bytes[k] > 0) r.made += bytes[k]; else r.freed -= bytes[k];
    if (Math.abs(bytes[k]) > Math.abs(bytes[r.big])) r.big = k;
  };
  if (d.count) {  // a reduced level: each point stands for count events
    r.count = 0;
    for (let k = i; k < j; k++) {
      one(k);
      r.count += d.count[k];
    }
    r.made = 0; r.freed = 0;
    for (let k = i; k < j; k++) { r.made += d.made[k]; r.freed += d.freed[k]; }
    return r;
  }
  let k = i;
  for (; k < j && k % B !== 0; k++) one(k);
  for (; k + B <= j; k += B) {
    const b = k / B;
    if (d.block_lo[b] < r.lo) r.lo = d.block_lo[b];
    if (d.block_hi[b] > r.hi) r.hi = d.block_hi[b];
    r.made += d.block_made[b];
    r.freed += d.block_freed[b];
    if (Math.abs(bytes[d.block_big[b]]) > Math.abs(bytes[r.big])) r.big = d.block_big[b];
  }
  for (; k < j; k++) one(k);
  return r;
}

function opName(d, i) {
  const k = d.name[i];
  return k >= 0 ? names[k] : "(outside any op)";
}

function eventText(d, i) {
  if (d.count && d.count[i] > 1) {
    return d.count[i] + " events: +" + fmtBytes(d.made[i]) + " / -" + fmtBytes(d.freed[i])
      + " (from " + opName(d, i) + ")";
  }
  return (d.bytes[i] >= 0 ? "+" : "") + fmtBytes(d.bytes[i]) + " in " + opName(d, i);
}

// The kernel's answer for a view: per device its points, with the page's row, peak and label.
function readAnswer() {
  const a = answer.data;
  if (!a.key || !a.key.length) return;
  const shown = devices.map((d, k) => {
    const out = {row: d.row, peak: d.peak, label: d.label};
    for (const f of ["t", "level", "bytes", "name", "op", "count", "made", "freed"]) out[f] = a[f][k];
    return out;
  });
  state.answer = {key: a.key[0], devices: shown};
  state.view = null;
}

function ask(key, x0, x1, width) {
  if (!devices.some((d) => d.count) || state.asked === key) return;
  clearTimeout(state.timer);
  state.timer = setTimeout(() => {  // once the view has rested
    if (!state.view || state.view.join("|") !== key) return;
    state.asked = key;
    request.data = {x0: [x0], x1: [x1], width: [width], key: [key]};
  }, 100);
}

function draw() {
  const x0 = x_range.start, x1 = x_range.end;
  const width = Math.max(100, Math.round(plot.inner_width || 1000));
  const view = [x0, x1, width];
  if (state.view && view.every((v, i) => v === state.view[i])) return;
  state.view = view;
  const key = view.join("|");
  const served = state.answer && state.answer.key === key;
  if (!served) ask(key, x0, x1, width);
  const lx = [], ly = [], px = [], py = [], plevel = [], pwhat = [], pop = [], pdevice = [];
  for (const d of served ? state.answer.devices : devices) {
    const t = d.t, level = d.level, bytes = d.bytes, n = t.length;
    const y = (v) => d.row + 0.9 - 0.8 * (d.peak > 0 ? v / d.peak : 0);
    const i0 = Math.max(0, lowerBound(t, x0) - 1), i1 = Math.min(n, lowerBound(t, x1) + 1);
    let prev = i0 > 0 ? level[i0 - 1] : 0;
    lx.push(NaN); ly.push(NaN);  // a gap: each device's curve is its own
    lx.push(i0 < n ? Math.min(t[i0], x0) : x0); ly.push(y(prev));
    const point = (x, v, what, op) => {
      px.push(x); py.push(y(v)); plevel.push(fmtBytes(v)); pwhat.push(what); pop.push(op);
      pdevice.push(d.label);
    };
    if (i1 - i0 <= width) {
      for (let i = i0; i < i1; i++) {
        lx.push(t[i], t[i]); ly.push(y(prev), y(level[i]));
        prev = level[i];
        point(t[i], level[i], eventText(d, i), d.op[i]);
      }
    } else {
      const step = (x1 - x0) / width;
      let i = i0;
      while (i < i1) {
        // this pixel's events: [i, j); their extremes from the blocks (memory_lane.py)
        const bucketEnd = x0 + (Math.floor((t[i] - x0) / step) + 1) * step;
        const j = Math.min(i1, Math.max(i + 1, lowerBound(t, bucketEnd)));
        const r = rangeStats(d, i, j);
        const start = t[i];
        lx.push(start, start, start, start); ly.push(y(prev), y(r.hi), y(r.lo), y(level[j - 1]));
        prev = level[j - 1];
        point(start, r.hi, r.count + " events: +" + fmtBytes(r.made) + " / -" + fmtBytes(r.freed)
              + " (largest in " + opName(d, r.big) + ")", d.op[r.big]);
        i = j;
      }
    }
    lx.push(Math.max(x1, i1 > 0 ? t[i1 - 1] : x1)); ly.push(y(prev));
  }
  // typed arrays: Bokeh takes them as they are (plain arrays are checked and converted)
  line.data = {x: Float64Array.from(lx), y: Float64Array.from(ly)};
  points.data = {x: Float64Array.from(px), y: Float64Array.from(py), level: plevel, what: pwhat,
                 op: Int32Array.from(pop), device: pdevice};
}

function tapped() {
  const indices = points.selected.indices;
  if (!indices.length) return;
  const op = points.data.op[indices[0]];
  points.selected.indices = [];
  if (op >= 0) selection.data = {event_id: [op], kind: ["cpu"]};
}

if (cb_obj === points.selected) tapped();
else {
  if (cb_obj === answer) readAnswer();
  draw();
}
