"""The package type-checks clean under the checker and the settings of pyproject.toml ([tool.mypy])."""

import subprocess
import sys

import pytest

from conftest import ROOT

pytest.importorskip("mypy", reason="mypy comes with the test extra: pip install -e '.[test]'")


def test_the_package_type_checks_clean(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                           "--cache-dir", str(tmp_path / "mypy-cache")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout
