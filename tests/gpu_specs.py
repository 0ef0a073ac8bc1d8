"""Specs built in tests: quick measurement settings, kernels from kernels/ and tests/kernels/."""

from __future__ import annotations

import dataclasses
import shutil
import textwrap
from pathlib import Path

from conftest import ROOT, TEST_KERNELS

# K not a multiple of 4 in the first four (scalar paths); N and K multiples of 4 but not of any tile in the last
AWKWARD_SHAPES = ["1x1x1", "7x5x3", "127x33x65", "1001x513x777", "129x132x68"]
# K past its last whole K-tile by each number of k steps (32 bytes of K) the kernels of kernels/ multiply there:
# bf16 tails of 48, 8, 24, 40 and 56 elements take 3, 1, 2, 3 and 4 steps, tf32 tails of 16, 8, 24, 8 and 24 take 2,
# 1, 3, 1 and 3 (a whole K-tile, 4, is every other K-tile); fp8 (rows of whole 16 bytes) tails of 16, 48, 80 and 112
# take 1 to 4. M past two tiles of 64 rows, N no multiple of a tile's width.
K_TAIL_SHAPES = ["130x136x176", "130x136x200", "130x136x216", "130x136x232", "130x136x248"]
K_TAIL_SHAPES_FP8 = ["130x136x144", "130x136x176", "130x136x208", "130x136x240"]
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


def tma_ws_kernel(source: str, function: str, *, grid: str, shared_bytes: str, a_rows: str = "64 * CWG",
                  cluster: str | None = None, maps: tuple[str, ...] = (), args: tuple[str, ...] = ()):
    """The spec entries of a warp-specialised TMA kernel of kernels/ (v13 to v16): one producer and CWG consumer
    warpgroups, the A map's box `a_rows` by a 128-byte row, then the B map, `maps` (more tensor maps), C, M, N, K,
    alpha and `args`. Returns the maker of one entry: its name, types, layout, params, the K elements of a 128-byte
    row (bk), B's box and swizzle, its scales, and its own grid where the kernel's differs by form."""
    def entry(*, name: str, types: str, layout: str, params: str, bk: int, b_box: str, scales: str = "",
              grid: str = grid, b_swizzle: str = "128B") -> str:
        lines = [f"- name: {name}", f'  source: "@KERNELS@/{source}"', f"  function: {function}", "  arch: sm_90a",
                 f"  types: {types}", f"  layout: {layout}", f"  {scales}", f"  params: {params}",
                 "  block: [128 * (CWG + 1)]", f'  grid: ["{grid}"]']
        lines += [f"  cluster: {cluster}"] if cluster else []
        lines += [f"  shared_bytes: {shared_bytes}", "  signature:",
                  f"    - {{name: map_a, type: tensormap, tensor: A, box: [{a_rows}, {bk}], swizzle: 128B}}",
                  f"    - {{name: map_b, type: tensormap, tensor: B, box: {b_box}, swizzle: {b_swizzle}}}"]
        lines += [f"    - {item}" for item in (*maps, "C", "M", "N", "K", "alpha", *args)]
        return "\n".join(lines) + "\n"
    return entry


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


def verify_k_tails(tmp_path: Path, kernels_yaml: str, fp8_yaml: str) -> dict:
    """verify_only of `kernels_yaml` (bf16 and tf32 entries) on K_TAIL_SHAPES and of `fp8_yaml` on K_TAIL_SHAPES_FP8,
    each in a spec of its own: fp8 rows need K a multiple of 16. Needs a GPU."""
    found = verify_only(write_spec(tmp_path / "bf16-tf32", kernels_yaml, K_TAIL_SHAPES))
    found |= verify_only(write_spec(tmp_path / "fp8", fp8_yaml, K_TAIL_SHAPES_FP8))
    return found


def not_passing(found: dict) -> dict:
    """The entries of `statuses` whose case did not PASS."""
    from driver_gemm.status import Status

    return {key: value for key, value in found.items() if value[0] != Status.PASS}
