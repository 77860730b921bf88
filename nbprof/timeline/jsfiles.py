"""Browser-side code shipped with the package: nbprof/js in a wheel, js/ in the source tree."""

from __future__ import annotations

import functools
import pathlib


@functools.cache
def read_js(name: str) -> str:
    package = pathlib.Path(__file__).resolve().parents[1]
    for folder in (package / "js", package.parent / "js"):  # installed wheel, then source tree
        path = folder / name
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError(f"nbprof's browser code {name} is missing from {package / 'js'} and "
                            f"{package.parent / 'js'}: reinstall nbprof")


# The timeline's CustomJS body, in order: constants, decoding, level of detail, overlays, triggers.
TIMELINE_PARTS = ("timeline.js", "timeline_decode.js", "timeline_draw.js", "timeline_overlays.js",
                  "timeline_main.js")


def timeline_code() -> str:
    return "\n".join(read_js(name) for name in TIMELINE_PARTS)
