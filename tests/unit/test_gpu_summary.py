"""bench/gpu_summary.py, the GPU run's summary.md: from a real pytest -v -s log (a test's own
prints between its id and its result), bench figure lines and gpu_check.sh's step lines, each
figure and each test against its target; a run cut short still says what finished."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TESTS = '''
import pytest

def test_prints_then_passes():
    print("event pair 7.0 us, native 7.1 us")

def test_prints_then_fails():
    print("native [1.0] cupti [2.0]")
    assert False

@pytest.mark.parametrize("where", ["main", "worker"])
def test_on(where):
    pass

def test_skipped():
    pytest.skip("needs numba.cuda on a GPU")
'''


def summarise(logs: pathlib.Path) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_summary.py"), str(logs),
                           "--print"], capture_output=True, text=True, check=True)
    assert done.stdout == (logs / "summary.md").read_text()
    return done.stdout


def rows(text: str) -> dict:
    found = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 4:
            found[cells[0]] = cells[1:]
    return found


def test_figures_tests_and_steps_each_get_a_row_with_their_verdict(tmp_path):
    (tmp_path / "test_sample.py").write_text(TESTS)
    logs = tmp_path / "logs"
    logs.mkdir()
    ran = subprocess.run([sys.executable, "-m", "pytest", "-v", "-s", "-p", "no:cacheprovider",
                          str(tmp_path / "test_sample.py")], capture_output=True, text=True,
                         cwd=tmp_path)
    # ids as gpu_check.sh's pytest prints them, from the checkout's root
    (logs / "gpu_tests_native.log").write_text(
        ran.stdout.replace("test_sample.py::", "tests/gpu/test_sample.py::"))
    figures = subprocess.run([sys.executable, "-c", """
import sys; sys.path.insert(0, sys.argv[1])
from bench.figures import figure
figure("native events / torch.profiler", 0.42, 0.5)
figure("events + CUPTI / torch.profiler", 1.31, 1.0)
figure("numba launch added", float("nan"), 3.0, " us")
figure("exit speed-up", 3.14159, digits=1)
""", str(ROOT)], capture_output=True, text=True, check=True).stdout
    (logs / "gpu_bench_native.log").write_text("prose the bench prints\n" + figures)
    (logs / "setup.log").write_text("Sat Dec  5 03:00:00 UTC 2026\nGPU: NVIDIA H200, 580, 1 MiB\n"
                                    "STEP | 1a. native GPU tests | 1 | a note | with a bar\n")

    text = summarise(logs)
    found = rows(text)
    assert found["native events / torch.profiler"] == ["0.42x", "<= 0.5x", "PASS"]
    assert found["events + CUPTI / torch.profiler"] == ["1.31x", "<= 1.0x", "FAIL"]
    assert found["numba launch added"] == ["not measured", "<= 3.0 us", "FAIL"]
    assert found["exit speed-up"] == ["3.1x", "-", "INFO"]
    assert found["test: test_prints_then_passes"] == ["PASSED", "passes", "PASS"]
    assert found["test: test_prints_then_fails"] == ["FAILED", "passes", "FAIL"]
    assert found["test: test_on[worker]"][2] == "PASS"
    assert found["test: test_skipped"] == ["SKIPPED (needs numba.cuda on a GPU)", "passes", "SKIP"]
    assert found["tests: native recorder + memory GPU tests (issues 19, 23)"] == [
        "1 failed, 3 passed, 1 skipped", "all pass", "FAIL"]
    assert found["tests: tests/gpu, the rest"] == ["not run", "all pass", "FAIL"]
    assert "| 1a. native GPU tests | 1 | a note / with a bar |" in text
    assert "- tests/gpu/test_sample.py::test_prints_then_fails" in text
    assert "- GPU: NVIDIA H200, 580, 1 MiB" in text


def test_a_test_run_cut_short_fails_and_no_gpu_skips(tmp_path):
    (tmp_path / "gpu_tests_native.log").write_text(
        "tests/gpu/test_native_gpu.py::test_a PASSED\n"
        "tests/gpu/test_native_gpu.py::test_b Fatal Python error: Segmentation fault\n")
    found = rows(summarise(tmp_path))
    assert found["test: test_a"][2] == "PASS"
    assert found["tests: native recorder + memory GPU tests (issues 19, 23)"] == [
        "cut short after 1 tests", "all pass", "FAIL"]

    (tmp_path / "gpu_tests_native.log").unlink()
    (tmp_path / "setup.log").write_text("NO GPU: torch.cuda.is_available() is False here\n")
    found = rows(summarise(tmp_path))
    assert found["tests: tests/gpu, the rest"] == ["skipped: no GPU", "all pass", "SKIP"]
