"""%%cudaprof in a real IPython shell with real torch: what the user sees and what stays defined."""

import os
import threading

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import nbprof
from nbprof.record import profiler

WORK = "import torch\nx = torch.ones(16)\nfor _ in range(20):\n    x = x + 1\n"


@pytest.fixture(scope="module")
def shell():
    ip = InteractiveShell.instance()  # the running shell, or a new one
    ip.run_line_magic("load_ext", "nbprof")
    yield ip
    assert not profiler.is_active()


def run(shell, cell):
    with capture_output() as captured:
        result = shell.run_cell(cell)
    return result, captured


def names(trace):
    return {trace.names[i] for i in trace.name_id}


def test_cell_runs_in_the_user_namespace_and_shows_its_own_output(shell):
    result, out = run(shell, "%%cudaprof -o trace --no-display\n" + WORK + "print('hello from the cell')\nx.sum()")
    assert result.success
    assert "hello from the cell" in out.stdout
    assert shell.user_ns["x"][0].item() == 21.0  # defined, as without the magic
    assert out.outputs == []  # --no-display: no widget
    assert result.result.item() == 21.0 * 16  # the last value is the cell's result (Out[n]) as usual
    trace = shell.user_ns["trace"]
    assert isinstance(trace, nbprof.Trace)
    assert (trace.name_id == trace.names.index("aten::add")).sum() == 20
    assert out.stderr == ""  # no profiler noise
    assert not profiler.is_active()


def test_line_magic_profiles_one_statement(shell):
    result, _ = run(shell, "import torch\n%cudaprof -o line_trace --no-display y = torch.ones(3).mul(2)")
    assert result.success
    assert shell.user_ns["y"].tolist() == [2.0, 2.0, 2.0]
    assert "aten::mul" in names(shell.user_ns["line_trace"])


def test_unknown_option_prints_usage_and_does_not_run_the_cell(shell):
    result, out = run(shell, "%%cudaprof --bogus\nnot_run = 1")
    assert isinstance(result.error_in_exec, UsageError)
    assert "usage: %%cudaprof" in str(result.error_in_exec)
    assert "unrecognized arguments: --bogus" in str(result.error_in_exec)
    assert "not_run" not in shell.user_ns
    result, _ = run(shell, "after_bad_option = 1")
    assert result.success and shell.user_ns["after_bad_option"] == 1


def test_help_prints_the_options_and_does_not_run_the_cell(shell):
    result, out = run(shell, "%%cudaprof -h\nnot_run_help = 1")
    assert result.success
    assert "--repeat N" in out.stdout and "--export PATH" in out.stdout
    assert "not_run_help" not in shell.user_ns


def test_empty_cell_says_there_was_nothing_to_profile(shell):
    for cell in ("%%cudaprof --table\n   \n", "%%cudaprof\n# just a comment\n", "%cudaprof --table"):
        result, out = run(shell, cell)
        assert result.success
        assert "nothing to profile" in out.stdout


def test_cudaprof_inside_an_active_profile_says_it_cannot_nest(shell):
    result, out = run(shell, "import nbprof\nwith nbprof.profile():\n"
                             "    get_ipython().run_cell_magic('cudaprof', '--no-display', 'nested = 1')")
    assert isinstance(result.error_in_exec, UsageError)
    assert "can't nest" in str(result.error_in_exec)
    assert "nested" not in shell.user_ns
    assert not profiler.is_active()
    result, _ = run(shell, "%%cudaprof --no-display -o after_nest\nafter = torch.ones(2) + 1")
    assert result.success and "aten::add" in names(shell.user_ns["after_nest"])


def test_kernels_asked_without_a_gpu_says_why_it_cannot_start_not_that_it_nests(shell):
    run(shell, "import torch")
    result, _ = run(shell, "%%cudaprof --kernels --no-display\nasked = torch.ones(2) + 1")
    assert isinstance(result.error_in_exec, UsageError)
    message = str(result.error_in_exec)
    assert "can't start" in message and "kernels=True needs a GPU" in message
    assert "nest" not in message and "asked" not in shell.user_ns and not profiler.is_active()
    result, _ = run(shell, "%%cudaprof --no-display -o after_kernels\nafter = torch.ones(2) + 1")
    assert result.success and "aten::add" in names(shell.user_ns["after_kernels"])


def test_a_raising_cell_shows_what_ran_then_raises_as_without_the_magic(shell):
    cell = ("%%cudaprof -o failed --no-display\nimport torch\nbefore = torch.ones(4).mul(3)\n"
            "raise ValueError('broken step')\nnever = 1")
    result, out = run(shell, cell)
    assert isinstance(result.error_in_exec, ValueError)
    assert str(result.error_in_exec) == "broken step"
    assert "The cell raised ValueError" in out.stdout
    assert "aten::mul" in names(shell.user_ns["failed"])
    assert "before" in shell.user_ns and "never" not in shell.user_ns
    assert not profiler.is_active()


def test_ctrl_c_stops_the_cell_keeps_what_was_recorded_and_leaves_the_profiler_off(shell):
    # A real SIGINT, as Jupyter's interrupt button sends, in the middle of a loop of torch ops.
    cell = ("%%cudaprof -o interrupted --no-display\nimport os, signal, torch\nsteps = 0\n"
            "x = torch.ones(8)\nwhile True:\n    x = x + 1\n    steps += 1\n"
            "    if steps == 50:\n        os.kill(os.getpid(), signal.SIGINT)\n")
    result, out = run(shell, cell)
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    assert "Interrupted" in out.stdout
    trace = shell.user_ns["interrupted"]
    assert (trace.name_id == trace.names.index("aten::add")).sum() >= 50
    assert not profiler.is_active()
    result, _ = run(shell, "%%cudaprof --no-display -o after_interrupt\nz = torch.ones(2) * 2")
    assert result.success and "aten::mul" in names(shell.user_ns["after_interrupt"])


def test_ctrl_c_while_the_profiler_stops_still_shows_the_trace_and_leaves_it_off(shell):
    # The cell ends, then a real SIGINT arrives just as nbprof turns torch's profiler off.
    cell = ("%%cudaprof -o stopped_by_ctrl_c --no-display\nimport os, signal, torch\n"
            "from nbprof.record import profiler as p\nrecorder = p._active_profile._recorder\n"
            "real_stop = recorder.stop\n"
            "recorder.stop = lambda: (os.kill(os.getpid(), signal.SIGINT), real_stop())[1]\n"
            "x = torch.ones(8) + 1")
    result, out = run(shell, cell)
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    assert "Interrupted" in out.stdout
    assert "aten::add" in names(shell.user_ns["stopped_by_ctrl_c"])
    assert not profiler.is_active()
    result, _ = run(shell, "%%cudaprof --no-display -o after_stop_interrupt\nz = torch.ones(2) * 2")
    assert result.success
    assert names(shell.user_ns["after_stop_interrupt"]) >= {"aten::ones", "aten::mul"}
    assert "aten::add" not in names(shell.user_ns["after_stop_interrupt"])


def test_warmup_and_repeat_give_a_per_run_summary(shell):
    shell.user_ns["calls"] = 0
    result, out = run(shell, "%%cudaprof -o repeated --no-display --warmup 2 --repeat 3\n"
                             "calls += 1\nw = torch.ones(4).mul(2)")
    assert result.success
    assert shell.user_ns["calls"] == 5  # 2 unprofiled warm-up runs + 3 profiled
    assert "over 3 runs" in out.stdout and "aten::mul" in out.stdout and "CPU max" in out.stdout
    trace = shell.user_ns["repeated"]
    assert (trace.name_id == trace.names.index("aten::mul")).sum() == 3


def test_table_and_sort(shell):
    result, out = run(shell, "%%cudaprof --no-display --table --sort count --row-limit 3\n" + WORK)
    assert result.success
    lines = out.stdout.splitlines()
    assert lines[1].split()[0] == "Name"
    assert lines[3].split()[0] == "aten::add"  # the most called op first
    assert "more rows" in out.stdout


def test_the_cells_own_warnings_still_show(shell):
    with pytest.warns(UserWarning, match="from the cell"):
        result, out = run(shell, "%%cudaprof --no-display\nimport warnings\n"
                                 "warnings.warn('from the cell', UserWarning)\nq = torch.ones(2) + 1")
    assert result.success


def test_record_shapes_reach_the_trace(shell):
    result, _ = run(shell, "%%cudaprof --no-display --record-shapes -o shaped\n"
                           "m = torch.ones(2, 3) @ torch.ones(3, 4)")
    assert result.success
    trace = shell.user_ns["shaped"]
    mm = [i for i in range(len(trace)) if trace.names[trace.name_id[i]] == "aten::mm"]
    assert mm and [2, 3] in list(trace.shapes[mm[0]])


def test_with_stack_keeps_the_cells_python_frames(shell):
    result, _ = run(shell, "%%cudaprof --no-display --with-stack -o stacked\n"
                           "def step():\n    return torch.ones(2, 3) @ torch.ones(3, 4)\nm = step()")
    assert result.success
    stacks = shell.user_ns["stacked"].stacks
    assert any("step" in frame for stack in stacks.values() for frame in stack)


def test_with_stack_lanes_show_the_users_code_not_the_machinery(shell):
    import torch

    done = threading.Event()
    # a thread of the machinery (as ipykernel's are): idle in the standard library all along
    idle = threading.Thread(target=done.wait, name="library-idle", daemon=True)

    def users_worker():  # the user's own background thread: its frames and ops stay
        while not done.wait(0.002):
            torch.ones(3).add(1)

    worker = threading.Thread(target=users_worker, name="users-worker", daemon=True)
    idle.start()
    worker.start()
    number = shell.execution_count
    try:
        result, _ = run(shell, "%%cudaprof --no-display --with-stack -o lanes\n"
                               "import time, torch\ndef step():\n    return torch.ones(2, 3) @ torch.ones(3, 4)\n"
                               "for _ in range(3):\n    m = step()\n    time.sleep(0.02)")
    finally:
        done.set()
    assert result.success
    trace = shell.user_ns["lanes"]
    lanes = [thread.name for thread in trace.threads]
    assert "library-idle" not in lanes and "users-worker" in lanes
    python = trace.categories.index("python_function")
    frames = [trace.names[trace.name_id[row]] for row in range(len(trace))
              if trace.category[row] == python]
    assert not [frame for frame in frames if "nbprof" in frame or "IPython" in frame
                or "_bootstrap" in frame]
    main = trace.thread == 0
    top = {trace.names[trace.name_id[row]] for row in range(len(trace))
           if main[row] and trace.parent[row] < 0}
    assert top == {f"cell [{number}]"}  # the cell is the outermost frame of its lane
    assert f"cell [{number}], line 2: step" in frames  # where step is defined
    worker_frames = {trace.names[trace.name_id[row]] for row in range(len(trace))
                     if trace.threads[trace.thread[row]].name == "users-worker"}
    assert any(frame.endswith(": users_worker") for frame in worker_frames)
    assert "aten::add" in worker_frames


def test_no_files_are_written_unless_asked(shell, tmp_path):
    before = set(os.listdir(tmp_path))
    shell.run_line_magic("cd", str(tmp_path))
    try:
        result, _ = run(shell, "%%cudaprof --no-display\n" + WORK)
    finally:
        shell.run_line_magic("cd", "-")
    assert result.success and set(os.listdir(tmp_path)) == before


def test_repeat_shows_the_per_run_summary_in_the_widget(shell):
    result, out = run(shell, "%%cudaprof --repeat 2\nv = torch.ones(4).mul(2)")
    assert result.success
    assert "over 2 runs" not in out.stdout  # not printed twice: the widget holds it
    # the widget's saved copy (the output before it) holds the text summary
    copy = next(o for o in out.outputs if "nbprof" in (o.metadata or {}))
    assert "over 2 runs" in copy.data["text/plain"] and "aten::mul" in copy.data["text/plain"]


def test_cudaprof_inside_torchs_own_profiler_says_it_cannot_nest(shell):
    result, _ = run(shell, "import torch.profiler\nwith torch.profiler.profile():\n"
                           "    get_ipython().run_cell_magic('cudaprof', '--no-display', 'inside_torch = 1')")
    assert isinstance(result.error_in_exec, UsageError)
    assert "can't nest" in str(result.error_in_exec) and "torch" in str(result.error_in_exec)
    assert "inside_torch" not in shell.user_ns
    result, _ = run(shell, "%%cudaprof --no-display -o after_torch\nq = torch.ones(2) + 1")
    assert result.success and "aten::add" in names(shell.user_ns["after_torch"])


def test_question_mark_help_lists_the_options(shell):
    doc = shell.find_cell_magic("cudaprof").__doc__
    assert "--warmup N" in doc and "--no-display" in doc


@pytest.mark.parametrize("filename", ["cell.json", "cell.json.gz"])
def test_export_writes_a_chrome_trace_that_loads_back(shell, tmp_path, filename):
    from nbprof.formats.chrome.check import check_chrome_trace

    path = tmp_path / filename
    result, out = run(shell, f"%%cudaprof --no-display -o exported --export '{path}'\n" + WORK)
    assert result.success
    assert f"Chrome trace written to {path}" in out.stdout
    assert check_chrome_trace(str(path)) == []
    assert len(nbprof.load(path)) == len(shell.user_ns["exported"])


def test_export_to_a_missing_folder_is_refused_before_the_cell_runs(shell, tmp_path):
    path = tmp_path / "no-such-folder" / "cell.json.gz"
    result, out = run(shell, f"%%cudaprof -o kept --export '{path}'\nnever_set = torch.ones(2) + 1")
    assert isinstance(result.error_in_exec, UsageError)
    assert f"--export {path}: the folder {path.parent} does not exist" in str(result.error_in_exec)
    assert "the cell did not run" in str(result.error_in_exec)
    assert "never_set" not in shell.user_ns and not profiler.is_active()


def test_export_onto_a_device_a_pipe_or_a_folder_is_refused_before_the_cell_runs(shell, tmp_path):
    import stat

    try:
        os.mknod(tmp_path / "device.json", stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null-like
    except PermissionError:
        pytest.skip("making a device node needs root")
    (tmp_path / "link.json").symlink_to(tmp_path / "device.json")
    os.mkfifo(tmp_path / "pipe.json")
    (tmp_path / "folder.json").mkdir()
    for name, said in [("device.json", "a device"), ("link.json", "a device"),
                       ("pipe.json", "a pipe (FIFO)"), ("folder.json", "a folder")]:
        result, out = run(shell, f"%%cudaprof -o kept --export '{tmp_path / name}'\n"
                                 "never_set = torch.ones(2) + 1")
        assert isinstance(result.error_in_exec, UsageError), name
        assert said in str(result.error_in_exec) and "the cell did not run" in str(
            result.error_in_exec)
        assert "never_set" not in shell.user_ns and not profiler.is_active()
    assert stat.S_ISCHR(os.stat(tmp_path / "link.json").st_mode)
    assert stat.S_ISFIFO(os.stat(tmp_path / "pipe.json").st_mode)


def failing_export(tmp_path):
    """An export path that passes every check, and the cell's code that then makes the write fail
    (a folder put where the file goes: the world changed during the run)."""
    path = tmp_path / "late.json"
    return path, f"import os\nos.mkdir({str(path)!r})\n"


def test_an_export_that_fails_after_the_run_is_a_clear_error_after_the_widget(shell, tmp_path):
    path, breaks_it = failing_export(tmp_path)
    result, out = run(shell, f"%%cudaprof -o kept --export '{path}'\n{breaks_it}"
                             "k = torch.ones(2) + 1")
    assert isinstance(result.error_in_exec, UsageError)
    assert "--export could not write" in str(result.error_in_exec)
    assert "it is a folder" in str(result.error_in_exec)
    assert "kept" in shell.user_ns and "k" in shell.user_ns  # the cell ran, the trace is kept
    assert any("application/vnd.jupyter.widget-view+json" in o.data for o in out.outputs)


def test_a_raising_cell_with_a_failing_export_raises_the_cells_own_error(shell, tmp_path):
    path, breaks_it = failing_export(tmp_path)
    result, out = run(shell, f"%%cudaprof -o kept_too --no-display --export '{path}'\n"
                             f"{breaks_it}m = torch.ones(2) + 1\nraise ValueError('broken step')")
    assert isinstance(result.error_in_exec, ValueError)  # not the export's UsageError
    assert "--export could not write" in out.stderr  # which is still said
    assert "aten::add" in names(shell.user_ns["kept_too"])
    assert not profiler.is_active()


def test_a_raising_cell_says_so_in_the_widgets_text_fallback(shell):
    result, out = run(shell, "%%cudaprof\nj = torch.ones(2) * 3\nraise KeyError('missing')")
    assert isinstance(result.error_in_exec, KeyError)
    copy = next(o for o in out.outputs if "nbprof" in (o.metadata or {}))
    assert "The cell raised KeyError" in copy.data["text/plain"]
    assert "The cell raised KeyError" in copy.data["text/html"]
    assert "aten::mul" in copy.data["text/plain"]


def test_a_raising_cell_shows_its_traceback_above_a_collapsed_widget(shell, monkeypatch):
    from nbprof.notebook import magic

    order = []
    real_traceback, real_show = shell.showtraceback, magic._show_widget
    monkeypatch.setattr(shell, "showtraceback", lambda *a, **k: (order.append("traceback"),
                                                                 real_traceback(*a, **k)))
    monkeypatch.setattr(magic, "_show_widget", lambda *a, **k: (order.append("widget"), real_show(*a, **k)))
    result, out = run(shell, "%%cudaprof\nq = torch.ones(2) * 3\nraise KeyError('late')")
    assert isinstance(result.error_in_exec, KeyError)
    assert order == ["traceback", "widget"]  # IPython's traceback first, then the widget
    assert any("application/vnd.jupyter.widget-view+json" in o.data for o in out.outputs)
    run(shell, "x_after = 1")  # the hook ran once: a later cell shows nothing of it
    assert order == ["traceback", "widget"]


def test_a_collapsed_widget_opens_on_a_click():
    import torch

    with nbprof.profile() as prof:
        torch.ones(2).add(1)
    widget = nbprof.widget(prof.trace, note="The cell raised ValueError", collapsed=True)
    assert widget.body.layout.display == "none" and widget.expand.layout.display == ""
    widget.expand.value = True  # the click
    assert widget.body.layout.display == "" and widget.expand.description == "Hide the timeline"


def test_a_cell_without_torch_ops_says_so_in_one_line(shell):
    result, out = run(shell, "%%cudaprof\nplain = sum(range(10))")
    assert result.success
    assert "ran no torch ops" in out.stdout and len(out.stdout.strip().splitlines()) == 1
    assert not [o for o in out.outputs if "application/vnd.jupyter.widget-view+json" in o.data]


def test_no_display_without_a_variable_warns_that_the_trace_is_discarded(shell):
    _, out = run(shell, "%%cudaprof --no-display\n" + WORK)
    assert "discards the trace" in out.stdout and "-o VAR" in out.stdout
    _, kept = run(shell, "%%cudaprof --no-display -o kept_trace\n" + WORK)
    assert "discards" not in kept.stdout
