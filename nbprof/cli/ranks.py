"""``nbprof ranks DIR`` and ``nbprof convert IN... -o DIR``: the verbs for a job's many files."""

from __future__ import annotations

import json
import os
import pathlib
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from ..formats.atomic import check_writable, make_folders
from .paths import CliError
from ..ranks import rank_of, trace_paths


def ranks(options) -> int:
    from ..formats.ranks_sql import summarise_files

    def progress(done, total, path):
        if total > 1 and sys.stderr.isatty():
            print(f"\rnbprof: {done}/{total} files", end="", file=sys.stderr, flush=True)

    summary = summarise_files(options.traces if len(options.traces) > 1 else options.traces[0],
                           memory_limit=options.memory_limit, progress=progress)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    if options.json:
        print(json.dumps({"ranks": [{**row.__dict__, "steps": list(row.steps)} for row in summary.rows],
                          "straggler": summary.straggler, "reason": summary.reason}))
    else:
        print(summary.frame().table())
    return 0


def parquet_name(path: pathlib.Path) -> str:
    name = path.name
    for suffix in (".json.gz", ".json", ".parquet"):
        if name.endswith(suffix):
            return name[: -len(suffix)] + ".parquet"
    return name + ".parquet"


def convert_one(job: tuple) -> str:
    """One file -> Parquet, in a worker process; its rank put in meta (from the file, else the
    name, else its position), so the Parquet folder says every row's rank."""
    from .. import load

    path, position, output = job
    trace = load(path)
    trace.meta["rank"] = rank_of(trace, path, position)
    return trace.to_parquet(output)


def convert(options) -> int:
    paths = [p for p in trace_paths(options.traces) if not p.name.endswith(".parquet")]
    if not paths:
        raise CliError("no .json or .json.gz trace among the inputs: convert writes JSON traces as "
                       "Parquet (.parquet files are already converted)")
    folder = pathlib.Path(options.output)
    if folder.exists() and not folder.is_dir():
        raise CliError(f"-o {folder} is a file: convert writes its Parquet files into a folder; "
                       "give the path of a folder (it is made if need be)")
    outputs = [folder / parquet_name(path) for path in paths]
    if len(set(outputs)) < len(outputs):
        raise CliError("two inputs have the same file name; convert them into different folders")
    inputs = {os.path.realpath(path) for path in paths}
    for output in outputs:  # e.g. a link named like an output that points at an input
        if os.path.realpath(output) in inputs:
            raise CliError(f"{output} is one of the inputs: writing it would replace that file; "
                           "convert into another folder")
    check_writable(outputs[0], "the Parquet files")  # before the first file is converted
    make_folders(outputs[0], "the Parquet files")
    jobs = options.jobs or os.cpu_count() or 1
    work = [(str(path), index, str(out)) for index, (path, out) in enumerate(zip(paths, outputs))]
    started = time.time()
    try:
        if jobs == 1 or len(work) == 1:
            written = list(map(convert_one, work))
        else:
            with ProcessPoolExecutor(max_workers=min(jobs, len(work))) as pool:
                written = list(pool.map(convert_one, work))
    except KeyboardInterrupt:  # the workers got the Ctrl-C too; each write is atomic
        done = [out for out in outputs if out.exists() and out.stat().st_mtime >= started - 1]
        print(f"nbprof: interrupted; {len(done)} of {len(outputs)} Parquet files were written into "
              f"{folder} (no half file)", file=sys.stderr)
        return 130
    print(f"nbprof: wrote {len(written)} Parquet files into {folder}")
    return 0
