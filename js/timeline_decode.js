// The hidden event columns, from the page's base64 zlib blob to typed arrays (see
// nbprof/timeline/packing.py and data.py for how they were written).

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

function base64Bytes(text) {
  if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(text);
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

async function inflateInSlices(text, pieceBytes) {
  // inflateBase64 a piece at a time, a task each: fed whole, DecompressionStream inflated a big
  // page's events in one ~100 ms task, while the page should answer the wheel
  const packed = base64Bytes(text), inflate = new DecompressionStream("deflate");
  const writer = inflate.writable.getWriter(), reader = inflate.readable.getReader();
  const parts = [];
  const reading = (async () => {
    for (let part = await reader.read(); !part.done; part = await reader.read()) parts.push(part.value);
  })();
  for (let at = 0; at < packed.length; at += pieceBytes) {
    await writer.write(packed.subarray(at, at + pieceBytes));
    await nextTask();
  }
  await writer.close();
  await reading;
  const bytes = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let at = 0;
  for (const part of parts) { bytes.set(part, at); at += part.length; }
  return bytes;
}

async function inflateBase64(text) {
  const packed = base64Bytes(text);
  const stream = new Blob([packed]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

// Whose layout column() reads: the page's, or a served answer's (timeline_served.js sets it).
let decodeMeta = info;

function column(bytes, name, Type) {
  const [offset, , count] = decodeMeta.layout[name];
  return decodeVarints(bytes, offset, count, new Type(count));
}

function groupBy(keys, nKeys) {
  // CSR: for key k, the entries i with keys[i] === k are items[start[k]..start[k + 1]).
  const start = new Int32Array(nKeys + 1);
  for (let i = 0; i < keys.length; i++) if (keys[i] >= 0) start[keys[i] + 1]++;
  for (let k = 0; k < nKeys; k++) start[k + 1] += start[k];
  const items = new Int32Array(start[nKeys]);
  const fill = start.slice(0, nKeys);
  for (let i = 0; i < keys.length; i++) if (keys[i] >= 0) items[fill[keys[i]]++] = i;
  return {start, items};
}

function decode(S, bytes) {
  for (const _ of decodeSteps(S, bytes));  // eslint-disable-line no-unused-vars
}

// decode() in steps of a few ms each (a column, 64k entries, an index): a big page decodes its
// events after its first view is drawn (timeline_main.js), yielding to the browser between steps.
function* decodeSteps(S, bytes) {
  const nRows = info.row_lane.length, nCpu = decodeMeta.n_cpu, nGpu = decodeMeta.n_gpu;
  const n = nCpu + nGpu;
  const rowCount = column(bytes, "row_count", Int32Array);
  const start = column(bytes, "start_gap", Float64Array);  // zigzag gap after the previous end
  yield;
  const dur = column(bytes, "duration", Float64Array);
  yield;
  const id = column(bytes, "id_delta", Int32Array);
  yield;
  const name = column(bytes, "name_id", Int32Array);
  yield;
  const family = column(bytes, "family", Uint8Array);
  const launchPlus1 = column(bytes, "gpu_launch", Int32Array);
  const runtimePlus1 = column(bytes, "gpu_runtime", Int32Array);
  yield;
  const rowStart = new Int32Array(nRows + 1);
  const rowOf = new Int32Array(n);
  // Running max of ends within each row: sorted, so a binary search finds the first event in view
  // even when an earlier, longer one overlaps later ones.
  const maxEnd = new Float64Array(n);
  const cpuEntry = new Int32Array(nCpu), gpuEntry = new Int32Array(nGpu);  // event id -> entry
  const launchOf = new Int32Array(n).fill(-1);  // per GPU entry: the launching op's CPU id
  const callOf = new Int32Array(n).fill(-1);    // per GPU entry: its runtime call's CPU id
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
      if (isGpu) {
        gpuEntry[id[i]] = i;
        launchOf[i] = launchPlus1[gpuSeen] - 1;
        callOf[i] = runtimePlus1[gpuSeen++] - 1;
      } else cpuEntry[id[i]] = i;
      if ((i & 0xffff) === 0xffff) yield;
    }
  }
  yield;
  // Launch indexes, CPU event id -> the GPU entries it launched: by op (an op's links are those
  // of everything nested in it) and by runtime call (clicking a call selects its kernels).
  const byOp = groupBy(launchOf, nCpu);
  yield;
  const byCall = groupBy(callOf, nCpu);
  yield;
  // Where each GPU entry's link starts: its runtime call where known, else the op.
  const linkFrom = new Int32Array(n).fill(-1);
  for (let i = 0; i < n; i++) {
    const from = callOf[i] >= 0 ? callOf[i] : launchOf[i];
    if (from >= 0) linkFrom[i] = cpuEntry[from];
  }
  yield;
  const details = new Array(n).fill("");
  const detailIds = column(bytes, "detail_entry", Int32Array);
  const detailTexts = column(bytes, "detail_text", Int32Array);
  for (let k = 0; k < detailIds.length; k++) details[detailIds[k]] = decodeMeta.detail_texts[detailTexts[k]];
  Object.assign(S, {rowStart, rowOf, start, dur, id, name, family, maxEnd, cpuEntry, gpuEntry,
                    launchOf, callOf, linkFrom, launchStart: byOp.start, launched: byOp.items,
                    callStart: byCall.start, callLaunched: byCall.items, details});
}

function laneRowsOf() {
  // each lane's rows, in sub-row order
  const laneRows = info.labels.map(() => []);
  for (let r = 0; r < info.row_lane.length; r++) laneRows[info.row_lane[r]].push(r);
  return laneRows;
}
