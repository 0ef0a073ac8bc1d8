"""Closed, broken or odd terminals, and a machine with no home directory: messages and exit codes, no tracebacks."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys

import pytest

from driver_gemm.cli import EXIT_OK, EXIT_USAGE, main
from driver_gemm.cli.common import MIN_WIDTH, PIPE_WIDTH, console_width, stdout_closed
from driver_gemm.cuda import cache

from conftest import ROOT, SPECS

RECORDED = ROOT / "tests" / "data" / "results" / "tune-v8-order-h200.json.gz"
SEED_RESULTS = ROOT / "tests" / "data" / "results" / "seed-h200.json"
ENTRY = "from driver_gemm.cli.main import console; console()"


def _env(**changes):
    env = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    env["PYTHONPATH"] = str(ROOT)
    env.update(changes)
    return {key: value for key, value in env.items() if value is not None}


def _cli(argv, prelude="", preexec=None, env=None, cwd=None, **streams):
    """driver-gemm through its console entry point, in a child process; `prelude` runs first (e.g. os.close(1))."""
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **streams}
    return subprocess.run([sys.executable, "-c", f"import os\n{prelude}\n{ENTRY}", *map(str, argv)],
                          preexec_fn=preexec, env=env or _env(), cwd=cwd, timeout=300, **streams)


PLAN = ["plan", SPECS / "seed.yaml", "--arch", "sm_90"]


# --- stdout closed: refused before any work, exit 2 -------------------------------------------------------------

@pytest.mark.parametrize("how", ["at exec", "after start"])
def test_a_closed_stdout_is_refused_before_any_work(how, tmp_path):
    out = tmp_path / "w.yaml"
    argv = ["tune", SPECS / "sweep-v8-order.yaml", "--from", RECORDED, "--out", out]
    if how == "at exec":
        done = _cli(argv, preexec=lambda: os.close(1), stdout=None)
    else:
        done = _cli(argv, prelude="os.close(1)", stdout=None)
    err = done.stderr.decode()
    assert done.returncode == EXIT_USAGE, err
    assert err.startswith("driver-gemm: stdout is closed: what this command shows would be lost") and "Traceback" \
        not in err
    assert not out.exists()


def test_stdout_closed_is_seen_in_process(monkeypatch, capsys):
    assert not stdout_closed()
    monkeypatch.setattr(sys, "stdout", None)
    assert stdout_closed()
    assert main([str(arg) for arg in PLAN]) == EXIT_USAGE
    assert "stdout is closed" in capsys.readouterr().err


# --- stderr closed or broken: a successful command stays successful ----------------------------------------------

@pytest.mark.parametrize("how", ["at exec", "after start"])
def test_a_closed_stderr_does_not_fail_a_successful_command(how, tmp_path):
    out = tmp_path / "w.yaml"
    argv = ["tune", SPECS / "sweep-v8-order.yaml", "--from", RECORDED, "--out", out]
    if how == "at exec":
        done = _cli(argv, preexec=lambda: os.close(2), stderr=None)
    else:
        done = _cli(argv, prelude="os.close(2)", stderr=None)
    assert done.returncode == EXIT_OK
    assert b"best configuration per kernel and shape" in done.stdout
    # The winners, below the line saying their kernels lie outside the file's project, and nothing meant for stderr.
    first, second = out.read_text().split("\n")[:2]
    assert first.startswith("# its kernels' files lie outside") and second.startswith("# v8 at ")
    assert "warning" not in out.read_text()


def test_a_plan_with_stderr_closed_exits_0():
    done = _cli(PLAN, preexec=lambda: os.close(2), stderr=None)
    assert done.returncode == EXIT_OK and b"10 ok, 0 INVALID" in done.stdout


def test_a_stderr_whose_reader_went_away_does_not_fail_the_command():
    read_end, write_end = os.pipe()
    os.close(read_end)             # every write to stderr is EPIPE
    try:
        done = _cli([*PLAN, "--csv"], stderr=write_end)
    finally:
        os.close(write_end)
    assert done.returncode == EXIT_OK
    lines = done.stdout.decode().splitlines()
    assert lines[0].startswith("kernel,") and len(lines) == 11


# --- widths: never all ellipses, never cut off a terminal ----------------------------------------------------------

@pytest.mark.parametrize("columns", ["0", "1", "20", str(MIN_WIDTH - 1), "abc", ""])
def test_a_width_too_small_to_use_is_taken_as_unknown(columns):
    plain = _cli(PLAN, env=_env())
    odd = _cli(PLAN, env=_env(COLUMNS=columns))
    assert odd.returncode == plain.returncode == EXIT_OK
    assert odd.stdout == plain.stdout and "…" not in odd.stdout.decode()


def test_show_with_columns_0_prints_the_tables():
    plain = _cli(["show", SEED_RESULTS], env=_env())
    odd = _cli(["show", SEED_RESULTS], env=_env(COLUMNS="0"))
    assert odd.stdout == plain.stdout and odd.returncode == plain.returncode
    assert b"seed" in odd.stdout and len(odd.stdout.splitlines()) > 10


@pytest.mark.parametrize("command", [PLAN, ["show", SEED_RESULTS]])
def test_piped_tables_are_never_cut(command):
    """A narrow but usable $COLUMNS off a terminal: the tables grow to show every value whole."""
    done = _cli(command, env=_env(COLUMNS=str(MIN_WIDTH)))
    text = done.stdout.decode()
    wide = _cli(command, env=_env(COLUMNS="1000")).stdout.decode()
    assert "kernel" in text and max(map(len, text.splitlines())) > MIN_WIDTH
    # The only ellipses are those of the short kernel labels (each explained in the legend), as at any width.
    assert text.count("…") == wide.count("…")


class _FakeTerminal(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def test_console_width_rules(monkeypatch):
    pipe, terminal = _FakeTerminal(False), _FakeTerminal(True)
    monkeypatch.delenv("COLUMNS", raising=False)
    assert console_width(pipe) == PIPE_WIDTH
    monkeypatch.setattr(os, "get_terminal_size", lambda fd=None: os.terminal_size((120, 40)))
    monkeypatch.setattr(terminal, "fileno", lambda: 1, raising=False)
    assert console_width(terminal) is None                   # rich's own: the terminal's, as it resizes
    monkeypatch.setenv("COLUMNS", "0")
    assert console_width(pipe) == PIPE_WIDTH and console_width(terminal) == 120
    monkeypatch.setenv("COLUMNS", "150")
    assert console_width(pipe) == 150 and console_width(terminal) is None
    monkeypatch.setattr(os, "get_terminal_size", lambda fd=None: os.terminal_size((12, 40)))
    monkeypatch.setenv("COLUMNS", "5")
    assert console_width(terminal) == PIPE_WIDTH


# --- no home directory -------------------------------------------------------------------------------------------

NO_PASSWD = "import pwd\ndef _missing(uid): raise KeyError(uid)\npwd.getpwuid = _missing"


def test_no_home_directory_falls_back_to_a_folder_of_this_users_own(tmp_path, monkeypatch):
    import pwd

    for name in ("HOME", "XDG_CACHE_HOME", "DRIVER_GEMM_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: (_ for _ in ()).throw(KeyError(uid)))
    monkeypatch.setattr(cache.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(cache, "_refused_folders", {})
    folder = cache.directory()
    assert folder == tmp_path / f"driver-gemm-cache-{os.getuid()}"
    assert cache.enabled()
    cache.store("ab" * 32, {"kind": "test"}, b"image")
    assert cache.load("ab" * 32) == ({"kind": "test"}, b"image")
    assert folder.stat().st_mode & 0o777 == 0o700


def test_a_temporary_cache_folder_others_can_write_is_not_used(tmp_path, monkeypatch, caplog):
    for name in ("HOME", "XDG_CACHE_HOME", "DRIVER_GEMM_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(cache, "_home_cache", lambda: None)
    monkeypatch.setattr(cache.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(cache, "_refused_folders", {})
    planted = tmp_path / f"driver-gemm-cache-{os.getuid()}"
    planted.mkdir()
    os.chmod(planted, 0o777)
    with caplog.at_level("WARNING", logger="driver_gemm"):
        assert not cache.enabled() and not cache.enabled()
    said = [record.getMessage() for record in caplog.records if record.name == "driver_gemm.cuda.cache"]
    assert sum(message.startswith("no disk cache: there is no home directory") for message in said) == 1
    cache.store("cd" * 32, {}, b"image")
    assert list(planted.iterdir()) == []


def test_commands_work_without_a_home_directory(tmp_path):
    env = _env(HOME=None, XDG_CACHE_HOME=None, DRIVER_GEMM_CACHE_DIR=None, TMPDIR=str(tmp_path))
    done = _cli(PLAN, prelude=NO_PASSWD, env=env)
    err = done.stderr.decode()
    assert done.returncode == EXIT_OK, err
    assert "internal error" not in err and "home directory" not in err
    assert b"10 ok, 0 INVALID" in done.stdout
    assert (tmp_path / f"driver-gemm-cache-{os.getuid()}").is_dir()
    shutil.rmtree(tmp_path / f"driver-gemm-cache-{os.getuid()}")
