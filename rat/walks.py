"""Walks over a post-order tree given by its arities (``node_arity``: children per node, the
root last), the layout every node-level array of the project uses.

>>> arity = [0, 0, 2, 1]  # Root(Op(a, b))
>>> post_order_children(arity)
[[], [], [0, 1], [2]]
>>> error_sites([1, 1, 0, 0], arity)  # Op is wrong while its children are right
[0, 0, 1, 0]
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod


def post_order_children(arity: Sequence[int]) -> list[list[int]]:
    """Children (post-order indices) of every node of a post-order tree.

    >>> post_order_children([0, 0, 2, 1])  # Root(Op(a, b))
    [[], [], [0, 1], [2]]
    """
    stack: list[int] = []
    children: list[list[int]] = []
    for i, k in enumerate(arity):
        kids = stack[len(stack) - k:] if k else []
        del stack[len(stack) - k:]
        children.append(kids)
        stack.append(i)
    return children


def depths_and_children(arity: Sequence[int]) -> list[tuple[int, tuple[int, ...]]]:
    """(depth, children's post-order indices) of each node; the root is at depth 0.

    >>> depths_and_children([0, 0, 2, 1])  # Root(Op(a, b))
    [(2, ()), (2, ()), (1, (0, 1)), (0, (2,))]
    """
    children = [tuple(kids) for kids in post_order_children(arity)]
    depth = [0] * len(arity)
    for i in reversed(range(len(arity))):  # parents come after their children
        for c in children[i]:
            depth[c] = depth[i] + 1
    return list(zip(depth, children))


def error_sites(labels: Sequence[int], arity: Sequence[int]) -> list[int]:
    """1 for a wrong node whose children are all correct, else 0 (post-order): the lowest place
    where a query departs from gold (its ancestors are wrong only because they contain it).

    ``(t.a)((t.c)(10)Gt)(t)Selection)Project`` against gold ``c = 10``: Gt is the site;
    Selection and Project are wrong only because they hold it.

    >>> error_sites([1, 1, 1, 0, 1, 0, 0], [0, 0, 0, 2, 0, 2, 2])
    [0, 0, 0, 1, 0, 0, 0]
    >>> error_sites([0, 1, 0], [0, 0, 2])  # a wrong leaf is a site; its parent is not
    [1, 0, 0]
    """
    if len(labels) != len(arity):
        raise ValueError(f"{len(labels)} labels for {len(arity)} nodes")
    return [int(not labels[i] and all(labels[c] for c in kids))
            for i, kids in enumerate(post_order_children(arity))]


def site_reading(confidences: Sequence[float], arity: Sequence[int]) -> list[float]:
    """``(1 - p(node)) * prod p(child)``: how likely the node is wrong while its children are
    right, reading node confidences as independent.

    >>> [round(s, 3) for s in site_reading([0.9, 0.8, 0.2], [0, 0, 2])]
    [0.1, 0.2, 0.576]
    """
    p = [float(c) for c in confidences]
    return [(1.0 - p[i]) * prod(p[k] for k in kids) for i, kids in enumerate(post_order_children(arity))]
