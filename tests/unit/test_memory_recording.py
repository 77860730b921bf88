"""Recording memory: ``nbprof.profile(memory=True)``, ``%%cudaprof --memory``, ``nbprof run --memory``."""

import torch

import nbprof
from nbprof.notebook.args import parse_options
from nbprof.record.profiler import NOTE_NO_MEMORY


def test_without_memory_nothing_is_recorded_and_nothing_is_said():
    with nbprof.profile() as prof:
        torch.ones(1000) + 1
    assert len(prof.trace.memory) == 0
    assert NOTE_NO_MEMORY not in prof.trace.meta["notes"]


def test_the_magic_and_the_cli_take_memory():
    from nbprof.cli.main import _parser as parser

    assert parse_options("--memory").memory and not parse_options("").memory
    options = parser()[0].parse_args(["run", "-o", "p.html", "--memory", "s.py"])
    assert options.memory


def test_the_torch_path_records_no_memory_and_says_why():
    with nbprof.profile(memory=True) as prof:
        x = torch.ones(1 << 20)
        del x
    assert len(prof.trace.memory) == 0
    assert NOTE_NO_MEMORY in prof.trace.meta["notes"]
