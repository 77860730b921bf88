"""`make bench`: runs every bench/bench_*.py in turn and says which failed.

Each benchmark prints its own side-by-side ratios; bench/RESULTS.md keeps the figures with their command.
"""

import pathlib
import subprocess
import sys

here = pathlib.Path(__file__).resolve().parent
failed = []
for script in sorted(here.glob("bench_*.py")):
    print(f"\n=== {script.name} ===", flush=True)
    if subprocess.run([sys.executable, str(script)], cwd=here.parent).returncode:
        failed.append(script.name)
if failed:
    sys.exit(f"benchmarks that failed: {', '.join(failed)}")
