"""The static copy of a widget, saved into the notebook beside it: the timeline (zoom and pan work,
as in ``nbprof.save_html``'s page) and the summary table, as text/html.

Why: a saved notebook opened without its kernel (JupyterLab, ``jupyter nbconvert --to html``,
nbviewer, VS Code offline, GitHub) has no widget models, so the widget's own output shows nothing
("model not found"). This copy is a separate output, shown where the live widget is missing and
hidden by the live widget (js/bokeh_host.js) where it draws.

BokehJS (1.7 MB) goes into one copy per notebook: the first one this kernel publishes, and again
when that same cell runs again (its old output, which carried it, is replaced). The others wait
for it in the page.
"""

from __future__ import annotations

import uuid

from ..model import Trace
from ..timeline.html_text import html_text, json_in_html
from .bokeh_host import bokehjs_source
from .summary import summary_html

# The cell whose output carries BokehJS in this kernel; "" = none yet, None = unknown cell.
_bokehjs_cell: str | None = ""

# Draws the copy when BokehJS is in the page (it may come from another cell's copy), and, without
# a live widget, hides the widget output's "Error displaying widget: model not found" beside it.
_EMBED_JS = """(function () {
  const root = document.currentScript.closest(".nbprof-static");
  const item = JSON.parse(root.querySelector("script.nbprof-static-item").textContent);
  const target = root.querySelector(".nbprof-static-plot");
  const started = Date.now();
  const draw = () => {
    if (window.Bokeh && window.Bokeh.embed) { window.Bokeh.embed.embed_item(item, target); return; }
    if (Date.now() - started < 60000) { setTimeout(draw, 100); return; }
    target.textContent = "The static timeline needs BokehJS, which the notebook's first nbprof " +
      "output carries: re-run the cells to draw it.";
  };
  draw();
  // Only the final error: "Loading widget..." may still become the live widget.
  const quiet = (tries) => {
    const output = root.closest(".jp-OutputArea-child");
    const widget = output && output.nextElementSibling;  // the widget's own output comes next
    if (widget && widget.querySelector(".nbprof-widget")) return;  // live: it hides this copy
    if (widget && /Error displaying widget/.test(widget.textContent)) {
      widget.style.display = "none";
      return;
    }
    // not yet in its output area (a loaded page may run this before attaching it): look again
    if (tries > 0) setTimeout(() => quiet(tries - 1), 1000);
  };
  quiet(60);
})();"""


def _bokehjs_needed(cell_id: str | None) -> bool:
    """BokehJS goes into this copy when no cell carries it yet, or when this is that cell again."""
    global _bokehjs_cell
    if _bokehjs_cell == "" or (cell_id is not None and cell_id == _bokehjs_cell):
        _bokehjs_cell = cell_id
        return True
    return False


def _running_cell_id() -> str | None:
    """The id JupyterLab (and nbclient) send with the executing cell, if any."""
    from IPython import get_ipython

    kernel = getattr(get_ipython(), "kernel", None)
    try:
        return (kernel.get_parent().get("metadata") or {}).get("cellId")
    except Exception:  # not under ipykernel, or an ipykernel without parent headers
        return None


def static_bundle(timeline, *, sort_by: str, note: str | None = None,
                  text: str = "") -> tuple[str, dict]:
    """(its id, the mime bundle) of the static copy of ``timeline``."""
    from bokeh import __version__ as bokeh_version
    from bokeh.embed.util import standalone_docs_json_and_render_items

    static_id = uuid.uuid4().hex
    trace: Trace = timeline.trace
    # bokeh.embed.json_item's item, without its warning about the widget's Python callbacks
    # (the copy needs none: its zoom and pan run in the browser code).
    docs_json, _ = standalone_docs_json_and_render_items([timeline.layout],
                                                         suppress_callback_warning=True)
    item = {"target_id": None, "root_id": timeline.layout.id, "doc": next(iter(docs_json.values())),
            "version": bokeh_version}
    item = json_in_html(item)
    bokehjs = (f"<script type='text/javascript'>{bokehjs_source()}</script>"
               if _bokehjs_needed(_running_cell_id()) else "")
    header = f"<p><b>{html_text(note)}</b></p>" if note else ""
    html = (f"<div class='nbprof-static' data-nbprof-id='{static_id}'>{bokehjs}{header}"
            "<p class='nbprof-static-note' style='margin:2px 0'><i>Saved copy of the nbprof "
            "timeline: zoom and pan work; re-run the cell to search, filter and export.</i></p>"
            "<div class='nbprof-static-plot' style='width:100%'></div>"
            f"<script type='application/json' class='nbprof-static-item'>{item}</script>"
            f"<script type='text/javascript'>{_EMBED_JS}</script>"
            f"<details open><summary>Summary</summary>{summary_html(trace, sort_by)}</details>"
            "</div>")
    return static_id, {"text/html": html, "text/plain": text}
