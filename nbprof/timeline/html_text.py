"""The one place where text becomes HTML.

Names, thread names, device names, ranks, notes, stacks, shapes, args and paths come from trace files
and recordings, and a trace file can be hostile: ``"rank": "<img src=x onerror=...>"`` must show as
those characters, never run (in a saved page, or in JupyterLab's origin, which can drive the kernel).
Every value that goes into an HTML string (a Bokeh ``Div``, an ipywidgets ``HTML`` pane, a
``text/html`` repr) goes through :func:`html_text`; markup is only ever nbprof's own literals.
"""

from __future__ import annotations

import html

# The style of nbprof's text tables in HTML (the Overview and Compare panes): they must not wrap, a
# wrapped row reads as two.
PRE_STYLE = "margin:0; white-space:pre; overflow-x:auto"


def html_text(value: object) -> str:
    """``value`` (any object: its ``str``) as HTML text: ``& < > " '`` escaped, so it can sit in
    an element or an attribute and shows literally."""
    return html.escape(str(value), quote=True)
