"""A non-editable install carries its seed kernels and specs and plans them from any directory.

The package is built from a copy of the checkout's sources and installed
with pip into a temporary folder (no editable link back to the checkout);
commands then run from another temporary folder with only that install on
PYTHONPATH, and the real dependencies of the current environment.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from driver_gemm.cuda.headers import STAND_INS

from driver_gemm.specfile import load_spec

ROOT = Path(__file__).resolve().parent.parent
BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "driver_gemm", "kernels", "specs")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def _can_build_without_isolation() -> bool:
    """setuptools with a bdist_wheel command (its own from 70.1, else the `wheel` package's)."""
    if importlib.util.find_spec("setuptools") is None:
        return False
    import setuptools

    major, minor = (int(part) for part in setuptools.__version__.split(".")[:2])
    return (major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The `driver_gemm` folder of a fresh non-editable install."""
    source = tmp_path_factory.mktemp("source")
    for name in BUILD_INPUTS:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_data"))
        else:
            shutil.copy2(path, source / name)
    target = tmp_path_factory.mktemp("site")
    local = _can_build_without_isolation()
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
               "--no-compile", *(["--no-build-isolation"] if local else []), "--target", str(target), str(source)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        if not local:
            pytest.skip("no setuptools with bdist_wheel here (the test extra brings it) and pip could not fetch a "
                        f"build environment: {result.stderr.strip().splitlines()[-1:]}")
        pytest.fail(f"pip install of the checkout failed:\n{result.stdout}\n{result.stderr}")
    return target / "driver_gemm"


def run_installed(installed: Path, arguments: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run ``python`` with only the install on PYTHONPATH (the checkout is neither there nor the cwd)."""
    environment = {**os.environ, "PYTHONPATH": str(installed.parent), "PYTHONNOUSERSITE": "1"}
    return subprocess.run([sys.executable, *arguments], capture_output=True, text=True, cwd=cwd,
                          env=environment, timeout=240)


def seed_labels() -> list[str]:
    return [kernel.label for kernel in load_spec(ROOT / "specs" / "seed.yaml").kernels]


def test_the_install_holds_every_spec_and_the_sources_and_headers_they_reference(installed):
    data = installed / "_data"
    assert (data / "specs" / "seed.yaml").is_file()
    shipped = sorted(path.name for path in (data / "specs").glob("*.yaml"))
    assert shipped == sorted(path.name for path in (ROOT / "specs").glob("*.yaml"))
    assert sorted(p.name for p in (data / "kernels").iterdir()) == sorted(p.name for p in (ROOT / "kernels").iterdir())
    referenced = 0
    for spec in (data / "specs").glob("*.yaml"):
        for kernel in yaml.safe_load(spec.read_text())["kernels"]:
            written = kernel.get("source") or kernel["binary"]
            source = (spec.parent / written).resolve()
            assert source.is_file() and source.is_relative_to(data.resolve()), (spec.name, written)
            if "binary" in kernel:   # a prebuilt image: no headers
                continue
            for header in INCLUDE.findall(source.read_text()):
                assert (source.parent / header).is_file(), (source.name, header)
            referenced += 1
    assert referenced >= 10
    # NVRTC's stand-ins for the C library and host-only headers go with the package (cuda/headers.py)
    stand_ins = installed / "cuda" / "nvrtc_headers"
    assert sorted(p.relative_to(stand_ins).as_posix() for p in stand_ins.rglob("*")) == \
        sorted(p.relative_to(STAND_INS).as_posix() for p in STAND_INS.rglob("*"))


def test_the_installed_copy_is_what_runs_and_finds_its_data(installed, tmp_path):
    probe = ("import driver_gemm, driver_gemm.bundled as b; "
             "print(driver_gemm.__file__); print(b.data_root()); print(b.default_spec_path())")
    result = run_installed(installed, ["-c", probe], tmp_path)
    assert result.returncode == 0, result.stderr
    package_file, data_root, default_spec = result.stdout.split()
    assert Path(package_file).parent == installed
    assert Path(data_root) == installed / "_data" and Path(default_spec).is_file()
    assert not Path(default_spec).is_relative_to(ROOT)


def test_plan_of_the_shipped_seed_spec_from_another_directory(installed, tmp_path):
    spec = installed / "_data" / "specs" / "seed.yaml"
    result = run_installed(installed, ["-m", "driver_gemm", "plan", "--arch", "sm_90", str(spec)], tmp_path)
    assert result.returncode == 0, result.stderr
    for label in seed_labels():
        assert label in result.stdout
    assert "sm_90" in result.stdout


def test_plan_with_no_spec_uses_the_shipped_seed_spec(installed, tmp_path):
    check = ("import driver_gemm.bundled as b, driver_gemm.specfile.model as m; "
             "print(m.DEFAULT_SPEC == b.default_spec_path())")
    uses_bundled = run_installed(installed, ["-c", check], tmp_path)
    assert uses_bundled.returncode == 0, uses_bundled.stderr
    assert uses_bundled.stdout.strip() == "True"
    result = run_installed(installed, ["-m", "driver_gemm", "plan", "--arch", "sm_90"], tmp_path)
    assert result.returncode == 0, result.stderr
    for label in seed_labels():
        assert label in result.stdout


def test_the_install_plans_and_lists_its_specs_by_name_from_another_directory(installed, tmp_path):
    planned = run_installed(installed, ["-m", "driver_gemm", "plan", "--arch", "sm_90", "seed", "-k", "v0",
                                        "-s", "1001x513x777"], tmp_path)
    assert planned.returncode == 0, planned.stderr
    assert "seed: launch plan for sm_90" in planned.stdout
    unknown = run_installed(installed, ["-m", "driver_gemm", "plan", "fats.yaml"], tmp_path)
    assert unknown.returncode == 2 and "anchors, fast" in unknown.stderr
    listed = run_installed(installed, ["-m", "driver_gemm", "specs", "--paths"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert names == sorted(path.stem for path in (ROOT / "specs").glob("*.yaml"))
    assert all(Path(line.split()[1]).parent == installed / "_data" / "specs" for line in listed.stdout.splitlines())


def test_a_checkout_uses_its_top_level_folders():
    from driver_gemm import bundled

    assert bundled.checkout_root() == ROOT and bundled.data_root() == ROOT
    assert bundled.kernels_dir() == ROOT / "kernels" and bundled.specs_dir() == ROOT / "specs"
    assert bundled.default_spec_path() == ROOT / "specs" / "seed.yaml"


def test_an_installed_copy_without_a_checkout_beside_it_uses_its_package_data(tmp_path, monkeypatch):
    from driver_gemm import bundled

    package = tmp_path / "site-packages" / "driver_gemm"
    package.mkdir(parents=True)
    (tmp_path / "site-packages" / "specs").mkdir()   # a stray folder is not a checkout without pyproject.toml
    monkeypatch.setattr(bundled, "PACKAGE_DIR", package)
    monkeypatch.setattr(bundled, "PACKAGE_DATA_DIR", package / "_data")
    assert bundled.checkout_root() is None
    assert bundled.default_spec_path() == package / "_data" / "specs" / "seed.yaml"
    assert bundled.kernels_dir() == package / "_data" / "kernels"


def test_the_suite_compiles_into_a_cache_of_its_own_that_subprocesses_inherit():
    from driver_gemm.cuda import cache

    user_default = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "driver-gemm"
    assert cache.directory() != user_default
    assert cache.directory().resolve().is_relative_to(Path(tempfile.gettempdir()).resolve())
    child = subprocess.run([sys.executable, "-c", "from driver_gemm.cuda import cache; print(cache.directory())"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert child.returncode == 0, child.stderr
    assert Path(child.stdout.strip()) == cache.directory()


def test_the_installed_executable_prints_everything_and_exits_with_the_commands_code(installed, tmp_path):
    """``driver-gemm`` ends its process without the interpreter's teardown: its output must be flushed first."""
    executable = installed.parent / "bin" / "driver-gemm"
    assert executable.is_file()
    spec = installed / "_data" / "specs" / "seed.yaml"
    planned = run_installed(installed, [str(executable), "plan", "--arch", "sm_90", str(spec)], tmp_path)
    assert planned.returncode == 0, planned.stderr
    assert re.search(r"^\d+ ok, \d+ INVALID$", planned.stdout.strip().splitlines()[-1])   # its last line too
    broken = tmp_path / "broken.yaml"
    broken.write_text("kernels: [\n")
    refused = run_installed(installed, [str(executable), "plan", str(broken)], tmp_path)
    assert refused.returncode == 2 and "broken.yaml" in refused.stderr


def test_the_install_says_it_is_typed(installed):
    assert (installed / "py.typed").is_file()   # PEP 561: type checkers read the package's annotations
