"""The one place where text becomes HTML.

Names, thread names, device names, ranks, notes, stacks, shapes, args and paths come from trace files
and recordings, and a trace file can be hostile: ``"rank": "<img src=x onerror=...>"`` must show as
those characters, never run (in a saved page, or in JupyterLab's origin, which can drive the kernel).
Every value that goes into an HTML string (a Bokeh page's :func:`html_pane`, an ipywidgets ``HTML`` pane, a
``text/html`` repr) goes through :func:`html_text`; markup is only ever nbprof's own literals.
JSON that goes into a page (a ``<script type="application/json">``) goes through :func:`json_in_html`.
"""

from __future__ import annotations

import html

import orjson

# The style of nbprof's text tables in HTML (the Overview and Compare panes): they must not wrap, a
# wrapped row reads as two.
PRE_STYLE = "margin:0; white-space:pre; overflow-x:auto"


def html_text(value: object) -> str:
    """``value`` (any object: its ``str``) as HTML text: ``& < > " '`` escaped, so it can sit in
    an element or an attribute and shows literally."""
    return html.escape(str(value), quote=True)


# Inside a <script> element the HTML parser looks for "</script" and, after "<!--", for "<script":
# "</" alone is not enough ("<!--<script>" in a name keeps the element open past its own end tag,
# and the rest of the page is swallowed). JSON never needs these characters outside its strings,
# and there they may be \u escapes; U+2028/2029 end a line in older JavaScript. (bytes.replace,
# one pass each: 20x faster than str.translate on a page's many MB.)
_JSON_IN_HTML = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"),
                 ("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


def html_pane(html, *, name: str | None = None, **options):
    """nbprof's HTML (file text in it through :func:`html_text`) as a block of a Bokeh page: a
    ``bokeh.models.dom.HTML`` (or ``html``, one already made) in a ``Pane``. Not a ``Div``: a Div
    is a widget, and one widget makes a page load BokehJS's widgets bundle too (~380 kB parsed
    before the first paint); the notebook host sends the main bundle only."""
    from bokeh.models import Pane
    from bokeh.models.dom import HTML

    element = html if isinstance(html, HTML) else HTML(html=html)
    return Pane(elements=[element], **({"name": name} if name else {}), **options)


def json_in_html(value: object) -> str:
    """``value`` as JSON text that can sit inside any HTML element, ``<script>`` included, and
    parses back (``JSON.parse``) to the same value: ``< > &`` and U+2028/2029 as ``\\u`` escapes."""
    text = orjson.dumps(value)
    for character, escape in _JSON_IN_HTML:
        text = text.replace(character, escape)
    return text.decode()
