"""Tensor maps a kernel does not take by value, planned without a GPU: an array of one map per matrix of a batch
that the kernel indexes by its matrix (``pass: pointer, count: batch``), and maps in ``__constant__`` memory that
its host code would fill (``constants:`` entries of ``type: tensormap``), each checked as a parameter's map is, the
constant's bytes against its variable and its rank against the copies that take no parameter's map.
tests/kernels/tma_map_arrays.cu holds both kinds."""

from __future__ import annotations

import shutil

import pytest

from driver_gemm.errors import SpecError
from driver_gemm.planning.case_plan import tensor_map_offsets
from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.specfile import load_spec

from conftest import TEST_KERNELS

MAP_ARRAY = """\
  - name: array
    source: tma_map_arrays.cu
    function: tma_map_array
    params: {WRONG: false}
    types: {a: fp32, b: fp32, c: fp32}
    batch: {count: 3}
    block: [32, 32]
    grid: [ceil(N / 32), ceil(M / 32), batch]
    tile: [32, 32]
    signature:
      - {name: maps_a, type: tensormap, tensor: A, box: [32, 32], pass: pointer@A@}
      - {name: maps_b, type: tensormap, tensor: B, box: [32, 32], pass: pointer, count: batch}
      - C
      - M
      - N
      - K
"""

CONSTANT_MAPS = """\
  - name: constant
    source: tma_map_arrays.cu
    function: tma_constant_maps
    params: {WRONG: false}
    block: [32, 32]
    grid: [ceil(N / 32), ceil(M / 32)]
    tile: [32, 32]
    signature: [C, M, N, K]
    constants:
      - {name: c_map_a, type: tensormap, tensor: A@A@}
      - {name: c_map_b, type: tensormap, tensor: B, box: [32, 32]}
"""

# A kernel that takes a tensor map inside a struct, @FIELD@ its one field, and A through a constant map; read, not
# compiled.
STRUCT_MAP = """\
  - name: smap
    source: tma_map_arrays.cu
    function: tma_struct_map
    params: {WRONG: false}
    block: [32, 32]
    grid: [ceil(N / 32), ceil(M / 32)]
    tile: [32, 32]
    signature:
      - {name: p, type: struct, fields: [@FIELD@]}
      - C
      - M
      - N
      - K
    constants:
      - {name: c_map_a, type: tensormap, tensor: A, box: [32, 32]}
"""


def _spec(tmp_path, entry: str, a_map: str, shapes: str = "[[256, 256, 256], [100, 68, 36]]"):
    (tmp_path / "pyproject.toml").write_text("")
    shutil.copy(TEST_KERNELS / "tma_map_arrays.cu", tmp_path)
    path = tmp_path / "spec.yaml"
    path.write_text(f"shapes: {shapes}\nkernels:\n" + entry.replace("@A@", a_map))
    return load_spec(path)


def _line(entry: str, text: str, last: bool = False) -> int:
    """The spec file's line (after its shapes: and kernels: lines) of `entry`'s first, or last, line holding
    `text`."""
    lines = [number for number, line in enumerate(entry.splitlines(), start=3) if text in line]
    return lines[-1] if last else lines[0]


def _plans(tmp_path, entry: str, a_map: str, **kwargs):
    return plan_spec(_spec(tmp_path, entry, a_map, **kwargs), "sm_90").plans


# ------------------------------------------------------------------------------------- an array of maps

def test_a_map_array_has_a_map_per_matrix_a_batch_stride_apart(tmp_path):
    plans = _plans(tmp_path, MAP_ARRAY, ", count: batch")
    assert all(plan.valid for plan in plans), [str(problem) for plan in plans for problem in plan.problems]
    plan = plans[1]          # 100 x 68 x 36: A's matrices 100 * 36 floats apart
    argument = plan.kernel.signature[0]
    assert tensor_map_offsets(plan.kernel, plan.operands, argument) == [0, 14400, 28800]
    assert tensor_map_offsets(plan.kernel, plan.operands, plan.kernel.signature[1]) == [0, 9792, 19584]
    assert any(note.startswith("tensor map maps_a: 3 maps, one per matrix of A, 14400 bytes apart")
               for note in plan.notes), plan.notes


@pytest.mark.parametrize("buffer", ["buf", "c"])
def test_a_map_array_over_a_buffer_is_refused_at_count(tmp_path, buffer):
    # count lays the maps out by an operand's batch stride; a buffer, even one named like an operand, has none
    over_buffer = (f"{{name: maps_a, type: tensormap, tensor: {buffer}, dims: [64, 3], strides: [256], "
                   f"box: [32, 1], pass: pointer, count: batch}}\n"
                   f"      - {{name: {buffer}, type: buffer, element: fp32, size: 1024, pass: none}}")
    entry = MAP_ARRAY.replace("{name: maps_a, type: tensormap, tensor: A, box: [32, 32], pass: pointer@A@}",
                              over_buffer)
    entry = entry.replace("    signature:", "    constants: [{name: c_map_a, type: tensormap, tensor: A, "
                                             "box: [32, 32]}]\n    signature:")
    with pytest.raises(SpecError, match=f"count makes one map per matrix of A, B or C, a batch stride apart; "
                                        f"tensor '{buffer}' is a buffer of the signature") as caught:
        _spec(tmp_path, entry, "")
    assert caught.value.field == "kernels[array].signature[0].count"
    assert caught.value.hint.startswith("leave count out")


def test_a_map_array_inside_a_struct_is_refused_without_a_pass_hint(tmp_path):
    entry = STRUCT_MAP.replace("@FIELD@", "{name: m, type: tensormap, tensor: B, box: [32, 32], count: batch}")
    with pytest.raises(SpecError, match="a tensor map inside a struct is one map, held by value") as caught:
        _spec(tmp_path, entry, "")
    assert caught.value.field == "kernels[smap].signature[0].fields[0].count"
    assert "add pass: pointer" not in caught.value.hint and "move the map out of the struct" in caught.value.hint


def test_a_map_array_needs_a_pointer(tmp_path):
    with pytest.raises(SpecError, match=r"count makes one map per matrix, in an array the kernel indexes: only a map "
                                        r"passed by pointer") as caught:
        _spec(tmp_path, MAP_ARRAY.replace("pass: pointer@A@", "count: batch"), "")
    assert caught.value.field == "kernels[array].signature[0].count"
    assert "add pass: pointer" in str(caught.value)


def test_a_map_array_of_another_count_than_the_operands_matrices_is_invalid_at_count(tmp_path):
    plans = _plans(tmp_path, MAP_ARRAY, ", count: groups")
    problem = next(problem for problem in plans[0].problems if problem.field.endswith("signature[0].count"))
    assert "maps_a: count: groups makes 1 maps, but A holds 3 matrices" in str(problem)
    assert problem.hint == "count: batch"


def test_one_map_by_pointer_over_a_batch_is_told_of_count(tmp_path):
    plan = _plans(tmp_path, MAP_ARRAY, "")[0]
    note = next(note for note in plan.notes if note.startswith("tensor map maps_a: describes the first of A's 3"))
    assert "(&maps_a[blockIdx.z]) is given count: batch, a map per matrix" in note


# ------------------------------------------------------------------------------------- maps in constants

def test_constant_maps_reach_their_matrices_and_are_planned_as_a_parameters(tmp_path):
    plans = _plans(tmp_path, CONSTANT_MAPS, ", box: [32, 32]")
    assert all(plan.valid for plan in plans), [str(problem) for plan in plans for problem in plan.problems]
    assert set(plans[0].tensor_maps) == {"c_map_a", "c_map_b"}
    assert plans[1].tensor_maps["c_map_a"].extents == (36, 100)
    assert "c_map_a" not in plans[0].constants     # encoded when the case is bound, from its buffers
    assert not any("no constants: entry sets" in note for note in plans[0].notes)


def test_a_constant_maps_checks_are_a_parameters(tmp_path):
    # a box wider than the map allows, said at the constant's own field
    plan = _plans(tmp_path, CONSTANT_MAPS, ", box: [32, 300]")[0]
    problem, = plan.problems
    assert problem.field == "kernels[constant].constants[0].box"
    assert "c_map_a: box extent 300" in str(problem)


def test_a_constant_map_of_another_rank_than_the_copies_is_invalid(tmp_path):
    rank3 = ", dims: [K, M, 1], strides: [K * 4, M * K * 4], box: [32, 32, 1]"
    plan = _plans(tmp_path, CONSTANT_MAPS, rank3)[0]
    problem, = plan.problems
    assert problem.field == "kernels[constant].constants[0].dims"
    assert "constant c_map_a: the spec's map has rank 3, but the kernel's copies through maps of no parameter use " \
           "cp.async.bulk.tensor.2d" in str(problem)


def test_a_constant_map_array_over_one_map_variable_is_invalid_at_its_size(tmp_path):
    entry = CONSTANT_MAPS.replace("    signature:", "    batch: {count: 2}\n    types: {a: fp32}\n    signature:")
    plan = _plans(tmp_path, entry, ", box: [32, 32], count: batch")[0]
    problem = next(problem for problem in plan.problems if problem.field.endswith("constants[0].name"))
    assert "constant c_map_a: 2 tensor maps make 256 bytes; the kernel's __constant__ c_map_a is 128 bytes" \
        in str(problem)


@pytest.mark.parametrize("a_map, field, message", [
    (", box: [32, 32], pass: pointer", "constants[0].pass", "a tensor map in constants: is read by the kernel from "
                                                            "its __constant__ variable"),
    (", box: [32, BQ]", "constants[0].box[1]", "unknown name"),
])
def test_a_constant_map_is_refused_where_it_cannot_be_one(tmp_path, a_map, field, message):
    with pytest.raises(SpecError, match=message) as caught:
        _spec(tmp_path, CONSTANT_MAPS, a_map)
    assert caught.value.field == f"kernels[constant].{field}"


def test_a_constant_map_named_as_an_argument_is_refused(tmp_path):
    entry = CONSTANT_MAPS.replace("name: c_map_b", "name: M")
    with pytest.raises(SpecError, match=r"constant M is also the name of kernels\[constant\]\.signature\[1\] "
                                        rf"\(.*spec\.yaml:{_line(entry, 'signature:')}\)") as caught:
        _spec(tmp_path, entry, ", box: [32, 32]")
    assert caught.value.field == "kernels[constant].constants[1].name"


def test_a_constant_map_named_as_a_struct_field_is_refused_naming_the_field(tmp_path):
    # the case knows its maps by their names, a struct field's included: one would be encoded as the other
    entry = STRUCT_MAP.replace("@FIELD@", "{name: c_map_a, type: tensormap, tensor: B, box: [32, 32]}")
    with pytest.raises(SpecError, match=r"constant c_map_a is also the name of "
                                        r"kernels\[smap\]\.signature\[0\]\.fields\[0\]") as caught:
        _spec(tmp_path, entry, "")
    assert caught.value.field == "kernels[smap].constants[0].name"
    assert caught.value.where.endswith(f"spec.yaml:{_line(entry, 'tensor: A')}")
    assert f"spec.yaml:{_line(entry, 'name: p')})" in str(caught.value)


def test_a_constant_map_named_twice_names_the_first(tmp_path):
    entry = CONSTANT_MAPS.replace("name: c_map_b", "name: c_map_a")
    with pytest.raises(SpecError, match=r"constant c_map_a is also the name of kernels\[constant\]\.constants\[0\] "
                                        rf"\(.*spec\.yaml:{_line(entry, 'tensor: A')}\)") as caught:
        _spec(tmp_path, entry, ", box: [32, 32]")
    assert caught.value.field == "kernels[constant].constants[1].name"


@pytest.mark.parametrize("tensor, field, message", [
    ("tensor: D, ", "constants[1].tensor", "a tensor map in constants: describes A, B or C, got 'D'"),
    ("tensor: b, ", "constants[1].tensor", "a tensor map in constants: describes A, B or C, got 'b'"),
    ("", "constants[1]", "a tensormap constant needs tensor"),
])
def test_a_constant_maps_bad_tensor_is_named_at_the_constant_not_as_a_matrix_missing(tmp_path, tensor, field,
                                                                                       message):
    entry = CONSTANT_MAPS.replace("tensor: B, ", tensor)
    with pytest.raises(SpecError, match=message) as caught:
        _spec(tmp_path, entry, ", box: [32, 32]")
    assert caught.value.field == f"kernels[constant].{field}"
    assert caught.value.where.endswith(f"spec.yaml:{_line(entry, 'box: [32, 32]}', last=True)}")


def test_a_matrix_reached_nowhere_names_the_constant_map_that_could_take_it(tmp_path):
    entry = CONSTANT_MAPS.replace("      - {name: c_map_b, type: tensormap, tensor: B, box: [32, 32]}\n", "")
    with pytest.raises(SpecError, match="signature must take B exactly once") as caught:
        _spec(tmp_path, entry, ", box: [32, 32]")
    assert "__constant__ CUtensorMap" in caught.value.hint and "constants: {name: map_b, type: tensormap" in \
        caught.value.hint
