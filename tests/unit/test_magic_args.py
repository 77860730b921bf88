"""The %%cudaprof option parser: what a user types and what they get back."""

import pytest

from nbprof.analysis.averages import SORT_KEYS
from nbprof.notebook.args import CudaprofUsageError, help_text, parse_options, split_line_magic


def test_defaults_profile_once_and_display():
    options = parse_options("")
    assert (options.variable, options.export, options.repeat, options.warmup) == (None, None, 1, 0)
    assert not (options.cpu_only or options.record_shapes or options.with_stack or options.table
                or options.no_display or options.help)
    assert (options.sort, options.row_limit) == ("cpu_time_total", 20)


def test_every_option_is_parsed():
    options = parse_options("-o trace --export 'my run.json.gz' --cpu-only --record-shapes --with-stack "
                            "--warmup 2 --repeat 5 --table --sort count --row-limit -1 --no-display")
    assert options.variable == "trace"
    assert options.export == "my run.json.gz"
    assert options.cpu_only and options.record_shapes and options.with_stack and options.table
    assert (options.warmup, options.repeat, options.sort, options.row_limit) == (2, 5, "count", -1)
    assert options.no_display


def test_help_flag_is_an_option_not_an_exit():
    assert parse_options("-h").help and parse_options("--help").help
    text = help_text()
    for option in ("-o VAR", "--export PATH", "--cpu-only", "--record-shapes", "--with-stack",
                   "--warmup N", "--repeat N", "--table", "--sort KEY", "--row-limit N", "--no-display"):
        assert option in text


@pytest.mark.parametrize("line, complaint", [
    ("--bogus", "unrecognized arguments: --bogus"),
    ("--repeat 0", "must be at least 1"),
    ("--warmup -1", "must be 0 or more"),
    ("--repeat many", "invalid"),
    ("--repeat many", "argument --repeat: invalid number 'many': give a whole number"),
    ("--warmup 1.5", "argument --warmup: invalid number '1.5': give a whole number"),
    ("-o 2fast", "not a Python variable name"),
    ("-o class", "argument -o: 'class' is not a Python variable name (it is a keyword)"),
    ("--compare None", "'None' is not a Python variable name (it is a keyword)"),
    ("-o a.b", "not a Python variable name"),
    ("--row-limit ten", "argument --row-limit: invalid number 'ten': give a whole number"),
    ("--row-limit -2", "must be -1 (all rows) or more, got -2"),
    ("--export trace.txt", "must end in .json or .json.gz"),
    ("--sort speed", "invalid choice: 'speed'"),
    ("--cpu", "unrecognized arguments: --cpu"),  # no silent abbreviations
    ("--export 'unclosed", "No closing quotation"),
])
def test_bad_options_raise_usage_with_the_reason(line, complaint):
    with pytest.raises(CudaprofUsageError) as caught:
        parse_options(line)
    message = str(caught.value)
    assert message.startswith("usage: %%cudaprof")
    assert complaint in message


def test_sort_keys_are_the_summary_keys():
    for key in SORT_KEYS:
        assert parse_options(f"--sort {key}").sort == key


@pytest.mark.parametrize("line, options, statement", [
    ("model(x)", "", "model(x)"),
    ("-o t --table y = f('a  b', \"c\")", "-o t --table ", "y = f('a  b', \"c\")"),
    ("--export 'a b.json' --repeat 3   total = sum(x)", "--export 'a b.json' --repeat 3 ", "total = sum(x)"),
    ("-ot --sort=count step()", "-ot --sort=count ", "step()"),
    ("--cpu-only", "--cpu-only", ""),
    ("-- -x + 1", "", "-x + 1"),
    ("-1 + x", "", "-1 + x"),
    ("", "", ""),
])
def test_line_magic_keeps_the_statement_verbatim(line, options, statement):
    assert split_line_magic(line) == (options, statement)
