"""What a failed compile means, in words: each error placed in the user's own file, and the advice its source
supports.

`format_compile_error` quotes each error with its file, line, source line and marker; `compile_hints` reads the log
for the causes a kernel author meets (a missing header, host or torch code, an instruction of a newer target). The
source is read for what it declares (`plain_declarations`, `template_parameters`), so that a kernel named without
its template arguments, or with the wrong ones, is told what the source expects.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Mapping


from . import headers
from .regular_files import FileTooLarge, NotRegularFile, read_regular_file
from ..kernel_names import is_mangled, split_overload
from ..source_text import includes_in, without_comments


_DIAGNOSTIC = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?P<kind>error|warning|catastrophic error)"
                         r"(?P<rest>.*)$")


def format_compile_error(log: str, source: str, display_path: str, status: str, options: Iterable[str] = (),
                         quotable: Iterable[Path] = (), instances: Iterable[str] = ()) -> str:
    """A compile failure as a reader needs it: each error with its file:line, the source line and a marker.

    NVRTC's log has lines ``name.cu(LINE): error: MESSAGE`` followed by the
    offending source line and a caret; we rebuild that view with the real path
    and the line number in front of the quoted source line.
    """
    lines = source.splitlines()
    quotable = set(quotable)
    out = [f"{display_path}: compilation failed ({status})"]
    shown = 0
    for entry in log.splitlines():
        match = _DIAGNOSTIC.match(entry.strip())
        if not match or match.group("kind") == "warning":
            continue
        number = int(match.group("line"))
        message = match.group("rest").lstrip(": ").strip()
        if "name expression" in message or "which instance of function template" in message \
                or "which instance of overloaded function" in message:
            # About the template instance asked for, not about a line of the file (NVRTC's line is spurious).
            out.append(f"  {display_path}: error: {message} ({source_instance_advice(source, quotable, instances)})")
            shown += 1
            continue
        file_path, file_lines = _diagnosed_file(match.group("file").strip(), display_path, lines, quotable)
        out.append(f"  {file_path}:{number}: error: {message}")
        if 1 <= number <= len(file_lines):
            out.append(f"    {number:5d} | {file_lines[number - 1]}")
        shown += 1
        if shown == 10:
            out.append("  ... (more errors: -vv prints the compiler's whole log)")
            break
    if shown == 0:
        out.append("  " + "\n  ".join(log.strip().splitlines()[-15:]))
    folders = [Path(option.split("=", 1)[1]) for option in options if option.startswith("--include-path=")]
    includes = _own_includes(source, display_path, quotable) if any(marker in log for marker in _HOST_CODE) else ()
    out.extend(f"  hint: {hint}" for hint in compile_hints(log, folders, includes))
    out.append(f"  options: {' '.join(options)}")
    return "\n".join(out)


def _own_includes(source: str, display_path: str, headers: Iterable[Path]) -> list[tuple[str, str]]:
    """(file:line, header) of each ``#include <...>`` or ``"..."`` of the source and its local `headers`."""
    texts = [(display_path, source)]
    for header in headers:
        try:
            texts.append((str(header), Path(header).read_text(errors="replace")))
        except OSError:
            continue
    return [(where, quoted or angled) for name, text in texts
            for where, quoted, angled, _ in includes_in(text, name) if quoted or angled]


# What may stand between __global__ and a kernel's name (its return type, attributes, a namespace's qualifier), in
# characters: a bound that keeps each search short, so that a file of many __global__ and no parenthesis after them
# (a comment, a string) is read in one pass rather than once from each.
DECLARATION_REACH = 512


_KERNEL_NAME = re.compile(rf"__global__\b[^;{{(]{{0,{DECLARATION_REACH}}}?\b([A-Za-z_]\w*)\s*\(")


_LAUNCH_QUALIFIER = re.compile(r"\b__(?:launch_bounds|cluster_dims|maxnreg)__\s*\(")


_PARENTHESIS = re.compile(r"[()]")


def _without_launch_qualifiers(text: str) -> str:
    """`text` with each ``__launch_bounds__(...)``, ``__cluster_dims__(...)`` and ``__maxnreg__(...)`` read as a
    space, its parentheses matched in pairs: ``__launch_bounds__((BM / WM) * (BN / WN) * 32)`` stands between
    ``__global__ void`` and the kernel's name as a whole. A qualifier whose parentheses do not close is kept, with
    the rest of `text`, as written (the compiler refuses it), so that the text is read once."""
    pieces: list[str] = []
    copied = 0
    for found in _LAUNCH_QUALIFIER.finditer(text):
        if found.start() < copied:   # inside the qualifier just taken out
            continue
        depth, end = 1, None
        for parenthesis in _PARENTHESIS.finditer(text, found.end()):
            depth += 1 if parenthesis.group() == "(" else -1
            if depth == 0:
                end = parenthesis.end()
                break
        if end is None:
            break
        pieces.extend((text[copied:found.start()], " "))
        copied = end
    pieces.append(text[copied:])
    return "".join(pieces)


def _kernels_in(texts: Iterable[str]) -> list[str]:
    """The names of the ``__global__`` functions `texts` define where their names are written out (not in a
    comment: "the extern "C" __global__ wrappers call matrixMulCUDA(...)" names no kernel)."""
    names = [name for text in texts
             for name in _KERNEL_NAME.findall(_without_launch_qualifiers(without_comments(text)))]
    return list(dict.fromkeys(names))[:8]


def source_instance_advice(source: str, headers: Iterable[Path], instances: Iterable[str]) -> str:
    """What to check when NVRTC could not name an instance: a function written nowhere in `source` or its vetted
    headers (most likely a misspelt ``function:``, beside the kernels the file defines), a function declared only
    as a __device__ or host one (said so, beside the kernels), an overload whose parameter types no declaration
    has (beside the declarations), or the params against the template's. Only asked once NVRTC failed; a name
    that a macro pastes together (``gemm_##NAME``) is not written out either, so NVRTC's own message is kept
    beside this one."""
    texts = [source]
    for header in headers:
        try:
            texts.append(Path(header).read_text(errors="replace"))
        except OSError:
            continue
    return instance_advice(texts, instances)


def instance_advice(texts: Iterable[str], instances: Iterable[str]) -> str:
    """`source_instance_advice` of a source and its headers as `texts` (the source first), for a compiler that could not
    name `instances`: nvcc's, whose error is in driver-gemm's instantiation of each, says it as NVRTC's does."""
    texts, instances = list(texts), list(instances)
    absent, overloads = [], []
    for instance in instances:
        function, parameter_types = split_overload(instance)
        name = _function_name(function)
        if name and not any(re.search(rf"\b{re.escape(name)}\b", text) for text in texts):
            absent.append(name)
        elif name and parameter_types is not None:
            overloads.append((name, parameter_types))
    if absent:
        return (f"no function named {', '.join(dict.fromkeys(absent))} appears in the source or its headers: check "
                f"the spec's function: against the kernels the file defines "
                f"({', '.join(_kernels_in(texts)) or 'none found'})")
    not_kernels = not_a_kernel(instances, texts)
    if not_kernels:
        return (f"{not_kernels}, and only a kernel is launched: check the spec's function: against the kernels "
                f"the file defines ({', '.join(_kernels_in(texts)) or 'none found'})")
    if overloads:
        name, parameter_types = overloads[0]
        declared = _declarations(name, texts)
        return (f"no declaration of {name} takes ({', '.join(parameter_types)}): an overload is named by its "
                "parameter types exactly as declared, const included" +
                (f"; the source declares {'; '.join(declared)}" if declared else ""))
    defaulted = _all_defaults_advice(texts, instances)
    if defaulted:
        return defaulted
    advice = ("check the spec's function and params against the template's parameters (their number, and "
              "enumerators or types with their namespace)")
    names = list(dict.fromkeys(_function_name(split_overload(instance)[0]) for instance in instances
                               if not is_mangled(instance)))
    if names and all(len(_declarations(name, texts)) == 1 for name in names):   # no overload to pick among
        headers = [f"{name} is declared template <{', '.join(parameter.declared for parameter in declared[0])}>"
                   for name in names for declared in [template_parameters(name, texts)] if len(declared) == 1]
        return advice + (f": {'; '.join(headers)}" if headers else "")
    return advice + "; one of several overloads is picked by its parameter types, function: name(const float*, int)"


def _all_defaults_advice(texts: list[str], instances: list[str]) -> str | None:
    """How to name a function template whose parameters all have defaults, where an instance names it bare
    (``gemm``, no params): NVRTC needs the template-id ``gemm<>`` for the instance of the defaults, as a launcher's
    ``gemm<<<grid, block>>>`` picks it by deduction. None where no instance is such."""
    for instance in instances:
        function = split_overload(instance)[0]
        if is_mangled(instance) or "<" in function:
            continue
        name = _function_name(function)
        declared = template_parameters(name, texts)
        if len(declared) != 1 or not declared[0] or not all(parameter.has_default for parameter in declared[0]):
            continue
        header = ", ".join(parameter.declared for parameter in declared[0])
        return (f"every template parameter of {name} has a default (template <{header}>), and a template's instance "
                f"is named by a template-id: write function: '{function}<>' (quoted in YAML) for the defaults, or "
                f"give params in the template's order for others")
    return None


def not_a_kernel(instances: Iterable[str], texts: Iterable[str]) -> str | None:
    """``NAME is a __device__ function, not a kernel (__global__)`` (or a ``__host__ __device__`` or host one) for
    the functions of `instances` that `texts` declare, where no declaration of theirs is ``__global__``: a device
    helper that the file's kernels call (cuda-samples' matrixMulCUDA<BLOCK_SIZE>, wrapped by ``extern "C"``
    matrixMulCUDA_block16), which NVRTC refuses as a name expression in words about templates and overloads. None
    where a declaration is ``__global__`` or none is written out (a macro may make a kernel: nothing is known)."""
    texts = list(texts)
    said = []
    for instance in instances:
        if is_mangled(instance):
            continue
        name = _function_name(split_overload(instance)[0])
        spaces = _execution_spaces(name, texts) if re.fullmatch(r"[A-Za-z_]\w*", name) else None
        if not spaces or "global" in spaces:
            continue
        if spaces == {"device"}:
            kind = "a __device__ function"
        elif "device" in spaces:
            kind = "a __host__ __device__ function"
        else:   # __host__, or no execution space at all: a host function, which NVRTC does not even compile
            kind = "a host function (written without __device__ or __global__)"
        said.append(f"{name} is {kind}, not a kernel (__global__)")
    return "; ".join(dict.fromkeys(said)) or None


def _function_name(function: str) -> str:
    """The unqualified name of `function` (a name or template-id): ``get`` of ``lib::S<float>::get<2>``; what
    stands before the first ``<`` where an argument's own angles do not pair (``f<(N > 2)>``)."""
    bare = function
    for _ in range(8):   # template arguments nested up to eight deep
        bare = re.sub(r"<[^<>]*>", "", bare)
    name = bare.rsplit("::", 1)[-1].strip()
    return name if re.fullmatch(r"[A-Za-z_]\w*", name) else function.split("<", 1)[0].rsplit("::", 1)[-1].strip()


# How far `_execution_spaces` reads: the occurrences of a name it looks at (a declaration precedes the calls in
# C++, so the first ones hold it), each with at most this many characters before it, so a large file is read once.
_OCCURRENCES_READ = 256


_HEAD_REACH = 8 * DECLARATION_REACH


_EXECUTION_SPACE = re.compile(r"\b__(global|device|host)__\b")


# What a function's declaration may have before its return type and name, read as spaces.
_SPECIFIERS = re.compile(r'\[\[[^\[\]]*\]\]|\b__attribute__\s*\(\([^()]*\)\)|\bextern\s*"C(?:\+\+)?"|'
                         r"\b(?:static|inline|constexpr|consteval|extern|virtual|friend|explicit|__forceinline__|"
                         r"__noinline__|__inline__|__global__|__device__|__host__)\b")


_TEMPLATE_ARGUMENTS = re.compile(r"<[^<>;{}()]*>")


# Words that begin a statement that calls the function (return scale(x);), not a declaration of it.
_STATEMENT_WORDS = frozenset({"return", "else", "do", "goto", "throw", "new", "delete", "co_return", "co_yield",
                              "co_await", "typedef", "using", "sizeof", "decltype", "case", "default", "operator"})


def _execution_spaces(name: str, texts: Iterable[str]) -> set[str]:
    """The execution spaces (global, device, host) of the declarations of `name` in `texts`: each ``name(`` whose
    statement, up to it, reads as a declaration's head (a template header, specifiers, a return type); a head with
    no __global__, __device__ or __host__ declares a host function."""
    spaces: set[str] = set()
    pattern = re.compile(rf"\b{re.escape(name)}\s*\(")
    read = 0
    for text in texts:
        text = _without_launch_qualifiers(without_comments(text))
        for match in pattern.finditer(text):
            read += 1
            if read > _OCCURRENCES_READ:
                return spaces
            before = text[max(0, match.start() - _HEAD_REACH):match.start()]
            head = _declaration_head(before[max(before.rfind(";"), before.rfind("}"), before.rfind("{")) + 1:])
            if head is not None:
                spaces.update(_EXECUTION_SPACE.findall(head) or ["host"])
    return spaces


def _declaration_head(statement: str) -> str | None:
    """`statement` (what stands before a name and its ``(``, its comments taken out) without its directives and
    template header where it reads as a function declaration's head, else None (a call: ``x = f(``, ``return
    f(``, ``lib::f(``)."""
    # Directives and a class's access labels (public:) stand between declarations.
    text = re.sub(r"^[ \t]*#[^\n]*|\b(?:public|protected|private)\s*:(?!:)", " ", statement,
                  flags=re.MULTILINE).strip()
    while text is not None and _TEMPLATE_HEADER.match(text):   # a member template of a class template has two
        text = _after_template_header(text)
    if text is None:
        return None
    bare = _SPECIFIERS.sub(" ", text)
    for _ in range(4):   # template arguments of the return type, nested up to four deep
        bare = _TEMPLATE_ARGUMENTS.sub(" ", bare)
    bare = re.sub(r"(?:[A-Za-z_]\w*\s*::\s*)+$", " ", bare)    # the name's own scope (void lib::f()
    words = re.findall(r"[A-Za-z_]\w*", bare)
    if not words or words[0] in _STATEMENT_WORDS or not re.fullmatch(r"[\w\s*&]*(?:::[\w\s*&]*)*", bare):
        return None
    return text


def _after_template_header(text: str) -> str | None:
    """`text` after the ``template <...>`` it begins with, or None where the header does not close."""
    start = text.index("<") + 1
    header = _template_header(text[start:])
    return text[start + header[1] + 1:].strip() if header is not None else None


def plain_declarations(name: str, texts: Iterable[str]) -> list[str]:
    """The ``__global__`` declarations of `name` in `texts` (as `_declarations` gives them) when there are some and
    none is a template: what a ``template <...>`` before the declaration, in the same statement, would make one.
    Empty where a declaration is a template, or none is written out (a macro may make it: nothing is known)."""
    texts = list(texts)
    if any(_TEMPLATE_HEADER.search(statement) for statement in _declaration_heads(name, texts)):
        return []
    return _declarations(name, texts)


def template_parameter_names(name: str, texts: Iterable[str]) -> list[list[str | None]]:
    """For each ``template <...> __global__ ... name(`` in `texts`, its parameters' names in order (None for an
    unnamed one: ``template <int>``). Empty where no declaration of `name` is a template written out."""
    found = []
    for statement in _declaration_heads(name, texts):
        header = _TEMPLATE_HEADER.search(statement)
        names = _template_header_names(statement[header.end():]) if header is not None else None
        if names is not None:
            found.append(names)
    return found


@dataclass(frozen=True)
class ParamsByPosition:
    """How params reach a template whose parameters they do not all name: template arguments go by position, so a
    param of another name is passed as the template's parameter in its place, whatever its name says."""

    passed: tuple[tuple[str, str], ...]    # (param, the template parameter it is passed as), for each not named so
    mixed: bool                            # whether other params carry the template's own names
    crossed: tuple[tuple[str, str], ...]   # of `passed`, those whose name says another GEMM dimension than its place's

    @property
    def mapping(self) -> str:
        """``TILE_N -> BM, TILE_M -> BN``."""
        return ", ".join(f"{param} -> {declared}" for param, declared in self.passed)

    @property
    def unlike(self) -> bool:
        """Whether a param passed by position has a name that is no spelling of its place's (X for BM, where
        ACC for Acc and LA for LayoutA are)."""
        return any(not _spells(param, declared) for param, declared in self.passed)


def params_by_position(names: Iterable[str], template: Iterable[str | None]) -> ParamsByPosition:
    """Which of params `names` a template declared with parameters `template` (as `template_parameter_names` gives
    them) takes by position rather than by their name, and which of those are crossed: named for one of the
    dimensions M, N, K (``TILE_N``, ``BLOCK_M``, ``kTileK``) and passed in the place of a parameter named for
    another (``BM``), as swapped tile sides given under names of the spec's own are."""
    names, template = list(names), list(template)
    passed = tuple((name, template[index]) for index, name in enumerate(names)
                   if name not in template and index < len(template) and template[index] is not None)
    crossed = tuple((name, declared) for name, declared in passed
                    if None not in (_dimension(name), _dimension(declared))
                    and _dimension(name) != _dimension(declared))
    return ParamsByPosition(passed, any(name in template for name in names), crossed)


def _dimension(name: str) -> str | None:
    """The GEMM dimension a parameter's name ends in (``BM``, ``TILE_N``, ``kBlockK``), None for other names."""
    return name[-1] if len(name) > 1 and name[-1] in "MNK" else None


def _spells(given: str, declared: str) -> bool:
    """Whether `given` is `declared` or a shortening of it (letters in order from its first), case aside:
    ``ACC`` of ``Acc``, ``LA`` of ``LayoutA``."""
    given, declared = given.replace("_", "").upper(), declared.replace("_", "").upper()
    short, long = sorted((given, declared), key=len)
    if not short or short[0] != long[0]:
        return False
    rest = iter(long)
    return all(letter in rest for letter in short)


_TEMPLATE_HEADER = re.compile(r"\btemplate\s*<")


def _declaration_heads(name: str, texts: Iterable[str]) -> Iterator[str]:
    """What stands before each ``__global__ ... name(`` of `texts` in the same statement (since the last ``;``,
    ``{`` or ``}``): where a ``template <...>`` header of that declaration is."""
    pattern = re.compile(rf"__global__\b[^;{{(]{{0,{DECLARATION_REACH}}}?\b{re.escape(name)}\s*\(")
    for text in texts:
        # Without comments: a __global__ in one before a __device__ function's declaration is not the function's.
        text = _without_launch_qualifiers(without_comments(text))
        for match in pattern.finditer(text):
            before = text[max(0, match.start() - 8 * DECLARATION_REACH):match.start()]
            yield before[max(before.rfind(";"), before.rfind("}"), before.rfind("{")) + 1:]


def _template_header(text: str) -> tuple[list[str], int] | None:
    """The parameters, as written, of the template header whose ``<`` `text` follows (``int BM, typename T =
    float>``), and where its closing ``>`` is in `text`; None where it does not close."""
    parameters, angles, brackets, current = [], 0, 0, ""
    for position, character in enumerate(text):
        # Inside parentheses a < or > is a comparison or a shift (int N = (1 << 4)), not a bracket.
        if character in "([":
            brackets += 1
        elif character in ")]":
            brackets -= 1
        elif brackets == 0 and character == "<":
            angles += 1
        elif brackets == 0 and character == ">" and angles > 0:
            angles -= 1
        elif brackets == 0 and character == ">":
            parameters.append(current)
            return parameters, position
        elif brackets == 0 and angles == 0 and character == ",":
            parameters.append(current)
            current = ""
            continue
        current += character
    return None


def _template_header_names(text: str) -> list[str | None] | None:
    """The parameter names of the template header whose ``<`` `text` follows (``int BM, typename T = float>``),
    or None where it does not close."""
    header = _template_header(text)
    return [_template_parameter(parameter).name for parameter in header[0]] if header is not None else None


@dataclass(frozen=True)
class TemplateParameter:
    """One parameter of a template header as written (``int BM``, ``typename T = float``, ``int... Ns``)."""

    name: str | None      # None for an unnamed one: template <int>
    kind: str             # "type" (typename, class), "template" (a template template parameter) or "value"
    declared: str         # as written, without its default
    has_default: bool
    pack: bool


def _template_parameter(text: str) -> TemplateParameter:
    declared, equals, _ = text.partition("=")
    declared = " ".join(declared.split())
    # The name is the last word, unless that word is the kind itself (template <int, typename>).
    words = re.findall(r"[A-Za-z_]\w*", re.sub(r"<[^<>]*>", " ", declared))
    named = words and len(words) > 1 and words[-1] not in ("typename", "class", "auto", "int", "unsigned",
                                                             "long", "short", "char", "bool", "size_t")
    if declared.startswith("template"):
        kind = "template"
    elif words and words[0] in ("typename", "class") and "::" not in declared:
        kind = "type"
    else:
        kind = "value"
    return TemplateParameter(words[-1] if named else None, kind, declared, bool(equals), "..." in declared)


def template_parameters(name: str, texts: Iterable[str]) -> list[tuple[TemplateParameter, ...]]:
    """For each ``template <...> __global__ ... name(`` in `texts`, its parameters (`template_parameter_names`
    with their kinds and defaults)."""
    found = []
    for statement in _declaration_heads(name, texts):
        header = _TEMPLATE_HEADER.search(statement)
        parsed = _template_header(statement[header.end():]) if header is not None else None
        if parsed is not None:
            found.append(tuple(_template_parameter(parameter) for parameter in parsed[0] if parameter.strip()))
    return found


# Type names a spec may give where a template takes a number: read as a type, never as a constant of the source's.
_BUILTIN_TYPES = frozenset({"float", "double", "half", "__half", "__nv_bfloat16", "nv_bfloat16", "__nv_fp8_e4m3",
                            "__nv_fp8_e5m2", "int", "unsigned", "char", "short", "long", "int8_t", "uint8_t",
                            "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t", "float2", "float4",
                            "half2", "__half2", "__nv_bfloat162"})


def template_arguments_problem(function: str, params: Mapping[str, object],
                               declared: Iterable[tuple[TemplateParameter, ...]]) -> str | None:
    """What is wrong with `params` (the template arguments a spec gives, in order) for `function`'s template,
    whose declarations in the source are `declared` (`template_parameters`): too few for the parameters without a
    default, more than it has, or a type where it takes a value (or a number where it takes a type); None where
    nothing is (the parameters are all read, or not: a pack takes any number, overloads are not told apart)."""
    headers = {tuple((parameter.name, parameter.kind, parameter.pack) for parameter in header): header
               for header in declared}
    if len(headers) != 1:
        return None
    # A default may be given in a declaration and not in the definition: a parameter has one where any has.
    template = [dataclasses.replace(parameter, has_default=any(header[index].has_default for header in declared))
                for index, parameter in enumerate(next(iter(headers.values())))]
    if any(parameter.pack or parameter.kind == "template" for parameter in template):
        return None
    given = list(params.items())
    required = next((index for index, parameter in enumerate(template) if parameter.has_default), len(template))
    names = [parameter.name for parameter in template]
    header = f"template <{', '.join(parameter.declared for parameter in template)}>"
    count = (f"{function} has {len(template)} template parameter{'s' if len(template) != 1 else ''}"
             + (f" ({len(template) - required} with a default)" if required < len(template) else "")
             + f", params give {len(given)}")
    if len(given) > len(template):
        extra = [name for name, _ in given[len(template):]]
        unknown = [name for name in extra if name not in names]
        said = (f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not a parameter of {function}"
                if unknown else f"{', '.join(extra)} {'has' if len(extra) == 1 else 'have'} no place left")
        return f"{count}: {said} ({header})"
    if len(given) < required:
        if all(name in names for name, _ in given):   # the template's own names: the missing are those not given
            missing = [name or "?" for name in names[:required] if name not in params]
        else:                                        # params go by position: the last ones are the missing
            missing = [name or f"parameter {index + 1}" for index, name in enumerate(names[len(given):required],
                                                                                         len(given))]
        return f"{count}: {', '.join(missing)} missing ({header})"
    for (name, value), parameter in zip(given, template):
        place = parameter.name or name
        if parameter.kind == "value" and isinstance(value, str) and value.strip() in _BUILTIN_TYPES:
            return (f"{place} of {function}'s template takes a value ({parameter.declared}), params give it the "
                    f"type {value.strip()}")
        if parameter.kind == "type" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return (f"{place} of {function}'s template takes a type ({parameter.declared}), params give it the "
                    f"number {value}")
    return None


def _declarations(name: str, texts: Iterable[str]) -> list[str]:
    """Up to three ``__global__`` declarations of `name` in `texts`, each as ``name(its parameters)`` on one line."""
    found = []
    pattern = re.compile(rf"__global__\b[^;{{(]{{0,{DECLARATION_REACH}}}?\b{re.escape(name)}\s*\("
                         r"([^()]*(?:\([^()]*\)[^()]*)*)\)")
    for text in texts:
        for match in pattern.finditer(_without_launch_qualifiers(without_comments(text))):
            found.append(f"{name}({' '.join(match.group(1).split())})")
    return list(dict.fromkeys(found))[:3]


def _diagnosed_file(logged: str, display_path: str, lines: list[str],
                    quotable: set[Path] | frozenset[Path] = frozenset()) -> tuple[str, list[str]]:
    """The path and lines of the file a diagnostic is about: the program itself, or a header it includes
    (NVRTC names a header by the path it found it at). Only a header the scan vetted (`quotable`), a stand-in
    or a toolkit header is quoted, and only a regular file of bounded size."""
    if logged in (display_path, Path(display_path).name):
        return display_path, lines
    from ..specfile.limits import MAX_SOURCE_BYTES   # lazy, as in read_source
    header = Path(logged) if Path(logged).is_absolute() else Path(display_path).parent / logged
    try:
        resolved = header.resolve()
        trusted = (headers.STAND_INS, *headers.toolkit_include_dirs())
        if resolved not in quotable and not any(resolved.is_relative_to(folder) for folder in trusted):
            return logged, []
        return str(header), read_regular_file(resolved, MAX_SOURCE_BYTES).decode(errors="replace").splitlines()
    except (OSError, RuntimeError, NotRegularFile, FileTooLarge):
        return logged, []


_MISSING_HEADER = re.compile(r'(?:cannot|could not) open source file "([^"]+)"')


_MISSING_HEADER_AT = re.compile(r'^\s*(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?:catastrophic error|error): '
                                r'(?:cannot|could not) open source file "(?P<name>[^"]+)"', re.MULTILINE)


# The toolkit's headers that hold host code a kernel file may include without knowing: CUB's and Thrust's
# device-wide algorithms, which the umbrella headers (<cub/cub.cuh>, <thrust/...>) pull in.
_DEVICE_WIDE = re.compile(r"(?:^|/)(?:cub/device/|cub/dispatch/|thrust/)")


_UMBRELLA = re.compile(r"(?:cub/cub\.cuh|cub/device/|thrust/)")


def _missing_headers(log: str) -> list[tuple[str, str | None, int | None]]:
    """(header, the file that includes it, its line) of each header NVRTC or nvcc could not open, once each; the
    including file is None where the log does not say it."""
    found: dict[str, tuple[str, str | None, int | None]] = {}
    for match in _MISSING_HEADER_AT.finditer(log):
        found.setdefault(match.group("name"), (match.group("name"), match.group("file").strip(),
                                               int(match.group("line"))))
    for name in _MISSING_HEADER.findall(log):
        found.setdefault(name, (name, None, None))
    return list(found.values())


def _host_code_files(log: str) -> list[str]:
    """The files (``file:line``, first of each file) where the log says NVRTC met host code."""
    files: dict[str, str] = {}
    for entry in log.splitlines():
        match = _DIAGNOSTIC.match(entry.strip())
        if match and any(marker in match.group("rest") for marker in _HOST_CODE):
            files.setdefault(match.group("file").strip(), f"{match.group('file').strip()}:{match.group('line')}")
    return list(files.values())


_HOST_CODE = ("host functions are not allowed in JIT mode", "__host__ function is not allowed in JIT mode")


# PyTorch's C++ extension code (KernelBench's load_inline sources), as the source lines NVRTC quotes under its errors
# show it: host C++ whose every line fails under NVRTC, with errors that say nothing of host code.
_TORCH_CODE = re.compile(r"\b(?:torch|at|c10|pybind11)::|\bTORCH_CHECK\w*\b|\bPYBIND11_MODULE\b|\bAT_DISPATCH_\w+")


def _torch_code_lines(log: str) -> list[str]:
    """``file:line`` of each error (first of each file) whose quoted source line is PyTorch extension code."""
    found: dict[str, str] = {}
    lines = log.splitlines()
    for index, entry in enumerate(lines):
        match = _DIAGNOSTIC.match(entry.strip())
        quoted = lines[index + 1] if index + 1 < len(lines) else ""
        if match and match.group("kind") != "warning" and _TORCH_CODE.search(quoted):
            name = match.group("file").strip()
            found.setdefault(name, f"{name}:{match.group('line')}")
    return list(found.values())


# Device functions nvcc declares in every file (its pre-included cuda_runtime.h), which NVRTC declares only where
# the file includes their header.
_DEVICE_RUNTIME = re.compile(r'identifier "(cudaGridDependencySynchronize|cudaTriggerProgrammaticLaunchCompletion'
                             r'|cudaGetParameterBuffer\w*|cudaLaunchDevice\w*)" is undefined')


# GNU's spelling of inline assembly, which nvcc's host compiler front end takes and NVRTC does not (it takes asm, and
# __volatile__ after it): the file then fails at its first __asm__, with no word of why.
_GNU_ASM = 'identifier "__asm__" is undefined'


# ptxas refusing an instruction of the architecture-specific target (sm_90a) on the plain one.
_ARCH_SPECIFIC = re.compile(r"not supported on \.target '(sm_\d+)'")


_UNSUPPORTED_INSTRUCTION = re.compile(r"Instruction '([\w.]+)' not supported on \.target 'sm_\d+'")


_NVCC_INSTANCES = re.compile(r"instances\.cu\(\d+\)")


# ptxas refusing a block's static shared memory past the static limit, in hexadecimal bytes.
_STATIC_SHARED = re.compile(r"uses too much shared data \((0x[0-9a-fA-F]+) bytes, (0x[0-9a-fA-F]+) max\)")


# ptxas refusing an instruction of a newer architecture than the build's (an sm_80 mma on sm_75).
_NEWER_TARGET = re.compile(r"Feature '([^']+)' requires \.target (sm_\d+[af]?) or higher")


def compile_hints(log: str, folders: Iterable[Path] = (), includes: Iterable[tuple[str, str]] = ()) -> list[str]:
    """What to do about the failures NVRTC's `log` shows that come from the file's setting, not its kernels:
    headers it could not find (in the include `folders`, the kernel's own first), and host code (NVRTC compiles
    device code only), said where it is: the file's own, or a header's, which the file's `includes` ((file:line,
    header) of each include of the source and its local headers) name."""
    folders = tuple(folders)
    host = _host_code_files(log)
    library = bool(host) and all(_DEVICE_WIDE.search(file) for file in host)
    hints = []
    for name, including, line in _missing_headers(log):
        if library and including is not None and _DEVICE_WIDE.search(including):
            continue    # CUB's device-wide headers include host headers too: the host-code hint below says why
        hint = headers.missing_header_hint(name, folders)
        # A header's include (NVRTC names a header by its path) may be past the errors shown: said where it is.
        if including is not None and Path(including).is_absolute() and hint.startswith(f"{name} is not beside"):
            hint = f"{hint} ({including}:{line} includes {name})"
        hints.append(hint)
    torch = _torch_code_lines(log)
    if torch and not any(headers.is_torch_header(name) for name, _, _ in _missing_headers(log)):
        hints.append(f"NVRTC compiles device code only, and this file holds PyTorch extension code (torch::Tensor, "
                     f"at::, TORCH_CHECK, PYBIND11_MODULE: host C++), met at {', '.join(torch[:3])}: "
                     f"{headers.TORCH_GUARD}; or build the kernel with compiler: nvcc and torch's include folders in "
                     "its options: (docs/kernels.md, \"PyTorch extension sources\")")
    if any(marker in log for marker in _HOST_CODE) and re.search(r"\bcuda\.h\(\d+\)", log):
        hints.append("<cuda.h> is the driver API's host header, which NVRTC cannot compile, and this compile found "
                     "the toolkit's through a folder of the kernel's options: [-I ...]; without that folder, "
                     "driver-gemm's own <cuda.h> declares what device code takes from it (CUtensorMap_st and the "
                     "tensor-map enumerations), or build the file with compiler: nvcc")
    if re.search(r'(__nv_name_map|instances\.cu)\S*: error: name followed by "::" must be a class or namespace', log):
        hints.append("a template argument in params: names something by a scope that is not found where the "
                     "instance is named, outside the kernel's namespace: write enumerators and types with their "
                     "whole namespace (lib::Kind::Normal, not Kind::Normal)")
    functions = list(dict.fromkeys(_DEVICE_RUNTIME.findall(log)))
    if functions:
        hints.append(f"{', '.join(functions)} {'is' if len(functions) == 1 else 'are'} declared by "
                     "<cuda_device_runtime_api.h>, which nvcc includes in every file and NVRTC only where the file "
                     "does: add #include <cuda_device_runtime_api.h>, or, leaving the file as it is, options: "
                     "[--pre-include=cuda_device_runtime_api.h] (or write the PTX: asm volatile(\"griddepcontrol"
                     ".wait;\" ::: \"memory\") and \"griddepcontrol.launch_dependents;\")")
    if _GNU_ASM in log:
        hints.append("NVRTC knows inline assembly as asm, not as GNU's __asm__, which nvcc takes: write asm "
                     "volatile(...), or, leaving the file as it is, options: [-D__asm__=asm, -D__volatile__=volatile]")
    if library:
        umbrellas = [f"{where} includes <{header}>" for where, header in includes if _UMBRELLA.match(header)]
        hints.append("NVRTC compiles device code only, and the host code it met is the CUDA toolkit's: CUB's and "
                     "Thrust's device-wide algorithms (cub/device/..., thrust/...), which launch kernels from the "
                     "host" + (f"; {', '.join(umbrellas[:3])}, which pulls them in" if umbrellas else
                               "; an umbrella header (<cub/cub.cuh>, a <thrust/...> one) pulls them in") +
                     ": include only the block and warp headers the kernel uses (<cub/block/block_reduce.cuh>, "
                     "<cub/warp/warp_reduce.cuh>), or build it with compiler: nvcc")
    elif any(marker in log for marker in _HOST_CODE) and not re.search(r"\bcuda\.h\(\d+\)", log) and not torch:
        where = f"; NVRTC met it at {', '.join(host[:3])}" if host else ""
        hints.append(f"NVRTC compiles device code only, and this file has host code (main, a launcher, "
                     f"cudaMalloc{where}): "
                     "build it with compiler: nvcc, or put the host code inside #ifndef __CUDACC_RTC__ ... #endif "
                     "(NVRTC defines __CUDACC_RTC__); functions without __host__/__device__ in a header library "
                     "(CUTLASS's and CuTe's constexpr helpers) compile as device functions with options: "
                     "[-default-device]")
    targets = dict.fromkeys(_ARCH_SPECIFIC.findall(log))
    if targets:
        instructions = ", ".join(dict.fromkeys(f"'{name}'" for name in _UNSUPPORTED_INSTRUCTION.findall(log)))
        hints.append(f"{instructions} {'is' if ',' not in instructions else 'are'} only on the architecture-specific "
                     f"target: give the kernel arch: {next(iter(targets))}a (wgmma, setmaxnreg and the other "
                     f"sm_90a instructions do not exist on plain {next(iter(targets))})")
    static = _STATIC_SHARED.search(log)
    if static:
        used, most = int(static.group(1), 16), int(static.group(2), 16)
        hints.append(f"the kernel's static shared memory (__shared__ arrays of a fixed size) is {used:,} bytes, "
                     f"more than the {most:,} bytes ({most // 1024} KB) a block may have statically: a larger tile "
                     "needs dynamic shared memory, an extern __shared__ array whose size the spec gives in "
                     "shared_bytes:")
    newer: dict[str, list[str]] = {}
    for feature, target in _NEWER_TARGET.findall(log):
        newer.setdefault(target, []).append(feature)
    for target, features in newer.items():
        named = ", ".join(f"'{feature}'" for feature in dict.fromkeys(features))
        hints.append(f"{named} {'needs' if ',' not in named else 'need'} {target} or newer, and this build is for "
                     f"an older architecture: plan for {target} (or newer), or give the kernel arch: {target}")
    if "which instance of function template" in log and _NVCC_INSTANCES.search(log):
        hints.append("the spec names a function template without all its template arguments (driver-gemm "
                     "instantiates each instance the spec names by taking its address): give them in params: in "
                     "the template's order, or "
                     "write the template-id in function: (k<float, 64>); a template whose arguments are deduced "
                     "from its parameters is named with them too")
    if "device-side kernel launch could not be processed" in log:
        hints.append("a <<<...>>> launch compiled as device code: the file's host launcher became a device function "
                     "(under -default-device, unannotated functions do), and NVRTC builds no device-side launches "
                     "without the device runtime: build the file with compiler: nvcc, or put the launcher inside "
                     "#ifndef __CUDACC_RTC__ ... #endif (-default-device helps header libraries, not launchers)")
    return hints
