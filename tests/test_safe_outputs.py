"""Every file driver-gemm writes: never onto an input, atomic, links followed or refused, failures named, old files kept."""

from __future__ import annotations

import errno
import gzip
import json
import os
import subprocess
import sys
import threading

import pytest

from driver_gemm import output_files
from driver_gemm.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from driver_gemm.errors import UsageError
from driver_gemm.output_files import (AppendOnlyFile, OutputError, check_output, refuse_aliases, same_file,
                                      write_file)
from driver_gemm.results.read import read_finished_cases
from driver_gemm.results.records import CaseLog, CaseResult, RunResult
from driver_gemm.specfile.model import Shape
from driver_gemm.status import Status

from conftest import ROOT, SPECS
from test_spec import MINIMAL, write

RECORDED = ROOT / "tests" / "data" / "results" / "tune-v8-order-h200.json.gz"
SWEEP = SPECS / "sweep-v8-order.yaml"
ROOT_USER = os.geteuid() == 0


def _snapshot(folder):
    """Every file under `folder` (links as links) with its bytes: what a refused or failed command must leave."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            found[str(path.relative_to(folder))] = ("link", os.readlink(path))
        elif path.is_file():
            found[str(path.relative_to(folder))] = path.read_bytes()
    return found


def _temporaries(folder):
    return [path.name for path in folder.rglob("*.tmp")]


@pytest.fixture
def recorded(tmp_path):
    good = tmp_path / "good.json"
    good.write_bytes(gzip.decompress(RECORDED.read_bytes()))
    return good


def _tune(*extra):
    return ["tune", str(SWEEP), *map(str, extra)]


# --- an output is never an input --------------------------------------------------------------------------------

def test_tune_refuses_to_write_the_winners_over_the_results_it_reads(recorded, tmp_path, capsys):
    before = _snapshot(tmp_path)
    assert main(_tune("--from", recorded, "--out", recorded)) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"driver-gemm: {recorded}: --out: is --from as well as --out" in err and "Traceback" not in err
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_an_alias_of_an_input_is_the_input(recorded, tmp_path, capsys, link):
    alias = tmp_path / "alias.yaml"
    (os.symlink if link == "symlink" else os.link)(recorded, alias)
    before = _snapshot(tmp_path)
    assert main(_tune("--from", recorded, "--out", alias)) == EXIT_USAGE
    assert "is --from as well as --out" in capsys.readouterr().err
    assert _snapshot(tmp_path) == before


def test_out_and_dispatch_may_not_be_one_file(recorded, tmp_path, capsys):
    (tmp_path / "w.yaml").write_text("old\n")
    (tmp_path / "d.yaml").symlink_to("w.yaml")
    before = _snapshot(tmp_path)
    assert main(_tune("--from", recorded, "--out", tmp_path / "w.yaml", "--dispatch", tmp_path / "d.yaml")) \
        == EXIT_USAGE
    assert "is named by both --out and --dispatch" in capsys.readouterr().err
    assert _snapshot(tmp_path) == before


def test_tune_refuses_the_sweep_spec_as_its_out(recorded, tmp_path, capsys):
    spec = write(tmp_path, SWEEP.read_text())
    before = spec.read_bytes()
    assert main(["tune", str(spec), "--from", str(recorded), "--out", str(spec)]) == EXIT_USAGE
    assert "is the spec as well as --out" in capsys.readouterr().err
    assert spec.read_bytes() == before


@pytest.mark.parametrize("target", ["spec", "source", "baseline"])
def test_run_refuses_an_input_as_its_json_before_any_work(tmp_path, capsys, target, recorded):
    spec = write(tmp_path, MINIMAL)
    named = {"spec": spec, "source": tmp_path / "kernels" / "04_coarsen_2d.cu", "baseline": recorded}[target]
    extra = ["--baseline-results", str(recorded)] if target == "baseline" else []
    before = _snapshot(tmp_path)
    assert main(["run", str(spec), "--json", str(named), *extra]) == EXIT_USAGE
    err = capsys.readouterr().err
    role = {"spec": "the spec", "source": "the source of kernel v4", "baseline": "--baseline-results"}[target]
    assert f"{named}: --json: is {role} as well as --json" in err
    assert _snapshot(tmp_path) == before


def test_run_and_tune_refuse_any_file_the_kernels_read_as_an_output(tmp_path, capsys, recorded):
    # Not only the spec and the source: a header the source includes, a builder's Python file and a buffer's fill
    # file are read by every compile or case, and a results file written over one would destroy it.
    import numpy as np

    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "tile.cuh").write_text("#pragma once\n#define TILE 16\n")
    (tmp_path / "kernels" / "k.cu").write_text('#include "tile.cuh"\n__global__ void k(const float* A, const float* B, '
                                              "float* C, int M, int N, int K, const int* order) {}\n")
    (tmp_path / "order.py").write_text("def f(values):\n    return [0]\n")
    (tmp_path / "tables").mkdir()
    np.save(tmp_path / "tables" / "t-64.npy", np.zeros(1, np.int32))
    spec = tmp_path / "spec.yaml"
    signature = "[A, B, C, M, N, K, {name: order, type: buffer, element: int32, size: 1, fill: FILL}]"
    for fill, named, role in (("{builder: 'order.py:f'}", tmp_path / "kernels" / "tile.cuh",
                               "a header kernel k includes"),
                              ("{builder: 'order.py:f'}", tmp_path / "order.py", "a builder file of kernel k"),
                              ("{file: 'tables/t-{M}.npy'}", tmp_path / "tables" / "t-64.npy",
                               "a fill file of kernel k")):
        spec.write_text("shapes: [[64, 64, 64]]\nkernels:\n  - {name: k, source: kernels/k.cu, function: k, "
                        f"block: [64], grid: [1], signature: {signature.replace('FILL', fill)}}}\n")
        before = _snapshot(tmp_path)
        assert main(["run", str(spec), "--json", str(named)]) == EXIT_USAGE
        assert f"{named}: --json: is {role} as well as --json" in capsys.readouterr().err
        assert main(["tune", str(spec), "--from", str(recorded), "--out", str(named)]) == EXIT_USAGE
        assert f"is {role} as well as --out" in capsys.readouterr().err
        assert _snapshot(tmp_path) == before


def test_the_librarys_winners_and_dispatch_specs_are_never_written_over_what_the_spec_reads(tmp_path):
    from driver_gemm.specfile import load_spec
    from driver_gemm.tune.winners import dispatch_spec, winners_spec

    spec = load_spec(write(tmp_path, SWEEP.read_text()))
    before = _snapshot(tmp_path)
    for function in (winners_spec, dispatch_spec):
        for target in (spec.path, spec.kernels[0].source):
            with pytest.raises(UsageError, match="writing it would destroy what the command reads"):
                function(spec, [], target)
        with pytest.raises(ValueError, match="a .gz name is for a compressed file"):
            function(spec, [], tmp_path / "w.yaml.gz")
    assert _snapshot(tmp_path) == before


def test_plot_refuses_a_results_file_as_its_picture(recorded, tmp_path, capsys):
    picture = tmp_path / "plot.png"
    picture.symlink_to(recorded)
    before = _snapshot(tmp_path)
    assert main(["plot", str(picture), "-o", str(picture)]) == EXIT_USAGE
    assert "is a results file as well as --output" in capsys.readouterr().err
    assert _snapshot(tmp_path) == before


def test_same_file_by_inode_where_both_exist_by_resolved_path_otherwise(tmp_path):
    (tmp_path / "a").write_text("x")
    os.link(tmp_path / "a", tmp_path / "b")
    (tmp_path / "sub").mkdir()
    assert same_file(tmp_path / "a", tmp_path / "b")
    assert same_file(tmp_path / "sub" / ".." / "new", tmp_path / "new")
    assert not same_file(tmp_path / "a", tmp_path / "new")
    refuse_aliases([("--out", tmp_path / "x"), ("--dispatch", None)], [("--from", tmp_path / "a")])


# --- links: followed to a file, refused when they lead nowhere ------------------------------------------------------

def test_a_planted_temporary_name_is_never_written_through(tmp_path):
    important = tmp_path / "important.txt"
    important.write_text("keep me\n")
    (tmp_path / "out.json.tmp").symlink_to(important)
    (tmp_path / ".out.json.tmp").symlink_to(important)
    RunResult(spec="s", spec_path=None).write_json(tmp_path / "out.json")
    assert important.read_text() == "keep me\n"
    assert json.loads((tmp_path / "out.json").read_text())["spec"] == "s"


def test_a_link_at_the_output_is_followed_and_its_target_replaced(tmp_path):
    (tmp_path / "runs").mkdir()
    target = tmp_path / "runs" / "latest.json"
    target.write_text("old")
    os.chmod(target, 0o640)
    link = tmp_path / "latest.json"
    link.symlink_to(target)
    write_file(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new" and (target.stat().st_mode & 0o777) == 0o640
    assert _temporaries(tmp_path) == []


@pytest.mark.parametrize("case, expected", [
    ("loop", "is a loop of symbolic links"),
    ("dangling file", "is a symbolic link to"),
    ("under a dangling folder", "which does not exist: nothing can be written under it"),
    ("under a file", "is not a folder, so nothing can be written under it"),
    ("read-only file", "is read-only"),
    ("folder", "is a folder"),
])
def test_outputs_that_cannot_be_written_are_named_and_nothing_changes(tmp_path, capsys, recorded, case, expected):
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone" / "w.yaml")
    (tmp_path / "gone-folder").symlink_to(tmp_path / "nowhere")
    (tmp_path / "plain").write_text("plain\n")
    (tmp_path / "locked.yaml").write_text("locked\n")
    os.chmod(tmp_path / "locked.yaml", 0o444)
    (tmp_path / "a-folder").mkdir()
    out = {"loop": "loop1", "dangling file": "dangling", "under a dangling folder": "gone-folder/w.yaml",
           "under a file": "plain/w.yaml", "read-only file": "locked.yaml", "folder": "a-folder"}[case]
    before = _snapshot(tmp_path)
    assert main(_tune("--from", recorded, "--out", tmp_path / out)) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"driver-gemm: {tmp_path / out}: --out: ") and expected in err, err
    assert "internal error" not in err
    with pytest.raises(OutputError, match=f"{tmp_path / out}: not written: .*{expected}"):
        write_file(tmp_path / out, "x")     # the same rule at write time, for the Python API
    assert _snapshot(tmp_path) == before
    assert not (tmp_path / "gone").exists() and not (tmp_path / "nowhere").exists()


@pytest.mark.skipif(ROOT_USER, reason="root writes in a read-only folder")
def test_a_read_only_folder_is_refused_before_any_work(tmp_path, recorded, capsys):
    folder = tmp_path / "locked"
    folder.mkdir()
    os.chmod(folder, 0o555)
    try:
        assert main(_tune("--from", recorded, "--out", folder / "w.yaml")) == EXIT_USAGE
        assert "permission denied" in capsys.readouterr().err
    finally:
        os.chmod(folder, 0o755)


def test_a_folder_that_refuses_the_temporary_file_is_said_with_the_file(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    (tmp_path / "w.yaml").write_text("old\n")
    monkeypatch.setattr(output_files.tempfile, "mkstemp", refuse)
    with pytest.raises(OutputError, match=r"w.yaml: not written \(permission denied\); the file there before is "
                                          "unchanged"):
        write_file(tmp_path / "w.yaml", "new\n")
    assert (tmp_path / "w.yaml").read_text() == "old\n"


def test_check_output_is_a_usage_error_naming_the_option(tmp_path):
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(UsageError) as refused:
        check_output(tmp_path / "loop", "--json")
    assert refused.value.field == "--json" and refused.value.where == str(tmp_path / "loop")


# --- a write that fails keeps the old file ---------------------------------------------------------------------------

def test_a_full_disk_keeps_the_old_winners_and_names_the_file(recorded, tmp_path, monkeypatch, capsys):
    out = tmp_path / "w.yaml"
    out.write_text("# the winners of last week\n")

    def full(descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(output_files.os, "fsync", full)
    assert main(_tune("--from", recorded, "--out", out)) == EXIT_FAILED
    err = capsys.readouterr().err
    assert (f"driver-gemm: {out}: not written (no space left on the device); the file there before is unchanged"
            in err) and "internal error" not in err
    assert out.read_text() == "# the winners of last week\n"
    assert _temporaries(tmp_path) == []


def test_a_plot_that_fails_midway_keeps_the_old_picture(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    picture = tmp_path / "plot.png"
    picture.write_bytes(b"\x89PNG old picture")

    class Full:
        def __init__(self, handle):
            self.handle = handle
            self.written = 0

        def write(self, data):
            self.written += len(data)
            if self.written > 2000:
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.handle.write(data)

        def __getattr__(self, name):
            return getattr(self.handle, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

    real_fdopen = os.fdopen
    monkeypatch.setattr(output_files.os, "fdopen", lambda *args, **kwargs: Full(real_fdopen(*args, **kwargs)))
    code = main(["plot", str(ROOT / "tests" / "data" / "results" / "seed-h200.json"), "-o", str(picture)])
    assert code == EXIT_FAILED
    assert "plot.png: not written (no space left on the device)" in capsys.readouterr().err
    assert picture.read_bytes() == b"\x89PNG old picture" and _temporaries(tmp_path) == []


def test_the_file_size_limit_keeps_the_old_file(recorded, tmp_path):
    """RLIMIT_FSIZE in a child process: the write is cut by the kernel (EFBIG), the old file stays whole."""
    out = tmp_path / "w.yaml"
    out.write_text("old\n")
    script = ("import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600)); "
              "from driver_gemm.cli.main import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", script, *_tune("--from", recorded, "--out", out)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert done.returncode == EXIT_FAILED, done.stderr
    assert f"{out}: not written (the file would exceed the file-size limit (ulimit -f))" in done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert out.read_text() == "old\n" and _temporaries(tmp_path) == []


def _case(n: int) -> CaseResult:
    return CaseResult(kernel=f"k{n}", name="k", shape=Shape(64, 64, 64), status=Status.PASS)


def test_a_case_log_keeps_every_whole_record_when_an_append_fails(tmp_path, monkeypatch):
    path = tmp_path / "run.jsonl"
    run = RunResult(spec="s", spec_path=None)
    log = CaseLog(path)
    log.write_header(run)
    log.append(_case(1))
    before = path.read_bytes()
    real_write = os.write

    def half_then_full(descriptor, data):
        real_write(descriptor, data[:len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(output_files.os, "write", half_then_full)
    with pytest.raises(OutputError, match=r"run.jsonl: a record was not appended \(no space left on the device\); "
                                          "the file keeps the 2 written before it"):
        log.append(_case(2))
    monkeypatch.setattr(output_files.os, "write", real_write)
    log.close()
    assert path.read_bytes() == before
    header, cases = read_finished_cases(path)
    assert header["spec"] == "s" and [case.kernel for case in cases] == ["k1"]


def test_an_append_only_file_follows_a_link_and_refuses_a_loop(tmp_path):
    (tmp_path / "real.jsonl").write_text('{"a": 1}\n{"torn')
    (tmp_path / "log.jsonl").symlink_to("real.jsonl")
    appended = AppendOnlyFile(tmp_path / "log.jsonl")
    appended.append('{"b": 2}\n')
    appended.close()
    assert (tmp_path / "real.jsonl").read_text() == '{"a": 1}\n{"b": 2}\n'
    (tmp_path / "loop.jsonl").symlink_to("loop.jsonl")
    with pytest.raises(OutputError, match="loop of symbolic links"):
        AppendOnlyFile(tmp_path / "loop.jsonl").append("x\n")


# --- concurrent writers never tear a file ------------------------------------------------------------------------

def _writer(path: str, seed: int, count: int) -> None:
    for n in range(count):
        payload = {"writer": seed, "n": n, "cases": ["x" * ((seed * 7919 + n * 104729) % 50_000)]}
        write_file(path, json.dumps(payload))


def test_concurrent_writers_and_a_reader_never_see_a_torn_file(tmp_path):
    path = tmp_path / "shared.json"
    write_file(path, json.dumps({"writer": -1}))
    errors: list[BaseException] = []
    stop = threading.Event()
    reads = [0]

    def reader():
        while not stop.is_set():
            try:
                json.loads(path.read_text())
                reads[0] += 1
            except BaseException as error:   # a torn or missing file
                errors.append(error)
                return

    def thread_writer(seed):
        try:
            _writer(str(path), seed, 60)
        except BaseException as error:
            errors.append(error)

    import multiprocessing

    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=_writer, args=(str(path), seed, 60)) for seed in (10, 11)]
    threads = [threading.Thread(target=thread_writer, args=(seed,)) for seed in (1, 2, 3)]
    watching = threading.Thread(target=reader)
    watching.start()
    for worker in (*processes, *threads):
        worker.start()
    for worker in threads:
        worker.join()
    for process in processes:
        process.join(timeout=120)
    stop.set()
    watching.join()
    assert errors == [] and reads[0] > 0
    assert all(process.exitcode == 0 for process in processes)
    assert json.loads(path.read_text())["n"] == 59
    assert _temporaries(tmp_path) == []


def test_two_plots_of_one_picture_at_once_leave_one_whole_picture(tmp_path):
    pytest.importorskip("matplotlib")
    picture = tmp_path / "same.png"
    argv = [sys.executable, "-m", "driver_gemm", "plot", str(ROOT / "tests" / "data" / "results" / "seed-h200.json"), "-o",
            str(picture)]
    children = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 env={**os.environ, "PYTHONPATH": str(ROOT)}) for _ in range(2)]
    for child in children:
        assert child.wait(timeout=300) == EXIT_OK, child.stderr.read()
    data = picture.read_bytes()
    assert data.startswith(b"\x89PNG") and data.endswith(b"IEND\xaeB`\x82") and data.count(b"IEND") == 1
    assert _temporaries(tmp_path) == []


def test_a_new_file_gets_the_umask_permissions(tmp_path):
    write_file(tmp_path / "new.json", "{}")
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_new_file_gets_the_umask_of_the_moment_it_is_written(tmp_path):
    # The program embedding this one may tighten its umask after a first write: the later files take the new one.
    before = os.umask(0o022)
    try:
        write_file(tmp_path / "first.json", "{}")
        os.umask(0o077)
        write_file(tmp_path / "second.json", "{}")
        with output_files.replacing(tmp_path / "third.json") as out:
            out.write("{}")
    finally:
        os.umask(before)
    assert (tmp_path / "first.json").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "second.json").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "third.json").stat().st_mode & 0o777 == 0o600


@pytest.fixture
def removed_cwd(tmp_path, monkeypatch):
    """The current folder, removed while the command runs in it (a shell left in a folder another one deleted)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(FileNotFoundError):
        os.getcwd()
    return gone


def test_absolute_outputs_need_no_current_folder_and_relative_ones_say_it_is_gone(tmp_path, removed_cwd):
    written = tmp_path / "out" / "results.json"
    check_output(written, "--json")
    output_files.check_output_folder(tmp_path / "logs", "--logs")
    write_file(written, "{}")
    assert written.read_text() == "{}"
    log = AppendOnlyFile(tmp_path / "run.jsonl")
    log.append("{}\n")
    log.close()
    for call, kind in ((lambda: check_output("results.json", "--json"), UsageError),
                       (lambda: output_files.check_output_folder("logs", "--logs"), UsageError),
                       (lambda: write_file("results.json", "{}"), OutputError)):
        with pytest.raises(kind) as info:
            call()
        assert "results.json" in str(info.value) or "logs" in str(info.value)
        assert "the current folder no longer exists" in str(info.value)


def test_a_plan_in_a_removed_current_folder_writes_its_cache_and_succeeds(tmp_path, removed_cwd, monkeypatch,
                                                                          capsys):
    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", str(cache_dir))
    assert main(["plan", str(SPECS / "seed.yaml"), "--arch", "sm_90", "-k", "v1"]) == EXIT_OK
    assert "internal error" not in capsys.readouterr().err
    assert list(cache_dir.rglob("*.cubin"))


def test_a_relative_cache_folder_in_a_removed_current_folder_is_a_warning(tmp_path, removed_cwd, monkeypatch,
                                                                         caplog):
    from driver_gemm.cuda import cache

    monkeypatch.setenv("DRIVER_GEMM_CACHE_DIR", "relative-cache")
    monkeypatch.setattr(cache, "_unwritable_folders", set())     # as in a new process
    cache.write_entry(cache.path_for("ab" * 32), b"magic\n", b"body")
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert len(warnings) == 1 and "the current folder no longer exists" in warnings[0], warnings
    assert "relative-cache" in warnings[0]


def test_run_refuses_a_read_only_case_log_to_resume_before_any_work(tmp_path, capsys):
    spec = write(tmp_path, MINIMAL)
    log = tmp_path / "run.jsonl"
    log.write_text('{"type": "run", "spec": "spec"}\n')
    os.chmod(log, 0o444)
    assert main(["run", str(spec), "--resume", str(log)]) == EXIT_USAGE
    assert f"{log}: --resume: is read-only" in capsys.readouterr().err
    assert log.read_text() == '{"type": "run", "spec": "spec"}\n'
