"""A numpy column that grows chunk by chunk in place, for the streaming loader's columns.

Appending each chunk's array to a list and concatenating at the end holds every column twice
at the end of a load, and the freed parts stay in the C heap (the allocator keeps them for
reuse rather than handing them back), so a huge load's memory grew by the whole size of its
columns there. A GrowingColumn grows with ``ndarray.resize``, i.e. ``realloc``: doubling
while small, then as a block large enough that the C allocator maps it on its own, which
``realloc`` moves (mremap) without copying; ``finish`` shrinks it to its length the same way
and hands the array itself on.
"""

from __future__ import annotations

import ctypes

import numpy as np

# glibc maps allocations of at least its mmap threshold (at most 32 MiB) on their own:
# such a block grows and shrinks by mremap, and goes back to the system when freed.
RESERVE_BYTES = 32 << 20
FIRST_SIZE = 1 << 16  # elements: a small file's columns stay small
GROWTH = 1.05  # numpy zero-fills what resize adds (RSS): a small step keeps little of it unused
_WIDER = {np.dtype(np.int16): np.dtype(np.int32), np.dtype(np.int32): np.dtype(np.int64)}


class GrowingColumn:
    """``widen``: an int16 or int32 column that becomes the next wider int once a value does
    not fit (ids and rows almost always fit int32, the codes of interned names int16: a half
    or a quarter of the bytes). The type's lowest value never fits: it is kept for markers."""

    def __init__(self, dtype, widen: bool = False):
        self.dtype = np.dtype(dtype)
        self.widen = widen
        self._array = None
        self.size = 0

    def extend(self, values) -> None:
        values = np.asarray(values)
        need = self.size + len(values)
        if self.widen and self.dtype in _WIDER and len(values):  # int64: nothing to check
            low, high = values.min(), values.max()
            while self.dtype in _WIDER and not (np.iinfo(self.dtype).min < low
                                                and high <= np.iinfo(self.dtype).max):
                self._widened()
        if self._array is None:
            self._array = np.empty(max(need, FIRST_SIZE), self.dtype)
        elif need > len(self._array):
            self._array.resize(self._grown(need), refcheck=False)
        self._array[self.size:need] = values
        self.size = need

    def _grown(self, need: int) -> int:
        """The next capacity: doubling while small, then straight to a block the allocator
        maps on its own, then by GROWTH (mremap moves it, nothing is copied)."""
        mapped = RESERVE_BYTES // self.dtype.itemsize
        size = len(self._array)
        grown = 2 * size if 2 * size < mapped else max(mapped, int(GROWTH * size))
        return max(need, grown)

    def _widened(self) -> None:
        self.dtype = _WIDER[self.dtype]
        if self._array is not None:
            wide = np.empty(max(len(self._array), FIRST_SIZE), self.dtype)
            wide[:self.size] = self._array[:self.size]
            self._array = wide

    def finish(self) -> np.ndarray:
        """The column, at its length; the GrowingColumn is empty afterwards."""
        array, self._array, size, self.size = self._array, None, self.size, 0
        if array is None:
            return np.zeros(0, self.dtype)
        array.resize(size, refcheck=False)
        return array

    def __len__(self):
        return self.size


def give_back_freed_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's malloc_trim; elsewhere
    nothing). A load frees a few MB of structs and text per chunk; glibc keeps what it freed
    in the middle of its heap for reuse, and the big columns made next are mapped afresh, so
    without this a load's peak carried every hole the chunks left (~80 MB on a 1.1 GB file)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # not glibc: macOS, musl, Windows
        return
    trim(0)
