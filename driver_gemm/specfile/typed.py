"""The operand fields of a kernel entry: element types, storage orders, leading dimensions, batch, fp8 scales, groups,
the inputs' structure, a Gram product of one input and the element-wise functions applied to the product.

A kernel that gives none of ``types``, ``layout``, ``layouts``, ``ld``, ``batch``, ``scales``, ``groups``,
``structure``, ``gram`` and ``elementwise`` is
an FP32 kernel on tight row-major matrices; one that gives any is *typed*: drawn in its types,
uploaded in its layout, checked with its types' tolerance and timed against a cuBLASLt matmul of
the same kind. Types and layouts are checked here with the pure tables of `gemm.dtypes` and
`gemm.operands`, so a mistake is refused at its line; leading dimensions and batch strides are
shape expressions, checked per shape by `evaluate_operands`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Mapping

from . import expr
from ..errors import SpecError
from ..gemm.dtypes import holds_drawn_values, parse_types
from ..gemm.elementwise import (ALIASES as ELEMENTWISE_ALIASES, EXAMPLES, FUNCTIONS as ELEMENTWISE_FUNCTIONS,
                                KNOWN_HINT as ELEMENTWISE_HINT, NOTHING, OPTIONAL_NUMBER, PAIR, ElementwiseFunction,
                                elementwise_function)
from ..gemm.groups import LAYOUTS as GROUP_LAYOUTS, MAX_WEIGHTS, ROW_RULES, WEIGHT_RULES, GroupsError, make_groups
from ..gemm.operands import (GRAM_C0, GRAM_TRIANGLES, ORDER_WORDS, OTHER_ORDER, STRUCTURES, GemmOperands, Gram,
                             gemm_operands, parse_layout)
from .fields import (Context, check_keys, check_number, number_as_text_hint, refuse_slash_ceilings,
                     unknown_names_error)
from .kinds import kind_name
from .model import GroupsSpec, KernelSpec, OperandSpec, Shape
from .quantized import quantized_parts

OPERAND_KEYS = ("types", "layout", "layouts", "ld", "batch", "scales", "groups", "structure", "gram", "elementwise")
# The most functions one ``elementwise:`` list takes: a fused chain is a handful; a longer list is a mistake.
MAX_ELEMENTWISE = 32
STRUCTURE_HINT = "structure: {a: upper, b: lower}; each of a and b is " + ", ".join(STRUCTURES)
GRAM_KEYS = ("of", "triangle", "c0")
GRAM_HINT = ("gram: {of: A} (B is A transposed: C = A A^T) or gram: {of: B} (A is B transposed: C = B^T B), with "
             "triangle: lower or upper for a kernel that writes only that triangle of C, and c0: input for one that "
             "adds beta times its input (C = alpha X X^T + beta X)")
# Names the typed fields add to every expression (tight values for an untyped kernel; one group for an ungrouped one).
LAYOUT_NAMES = ("lda", "ldb", "ldc", "strideA", "strideB", "strideC", "batch", "groups")
GROUPS_KEYS = ("layout", "count", "rows", "align", "weights", "weight_index")
GROUPS_HINT = "groups: {layout: contiguous, count: 8, rows: random, align: 128}"
WEIGHTS_HINT = ("groups that share weights: groups: {count: 4, weights: 2, weight_index: cyclic}; weight_index is "
                f"{' or '.join(WEIGHT_RULES)} (g % weights; a draw that gives every weight a group) or a list of "
                "each group's weight, 0 to weights - 1")
OPERANDS = ("a", "b", "c")
SCALAR_NAMES = ("alpha", "beta")
# A template argument that is a C++ type: `float`, `dg::bfloat16_t`, `__nv_fp8_e4m3`, `unsigned char`.
CPP_TYPE = re.compile(r"(?:(?:unsigned|signed|long|short) )*(?:::)?(?:[A-Za-z_]\w*::)*[A-Za-z_]\w*", re.ASCII)


def parse_operands(context: Context, node: dict, dotted: str, names: set[str],
                   type_params: dict[str, str] | None = None) -> OperandSpec | None:
    """The operand fields of kernel entry `node` (None when it has none); `names` are those its expressions
    may use besides the shape (its numeric template parameters; `type_params`, those whose value is a type, are
    named as such when an expression reads one)."""
    if not any(key in node for key in OPERAND_KEYS):
        return None
    types = _types(context, node, dotted)
    orders = _orders(context, node, dotted)
    ld_names = _Names(names | {"M", "N", "K"}, type_params or {})
    ld = _expressions(context, node, "ld", dotted, ld_names, "{a: EXPR, b: EXPR, c: EXPR} in elements")
    batch, strides, levels = _batch(context, node, dotted, ld_names.with_names({"lda", "ldb", "ldc"}))
    scales = _scales(context, node, dotted, types)
    groups = _groups(context, node, dotted, ld_names)
    structure = _structure(context, node, dotted, groups)
    gram = parse_gram(context, node, dotted)
    if gram is not None:
        orders, scales = _checked_gram(context, node, dotted, gram, types, orders, scales)
    elementwise = _elementwise(context, node, dotted)
    _refuse_fractions_in_integers(context, node, dotted, types, elementwise)
    _refuse_arguments_beyond_c(context, node, dotted, types, elementwise)
    if node.get("precision", "fp32") != "fp32":
        # A field such as gram: or ld: makes a kernel typed without types:, so the message names the ones present.
        typing = [key for key in OPERAND_KEYS if key in node and key != "types"]
        made = "" if "types" in node else (
            f"; {', '.join(f'{key}:' for key in typing)} {'makes' if len(typing) == 1 else 'make'} this kernel typed "
            "(fp32 inputs unless types: says otherwise)")
        raise context.error(f"precision: tf32 is for untyped kernels{made}; a typed one says types: {{a: tf32}}",
                            node, "precision", f"{dotted}.precision",
                            hint="write types: {a: tf32} in place of precision: tf32")
    return OperandSpec(types, orders, ld, batch, strides, scales, groups, structure, elementwise, gram, levels)


def parse_gram(context: Context, node: dict, dotted: str) -> Gram | None:
    """``gram: {of: A|B, triangle: lower|upper, c0: drawn|input}`` (or ``gram: A``): the kernel computes the Gram
    product of one input matrix (`gemm.operands.Gram`), the other operand being it transposed in its buffer; None
    without the field. Read before the signature too, which need not take the tied operand."""
    if "gram" not in node:
        return None
    value, path = node["gram"], f"{dotted}.gram"
    triangle, c0 = None, "drawn"
    if isinstance(value, str):
        of, parent, key, of_path = value, node, "gram", path
    elif isinstance(value, dict):
        check_keys(context, value, GRAM_KEYS, path)
        if "of" not in value:
            raise context.error("gram needs of: the one input matrix, A or B", node, "gram", path, hint=GRAM_HINT)
        of, parent, key, of_path = value["of"], value, "of", f"{path}.of"
        triangle = value.get("triangle")
        # An empty triangle: (null) is refused, not read as all of C: a kernel writing all of C leaves the key out.
        if "triangle" in value and (not isinstance(triangle, str) or triangle not in GRAM_TRIANGLES):
            shown = repr(triangle) if isinstance(triangle, str) else kind_name(triangle)
            raise context.error(f"triangle is the triangle of C the kernel writes, {' or '.join(GRAM_TRIANGLES)} "
                                f"(diagonal included), got {shown}", value, "triangle", f"{path}.triangle",
                                hint="leave triangle out for a kernel that writes all of C")
        c0 = value.get("c0", c0)
        if not isinstance(c0, str) or c0 not in GRAM_C0:
            shown = repr(c0) if isinstance(c0, str) else kind_name(c0)
            raise context.error(f"c0 is what beta multiplies: input (the input matrix itself, C = alpha X X^T + "
                                f"beta X) or drawn (a C0 of its own, what C holds before the launch), got {shown}",
                                value, "c0", f"{path}.c0", hint="c0: input, or leave c0 out")
    else:
        raise context.error(f"gram is a mapping like {{of: A, triangle: lower}}, or A or B, got {kind_name(value)}",
                            node, "gram", path, hint=GRAM_HINT)
    if of not in ("A", "B", "a", "b"):
        shown = repr(of) if isinstance(of, str) else kind_name(of)
        raise context.error(f"gram's of is the one input matrix, A or B, got {shown}", parent, key, of_path,
                            hint=GRAM_HINT)
    return Gram(of.lower(), triangle, c0)


def _checked_gram(context: Context, node: dict, dotted: str, gram: Gram, types, orders: dict[str, str],
                  scales: tuple[float, float]) -> tuple[dict[str, str], tuple[float, float]]:
    """The orders and fp8 scales of a Gram product's operands, the tied operand's taken from the other's; what
    cannot go with one matrix read twice is refused at its own field, naming gram: groups, a structure or block
    scales of the tied operand, a quantized B, types of A and B that differ, a layout or scale of the tied operand
    other than the other's. Its leading dimension and batch stride are checked per shape
    (`gemm.operands.tied_layout`)."""
    source, tied = gram.of, gram.tied
    said = f"gram of {source.upper()}: {tied.upper()} is {source.upper()} transposed, in {source.upper()}'s buffer"
    if "groups" in node:
        raise context.error(f"{said}, but a grouped GEMM's B holds a matrix per group: groups do not go with gram",
                            node, "groups", f"{dotted}.groups", hint="leave groups out, or describe it without gram")
    structure = node.get("structure")
    if isinstance(structure, dict) and tied in structure:
        raise context.error(f"{said}, so its structure is {source.upper()}'s transposed, not one of its own", structure,
                            tied, f"{dotted}.structure.{tied}",
                            hint=f"give the structure of {source.upper()} alone (structure: {{{source}: ...}})")
    if types.a != types.b:
        types_node = node["types"]
        raise context.error(f"{said}, so B's type is A's ({types.a.name}), not {types.b.name}", types_node, "b",
                            f"{dotted}.types.b", hint="leave types.b out")
    signature = node.get("signature")
    for index, entry in enumerate(signature if isinstance(signature, list) else ()):
        if not isinstance(entry, dict):
            continue
        if "quantized" in entry:
            raise context.error(f"{said}: a quantized B is drawn from its codes, not as a matrix of its own, so it "
                                "does not go with gram", entry, "quantized", f"{dotted}.signature[{index}].quantized",
                                hint="leave gram out, or take B as a matrix")
        block_scales = entry.get("scales")
        if isinstance(block_scales, dict) and str(block_scales.get("of", "")).lower() == tied:
            raise context.error(f"{said}, so it has no block scales of its own: its values are "
                                f"{source.upper()}'s", block_scales, "of", f"{dotted}.signature[{index}].scales.of",
                                hint=f"give block scales of {source.upper()}, or leave gram out")
        if isinstance(block_scales, dict) and gram.adds_input:
            raise context.error(f"gram with c0: input adds beta {source.upper()}, but block scales multiply "
                                f"{source.upper()} in the product, which leaves unsaid whether beta multiplies it "
                                "scaled", entry, "scales", f"{dotted}.signature[{index}].scales",
                                hint="leave c0 out, or the block scales")
    order = OTHER_ORDER[orders[source]]
    code, layouts = node.get("layout"), node.get("layouts")
    if isinstance(layouts, dict) and tied in layouts and layouts[tied] != order:
        raise context.error(f"{said}, so {ORDER_WORDS[order]} where {source.upper()} is "
                            f"{ORDER_WORDS[orders[source]]}, not {ORDER_WORDS[layouts[tied]]}", layouts, tied,
                            f"{dotted}.layouts.{tied}", hint=f"leave layouts.{tied} out, or give it {order}")
    if isinstance(code, str) and parse_layout(code)[tied] != order:
        letters = "".join(("N" if (orders[key] if key == source else order) == "row" else "T") for key in "ab")
        raise context.error(f"{said}, so layout {code} cannot be: with {source.upper()} "
                            f"{ORDER_WORDS[orders[source]]}, {tied.upper()} is {ORDER_WORDS[order]}", node,
                            "layout", f"{dotted}.layout", hint=f"layout: {letters}, or leave layout out")
    given_scales = node.get("scales")
    index_of = {"a": 0, "b": 1}
    if isinstance(given_scales, dict) and tied in given_scales and \
            scales[index_of[tied]] != scales[index_of[source]]:
        raise context.error(f"{said}, so its fp8 scale is {source.upper()}'s ({scales[index_of[source]]:g}), not "
                            f"{scales[index_of[tied]]:g}", given_scales, tied, f"{dotted}.scales.{tied}",
                            hint=f"leave scales.{tied} out: it takes {source.upper()}'s")
    shared = scales[index_of[source]]
    if gram.adds_input:
        _check_gram_adds_input(context, node, dotted, gram, types)
    return {**orders, tied: order}, (shared, shared)


def _check_gram_adds_input(context: Context, node: dict, dotted: str, gram: Gram, types) -> None:
    """``c0: input``: beta multiplies the input X itself, which C starts from and the check adds, so C's type holds
    X's values exactly, and X is not scaled by fp8 scales (block scales are refused with the signature's other
    entries, in `_checked_gram`), which would leave what beta multiplies unsaid."""
    one = gram.of.upper()
    path = f"{dotted}.gram.c0"
    if types.is_fp8:
        raise context.error(f"gram with c0: input adds beta {one}, but fp8 inputs are scaled (scale_a, scale_b), "
                            f"which leaves unsaid whether beta multiplies {one} or {one} scaled", node["gram"], "c0",
                            path, hint="leave c0 out, or take a 16- or 32-bit input")
    if not holds_drawn_values(types.c, types.a):
        raise context.error(f"gram with c0: input starts C from {one} and adds beta {one}, so C's type holds "
                            f"{one}'s values exactly, but {types.a.name} values are not all {types.c.name} values",
                            node.get("types", node), "c" if isinstance(node.get("types"), dict) else "types",
                            f"{dotted}.types.c", hint=f"c: {types.a.name}, or c: fp32")


def parse_kernel_scalars(context: Context, node: dict, dotted: str, spec_scalars: dict[str, float]) -> dict:
    """The spec's ``scalars`` with the kernel's own ``scalars: {alpha: X, beta: Y}`` over them."""
    own = node.get("scalars", {})
    if not isinstance(own, dict):
        raise context.error(f"scalars is a mapping like {{alpha: 1.5, beta: -0.5}}, got {kind_name(own)}", node,
                            "scalars", f"{dotted}.scalars")
    check_keys(context, own, SCALAR_NAMES, f"{dotted}.scalars")
    merged = dict(spec_scalars)
    for key, value in own.items():
        merged[key] = float(check_number(context, value, own, key, f"{dotted}.scalars.{key}"))
    return merged


def is_cpp_type(value: Any) -> bool:
    """True for a template argument written as a C++ type name (``float``, ``dg::bfloat16_t``)."""
    return isinstance(value, str) and len(value) <= 100 and CPP_TYPE.fullmatch(value.strip()) is not None


def _types(context: Context, node: dict, dotted: str):
    if "types" in node and not isinstance(node["types"], dict):
        raise context.error(f"types is a mapping like {{a: bf16, b: bf16, c: bf16, accumulate: fp32}}, got "
                            f"{kind_name(node['types'])}", node, "types", f"{dotted}.types")
    types_node = node.get("types")
    where = context.where(node, "types")
    if types_node is None:
        return parse_types(None)
    check_keys(context, types_node, ("a", "b", "c", "accumulate"), f"{dotted}.types")
    for key, value in types_node.items():
        if not isinstance(value, str):
            raise context.error(f"an element type is a name such as bf16, got {kind_name(value)}", types_node,
                                key, f"{dotted}.types.{key}")
    return parse_types(types_node, where=where, field=f"{dotted}.types")


def _orders(context: Context, node: dict, dotted: str) -> dict[str, str]:
    code, orders = node.get("layout"), node.get("layouts")
    if code is not None and not isinstance(code, str):
        raise context.error(f"layout is NN, NT, TN or TT, got {kind_name(code)}", node, "layout", f"{dotted}.layout")
    if orders is not None and not isinstance(orders, dict):
        raise context.error(f"layouts is a mapping like {{a: row, b: col}}, got {kind_name(orders)}", node,
                            "layouts", f"{dotted}.layouts")
    try:
        return parse_layout(code, orders)
    except SpecError as exc:
        key = "layouts" if (exc.field or "").startswith("layouts") else "layout"
        raise SpecError(exc.message, context.where(node, key), f"{dotted}.{exc.field}", exc.hint) from None


@dataclass(frozen=True)
class _Names:
    """The names an operand expression may read, and the params it may not because they hold types."""

    allowed: set[str]
    type_params: dict[str, str]

    def with_names(self, more: set[str]) -> "_Names":
        return _Names(self.allowed | more, self.type_params)


def _expression(context: Context, parent: Any, key: Any, value: Any, field_path: str, names: _Names):
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise context.error(f"must be a whole number or an expression, got {kind_name(value)}", parent, key,
                            field_path)
    try:
        expression = expr.parse(value)
        refuse_slash_ceilings(context, parent, key, field_path, expression)
        if not expression.names:
            expression.evaluate_int({})
    except expr.ExpressionError as exc:
        raise context.error(str(exc), parent, key, field_path) from None
    unknown = sorted(expression.names - names.allowed)
    if unknown:
        raise unknown_names_error(context, expression, unknown, parent, key, field_path,
                                  f"names available: {', '.join(sorted(names.allowed))}", names.type_params)
    return expression


def _expressions(context: Context, node: dict, key: str, dotted: str, names: _Names, what: str,
                 field_path: str | None = None) -> dict[str, expr.Expression]:
    field_path = field_path or f"{dotted}.{key}"
    mapping = node.get(key, {})
    if not isinstance(mapping, dict):
        raise context.error(f"{key.split('.')[-1]} is {what}, got {kind_name(mapping)}", node, key, field_path)
    check_keys(context, mapping, OPERANDS, field_path)
    return {operand: _expression(context, mapping, operand, value, f"{field_path}.{operand}", names)
            for operand, value in mapping.items()}


def _batch(context: Context, node: dict, dotted: str, names: _Names):
    value = node.get("batch", 1)
    if not isinstance(value, dict):     # ``batch: 4``: a count with tight strides
        return _expression(context, node, "batch", value, f"{dotted}.batch", names), {}, None
    check_keys(context, value, ("count", "stride"), f"{dotted}.batch")
    if isinstance(value.get("count"), list):
        return _two_level_batch(context, value, dotted, names)
    count = _expression(context, value, "count", value.get("count", 1), f"{dotted}.batch.count", names)
    stride_node = value.get("stride")
    if isinstance(stride_node, dict):
        for key, given in stride_node.items():
            if isinstance(given, list):
                raise context.error(f"a stride of two numbers [outer, inner] is for a batch of two levels, and this "
                                    f"count is one ({kind_name(value.get('count', 1))})", stride_node, key,
                                    f"{dotted}.batch.stride.{key}",
                                    hint="give count: [OUTER, INNER] for two levels, or one stride for one level")
    strides = _expressions(context, value, "stride", dotted, names.with_names({"batch"}),
                           "{a: EXPR, b: EXPR, c: EXPR} in elements (0 for a or b: one matrix for every batch)",
                           field_path=f"{dotted}.batch.stride")
    return count, strides, None


TWO_LEVEL_HINT = ("batch: {count: [B, H], stride: {a: [S * H * K, K], b: [OUTER, INNER], c: [...]}}: matrix (i, j) "
                  "at i * stride[0] + j * stride[1]; 0 for a or b: one matrix for every (i, j)")


def _two_level_batch(context: Context, value: dict, dotted: str, names: _Names):
    """``batch: {count: [B, H], stride: {a: [OUTER, INNER], ...}}``: a batch of two levels (`OperandSpec.levels`),
    its total count the product of the two, each stride a pair or 0 (one matrix for every (i, j)), an operand left
    out one matrix after another. What is malformed is refused at its field: a count list of other than two, an
    item that is not an expression, a stride of one number other than 0, a list of other than two, a constant below
    its least (a count below 1, a stride below 0)."""
    path = f"{dotted}.batch"
    given = value["count"]
    if len(given) != 2:
        raise context.error(f"count is one expression, or a list of two [outer, inner] for a batch of two levels, "
                            f"got {kind_name(given)}", value, "count", f"{path}.count", hint=TWO_LEVEL_HINT)
    levels = tuple(_expression(context, given, index, item, f"{path}.count[{index}]", names)
                   for index, item in enumerate(given))
    for index, level in enumerate(levels):
        if not level.names and level.evaluate_int({}) < 1:
            raise context.error(f"the count of level {index} ({('outer', 'inner')[index]}) is a positive integer, "
                                f"got {level.source}", given, index, f"{path}.count[{index}]", hint=TWO_LEVEL_HINT)
    try:
        total = expr.parse(f"({levels[0].source}) * ({levels[1].source})")
    except expr.ExpressionError as exc:
        raise context.error(str(exc), value, "count", f"{path}.count") from None
    stride_node = value.get("stride", {})
    if not isinstance(stride_node, dict):
        raise context.error(f"stride is {{a: [OUTER, INNER], b: ..., c: ...}} in elements, got "
                            f"{kind_name(stride_node)}", value, "stride", f"{path}.stride", hint=TWO_LEVEL_HINT)
    check_keys(context, stride_node, OPERANDS, f"{path}.stride")
    stride_names = names.with_names({"batch"})
    strides: dict[str, Any] = {}
    for key, item in stride_node.items():
        item_path = f"{path}.stride.{key}"
        if not isinstance(item, list):
            single = _expression(context, stride_node, key, item, item_path, stride_names)
            if single.names or single.evaluate_int({}) != 0:
                raise context.error(f"the batch has two levels (count: [{levels[0].source}, {levels[1].source}]), "
                                    f"so the stride of {key.upper()} is a list [outer, inner], or 0 for one matrix "
                                    f"for every (i, j), got {single.source}", stride_node, key, item_path,
                                    hint=TWO_LEVEL_HINT)
            if key == "c":
                raise context.error("a stride of 0 for C puts every matrix of C on one: two writes would race",
                                    stride_node, key, item_path, hint=TWO_LEVEL_HINT)
            strides[key] = single
            continue
        if len(item) != 2:
            raise context.error(f"the stride of {key.upper()} in a batch of two levels is [outer, inner], got "
                                f"{kind_name(item)}", stride_node, key, item_path, hint=TWO_LEVEL_HINT)
        pair = tuple(_expression(context, item, index, part, f"{item_path}[{index}]", stride_names)
                     for index, part in enumerate(item))
        for index, part in enumerate(pair):
            if not part.names and part.evaluate_int({}) < 0:
                raise context.error(f"a batch stride is a whole number of elements, 0 or more, got {part.source}",
                                    item, index, f"{item_path}[{index}]", hint=TWO_LEVEL_HINT)
        strides[key] = pair
    return total, strides, levels


def _structure(context: Context, node: dict, dotted: str, groups: GroupsSpec | None) -> dict[str, str]:
    """``structure: {a: upper|lower|diagonal|symmetric, b: ...}``: what the drawn A and B are made before the
    reference is worked out from them (`gemm.operands.impose_structure`). A symmetric operand must be square, which
    each shape shows (`evaluate_operands`); a quantized B is drawn from its codes, so it takes no structure."""
    if "structure" not in node:
        return {}
    value, path = node["structure"], f"{dotted}.structure"
    if not isinstance(value, dict):
        raise context.error(f"structure is a mapping like {{a: upper, b: lower}}, got {kind_name(value)}", node,
                            "structure", path, hint=STRUCTURE_HINT)
    check_keys(context, value, ("a", "b"), path)
    for key, word in value.items():
        if not isinstance(word, str) or word not in STRUCTURES:
            shown = repr(word) if isinstance(word, str) else kind_name(word)
            raise context.error(f"the structure of {str(key).upper()} is one of {', '.join(STRUCTURES)}, got "
                                f"{shown}", value, key, f"{path}.{key}", hint=STRUCTURE_HINT)
    if groups is not None:
        raise context.error("a grouped kernel's A and C stack the groups' rows, so a structure of the whole matrix "
                            "is none of a group's: groups take no structure", node, "structure", path,
                            hint="leave structure out, or describe the product without groups")
    signature = node.get("signature")
    if "b" in value and isinstance(signature, list) and \
            any(isinstance(entry, dict) and "quantized" in entry for entry in signature):
        raise context.error(_QUANTIZED_STRUCTURE, value, "b", f"{path}.b", hint="leave structure.b out")
    return {key: value[key] for key in ("a", "b") if key in value}


def _elementwise(context: Context, node: dict, dotted: str) -> tuple[ElementwiseFunction, ...]:
    """``elementwise: [relu, {mul: 1.5}, {clamp: [-1, 1]}]``: the functions (`gemm.elementwise.FUNCTIONS`) the kernel
    applies, in order, to each element of its product before it stores C; each item a function's name, or a
    mapping of one name to its number (or pair of numbers). Refused at the item: an unknown name, an argument
    missing, extra, not a number or out of its range."""
    if "elementwise" not in node:
        return ()
    value, path = node["elementwise"], f"{dotted}.elementwise"
    if not isinstance(value, list) or not value:
        raise context.error(f"elementwise is a list of functions like [relu, {{mul: 1.5}}], got {kind_name(value)}",
                            node, "elementwise", path, hint=ELEMENTWISE_HINT)
    if len(value) > MAX_ELEMENTWISE:
        raise context.error(f"elementwise lists {len(value)} functions, more than {MAX_ELEMENTWISE}", node,
                            "elementwise", path)
    return tuple(_elementwise_item(context, value, index, f"{path}[{index}]") for index in range(len(value)))


# The functions that keep whole numbers whole (with whole arguments), which an integer C can hold exactly.
WHOLE_FUNCTIONS = ("relu", "hardtanh", "clamp", "add", "mul")


def _refuse_fractions_in_integers(context: Context, node: dict, dotted: str, types,
                                  functions: tuple[ElementwiseFunction, ...]) -> None:
    """An integer C (int32) holds the functions' values exactly only where they stay whole: relu, hardtanh, and
    clamp, add and mul by whole numbers. Any other function needs a rounding the kernel chooses, which nothing
    here describes."""
    if not types.c.is_integer:
        return
    for index, function in enumerate(functions):
        if function.name not in WHOLE_FUNCTIONS or any(value != round(value) for value in function.argument):
            raise context.error(f"C is {types.c.name}: {function.name}"
                                f"{'' if not function.argument else ' by a fraction'} makes values that are not "
                                "whole, which C cannot hold without a rounding nothing here describes", node,
                                "elementwise", f"{dotted}.elementwise[{index}]",
                                hint="an integer C takes relu, hardtanh, and clamp, add and mul by whole numbers")


def _elementwise_item(context: Context, items: list, index: int, path: str) -> ElementwiseFunction:
    item = items[index]
    node: dict | list
    if isinstance(item, dict) and len(item) == 1:
        ((name, argument),) = item.items()
        # a key that is not text has no name to show in the path: the item's place says where
        node, key, where = item, name, f"{path}.{name}" if isinstance(name, str) else path
    elif isinstance(item, str):
        name, argument, node, key, where = item, None, items, index, path
    else:
        raise context.error(f"an element-wise function is a name (relu) or a mapping of one name to its argument "
                            f"({{mul: 1.5}}), got {kind_name(item)}", items, index, path, hint=ELEMENTWISE_HINT)
    if not isinstance(name, str):
        raise context.error(f"an element-wise function is named by text, got {kind_name(name)}", node, key, where,
                            hint=ELEMENTWISE_HINT)
    definition = ELEMENTWISE_FUNCTIONS.get(ELEMENTWISE_ALIASES.get(name, name))
    if isinstance(item, dict) and argument is None and definition is not None:
        if definition.takes in (NOTHING, OPTIONAL_NUMBER):
            raise context.error(f"{name} with a colon and nothing after it is a mapping of {name} to nothing (null)",
                                node, key, where, hint=f"write {name} without a colon (- {name}, or [{name}])")
        raise context.error(f"{name}: nothing (null) is no argument", node, key, where,
                            hint=f"write it as {EXAMPLES[definition.takes].format(name=name)}")
    if isinstance(argument, list) and definition is not None and definition.takes != PAIR:
        raise context.error(f"{name} takes one number, not a list ({kind_name(argument)})", node, key, where,
                            hint=f"write it as {EXAMPLES[definition.takes].format(name=name).split(' or ')[-1]}")
    numbers = argument if isinstance(argument, list) else [argument] if argument is not None else []
    for place, number in enumerate(numbers):
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            wanted = "a pair of numbers [low, high]" if definition is not None and definition.takes == PAIR else \
                "a number (or, for clamp, a pair [low, high])"
            which = f"item {place} of its list" if isinstance(argument, list) else "it"
            raise context.error(f"{name}'s argument is {wanted}: {which} is {kind_name(number)}", node, key, where,
                                hint=number_as_text_hint(number) or ELEMENTWISE_HINT)
    if isinstance(item, dict) and argument is None:
        raise context.error(f"{name}: nothing (null) is no argument", node, key, where, hint=ELEMENTWISE_HINT)
    try:
        return elementwise_function(name, tuple(float(number) for number in numbers) if numbers else None)
    except SpecError as exc:
        raise context.error(exc.message, node, key, where, hint=exc.hint) from None


def _refuse_arguments_beyond_c(context: Context, node: dict, dotted: str, types,
                               functions: tuple[ElementwiseFunction, ...]) -> None:
    """An argument beyond what C's type holds: an add or clamp constant, or a mul factor (a div's reciprocal),
    larger in size than C's largest finite value moves every value of size 1 or more out of C's range, where no
    kernel's C can hold the reference."""
    largest = types.c.max_finite
    for index, function in enumerate(functions):
        if function.name in ("add", "mul", "clamp"):
            beyond = [value for value in function.argument if abs(value) > largest]
        elif function.name == "div":
            beyond = [value for value in function.argument if abs(value) < 1.0 / largest]
        else:
            continue
        if beyond:
            factor = ", a factor of 1 / that," if function.name == "div" else ""
            raise context.error(f"C is {types.c.name}, which holds values up to {largest:g} in size: "
                                f"{{{function.name}: {beyond[0]:g}}}{factor} takes C's values beyond that",
                                node, "elementwise", f"{dotted}.elementwise[{index}]",
                                hint=f"keep {function.name}'s argument within {types.c.name}'s range, or give C a "
                                     "wider type")


_QUANTIZED_STRUCTURE = ("a quantized B is drawn from its codes, (q - z) * s, not as a matrix the structure could be "
                        "imposed on: structure.b does not go with a quantized B")


def _groups(context: Context, node: dict, dotted: str, names: _Names) -> GroupsSpec | None:
    """``groups: {layout: contiguous|masked, count: EXPR, rows: even|random|[EXPR, ...], align: EXPR, weights: EXPR,
    weight_index: cyclic|random|[EXPR, ...]}``: a grouped GEMM (`gemm.groups`), its groups sharing `weights`
    matrices of B where that is given. It lays out the matrices itself, so it takes no batch."""
    if "groups" not in node:
        return None
    value, path = node["groups"], f"{dotted}.groups"
    if not isinstance(value, dict):
        raise context.error(f"groups is a mapping like {{layout: contiguous, count: 8, rows: random}}, got "
                            f"{kind_name(value)}", node, "groups", path, hint=GROUPS_HINT)
    check_keys(context, value, GROUPS_KEYS, path)
    if "batch" in node:
        raise context.error("groups lay out A, B and C themselves (a B per group; masked: an A and a C per group "
                            "too): a grouped kernel takes no batch", node, "batch", f"{dotted}.batch",
                            hint="leave batch out; the kernel's expressions read the group count as groups")
    layout = value.get("layout", "contiguous")
    if layout not in GROUP_LAYOUTS:
        raise context.error(f"layout is {' or '.join(GROUP_LAYOUTS)}, got {layout!r}", value, "layout",
                            f"{path}.layout", hint="contiguous: the groups' rows one after another in one A and C; "
                                                   "masked: an A and a C per group, its first rows the group's")
    rows = value.get("rows", "even")
    # The group count is the name groups in the other fields of groups: (a listed rows' own count where count is
    # not given, so those rows cannot read it).
    count = _expression(context, value, "count", value["count"], f"{path}.count", names) if "count" in value \
        else None
    with_count = names.with_names({"groups"})
    if isinstance(rows, list):
        if not rows:
            raise context.error("rows lists each group's row count; this list is empty", value, "rows",
                                f"{path}.rows")
        listed: str | tuple = tuple(_expression(context, rows, index, item, f"{path}.rows[{index}]",
                                                with_count if count is not None else names)
                                    for index, item in enumerate(rows))
    elif isinstance(rows, str) and rows in ROW_RULES:
        listed = rows
    else:
        raise context.error(f"rows is a list of row counts, or one of {', '.join(ROW_RULES)}; got {kind_name(rows)}"
                            + (f" {rows!r}" if isinstance(rows, str) else ""), value, "rows", f"{path}.rows",
                            hint="even: M shared out evenly; random: drawn from the shape, some groups empty")
    if "count" not in value and not isinstance(listed, tuple):
        raise context.error("groups needs a count, or rows listing each group's", value, "count", path,
                            hint=GROUPS_HINT)
    if "align" in value and layout != "contiguous":
        raise context.error("align is for contiguous groups: a masked group starts its own matrix", value, "align",
                            f"{path}.align")
    align = _expression(context, value, "align", value.get("align", 1), f"{path}.align", with_count)
    weights, weight_index = _shared_weights(context, value, path, with_count,
                                            count if count is not None else len(listed))
    return GroupsSpec(layout, count, listed, align, weights, weight_index)


def _shared_weights(context: Context, value: dict, path: str, names: _Names, count: expr.Expression | int):
    """``weights: EXPR`` and ``weight_index: cyclic|random|[EXPR, ...]``: the matrices of B the groups share and
    which each group takes (`gemm.groups.WEIGHT_RULES`; cyclic where only weights is given). What is known without
    a shape is checked here, at its line; the rest per shape by `gemm.groups.make_groups`."""
    if "weights" not in value:
        if "weight_index" in value:
            raise context.error("weight_index says which of the weights the groups share each group takes, but "
                                "weights (how many matrices B holds) is not given", value, "weight_index",
                                f"{path}.weight_index", hint=WEIGHTS_HINT)
        return None, None
    weights = _expression(context, value, "weights", value["weights"], f"{path}.weights", names)
    known_weights = _constant(weights)
    if known_weights is not None and not 1 <= known_weights <= MAX_WEIGHTS:
        raise context.error(f"the groups share 1 to {MAX_WEIGHTS:,} weights, got {known_weights:,}", value,
                            "weights", f"{path}.weights", hint=WEIGHTS_HINT)
    index = value.get("weight_index", "cyclic")
    index_path = f"{path}.weight_index"
    known_count = count if isinstance(count, int) else _constant(count)
    if isinstance(index, str) and index in WEIGHT_RULES:
        if known_weights is not None and known_count is not None and known_weights > known_count:
            raise context.error(f"{known_weights:,} weights over {known_count:,} groups: weight_index {index} gives "
                                "every weight a group, so there are at most as many weights as groups", value,
                                "weights", f"{path}.weights", hint="list weight_index to leave weights unused, or "
                                                                   "give fewer weights")
        return weights, index
    if not isinstance(index, list) or not index:
        raise context.error(f"weight_index is a list of each group's weight, or one of {', '.join(WEIGHT_RULES)}; "
                            f"got {kind_name(index)}", value, "weight_index", index_path, hint=WEIGHTS_HINT)
    if known_count is not None and len(index) != known_count:
        raise context.error(f"weight_index lists {len(index):,} weights for {known_count:,} groups: one per group",
                            value, "weight_index", index_path, hint=WEIGHTS_HINT)
    listed = tuple(_expression(context, index, position, item, f"{index_path}[{position}]", names)
                   for position, item in enumerate(index))
    for position, expression in enumerate(listed):
        known = _constant(expression)
        if known is not None and known_weights is not None and not 0 <= known < known_weights:
            raise context.error(f"group {position}'s weight is {known}: B holds {known_weights:,} weights, 0 to "
                                f"{known_weights - 1:,}", index, position, f"{index_path}[{position}]",
                                hint=WEIGHTS_HINT)
    return weights, listed


def _constant(expression: expr.Expression) -> int | None:
    """The value of an expression that reads no name (checked whole by `_expression`), else None."""
    return expression.evaluate_int({}) if not expression.names else None


def _scales(context: Context, node: dict, dotted: str, types) -> tuple[float, float]:
    if "scales" not in node:
        return 1.0, 1.0
    value = node["scales"]
    if not isinstance(value, dict):
        raise context.error(f"scales is a mapping like {{a: 0.5, b: 2.0}}, got {kind_name(value)}", node, "scales",
                            f"{dotted}.scales")
    if not types.is_fp8:
        raise context.error("per-tensor scales are for fp8 inputs (types: {a: e4m3})", node, "scales",
                            f"{dotted}.scales")
    check_keys(context, value, ("a", "b"), f"{dotted}.scales")
    scale = [1.0, 1.0]
    for index, key in enumerate("ab"):
        if key in value:
            number = check_number(context, value[key], value, key, f"{dotted}.scales.{key}")
            if not number > 0:
                raise context.error(f"a scale is a positive number, got {number}", value, key,
                                    f"{dotted}.scales.{key}")
            scale[index] = float(number)
    return scale[0], scale[1]


# ----------------------------------------------------------------------------------- per shape


def evaluate_operands(kernel: KernelSpec, shape: Shape) -> tuple[GemmOperands, dict[str, int]]:
    """The operands of `kernel` on `shape`, laid out and checked, and the values of `LAYOUT_NAMES`.

    An untyped kernel gets tight row-major operands and one matrix. Mistakes
    (an expression that cannot be evaluated, a leading dimension or batch
    stride too small for its matrix) raise a `SpecError` whose field is
    relative to the kernel (``ld.a``, ``batch.count``).
    """
    env: dict[str, Any] = {**shape.as_env(), **kernel.numeric_params}
    spec = kernel.operands
    if spec is None:
        operands = gemm_operands(shape.M, shape.N, shape.K)
        return operands, _names(operands)

    def evaluate(expression: expr.Expression, field_name: str, names: Mapping[str, Any]) -> int:
        try:
            return expression.evaluate_int(names)
        except expr.ExpressionError as exc:
            # most evaluation errors quote the expression already; the rest are told which one it is
            quoted = repr(expression.source) in str(exc)
            raise SpecError(str(exc) if quoted else f"{expression.source!r}: {exc}", field=field_name) from None

    ld = {key: evaluate(e, f"ld.{key}", env) for key, e in spec.ld.items()}
    tight = gemm_operands(shape.M, shape.N, shape.K, orders=spec.orders)
    lds = {f"ld{key}": ld.get(key, getattr(tight, key).ld) for key in OPERANDS}
    if spec.gram is not None:     # the tied operand's leading dimension is the other's
        lds[f"ld{spec.gram.tied}"] = lds[f"ld{spec.gram.of}"]
    levels = None
    if spec.levels is not None:
        outer, inner = (evaluate(e, f"batch.count[{index}]", {**env, **lds}) for index, e in enumerate(spec.levels))
        levels = (outer, inner)
        batch = outer * inner
    else:
        batch = evaluate(spec.batch, "batch.count", {**env, **lds})
    in_strides = {**env, **lds, "batch": batch}
    strides: dict[str, int | tuple[int, int]] = {
        key: evaluate(e, f"batch.stride.{key}", in_strides) if isinstance(e, expr.Expression) else
        (evaluate(e[0], f"batch.stride.{key}[0]", in_strides), evaluate(e[1], f"batch.stride.{key}[1]", in_strides))
        for key, e in spec.strides.items()}
    groups = None
    if spec.groups is not None:
        given = spec.groups
        count = evaluate(given.count, "groups.count", env) if given.count is not None else None
        # groups: the count, in the expressions of groups: itself (listed rows without a count do not read it)
        in_groups = {**env, "groups": count if count is not None else len(given.rows)}
        rows = given.rows if isinstance(given.rows, str) else \
            [evaluate(e, f"groups.rows[{index}]", in_groups) for index, e in enumerate(given.rows)]
        weights = evaluate(given.weights, "groups.weights", in_groups) if given.weights is not None else None
        weight_index = given.weight_index if given.weight_index is None or isinstance(given.weight_index, str) else \
            [evaluate(e, f"groups.weight_index[{index}]", in_groups) for index, e in enumerate(given.weight_index)]
        try:
            groups = make_groups(given.layout, shape.M, shape.N, shape.K, count=count, rows=rows,
                                 align=evaluate(given.align, "groups.align", in_groups), weights=weights,
                                 weight_index=weight_index)
        except GroupsError as exc:
            raise SpecError(f"on {shape.label}: {exc}", field="groups") from None
        if groups.shares_weights:
            _refuse_pointers_to_shared_weights(kernel)
    operands = gemm_operands(shape.M, shape.N, shape.K, orders=spec.orders, ld=ld, batch=batch, strides=strides,
                             groups=groups, gram=spec.gram, levels=levels)
    if spec.structure:
        operands = replace(operands, structure=_checked_structure(kernel, operands))
    return operands, _names(operands)


def _checked_structure(kernel: KernelSpec, operands: GemmOperands) -> tuple[tuple[str, str], ...]:
    """The kernel's ``structure`` as `GemmOperands.structure`, refused where this shape or the kernel's B cannot
    have it: a symmetric operand that is not square, a structured B the kernel takes quantized."""
    assert kernel.operands is not None
    structure = tuple(sorted(kernel.operands.structure.items()))
    for key, word in structure:
        layout = getattr(operands, key)
        if word == "symmetric" and layout.rows != layout.cols:
            dims = "M == K" if key == "a" else "K == N"
            raise SpecError(f"a symmetric {key.upper()} is square, but it is {layout.rows} x {layout.cols} on this "
                            f"shape (M={operands.M}, N={operands.N}, K={operands.K})", field=f"structure.{key}",
                            hint=f"give shapes with {dims}, or another structure")
    if "b" in dict(structure) and quantized_parts(kernel):
        raise SpecError(_QUANTIZED_STRUCTURE, field="structure.b", hint="leave structure.b out")
    return structure


def _refuse_pointers_to_shared_weights(kernel: KernelSpec) -> None:
    """An array of pointers to B holds an address per matrix of B (`planning.case_plan.pointer_array_offsets`),
    not one per group at the weight it takes: a kernel that reads it by group would multiply by the wrong weights."""
    for path, argument in kernel.leaf_arguments():
        if argument.pointers_to == "B":
            raise SpecError(f"{argument.name} is an array of pointers to B, whose matrices are the weights the "
                            "groups share: its addresses are B's matrices, not each group's weight", field=path,
                            hint="pass B and an index of each group's weight ({name: weight_index, type: buffer, "
                                 "element: int64, size: groups, groups: weight_index}) instead")


def _names(operands: GemmOperands) -> dict[str, int]:
    groups = operands.groups.count if operands.groups is not None else 1
    return {**operands.kernel_scalars(), "batch": operands.batch, "groups": groups}
