"""`make bench`: runs every bench/bench_*.py in turn and says which failed.

Each benchmark prints its own side-by-side ratios; bench/RESULTS.md keeps the figures with their command.
"""

import pathlib
import subprocess
import sys

here = pathlib.Path(__file__).resolve().parent
# Sizes that run in a few minutes on a 2-core machine; RESULTS.md has the bigger runs' commands.
ARGS = {"bench_ranks.py": ["--events", "1000000", "--ranks", "8,16,32"],
        "bench_answers.py": ["--events", "1000000", "--diff-events", "100000"]}
failed = []
for script in sorted(here.glob("bench_*.py")):
    print(f"\n=== {script.name} ===", flush=True)
    if subprocess.run([sys.executable, str(script), *ARGS.get(script.name, [])],
                      cwd=here.parent).returncode:
        failed.append(script.name)
if failed:
    sys.exit(f"benchmarks that failed: {', '.join(failed)}")
