"""The live timeline in a notebook: a jupyter_bokeh BokehModel shown through a small anywidget host
(js/bokeh_host.js) that first makes sure BokehJS is in the page showing it.

BokehJS must be loaded per page (each reload, tab or reconnect is a new one), not per kernel; the
host asks the kernel for it when its page lacks it and gets it as a message buffer, which is never
part of the widget's state and so never saved into the notebook.
"""

from __future__ import annotations

import functools

import anywidget
import ipywidgets
import traitlets

from ..timeline.jsfiles import js_path

# Only the bundle the notebook's Bokeh models use (the timeline, the Overview's step bars, the
# Compare figure: no widget among them, notes are html_panes), sent to every page that shows one:
# 1.27 MB; with the widgets bundle 1.65, the full INLINE set (widgets, GL, tables, MathJax) 3.9.
BOKEHJS_COMPONENTS = ["bokeh"]


@functools.cache
def bokehjs_source() -> str:
    """BokehJS's main bundle, inline, as one script: it sets ``window.Bokeh``."""
    from bokeh.resources import Resources

    return "\n".join(Resources(mode="inline", components=BOKEHJS_COMPONENTS).js_raw)


class PlotHost(anywidget.AnyWidget):
    """Shows ``plot`` (a jupyter_bokeh BokehModel) once BokehJS is in the page."""

    _esm = js_path("bokeh_host.js")
    plot = traitlets.Instance(ipywidgets.DOMWidget).tag(sync=True, **ipywidgets.widget_serialization)
    static_id = traitlets.Unicode("").tag(sync=True)  # the static copy of this timeline to hide
    views_drawn = traitlets.Int(0).tag(sync=True)  # pages that drew the plot (for tests)

    def __init__(self, layout, *, static_id: str = "", **kwargs):
        from jupyter_bokeh import BokehModel

        super().__init__(plot=BokehModel(layout), static_id=static_id, **kwargs)
        self.on_msg(self._answer)

    def _answer(self, _widget, content, _buffers) -> None:
        if isinstance(content, dict) and content.get("type") == "need-bokehjs":
            self.send({"type": "bokehjs"}, buffers=[bokehjs_source().encode("utf-8")])
