"""The widget's Compare tab: this run against an earlier one (re-running ``%%cudaprof -o t`` or
``--compare VAR``): the diff table (analysis/diff.py) and the two runs' timelines one above the other,
steps aligned at their starts, ops coloured by change (timeline/compare.py)."""

from __future__ import annotations

from ..timeline.html_text import PRE_STYLE, html_text

import ipywidgets

from ..analysis.diff import compare


class ComparePane(ipywidgets.VBox):
    def __init__(self, before, after, label: str = "the previous run", row_limit: int = 15):
        from jupyter_bokeh import BokehModel

        from ..timeline.compare import comparison_figure

        self.comparison = compare(before, after, plain=True)
        self.text = self.comparison.report(row_limit=row_limit)
        figure, self.bars = comparison_figure(before, after, self.comparison)
        header = (f"<b>Compared with {html_text(label)}</b>: before {len(before):,} events, after "
                  f"{len(after):,} events. Below: before (top) and after, each step from its start.")
        super().__init__([ipywidgets.HTML(header),
                          ipywidgets.HTML(f"<pre class='nbprof-diff' style='{PRE_STYLE}'>"
                                          f"{html_text(self.text)}</pre>"),
                          BokehModel(figure)])
        self.add_class("nbprof-compare")
