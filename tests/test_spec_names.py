"""The shipped specs are reachable by name from any folder (`driver-gemm plan fast`); `driver-gemm specs` lists them."""

from __future__ import annotations

from pathlib import Path

import pytest

from driver_gemm import bundled
from driver_gemm.cli import EXIT_OK, EXIT_USAGE, main
from driver_gemm.cli.common import resolve_spec
from driver_gemm.errors import SpecError

from conftest import ROOT
from test_spec import MINIMAL, write

SHIPPED = sorted(path.stem for path in (ROOT / "specs").glob("*.yaml"))


@pytest.fixture
def elsewhere(tmp_path, monkeypatch) -> Path:
    """An empty working folder outside the checkout."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


@pytest.mark.parametrize("name", ["fast", "fast.yaml"])
def test_a_bare_name_is_the_shipped_spec(elsewhere, name):
    assert resolve_spec(Path(name)) == bundled.specs_dir() / "fast.yaml"


def test_an_existing_file_of_the_same_name_wins(elsewhere):
    (elsewhere / "fast.yaml").write_text("name: mine\n")
    assert resolve_spec(Path("fast.yaml")) == Path("fast.yaml")
    assert resolve_spec(Path("fast")) == bundled.specs_dir() / "fast.yaml"   # no file `fast` here


def test_a_path_with_a_folder_is_never_a_name(elsewhere):
    assert resolve_spec(Path("specs/fast.yaml")) == Path("specs/fast.yaml")   # left to the loader: missing
    assert bundled.shipped_spec("../fast") is None and bundled.shipped_spec(".yaml") is None


def test_an_unknown_name_lists_the_shipped_specs(elsewhere, capsys):
    with pytest.raises(SpecError) as raised:
        resolve_spec(Path("fats"))
    assert raised.value.where == "fats" and all(name in raised.value.message for name in SHIPPED)
    assert main(["plan", "fats"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "fats" in err and "anchors, fast" in err and "driver-gemm specs" in err


def test_plan_by_name_from_another_folder(elsewhere, capsys):
    assert main(["plan", "--arch", "sm_90", "seed", "-k", "v0", "-s", "1001x513x777"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "seed: launch plan for sm_90" in out and out.rstrip().splitlines()[-1] == "1 ok, 0 INVALID"


def test_plan_of_a_local_file_named_like_a_shipped_spec_reads_the_local_file(tmp_path, monkeypatch, capsys):
    spec = write(tmp_path, MINIMAL.replace("shapes:", "name: mine\nshapes:"), name="seed.yaml")
    monkeypatch.chdir(spec.parent)
    assert main(["plan", "--arch", "sm_90", "seed.yaml"]) == EXIT_OK
    assert "mine: launch plan" in capsys.readouterr().out


def test_the_listing_names_and_describes_every_shipped_spec(elsewhere, capsys):
    assert main(["specs"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == SHIPPED
    seed = next(line for line in lines if line.startswith("seed "))
    assert seed.split(None, 1)[1] == "SGEMM from naive to 2D register coarsening (five kernels) vs cuBLAS"
    assert main(["specs", "--paths"]) == EXIT_OK
    paths = [Path(line.split()[1]) for line in capsys.readouterr().out.splitlines()]
    assert paths == [bundled.specs_dir() / f"{name}.yaml" for name in SHIPPED] and all(p.is_file() for p in paths)


def test_a_summary_falls_back_to_the_name_and_then_to_nothing(tmp_path):
    named = tmp_path / "named.yaml"
    named.write_text("# a comment\nname: named\nshapes: []\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("kernels: [\n")
    assert bundled.spec_summary(named) == "named" and bundled.spec_summary(broken) == ""


def test_the_spec_arguments_say_a_file_wins(capsys):
    for command in ("run", "plan", "tune"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "a file of that name here wins" in " ".join(capsys.readouterr().out.split())
