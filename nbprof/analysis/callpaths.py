"""Call paths: an event's name with its parent chain ("ProfilerStep#* > aten::linear > aten::addmm").

Ops are matched by call path (two runs' ``aten::add`` under different parents are different ops),
and a kernel is reported with the path of the op that launched it. Paths are numbered level by level
(one numpy pass per nesting depth), and spelled out only for the rows shown.

Step and run markers differ only by their number ("ProfilerStep#101", "cudaprof run 2/3"): they
share one name in paths, so the same op in two steps has one path.
"""

from __future__ import annotations

import re

import numpy as np

from ..model import NO_ID, Trace

SEPARATOR = " > "
_NUMBERED = ((re.compile(r"^ProfilerStep#\d+$"), "ProfilerStep#*"),
             (re.compile(r"^cudaprof run \d+/\d+$"), "cudaprof run *"))


def canonical_names(names: list[str]) -> tuple[np.ndarray, list[str]]:
    """Per name id, a canonical id (numbered markers share one), and the canonical name table."""
    table = list(names)
    canonical = np.arange(len(names), dtype=np.int64)
    shared: dict[str, int] = {}
    for pattern, label in _NUMBERED:
        for index, name in enumerate(names):
            if pattern.match(name):
                if label not in shared:
                    shared[label] = len(table)
                    table.append(label)
                canonical[index] = shared[label]
    return canonical, table


class CallPaths:
    """Per event a path id; ``parent_path[p]`` and ``name[p]`` (a canonical name id) define path p."""

    def __init__(self, trace: Trace):
        self.canonical, self.names = canonical_names(trace.names)
        n = len(trace)
        self.of_event = np.full(n, NO_ID, np.int64)
        parents, names = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        count = 0
        event_name = self.canonical[trace.name_id] if n else np.zeros(0, np.int64)
        by_depth = np.argsort(trace.depth, kind="stable")
        bounds = np.flatnonzero(np.diff(trace.depth[by_depth])) + 1
        for rows in np.split(by_depth, bounds) if n else []:
            parent = trace.parent[rows]
            # parents sit one level up, so their paths are already numbered
            parent_path = np.where(parent >= 0, self.of_event[np.maximum(parent, 0)], NO_ID)
            key = (parent_path + 1) * len(self.names) + event_name[rows]
            unique, inverse = np.unique(key, return_inverse=True)
            self.of_event[rows] = count + inverse.reshape(-1)
            parents.append(unique // len(self.names) - 1)
            names.append(unique % len(self.names))
            count += len(unique)
        self.parent_path = np.concatenate(parents)
        self.name = np.concatenate(names)
        self._text: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self.name)

    def text(self, path: int) -> str:
        """The path spelled out, outermost first."""
        path = int(path)
        if path < 0:
            return ""
        if path not in self._text:
            chain = []
            step = path
            while step >= 0:
                chain.append(self.names[self.name[step]])
                step = int(self.parent_path[step])
            self._text[path] = SEPARATOR.join(reversed(chain))
        return self._text[path]

    def texts(self) -> list[str]:
        """Every path spelled out, by id (parents have lower ids, so each is built once)."""
        out: list[str] = []
        for path in range(len(self)):
            parent = int(self.parent_path[path])
            name = self.names[self.name[path]]
            out.append(name if parent < 0 else out[parent] + SEPARATOR + name)
        return out
