"""Running code in a fresh interpreter where some packages cannot be imported: the model and the
analysis must work without torch, bokeh or IPython (DESIGN.md, rule 1), the tables without pandas."""

import subprocess
import sys

UI_AND_TORCH = ("torch", "bokeh", "IPython", "ipywidgets")


def run_without(code: str, blocked=UI_AND_TORCH) -> subprocess.CompletedProcess:
    """``code`` run by ``python -c`` with every package in ``blocked`` refusing to import."""
    guard = ("import sys\n"
             "class Block:\n"
             "    def find_spec(self, name, path=None, target=None):\n"
             f"        if name.split('.')[0] in {tuple(blocked)!r}:\n"
             "            raise ImportError('blocked: ' + name)\n"
             "sys.meta_path.insert(0, Block())\n")
    return subprocess.run([sys.executable, "-c", guard + code], capture_output=True, text=True)
