"""trace.steps(), the idle kinds, kernel_summary() and the findings: on synthetic traces where the
answer is known, and on a real torch.profiler trace checked against its own annotations."""

import gzip
import json

import numpy as np
import pytest

import nbprof
from nbprof.model import GPU_KINDS, Trace
from nbprof.analysis.steps import run_marker
from blocked_imports import run_without

US = 1000


def build(events, kernels=(), threads=((1, 1, "main"),)):
    """events: (name, start_us, end_us[, thread]); kernels: (name, start_us, end_us, launching
    event index, stream[, kind])."""
    names = sorted({e[0] for e in events} | {k[0] for k in kernels})
    index = {name: i for i, name in enumerate(names)}
    return Trace.build(
        start_ns=[e[1] * US for e in events], end_ns=[e[2] * US for e in events],
        thread=[e[3] if len(e) > 3 else 0 for e in events], name_id=[index[e[0]] for e in events],
        names=names, threads=threads,
        gpu_start_ns=[k[1] * US for k in kernels], gpu_end_ns=[k[2] * US for k in kernels],
        gpu_name_id=[index[k[0]] for k in kernels], gpu_device=[0] * len(kernels),
        gpu_stream=[k[4] for k in kernels], gpu_launch=[k[3] for k in kernels],
        gpu_kind=[GPU_KINDS.index(k[5] if len(k) > 5 else "kernel") for k in kernels])


def rows(table):
    from nbprof.analysis.tables import records

    return records(table)


# Step 1 [0, 1000us): every idle kind once, each of a known length.
#   K1 5..100, K2 103..200: gaps 0..5 and 100..103 are launch gaps (8us in all);
#   aten::item 150..201 (a sync) runs into the gap 200..400: waiting on a sync (200us);
#   aten::foo 500..880 launches nothing: the gap 500..900 is host-bound (400us).
IDLE_EVENTS = [
    ("ProfilerStep#7", 0, 1000), ("aten::mm", 0, 50), ("aten::add", 60, 70),
    ("aten::item", 150, 201), ("cudaStreamSynchronize", 160, 201), ("aten::mul", 380, 390),
    ("aten::foo", 500, 880), ("aten::relu", 880, 890),
]
IDLE_KERNELS = [("k1", 5, 100, 1, 7), ("k2", 103, 200, 2, 7), ("k3", 400, 500, 5, 7),
                ("k4", 900, 1000, 7, 7)]


def test_idle_time_is_split_into_host_sync_and_launch_gaps():
    trace = build(IDLE_EVENTS, IDLE_KERNELS)
    [step] = rows(trace.steps())
    assert step["step"] == "ProfilerStep#7" and step["source"] == "ProfilerStep"
    assert step["idle_launch_us"] == pytest.approx(8)
    assert step["idle_sync_us"] == pytest.approx(200)
    assert step["idle_host_us"] == pytest.approx(400)
    assert step["gpu_busy_us"] == pytest.approx(95 + 97 + 100 + 100)
    assert step["gpu_busy_us"] + step["gpu_idle_us"] == pytest.approx(step["wall_us"])
    assert step["gpu_idle_pct"] == pytest.approx(60.8)
    # the CPU ran ops 0..50, 60..70, 150..201, 380..390, 500..890 (the step marker does not count)
    assert step["cpu_busy_us"] == pytest.approx(50 + 10 + 51 + 10 + 390)
    assert step["compute_us"] == pytest.approx(step["gpu_busy_us"])
    finding = trace.findings()[0]
    assert finding == ("GPU idle 61% of step 1 (ProfilerStep#7), mostly host-bound: the CPU spent "
                       "it in aten::foo (95%).")


def test_a_sync_gap_names_the_blocking_call():
    trace = build([("ProfilerStep#1", 0, 500), ("aten::mm", 0, 10), ("aten::item", 20, 110),
                   ("aten::_local_scalar_dense", 21, 109), ("cudaStreamSynchronize", 25, 105),
                   ("aten::add", 480, 490)],
                  [("k1", 10, 100, 1, 7), ("k2", 490, 500, 5, 7)])
    [step] = rows(trace.steps())
    assert step["idle_sync_us"] == pytest.approx(390)
    assert trace.findings()[0].startswith(
        "GPU idle 80% of step 1 (ProfilerStep#1), mostly waiting on a sync: the CPU blocked in "
        "aten::item until the GPU drained")


def test_a_quick_sync_call_inside_a_gap_did_not_block():
    # aten::item (1 us) runs 200 us into a 900 us gap: the GPU had drained long before; the CPU
    # was in aten::foo. It was called "the CPU blocked in aten::item until the GPU drained"
    trace = build([("ProfilerStep#1", 0, 1000), ("aten::mm", 0, 10), ("aten::foo", 120, 950),
                   ("aten::item", 300, 301), ("aten::add", 950, 960)],
                  [("k1", 10, 100, 1, 7), ("k2", 960, 1000, 4, 7)])
    [step] = rows(trace.steps())
    assert step["idle_sync_us"] == 0 and step["idle_host_us"] == pytest.approx(10 + 860)
    finding = trace.findings()[0]
    assert "blocked" not in finding and "host-bound: the CPU spent it in aten::foo" in finding


def test_gpu_busy_is_the_union_of_a_steps_work_not_its_sum():
    # two streams overlap (0..100 and 50..150), a CUDA-event op interval holds a kernel (200..300
    # holds 220..240: the kernels measure the work, the interval's idle rest is not busy), a copy
    # runs under a kernel; communication is told apart by name
    trace = build([("ProfilerStep#1", 0, 400), ("aten::mm", 0, 10), ("aten::add", 10, 20),
                   ("aten::copy_", 20, 30), ("nccl:all_reduce", 30, 40)],
                  [("k1", 0, 100, 1, 7), ("k2", 50, 150, 2, 8), ("aten::add", 200, 300, 2, 7, "op"),
                   ("k3", 220, 240, 2, 7), ("Memcpy HtoD", 60, 90, 3, 9, "memcpy"),
                   ("ncclKernel_AllReduce", 300, 350, 4, 9)])
    [step] = rows(trace.steps())
    # the op's event interval (200..300) is not work where kernels are known: only k3 inside it
    assert step["gpu_busy_us"] == pytest.approx(150 + 20 + 50)
    assert step["compute_us"] == pytest.approx(170)
    assert step["memcpy_us"] == pytest.approx(0)  # hidden under k1 / k2: counted once, as compute
    assert step["communication_us"] == pytest.approx(50)
    assert step["gpu_busy_us"] < sum(k[2] - k[1] for k in [(0, 0, 100), (0, 50, 150), (0, 200, 300),
                                                          (0, 220, 240), (0, 60, 90), (0, 300, 350)])


def test_steps_from_repeat_run_markers():
    trace = build([(run_marker(0, 2), 0, 100), ("aten::mm", 10, 60), (run_marker(1, 2), 200, 250),
                   ("aten::mm", 210, 220)])
    table = rows(trace.steps())
    assert [r["step"] for r in table] == ["run 1/2", "run 2/2"]
    assert {r["source"] for r in table} == {"repeat"}
    assert [r["wall_us"] for r in table] == [100, 50]
    assert [r["cpu_busy_us"] for r in table] == [50, 10]


def test_steps_from_optimizer_step_boundaries_and_from_a_repeating_pattern():
    loop = [("aten::zeros", 0, 5), ("forward", 5, 50), ("Optimizer.step#SGD.step", 50, 60),
            ("forward", 60, 100), ("backward", 100, 120), ("Optimizer.step#SGD.step", 120, 130)]
    table = rows(build(loop).steps())
    assert [(r["step"], r["source"], r["wall_us"]) for r in table] == [
        ("step 1", "pattern", 60), ("step 2", "pattern", 70)]
    periodic = [(name, start + 100 * k, end + 100 * k) for k in range(3)
                for name, start, end in [("load", 0, 10), ("forward", 10, 40), ("backward", 40, 90)]]
    periodic.append(("load", 300, 305))  # an unfinished copy at the end
    table = rows(build(periodic).steps())
    assert [r["wall_us"] for r in table] == [90, 90, 90]
    assert [r["start_ns"] for r in table] == [0, 100 * US, 200 * US]
    # nothing repeats: the whole trace is one step
    [whole] = rows(build([("a", 0, 10), ("b", 10, 30)]).steps())
    assert whole["source"] == "whole trace" and whole["wall_us"] == 30


def test_cpu_only_trace_has_no_gpu_idle_and_says_so():
    trace = build([("ProfilerStep#1", 0, 100), ("aten::mm", 10, 60)])
    [step] = rows(trace.steps())
    assert step["gpu_busy_us"] == 0 and step["gpu_idle_us"] == 0 and step["cpu_busy_us"] == 50
    assert trace.findings()[0].startswith("CPU only")


def test_real_trace_steps_agree_with_its_profiler_step_annotations(shared_traces):
    path = shared_traces / "gpu_training_step_68k.json.gz"
    trace = nbprof.load(path)
    with gzip.open(path) as file:
        raw = json.load(file)["traceEvents"]
    annotated = sorted((e["ts"], e["dur"], e["name"]) for e in raw
                       if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#"))
    table = rows(trace.steps())
    assert [r["step"] for r in table] == [name for _, _, name in annotated]
    assert {r["source"] for r in table} == {"ProfilerStep"}
    for row, (ts, dur, _) in zip(table, annotated):
        assert row["cpu_wall_us"] == pytest.approx(dur, abs=1e-3)
        assert row["start_ns"] - table[0]["start_ns"] == pytest.approx((ts - annotated[0][0]) * 1e3, abs=1)

    # GPU busy per step: the union of the intervals of the kernels, copies and sets its ops
    # launched, merged here the plain way (sorted, one interval at a time)
    work = {GPU_KINDS.index(k) for k in ("kernel", "memcpy", "memset", "op")}
    for step, row in enumerate(table):
        intervals = sorted(
            (int(trace.gpu_start_ns[g]), int(trace.gpu_end_ns[g])) for g in range(len(trace.gpu_start_ns))
            if trace.gpu_kind[g] in work and trace.gpu_launch[g] >= 0
            and row["start_ns"] <= trace.start_ns[trace.gpu_launch[g]] < row["cpu_end_ns"])
        union, reach_start, reach_end = 0, None, None
        for start, end in intervals:
            if reach_end is None or start > reach_end:
                union += 0 if reach_end is None else reach_end - reach_start
                reach_start, reach_end = start, end
            else:
                reach_end = max(reach_end, end)
        union += 0 if reach_end is None else reach_end - reach_start
        assert intervals, f"step {step} launched no GPU work"
        assert row["gpu_busy_us"] == pytest.approx(union / 1e3, abs=1e-3)
        assert row["compute_us"] + row["communication_us"] + row["memcpy_us"] == pytest.approx(
            row["gpu_busy_us"])
        # the step's window holds its CPU part and the GPU work it launched
        assert row["end_ns"] == max(row["cpu_end_ns"], max(end for _, end in intervals))
        assert row["wall_us"] * 1e3 == pytest.approx(row["end_ns"] - row["start_ns"])
        assert row["gpu_busy_us"] + row["gpu_idle_us"] <= row["wall_us"] + 1e-6


def test_the_step_list_the_bars_and_the_findings_tell_the_same_story(shared_traces):
    # ProfilerStep#101's CPU part is 35 ms, but its GPU work ran 98.8..196.5 ms: the list said
    # "wall 35.116ms ... GPU busy 94.570ms", a finding "0.37x the median step", the bars drew it tallest
    from nbprof.timeline.overview import step_bars
    from nbprof.notebook.overview import OverviewPane

    trace = nbprof.load(shared_traces / "gpu_training_step_68k.json.gz")
    table = rows(trace.steps())
    first = table[0]
    assert first["step"] == "ProfilerStep#101"
    assert first["cpu_wall_us"] == pytest.approx(35115.869, abs=1e-3)
    assert first["wall_us"] == pytest.approx(101151.297, abs=1e-3)  # 95.34 ms .. its GPU work's end
    for row in table:
        assert row["gpu_busy_us"] <= row["wall_us"] and row["cpu_busy_us"] <= row["wall_us"]
    _, source = step_bars(table, has_gpu=True)
    heights = np.sum([source.data[name] for name in source.data if name.endswith("_ms")
                      and name != "wall_ms"], axis=0)
    assert heights == pytest.approx([row["wall_us"] / 1e3 for row in table])  # a bar is its wall time
    label = OverviewPane._step_label(0, first)
    assert label.startswith("1: ProfilerStep#101 · wall 101.151ms (CPU part 35.116ms)")
    shortest = min(table, key=lambda row: row["wall_us"])
    said = [line for line in trace.findings() if "the median step" in line]
    assert said and said[0].startswith(f"{shortest['step']} took 101.151ms, 0.55x the median step")
    assert "warm-up" not in said[0]  # the short first step is not a slow warm-up


def test_kernel_summary_groups_by_kernel_and_launching_call_path():
    trace = build([("ProfilerStep#1", 0, 100), ("aten::linear", 0, 40), ("aten::addmm", 1, 30),
                   ("ProfilerStep#2", 100, 200), ("aten::linear", 100, 140), ("aten::addmm", 101, 130),
                   ("aten::copy_", 150, 160)],
                  [("gemm", 30, 60, 2, 7), ("gemm", 130, 150, 5, 7), ("relu_k", 60, 70, 2, 7),
                   ("Memcpy DtoD", 160, 165, 6, 7, "memcpy")])
    table = rows(trace.kernel_summary())
    assert [(r["name"], r["count"], r["total_us"]) for r in table] == [("gemm", 2, 50), ("relu_k", 1, 10)]
    gemm = table[0]
    assert gemm["op"] == "aten::addmm" and gemm["mean_us"] == 25
    assert gemm["share_pct"] == pytest.approx(250 / 3)
    assert gemm["call_path"] == "ProfilerStep#* > aten::linear > aten::addmm"  # both steps, one path
    [copy] = rows(trace.kernel_summary(memory=True))
    assert (copy["name"], copy["op"], copy["share_pct"]) == ("Memcpy DtoD", "aten::copy_", 100)
    assert "aten::addmm" in trace.kernel_summary().table()


def test_table_answers_are_dataframes_that_print_as_text_tables():
    import pandas

    trace = build(IDLE_EVENTS, IDLE_KERNELS)
    answers = [trace.steps(), trace.kernel_summary(), trace.gpu_agreement(), trace.rank_summary(),
               nbprof.diff(trace, trace), nbprof.diff(trace, trace, by="call_path")]
    for answer in answers:
        assert isinstance(answer, pandas.DataFrame)
        assert repr(answer) == str(answer) == answer.table()  # units, a readable header
    assert repr(answers[0]).startswith("1 steps (from ProfilerStep)")
    assert "ProfilerStep#7" in repr(answers[0]) and "608.000us" in repr(answers[0])
    assert isinstance(trace.key_averages(), list)  # torch's shape: an EventList-like list
    # a frame that keeps the columns keeps its text; one that lost them prints as pandas does
    assert answers[1][answers[1]["count"] > 0].table().startswith(answers[1].table().splitlines()[0])
    assert "total_us" in repr(answers[1][["name", "total_us"]])


def test_a_merged_jobs_ranks_share_their_steps(shared_traces):
    job = nbprof.load([shared_traces / f"gpu_sampled_rank{r}.json.gz" for r in (0, 1)])
    ranks = [rows(nbprof.load(shared_traces / f"gpu_sampled_rank{r}.json.gz").steps()) for r in (0, 1)]
    table = rows(job.steps())
    assert [r["step"] for r in table] == [r["step"] for r in ranks[0]] == [r["step"] for r in ranks[1]]
    for step, row in enumerate(table):  # step N of the job: from the first rank's start to the last's end
        assert row["start_ns"] == min(int(job.start_ns[i]) for i in np.flatnonzero(
            job.name_id == job.names.index(row["step"])))
        assert row["wall_us"] >= max(r[step]["wall_us"] for r in ranks)


def test_same_label_steps_that_do_not_overlap_stay_apart():
    # two profiles' ProfilerStep#0 one after the other (a tiled or appended trace): two steps
    trace = build([("ProfilerStep#0", 0, 100), ("ProfilerStep#0", 200, 250),
                   ("ProfilerStep#0", 220, 300, 1)], threads=((1, 1, "main"), (2, 2, "rank 1")))
    windows = [(r["start_ns"], r["end_ns"]) for r in rows(trace.steps())]
    assert windows == [(0, 100 * US), (200 * US, 300 * US)]  # the overlapping pair is one step


def test_without_kernels_the_op_event_intervals_are_the_gpu_work():
    # no CUPTI: the per-op CUDA-event intervals are all the trace knows of the GPU
    trace = build([("ProfilerStep#1", 0, 400), ("aten::mm", 0, 10), ("aten::add", 10, 20)],
                  [("aten::mm", 5, 105, 1, 7, "op"), ("aten::add", 200, 260, 2, 7, "op")])
    [step] = rows(trace.steps())
    assert step["gpu_busy_us"] == pytest.approx(100 + 60)
