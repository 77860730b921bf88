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

Memory is bounded by what is read, never by one token: text that finds no cut (one long event,
the keys around the list) is scanned for its strings (squeezer: only then, so a good file pays
nothing), and there a whitespace run outside strings is kept as one space, a string or a number
longer than MAX_TOKEN_BYTES is an error naming its byte offset, and text that still finds no cut
past MAX_UNCUT_BYTES is an error naming its event.
"""

from __future__ import annotations

import re

import msgspec

from .rawfile import (MAX_LEADING_WHITESPACE, TraceFormatError, file_pieces, size_text,
                      without_bad_utf8, without_lone_surrogates, without_trailing_commas)
from .read import COMMA_NOTE, SURROGATE_NOTE, UTF8_NOTE, decode_events, decode_text, top_level_values

# Text per chunk: per-chunk costs vanish, and its structs stay small. Python keeps the memory
# of a chunk's structs (its allocator's arenas) for the rest of a load: at a 1.1 GB file 4 MiB
# chunks peaked 10 MB higher than 2 MiB ones (1 MiB: 20 MB lower, but ~10% more CPU time).
CHUNK_BYTES = 1 << 21
MAX_HEAD = 64 << 20  # traceEvents must open within this many bytes to stream
MAX_CUT_TRIES = 16
# One string or number longer than this is no trace (the longest real ones, call stacks, are
# KiBs): refused, so that a hostile one (1 GiB in a 1 MB .gz) is not buffered whole.
MAX_TOKEN_BYTES = 8 << 20
# Text without a cut (one event, or the keys after the list: nbprof's block holds an int per
# GPU slice) longer than this is refused; what msgspec builds of it stays well under 1 GB.
MAX_UNCUT_BYTES = 32 << 20
_WHITESPACE_RUN = 1 << 16  # outside strings, a longer run is kept as one space
# What needs no look, skipped in C (possessive: no backtracking): short strings without
# escapes, anything but a quote or whitespace, short whitespace runs. It stops before a string
# with escapes or of 64 KiB, a run of over 4 KiB of whitespace, or a string open at the end.
_PLAIN = re.compile(rb'(?:"[^"\\\n]{0,65536}+"|[^" \t\r\n]++|[ \t\r\n]{1,4096}+(?![ \t\r\n]))*+')
# A string, to its closing quote or open to the end of the text.
_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:(?P<closed>")|\\?\Z)', re.DOTALL)
_BLANK = re.compile(rb'[ \t\r\n]++')
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
        self.repaired = {"utf8": 0, "surrogates": 0, "commas": 0}  # from the middle chunks
        self.header = b"["

    def __iter__(self):
        pieces = file_pieces(self.path, self.max_bytes, self.progress)
        buffer = b""
        start = None
        self._scan_from, self._dropped = 0, 0
        for piece in pieces:
            buffer = self._grown(buffer, piece)
            start = self._events_start(buffer)
            if start is not None:
                break
        if start is None or start < 0:  # read whole, as any file that does not stream
            for piece in pieces:
                buffer = self._grown(buffer, piece)
            yield from self._last(buffer, 0, 0, whole=True)
            return
        consumed, base = start + self._dropped, 0  # text bytes before `buffer`; events before it
        buffer = buffer[start:]
        # Pieces wait in a list and join the buffer once it holds `need` bytes: a chunk, and
        # after a failed cut (an event longer than the window searched) twice the window, so
        # the bytes are copied a bounded number of times however long that event is.
        waiting, waiting_bytes, need = [], 0, self.chunk_bytes
        self._scan_from, self._dropped = 0, 0
        more, uncut = True, False
        while more:
            while len(buffer) >= need:
                if uncut:  # squeezed first: a blank run costs the cut's scan nothing
                    buffer = self._squeezed(buffer, consumed, base, MAX_UNCUT_BYTES)
                    if len(buffer) < need:
                        break
                cut = self._cut(buffer, consumed, base, need)
                if cut is None:  # one event longer than a chunk: read on
                    blank = buffer[:MAX_LEADING_WHITESPACE + 1]  # a gzip of spaces: no trace
                    if len(blank) > MAX_LEADING_WHITESPACE and not blank.strip():
                        raise self._damaged(buffer[:1], "a run of over "
                                            f"{size_text(MAX_LEADING_WHITESPACE)} of whitespace "
                                            "where an event should be: no trace", consumed, base)
                    if uncut:
                        need *= 2
                    uncut = True
                    continue
                events, rest_at = cut
                count = len(events)
                del cut
                yield base, events
                del events  # its structs hold the chunk's text (msgspec.Raw args): let both go
                base += count
                consumed += rest_at + self._dropped
                buffer, need = buffer[rest_at:], self.chunk_bytes
                self._scan_from, self._dropped, uncut = 0, 0, False
            piece = next(pieces, None)
            more = piece is not None
            if more:
                waiting.append(piece)
                waiting_bytes += len(piece)
                if len(buffer) + waiting_bytes >= need:
                    buffer, waiting, waiting_bytes = b"".join([buffer, *waiting]), [], 0
        tail = b"".join([buffer, *waiting])
        del buffer, waiting
        if len(tail) > self.chunk_bytes:  # its tokens are checked as a long event's are
            tail = self._squeezed(tail, consumed, base, MAX_UNCUT_BYTES)
        yield from self._last(tail, base, consumed)

    def _grown(self, buffer: bytes, piece: bytes) -> bytes:
        """``buffer + piece``, squeezed once it is past a chunk (text read whole: the keys
        before the list, or a file that does not stream)."""
        buffer += piece
        if len(buffer) > self.chunk_bytes:
            buffer = self._squeezed(buffer, 0, 0, MAX_HEAD, f"its 'traceEvents' list does not "
                                    f"open within its first {size_text(MAX_HEAD)} of text")
        return buffer

    def _squeezed(self, text: bytes, consumed: int, base: int, limit: int,
                  what: str | None = None) -> bytes:
        """``text`` (which starts outside any string) with each long whitespace run outside
        strings kept as one space; TraceFormatError for a string, number or word longer than
        MAX_TOKEN_BYTES, or for more than ``limit`` bytes left. Scanning resumes where it
        stopped (``self._scan_from``: a place outside strings) as the text grows."""
        runs = []  # (start, end) of the whitespace runs to squeeze
        # A blank run at the end (spaces between two events) is found by rstrip, in C; the
        # scan stops before it (a string open there is scanned again when the text grows).
        end_of_text = max(len(text.rstrip()), self._scan_from)
        at, open_string = self._scan_from, None
        while True:
            at = _PLAIN.match(text, at, end_of_text).end()
            if at == end_of_text:
                if len(text) - at > _WHITESPACE_RUN:
                    runs.append((at, len(text)))
                break
            if text[at] == 0x22:  # '"'
                string = _STRING.match(text, at, end_of_text)
                if string.end() - at > MAX_TOKEN_BYTES:
                    raise self._too_long("string", consumed + self._dropped + at, base)
                if string.start("closed") < 0:
                    open_string = at  # still open: scanned again when it grows
                    break
                at = string.end()
            else:
                blank = _BLANK.match(text, at, end_of_text).end()
                if blank - at > _WHITESPACE_RUN:
                    runs.append((at, blank))
                at = blank
        if open_string is None:
            # what follows the last bracket or comma may still grow (a number, a blank run):
            # scanned again next time; a blank run at the end resumes from its kept space
            resume = max(text.rfind(mark, self._scan_from) for mark in b"{}[],:\"") + 1
            if runs and runs[-1][1] == len(text):
                resume = runs[-1][0]
            resume = max(resume, self._scan_from)
        else:
            resume = open_string
        if runs:
            parts, kept_from, old_resume = [], 0, resume
            for start, end in runs:
                parts.append(memoryview(text)[kept_from:start + 1])
                kept_from = end
                if end <= old_resume:
                    resume -= end - start - 1
            parts.append(memoryview(text)[kept_from:])
            squeezed = b"".join(parts)
            self._dropped += len(text) - len(squeezed)
            text = squeezed
        self._scan_from = resume
        if open_string is None and len(text) - resume > MAX_TOKEN_BYTES:
            # no bracket, comma or string in it: one number or word
            raise self._too_long("number (or bare word)", consumed + self._dropped + resume, base)
        if len(text) > limit:
            what = what or (f"event {base:,} (from near byte {consumed:,} of the text), or what "
                            f"follows it, runs over {size_text(limit)} without ending; no trace "
                            f"event is that long")
            raise TraceFormatError(f"{self.path}: {what}: the file is damaged or not a trace")
        return text

    def _too_long(self, kind: str, byte: int, base: int) -> TraceFormatError:
        return TraceFormatError(
            f"{self.path}: a {kind} longer than {size_text(MAX_TOKEN_BYTES)} starts near byte "
            f"{byte:,} of the text (in or after event {base:,}); no trace holds one that long: "
            f"the file is damaged or not a trace")

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
            self.data, left_out = top_level_values(top)
        except (msgspec.DecodeError, RecursionError):
            return -1  # "traceEvents" inside a string, or keys that do not parse
        self.notes += left_out
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
        self._commas_tried = False
        for _ in range(4):
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
                elif "trailing comma" in message and not self._commas_tried:
                    text, count = without_trailing_commas(text)
                    self.repaired["commas"] += count
                    self._commas_tried = True
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
        for kind, note in (("utf8", UTF8_NOTE), ("surrogates", SURROGATE_NOTE),
                           ("commas", COMMA_NOTE)):
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
