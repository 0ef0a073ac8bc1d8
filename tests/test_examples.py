import subprocess
import sys

from conftest import ROOT, _gpu_missing_reason, plugin_args

import pytest

NO_GPU = pytest.mark.skipif(_gpu_missing_reason() is None, reason="checks the behaviour on a machine with no GPU")


@NO_GPU
def test_node_acceptance_without_a_gpu():
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "node_acceptance.py")], capture_output=True,
                          text=True, cwd=ROOT)
    assert done.returncode == 3 and "no CUDA driver" in done.stdout


def test_kernel_library_example_collects(pytester):
    result = pytester.runpytest(*plugin_args(), str(ROOT / "examples" / "test_kernel_library.py"),
                                "--collect-only", "-q")
    assert result.ret == 0
    assert sum("::" in line for line in result.outlines) == 6
