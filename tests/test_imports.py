"""The package's own import graph, read from its source with `ast` (imports inside functions counted): layers in
order, no cycles, unique module names, a reason beside every import inside a function, no private names across
modules, and every error raised on purpose a `DriverGemmError`."""

from __future__ import annotations

import ast
import inspect
import shutil
from pathlib import Path

import driver_gemm
from driver_gemm import errors

PACKAGE = Path(driver_gemm.__file__).parent

# The layers of the package, bottom to top: a module imports only modules of its own layer or of lower ones, at module
# level or inside a function. A folder is a layer; the modules at the package's top form the vocabulary (bottom) or
# the front door (top). docs/ARCHITECTURE.md describes each.
LAYERS = [
    ("vocabulary", ["driver_gemm.version", "driver_gemm.errors", "driver_gemm.status", "driver_gemm.argtypes",
                    "driver_gemm.bundled", "driver_gemm.kernel_names", "driver_gemm.source_text",
                    "driver_gemm.timeline", "driver_gemm.output_files"]),
    ("gemm", ["driver_gemm.gemm"]),
    ("specfile", ["driver_gemm.specfile"]),
    ("cuda", ["driver_gemm.cuda"]),
    ("measure", ["driver_gemm.measure"]),
    ("results", ["driver_gemm.results"]),
    ("planning", ["driver_gemm.planning"]),
    ("session", ["driver_gemm.session"]),
    ("runners", ["driver_gemm.runners"]),
    ("report", ["driver_gemm.report"]),
    ("tune", ["driver_gemm.tune"]),
    ("cli", ["driver_gemm.cli"]),
    ("front door", ["driver_gemm.pytest_plugin", "driver_gemm.__main__", "driver_gemm"]),
]


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules_of(package: Path) -> dict[str, Path]:
    """Every module of the package at `package`, by dotted name."""
    return {module_name(path, package): path for path in sorted(package.rglob("*.py"))}


MODULES = modules_of(PACKAGE)


def _resolve(importer: str, node: ast.ImportFrom, modules: dict[str, Path]) -> str:
    """The absolute module an ``from ... import`` names (relative levels resolved against `importer`)."""
    if node.level == 0:
        return node.module or ""
    is_package = modules[importer].name == "__init__.py"
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(name: str, module_level_only: bool, modules: dict[str, Path] = MODULES
               ) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every import of a package module in `name`'s source."""
    tree = ast.parse(modules[name].read_text())
    nodes = ast.iter_child_nodes(tree) if module_level_only else ast.walk(tree)
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found.extend((alias.name, None, node.lineno) for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(name, node, modules)
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                if submodule in modules:           # ``from . import steps``: the module itself
                    found.append((submodule, None, node.lineno))
                elif target in modules:
                    found.append((target, alias.name, node.lineno))
    return found


def module_graph(modules: dict[str, Path] = MODULES, module_level_only: bool = False) -> dict[str, set[str]]:
    """Who imports whom, counting the imports inside functions unless `module_level_only`."""
    return {name: {target for target, _, _ in imports_of(name, module_level_only, modules) if target != name}
            for name in modules}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each a cycle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in graph.get(node, ()):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def layer_of(module: str) -> int:
    """The position of `module`'s layer in `LAYERS` (the longest prefix that names it)."""
    best, position = -1, None
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, position = len(prefix), rank
    assert position is not None, f"{module} is in no layer of LAYERS"
    return position


def layer_offences(modules: dict[str, Path] = MODULES) -> list[str]:
    """Every import, at module level or inside a function, of a module from a higher layer."""
    return [f"{name}:{line} ({LAYERS[layer_of(name)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
            for name in modules for target, _, line in imports_of(name, module_level_only=False, modules=modules)
            if layer_of(target) > layer_of(name)]


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_reader_sees_relative_and_function_level_imports():
    worker = "driver_gemm.runners.worker"
    module_level = {target for target, _, _ in imports_of(worker, module_level_only=True)}
    everywhere = {target for target, _, _ in imports_of(worker, module_level_only=False)}
    assert {"driver_gemm.timeline", "driver_gemm.session.options"} <= module_level
    assert {"driver_gemm.session.state", "driver_gemm.cuda.device"} <= everywhere - module_level   # in `serve`


def test_no_import_cycle_among_the_package_modules_counting_imports_inside_functions():
    assert cycles(module_graph()) == []


def test_the_check_fails_on_a_cycle_added_inside_a_function(tmp_path):
    """A copy of the package with one import added inside a function, the way a cycle usually creeps in."""
    copy = tmp_path / "driver_gemm"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    records = copy / "results" / "records.py"
    records.write_text(records.read_text() + "\n\ndef _read(path):\n    from .read import read_results\n"
                       "    return read_results(path)\n")
    modules = modules_of(copy)
    assert cycles(module_graph(modules)) == [["driver_gemm.results.read", "driver_gemm.results.records"]]
    assert cycles(module_graph(modules, module_level_only=True)) == []     # invisible at module level


def test_every_module_is_in_a_layer_and_imports_only_its_layer_or_lower_ones():
    assert layer_offences() == []


def test_the_layer_check_fails_on_an_import_from_a_higher_layer(tmp_path):
    copy = tmp_path / "driver_gemm"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    model = copy / "specfile" / "model.py"
    model.write_text(model.read_text() + "\n\ndef _stats():\n    from ..measure import stats\n    return stats\n")
    offences = layer_offences(modules_of(copy))
    assert len(offences) == 1 and "driver_gemm.specfile.model" in offences[0] and "(measure)" in offences[0]


def test_module_names_are_unique_across_the_package():
    names: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        if path.name not in ("__init__.py", "__main__.py"):
            names.setdefault(path.stem, []).append(name)
    assert {stem: where for stem, where in names.items() if len(where) > 1} == {}


def in_function_imports_without_a_comment(source: str) -> list[int]:
    """Lines of imports inside functions (or under ``if TYPE_CHECKING``) with no comment on their line or the line
    before; an import right below a commented one, at the same indentation, shares its comment."""
    lines = source.splitlines()
    tree = ast.parse(source)
    top = {id(node) for node in tree.body}
    nodes = sorted((node for node in ast.walk(tree)
                    if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top),
                   key=lambda node: node.lineno)
    commented: set[int] = set()
    bare = []
    for node in nodes:
        own = any("#" in lines[line - 1] for line in range(node.lineno, node.end_lineno + 1))
        before = lines[node.lineno - 2].strip() if node.lineno >= 2 else ""
        shared = any(other.end_lineno == node.lineno - 1 and other.col_offset == node.col_offset
                     for other in nodes if id(other) in commented)
        if own or before.startswith("#") or shared:
            commented.add(id(node))
        else:
            bare.append(node.lineno)
    return bare


def test_the_comment_check_sees_a_bare_import_inside_a_function():
    source = "def f():\n    # numpy: heavy\n    import numpy\n    import json\n\n    import csv\n"
    assert in_function_imports_without_a_comment(source) == [6]


def test_every_import_inside_a_function_says_why_it_is_there():
    """Only an optional or heavy dependency, or a module kept lazy for start-up on purpose, is imported in a
    function, and a comment says which (on the line, or the line before)."""
    bare = [f"{name}:{line}" for name, path in MODULES.items()
            for line in in_function_imports_without_a_comment(path.read_text())]
    assert bare == []


def test_no_module_imports_another_modules_private_names():
    offences = [f"{name}:{line} imports {imported} from {target}"
                for name in MODULES for target, imported, line in imports_of(name, module_level_only=False)
                if imported and imported.startswith("_") and not imported.startswith("__") and target != name]
    assert offences == []


ERROR_CLASSES = {name for name, value in inspect.getmembers(errors, inspect.isclass)
                 if issubclass(value, errors.DriverGemmError)}
# Programming errors, not conditions a user meets (see errors.py), the package's lazy attributes' protocol
# (AttributeError), and the process's own signals (an interrupt, a closed stdout), which the CLI maps to exit
# codes: allowed outside the funnel.
ALLOWED = {"ValueError", "AssertionError", "NotImplementedError", "KeyboardInterrupt", "SystemExit",
           "BrokenPipeError", "AttributeError"}


def _raised_names(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            call = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(call, ast.Name):
                yield call.id, node.lineno


def test_every_error_raised_on_purpose_is_a_driver_gemm_error():
    local_errors = set(ERROR_CLASSES)
    for name, path in MODULES.items():     # subclasses defined elsewhere in the package, e.g. CublasUnavailable
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(base, ast.Name) and base.id in local_errors | ALLOWED for base in node.bases):
                local_errors.add(node.name)
    offences = []
    for name, path in MODULES.items():
        for raised, line in _raised_names(ast.parse(path.read_text())):
            if raised[0].isupper() and raised not in local_errors | ALLOWED:
                offences.append(f"{name}:{line} raises {raised}")
    assert offences == []


def test_every_public_name_resolves_to_the_object_of_its_module():
    import importlib

    assert set(driver_gemm.__all__) == set(driver_gemm._PUBLIC) | {"__version__"}
    for name, module in driver_gemm._PUBLIC.items():
        assert getattr(driver_gemm, name) is getattr(importlib.import_module(module, "driver_gemm"), name)
    assert set(driver_gemm.__all__) <= set(dir(driver_gemm))


def test_the_first_imports_of_a_command_and_of_a_worker_leave_the_heavy_modules_for_later():
    """The command spawns its GPUs' workers after importing only these: NumPy, the driver's bindings, NVRTC and
    nvmath-python (a few tenths of a second on a GPU machine) are imported while the workers start."""
    import subprocess
    import sys

    heavy = ("numpy", "cuda.bindings.driver", "cuda.bindings.nvrtc", "nvmath", "driver_gemm.session.state")
    probe = ("import sys; import driver_gemm, driver_gemm.cli.main, driver_gemm.runners.worker, "
             "driver_gemm.cuda.presence, driver_gemm.session.options; "
             f"print([m for m in {heavy!r} if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_errors_module_is_an_attribute_right_after_importing_the_package():
    """docs/embedding.md catches ``dg.errors.WrongArgumentType``: in a fresh interpreter, where nothing else has
    imported driver_gemm.errors yet, and without loading the heavy modules for it."""
    import subprocess
    import sys

    probe = ("import sys; import driver_gemm as dg; assert 'driver_gemm.errors' not in sys.modules; "
             "print(dg.errors.WrongArgumentType.__name__, issubclass(dg.errors.SpecError, dg.DriverGemmError), "
             "'errors' in dir(dg), 'numpy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["WrongArgumentType", "True", "True", "False"]
