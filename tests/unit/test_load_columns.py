"""The streaming loader's building blocks: columns that grow in place, and nesting."""

import numpy as np
import pytest

from nbprof.formats.chrome.growing import RESERVE_BYTES, GrowingColumn
from nbprof.model.nesting import nest, time_ordered


def test_a_growing_column_holds_what_was_appended_past_several_growths():
    column = GrowingColumn(np.float64)
    parts = [np.arange(n, dtype=np.float64) + n for n in (10, 70_000, 3, 5_000_000, 0, 17)]
    for part in parts:
        column.extend(part)
    out = column.finish()
    assert out.dtype == np.float64 and np.array_equal(out, np.concatenate(parts))
    assert len(GrowingColumn(np.int32).finish()) == 0 and len(column) == 0
    assert RESERVE_BYTES // 8 < len(out)  # it did grow past the mapped block's size


def test_an_int32_column_widens_when_a_value_does_not_fit():
    column = GrowingColumn(np.int32, widen=True)
    column.extend(np.array([1, -5, 2**31 - 1]))
    assert column.dtype == np.int32
    column.extend(np.array([2**40, -(2**31)]))
    out = column.finish()
    assert out.dtype == np.int64 and out.tolist() == [1, -5, 2**31 - 1, 2**40, -(2**31)]


def test_an_int16_column_widens_step_by_step_and_keeps_every_value():
    column = GrowingColumn(np.int16, widen=True)
    column.extend(np.array([3, 32767]))
    assert column.dtype == np.int16
    column.extend(np.array([-32768]))  # a type's lowest value is kept for markers: widens
    assert column.dtype == np.int32
    column.extend(np.array([2**33]))
    out = column.finish()
    assert out.dtype == np.int64 and out.tolist() == [3, 32767, -32768, 2**33]


def _nest_by_stacks(start, end, thread):
    """The plain definition: per thread, a stack of the events still open."""
    depth, parent = np.zeros(len(start), np.int16), np.full(len(start), -1, np.int32)
    self_ns = (end - start).astype(np.int64)
    stacks = {}
    for row in range(len(start)):
        stack = stacks.setdefault(int(thread[row]), [])
        while stack and end[stack[-1]] <= start[row]:
            stack.pop()
        if stack:
            up = stack[-1]
            parent[row], depth[row] = up, depth[up] + 1
            self_ns[up] -= min(end[row], end[up]) - start[row]
        stack.append(row)
    return depth, parent, self_ns


def _same_nesting(start, end, thread):
    got, want = nest(start, end, thread.astype(np.int32)), _nest_by_stacks(start, end, thread)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_nesting_over_all_threads_at_once_matches_a_stack_per_thread():
    rng = np.random.default_rng(3)
    start = np.sort(rng.integers(0, 2000, 3000))
    end = start + rng.integers(0, 300, 3000)  # overlaps that do not fit, ties, zero lengths
    for thread in (rng.integers(0, 5, 3000), rng.integers(-3, 2, 3000) * 1000,
                   rng.integers(0, 100, 3000)):  # more threads than masks are used for
        _same_nesting(start, end, thread)


@pytest.mark.parametrize("size", [1, 9, 64, 65, 513, 40_000])
def test_nesting_finds_parents_near_and_far(size):
    # The parent search walks a tree of 8-wide maxima: parents at every distance, across
    # block and level edges, in shapes a trace has (siblings under one long root, deep chains,
    # many roots, ops that outlive their parent by a little, as Kineto's µs rounding makes)
    rng = np.random.default_rng(size)
    start = np.arange(size) * 10
    one_thread = np.zeros(size, np.int64)
    siblings = start + 5
    siblings[0] = size * 10 + 1
    chain = (start // 10000 + 1) * 10000 - start // 10  # each inside the one before, ~900 deep
    mixed = start + rng.geometric(1 / 3, size) * 10 + rng.integers(-3, 4, size)
    for end in (siblings, chain, mixed, start + 5):
        _same_nesting(start, np.maximum(end, start), one_thread)
    _same_nesting(start, np.maximum(mixed, start), rng.integers(0, 3, size))


@pytest.mark.parametrize("span", [3, 1000, 10 ** 12, 10 ** 18])  # the last: argsort, not packed keys
def test_time_ordered_is_lexsorts_order(span):
    # Few distinct starts (many ties, sorted by the second key in groups), and nearly none
    rng = np.random.default_rng(span)
    for size in (0, 1, 2, 7, 5000):
        start, length = rng.integers(0, span, size), rng.integers(0, 5, size)
        rows = np.flatnonzero(rng.random(size) < 0.7)
        expected = rows[np.lexsort((start[rows] - length[rows], start[rows]))]
        got = time_ordered(rows, start, lambda picked: start[picked] - length[picked])
        assert np.array_equal(got, expected), size
