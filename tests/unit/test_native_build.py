"""The native observer's build: its cache key, the fallback where it cannot build, and a first
profile that does not wait for a compile still running."""

from __future__ import annotations

import re
import shlex
import shutil

import pytest
import torch

import nbprof
from nbprof.record import native
from nbprof.record.native import build


@pytest.fixture
def fresh_build(tmp_path, monkeypatch):
    """A build that starts over in an empty cache; the process's own comes back afterwards."""
    native.forget()
    monkeypatch.setenv("NBPROF_NATIVE_CACHE", str(tmp_path / "cache"))
    # a library carried for this torch (bench/gpu_check.sh sets it on a GPU machine without a
    # compiler) would be found before any compile: the tests that want one set it themselves
    monkeypatch.delenv("NBPROF_NATIVE_PREBUILT", raising=False)
    yield tmp_path
    native.forget()


def test_a_changed_source_or_torch_version_changes_the_cache_folder(tmp_path, monkeypatch):
    torch_path = build.torch_dir()
    before = build.cache_key(torch_path)
    copy = tmp_path / "native"
    shutil.copytree(build.HERE, copy)
    monkeypatch.setattr(build, "HERE", copy)
    assert build.cache_key(torch_path) == before
    (copy / "observer.cpp").write_text((copy / "observer.cpp").read_text() + "\n// changed\n")
    after_source = build.cache_key(torch_path)
    identity = build.torch_identity(torch_path)
    monkeypatch.setattr(build, "torch_identity",
                        lambda path: identity.replace(torch.__version__, "9.9.9"))
    after_torch = build.cache_key(torch_path)
    assert len({before, after_source, after_torch}) == 3
    assert torch.__version__ in identity and "git_version" in identity


def test_no_compiler_falls_back_to_torch_with_a_note_that_says_what_to_install(fresh_build,
                                                                               monkeypatch):
    monkeypatch.setenv("CXX", "false")
    with nbprof.profile(cuda=False) as prof:
        torch.ones(2) + 1
    meta = prof.trace.meta
    assert meta["recorder"] == "torch" and "aten::add" in prof.trace.names
    [note] = [note for note in meta["notes"] if "native recorder" in note]
    assert "g++" in note
    with pytest.raises(RuntimeError, match="g\\+\\+"):
        with nbprof.profile(recorder="native", cuda=False):
            pass
    assert not nbprof.record.profiler.is_active()


def test_a_compile_still_running_does_not_hold_up_the_first_profile(fresh_build, monkeypatch):
    release = fresh_build / "release"
    slow = fresh_build / "slow-cxx"  # a compiler that finishes only when the test says so
    slow.write_text(f"#!/bin/sh\nwhile [ ! -e {release} ]; do sleep 0.05; done\nexit 1\n")
    slow.chmod(0o755)
    monkeypatch.setenv("CXX", str(slow))
    monkeypatch.setattr(build, "FIRST_PROFILE_WAIT_S", 0.1)
    build.start_background_build()
    try:
        with nbprof.profile(cuda=False) as prof:
            torch.ones(2) + 1
        assert build.still_building()
        assert prof.trace.meta["recorder"] == "torch" and "aten::add" in prof.trace.names
        assert any(build.STILL_BUILDING in note for note in prof.trace.meta["notes"])
    finally:
        release.touch()
    assert build.library_path() is None and "compiler failed" in build.why_not


def test_a_carried_library_for_this_torch_loads_without_a_compiler_and_no_other(fresh_build,
                                                                                 monkeypatch):
    """A machine without a compiler (a GPU machine's image) loads a library built elsewhere
    against the same torch, from $NBPROF_NATIVE_PREBUILT; one built for another torch (another
    key) is never loaded."""
    if shutil.which(build.compiler()[0]) is None:
        pytest.skip("no C++ compiler here to build the carried library with")
    torch_path = build.torch_dir()
    carried = fresh_build / "carried"
    library = build.prebuild(torch_path, carried)  # what `python -m nbprof.record.native.prebuild` does
    assert library.parent.name == build.prebuilt_key(torch_path)
    monkeypatch.setenv("CXX", "false")
    monkeypatch.setenv("NBPROF_NATIVE_PREBUILT", str(carried))
    assert native.load() is not None and native.load().path == str(library)
    with nbprof.profile(recorder="native", cuda=False) as prof:
        torch.ones(2) + 1
    assert prof.trace.meta["native"]["library"] == str(library) and "aten::add" in prof.trace.names

    native.forget()
    library.parent.rename(carried / "torch-another-release")
    assert native.load() is None
    assert "g++" in native.why_not() and build.prebuilt_key(torch_path) in native.why_not()


def test_a_torch_whose_record_function_members_differ_still_records_natively(tmp_path,
                                                                             monkeypatch):
    """The observer reads RecordFunction's private ``fn_``; against a torch that renamed it (its
    own record_function.h, edited, found first) that compile fails, and the build falls back to
    the public API: the profile still records natively, its meta and a note say which build."""
    if shutil.which(build.compiler()[0]) is None:
        pytest.skip("no C++ compiler here")
    with nbprof.profile(recorder="native", cuda=False) as prof:
        torch.ones(2) + 1
    assert prof.trace.meta["native"]["variant"] == build.FAST
    assert build.NOTE_PUBLIC_API not in prof.trace.meta["notes"]

    header = build.torch_dir() / "include" / "ATen" / "record_function.h"
    renamed = tmp_path / "include" / "ATen" / "record_function.h"
    renamed.parent.mkdir(parents=True)
    text = header.read_text()
    assert re.search(r"\bfn_\b", text)
    renamed.write_text(re.sub(r"\bfn_\b", "fn_renamed_", text))
    monkeypatch.setenv("CXX", f"{shlex.join(build.compiler())} -I {tmp_path / 'include'}")
    monkeypatch.setenv("NBPROF_NATIVE_CACHE", str(tmp_path / "cache"))
    native.forget()
    try:
        with nbprof.profile(recorder="native", cuda=False) as prof:
            x = torch.ones(2, requires_grad=True)
            (x * 2).sum().backward()
    finally:
        native.forget()
    meta = prof.trace.meta
    assert meta["recorder"] == "native" and meta["native"]["variant"] == build.PUBLIC
    assert build.NOTE_PUBLIC_API in meta["notes"]
    assert {"aten::mul", "aten::sum", "MulBackward0"} <= set(prof.trace.names)
    torch_path = build.torch_dir()  # (the cache folders are the renamed header's: CXX differs)
    assert not (build.cache_root() / build.cache_key(torch_path, build.FAST)).joinpath(
        build.LIBRARY).exists()
    assert meta["native"]["library"] == str(
        build.cache_root() / build.cache_key(torch_path, build.PUBLIC) / build.LIBRARY)
