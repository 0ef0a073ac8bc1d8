"""What a GPU worker's start is made of, and what overlaps: its imports, cuInit and its context, cuBLAS's loading.

    python scripts/start_overlap.py

Each line is one fresh Python process that does the parts its mode names,
the first on its main thread and the others each on a thread of its own, all
at once, and prints when each was done (seconds since the process was
running Python): "imports" is what a worker imports to run cases (NumPy, the
session, the funnel), "context" cuInit then cuCtxCreate on GPU 0, "loader"
nvmath-python's cuBLAS bindings and the library's loading. The driver's calls
release the GIL, so the context hides behind the imports; the loading is
mostly Python under the GIL, so it adds to them (`driver_gemm.runners.worker`
and `.session` are arranged by these figures).
"""

from __future__ import annotations

import json
import subprocess
import sys

ONE = r'''
import json, threading, time, sys
T0 = time.monotonic()
from cuda.bindings import driver
mode = sys.argv[1]
out = {"bindings_at": round(time.monotonic() - T0, 3)}
def context():
    driver.cuInit(0); err, dev = driver.cuDeviceGet(0); err, ctx = driver.cuCtxCreate(None, 0, dev)
    out["context_done_at"] = round(time.monotonic() - T0, 3)
def loader():
    from nvmath.bindings import cublas
    cublas.get_property(0)
    out["cublas_loaded_at"] = round(time.monotonic() - T0, 3)
def imports():
    import numpy, driver_gemm.session.state, driver_gemm.session.execute
    out["imports_done_at"] = round(time.monotonic() - T0, 3)
threads = []
for name in mode.split("+")[1:]:
    threads.append(threading.Thread(target=globals()[name])); threads[-1].start()
first = mode.split("+")[0]
if first != "none":
    globals()[first]()
for th in threads:
    th.join()
out["all_done_at"] = round(time.monotonic() - T0, 3)
print(json.dumps(out))
'''

MODES = ["imports", "loader", "context", "imports+context", "imports+loader", "imports+context+loader",
         "imports", "loader", "imports+loader", "imports+context+loader"]


def run(mode: str) -> dict:
    return json.loads(subprocess.run([sys.executable, "-c", ONE, mode], capture_output=True, text=True).stdout)


def main() -> int:
    for mode in MODES:
        print(mode, run(mode), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
