"""Step 1 of the data flow: read a YAML spec into checked, immutable descriptions.

A spec says which kernels to run (source, function or template instance,
template parameters, launch grid and block as expressions of the shape and the
parameters, dynamic shared memory, argument signature), on which shapes, how to
measure and how to verify. Every mistake raises `SpecError` naming the file,
the line and the field. Nothing here touches CUDA.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from . import expr
from ..argtypes import C_TYPES, DEFAULT_SIGNATURE, STANDARD_ARGUMENTS
from ..errors import SpecError

DEFAULT_SPEC = Path(__file__).resolve().parents[2] / "specs" / "seed.yaml"

ARGUMENT_TYPES = tuple(C_TYPES)
MEASURE_MODES = ("events", "graph")


# --------------------------------------------------------------------------- YAML with line numbers


class _Node:
    """Mixin giving a loaded mapping or sequence its own line and its entries' lines."""

    line: int
    entry_lines: dict


class _LineDict(dict, _Node):
    pass


class _LineList(list, _Node):
    pass


class _LineLoader(yaml.SafeLoader):
    """`yaml.safe_load` semantics, plus the 1-based line of every mapping entry and list item."""

    def construct_mapping(self, node, deep=False):
        self.flatten_mapping(node)
        result = _LineDict()
        result.line = node.start_mark.line + 1
        result.entry_lines = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            if key in result:
                raise SpecError(f"duplicate key {key!r}", where=f"line {key_node.start_mark.line + 1}")
            result[key] = self.construct_object(value_node, deep=True)
            result.entry_lines[key] = key_node.start_mark.line + 1
        return result

    def construct_sequence(self, node, deep=False):
        result = _LineList(self.construct_object(child, deep=True) for child in node.value)
        result.line = node.start_mark.line + 1
        result.entry_lines = {i: child.start_mark.line + 1 for i, child in enumerate(node.value)}
        return result


_LineLoader.add_constructor("tag:yaml.org,2002:map", _LineLoader.construct_mapping)
_LineLoader.add_constructor("tag:yaml.org,2002:seq", _LineLoader.construct_sequence)


# --------------------------------------------------------------------------- descriptions


@dataclass(frozen=True)
class Shape:
    """One GEMM problem: C (M x N) = A (M x K) @ B (K x N), all row-major."""

    M: int
    N: int
    K: int

    @property
    def label(self) -> str:
        return f"{self.M}x{self.N}x{self.K}"

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K

    def as_env(self) -> dict[str, int]:
        return {"M": self.M, "N": self.N, "K": self.K}


@dataclass(frozen=True)
class Argument:
    """One kernel parameter: its name, its exact C type, and (for scalars) the expression of its value."""

    name: str
    ctype: str
    value: expr.Expression | None = None


@dataclass(frozen=True)
class KernelSpec:
    """One kernel configuration: everything needed to compile, plan and launch it for any shape."""

    name: str
    source: Path
    function: str
    params: Mapping[str, int]
    block: tuple[expr.Expression, ...]
    grid: tuple[expr.Expression, ...]
    shared_bytes: expr.Expression
    signature: tuple[Argument, ...]
    tile: tuple[expr.Expression, expr.Expression] | None = None
    require: tuple[expr.Expression, ...] = ()
    options: tuple[str, ...] = ()
    precision: str = "fp32"          # tf32: multiplies in TF32 (checked and compared as such)
    arch: str | None = None          # e.g. sm_90a: built for exactly this target (arch-specific instructions)
    where: str = ""
    field_path: str = ""
    field_lines: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)

    @property
    def instance(self) -> str:
        """The C++ name expression NVRTC compiles: ``function`` or ``function<p1, p2>``."""
        if not self.params:
            return self.function
        return f"{self.function}<{', '.join(str(v) for v in self.params.values())}>"

    def target(self, device_arch: str) -> str:
        """The architecture to compile for: the kernel's own ``arch`` when it names one, else the device's."""
        return self.arch or device_arch

    @property
    def label(self) -> str:
        """A readable id: ``v4[BM=64,BN=64,BK=16,TM=4,TN=4]``."""
        if not self.params:
            return self.name
        return f"{self.name}[{','.join(f'{k}={v}' for k, v in self.params.items())}]"

    def where_field(self, name: str) -> str:
        """``file:line`` of a field (``grid`` or ``grid[1]``); the kernel's own line if the field is absent."""
        line = self.field_lines.get(name) or self.field_lines.get(name.split("[")[0])
        return f"{self.where.rsplit(':', 1)[0]}:{line}" if line else self.where

    def reads_c(self) -> bool:
        """True when the kernel takes ``beta`` and so reads C before writing it."""
        return any(arg.name == "beta" for arg in self.signature)


@dataclass(frozen=True)
class MeasureSettings:
    """How samples are taken (nvbench's cold-measurement recipe; defaults follow it)."""

    warmup: int = 3
    min_samples: int = 10
    max_samples: int = 100_000
    max_noise: float = 0.005
    min_time_s: float = 0.5
    timeout_s: float = 3.0
    flush_l2: bool = True
    case_timeout_s: float = 300.0     # a case still running after this is stopped (isolated runs only)
    mode: str = "events"              # events: one launch per sample; graph: a CUDA graph of graph_launches
    graph_launches: int = 20          # launches captured in the graph of graph mode (per-launch time = sample / this)


@dataclass(frozen=True)
class VerifySettings:
    """How results are checked against a float64 reference."""

    rel_tolerance: float = 1e-5
    abs_tolerance: float | None = None
    # TF32 rounds each input to 10 mantissa bits (unit roundoff 2^-11 ~ 4.9e-4): a K-long dot
    # product of such inputs is off by ~4e-4 relative to the exact one; 2e-3 leaves a factor of 5.
    tf32_rel_tolerance: float = 2e-3
    seed: int = 2026
    reference: str = "auto"           # auto | cpu | cublas
    cpu_reference_max_gflop: float = 40.0   # above this, "auto" checks against cuBLAS instead of NumPy


@dataclass(frozen=True)
class Spec:
    """A whole spec file: kernels x shapes, with measurement and verification settings."""

    path: Path | None
    name: str
    description: str
    kernels: tuple[KernelSpec, ...]
    shapes: tuple[Shape, ...]
    measure: MeasureSettings = MeasureSettings()
    verify: VerifySettings = VerifySettings()
    baseline: bool = True
    scalars: Mapping[str, float] = field(default_factory=lambda: {"alpha": 1.0, "beta": 0.0})

    def select(self, kernels: Iterable[str] = (), shapes: Iterable[str] = ()) -> "Spec":
        """A copy restricted to the kernels named (by name or label) and the shapes given as MxNxK."""
        kernels, shapes = list(kernels), list(shapes)
        chosen = self.kernels
        if kernels:
            known = {k.name for k in self.kernels} | {k.label for k in self.kernels}
            unknown = [k for k in kernels if k not in known and k != "cublas"]
            if unknown:
                raise SpecError(f"no kernel named {', '.join(unknown)} in this spec "
                                f"(has {', '.join(sorted({k.name for k in self.kernels}))})",
                                where=str(self.path or self.name))
            chosen = tuple(k for k in self.kernels if k.name in kernels or k.label in kernels)
        chosen_shapes = self.shapes
        if shapes:
            chosen_shapes = tuple(parse_shape_text(text) for text in shapes)
        return dataclasses.replace(self, kernels=chosen, shapes=chosen_shapes)


def parse_shape_text(text: str) -> Shape:
    """Parse ``1024x512x1024`` (or with ``*`` or ``,``) into a `Shape`."""
    parts = text.lower().replace("*", "x").replace(",", "x").split("x")
    try:
        M, N, K = (int(p) for p in parts)
    except ValueError:
        raise SpecError(f"shape {text!r} is not MxNxK with three whole numbers", field="--shape") from None
    if min(M, N, K) < 1:
        raise SpecError(f"shape {text!r} has a dimension below 1", field="--shape")
    return Shape(M, N, K)


# --------------------------------------------------------------------------- parsing


class _Context:
    """Where we are in the file, to name it in every error."""

    def __init__(self, path: Path | None):
        self.path = path
        self.file = str(path) if path else "<spec>"

    def where(self, node: Any, key: Any = None) -> str:
        line = None
        if isinstance(node, _Node):
            line = node.entry_lines.get(key, node.line) if key is not None else node.line
        return f"{self.file}:{line}" if line else self.file

    def error(self, message: str, node: Any, key: Any, field_path: str, hint: str | None = None) -> SpecError:
        return SpecError(message, where=self.where(node, key), field=field_path, hint=hint)


_TOP_KEYS = ("name", "description", "kernels", "shapes", "measure", "verify", "baseline", "scalars")
_KERNEL_KEYS = ("name", "source", "function", "params", "block", "grid", "shared_bytes", "signature",
                "tile", "require", "options", "precision", "arch")
PRECISIONS = ("fp32", "tf32")
_MEASURE_KEYS = tuple(f.name for f in dataclasses.fields(MeasureSettings))
_VERIFY_KEYS = ("tolerance", "tf32_tolerance", "seed", "reference", "cpu_reference_max_gflop")


def load_spec(path: str | Path) -> Spec:
    """Read and check the spec at `path`; raise `SpecError` naming file, line and field on any mistake."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(f"cannot read spec: {exc.strerror}", where=str(path)) from None
    return parse_spec(text, path)


def spec_from_dict(data: dict, base_dir: str | Path | None = None) -> Spec:
    """A spec built in Python, with the same fields and checks as a YAML file.

    Relative kernel sources are taken from `base_dir` (default: the current
    directory); errors name the field, and the line of the spec as YAML.
    """
    base = Path(base_dir) if base_dir is not None else Path.cwd()
    return parse_spec(yaml.safe_dump(data, sort_keys=False), base / "<spec>.yaml")


def parse_spec(text: str, path: Path | None = None) -> Spec:
    """Parse spec text; `path` names the file in errors and anchors relative kernel sources."""
    context = _Context(path)
    try:
        document = yaml.load(text, Loader=_LineLoader)  # noqa: S506 - _LineLoader is a SafeLoader
    except SpecError as exc:
        raise SpecError(exc.message, where=f"{context.file}:{exc.where.split()[-1]}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{context.file}:{mark.line + 1}" if mark else context.file
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(f"not valid YAML: {problem}", where=where) from None
    if not isinstance(document, dict):
        raise SpecError("a spec must be a mapping with at least 'kernels' and 'shapes'", where=context.file)
    _check_keys(context, document, _TOP_KEYS, "")
    for required in ("kernels", "shapes"):
        if required not in document:
            raise SpecError(f"missing required field '{required}'", where=context.where(document), field=required)

    base_dir = path.resolve().parent if path else Path.cwd()
    scalars = _parse_scalars(context, document)
    kernels_node = document["kernels"]
    if not isinstance(kernels_node, list) or not kernels_node:
        raise context.error("must be a non-empty list of kernels", document, "kernels", "kernels")
    kernels: list[KernelSpec] = []
    for index, node in enumerate(kernels_node):
        kernels.extend(_parse_kernel(context, node, kernels_node, index, base_dir, scalars))
    labels = [k.label for k in kernels]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise context.error(f"kernel {duplicates[0]} appears twice; give one a different name",
                            document, "kernels", "kernels")

    return Spec(
        path=path,
        name=str(document.get("name", path.stem if path else "spec")),
        description=str(document.get("description", "")),
        kernels=tuple(kernels),
        shapes=_parse_shapes(context, document),
        measure=_parse_measure(context, document),
        verify=_parse_verify(context, document),
        baseline=_parse_bool(context, document, "baseline", True, "baseline"),
        scalars=scalars,
    )


def _check_keys(context: _Context, node: dict, allowed: tuple[str, ...], field_path: str) -> None:
    for key in node:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"allowed: {', '.join(allowed)}"
            dotted = f"{field_path}.{key}" if field_path else str(key)
            raise context.error(f"unknown field '{key}'", node, key, dotted, hint)


def _parse_bool(context, node, key, default, field_path) -> bool:
    value = node.get(key, default)
    if not isinstance(value, bool):
        raise context.error(f"must be true or false, got {value!r}", node, key, field_path)
    return value


def _parse_number(context, node, key, default, field_path, *, kind=float, minimum=None):
    value = node.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        raise context.error(f"must be {'a whole number' if kind is int else 'a number'}, got {value!r}",
                            node, key, field_path)
    if minimum is not None and value < minimum:
        raise context.error(f"must be at least {minimum}, got {value}", node, key, field_path)
    return kind(value)


def _parse_scalars(context, document) -> dict[str, float]:
    scalars = {"alpha": 1.0, "beta": 0.0}
    node = document.get("scalars", {})
    if not isinstance(node, dict):
        raise context.error("must be a mapping of scalar names to numbers", document, "scalars", "scalars")
    for key in node:
        scalars[str(key)] = _parse_number(context, node, key, None, f"scalars.{key}")
    return scalars


def _parse_measure(context, document) -> MeasureSettings:
    node = document.get("measure", {})
    if not isinstance(node, dict):
        raise context.error("must be a mapping", document, "measure", "measure")
    _check_keys(context, node, _MEASURE_KEYS, "measure")
    defaults = MeasureSettings()
    values = {}
    for f in dataclasses.fields(MeasureSettings):
        dotted = f"measure.{f.name}"
        default = getattr(defaults, f.name)
        if isinstance(default, bool):
            values[f.name] = _parse_bool(context, node, f.name, default, dotted)
        elif isinstance(default, str):
            values[f.name] = node.get(f.name, default)
            if values[f.name] not in MEASURE_MODES:
                raise context.error(f"must be one of {', '.join(MEASURE_MODES)}, got {values[f.name]!r}",
                                    node, f.name, dotted)
        elif isinstance(default, int):
            values[f.name] = _parse_number(context, node, f.name, default, dotted, kind=int, minimum=0)
        else:
            values[f.name] = _parse_number(context, node, f.name, default, dotted, minimum=0)
    if values["min_samples"] < 1:
        raise context.error("must be at least 1", node, "min_samples", "measure.min_samples")
    if values["graph_launches"] < 1:
        raise context.error("must be at least 1", node, "graph_launches", "measure.graph_launches")
    if values["max_samples"] < values["min_samples"]:
        raise context.error("must not be below measure.min_samples", node, "max_samples", "measure.max_samples")
    return MeasureSettings(**values)


def _parse_verify(context, document) -> VerifySettings:
    node = document.get("verify", {})
    if not isinstance(node, dict):
        raise context.error("must be a mapping", document, "verify", "verify")
    _check_keys(context, node, _VERIFY_KEYS, "verify")
    defaults = VerifySettings()
    rel, absolute = defaults.rel_tolerance, defaults.abs_tolerance
    tolerance = node.get("tolerance")
    if isinstance(tolerance, (int, float)) and not isinstance(tolerance, bool):
        rel = _parse_number(context, node, "tolerance", None, "verify.tolerance", minimum=0)
    elif isinstance(tolerance, dict):
        _check_keys(context, tolerance, ("rel", "abs"), "verify.tolerance")
        rel = _parse_number(context, tolerance, "rel", rel, "verify.tolerance.rel", minimum=0)
        absolute = _parse_number(context, tolerance, "abs", None, "verify.tolerance.abs", minimum=0)
    elif tolerance is not None:
        raise context.error("must be a number (relative Frobenius error) or {rel: ..., abs: ...}",
                            node, "tolerance", "verify.tolerance")
    tf32 = _parse_number(context, node, "tf32_tolerance", defaults.tf32_rel_tolerance, "verify.tf32_tolerance",
                         minimum=0)
    reference = node.get("reference", defaults.reference)
    if reference not in ("auto", "cpu", "cublas"):
        raise context.error(f"must be auto, cpu or cublas, got {reference!r}", node, "reference", "verify.reference")
    return VerifySettings(
        rel_tolerance=rel,
        abs_tolerance=absolute,
        tf32_rel_tolerance=tf32,
        seed=_parse_number(context, node, "seed", defaults.seed, "verify.seed", kind=int, minimum=0),
        reference=reference,
        cpu_reference_max_gflop=_parse_number(context, node, "cpu_reference_max_gflop",
                                              defaults.cpu_reference_max_gflop,
                                              "verify.cpu_reference_max_gflop", minimum=0),
    )


# ----------------------------------------------------------------------------------- shapes


def _parse_shapes(context, document) -> tuple[Shape, ...]:
    node = document["shapes"]
    if not isinstance(node, list) or not node:
        raise context.error("must be a non-empty list of shapes", document, "shapes", "shapes",
                            hint="e.g. [1024, 512, 1024], {M: 1001, N: 513, K: 777} or "
                                 "{MNK: {from: 512, to: 4096, times: 2}}")
    shapes: list[Shape] = []
    for index, item in enumerate(node):
        dotted = f"shapes[{index}]"
        if isinstance(item, list):
            if len(item) != 3:
                raise context.error(f"a shape list has three entries [M, N, K], got {len(item)}",
                                    node, index, dotted)
            values = [_dimension_values(context, node, index, f"{dotted}[{i}]", v) for i, v in enumerate(item)]
            shapes.extend(Shape(*combo) for combo in itertools.product(*values))
        elif isinstance(item, dict):
            shapes.extend(_shape_set(context, item, dotted))
        elif isinstance(item, str):
            try:
                shapes.append(parse_shape_text(item))
            except SpecError as exc:
                raise context.error(exc.message, node, index, dotted) from None
        else:
            raise context.error(f"a shape is [M, N, K], 'MxNxK' or a mapping, got {item!r}", node, index, dotted)
    unique = list(dict.fromkeys(shapes))
    return tuple(unique)


def _shape_set(context, item: dict, dotted: str) -> list[Shape]:
    """A mapping of M, N, K (each a number, a list or a range) or MNK (a tie for square shapes)."""
    allowed = ("M", "N", "K", "MNK", "MN")
    _check_keys(context, item, allowed, dotted)
    if "MNK" in item:
        if set(item) - {"MNK"}:
            raise context.error("MNK ties all three dimensions; give no M, N or K beside it",
                                item, "MNK", f"{dotted}.MNK")
        return [Shape(v, v, v) for v in _dimension_values(context, item, "MNK", f"{dotted}.MNK", item["MNK"])]
    if "MN" in item:
        if set(item) - {"MN", "K"} or "K" not in item:
            raise context.error("MN ties M and N; give K beside it and no M or N", item, "MN", f"{dotted}.MN")
        mn = _dimension_values(context, item, "MN", f"{dotted}.MN", item["MN"])
        ks = _dimension_values(context, item, "K", f"{dotted}.K", item["K"])
        return [Shape(v, v, k) for v in mn for k in ks]
    missing = [d for d in ("M", "N", "K") if d not in item]
    if missing:
        raise context.error(f"missing {', '.join(missing)}", item, None, dotted)
    values = [_dimension_values(context, item, d, f"{dotted}.{d}", item[d]) for d in ("M", "N", "K")]
    return [Shape(*combo) for combo in itertools.product(*values)]


def _dimension_values(context, node, key, dotted, value) -> list[int]:
    """A dimension: a whole number, a list of them, or {from, to, step|times}."""
    if isinstance(value, bool):
        raise context.error(f"a dimension must be a whole number, got {value!r}", node, key, dotted)
    if isinstance(value, int):
        if value < 1:
            raise context.error(f"a dimension must be at least 1, got {value}", node, key, dotted)
        return [value]
    if isinstance(value, list):
        out = []
        for i, v in enumerate(value):
            out.extend(_dimension_values(context, value, i, f"{dotted}[{i}]", v))
        return out
    if isinstance(value, dict):
        _check_keys(context, value, ("from", "to", "step", "times"), dotted)
        if "from" not in value or "to" not in value or (("step" in value) == ("times" in value)):
            raise context.error("a range needs from, to and one of step or times", node, key, dotted,
                                hint="{from: 256, to: 16384, times: 2}")
        start = _parse_number(context, value, "from", None, f"{dotted}.from", kind=int, minimum=1)
        stop = _parse_number(context, value, "to", None, f"{dotted}.to", kind=int, minimum=start)
        if "step" in value:
            step = _parse_number(context, value, "step", None, f"{dotted}.step", kind=int, minimum=1)
            return list(range(start, stop + 1, step))
        times = _parse_number(context, value, "times", None, f"{dotted}.times", minimum=1.0000001)
        out, current = [], float(start)
        while round(current) <= stop:
            out.append(int(round(current)))
            current *= times
        return out
    raise context.error(f"a dimension must be a whole number, a list or a range, got {value!r}", node, key, dotted)


# ----------------------------------------------------------------------------------- kernels


def _parse_kernel(context, node, parent, index, base_dir: Path, scalars) -> list[KernelSpec]:
    """One kernel entry; a ``params`` value given as a list sweeps it (the product of all lists)."""
    dotted = f"kernels[{index}]"
    if not isinstance(node, dict):
        raise context.error("a kernel is a mapping with at least source, function, block and grid",
                            parent, index, dotted)
    _check_keys(context, node, _KERNEL_KEYS, dotted)
    for required in ("source", "function", "block", "grid"):
        if required not in node:
            raise context.error(f"missing required field '{required}'", node, None, dotted)

    def text(key: str) -> str:
        value = node[key]
        if not isinstance(value, str) or not value.strip():
            raise context.error("must be a non-empty string", node, key, f"{dotted}.{key}")
        return value.strip()

    function = text("function")
    name = str(node.get("name", function))
    dotted = f"kernels[{name}]"
    source = (base_dir / text("source")).resolve()
    if not source.is_file():
        raise context.error(f"kernel source {source} does not exist", node, "source", f"{dotted}.source")

    param_node = node.get("params", {})
    if not isinstance(param_node, dict):
        raise context.error("must be a mapping of template parameter names to values",
                            node, "params", f"{dotted}.params")
    sweep_values: list[list[int]] = []
    for key, value in param_node.items():
        key_path = f"{dotted}.params.{key}"
        if not isinstance(key, str) or not key.isidentifier() or key in STANDARD_ARGUMENTS:
            raise context.error(f"template parameter name {key!r} must be an identifier other than "
                                f"{', '.join(STANDARD_ARGUMENTS)}", param_node, key, key_path)
        values = value if isinstance(value, list) else [value]
        for v in values:
            if isinstance(v, bool) or not isinstance(v, int):
                raise context.error(f"template parameters are whole numbers, got {v!r}", param_node, key, key_path)
        if not values:
            raise context.error("an empty list sweeps nothing", param_node, key, key_path)
        sweep_values.append(values)

    block = _parse_dims(context, node, "block", f"{dotted}.block")
    grid = _parse_dims(context, node, "grid", f"{dotted}.grid")
    shared = _parse_expr(context, node, "shared_bytes", node.get("shared_bytes", 0), f"{dotted}.shared_bytes")
    signature = _parse_signature(context, node, dotted, scalars)
    tile = None
    if "tile" in node:
        tile_node = node["tile"]
        if not isinstance(tile_node, list) or len(tile_node) != 2:
            raise context.error("tile is [rows, cols] of C computed by one block", node, "tile", f"{dotted}.tile")
        tile = tuple(_parse_expr(context, tile_node, i, v, f"{dotted}.tile[{i}]") for i, v in enumerate(tile_node))
    require_node = node.get("require", [])
    if isinstance(require_node, str):
        require_node = [require_node]
    if not isinstance(require_node, list):
        raise context.error("require is a list of conditions", node, "require", f"{dotted}.require")
    require = tuple(_parse_expr(context, require_node, i, v, f"{dotted}.require[{i}]", condition=True)
                    for i, v in enumerate(require_node))
    options_node = node.get("options", [])
    if not isinstance(options_node, list) or not all(isinstance(o, str) for o in options_node):
        raise context.error("options is a list of NVRTC option strings", node, "options", f"{dotted}.options")
    precision = node.get("precision", "fp32")
    if precision not in PRECISIONS:
        raise context.error(f"precision is {' or '.join(PRECISIONS)}, got {precision!r}", node, "precision",
                            f"{dotted}.precision", hint="tf32: checked with verify.tf32_tolerance and timed "
                                                        "against cuBLAS in TF32 tensor-op math")
    arch = node.get("arch")
    if arch is not None:
        if not re.fullmatch(r"sm_\d{2,3}[af]?", str(arch)):
            raise context.error(f"arch is a real GPU architecture such as sm_90a, got {arch!r}", node, "arch",
                                f"{dotted}.arch", hint="name it only for arch-specific instructions (wgmma needs "
                                                       "sm_90a); without it a kernel is built for the device's own")
        arch = str(arch)

    known = set(param_node) | {"M", "N", "K"}
    for key, expressions in (("block", block), ("grid", grid), ("shared_bytes", (shared,)),
                             ("tile", tile or ()), ("require", require)):
        for expression in expressions:
            unknown = sorted(expression.names - known - {"blockDim_x", "blockDim_y", "blockDim_z", "threads"})
            if unknown:
                raise context.error(f"{expression.source!r} uses unknown name {', '.join(unknown)}",
                                    node, key, f"{dotted}.{key}",
                                    hint=f"names available: M, N, K, {', '.join(param_node) or '(no params)'}"
                                         + (", blockDim_x, blockDim_y, blockDim_z, threads" if key == "require" else ""))

    field_lines = dict(node.entry_lines)
    for key, value in node.items():   # list items (grid[1], require[2]) have lines of their own
        if isinstance(value, _LineList):
            field_lines.update({f"{key}[{i}]": line for i, line in value.entry_lines.items()})
    kernels = []
    for combo in itertools.product(*sweep_values):
        kernels.append(KernelSpec(
            name=name, source=source, function=function,
            params=dict(zip(param_node.keys(), combo)),
            block=block, grid=grid, shared_bytes=shared, signature=signature, tile=tile, require=require,
            options=tuple(options_node), precision=precision, arch=arch, where=context.where(parent, index),
            field_path=dotted,
            field_lines=field_lines,
        ))
    return kernels


def _parse_expr(context, node, key, value, dotted, *, condition=False) -> expr.Expression:
    try:
        return expr.parse(value, condition=condition)
    except expr.ExpressionError as exc:
        raise context.error(str(exc), node, key, dotted) from None


def _parse_dims(context, node, key, dotted) -> tuple[expr.Expression, ...]:
    value = node[key]
    if not isinstance(value, list):
        value = [value]
    if not 1 <= len(value) <= 3:
        raise context.error(f"{key} has 1 to 3 dimensions (x, y, z), got {len(value)}", node, key, dotted)
    return tuple(_parse_expr(context, node, key, v, f"{dotted}[{i}]") for i, v in enumerate(value))


def _parse_signature(context, node, dotted, scalars) -> tuple[Argument, ...]:
    value = node.get("signature", list(DEFAULT_SIGNATURE))
    if not isinstance(value, list) or not value:
        raise context.error("signature is a non-empty list of arguments", node, "signature", f"{dotted}.signature")
    arguments: list[Argument] = []
    for index, item in enumerate(value):
        item_path = f"{dotted}.signature[{index}]"
        if isinstance(item, str):
            if item not in STANDARD_ARGUMENTS:
                raise context.error(f"unknown argument {item!r}", value, index, item_path,
                                    hint=f"standard names are {', '.join(STANDARD_ARGUMENTS)}; "
                                         "give others as {name: X, type: int32, value: EXPR}")
            ctype = STANDARD_ARGUMENTS[item]
            default = None
            if ctype.startswith("float"):
                default = expr.parse(scalars.get(item, 0.0))
            elif ctype != "ptr":
                default = expr.parse(item)
            arguments.append(Argument(item, ctype, default))
        elif isinstance(item, dict):
            _check_keys(context, item, ("name", "type", "value"), item_path)
            if "name" not in item or "type" not in item:
                raise context.error("an argument mapping needs name and type", value, index, item_path)
            ctype = item["type"]
            if ctype not in ARGUMENT_TYPES:
                raise context.error(f"type must be one of {', '.join(ARGUMENT_TYPES)}, got {ctype!r}",
                                    item, "type", f"{item_path}.type")
            if ctype == "ptr":
                if item["name"] not in ("A", "B", "C"):
                    raise context.error("only A, B and C are device buffers", item, "name", f"{item_path}.name")
                arguments.append(Argument(item["name"], ctype, None))
                continue
            if "value" not in item:
                raise context.error("a scalar argument needs a value", item, None, item_path)
            arguments.append(Argument(str(item["name"]), ctype,
                                      _parse_expr(context, item, "value", item["value"], f"{item_path}.value")))
        else:
            raise context.error(f"an argument is a name or a mapping, got {item!r}", value, index, item_path)
    names = [a.name for a in arguments]
    for matrix in ("A", "B", "C"):
        if names.count(matrix) != 1:
            raise context.error(f"signature must take {matrix} exactly once", node, "signature",
                                f"{dotted}.signature")
    return tuple(arguments)
