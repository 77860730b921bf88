"""The widget's "Export to Chrome trace" button: writes ``<name>.json.gz`` in the notebook's folder and
also sends the same bytes to the browser as a download (for kernels that run on another machine)."""

from __future__ import annotations

import errno
import os
import pathlib

import anywidget
import ipywidgets
import traitlets

from ..formats.atomic import write_file
from ..timeline.html_text import html_text
from ..timeline.jsfiles import js_path

PERFETTO_URL = "https://ui.perfetto.dev"


def _link(url: str) -> str:
    """A link that opens in a new tab; its address and text are escaped like any other text."""
    return f"<a href='{html_text(url)}' target='_blank' rel='noopener noreferrer'>{html_text(url)}</a>"


PERFETTO_HOW_TO = (f"Open it in Perfetto: go to {_link(PERFETTO_URL)} and drop the file on the page "
                   "(or use &quot;Open trace file&quot;); chrome://tracing &rarr; Load also reads it.")


# What to do when the file could not be written, by errno: the reason alone ("File too large")
# leaves the user guessing, and the widget has no folder field of its own to point at.
_FULL = "the disk is full (or a quota or file size limit was reached): free some space there, or"
_ADVICE = {errno.ENOSPC: _FULL, errno.EDQUOT: _FULL, errno.EFBIG: _FULL,
           errno.EROFS: "that disk is read-only:"}
CHOOSE_ANOTHER_FOLDER = (
    "choose another folder: <code>nbprof.widget(trace, export_dir=&quot;...&quot;)</code> with the "
    "trace of <code>%%cudaprof -o trace</code>, or <code>%%cudaprof --export PATH</code>.")
_WHAT = "the Chrome trace"


def write_failure(path: pathlib.Path, error: OSError) -> str:
    """The status after a failed write: what failed, why, and what to do."""
    reason = (error.strerror or str(error)).removeprefix(f"cannot write {_WHAT}: ")  # said once
    advice = _ADVICE.get(error.errno, "please")
    return (f"<span style='color:#b00'>Could not write {html_text(str(path))}: "
            f"{html_text(reason)}.</span> {html_text(advice[:1].upper() + advice[1:])} "
            f"{CHOOSE_ANOTHER_FOLDER}")


class BrowserDownload(anywidget.AnyWidget):
    """An invisible helper that makes the browser download bytes sent from the kernel."""

    _esm = js_path("download.js")
    delivered = traitlets.Int(0).tag(sync=True)  # downloads the browser started (for tests)

    def send_file(self, data: bytes, filename: str, mime: str = "application/gzip") -> None:
        self.send({"type": "download", "filename": filename, "mime": mime}, buffers=[data])


class ExportPanel(ipywidgets.VBox):
    def __init__(self, trace, name: str, folder: str | os.PathLike | None = None):
        self._trace = trace
        self._name = name
        self._folder = folder
        self.button = ipywidgets.Button(description="Export to Chrome trace", icon="download",
                                        tooltip=f"Write {name}.json.gz beside the notebook and download it")
        self.button.add_class("nbprof-export")
        self.status = ipywidgets.HTML()
        self.status.add_class("nbprof-export-status")
        self.download = BrowserDownload(layout=ipywidgets.Layout(width="0px", height="0px"))
        self.button.on_click(lambda _button: self.export())
        self._written = False  # a second click replaces this trace's file, it adds no name-2 copy
        # The message sits beside the button, where the click was, not below the fold.
        row = ipywidgets.HBox([self.button, self.download, self.status],
                              layout=ipywidgets.Layout(align_items="center"))
        row.add_class("nbprof-export-row")  # where js/download.js finds the message to keep in view
        super().__init__([row])

    def export(self) -> pathlib.Path | None:
        """Write the file and start the browser download; problems show in the panel, never raise."""
        from ..formats.chrome import chrome_trace_bytes

        try:
            data = chrome_trace_bytes(self._trace, gzip=True)
        except Exception as error:  # shown to the user in the widget: a traceback would be lost there
            self.status.value = f"<span style='color:#b00'>Export failed: {html_text(str(error))}</span>"
            return None
        folder = pathlib.Path(self._folder) if self._folder is not None else pathlib.Path.cwd()
        path = folder / f"{self._name}.json.gz"
        self.download.send_file(data, path.name)
        replaced = self._written and path.exists()
        try:
            write_file(path, data, _WHAT)  # whole or not at all: an old export stays
        except OSError as error:
            self.status.value = (
                f"{write_failure(path, error)} Your browser was sent "
                f"<code>{html_text(path.name)}</code> as a download instead. {PERFETTO_HOW_TO}")
            return None
        self._written = True
        verb = "Replaced" if replaced else "Wrote"
        self.status.value = (f"{verb} <code>{html_text(str(path))}</code> ({len(data) / 1e6:.2f} MB) and sent "
                             f"it to your browser as a download. {PERFETTO_HOW_TO}")
        return path
