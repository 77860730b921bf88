// anywidget module: turns a "download" message from the kernel into a browser download, so an export
// reaches the user's machine even when the kernel runs elsewhere. The bytes travel as a message buffer
// (never as widget state), so they are not saved into the notebook. It also keeps the export
// message in view.
function render({ model, el }) {
  el.classList.add("nbprof-download");
  const onMessage = (message, buffers) => {
    if (!message || message.type !== "download" || !buffers || !buffers.length) return;
    const blob = new Blob([buffers[0]], { type: message.mime || "application/octet-stream" });
    const url = URL.createObjectURL(blob);
    const link = document.createElement("a");
    link.href = url;
    link.download = message.filename;
    link.style.display = "none";
    document.body.appendChild(link);
    link.click();
    link.remove();
    // Revoking at once can cancel the download in some browsers.
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    model.set("delivered", model.get("delivered") + 1);
    model.save_changes();
  };
  model.on("msg:custom", onMessage);
  // The export message grows beside the button, which often sits at the bottom of the window:
  // each time the kernel writes a message, scroll just enough to show all of it.
  let watcher = null;
  let tries = 0;
  const watch = () => {
    const status = el.closest(".nbprof-export-row")?.querySelector(".nbprof-export-status");
    if (!status) {  // not in the page yet
      if (tries++ < 50) setTimeout(watch, 100);
      return;
    }
    watcher = new MutationObserver(() => status.scrollIntoView({ block: "nearest" }));
    watcher.observe(status, { childList: true, subtree: true, characterData: true });
  };
  watch();
  return () => {
    model.off("msg:custom", onMessage);
    if (watcher) watcher.disconnect();
  };
}

export default { render };
