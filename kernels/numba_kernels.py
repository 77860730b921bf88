"""numba.cuda kernels that the notebooks, benchmarks and tests profile.

saxpy, a shared-memory tiled matmul, a block reduction and a 2-D five-point stencil. Each
``run_*`` launches its kernel and checks the result against numpy (raises AssertionError if
wrong), so a profile of it is also a test of it. They run on a GPU and under numba's simulator
(``NUMBA_ENABLE_CUDASIM=1``, set before numba.cuda is imported), where every CUDA thread is a
Python thread: the default sizes are small there (``SIMULATOR``) and GPU-sized otherwise.

    python kernels/numba_kernels.py      # runs all four and prints what ran
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32
from numba.cuda.core import config as cuda_config

SIMULATOR = bool(cuda_config.ENABLE_CUDASIM)

TILE = 16  # the matmul's tile edge: a (TILE, TILE) block with two TILE x TILE shared arrays
REDUCE_THREADS = 128  # the reduction's block size (its shared array is this long)


@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def tiled_matmul(a, b, c):
    """c = a @ b, one TILE x TILE tile of c per block, staged through shared memory."""
    tile_a = cuda.shared.array((TILE, TILE), float32)
    tile_b = cuda.shared.array((TILE, TILE), float32)
    x, y = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)  # x runs along a row of c, as threadIdx.x does in the tiles
    total = float32(0.0)
    for tile in range((a.shape[1] + TILE - 1) // TILE):
        k_a, k_b = tile * TILE + x, tile * TILE + y
        tile_a[y, x] = a[row, k_a] if row < a.shape[0] and k_a < a.shape[1] else 0.0
        tile_b[y, x] = b[k_b, col] if k_b < b.shape[0] and col < b.shape[1] else 0.0
        cuda.syncthreads()
        for k in range(TILE):
            total += tile_a[y, k] * tile_b[k, x]
        cuda.syncthreads()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = total


@cuda.jit
def block_sum(values, partial_sums):
    """partial_sums[b] = the sum of block b's REDUCE_THREADS values (tree reduction in shared)."""
    shared = cuda.shared.array(REDUCE_THREADS, float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    shared[t] = values[i] if i < values.size else 0.0
    cuda.syncthreads()
    step = REDUCE_THREADS // 2
    while step > 0:
        if t < step:
            shared[t] += shared[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        partial_sums[cuda.blockIdx.x] = shared[0]


@cuda.jit
def stencil_2d(grid_in, grid_out):
    """One Jacobi step of the five-point Laplace stencil; the border is copied."""
    row, col = cuda.grid(2)
    rows, cols = grid_in.shape
    if row < rows and col < cols:
        if 0 < row < rows - 1 and 0 < col < cols - 1:
            grid_out[row, col] = 0.25 * (grid_in[row - 1, col] + grid_in[row + 1, col]
                                         + grid_in[row, col - 1] + grid_in[row, col + 1])
        else:
            grid_out[row, col] = grid_in[row, col]


def blocks_for(size: int, threads: int) -> int:
    return math.ceil(size / threads)


def run_saxpy(n: int | None = None, threads: int = 64, stream=0) -> np.ndarray:
    n = n or (512 if SIMULATOR else 1 << 22)
    rng = np.random.default_rng(0)
    x, y = rng.random(n, np.float32), rng.random(n, np.float32)
    out = np.zeros(n, np.float32)
    saxpy[blocks_for(n, threads), threads, stream](np.float32(2.0), x, y, out)
    np.testing.assert_allclose(out, 2 * x + y, rtol=1e-6)
    return out


def run_matmul(n: int | None = None) -> np.ndarray:
    n = n or (2 * TILE if SIMULATOR else 1024)
    rng = np.random.default_rng(1)
    a, b = rng.random((n, n), np.float32), rng.random((n, n), np.float32)
    c = np.zeros((n, n), np.float32)
    blocks = blocks_for(n, TILE)
    tiled_matmul[(blocks, blocks), (TILE, TILE)](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)
    return c


def run_block_sum(n: int | None = None) -> float:
    n = n or (4 * REDUCE_THREADS if SIMULATOR else 1 << 22)
    values = np.random.default_rng(2).random(n, np.float32)
    blocks = blocks_for(n, REDUCE_THREADS)
    partial_sums = np.zeros(blocks, np.float32)
    block_sum[blocks, REDUCE_THREADS](values, partial_sums)
    total = float(partial_sums.sum(dtype=np.float64))
    np.testing.assert_allclose(total, values.sum(dtype=np.float64), rtol=1e-4)
    return total


def run_stencil(size: int | None = None, block: tuple = (16, 16), steps: int = 2) -> np.ndarray:
    size = size or (32 if SIMULATOR else 2048)
    grid = np.zeros((size, size), np.float32)
    grid[0, :] = 1.0  # a hot top edge
    expected = grid.copy()
    for _ in range(steps):
        inner = 0.25 * (expected[:-2, 1:-1] + expected[2:, 1:-1]
                        + expected[1:-1, :-2] + expected[1:-1, 2:])
        expected = expected.copy()
        expected[1:-1, 1:-1] = inner
    blocks = (blocks_for(size, block[0]), blocks_for(size, block[1]))
    device_in, device_out = cuda.to_device(grid), cuda.to_device(grid)
    for _ in range(steps):
        stencil_2d[blocks, block](device_in, device_out)
        device_in, device_out = device_out, device_in
    result = device_in.copy_to_host()
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-6)
    return result


RUNS = {"saxpy": run_saxpy, "tiled_matmul": run_matmul, "block_sum": run_block_sum,
        "stencil_2d": run_stencil}


def run_all() -> None:
    for run in RUNS.values():
        run()


if __name__ == "__main__":
    run_all()
    print(f"ran {', '.join(RUNS)} ({'simulator' if SIMULATOR else 'GPU'}): results checked")
