"""The tables the analysis hands back (steps, kernel summary, diff): a pandas DataFrame when pandas
is installed, else a list of row dicts; either way with ``.table()``, the same rows as text.

pandas is optional (it is not a dependency of nbprof): the analysis builds plain columns, and only
here are they wrapped. A filtered or sorted frame keeps its ``.table()`` (pandas' subclassing
hook, ``_constructor``).
"""

from __future__ import annotations

from collections.abc import Callable

_frame_classes: dict = {}


class Rows(list):
    """Rows as dicts, where pandas is not installed; ``.table()`` gives them as text."""

    _text: Callable = None  # set per kind of table by make_table

    def table(self, **options) -> str:
        return self._text(list(self), **options)

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
                return text(self.to_dict("records"), **options)

        Frame.__name__ = Frame.__qualname__ = f"{kind}Frame"
        _frame_classes[kind] = Frame
    return _frame_classes[kind]


def make_table(kind: str, columns: dict, text: Callable, plain: bool = False):
    """``columns`` (name -> equally long sequence) as a DataFrame with ``.table()``, or as
    :class:`Rows` without pandas or with ``plain`` (the widget: no pandas import for its panes).
    ``text(rows, **options)`` formats a list of row dicts."""
    try:
        if plain:
            raise ImportError("plain rows asked for")
        frame = _frame_class(kind, text)
    except ImportError:
        names = list(columns)
        values = [list(columns[name]) for name in names]
        return type(f"{kind}Rows", (Rows,), {"_text": staticmethod(text)})(
            dict(zip(names, row)) for row in zip(*values))
    return frame(columns)


def records(table) -> list[dict]:
    """The rows of a table from :func:`make_table` as dicts, whichever form it has."""
    return table.to_dict("records") if hasattr(table, "to_dict") else list(table)
