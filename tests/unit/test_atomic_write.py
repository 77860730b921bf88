"""Writes go through nbprof.atomic: a failure keeps the old file byte for byte and leaves no temp."""

import subprocess
import sys

import pytest

import nbprof
from nbprof.events import Trace
from nbprof.html_text import html_text
from nbprof.timeline import Timeline

HOSTILE = "<img src=x onerror=window.__pwned=1>"

FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
from nbprof.atomic import write_file
try:
    write_file(sys.argv[1], b"x" * 100_000, what="the page")
except OSError as error:
    print("error:", error)
    sys.exit(1)
"""


def test_a_full_disk_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "page.html"
    target.write_bytes(b"the good old page")
    done = subprocess.run([sys.executable, "-c", FULL_DISK, str(target)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert str(target) in done.stdout and "cannot write the page" in done.stdout
    assert target.read_bytes() == b"the good old page"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_a_file_where_a_folder_should_be_is_named(tmp_path):
    (tmp_path / "file.py").write_text("")
    with pytest.raises(NotADirectoryError, match="file.py is a file, not a folder"):
        nbprof.save_html(Trace.empty(), tmp_path / "file.py" / "x.html")


def test_profile_exit_without_enter_is_a_clear_error():
    with pytest.raises(RuntimeError, match="without __enter__"):
        nbprof.profile().__exit__(None, None, None)


def test_the_page_header_shows_file_text_as_text(tmp_path):
    # the file: distributedInfo.rank went into the Bokeh Div as markup
    path = tmp_path / "hostile.json"
    path.write_text('{"traceEvents":[{"ph":"X","name":"a","pid":1,"tid":1,"ts":0,"dur":1}],'
                    '"distributedInfo":{"rank":"%s","world_size":"%s"}}' % (HOSTILE, HOSTILE))
    note = Timeline(nbprof.load(path)).note.text
    assert "<img" not in note and html_text(HOSTILE) in note
