"""Ctrl-C while the command line starts (its modules loading, its arguments parsed), before a command's own
funnel, is said as any interrupt is: ``driver-gemm: interrupted`` and exit 130, with no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib

import pytest

from conftest import ROOT

# Raises KeyboardInterrupt where a Ctrl-C lands in the first fraction of a second: the import of the command line.
INTERRUPTED_IMPORT = """
import sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "driver_gemm.cli.main":
            raise KeyboardInterrupt
        return None
sys.meta_path.insert(0, Interrupt())
"""

ENTRIES = {
    "python -m driver_gemm": "import runpy; runpy.run_module('driver_gemm', run_name='__main__', alter_sys=True)",
    "the console script": "{module} import {function}; {function}()",
}


def _script_entry() -> tuple[str, str]:
    with open(ROOT / "pyproject.toml", "rb") as file:
        module, function = tomllib.load(file)["project"]["scripts"]["driver-gemm"].split(":")
    return module, function


def _run(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DRIVER_GEMM_NO_CACHE": "1"}
    return subprocess.run([sys.executable, "-c", code, "plan", "seed"], env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("entry", ENTRIES)
def test_an_interrupt_while_the_command_line_loads_is_said_in_one_line_with_exit_130(entry):
    module, function = _script_entry()
    code = ENTRIES[entry].format(module=f"from {module}", function=function)
    done = _run(INTERRUPTED_IMPORT + code)
    assert done.returncode == 130, done.stderr
    assert done.stderr == "driver-gemm: interrupted\n"


def test_an_interrupt_while_the_arguments_are_parsed_is_said_in_one_line_with_exit_130():
    module, function = _script_entry()
    # (the module from sys.modules: driver_gemm.cli.main, as an attribute, is the function the package exports)
    done = _run("import sys, driver_gemm.cli.main\ncli = sys.modules['driver_gemm.cli.main']\n"
                "def interrupted():\n    raise KeyboardInterrupt\n"
                "cli.build_parser = interrupted\n"
                f"from {module} import {function}; {function}()")
    assert done.returncode == 130, done.stderr
    assert done.stderr == "driver-gemm: interrupted\n"
