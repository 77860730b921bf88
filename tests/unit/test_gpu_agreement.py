"""trace.gpu_agreement() and the summary's side-by-side GPU columns, on a hand-built Trace that
has both kinds of GPU interval: per-op CUDA-event intervals (kind "op") and the kernels CUPTI saw
(linked to the runtime call nested in each op, as Kineto links them)."""


import pytest

from nbprof.model import GPU_KINDS, Trace
from nbprof.analysis.tables import records
from blocked_imports import run_without

OP, KERNEL, MEMCPY = (GPU_KINDS.index(kind) for kind in ("op", "kernel", "memcpy"))
NAMES = ["step", "aten::mm", "cudaLaunchKernel", "aten::relu", "aten::copy_", "gemm",
         "relu_kernel", "Memcpy HtoD", "aten::to", "cudaMemcpyAsync"]


def both_kinds():
    # CPU (thread 0): step [0, 1000) holds aten::mm [10, 100) > cudaLaunchKernel [50, 60);
    # aten::relu [200, 260) > cudaLaunchKernel [220, 230); aten::copy_ [300, 350) holds a
    # memcpy's runtime call [310, 320) and a second launch [330, 340); aten::to [400, 410), a
    # CPU-side op that still gets CUDA events.
    cpu = [(0, 1000, 0), (10, 100, 1), (50, 60, 2), (200, 260, 3), (220, 230, 2),
           (300, 350, 4), (310, 320, 9), (330, 340, 2), (400, 410, 8)]
    # launch ids are rows of `cpu` (Trace.build sorts and remaps them)
    gpu = [(60, 400, 1, OP, 1),        # mm's events: 340 ns around its 320 ns kernel
           (70, 390, 5, KERNEL, 2),
           (400, 480, 3, OP, 3),       # relu's events: 80 ns, queued, for a 40 ns kernel
           (405, 445, 6, KERNEL, 4),
           (480, 600, 4, OP, 5),       # copy_: 120 ns of events; memcpy + kernel, 100 ns apart
           (490, 540, 7, MEMCPY, 6),
           (530, 590, 5, KERNEL, 7),   # overlaps the memcpy: the union is 490..590
           (600, 601, 8, OP, 8)]       # aten::to: events, no kernel
    return Trace.build(
        start_ns=[c[0] for c in cpu], end_ns=[c[1] for c in cpu], thread=[0] * len(cpu),
        name_id=[c[2] for c in cpu], names=NAMES, threads=[(1, 1, "main")],
        gpu_start_ns=[g[0] for g in gpu], gpu_end_ns=[g[1] for g in gpu],
        gpu_name_id=[g[2] for g in gpu], gpu_device=[0] * len(gpu),
        gpu_stream=[0 if g[3] == OP else 7 for g in gpu], gpu_launch=[g[4] for g in gpu],
        gpu_kind=[g[3] for g in gpu])


def test_each_op_with_events_and_kernels_gets_offsets_and_ratio():
    agreement = both_kinds().gpu_agreement(by="op")
    ops = {row["name"]: row for row in records(agreement)}
    assert set(ops) == {"aten::mm", "aten::relu", "aten::copy_"}  # step: no events
    mm, relu, copy = ops["aten::mm"], ops["aten::relu"], ops["aten::copy_"]
    # the kernels are the nested launch's: they count for the op above it
    assert (mm["events_us"], mm["kernels_us"]) == pytest.approx((0.340, 0.320))
    assert (mm["start_offset_us"], mm["end_offset_us"]) == pytest.approx((0.010, 0.010))
    assert mm["ratio"] == pytest.approx(340 / 320) and not mm["disagree"]
    assert relu["ratio"] == pytest.approx(2.0) and relu["disagree"]
    assert (relu["start_offset_us"], relu["end_offset_us"]) == pytest.approx((0.005, 0.035))
    # a memcpy and a kernel that overlap count once: the union, 490..590
    assert copy["kernels_us"] == pytest.approx(0.100) and copy["ratio"] == pytest.approx(1.2)
    assert agreement.attrs["events_only"] == 1  # aten::to


def test_per_name_totals_and_the_text_flag_what_disagrees():
    agreement = both_kinds().gpu_agreement()
    names = {row["name"]: row for row in records(agreement)}
    assert names["aten::relu"]["disagreeing_ops"] == 1 and names["aten::relu"]["disagree"]
    assert names["aten::mm"]["count"] == 1 and not names["aten::mm"]["disagree"]
    text = agreement.table()
    relu_line = [line for line in text.splitlines() if line.startswith("aten::relu")][0]
    mm_line = [line for line in text.splitlines() if line.startswith("aten::mm")][0]
    assert "2.00 !" in relu_line and "!" not in mm_line
    assert "more than 10%" in text and "1 ops with CUDA-event intervals launched no kernel" in text


def test_summary_table_shows_events_and_kernels_side_by_side_and_flags_disagreement():
    trace = both_kinds()
    rows = {row.name: row for row in trace.key_averages()}
    assert rows["aten::mm"].gpu_events_total == pytest.approx(0.340)
    assert rows["aten::mm"].gpu_kernels_total == pytest.approx(0.320)
    # CUDA total counts kernels only: the events' intervals would count the same work twice
    assert rows["cudaLaunchKernel"].cuda_time_total == pytest.approx(0.320 + 0.040 + 0.060)
    assert rows["aten::copy_"].cuda_time_total == 0.0
    text = trace.table(row_limit=-1)
    header = [line for line in text.splitlines() if line.startswith("Name")][0]
    assert header.index("GPU (events)") < header.index("GPU (kernels)")
    relu_line = [line for line in text.splitlines() if line.startswith("aten::relu")][0]
    mm_line = [line for line in text.splitlines() if line.startswith("aten::mm")][0]
    assert "0.080us" in relu_line and "0.040us" in relu_line and "2.00 !" in relu_line
    assert "0.340us" in mm_line and "0.320us" in mm_line and "!" not in mm_line
    assert "more than 10%" in text


def test_a_trace_with_one_kind_keeps_the_cuda_columns():
    trace = Trace.build(start_ns=[0], end_ns=[10], thread=[0], name_id=[0], names=["aten::mm"],
                        threads=[(1, 1, "main")], gpu_start_ns=[2], gpu_end_ns=[9],
                        gpu_name_id=[0], gpu_device=[0], gpu_stream=[0], gpu_launch=[0],
                        gpu_kind=[OP])
    assert "GPU (kernels)" not in trace.table() and "CUDA total" in trace.table()
    assert trace.key_averages()[0].cuda_time_total == pytest.approx(0.007)
    assert len(records(trace.gpu_agreement(by="op"))) == 0
    assert trace.gpu_agreement().table().startswith("No op has both")


def test_the_clock_and_agreement_modules_import_no_torch_bokeh_or_ipython():
    code = (
        "import nbprof.record.convert, nbprof.record.gpu_clock, nbprof.analysis.gpu_agreement, nbprof.record.own_cuda_calls\n"
    )
    result = run_without(code)
    assert result.returncode == 0, result.stderr


def test_busy_time_and_lanes_say_what_measured_them():
    from nbprof.timeline.lanes import build_lanes

    trace = both_kinds()
    text = trace.table()
    # events: 60..601 on stream 0 (their union); kernels: 70..390, 405..445, 490..590 on stream 7
    assert "GPU busy (op events): 0.541us" in text
    assert "GPU busy (kernels): 0.460us" in text
    # the CUDA events' lane names no stream: the legacy records do not say which it was
    assert build_lanes(trace).labels == ["main (1)", "GPU 0 (op events)", "GPU 0 stream 7"]
    events_only = Trace.build(start_ns=[0], end_ns=[10], thread=[0], name_id=[0],
                              names=["aten::mm"], threads=[(1, 1, "main")], gpu_start_ns=[2],
                              gpu_end_ns=[9], gpu_name_id=[0], gpu_device=[1], gpu_stream=[0],
                              gpu_launch=[0], gpu_kind=[OP])
    assert "GPU busy (kernels)" not in events_only.table()
    assert build_lanes(events_only).labels == ["main (1)", "GPU 1 (op events)"]


def test_an_exported_and_reloaded_trace_keeps_the_cross_check_and_the_gpu_clock(tmp_path):
    import nbprof

    trace = both_kinds()
    trace.meta["gpu_clock"] = {0: {"anchor_error_ns": 1_700, "drift_ppm": 12.5, "anchors": 2,
                                   "span_ns": 10 ** 9, "untimed_events": 0}}
    path = trace.export_chrome_trace(tmp_path / "both.json.gz")
    loaded = nbprof.load(path)
    assert records(loaded.gpu_agreement(by="op")) == records(trace.gpu_agreement(by="op"))
    assert loaded.meta["gpu_clock"] == trace.meta["gpu_clock"]  # device keys stay ints


def test_kernels_on_another_device_are_not_what_the_events_timed():
    # aten::copy_ [0, 100) with events on device 0 and two nested launches: one kernel on
    # device 0, one (a peer copy's) on device 1
    trace = Trace.build(
        start_ns=[0, 10, 50], end_ns=[100, 20, 60], thread=[0, 0, 0], name_id=[0, 1, 1],
        names=["aten::copy_", "cudaLaunchKernel", "k"], threads=[(1, 1, "main")],
        gpu_start_ns=[15, 20, 30], gpu_end_ns=[115, 110, 500], gpu_name_id=[0, 2, 2],
        gpu_device=[0, 0, 1], gpu_stream=[0, 7, 7], gpu_launch=[0, 1, 2],
        gpu_kind=[OP, KERNEL, KERNEL])
    (row,) = records(trace.gpu_agreement(by="op"))
    assert row["kernels_us"] == pytest.approx(0.090) and row["end_offset_us"] == pytest.approx(0.005)


def test_the_kernel_summary_lists_kernels_not_op_events_where_it_has_both():
    summary = records(both_kinds().kernel_summary())
    assert {row["name"] for row in summary} == {"gemm", "relu_kernel"}
    assert sum(row["total_us"] for row in summary) == pytest.approx(0.320 + 0.040 + 0.060)


def test_the_cross_check_on_what_the_recorders_converter_builds():
    # Kineto's ops + the legacy events + CUPTI's kernels through match_events (the fakes of
    # test_match_events.py): mm's events bracket its kernel closely, relu's hold 1.2 us more
    from test_match_events import convert, kineto_records

    trace = convert(kineto_records())
    ops = records(trace.gpu_agreement(by="op"))
    by_name = {}
    for row in ops:
        by_name.setdefault(row["name"], []).append(row)
    assert {name: len(rows) for name, rows in by_name.items()} == {
        "aten::mm": 2, "aten::relu": 1, "MmBackward0": 1}
    first_mm = min(by_name["aten::mm"], key=lambda row: row["id"])
    assert first_mm["kernels_us"] == pytest.approx(23.5, abs=0.01)
    assert first_mm["events_us"] == pytest.approx(25.0, abs=0.3)
    assert not first_mm["disagree"]
    (relu,) = by_name["aten::relu"]
    assert relu["ratio"] == pytest.approx(5.0 / 3.8, abs=0.1) and relu["disagree"]
    assert "GPU (kernels)" in trace.table()


def test_one_ops_agreement_is_its_row_of_the_whole_cross_check():
    from nbprof.analysis.gpu_agreement import op_agreement

    trace = both_kinds()
    for row in records(trace.gpu_agreement(by="op")):
        one = op_agreement(trace, row["id"])
        assert (one.events_ns / 1e3, one.kernels_ns / 1e3) == pytest.approx(
            (row["events_us"], row["kernels_us"]))
        assert one.disagree == row["disagree"]
    to = trace.names.index("aten::to")
    assert op_agreement(trace, int((trace.name_id == to).nonzero()[0][0])) is None  # no kernel
    assert op_agreement(trace, 0) is None  # step: no event interval


def test_the_widget_summary_and_details_show_events_and_kernels_side_by_side():
    from nbprof.notebook.details import details_html
    from nbprof.notebook.summary import summary_columns, summary_html, summary_rows

    trace = both_kinds()
    titles = [column["title"] for column in summary_columns(trace)]
    assert titles[4:7] == ["GPU (events)", "GPU (kernels)", "Events/kernels"]
    assert "CUDA total" not in titles
    relu = next(row for row in summary_rows(trace) if row["name"] == "aten::relu")
    assert relu["gpu_events_total"] == pytest.approx(0.080)
    assert relu["gpu_kernels_total"] == pytest.approx(0.040)
    assert relu["events_per_kernels_text"] == "2.00 !"  # more than 10% apart: flagged
    assert "GPU (kernels)" in summary_html(trace) and "2.00 !" in summary_html(trace)
    relu_id = int((trace.name_id == trace.names.index("aten::relu")).nonzero()[0][0])
    pane = details_html(trace, relu_id)
    assert "events 80 ns · kernels 40 ns · ratio 2.00: more than 10% apart" in pane
    mm_id = int((trace.name_id == trace.names.index("aten::mm")).nonzero()[0][0])
    assert "ratio 1.06" in details_html(trace, mm_id) and "apart" not in details_html(trace, mm_id)


def test_a_call_with_events_but_no_kernel_does_not_skew_its_names_ratio():
    # two aten::mm calls: one's 100 ns of events hold its 100 ns kernel, the other (on CPU
    # tensors) has 100 ns of events and no kernel: they agree, as gpu_agreement says
    from nbprof.notebook.summary import summary_rows

    trace = Trace.build(
        start_ns=[0, 200], end_ns=[50, 250], thread=[0, 0], name_id=[0, 0],
        names=["aten::mm", "gemm"], threads=[(1, 1, "main")],
        gpu_start_ns=[10, 20, 300], gpu_end_ns=[110, 120, 400], gpu_name_id=[0, 1, 0],
        gpu_device=[0, 0, 0], gpu_stream=[0, 7, 0], gpu_launch=[0, 0, 1],
        gpu_kind=[OP, KERNEL, OP])
    [mm] = records(trace.gpu_agreement())
    assert mm["ratio"] == pytest.approx(1.0) and not mm["disagree"]
    [row] = [row for row in trace.key_averages() if row.name == "aten::mm"]
    assert row.gpu_events_total == pytest.approx(0.2)  # all its events are still shown
    assert row.events_per_kernels == pytest.approx(1.0)
    assert "1.00" in trace.table() and "1.00 !" not in trace.table()
    assert next(r for r in summary_rows(trace) if r["name"] == "aten::mm")[
        "events_per_kernels_text"] == "1.00"


def test_sync_rows_beside_op_events_are_no_kernels_to_check_against():
    from nbprof.analysis.averages import has_events_and_kernels

    sync = GPU_KINDS.index("sync")
    trace = Trace.build(
        start_ns=[0], end_ns=[50], thread=[0], name_id=[0], names=["aten::mm", "sync"],
        threads=[(1, 1, "main")], gpu_start_ns=[10, 20], gpu_end_ns=[110, 30],
        gpu_name_id=[0, 1], gpu_device=[0, 0], gpu_stream=[0, 7], gpu_launch=[0, -1],
        gpu_kind=[OP, sync])
    assert not has_events_and_kernels(trace)
    assert "GPU (kernels)" not in trace.table()
