"""Shared fixtures; the `gpu` marker skips, with the reason, where no CUDA driver or GPU is present."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
TEST_KERNELS = Path(__file__).resolve().parent / "kernels"


def _gpu_missing_reason() -> str | None:
    from driver_gemm.device import device_count
    from driver_gemm.errors import NoGpuError

    try:
        device_count()
    except NoGpuError as exc:
        return str(exc)
    return None


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    reason = _gpu_missing_reason()
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {reason}"))


@pytest.fixture(scope="session")
def session_cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cubin-cache")


@pytest.fixture(autouse=True)
def private_cache(session_cache_dir, monkeypatch):
    """Tests compile into a cache of this session's own, never the user's."""
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(session_cache_dir))
    monkeypatch.delenv("DRIVER_GEMM_NO_CACHE", raising=False)
