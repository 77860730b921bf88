"""Writing files so that a failure never leaves a half file where a good one was.

Every file nbprof writes (Chrome traces, timeline pages, Parquet files, the widget's Export, the
CLI's outputs) goes through :func:`write_file` or :func:`write_with`: the bytes go to a temporary
file in the target's own folder (same file system, so the rename is atomic), are flushed to disk,
and only then replace the target. A full disk, a file size limit or Ctrl-C mid-write removes the
temporary file and leaves the old file as it was.

Only a regular file (or a new name) is ever written: a device, a pipe, a socket or a folder is
refused, /dev/null too (the rename would replace the node itself, as root), and a symlink is
written through only when it leads to a regular file or to nothing yet. :func:`check_writable`
applies the same rules before long work, so a command refuses such a path before it starts.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pathlib
import stat
import tempfile

_TEMP_SUFFIX = ".nbprof-tmp"


def check_writable(path, what: str = "the file") -> pathlib.Path:
    """Raise a clear OSError naming ``path`` unless a file could be written there (its folder
    exists, or can be made, and takes files). Used before long work whose result would go there."""
    target = pathlib.Path(path)
    _existing_mode(target, what)
    folder = _nearest_existing_folder(target.parent)
    if folder == target.parent:  # try for real: os.access says yes to root on a read-only disk
        try:
            with tempfile.TemporaryFile(dir=folder, prefix=".nbprof-check-"):
                pass
        except OSError as error:
            raise _error(error.errno, f"cannot write {what}: {error.strerror} "
                                      f"(in the folder {folder})", target) from None
    elif not os.access(folder, os.W_OK | os.X_OK):
        raise _error(errno.EACCES, f"cannot write {what}: cannot make folders in {folder}", target)
    return target


def check_regular(path, what: str = "the file") -> pathlib.Path:
    """Raise a clear OSError naming ``path`` if something other than a regular file is there (a
    folder, a device, a pipe, a socket, a symlink to one of them): what every write refuses."""
    target = pathlib.Path(path)
    _existing_mode(target, what)
    return target


def make_folders(path, what: str = "the file") -> None:
    """Make the folders above ``path``; a file in the way is named as such (mkdir would say only
    "File exists")."""
    target = pathlib.Path(path)
    ancestor = _blocking_file(target)
    if ancestor is not None:
        raise _error(errno.ENOTDIR, f"cannot write {what}: {ancestor} is a file, not a folder",
                     target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise _error(error.errno, f"cannot write {what}: {error.strerror}", target) from error


def write_file(path, data: bytes | str, what: str = "the file") -> pathlib.Path:
    """Write ``data`` (str: as UTF-8) to ``path`` atomically; returns the path. On failure the
    OSError (same type) says what was written and where, and the old file is untouched."""
    if isinstance(data, str):
        data = data.encode("utf-8")

    def write_to(temp):
        with open(temp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())

    return _replace(pathlib.Path(path), write_to, what)


def write_with(path, write_to, what: str = "the file") -> pathlib.Path:
    """Atomically replace ``path`` with what ``write_to(temporary_path)`` writes (for writers that
    take a path, as pyarrow's do); on any failure the temporary file goes and the old file stays."""
    target = pathlib.Path(path)
    make_folders(target, what)
    return _replace(target, write_to, what)


def _replace(target: pathlib.Path, write_to, what: str) -> pathlib.Path:
    """``write_to(temp)`` a temporary file beside the target's real file (through any symlink:
    the link stays, its file is replaced), then rename it over that file; on any failure, Ctrl-C
    too, remove it and keep the old file."""
    mode = _existing_mode(target, what)
    real = pathlib.Path(os.path.realpath(target))
    temp = None  # one try from the temp file's creation on: a Ctrl-C anywhere removes it
    try:
        descriptor, temp = _open_temp(real)
        os.close(descriptor)
        write_to(temp)
        if mode is not None:  # the new file keeps the old one's permissions
            os.chmod(temp, stat.S_IMODE(mode))
        # Checked again just before the rename: what the write took long enough for (a device
        # or a folder put where the file was) is still refused, and the temporary file goes.
        refused = _refusal(real, what, target)
        if refused is None:
            os.replace(temp, real)
    except BaseException as error:
        _remove(temp)
        if isinstance(error, OSError):
            raise _error(error.errno, f"cannot write {what}: {error.strerror}", target) from error
        raise
    if refused is not None:
        _remove(temp)
        raise refused
    _sync_folder(real.parent)
    return target


def _remove(temp: str | None) -> None:
    if temp is not None:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def _open_temp(real: pathlib.Path) -> tuple[int, str]:
    # 0o666 as open() uses, so the umask decides the permissions of a new file as usual.
    for attempt in range(100):
        temp = real.parent / f".{real.name}.{os.getpid()}-{attempt}{_TEMP_SUFFIX}"
        try:
            return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), str(temp)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(real))


def _existing_mode(target: pathlib.Path, what: str) -> int | None:
    """The mode of the regular file ``target`` leads to (through any symlinks), None if there is
    none yet; an OSError naming ``target`` if anything but a regular file is there (a folder, a
    device, a pipe, a socket, a symlink to one of them) or a file stands where a folder should."""
    ancestor = _blocking_file(target)
    if ancestor is not None:
        raise _error(errno.ENOTDIR, f"cannot write {what}: {ancestor} is a file, not a folder",
                     target)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:  # a new name, or a symlink to a name not there yet
        return None
    except OSError as error:  # a symlink loop, a folder that can't be entered
        raise _error(error.errno, f"cannot write {what}: {error.strerror}", target) from error
    refused = _refusal(target, what, target, mode)
    if refused is not None:
        raise refused
    return mode


def _refusal(path, what: str, target: pathlib.Path, mode: int | None = None) -> OSError | None:
    """The error for writing ``target`` when ``path`` (it, or its real file) is there as anything
    but a regular file; None if it is a regular file or not there."""
    if mode is None:
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return None
    if stat.S_ISREG(mode):
        return None
    real = os.path.realpath(target)
    through = f" ({target} links to {real})" if real != os.path.abspath(target) else ""
    if stat.S_ISDIR(mode):
        return _error(errno.EISDIR, f"cannot write {what}: it is a folder{through}", target)
    kind = _KINDS.get(stat.S_IFMT(mode), "something other than a file")
    return _error(errno.EINVAL, f"cannot write {what}: it is {kind}, not a regular "
                                f"file{through}; give the name of a file", target)


_KINDS = {stat.S_IFCHR: "a device", stat.S_IFBLK: "a device", stat.S_IFIFO: "a pipe (FIFO)",
          stat.S_IFSOCK: "a socket"}


def _sync_folder(folder: pathlib.Path) -> None:
    """Make the rename itself durable; best effort (not every file system lets a folder be
    opened)."""
    with contextlib.suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def _blocking_file(target: pathlib.Path) -> pathlib.Path | None:
    """The first folder above ``target`` that exists as something other than a folder."""
    for ancestor in reversed(target.parents):
        if ancestor.exists() and not ancestor.is_dir():
            return ancestor
    return None


def _nearest_existing_folder(folder: pathlib.Path) -> pathlib.Path:
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def _error(number: int | None, message: str, target: pathlib.Path) -> OSError:
    """The OSError subclass for ``number`` (FileNotFoundError, PermissionError...), its message
    saying what failed and its filename the path the user gave."""
    return OSError(number, message, str(target)) if number else OSError(f"{message}: {target}")
