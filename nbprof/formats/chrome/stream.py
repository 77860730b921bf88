"""A trace file's events a chunk at a time, so that loading never holds the whole text.

The file's bytes come a few MiB at a time (rawfile.file_pieces: size cap, gunzip, early
refusal). The ``traceEvents`` list is found at the top level (the keys before it are decoded
on their own), then cut into chunks of about CHUNK_BYTES at event boundaries: a '}' followed
by ',' and the next event's '{'. A cut is proven by msgspec itself: ``[`` + the text before
it + ``]`` parses only when the cut lies between two top-level events (inside a string or a
nested value the brackets cannot balance), so the scanner needs no string or depth state of
its own, and the bytes are scanned once, in C. A cut that does not parse is moved back to the
previous candidate (rare: a '},{' inside an event's args).

The last chunk (after the last cut), with whatever follows the list (the other top-level
keys, junk, a missing ']'), is read by read.py's whole-text path, which makes the repairs a
damaged file allows, so a file cut off while it was written still loads its whole events. A
file whose ``traceEvents`` does not start within its first MAX_HEAD bytes, or whose keys
before it do not parse, is read whole by that same path: its size is capped, and its faults
are said the same way.

A chunk in the middle that is not valid JSON raises TraceFormatError naming the event's index
(counted over the whole file) and its byte offset in the text.
"""

from __future__ import annotations

import re

import msgspec

from .rawfile import (MAX_LEADING_WHITESPACE, TraceFormatError, file_pieces, size_text,
                      without_bad_utf8, without_lone_surrogates)
from .read import SURROGATE_NOTE, UTF8_NOTE, decode_events, decode_text

# Text per chunk: per-chunk costs vanish, and its structs stay small. Python keeps the memory
# of a chunk's structs (its allocator's arenas) for the rest of a load: at a 1.1 GB file 4 MiB
# chunks peaked 10 MB higher than 2 MiB ones (1 MiB: 20 MB lower, but ~10% more CPU time).
CHUNK_BYTES = 1 << 21
MAX_HEAD = 64 << 20  # traceEvents must open within this many bytes to stream
MAX_CUT_TRIES = 16
_EVENTS_OPEN = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY = re.compile(rb"\s*,\s*\{")
_AT_BYTE = re.compile(r"\(byte (\d+)\)")
_TOP_LEVEL = msgspec.json.Decoder(dict[str, msgspec.Raw])
_RAW_LIST = msgspec.json.Decoder(list[msgspec.Raw])
_OBJECT_HEADER = b'{"traceEvents":['


class EventChunks:
    """Iterating gives ``(index of the chunk's first event, its events)``; afterwards ``data``
    holds the top-level keys other than traceEvents and ``notes`` what was repaired."""

    def __init__(self, path, max_bytes: int, progress=None, chunk_bytes: int | None = None):
        self.path, self.max_bytes, self.progress = path, max_bytes, progress
        self.chunk_bytes = chunk_bytes or CHUNK_BYTES
        self.data: dict = {}
        self.notes: list = []
        self.repaired = {"utf8": 0, "surrogates": 0}  # counts from the middle chunks
        self.header = b"["

    def __iter__(self):
        pieces = file_pieces(self.path, self.max_bytes, self.progress)
        buffer = b""
        start = None
        for piece in pieces:
            buffer += piece
            start = self._events_start(buffer)
            if start is not None or len(buffer) > MAX_HEAD:
                break
        if start is None or start < 0:  # read whole, as any file that does not stream
            yield from self._last(buffer + b"".join(pieces), 0, 0, whole=True)
            return
        consumed, base = start, 0  # text bytes before `buffer`; events before it
        buffer = buffer[start:]
        # Pieces wait in a list and join the buffer once it holds `need` bytes: a chunk, and
        # after a failed cut (an event longer than the window searched) twice the window, so
        # the bytes are copied a bounded number of times however long that event is.
        waiting, waiting_bytes, need = [], 0, self.chunk_bytes
        more = True
        while more:
            while len(buffer) >= need:
                cut = self._cut(buffer, consumed, base, need)
                if cut is None:  # one event longer than a chunk: read on
                    blank = buffer[:MAX_LEADING_WHITESPACE + 1]  # a gzip of spaces: no trace
                    if len(blank) > MAX_LEADING_WHITESPACE and not blank.strip():
                        raise self._damaged(buffer[:1], "a run of over "
                                            f"{size_text(MAX_LEADING_WHITESPACE)} of whitespace "
                                            "where an event should be: no trace", consumed, base)
                    need *= 2
                    continue
                events, rest_at = cut
                count = len(events)
                del cut
                yield base, events
                del events  # its structs hold the chunk's text (msgspec.Raw args): let both go
                base += count
                consumed += rest_at
                buffer, need = buffer[rest_at:], self.chunk_bytes
            piece = next(pieces, None)
            more = piece is not None
            if more:
                waiting.append(piece)
                waiting_bytes += len(piece)
                if len(buffer) + waiting_bytes >= need:
                    buffer, waiting, waiting_bytes = b"".join([buffer, *waiting]), [], 0
        yield from self._last(b"".join([buffer, *waiting]), base, consumed)

    def _events_start(self, buffer: bytes):
        """Where the first event's text begins in ``buffer``; None while more is needed; -1
        when the file must be read whole."""
        first = buffer.lstrip()[:1]
        if first == b"[":
            return buffer.index(b"[") + 1
        found = _EVENTS_OPEN.search(buffer)
        if found is None:
            return None
        prefix = buffer[:found.start()].rstrip()
        try:
            if prefix.endswith(b","):
                top = _TOP_LEVEL.decode(prefix[:-1] + b"}")
            elif prefix.strip() == b"{":
                top = {}
            else:
                return -1
            self.data = {key: msgspec.json.decode(value) for key, value in top.items()}
        except (msgspec.DecodeError, RecursionError):
            return -1  # "traceEvents" inside a string, or keys that do not parse
        self.header = _OBJECT_HEADER
        return found.end()

    def _cut(self, buffer: bytes, consumed: int, base: int, limit: int):
        """The whole events in about the first ``limit`` bytes of ``buffer``, and where the text
        after them (past the comma) begins; None if no boundary is found there (an event longer
        than that, or '},{' inside strings at every candidate tried: read on and try further)."""
        end, tries = limit, 0
        while tries < MAX_CUT_TRIES:
            at = buffer.rfind(b"}", 0, end)
            if at < 0:
                return None
            end = at
            boundary = _BOUNDARY.match(buffer, at + 1)
            if boundary is None:
                continue
            tries += 1
            events = self._decoded(buffer, at + 1, consumed, base)
            if events is not None:
                return events, boundary.end() - 1  # the next event's '{'
        return None

    def _decoded(self, buffer: bytes, end: int, consumed: int, base: int):
        """The events of ``buffer[:end]`` (whole events joined by commas), repaired as read.py
        repairs a whole file; None when the cut was not between events (the error is at its
        end)."""
        text = b"".join((b"[", memoryview(buffer)[:end], b"]"))  # one copy of the chunk
        for _ in range(3):
            try:
                return decode_events(text, self.path, base)
            except RecursionError:
                raise TraceFormatError(f"{self.path}: its JSON nests too deep for a trace (lists "
                                       f"or objects inside each other thousands of levels down) "
                                       f"near event {base:,}; it is damaged or not a trace"
                                       ) from None
            except msgspec.DecodeError as error:
                message = str(error)
                if "UTF-8" in message:
                    text, count = without_bad_utf8(text)
                    self.repaired["utf8"] += count
                elif ("escape" in message or "surrogate" in message):
                    text, count = without_lone_surrogates(text)
                    if not count:
                        raise self._damaged(text, error, consumed, base) from None
                    self.repaired["surrogates"] += count
                else:
                    at = _AT_BYTE.search(message)
                    if at is None or int(at.group(1)) >= len(text) - 1:
                        return None  # the cut, not the text: try an earlier one
                    raise self._damaged(text, error, consumed, base) from None
        return None

    def _damaged(self, text: bytes, error, consumed: int, base: int) -> TraceFormatError:
        """The error for a chunk that is not valid JSON: which event (counted over the file)
        and which byte of the text. ``error``: msgspec's error, or what is wrong, in words."""
        message = str(error) if error is not None else "it does not parse"
        at = _AT_BYTE.search(message)
        byte = int(at.group(1)) if at else len(text)
        whole, closed_at = 0, -1  # whole events before the fault: the longest prefix that parses
        end = byte
        for _ in range(64):
            end = text.rfind(b"}", 0, end)
            if end <= 0:
                break
            try:
                whole = len(_RAW_LIST.decode(text[:end + 1] + b"]"))
                closed_at = end
                break
            except (msgspec.DecodeError, RecursionError):
                continue
        # Junk right after an event's closing brace is "just after" it; else the fault is
        # inside the next event.
        where = (f"just after event {base + whole - 1:,}"
                 if whole and not text[closed_at + 1:byte].strip(b" \t\r\n,")
                 else f"event {base + whole:,}")
        return TraceFormatError(
            f"{self.path}: {where} (near byte {consumed + byte - 1:,} of the text) is not "
            f"valid JSON ({message}); the file is damaged there: fix or remove that event, or "
            f"export the trace again")

    def _last(self, tail: bytes, base: int, consumed: int, whole: bool = False):
        """The last events and whatever follows the list, through read.py's repairs."""
        text = tail if whole else self.header + tail
        top, events, notes = decode_text(text, self.path, base=base,
                                         byte_base=consumed - (0 if whole else len(self.header)))
        if events:
            yield base, events
        self.data.update(top)
        self.notes += notes

    def notes_with(self, repaired: dict) -> list:
        """The notes, each repair counted once over the whole file: the middle chunks' and
        ``repaired``'s (the args') counts added to the last chunk's note where it has one."""
        notes = list(self.notes)
        for kind, note in (("utf8", UTF8_NOTE), ("surrogates", SURROGATE_NOTE)):
            count = self.repaired[kind] + repaired.get(kind, 0)
            if not count:
                continue
            words = note.split(" ", 1)[1][:20]
            for index, text in enumerate(notes):
                if words in text:
                    first, rest = text.split(" ", 1)
                    notes[index] = f"{int(first) + count} {rest}"
                    break
            else:
                notes.append(note.format(count=count))
        return notes
