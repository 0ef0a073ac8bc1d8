"""What a user's type checker sees of `import driver_gemm as dg`, and the read-only mappings of a loaded spec.

The package imports its public names on first use (a module `__getattr__`), which a type checker cannot follow:
it reads the ``if TYPE_CHECKING:`` imports of driver_gemm/__init__.py instead, which must name the same names
from the same modules as the lazy table. A spec's mappings (a kernel's params, the scalars) are read-only: a kernel's
instance, label and launch checks are worked out once, so a params changed in place would be planned as one
configuration and compiled as another.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import json
import pickle
import subprocess
import sys
import textwrap

import pytest

import driver_gemm as dg
from driver_gemm.specfile.model import FrozenDict

from conftest import ROOT

INIT = ROOT / "driver_gemm" / "__init__.py"


def _type_checking_imports() -> dict[str, str]:
    """{name: module as `_PUBLIC` writes it (``.cuda.device``)} of the ``if TYPE_CHECKING:`` block of __init__.py;
    every name imported as itself (``X as X``: re-exported under a checker's --no-implicit-reexport)."""
    tree = ast.parse(INIT.read_text())
    blocks = [node for node in tree.body if isinstance(node, ast.If) and isinstance(node.test, ast.Name)
              and node.test.id == "TYPE_CHECKING"]
    assert len(blocks) == 1, "one `if TYPE_CHECKING:` block of the public names"
    found: dict[str, str] = {}
    for node in blocks[0].body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1, ast.dump(node)
        for alias in node.names:
            assert alias.asname == alias.name, f"{alias.name} is imported as {alias.asname}, not as itself"
            assert alias.name not in found, f"{alias.name} is imported twice"
            found[alias.name] = "." + (node.module or "")
    return found


def test_the_type_checking_imports_are_the_lazy_table():
    imports = _type_checking_imports()
    submodules = {name for name, module in imports.items() if module == "."}
    assert submodules == set(dg._SUBMODULES)
    assert {name: module for name, module in imports.items() if name not in submodules} == dg._PUBLIC
    assert set(dg.__all__) == set(dg._PUBLIC) | {"__version__"}


def test_importing_the_package_still_imports_no_public_module():
    """TYPE_CHECKING is False at run time: `import driver_gemm` loads the version alone, as before."""
    code = ("import sys, driver_gemm; print(sorted(m for m in sys.modules if m.startswith('driver_gemm')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "['driver_gemm', 'driver_gemm.version']"


# A user's script: each line that ends in `# wrong` must be reported by the checker, and no other line may be.
USER_SCRIPT = '''\
from pathlib import Path

import numpy as np

import driver_gemm as dg

spec: dg.Spec = dg.load_spec("specs/seed.yaml")
also = dg.load_spec(Path("specs/seed.yaml"))


class RigPath:
    def __fspath__(self) -> str:
        return "specs/seed.yaml"


from_rig = dg.load_spec(RigPath())
results_from_rig = dg.load_results(RigPath())
run = dg.run_spec(spec, placement=dg.Placement(isolate=True))
ok: bool = run.ok
written: Path = run.write_json("seed.json")
old, new = dg.read_results("old.json"), dg.read_results("new.json")
regressions = [c for c in dg.compare_runs(old.run, new.run) if c.regression]
shape = dg.Shape(1001, 513, 777)
from_numpy = dg.Shape(np.int64(4), np.int32(5), *np.zeros((6, 7)).shape[:1])
cases: list[dg.Case] = dg.cases_of(spec)
planned = dg.plan_spec("fast", arch="sm_90")
summary: str = planned.summary()
picks = dg.pick_winners("results.json")
error: type[dg.DriverGemmError] = dg.errors.SpecError
reveal_type(dg.run_spec)
dg.Shape("a", None, 3.5)  # wrong
dg.not_a_name  # wrong
dg.load_spec(42)  # wrong
dg.load_results(b"seed.json")  # wrong
count: str = dg.device_count()  # wrong
spec.kernels[0].params["TILE"] = 7  # wrong
'''


def test_a_users_type_checker_sees_the_real_names_and_signatures(tmp_path):
    pytest.importorskip("mypy", reason="mypy comes with the test extra: pip install -e '.[test]'")
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT)
    # A user's own settings (strict Optional, as mypy's default), with the checkout on the search path (an editable
    # install's import hook is invisible to mypy); the package's own errors are test_types.py's, not this test's.
    config = tmp_path / "mypy.ini"
    config.write_text(textwrap.dedent(f"""\
        [mypy]
        mypy_path = {ROOT}
        show_error_codes = True
        [mypy-driver_gemm.*]
        ignore_errors = True
        [mypy-driver_gemm]
        ignore_errors = True
        """))
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir",
                           str(tmp_path / "cache"), "--no-incremental", str(script)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    lines = USER_SCRIPT.splitlines()
    wrong = {number for number, line in enumerate(lines, 1) if line.endswith("# wrong")}
    errors = {int(line.split(":")[1]) for line in done.stdout.splitlines()
              if line.startswith("user.py:") and ": error:" in line}
    assert errors == wrong, out
    reveal = next(line for line in done.stdout.splitlines() if "Revealed type" in line)
    assert "def (spec:" in reveal and "RunResult" in reveal and "Any" not in reveal.split("->")[-1], reveal
    assert 'has no attribute "not_a_name"' in out
    assert 'Argument 1 to "Shape" has incompatible type "str"' in out


# ------------------------------------------------------------------------------------ read-only mappings of a spec


def test_a_loaded_specs_mappings_refuse_changes_and_it_plans_as_loaded():
    spec = dg.load_spec("seed")
    kernel = spec.kernels[2]
    assert kernel.params == {"TILE": 32} and kernel.label == "v2[TILE=32]"
    changes = [lambda: kernel.params.__setitem__("TILE", 7), lambda: kernel.params.update(TILE=7),
               lambda: kernel.params.pop("TILE"), lambda: kernel.params.setdefault("X", 1),
               lambda: kernel.params.clear(), lambda: kernel.params.popitem(),
               lambda: kernel.params.__delitem__("TILE"), lambda: spec.scalars.__setitem__("alpha", "bogus"),
               lambda: spec.scalars.update(beta=2.0), lambda: kernel.sizeofs.__setitem__("S", "int")]
    for change in changes:
        with pytest.raises(TypeError, match="read-only"):
            change()
    params = kernel.params
    with pytest.raises(TypeError, match="read-only"):
        params |= {"TILE": 7}
    assert kernel.params == {"TILE": 32} and spec.scalars == {"alpha": 1.0, "beta": 0.0}
    assert kernel.instance == "sgemm_smem_tiles<32>" and kernel.label == "v2[TILE=32]"
    plan = dg.plan_case(kernel, dg.Shape(64, 64, 64), dg.arch_limits("sm_90"), scalars=dict(spec.scalars))
    assert plan.config.block == (32, 32, 1) and plan.kernel.label == "v2[TILE=32]"


def test_a_changed_copy_is_made_with_replace_and_is_read_only_too():
    spec = dg.load_spec("seed")
    kernel = spec.kernels[2]
    changed = dataclasses.replace(kernel, params={**kernel.params, "TILE": 16})
    assert type(changed.params) is FrozenDict and changed.label == "v2[TILE=16]" and changed != kernel
    assert kernel.label == "v2[TILE=32]"
    other = dataclasses.replace(spec, scalars={"alpha": 2.0, "beta": 0.0})
    assert type(other.scalars) is FrozenDict and other != spec and other.kernels == spec.kernels
    mutable = dict(kernel.params)      # a plain dict to change, as before
    mutable["TILE"] = 8
    assert kernel.params != mutable and kernel.params | {"TILE": 8} == mutable


def test_typed_operands_mappings_are_read_only():
    spec = dg.load_spec("types")
    operands = next(k.operands for k in spec.kernels if k.operands is not None and k.operands.ld)
    for mapping in (operands.orders, operands.ld, operands.strides):
        assert type(mapping) is FrozenDict
        with pytest.raises(TypeError, match="read-only"):
            mapping["a"] = mapping["a"]


@pytest.mark.parametrize("name", ["seed", "types", "suite"])
def test_a_spec_with_read_only_mappings_pickles_copies_compares_and_writes_json(name):
    spec = dg.load_spec(name)
    for other in (pickle.loads(pickle.dumps(spec)), copy.deepcopy(spec), copy.copy(spec)):
        assert other == spec
        assert all(type(k.params) is FrozenDict for k in other.kernels) and type(other.scalars) is FrozenDict
    cases = dg.cases_of(spec)      # what a GPU worker is sent, pickled
    assert [case.kernel for case in pickle.loads(pickle.dumps(cases))] == [case.kernel for case in cases]
    kernel = spec.kernels[0]
    assert json.loads(json.dumps(kernel.params)) == dict(kernel.params)   # a dict to json, no conversion needed
    assert json.loads(json.dumps(spec.scalars)) == dict(spec.scalars)
    assert dataclasses.asdict(kernel)["params"] == dict(kernel.params)
    assert {k: hash(k) for k in spec.kernels}         # kernels are hashable: their params and sizeofs are
    assert hash(spec) == hash(pickle.loads(pickle.dumps(spec)))   # a dispatch table's entries too
    for table in spec.dispatch.values():
        assert all(type(entry.params) is FrozenDict and type(entry.when) is FrozenDict for entry in table.entries)


def test_a_spec_from_a_dict_with_another_specs_params_reads_them():
    """`spec_from_dict` takes plain values; a loaded kernel's params are a dict to it as well."""
    kernel = dg.load_spec("seed").kernels[2]
    spec = dg.spec_from_dict({"shapes": [[64, 64, 64]], "kernels": [{
        "name": "v2", "source": str(kernel.source), "function": kernel.function, "params": kernel.params,
        "block": ["TILE", "TILE"], "grid": ["ceil(N / TILE)", "ceil(M / TILE)"]}]})
    assert spec.kernels[0].params == kernel.params and spec.kernels[0].label == kernel.label
