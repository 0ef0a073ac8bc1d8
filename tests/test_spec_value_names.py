"""The names an argument's value, a struct's field or fixed array, a buffer's size and a constant's value may read,
checked when the spec is read, as the launch's expressions are: a misspelt name is a spec error (exit 2) at its
file, line and field, and every name a case gives those fields is taken."""

from __future__ import annotations

from pathlib import Path

import pytest

from driver_gemm.cli import EXIT_USAGE, main
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import SpecError
from driver_gemm.planning.case_plan import plan_launch
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.model import Shape


def write_spec(folder: Path, kernel_lines: str, extra: str = "") -> Path:
    """A one-kernel spec whose kernel entry ends with `kernel_lines` (block YAML, indented 4)."""
    (folder / "pyproject.toml").write_text("")
    (folder / "k.cu").write_text("")
    path = folder / "spec.yaml"
    path.write_text(f"shapes: [[64, 48, 40]]\n{extra}kernels:\n"
                    "  - name: k\n    source: k.cu\n    function: f\n    params: {TILE: 16}\n"
                    "    values: {S: 8}\n    block: [1]\n    grid: [1]\n" + kernel_lines)
    return path


def refusal(folder: Path, kernel_lines: str, extra: str = "") -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec(write_spec(folder, kernel_lines, extra))
    return info.value


def line_of(path: Path, text: str) -> int:
    return next(number for number, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_typed_scalar_that_reads_an_unknown_name_is_refused_at_its_line(tmp_path):
    lines = "    signature:\n      - A\n      - B\n      - C\n      - {name: group, type: int32, value: TILEE}\n"
    error = refusal(tmp_path, lines)
    assert error.field == "kernels[k].signature[3].value"
    assert error.where.endswith(f"spec.yaml:{line_of(tmp_path / 'spec.yaml', 'TILEE')}")
    assert "argument group" in error.message and "unknown name TILEE" in error.message
    assert "TILE" in error.hint and "S" in error.hint.split(", ")


def test_a_fixed_array_of_a_struct_that_reads_an_unknown_name_is_refused_at_its_field(tmp_path):
    lines = ("    signature:\n      - A\n      - B\n      - C\n      - name: params\n        type: struct\n"
             "        fields:\n          - M\n          - {name: stride, type: int64, value: [lda, FOO]}\n")
    error = refusal(tmp_path, lines)
    assert error.field == "kernels[k].signature[3].fields[1].value[1]"
    assert error.where.endswith(f":{line_of(tmp_path / 'spec.yaml', 'FOO')}")
    assert "argument stride" in error.message and "unknown name FOO" in error.message


def test_a_buffer_size_that_reads_an_unknown_name_or_a_scalar_is_refused(tmp_path):
    lines = "    signature: [A, B, C, {name: ws, type: buffer, element: int32, size: TILE * tiles}]\n"
    error = refusal(tmp_path, lines)
    assert error.field == "kernels[k].signature[3].size"
    assert "buffer ws: size" in error.message and "unknown name tiles" in error.message
    # a size is made from the case's shape, operands and params: the scalars are no count of elements
    lines = "    signature: [A, B, C, alpha, {name: ws, type: buffer, element: int32, size: M * alpha}]\n"
    error = refusal(tmp_path, lines)
    assert error.field == "kernels[k].signature[4].size" and "reads the scalar alpha" in error.message


def test_a_constant_that_reads_an_unknown_name_is_refused_at_its_line(tmp_path):
    lines = ("    signature: [A, B, C]\n    constants:\n      - {name: table, type: float32, value: [1, gamma]}\n"
             "      - {name: scale, type: float32, value: gama}\n")
    error = refusal(tmp_path, lines, extra="scalars: {gamma: 0.5}\n")
    assert error.field == "kernels[k].constants[1].value"
    assert error.where.endswith(f":{line_of(tmp_path / 'spec.yaml', 'gama}')}")
    assert "constant scale" in error.message and "unknown name gama" in error.message and "gamma" in error.hint


def test_a_then_launch_scalar_that_reads_an_unknown_name_is_refused(tmp_path):
    lines = ("    signature: [A, B, {name: ws, type: buffer, element: float32, size: M * N}]\n"
             "    then:\n      - function: g\n        block: [1]\n        grid: [1]\n"
             "        signature: [ws, C, {name: count, type: int32, value: M * NN}]\n")
    error = refusal(tmp_path, lines)
    assert error.field == "kernels[k].then[0].signature[2].value" and "unknown name NN" in error.message


def test_the_command_line_says_a_misspelt_value_name_is_a_bad_spec(tmp_path, capsys):
    path = write_spec(tmp_path, "    signature: [A, B, C, {name: n, type: int32, value: TILEE}]\n")
    assert main(["plan", str(path), "--arch", "sm_90"]) == EXIT_USAGE
    assert "kernels[k].signature[3].value" in capsys.readouterr().err


def test_every_name_a_case_gives_these_fields_is_taken(tmp_path):
    lines = ("    grid: [max_active_clusters]\n"
             "    signature:\n      - A\n      - B\n      - C\n"
             "      - {name: a, type: int64, value: M * N * K + lda + ldb + ldc + strideA + strideB + strideC}\n"
             "      - {name: b, type: int32, value: batch + groups + sm_count + max_active_clusters + TILE + S}\n"
             "      - {name: c, type: float32, value: alpha * beta * gamma}\n"
             "      - {name: ws, type: buffer, element: int32,\n"
             "         size: 'TILE * S + sm_count + max_active_clusters + lda'}\n"
             "      - name: args\n        type: struct\n"
             "        fields: [{name: d, type: int64, value: [2 * gamma, TILE, max_active_clusters]}]\n"
             "    constants:\n      - {name: table, type: float32, value: [gamma, TILE, S, lda, sm_count]}\n")
    path = write_spec(tmp_path, lines, extra="scalars: {gamma: 0.5}\n")
    path.write_text(path.read_text().replace("    grid: [1]\n", ""))
    kernel = load_spec(path).kernels[0]
    plan = plan_launch(kernel, Shape(64, 48, 40), arch_limits("sm_90"), {"alpha": 1.0, "beta": 0.0, "gamma": 0.5})
    assert not plan.problems
    assert {"a", "b", "c", "d"} <= set(plan.argument_values) and "ws" in plan.buffers


def test_a_constant_alone_may_read_the_clusters_that_fit(tmp_path):
    lines = ("    signature: [A, B, C]\n"
             "    constants:\n      - {name: persistent, type: int32, value: max_active_clusters}\n")
    kernel = load_spec(write_spec(tmp_path, lines)).kernels[0]
    assert kernel.grid_or_signature_reads("max_active_clusters")
    plan = plan_launch(kernel, Shape(64, 48, 40), arch_limits("sm_90"))
    assert not plan.problems and plan.active_clusters is not None and "persistent" in plan.constants
