"""Element-wise functions a fused GEMM applies to its product before it stores C (``elementwise:``).

A kernel entry's ``elementwise: [relu, {mul: 1.5}, {clamp: [-1, 1]}]`` says the kernel stores
f(alpha * A @ B + beta * C0 + bias) with f these functions applied in order to each element: the
reference applies them in float64 to the product it would otherwise compare C with (block scales,
per-tensor scales and the bias included), and C's type rounds after them, as the kernel rounds what
it stores. Each function is PyTorch's (``torch.nn.functional``) of the same name: ``gelu`` is the
erf form, ``gelu_tanh`` the tanh approximation (``approximate="tanh"``), ``silu`` (also ``swish``)
is x * sigmoid(x), ``mish`` is x * tanh(softplus(x)), ``hardtanh`` is clamp to [-1, 1].

The tolerance follows the product's error through the functions element by element (`FunctionsBound`):
each element's error moves by at most the largest change of the function within that error of the
element's value (about nothing where tanh or sigmoid saturate, never more than the function's
Lipschitz constant times the error), and each function adds its own evaluation error in float32
(expf, tanhf, erff are a few units in the last place). The relative tolerance this gives is capped at
`MAX_TOLERANCE`: above it a check can no longer tell a wrong C from the right one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..errors import SpecError

# What a function takes after its name: nothing (``relu``), a number (``{mul: 1.5}``), a number it may be given or
# take PyTorch's default of (``leaky_relu``, ``{leaky_relu: 0.2}``), or a pair (``{clamp: [-1, 1]}``).
NOTHING, NUMBER, OPTIONAL_NUMBER, PAIR = "nothing", "number", "optional number", "pair"

FP32_ULP = 2.0 ** -23          # the spacing of float32's numbers just above 1
FP32_MAX = float(np.finfo(np.float32).max)
FP32_SMALLEST_NORMAL = float(np.finfo(np.float32).tiny)
# The largest relative Frobenius tolerance a kernel with functions is checked with. A C of zeros is 1 off, half the
# right C 0.5 off, a C a third off 0.33: a tolerance at or above those passes such kernels, so a bound worked out
# above this one is replaced by it (the verdict's reference says so), keeping the check able to fail them.
MAX_TOLERANCE = 0.25


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
    # Where the function turns from falling to rising (its minimum): with its argument's ends, where the largest
    # change of the function over an interval can be. None for monotone functions.
    turning_points: Callable[[tuple[float, ...]], tuple[float, ...]] | None = None


def _one(_: tuple[float, ...]) -> float:
    return 1.0


def _constant(value: float) -> Callable[[tuple[float, ...]], float]:
    return lambda _: value


def _at(*points: float) -> Callable[[tuple[float, ...]], tuple[float, ...]]:
    return lambda _: points


# The turning points are the minima of gelu (x = -0.7518), gelu_tanh, silu (-1.2785), mish (-1.1924), hardswish
# (-1.5) and of leaky_relu with a negative slope (0), to float64's last places.
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
                              lambda arg: max(1.0, abs(arg[0])), 1, default=(0.01,),
                              turning_points=lambda arg: (0.0,) if arg[0] < 0 else ()),
    "gelu": _Definition(NOTHING, "x * Phi(x) = x / 2 * (1 + erf(x / sqrt(2)))", lambda x, _: _gelu(x),
                        _constant(1.13), 8, turning_points=_at(-0.7517915159669517)),
    "gelu_tanh": _Definition(NOTHING, "x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))",
                             lambda x, _: _gelu_tanh(x), _constant(1.13), 8,
                             turning_points=_at(-0.7524614252075965)),
    "silu": _Definition(NOTHING, "x * sigmoid(x)", lambda x, _: x * _sigmoid(x), _constant(1.1), 8,
                        turning_points=_at(-1.27846454154097)),
    "sigmoid": _Definition(NOTHING, "1 / (1 + exp(-x))", lambda x, _: _sigmoid(x), _constant(0.25), 8),
    "tanh": _Definition(NOTHING, "tanh(x)", lambda x, _: np.tanh(x), _one, 8),
    "softplus": _Definition(NOTHING, "log(1 + exp(x))", lambda x, _: _softplus(x), _one, 8),
    "mish": _Definition(NOTHING, "x * tanh(softplus(x))", lambda x, _: x * np.tanh(_softplus(x)), _constant(1.1),
                        16, turning_points=_at(-1.1924312172791365)),
    "hardswish": _Definition(NOTHING, "x * clamp(x + 3, 0, 6) / 6", lambda x, _: x * np.clip(x + 3.0, 0.0, 6.0) / 6,
                             _constant(1.5), 3, turning_points=_at(-1.5)),
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

    def largest_change(self, values: np.ndarray, spread: np.ndarray) -> np.ndarray:
        """For each element, the most the function's value can move when its input moves anywhere within
        `spread` of `values` (float64, same shapes): at the interval's ends, or at a turning point inside it, and
        never more than the Lipschitz constant times `spread`."""
        at_value = self.applied(values)
        with np.errstate(invalid="ignore"):
            change = np.maximum(np.abs(self.applied(values - spread) - at_value),
                                np.abs(self.applied(values + spread) - at_value))
            points = self.definition.turning_points(self.argument) if self.definition.turning_points else ()
            for point in points:
                inside = (values - spread <= point) & (point <= values + spread)
                at_point = float(self.applied(np.array([point]))[0])
                change = np.where(inside, np.maximum(change, np.abs(at_point - at_value)), change)
            return np.minimum(change, self.lipschitz * spread)

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
    # A kernel evaluates in float32: an argument beyond its range is infinite there, and a factor or divisor below
    # its smallest normal number is flushed to 0 (a C of zeros, or nothing finite).
    if any(abs(value) > FP32_MAX for value in values):
        raise SpecError(f"{name}'s argument {max(values, key=abs):g} is beyond float32's range (at most {FP32_MAX:g} "
                        "in size), where a kernel evaluates it", hint="write an argument within float32's range")
    if canonical in ("mul", "div") and 0 < abs(values[0]) < FP32_SMALLEST_NORMAL:
        raise SpecError(f"{name} by {values[0]:g}, below float32's smallest normal number ({FP32_SMALLEST_NORMAL:g}), "
                        "which a kernel evaluating in float32 flushes to 0",
                        hint=f"{name} by a number of size {FP32_SMALLEST_NORMAL:g} or more")
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
    each function's Lipschitz constant and evaluation error, the functions and the product's values over the
    elements C's check compares (in float32, flat): what the tolerance of C is worked out from."""

    lipschitz: tuple[float, ...]
    ulps: tuple[float, ...]
    norms: tuple[float, ...]
    functions: tuple[ElementwiseFunction, ...] = ()
    product: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32), repr=False, compare=False)
    worked: dict = field(default_factory=dict, repr=False, compare=False)   # tolerances already worked out

    def tolerance(self, product_tolerance: float, output_roundoff: float, safety: float) -> float:
        """The relative Frobenius error a correct kernel's C stays within, given `product_tolerance` (the relative
        error of its product, alpha * A @ B + beta * C0 + bias) and C's type's unit roundoff; not yet capped at
        `MAX_TOLERANCE` (the caller caps it, and says so).

        The product's error budget, product_tolerance x |product| in Frobenius norm, is given out per element:
        half of its square spread evenly (a dot product's rounding error is of about one size across C, set by
        the row's and column's norms rather than by the element's value) and half in proportion to the element's
        square (the roundings of the element's own value: alpha's product, the bias added, the last additions),
        so that the elements' budgets together are the product's. Each function then moves an element's error
        by at most its largest change within that error of the element's value (`largest_change`: nothing
        where it is flat, at most its Lipschitz constant times the error), and the kernel's own evaluation adds
        `safety` times ulps float32 units in the last place (and one rounding in C's type, where a kernel
        evaluates in a narrow C's type) of its output, and as many of its input moved by the function there.
        Summed over C in Frobenius norm, with C's own rounding after the last (`safety` x `output_roundoff` x
        |C|), relative to |C|, or the absolute bound
        where C is all zeros (as the verdict then measures the error). Not finite where the values are not."""
        key = (product_tolerance, output_roundoff, safety)
        if key not in self.worked:
            self.worked[key] = self._worked_out(product_tolerance, output_roundoff, safety)
        return self.worked[key]

    def _worked_out(self, product_tolerance: float, output_roundoff: float, safety: float) -> float:
        values = self.product.astype(np.float64)
        count = max(values.size, 1)
        budget = product_tolerance * self.norms[0]
        evenly = budget * budget / (2.0 * count)
        with np.errstate(over="ignore", invalid="ignore"):
            shares = values * values / (self.norms[0] * self.norms[0]) if self.norms[0] > 0 else 0.0
            # float32's rounding of the values kept adds its own unit to each element's spread
            spread = np.sqrt(evenly + 0.5 * budget * budget * shares) + FP32_ULP * np.abs(values)
            narrow = output_roundoff if output_roundoff > FP32_ULP / 2 else 0.0
            for function in self.functions:
                after = function.applied(values)
                evaluation = function.ulps * FP32_ULP + (narrow if function.ulps else 0.0)
                # the evaluation's error: units of its output's last place, and as many of its input's, moved by
                # the function where it is (a saturated tanh's input rounding moves nothing)
                own = evaluation * np.abs(after) + function.largest_change(values, evaluation * np.abs(values))
                spread = function.largest_change(values, spread) + safety * own
                values = after
        bound = _norm(spread)
        final = self.norms[-1]
        return (bound / final if final > 0 else bound) + safety * output_roundoff


def apply_functions(functions: tuple[ElementwiseFunction, ...], values: np.ndarray,
                    checked: np.ndarray | None = None) -> tuple[np.ndarray, FunctionsBound]:
    """`functions` applied in order to every element of `values`, in float64, and the `FunctionsBound` of the
    elements C's check compares: all, or those of `checked` (a boolean mask over the leading axes of `values`,
    such as the rows a grouped GEMM's groups hold)."""
    current = np.array(values, dtype=np.float64)

    def compared(array: np.ndarray) -> np.ndarray:
        return array if checked is None else array[checked]

    with np.errstate(over="ignore"):       # a value beyond float32 leaves its bound not finite
        product = compared(current).astype(np.float32).reshape(-1)
    norms = [_norm(compared(current))]
    for function in functions:
        current = function.applied(current)
        norms.append(_norm(compared(current)))
    return current, FunctionsBound(tuple(function.lipschitz for function in functions),
                                   tuple(function.ulps for function in functions), tuple(norms),
                                   tuple(functions), product)
