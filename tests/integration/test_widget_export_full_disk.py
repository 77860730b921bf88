"""The widget's "Export to Chrome trace" button on a full disk, as a user meets it: a real profile, a
good export, then a click under a file size limit (write() fails with EFBIG as it fails with ENOSPC
on a full disk). The limit is set in a child process, so it cannot hit pytest's own files."""

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The child reports what it saw as one JSON line; the test judges it.
CLICKS = """
import json, pathlib, resource, signal, sys
import torch
import nbprof

folder = pathlib.Path(sys.argv[1])
with nbprof.profile() as prof:
    x = torch.ones(8, 8)
    for _ in range(100):
        x = torch.relu(x @ x / 8 + 1)
widget = nbprof.widget(prof.trace, name="cell", export_dir=folder)
target = folder / "cell.json.gz"
seen = {"events": len(prof.trace)}
widget.export.button.click()  # as ipywidgets does for a click in the browser
seen["first"] = widget.export.status.value
good = target.read_bytes()
seen["good_events"] = len(nbprof.load(target))

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (len(good) // 2, hard))  # the soft limit: liftable
widget.export.button.click()
seen["full"] = widget.export.status.value
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # space freed

seen["files_after_full"] = sorted(p.name for p in folder.iterdir())
seen["kept_bytes"] = target.read_bytes() == good
seen["kept_events"] = len(nbprof.load(target))
widget.export.button.click()
seen["after"] = widget.export.status.value
seen["after_events"] = len(nbprof.load(target))
seen["files_after"] = sorted(p.name for p in folder.iterdir())
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def clicks(tmp_path_factory):
    folder = tmp_path_factory.mktemp("exports")
    done = subprocess.run([sys.executable, "-c", CLICKS, str(folder)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_first_export_writes_the_whole_trace(clicks):
    assert clicks["first"].startswith("Wrote")
    assert clicks["good_events"] == clicks["events"] > 100


def test_a_full_disk_says_the_write_failed_and_what_to_do(clicks):
    status = clicks["full"]
    assert "Could not write" in status and "cell.json.gz" in status
    assert "File too large" in status  # the reason as the system gave it
    assert "free some space" in status and "another folder" in status  # what to do about it
    assert "export_dir=" in status  # and how to choose another folder
    assert "cannot write" not in status  # said once, not "Could not write ...: cannot write ..."
    assert "as a download instead" in status  # the browser still got the file


def test_a_full_disk_keeps_the_earlier_export_and_leaves_no_temporary_file(clicks):
    assert clicks["kept_bytes"] and clicks["kept_events"] == clicks["good_events"]
    assert clicks["files_after_full"] == ["cell.json.gz"]


def test_once_there_is_space_the_next_click_exports_again(clicks):
    assert clicks["after"].startswith("Replaced")
    assert clicks["after_events"] == clicks["events"]
    assert clicks["files_after"] == ["cell.json.gz"]
