"""``plan --markdown`` keeps why a case is INVALID, and the plan's notes, after its table, as quoted lines (as
``compare --markdown`` writes its warnings), each distinct message once with the cases it holds for."""

from __future__ import annotations

import csv
import io

from driver_gemm.cli import EXIT_FAILED, main

from test_spec import MINIMAL, write

# Two configurations of one kernel whose blocks are too large, on two shapes: one message each, said for both shapes;
# and a kernel that plans ok.
TOO_LARGE = MINIMAL.replace("[64, 32, 16]", "[64, 32, 16]\n  - [128, 64, 32]") + """\
  - name: wide
    source: ../kernels/04_coarsen_2d.cu
    function: sgemm_coarsen_2d
    params: {BM: 64, BN: [64, 128], BK: 16, TM: 1, TN: 1}
    block: [BN / TN, BM / TM]
    grid: [ceil(N / BN), ceil(M / BM)]
"""


def test_a_markdown_plan_says_each_reason_for_invalid_after_the_table_on_stdout(tmp_path, capsys):
    spec = write(tmp_path, TOO_LARGE)
    assert main(["plan", str(spec), "--arch", "sm_90", "--csv"]) == EXIT_FAILED
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    reasons = {row["problems"].partition("\n")[0] for row in rows if row["valid"] == "False"}
    assert len(reasons) == 2

    assert main(["plan", str(spec), "--arch", "sm_90", "--markdown"]) == EXIT_FAILED
    out, err = capsys.readouterr()
    table = [line for line in out.splitlines() if line.startswith("|")]
    quoted = [line for line in out.splitlines() if line.startswith(">")]
    # The table is whole and first (one row a case, with its verdict), then a blank line and the quoted reasons.
    assert len(table) == 2 + len(rows) and out.splitlines()[:len(table)] == table
    assert out.splitlines()[len(table)] == ""
    assert sorted(line.split(" | ")[-1] for line in table[2:]).count("INVALID |") == 4
    for reason in reasons:
        (said,) = [line for line in quoted if line.startswith(f"> {reason.partition(' [')[0]}")]
        # Each is said once, with its kernel and both shapes.
        assert "wide[" in said and "64x32x16, 128x64x32]" in said
    assert "INVALID" not in "".join(quoted) and "2 ok, 4 INVALID" in err
