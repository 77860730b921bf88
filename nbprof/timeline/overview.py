"""The Overview's figure: one stacked bar per step (compute / communication / memcpy / the three
kinds of GPU idle / the GPU on earlier steps' work), as tall as the step's wall time, from the rows
of ``trace.steps()``. Tapping a bar selects it in ``source``;
the widget listens and zooms the timeline to that step."""

from __future__ import annotations

from bokeh.models import ColumnDataSource, HoverTool, Legend, TapTool
from bokeh.plotting import figure

from ..analysis.steps import step_name

# (column of the step table, legend label, colour)
GPU_STACKS = (("compute_us", "compute", "#4e79a7"), ("communication_us", "communication", "#e15759"),
              ("memcpy_us", "memcpy", "#edc948"), ("idle_host_us", "idle: host-bound", "#bab0ac"),
              ("idle_sync_us", "idle: sync", "#ff9da7"), ("idle_launch_us", "idle: launch gaps", "#b07aa1"),
              # the rest of the step's window (its wall time, as the list and the findings say)
              ("gpu_other_us", "earlier steps' work", "#e8e8e8"))
CPU_STACKS = (("cpu_busy_us", "CPU busy", "#4e79a7"), ("cpu_other_us", "CPU not in an op", "#bab0ac"))


def _ms(column: str) -> str:
    return column.removesuffix("_us") + "_ms"


def step_bars(rows: list[dict], *, has_gpu: bool, height: int = 230, width: int | None = None):
    """(figure, source): the stacked bars of the steps in ``rows`` (dicts of the step table)."""
    labels = [f"{index + 1}: {step_name(row)}" for index, row in enumerate(rows)]
    stacks = GPU_STACKS if has_gpu else CPU_STACKS
    data = {"label": labels, "step": [step_name(row) for row in rows],
            "start_ns": [int(row["start_ns"]) for row in rows],
            "end_ns": [int(row["end_ns"]) for row in rows],
            "wall_ms": [row["wall_us"] / 1e3 for row in rows]}
    for column, _, _ in stacks:
        values = ([row["wall_us"] - row["cpu_busy_us"] for row in rows] if column == "cpu_other_us"
                  else [row[column] for row in rows])
        data[_ms(column)] = [value / 1e3 for value in values]  # ms on the y axis
    source = ColumnDataSource(data, name="nbprof_step_bars")
    size = {"width": width} if width else {"sizing_mode": "stretch_width"}
    plot = figure(x_range=labels, height=height, toolbar_location=None, tools="",
                  y_axis_label="ms", name="nbprof_steps_plot", **size)
    renderers = plot.vbar_stack([_ms(c) for c, _, _ in stacks], x="label", width=0.8, source=source,
                                color=[colour for _, _, colour in stacks], line_color=None)
    plot.add_layout(Legend(items=[(label, [renderer]) for (_, label, _), renderer in zip(stacks, renderers)],
                           orientation="horizontal", label_text_font_size="11px", padding=2,
                           spacing=6), "above")
    plot.add_tools(TapTool(renderers=renderers), HoverTool(renderers=renderers, tooltips=[
        ("step", "@step"), ("wall", "@wall_ms{0.000} ms"),
        *((label, f"@{_ms(column)}{{0.000}} ms") for column, label, _ in stacks)]))
    plot.xaxis.major_label_orientation = 0.6 if len(labels) > 8 else 0
    plot.xgrid.grid_line_color = None
    plot.y_range.start = 0
    return plot, source
