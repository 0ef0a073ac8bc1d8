"""Shared fixtures and paths; the `gpu` marker comes from driver-gemm's own pytest plugin."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
TEST_KERNELS = Path(__file__).resolve().parent / "kernels"


pytest_plugins = ["pytester"]


def _gpu_missing_reason() -> str | None:
    from driver_gemm.pytest_plugin import missing_gpu_reason

    return missing_gpu_reason(0)


def plugin_args() -> list[str]:
    """What an inner pytest session (pytester) needs to load the plugin: nothing when it is installed."""
    from importlib.metadata import entry_points

    installed = any(ep.name == "driver_gemm" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "driver_gemm.pytest_plugin"]


def pytest_addoption(parser, pluginmanager):
    # The plugin registers itself through its entry point once driver-gemm is installed; a checkout used
    # from PYTHONPATH loads it here, before the command line is parsed, so that its options exist.
    from driver_gemm import pytest_plugin

    if not pluginmanager.is_registered(pytest_plugin):
        pluginmanager.register(pytest_plugin, "driver_gemm")


@pytest.fixture(scope="session")
def session_cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cubin-cache")


@pytest.fixture(autouse=True)
def private_cache(session_cache_dir, monkeypatch):
    """Tests compile into a cache of this session's own, never the user's."""
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(session_cache_dir))
    monkeypatch.delenv("DRIVER_GEMM_NO_CACHE", raising=False)
