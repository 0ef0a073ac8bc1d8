"""Specs built in tests: quick measurement settings, kernels from kernels/ and tests/kernels/."""

from __future__ import annotations

import dataclasses
import shutil
import textwrap
from pathlib import Path

from conftest import ROOT, TEST_KERNELS

# K not a multiple of 4 in the first four (scalar paths); N and K multiples of 4 but not of any tile in the last
AWKWARD_SHAPES = ["1x1x1", "7x5x3", "127x33x65", "1001x513x777", "129x132x68"]
QUICK_MEASURE = "measure: {warmup: 1, min_samples: 3, min_time_s: 0, timeout_s: 0.05}\n"


def write_spec(tmp_path: Path, kernels_yaml: str, shapes: list[str], extra: str = "") -> Path:
    text = "shapes: [" + ", ".join(shapes) + "]\n" + QUICK_MEASURE + extra + "kernels:\n" + \
        textwrap.indent(textwrap.dedent(kernels_yaml), "  ")
    # Copies beside the spec, laid out as in the repository (test kernels include ../../kernels/...): a
    # spec's sources stay inside its own folder unless the user allows otherwise.
    for name, folder in (("kernels", ROOT / "kernels"), ("tests/kernels", TEST_KERNELS)):
        if not (tmp_path / name).exists():
            shutil.copytree(folder, tmp_path / name)
    text = text.replace("@KERNELS@", "kernels").replace("@TESTS@", "tests/kernels")
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def with_measure(spec, **changes):
    """`spec` with some measurement settings changed."""
    return dataclasses.replace(spec, measure=dataclasses.replace(spec.measure, **changes))


def quick(spec):
    """`spec` measured just enough for tests: a few samples, no time minimum."""
    return with_measure(spec, warmup=1, min_samples=3, min_time_s=0.0, timeout_s=0.05)


def statuses(run) -> dict:
    """A run's cases as {(kernel, shape label): (status, message)}."""
    return {(case.kernel, case.shape.label): (case.status, case.message) for case in run.cases}


def verify_only(spec_path: Path) -> dict:
    """Every kernel case of the spec at `spec_path` launched once and checked against float64, untimed and without
    the vendor row: its `statuses`. Needs a GPU."""
    from driver_gemm.runners.one_gpu import run_spec
    from driver_gemm.session.state import RunOptions
    from driver_gemm.specfile import load_spec

    spec = dataclasses.replace(load_spec(spec_path), baseline=False)
    return statuses(run_spec(spec, options=RunOptions(time=False)))


def not_passing(found: dict) -> dict:
    """The entries of `statuses` whose case did not PASS."""
    from driver_gemm.status import Status

    return {key: value for key, value in found.items() if value[0] != Status.PASS}
