"""`nbprof view` and `nbprof run`, as a user types them."""

import gzip
import json
import subprocess
import sys

from nbprof.cli.main import main

SCRIPT = """
import sys
import torch
x = torch.ones(8)
for _ in range(int(sys.argv[1])):
    x = x * 2 + 1
print("script args:", sys.argv[1:])
"""


def test_view_writes_a_standalone_page(shared_traces, tmp_path, capsys):
    page = tmp_path / "alexnet.html"
    assert main(["view", str(shared_traces / "gpu_alexnet_kineto.json.gz"), "-o", str(page)]) == 0
    assert "wrote" in capsys.readouterr().out
    html = page.read_text()
    assert "nbprof_rendered" in html and "<script src=" not in html


def test_view_of_a_bad_file_says_why_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X"')
    done = subprocess.run([sys.executable, "-m", "nbprof.cli", "view", str(bad), "-o",
                           str(tmp_path / "p.html")], capture_output=True, text=True)
    assert done.returncode != 0
    assert "bad.json" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "p.html").exists()


def test_view_of_a_missing_file_fails_cleanly(tmp_path, capsys):
    assert main(["view", str(tmp_path / "nope.json.gz"), "-o", str(tmp_path / "p.html")]) != 0
    assert "nope.json.gz" in capsys.readouterr().err


def test_run_profiles_a_script_with_its_arguments(tmp_path, capsys):
    script = tmp_path / "work.py"
    script.write_text(SCRIPT)
    page, trace = tmp_path / "out" / "page.html", tmp_path / "out" / "trace.json.gz"
    code = main(["run", "-o", str(page), "--trace", str(trace), "--table", str(script), "3"])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0
    assert "script args: ['3']" in out
    assert "nbprof: note: " in captured.err  # the recording's notes (as `view` says them)
    assert "aten::mul" in out  # the summary table
    assert page.is_file() and "nbprof_rendered" in page.read_text()
    names = {event.get("name") for event in json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]}
    assert "aten::mul" in names


def test_run_of_a_missing_script_says_so(tmp_path, capsys):
    assert main(["run", "-o", str(tmp_path / "p.html"), str(tmp_path / "missing.py")]) == 2
    assert "missing.py" in capsys.readouterr().err


def test_run_of_a_failing_script_still_writes_what_ran(tmp_path, capsys):
    script = tmp_path / "fails.py"
    script.write_text("import torch\nx = torch.ones(4) + 1\nraise ValueError('bad batch')\n")
    page = tmp_path / "page.html"
    assert main(["run", "-o", str(page), str(script)]) == 1
    err = capsys.readouterr().err
    assert "ValueError: bad batch" in err and "shows what ran before" in err
    assert page.is_file()


def test_run_passes_everything_after_the_script_to_it_untouched(tmp_path, capsys):
    script = tmp_path / "args.py"
    script.write_text("import sys\nprint('argv', sys.argv[1:])\n")
    assert main(["run", "-o", str(tmp_path / "p.html"), str(script), "-o", "mine", "--", "--table"]) == 0
    out = capsys.readouterr().out
    assert "argv ['-o', 'mine', '--', '--table']" in out  # as `python args.py ...` would see them
    assert "Self CPU time total" not in out  # --table went to the script, not to nbprof


def test_ctrl_c_in_a_profiled_script_still_writes_what_ran(tmp_path):
    # A real SIGINT, as a terminal's Ctrl-C sends, in the middle of a long loop of torch ops.
    script = tmp_path / "long.py"
    script.write_text("import os, signal, torch\nx = torch.ones(4)\nfor step in range(10**9):\n"
                      "    x = x + 1\n    if step == 30:\n        os.kill(os.getpid(), signal.SIGINT)\n")
    page, trace = tmp_path / "page.html", tmp_path / "trace.json"
    done = subprocess.run([sys.executable, "-m", "nbprof.cli", "run", "-o", str(page), "--trace",
                           str(trace), str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 130, done.stderr
    assert "interrupted" in done.stderr and "Traceback" not in done.stderr
    assert page.is_file()
    adds = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("name") == "aten::add"]
    assert len(adds) >= 31


def test_an_unwritable_output_is_an_error_naming_the_path_without_a_traceback(tmp_path,
                                                                               shared_traces):
    script = tmp_path / "small.py"
    script.write_text("import torch\nx = torch.ones(4) + 1\n")
    not_a_folder = tmp_path / "small.py"  # a file where a folder would have to be
    for args in (["run", "-o", str(tmp_path / "p.html"), "--trace", str(not_a_folder / "t.json"),
                  str(script)],
                 ["view", str(shared_traces / "gpu_alexnet_kineto.json.gz"), "-o",
                  str(not_a_folder / "page.html")]):
        done = subprocess.run([sys.executable, "-m", "nbprof.cli", *args], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr and str(not_a_folder) in done.stderr


ONE_EVENT = '{"traceEvents": [{"ph": "X", "name": "op", "pid": 1, "tid": 1, "ts": 0, "dur": 5}]}'


def test_an_existing_file_is_taken_as_it_is_before_any_pattern(tmp_path, capsys):
    for name in ("run[lr=0.1].json", "run[0-9].json", "grid*.json", "what?.json"):
        (tmp_path / name).write_text(ONE_EVENT)
        page = tmp_path / f"{len(name)}.html"
        assert main(["view", str(tmp_path / name), "-o", str(page)]) == 0, capsys.readouterr().err
        assert page.is_file()
    # A pattern that is no file's name is still a pattern: the four files, as ranks of one job.
    assert main(["view", str(tmp_path / "*.json"), "-o", str(tmp_path / "all.html")]) == 0
    assert "4 CPU events" in capsys.readouterr().out


def test_sizes_and_rank_numbers_past_any_limit_are_one_line(tmp_path, capsys):
    trace = tmp_path / "t.json"
    trace.write_text(ONE_EVENT)
    for size in ("inf", "-inf", "1e400", "nan", "1e309K", "infinityG"):
        try:
            main(["view", str(trace), "-o", str(tmp_path / "p.html"), f"--max-size={size}"])
        except SystemExit as stop:  # argparse's own exit, after its usage line
            assert stop.code == 2
        err = capsys.readouterr().err
        assert f"argument --max-size: not a size: {size!r}" in err and "Traceback" not in err
    for number in ("2147483648", "9223372036854775808", "9" * 40):  # int32, int64, far past
        folder = tmp_path / number
        folder.mkdir()
        (folder / f"job.rank{number}.json").write_text(ONE_EVENT)
        (folder / "job.rank1.json").write_text(ONE_EVENT)
        for command in (["view", str(folder), "-o", str(tmp_path / "p.html")],
                        ["ranks", str(folder)],
                        ["convert", str(folder), "-o", str(tmp_path / "out"), "-j", "1"]):
            assert main(command) == 1, command
            err = capsys.readouterr().err
            assert err == (f"nbprof: {folder / f'job.rank{number}.json'}: {number} after \"rank\" "
                           "in its name is too large for a rank (at most 2147483647); rename the "
                           "file rankN\n"), err
    assert not (tmp_path / "p.html").exists()
    # convert wrote the good file before it came to the bad one: whole, and nothing else
    assert [path.name for path in (tmp_path / "out").iterdir()] == ["job.rank1.parquet"]
