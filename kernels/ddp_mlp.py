"""DistributedDataParallel training of the bundled MLP (kernels/train_mlp.py): gloo on the CPU, so
it runs under ``torchrun`` on any machine. ``make demo-ddp`` profiles each rank and merges them.

    torchrun --standalone --nproc-per-node 2 kernels/ddp_mlp.py --steps 5

Each step is annotated ``ProfilerStep#N``, as torch.profiler's schedule names steps, so
``trace.rank_summary()`` lists per-step times.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_mlp import make_model  # noqa: E402


def train(steps: int = 5, batch: int = 32, width: int = 128, slow_rank: int | None = None) -> float:
    """``steps`` DDP steps; ``slow_rank`` does extra work each step (a straggler to find)."""
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    try:
        torch.manual_seed(rank)  # each rank its own batch, as a sampler would give it
        model = DistributedDataParallel(make_model(width, device="cpu"))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        inputs, labels = torch.randn(batch, width), torch.randint(0, 10, (batch,))
        loss = torch.zeros(())
        for step in range(steps):
            with torch.profiler.record_function(f"ProfilerStep#{step}"):
                if rank == slow_rank:
                    with torch.profiler.record_function("extra work (the straggler)"):
                        for _ in range(100):
                            torch.mm(torch.randn(128, 128), torch.randn(128, 128))
                        # A wait no CPU contention can shrink, so the other rank surely waits
                        # for this one in the step's all-reduce, even on a loaded machine.
                        time.sleep(0.05)
                optimizer.zero_grad(set_to_none=True)
                loss = nn.functional.cross_entropy(model(inputs), labels)
                loss.backward()  # DDP all-reduces the gradients here
                optimizer.step()
        dist.barrier()
        return float(loss.detach())
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--slow-rank", type=int, default=None)
    args = parser.parse_args()
    print(f"rank {os.environ.get('RANK')}: loss after {args.steps} steps: "
          f"{train(args.steps, slow_rank=args.slow_rank):.4f}")
