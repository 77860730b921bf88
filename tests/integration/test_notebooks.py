"""Every notebook in notebooks/ runs top to bottom on CPU with nbclient, and its outputs are what a
reader expects: widgets under the %%cudaprof cells, a text fallback, no profiler noise, no errors
except in cells tagged "raises-exception"."""

import os
import pathlib
import shutil
import sys

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """Each notebook executed once, in a scratch copy of notebooks/ (exports land there)."""
    results = {}
    with pytest.MonkeyPatch.context() as patch:
        # The kernel must be this venv's Python, whatever `python` is first on PATH.
        patch.setenv("PATH", f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        for path in NOTEBOOKS:
            folder = tmp_path_factory.mktemp(path.stem)
            shutil.copy(path, folder)
            book = nbformat.read(folder / path.name, as_version=4)
            NotebookClient(book, timeout=120, kernel_name="python3", allow_errors=False,
                           resources={"metadata": {"path": str(folder)}}).execute()
            results[path.name] = (book, folder)
    return results


def code_cells(book):
    return [cell for cell in book.cells if cell.cell_type == "code"]


def test_there_are_notebooks():
    assert {"quickstart.ipynb", "options_tour.ipynb", "numba.ipynb"} <= {path.name for path in NOTEBOOKS}


@pytest.mark.parametrize("name", [path.name for path in NOTEBOOKS])
def test_no_errors_or_stderr_except_where_expected(executed, name):
    book, _ = executed[name]
    for cell in code_cells(book):
        errors = [o for o in cell.outputs if o.output_type == "error"]
        stderr = [o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stderr"]
        if "raises-exception" in cell.metadata.get("tags", []):
            # a traceback, or IPython's one-line "UsageError: ..." (printed to stderr)
            assert errors or any(text.startswith("UsageError") for text in stderr), cell.source
        else:
            assert errors == [], (cell.source, errors)
            assert stderr == [], (cell.source, stderr)  # e.g. Kineto's USDT lines would land here


@pytest.mark.parametrize("name", [path.name for path in NOTEBOOKS])
def test_profiled_cells_show_the_widget_with_a_text_fallback(executed, name):
    book, _ = executed[name]
    copies_with_bokehjs = 0
    for cell in code_cells(book):
        for index, output in enumerate(cell.outputs):
            data = output.get("data", {})
            if "nbprof" in output.get("metadata", {}):  # the static copy (notebook/static.py)
                copies_with_bokehjs += "BEGIN bokeh.min.js" in data["text/html"]
                assert "nbprof-static-summary" in data["text/html"] and "Self CPU" in data["text/plain"]
            if WIDGET in data:
                # the static copy, for front ends without the live widget, comes just before it
                assert index and "nbprof" in cell.outputs[index - 1].get("metadata", {}), cell.source
                assert "nbprof timeline widget" in data["text/plain"]
        shows_widget = any(WIDGET in o.get("data", {}) for o in cell.outputs)
        first_line = cell.source.splitlines()[0] if cell.source else ""
        if first_line.startswith("%%cudaprof"):
            refused = any(word in o.get("text", "") for o in cell.outputs
                          for word in ("UsageError", "nothing to profile"))
            wants_widget = "--no-display" not in first_line.split() and not refused
            assert shows_widget == wants_widget, cell.source
    assert copies_with_bokehjs <= 1  # BokehJS at most once per notebook


def test_quickstart_reads_as_the_text_says(executed):
    book, folder = executed["quickstart.ipynb"]
    cells = code_cells(book)
    profiled = next(c for c in cells if c.source.startswith("%%cudaprof"))
    text = [o.text for o in profiled.outputs if o.output_type == "stream"]
    assert any("loss after 3 steps" in t for t in text)
    # the cell's own output first, the widget under it
    kinds = [("widget" if WIDGET in o.get("data", {}) else o.output_type) for o in profiled.outputs]
    assert kinds.index("stream") < kinds.index("widget")
    table = next(c for c in cells if c.source.startswith("print(trace.table"))
    assert "aten::addmm" in table.outputs[0].text
    assert (folder / "quickstart.json.gz").is_file()
    assert "events read back" in cells[-2].outputs[0].text
    assert any(WIDGET in o.get("data", {}) for o in cells[-1].outputs)  # a loaded trace's widget


def test_options_tour_shows_each_option_at_work(executed):
    book, folder = executed["options_tour.ipynb"]
    cells = {c.source.splitlines()[0] if c.source else "": c for c in code_cells(book)}
    stdout = {first: "".join(o.get("text", "") for o in c.outputs if o.output_type == "stream")
              for first, c in cells.items()}
    assert "--repeat N" in stdout["%cudaprof -h"]
    assert "aten::mul" in stdout["%%cudaprof --table --sort count --row-limit 5 --no-display"]
    repeated = cells["%%cudaprof --warmup 1 --repeat 3 --row-limit 5 -o repeated"]
    fallback = next(o.data["text/plain"] for o in repeated.outputs if "nbprof" in o.get("metadata", {}))
    assert "over 3 runs" in fallback and "CPU max" in fallback  # in the widget's "Per run" tab too
    assert "[64, 32]" in stdout["matmul = [e for e in shaped.events if e.name == 'aten::mm'][0]"]
    assert (folder / "tour.json.gz").is_file()
    assert "Chrome trace written to" in stdout["%%cudaprof --cpu-only --export tour.json.gz --no-display"]
    raised = cells["%%cudaprof -o partial"]
    error = next(o for o in raised.outputs if o.output_type == "error")
    assert error.ename == "RuntimeError"
    traceback = "\n".join(error.traceback)
    # as without the magic: the cell's own line, none of nbprof's frames
    assert "a bug in the training step" in traceback and "nbprof/notebook/magic.py" not in traceback
    assert any(WIDGET in o.get("data", {}) for o in raised.outputs)  # what ran, before the error
    bad = "".join(o.get("text", "") for o in cells["%%cudaprof --fast"].outputs)
    assert "usage: %%cudaprof" in bad and "unrecognized arguments: --fast" in bad
    assert "False" in stdout["print('not_run' in dir())  # False: the cell above did not run"]
    assert "nothing to profile" in stdout["%%cudaprof"]


def test_numba_notebook_finds_the_slow_kernel_and_the_launching_cell(executed):
    book, _ = executed["numba.ipynb"]
    stdout = {c.source.splitlines()[0]: "".join(o.get("text", "") for o in c.outputs
                                                if o.output_type == "stream")
              for c in code_cells(book) if c.source}
    ranking = stdout["from collections import defaultdict"]
    for kernel in ("saxpy", "tiled_matmul", "block_sum", "stencil_2d"):
        assert f"numba::{kernel}" in ranking
    assert "slowest: numba::" in ranking and "'launched at'" in ranking
    compared = stdout["def per_launch_us(trace, name='numba::stencil_2d'):"]
    assert "block 16 x 16" in compared and "grid [2, 2, 1]" in compared
    assert "block 4 x 64" in compared and "grid [8, 1, 1]" in compared
    direct = next(c for c in code_cells(book) if c.source.startswith("%%cudaprof -o direct"))
    launched = stdout["launch = next(e for e in direct.events if e.name == 'numba::saxpy')"]
    # the launch is line 4 of the profiled cell's body, in the cell numbered as the notebook shows
    assert launched.startswith(f"cell [{direct.execution_count}], line 4 [4, 1, 1] [64, 1, 1]")  # as Kineto stores them
