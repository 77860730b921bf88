// Names inside bars: measured with the canvas font Bokeh draws them in, cut with "…" to fit.

function textWidth(S, text) {
  if (!S.measure) {
    S.measure = document.createElement("canvas").getContext("2d");
    S.measure.font = info.label_font;
    S.widths = new Map();
  }
  let width = S.widths.get(text);
  if (width === undefined) {
    if (S.widths.size > 20000) S.widths.clear();  // names repeat; cut names vary: keep it bounded
    width = S.measure.measureText(text).width;
    S.widths.set(text, width);
  }
  return width;
}

function fitText(S, text, px) {
  // The longest prefix + "…" that fits in px (binary search: ~log2(length) measurements).
  if (textWidth(S, text) <= px) return text;
  if (textWidth(S, "…") > px || text.length < 2) return "";
  let lo = 0, hi = text.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (textWidth(S, text.slice(0, mid) + "…") <= px) lo = mid; else hi = mid - 1;
  }
  return lo ? text.slice(0, lo) + "…" : "";
}

const TEXT_COLORS = new Map();

function textColorOn(color, alpha) {
  // Dark text on light bars, white on dark ones (a faint block shows the white plot behind it).
  const key = color + alpha.toFixed(2);
  let text = TEXT_COLORS.get(key);
  if (text === undefined) {
    const channel = (k) => {
      const c = parseInt(color.slice(1 + 2 * k, 3 + 2 * k), 16) / 255;
      const shown = alpha * c + (1 - alpha);
      return shown <= 0.03928 ? shown / 12.92 : ((shown + 0.055) / 1.055) ** 2.4;
    };
    const luminance = 0.2126 * channel(0) + 0.7152 * channel(1) + 0.0722 * channel(2);
    text = luminance > 0.35 ? "#111111" : "#ffffff";
    TEXT_COLORS.set(key, text);
  }
  return text;
}
