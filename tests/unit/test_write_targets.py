"""Every writer writes only a regular file of ours: a device, a pipe, a socket or a folder where the
file should go (or a symlink to a device) is refused with an error that names the path and says
what is there, and the node is left as it was; a symlink to a regular file is written through (the
link stays, its file gets the new bytes and keeps its permissions). The writers: the Chrome trace,
the timeline page, the Parquet file, the diff page and the widget's Export button.

The devices are made here with mknod (as root), never the system's own: before this was fixed, a
write replaced the node it was given."""

import os
import socket
import stat
import threading

import numpy as np
import pytest

import nbprof
from nbprof.model import Trace


def small_trace() -> Trace:
    n = 50
    return Trace.build(start_ns=np.arange(n) * 10, end_ns=np.arange(n) * 10 + 5,
                       thread=np.zeros(n, np.int32), name_id=np.arange(n) % 3,
                       names=["alpha", "beta", "gamma"], threads=[nbprof.Thread(1, 1, "main")])


def export_button(trace, path):
    """The widget's Export button, clicked: it writes NAME.json.gz into its folder and shows any
    failure in the panel (it never raises), so a failure is raised here from what it shows."""
    from nbprof.notebook.export_panel import ExportPanel

    panel = ExportPanel(trace, path.name.removesuffix(".json.gz"), path.parent)
    if panel.export() is None:
        raise OSError(panel.status.value)


def diff_page(trace, path):
    from nbprof.timeline.compare import save_compare_html

    save_compare_html(trace, trace, path)


WRITERS = {
    "chrome json": ("t.json", lambda trace, path: trace.export_chrome_trace(path)),
    "chrome json.gz": ("t.json.gz", lambda trace, path: trace.export_chrome_trace(path)),
    "timeline page": ("t.html", lambda trace, path: nbprof.save_html(trace, path)),
    "parquet": ("t.parquet", lambda trace, path: trace.to_parquet(path)),
    "diff page": ("t.html", diff_page),
    "export button": ("cell.json.gz", export_button),
}


def make_device(path):
    """A character device like /dev/null (1, 3), made here; skipped where mknod is not allowed."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")


def make_socket(path):
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    return listener


class DrainedFifo:
    """A FIFO with a reader that keeps it drained, so a writer that (wrongly) opens it cannot
    hang the test; ``received`` is what got through."""

    def __init__(self, path):
        os.mkfifo(path)
        self.received, self._stop = bytearray(), threading.Event()
        self._descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self):
        while not self._stop.is_set():
            try:
                self.received += os.read(self._descriptor, 1 << 16)
            except BlockingIOError:
                self._stop.wait(0.005)

    def close(self):
        self._stop.set()
        self._thread.join()
        os.close(self._descriptor)


# what is put where the file should go -> (the kind it must stay, the words of the error)
TARGETS = {
    "device": (stat.S_ISCHR, "is a device, not a regular file"),
    "fifo": (stat.S_ISFIFO, "is a pipe (FIFO), not a regular file"),
    "socket": (stat.S_ISSOCK, "is a socket, not a regular file"),
    "folder": (stat.S_ISDIR, "is a folder"),
    "symlink to a device": (stat.S_ISCHR, "is a device, not a regular file"),
}


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize("kind", TARGETS)
def test_a_writer_refuses_what_is_not_a_regular_file(tmp_path, writer, kind):
    name, write = WRITERS[writer]
    target = tmp_path / name
    keep = []
    if kind == "device":
        make_device(target)
    elif kind == "fifo":
        keep.append(DrainedFifo(target))
    elif kind == "socket":
        keep.append(make_socket(target))
    elif kind == "folder":
        target.mkdir()
        (target / "inside").write_text("kept")
    else:
        make_device(tmp_path / "device")
        target.symlink_to(tmp_path / "device")
    is_kind, words = TARGETS[kind]
    try:
        with pytest.raises(OSError) as refused:
            write(small_trace(), target)
    finally:
        for thing in keep:
            thing.close()
    message = str(refused.value)
    assert words in message and name in message
    if kind == "symlink to a device":
        assert f"links to {tmp_path / 'device'}" in message
        assert target.is_symlink()
    assert is_kind(os.stat(target).st_mode)  # the node itself is untouched
    if kind == "fifo":
        assert not keep[0].received  # nothing was written into the pipe
    if kind == "folder":
        assert [p.name for p in target.iterdir()] == ["inside"]
    left = {p.name for p in tmp_path.iterdir()} - {name, "device"}
    assert not left  # no temporary file left beside it


@pytest.mark.parametrize("writer", WRITERS)
def test_a_symlink_to_a_regular_file_is_written_through(tmp_path, writer):
    name, write = WRITERS[writer]
    real = tmp_path / "real" / name
    real.parent.mkdir()
    real.write_bytes(b"the old file")
    real.chmod(0o640)
    link = tmp_path / name
    link.symlink_to(real)
    write(small_trace(), link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_bytes() != b"the old file" and real.stat().st_mode & 0o777 == 0o640
    if name.endswith((".json", ".json.gz", ".parquet")):
        assert nbprof.load(link).names == small_trace().names
    else:
        assert "gamma" in real.read_text()
    assert sorted(p.name for p in real.parent.iterdir()) == [name]  # no temporary file left
