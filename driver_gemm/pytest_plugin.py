"""pytest integration for GPU test rigs: a `gpu` marker, device and runner fixtures, and spec cases as tests.

- ``@pytest.mark.gpu`` skips a test, with the reason, where there is no CUDA driver or GPU.
- ``gemm_device`` (session): the `Device` chosen by ``--gemm-device`` or ``DRIVER_GEMM_DEVICE``.
- ``gemm_run``: a function that runs a spec (a path, a `Spec` or a dict) on that GPU and returns its `RunResult`.
- ``--gemm-spec PATH`` (repeatable) turns every case of the spec into a test with a readable id,
  ``v4[BM=64,BN=64,BK=16,TM=4,TN=4]-1001x513x777``; the spec runs once, the first time one of its
  cases is needed, and each test fails with its case's diagnosis.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_NO_GPU = pytest.StashKey[object]()


def pytest_addoption(parser):
    group = parser.getgroup("driver-gemm")
    group.addoption("--gemm-spec", action="append", default=[], metavar="PATH",
                    help="run every case of this driver-gemm spec as a test (repeatable)")
    group.addoption("--gemm-device", type=int, default=None, metavar="N",
                    help="GPU for driver-gemm tests (default $DRIVER_GEMM_DEVICE or 0)")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA driver and a GPU (skipped with the reason where there is none)")


def missing_gpu_reason(ordinal: int = 0) -> str | None:
    """Why GPU `ordinal` cannot be used here (no driver, no such GPU), or None."""
    from .cuda.device import device_count
    from .errors import NoGpuError

    try:
        count = device_count()
    except NoGpuError as exc:
        return str(exc)
    return None if count > ordinal else f"no GPU {ordinal} (this machine has {count})"


def gpu_missing_reason(config) -> str | None:
    """`missing_gpu_reason` for the session's chosen GPU, asked once per session."""
    if _NO_GPU not in config.stash:
        config.stash[_NO_GPU] = missing_gpu_reason(_ordinal(config))
    return config.stash[_NO_GPU]


def _ordinal(config) -> int:
    chosen = config.getoption("--gemm-device")
    return int(chosen if chosen is not None else os.environ.get("DRIVER_GEMM_DEVICE", 0))


def pytest_runtest_setup(item):
    if item.get_closest_marker("gpu") is not None:
        reason = gpu_missing_reason(item.config)
        if reason:
            pytest.skip(f"needs a GPU: {reason}")


@pytest.fixture(scope="session")
def gemm_device(pytestconfig):
    """The GPU chosen for driver-gemm tests, with a context of its own for the session."""
    reason = gpu_missing_reason(pytestconfig)
    if reason:
        pytest.skip(f"needs a GPU: {reason}")
    from .cuda.device import Device

    with Device(_ordinal(pytestconfig)) as device:
        yield device


@pytest.fixture
def gemm_run(pytestconfig):
    """Run a spec (path, `Spec` or dict) on the chosen GPU, isolated in a worker process; return the `RunResult`."""
    reason = gpu_missing_reason(pytestconfig)
    if reason:
        pytest.skip(f"needs a GPU: {reason}")
    from .pipeline.runner import run_spec
    from .spec.model import Spec
    from .spec import load_spec, spec_from_dict

    def run(spec, **options):
        if isinstance(spec, (str, Path)):
            spec = load_spec(spec)
        elif isinstance(spec, dict):
            spec = spec_from_dict(spec)
        assert isinstance(spec, Spec), f"not a spec: {spec!r}"
        options.setdefault("isolate", True)
        return run_spec(spec, device=_ordinal(pytestconfig), **options)

    return run


# ------------------------------------------------------------------------------------- spec cases as tests


class GemmCaseFailed(AssertionError):
    """A spec case that did not pass (a test failure, as pytest reports one); its message is the case's diagnosis."""


class GemmSpecItems(pytest.Collector):
    """The cases of one spec; the spec runs once, when the first of them is run."""

    def __init__(self, *, spec_path: Path, **kwargs):
        super().__init__(**kwargs)
        self.spec_path = spec_path
        self._results: dict | None = None

    def collect(self):
        from .pipeline.cases import cases_of
        from .spec import load_spec

        spec = load_spec(self.spec_path)
        self.spec = spec
        for case in cases_of(spec):
            yield GemmCaseItem.from_parent(self, name=f"{case.label}-{case.shape.label}",
                                           key=(case.label, case.shape.label))

    def results(self) -> dict:
        if self._results is None:
            from .pipeline.runner import run_spec

            run = run_spec(self.spec, device=_ordinal(self.config), isolate=True)
            self._results = {(case.kernel, case.shape.label): case for case in run.cases}
        return self._results


class GemmCaseItem(pytest.Item):
    """One kernel on one shape of a spec."""

    def __init__(self, *, key, **kwargs):
        super().__init__(**kwargs)
        self.key = key
        self.add_marker(pytest.mark.gpu)

    def runtest(self):
        case = self.parent.results().get(self.key)
        if case is None:
            raise GemmCaseFailed("the run produced no result for this case")
        if not case.ok:
            raise GemmCaseFailed(f"{case.status}: {case.message}")
        if case.timing is not None:
            self.user_properties.append(("median_ms", case.timing.median_ms))
            if case.pct_cublas is not None:
                self.user_properties.append(("pct_cublas", case.pct_cublas))

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, GemmCaseFailed):
            return f"{self.key[0]} at {self.key[1]}: {excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.parent.spec_path, None, f"{self.key[0]} at {self.key[1]}"


def pytest_collection_modifyitems(session, config, items):
    for text in config.getoption("--gemm-spec"):
        path = Path(text)
        if not path.is_file():
            raise pytest.UsageError(f"--gemm-spec: no such spec file {text}")
        collector = GemmSpecItems.from_parent(session, name=path.name, nodeid=text, spec_path=path.resolve())
        items.extend(collector.collect())
