"""The dispatch spec ``tune --dispatch`` writes: each entry runs the configuration its winner's label names (whatever
params the results recorded), the family's own kernel keeps the family's name and members their own, and a table of
the spec whose rules the written one cannot hold is said to be left behind."""

from __future__ import annotations

import logging

import yaml

from driver_gemm.measure.stats import summarize
from driver_gemm.planning.cases import cases_of, new_record
from driver_gemm.results.records import RunResult
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status
from driver_gemm.tune.winners import dispatch_spec, pick_winners

from test_spec import write
from test_tune import BK8, BK16, LARGE, SMALL, SWEEP, case
from test_tune_dispatched_families import V3, V4


def kernel_cases(spec) -> dict[str, object]:
    """The kernel case of each shape of `spec` (one kernel family), by shape label."""
    return {c.shape.label: c for c in cases_of(spec) if not c.is_baseline}


def test_each_entry_runs_the_configuration_its_winner_s_label_names(tmp_path):
    spec = load_spec(write(tmp_path, SWEEP))
    run = RunResult(spec="s", spec_path=None, cases=[       # rows without params: the results need not record them
        case(BK8, SMALL, [1.0, 1.01, 0.99]), case(BK16, SMALL, [1.5, 1.52, 1.49]),
        case(BK8, LARGE, [2.5, 2.6, 2.4]), case(BK16, LARGE, [2.0, 2.1, 1.9])])
    assert not any(c.params for c in run.cases)
    written = load_spec(dispatch_spec(spec, pick_winners(run), tmp_path / "specs" / "d.yaml"))
    picked = kernel_cases(written)
    assert picked[SMALL.label].kernel.label == BK8 and picked[LARGE.label].kernel.label == BK16


FAMILY = "shapes:\n  - [64, 64, 64]\n  - [1024, 512, 1024]\n  - [1001, 513, 777]\nkernels:\n" + \
    V3.replace("      - K % BK == 0\n", "") + V4.replace("      - K % BK == 0\n", "")


def dispatched_run(spec) -> RunResult:
    """Every kernel case of `spec` passed, as a run of it records them."""
    cases = []
    for planned in cases_of(spec):
        if not planned.is_baseline:
            record = new_record(planned, Status.PASS)
            record.timing = summarize([1.0, 1.01, 0.99])
            cases.append(record)
    return RunResult(spec=spec.name, spec_path=None, cases=cases)


def written_kernels(path) -> dict[str, str]:
    return {kernel["name"]: kernel["function"] for kernel in yaml.safe_load(path.read_text())["kernels"]}


def test_the_family_keeps_its_name_where_a_member_wins_the_first_shape(tmp_path):
    spec = load_spec(write(tmp_path, FAMILY + """\
dispatch:
  v4:
    - {shape: [1024, 512, 1024], params: {BM: 128, TM: 8}}
    - {shape: [64, 64, 64], kernel: v3, params: {BM: 32}}
"""))
    path = dispatch_spec(spec, pick_winners(dispatched_run(spec)), tmp_path / "specs" / "d.yaml")
    assert written_kernels(path) == {"v4": "sgemm_coarsen_2d", "v3": "sgemm_coarsen_1d"}
    picked = kernel_cases(load_spec(path))
    assert picked["64x64x64"].kernel.name == "v3" and picked["64x64x64"].dispatch.table == "v4"
    assert picked["1024x512x1024"].kernel.label == "v4[BM=128,BN=64,BK=16,TM=8,TN=4]"


def test_a_family_whose_member_won_everywhere_is_written_with_its_own_params(tmp_path):
    spec = load_spec(write(tmp_path, FAMILY + """\
dispatch:
  v4:
    - {shape: [64, 64, 64], kernel: v3, params: {BM: 32}}
"""))
    path = dispatch_spec(spec, pick_winners(dispatched_run(spec)), tmp_path / "specs" / "d.yaml")
    assert written_kernels(path) == {"v4": "sgemm_coarsen_2d", "v3": "sgemm_coarsen_1d"}
    family = next(k for k in yaml.safe_load(path.read_text())["kernels"] if k["name"] == "v4")
    assert family["params"] == dict(next(k for k in spec.kernels if k.name == "v4").params)
    assert {c.kernel.name for c in kernel_cases(load_spec(path)).values()} == {"v3"}


def test_rules_of_the_spec_s_table_are_said_to_be_left_behind(tmp_path, caplog):
    spec = load_spec(write(tmp_path, FAMILY + """\
dispatch:
  v4:
    - {shape: [1024, 512, 1024], params: {BM: 128, TM: 8}, when: {M: [512, null]}}
    - {shape: [64, 64, 64], kernel: v3, params: {BM: 32}}
"""))
    with caplog.at_level(logging.WARNING, logger="driver_gemm.tune.winners"):
        path = dispatch_spec(spec, pick_winners(dispatched_run(spec)), tmp_path / "specs" / "d.yaml")
    comments = [line for line in path.read_text().splitlines() if line.startswith("#")]
    said = [line for line in comments if "not carried over" in line]
    assert len(said) == 1 and "v4" in said[0] and "when: or if: rules in 1 entry" in said[0]
    assert "nearest entry" in said[0]
    assert any("not carried over" in record.getMessage() and str(path) in record.getMessage()
               for record in caplog.records)
    assert not any("when" in entry for entry in yaml.safe_load(path.read_text())["dispatch"]["v4"])


def test_a_table_of_exact_shapes_alone_is_carried_over_without_a_word(tmp_path, caplog):
    spec = load_spec(write(tmp_path, FAMILY + """\
dispatch:
  v4:
    - {shape: [1024, 512, 1024], params: {BM: 128, TM: 8}}
    - {shape: [1001, 513, 777], params: {BM: 128, TM: 8}}
    - {shape: [64, 64, 64], kernel: v3, params: {BM: 32}}
"""))
    with caplog.at_level(logging.WARNING, logger="driver_gemm.tune.winners"):
        path = dispatch_spec(spec, pick_winners(dispatched_run(spec)), tmp_path / "specs" / "d.yaml")
    assert "not carried over" not in path.read_text() and not caplog.records
