// anywidget module: a sortable table (the Summary, the Overview's and Compare's tables). A header
// click sorts by that column (again: the other way); a row click selects that row (the kernel
// highlights its events); the selection is kept by the row's key (its name unless it has one), so
// it stays on its row through a re-sort. Sorting is done here, on the rows sent once. It never
// scrolls sideways: number columns fit their text, names are cut (full name on hover). A row's
// call path, where it has one, shows as a grey line under its name.
const STYLE = `
.nbprof-summary-table { max-height: 260px; overflow-y: auto; overflow-x: hidden; }
.nbprof-summary-table table { width: 100%; table-layout: fixed; border-collapse: collapse;
  font-size: 12px; }
.nbprof-summary-table th { position: sticky; top: 0; background: var(--jp-layout-color2, #eee);
  cursor: pointer; user-select: none; padding: 2px 6px; vertical-align: bottom; }
.nbprof-summary-table td { padding: 1px 6px; white-space: nowrap; overflow: hidden;
  text-overflow: ellipsis; }
.nbprof-summary-table .num { text-align: right; font-variant-numeric: tabular-nums; }
.nbprof-summary-table th:first-child, .nbprof-summary-table td:first-child { text-align: left; }
.nbprof-summary-table tbody tr { cursor: pointer; }
.nbprof-summary-table tbody tr:hover { background: var(--jp-layout-color3, #ddd); }
.nbprof-summary-table tbody tr.selected { background: #ffe08a; }
.nbprof-summary-table .path { color: #777; font-size: 11px; overflow: hidden;
  text-overflow: ellipsis; }`;

function render({ model, el }) {
  el.classList.add("nbprof-summary-table");
  const style = document.createElement("style");
  style.textContent = STYLE;
  const table = document.createElement("table");
  el.append(style, table);

  // Narrower than this (a 1000 px window with Lab's file browser open leaves ~550 px), the
  // averages (total / calls, one division away) give their room to the names.
  const NARROW_PX = 640;
  const isNarrow = () => el.clientWidth > 0 && el.clientWidth < NARROW_PX;
  let narrow = false;
  const draw = () => {
    const key = model.get("sort_key");
    narrow = isNarrow();
    const columns = model.get("columns").filter(
      column => !narrow || !column.key.endsWith("_avg") || column.key === key);
    const descending = model.get("descending");
    const rows = [...model.get("rows")].sort((a, b) => {
      const order = key === "name" ? String(a.name).localeCompare(String(b.name)) : a[key] - b[key];
      return descending ? -order : order;
    });
    // Number columns as wide as their longest text (so none is cut), the name column takes the
    // rest and cuts long names (the title has them): no sideways scrolling, and with a fixed
    // layout every header sits over its column.
    const colgroup = document.createElement("colgroup");
    for (const column of columns) {
      const col = document.createElement("col");
      if (column.key !== "name") {
        const longest = Math.max(...rows.map(row => String(row[`${column.key}_text`]).length),
                                 ...column.title.split(" ").map(word => word.length + 2));
        col.style.width = `calc(${longest + 1}ch + 12px)`;
      }
      colgroup.appendChild(col);
    }
    const head = document.createElement("tr");
    for (const column of columns) {
      const th = document.createElement("th");
      th.className = column.key === "name" ? "" : "num";
      th.title = `${column.tip} (click to sort)`;
      th.dataset.key = column.key;
      th.textContent = column.title + (column.key === key ? (descending ? " ▼" : " ▲") : "");
      th.addEventListener("click", () => {
        if (column.key === model.get("sort_key")) {
          model.set("descending", !model.get("descending"));
        } else {
          model.set("sort_key", column.key);
          model.set("descending", column.key !== "name");  // numbers largest first, names A-Z
        }
        model.save_changes();
      });
      head.appendChild(th);
    }
    const body = document.createElement("tbody");
    const selected = model.get("selected");
    for (const row of rows) {
      const tr = document.createElement("tr");
      const rowKey = row.key !== undefined ? row.key : row.name;
      tr.dataset.name = row.name;
      tr.dataset.key = rowKey;
      if (rowKey === selected) tr.classList.add("selected");
      for (const column of columns) {
        const td = document.createElement("td");
        if (column.key === "name") {
          td.textContent = row.label;
          td.title = row.label;  // the full name on hover: the cell cuts long ones
          if (row.path) {  // what tells this row from others of its name (the whole on hover)
            const path = document.createElement("div");
            path.className = "path";
            path.textContent = row.path;
            td.appendChild(path);
            td.title = `${row.label}\n${row.full_path || row.path}`;
          }
        } else {
          td.className = "num";
          td.textContent = row[`${column.key}_text`];
        }
        tr.appendChild(td);
      }
      tr.addEventListener("click", () => {
        model.set("selected", rowKey);
        model.save_changes();
      });
      body.appendChild(tr);
    }
    const thead = document.createElement("thead");
    thead.appendChild(head);
    table.replaceChildren(colgroup, thead, body);
  };
  draw();
  for (const name of ["rows", "columns", "sort_key", "descending", "selected"]) {
    model.on(`change:${name}`, draw);
  }
  // Drawn while its tab was hidden (width 0), or the window resized: redraw when that changes.
  const resized = new ResizeObserver(() => { if (isNarrow() !== narrow) draw(); });
  resized.observe(el);
  return () => {
    resized.disconnect();
    for (const name of ["rows", "columns", "sort_key", "descending", "selected"]) {
      model.off(`change:${name}`, draw);
    }
  };
}

export default { render };
