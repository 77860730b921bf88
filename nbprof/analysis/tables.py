"""The tables the analysis hands back (steps, kernel summary, GPU agreement, diff, rank summary):
pandas DataFrames, one shape for every table answer. Printed (``repr``/``str``) they read as the
text table with units that ``.table()`` gives; ``.attrs`` holds what is not a row (the straggler,
how many ops were not compared...), and ``attrs["footer"]`` lines close the text.

The analysis builds plain columns and only here are they wrapped. A filtered or sorted frame keeps
its ``.table()`` (pandas' subclassing hook, ``_constructor``); one whose columns the text needs
were dropped prints as pandas does. ``plain=True`` gives :class:`Rows` (row dicts with the same
``.table()``) for the widget's panes, which would otherwise import pandas (~0.4 s) just to format
text.
"""

from __future__ import annotations

from collections.abc import Callable

_frame_classes: dict = {}


def _text_with_footer(text: Callable, rows: list[dict], attrs: dict, options: dict) -> str:
    out = text(rows, **options)
    footer = attrs.get("footer")
    return f"{out}\n{footer}" if footer else out


class Rows(list):
    """Rows as dicts (``plain=True``); ``.table()`` gives them as text."""

    _text: Callable = None  # set per kind of table by make_table
    attrs: dict = {}

    def table(self, **options) -> str:
        return _text_with_footer(self._text, list(self), self.attrs, options)

    def column(self, name: str) -> list:
        return [row[name] for row in self]


def _frame_class(kind: str, text: Callable):
    if kind not in _frame_classes:
        import pandas

        class Frame(pandas.DataFrame):
            @property
            def _constructor(self):
                return Frame

            def table(self, **options) -> str:
                return _text_with_footer(text, self.to_dict("records"), self.attrs, options)

            def __repr__(self) -> str:
                try:
                    return self.table()
                except (KeyError, TypeError, ValueError):  # columns the text needs are gone
                    return super().__repr__()

            __str__ = __repr__

        Frame.__name__ = Frame.__qualname__ = f"{kind}Frame"
        _frame_classes[kind] = Frame
    return _frame_classes[kind]


def make_table(kind: str, columns: dict, text: Callable, plain: bool = False,
               attrs: dict | None = None):
    """``columns`` (name -> equally long sequence) as a DataFrame with ``.table()``, or as
    :class:`Rows` with ``plain`` (the widget: no pandas import for its panes). ``text(rows,
    **options)`` formats a list of row dicts; ``attrs`` go to the frame's ``.attrs``."""
    if plain:
        names = list(columns)
        values = [list(columns[name]) for name in names]
        rows = type(f"{kind}Rows", (Rows,), {"_text": staticmethod(text)})(
            dict(zip(names, row)) for row in zip(*values))
        rows.attrs = dict(attrs or {})
        return rows
    frame = _frame_class(kind, text)(columns)
    frame.attrs.update(attrs or {})
    return frame


def records(table) -> list[dict]:
    """The rows of a table from :func:`make_table` as dicts, whichever form it has."""
    return table.to_dict("records") if hasattr(table, "to_dict") else list(table)
