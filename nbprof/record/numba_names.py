"""GPU kernel names back to numba launches: what CUPTI (Kineto's CUDA activity) calls a numba
kernel is numba's mangled entry name, e.g. for ``kernels.numba_kernels.saxpy(float32, ...)``::

    _ZN7kernels13numba_kernels5saxpyB2v1B72cw51...E f 5ArrayIfLi1E1C7mutable7alignedE ...

(numba-cuda's ``itanium_mangler.mangle``: the module and qualname as nested identifiers, each
``<len><name>`` with ``[^a-zA-Z0-9_]`` escaped as ``_xx`` hex, then ABI tags ``B<len><tag>``: the
function's per-process uid ``v<n>`` and its target flags, then the argument types), and Kineto
shows it demangled: ``kernels::numba_kernels::saxpy[abi:v1][abi:cw51...](float, Array<...>)``.

:func:`numba_kernel_of` maps either form to the launch's slice name: by the exact entry name
where the trace has it (real mode records each kernel's ``entry names``), else by the function's
module-qualified name (the uid differs between processes, the flags between compile options).
Names are compared escaped, as the mangler wrote them: unescaping ``_xx`` is ambiguous
(``scale_ab`` would turn into ``scale`` + chr(0xab)). Pure: no numba, no torch.
"""

from __future__ import annotations

import re

NAME_PREFIX = "numba::"
_INVALID = re.compile(r"[^a-z0-9_]", re.I)
_LENGTH = re.compile(r"\d+")


def escape_identifier(text: str) -> str:
    """numba-cuda's ``itanium_mangler.escape_string``: each invalid character's UTF-8 bytes as
    ``_xx``."""
    return _INVALID.sub(lambda match: "".join(f"_{byte:02x}" for byte in
                                              match.group(0).encode("utf8")), text)


def escaped_path(function_path: str) -> tuple[str, ...]:
    """``"m.f.<locals>.k"`` as the mangler's identifiers: ``("m", "f", "_3clocals_3e", "k")``."""
    return tuple(escape_identifier(part) for part in function_path.split("."))


def mangled_path(kernel_name: str) -> tuple[str, ...] | None:
    """The (escaped) identifiers that name the function in a numba kernel's mangled or demangled
    name; None for a name numba's mangler did not make (a torch or CUTLASS kernel's)."""
    if kernel_name.startswith("_Z"):
        return _parse_mangled(kernel_name[2:])
    head = re.split(r"[\[(]", kernel_name, maxsplit=1)[0]
    if head == kernel_name or " " in head or "<" in head:  # no argument list, or a C++ template
        return None
    parts = tuple(head.split("::"))
    return parts if all(part and not _INVALID.search(part) for part in parts) else None


def _parse_mangled(rest: str) -> tuple[str, ...] | None:
    nested = rest.startswith("N")
    position, parts = int(nested), []
    while position < len(rest):
        length = _LENGTH.match(rest, position)
        if length is None:
            break
        start = length.end()
        end = start + int(length.group())
        if end > len(rest):
            return None
        parts.append(rest[start:end])
        position = end
        if not nested:
            break
    if not parts:
        return None
    while rest.startswith("B", position):  # ABI tags: B<len><tag>
        length = _LENGTH.match(rest, position + 1)
        if length is None:
            return None
        position = length.end() + int(length.group())
    if nested and not rest.startswith("E", position):
        return None
    return tuple(parts)


def known_numba_launches(launch_args) -> dict:
    """What :func:`numba_kernel_of` looks names up in, from ``(slice name, args)`` of a trace's
    ``numba::`` launches (their ``entry names`` and ``function`` args)."""
    known: dict = {}
    for name, args in launch_args:
        if not name.startswith(NAME_PREFIX) or name.startswith(NAME_PREFIX + "compile "):
            continue
        for entry_name in filter(None, (args.get("entry names") or "").split(", ")):
            known[entry_name] = name
        if args.get("function"):
            known.setdefault(escaped_path(args["function"]), name)
    return known


def numba_kernel_of(kernel_name: str, known_launches: dict) -> str | None:
    """The slice name (``numba::<qualname>``) of the launch that ran the GPU kernel
    ``kernel_name`` (mangled, or demangled as Kineto shows it), or None when it is not one of
    ``known_launches``' kernels (from :func:`known_numba_launches`)."""
    exact = known_launches.get(kernel_name)
    if exact is not None:
        return exact
    path = mangled_path(kernel_name)
    return None if path is None else known_launches.get(path)


def pair_kernels_with_launches(kernel_names, kernel_start_ns, launches, known_launches):
    """CUPTI kernels that no op launched (numba launches off the threads torch's profiler wraps
    in a record_function) paired with numba launches: ``launches`` is (slice name, row, CPU
    start ns) per launch. Kernels of one function run in the order they were launched, so the
    k-th kernel of a name goes to the k-th launch of that name, where the counts agree. Returns
    ({kernel index: launch row}, how many kernels of known numba functions stayed unpaired)."""
    kernels: dict = {}
    slice_of: dict = {}  # a trace has many kernels and few names: parse each name once
    for index, (name, start_ns) in enumerate(zip(kernel_names, kernel_start_ns)):
        slice_name = slice_of.get(name, slice_of)
        if slice_name is slice_of:
            slice_name = slice_of[name] = numba_kernel_of(name, known_launches)
        if slice_name is not None:
            kernels.setdefault(slice_name, []).append((int(start_ns), index))
    by_name: dict = {}
    for slice_name, row, start_ns in launches:
        by_name.setdefault(slice_name, []).append((int(start_ns), row))
    paired, unpaired = {}, 0
    for slice_name, found in kernels.items():
        launched = by_name.get(slice_name, [])
        if len(launched) != len(found):
            unpaired += len(found)
            continue
        for (_, index), (_, row) in zip(sorted(found), sorted(launched)):
            paired[index] = row
    return paired, unpaired
