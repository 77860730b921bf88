"""A trace file's bytes, read defensively: only regular files, gunzipped in a stream under a size
cap, refused early when they clearly are not JSON, and the repairs that let a damaged but
readable file load (each repair is said in a note).

Everything here runs once per file on the whole buffer, or only after the fast parse failed:
a good file costs one ``os.fstat`` and a look at its first bytes.
"""

from __future__ import annotations

import os
import pathlib
import re
import stat
import zlib

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"


class _DefaultLimit(int):
    """The default ``max_bytes``: an int that also says nobody chose it, so that a gzip file is
    held to :data:`GZIP_MAX_RATIO` as well (a limit the caller set is the only limit)."""


# Uncompressed bytes nbprof reads at most, unless told more: generous (the largest real traces
# are a few GiB), but a gzip bomb or a runaway file stops here rather than at MemoryError.
DEFAULT_MAX_BYTES = _DefaultLimit(8 << 30)
# Under the default limit a .gz may also expand at most this many times its size (past the
# floor below): real traces pack 7-14x (the shared Kineto traces), while a bomb of identical tiny
# events packs ~1000x, and memory grows with the events kept (~1.3x the text for 50-byte
# events), so without it a 10 MB .gz could hold 8 GiB of events and need ~10 GB.
GZIP_MAX_RATIO = 50
GZIP_RATIO_FLOOR = 256 << 20
# Leading whitespace tolerated before the first '{' or '[': past this the file is no trace
# (a gzip of gigabytes of spaces took 70 s and 8.5 GB before it was refused).
MAX_LEADING_WHITESPACE = 1 << 20
_READ_CHUNK = 1 << 21  # bytes read (and gunzipped) at a time


class TraceFormatError(ValueError):
    """A file :func:`nbprof.load` cannot read. The message names the file and, where one event
    is at fault, that event's index in ``traceEvents``, and says what to do."""


class TraceNotFoundError(TraceFormatError, FileNotFoundError):
    """No trace where :func:`nbprof.load` was pointed: a missing file, an empty folder, a glob
    that matches nothing (a TraceFormatError, and a FileNotFoundError too)."""


def size_text(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{count} bytes"


def read_file_bytes(path: pathlib.Path, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """A regular file's bytes, gunzipped when they start with gzip's magic bytes, with a UTF-8
    byte order mark dropped; TraceFormatError for anything else or anything too big."""
    return b"".join(file_pieces(path, max_bytes))


def file_pieces(path: pathlib.Path, max_bytes: int = DEFAULT_MAX_BYTES, progress=None):
    """:func:`read_file_bytes`' bytes, a few MiB at a time (the loader parses them as they
    come, so the whole text is never in memory). ``progress(done, total)`` hears the file's
    own (compressed) bytes read so far after each read."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise TraceNotFoundError(f"{path}: no such file; check the path (nbprof.load reads Chrome "
                               f"traces: .json or .json.gz)") from None
    except OSError as error:
        raise TraceFormatError(f"{path}: cannot read it ({error.strerror})") from error
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = ("a directory" if stat.S_ISDIR(info.st_mode) else
                "a pipe" if stat.S_ISFIFO(info.st_mode) else
                "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else
                "a socket" if stat.S_ISSOCK(info.st_mode) else "not a regular file")
        raise TraceFormatError(f"{path}: is {kind}, not a trace file; nbprof reads regular "
                               f".json or .json.gz files (save the stream to a file first)")
    with os.fdopen(fd, "rb") as stream:
        def read(size):
            piece = stream.read(size)
            if progress is not None:
                progress(stream.tell(), info.st_size)
            return piece

        try:
            head = read(2)
            if head == GZIP_MAGIC:
                pieces = _gunzip(read, head, path, _gzip_limit(max_bytes, info.st_size))
            else:
                if info.st_size > max_bytes:
                    raise TraceFormatError(_too_big(path, info.st_size, max_bytes))
                pieces = _plain(read, head, path, max_bytes)
            yield from _checked(pieces, path)
        except OSError as error:
            raise TraceFormatError(f"{path}: cannot read it ({error.strerror})") from error


def _plain(read, head: bytes, path, max_bytes: int):
    total, piece = 0, head + read(_READ_CHUNK)
    while piece:
        total += len(piece)
        if total > max_bytes:  # it may be growing
            raise TraceFormatError(_too_big(path, total, max_bytes))
        yield piece
        piece = read(_READ_CHUNK)


def _checked(pieces, path):
    """The pieces with a leading byte order mark dropped, after the first bytes showed the
    text starts like JSON (refused at once otherwise)."""
    pending = b""
    for piece in pieces:
        pending += piece
        start = pending[3:] if pending[:3] == UTF8_BOM else pending
        if start.lstrip() or len(pending) > MAX_LEADING_WHITESPACE + len(UTF8_BOM):
            break
    else:
        _check_start(pending, path)  # empty or whitespace only: raises
    _check_start(pending, path)
    if pending[:3] == UTF8_BOM:  # Windows tools write one; JSON forbids it, readers skip it
        pending = pending[3:]
    yield pending
    yield from pieces


def _gzip_limit(max_bytes: int, packed_size: int) -> int:
    """How far a .gz of ``packed_size`` bytes may expand: ``max_bytes`` if the caller chose it,
    else also at most GZIP_MAX_RATIO times its size (at least GZIP_RATIO_FLOOR)."""
    if not isinstance(max_bytes, _DefaultLimit):
        return max_bytes
    ratio_limit = max(GZIP_RATIO_FLOOR, GZIP_MAX_RATIO * packed_size)
    return _DefaultLimit(min(max_bytes, ratio_limit)) if ratio_limit < max_bytes else max_bytes


def _too_big(path, size, max_bytes) -> str:
    if isinstance(max_bytes, _DefaultLimit) and max_bytes < DEFAULT_MAX_BYTES:
        return (f"{path}: its gzip data expands more than {GZIP_MAX_RATIO}x ({size_text(size)} "
                f"or more; real traces pack 7-14x): a decompression bomb, or events far more "
                f"alike than a trace's; to read it anyway, set the limit yourself: "
                f"nbprof.load(path, max_bytes=...) or `nbprof view --max-size`")
    return (f"{path}: holds more than {size_text(max_bytes)} of trace data (the limit; "
            f"{size_text(size)} or more here): raise it with nbprof.load(path, max_bytes=...) "
            f"or `nbprof view --max-size`")


def _gunzip(read, head: bytes, path, max_bytes: int):
    """The gzip stream (all its members) decompressed a piece at a time, stopping as soon as
    it passes ``max_bytes``."""
    total = 0
    decompressor = zlib.decompressobj(31)
    pending = head + read(_READ_CHUNK)
    try:
        while pending:
            piece = decompressor.decompress(pending, _READ_CHUNK)
            total += len(piece)
            if total > max_bytes:
                raise TraceFormatError(_too_big(path, total, max_bytes))
            if piece:
                yield piece
            if decompressor.unconsumed_tail:
                pending = decompressor.unconsumed_tail
            elif decompressor.eof and decompressor.unused_data.strip(b"\0"):
                # a second gzip member (concatenated files, as gzip.decompress reads them)
                pending = decompressor.unused_data
                decompressor = zlib.decompressobj(31)
            elif decompressor.eof:
                break
            else:
                pending = read(_READ_CHUNK)
        if not decompressor.eof:
            raise zlib.error("the gzip stream ends early")
    except zlib.error as error:
        raise TraceFormatError(f"{path}: the gzip data is truncated or corrupt ({error}); "
                               f"copy or download the file again") from None


def _check_start(raw: bytes, path) -> None:
    """Refuse at once what cannot be a trace: empty, whitespace only, or not starting like
    a JSON object or list."""
    skip = len(UTF8_BOM) if raw[:3] == UTF8_BOM else 0
    head = raw[skip:MAX_LEADING_WHITESPACE + 1].lstrip()
    if head[:1] in (b"{", b"["):
        return
    if not head:
        what = ("is empty" if not raw.strip() and len(raw) <= MAX_LEADING_WHITESPACE else
                f"starts with more than {size_text(MAX_LEADING_WHITESPACE)} of whitespace")
        raise TraceFormatError(f"{path}: {what}; it is not a Chrome trace (a JSON object with a "
                               f"'traceEvents' list, or a JSON list of events)")
    raise TraceFormatError(f"{path}: starts with {head[:16]!r}, not '{{' or '[': it is not a "
                           f"Chrome trace (a JSON object with a 'traceEvents' list, or a JSON "
                           f"list of events)")


# -- repairs, tried only after the fast parse failed ------------------------------------------

def without_bad_utf8(raw: bytes) -> tuple[bytes, int]:
    """The bytes with each invalid UTF-8 sequence replaced by U+FFFD, and how many there were
    (torch's with_stack tracer writes names cut mid-character)."""
    text = raw.decode("utf-8", "replace")
    fixed = text.encode("utf-8")
    return fixed, text.count("\ufffd") - raw.count("\ufffd".encode())


# A \\uXXXX escape of a UTF-16 surrogate that is not half of a pair (valid JSON, yet no
# character: msgspec and orjson refuse it). The leading group keeps an even run of backslashes,
# so an escaped backslash followed by "ud800" text is left alone.
_LONE_SURROGATE = re.compile(
    rb"(?<!\\)((?:\\\\)*)(\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<![dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2})")


def without_lone_surrogates(raw: bytes) -> tuple[bytes, int]:
    """The JSON text with each escaped lone surrogate made U+FFFD, and how many there were."""
    fixed, count = _LONE_SURROGATE.subn(rb"\1\\ufffd", raw)
    return fixed, count


# A string (kept as it is) or a comma with only whitespace before the '}' or ']' that follows
_STRING_OR_TRAILING_COMMA = re.compile(rb'("[^"\\]*(?:\\.[^"\\]*)*")|,(?=[ \t\r\n]*[}\]])',
                                       re.DOTALL)


def without_trailing_commas(raw: bytes) -> tuple[bytes, int]:
    """The JSON text without its trailing commas (``[1,]``, ``{"a": 1,}``: writers that stream
    events append one after each; Perfetto and Chrome read them), and how many there were.
    Commas inside strings are left alone."""
    count = 0

    def replaced(match):
        nonlocal count
        if match.group(1) is not None:
            return match.group(1)
        count += 1
        return b""

    fixed = _STRING_OR_TRAILING_COMMA.sub(replaced, raw)
    return fixed, count


MAX_CLOSING_TRIES = 16  # each try parses the file again: bounded, and only on this error path


def closed_arrays(raw: bytes):
    """For a trace cut off while it was written (a bare event list without its ``]``, with a
    trailing comma, or with its last event cut mid-way; or an object cut inside its
    ``traceEvents``), candidate texts closed after an event, last first, each with what was
    wrong. Nothing for text that was not cut off."""
    body = raw.rstrip()
    first = body.lstrip()[:1]
    if first == b"[":
        closer = b"]"
    elif first == b"{" and b'"traceEvents"' in body[:MAX_LEADING_WHITESPACE]:
        closer = b"]}"
    else:
        return
    if body.endswith(closer):
        return  # closed: its fault is elsewhere
    cut = len(body)
    if body.endswith(b","):
        yield body[:-1] + closer, "ended in a comma, without its closing " + repr(closer.decode())
        cut -= 1
    elif body.endswith(b"}"):
        yield body + closer, "had no closing " + repr(closer.decode())
        cut -= 1
    # Cut inside an event: keep the events before it. The '}' closing the last whole event is
    # not always the last '}' (the cut event's args may hold some): a few are tried from the end.
    for _ in range(MAX_CLOSING_TRIES):
        cut = body.rfind(b"}", 0, cut)
        if cut < 0:
            return
        yield (body[:cut + 1] + closer,
               "was cut off inside an event (as by a crash while it was written)")
