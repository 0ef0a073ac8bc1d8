"""The parameter types of an Itanium-mangled kernel name, and the symbol a spec's ``function:`` means.

Only what kernel names use is decoded: builtin types, pointer/reference and
cv-qualifiers, class names (plain or nested), template arguments (types and
literals), template parameters (``T_``) and substitutions (``S_``,
``S0_``...). Anything else makes the demangler give up on the name and return
``None``; it never raises. The grammar is the Itanium C++ ABI's
(itanium-cxx-abi.github.io/cxx-abi/abi.html#mangling).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from ..errors import ImageError
from ..kernel_names import split_overload, split_parameter_types

# code -> (spelling, kind, size in bytes)
_BUILTINS = {
    "v": ("void", "void", None), "w": ("wchar_t", "int", 4), "b": ("bool", "int", 1), "c": ("char", "int", 1),
    "a": ("signed char", "int", 1), "h": ("unsigned char", "int", 1), "s": ("short", "int", 2),
    "t": ("unsigned short", "int", 2), "i": ("int", "int", 4), "j": ("unsigned int", "int", 4),
    "l": ("long", "int", 8), "m": ("unsigned long", "int", 8), "x": ("long long", "int", 8),
    "y": ("unsigned long long", "int", 8), "n": ("__int128", "int", 16), "o": ("unsigned __int128", "int", 16),
    "f": ("float", "float", 4), "d": ("double", "float", 8), "e": ("long double", "float", 16),
    "g": ("__float128", "float", 16), "z": ("...", "unknown", None),
}
_D_BUILTINS = {
    "Dh": ("half", "float", 2), "Di": ("char32_t", "int", 4), "Ds": ("char16_t", "int", 2),
    "Du": ("char8_t", "int", 1), "Dn": ("decltype(nullptr)", "pointer", 8), "DF16b": ("std::bfloat16_t", "float", 2),
}
# A builtin type's spelling -> (kind, size in bytes).
BUILTIN_TYPES = {spelling: (kind, size) for spelling, kind, size in (*_BUILTINS.values(), *_D_BUILTINS.values())}
# By-value structs that kernels take, with their sizes (CUDA headers).
STRUCT_SIZES = {
    "CUtensorMap_st": 128, "CUtensorMap": 128, "__half": 2, "__nv_bfloat16": 2, "__half2": 4,
    "__nv_bfloat162": 4, "float2": 8, "float4": 16, "double2": 16, "int2": 8, "int4": 16, "uint2": 8,
    "uint4": 16, "dim3": 12, "uint3": 12, "float3": 12, "int3": 12,
}
_STD_ABBREVIATIONS = {"St": "std", "Sa": "std::allocator", "Sb": "std::basic_string", "Ss": "std::string",
                      "Si": "std::istream", "So": "std::ostream", "Sd": "std::iostream"}
_LITERAL_SUFFIX = {"j": "u", "l": "l", "m": "ul", "x": "ll", "y": "ull", "i": "", "s": "", "t": "", "h": "", "a": ""}


@dataclass(frozen=True)
class ParamType:
    """A demangled parameter type: ``kind`` is pointer, int, float, struct or unknown; size in bytes or None."""

    kind: str
    size: int | None
    text: str


@dataclass(frozen=True)
class Demangled:
    """A demangled function: display name (``sgemm<32>``), base name (``sgemm``) and parameter types."""

    name: str
    base_name: str
    params: tuple[ParamType, ...]


class _GiveUp(Exception):
    pass


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.position = 0
        self.substitutions: list[ParamType] = []
        self.template_args: list[ParamType] = []     # of the name parsed last
        self.function_args: list[ParamType] = []     # of the function: what T_ refers to in its parameters

    def peek(self, count: int = 1) -> str:
        return self.text[self.position:self.position + count]

    def take(self, expected: str) -> None:
        if not self.text.startswith(expected, self.position):
            raise _GiveUp
        self.position += len(expected)

    def number(self) -> int:
        start = self.position
        while self.peek().isdigit():
            self.position += 1
        if start == self.position:
            raise _GiveUp
        return int(self.text[start:self.position])

    def source_name(self) -> str:
        length = self.number()
        name = self.text[self.position:self.position + length]
        if len(name) != length:
            raise _GiveUp
        self.position += length
        return "(anonymous namespace)" if name.startswith("_GLOBAL__N") else name

    def seq_id(self) -> int:
        """The index after ``S`` in ``S_`` (0), ``S0_`` (1), ``SA_`` (11)..."""
        if self.peek() == "_":
            self.position += 1
            return 0
        start = self.position
        while self.peek().isalnum() and self.peek().isupper() or self.peek().isdigit():
            self.position += 1
        digits = self.text[start:self.position]
        self.take("_")
        value = 0
        for char in digits:
            value = value * 36 + int(char, 36)
        return value + 1

    def parameter_number(self) -> int:
        """The index after ``T`` in ``T_`` (0), ``T0_`` (1), ``T10_`` (11): decimal, where a substitution's
        sequence number is base 36."""
        if self.peek() == "_":
            self.position += 1
            return 0
        start = self.position
        while self.peek().isdigit():
            self.position += 1
        digits = self.text[start:self.position]
        self.take("_")
        if not digits:
            raise _GiveUp
        return int(digits) + 1

    def substitution(self) -> ParamType:
        self.take("S")
        two = "S" + self.peek()
        if two in _STD_ABBREVIATIONS:
            self.position += 1
            return ParamType("struct", None, _STD_ABBREVIATIONS[two])
        index = self.seq_id()
        if index >= len(self.substitutions):
            raise _GiveUp
        return self.substitutions[index]

    def template_param(self) -> ParamType:
        self.take("T")
        index = self.parameter_number()
        arguments = self.function_args or self.template_args
        if index >= len(arguments):
            raise _GiveUp
        return arguments[index]

    # names ---------------------------------------------------------------------------------------

    def name(self) -> tuple[str, str, bool]:
        """(display name, base name, has template args) of a function or class name."""
        if self.peek() == "N":
            return self.nested_name()
        if self.peek() == "L":     # internal linkage
            self.position += 1
        if self.peek() == "S" and self.peek(2) != "St":
            base = self.substitution().text
        else:
            if self.peek(2) == "St":
                self.position += 2
                base = "std::" + self.source_name()
            else:
                base = self.source_name()
        if self.peek() == "I":
            self.substitutions.append(_struct(base))
            arguments = self.template_arguments()
            return f"{base}<{arguments}>", base, True
        return base, base, False

    def nested_name(self) -> tuple[str, str, bool]:
        self.take("N")
        while self.peek() in ("K", "V", "r"):
            self.position += 1
        parts: list[str] = []
        base, templated = "", False
        while self.peek() != "E":
            templated = False
            if self.peek() == "S":
                component = self.substitution().text
                parts = [component]
                base = component.rsplit("::", 1)[-1]
                continue
            if self.peek() == "I":
                arguments = self.template_arguments()
                parts[-1] = f"{parts[-1]}<{arguments}>"
                templated = True
            elif self.peek() == "L":
                self.position += 1
                continue
            elif self.peek().isdigit():
                base = self.source_name()
                parts.append(base)
            else:
                raise _GiveUp
            if self.peek() != "E":
                self.substitutions.append(_struct("::".join(parts)))
        self.take("E")
        if not parts:
            raise _GiveUp
        qualified = "::".join(parts)
        return qualified, qualified.split("<", 1)[0], templated

    def template_arguments(self) -> str:
        self.take("I")
        arguments: list[ParamType] = []
        while self.peek() != "E":
            arguments.append(self.template_argument())
        self.take("E")
        self.template_args = arguments
        return ", ".join(a.text for a in arguments)

    def template_argument(self) -> ParamType:
        if self.peek() == "L":
            self.position += 1
            if self.peek(2) == "_Z":
                raise _GiveUp
            code = self.peek()
            if code not in _BUILTINS or code == "u":   # a value of an enum (or other named) type: L <type> <n> E
                named = self.type()
                negative = self.peek() == "n"
                self.position += negative
                value = self.number()
                self.take("E")
                return ParamType("literal", None, f"({named.text}){'-' if negative else ''}{value}")
            self.position += 1
            negative = self.peek() == "n"
            if negative:
                self.position += 1
            start = self.position
            while self.peek() not in ("E", ""):
                self.position += 1
            digits = self.text[start:self.position]
            self.take("E")
            if code == "b":
                text = "true" if digits == "1" else "false"
            elif code in _LITERAL_SUFFIX:
                text = f"{'-' if negative else ''}{digits}{_LITERAL_SUFFIX[code]}"
            else:
                text = f"({_BUILTINS[code][0]}){'-' if negative else ''}{digits}"
            return ParamType("literal", None, text)
        if self.peek() == "J":
            self.position += 1
            pack = []
            while self.peek() != "E":
                pack.append(self.template_argument().text)
            self.take("E")
            return ParamType("pack", None, ", ".join(pack))
        if self.peek() == "X":
            raise _GiveUp
        return self.type()

    # types ---------------------------------------------------------------------------------------

    def type(self) -> ParamType:
        code = self.peek()
        if code in _BUILTINS and code != "u":
            self.position += 1
            spelling, kind, size = _BUILTINS[code]
            return ParamType(kind, size, spelling)
        if code == "D":
            for mangled, (spelling, kind, size) in _D_BUILTINS.items():
                if self.text.startswith(mangled, self.position):
                    self.position += len(mangled)
                    return ParamType(kind, size, spelling)
            if self.peek(3) == "DF1" or self.peek(3) == "DF3" or self.peek(3) == "DF6":
                self.position += 2
                bits = self.number()
                self.take("_")
                return ParamType("float", bits // 8, f"_Float{bits}")
            raise _GiveUp
        if code in ("P", "R", "O"):
            self.position += 1
            pointee = self.type()
            marker = {"P": "*", "R": "&", "O": "&&"}[code]
            result = ParamType("pointer", 8, f"{pointee.text}{marker}")
        elif code in ("K", "V", "r"):
            qualifiers = []
            while self.peek() in ("K", "V", "r"):
                qualifiers.append({"K": "const", "V": "volatile", "r": "__restrict__"}[self.peek()])
                self.position += 1
            inner = self.type()
            text = f"{inner.text} {' '.join(reversed(qualifiers))}" if inner.kind == "pointer" else \
                f"{' '.join(reversed(qualifiers))} {inner.text}"
            result = ParamType(inner.kind, inner.size, text)
        elif code == "S":
            result = self.substitution()
            if self.peek() == "I":   # a substituted template name followed by its arguments
                result = _struct(f"{result.text}<{self.template_arguments()}>")
            else:
                return result
        elif code == "T":
            result = self.template_param()
        elif code == "A":
            self.position += 1
            count = self.number()
            self.take("_")
            element = self.type()
            size = element.size * count if element.size else None
            result = ParamType("struct", size, f"{element.text}[{count}]")
        elif code == "u":
            self.position += 1
            result = _struct(self.source_name())
        elif code == "N" or code.isdigit():
            display, _, _ = self.name()
            result = _struct(display)
        else:
            raise _GiveUp
        self.substitutions.append(result)
        return result


def _struct(name: str) -> ParamType:
    bare = name.split("<", 1)[0].rsplit("::", 1)[-1]
    return ParamType("struct", STRUCT_SIZES.get(bare), name)


def demangle(symbol: str) -> Demangled | None:
    """The display name and parameter types of an Itanium-mangled function name; ``None`` if not understood.

    ``_Z16sgemm_smem_tilesILi32EEvPKfS1_Pfiii`` gives ``sgemm_smem_tiles<32>``
    and ``const float*, const float*, float*, int, int, int``. A plain
    ``extern "C"`` name is not mangled and gives ``None``.
    """
    if not symbol.startswith("_Z"):
        return None
    parser = _Parser(symbol)
    parser.position = 2
    try:
        display, base, templated = parser.name()
        parser.function_args = parser.template_args
        if templated:
            parser.type()          # a template function's mangled name encodes its return type first
        params = []
        while parser.position < len(parser.text) and parser.peek() != ".":
            params.append(parser.type())
    except (_GiveUp, IndexError, ValueError):
        return None
    if not params:         # a variable, not a function: a function's encoding lists at least "v"
        return None
    if params == [ParamType("void", None, "void")]:
        params = []
    return Demangled(display, base, tuple(params))


def qualified_name(symbol: str) -> str:
    """A mangled variable's name as its source writes it (``_ZN3lut5scaleE`` is ``lut::scale``); `symbol` itself
    for a name at global scope (not mangled) or one this does not read."""
    if not symbol.startswith("_Z"):
        return symbol
    parser = _Parser(symbol)
    parser.position = 2
    try:
        display, _, _ = parser.name()
    except (_GiveUp, IndexError, ValueError):
        return symbol
    return display if parser.position == len(symbol) else symbol


def _normalise(name: str) -> str:
    return "".join(name.split())


def _template_prefix_matches(wanted: str, display: str) -> bool:
    """True when `display` (``ns::gemm<64, true, (ns::Order)1, float>``) is the template `wanted` names
    (``ns::gemm<64, true, ns::Order::Col>``): the same base, and each argument given equal, or an enumerator
    where the mangled name has a number; arguments left out are taken as defaulted."""
    if "<" not in wanted or "<" not in display:
        return False
    wanted_base, wanted_args = wanted.split("<", 1)
    display_base, display_args = display.split("<", 1)
    if _normalise(wanted_base) != _normalise(display_base):
        return False
    given = split_parameter_types(wanted_args.rsplit(">", 1)[0])
    held = split_parameter_types(display_args.rsplit(">", 1)[0])
    if len(given) > len(held):
        return False
    for mine, theirs in zip(given, held):
        if theirs.startswith("(") and re.fullmatch(r"[A-Za-z_][\w:]*", mine.strip()):
            continue     # an enumerator or constant by name against its value
        if _literal(mine) != _literal(theirs) and normalise_parameter_type(mine) != normalise_parameter_type(theirs):
            return False
    return True


def _literal(text: str) -> str:
    """``64u``, ``64ul``, ``(unsigned long)64`` and ``64`` alike, and a character ``'N'`` as its code, ``78``, which
    is how a demangled name shows a ``char`` argument (``(char)78``)."""
    text = text.strip()
    if re.fullmatch(r"'.'", text):
        return str(ord(text[1]))
    text = re.sub(r"^\([^()]*\)", "", "".join(text.split()))
    return re.sub(r"(?<=\d)[uUlL]+$", "", text)


# Type names that are aliases of builtin types in CUDA's headers and on 64-bit Linux: a spec may use either.
_ALIASES = {"size_t": "unsigned long", "ptrdiff_t": "long", "int64_t": "long", "uint64_t": "unsigned long",
            "int32_t": "int", "uint32_t": "unsigned int", "int16_t": "short", "uint16_t": "unsigned short",
            "int8_t": "signed char", "uint8_t": "unsigned char", "uint": "unsigned int", "half": "__half",
            "nv_bfloat16": "__nv_bfloat16", "intptr_t": "long", "uintptr_t": "unsigned long"}
_TYPE_WORDS = {"const", "volatile", "unsigned", "signed", "long", "short", "int", "char", "float", "double", "bool",
               "void", "struct", "class", "enum"}


def normalise_parameter_type(text: str) -> str:
    """A parameter type spelt the way `demangle` spells it, for comparison: ``float const *__restrict__ A``
    and ``const float*`` are both ``constfloat*`` (top-level restrict and parameter names are not the type's;
    ``size_t``, ``int64_t``, ``half``... are their builtin types; ``long long`` is ``long``)."""
    text = re.sub(r"\b(__restrict__|__restrict|restrict)\b", " ", text)
    words = re.findall(r"[A-Za-z_][\w]*(?:::[A-Za-z_]\w*)*|::|[^\sA-Za-z_]", text)
    if len(words) > 1 and re.fullmatch(r"[A-Za-z_]\w*", words[-1]) and words[-1] not in _TYPE_WORDS \
            and (words[-2] in ("*", "&", ">") or re.fullmatch(r"[A-Za-z_][\w:]*", words[-2])):
        words.pop()     # a parameter name: float* A, int M
    words = [word for alias in words for word in _ALIASES.get(alias, alias).split()]
    if len(words) >= 2 and words[1] == "const" and words[0] != "const":   # west const, as the demangler writes it
        words[0], words[1] = words[1], words[0]
    # int64_t is long under nvcc and long long under NVRTC (CCCL's): both 8 bytes, one spelling here.
    return "".join(words).replace("longlong", "long")


def find_symbol(function: str, symbols: Iterable[str], source: str = "<image>",
                device_functions: Iterable[str] = ()) -> str:
    """The symbol in `symbols` that a spec's ``function:`` names.

    `function` may be the mangled symbol itself, an ``extern "C"`` name, a
    template-id (``sgemm<32>``, spaces ignored) or a plain base name that only
    one symbol has. No match, or several, raise `ImageError` listing the
    candidates with their demangled names; a name that matches one of the
    image's `device_functions` instead (a ``__device__`` function, a PTX
    ``.func``) is said to be one.
    """
    symbols = list(symbols)
    try:
        return _kernel_symbol(function, symbols, source)
    except ImageError as not_found:
        helper = _device_function(function, [name for name in device_functions if name not in symbols], source)
        if helper is None or "no kernel matches" not in str(not_found):
            raise
    kernels = "; ".join(f"{s} ({d.name})" if (d := demangle(s)) else s for s in symbols) or "none"
    raise ImageError(f"{source}: function {function!r} is a device function ({helper}: __device__, a .func in PTX), "
                     f"not a kernel (__global__, an .entry), so it cannot be launched; name the kernel that calls it "
                     f"(kernels: {kernels})") from None


def _device_function(function: str, helpers: list[str], source: str) -> str | None:
    try:
        return _kernel_symbol(function, helpers, source) if helpers else None
    except ImageError:
        return None


def _kernel_symbol(function: str, symbols: list[str], source: str) -> str:
    if function in symbols:
        return function
    function, parameter_types = split_overload(function)
    wanted = _normalise(function)
    demangled = {symbol: demangle(symbol) for symbol in symbols}
    if parameter_types is not None:   # an overload picked by its parameter types
        wanted_types = [normalise_parameter_type(t) for t in parameter_types]
        demangled = {s: d for s, d in demangled.items()
                     if d and [normalise_parameter_type(p.text) for p in d.params] == wanted_types}
    by_display = [s for s, d in demangled.items() if d and _normalise(d.name) == wanted]
    matches = by_display or [s for s, d in demangled.items() if d and _normalise(d.base_name) == wanted]
    if not matches and "<" in wanted:
        # The template arguments as the spec gives them may stop short of defaulted ones and name enumerators
        # (Order::Col) that a mangled name holds as numbers ((Order)1): compare what can be compared.
        matches = [s for s, d in demangled.items() if d and _template_prefix_matches(function, d.name)]
    if len(matches) == 1:
        return matches[0]
    if parameter_types is not None:
        demangled = {symbol: demangle(symbol) for symbol in symbols}
        function = f"{function}({', '.join(parameter_types)})"

    def listing(candidates):
        return "; ".join(f"{s} ({demangled[s].name})" if demangled[s] else s for s in candidates)

    if not matches:
        base = wanted.split("<", 1)[0]
        if "<" in wanted and base in symbols:    # an extern "C" kernel given template arguments (params)
            raise ImageError(f"{source}: no kernel matches function {function!r}: the image's {base} is extern "
                             "\"C\", with no template arguments, so params (template arguments) cannot be given to "
                             "it; a value only the launch reads (a block size) goes under values: instead")
        raise ImageError(f"{source}: no kernel matches function {function!r} (kernels: {listing(symbols) or 'none'})")
    raise ImageError(f"{source}: function {function!r} is ambiguous: {listing(matches)}; give the template "
                     "arguments in full as listed (an enumerator as (Type)value), the parameter types "
                     "(gemm(const float*, const float*, float*, int)) or the mangled name")
