"""The notebook side: the ``%%cudaprof`` magic (magic, args), the widget (widget) and its panes
(search, details, summary rows, export_panel, repeats). Only this package imports IPython and
ipywidgets; the panes' contents come from pure functions over a Trace.

Nothing is imported here: ``nbprof.widget`` (the function) is looked up lazily by nbprof/__init__.

Sits at the top with the CLI: it may import every other package (timeline, analysis, formats, ranks,
record, model).
"""
