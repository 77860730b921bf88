"""``kernels=`` and ``%%cudaprof --kernels/--no-kernels``: parsed once, checked before anything runs."""

import pytest

import nbprof
from nbprof.notebook.args import parse_options
from nbprof.record.profiler import is_active


@pytest.mark.parametrize("line, kernels", [("", None), ("--kernels", True),
                                           ("--no-kernels", False),
                                           ("--kernels --no-kernels", False)])
def test_the_magic_flags(line, kernels):
    assert parse_options(line).kernels is kernels


def test_a_bad_value_is_a_type_error():
    with pytest.raises(TypeError, match="kernels must be None, True or False"):
        nbprof.profile(kernels="yes")


def test_kernels_required_without_a_gpu_says_what_to_do():
    with pytest.raises(RuntimeError, match="kernels=None"):
        with nbprof.profile(kernels=True):
            pass
    assert not is_active()
    with nbprof.profile(kernels=False) as prof:  # no GPU: the CPU path, as with None
        pass
    assert prof.trace.meta["backend"] in ("native-cpu", "kineto-cpu")
