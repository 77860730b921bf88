"""%%cudaprof on a real GPU: the trace and the widget carry per-op GPU intervals (CUDA events),
kernels beside them where CUPTI works, none with --no-kernels."""

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

from nbprof.model import GPU_KINDS

pytestmark = pytest.mark.gpu

CELL = ("import torch\na = torch.randn(1024, 1024, device='cuda')\n"
        "b = (a @ a).relu().sum()\ntorch.cuda.synchronize()")


def run_magic(line):
    shell = InteractiveShell.instance()  # the running shell, or a new one
    shell.run_line_magic("load_ext", "nbprof")
    with capture_output() as out:
        result = shell.run_cell(f"%%cudaprof {line}\n{CELL}")
    assert result.success, result.error_in_exec
    return shell, out


def test_profiled_gpu_cell_has_gpu_intervals_in_the_trace_and_the_details():
    shell, out = run_magic("-o gpu_trace")
    assert out.stderr == ""
    trace = shell.user_ns["gpu_trace"]
    assert trace.has_gpu and trace.meta["backend"] == "cuda-events"
    mm = [i for i in range(len(trace)) if trace.names[trace.name_id[i]] == "aten::mm"]
    assert mm and trace.event(mm[0]).kernels  # the matmul got its GPU interval
    from nbprof.notebook.details import details_html

    assert "stream" in details_html(trace, mm[0])
    assert any("application/vnd.jupyter.widget-view+json" in o.data for o in out.outputs)
    # the widget's saved copy (the output before it) holds the summary, GPU columns included
    copy = next(o for o in out.outputs if "nbprof" in (o.metadata or {}))
    assert "aten::mm" in copy.data["text/plain"] and "GPU (" in copy.data["text/plain"], \
        copy.data["text/plain"]


def test_no_kernels_flag_records_events_only():
    shell, out = run_magic("--no-kernels -o events_only")
    trace = shell.user_ns["events_only"]
    assert {GPU_KINDS[kind] for kind in trace.gpu_kind} == {"op"}
