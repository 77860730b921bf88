"""What a saved notebook weighs with nbprof's widgets in it (issue 9's target: the notebook of a small
``%%cudaprof`` cell of a few thousand events <= 2.0 MB, and <= 0.2 MB for every further such cell).

The notebook (``%load_ext nbprof`` and CELLS profiled cells) is executed by nbclient in a real
kernel and written as JupyterLab saves it (outputs, no widget state), then measured, side by side
with what the same outputs weighed before the static copy: the widget views plus the BokehJS load
that ``output_notebook`` published (``application/javascript`` and ``bokehjs_load``, the same JS twice).

    .venv/bin/python bench/bench_notebook_size.py [--cells 3] [--ops 600]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile

import nbformat
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parents[1]

CELL = """%%cudaprof -o trace{index}
x = torch.ones(32, 32)
for _ in range({ops}):
    x = torch.relu(x @ x / 32 + 1)"""


def executed_notebook(cells: int, ops: int) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("%load_ext nbprof\nimport torch")] + [
        nbformat.v4.new_code_cell(CELL.format(index=index, ops=ops)) for index in range(cells)]
    venv_bin = pathlib.Path(sys.executable).parent
    os.environ["PATH"] = f"{venv_bin}{os.pathsep}{os.environ['PATH']}"  # the kernel's python
    os.environ["PYTHONPATH"] = f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    with tempfile.TemporaryDirectory() as folder:
        NotebookClient(notebook, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": folder}}).execute()
    notebook.metadata.pop("widgets", None)  # JupyterLab does not save widget state by default
    return notebook


def saved_mb(notebook) -> float:
    return len(nbformat.writes(notebook).encode("utf-8")) / 1e6


def events_of(notebook, index: int) -> int:
    """Events of profiled cell ``index``, from its text summary ("N events")."""
    for output in notebook.cells[index + 1].outputs:
        text = output.get("data", {}).get("text/plain", "")
        if text.startswith("nbprof timeline:"):
            return int(text.split()[2].replace(",", ""))
    raise AssertionError(f"cell {index + 1} shows no nbprof output")


def before_static_copy(notebook) -> nbformat.NotebookNode:
    """The same notebook as the old widget saved it: no static copies, the BokehJS load once."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    from bokeh.io import output_notebook
    from bokeh.resources import Resources

    from nbprof.notebook.bokeh_host import BOKEHJS_COMPONENTS

    InteractiveShell.instance()
    with capture_output() as captured:
        output_notebook(Resources(mode="inline", components=BOKEHJS_COMPONENTS), hide_banner=True)
    old = nbformat.from_dict(json.loads(nbformat.writes(notebook)))
    for cell in old.cells[1:]:
        cell.outputs = [o for o in cell.outputs if "nbprof" not in o.get("metadata", {})]
    load = captured.outputs[-1]
    old.cells[1].outputs.insert(0, nbformat.v4.new_output("display_data", data=load.data))
    return old


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=3)
    parser.add_argument("--ops", type=int, default=300)
    args = parser.parse_args()
    notebook = executed_notebook(args.cells, args.ops)
    from nbprof.notebook.bokeh_host import bokehjs_source

    # nbformat writes strings JSON-escaped: look for a stretch of BokehJS without quotes in it.
    source = bokehjs_source()
    marker = next(line[:80] for line in source.splitlines() if len(line) > 80 and '"' not in line[:80]
                  and "\\" not in line[:80] and source.count(line[:80]) == 1)
    bokehjs_copies = nbformat.writes(notebook).count(marker)
    sizes = [saved_mb(nbformat.from_dict({**notebook, "cells": notebook.cells[:k + 2]}))
             for k in range(args.cells)]
    old = before_static_copy(notebook)
    old_sizes = [saved_mb(nbformat.from_dict({**old, "cells": old.cells[:k + 2]}))
                 for k in range(args.cells)]
    print(f"{args.cells} cells of {', '.join(f'{events_of(notebook, i):,}' for i in range(args.cells))} "
          f"events; BokehJS copies in the notebook: {bokehjs_copies}")
    print("| cells | now (MB) | before, widget views + output_notebook (MB) | ratio |")
    print("|---|---|---|---|")
    for k, (now, before) in enumerate(zip(sizes, old_sizes), start=1):
        print(f"| {k} | {now:.3f} | {before:.3f} | {now / before:.2f}x |")
    further = [b - a for a, b in zip(sizes, sizes[1:])]
    print(f"first cell: {sizes[0]:.3f} MB (target <= 2.0); each further cell: "
          f"{', '.join(f'{mb:.3f}' for mb in further)} MB (target <= 0.2)")
    if sizes[0] > 2.0 or any(mb > 0.2 for mb in further) or bokehjs_copies != 1:
        sys.exit("over target")


if __name__ == "__main__":
    main()
