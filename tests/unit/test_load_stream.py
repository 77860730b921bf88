"""Issue 11: nbprof.load reads a trace in chunks cut at event boundaries. Loading with tiny
chunks (many cuts, each through real text) gives the same Trace as one chunk; faults in a
middle chunk name the event's index over the whole file; a cut-off big file loads its whole
events; progress is reported; the text is never held whole."""

import gzip
import json
import tracemalloc

import numpy as np
import pytest

import nbprof
from nbprof.formats.chrome import TraceFormatError, stream
from test_chrome_load import REAL_TRACES


SMALL = __import__("pathlib").Path(__file__).parents[3] / "shared" / "traces" / \
    "cpu_only_rank34.json.gz"


def notes(trace):
    return " | ".join(trace.meta.get("notes", []))


def load_in_chunks(path, monkeypatch, chunk_bytes=2048, **options):
    monkeypatch.setattr(stream, "CHUNK_BYTES", chunk_bytes)
    return nbprof.load(path, **options)


def same_trace(a, b):
    for column in ("start_ns", "end_ns", "thread", "name_id", "category", "parent",
                   "gpu_start_ns", "gpu_end_ns", "gpu_launch", "gpu_device", "gpu_stream"):
        assert np.array_equal(getattr(a, column), getattr(b, column)), column
    assert a.names == b.names and a.threads == b.threads and a.categories == b.categories
    for extra in ("event_args", "gpu_args", "shapes", "stacks"):
        assert dict(getattr(a, extra).items()) == dict(getattr(b, extra).items()), extra
    assert a.meta == b.meta


@pytest.mark.parametrize("name", REAL_TRACES)
def test_tiny_chunks_load_the_same_trace_as_one_chunk(shared_traces, name, monkeypatch):
    path = shared_traces / name
    whole = load_in_chunks(path, monkeypatch, chunk_bytes=1 << 40)
    same_trace(load_in_chunks(path, monkeypatch, chunk_bytes=2048), whole)


def x(index, **fields):
    return {"ph": "X", "name": f"op{index % 7}", "cat": "cpu_op", "pid": 1, "tid": 1 + index % 2,
            "ts": index * 10, "dur": 5, "args": {"External id": index}, **fields}


def events_text(count, **fields):
    return [json.dumps(x(index, **fields)).encode() for index in range(count)]


def write(tmp_path, pieces, name="t.json", head=b'{"traceEvents":[', tail=b"]}"):
    path = tmp_path / name
    path.write_bytes(head + b",\n".join(pieces) + tail)
    return path


def test_a_fault_in_a_middle_chunk_names_the_event(tmp_path, monkeypatch):
    pieces = events_text(400)
    inside, after = list(pieces), list(pieces)
    inside[123] = inside[123].replace(b'"dur": 5', b'"dur": 5 5')
    after[123] = after[123] + b"}}"
    for content, said in ((inside, "event 123 "), (after, "just after event 123 ")):
        with pytest.raises(TraceFormatError) as caught:
            load_in_chunks(write(tmp_path, content), monkeypatch)
        message = str(caught.value)
        assert said in message and "not valid JSON" in message and "t.json" in message


@pytest.mark.parametrize("entry", [b"[1, 2]", b"7", b'"text"', b"null", b"true"])
def test_an_entry_that_is_no_object_is_skipped_with_a_note_not_the_file(tmp_path, monkeypatch,
                                                                        entry):
    # one entry with no meaning as an event never refuses the file (issue 24), in a middle
    # chunk as in the whole-file path
    pieces = events_text(400)
    pieces[211] = entry
    for chunk_bytes in (2048, 1 << 40):
        trace = load_in_chunks(write(tmp_path, pieces), monkeypatch, chunk_bytes=chunk_bytes)
        assert len(trace) == 399
        assert "1 entries of 'traceEvents' were not JSON objects: left out" in notes(trace)
        assert "phases nbprof does not read" not in notes(trace)


def test_a_big_file_cut_off_loads_its_whole_events(tmp_path, monkeypatch):
    pieces = events_text(400)
    text = b'{"traceEvents":[' + b",\n".join(pieces)
    path = tmp_path / "cut.json.gz"
    path.write_bytes(gzip.compress(text[:text.rindex(b'"dur"')]))  # inside event 399
    trace = load_in_chunks(path, monkeypatch)
    assert len(trace) == 399 and "the 399 whole events before the cut" in notes(trace)


def test_args_that_hold_objects_in_a_list_load_the_same(tmp_path, monkeypatch):
    # '},{' inside an event's args: a place that looks like a boundary between events
    pieces = events_text(300, args={"inputs": [{"a": 1}, {"b": [{"c": 2}]}], "k": "},{"})
    path = write(tmp_path, pieces)
    same_trace(load_in_chunks(path, monkeypatch, 1000), load_in_chunks(path, monkeypatch, 1 << 40))
    assert nbprof.load(path).event_args[5] == {"inputs": [{"a": 1}, {"b": [{"c": 2}]}], "k": "},{"}


def test_bad_utf8_in_a_middle_chunk_and_in_args_is_noted_once(tmp_path, monkeypatch):
    pieces = events_text(400)
    pieces[50] = pieces[50].replace(b'"op1"', b'"op\xff"')
    pieces[390] = pieces[390].replace(b'"External id"', b'"Ex\xc3(id"')
    trace = load_in_chunks(write(tmp_path, pieces), monkeypatch)
    assert len(trace) == 400
    assert "2 invalid UTF-8 sequences" in notes(trace) and notes(trace).count("UTF-8") == 1
    assert "op\ufffd" in trace.names


def test_progress_hears_the_bytes_read(tmp_path, monkeypatch):
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents":[' + b",".join(events_text(3000)) + b"]}"))
    heard = []
    monkeypatch.setattr("nbprof.formats.chrome.rawfile._READ_CHUNK", 4096)
    trace = load_in_chunks(path, monkeypatch, 8192, progress=lambda done, total: heard.append(
        (done, total)))
    assert len(trace) == 3000 and len(heard) > 3
    assert [done for done, _ in heard] == sorted(done for done, _ in heard)
    assert heard[-1] == (path.stat().st_size, path.stat().st_size)


def test_the_text_is_never_held_whole(tmp_path, monkeypatch):
    # The whole text alone would be 1x the file; json.load takes ~5x. What is left at the
    # peak: the growing columns, one chunk's structs, and the Trace being built.
    nbprof.load(SMALL)  # numba compiles the nesting pass on first use: not a load's cost
    path = write(tmp_path, events_text(60_000, args={"External id": 1, "Sequence number": 7,
                                                     "Fwd thread id": 0, "Record function id": 0}))
    size = path.stat().st_size
    monkeypatch.setattr("nbprof.formats.chrome.rawfile._READ_CHUNK", 1 << 18)
    tracemalloc.start()
    try:
        trace = load_in_chunks(path, monkeypatch, 1 << 19)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(trace) == 60_000 and trace.event_args[59_999]["Sequence number"] == 7
    assert peak < 1.0 * size, (peak, size)


def test_a_long_load_shows_bytes_read_on_one_stderr_line(tmp_path, monkeypatch):
    import io

    from nbprof.formats.chrome.progress import StderrLine

    path = write(tmp_path, events_text(3000))
    monkeypatch.setattr("nbprof.formats.chrome.rawfile._READ_CHUNK", 4096)
    stderr = io.StringIO()
    trace = load_in_chunks(path, monkeypatch, 8192,
                           progress=StderrLine(path.name, stream=stderr, always=True, delay_s=0))
    assert len(trace) == 3000
    text = stderr.getvalue()
    assert text.startswith("\rnbprof: loading t.json: ") and text.endswith("(100%)\n")
    assert text.count("\n") == 1  # one line, rewritten in place
    quiet = io.StringIO()  # not a terminal, not asked to: nothing
    nbprof.load(path, progress=StderrLine(path.name, stream=quiet))
    assert quiet.getvalue() == ""


def test_a_long_load_in_a_notebook_shows_a_progress_bar(tmp_path, monkeypatch):
    ipywidgets = pytest.importorskip("ipywidgets")
    from nbprof.formats.chrome.progress import NotebookBar

    path = write(tmp_path, events_text(3000))
    monkeypatch.setattr("nbprof.formats.chrome.rawfile._READ_CHUNK", 4096)
    bar = NotebookBar(path.name, delay_s=0)
    load_in_chunks(path, monkeypatch, 8192, progress=bar)
    assert isinstance(bar.bar, ipywidgets.FloatProgress)
    assert bar.bar.value == bar.bar.max == path.stat().st_size
    assert bar.bar.comm is None  # closed when the load ended


def test_an_event_longer_than_a_chunk_with_many_cuts_inside_its_strings_streams_on(tmp_path, monkeypatch):
    # the first event's args hold 40 '},{' (each a cut candidate that does not parse) and are
    # five chunks long: the events after it still come chunk by chunk, all of them, in order
    tricky = x(0, args={"External id": 0, "text": '{"a": 1},{"b": 2}' * 40 + "y" * 8000})
    events = [tricky] + [x(i) for i in range(1, 400)]
    path = tmp_path / "long_first.json"
    path.write_text(json.dumps({"traceEvents": events}))
    monkeypatch.setattr(stream, "CHUNK_BYTES", 2048)
    chunks = list(stream.EventChunks(path, 1 << 30))
    assert len(chunks) > 5 and [first for first, _ in chunks] == sorted(first for first, _ in chunks)
    assert sum(len(events) for _, events in chunks) == 400
    trace = nbprof.load(path)
    assert len(trace) == 400 and trace.event_args[0]["text"] == tricky["args"]["text"]


def kineto_launches(count, correlation):
    """Kineto's layout: an op, its cudaLaunchKernel and the kernel, tied by the correlation
    in both args and by an ac2g flow; ``correlation(i)`` is launch i's id."""
    events = []
    for i in range(count):
        corr, ts = correlation(i), i * 10
        events += [
            {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": ts,
             "dur": 8, "args": {"External id": i}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": ts + 1, "dur": 2, "args": {"External id": i, "correlation": corr}},
            {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": ts + 5,
             "dur": 3, "args": {"External id": i, "correlation": corr, "device": 0,
                                "stream": 7}},
            {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 1, "tid": 1,
             "ts": ts + 1},
            {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": corr, "pid": 0, "tid": 7,
             "ts": ts + 5, "bp": "e"}]
    return [json.dumps(event).encode() for event in events]


@pytest.mark.parametrize("odd", ["a-string", 2 ** 63, 2.5])
def test_chunks_of_int_ids_link_as_chunks_of_other_ids(tmp_path, monkeypatch, odd):
    # Chunks whose ids are all ints take a numpy path of their own; the chunk with the odd
    # id (and the whole file, read as one chunk) the general one: the links must agree.
    path = write(tmp_path, kineto_launches(60, lambda i: odd if i == 30 else 1000 + i))
    whole = load_in_chunks(path, monkeypatch, chunk_bytes=1 << 40)
    chunked = load_in_chunks(path, monkeypatch, chunk_bytes=2048)
    same_trace(chunked, whole)
    for trace in (whole, chunked):
        launched = [trace.names[trace.name_id[row]] for row in trace.gpu_launch.tolist()]
        assert launched == [f"op{i}" for i in range(60)]
        assert trace.gpu_args[30]["correlation"] == odd
