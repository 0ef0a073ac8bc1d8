"""The ``dispatch:`` field of a spec: per kernel family, which configuration to run on any shape.

The field (written by ``driver-gemm tune --dispatch``) lists, per kernel name, entries of a shape,
its winning params and an optional ``when:``: ranges of M, N and K, and a condition over them
(``if:``, in the spec's expression language), so that an entry can say "where this tiling wastes less of its
waves than that one" (``wave_efficiency``) as well as "where M is under 64". The rule, in order: the entry of exactly
this shape; the first whose ``when`` holds it; the nearest in log space (sum over M, N, K of
(ln shape - ln entry)^2, the earlier entry on a tie). `select_kernel` applies it. The field's
format: docs/tuning.md.

An entry may also name another kernel of the spec (``kernel:``) that computes the same GEMM: the
table then picks among kernels as well as among params, as a vendor library's heuristic picks
among its kernels. Such a member runs only where its family's table picks it, and its rows are
counted as the family's (`Spec.dispatch_members`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from ..errors import SpecError
from .expr import Expression, ExpressionError, parse, uncompared_operands
from .kinds import key_text, kind_name
from .limits import INT64_MAX, INT64_MIN, MAX_DIMENSION
from .model import KernelSpec, Shape, freeze_fields, parse_shape_text

DIMENSIONS = ("M", "N", "K")


@dataclass(frozen=True)
class DispatchEntry:
    """One winning configuration and where it applies."""

    shape: Shape
    params: Mapping[str, int | bool | str]   # a kernel's params take whole numbers, true/false and C++ names
    when: Mapping[str, tuple[int | None, int | None]] = field(default_factory=dict)
    label: str | None = None        # the winner's label, for reading
    kernel: str | None = None       # another kernel of the spec to run with `params` (None: the table's own)
    condition: Expression | None = None   # ``when: {if: ...}``, over M, N and K
    condition_where: str | None = None    # file:line of the condition, for the error a shape can raise in it

    def __post_init__(self) -> None:
        # read-only, as the kernels' params a table's pick becomes are (`model.FrozenDict`)
        freeze_fields(self, "params", "when")

    def contains(self, shape: Shape) -> bool:
        """True when every ``when`` range and the ``if`` condition hold `shape` (False for an entry without
        ``when``). A condition that cannot be evaluated raises `ExpressionError`."""
        if not self.when and self.condition is None:
            return False
        for dimension, (low, high) in self.when.items():
            value = getattr(shape, dimension)
            if (low is not None and value < low) or (high is not None and value > high):
                return False
        return self.condition is None or bool(self.condition.evaluate(shape.as_env()))

    def distance(self, shape: Shape) -> float:
        return sum((math.log(getattr(shape, d)) - math.log(getattr(self.shape, d))) ** 2 for d in DIMENSIONS)


@dataclass(frozen=True)
class DispatchTable:
    """The entries of one kernel family, in the order the spec gives them."""

    kernel: str
    entries: tuple[DispatchEntry, ...]

    def select(self, shape: Shape) -> DispatchEntry:
        """The entry for `shape` by the module's rule: exact shape, then ``when`` ranges, then nearest."""
        return self.entries[self.choose(shape)[0]]

    def choose(self, shape: Shape) -> tuple[int, str]:
        """The index of the entry for `shape` and the rule that chose it: ``exact``, ``when`` or ``nearest``."""
        for index, entry in enumerate(self.entries):
            if entry.shape == shape:
                return index, "exact"
        for index, entry in enumerate(self.entries):
            try:
                holds = entry.contains(shape)
            except ExpressionError as exc:
                raise SpecError(f"{exc} at {shape.label}", where=entry.condition_where,
                                field=f"dispatch.{self.kernel}[{index}].when.if") from None
            if holds:
                return index, "when"
        return min(range(len(self.entries)), key=lambda index: self.entries[index].distance(shape)), "nearest"

    @property
    def members(self) -> tuple[str, ...]:
        """The other kernels its entries name, each once, in order."""
        return tuple(dict.fromkeys(e.kernel for e in self.entries if e.kernel is not None and e.kernel != self.kernel))

    def as_document(self) -> list[dict]:
        out = []
        for entry in self.entries:
            item: dict = {"shape": [entry.shape.M, entry.shape.N, entry.shape.K], "params": dict(entry.params)}
            if entry.kernel is not None:
                item["kernel"] = entry.kernel
            if entry.when or entry.condition is not None:
                item["when"] = {d: list(bounds) for d, bounds in entry.when.items()}
                if entry.condition is not None:
                    item["when"]["if"] = entry.condition.source
            out.append(item)
        return out


def select_kernel(kernel: KernelSpec, table: DispatchTable, shape: Shape,
                  members: Mapping[str, KernelSpec] | None = None) -> KernelSpec:
    """The kernel the table chooses for `shape` with the template parameters it chooses: `kernel` itself (its
    name, launch and checks kept), or the member its entry names, looked up in `members` by name."""
    entry = table.select(shape)
    if entry.kernel is not None and entry.kernel != table.kernel:
        if members is None or entry.kernel not in members:
            raise SpecError(f"dispatch for {kernel.name} names kernel {entry.kernel!r}, which is not in this spec",
                            where=kernel.where, field=f"dispatch.{kernel.name}")
        kernel = members[entry.kernel]
    unknown = set(entry.params) - set(kernel.params)
    if unknown:
        # a kernel with no params has none to set: its entry's would reach the compiler as a template-id
        have = (f"which the kernel's params ({', '.join(kernel.params)}) do not have" if kernel.params
                else "but the kernel has no params")
        raise SpecError(f"dispatch for {kernel.name} sets {', '.join(sorted(unknown))}, {have}",
                        where=kernel.where, field=f"dispatch.{kernel.name}")
    params = {name: entry.params.get(name, value) for name, value in kernel.params.items()}
    return dataclasses.replace(kernel, params=params)


def check_entry_params(kernel: KernelSpec, entry: DispatchEntry, path: str,
                       where: Callable[[str], str | None] = lambda path: None) -> None:
    """Refuse an entry's param that is of another kind than `kernel`'s own number, at the entry (`path`, as
    ``dispatch.v2[0]``), where it was written: true/false (C++ reads it as 1 or 0 without a word; a launch field
    reading it whole cannot take it), or text where the kernel's expressions compute with the param (they read
    numbers alone, and would call it an unknown name at the field that reads it)."""
    read: frozenset[str] | None = None
    for name, value in entry.params.items():
        own = kernel.params.get(name)
        if not _is_int(own) or not isinstance(value, (bool, str)):
            continue
        field_path = f"{path}.params.{name}"
        if isinstance(value, bool):
            raise SpecError(f"{name} is {str(value).lower()}, a YAML boolean, where kernel {kernel.name} gives {name} "
                            f"a number ({own})", where=where(field_path), field=field_path,
                            hint=f"write {int(value)} for a number (a bool template parameter takes {int(value)} "
                                 "as well)")
        read = _names_read(kernel) if read is None else read
        if name in read:
            raise SpecError(f"{name} is {value!r}, text (a C++ name), but kernel {kernel.name}'s expressions compute "
                            f"with {name}, a number in its params ({own})", where=where(field_path), field=field_path,
                            hint="expressions read whole numbers (or true/false) alone: give the entry a number")


def _names_read(kernel: KernelSpec) -> frozenset[str]:
    """Every name an expression of `kernel` reads: its launch, arguments, buffers, operands, maps and clusters,
    found by walking its fields rather than listing them, so that a field added later is not missed."""
    names: set[str] = set()
    stack: list = [kernel]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, Expression):
            names |= item.names
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return frozenset(names)


def parse_dispatch(node, kernel_names: Iterable[str] = (),
                   where: Callable[[str], str | None] = lambda path: None) -> dict[str, DispatchTable]:
    """Read a spec's ``dispatch:`` mapping (parsed YAML); a mistake is a `SpecError` naming its field.

    `kernel_names` are the spec's kernel names (a table for another name is
    an error); `where(field_path)` gives ``file:line`` of a field where the
    front end knows it.
    """
    def error(message: str, path: str, hint: str | None = None) -> SpecError:
        return SpecError(message, where=where(path), field=path, hint=hint)

    if not isinstance(node, dict):
        raise error("must be a mapping of kernel names to lists of {shape, params}", "dispatch")
    names = set(kernel_names)
    tables = {}
    for name, entries in node.items():
        path = f"dispatch.{key_text(node, name)}"
        if names and name not in names:
            raise error(f"no kernel named {name!r} in this spec", path, hint=f"kernels: {', '.join(sorted(names))}")
        if not isinstance(entries, list) or not entries:
            raise error("must be a non-empty list of {shape, params}", path)
        parsed = tuple(_parse_entry(entry, f"{path}[{index}]", error, where) for index, entry in enumerate(entries))
        for index, entry in enumerate(parsed):
            if names and entry.kernel is not None and entry.kernel not in names:
                raise error(f"no kernel named {entry.kernel!r} in this spec", f"{path}[{index}].kernel",
                            hint=f"kernels: {', '.join(sorted(names))}")
        first_of: dict[Shape, int] = {}
        for index, entry in enumerate(parsed):
            earlier = first_of.setdefault(entry.shape, index)
            if earlier != index:      # the rule takes the first entry of a shape: this one could never be chosen
                raise error(f"{entry.shape.label} is also the shape of entry {earlier}, which is chosen first: "
                            "this entry would never be used", f"{path}[{index}].shape")
        tables[str(name)] = DispatchTable(str(name), parsed)
    _check_members(tables, error)
    return tables


def _check_members(tables: Mapping[str, DispatchTable], error) -> None:
    """A member runs through one table, and has none of its own: which rows are whose stays plain."""
    family_of: dict[str, str] = {}
    for name, table in tables.items():
        for member in table.members:
            index = next(i for i, e in enumerate(table.entries) if e.kernel == member)
            path = f"dispatch.{name}[{index}].kernel"
            if member in tables:
                raise error(f"kernel {member!r} has a dispatch table of its own: a table may pick a kernel, not "
                            "another table", path)
            other = family_of.setdefault(member, name)
            if other != name:
                raise error(f"kernel {member!r} is picked by the tables of {other} and {name}: a kernel runs "
                            "through one table", path, hint="give the second table a kernel of its own (a copy "
                            "of the entry under another name)")


def _parse_entry(node, path: str, error, where: Callable[[str], str | None]) -> DispatchEntry:
    if not isinstance(node, dict):
        raise error("must be a mapping with shape and params", path)
    unknown = set(node) - {"shape", "params", "when", "label", "kernel"}
    if unknown:
        raise error(f"unknown field {sorted(unknown)[0]!r}", path, hint="allowed: shape, params, when, label, kernel")
    for required in ("shape", "params"):
        if required not in node:
            raise error(f"missing required field '{required}'", path)
    shape = _parse_shape(node["shape"], f"{path}.shape", error)
    params = node["params"]
    # One value per name, of the kinds a kernel's params: take (whole numbers, true/false, C++ names); the spec
    # reader checks each against the kernel with the reader of params: (`specfile.load._parse_dispatch`).
    if not isinstance(params, dict) or not all(_is_param_value(v) for v in params.values()):
        raise error("must be a mapping of template parameter names to one value each, of the kinds params: take: "
                    "whole numbers (64-bit), true/false or C++ names (types, enumerators, template-ids)",
                    f"{path}.params",
                    hint="an entry picks one configuration: no lists")
    label = node.get("label")
    if label is not None and not isinstance(label, str):
        raise error(f"must be text (the winner's label), got {kind_name(label)}", f"{path}.label")
    kernel = node.get("kernel")
    if kernel is not None and (not isinstance(kernel, str) or not kernel):
        raise error(f"must be the name of a kernel of this spec, got {kind_name(kernel)}", f"{path}.kernel")
    when = {}
    ranges = node.get("when", {})
    if not isinstance(ranges, dict):
        raise error("must be a mapping like {M: [1, 2048]}", f"{path}.when")
    condition = _parse_condition(ranges["if"], f"{path}.when.if", error) if "if" in ranges else None
    for dimension, bounds in ranges.items():
        where_bounds = f"{path}.when.{dimension}"
        if dimension == "if":
            continue
        if dimension not in DIMENSIONS:
            raise error(f"unknown dimension {dimension!r}", where_bounds, hint="use M, N or K, or if: a condition")
        if (not isinstance(bounds, list) or len(bounds) != 2
                or not all(b is None or (_is_int(b) and 1 <= b <= MAX_DIMENSION) for b in bounds)):
            raise error(f"must be [low, high]: whole numbers from 1 to {MAX_DIMENSION:,} (MAX_DIMENSION), or null "
                        "for no bound", where_bounds)
        if None not in bounds and bounds[0] > bounds[1]:
            raise error(f"low {bounds[0]} is above high {bounds[1]}", where_bounds)
        when[dimension] = (bounds[0], bounds[1])
    return DispatchEntry(shape, {str(k): _param_value(v) for k, v in params.items()}, when, label, kernel, condition,
                         where(f"{path}.when.if") if condition is not None else None)


def _parse_condition(value, path: str, error) -> Expression:
    """``when: {if: ...}``: a condition over M, N and K alone, since a table picks before any GPU is open (a
    tiling's wave efficiency is written against the SM count of the GPU the table was tuned for)."""
    if not isinstance(value, str):
        raise error(f"must be a condition over M, N and K as text, got {kind_name(value)}", path,
                    hint="for instance 'wave_efficiency(M, N, 128, 256, 132) >= 0.8'")
    try:
        condition = parse(value, condition=True)
    except ExpressionError as exc:
        raise error(str(exc), path) from None
    unknown = sorted(condition.names - set(DIMENSIONS))
    if unknown:
        raise error(f"reads {', '.join(unknown)}: a dispatch condition reads only M, N and K", path,
                    hint="write the tile and the SM count the table was tuned for as numbers")
    if uncompared_operands(condition.tree):
        # 'not M' or 'M and N' reads a size as true or false: it holds for every shape (or none), picking nothing
        raise error(f"{value.strip()!r} is no comparison: each part joined by and, or or not must compare "
                    "(M >= 128)", path, hint="for instance 'M >= 129 and N % 256 == 0'")
    return condition


def _parse_shape(value, path: str, error) -> Shape:
    if isinstance(value, str):
        try:
            return parse_shape_text(value)
        except SpecError as exc:
            raise error(exc.message, path) from None
    if isinstance(value, list) and len(value) == 3 and all(_is_int(v) and 1 <= v <= MAX_DIMENSION for v in value):
        return Shape(*value)
    raise error(f"must be [M, N, K] or 'MxNxK' with whole numbers from 1 to {MAX_DIMENSION:,} (MAX_DIMENSION)", path)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_param_value(value) -> bool:
    return isinstance(value, (bool, str)) or (_is_int(value) and INT64_MIN <= value <= INT64_MAX)


def _param_value(value) -> int | bool | str:
    """A param's value as plain Python (the YAML reader's own int and str kinds carry lines), bool kept apart."""
    return bool(value) if isinstance(value, bool) else str(value) if isinstance(value, str) else int(value)
