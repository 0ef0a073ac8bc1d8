"""Element-wise functions a fused GEMM applies to its product before it stores C (``elementwise:``).

A kernel entry's ``elementwise: [relu, {mul: 1.5}, {clamp: [-1, 1]}]`` says the kernel stores
f(alpha * A @ B + beta * C0 + bias) with f these functions applied in order to each element: the
reference applies them in float64 to the product it would otherwise compare C with (block scales,
per-tensor scales and the bias included), and C's type rounds after them, as the kernel rounds what
it stores. Each function is PyTorch's (``torch.nn.functional``) of the same name: ``gelu`` is the
erf form, ``gelu_tanh`` the tanh approximation (``approximate="tanh"``), ``silu`` (also ``swish``)
is x * sigmoid(x), ``mish`` is x * tanh(softplus(x)), ``hardtanh`` is clamp to [-1, 1].

The tolerance follows the product's error through the functions (`FunctionsBound`): each function
moves an error by at most its Lipschitz constant (the largest |f'|), and adds its own evaluation
error in float32 (expf, tanhf, erff are a few units in the last place).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import SpecError

# What a function takes after its name: nothing (``relu``), a number (``{mul: 1.5}``), a number it may be given or
# take PyTorch's default of (``leaky_relu``, ``{leaky_relu: 0.2}``), or a pair (``{clamp: [-1, 1]}``).
NOTHING, NUMBER, OPTIONAL_NUMBER, PAIR = "nothing", "number", "optional number", "pair"

FP32_ULP = 2.0 ** -23          # the spacing of float32's numbers just above 1


def _erfc(values: np.ndarray) -> np.ndarray:
    """erfc of every element, from `math.erfc` (NumPy has none): accurate to float64's last places everywhere,
    where 1 + erf(x) for a very negative x would keep nothing of the answer."""
    flat = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    return np.fromiter(map(math.erfc, flat.tolist()), np.float64, count=flat.size).reshape(np.shape(values))


def _sigmoid(values: np.ndarray) -> np.ndarray:
    # exp of -|x| never overflows; the two halves are the same function written for each sign.
    e = np.exp(-np.abs(values))
    return np.where(values >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _softplus(values: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, values)       # log(1 + e^x) without overflow


def _gelu(values: np.ndarray) -> np.ndarray:
    return 0.5 * values * _erfc(-values / math.sqrt(2.0))       # x * Phi(x), Phi(x) = erfc(-x / sqrt(2)) / 2


def _gelu_tanh(values: np.ndarray) -> np.ndarray:
    return 0.5 * values * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (values + 0.044715 * values ** 3)))


@dataclass(frozen=True)
class _Definition:
    """One known function: what it takes, what it is (PyTorch's definition), its float64 form, the largest |f'|
    (rounded up) for its argument, and how many float32 units in the last place a kernel's evaluation may be off."""

    takes: str
    meaning: str
    evaluate: Callable[[np.ndarray, tuple[float, ...]], np.ndarray]
    lipschitz: Callable[[tuple[float, ...]], float]
    ulps: float
    default: tuple[float, ...] = ()


def _one(_: tuple[float, ...]) -> float:
    return 1.0


def _constant(value: float) -> Callable[[tuple[float, ...]], float]:
    return lambda _: value


# The Lipschitz constants of the smooth functions are their largest |f'| rounded up: gelu's 1.1289 (at x = sqrt(2)),
# gelu_tanh's 1.1290, silu's 1.0998, mish's 1.0885, hardswish's 1.5 (at x = 3), sigmoid's 1/4 (at 0).
# ulps: a float32 evaluation's error, in units of float32's last place, of the larger of |x| and |f(x)|: 0 for the
# exact ones (a max, a clamp), 1 for one rounded operation (2 for a division, which fast math makes 2 ulps), and
# 8 for those built on expf, tanhf, erff or log1pf (each within 2 ulps in CUDA's math library) and the few
# operations around them; 16 for mish, two of those and a product. Approximate intrinsics beyond these (tanh.approx,
# __expf at large arguments) need verify.tolerance.
FUNCTIONS: dict[str, _Definition] = {
    "relu": _Definition(NOTHING, "max(x, 0)", lambda x, _: np.maximum(x, 0.0), _one, 0),
    "leaky_relu": _Definition(OPTIONAL_NUMBER, "x if x >= 0 else slope * x (slope 0.01 unless given)",
                              lambda x, arg: np.where(x >= 0, x, arg[0] * x),
                              lambda arg: max(1.0, abs(arg[0])), 1, default=(0.01,)),
    "gelu": _Definition(NOTHING, "x * Phi(x) = x / 2 * (1 + erf(x / sqrt(2)))", lambda x, _: _gelu(x),
                        _constant(1.13), 8),
    "gelu_tanh": _Definition(NOTHING, "x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))",
                             lambda x, _: _gelu_tanh(x), _constant(1.13), 8),
    "silu": _Definition(NOTHING, "x * sigmoid(x)", lambda x, _: x * _sigmoid(x), _constant(1.1), 8),
    "sigmoid": _Definition(NOTHING, "1 / (1 + exp(-x))", lambda x, _: _sigmoid(x), _constant(0.25), 8),
    "tanh": _Definition(NOTHING, "tanh(x)", lambda x, _: np.tanh(x), _one, 8),
    "softplus": _Definition(NOTHING, "log(1 + exp(x))", lambda x, _: _softplus(x), _one, 8),
    "mish": _Definition(NOTHING, "x * tanh(softplus(x))", lambda x, _: x * np.tanh(_softplus(x)), _constant(1.1),
                        16),
    "hardswish": _Definition(NOTHING, "x * clamp(x + 3, 0, 6) / 6", lambda x, _: x * np.clip(x + 3.0, 0.0, 6.0) / 6,
                             _constant(1.5), 3),
    "hardtanh": _Definition(NOTHING, "clamp(x, -1, 1)", lambda x, _: np.clip(x, -1.0, 1.0), _one, 0),
    "clamp": _Definition(PAIR, "min(max(x, low), high)", lambda x, arg: np.clip(x, arg[0], arg[1]), _one, 0),
    "add": _Definition(NUMBER, "x + c", lambda x, arg: x + arg[0], _one, 1),
    "mul": _Definition(NUMBER, "c * x", lambda x, arg: x * arg[0], lambda arg: abs(arg[0]), 1),
    "div": _Definition(NUMBER, "x / c", lambda x, arg: x / arg[0], lambda arg: 1.0 / abs(arg[0]), 2),
}
ALIASES = {"swish": "silu"}
# How the refusals show the functions: each with what it takes.
EXAMPLES = {NOTHING: "{name}", NUMBER: "{{{name}: 1.5}}", OPTIONAL_NUMBER: "{name} or {{{name}: 0.2}}",
            PAIR: "{{{name}: [-1, 1]}}"}
KNOWN_HINT = "known: " + ", ".join(EXAMPLES[definition.takes].format(name=name)
                                   for name, definition in FUNCTIONS.items()) + "; swish is silu"


@dataclass(frozen=True)
class ElementwiseFunction:
    """One function of an ``elementwise:`` list: a name of `FUNCTIONS` and its argument (empty for none)."""

    name: str
    argument: tuple[float, ...] = ()

    @property
    def definition(self) -> _Definition:
        return FUNCTIONS[self.name]

    def applied(self, values: np.ndarray) -> np.ndarray:
        """The function of every element of float64 `values`, in float64."""
        with np.errstate(over="ignore", under="ignore"):
            return np.asarray(self.definition.evaluate(values, self.argument), dtype=np.float64)

    @property
    def lipschitz(self) -> float:
        """The largest factor by which the function moves an error in its input (rounded up)."""
        return self.definition.lipschitz(self.argument)

    @property
    def ulps(self) -> float:
        return self.definition.ulps

    def formula(self, inner: str) -> str:
        """The function of `inner` as the plan writes it: ``relu(x)``, ``1.5 * (x)``, ``clamp(x, -1, 1)``."""
        arguments = ", ".join(f"{value:g}" for value in self.argument)
        if self.name == "mul":
            return f"{arguments} * {_grouped(inner)}"
        if self.name == "div":
            return f"{_grouped(inner)} / {arguments}"
        if self.name == "add":
            value = self.argument[0]
            return f"{inner} {'-' if value < 0 else '+'} {abs(value):g}"
        return f"{self.name}({inner}{', ' + arguments if arguments else ''})"

    def as_spec(self) -> str | dict:
        """The function as a spec writes it."""
        if not self.argument:
            return self.name
        return {self.name: list(self.argument) if self.definition.takes == PAIR else self.argument[0]}


def _grouped(text: str) -> str:
    """`text` in parentheses where an operator stands outside any: ``relu(x)`` as it is, ``x + 1`` as ``(x + 1)``."""
    depth = 0
    for character in text:
        depth += character == "("
        depth -= character == ")"
        if depth == 0 and character == " ":
            return f"({text})"
    return text


def elementwise_function(name: str, argument: float | tuple[float, ...] | None = None) -> ElementwiseFunction:
    """The function called `name` (or an alias) with `argument` (None where it takes none, or takes its default):
    a `SpecError` saying what is wrong (an unknown name, an argument missing, extra or out of its range), with the
    known functions as its hint."""
    canonical = ALIASES.get(name, name)
    if canonical not in FUNCTIONS:
        raise SpecError(f"unknown element-wise function {name!r}", hint=KNOWN_HINT)
    definition = FUNCTIONS[canonical]
    example = EXAMPLES[definition.takes].format(name=canonical)
    values: tuple[float, ...] = () if argument is None else \
        (tuple(argument) if isinstance(argument, tuple) else (argument,))
    if definition.takes == NOTHING and values:
        raise SpecError(f"{name} takes no argument: write it as {example}", hint=KNOWN_HINT)
    if not values:
        if definition.takes in (NUMBER, PAIR):
            raise SpecError(f"{name} takes {'a pair of numbers' if definition.takes == PAIR else 'a number'}: "
                            f"write it as {example}", hint=KNOWN_HINT)
        return ElementwiseFunction(canonical, definition.default)
    wanted = 2 if definition.takes == PAIR else 1
    if len(values) != wanted or not all(math.isfinite(value) for value in values):
        raise SpecError(f"{name} takes {'two finite numbers' if wanted == 2 else 'one finite number'}, got "
                        f"{', '.join(f'{value:g}' for value in values)}", hint=f"write it as {example}")
    if canonical == "div" and values[0] == 0:
        raise SpecError("div by 0 leaves nothing finite to check", hint="divide by a number other than 0")
    if canonical == "clamp" and values[0] > values[1]:
        raise SpecError(f"clamp's low bound {values[0]:g} is above its high bound {values[1]:g}",
                        hint="write it as {clamp: [low, high]} with low <= high")
    return ElementwiseFunction(canonical, tuple(float(value) for value in values))


def formula(functions: tuple[ElementwiseFunction, ...], inner: str) -> str:
    """`functions` applied in order to `inner`, written out: ``clamp(relu(1.5 * (x)), -1, 1)``."""
    for function in functions:
        inner = function.formula(inner)
    return inner


def check_note(functions: tuple[ElementwiseFunction, ...], alpha: float = 1.0, beta: float = 0.0,
               bias_along: str | None = None, block_scaled: bool = False) -> str | None:
    """What a kernel with ``elementwise:`` is checked against, for the plan's notes (None without functions):
    ``C checked against relu(1.5 * A @ B + bias[n])``; the vendor row computes the product alone."""
    if not functions:
        return None
    product = "A @ B" if not block_scaled else "(A x its block scales) @ (B x its block scales)"
    inner = product if alpha == 1.0 else f"{alpha:g} * {product}"
    if beta != 0.0:
        inner += f" {'-' if beta < 0 else '+'} {abs(beta):g} * C0" if abs(beta) != 1.0 else \
            f" {'-' if beta < 0 else '+'} C0"
    if bias_along is not None:
        inner += f" + bias[{bias_along.lower()}]"
    return (f"C checked against {formula(functions, inner)}: the element-wise functions applied in float64, C's "
            "type rounding after them; the vendor row is checked against the product alone")


def _norm(values: np.ndarray) -> float:
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    return math.sqrt(float(np.einsum("i,i->", flat, flat))) if flat.size else 0.0


@dataclass(frozen=True)
class FunctionsBound:
    """The Frobenius norms of the values between the functions (`norms[0]` the product's, `norms[-1]` C's), with
    each function's Lipschitz constant and evaluation error: what the tolerance of C is worked out from."""

    lipschitz: tuple[float, ...]
    ulps: tuple[float, ...]
    norms: tuple[float, ...]

    def tolerance(self, product_tolerance: float, output_roundoff: float, safety: float) -> float:
        """The relative Frobenius error a correct kernel's C stays within, given `product_tolerance` (the relative
        error of its product, alpha * A @ B + beta * C0 + bias) and C's type's unit roundoff.

        An error e in a function's input moves its output by at most L * |e| (L its Lipschitz constant), and the
        kernel's own evaluation adds at most ulps float32 units in the last place (or one rounding in C's type,
        where a kernel evaluates in a narrow C's type) of |input| + |output|. Summed over C in Frobenius norms,
        the error after each function is bounded by L times the bound before it plus `safety` times the
        evaluation's, from product_tolerance x |product| at the start; C's own rounding after the last adds
        `safety` x `output_roundoff` x |C|. The result is relative to |C|, or the absolute bound where C is all
        zeros (as the verdict then measures the error)."""
        budget = product_tolerance * self.norms[0]
        narrow = output_roundoff if output_roundoff > FP32_ULP / 2 else 0.0
        for step, (lipschitz, ulps) in enumerate(zip(self.lipschitz, self.ulps)):
            evaluation = ulps * FP32_ULP + (narrow if ulps else 0.0)
            budget = lipschitz * budget + safety * evaluation * (self.norms[step] + self.norms[step + 1])
        final = self.norms[-1]
        return (budget / final if final > 0 else budget) + safety * output_roundoff


def apply_functions(functions: tuple[ElementwiseFunction, ...], values: np.ndarray,
                    checked: np.ndarray | None = None) -> tuple[np.ndarray, FunctionsBound]:
    """`functions` applied in order to every element of `values`, in float64, and the `FunctionsBound` of the
    elements C's check compares: all, or those of `checked` (a boolean mask over the leading axes of `values`,
    such as the rows a grouped GEMM's groups hold)."""
    current = np.array(values, dtype=np.float64)

    def norm_of(array: np.ndarray) -> float:
        return _norm(array if checked is None else array[checked])

    norms = [norm_of(current)]
    for function in functions:
        current = function.applied(current)
        norms.append(norm_of(current))
    return current, FunctionsBound(tuple(function.lipschitz for function in functions),
                                   tuple(function.ulps for function in functions), tuple(norms))
