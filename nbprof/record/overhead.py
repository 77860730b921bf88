"""The profiler's own cost, as a figure a user can weigh: pure arithmetic and wording.

``nbprof.profile`` times a few hundred empty ranges with its profilers off and on at the start of
every block (record/calibrate.py); the difference per range is what each recorded op cost on top
of the work. ``share`` applies it to the ops the block's own thread ran, over the block's time.
"""

from __future__ import annotations


def overhead_meta(per_op_ns: float, op_count: int, block_ns: int,
                  per_memory_event_ns: float | None = None, memory_events: int = 0) -> dict:
    """``trace.meta["overhead"]``: per-op cost in ns and the share of the block it amounts to;
    where memory was recorded, each allocation's or free's cost too, in the same share."""
    per_op_ns = max(float(per_op_ns), 0.0)
    spent = per_op_ns * op_count
    extra = {}
    if per_memory_event_ns is not None:
        per_memory_event_ns = max(float(per_memory_event_ns), 0.0)
        spent += per_memory_event_ns * memory_events
        extra = {"per_memory_event_ns": round(per_memory_event_ns, 1),
                 "memory_events": int(memory_events)}
    share = spent / block_ns if block_ns > 0 else 0.0
    return {"per_op_ns": round(per_op_ns, 1), "ops": int(op_count), "block_ns": int(block_ns),
            "share": round(min(share, 1.0), 6), **extra}


def describe_overhead(overhead: dict | None, of: str = "the profiled code") -> str:
    """``profiler overhead ≈ 2.1 µs/op, ~9% of the profiled code`` (``of``: "this cell" where the
    cell that was just profiled shows it); empty without a measurement."""
    if not overhead or "per_op_ns" not in overhead:
        return ""
    per_op_us = overhead["per_op_ns"] / 1000
    per_op = f"{per_op_us:.1f} µs/op" if per_op_us >= 0.1 else f"{overhead['per_op_ns']:.0f} ns/op"
    share = overhead.get("share", 0.0) * 100
    share_text = f"~{share:.0f}%" if share >= 1 else ("<1%" if share > 0 else "0%")
    return f"profiler overhead ≈ {per_op}, {share_text} of {of}"
