"""Browser-side code shipped with the package: nbprof/js in a wheel, js/ in the source tree."""

from __future__ import annotations

import functools
import pathlib


def js_path(name: str) -> pathlib.Path:
    """Where browser module ``name`` lies: the timeline's parts and the widget's download.js."""
    package = pathlib.Path(__file__).resolve().parents[1]
    for folder in (package / "js", package.parent / "js"):  # installed wheel, then source tree
        path = folder / name
        if path.is_file():
            return path
    raise FileNotFoundError(f"nbprof's browser code {name} is missing from {package / 'js'} and "
                            f"{package.parent / 'js'}: reinstall nbprof")


@functools.cache
def read_js(name: str) -> str:
    return js_path(name).read_text(encoding="utf-8")


# The timeline's CustomJS body, in order: constants, decoding, level of detail, names in bars,
# overlays, the kernel-served level of detail, wheel/keys/drag, triggers.
TIMELINE_PARTS = ("timeline.js", "timeline_decode.js", "timeline_draw.js", "timeline_text.js",
                  "timeline_overlays.js", "timeline_served.js", "timeline_input.js",
                  "timeline_main.js")


def timeline_code() -> str:
    return "\n".join(read_js(name) for name in TIMELINE_PARTS)
