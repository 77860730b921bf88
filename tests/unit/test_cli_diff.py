"""`nbprof diff A B -o diff.html`, as a user types it."""

import subprocess
import sys

from nbprof.cli.main import main


def test_diff_writes_a_page_and_prints_the_table(shared_traces, tmp_path, capsys):
    page = tmp_path / "out" / "diff.html"
    assert main(["diff", str(shared_traces / "gpu_sampled_rank0.json.gz"),
                 str(shared_traces / "gpu_sampled_rank1.json.gz"), "-o", str(page)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("nbprof diff by name:")  # the roll-up by name first, then the detail
    assert "nbprof diff:" in printed and "matched by call path and step" in printed
    assert f"wrote {page}" in printed
    html = page.read_text()
    assert "nbprof_compare_plot" in html and "nccl:all_to_all" in html
    assert not [p for p in page.parent.iterdir() if p.name.endswith(".tmp")]


def test_diff_of_a_bad_file_says_why_and_keeps_the_old_page(shared_traces, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    page = tmp_path / "diff.html"
    page.write_text("the earlier page")
    done = subprocess.run([sys.executable, "-m", "nbprof.cli", "diff", str(bad),
                           str(shared_traces / "gpu_alexnet_kineto.json.gz"), "-o", str(page)],
                          capture_output=True, text=True)
    assert done.returncode == 1
    assert "nbprof:" in done.stderr and "Traceback" not in done.stderr
    assert page.read_text() == "the earlier page"
