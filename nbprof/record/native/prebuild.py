"""``python -m nbprof.record.native.prebuild TORCH_DIR FOLDER``: build the native observer here
for a machine that cannot compile it (build.py, "NBPROF_NATIVE_PREBUILT"), against the torch
package folder ``TORCH_DIR`` (an unpacked wheel's ``torch/``: its include/, lib/libc10.so,
lib/libtorch_cpu.so and version.py; never imported). Prints the library's path."""

from __future__ import annotations

import argparse
from pathlib import Path

from .build import prebuild

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("torch_dir", type=Path)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--python-include", type=Path, default=None,
                        help="the target Python's C headers (its Python.h folder): with_stack's "
                             "profile function is built for that Python; without, with_stack "
                             "records through torch's profiler there")
    arguments = parser.parse_args()
    print(prebuild(arguments.torch_dir, arguments.folder, arguments.python_include))
