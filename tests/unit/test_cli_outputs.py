"""The CLI's outputs, typed as a hostile or unlucky user would: an output that is one of the inputs,
argparse's abbreviations, a path that can't be written (said before the script runs), and a write
that fails after the run (the rest is still written, and nothing is lost). The real CLI in a
subprocess each time."""

import gzip
import json
import os
import pathlib
import resource
import socket
import stat
import subprocess
import sys

import pytest

import nbprof

ROOT = pathlib.Path(__file__).resolve().parents[2]
# A script that leaves a mark when it runs: a refused command line must not run it.
SCRIPT = ("import pathlib, sys, torch\nx = torch.ones(4)\nfor _ in range(5):\n    x = x + 1\n"
          "pathlib.Path(__file__).with_suffix('.ran').write_text(repr(sys.argv[1:]))\n")


def nbprof_cli(*args, cwd=None, env=None, preexec_fn=None):
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "nbprof.cli", *map(str, args)], cwd=cwd,
                          env=environment, capture_output=True, text=True, timeout=180,
                          preexec_fn=preexec_fn)


def assert_one_line(done, *words):
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for word in words:
        assert str(word) in lines[0], lines[0]


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "victim.py"
    path.write_text(SCRIPT)
    return path


@pytest.fixture
def trace_file(tmp_path, shared_traces):
    path = tmp_path / "t.json.gz"
    path.write_bytes((shared_traces / "cpu_only_rank34.json.gz").read_bytes())
    return path


def test_run_never_overwrites_its_own_script(script, tmp_path):
    original = script.read_bytes()
    hard_link = tmp_path / "victim.html"
    os.link(script, hard_link)  # another name of the same file, with a page's name
    (tmp_path / "sub").mkdir()
    for args in (["-o", script, script],  # the page over the script
                 ["-o", tmp_path / "sub" / ".." / "victim.py", script],
                 ["-o", "victim.py", "victim.py"],  # relative, from the script's folder
                 ["-o", hard_link, script],
                 ["-o", tmp_path / "p.html", "--trace", script, script],
                 [script, "-o", script]):  # the old order: -o after the script is the script's
        done = nbprof_cli("run", *args, cwd=tmp_path)
        assert_one_line(done)
        assert "victim" in done.stderr or "-o PAGE.html" in done.stderr
        assert script.read_bytes() == original
        assert not script.with_suffix(".ran").exists()  # refused before the script ran


def test_view_diff_and_convert_never_overwrite_an_input(trace_file, tmp_path):
    original = trace_file.read_bytes()
    link = tmp_path / "page.html"
    link.symlink_to(trace_file)  # writing "page.html" would replace the file it points to
    other = tmp_path / "other.json.gz"
    other.write_bytes(original)
    for args in (["view", trace_file, "-o", trace_file],
                 ["view", trace_file, "-o", link],
                 ["view", tmp_path, "-o", link],  # a folder: its traces are the inputs
                 ["diff", other, trace_file, "-o", link],
                 ["diff", trace_file, other, "-o", trace_file]):
        done = nbprof_cli(*args)
        assert_one_line(done, "one of the inputs")
        assert trace_file.read_bytes() == original and link.is_symlink()
    out = tmp_path / "out"
    out.mkdir()
    (out / "t.parquet").symlink_to(trace_file)  # convert's output name, pointing at its input
    assert_one_line(nbprof_cli("convert", trace_file, "-o", out), "one of the inputs")
    assert trace_file.read_bytes() == original


def test_options_are_never_abbreviated_and_the_scripts_arguments_are_its_own(script, tmp_path):
    page = tmp_path / "a.html"
    done = nbprof_cli("run", "-o", page, script, "-o", "b.html", "--out", "r.txt", "--table", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert script.with_suffix(".ran").read_text() == "['-o', 'b.html', '--out', 'r.txt', '--table']"
    assert page.is_file() and not (tmp_path / "r.txt").exists() and not (tmp_path / "b.html").exists()
    assert "Self CPU time total" not in done.stdout  # --table went to the script
    for args in (["view", tmp_path / "x.json", "--out", tmp_path / "x.html"],
                 ["run", "--tab", "-o", page, script],
                 ["diff", "a.json", "b.json", "--out", "x.html", "--row", "3"]):
        done = nbprof_cli(*args, cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert not (tmp_path / "x.html").exists()


@pytest.mark.parametrize("case", ["read-only folder", "trace suffix", "file in the way", "device",
                                  "page suffix", "one file twice"])
def test_run_checks_every_output_before_the_script_runs(case, script, tmp_path):
    page, trace = tmp_path / "page.html", tmp_path / "trace.json.gz"
    link = tmp_path / "link.json"
    link.symlink_to(page)  # a trace path that would land on the page
    option, path, said = {
        "read-only folder": ("-o", "/sys/nbprof-page.html", "Permission denied"),  # root too
        "trace suffix": ("--trace", tmp_path / "trace.txt", "must end in .json"),
        "file in the way": ("-o", script / "x.html", "is a file, not a folder"),
        "device": ("-o", "/dev/full", "not a regular file"),
        "page suffix": ("-o", tmp_path / "page.json", "must end in .html"),
        "one file twice": ("--trace", link, "-o and --trace both name")}[case]
    paths = {"-o": page, "--trace": trace, option: path}
    done = nbprof_cli("run", "-o", paths["-o"], "--trace", paths["--trace"], script)
    assert_one_line(done, said, page if case == "one file twice" else path)
    assert not script.with_suffix(".ran").exists()  # nothing ran, so nothing was lost
    assert not page.exists() and not trace.exists()


@pytest.mark.parametrize("case", ["run --trace link to a device", "run --trace link to null",
                                  "run -o fifo",
                                  "view -o link to a device", "diff -o socket",
                                  "convert onto a device"])
def test_no_command_writes_onto_a_device_a_pipe_or_a_socket(case, script, trace_file, tmp_path):
    try:  # a device of our own like /dev/null (before the fix, a write replaced the node itself)
        os.mknod(tmp_path / "device", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")
    page, node = tmp_path / "page.html", tmp_path / "device"
    out = tmp_path / "out"
    listener = socket.socket(socket.AF_UNIX)
    if case == "run --trace link to a device":
        (node := tmp_path / "x.parquet").symlink_to(tmp_path / "device")
        args, said = ["run", "-o", page, "--trace", node, script], "a device, not a regular file"
    elif case == "run --trace link to null":  # the audit's case, /dev/null played by our node
        (node := tmp_path / "x.parquet").symlink_to(tmp_path / "device")
        args = ["run", "-o", page, "--trace", node, script]
        said = "a device, not a regular file"
        done = subprocess.run(
            [sys.executable, "-c", "import os, sys\nos.devnull = sys.argv.pop(1)\n"
             "from nbprof.cli.main import main\nsys.exit(main())", tmp_path / "device", *args],
            env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
            timeout=180)
    elif case == "run -o fifo":
        os.mkfifo(node := page)
        args, said = ["run", "-o", page, script], "a pipe (FIFO), not a regular file"
    elif case == "view -o link to a device":
        (node := page).symlink_to(tmp_path / "device")
        args, said = ["view", trace_file, "-o", page], "a device, not a regular file"
    elif case == "diff -o socket":
        listener.bind(str(node := page))
        args, said = ["diff", trace_file, trace_file, "-o", page], "a socket, not a regular file"
    else:
        out.mkdir()
        (node := out / "t.parquet").symlink_to(tmp_path / "device")
        args, said = ["convert", trace_file, "-o", out], "a device, not a regular file"
    kind = stat.S_IFMT(os.stat(node).st_mode)
    with listener:
        assert_one_line(done if case.endswith("null") else nbprof_cli(*args), said, node)
    assert stat.S_IFMT(os.stat(node).st_mode) == kind  # the node is still what it was
    assert stat.S_ISCHR(os.lstat(tmp_path / "device").st_mode)
    assert not script.with_suffix(".ran").exists()  # refused before the script ran
    assert sorted(p.name for p in tmp_path.iterdir() if p.name not in ("out", node.name)) == [
        "device", "t.json.gz", "victim.py"]  # nothing else written, no temporary file


def _file_size_limit(limit):
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_page_that_fails_after_the_run_still_leaves_the_trace(script, tmp_path):
    # A file size limit (as on a full disk) the small trace fits in and the page does not.
    page, trace = tmp_path / "page.html", tmp_path / "trace.json.gz"
    done = nbprof_cli("run", "-o", page, "--trace", trace, script, preexec_fn=_file_size_limit(256 << 10))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert f"cannot write the timeline page: File too large: {page}" in done.stderr, done.stderr
    assert f"wrote {trace}" in done.stdout
    assert not page.exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "trace.json.gz", "victim.py", "victim.ran"]  # no half page, no temporary file
    assert "aten::add" in nbprof.load(trace).names


def test_a_page_that_fails_without_trace_saves_the_trace_in_the_temp_folder(script, tmp_path):
    temp = tmp_path / "temp"
    temp.mkdir()
    page = tmp_path / "page.html"
    done = nbprof_cli("run", "-o", page, script, env={"TMPDIR": str(temp)},
                      preexec_fn=_file_size_limit(256 << 10))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (rescued,) = temp.glob("nbprof-victim-*.json.gz")
    assert f"saved the trace to {rescued}" in done.stderr and "nbprof view" in done.stderr
    assert "aten::add" in nbprof.load(rescued).names and not page.exists()


def test_a_trace_that_fails_after_the_run_still_leaves_the_page(tmp_path):
    # The script itself puts a file where the trace's folder was (the world changed during the run).
    script = tmp_path / "moves.py"
    script.write_text("import pathlib, shutil, torch\ntorch.ones(3).add(1)\n"
                      "out = pathlib.Path(__file__).parent / 'out'\nshutil.rmtree(out)\n"
                      "out.write_text('not a folder')\n")
    temp = tmp_path / "temp"
    temp.mkdir()
    page, trace = tmp_path / "page.html", tmp_path / "out" / "trace.json"
    done = nbprof_cli("run", "-o", page, "--trace", trace, script, env={"TMPDIR": str(temp)})
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"cannot write the trace: {tmp_path / 'out'} is a file, not a folder" in done.stderr
    assert page.is_file() and f"wrote {page}" in done.stdout
    (rescued,) = temp.glob("nbprof-moves-*.json.gz")
    assert "aten::add" in nbprof.load(rescued).names


def test_a_write_error_names_the_path_and_what_to_do(tmp_path, trace_file):
    from nbprof.formats.atomic import write_with
    from nbprof.cli.paths import describe

    def onto_a_full_disk(temporary):  # a real ENOSPC from the kernel, mid-write
        with open("/dev/full", "wb") as full:
            full.write(b"x" * 100)

    page = tmp_path / "full.html"
    with pytest.raises(OSError) as full:
        write_with(page, onto_a_full_disk, "the timeline page")
    assert describe(full.value) == ("cannot write the timeline page: No space left on device: "
                                    f"{page}; free space on that disk or write somewhere else")
    page = tmp_path / "big.html"
    done = nbprof_cli("view", trace_file, "-o", page, preexec_fn=_file_size_limit(64 << 10))
    assert_one_line(done, "File too large", page)
    assert not page.exists()
    assert_one_line(nbprof_cli("view", trace_file, "-o", "/dev/full"), "/dev/full", "not a regular file")


def test_convert_checks_its_folder_before_converting(trace_file, tmp_path):
    assert_one_line(nbprof_cli("convert", trace_file, "-o", trace_file), "is a file", "folder")
    assert_one_line(nbprof_cli("convert", trace_file, "-o", "/sys/nbprof-out"), "/sys")
    assert_one_line(nbprof_cli("convert", tmp_path / "none.parquet", "-o", tmp_path / "o"),
                    "no .json or .json.gz trace")
    assert json.loads(gzip.decompress(trace_file.read_bytes()))  # untouched


def test_ranks_memory_limit_is_a_size_not_sql(tmp_path):
    done = nbprof_cli("ranks", tmp_path, "--memory-limit", "1GB'; SELECT 1; --")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "not a memory size" in done.stderr


def test_a_missing_input_is_said_before_any_folder_is_made(tmp_path):
    for args in (["view", tmp_path / "none.json.gz", "-o", tmp_path / "new" / "p.html"],
                 ["diff", tmp_path / "a.json", tmp_path / "b.json", "-o", tmp_path / "new" / "d.html"]):
        assert_one_line(nbprof_cli(*args), "no trace file", "check the path")
        assert not (tmp_path / "new").exists()


def test_run_takes_a_folder_with_a_main_as_python_does(tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    (app / "helper.py").write_text("VALUE = 7\n")
    (app / "__main__.py").write_text("import sys, torch, helper\ntorch.ones(2).add(helper.VALUE)\n"
                                     "raise SystemExit(sys.argv[1:] == ['go'] and 4)\n")
    page = tmp_path / "app.html"
    done = nbprof_cli("run", "-o", page, app, "go")
    assert done.returncode == 4, done.stderr
    assert page.is_file() and "Traceback" not in done.stderr
