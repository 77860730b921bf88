"""Writing files so that a failure never leaves a half file where a good one was.

Every file nbprof writes (Chrome traces, timeline pages, the widget's Export, the CLI's outputs) goes
through :func:`write_file`: the bytes go to a temporary file in the target's own folder (same file
system, so the rename is atomic), are flushed to disk, and only then replace the target. A full disk,
a file size limit or Ctrl-C mid-write removes the temporary file and leaves the old file as it was.
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
    if target.is_dir():
        raise _error(errno.EISDIR, f"cannot write {what}: it is a folder", target)
    ancestor = _blocking_file(target)
    if ancestor is not None:
        raise _error(errno.ENOTDIR, f"cannot write {what}: {ancestor} is a file, not a folder",
                     target)
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
    target = pathlib.Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    ancestor = _blocking_file(target)
    if ancestor is not None:
        raise _error(errno.ENOTDIR, f"cannot write {what}: {ancestor} is a file, not a folder",
                     target)
    real = pathlib.Path(os.path.realpath(target))  # through a symlink: keep the link, replace its file
    try:
        mode = real.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as error:
        raise _error(error.errno, f"cannot write {what}: {error.strerror}", target) from error
    if mode is not None and stat.S_ISDIR(mode):
        raise _error(errno.EISDIR, f"cannot write {what}: it is a folder", target)
    if mode is not None and not stat.S_ISREG(mode):
        # A device or a pipe (/dev/null, /dev/stdout): there is no old file to keep, and a rename
        # would replace the device itself.
        return _write_in_place(real, data, what, target)
    def write_to(temp):
        with open(temp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:  # the new file keeps the old one's permissions
            os.chmod(temp, stat.S_IMODE(mode))

    return _replace(target, real, write_to, what)


def write_with(path, write_to, what: str = "the file") -> pathlib.Path:
    """Atomically replace ``path`` with what ``write_to(temporary_path)`` writes (for writers that
    take a path, as pyarrow's do); on any failure the temporary file goes and the old file stays."""
    target = pathlib.Path(path)
    make_folders(target, what)
    return _replace(target, pathlib.Path(os.path.realpath(target)), write_to, what)


def _replace(target: pathlib.Path, real: pathlib.Path, write_to, what: str) -> pathlib.Path:
    """``write_to(temp)`` a temporary file beside ``real`` (the target through any symlink), then
    rename it over ``real``; on any failure, Ctrl-C too, remove it and keep the old file."""
    temp = None  # one try from the temp file's creation on: a Ctrl-C anywhere removes it
    try:
        descriptor, temp = _open_temp(real)
        os.close(descriptor)
        write_to(temp)
        os.replace(temp, real)
    except BaseException as error:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp)
        if isinstance(error, OSError):
            raise _error(error.errno, f"cannot write {what}: {error.strerror}", target) from error
        raise
    _sync_folder(real.parent)
    return target


def _open_temp(real: pathlib.Path) -> tuple[int, str]:
    # 0o666 as open() uses, so the umask decides the permissions of a new file as usual.
    for attempt in range(100):
        temp = real.parent / f".{real.name}.{os.getpid()}-{attempt}{_TEMP_SUFFIX}"
        try:
            return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), str(temp)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(real))


def _write_in_place(real: pathlib.Path, data: bytes, what: str, target: pathlib.Path):
    try:
        with open(real, "wb") as out:
            out.write(data)
    except OSError as error:
        raise _error(error.errno, f"cannot write {what}: {error.strerror}", target) from error
    return target


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
