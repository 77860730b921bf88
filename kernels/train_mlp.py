"""The bundled workload: a few training steps of a small MLP on random data.

Runs on the GPU when there is one, else on the CPU. ``make demo`` profiles it with
``nbprof run kernels/train_mlp.py``; tests and benchmarks import :func:`train`.
"""

from __future__ import annotations

import argparse

import torch
from torch import nn


def make_model(width: int = 256, depth: int = 3, device: str | None = None) -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, 10))
    return nn.Sequential(*layers).to(device or default_device())


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def train(steps: int = 5, batch: int = 64, width: int = 256, seed: int = 0) -> float:
    """Run ``steps`` SGD steps; returns the last loss."""
    torch.manual_seed(seed)
    device = default_device()
    model = make_model(width, device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(batch, width, device=device)
    labels = torch.randint(0, 10, (batch,), device=device)
    loss = torch.zeros((), device=device)
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
    return float(loss.detach())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    print(f"loss after {args.steps} steps: {train(args.steps, args.batch):.4f}")
