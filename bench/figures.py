"""One printed line per benchmark figure and its target, which bench/gpu_summary.py gathers from
a run's logs into summary.md: ``FIGURE | name | measured | target | PASS/FAIL/INFO``.

A bench prints its own prose as before and calls :func:`figure` where it has the number, so the
summary never depends on the wording of that prose. A figure that could not be measured (NaN)
fails.
"""

from __future__ import annotations

import math

PREFIX = "FIGURE |"


def figure(name: str, measured: float, target: float | None = None, unit: str = "x",
           at_least: bool = False, digits: int = 2) -> bool:
    """Print the figure's line; True when it meets its target (``measured <= target``, or
    ``>=`` with ``at_least``). Without a target the row is INFO (shown, not judged)."""
    value = f"{measured:.{digits}f}{unit}" if math.isfinite(measured) else "not measured"
    if target is None:
        verdict, wanted = "INFO", "-"
    else:
        met = math.isfinite(measured) and (measured >= target if at_least else measured <= target)
        verdict, wanted = ("PASS" if met else "FAIL"), f"{'>=' if at_least else '<='} {target}{unit}"
    print(f"{PREFIX} {name} | {value} | {wanted} | {verdict}", flush=True)
    return verdict != "FAIL"
