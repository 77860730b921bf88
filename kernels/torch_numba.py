"""torch ops and numba kernels on one stream, sharing memory with no copies.

On a GPU the tensors are CUDA tensors passed to numba through ``__cuda_array_interface__`` and
numba launches on torch's current stream (``cuda.external_stream``), so torch op -> numba kernel
-> torch op run in order on that stream without a synchronisation. On the CPU (numba's simulator)
the tensors are CPU tensors handed over as numpy views (``tensor.numpy()`` shares the memory), so
the same code computes the same result.

    python kernels/torch_numba.py
"""

from __future__ import annotations

import numpy as np
import torch
from numba import cuda

from kernels.numba_kernels import SIMULATOR, blocks_for, saxpy


def on_gpu() -> bool:
    return not SIMULATOR and torch.cuda.is_available()


def kernel_view(tensor: torch.Tensor):
    """What a numba kernel takes for ``tensor``: the tensor itself on a GPU (numba reads its
    __cuda_array_interface__), a numpy view of the same memory on the CPU."""
    return tensor if tensor.is_cuda else tensor.numpy()


def torch_stream_for_numba():
    """torch's current stream as a numba stream (the default stream, 0, on the CPU)."""
    if not on_gpu():
        return 0
    return cuda.external_stream(torch.cuda.current_stream().cuda_stream)


def mixed_step(n: int | None = None, threads: int = 128, seed: int = 0) -> float:
    """x = relu(randn) (torch); out = 2 x + y (numba saxpy, same stream); loss = out.sum()
    (torch). Checks the result against torch alone and returns the loss."""
    n = n or (512 if SIMULATOR else 1 << 22)
    device = "cuda" if on_gpu() else "cpu"
    generator = torch.Generator(device=device).manual_seed(seed)
    x = torch.relu(torch.randn(n, device=device, generator=generator))
    y = torch.randn(n, device=device, generator=generator)
    out = torch.empty_like(x)
    stream = torch_stream_for_numba()
    saxpy[blocks_for(n, threads), threads, stream](np.float32(2.0), kernel_view(x),
                                                    kernel_view(y), kernel_view(out))
    loss = out.sum()  # same stream: runs after the kernel without a synchronisation
    expected = (2 * x + y).sum()
    torch.testing.assert_close(loss, expected, rtol=1e-4, atol=1e-3)
    return float(loss)


if __name__ == "__main__":
    print(f"loss {mixed_step():.4f} ({'GPU' if on_gpu() else 'CPU, numba simulator'})")
