"""Whether a grid covers C when the spec declares no ``tile:``: read from the grid's own expressions where they say.

A grid written as ``ceil(N / X)``, ``N / X``, ``N // X``, ``floor(N / X)`` or ``(N + X - 1) // X`` on x (and
the same of M on y) gives each block X columns (rows) of C: that is the tile the grid was written for, so the
grid covers C when its extent times X reaches N (M). Any other grid says nothing about the tile; the plan then
notes that coverage is unchecked and how to declare ``tile:``.
"""

from __future__ import annotations

import ast

from ..specfile import expr


def inferred_tile(grid: expr.Expression, size: str) -> expr.Expression | None:
    """The per-block extent X that `grid` divides `size` (``M`` or ``N``) by, as an expression; None if it does not."""
    node = grid.tree
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("ceil", "floor") \
            and len(node.args) == 1:
        node = node.args[0]
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.FloorDiv))):
        return None
    divisor = node.right
    numerator = node.left
    if isinstance(numerator, ast.Name) and numerator.id == size:
        return expr.parse(ast.unparse(divisor))
    # (N + X - 1) // X: the rounded-up division written out
    if isinstance(node.op, ast.FloorDiv) and _names_of(numerator) >= {size} and \
            isinstance(numerator, ast.BinOp) and isinstance(numerator.op, (ast.Add, ast.Sub)):
        return expr.parse(ast.unparse(divisor))
    return None


def _names_of(node: ast.AST) -> set[str]:
    return {child.id for child in ast.walk(node) if isinstance(child, ast.Name)}


UNCHECKED_NOTE = ("coverage of C unchecked: the spec declares no tile: and the grid is not ceil(N / cols) x "
                  "ceil(M / rows); declare tile: [rows, cols] (the part of C one block computes) to have the grid "
                  "checked against M and N")
