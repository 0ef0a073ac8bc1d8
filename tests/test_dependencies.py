"""The dependencies pyproject.toml declares are the ones the code imports, bounded as the ecosystem expects.

The lowest allowed versions installed together are checked by `.ci/lowest` (run here with
DRIVER_GEMM_TEST_LOWEST=1): it downloads a few hundred MB of wheels, which the default test command
does not spend.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
CUDA_MAJOR_SPECIFIC = ("cuda-bindings", "nvidia-cuda-nvrtc", "nvidia-nvjitlink", "nvidia-cublas", "cupti-python")
# Each third-party module the package imports, and the distribution that provides it.
PROVIDERS = {
    "cuda.bindings": "cuda-bindings", "cuda.pathfinder": "cuda-pathfinder", "numpy": "numpy", "yaml": "pyyaml",
    "nvmath": "nvmath-python", "rich": "rich", "matplotlib": "matplotlib", "dask": "dask",
    "distributed": "dask", "nvtx": "nvtx", "pynvml": "nvidia-ml-py", "optuna": "optuna",
    "zstandard": "zstandard", "lz4": "lz4", "pytest": "pytest", "cupti": "cupti-python",
}
# Imported only where present, with a fallback that needs no extra: dask-cuda pins each Dask worker to its GPU
# where it is installed (plain Dask workers, each told its GPU, do the same job without it); the `nvidia`
# namespace of NVIDIA's wheels is searched for a disassembler (cuobjdump, nvdisasm) that a wheel may ship.
UNDECLARED_ON_PURPOSE = {"dask_cuda", "nvidia"}


def requirements(group: str | None = None) -> list[Requirement]:
    lines = PROJECT["dependencies"] if group is None else PROJECT["optional-dependencies"][group]
    return [Requirement(line) for line in lines]


def declared() -> dict[str, list[Requirement]]:
    """Every requirement, by distribution name, across the dependencies and all extras."""
    found: dict[str, list[Requirement]] = {}
    for group in [None, *PROJECT["optional-dependencies"]]:
        for requirement in requirements(group):
            found.setdefault(requirement.name.lower().replace("_", "-"), []).append(requirement)
    return found


def third_party_imports() -> set[str]:
    """The modules the package imports from outside itself and the standard library (``cuda`` by submodule)."""
    found = set()
    for path in (ROOT / "driver_gemm").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [f"{node.module}.{alias.name}" if node.module == "cuda" else node.module
                         for alias in node.names]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == "driver_gemm":
                    continue
                found.add(".".join(name.split(".")[:2]) if top == "cuda" else top)
    return found


def test_every_imported_module_is_declared_by_the_distribution_that_provides_it():
    imported = third_party_imports() - UNDECLARED_ON_PURPOSE
    assert imported == set(PROVIDERS), "a new import: name its distribution in PROVIDERS and declare it"
    names = declared()
    for module, distribution in PROVIDERS.items():
        assert distribution in names, f"{module} is imported but {distribution} is declared nowhere"
    # cuda-python is a metapackage: the code imports cuda.bindings and cuda.pathfinder, declared as themselves.
    assert "cuda-python" not in names


def test_the_modules_the_package_cannot_run_without_are_plain_dependencies():
    plain = {requirement.name for requirement in requirements()}
    assert {"cuda-bindings", "cuda-pathfinder", "nvidia-cuda-nvrtc", "nvidia-nvjitlink", "numpy", "pyyaml",
            "nvmath-python", "rich"} == plain


def test_cuda_major_specific_packages_stay_below_the_next_major():
    for name in CUDA_MAJOR_SPECIFIC:
        for requirement in declared()[name]:
            assert Version("13.9") in requirement.specifier, requirement
            assert Version("14.0") not in requirement.specifier, requirement
            assert Version("12.9") not in requirement.specifier, requirement


def test_numpy_floor_is_what_nvmath_python_needs():
    (numpy,) = declared()["numpy"]
    assert Version("1.25.0") in numpy.specifier and Version("1.24.4") not in numpy.specifier


def test_the_test_extra_holds_every_optional_package():
    """Each cross-check written against an optional package runs in CI, where only the test extra is installed."""
    test_extra = {requirement.name for requirement in requirements("test")}
    for group in PROJECT["optional-dependencies"]:
        if group in ("test", "cublas"):   # cuBLAS is loaded only on a GPU machine (its extra, or a toolkit's)
            continue
        for requirement in requirements(group):
            assert requirement.name in test_extra, f"{requirement} (extra {group!r}) is missing from the test extra"
    assert {"scipy", "ml_dtypes"} <= test_extra   # references the tests compare with


def test_optional_floors_agree_between_an_extra_and_the_test_extra():
    for name, found in declared().items():
        assert len({str(requirement.specifier) for requirement in found}) == 1, found


def test_the_package_says_it_is_typed():
    assert (ROOT / "driver_gemm" / "py.typed").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["*"]


@pytest.mark.skipif(not os.environ.get("DRIVER_GEMM_TEST_LOWEST"),
                    reason="set DRIVER_GEMM_TEST_LOWEST=1 to install the lowest allowed versions into a fresh "
                           "virtual environment and test there (.ci/lowest): a few hundred MB of downloads")
def test_the_lowest_allowed_versions_install_together_and_pass_the_tests():
    done = subprocess.run([sys.executable, str(ROOT / ".ci" / "lowest")], capture_output=True, text=True,
                          timeout=3000)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
