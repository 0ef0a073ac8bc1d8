"""A plan at the scale the limits allow: 10^5 shapes of one kernel plan in CSV within a bound that a quadratic step
or a compile per case would break, with memory that does not grow with the number of cases (each case is planned
and written as it comes, never held), and the table of many rows is plain text written as it is planned."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
import time

from driver_gemm.cli import EXIT_FAILED, EXIT_OK, main
from driver_gemm.planning import build
from driver_gemm.planning.spec_plan import plan_spec, plan_stream, plan_target
from driver_gemm.specfile import load_spec

from conftest import ROOT
from test_spec import MINIMAL, write

# 1,000 x 100 = 10^5 shapes at K = 64.
HUNDRED_THOUSAND = MINIMAL.replace("  - [64, 32, 16]", "  - {M: {from: 1, to: 1000, step: 1}, "
                                                       "N: {from: 1, to: 100, step: 1}, K: 64}")
# The plan in a child that reports its own peak resident memory (KiB on Linux) as its last stderr line.
CHILD = """
import resource, sys
from driver_gemm.cli.main import main
code = main(["plan", sys.argv[1], "--arch", "sm_90", "--csv"])
# VmHWM: this process's own peak; ru_maxrss also counts what a forking parent had resident before the exec.
try:
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
except (OSError, StopIteration):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(peak, file=sys.stderr)
sys.exit(code)
"""


def test_a_plan_of_a_hundred_thousand_shapes_streams_its_csv_in_bounded_time_and_memory(tmp_path):
    spec = write(tmp_path, HUNDRED_THOUSAND)
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-c", CHILD, str(spec)], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    elapsed = time.monotonic() - began
    assert done.returncode == EXIT_OK, done.stderr
    *lines, peak_kib = done.stderr.splitlines()
    assert lines[-1] == "spec: 100000 ok, 0 INVALID"
    rows = done.stdout.splitlines()
    assert len(rows) == 1 + 100_000 and rows[0].startswith("kernel,M,N,K,grid,block,")
    assert rows[1].startswith("\"v4[BM=64,BN=64,BK=16,TM=4,TN=4]\",1,1,64,1x1x1,16x16x1,")
    assert rows[-1].startswith("\"v4[BM=64,BN=64,BK=16,TM=4,TN=4]\",1000,100,64,2x16x1,16x16x1,")
    # About 20 s on two busy cores; a compile per case or a step quadratic in the cases takes hours.
    assert elapsed < 90, f"{elapsed:.0f} s"
    # About 100 MiB whatever the size (libraries and the spec's shapes); held as CasePlans, 10^5 cases take GBs.
    assert int(peak_kib) < 300 * 1024, f"{int(peak_kib) / 1024:.0f} MiB"


def test_the_stream_yields_what_plan_spec_holds_and_compiles_once(tmp_path, monkeypatch):
    calls = []
    real = build.signature_error
    monkeypatch.setattr(build, "signature_error", lambda kernel, built: calls.append(1) or real(kernel, built))
    spec = load_spec(write(tmp_path, MINIMAL.replace("  - [64, 32, 16]", "  - {M: [64, 100000000], N: [32, 48], "
                                                                        "K: 16}")))
    target = plan_target("sm_90")
    stream = plan_stream(spec, target=target)
    assert stream.count == 4 and stream.labels == ["v4[BM=64,BN=64,BK=16,TM=4,TN=4]"]
    assert stream.result.plans == [] and not stream.result.compile_errors
    streamed = [(plan.shape.label, plan.valid, [str(p) for p in plan.problems], plan.notes) for plan in stream]
    assert len(calls) == 1          # the signature is checked once per kernel and image, whatever the shapes
    held = [(plan.shape.label, plan.valid, [str(p) for p in plan.problems], plan.notes)
            for plan in plan_spec(spec, target=target).plans]
    assert streamed == held and [valid for _, valid, _, _ in held] == [True, True, False, False]


def test_a_long_table_is_plain_text_with_each_problem_once(tmp_path, capsys):
    # 2,500 shapes, of which the 50 with M = 70,000 have a grid y of 1,094 blocks: fine; those with N too wide are
    # refused, said once with their count.
    text = MINIMAL.replace("  - [64, 32, 16]", "  - {M: {from: 64, to: 3200, step: 64}, N: {from: 64, to: 3200, "
                                               "step: 64}, K: 64}\n  - {M: 64, N: [64, 1], K: 64}")
    text = text.replace("grid: [ceil(N / BN), ceil(M / BM)]", "grid: [ceil(N / BN), ceil(M / BM), 1]\n"
                                                               "    require: [N >= 64]")
    spec = write(tmp_path, text)
    assert main(["plan", "--arch", "sm_90", str(spec)]) == EXIT_FAILED
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("spec: launch plan for sm_90")
    assert lines[1].split()[:2] == ["kernel", "shape"] and set(lines[2]) == {"-"} and "━" not in out
    assert sum(" 64x1x64 " in line and line.endswith("INVALID") for line in lines) == 1
    assert sum(line.endswith(" ok") for line in lines) == 2500
    assert sum("'N >= 64' does not hold with N=1" in line for line in lines) == 1
    assert lines[-1] == "2500 ok, 1 INVALID"


def test_a_long_csv_plan_matches_the_held_one_row_for_row(tmp_path, capsys):
    spec = write(tmp_path, MINIMAL.replace("  - [64, 32, 16]", "  - {M: {from: 1, to: 50, step: 1}, "
                                                               "N: {from: 1, to: 50, step: 1}, K: 8}"))
    assert main(["plan", "--arch", "sm_90", "--csv", str(spec)]) == EXIT_OK
    out, err = capsys.readouterr()
    from driver_gemm.report.formats import plan_csv
    assert out == plan_csv(plan_spec(load_spec(spec), target=plan_target("sm_90")).plans)
    assert len(list(csv.DictReader(io.StringIO(out)))) == 2500 and err == "spec: 2500 ok, 0 INVALID\n"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_plan_whose_rows_go_to_a_file_counts_its_cases_on_a_terminal():
    from rich.console import Console

    from driver_gemm.cli.common import Output
    from driver_gemm.cli.plan import _progress

    terminal, piped = _Terminal(), io.StringIO()
    progress = _progress(Output(Console(file=piped), Console(file=terminal), "csv"), 3000)
    progress(1000)
    progress(-1)
    assert terminal.getvalue() == "\rplanned 1,000 of 3,000 cases\x1b[K\r\x1b[K" and piped.getvalue() == ""
    assert _progress(Output(Console(file=piped), Console(file=terminal), "csv"), 2000) is None   # short: no line
    assert _progress(Output(Console(file=_Terminal()), Console(file=terminal), "table"), 3000) is None  # rows shown
    assert _progress(Output(Console(file=piped), Console(file=io.StringIO()), "csv"), 3000) is None  # no terminal
