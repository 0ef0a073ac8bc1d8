"""A path a spec names that this system's file-name encoding cannot write (a non-ASCII name under a plain C or POSIX
locale, with Python's UTF-8 mode off) is a spec error at its field, never an internal error: Python raises a
UnicodeEncodeError there, a ValueError that no handler of OSError sees."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from test_spec import MINIMAL, write

ASCII_FILE_NAMES = {"LC_ALL": "POSIX", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}

PROBE = """
import json, sys
from driver_gemm.errors import DriverGemmError
from driver_gemm.specfile import load_spec
said = {}
for name in json.loads(sys.stdin.read()):   # not argv: its bytes would be decoded, surrogates standing in
    try:
        load_spec(name)
        said[name] = "loaded"
    except DriverGemmError as error:
        said[name] = "refused: " + str(error)
    except Exception as error:
        said[name] = "internal error: " + type(error).__name__
print(json.dumps(said))
"""


def _ascii_file_names_hold() -> bool:
    env = {**os.environ, **ASCII_FILE_NAMES}
    said = subprocess.run([sys.executable, "-c", "import sys; print(sys.getfilesystemencoding())"], env=env,
                          capture_output=True, text=True).stdout.strip()
    return said in ("ascii", "ANSI_X3.4-1968")


@pytest.mark.skipif(not _ascii_file_names_hold(), reason="this system has no ASCII file-name encoding to test with")
def test_an_unencodable_path_in_a_spec_is_a_spec_error_at_its_field(tmp_path):
    specs = {
        "source": MINIMAL.replace("04_coarsen_2d.cu", "04_co\u00e4rsen_2d.cu"),
        "binary": MINIMAL.replace("source: ../kernels/04_coarsen_2d.cu", "binary: ../kernels/k\u00e4.cubin"),
        "include": MINIMAL + '    options: ["-I../kernels/\u00efnc"]\n',
        "pre-include": MINIMAL + '    options: ["--pre-include=../kernels/\u00efnc/x.h"]\n',
    }
    paths = {name: write(tmp_path, text, f"{name}.yaml") for name, text in specs.items()}
    (tmp_path / "kernels" / "\u00efnc").mkdir()
    (tmp_path / "kernels" / "\u00efnc" / "x.h").write_text("")
    (tmp_path / "kernels" / "04_co\u00e4rsen_2d.cu").write_text((ROOT / "kernels" / "04_coarsen_2d.cu").read_text())
    unencodable_spec = tmp_path / "specs" / "sp\u00e9c.yaml"
    unencodable_spec.write_text(MINIMAL)
    env = {**os.environ, **ASCII_FILE_NAMES, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "utf-8"}
    names = json.dumps([*map(str, paths.values()), str(unencodable_spec)])
    done = subprocess.run([sys.executable, "-c", PROBE], input=names, env=env, capture_output=True, text=True,
                          encoding="utf-8", timeout=120)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    for name, path in paths.items():
        field = "options" if "include" in name else name
        assert said[str(path)].startswith(f"refused: {path}:"), said[str(path)]
        assert f"kernels[v4].{field}:" in said[str(path)]
        assert "file-name encoding (ascii" in said[str(path)] and "UTF-8 locale" in said[str(path)]
    assert said[str(unencodable_spec)].startswith(f"refused: {unencodable_spec}: cannot read spec: its name")


@pytest.mark.skipif(not _ascii_file_names_hold(), reason="this system has no ASCII file-name encoding to test with")
def test_the_cli_says_an_unencodable_source_with_exit_2(tmp_path):
    spec = write(tmp_path, MINIMAL.replace("04_coarsen_2d.cu", "04_co\u00e4rsen_2d.cu"))
    env = {**os.environ, **ASCII_FILE_NAMES, "PYTHONPATH": str(ROOT), "DRIVER_GEMM_NO_CACHE": "1"}
    done = subprocess.run([sys.executable, "-m", "driver_gemm", "plan", "--arch", "sm_90", str(spec)], env=env,
                          capture_output=True, timeout=120)
    err = done.stderr.decode("ascii", errors="replace")
    assert done.returncode == 2, err
    assert "kernels[v4].source: kernel source" in err and "internal error" not in err
