"""bench/gpu_check.sh's summary: what ran on the GPU machine and each figure against its target,
gathered from the run's logs into LOGS/summary.md (and printed with --print).

Rows come from three places, none from the wording of a bench's prose:
- ``FIGURE | name | measured | target | PASS/FAIL/INFO`` lines (bench/figures.py) in any log;
- pytest's ``-v`` result lines (``path::test PASSED``) and closing line in the test logs: one row
  per test of the native recorder's and memory's GPU tests (issues 19, 23: never run on a GPU
  before), one per test log for the rest;
- ``STEP | name | rc | note`` lines that gpu_check.sh appends to setup.log after each step.

Run after every step (so a run cut short still leaves a summary of what finished); stdlib only,
it never imports torch. Usage: python bench/gpu_summary.py LOGS [--print]
"""

from __future__ import annotations

import pathlib
import re
import sys

SUMMARY = "summary.md"
# (log, label, whether each test gets its own row)
TEST_LOGS = (("gpu_tests_native.log", "native recorder + memory GPU tests (issues 19, 23)", True),
             ("gpu_tests.log", "tests/gpu, the rest", False))
RESULT = re.compile(r"^(tests/\S+::\S+)\s+(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\b(.*)")
# pytest -v -s prints a test's own output between its id and its result: the result may start a
# line of its own ("PASSED") or end one; the closing line: "=== 3 passed, 1 failed in 9.1s ==="
BARE_RESULT = re.compile(r"(PASSED|FAILED|SKIPPED|ERROR)$")
TEST_ID = re.compile(r"^(tests/\S+\.py::\S+)")
CLOSING = re.compile(r"^=+ (.*\b(passed|failed|skipped|error|errors|deselected|no tests ran)\b.*) "
                     r"in [\d.]+s.*=+$")


def read(path: pathlib.Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def figure_rows(logs: pathlib.Path) -> list[list[str]]:
    rows = []
    for log in sorted(logs.glob("*.log")):
        for line in read(log).splitlines():
            if line.startswith("FIGURE |"):
                cells = [cell.strip() for cell in line.split("|")[1:]]
                if len(cells) == 4:
                    rows.append(cells)
    return rows


def test_results(text: str) -> tuple[list[tuple[str, str]], str]:
    """([(test id, outcome)], pytest's closing line or "") of one pytest -v log."""
    results, current = [], None
    for line in text.splitlines():
        line = line.rstrip()
        found = RESULT.match(line)
        if found:  # a skip's reason follows its outcome: "SKIPPED (needs numba.cuda on a GPU)"
            results.append((found[1], f"{found[2]} {found[3].strip()}".strip()[:120]))
            current = None
            continue
        started = TEST_ID.match(line)
        if started:
            current = started[1]
        ended = BARE_RESULT.search(line)
        if current and ended:
            results.append((current, ended[1]))
            current = None
    closing = ""
    for line in text.splitlines():
        found = CLOSING.match(line.strip())
        if found:
            closing = found[1]
    return results, closing


def test_rows(logs: pathlib.Path, no_gpu: bool) -> tuple[list[list[str]], list[str]]:
    rows, failed = [], []
    for name, label, each in TEST_LOGS:
        text = read(logs / name)
        if not text:
            rows.append([f"tests: {label}", "skipped: no GPU" if no_gpu else "not run",
                         "all pass", "SKIP" if no_gpu else "FAIL"])
            continue
        results, closing = test_results(text)
        failed += [test for test, outcome in results if outcome.startswith(("FAILED", "ERROR"))]
        if each:
            for test, outcome in results:
                verdict = {"PASSED": "PASS", "SKIPPED": "SKIP"}.get(outcome.split()[0], "FAIL")
                rows.append([f"test: {test.split('::', 1)[1]}", outcome, "passes", verdict])
        bad = any(outcome.startswith(("FAILED", "ERROR")) for _, outcome in results)
        verdict = "FAIL" if bad or not closing or " passed" not in f" {closing}" else "PASS"
        rows.append([f"tests: {label}", closing or f"cut short after {len(results)} tests",
                     "all pass", verdict])
    return rows, failed


def steps(logs: pathlib.Path) -> list[list[str]]:
    return [[cell.strip() for cell in line.split("|", 3)[1:]]
            for line in read(logs / "setup.log").splitlines() if line.startswith("STEP |")]


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    def cell(text: str) -> str:
        return text.replace("|", "/").replace("\n", " ")

    return [f"| {' | '.join(header)} |", f"|{'---|' * len(header)}",
            *(f"| {' | '.join(cell(c) for c in row)} |" for row in rows)]


def summary(logs: pathlib.Path) -> str:
    setup = read(logs / "setup.log").splitlines()
    heading = " ".join(setup[:1]) or "(no setup.log)"
    facts = [line for line in setup if line.startswith(("GPU:", "python ", "native build:",
                                                        "compiler:", "missing after install:", "native CUDA events:",
                                                        "NO GPU"))]
    figures = figure_rows(logs)
    tests, failed = test_rows(logs, no_gpu=any(line.startswith("NO GPU") for line in setup))
    verdicts = [row[3] for row in figures + tests]
    lines = [f"# bench/gpu_check.sh, {heading}", "",
             *(f"- {fact}" for fact in facts), "",
             f"{verdicts.count('PASS')} pass, {verdicts.count('FAIL')} fail, "
             f"{verdicts.count('SKIP')} skipped, {verdicts.count('INFO')} for information", "",
             *table(["figure", "measured", "target", "result"], figures + tests), "",
             "## Steps (rc 124: its timeout, or the total budget, cut it)", "",
             *table(["step", "rc", "note"], steps(logs))]
    if failed:
        lines += ["", "## Failed tests", "", *(f"- {test}" for test in failed)]
    demo = read(logs / "demo.txt").strip()
    if demo:
        lines += ["", "## make demo's profile on the GPU (its output's end)", "", "```", demo, "```"]
    return "\n".join(lines) + "\n"


def main() -> None:
    logs = pathlib.Path(sys.argv[1])
    text = summary(logs)
    partial = logs / f".{SUMMARY}.partial"  # never a half summary where a whole one was
    partial.write_text(text)
    partial.replace(logs / SUMMARY)
    if "--print" in sys.argv[2:]:
        print(text, end="")


if __name__ == "__main__":
    main()
