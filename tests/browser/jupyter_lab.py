"""One real JupyterLab for the browser tests (tests/browser/conftest.py starts it once per run),
and the steps the tests share: open a notebook, run all its cells, wait for the timeline."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # earlier tabs reopen hidden

# The timeline tags its plot "nbprof-ready" once the browser has decoded the events and drawn.
READY_JS = """() => (window.Bokeh && Bokeh.documents || []).some(doc =>
    [...doc.all_models].some(m => (m.tags || []).includes("nbprof-ready")))"""


def write_notebook(root: pathlib.Path, name: str, cells: list[str]) -> None:
    """A notebook of code cells with the python3 kernel, as the Lab tests open it."""
    import nbformat

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, root / name)


def open_in_chromium(playwright, path: pathlib.Path, height: int = 800):
    """A standalone page in a fresh Chromium: (browser, page, the page's uncaught errors)."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={"width": 1200, "height": height})
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(path.as_uri())
    return browser, page, errors


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_lab(base: pathlib.Path):
    """JupyterLab on loopback serving ``base/notebooks``; yields (url, that folder)."""
    root = base / "notebooks"
    root.mkdir(exist_ok=True)
    config = base / "config" / "labconfig"
    config.mkdir(parents=True, exist_ok=True)
    # The news pop-up would cover the notebook.
    (config / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}))
    venv_bin = pathlib.Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{venv_bin}{os.pathsep}{os.environ['PATH']}",  # the kernel's python
               JUPYTER_CONFIG_DIR=str(base / "config"),
               JUPYTERLAB_SETTINGS_DIR=str(base / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"))
    port = _free_port()
    log_path = base / "lab.log"
    log = open(log_path, "w")
    server = subprocess.Popen(
        [str(venv_bin / "jupyter"), "lab", "--allow-root", "--no-browser", "--ServerApp.token=",
         "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True", "--ip", "127.0.0.1",
         "--port", str(port), "--ServerApp.root_dir", str(root)],
        env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not start: {log_path.read_text()[-2000:]}")
                time.sleep(0.3)
        yield url, root
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@contextlib.contextmanager
def run_lab(base: pathlib.Path, root: pathlib.Path, notebook: str):
    """A JupyterLab of its own serving ``root`` (``base/notebooks``) with ``notebook``'s kernel
    started; yields its URL (for a module that needs a separate server)."""
    if root != base / "notebooks":
        raise ValueError(f"run_lab serves {base / 'notebooks'}, not {root}")
    with running_lab(base) as (url, _):
        start_kernel_session(url, notebook)
        yield url


def api(url: str, path: str, method: str = "GET", body: dict | None = None):
    request = urllib.request.Request(f"{url}{path}", method=method,
                                     headers={"Content-Type": "application/json"},
                                     data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(request, timeout=30) as response:
        text = response.read()
    return json.loads(text) if text else None


def start_kernel_session(url: str, notebook: str) -> dict:
    """Start the notebook's kernel up front: Lab then attaches to it instead of asking which
    kernel to use (a "Select Kernel" dialog that otherwise shows up at random)."""
    return api(url, "/api/sessions", "POST", {"path": notebook, "name": notebook,
                                              "type": "notebook", "kernel": {"name": "python3"}})


def open_notebook(page, url: str, notebook: str) -> None:
    page.goto(f"{url}/lab/tree/{notebook}?reset")
    page.wait_for_selector(f"{PANEL} .jp-Notebook")
    # the kernel must be idle before Run All, or the first cells may be dropped
    page.wait_for_selector(f"{PANEL} .jp-Notebook-ExecutionIndicator[data-status='idle']",
                           state="attached")


# A code cell's prompt reads [*] once queued, [n] once run; [ ] means Run All did not reach it.
_STARTED_JS = """(panel) => [...document.querySelectorAll(panel + ' .jp-CodeCell .jp-InputPrompt')]
    .some(prompt => /\\[(\\*|\\d+)\\]/.test(prompt.textContent))"""


def answer_dialogs(page) -> list[str]:
    """Answer every open Lab dialog ("Select Kernel", "Kernel Restarting"...) with its default
    button, or Escape where it has none; the dialogs' texts, for a failure to name them. A dialog
    can open at any moment under load and holds every click until it is answered."""
    texts = []
    for _ in range(5):
        dialog = page.locator(".jp-Dialog")
        if not dialog.count():
            break
        texts.append(" ".join(dialog.first.inner_text().split()))
        accept = page.locator(".jp-Dialog .jp-mod-accept")
        if accept.count():
            accept.first.click()
        else:
            page.keyboard.press("Escape")
        page.wait_for_timeout(300)
    return texts


def run_all_cells(page, attempts=3):
    """Run All Cells, and again if no cell started: under heavy load Lab once ran none of them
    (and a "Select Kernel" dialog can still appear late, holding the run until it is answered)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(attempts):
        if answer_dialogs(page):
            page.wait_for_selector(f"{PANEL} .jp-Notebook-ExecutionIndicator[data-status='idle']",
                                   state="attached")
        menu(page, "Run", "Run All Cells")
        try:
            page.wait_for_function(_STARTED_JS, arg=PANEL, timeout=30_000)
            return
        except PlaywrightTimeout:
            continue
    raise AssertionError(f"Run All Cells started no cell in {attempts} attempts")


# Where a Run All stands: every code cell's prompt ([n] ran, [*] queued or running, [ ] not run)
# and whether the kernel is idle.
_RUN_STATE_JS = """(panel) => {
    const prompts = [...document.querySelectorAll(panel + ' .jp-CodeCell .jp-InputPrompt')]
        .map(p => /\\[\\d+\\]/.test(p.textContent) ? 'ran' : /\\[\\*\\]/.test(p.textContent) ? 'queued' : 'not run');
    const indicator = document.querySelector(panel + ' .jp-Notebook-ExecutionIndicator');
    return {prompts, idle: !indicator || indicator.dataset.status === 'idle'}; }"""


def wait_until_all_cells_ran(page, timeout_ms: int = 180_000) -> None:
    """Wait for the end of a Run All: counting widgets is not enough, as a cell that has not yet
    run still shows its previous output. Under load Lab sometimes runs the first cells and drops
    the rest (the kernel idle, later prompts still [ ]): then the cells from the first dropped one
    are run again (Run Selected Cell and All Below), never the ones that ran."""
    deadline = time.monotonic() + timeout_ms / 1000
    dropped_since = None
    while time.monotonic() < deadline:
        state = page.evaluate(_RUN_STATE_JS, PANEL)
        prompts = state["prompts"]
        if prompts and all(p == "ran" for p in prompts) and state["idle"]:
            return
        dropped = state["idle"] and "queued" not in prompts and "not run" in prompts
        if not dropped:
            dropped_since = None
        elif dropped_since is None:
            dropped_since = time.monotonic()
        elif time.monotonic() - dropped_since > 5:
            first = prompts.index("not run")
            page.locator(f"{PANEL} .jp-CodeCell .jp-InputPrompt").nth(first).click()
            menu(page, "Run", "Run Selected Cell and All Below")
            dropped_since = None
        page.wait_for_timeout(500)
    raise AssertionError(f"Run All did not finish in {timeout_ms / 1000:.0f} s: "
                         f"{page.evaluate(_RUN_STATE_JS, PANEL)}")


def menu(page, top: str, item: str, attempts: int = 4) -> None:
    """Open menu ``top`` and click ``item``. A dialog that opens in the way (it closes the menu
    too) is answered (answer_dialogs) and the two clicks tried again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    seen = []
    for _ in range(attempts):
        seen += answer_dialogs(page)
        try:
            page.click(f".lm-MenuBar-itemLabel:text-is('{top}')", timeout=15_000)
            page.click(f".lm-Menu-itemLabel:text-is('{item}')", timeout=15_000)
            return
        except PlaywrightTimeout:
            page.keyboard.press("Escape")  # a menu left open
    raise AssertionError(f"menu {top} > {item} could not be clicked in {attempts} attempts; "
                         f"dialogs seen: {seen}")
