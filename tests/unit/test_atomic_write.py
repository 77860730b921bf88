"""Writes never leave a half file where a good one was: a full disk (RLIMIT_FSIZE) during
export_chrome_trace, save_html, to_parquet or the diff page (the widget's Export button:
tests/integration/test_widget_export_full_disk.py) keeps the old file byte for byte, with no temporary
file left beside it, and the same call works once there is space; a path that can't be written
says which and why."""

import subprocess
import sys

import pytest

import nbprof
from nbprof.formats.atomic import check_writable, write_file

# The child writes a big trace under a 64 KiB file size limit: SIGXFSZ ignored, so write() fails
# with EFBIG as it does on a full disk.
FULL_DISK = """
import resource, signal, sys
import numpy as np
import nbprof
from nbprof.model import Trace
kind, path = sys.argv[1], sys.argv[2]
n = 2_000 if kind == "diff" else 200_000  # the diff's page is over the limit anyway (BokehJS inline)
trace = Trace.build(start_ns=np.arange(n) * 10, end_ns=np.arange(n) * 10 + 5,
                    thread=np.zeros(n, np.int32), name_id=np.arange(n) % 7,
                    names=[f"op{i}" for i in range(7)],
                    threads=[nbprof.Thread(1, 1, "main")])


def diff_page(path):
    from nbprof.timeline.compare import save_compare_html

    save_compare_html(trace, trace, path)


write = {"chrome": trace.export_chrome_trace, "html": lambda path: nbprof.save_html(trace, path),
         "parquet": trace.to_parquet, "diff": diff_page}[kind]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, hard))  # the soft limit, so it can be lifted
try:
    write(path)
except OSError as error:
    print("ERROR", error)
else:
    sys.exit(0)
with open(path + ".kept", "wb") as kept, open(path, "rb") as old:  # what the failure left
    kept.write(old.read())
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # space freed: the same call works
write(path)
sys.exit(3)
"""


@pytest.mark.parametrize("kind,name", [("chrome", "t.json"), ("html", "t.html"),
                                       ("parquet", "t.parquet"), ("diff", "t.html")])
def test_a_full_disk_keeps_the_old_file_and_a_write_after_it_works(tmp_path, kind, name):
    target = tmp_path / name
    old = b"the good file from before\n" * 10
    target.write_bytes(old)
    done = subprocess.run([sys.executable, "-c", FULL_DISK, kind, str(target)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, done.stderr
    assert str(target) in done.stdout  # the error names the path
    assert (tmp_path / f"{name}.kept").read_bytes() == old
    # No temporary file was left, and once the limit was lifted the same call wrote the file.
    assert sorted(p.name for p in tmp_path.iterdir()) == [name, f"{name}.kept"]
    if kind in ("html", "diff"):
        assert "op6" in target.read_text()
    else:
        assert len(nbprof.load(target)) == 200_000


def test_a_file_in_the_way_is_named(tmp_path):
    script = tmp_path / "file.py"
    script.write_text("print(1)\n")
    with pytest.raises(OSError, match="file.py is a file, not a folder"):
        write_file(script / "x.html", "page")
    with pytest.raises(OSError, match="file.py is a file, not a folder"):
        check_writable(script / "x.html")
    assert script.read_text() == "print(1)\n"


def test_a_device_is_refused_and_names_the_path():
    with pytest.raises(OSError) as caught:
        write_file("/dev/full", b"x" * 10)
    assert "/dev/full" in str(caught.value) and "a device, not a regular file" in str(caught.value)


def test_replacing_keeps_permissions_and_writes_through_a_symlink(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    real.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_file(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert real.stat().st_mode & 0o777 == 0o640


def test_profile_exit_without_enter_is_a_clear_error():
    import nbprof

    with pytest.raises(RuntimeError, match="without __enter__"):
        nbprof.profile().__exit__(None, None, None)
