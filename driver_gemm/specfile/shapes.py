"""The ``shapes:`` of a spec: single shapes, lists and ranges of each dimension, and their products.

Every list, range and product is counted before it is built, so that a range
of a trillion values or a product of three long lists is refused with its count
instead of exhausting memory.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from ..errors import SpecError
from .fields import Context, check_keys, check_number, read_number
from .kinds import kind_name
from .limits import MAX_CASES, MAX_DIMENSION
from .model import Shape, parse_shape_text

SHAPES_HINT = "e.g. [1024, 512, 1024], '1024x512x1024', {M: 1001, N: 513, K: 777} or " \
              "{MNK: {from: 512, to: 4096, times: 2}}"


def parse_shapes(context: Context, document: dict, kernel_count: int = 1) -> tuple[Shape, ...]:
    """The spec's shapes in order, duplicates dropped; at most `MAX_CASES` cases with `kernel_count` kernels."""
    context.kernel_count = max(kernel_count, 1)
    node = document["shapes"]
    if not isinstance(node, list) or not node:
        raise context.error(f"must be a non-empty list of shapes, got {kind_name(node)}", document, "shapes",
                            "shapes", hint=SHAPES_HINT)
    shapes: dict[Shape, None] = {}
    for index, item in enumerate(node):
        for shape in _shape_item(context, node, index, item):
            shapes[shape] = None
        _check_product(context, node, index, f"shapes[{index}]", len(shapes))
    return tuple(shapes)


def _shape_item(context: Context, node: list, index: int, item: Any) -> list[Shape]:
    dotted = f"shapes[{index}]"
    if isinstance(item, list):
        if len(item) != 3:
            raise context.error(f"a shape list has three entries [M, N, K], got {len(item)}", node, index, dotted)
        values = [dimension_values(context, node, index, f"{dotted}[{i}]", v) for i, v in enumerate(item)]
        return _product(context, node, index, dotted, values)
    if isinstance(item, dict):
        return _shape_set(context, item, dotted)
    if isinstance(item, str):
        try:
            return [parse_shape_text(item)]
        except SpecError as exc:
            raise context.error(exc.message, node, index, dotted, hint=SHAPES_HINT) from None
    raise context.error(f"a shape is [M, N, K], 'MxNxK' or a mapping, got {kind_name(item)}", node, index, dotted,
                        hint=SHAPES_HINT)


def _product(context: Context, node: Any, key: Any, dotted: str, values: list[list[int]]) -> list[Shape]:
    """Every (M, N, K) of the three lists, counted before it is built."""
    _check_product(context, node, key, dotted, math.prod(len(v) for v in values))
    return [Shape(*combo) for combo in itertools.product(*values)]


def _check_product(context: Context, node: Any, key: Any, dotted: str, count: int) -> None:
    """Refuse `count` shapes when, with every kernel, they make more than `MAX_CASES` cases."""
    cases = count * context.kernel_count
    if cases > MAX_CASES:
        per_kernel = f" ({count:,} shapes x {context.kernel_count:,} kernels)" if context.kernel_count > 1 else ""
        raise context.error(f"the shapes expand to {cases:,} cases{per_kernel}, more than the limit of "
                            f"{MAX_CASES:,} (MAX_CASES)", node, key, dotted, hint="use fewer values or a coarser range")


def _shape_set(context: Context, item: dict, dotted: str) -> list[Shape]:
    """A mapping of M, N, K (each a number, a list or a range), MNK (square shapes) or MN with K."""
    check_keys(context, item, ("M", "N", "K", "MNK", "MN"), dotted)
    if "MNK" in item:
        if set(item) - {"MNK"}:
            raise context.error("MNK ties all three dimensions; give no M, N or K beside it",
                                item, "MNK", f"{dotted}.MNK")
        sizes = dimension_values(context, item, "MNK", f"{dotted}.MNK", item["MNK"])
        return [Shape(v, v, v) for v in sizes]
    if "MN" in item:
        if set(item) - {"MN", "K"} or "K" not in item:
            raise context.error("MN ties M and N; give K beside it and no M or N", item, "MN", f"{dotted}.MN")
        mn = dimension_values(context, item, "MN", f"{dotted}.MN", item["MN"])
        ks = dimension_values(context, item, "K", f"{dotted}.K", item["K"])
        _check_product(context, item, "MN", dotted, len(mn) * len(ks))
        return [Shape(v, v, k) for v in mn for k in ks]
    missing = [d for d in ("M", "N", "K") if d not in item]
    if missing:
        raise context.error(f"missing {', '.join(missing)}", item, None, dotted, hint=SHAPES_HINT)
    values = [dimension_values(context, item, d, f"{dotted}.{d}", item[d]) for d in ("M", "N", "K")]
    return _product(context, item, None, dotted, values)


def dimension_values(context: Context, node: Any, key: Any, dotted: str, value: Any) -> list[int]:
    """A dimension: a whole number, a list of them, or {from, to, step|times}; at most `MAX_CASES` values."""
    if isinstance(value, list):
        if not value:
            raise context.error("an empty list gives no shapes", node, key, dotted)
        out: list[int] = []
        for i, entry in enumerate(value):
            if isinstance(entry, list):     # read flat, [512, [1024]] would hide a bracket put in the wrong place
                raise context.error(f"a dimension's list holds values or ranges, not another list ({kind_name(entry)})",
                                    value, i, f"{dotted}[{i}]", hint="write the values in one list: [512, 1024, 2048]")
            out.extend(dimension_values(context, value, i, f"{dotted}[{i}]", entry))
            if len(out) > MAX_CASES:
                raise context.error(f"the list expands to more than the limit of {MAX_CASES:,} values "
                                    "(MAX_CASES)", value, i, dotted)
        return out
    if isinstance(value, dict):
        return _range_values(context, node, key, dotted, value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise context.error(f"a dimension must be a whole number, a list or a range, got {kind_name(value)}",
                            node, key, dotted)
    return [int(check_number(context, value, node, key, dotted, whole=True, minimum=1, maximum=MAX_DIMENSION))]


def _range_values(context: Context, node: Any, key: Any, dotted: str, value: dict) -> list[int]:
    check_keys(context, value, ("from", "to", "step", "times"), dotted)
    if "from" not in value or "to" not in value or (("step" in value) == ("times" in value)):
        raise context.error("a range needs from, to and one of step or times", node, key, dotted,
                            hint="{from: 256, to: 16384, times: 2}")
    start = read_number(context, value, "from", None, f"{dotted}.from", whole=True, minimum=1,
                        maximum=MAX_DIMENSION)
    stop = read_number(context, value, "to", None, f"{dotted}.to", whole=True, minimum=start,
                       maximum=MAX_DIMENSION)
    if "step" in value:
        step = read_number(context, value, "step", None, f"{dotted}.step", whole=True, minimum=1)
        count = (stop - start) // step + 1
        _check_range_count(context, value, dotted, count)
        return list(range(start, stop + 1, step))
    times = read_number(context, value, "times", None, f"{dotted}.times")
    if times <= 1:
        raise context.error(f"must be more than 1, got {times:g}", value, "times", f"{dotted}.times",
                            hint="the factor each value is multiplied by to give the next: times: 2 doubles")
    # Values grow by `times` from `start` until they pass `stop`: about log(stop/start)/log(times) of them.
    count = math.floor(math.log(stop / start) / math.log(times)) + 2
    _check_range_count(context, value, dotted, count)
    out, current = [], float(start)
    while round(current) <= stop:
        out.append(int(round(current)))
        current *= times
    return list(dict.fromkeys(out))


def _check_range_count(context: Context, node: dict, dotted: str, count: int) -> None:
    if count > MAX_CASES:
        raise context.error(f"the range expands to {count:,} values, more than the limit of {MAX_CASES:,} "
                            "(MAX_CASES)", node, None, dotted, hint="use a larger step or times")
