"""The site head's reading of the node model: where in a wrong query does it go wrong?

An error site (``rat.walks.error_sites``) is a wrong node whose children are all
right. Whether a node is one depends on its neighbours as much as on itself: a doubtful node
under confident children is a likely site, the same node over a doubtful child is not. So the
site head reads, beside a node's own features, the node model's confidence of the node, its
parent, children, subtree and siblings, and its rank within the query (``site_context``).
Those confidences must be out of fold for the rows the head learns from, as they will be for
the rows it scores: ``model.nodes.boosted`` fits the node model inside each training fold again
(``inner_folds``) to get them.

The head learns only from wrong queries (``model.site_head.wrong_only``): the question it
answers is "if this query is wrong, where?", and right queries have no site to learn from.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rat.walks import post_order_children

SITE_CONTEXT = (
    "site_node_logit",  # the node model's logit of the node
    "site_parent_logit",  # ... of its parent (NaN for the root)
    "site_child_min_logit",  # lowest logit among its children (NaN for a leaf)
    "site_child_mean_logit",
    "site_subtree_min_logit",  # lowest logit strictly below the node
    "site_sibling_min_logit",  # lowest logit among its siblings
    "site_rank",  # rank of the node's logit in the query, 0 = least confident, 1 = most
    "site_above_query_min",  # node logit minus the query's lowest
    "site_log_reading",  # log of the site reading (1 - p) * prod p(child)
    "site_reading_rank",  # rank of the site reading in the query, 0 = highest
    "site_query_min_logit",  # the query's lowest logit
    "site_minus_child_min",  # node logit minus its lowest child's (NaN for a leaf)
)
# The consensus track (features ``agreement``): node agreement's own site reading, which alone
# points at a site first for 0.834 of wrong Spider dev queries (docs/node_features.md).
AGREEMENT_CONTEXT = ("site_agreement_reading", "site_agreement_reading_rank")


def context_names(features: Sequence[str]) -> tuple[str, ...]:
    """The context columns ``with_context`` appends to rows of these features."""
    return SITE_CONTEXT + (AGREEMENT_CONTEXT if "agreement" in features else ())


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def _ranks(values: np.ndarray) -> np.ndarray:
    """0 for the smallest value, 1 for the largest (ties in post-order)."""
    n = len(values)
    ranks = np.empty(n)
    ranks[np.argsort(values, kind="stable")] = np.arange(n)
    return ranks / max(n - 1, 1)


def site_context(probabilities: Sequence[float], arity: Sequence[int]) -> np.ndarray:
    """(nodes, len(SITE_CONTEXT)) context of every node of one post-order tree, read from the
    node model's probabilities that each node is right.

    >>> c = site_context([0.9, 0.8, 0.2], [0, 0, 2])  # Op(a, b): Op doubtful, a and b not
    >>> c.shape == (3, len(SITE_CONTEXT))
    True
    >>> [round(float(v), 2) for v in c[2, :3]]  # Op: its logit, no parent, its lowest child
    [-1.39, nan, 1.39]
    >>> [float(v) for v in c[:, SITE_CONTEXT.index("site_reading_rank")]]  # Op reads as the site
    [1.0, 0.5, 0.0]
    """
    # Plain Python floats per node (a query has tens of nodes: numpy's per-call cost on arrays
    # that small was most of the time), whole columns at once where numpy pays off.
    p = np.asarray(probabilities, dtype=float)
    z = _logit(p)
    n = len(z)
    zs, ps = z.tolist(), p.tolist()
    children = post_order_children(arity)
    out = np.full((n, len(SITE_CONTEXT)), np.nan)
    out[:, 0] = z
    parent, child_min, child_mean, below_min, sibling_min = ([math.nan] * n for _ in range(5))
    subtree_min = zs[:]  # lowest logit of the subtree, the node included
    reading = [0.0] * n
    for i, kids in enumerate(children):
        product = 1.0
        if kids:
            values = [zs[c] for c in kids]
            lowest = min(values)
            child_min[i] = lowest
            # the same float as np.mean: it sums fewer than 8 values in order, more pairwise
            child_mean[i] = sum(values) / len(values) if len(values) < 8 else float(np.mean(values))
            below_min[i] = min(subtree_min[c] for c in kids)
            subtree_min[i] = min(zs[i], below_min[i])
            for k, c in enumerate(kids):
                parent[c] = zs[i]
                if len(kids) > 1:
                    sibling_min[c] = min(values[:k] + values[k + 1:])
                product *= ps[c]
        reading[i] = (1.0 - ps[i]) * product
    out[:, 1], out[:, 2], out[:, 3], out[:, 4], out[:, 5] = parent, child_min, child_mean, below_min, sibling_min
    out[:, 11] = z - out[:, 2]
    reading = np.array(reading)
    out[:, 6] = _ranks(z)
    out[:, 7] = z - z.min()
    out[:, 8] = np.log(reading + 1e-9)
    out[:, 9] = _ranks(-reading)
    out[:, 10] = z.min()
    return out


def agreement_context(agreement: Sequence[float], arity: Sequence[int]) -> np.ndarray:
    """(nodes, 2): node agreement's site reading ``(1 - a) * prod a(child)`` and its rank in the
    query (0 = highest); NaN agreement (no other system) reads as 0.5.

    >>> agreement_context([1.0, 1.0, 0.0], [0, 0, 2])[:, 1].tolist()  # no one else wrote Op(a, b)
    [0.5, 1.0, 0.0]
    """
    a = np.nan_to_num(np.asarray(agreement, dtype=float), nan=0.5)
    reading = np.array([(1.0 - a[i]) * np.prod(a[kids]) for i, kids in enumerate(post_order_children(arity))])
    return np.column_stack([reading, _ranks(-reading)])


def with_context(x: np.ndarray, probabilities: np.ndarray, arities: Sequence[Sequence[int]],
                 features: Sequence[str] = ()) -> np.ndarray:
    """Node features ``x`` (nodes of several trees, stacked in order; columns ``features``) with
    each node's ``context_names(features)`` appended; ``probabilities`` are the node model's,
    stacked the same way."""
    sizes = [len(a) for a in arities]
    if sum(sizes) != len(x) or len(probabilities) != len(x):
        raise ValueError(f"{len(x)} feature rows, {len(probabilities)} probabilities, {sum(sizes)} nodes")
    bounds = np.cumsum(sizes)[:-1]
    parts = np.split(np.asarray(probabilities, dtype=float), bounds)
    blocks = [site_context(p, a) for p, a in zip(parts, arities)]
    if "agreement" in features:
        agreement = np.split(x[:, list(features).index("agreement")], bounds)
        blocks = [np.hstack([b, agreement_context(g, a)]) for b, g, a in zip(blocks, agreement, arities)]
    context = np.vstack(blocks) if sizes else np.zeros((0, len(context_names(features))))
    return np.hstack([x, context])
