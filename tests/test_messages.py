"""Messages lead with the one-line cause at the spec's file:line, the hint and details after, once per kernel."""

from __future__ import annotations

import contextlib
import shutil

import pytest

from driver_gemm.cli import EXIT_FAILED, EXIT_USAGE, main
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import SpecError
from driver_gemm.planning.build import plan_cases
from driver_gemm.planning.case_plan import plan_case
from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.session.execute import execute_case
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.model import Shape
from driver_gemm.status import Status

from conftest import ROOT
from test_spec import MINIMAL, write

TWO_SHAPES = MINIMAL.replace("[64, 32, 16]", "[64, 32, 16]\n  - [128, 128, 128]")


def line_of(path, text):
    return next(number for number, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_wrong_argument_order_is_one_short_cause_once_per_kernel(tmp_path, capsys):
    spec = write(tmp_path, TWO_SHAPES + "    signature: [M, N, K, A, B, C]\n")
    assert main(["plan", "--arch", "sm_90", str(spec)]) == EXIT_FAILED
    out = capsys.readouterr().out
    lines = out.splitlines()
    first = next(line for line in lines if "signature does not match" in line)
    assert first.startswith(f"{spec}:{line_of(spec, 'signature:')}: kernels[v4].signature: the signature does not "
                            "match the kernel's parameters: it takes (const float*, const float*, float*, int, int, int)")
    assert first.endswith("at 64x32x16, 128x128x128]") and len(first) < 300
    following = lines[lines.index(first) + 1]
    assert following.startswith("  hint: list one argument per kernel parameter, in order")
    assert "  parameter 1 (M, int32): the kernel's parameter (const float*) is 8 bytes, int32 is 4" in lines
    assert out.count("signature does not match") == 1      # once for the kernel, not per shape


def test_a_multi_line_error_puts_the_hint_after_its_cause():
    error = SpecError("cause\n  detail", where="s.yaml:3", field="kernels[a].grid", hint="do this")
    assert str(error) == "s.yaml:3: kernels[a].grid: cause\n  hint: do this\n  detail"
    assert str(SpecError("cause", where="s.yaml:3", hint="do this")) == "s.yaml:3: cause (hint: do this)"


class _Session:
    ordinal = 0
    held: dict = {}
    buffers: dict = {}
    typed_buffers: dict = {}

    class device:
        poisoned = False

        @staticmethod
        @contextlib.contextmanager
        def current():
            yield

        @staticmethod
        def mark_poisoned(error):
            pass


@pytest.mark.parametrize("change, expected", [
    (("function: sgemm_coarsen_2d", "function: sgemm_nothere"), 'identifier "sgemm_nothere" is undefined'),
    (("TN: 4}", "TN: 4, EXTRA: 3}"), "cannot determine which instance of function template"),
])
def test_a_template_error_at_run_time_names_the_spec_line_as_plan_does(tmp_path, change, expected):
    spec = load_spec(write(tmp_path, MINIMAL.replace(*change)))
    cases, compiled = plan_cases(spec, arch_limits("sm_90"), "sm_90")
    case = next(case for case in cases if not case.is_baseline)
    record = execute_case(_Session(), spec, case, compiled)
    assert record.status == Status.ERROR
    first = record.message.splitlines()[0]
    assert first == f"{spec.kernels[0].where_field('source')}: kernels[v4].source did not build:"
    assert expected in record.message
    planned = plan_spec(spec, "sm_90")
    assert str(planned.compile_errors[0]).splitlines()[0] == first


def test_a_project_without_a_marker_is_refused_with_a_hint_naming_its_markers(tmp_path, capsys):
    project = tmp_path / "project"
    (project / "specs").mkdir(parents=True)
    shutil.copytree(ROOT / "kernels", project / "kernels")
    spec = project / "specs" / "spec.yaml"
    spec.write_text(MINIMAL.replace(str(ROOT / "kernels"), "../kernels") if str(ROOT) in MINIMAL else MINIMAL)
    assert main(["plan", "--arch", "sm_90", str(spec)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "leaves the spec's project" in err
    assert "`.git`, `pyproject.toml`, `setup.py` or `setup.cfg`" in err and "--allow-outside-sources" in err
    assert not (project / "pyproject.toml").exists()


BOOLEAN = """\
shapes: [[64, 64, 64]]
kernels:
  - name: flags
    source: ../kernels/flags.cu
    function: flagged
    params: {TILE: true, CHECKED: true}
    block: [32]
    grid: [1]
"""


def test_a_yaml_boolean_for_an_integer_template_parameter_is_refused(tmp_path):
    spec_path = write(tmp_path, BOOLEAN)
    (tmp_path / "kernels" / "flags.cu").write_text(
        "template <int TILE, bool CHECKED>\n__global__ void flagged(const float* A, const float* B, float* C, "
        "int M, int N, int K) {}\n")
    planned = plan_spec(load_spec(spec_path), "sm_90")
    problems = [str(problem) for plan in planned.plans for problem in plan.problems]
    assert problems == [f"{spec_path}:6: kernels[flags].params.TILE: TILE is true, a YAML boolean, but the kernel's "
                        "template parameter takes a number (it became 1) (hint: write 1 for a number)"]


def test_the_index_overflow_note_names_the_file_and_the_shape(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL))
    note = next(note for note in plan_case(spec.kernels[0], Shape(65536, 32768, 64), arch_limits("sm_90")).notes
                if "2**31" in note)
    assert note.startswith(f"{spec.kernels[0].where}: shape 65536x32768x64: C (M*N) = 2147483648 elements")
