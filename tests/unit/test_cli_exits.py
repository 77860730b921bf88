"""How `nbprof run` ends: the script's own exit status and message, Ctrl-C while nbprof imports
torch, and a second Ctrl-C while it writes what ran. Real signals to a real CLI subprocess."""

import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

import nbprof

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def start(*args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "nbprof.cli", *map(str, args)], env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def test_sys_exit_keeps_its_message_and_status_and_the_profile_is_written(tmp_path):
    for code, status, message in (('"fatal: bad config"', 1, "fatal: bad config"), ("3", 3, None),
                                  ("None", 0, None)):
        script = tmp_path / "exits.py"
        script.write_text(f"import sys, torch\ntorch.ones(2).add(1)\nsys.exit({code})\n")
        page = tmp_path / f"page{status}.html"
        done = subprocess.run([sys.executable, "-m", "nbprof.cli", "run", "-o", str(page),
                               str(script)], env=ENV, capture_output=True, text=True, timeout=180)
        assert done.returncode == status, done.stderr
        assert "Traceback" not in done.stderr
        if message:  # on stderr, as `python exits.py` prints it
            assert done.stderr.splitlines()[0] == message
        assert page.is_file() and f"wrote {page}" in done.stdout


def test_a_failing_script_shows_its_own_traceback_without_nbprofs_frames(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import torch\n\ndef step():\n    raise ValueError('bad batch')\n\n"
                      "torch.ones(2).add(1)\nstep()\n")
    done = subprocess.run([sys.executable, "-m", "nbprof.cli", "run", "-o", str(tmp_path / "p.html"),
                           str(script)], env=ENV, capture_output=True, text=True, timeout=180)
    assert done.returncode == 1
    frames = [line for line in done.stderr.splitlines() if line.strip().startswith("File ")]
    assert [f.split(", line ")[0].strip() for f in frames] == [f'File "{script}"'] * 2, done.stderr
    assert "ValueError: bad batch" in done.stderr and "runpy" not in done.stderr


def test_ctrl_c_while_nbprof_imports_torch_is_one_line(tmp_path):
    script = tmp_path / "never.py"
    script.write_text("import pathlib\npathlib.Path(__file__).with_suffix('.ran').touch()\n")
    page = tmp_path / "page.html"
    process = start("run", "-o", page, script)
    deadline = time.monotonic() + 120
    # torch's shared library is mapped early in `import torch`, seconds before the import ends.
    while "libtorch" not in pathlib.Path(f"/proc/{process.pid}/maps").read_text():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.002)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130
    assert err == "nbprof: interrupted before the script started; nothing was written\n"
    assert not page.exists() and not script.with_suffix(".ran").exists()


def test_a_second_ctrl_c_while_writing_stops_with_one_line_and_no_half_file(tmp_path):
    # The script ends itself with a real SIGINT; the second comes as soon as nbprof says it is
    # writing: the trace is the first file it writes.
    script = tmp_path / "long.py"
    script.write_text("import os, signal, torch\nx = torch.ones(4)\nfor step in range(10**9):\n"
                      "    x = x + 1\n    if step == 5000:\n        os.kill(os.getpid(), signal.SIGINT)\n")
    page, trace = tmp_path / "page.html", tmp_path / "trace.json.gz"
    process = start("run", "-o", page, "--trace", trace, script)
    first = process.stderr.readline()
    assert first.startswith("nbprof: interrupted; writing what ran"), first
    process.send_signal(signal.SIGINT)
    out, rest = process.communicate(timeout=120)
    assert process.returncode == 130
    assert rest == f"nbprof: interrupted again: not written: {page}, {trace} (no half file left)\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["long.py"]  # no temporary file



def test_ctrl_c_during_convert_says_how_many_files_were_written(tmp_path, shared_traces):
    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    for rank in range(4):
        (inputs / f"r{rank}.json.gz").write_bytes((shared_traces / "gpu_training_step_68k.json.gz").read_bytes())
    # A terminal's Ctrl-C goes to the whole process group (workers too): as here.
    process = start("convert", inputs, "-o", out, "-j", "1", start_new_session=True)
    deadline = time.monotonic() + 120
    while not list(out.glob("*.parquet")):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=120)
    written = sorted(path.name for path in out.iterdir())
    assert process.returncode == 130 and "Traceback" not in err
    assert err == (f"nbprof: interrupted; {len(written)} of 4 Parquet files were written into {out} "
                   "(no half file)\n")
    assert 1 <= len(written) < 4 and all(name.endswith(".parquet") for name in written)


def test_torch_profiler_inside_the_script_is_said_once_as_a_note(tmp_path):
    script = tmp_path / "nested.py"
    script.write_text("import torch\ntorch.ones(2).add(1)\nwith torch.profiler.profile():\n"
                      "    torch.ones(2).mul(2)\n")
    done = subprocess.run([sys.executable, "-m", "nbprof.cli", "run", "-o", str(tmp_path / "p.html"),
                           "--trace", str(tmp_path / "t.json"), str(script)], env=ENV,
                          capture_output=True, text=True, timeout=180)
    said = [line for line in done.stderr.splitlines() if "torch.profiler was started" in line]
    assert len(said) == 1 and said[0].startswith("nbprof: note: "), done.stderr
    assert "RuntimeWarning" not in done.stderr


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "nbprof.cli", *map(str, args)], env=ENV,
                          cwd=cwd, capture_output=True, text=True, timeout=180)


# name -> the script's bytes: each stops `python SCRIPT` before its first line runs
NOT_COMPILING = {
    "syntax error": b"import torch\ntorch.ones(2).add(1)\ndef broken(:\n    pass\n",
    "return outside a function": b"import torch\nreturn torch.ones(2)\n",
    "bad indentation": b"import torch\n  x = 1\n",
    "undecodable bytes": b"import torch\nname = '\xff\xfe'\n",
    "null byte": b"import torch\nx = 1\x00\n",
    "folder's __main__": b"import torch\nfor\n",
}


@pytest.mark.parametrize("case", NOT_COMPILING)
def test_a_script_that_does_not_compile_writes_nothing_and_shows_pythons_error(case, tmp_path):
    script = tmp_path / ("app" if case == "folder's __main__" else "broken.py")
    source = script / "__main__.py" if case == "folder's __main__" else script
    source.parent.mkdir(exist_ok=True)
    source.write_bytes(NOT_COMPILING[case])
    page, trace = tmp_path / "page.html", tmp_path / "trace.json.gz"
    page.write_text("the last good page")
    trace.write_text("the last good trace")
    done = run_cli("run", "-o", page, "--trace", trace, script)
    assert done.returncode == 1, done.stderr
    assert page.read_text() == "the last good page" and trace.read_text() == "the last good trace"
    assert "Traceback" not in done.stderr and "nbprof" not in done.stderr, done.stderr
    python = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=60)
    assert python.returncode == 1
    # compile() words the first two a little otherwise; for a folder Python shows runpy's frames
    if case in ("null byte", "undecodable bytes", "folder's __main__"):
        assert f'File "{source}"' in done.stderr
        assert done.stderr.splitlines()[-1].startswith("SyntaxError: "), done.stderr
    else:  # what Python itself prints, word for word
        assert done.stderr == python.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([script.name, page.name,
                                                                 trace.name])


LOOP = ("import os, pathlib, signal, torch\nx = torch.ones(4)\nfor step in range(10**9):\n"
        "    x = x + 1\n    if step == 30:\n        {stop}\n")


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stopping_signal_writes_what_ran(number, tmp_path):
    # A real signal in the middle of a loop of torch ops, as Ctrl-C, a scheduler's time limit
    # (`timeout`, SLURM), or a closed terminal sends it.
    script = tmp_path / "long.py"
    script.write_text(LOOP.format(stop=f"os.kill(os.getpid(), {int(number)})"))
    page, trace = tmp_path / "page.html", tmp_path / "trace.json.gz"
    done = run_cli("run", "-o", page, "--trace", trace, script)
    assert done.returncode == 128 + number, done.stderr
    said = "interrupted" if number == signal.SIGINT else f"stopped by {number.name}"
    assert done.stderr.startswith(f"nbprof: {said}; writing what ran before it"), done.stderr
    assert "Traceback" not in done.stderr
    assert f"wrote {page}" in done.stdout and f"wrote {trace}" in done.stdout
    recorded = nbprof.load(trace)
    assert sum(recorded.names[i] == "aten::add" for i in recorded.name_id) >= 31


def test_sigterm_from_outside_and_again_while_writing(tmp_path):
    # As `timeout` or a scheduler sends it: from another process, while the script runs; the
    # second one (while the trace is written) stops that, leaving no half file.
    script = tmp_path / "long.py"
    script.write_text(LOOP.format(stop="pathlib.Path(__file__).with_suffix('.ran').touch()"))
    page, trace = tmp_path / "page.html", tmp_path / "trace.json.gz"
    process = start("run", "-o", page, "--trace", trace, script)
    deadline = time.monotonic() + 120
    while not script.with_suffix(".ran").exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    first = process.stderr.readline()
    assert first.startswith("nbprof: stopped by SIGTERM; writing what ran before it"), first
    process.send_signal(signal.SIGTERM)
    out, rest = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGTERM
    assert rest == (f"nbprof: stopped by SIGTERM again: not written: {page}, {trace} "
                    "(no half file left)\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["long.py", "long.ran"]


def test_a_script_that_changes_folder_writes_where_the_command_line_said(tmp_path):
    script = tmp_path / "moves.py"
    script.write_text("import os, torch\nos.makedirs('elsewhere', exist_ok=True)\n"
                      "os.chdir('elsewhere')\ntorch.ones(2).add(1)\n\ndef step():\n"
                      "    raise ValueError('after the move')\n\nstep()\n")
    done = run_cli("run", "-o", "out/page.html", "--trace", "trace.json", "moves.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    page, trace = tmp_path / "out" / "page.html", tmp_path / "trace.json"
    assert f"nbprof: wrote {page} (" in done.stdout and f"nbprof: wrote {trace}\n" in done.stdout
    assert page.is_file() and "aten::add" in nbprof.load(trace).names
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == []
    # the traceback is the script's own, its frames named by their full path, as Python does
    frames = [line.strip() for line in done.stderr.splitlines() if line.strip().startswith("File ")]
    assert frames == [f'File "{script}", line 9, in <module>',
                      f'File "{script}", line 7, in step'], done.stderr


def test_run_without_o_writes_the_page_beside_the_script_and_says_where(tmp_path):
    (tmp_path / "jobs").mkdir()
    script = tmp_path / "jobs" / "train.py"
    script.write_text("import torch\ntorch.ones(2).add(1)\n")
    (tmp_path / "cwd").mkdir()
    done = run_cli("run", "../jobs/train.py", cwd=tmp_path / "cwd")
    assert done.returncode == 0, done.stderr
    page = tmp_path / "cwd" / ".." / "jobs" / "train.py.nbprof.html"
    assert page.is_file() and f"nbprof: wrote {page} (" in done.stdout
    assert sorted(p.name for p in (tmp_path / "jobs").iterdir()) == ["train.py",
                                                                      "train.py.nbprof.html"]
    assert not list((tmp_path / "cwd").iterdir())
