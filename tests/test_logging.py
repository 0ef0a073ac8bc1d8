"""What a library call reports goes through `logging` under `driver_gemm`; the command line prints it on top."""

import logging
import os

import pytest

from driver_gemm.cli.log_output import level_of
from driver_gemm.cli.main import main
from driver_gemm.cuda import cache

PLAN = ["plan", "seed", "--arch", "sm_90", "-k", "v2"]
NO_CACHE = "no disk cache: there is no home directory"


class Caught(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def caught():
    """A caller's own handler on the package's logger, removed (and the level restored) afterwards."""
    logger = logging.getLogger("driver_gemm")
    handler, saved = Caught(), logger.level
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(saved)


@pytest.fixture
def refused_cache(tmp_path, monkeypatch):
    """No home directory, and a temporary cache folder that others can write: the cache says it is not used."""
    for name in ("HOME", "XDG_CACHE_HOME", "DRIVER_GEMM_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(cache, "_home_cache", lambda: None)
    monkeypatch.setattr(cache.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(cache, "_refused_folders", {})
    planted = tmp_path / f"driver-gemm-cache-{os.getuid()}"
    planted.mkdir()
    os.chmod(planted, 0o777)
    return planted


def test_the_package_configures_no_handler_but_a_null_one():
    import driver_gemm

    driver_gemm.plan_spec       # the public names' modules imported
    handlers = logging.getLogger("driver_gemm").handlers
    assert handlers and all(isinstance(handler, logging.NullHandler) for handler in handlers)


def test_a_library_message_reaches_the_callers_handler_with_its_module_and_level(refused_cache, caught, capsys):
    logging.getLogger("driver_gemm").setLevel(logging.WARNING)
    assert not cache.enabled()
    record, = caught.records
    assert record.name == "driver_gemm.cuda.cache" and record.levelno == logging.WARNING
    assert record.getMessage().startswith(NO_CACHE) and str(refused_cache) in record.getMessage()
    assert capsys.readouterr().err == ""     # nothing printed by the library itself


def test_a_library_message_is_silenced_by_the_level(refused_cache, caught, capsys):
    logging.getLogger("driver_gemm.cuda").setLevel(logging.ERROR)
    try:
        assert not cache.enabled()
    finally:
        logging.getLogger("driver_gemm.cuda").setLevel(logging.NOTSET)
    assert caught.records == [] and capsys.readouterr().err == ""


def test_compiles_are_info_and_cache_hits_debug(tmp_path, monkeypatch, caught):
    from driver_gemm.cuda.compile import compile_text

    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path))
    logging.getLogger("driver_gemm").setLevel(logging.DEBUG)
    source = 'extern "C" __global__ void logged(float *x) { x[threadIdx.x] = 1.0f; }'
    compile_text(source, "logged.cu", ["logged"], "sm_90")
    compile_text(source, "logged.cu", ["logged"], "sm_90")
    said = [(record.name, record.levelno, record.getMessage()) for record in caught.records]
    assert [(name, level) for name, level, _ in said] == [("driver_gemm.cuda.compile", logging.INFO),
                                                          ("driver_gemm.cuda.compile", logging.DEBUG)]
    assert "logged.cu: 1 kernel(s) compiled for sm_90 in" in said[0][2]
    assert said[1][2] == "logged.cu: 1 kernel(s) for sm_90 from the disk cache"


def test_the_command_prints_the_librarys_warning_once_on_stderr(refused_cache, capsys):
    assert main(PLAN) == 0
    captured = capsys.readouterr()
    assert captured.err.count(f"driver-gemm: warning: {NO_CACHE}") == 1 and NO_CACHE not in captured.out
    assert "2 ok, 0 INVALID" in captured.out


def test_quiet_silences_the_librarys_warning(refused_cache, capsys):
    assert main(["-q", *PLAN]) == 0
    assert NO_CACHE not in capsys.readouterr().err


def test_verbose_adds_the_compiles(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(tmp_path))     # an empty cache: the kernel is compiled
    assert main([*PLAN, "-v"]) == 0
    err = capsys.readouterr().err
    assert "kernel(s) compiled for sm_90 in" in err and "from the disk cache" not in err
    assert main([*PLAN, "-vv"]) == 0
    assert "kernel(s) for sm_90 from the disk cache" in capsys.readouterr().err
    assert main(PLAN) == 0
    assert "driver-gemm: " not in capsys.readouterr().err


def test_a_command_leaves_the_loggers_as_it_found_them(capsys):
    logger = logging.getLogger("driver_gemm")
    handlers, level = list(logger.handlers), logger.level
    assert main(["-vv", *PLAN]) == 0
    assert logger.handlers == handlers and logger.level == level


def test_the_levels_of_the_options():
    assert level_of() == logging.WARNING and level_of(1) == logging.INFO and level_of(2) == logging.DEBUG
    assert level_of(3, quiet=True) == logging.ERROR
