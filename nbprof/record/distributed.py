"""What a recording rank says about itself: its rank, world size and host under torchrun or
torch.distributed (written into ``trace.meta``, where :mod:`nbprof.ranks` reads it back to merge the
files), and the rank in the names of the files it writes.
"""

from __future__ import annotations

import os
import socket


def distributed_meta(environ=None) -> dict:
    """rank, world_size, local_rank and host of this process when it is one rank of a job
    (torch.distributed initialised, or torchrun's RANK / WORLD_SIZE / LOCAL_RANK set); {} else."""
    environ = os.environ if environ is None else environ
    meta = {}
    for key, name in (("rank", "RANK"), ("world_size", "WORLD_SIZE"), ("local_rank", "LOCAL_RANK")):
        if str(environ.get(name, "")).isdigit():
            meta[key] = int(environ[name])
    try:  # torch.distributed says best once initialised; importing it here costs nothing more
        import sys

        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            meta["rank"], meta["world_size"] = dist.get_rank(), dist.get_world_size()
            meta["dist_backend"] = str(dist.get_backend())
    except Exception:  # noqa: BLE001  (a broken process group must not stop the profile)
        pass
    if "rank" in meta:
        meta["host"] = socket.gethostname()
    return meta


def expand_rank(path: str, meta: dict) -> str:
    """``out/step.rank{rank}.json.gz`` with this process's rank (0 outside a job)."""
    return str(path).replace("{rank}", str(meta.get("rank", 0)))
