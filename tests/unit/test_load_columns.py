"""The streaming loader's building blocks: columns that grow in place, and nesting."""

import numpy as np
import pytest

from nbprof.chrome.growing import RESERVE_BYTES, GrowingColumn
from nbprof.nesting import nest, time_ordered


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


def test_nesting_over_all_threads_at_once_matches_a_stack_per_thread():
    rng = np.random.default_rng(3)
    start = np.sort(rng.integers(0, 2000, 3000))
    end = start + rng.integers(0, 300, 3000)  # overlaps that do not fit, ties, zero lengths
    for thread in (rng.integers(0, 5, 3000), rng.integers(-3, 2, 3000) * 1000):
        got, want = nest(start, end, thread.astype(np.int32)), _nest_by_stacks(start, end, thread)
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.parametrize("span", [3, 1000, 10 ** 12])
def test_time_ordered_is_lexsorts_order(span):
    # Few distinct starts (many ties, sorted by the second key in groups), and nearly none
    rng = np.random.default_rng(span)
    for size in (0, 1, 2, 7, 5000):
        start, length = rng.integers(0, span, size), rng.integers(0, 5, size)
        rows = np.flatnonzero(rng.random(size) < 0.7)
        expected = rows[np.lexsort((start[rows] - length[rows], start[rows]))]
        got = time_ordered(rows, start, lambda picked: start[picked] - length[picked])
        assert np.array_equal(got, expected), size
