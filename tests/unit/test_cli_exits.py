"""How `nbprof run` ends: the script's own exit status and message, Ctrl-C while nbprof imports
torch, and a second Ctrl-C while it writes what ran. Real signals to a real CLI subprocess."""

import os
import pathlib
import signal
import subprocess
import sys
import time

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
