"""Shared fixtures and paths, and this project's own `gpu` marker (declared in pyproject.toml): a test marked
`gpu` is skipped, with the reason, where there is no CUDA driver or GPU. driver-gemm's pytest plugin gives
a rig the same as `driver_gemm_gpu`; it leaves a marker named `gpu` alone."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
TEST_KERNELS = Path(__file__).resolve().parent / "kernels"
SCRIPTS = ROOT / "scripts"


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


def pytest_runtest_setup(item):
    if item.get_closest_marker("gpu") is not None:
        from driver_gemm.pytest_plugin import gpu_missing_reason

        reason = gpu_missing_reason(item.config)
        if reason:
            pytest.skip(f"needs a GPU: {reason}")


CACHE_VARIABLE = "DRIVER_GEMM_CACHE_DIR"
_saved_cache_setting: list[str | None] = []


def pytest_configure(config):
    # Before any test (or module-level code) compiles, and for every subprocess a test starts: the session
    # compiles into a cache of its own, never the user's.
    _saved_cache_setting.append(os.environ.get(CACHE_VARIABLE))
    os.environ[CACHE_VARIABLE] = tempfile.mkdtemp(prefix="driver-gemm-test-cache-")


def pytest_unconfigure(config):
    if not _saved_cache_setting:
        return
    shutil.rmtree(os.environ.get(CACHE_VARIABLE, ""), ignore_errors=True)
    saved = _saved_cache_setting.pop()
    if saved is None:
        os.environ.pop(CACHE_VARIABLE, None)
    else:
        os.environ[CACHE_VARIABLE] = saved


@pytest.fixture()
def load_script(monkeypatch):
    """Import modules of scripts/ by name, freshly and as they import their neighbours, and forget them after."""
    loaded = []

    def load(name: str):
        monkeypatch.syspath_prepend(str(SCRIPTS))
        sys.modules.pop(name, None)
        loaded.append(name)
        return importlib.import_module(name)

    yield load
    for name in loaded:
        sys.modules.pop(name, None)


@pytest.fixture(scope="session")
def session_cache_dir() -> Path:
    return Path(os.environ[CACHE_VARIABLE])


@pytest.fixture(autouse=True)
def private_cache(session_cache_dir, monkeypatch):
    """Each test starts with the session's cache (a test may move it) and with caching on."""
    monkeypatch.setenv(CACHE_VARIABLE, str(session_cache_dir))
    monkeypatch.delenv("DRIVER_GEMM_NO_CACHE", raising=False)
