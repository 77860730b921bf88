"""%%cudaprof cells that must behave as IPython's own: a bad -o name, --repeat where a run raises,
a SyntaxError, top-level await. A real IPython shell with real torch."""

import re

from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from nbprof.record import profiler
from test_magic_shell import names, shell  # noqa: F401  (the IPython shell with nbprof loaded: a fixture)

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run(shell, cell, store_history=True):  # as the kernel runs cells: counted, stored
    shell.run_cell("import asyncio, torch")
    with capture_output() as captured:
        result = shell.run_cell(cell, store_history=store_history)
    return result, captured


def shown(captured) -> str:
    return ANSI.sub("", captured.stdout + captured.stderr)


def test_a_keyword_or_ipythons_own_name_as_the_variable_is_one_line_and_nothing_runs(shell):
    for option, complaint in (("-o class", "'class' is not a Python variable name (it is a keyword)"),
                              ("-o In", "In is one of IPython's own names"),
                              ("--compare get_ipython", "get_ipython is one of IPython's own names")):
        result, out = run(shell, f"%%cudaprof {option}\nnot_run = 1")
        assert isinstance(result.error_in_exec, UsageError), option
        assert complaint in str(result.error_in_exec)
        assert "Traceback" not in shown(out) and "not_run" not in shell.user_ns


def test_repeat_where_a_run_raises_reports_the_runs_that_really_ran(shell):
    cell = ("%%cudaprof --repeat 3 --no-display -o partial\n"
            "attempt = globals().get('attempt', 0) + 1\ntorch.ones(4).add(1)\n"
            "if attempt == 2:\n    raise ValueError('run 2 broke')\n")
    shell.user_ns.pop("attempt", None)
    result, out = run(shell, cell)
    assert isinstance(result.error_in_exec, ValueError)
    text = shown(out)
    assert "The cell raised ValueError in run 2 of 3 (1 of 3 runs completed)" in text
    assert "Per run, over the 1 of 3 runs that completed:" in text
    assert "over 2 runs" not in text
    add_row = next(line for line in text.splitlines() if line.startswith("aten::add "))
    assert add_row.split()[-1] == "1"  # calls per run: of the completed run only
    assert shell.user_ns["partial"].meta["repeat"] == {"runs": 3, "completed": 1}
    result, out = run(shell, cell.replace("attempt == 2", "attempt >= 1"))  # the first run raises
    assert "in run 1 of 3 (0 of 3 runs completed)" in shown(out)
    assert "No run of the 3 completed, so there is no per-run summary." in shown(out)
    assert not profiler.is_active()


def test_a_syntax_error_shows_as_ipythons_own(shell):
    for code in ("x = (1,\ny = 2\n", "return 5\n", "def f(:\n    pass\n"):
        plain_result, plain = run(shell, code)
        result, out = run(shell, "%%cudaprof\n" + code)
        assert type(result.error_before_exec) is type(plain_result.error_before_exec), code
        assert result.error_in_exec is None  # as IPython's own: the cell never started
        number = result.execution_count
        expected = shown(plain).replace(f"In[{plain_result.execution_count}]", f"In[{number}]")
        assert shown(out) == expected, code
        assert "nbprof" not in shown(out) and "interactiveshell" not in shown(out)


def test_a_runtime_error_names_the_running_cell(shell):
    for store_history in (True, False):  # a kernel's cell, and a cell run from code
        result, out = run(shell, "%%cudaprof --no-display\nz = torch.ones(2)\nraise KeyError('k')",
                          store_history=store_history)
        assert isinstance(result.error_in_exec, KeyError)
        assert f"Cell In[{result.execution_count}], line 2" in shown(out)


def test_top_level_await_works_as_in_ipythons_own_cells(shell):
    _, plain = run(shell, "import asyncio\nplain_loop = await asyncio.sleep(0, asyncio.get_running_loop())")
    result, out = run(shell, "%%cudaprof -o awaited --no-display\n"
                             "cell_loop = await asyncio.sleep(0, asyncio.get_running_loop())\n"
                             "w = torch.ones(3).mul(2)\nawait asyncio.sleep(0, w.sum())")
    assert result.success, shown(out)
    assert result.result.item() == 6.0  # the awaited last value is Out[n]
    assert shell.user_ns["cell_loop"] is shell.user_ns["plain_loop"]  # IPython's own event loop
    assert "aten::mul" in names(shell.user_ns["awaited"])
    repeated, out = run(shell, "%%cudaprof --repeat 2 --no-display -o twice\n"
                               "await asyncio.sleep(0)\ntorch.ones(2).add(1)")
    assert repeated.success, shown(out)
    assert "Per run, over 2 runs:" in shown(out)
    line, out = run(shell, "%cudaprof -o one_line await asyncio.sleep(0, torch.ones(2).add(3))")
    assert line.success and "aten::add" in names(shell.user_ns["one_line"])
    assert not profiler.is_active()


def test_an_await_cell_with_a_bad_option_is_the_options_usage_error(shell):
    result, _ = run(shell, "%%cudaprof --bogus\nawait asyncio.sleep(0)")
    assert isinstance(result.error_in_exec, UsageError)
    assert "unrecognized arguments: --bogus" in str(result.error_in_exec)


def test_reloading_the_extension_keeps_one_transform(shell):
    shell.run_line_magic("reload_ext", "nbprof")
    ours = [t for t in shell.input_transformers_cleanup if type(t).__name__ == "CudaprofCellTransform"]
    assert len(ours) == 1


def test_a_warm_up_run_that_raises_says_nothing_was_profiled(shell):
    result, out = run(shell, "%%cudaprof --warmup 2\ntorch.ones(2).add(1)\nraise OSError('no data')")
    assert isinstance(result.error_in_exec, OSError)
    assert "warm-up run 1 of 2 raised (nothing was profiled)" in shown(out)
    assert not profiler.is_active()


def test_torch_profiler_inside_the_cell_is_said_under_it_in_one_plain_line(shell):
    result, out = run(shell, "%%cudaprof --no-display -o cut\ntorch.ones(2).add(1)\n"
                             "with torch.profiler.profile():\n    torch.ones(2).mul(2)\n")
    assert result.success
    said = [line for line in out.stderr.splitlines() if "torch.profiler" in line]
    assert said == [line for line in said if line.startswith("%%cudaprof: torch.profiler was started")]
    assert len(said) == 1 and "RuntimeWarning" not in out.stderr and "magic.py" not in out.stderr
    assert not profiler.is_active()


def test_the_cell_compiles_with_the_users_future_flags_not_nbprofs(shell):
    # magic.py has `from __future__ import annotations`; the builtin compile() would hand it to
    # the cell, turning its annotations into strings. IPython's own compiler keeps the user's.
    plain, _ = run(shell, "def plain_f(x: int): pass\nplain_f.__annotations__")
    result, out = run(shell, "%%cudaprof --no-display\ndef magic_f(x: int): pass\nmagic_f.__annotations__")
    assert plain.result == {"x": int}
    assert result.result == {"x": int}, shown(out)


def test_o_over_a_builtin_or_an_imported_module_is_refused_unless_forced(shell):
    shell.run_cell("import numpy as np\nimport os.path as osp\nfrom collections import abc\n"
                   "import torch")
    for name, complaint in (("print", "print is a Python builtin"),
                            ("len", "len is a Python builtin"),
                            ("display", "display is a Python builtin"),  # IPython's, in builtins
                            ("torch", "torch is the module torch, imported in this notebook"),
                            ("np", "np is the module numpy"), ("osp", "osp is the module posixpath"),
                            ("abc", "abc is the module collections.abc")):
        before = shell.user_ns.get(name)
        result, out = run(shell, f"%%cudaprof -o {name}\nnot_run = 1")
        assert isinstance(result.error_in_exec, UsageError), name
        assert complaint in str(result.error_in_exec) and "--force" in str(result.error_in_exec)
        assert "Traceback" not in shown(out) and "not_run" not in shell.user_ns
        assert shell.user_ns.get(name) is before and not profiler.is_active()
    assert shell.run_cell("print(len('abc'))").success  # still the builtins
    # --force binds it anyway; a name the user already rebound, or a Trace, is theirs to reuse.
    result, _ = run(shell, "%%cudaprof -o len --force --no-display\ntorch.ones(2).add(1)")
    assert result.success and "aten::add" in names(shell.user_ns.pop("len"))
    shell.user_ns["sum"] = 3
    for name in ("sum", "sum"):
        result, _ = run(shell, f"%%cudaprof -o {name} --no-display\ntorch.ones(2).add(1)")
        assert result.success and "aten::add" in names(shell.user_ns[name])
    del shell.user_ns["sum"]
