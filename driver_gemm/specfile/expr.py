"""A small, safe evaluator for the arithmetic in specs: grids, blocks, shared memory, constraints.

Grammar: numbers, names, ``+ - * / // %`` (``/`` is real division, ``//`` floors), unary minus, parentheses,
``ceil``, ``floor``, ``min``, ``max``, ``wave_efficiency``; conditions (``require:``, a dispatch entry's ``if:``)
may also compare and combine with ``and``, ``or``, ``not``.
Python's parser builds the tree, only those node kinds are accepted, and they are evaluated here,
never by ``eval``. Length, depth, node count and values are bounded (`driver_gemm.specfile.limits`), so
evaluating never overflows, recurses without end or builds a huge number.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Union

from ..errors import DriverGemmError
from .kinds import kind_name
from .limits import INT64_MAX, INT64_MIN, MAX_EXPRESSION_CHARS, MAX_EXPRESSION_DEPTH, MAX_EXPRESSION_NODES

Number = Union[int, float]


class ExpressionError(DriverGemmError):
    """An expression that is malformed, uses something not allowed, or cannot be evaluated.

    The spec front end re-raises it as a `SpecError` with the file, line and field.
    """


_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def wave_efficiency(m: Number, n: Number, rows: Number, columns: Number, slots: Number) -> float:
    """The share of what the waves of a tiling compute that lies in C: M x N over the tiles of `rows` x
    `columns` that `slots` SMs (or clusters) run at once, times the waves they take. 4096 x 4096 in 128 x 256
    tiles on 132 SMs: 512 tiles, 4 waves, 0.97; 2048 x 3072: 192 tiles, 2 waves, 0.73; 320 x 4096 in 256 x 128
    tiles on 66 clusters: 64 tiles in one wave, three eighths of their rows past M, 0.61. A dispatch table's
    ``when: {if: ...}`` weighs one tiling's against another's."""
    if m < 1 or n < 1 or rows < 1 or columns < 1 or slots < 1:
        raise ValueError(f"wave_efficiency({m}, {n}, {rows}, {columns}, {slots}): every argument must be 1 or more")
    if any(float(value) != int(value) for value in (m, n, rows, columns, slots)):
        # sizes, a tile's sides and a count of SMs: a fraction is a slip (132.5 SMs), never a tiling
        raise ValueError(f"wave_efficiency({m}, {n}, {rows}, {columns}, {slots}): every argument is a whole number "
                         "(use // or ceil() for a count divided)")
    tiles = math.ceil(m / rows) * math.ceil(n / columns)
    return m * n / (math.ceil(tiles / slots) * slots * rows * columns)


_FUNCTIONS: dict[str, tuple[int, int | None, Callable[..., Any]]] = {
    "ceil": (1, 1, lambda x: int(math.ceil(x))),
    "floor": (1, 1, lambda x: int(math.floor(x))),
    "min": (2, None, min),
    "max": (2, None, max),
    "wave_efficiency": (5, 5, wave_efficiency),
}
FUNCTION_NAMES = frozenset(_FUNCTIONS)    # what an expression may call: no parameter may take these names


def _reject(node: ast.AST, what: str) -> ExpressionError:
    column = getattr(node, "col_offset", None)
    where = f" at column {column + 1}" if column is not None else ""
    return ExpressionError(f"{what}{where}")


_MEMO_KEPT = 4096     # values kept per expression, and expressions with values kept (`Expression.evaluate`)
_MEMOS: dict[int, tuple] = {}     # by id: (the expression, its values by input)
_UNSEEN = object()


@dataclass(frozen=True)
class Expression:
    """A parsed expression: its source text, the names it reads, and whether it is a condition."""

    source: str
    tree: ast.AST = field(repr=False, compare=False)
    names: frozenset[str]
    condition: bool = False

    def evaluate(self, env: Mapping[str, Number]) -> Number | bool:
        # A plan evaluates each expression once per shape, mostly with values it has seen (the params, N of a
        # range of M): the value is kept per distinct input, typed so that 2 and 2.0 stay apart, and only when
        # it evaluated; failures take the full path below, with its messages.
        found = _MEMOS.get(id(self))
        if found is None or found[0] is not self:
            if len(_MEMOS) >= _MEMO_KEPT:
                _MEMOS.clear()
            found = _MEMOS[id(self)] = (self, {})
        memo: dict = found[1]
        try:
            key: tuple | None = tuple([(env[name], type(env[name])) for name in self.names])
            seen = memo.get(key, _UNSEEN)
        except (KeyError, TypeError):    # a name missing (said below), or a value that is no number
            key, seen = None, _UNSEEN
        if seen is not _UNSEEN:
            return seen
        value = self._evaluate(env)
        if key is not None:
            if len(memo) >= _MEMO_KEPT:
                memo.clear()
            memo[key] = value
        return value

    def _evaluate(self, env: Mapping[str, Number]) -> Number | bool:
        missing = sorted(self.names - set(env))
        if missing:
            raise ExpressionError(f"unknown name{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                                  f"(known: {', '.join(sorted(env)) or 'none'})")
        for name in self.names:
            try:
                _check_value(env[name], f"{name} = {env[name]!r}")
            except _OutOfRange as exc:
                raise ExpressionError(f"{exc.args[0]} (in {self.source!r})") from None
        try:
            return _evaluate(self.tree, env)
        except ZeroDivisionError:
            raise ExpressionError(f"division by zero in {self.source!r}") from None
        except _OutOfRange as exc:
            raise ExpressionError(f"{self.source!r} {exc.args[0]}") from None
        except (OverflowError, ValueError) as exc:     # math.ceil(inf), float(huge int), ...
            raise ExpressionError(f"{self.source!r} cannot be evaluated: {exc}") from None

    def evaluate_int(self, env: Mapping[str, Number]) -> int:
        """Evaluate to a whole number (a grid or block extent, a byte count); a fraction is an error, and so is a
        param's true or false reaching the value whole (``TILE``, ``min(FLAG, 16)``): C++ would read it as 1 or 0
        without a word, and a YAML boolean where a number is meant is a slip (``FLAG + 0`` says 1 or 0 is meant)."""
        value = self.evaluate(env)
        if isinstance(value, bool):
            raise ExpressionError(self._boolean_message(env, value))
        if isinstance(value, float):
            if not value.is_integer():
                raise ExpressionError(f"{self.source!r} gives {value}, not a whole number "
                                      "(use ceil(), floor() or //)")
            value = int(value)
        return value

    def _boolean_message(self, env: Mapping[str, Number], value: bool) -> str:
        flags = sorted(name for name in self.names if isinstance(env.get(name), bool))
        read = ", ".join(f"{name} is {str(env[name]).lower()}" for name in flags) or "a name is true or false"
        gives = "" if self.source in flags else f"gives {str(value).lower()}: "
        first = flags[0] if flags else "FLAG"
        return (f"{gives}{read}, a YAML boolean (true/false), where a whole number is needed: write the number "
                f"in params ({int(value)} for {str(value).lower()}), or {first} + 0 to count a flag as 1 or 0")


def parse(source: str | int | float, *, condition: bool = False) -> Expression:
    """Parse `source` (a number is accepted as its own expression).

    With ``condition=True`` comparisons and ``and``/``or``/``not`` are allowed.
    Raises `ExpressionError` naming what is not allowed and where.
    """
    if isinstance(source, bool) or not isinstance(source, (str, int, float)):
        raise ExpressionError(f"expected a number or an expression string, got {kind_name(source)}")
    if not isinstance(source, str):
        try:
            _check_value(source, "the number")
        except _OutOfRange as exc:
            raise ExpressionError(exc.args[0]) from None
    text = source.strip() if isinstance(source, str) else repr(source)
    if not text:
        raise ExpressionError("empty expression")
    _check_text(text)
    _check_leading_zeros(text)
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError as exc:
        at = f" at column {exc.offset}" if exc.offset is not None else ""
        raise ExpressionError(f"cannot parse {text!r}: {exc.msg}{at}") from None
    except (ValueError, RecursionError, MemoryError) as exc:   # NUL characters; nesting the parser refuses
        raise ExpressionError(f"cannot parse {_shorten(text)!r}: {type(exc).__name__}") from None
    _check_tree(tree, text)
    _check_number_spellings(tree, text)
    tree = _CharacterCodes(text).visit(tree)
    names: set[str] = set()
    _validate(tree, names, condition)
    if condition and not _is_condition(tree):      # a number holds for every case or none: it checks nothing
        raise ExpressionError(f"{_shorten(text)!r} is a number, not a condition: compare it, as in 'N % 8 == 0'")
    return Expression(text, tree, frozenset(names), condition)


def uncompared_operands(tree: ast.AST) -> list[ast.AST]:
    """The parts of a condition that ``and``, ``or`` or ``not`` read as true or false without comparing them
    (``BM % 16`` in ``BM % 16 or BN % 16``, ``M`` in ``not M``); the whole tree where it is no condition at all.
    A number read so holds wherever it is not 0, the opposite of what ``% ... == 0`` says; only a param's true or
    false means something there."""
    if isinstance(tree, ast.Compare):
        return []
    if isinstance(tree, ast.BoolOp):
        return [part for value in tree.values for part in uncompared_operands(value)]
    if isinstance(tree, ast.UnaryOp) and isinstance(tree.op, ast.Not):
        return uncompared_operands(tree.operand)
    return [tree]


def _is_condition(tree: ast.AST) -> bool:
    """True for a comparison, an ``and``/``or`` of operands, or a ``not``: what a condition's text must be."""
    return isinstance(tree, (ast.Compare, ast.BoolOp)) or (isinstance(tree, ast.UnaryOp)
                                                            and isinstance(tree.op, ast.Not))


def _shorten(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _check_text(text: str) -> None:
    """Cheap bounds checked before Python's parser sees the text (it may recurse on deep nesting), and the characters
    an expression is written in: ASCII, which Python's parser would not insist on (it reads a full-width 'Ｎ' as N)."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"an expression of {len(text):,} characters is longer than the limit of "
                              f"{MAX_EXPRESSION_CHARS:,} (MAX_EXPRESSION_CHARS)")
    for column, char in enumerate(text, 1):
        if 0xD800 <= ord(char) <= 0xDFFF:    # Python's parser fails on it with a bare UnicodeEncodeError
            raise ExpressionError(f"{_shorten(text)!r} holds {ascii(char)}, half of a UTF-16 surrogate pair (not "
                                  f"Unicode text), at column {column}")
        if not char.isascii():
            raise ExpressionError(f"invalid character {char!r} (U+{ord(char):04X}) at column {column}: an "
                                  "expression is written in ASCII (names, the digits 0-9, + - * / // %, parentheses)")
        if char == "#":       # Python's parser would read the rest as a comment and drop it
            raise ExpressionError(f"invalid character '#' at column {column}: an expression has no comments")
        if not char.isprintable() and char not in " \t\r\n":   # a NUL: Python's parser names no column
            raise ExpressionError(f"invalid character {char!r} (U+{ord(char):04X}) at column {column}: an "
                                  "expression is printable ASCII")
    depth = deepest = 0
    for char in text:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth -= 1
    if deepest > MAX_EXPRESSION_DEPTH:
        raise ExpressionError(f"{_shorten(text)!r} nests parentheses {deepest} deep, more than the limit of "
                              f"{MAX_EXPRESSION_DEPTH} (MAX_EXPRESSION_DEPTH)")


def _check_tree(tree: ast.AST, text: str) -> None:
    """Count the tree's nodes and depth without recursing (``- - - 1`` nests without parentheses)."""
    count, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if depth > MAX_EXPRESSION_DEPTH:
            raise ExpressionError(f"{_shorten(text)!r} nests deeper than the limit of {MAX_EXPRESSION_DEPTH} "
                                  "(MAX_EXPRESSION_DEPTH)")
        if count > MAX_EXPRESSION_NODES:
            raise ExpressionError(f"{_shorten(text)!r} has more than {MAX_EXPRESSION_NODES} terms and operators "
                                  "(MAX_EXPRESSION_NODES)")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


# A whole number written with a leading zero and more digits (020), not part of a name, a float or an exponent.
# Not the digits of an exponent (``1e-05``, ``2.5E+07``), which C reads in decimal whatever their zeros.
_LEADING_ZERO = re.compile(r"(?<![\w.])(?<![0-9.][eE][+-])0[0-9]+(?![\w.])")


def _check_leading_zeros(text: str) -> None:
    """Refuse ``020``, which C reads as octal (16), before Python's parser refuses it with advice of its own."""
    found = _LEADING_ZERO.search(text)
    if found is None:
        return
    written, decimal = found.group(), int(found.group())
    if set(written) <= set("01234567"):
        octal = int(written, 8)
        advice = (f"C reads as octal, {octal}: write {octal}" + (f", or {decimal} if that is meant" if octal != decimal
                                                                 else ""))
    else:
        advice = f"C would read as octal, which has no digits 8 and 9: write {decimal}"
    raise ExpressionError(f"the number {written} at column {found.start() + 1} is written with a leading zero, which "
                          f"{advice}")


def _check_number_spellings(tree: ast.AST, text: str) -> None:
    """Refuse a number written as Python alone writes it, so that the spec's reader and the kernel's author read the
    same number: with underscores (``1_000``, Python's digit separator), or in octal with ``0o`` (C has no such
    prefix). ``0x`` and ``0b`` mean in C++ what they mean here, as in params:."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and not isinstance(node.value, str):
            written = ast.get_source_segment(text, node) or ""
            if "_" in written:
                raise _reject(node, f"the number {written} is written with an underscore: write the digits 0-9 "
                                    f"alone ({written.replace('_', '')})")
            if written[:2].lower() == "0o":
                raise _reject(node, f"the number {written} is written in Python's octal, which C does not have: "
                                    f"write {int(written, 0)}")


class _CharacterCodes(ast.NodeTransformer):
    """A C character literal (``'N'``, as a BLAS-style kernel takes its transposes) read as its code, as C reads it:
    one printable ASCII character between single quotes. Any other text is left to be refused as text."""

    def __init__(self, text: str):
        self.text = text

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        written = ast.get_source_segment(self.text, node) or ""
        if isinstance(node.value, str) and len(node.value) == 1 and node.value.isprintable() \
                and written == f"'{node.value}'" and node.value not in "'\\":
            return ast.copy_location(ast.Constant(ord(node.value)), node)
        return node


class _OutOfRange(Exception):
    """A value an expression may not hold: NaN, infinite, or a whole number beyond int64."""


def _check_value(value, what: str):
    if isinstance(value, float) and not math.isfinite(value):
        raise _OutOfRange(f"{what} is {value}, not a finite number")
    if isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= INT64_MAX:
        raise _OutOfRange(f"{what} does not fit a 64-bit integer")
    return value


def evaluate(source: str | int | float, env: Mapping[str, Number], *, condition: bool = False) -> Number | bool:
    """Parse and evaluate in one step."""
    return parse(source, condition=condition).evaluate(env)


def evaluate_int(source: str | int | float, env: Mapping[str, Number]) -> int:
    """Parse and evaluate to a whole number in one step."""
    return parse(source).evaluate_int(env)


def _validate(node: ast.AST, names: set[str], condition: bool) -> None:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            raise _reject(node, f"only numbers are allowed, not {_shorten(repr(node.value))} (a C character literal, "
                                "one printable character in single quotes as 'N', is read as its code)")
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise _reject(node, f"only numbers are allowed, not {_shorten(repr(node.value))}")
        try:
            _check_value(node.value, "a constant")
        except _OutOfRange as exc:
            raise _reject(node, exc.args[0]) from None
    elif isinstance(node, ast.Name):
        names.add(node.id)
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINARY:
            raise _reject(node, f"operator {type(node.op).__name__} is not allowed (use + - * / // %)")
        _validate(node.left, names, condition)
        _validate(node.right, names, condition)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        _validate(node.operand, names, condition)
    elif isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id == "sizeof":   # those fields read it before parsing
            raise _reject(node, "sizeof(TYPE) is read in a kernel's block, grid, shared_bytes, tile and require "
                                "alone, where the kernel's compiler sizes the type")
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            refused = _reject(node, f"only {', '.join(_FUNCTIONS)} may be called")
            raise ExpressionError(f"{refused}{_ceiling_division_hint(node)}")
        if node.keywords:
            raise _reject(node, f"{node.func.id}() takes no keyword arguments")
        low, high, _ = _FUNCTIONS[node.func.id]
        count = len(node.args)
        if count < low or (high is not None and count > high):
            raise _reject(node, f"{node.func.id}() takes {low if low == high else f'at least {low}'} "
                                f"argument{'s' if low > 1 else ''}, got {count}")
        for argument in node.args:
            _validate(argument, names, condition)
    elif condition and isinstance(node, ast.Compare):
        for op in node.ops:
            if type(op) not in _COMPARE:
                raise _reject(node, f"comparison {type(op).__name__} is not allowed")
        for operand in (node.left, *node.comparators):
            _validate(operand, names, condition)
    elif condition and isinstance(node, ast.BoolOp):
        for value in node.values:
            _validate(value, names, condition)
    elif condition and isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        _validate(node.operand, names, condition)
    else:
        kind = type(node).__name__
        allowed = "comparisons, and/or/not, " if condition else ""
        raise _reject(node, f"{kind} is not allowed (numbers, names, + - * / // %, {allowed}"
                            f"parentheses, {', '.join(_FUNCTIONS)})")


# The names libraries give the integer ceiling of a quotient: Triton's cdiv, CUTLASS's ceil_div, DIV_UP macros.
_CEILING_DIVISION_NAMES = frozenset({"cdiv", "ceildiv", "divup", "ceildivide", "divceil", "divroundup"})


def _ceiling_division_hint(node: ast.Call) -> str:
    """For a call of another library's ceiling division (``cdiv(M, BM)``, ``triton.cdiv(M, BM)``), what it is
    here: ``: cdiv(M, BM) is ceil(M / BM)``; nothing for any other call."""
    called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    if called.replace("_", "").lower() not in _CEILING_DIVISION_NAMES or len(node.args) != 2 or node.keywords:
        return ""
    numerator, denominator = (ast.unparse(argument) for argument in node.args)
    return (f": {ast.unparse(node)} is ceil({_as_numerator(node.args[0], numerator)} / "
            f"{_as_denominator(node.args[1], denominator)})")


def _as_numerator(node: ast.AST, text: str) -> str:
    """`text` (`node` as written) put left of a ``/``: parenthesised where a sum would bind less tightly."""
    return f"({text})" if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) else text


def _as_denominator(node: ast.AST, text: str) -> str:
    """`text` (`node` as written) put right of a ``/``: parenthesised unless it is one name, number or call."""
    return f"({text})" if isinstance(node, (ast.BinOp, ast.UnaryOp)) else text


@dataclass(frozen=True)
class SlashCeiling:
    """C's integer ceiling of a quotient, ``(X + D - 1) / D`` or ``(X - 1) / D + 1``, written with ``/``, which an
    expression reads as real division: a fraction wherever X % D is not 1. Offsets are into the text it was found
    in (`slash_ceilings`); the two spellings that mean the ceiling are given for the idiom alone."""

    start: int
    end: int
    written: str            # '(N + BN - 1) / BN'
    floor_division: str     # '(N + BN - 1) // BN'
    ceiling: str            # 'ceil(N / BN)'
    remainder: str          # 'N % BN', which must be 1 for the written quotient to be whole
    in_ceil: bool = False   # written inside ceil(): one more than the ceiling wherever the remainder is not 1


def slash_ceilings(expression: Expression, shown: str | None = None) -> list[SlashCeiling]:
    """Every C integer ceiling written with ``/`` in `expression`: ``(N + BN - 1) / BN``, ``(N + (BN - 1)) / BN``,
    ``(BN - 1 + N) / BN``, ``(N + 15) / 16``, ``(N - 1) / BN + 1``, also inside ``ceil()`` (which then gives one more
    than the ceiling); not inside ``floor()``, which makes it the ceiling. Its texts are taken from `shown` (the
    spec's text, column for column with the expression's source; the source itself by default)."""
    text = shown.strip() if shown is not None else expression.source
    line_starts = [0]
    for line in text.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))

    def offset(line: int, column: int) -> int:
        return line_starts[line - 1] + column

    def span(node: ast.AST) -> tuple[int, int]:
        return (offset(node.lineno, node.col_offset),   # type: ignore[attr-defined]  # every expression node has one
                offset(node.end_lineno, node.end_col_offset))   # type: ignore[attr-defined]

    def segment(node: ast.AST) -> str:
        start, end = span(node)
        return text[start:end]

    found: list[SlashCeiling] = []

    def visit(node: ast.AST, parent: ast.AST | None) -> None:
        match = _slash_ceiling_parts(node)
        if match is not None:
            division, numerator_terms, denominator = match
            in_ceil = (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "ceil"
                       and len(parent.args) == 1)
            in_floor = (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name)
                        and parent.func.id == "floor")
            if not in_floor:
                found.append(_slash_ceiling(node, division, numerator_terms, denominator, parent if in_ceil else None,
                                            span, segment, text))
                return
        for child in ast.iter_child_nodes(node):
            visit(child, node)

    visit(expression.tree, None)
    return found


def _slash_ceiling(node: ast.AST, division: ast.BinOp, numerator_terms: list[tuple[int, ast.AST]],
                   denominator: ast.AST, ceil_call: ast.AST | None, span: Callable, segment: Callable,
                   text: str) -> SlashCeiling:
    """The `SlashCeiling` of `node` (the idiom: `division`, or ``division + 1``), whose numerator less D - 1 is
    `numerator_terms` (sign, term) and whose divisor is `denominator`; `ceil_call` the ceil() around it, if any."""
    quotient = "".join((" - " if sign < 0 else " + ") + segment(term) if index else
                       ("-" if sign < 0 else "") + segment(term) for index, (sign, term) in enumerate(numerator_terms))
    lone = len(numerator_terms) == 1 and numerator_terms[0][0] > 0
    numerator = quotient if lone else f"({quotient})"
    divisor = _as_denominator(denominator, segment(denominator))
    _, left_end = span(division.left)
    right_start, _ = span(division.right)
    start, end = span(node)
    slash = text.index("/", left_end, right_start)
    floor_division = text[start:slash] + "//" + text[slash + 1:end]
    if ceil_call is not None:
        start, end = span(ceil_call)
    return SlashCeiling(start, end, text[start:end], floor_division, f"ceil({numerator} / {divisor})",
                        f"{numerator} % {divisor}", ceil_call is not None)


def _slash_ceiling_parts(node: ast.AST) -> tuple[ast.BinOp, list[tuple[int, ast.AST]], ast.AST] | None:
    """For C's ceiling idiom (`SlashCeiling`), its ``/``, the terms of its numerator other than D - 1 (each with its
    sign) and its divisor; None for any other node."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):     # (X - 1) / D + 1, 1 + (X - 1) / D
        for division, other in ((node.left, node.right), (node.right, node.left)):
            if (isinstance(division, ast.BinOp) and isinstance(division.op, ast.Div) and _whole_constant(other) == 1
                    and _slash_ceiling_parts(division) is None):     # else the ceiling is the division alone
                terms = _sum_terms(division.left)
                rest = [(sign, term) for sign, term in terms if _whole_constant(term) is None]
                if rest and len(rest) < len(terms) and _constant_sum(terms) == -1:
                    return division, rest, division.right
        return None
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)):
        return None
    terms = _sum_terms(node.left)
    divisor = _whole_constant(node.right)
    if divisor is not None:      # (N + 15) / 16
        rest = [(sign, term) for sign, term in terms if _whole_constant(term) is None]
        if divisor >= 2 and rest and len(rest) < len(terms) and _constant_sum(terms) == divisor - 1:
            return node, rest, node.right
        return None
    written = ast.dump(node.right)
    place = next((index for index, (sign, term) in enumerate(terms) if sign > 0 and ast.dump(term) == written), None)
    if place is None:
        return None
    others = terms[:place] + terms[place + 1:]
    rest = [(sign, term) for sign, term in others if _whole_constant(term) is None]
    if rest and len(rest) < len(others) and _constant_sum(others) == -1:     # (N + BN - 1) / BN
        return node, rest, node.right
    return None


def _sum_terms(node: ast.AST, sign: int = 1) -> list[tuple[int, ast.AST]]:
    """`node` as the terms of a sum, each with its sign: ``N + BN - 1`` is (+N, +BN, -1)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        return _sum_terms(node.left, sign) + _sum_terms(node.right, sign if isinstance(node.op, ast.Add) else -sign)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and _whole_constant(node.operand) is not None:
        return [(-sign, node.operand)]
    return [(sign, node)]


def _whole_constant(node: ast.AST) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    return None


def _constant_sum(terms: list[tuple[int, ast.AST]]) -> int:
    return sum(sign * (_whole_constant(term) or 0) for sign, term in terms)


def _evaluate(node: ast.AST, env: Mapping[str, Number]):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, env), _evaluate(node.right, env)
        return _check_value(_BINARY[type(node.op)](left, right), "gives a value that")
    if isinstance(node, ast.UnaryOp):
        operand = _evaluate(node.operand, env)
        if isinstance(node.op, ast.USub):
            return -operand
        if isinstance(node.op, ast.Not):
            return not operand
        return +operand
    if isinstance(node, ast.Call):
        function = _FUNCTIONS[node.func.id][2]  # type: ignore[attr-defined]  # the parse admits only a name's call
        return _check_value(function(*(_evaluate(a, env) for a in node.args)),
                            "gives a value that")
    if isinstance(node, ast.Compare):
        left = _evaluate(node.left, env)
        for op, comparator in zip(node.ops, node.comparators):
            right = _evaluate(comparator, env)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.BoolOp):
        values = (_evaluate(v, env) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    raise AssertionError(f"unvalidated node {type(node).__name__}")  # _validate guards this
