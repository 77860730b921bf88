"""The ``nbprof`` command: ``run`` (a script profiled as ``%%cudaprof`` profiles a cell), ``view``,
``diff``, ``ranks`` and ``convert``.

- :mod:`.main`: the parser and ``view`` / ``diff``; :mod:`.run`: ``nbprof run``; :mod:`.ranks`: ``ranks`` and
  ``convert``; :mod:`.paths`: every output path checked before the work starts.

Sits at the top with the notebook: it may import every other package.
"""

from .main import main

__all__ = ["main"]
