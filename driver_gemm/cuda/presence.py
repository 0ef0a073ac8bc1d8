"""Whether this machine has the CUDA driver's library, asked without importing the driver's bindings.

The command line asks before it has imported anything heavy: where the
library is present it spawns the GPUs' worker processes at once.
"""

from __future__ import annotations

import ctypes
import sys


def driver_library_present() -> bool:
    """Whether this machine has the CUDA driver's library (loaded, not initialised: milliseconds, not cuInit's second).

    For work worth starting before the driver answers (a run's worker
    processes); cuInit still says whether a GPU is there.
    """
    try:
        ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
    except OSError:
        return False
    return True
