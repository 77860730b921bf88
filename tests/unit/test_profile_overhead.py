"""The profiler's own cost: the wording (pure), and where a user reads it (CLI, widget header)."""

import pytest

import nbprof
from nbprof.record.overhead import describe_overhead, overhead_meta


def test_the_share_is_the_ops_cost_over_the_block_time():
    overhead = overhead_meta(2100.0, op_count=4000, block_ns=93_000_000)
    assert overhead["share"] == pytest.approx(2100 * 4000 / 93e6, abs=1e-4)
    assert describe_overhead(overhead) == "profiler overhead ≈ 2.1 µs/op, ~9% of the profiled code"
    assert describe_overhead(overhead, of="this cell") == "profiler overhead ≈ 2.1 µs/op, ~9% of this cell"


@pytest.mark.parametrize("per_op_ns, ops, block_ns, text", [
    (40.0, 10, 10_000_000, "profiler overhead ≈ 40 ns/op, <1% of this block"),
    (500.0, 0, 1_000_000, "profiler overhead ≈ 0.5 µs/op, 0% of this block"),
    (3000.0, 10_000, 1_000, "profiler overhead ≈ 3.0 µs/op, ~100% of this block"),  # capped
    (-5.0, 10, 0, "profiler overhead ≈ 0 ns/op, 0% of this block"),  # noise, an empty block
])
def test_small_large_and_degenerate_figures_read_sensibly(per_op_ns, ops, block_ns, text):
    assert describe_overhead(overhead_meta(per_op_ns, ops, block_ns), of="this block") == text


def test_no_measurement_says_nothing():
    assert describe_overhead(None) == "" and describe_overhead({}) == ""


def test_the_widget_header_shows_the_overhead_of_a_real_profile(tmp_path):
    import torch

    from nbprof.notebook.widget import TraceWidget

    with nbprof.profile() as prof:
        for _ in range(200):
            torch.ones(3).add(1)
    def header(widget):
        return " ".join(child.value for child in widget.children
                        if hasattr(child, "value") and isinstance(child.value, str))

    # under the cell that %%cudaprof profiled
    in_cell = header(TraceWidget(prof.trace, name="t", sort_by="cpu_time_total", note=None,
                                 in_cell=True))
    assert describe_overhead(prof.trace.meta["overhead"], of="this cell") in in_cell
    assert "profiler overhead ≈" in in_cell
    # the same trace saved and loaded in another cell: its overhead, not "of this cell"
    loaded = nbprof.load(prof.trace.export_chrome_trace(tmp_path / "saved.json.gz"))
    elsewhere = header(nbprof.widget(loaded))
    assert "profiler overhead ≈" in elsewhere and "of the profiled code" in elsewhere
    assert "this cell" not in elsewhere


def test_the_cli_prints_the_overhead(tmp_path, capsys):
    from nbprof.cli.main import main

    script = tmp_path / "work.py"
    script.write_text("import torch\nfor _ in range(300):\n    torch.ones(4).mul(2)\n")
    assert main(["run", "-o", str(tmp_path / "page.html"), str(script)]) == 0
    out = capsys.readouterr().out
    assert "nbprof: profiler overhead ≈ " in out and "% of the run" in out
