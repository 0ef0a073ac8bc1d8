"""Reading one field of a loaded spec: where it is, and whether its value has the right kind.

`Context` knows the file and anchors every error at ``file:line`` with the
field's dotted path; the `read_*` helpers check one value each (booleans,
finite numbers, whole numbers in int64 range, non-empty text) so that the
builders above them never see NaN, infinity, a boolean posing as a number or
an integer too large to pass to C.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from . import expr
from .kinds import key_text, kind_name
from ..errors import SpecError
from .limits import INT64_MAX, INT64_MIN
from .yaml_lines import LineNode, OversizedInteger

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")   # a C identifier


@dataclass
class Context:
    """Where we are in the file, to name it in every error, and the rules for kernel sources."""

    path: Path | None
    base_dir: Path
    allow_outside_sources: bool = False
    kernel_count: int = 1            # shapes are counted as cases: each one runs every kernel

    @property
    def file(self) -> str:
        return str(self.path) if self.path else "<spec>"

    def where(self, node: Any, key: Any = None) -> str:
        """``file:line`` of `node`'s entry `key`, or of `node` itself without a key. A null key (``~: 1``) has a
        line of its own: such a key is always a mistake, and the error names it."""
        line = None
        if isinstance(node, LineNode):
            line = node.entry_lines.get(key, node.line) if key is not None or None in node.entry_lines else node.line
        return f"{self.file}:{line}" if line else self.file

    def error(self, message: str, node: Any, key: Any, field_path: str, hint: str | None = None) -> SpecError:
        return SpecError(message, where=self.where(node, key), field=field_path, hint=hint)


# What a comma does to an expression in a YAML flow collection: it ends the item, so "min(4, K // 64)" arrives cut.
COMMA_HINT = "a comma inside [...] or {...} ends the item there: put the whole expression in quotes"


def _opened(text: object) -> bool:
    """True for a string with more '(' than ')': the head of an expression that a comma cut."""
    return isinstance(text, str) and text.count("(") > text.count(")")


def check_keys(context: Context, node: dict, allowed: tuple[str, ...], field_path: str) -> None:
    """Refuse a key not in `allowed`, suggesting the closest allowed one (or, where the key is the tail of an
    expression a comma cut off in a ``{...}`` mapping, the quotes that keep it whole)."""
    for key in node:
        if key not in allowed:
            # A key with a character that does not print (a zero-width space) is shown escaped: printed as it is,
            # it would look like the field it fails to be. One YAML reads as no text is shown as written.
            name = field_name(node, key)
            dotted = f"{field_path}.{name}" if field_path else name
            head = next((other for other, value in node.items() if other in allowed and _opened(value)), None)
            if head is not None and str(key).count(")") > str(key).count("("):
                raise context.error(f"unknown field '{key}': it is the rest of {head}'s expression, "
                                    f"'{node[head]}, {key}', cut off at its comma", node, key, dotted,
                                    f'{COMMA_HINT}: {head}: "{node[head]}, {key}"')
            close = difflib.get_close_matches(name, allowed, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"allowed: {', '.join(allowed)}"
            read_as = f" (YAML reads {name} as {kind_name(key)}, not as a name)" if (
                key is None or isinstance(key, bool)) and name != kind_name(key) else ""
            raise context.error(f"unknown field '{name}'{read_as}", node, key, dotted, hint)


def field_name(node: Any, key: Any) -> str:
    """Mapping `node`'s `key` as a field path shows it: as the spec wrote it (`key_text`), escaped where it holds a
    character that does not print."""
    name = key_text(node, key)
    return name if name.isprintable() else ascii(name)[1:-1]


def read_mapping(context: Context, node: dict, key: str, field_path: str, what: str = "a mapping") -> dict:
    """The mapping at `node[key]` (an empty one when absent)."""
    value = node.get(key, {})
    if not isinstance(value, dict):
        raise context.error(f"must be {what}, got {kind_name(value)}", node, key, field_path)
    return value


def read_bool(context: Context, node: dict, key: str, default: bool, field_path: str) -> bool:
    value = node.get(key, default)
    if not isinstance(value, bool):
        raise context.error(f"must be true or false, got {kind_name(value)}", node, key, field_path)
    return value


def read_text(context: Context, node: dict, key: str, field_path: str, default: str | None = None) -> str:
    """A non-empty string, stripped."""
    value = node.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise context.error(f"must be a non-empty string, got {kind_name(value)}", node, key, field_path)
    return value.strip()


def check_number(context: Context, value: Any, node: Any, key: Any, field_path: str, *, whole: bool = False,
                 minimum: float | None = None, maximum: float | None = None) -> int | float:
    """`value` as a finite number (a whole one in int64 range with `whole`), within the bounds given."""
    if isinstance(value, OversizedInteger):
        raise context.error(f"a whole number of {len(value):,} digits does not fit a 64-bit integer", node, key,
                            field_path)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise context.error(f"must be {'a whole number' if whole else 'a number'}, got {kind_name(value)}",
                            node, key, field_path, hint=number_as_text_hint(value))
    if isinstance(value, float) and not math.isfinite(value):
        raise context.error(f"must be a finite number, got {value}", node, key, field_path)
    if whole and not isinstance(value, int):
        raise context.error(f"must be a whole number, got {value!r}", node, key, field_path)
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        raise context.error(f"a whole number of {len(str(abs(value)))} digits does not fit a 64-bit integer",
                            node, key, field_path)
    if minimum is not None and value < minimum:
        raise context.error(f"must be at least {minimum}, got {value}", node, key, field_path)
    if maximum is not None and value > maximum:
        raise context.error(f"must be at most {maximum:,}, got {value:,}", node, key, field_path)
    return value


# Text YAML 1.1 reads as a number where it is not quoted: a decimal whole number without a leading zero (YAML 1.1
# reads 010 as octal), or a float with a dot whose exponent, if any, has a sign.
_YAML_NUMBER = re.compile(r"[-+]?(0|[1-9]\d*|(\d+\.\d*|\.\d+)([eE][-+]\d+)?)")


def flow_text(value: Any) -> str:
    """A plain spec value (a YAML entry's) as YAML's flow style writes it: ``[16, 32]``, ``{a: fp32}``, ``true``."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{key}: {flow_text(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return f"[{', '.join(flow_text(item) for item in value)}]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def number_as_text_hint(value: Any) -> str | None:
    """For text that is a number to Python but not to YAML 1.1, which reads a float with an exponent only with a dot
    and a signed exponent (``1.0e-5``, ``1.0e+5``; ``1e-5`` and ``1.0e5`` are text): how to write it. For text
    that YAML would read as a number were it not quoted (``"1.0e-05"``, ``"16"``): that it is quoted."""
    if not isinstance(value, str):
        return None
    if _YAML_NUMBER.fullmatch(value.strip()):
        return f"{value.strip()} is quoted, so YAML reads it as text: remove the quotes"
    if not re.fullmatch(r"\s*[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+\s*", value):
        return None
    mantissa, exponent = value.strip().lower().split("e")
    mantissa = mantissa if "." in mantissa else mantissa + ".0"
    mantissa = mantissa + "0" if mantissa.endswith(".") else mantissa
    mantissa = "0" + mantissa if mantissa.lstrip("+-").startswith(".") else mantissa
    written = f"{mantissa}e{exponent if exponent[0] in '+-' else '+' + exponent}"
    return (f"YAML reads {value.strip()} as text (a float with an exponent needs a dot and a sign before the "
            f"exponent): write {written}")


def read_number(context: Context, node: dict, key: str, default, field_path: str, *, whole: bool = False,
                minimum: float | None = None, maximum: float | None = None):
    """The number at `node[key]` (`default` when absent; ``None`` stays ``None``), checked by `check_number`."""
    value = node.get(key, default)
    if value is None:
        if key in node:    # written as null: never a way to ask for the default
            raise context.error("must be a number, got nothing (null)", node, key, field_path)
        return None
    value = check_number(context, value, node, key, field_path, whole=whole, minimum=minimum, maximum=maximum)
    return int(value) if whole else float(value)


def unknown_names_error(context: Context, expression: expr.Expression, unknown: list[str], node: Any, key: Any,
                        field_path: str, hint: str, type_params: Mapping[str, str] | None = None) -> SpecError:
    """The error for an expression reading names it may not: a param whose value is a type or another C++ name
    (``TN: float``) is named as such, since it is no number to compute with; any other name is unknown."""
    type_params = type_params or {}
    typed = [name for name in unknown if name in type_params]
    if typed:
        name = typed[0]
        return context.error(f"{expression.source!r} reads {name}, a type (non-numeric) param ({name}: "
                             f"{type_params[name]} in params), which cannot be used in an expression", node, key,
                             field_path, hint="only params with whole numbers (or true/false) take part in "
                                              "expressions; give the number its own param")
    return context.error(f"{expression.source!r} uses unknown name {', '.join(unknown)}", node, key, field_path,
                         hint=hint)


def parse_expression(context: Context, node: Any, key: Any, value: Any, dotted: str, *,
                     condition: bool = False, whole: bool = False, integer: bool = False) -> expr.Expression:
    """`value` parsed as an expression; one without names is also evaluated now (to a whole number with
    `whole`: a launch extent or a byte count), so that its errors show at its line. With `whole` or `integer` (a
    value passed as a C integer) C's integer ceiling written with ``/`` is refused (`refuse_slash_ceilings`)."""
    try:
        expression = expr.parse(value, condition=condition)
        if whole or integer:
            refuse_slash_ceilings(context, node, key, dotted, expression)
        if not expression.names:
            expression.evaluate_int({}) if whole else expression.evaluate({})
    except expr.ExpressionError as exc:
        raise context.error(str(exc), node, key, dotted, COMMA_HINT if _opened(value) else None) from None
    return expression


def refuse_slash_ceilings(context: Context, node: Any, key: Any, dotted: str, expression: expr.Expression,
                          shown: str | None = None) -> None:
    """Refuse C's integer ceiling written with ``/`` (``(N + BN - 1) / BN``, `expr.slash_ceilings`) in a field that
    must be a whole number: ``/`` is real division in a spec, so the case would be refused on most shapes and run
    on those few where the quotient happens to be whole. The hint is the field rewritten both ways that mean the
    ceiling; `shown` is the spec's text where the expression's source stands in for parts of it (sizeof)."""
    found = expr.slash_ceilings(expression, shown)
    if not found:
        return
    text = shown.strip() if shown is not None else expression.source
    floored = ceiled = text
    for ceiling in reversed(found):     # from the right, so that each one's offsets still hold
        floored = floored[:ceiling.start] + ceiling.floor_division + floored[ceiling.end:]
        ceiled = ceiled[:ceiling.start] + ceiling.ceiling + ceiled[ceiling.end:]
    first = found[0]
    if first.in_ceil:
        why = (f"{first.written!r} takes ceil() of C's integer ceiling written with /, which is real division in a "
               f"spec: it gives one more than the ceiling wherever {first.remainder} != 1")
    else:
        why = (f"{first.written!r} is C's integer ceiling written with /, but / is real division in a spec "
               f"(// floors): it is a whole number only where {first.remainder} == 1")
    raise context.error(why, node, key, dotted, hint=f"write {floored!r} or {ceiled!r}")
