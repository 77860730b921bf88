"""Fuzzing nbprof.load (issue 7): a few hundred deterministic mutations of the real traces in
../shared/traces (truncations, byte flips, field swaps, type changes, phase changes, damaged
nbprof blocks, gzip damage) each end in a Trace or a TraceFormatError, never another exception
or a hang; whatever loads also summarises, exports and loads back; and check_chrome_trace
reports on each without raising.

Time per case is bounded by construction: the documents are small (the small real traces, and
the first events of the larger ones), so one case parses in milliseconds; an interval timer
turns a hang into a failure instead of a stuck run."""

import copy
import gzip
import json
import random
import signal

import pytest

import nbprof
from nbprof.formats.chrome import TraceFormatError, chrome_trace_bytes
from nbprof.formats.chrome.check import check_chrome_trace

SEED = 20261202
CASES_PER_KIND = 50  # 8 kinds: 400 cases
SECONDS_PER_CASE = 20  # a hang guard only: a case takes milliseconds
SMALL_TRACES = ["cpu_only_rank34.json.gz", "gpu_triton_kernel.json.gz",
                "rocm_mi250_train.json.gz"]
# Larger traces give their metadata and first events (flows, kernels, memcpy, ...).
PREFIXES = {"gpu_alexnet_kineto.json.gz": 400, "gpu_sampled_rank0.json.gz": 300}
ODD_VALUES = [None, "", "x", "1", [], [1, 2], {}, {"a": [1]}, 0, -1, 1.5, 1e300, -1e300,
              2 ** 70, -(2 ** 64), True, "\ud800", "\u202e<b>", 4294967295, 1e16]
PHASES = list("XBEiICsftMbneNOP") + ["", None, 1]


class Hang(Exception):
    pass


@pytest.fixture(scope="module")
def documents(shared_traces):
    """The base documents: parsed JSON of the small traces, prefixes of larger ones, and an
    nbprof export (for its "nbprof" block)."""
    docs = []
    for name in SMALL_TRACES:
        docs.append(json.loads(gzip.open(shared_traces / name).read()))
    for name, count in PREFIXES.items():
        doc = json.loads(gzip.open(shared_traces / name).read())
        events = doc["traceEvents"]
        doc["traceEvents"] = [e for e in events if e.get("ph") == "M"] + \
            [e for e in events if e.get("ph") != "M"][:count]
        docs.append(doc)
    export = nbprof.load(shared_traces / "rocm_mi250_train.json.gz")
    docs.append(json.loads(chrome_trace_bytes(export)))
    return docs


def _text(doc) -> bytes:
    return json.dumps(doc).encode()


def truncated(rng, doc):
    raw = _text(doc)
    return raw[:rng.randrange(len(raw))]


def byte_flips(rng, doc):
    raw = bytearray(_text(doc))
    for _ in range(rng.choice([1, 2, 5, 20])):
        raw[rng.randrange(len(raw))] = rng.randrange(256)
    return bytes(raw)


def byte_edits(rng, doc):
    raw = _text(doc)
    at = rng.randrange(len(raw))
    piece = rng.choice([b"", b",", b"]", b"}", b"[", b"{", b'"', b"\\", b"\\u", b"\xef\xbb\xbf",
                        b"\xff", b"\x00", b" " * 100, b"\\ud800", b"1e999"])
    cut = rng.choice([0, 1, 5])
    return raw[:at] + piece + raw[at + cut:]


def field_swaps(rng, doc):
    doc = copy.deepcopy(doc)
    events = doc["traceEvents"]
    for _ in range(rng.choice([1, 3, 10])):
        event = rng.choice(events)
        keys = list(event)
        if len(keys) >= 2:
            a, b = rng.sample(keys, 2)
            event[a], event[b] = event[b], event[a]
        # or two events' field values
        other = rng.choice(events)
        key = rng.choice(keys)
        if key in other:
            event[key], other[key] = other[key], event[key]
    return _text(doc)


def type_changes(rng, doc):
    doc = copy.deepcopy(doc)
    events = doc["traceEvents"]
    for _ in range(rng.choice([1, 2, 5])):
        event = rng.choice(events)
        key = rng.choice(["ph", "name", "cat", "pid", "tid", "ts", "dur", "args", "id", "s",
                          "bp"])
        event[key] = rng.choice(ODD_VALUES)
        if isinstance(event.get("args"), dict) and rng.random() < 0.5:
            arg = rng.choice(["correlation", "External id", "device", "stream", "Input Dims",
                              "Call stack", "name", "labels", "sort_index"])
            event["args"][arg] = rng.choice(ODD_VALUES)
    return json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")


def phase_changes(rng, doc):
    doc = copy.deepcopy(doc)
    events = doc["traceEvents"]
    for _ in range(rng.choice([1, 5, 30])):
        rng.choice(events)["ph"] = rng.choice(PHASES)
    if rng.random() < 0.3:  # drop or repeat events
        rng.shuffle(events)
        del events[rng.randrange(len(events)):]
        events += events[:rng.randrange(len(events) + 1)]
    return _text(doc)


def top_level_changes(rng, doc):
    doc = copy.deepcopy(doc)
    block = doc.get("nbprof")
    targets = ["baseTimeNanoseconds", "deviceProperties", "distributedInfo", "traceEvents",
               "schemaVersion"]
    for _ in range(rng.choice([1, 2])):
        if block is not None and rng.random() < 0.7:
            key = rng.choice(["threads", "categories", "extra_tids", "gpu_pid", "gpu_launch",
                              "meta", "version"])
            if isinstance(block.get(key), list) and block[key] and rng.random() < 0.5:
                block[key][rng.randrange(len(block[key]))] = rng.choice(ODD_VALUES)
            elif isinstance(block.get(key), dict) and block[key] and rng.random() < 0.5:
                inner = rng.choice(list(block[key]))
                block[key][inner] = rng.choice(ODD_VALUES)
            else:
                block[key] = rng.choice(ODD_VALUES)
        else:
            doc[rng.choice(targets)] = rng.choice(ODD_VALUES + [[{"id": "x"}], [{"id": 0}]])
    return _text(doc)


def gzip_damage(rng, doc):
    packed = gzip.compress(rng.choice([truncated, byte_edits, type_changes])(rng, doc), 1)
    if rng.random() < 0.5:
        return packed[:rng.randrange(len(packed))]
    packed = bytearray(packed)
    packed[rng.randrange(10, len(packed))] ^= 1 << rng.randrange(8)
    return bytes(packed)


MUTATIONS = [truncated, byte_flips, byte_edits, field_swaps, type_changes, phase_changes,
             top_level_changes, gzip_damage]


def _alarm(_signum, _frame):
    raise Hang()


def test_every_mutation_loads_or_fails_clearly(documents, tmp_path):
    rng = random.Random(SEED)
    outcomes = {"loaded": 0, "refused": 0}
    failures = []
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        for mutation in MUTATIONS:
            for case in range(CASES_PER_KIND):
                doc = documents[rng.randrange(len(documents))]
                content = mutation(rng, doc)
                path = tmp_path / f"{mutation.__name__}-{case}.json"
                path.write_bytes(content)
                signal.setitimer(signal.ITIMER_REAL, SECONDS_PER_CASE)
                try:
                    outcomes[_outcome(path)] += 1
                    path.unlink()  # failing files stay in tmp_path for a look
                except (Hang, Exception) as error:  # noqa: BLE001 - the point of the test
                    failures.append(f"{path.name}: {type(error).__name__}: {error}"[:300])
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert not failures, f"{len(failures)} of {sum(outcomes.values()) + len(failures)}:\n" + \
        "\n".join(failures[:20])
    total = len(MUTATIONS) * CASES_PER_KIND
    assert sum(outcomes.values()) == total
    # both outcomes are exercised: the mutations neither all break nor all spare the files
    assert outcomes["loaded"] > total // 10 and outcomes["refused"] > total // 10, outcomes


def _outcome(path) -> str:
    problems = check_chrome_trace(path)  # the checker reports, never raises
    assert isinstance(problems, list) and all(isinstance(p, str) for p in problems)
    try:
        trace = nbprof.load(path)
    except TraceFormatError as error:
        assert str(path) in str(error)
        return "refused"
    # whatever loads also summarises, exports, and loads back with the same events
    trace.table()
    again_path = path.with_suffix(".again.json")
    again_path.write_bytes(chrome_trace_bytes(trace))
    again = nbprof.load(again_path)
    assert len(again) == len(trace) and len(again.kernels) == len(trace.kernels)
    again_path.unlink()
    return "loaded"
