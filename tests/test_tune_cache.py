"""The tuning cache: what its key covers, hits and misses, --fresh, and its integrity rules."""

import dataclasses
import shutil

import pytest

from driver_gemm.measure.stats import summarize
from driver_gemm.results.records import CaseResult, VerificationRecord
from driver_gemm.specfile.model import Shape
from driver_gemm.specfile import load_spec
from driver_gemm.status import Status
from driver_gemm.tune.tune_cache import TuningCache, tuning_key, source_digest


ENVIRONMENT = {"device": {"name": "NVIDIA H200", "sm_count": 132}, "driver_version": "13.0",
               "nvrtc_version": "13.0", "host": "a", "numpy": "2.5"}
SHAPE = Shape(128, 128, 128)

SPEC = """\
shapes:
  - [128, 128, 128]
kernels:
  - name: k
    source: ../kernels/own.cu
    function: tiled
    params: {BM: [32, 64]}
    block: [16, 16]
    grid: [ceil(N / BM), ceil(M / BM)]
"""


@pytest.fixture
def spec_path(tmp_path):
    kernels = tmp_path / "own" / "kernels"
    kernels.mkdir(parents=True)
    (kernels / "own.cu").write_text('#include "tile.h"\ntemplate <int BM> __global__ void tiled() {}\n')
    (kernels / "tile.h").write_text("#define TILE 4\n")
    (tmp_path / "own" / "pyproject.toml").write_text("")   # the project the spec's sources stay in
    specs = tmp_path / "own" / "specs"
    specs.mkdir()
    (specs / "spec.yaml").write_text(SPEC)
    return specs / "spec.yaml"


def key_of(spec, index=0, shape=SHAPE, environment=ENVIRONMENT):
    return tuning_key(spec, spec.kernels[index], shape, environment, "sm_90")


def test_the_key_covers_what_decides_a_measurement(spec_path):
    spec = load_spec(spec_path)
    base = key_of(spec)
    assert key_of(load_spec(spec_path)) == base                         # stable
    assert key_of(spec, index=1) != base                                 # template parameters
    assert key_of(spec, shape=Shape(128, 128, 256)) != base              # shape
    for field, value in (("driver_version", "12.8"), ("nvrtc_version", "13.5")):
        assert key_of(spec, environment={**ENVIRONMENT, field: value}) != base
    for field, value in (("name", "NVIDIA H100 80GB HBM3"), ("sm_count", 114)):
        assert key_of(spec, environment={**ENVIRONMENT, "device": {**ENVIRONMENT["device"], field: value}}) != base
    assert key_of(spec, environment={**ENVIRONMENT, "host": "b", "numpy": "3.0"}) == base   # not what decides
    assert key_of(dataclasses.replace(spec, measure=dataclasses.replace(spec.measure, flush_l2=False))) != base
    assert key_of(dataclasses.replace(spec, scalars={"alpha": 2.0, "beta": 0.0})) != base
    kernel = dataclasses.replace(spec.kernels[0], options=("-DFAST",))
    assert tuning_key(spec, kernel, SHAPE, ENVIRONMENT, "sm_90") != base
    assert tuning_key(spec, spec.kernels[0], SHAPE, ENVIRONMENT, "sm_100") != base


def test_the_key_follows_the_source_and_its_headers_not_their_place(spec_path, tmp_path):
    spec = load_spec(spec_path)
    base = key_of(spec)
    moved = tmp_path / "elsewhere"
    shutil.copytree(spec_path.parent.parent, moved)
    assert key_of(load_spec(moved / "specs" / "spec.yaml")) == base
    header = spec_path.parent.parent / "kernels" / "tile.h"
    before = source_digest(spec.kernels[0].source)
    header.write_text("#define TILE 8\n")
    assert source_digest(spec.kernels[0].source) != before and key_of(spec) != base


def timed_case(label="k[BM=32]", status=Status.PASS):
    return CaseResult(kernel=label, name="k", shape=SHAPE, status=status, params={"BM": 32},
                      timing=summarize([1.0, 1.1, 0.9]), verification=VerificationRecord(status="PASS", rel_fro_error=1e-7))


def test_a_stored_case_is_a_hit_until_fresh(tmp_path, monkeypatch):
    monkeypatch.delenv("DRIVER_GEMM_NO_CACHE", raising=False)
    cache = TuningCache(tmp_path / "tune")
    assert cache.lookup("ab" * 32) is None and cache.misses == 1
    case = timed_case()
    cache.store("ab" * 32, case)
    again = TuningCache(tmp_path / "tune")
    found = again.lookup("ab" * 32)
    assert found is not None and again.hits == 1
    assert found.kernel == case.kernel and found.timing.median_ms == case.timing.median_ms
    assert found.verification == case.verification and found.shape == SHAPE
    fresh = TuningCache(tmp_path / "tune", fresh=True)
    assert fresh.lookup("ab" * 32) is None and fresh.misses == 1
    fresh.store("ab" * 32, timed_case(label="k[BM=32]"))     # fresh still records what it measured
    assert TuningCache(tmp_path / "tune").lookup("ab" * 32) is not None


def test_only_verified_timed_cases_are_kept(tmp_path, monkeypatch):
    monkeypatch.delenv("DRIVER_GEMM_NO_CACHE", raising=False)
    cache = TuningCache(tmp_path / "tune")
    cache.store("cd" * 32, timed_case(status=Status.FAIL))
    untimed = timed_case()
    untimed.timing = None
    cache.store("ef" * 32, untimed)
    assert cache.lookup("cd" * 32) is None and cache.lookup("ef" * 32) is None
    assert not list((tmp_path / "tune").rglob("*.json"))


def test_a_corrupt_entry_is_ignored_and_rewritten(tmp_path, monkeypatch):
    monkeypatch.delenv("DRIVER_GEMM_NO_CACHE", raising=False)
    cache = TuningCache(tmp_path / "tune")
    cache.store("12" * 32, timed_case())
    path = cache.path_for("12" * 32)
    blob = path.read_bytes()
    path.write_bytes(blob.replace(b'"PASS"', b'"FAIL"', 1))
    assert cache.lookup("12" * 32) is None
    cache.store("12" * 32, timed_case())
    assert cache.lookup("12" * 32) is not None
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_the_cache_lives_beside_the_cubin_cache_and_obeys_its_switch(tmp_path, monkeypatch):
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DRIVER_GEMM_NO_CACHE", raising=False)
    cache = TuningCache()
    assert cache.directory == tmp_path / "cache" / "tune"
    cache.store("34" * 32, timed_case())
    assert cache.path_for("34" * 32).is_file()
    monkeypatch.setenv("DRIVER_GEMM_NO_CACHE", "1")
    assert TuningCache().lookup("34" * 32) is None
