"""A kernel's own device buffer filled from a NumPy file per shape: a table its author's host code computes.

Hand-written Hopper GEMMs order their tiles by tables their host code builds for each shape (a Hilbert curve
over the SMs); ``fill: {file: tables/order-{M}x{N}.npy}`` gives such a table, saved with numpy.save. Without a
GPU: the spec's checks, the file read per shape and converted to the buffer's element, and each way a file can
be wrong, said in the case's problems at the fill's field.
"""

from __future__ import annotations

import numpy as np
import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import SpecError
from driver_gemm.planning.case_plan import plan_launch
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.model import Shape

ORDER_ENTRY = "{name: order, type: buffer, element: int32, size: ceil(M / 64) * ceil(N / 64), fill: %s}"


def spec_with(tmp_path, fill: str, allow_outside_sources: bool = False):
    """A one-kernel spec in a project of its own whose signature ends in the buffer `order` filled by `fill`."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "k.cu").write_text("")
    (tmp_path / "tables").mkdir(exist_ok=True)
    path = tmp_path / "spec.yaml"
    path.write_text("shapes: [[128, 192, 64], [64, 64, 64]]\nkernels:\n  - {name: k, source: k.cu, function: f, "
                    "params: {BM: 64}, block: [128], grid: [4], signature: [A, B, C, M, N, K, "
                    + ORDER_ENTRY % fill + "]}\n")
    return load_spec(path, allow_outside_sources=allow_outside_sources)


def buffer_plan(spec, shape: Shape):
    plan = plan_launch(spec.kernels[0], shape, arch_limits("sm_90"))
    return plan.buffers.get("order"), plan.problems


def test_each_shape_reads_its_own_file_converted_to_the_buffers_element(tmp_path):
    spec = spec_with(tmp_path, "{file: 'tables/order-{M}x{N}-{BM}.npy'}")
    np.save(tmp_path / "tables" / "order-128x192-64.npy", np.array([5, 4, 3, 2, 1, 0], dtype=np.int64))
    np.save(tmp_path / "tables" / "order-64x64-64.npy", np.array([[7]], dtype=np.uint8))
    plan, problems = buffer_plan(spec, Shape(128, 192, 64))
    assert not problems and plan.fill == "file" and plan.count == 6
    assert plan.initial_bytes().view("<i4").tolist() == [5, 4, 3, 2, 1, 0]
    assert plan.repeated_word() is None           # reset by a copy of the table before every sample
    assert plan.as_dict()["fill"] == {"file": str((tmp_path / "tables" / "order-128x192-64.npy").resolve())}
    plan, problems = buffer_plan(spec, Shape(64, 64, 64))
    assert not problems and plan.initial_bytes().view("<i4").tolist() == [7]


@pytest.mark.parametrize("array, message", [
    (np.arange(5), "holds 5 elements, but the buffer holds 6 (its size)"),
    (np.array([0, 1, 2, 3, 4, 2**40]), "beyond int32"),
    (np.array([0, 1, 2, 3, 4, 5.5]), "not whole numbers"),
    (np.array(["a"] * 6), "not numbers"),
])
def test_a_file_of_another_length_or_values_that_do_not_fit_make_the_case_invalid(tmp_path, array, message):
    spec = spec_with(tmp_path, "{file: 'tables/order-{M}x{N}.npy'}")
    np.save(tmp_path / "tables" / "order-128x192.npy", array)
    plan, problems = buffer_plan(spec, Shape(128, 192, 64))
    assert plan is None and len(problems) == 1
    assert message in str(problems[0]) and problems[0].field == "kernels[k].signature[6].fill.file"


def test_a_missing_file_a_file_that_is_no_array_and_a_name_with_no_value_are_named(tmp_path):
    spec = spec_with(tmp_path, "{file: 'tables/order-{M}x{N}.npy'}")
    _, problems = buffer_plan(spec, Shape(128, 192, 64))
    assert "order-128x192.npy does not exist (for this shape, tables/order-128x192.npy)" in str(problems[0])
    (tmp_path / "tables" / "order-128x192.npy").write_bytes(b"not an array")
    _, problems = buffer_plan(spec, Shape(128, 192, 64))
    assert "is no NumPy array saved with numpy.save: it does not begin with the .npy format's" in str(problems[0])
    assert "pickled" not in str(problems[0])   # numpy's own reading of a file it does not know
    np.save(tmp_path / "tables" / "order-128x192.npy", np.arange(6))
    with (tmp_path / "tables" / "order-128x192.npy").open("r+b") as file:
        file.truncate(60)   # the header, cut
    _, problems = buffer_plan(spec, Shape(128, 192, 64))
    assert "is no NumPy array saved with numpy.save" in str(problems[0])
    header = b"{'descr': '<i4', 'shape': (16"   # a header cut inside its dictionary: NumPy's tokenizer gives up
    (tmp_path / "tables" / "order-128x192.npy").write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little")
                                                           + header)
    _, problems = buffer_plan(spec, Shape(128, 192, 64))
    assert "is no NumPy array saved with numpy.save" in str(problems[0])
    spec = spec_with(tmp_path, "{file: 'tables/order-{TILE}.npy'}")
    _, problems = buffer_plan(spec, Shape(128, 192, 64))
    assert "{TILE} in tables/order-{TILE}.npy is neither M, N, K nor a param of the kernel" in str(problems[0])


def test_a_header_declaring_more_than_the_buffer_and_a_link_loop_are_named_before_numpy_reads_them(tmp_path):
    spec = spec_with(tmp_path, "{file: 'tables/order-{M}x{N}.npy'}")
    path = tmp_path / "tables" / "order-128x192.npy"
    np.save(path, np.arange(6, dtype=np.int32))
    # The header says 10^11 elements over 24 bytes of data: refused by its count, with nothing allocated for it.
    header = b"{'descr': '<i4', 'fortran_order': False, 'shape': (100000000000,), }"
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + bytes(24))
    _, problems = buffer_plan(spec, Shape(128, 192, 64))
    assert "holds 100,000,000,000 elements, but the buffer holds 6 (its size)" in str(problems[0])
    path.unlink()
    path.symlink_to(path.name)
    _, problems = buffer_plan(spec, Shape(128, 192, 64))
    assert "order-128x192.npy cannot be followed" in str(problems[0])
    assert problems[0].field == "kernels[k].signature[6].fill.file"


def test_a_file_outside_the_project_needs_the_users_leave(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    np.save(tmp_path / "order.npy", np.arange(6, dtype=np.int32))
    _, problems = buffer_plan(spec_with(project, "{file: ../order.npy}"), Shape(128, 192, 64))
    assert "leaves the spec's project" in str(problems[0]) and "--allow-outside-sources" in str(problems[0])
    plan, problems = buffer_plan(spec_with(project, "{file: ../order.npy}", allow_outside_sources=True),
                                 Shape(128, 192, 64))
    assert not problems and plan.initial_bytes().view("<i4").tolist() == list(range(6))


@pytest.mark.parametrize("fill, message, field", [
    ("{file: order.txt}", "a fill file is a NumPy array saved with numpy.save (.npy)", "fill.file"),
    ("{file: 3}", "names a .npy file", "fill.file"),
    ("{files: order.npy}", "unknown field 'files'", "fill.files"),
    ("{file: 'order-{M + 1}.npy'}", "{M + 1} in a fill file's name is no name", "fill.file"),
])
def test_malformed_fill_files_are_refused_at_their_field(tmp_path, fill, message, field):
    with pytest.raises(SpecError) as info:
        spec_with(tmp_path, fill)
    assert message in str(info.value) and info.value.field == f"kernels[k].signature[6].{field}"


def test_the_tuning_cache_tells_apart_buffers_filled_from_different_files(tmp_path):
    from driver_gemm.tune.tune_cache import tuning_key

    def key(fill):
        spec = spec_with(tmp_path, fill)
        return tuning_key(spec, spec.kernels[0], spec.shapes[0], {}, "sm_90")

    assert key("{file: tables/a.npy}") != key("{file: tables/b.npy}")


def test_the_tuning_cache_tells_apart_two_tables_written_under_one_name(tmp_path):
    from driver_gemm.tune.tune_cache import tuning_key

    spec = spec_with(tmp_path, "{file: tables/order.npy}")
    shape = Shape(128, 192, 64)

    def key_for(values):
        np.save(tmp_path / "tables" / "order.npy", np.array(values, dtype=np.int32))
        plan = plan_launch(spec.kernels[0], shape, arch_limits("sm_90"))
        assert not plan.problems
        return tuning_key(spec, spec.kernels[0], shape, {}, "sm_90", plan.buffers)

    first = key_for([0, 1, 2, 3, 4, 5])
    assert key_for([5, 4, 3, 2, 1, 0]) != first
    assert key_for([0, 1, 2, 3, 4, 5]) == first       # the same values again: the same key
    assert tuning_key(spec, spec.kernels[0], shape, {}, "sm_90") != first   # a key made without the plan's buffers


# ------------------------------------------------------------------------------------ numbers made by a builder

ORDER_BUILDER = '''\
import numpy as np

def reversed_tiles(values):
    tiles = -(-values["M"] // values["BM"]) * -(-values["N"] // 64)
    return list(range(tiles - 1, -1, -1))

def given(values):
    return [values["M"], values["N"], values["K"], values["BM"], 0, 0][: -(-values["M"] // 64) * -(-values["N"] // 64)]

def too_few(values):
    return [0]

def words(values):
    return ["a"] * 6

def wide(values):
    return np.full(6, 2**40)

def fails(values):
    raise KeyError("TILE")

class Own(BaseException):
    pass

def own(values):
    raise Own("the builder's own")

def huge(values):
    return [10**30] * 6

def floats_with_nan(values):
    return [0.5, float("nan"), 1, 2, 3, 4]
'''


def built_plan(tmp_path, function: str, shape: Shape = Shape(128, 192, 64)):
    (tmp_path / "order.py").write_text(ORDER_BUILDER)
    return buffer_plan(spec_with(tmp_path, f"{{builder: 'order.py:{function}'}}"), shape)


def test_a_builder_computes_each_shapes_table_from_the_shape_and_the_params(tmp_path):
    # The table fast.cu-style kernels compute on the host per shape (a tile order), made by the spec's own Python
    # rather than saved to a file for every shape.
    plan, problems = built_plan(tmp_path, "reversed_tiles")
    assert not problems and plan.fill == "built" and plan.count == 6
    assert plan.initial_bytes().view("<i4").tolist() == [5, 4, 3, 2, 1, 0]
    assert plan.as_dict()["fill"] == {"builder": "order.py:reversed_tiles"}
    plan, problems = built_plan(tmp_path, "reversed_tiles", Shape(64, 64, 64))
    assert not problems and plan.initial_bytes().view("<i4").tolist() == [0]
    plan, problems = built_plan(tmp_path, "given")
    assert not problems and plan.initial_bytes().view("<i4").tolist() == [128, 192, 64, 64, 0, 0]


@pytest.mark.parametrize("function, message", [
    ("too_few", "builder order.py:too_few returned 1 numbers, but the buffer holds 6 (its size)"),
    ("words", "builder order.py:words returned list of <U1 values, not numbers"),
    ("wide", "builder order.py:wide returned values from 1099511627776 to 1099511627776, beyond int32"),
    ("fails", "builder order.py:fails raised KeyError: 'TILE' (order.py:20)"),
    ("missing", "builder order.py:missing: order.py defines no function missing"),
    ("own", "builder order.py:own raised Own: the builder's own"),
    ("huge", "builder order.py:huge returned whole numbers beyond 64 bits"),
])
def test_a_builder_that_returns_the_wrong_numbers_makes_the_case_invalid_at_its_field(tmp_path, function, message):
    plan, problems = built_plan(tmp_path, function)
    assert plan is None and len(problems) == 1
    assert message in str(problems[0]) and problems[0].field == "kernels[k].signature[6].fill.builder", problems


@pytest.mark.parametrize("fill, message", [
    ("{builder: order.py}", "builder is FILE.py:FUNCTION"),
    ("{builder: order.txt:f}", "builder file"),
    ("{builder: 'order.py:f', file: order.npy}", "a fill mapping names one file or one builder"),
])
def test_malformed_fill_builders_are_refused_at_load(tmp_path, fill, message):
    (tmp_path / "order.py").write_text(ORDER_BUILDER)
    (tmp_path / "order.txt").write_text("")
    with pytest.raises(SpecError, match=message.replace("(", r"\(")):
        spec_with(tmp_path, fill)


def test_a_winners_spec_elsewhere_still_finds_the_builder_of_a_buffer(tmp_path):
    from driver_gemm.tune.winners import _rebase_signature_files

    (tmp_path / "order.py").write_text(ORDER_BUILDER)
    spec = spec_with(tmp_path, "{builder: 'order.py:reversed_tiles'}")
    items = [{"name": "order", "type": "buffer", "fill": {"builder": "order.py:reversed_tiles"}}]
    _rebase_signature_files(items, spec.kernels[0], tmp_path / "tuned")
    assert items[0]["fill"] == {"builder": "../order.py:reversed_tiles"}
    assert spec.kernels[0].builder_files == ((tmp_path / "order.py").resolve(),)


def test_nan_and_infinity_are_refused_from_a_builder_or_a_file_as_in_the_spec(tmp_path):
    # A fill written in the spec must be finite; a table computed or saved for a buffer of floats is held the same.
    (tmp_path / "order.py").write_text(ORDER_BUILDER)
    (tmp_path / "tables").mkdir()
    np.save(tmp_path / "tables" / "inf.npy", np.array([0, 1, 2, 3, 4, np.inf], dtype=np.float32))
    for fill, words in (("{builder: 'order.py:floats_with_nan'}",
                         "builder order.py:floats_with_nan returned NaN or infinite values; a buffer's numbers are "
                         "finite"),
                        ("{file: tables/inf.npy}", "inf.npy holds NaN or infinite values")):
        spec_with(tmp_path, fill)
        path = tmp_path / "spec.yaml"
        path.write_text(path.read_text().replace("element: int32", "element: float32"))
        _, problems = buffer_plan(load_spec(path), Shape(128, 192, 64))
        assert words in str(problems[0]), problems
