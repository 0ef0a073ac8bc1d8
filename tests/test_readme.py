"""The README's promises that can be kept without a GPU: its test command is CI's, its five-minute kernel plans
as it shows, and every page its guide map names is there."""

import re

from conftest import ROOT

from driver_gemm.cli.main import main

README = (ROOT / "README.md").read_text()
GENERATED_PAGES = {"docs/performance.md"}   # rendered from the results files by their own command


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:] if end < 0 else README[start:end]


def fenced(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def test_the_test_command_is_the_one_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    command = "python3 -m pip install -e '.[test]' && python3 -m pytest"
    assert f"    {command}\n" in section("Quick start")
    assert f"\n{command}\n" in ci
    assert "    python3 -m pip install -e '.[cublas,plots]' && driver-gemm run\n" in section("Quick start")


def test_the_five_minute_kernel_plans_as_shown(tmp_path, capsys):
    text = section("Your own kernel in five minutes")
    (source,), (spec,) = fenced(text, "cuda"), fenced(text, "yaml")
    (tmp_path / "my_gemm.cu").write_text(source)
    (tmp_path / "my.yaml").write_text(spec)
    (tmp_path / "pyproject.toml").write_text("")          # the spec's project: its sources stay inside it
    assert main(["plan", str(tmp_path / "my.yaml"), "--arch", "sm_90", "--sms", "132"]) == 0
    out = capsys.readouterr().out
    shown = re.search(r"```\n\$ driver-gemm plan my.yaml\n(.*?)```", text, re.S).group(1)
    for row in (line for line in shown.splitlines() if line.startswith("my_gemm[")):
        label, shape, grid, block = row.split()[:4]
        assert any(line.split()[:4] == [label, shape, grid, block] and line.split()[-1] == "ok"
                   for line in out.splitlines()), row
    assert "4 ok, 0 INVALID" in out


def test_the_five_minute_mistake_is_named_as_shown(tmp_path, capsys):
    text = section("Your own kernel in five minutes")
    (source,), (spec,) = fenced(text, "cuda"), fenced(text, "yaml")
    (tmp_path / "my_gemm.cu").write_text(source)
    (tmp_path / "my.yaml").write_text(spec.replace("ceil(M / TILE)]", "M // TILE]"))
    (tmp_path / "pyproject.toml").write_text("")
    main(["plan", str(tmp_path / "my.yaml"), "--arch", "sm_90", "-s", "1001x513x777"])
    out = " ".join(capsys.readouterr().out.split())
    message = ("my.yaml:11: kernels[my_gemm].grid[1]: the grid covers 992 of M = 1001 rows (62 blocks x 16): "
               "rows 992-1000 would never be written (hint: grid y should be ceil(M / TILE))")
    assert message in out
    assert f"`{message}`" in " ".join(text.split()) and "`grid: [ceil(N / TILE), M // TILE]`" in " ".join(text.split())


def test_every_page_of_the_guide_map_exists():
    pages = re.findall(r"\]\((docs/[^)#]+)\)", section("The guide"))
    assert len(pages) >= 10
    missing = [page for page in pages if page not in GENERATED_PAGES and not (ROOT / page).is_file()]
    assert not missing
    guide = {path.relative_to(ROOT).as_posix() for path in (ROOT / "docs").glob("*.md")}
    assert guide <= set(pages), f"guide pages missing from the README's map: {sorted(guide - set(pages))}"
