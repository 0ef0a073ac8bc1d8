"""The package's own import graph, read from its source with `ast`: layers without cycles, no private names across modules,
and every error raised on purpose a `DriverGemmError`."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import driver_gemm
from driver_gemm import errors

PACKAGE = Path(driver_gemm.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _resolve(importer: str, node: ast.ImportFrom) -> str:
    """The absolute module an ``from ... import`` names (relative levels resolved against `importer`)."""
    if node.level == 0:
        return node.module or ""
    is_package = MODULES[importer].name == "__init__.py"
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(name: str, module_level_only: bool) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every import of a package module in `name`'s source."""
    tree = ast.parse(MODULES[name].read_text())
    nodes = ast.iter_child_nodes(tree) if module_level_only else ast.walk(tree)
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found.extend((alias.name, None, node.lineno) for alias in node.names if alias.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(name, node)
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                if submodule in MODULES:           # ``from . import steps``: the module itself
                    found.append((submodule, None, node.lineno))
                elif target in MODULES:
                    found.append((target, alias.name, node.lineno))
    return found


def module_graph() -> dict[str, set[str]]:
    return {name: {target for target, _, _ in imports_of(name, module_level_only=True) if target != name}
            for name in MODULES}


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


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_reader_sees_relative_and_function_level_imports():
    runner = "driver_gemm.runners.one_gpu"
    module_level = {target for target, _, _ in imports_of(runner, module_level_only=True)}
    everywhere = {target for target, _, _ in imports_of(runner, module_level_only=False)}
    assert {"driver_gemm.planning.build", "driver_gemm.runners.runner", "driver_gemm.runners.worker"} <= module_level
    assert "driver_gemm.cuda.device" in everywhere - module_level     # read_properties, imported in run_spec


def test_no_import_cycle_among_the_package_modules():
    assert cycles(module_graph()) == []


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
