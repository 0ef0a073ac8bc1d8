"""specs/sweep-v8-copies.yaml without a GPU: v8 with a K-tile's copies in one burst (SPREAD 0) or spread over the k
steps (SPREAD 1) compiles and plans in every configuration it names, and the kernel refuses any other SPREAD."""

from driver_gemm.cli import EXIT_OK, main

from conftest import SPECS


def test_the_v8_copies_sweep_compiles_and_plans_both_ways_offline(capsys):
    assert main(["plan", str(SPECS / "sweep-v8-copies.yaml"), "-s", "1001x513x777"]) == EXIT_OK
    lines = capsys.readouterr().out.rstrip().splitlines()
    assert lines[-1] == "6 ok, 0 INVALID"                      # v8, v8_small, v8_small_k4 x SPREAD 0, 1
    named = [line for line in lines if " = " in line and "SPREAD=" in line]
    assert sorted(line.split("SPREAD=")[1][0] for line in named) == ["0"] * 3 + ["1"] * 3


def test_a_spread_other_than_0_or_1_does_not_compile(tmp_path, capsys):
    text = (SPECS / "sweep-v8-copies.yaml").read_text().replace("SPREAD: [0, 1]", "SPREAD: 2")
    text = text.replace("      - SPREAD == 0 or SPREAD == 1\n", "")   # past the spec's own check, to the kernel's
    spec = tmp_path / "specs" / "copies.yaml"
    spec.parent.mkdir()
    spec.write_text(text.replace("../kernels/", str(SPECS.parent / "kernels") + "/"))
    (tmp_path / "pyproject.toml").write_text("")
    code = main(["plan", str(spec), "-k", "v8", "-s", "1001x513x777", "--allow-outside-sources"])
    out = capsys.readouterr()
    assert code != EXIT_OK
    assert "a tile's copies in one burst (0) or spread over the k steps (1)" in out.out + out.err
