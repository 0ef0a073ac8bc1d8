"""specs/suite.yaml and specs/fp8.yaml without a GPU: the suite's shapes, what its dispatch table picks for
each, and the blocks that makes on an H200's 132 SMs."""

import pytest

from driver_gemm.cli import EXIT_OK, main
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.dispatch import select_kernel

from conftest import SPECS

SM_COUNT = 132
SUITE = load_spec(SPECS / "suite.yaml")
DECODE = [(m, n, k) for m in (1, 16, 64, 128) for n, k in ((4096, 4096), (8192, 8192), (14336, 4096))]


def _labels(spec):
    return {shape.label for shape in spec.shapes}


def test_the_suite_holds_the_seed_squares_decode_prefill_and_awkward_shapes():
    labels = _labels(SUITE)
    wanted = ["1024x512x1024", "4096x4096x4096", "8192x8192x8192", "4096x14336x4096", "4096x4096x14336",
              "8192x1024x8192", *(f"{m}x{n}x{k}" for m, n, k in DECODE)]
    assert set(wanted) <= labels
    awkward = [s for s in SUITE.shapes if s.M % 64 and s.N % 256 and s.K % 64]   # no dimension a whole tile
    assert len(awkward) >= 2 and any(s.M % 2 for s in awkward)


def _blocks(kernel, shape):
    env = {"M": shape.M, "N": shape.N, "K": shape.K, "sm_count": SM_COUNT, **kernel.params}
    return kernel.grid[0].evaluate_int(env), kernel.params


@pytest.mark.parametrize("name", ["v13-bf16", "v13-bf16-out", "v13-tf32"])
def test_the_dispatch_table_splits_k_where_tiles_alone_would_leave_the_gpu_idle(name):
    kernel = next(k for k in SUITE.kernels if k.name == name)
    table = SUITE.dispatch[name]
    for shape in SUITE.shapes:
        blocks, params = _blocks(select_kernel(kernel, table, shape), shape)
        tiles = -(-shape.N // 256) * -(-shape.M // (64 * params["CWG"]))
        assert blocks % params["SPLITS"] == 0 and blocks <= SM_COUNT, (shape.label, params)
        if shape.M <= 128 or tiles < SM_COUNT // 2:      # skinny or few tiles: split, into a quarter of the SMs or
            # more, but no deeper than 4: the partial sums' exchange costs more than idle SMs (docs/tuning.md)
            assert 1 < params["SPLITS"] <= 4 and blocks >= SM_COUNT // 4, (shape.label, params, blocks)
        else:                                            # the tiles fill the GPU: v12p's persistent form
            assert params == {**params, "SPLITS": 1, "CWG": 2}, (shape.label, params)
        if params["CWG"] == 1:
            assert shape.M <= 64 or tiles * 2 < SM_COUNT, (shape.label, params)


def test_fp8_compiles_and_plans_offline(capsys):
    # NVRTC builds both forms for sm_90a and plan checks their tensor maps, cluster, shared memory and registers.
    assert main(["plan", str(SPECS / "fp8.yaml"), "--arch", "sm_90a", "-s", "4096x4096x4096"]) == EXIT_OK
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == "2 ok, 0 INVALID"
