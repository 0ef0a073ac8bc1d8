"""The command line as a front door: every option says what it does, the exit codes are told once, and
kernel labels are shortened only when a table needs the room."""

from __future__ import annotations

import argparse
import io

import pytest
from rich.console import Console

from driver_gemm.cli import main
from driver_gemm.cli.main import COMMANDS, EXIT_CODES_HELP, build_parser
from driver_gemm.report.tables import print_comparison, print_run
from driver_gemm.results.records import CaseResult, RunResult
from driver_gemm.specfile.model import Shape
from driver_gemm.status import Status


def subcommand_parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    commands, = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return dict(commands.choices)


def test_every_command_of_the_table_has_a_parser():
    assert set(subcommand_parsers()) == set(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_of_every_command_has_help(command):
    parser = subcommand_parsers()[command]
    for action in parser._actions:
        names = "/".join(action.option_strings) or action.dest
        assert action.help and action.help is not argparse.SUPPRESS and action.help.strip(), \
            f"driver-gemm {command} {names} has no help text"


def test_every_option_of_the_program_has_help():
    for action in build_parser()._actions:
        if not isinstance(action, argparse._SubParsersAction):
            assert action.help and action.help.strip(), action.option_strings


def help_of(argv, capsys) -> str:
    with pytest.raises(SystemExit) as done:
        main([*argv, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def test_the_exit_codes_are_told_once_in_the_programs_help(capsys):
    out = help_of([], capsys)
    assert out.count("exit codes:") == 1 and EXIT_CODES_HELP.strip().splitlines()[1].strip() in out


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_commands_help_points_to_the_exit_codes_without_repeating_them(command, capsys):
    out = help_of([command], capsys)
    assert "exit codes: see driver-gemm --help" in out
    assert "every case passed" not in out and "130" not in out


def test_one_name_per_idea():
    """A threshold of percent called SAME is --threshold in run and compare; the GPUs of a run are --device."""
    parsers = subcommand_parsers()
    options = {command: {name for action in parser._actions for name in action.option_strings}
               for command, parser in parsers.items()}
    assert "--threshold" in options["run"] and "--threshold" in options["compare"]
    assert "--regression-threshold" not in options["run"] and "--devices" not in options["run"]
    assert "--device" in options["run"] and "--device" in options["tune"]


LONG = "v8[BM=128,BN=256,BK=16,WM=64,WN=128,TM=16,TN=8,STAGES=3]"


def run_of(labels) -> RunResult:
    shape = Shape(1024, 1024, 1024)
    return RunResult(spec="s", spec_path=None, cases=[
        CaseResult(kernel=label, name=label.split("[")[0], shape=shape, status=Status.PASS) for label in labels])


def printed(print_table, value, width: int) -> str:
    buffer = io.StringIO()
    print_table(value, Console(file=buffer, width=width))
    return buffer.getvalue()


def test_labels_are_full_when_the_table_fits():
    text = printed(print_run, run_of(["cublas", LONG]), 200)
    assert LONG in text and "v8#1" not in text


def test_labels_are_shortened_with_a_legend_when_the_table_needs_the_room():
    text = printed(print_run, run_of(["cublas", LONG, LONG.replace("STAGES=3", "STAGES=4")]), 100)
    assert "v8#1" in text and "v8#2" in text
    assert f"v8#1 = {LONG}" in text          # the legend gives the full label once


def test_a_comparisons_labels_are_full_when_it_fits():
    from driver_gemm.report.comparison import compare_runs

    run = run_of([LONG])
    text = printed(lambda comparisons, console: print_comparison(comparisons, "old -> new", console),
                   compare_runs(run, run), 200)
    assert LONG in text and "v8#1" not in text
