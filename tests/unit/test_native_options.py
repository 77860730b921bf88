"""How a user picks the recorder: nbprof.profile(recorder=...), %%cudaprof --recorder, nbprof run
--recorder; and what the trace then says."""

from __future__ import annotations

import pytest
import torch

import nbprof
from nbprof.cli.main import main
from nbprof.notebook.args import CudaprofUsageError, parse_options
from nbprof.record import native


def test_profile_refuses_an_unknown_recorder_and_keeps_nothing_on():
    with pytest.raises(ValueError, match="'auto', 'native' or 'torch'"):
        nbprof.profile(recorder="kineto")
    assert not nbprof.record.profiler.is_active()


def test_the_torch_recorder_is_there_when_asked():
    with nbprof.profile(cuda=False, recorder="torch") as prof:
        torch.ones(2) + 1
    assert prof.trace.meta["recorder"] == "torch" and prof.trace.meta["backend"] == "kineto-cpu"
    assert "aten::add" in prof.trace.names


@pytest.mark.skipif(native.load() is None, reason="native observer unavailable")
def test_auto_records_natively_and_meta_names_the_build():
    with nbprof.profile(cuda=False) as prof:
        torch.ones(2) + 1
    meta = prof.trace.meta
    assert meta["recorder"] == "native" and meta["native"]["abi"] == 3
    assert meta["native"]["library"].endswith("libnbprof_observer.so")


def test_the_magic_takes_recorder_and_refuses_a_wrong_one():
    assert parse_options("--recorder torch").recorder == "torch"
    assert parse_options("").recorder == "auto"
    with pytest.raises(CudaprofUsageError, match="invalid choice"):
        parse_options("--recorder kineto")


def test_nbprof_run_refuses_a_wrong_recorder_before_running_the_script(tmp_path, capsys):
    script = tmp_path / "s.py"
    script.write_text("open(__file__ + '.ran', 'w').close()\n")
    with pytest.raises(SystemExit) as stop:  # argparse's usage error, status 2
        main(["run", "-o", str(tmp_path / "p.html"), "--recorder", "kineto", str(script)])
    assert stop.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
    assert not (tmp_path / "s.py.ran").exists()
