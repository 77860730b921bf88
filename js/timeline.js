// nbprof timeline: level-of-detail drawing of the hidden event columns (nbprof/timeline/).
// This file and then timeline_decode.js, timeline_draw.js, timeline_text.js,
// timeline_overlays.js, timeline_served.js, timeline_input.js and timeline_main.js, joined in that order
// (nbprof/timeline/jsfiles.py), are the body of ONE Bokeh CustomJS that every trigger of a
// timeline shares: document ready, x-range change, tap, hover, box select, and the sources
// Python sets (`cb_obj` says which fired); a ResizeObserver redraws when the plot's size changes
// and DOM listeners on the plot take the wheel, the keyboard and Shift+drag (timeline_input.js).
// Decoded state lives on the `rendered` source's JS object, so all triggers of one page (or one
// notebook widget) see the same state.
//
// Why: a million Bokeh glyphs take seconds per pan (TIMELINE_SCALE.md). Here all events stay in
// typed arrays; each view fills `rendered` with only what is in view: events at least MIN_REAL_PX
// wide as themselves, narrower neighbours with sub-pixel gaps merged into per-row busy blocks.
// Zoom in and every event becomes wide enough to be drawn as itself: nothing real stays hidden.

const MIN_REAL_PX = 3;       // an event at least this wide is always drawn as itself
const MERGE_GAP_PX = 1;      // narrower events closer than this merge into one busy block
// A block ends at each column of a grid of at most MAX_BLOCK_PX (a power of two ns, 2-4 px;
// time 0 onwards, so panning keeps the columns): each carries its own busy fraction, and a
// dense lane shows its gaps.
const MAX_BLOCK_PX = 4;
const MIN_BAR_PX = 1;        // every bar is at least this wide: zero-length events stay visible
const ROW_PX = 12;           // height a row unit needs before lanes are cut to fit
const KERNEL_ROW_UNITS = 2;  // a GPU lane's kernel row is twice a CPU depth: kernels stay visible
const BAR_PAD = 0.1;         // row units left empty above and below each bar
const LABEL_MIN_PX = 30;     // bars at least this wide get their name written inside
const VIEW_LINKS_MAX = 200;  // launch links for everything in view while at most this many
const FOCUS_LINKS_MAX = 2000;
const MARKS_MAX = 5000;
const KEY_ZOOM = 0.8;        // W/S: the view narrows (widens) to this fraction per key press
const KEY_PAN = 0.15;        // A/D: the view moves this fraction of its width per key press
// Lanes, rows, names and column layout, parsed once per page (Python sends it as one JSON string).
const info = rendered.__nbprof_info || (rendered.__nbprof_info = JSON.parse(info_json));

// The sources only the browser draws into (bars, labels, outlines, links, the strip) are set
// without a document change event: jupyter_bokeh sends each such event to the kernel, which has
// no use for the drawn bars and, in a notebook, spent 60-360 ms per zoom or pan step
// deserializing a view's few thousand bars, ahead of the request for the served level of detail
// (bench/bench_served_widget.py). The glyphs still redraw: the same signals a plain set emits.
function fill(source, data) {
  source.setv({data}, {silent: true});
  source.properties.data.change.emit();
  source.change.emit();
}
