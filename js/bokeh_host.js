// anywidget module: shows the timeline's jupyter_bokeh view once BokehJS is in THIS page.
//
// Why a host: jupyter_bokeh's view needs window.Bokeh when it is created, and BokehJS lives in the
// page, not the kernel. A reload, a second tab or a reconnect is a new page without it, while the
// kernel still thinks it loaded it. So each host asks the kernel for BokehJS when the page lacks it
// (sent as a message buffer: never widget state, so never saved into the notebook), or takes it
// from a static rendering that loaded it (nbprof/notebook/static.py), then creates the plot's view.
const WIDGET_REF = "IPY_MODEL_";

function bokehReady() {
  return typeof window.Bokeh !== "undefined" && typeof window.Bokeh.require === "function";
}

// One load per page, whichever host asks first; the others wait on the same promise.
function loadBokeh(model) {
  if (bokehReady()) return Promise.resolve();
  if (window.__nbprof_bokeh_loading) return window.__nbprof_bokeh_loading;
  const loading = new Promise((resolve, reject) => {
    const started = Date.now();
    const onMessage = (message, buffers) => {
      if (!message || message.type !== "bokehjs" || !buffers || !buffers.length) return;
      if (!bokehReady()) {
        const script = document.createElement("script");
        script.textContent = new TextDecoder().decode(buffers[0]);
        document.head.appendChild(script);  // an inline script runs as it is inserted
      }
    };
    model.on("msg:custom", onMessage);
    model.send({ type: "need-bokehjs" });
    // Polled, not only awaited on the message: a static rendering may load it first.
    const timer = setInterval(() => {
      if (bokehReady()) {
        clearInterval(timer);
        model.off("msg:custom", onMessage);
        resolve();
      } else if (Date.now() - started > 30000) {
        clearInterval(timer);
        model.off("msg:custom", onMessage);
        window.__nbprof_bokeh_loading = null;  // the next host may ask again
        reject(new Error("BokehJS did not load (is the kernel running?)"));
      }
    }, 50);
  });
  window.__nbprof_bokeh_loading = loading;
  return loading;
}

// The static rendering next to this widget (same cell) is a copy for front ends without the live
// widget: hide it where the live one draws, so the timeline is not shown twice.
// The view's element joins the page after render returns: look once it is there.
function hideStaticCopy(el, id, tries = 200) {
  if (!el.isConnected) {
    if (tries > 0) setTimeout(() => hideStaticCopy(el, id, tries - 1), 50);
    return;
  }
  const cell = el.closest(".jp-Cell, .cell") || document;
  for (const node of cell.querySelectorAll(`.nbprof-static[data-nbprof-id="${id}"]`)) {
    const output = node.closest(".jp-OutputArea-child") || node;
    output.style.display = "none";
  }
}

async function render({ model, el }) {
  el.classList.add("nbprof-plot-host");
  hideStaticCopy(el, model.get("static_id"));
  try {
    await loadBokeh(model);
  } catch (error) {
    el.textContent = `nbprof: the timeline can't be drawn here: ${error.message}. Re-run the cell.`;
    return;
  }
  const ref = model.get("plot") || "";
  const manager = model.widget_manager;
  const plotModel = await manager.get_model(ref.slice(WIDGET_REF.length));
  const view = await manager.create_view(plotModel, {});
  // After a kernel restart the plot's comm is dead and jupyter_bokeh's send of every zoom or pan
  // throws ("Cannot send") inside BokehJS's change handling: drop those messages instead, so the
  // timeline keeps working in the page.
  const send = view.send.bind(view);
  view.send = (...args) => {
    if (!plotModel.comm_live) return;
    try {
      send(...args);
    } catch (error) {
      console.warn("nbprof: the kernel did not get a timeline change:", error);
    }
  };
  el.appendChild(view.el);
  // Lumino widgets learn they are on screen from this message; Bokeh sizes itself on resize.
  if (view.luminoWidget) view.luminoWidget.processMessage({ type: "after-attach" });
  model.set("views_drawn", model.get("views_drawn") + 1);
  model.save_changes();
  return () => view.remove();
}

export default { render };
