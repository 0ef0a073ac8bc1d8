"""Build a `Spec` from a YAML file, YAML text or a Python dictionary, checking every field.

The entry points `load_spec`, `parse_spec` and `spec_from_dict` raise
`SpecError` for a spec's mistakes, naming the file (or the mapping), the line
and the field; the readers below them (`yaml_lines`, `shapes`, `kernels`,
`fields`) each keep to one part of the document. The top-level fields and the
``measure``, ``verify`` and ``scalars`` settings are read here.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import yaml

from ..errors import FilePath, SpecError, WrongArgumentValue, WrongSpecArgument, flag_argument, path_argument
from .fields import (Context, check_keys, field_name, flow_text, number_as_text_hint, read_bool, read_mapping,
                     read_number)
from .kinds import key_text, kind_name
from .kernels import IDENTIFIER, parse_kernel, read_param_values, reads_scalar
from .limits import INT64_MAX, INT64_MIN, MAX_CASES, MAX_NAME_CHARS
from .model import (MAX_ROUNDS, MEASURE_MODES, REFERENCES, ZEROS_PASS_HINT, KernelSpec, MeasureSettings, Spec,
                    VerifySettings, is_safe_name, safe_file_stem, zeros_pass)
from .sample_patterns import USAGE as SAMPLE_PATTERN_USAGE, SamplePattern
from .shapes import parse_shapes
from .shipped import resolve_spec
from .yaml_lines import LineNode, OversizedInteger, decode_spec, read_document, read_spec_bytes
from .dispatch import check_entry_params, parse_dispatch
from .same_gemm import computes_differently
from .typed import SCALAR_NAMES

# Why a table's member must compute its family's GEMM, said wherever a member is found to compute another.
SAME_GEMM_HINT = ("a table picks among kernels that compute the same product (types, layouts, scales, epilogue, alpha "
                  "and beta, batch, leading dimensions, bias, block scales, the inputs' structure, element-wise "
                  "functions): their rows are the family's")

TOP_KEYS = ("name", "description", "kernels", "shapes", "measure", "verify", "baseline", "scalars", "dispatch")
MEASURE_KEYS = tuple(f.name for f in dataclasses.fields(MeasureSettings))
VERIFY_KEYS = ("tolerance", "tf32_tolerance", "seed", "reference", "cpu_reference_max_gflop")


def load_spec(path: FilePath, *, allow_outside_sources: bool = False) -> Spec:
    """Read and check the spec at `path`; raise `SpecError` naming file, line and field on any mistake.

    `path` is a file, or the bare name of a shipped spec (``"fast"``; see
    `shipped_specs`), as on the command line: an existing file wins.
    Kernel sources are taken relative to the spec and must stay inside its
    project (the nearest folder above it with ``.git``, ``pyproject.toml``,
    ``setup.py`` or ``setup.cfg``, else its own folder) and be written as relative paths, unless
    `allow_outside_sources` is True (the CLI's ``--allow-outside-sources``).
    """
    flag_argument("load_spec", "allow_outside_sources", allow_outside_sources)
    text_path = path_argument("load_spec", "path", path)
    if "\n" in text_path or "\r" in text_path:
        # a spec's text given for its path (no file name holds a line break): said so, not echoed as a file name
        first_line = text_path.strip().splitlines()[0] if text_path.strip() else ""
        raise WrongArgumentValue(f"load_spec: path holds a line break, so it is no file's path but text (it begins "
                                 f"{first_line[:60]!r}): give the spec file's path, or read YAML text with "
                                 "parse_spec(text), a mapping with spec_from_dict(data)")
    path = resolve_spec(text_path)
    data = read_spec_bytes(path)
    if data.startswith(GZIP_MAGIC):     # decoded as text, it would be called "not UTF-8" at byte 1
        raise SpecError("gzip-compressed data, not a spec (a YAML text file)", where=str(path),
                        hint=_results_hint(str(path)) if ".json" in path.name else None)
    text = decode_spec(data, str(path))
    return parse_spec(text, path, allow_outside_sources=allow_outside_sources)


def spec_from_dict(data: Mapping, base_dir: FilePath | None = None, *, allow_outside_sources: bool = True) -> Spec:
    """A spec built in Python, with the same fields and checks as a YAML file.

    Relative kernel sources are taken from the folder `base_dir` (default:
    the current directory). The caller is code, not a file from elsewhere, so
    absolute sources and sources outside `base_dir`'s project are allowed
    unless `allow_outside_sources` is False. The spec has no file: its errors
    name the field, placed in the spec given as a mapping (its ``path`` is None).
    """
    flag_argument("spec_from_dict", "allow_outside_sources", allow_outside_sources)
    if not isinstance(data, Mapping):
        raise WrongSpecArgument(f"a spec as a mapping (a dict) with at least 'kernels' and 'shapes', got "
                                f"{kind_name(data)} ({type(data).__name__})", where="spec_from_dict", field="data",
                                hint="a spec's YAML text is read by parse_spec, its file by load_spec")
    data = dict(data)   # a read-only mapping (MappingProxyType, a frozen config) is read as the dict it holds
    base = Path(path_argument("spec_from_dict", "base_dir", base_dir)) if base_dir is not None else Path.cwd()
    context = MappingContext(None, base, allow_outside_sources, label=_mapping_label(data))
    if base.exists() and not base.is_dir():
        raise SpecError(f"{base} is not a folder (relative kernel sources are read from it)",
                        where="spec_from_dict", field="base_dir")
    try:
        text = yaml.safe_dump(_plain_values(context, data, ""), sort_keys=False)
    except yaml.YAMLError as exc:
        raise SpecError(f"the dictionary holds something a spec cannot: {exc}", where=context.file) from None
    except ValueError as exc:     # an integer of thousands of digits: Python refuses to write it out
        raise SpecError(f"the dictionary holds a number no spec field takes: {exc}", where=context.file) from None
    except RecursionError:
        raise SpecError("the dictionary is nested too deeply to be a spec", where=context.file) from None
    try:
        document = read_document(text, context.file)
    except SpecError as exc:    # at a line of the text written out here, which the caller never saw
        raise SpecError(exc.message, where=context.file, field=exc.field, hint=exc.hint) from None
    _forget_lines(document)
    return _spec_of(document, context)


MAPPING_LABEL = "<spec given as a mapping>"


@dataclass
class MappingContext(Context):
    """A spec given as a Python mapping: its mistakes are placed by their field alone, in a spec named as given
    that way (the lines of its YAML text are lines of no file the caller wrote)."""

    label: str = MAPPING_LABEL     # with the spec's name where it has one (`_mapping_label`)

    @property
    def file(self) -> str:
        return self.label


def _mapping_label(data: dict) -> str:
    name = data.get("name")
    return f"<spec {name!r} given as a mapping>" if isinstance(name, str) and is_safe_name(name) else MAPPING_LABEL


# What a spec's values are, as YAML writes them: anything else in a mapping is refused at its field.
_PLAIN_VALUES = (str, int, float, bool, type(None))


def _plain_values(context: Context, value: Any, field_path: str) -> Any:
    """`value` with NumPy's numbers (a shape taken from an array's ``.shape`` holds them) as the Python ones they
    are, and its tuples as lists; a `SpecError` at the field of a value no spec holds."""
    if isinstance(value, np.generic) and isinstance(value.item(), _PLAIN_VALUES):
        return value.item()
    if isinstance(value, _PLAIN_VALUES):
        return value
    if isinstance(value, Mapping):
        return {_plain_values(context, key, field_path): _plain_values(context, _path_text(key, item),
                                                                       _dotted(field_path, key))
                for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_values(context, item, f"{field_path}[{index}]") for index, item in enumerate(value)]
    raise SpecError(f"holds {kind_name(value)} ({type(value).__name__}), which no spec field takes: give "
                    "numbers, text, true/false, lists and mappings", where=context.file, field=field_path or None)


# The fields that name a file (a kernel's source or prebuilt binary, a buffer's fill file): a path object is taken
# there as the text YAML would give, as load_spec and compile_source take one.
_PATH_FIELDS = ("source", "binary", "file")


def _path_text(key: Any, value: Any) -> Any:
    """`value` as text where field `key` names a file and `value` is a path object (of text, not bytes)."""
    if key in _PATH_FIELDS and isinstance(value, os.PathLike):
        text = os.fspath(value)
        return text if isinstance(text, str) else value   # bytes: refused at the field, as any other value
    return value


def _dotted(field_path: str, key: Any) -> str:
    return f"{field_path}.{key}" if field_path else str(key)


def _forget_lines(node: Any) -> None:
    """Every line of a document read from text written out here dropped: its errors name fields, not lines."""
    if isinstance(node, LineNode):
        node.line, node.entry_lines = 0, {}
    children = list(node.values()) if isinstance(node, dict) else node if isinstance(node, list) else []
    for child in children:
        _forget_lines(child)


def parse_spec(text: str, path: Path | None = None, *, allow_outside_sources: bool = False) -> Spec:
    """Parse spec text; `path` names the file in errors and anchors relative kernel sources (see `load_spec`)."""
    flag_argument("parse_spec", "allow_outside_sources", allow_outside_sources)
    if not isinstance(text, str):
        raise SpecError(f"spec text must be a string, got {type(text).__name__}", where=str(path or "<spec>"))
    path = Path(path) if path is not None else None
    base_dir = path.resolve().parent if path else Path.cwd()
    context = Context(path, base_dir, allow_outside_sources)
    try:
        document = read_document(text, context.file)
    except SpecError:
        if _is_case_log(text):    # JSON lines: YAML stops at the second
            raise _results_file(context.file, f"{context.file}:1", "a results case log (JSON lines)") from None
        raise
    return _spec_of(document, context)


def _spec_of(document: Any, context: Context) -> Spec:
    """The `Spec` a document read from YAML holds, every field checked."""
    if document is None:
        raise SpecError("the spec is empty", where=context.file, hint="a spec needs at least 'kernels' and 'shapes'")
    if isinstance(document, dict) and "cases" in document and "spec" in document:   # JSON is YAML too
        raise _results_file(context.file, context.where(document, "spec"), "a results file (JSON with spec and cases)")
    if not isinstance(document, dict):
        raise SpecError(f"a spec must be a mapping with at least 'kernels' and 'shapes', got {kind_name(document)}",
                        where=context.where(document))
    check_keys(context, document, TOP_KEYS, "")
    for required in ("kernels", "shapes"):
        if required not in document:
            raise SpecError(f"missing required field '{required}'", where=context.where(document), field=required)

    name = _parse_name(context, document, context.path)
    description = document.get("description", "")
    if not isinstance(description, str):
        raise context.error(f"must be text, got {kind_name(description)}", document, "description", "description")
    scalars = _parse_scalars(context, document)
    kernels = _parse_kernels(context, document, scalars)
    _check_scalars_are_read(context, document, kernels)
    shapes = parse_shapes(context, document, len(kernels))
    measure = _parse_measure(context, document)
    _check_resets_timed_apart(measure, kernels)
    return Spec(path=context.path, name=name, description=description, kernels=kernels, shapes=shapes,
                measure=measure, verify=_parse_verify(context, document),
                baseline=read_bool(context, document, "baseline", True, "baseline"), scalars=scalars,
                dispatch=_parse_dispatch(context, document, kernels, scalars),
                written_scalars=frozenset(document.get("scalars") or ()))


GZIP_MAGIC = b"\x1f\x8b"


def _results_hint(file: str) -> str:
    return f"read results with driver-gemm show {file} (or compare OLD NEW, plot, tune --from)"


def _results_file(file: str, where: str, what: str) -> SpecError:
    """A results file given where a spec belongs: said as such, with the commands that read one."""
    return SpecError(f"this looks like {what}, as driver-gemm run and tune write, not a spec", where=where,
                     hint=_results_hint(file))


def _is_case_log(text: str) -> bool:
    """True when `text`'s first line is a case log's record (``{"type": "run", ...}`` or ``{"type": "case"...}``)."""
    first = text.lstrip().split("\n", 1)[0].strip()
    if not first.startswith("{"):
        return False
    try:
        record = json.loads(first)
    except (ValueError, RecursionError):
        return False
    return isinstance(record, dict) and record.get("type") in ("run", "case")


def _check_resets_timed_apart(measure: MeasureSettings, kernels) -> None:
    """Graph mode replays launches back to back: a kernel whose own buffers are reset before every sample
    (a tile counter, a workspace) cannot be timed that way without timing the resets too."""
    if measure.mode != "graph":
        return
    for kernel in kernels:
        buffers = [(path, argument) for path, argument in kernel.device_buffers() if not argument.buffer.read_only]
        if buffers:
            path, argument = buffers[0]
            raise SpecError(f"measure.mode: graph replays launches back to back with no reset between them, and "
                            f"kernel {kernel.name} has device buffer {argument.name}, reset before every sample",
                            where=kernel.where_field(path), field=f"{kernel.field_path}.{path}",
                            hint="time it with measure: {mode: events} (the default), which resets it outside "
                                 "the timed region")


def _parse_name(context: Context, document: dict, path: Path | None) -> str:
    if "name" not in document:
        return safe_file_stem(path.stem) if path else "spec"
    name = document["name"]
    if not isinstance(name, str) or not is_safe_name(name):
        raise context.error(f"a spec name is letters, digits and . _ - + = , [ ] (not first a dot), at most "
                            f"{MAX_NAME_CHARS} characters; got {kind_name(name)}", document, "name", "name",
                            hint="the name becomes the results file's name")
    return name


def _parse_kernels(context: Context, document: dict, scalars: dict[str, float]) -> tuple[KernelSpec, ...]:
    node = document["kernels"]
    if not isinstance(node, list) or not node:
        raise context.error(f"must be a non-empty list of kernels, got {kind_name(node)}", document, "kernels",
                            "kernels")
    kernels: list[KernelSpec] = []
    for index, entry in enumerate(node):
        kernels.extend(parse_kernel(context, entry, node, index, scalars))
        if len(kernels) > MAX_CASES:
            raise context.error(f"the kernels expand to more than the limit of {MAX_CASES:,} (MAX_CASES)",
                                node, index, f"kernels[{index}]")
    seen: set[str] = set()
    for kernel in kernels:
        if kernel.label in seen:
            raise context.error(f"kernel {kernel.label} appears twice; give one a different name",
                                document, "kernels", "kernels")
        seen.add(kernel.label)
    return tuple(kernels)


def _parse_dispatch(context: Context, document: dict, kernels: tuple[KernelSpec, ...],
                    scalars: dict[str, float]) -> dict:
    """The ``dispatch:`` tables (`specfile.dispatch`), each for exactly one kernel of the spec, its params known;
    a member an entry names is one kernel too, with those params, computing the same GEMM as its family."""
    if "dispatch" not in document:
        return {}

    def where(field_path: str) -> str:
        return _where_path(context, document, field_path)

    def only(name: str, path: str) -> KernelSpec:
        named = [k for k in kernels if k.name == name]
        if len(named) != 1:
            raise _not_one_kernel(named, name, path, where(path))
        return named[0]

    _check_entry_param_kinds(context, document["dispatch"])
    tables = parse_dispatch(document["dispatch"], [k.name for k in kernels], where)
    for name, table in tables.items():
        family = only(name, f"dispatch.{name}")
        for index, entry in enumerate(table.entries):
            kernel = family
            if entry.kernel is not None and entry.kernel != name:
                kernel = only(entry.kernel, f"dispatch.{name}[{index}].kernel")
                # Compared on the entry's shape, the member with the entry's params, as it runs there.
                picked = dataclasses.replace(kernel, params={key: entry.params.get(key, value)
                                                             for key, value in kernel.params.items()})
                differs = computes_differently(family, picked, entry.shape, scalars)
                if differs:
                    path = f"dispatch.{name}[{index}].kernel"
                    raise SpecError(f"kernel {kernel.name} computes another GEMM than {name}: {differs}",
                                    where=where(path), field=path, hint=SAME_GEMM_HINT)
            unknown = sorted(set(entry.params) - set(kernel.params))
            if unknown:
                path = f"dispatch.{name}[{index}].params"
                raise SpecError(f"sets {', '.join(unknown)}, which kernel {kernel.name} does not have",
                                where=where(path), field=path,
                                hint=f"its params: {', '.join(kernel.params)}" if kernel.params else
                                "it has no params (nor values): give the entry params: {}")
            _check_dispatch_values(context, document["dispatch"][name][index]["params"],
                                   f"dispatch.{name}[{index}].params", kernel)
            check_entry_params(kernel, entry, f"dispatch.{name}[{index}]", where)
    return tables


def _not_one_kernel(named: list[KernelSpec], name: str, path: str, table_where: str) -> SpecError:
    """The error for a dispatch table (at `path`) naming `name`, which is not one kernel configuration: one entry
    that sweeps its params or values, named with the field that sweeps and its line; else several entries of that
    name."""
    entries = list(dict.fromkeys(kernel.where for kernel in named))
    if len(entries) != 1:
        at = f" ({', '.join(entries)})" if entries else ""
        return SpecError(f"a dispatch table chooses the params of one kernel; {len(entries)} kernel entries are named "
                         f"{name!r}{at}", where=table_where, field=path,
                         hint="give each kernel entry a name of its own, and the table's kernel fixed params: the "
                              "table sets them per shape")
    kernel = named[0]
    swept = [key for key in kernel.params if len({repr(other.params[key]) for other in named}) > 1]
    fields = list(dict.fromkeys("values" if key in kernel.launch_values else "params" for key in swept))
    written = []
    for field in fields:
        given = (kernel.entry or {}).get(field)
        if isinstance(given, list):      # a list of configurations
            written.append((field, f"{field}: a list of {len(given)} configurations"))
        else:
            written.extend((f"{field}.{key}", f"{field}.{key}: {flow_text(given.get(key))}") for key in swept
                           if isinstance(given, dict) and isinstance(given.get(key), list))
    first = written[0][0] if written else "params"
    said = "; ".join(f"{kernel.field_path}.{text}" for _, text in written) or ", ".join(swept)
    listed = next((field for field in fields if isinstance((kernel.entry or {}).get(field), list)), None)
    if listed is not None:     # the first configuration, whole
        mapping = ", ".join(f"{key}: {flow_text(value)}" for key, value in kernel.params.items()
                            if (key in kernel.launch_values) == (listed == "values"))
        one = f"one configuration ({listed}: {{{mapping}}})"
    else:
        values = ", ".join(f"{key}: {flow_text(kernel.params[key])}" for key in swept)
        one = f"one value of {', '.join(swept)} ({values})"
    return SpecError(f"kernel {name} sweeps {len(named)} configurations ({said}, at {kernel.where_field(first)}), "
                     "but a dispatch table sets, per shape, the params and values of one kernel whose own are fixed",
                     where=table_where, field=path,
                     hint=f"give {name} {one}: the table's entries set {'it' if len(swept) == 1 else 'them'} "
                          "per shape")


def _check_entry_param_kinds(context: Context, node: Any) -> None:
    """Refuse a value of an entry's ``params:`` that is not one value of a kind params: take (a whole number of 64
    bits, true/false or a C++ name), naming the param and the value it got at its line: the table's reader
    (`specfile.dispatch`) would say only that the mapping is wrong. What is not a table of entries with a params
    mapping is left to that reader."""
    if not isinstance(node, dict):
        return
    for name, entries in node.items():
        for index, entry in enumerate(entries if isinstance(entries, list) else ()):
            params = entry.get("params") if isinstance(entry, dict) else None
            for key, value in (params.items() if isinstance(params, dict) else ()):
                problem, hint = _entry_param_problem(key_text(params, key), value)
                if problem:
                    raise context.error(problem, params, key, f"dispatch.{field_name(node, name)}[{index}].params."
                                        f"{field_name(params, key)}", hint=hint)


def _entry_param_problem(key: str, value: Any) -> tuple[str, str | None]:
    """What is wrong with `value` as the one value of an entry's param `key`, and a hint; ('', None) when nothing."""
    if isinstance(value, OversizedInteger) or (isinstance(value, int) and not isinstance(value, bool)
                                               and not INT64_MIN <= value <= INT64_MAX):
        written = str(value) if len(str(value)) <= 40 else str(value)[:37] + "..."
        return f"{key} is {written}, beyond the 64-bit whole numbers a template parameter takes", None
    if isinstance(value, (bool, str, int)):
        return "", None
    takes = "a param of an entry takes one value: a whole number, true/false or a C++ name"
    if isinstance(value, list):
        shown = "[" + ", ".join(kind_name(item) for item in value) + "]"
        return (f"{key} is {kind_name(value)} ({shown if len(shown) <= 60 else shown[:57] + '...'}): {takes}",
                f"an entry picks one configuration, so no lists: give {key} one value here, and another value an "
                "entry of its own")
    if isinstance(value, float):
        whole = value.is_integer()
        return (f"{key} is {kind_name(value)}, a number with a decimal point: {takes}",
                f"write {int(value)}" if whole else "template parameters are whole numbers")
    return f"{key} is {kind_name(value)}: {takes}", None


def _check_dispatch_values(context: Context, node: dict, path: str, kernel: KernelSpec) -> None:
    """An entry's params read as the kernel's own params: are (a C++ name checked as a template argument, no shape
    in it), and its launch values as whole numbers, so that a table means what a kernel entry would."""
    template = node if not kernel.launch_values & set(node) else \
        {key: value for key, value in node.items() if key not in kernel.launch_values}   # the lines kept where it can
    read_param_values(context, template, path)
    for key, value in node.items():
        if key in kernel.launch_values and (isinstance(value, bool) or not isinstance(value, int)):
            raise context.error(f"{key} is a value the launch reads: a whole number, got {kind_name(value)}", node,
                                key, f"{path}.{key}")


def _where_path(context: Context, document: dict, field_path: str) -> str:
    """``file:line`` of a dotted field path such as ``dispatch.v8[0].params`` (as near as the document goes)."""
    parts = [int(index) if index else name for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", field_path)]
    node, key = document, None
    for part in parts:
        if key is not None:
            node = node[key]
        try:
            node[part]
        except (KeyError, IndexError, TypeError):
            break
        key = part
    return context.where(node, key)


def _parse_scalars(context: Context, document: dict) -> dict[str, float]:
    scalars = {"alpha": 1.0, "beta": 0.0}
    node = read_mapping(context, document, "scalars", "scalars", "a mapping of scalar names to numbers")
    for key in node:
        if not isinstance(key, str) or not IDENTIFIER.fullmatch(key):
            raise context.error(f"a scalar name is a C identifier, got {kind_name(key)}", node, key,
                                f"scalars.{field_name(node, key)}")
        scalars[key] = read_number(context, node, key, None, f"scalars.{key}")
        if scalars[key] is None:
            raise context.error("must be a number, got nothing (null)", node, key, f"scalars.{key}")
    return scalars


def _check_scalars_are_read(context: Context, document: dict, kernels) -> None:
    """Refuse a scalar other than alpha and beta that no kernel reads. Such scalars are values for arguments to read
    (``{name: gamma, type: float32, value: gamma}``); one that none reads is most likely a misspelt alpha or beta,
    which would leave that one at its default without a word. (An alpha or beta that a kernel does not take is noted
    in its plan: `planning.case_plan`.)"""
    node = document.get("scalars")
    if not isinstance(node, dict):
        return
    for key in node:
        if key in SCALAR_NAMES or any(reads_scalar(kernel, key) for kernel in kernels):
            continue
        close = difflib.get_close_matches(str(key), SCALAR_NAMES, n=1)
        raise context.error(f"no kernel reads {key}: a scalar other than alpha and beta is a value for an argument "
                            f"or a constant to read (value: {key})", node, key, f"scalars.{key}",
                            hint=f"did you mean '{close[0]}'?" if close else "read it in an argument's or a "
                                                                              "constant's value:, or remove it")


def _parse_measure(context: Context, document: dict) -> MeasureSettings:
    node = read_mapping(context, document, "measure", "measure")
    check_keys(context, node, MEASURE_KEYS, "measure")
    defaults = MeasureSettings()
    values: dict[str, Any] = {}
    for setting in dataclasses.fields(MeasureSettings):
        dotted = f"measure.{setting.name}"
        default = getattr(defaults, setting.name)
        if isinstance(default, bool):
            values[setting.name] = read_bool(context, node, setting.name, default, dotted)
        elif setting.name == "samples":
            values[setting.name] = _parse_samples(context, node, default)
        elif isinstance(default, str):
            values[setting.name] = node.get(setting.name, default)
            if values[setting.name] not in MEASURE_MODES:
                raise context.error(f"must be one of {', '.join(MEASURE_MODES)}, got {kind_name(values[setting.name])}",
                                    node, setting.name, dotted)
        elif isinstance(default, int):
            values[setting.name] = read_number(context, node, setting.name, default, dotted, whole=True, minimum=0)
        else:
            values[setting.name] = read_number(context, node, setting.name, default, dotted, minimum=0)
        if values[setting.name] is None:
            raise context.error("must be given a value, not null", node, setting.name, dotted)
    for key in ("min_samples", "graph_launches", "rounds"):
        if values[key] < 1:
            raise context.error("must be at least 1", node, key, f"measure.{key}")
    if values["rounds"] > MAX_ROUNDS:
        raise context.error(f"must be at most {MAX_ROUNDS}, got {values['rounds']}", node, "rounds", "measure.rounds")
    if values["case_timeout_s"] <= 0:   # 0 would stop every case before it starts
        raise context.error(f"must be above 0 seconds, got {values['case_timeout_s']:g}", node, "case_timeout_s",
                            "measure.case_timeout_s")
    if values["case_timeout_s"] <= values["timeout_s"]:
        # A case samples for up to timeout_s after its compile, check and warm-up: stopped before, it is a TIMEOUT.
        key = "case_timeout_s" if "case_timeout_s" in node else "timeout_s"
        raise context.error(f"case_timeout_s ({values['case_timeout_s']:g} s"
                            f"{'' if 'case_timeout_s' in node else ', the default'}) is not above timeout_s "
                            f"({values['timeout_s']:g} s): a case whose sampling runs to timeout_s would be stopped "
                            "and recorded as TIMEOUT before it ends", node, key, f"measure.{key}",
                            hint="give case_timeout_s above timeout_s, with room for the case's compile, check and "
                                 "warm-up")
    if values["max_samples"] < values["min_samples"]:
        raise context.error("must not be below measure.min_samples", node, "max_samples", "measure.max_samples")
    if values["mode"] == "graph" and values["samples"] != "flush":
        raise context.error("graph mode replays its launches back to back: it takes samples: flush only", node,
                            "samples", "measure.samples")
    return MeasureSettings(**values)


def _parse_samples(context: Context, node: dict, default: str) -> str:
    """``measure.samples`` checked (`sample_patterns.SamplePattern`), in the form settings record."""
    value = node.get("samples", default)
    try:
        return SamplePattern.parse(value).label
    except ValueError as exc:
        raise context.error(str(exc) if isinstance(value, str) else f"give {SAMPLE_PATTERN_USAGE}, got "
                            f"{kind_name(value)}", node, "samples", "measure.samples") from None


def _parse_verify(context: Context, document: dict) -> VerifySettings:
    node = read_mapping(context, document, "verify", "verify")
    check_keys(context, node, VERIFY_KEYS, "verify")
    defaults = VerifySettings()
    rel, absolute = defaults.rel_tolerance, defaults.abs_tolerance
    tolerance = node.get("tolerance")
    if tolerance is None and "tolerance" in node:
        raise context.error("must be a number or {rel: ..., abs: ...}, got nothing (null); leave it out for the "
                            "default", node, "tolerance", "verify.tolerance")
    if isinstance(tolerance, dict):
        check_keys(context, tolerance, ("rel", "abs"), "verify.tolerance")
        for key in ("rel", "abs"):
            if key in tolerance and tolerance[key] is None:
                raise context.error("must be a number, got nothing (null)", tolerance, key, f"verify.tolerance.{key}")
        rel = read_number(context, tolerance, "rel", rel, "verify.tolerance.rel", minimum=0)
        absolute = read_number(context, tolerance, "abs", None, "verify.tolerance.abs", minimum=0)
    elif tolerance is not None:
        if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)):
            raise context.error(f"must be a number (relative Frobenius error) or {{rel: ..., abs: ...}}, got "
                                f"{kind_name(tolerance)}", node, "tolerance", "verify.tolerance",
                                hint=number_as_text_hint(tolerance))
        rel = read_number(context, node, "tolerance", None, "verify.tolerance", minimum=0)
    tf32 = read_number(context, node, "tf32_tolerance", defaults.tf32_rel_tolerance, "verify.tf32_tolerance",
                       minimum=0)
    reference = node.get("reference", defaults.reference)
    if reference not in REFERENCES:
        raise context.error(f"must be auto, cpu or cublas, got {kind_name(reference)}", node, "reference",
                            "verify.reference")
    seed = read_number(context, node, "seed", defaults.seed, "verify.seed", whole=True, minimum=0)
    gflop = read_number(context, node, "cpu_reference_max_gflop", defaults.cpu_reference_max_gflop,
                        "verify.cpu_reference_max_gflop", minimum=0)
    for key, value in (("tf32_tolerance", tf32), ("seed", seed), ("cpu_reference_max_gflop", gflop)):
        if value is None:
            raise context.error("must be given a value, not null", node, key, f"verify.{key}")
    relative = [("tf32_tolerance", tf32, node, "tf32_tolerance")]
    if isinstance(tolerance, dict) and "rel" in tolerance:
        relative.insert(0, ("tolerance.rel", rel, tolerance, "rel"))
    elif tolerance is not None and not isinstance(tolerance, dict):
        relative.insert(0, ("tolerance", rel, node, "tolerance"))
    for dotted, value, parent, key in relative:
        problem = zeros_pass(value, absolute)
        if problem:
            raise context.error(problem, parent, key, f"verify.{dotted}", hint=ZEROS_PASS_HINT)
    return VerifySettings(rel_tolerance=rel, abs_tolerance=absolute, tf32_rel_tolerance=tf32, seed=seed,
                          reference=reference, cpu_reference_max_gflop=gflop)
