"""Error localisation: does a node scorer point at the node where a wrong query goes wrong?

An *error site* is a wrong node (label 0) whose children are all right (label 1): the lowest
place where the prediction departs from gold (its ancestors are wrong only because they contain
it). Over wrong queries with at least one site, ``localisation`` reports how often the node a
score points at is a site: the least confident node (raw reading), the node maximising the
site reading ``(1 - p(node)) * prod p(child)``, or the highest score of a head trained on site
labels; top-3 = a site among the three nodes pointed at first. Trees are post-order
(``node_arity`` = children per node), as in ``model.nodes.outputs``.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

import numpy as np

from model.eval.report import _fmt, markdown_table


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


def error_sites(labels: Sequence[int], arity: Sequence[int]) -> list[int]:
    """1 for a wrong node whose children are all correct, else 0 (post-order).

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
    p = np.asarray(confidences, dtype=float)
    return [float((1.0 - p[i]) * np.prod(p[kids])) for i, kids in enumerate(post_order_children(arity))]


def _hits(order: np.ndarray, sites: np.ndarray) -> tuple[int, int]:
    return int(sites[order[0]]), int(sites[order[:3]].any())


def _random_hit(n: int, n_sites: int, k: int) -> float:
    """Chance that k nodes drawn at random from n hold one of n_sites sites."""
    k = min(k, n)
    return 1.0 - comb(n - n_sites, k) / comb(n, k)


def localisation(rows: Sequence[dict], confidences_per_row: Sequence[Sequence[float]],
                 site_scores_per_row: Sequence[Sequence[float] | None] | None = None) -> dict:
    """Top-1 / top-3 localisation rates over the rows with at least one error site.

    ``rows`` need ``node_labels`` and ``node_arity``; ``confidences_per_row[i]`` are row i's
    node confidences (any score where higher = more likely correct); ``site_scores_per_row``
    (higher = more likely a site) adds ``top1_site_scores``/``top3_site_scores``. Ties go to the
    earlier node in post-order. Random = expected rate of a uniformly random node.

    >>> rows = [{"node_labels": [1, 1, 1, 0, 1, 0, 0], "node_arity": [0, 0, 0, 2, 0, 2, 2]},
    ...         {"node_labels": [1, 1, 1], "node_arity": [0, 0, 2]}]  # right: left out
    >>> out = localisation(rows, [[.9, .9, .9, .2, .9, .3, .1], [1, 1, 1]])
    >>> out["n_wrong_queries"], out["top1"], out["top3"], out["top1_site_reading"]
    (1, 0.0, 1.0, 1.0)
    """
    if len(rows) != len(confidences_per_row):
        raise ValueError(f"{len(rows)} rows but {len(confidences_per_row)} confidence lists")
    with_site_scores = site_scores_per_row is not None and all(
        s is not None for r, s in zip(rows, site_scores_per_row) if not all(r["node_labels"]))
    hits: dict[str, list[int]] = {k: [] for k in ("top1", "top3", "top1_site_reading",
                                                  "top3_site_reading", "top1_site_scores",
                                                  "top3_site_scores")}
    random1, random3 = [], []
    for i, (row, confidences) in enumerate(zip(rows, confidences_per_row)):
        labels, arity = row["node_labels"], row.get("node_arity")
        if all(labels) or not arity or len(arity) != len(labels) or len(confidences) != len(labels):
            continue
        sites = np.array(error_sites(labels, arity), dtype=bool)
        if not sites.any():
            continue
        conf = np.asarray(confidences, dtype=float)
        readings = {"": np.argsort(conf, kind="stable"),
                    "_site_reading": np.argsort(-np.asarray(site_reading(conf, arity)), kind="stable")}
        if with_site_scores:
            readings["_site_scores"] = np.argsort(-np.asarray(site_scores_per_row[i], dtype=float),
                                                  kind="stable")
        for suffix, order in readings.items():
            top1, top3 = _hits(order, sites)
            hits[f"top1{suffix}"].append(top1)
            hits[f"top3{suffix}"].append(top3)
        random1.append(_random_hit(len(labels), int(sites.sum()), 1))
        random3.append(_random_hit(len(labels), int(sites.sum()), 3))
    out: dict = {"n_wrong_queries": len(random1)}
    for key, values in hits.items():
        if values or not key.endswith("_site_scores"):
            out[key] = float(np.mean(values)) if values else float("nan")
    out["random_top1"] = float(np.mean(random1)) if random1 else float("nan")
    out["random_top3"] = float(np.mean(random3)) if random3 else float("nan")
    return out


def localisation_markdown(results: dict[str, dict]) -> str:
    """One line per method: wrong queries, top-1/top-3 of each reading, random."""
    keys = ("top1", "top3", "top1_site_reading", "top3_site_reading", "top1_site_scores",
            "top3_site_scores", "random_top1", "random_top3")
    header = ["method", "wrong queries", "top-1", "top-3", "top-1 site reading", "top-3 site reading",
              "top-1 site scores", "top-3 site scores", "random top-1", "random top-3"]
    return markdown_table(header, [[name, r.get("n_wrong_queries", 0), *(_fmt(r.get(k)) for k in keys)]
                                   for name, r in results.items()])


def localisation_of_scores(rows: Sequence[dict], scores: dict, site_scores: bool = False) -> dict:
    """``localisation`` of a method given as evaluate.py's flattened node arrays:
    ``scores["confidence"]`` with ``scores["row"]`` (the row of each node, nodes in post-order).
    Rows without scores are left out; ``site_scores`` reads the rows' own ``site_scores`` too.

    >>> rows = [{"node_labels": [1, 0], "node_arity": [0, 1], "site_scores": [0.1, 0.9]}]
    >>> s = {"confidence": np.array([0.9, 0.2]), "row": np.array([0, 0])}
    >>> out = localisation_of_scores(rows, s, site_scores=True)
    >>> out["top1"], out["top1_site_scores"]
    (1.0, 1.0)
    """
    if "row" not in scores:
        raise ValueError("scores need a 'row' array (the row of each node)")
    per_row: dict[int, list[float]] = {}
    for row, c in zip(scores["row"].tolist(), scores["confidence"].tolist()):
        per_row.setdefault(int(row), []).append(c)
    index = sorted(per_row)
    chosen = [rows[i] for i in index]
    sites = [rows[i].get("site_scores") for i in index] if site_scores else None
    return localisation(chosen, [per_row[i] for i in index], sites)
