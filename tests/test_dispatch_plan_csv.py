"""``plan --csv`` says, for each case a dispatch table picked, the table's kernel (the family whose row the case is),
the entry (its index and shape) and the rule that picked it, as the terminal table's notes do; the columns are
empty for a case no table picked."""

import csv
import io

from driver_gemm.cli.exit_codes import EXIT_FAILED, EXIT_OK
from driver_gemm.cli.main import main
from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.report.formats import PLAN_CSV_HEADER, plan_csv
from driver_gemm.specfile import load_spec

from test_spec import write

DISPATCH_COLUMNS = ("family", "dispatch_entry", "dispatch_shape", "dispatch_rule")

SPEC = """\
shapes:
  - [64, 32, 16]
  - [128, 128, 128]
  - [300, 300, 300]
  - [640, 640, 640]
kernels:
  - name: v4
    source: ../kernels/04_coarsen_2d.cu
    function: sgemm_coarsen_2d
    params: {BM: 64, BN: 64, BK: 16, TM: 4, TN: 4}
    block: [BN / TN, BM / TM]
    grid: [ceil(N / BN), ceil(M / BM)]
  - name: v2
    source: ../kernels/02_smem_tiles.cu
    function: sgemm_smem_tiles
    params: {TILE: 16}
    block: [TILE, TILE]
    grid: [ceil(N / TILE), ceil(M / TILE)]
  - name: v1
    source: ../kernels/01_naive_col_on_x.cu
    function: sgemm_naive_col_on_x
    block: [32, 32]
    grid: [ceil(M / 32), ceil(N / 32)]
dispatch:
  v4:
    - {shape: [64, 32, 16], kernel: v2, params: {TILE: 32}}
    - {shape: [128, 128, 128], params: {BK: 8}}
    - {shape: [256, 256, 256], kernel: v2, params: {TILE: 16}}
    - {shape: [512, 512, 512], params: {BK: 16}, when: {M: [600, null], if: "N % 64 == 0"}}
"""


def csv_rows(text: str) -> dict[tuple[str, str], dict[str, str]]:
    return {(row["kernel"], "x".join((row["M"], row["N"], row["K"]))): row
            for row in csv.DictReader(io.StringIO(text))}


def test_plan_csv_names_the_family_entry_and_rule_of_each_dispatched_case(tmp_path, capsys):
    path = write(tmp_path, SPEC)
    assert set(DISPATCH_COLUMNS) <= set(PLAN_CSV_HEADER)
    assert main(["plan", str(path), "--arch", "sm_90", "--csv"]) == EXIT_OK
    out = capsys.readouterr().out
    rows = csv_rows(out)

    def dispatch(kernel: str, shape: str) -> tuple[str, ...]:
        return tuple(rows[(kernel, shape)][column] for column in DISPATCH_COLUMNS)

    # a member picked on its entry's shape: its family, not its own name
    assert dispatch("v2[TILE=32]", "64x32x16") == ("v4", "0", "64x32x16", "exact")
    assert dispatch("v4[BM=64,BN=64,BK=8,TM=4,TN=4]", "128x128x128") == ("v4", "1", "128x128x128", "exact")
    assert dispatch("v2[TILE=16]", "300x300x300") == ("v4", "2", "256x256x256", "nearest")
    assert dispatch("v4[BM=64,BN=64,BK=16,TM=4,TN=4]", "640x640x640") == ("v4", "3", "512x512x512", "when")
    # no table picked v1: nothing to say
    assert dispatch("v1", "300x300x300") == ("", "", "", "")
    # the library's CSV of the same plan is what the command writes
    assert out == plan_csv(plan_spec(load_spec(path), arch="sm_90").plans)


def test_a_dispatched_case_whose_kernel_did_not_compile_keeps_its_dispatch_columns(tmp_path, capsys):
    path = write(tmp_path, SPEC.replace("../kernels/02_smem_tiles.cu", "../kernels/broken.cu"))
    (tmp_path / "kernels" / "broken.cu").write_text(
        'extern "C" __global__ void sgemm_smem_tiles(int M, int N, int K, float alpha, const float *A, '
        "const float *B, float beta, float *C) { this does not compile; }\n")
    assert main(["plan", str(path), "--arch", "sm_90", "--csv"]) == EXIT_FAILED
    rows = csv_rows(capsys.readouterr().out)
    row = rows[("v2[TILE=16]", "300x300x300")]
    assert row["valid"] == "False" and row["problems"].startswith("did not compile")
    assert tuple(row[column] for column in DISPATCH_COLUMNS) == ("v4", "2", "256x256x256", "nearest")
    assert tuple(rows[("v1", "64x32x16")][column] for column in DISPATCH_COLUMNS) == ("", "", "", "")
