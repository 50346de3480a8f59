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

import re
from collections.abc import Sequence
from math import comb

import numpy as np

from model.eval.report import format_number, markdown_table
from model.metrics import pointer_reliability
from rat.align import diff_tokens
from rat.walks import error_sites, site_reading

_TOKEN = re.compile(r"'(?:[^']|'')*'|\"[^\"]*\"|`[^`]*`|\w+|[^\s\w]")


def diff_marks(pred_sql: str, gold_sql: str) -> list[tuple[int, int]]:
    """Character ranges of ``pred_sql`` that a token diff against ``gold_sql`` marks: tokens
    replaced or extra, and (as an empty range) where gold has tokens the prediction lacks.
    Compare canonical texts (``rat.canonicalize``) so that only real differences are marked.

    >>> pred = "select name from singer where age > 20"
    >>> [pred[a:b] for a, b in diff_marks(pred, "select name from singer where age < 20")]
    ['>']
    >>> diff_marks("select name from singer", "select name from singer where age > 20")
    [(23, 23)]
    """
    pred_tokens = [(m.start(), m.end(), m.group()) for m in _TOKEN.finditer(pred_sql)]
    gold_tokens = [m.group() for m in _TOKEN.finditer(gold_sql)]
    marks = []
    for tag, i1, i2, _, _ in diff_tokens([t for *_, t in pred_tokens], gold_tokens):
        if tag in ("replace", "delete"):
            marks.append((pred_tokens[i1][0], pred_tokens[i2 - 1][1]))
        elif tag == "insert":
            at = pred_tokens[i1][0] if i1 < len(pred_tokens) else len(pred_sql)
            marks.append((at, at))
    return marks


def span_overlaps(span: Sequence[int] | None, marks: Sequence[Sequence[int]]) -> bool:
    """A node's [start, end) text overlaps a marked range (an empty mark: lies within it).

    >>> span_overlaps((0, 10), [(9, 12)]), span_overlaps((0, 10), [(10, 12)]), span_overlaps((0, 10), [(10, 10)])
    (True, False, True)
    """
    if span is None:
        return False
    start, end = span
    return any((a < end and start < b) if a < b else start <= a <= end for a, b in marks)


def _hits(order: np.ndarray, sites: np.ndarray) -> tuple[int, int, float]:
    return int(sites[order[0]]), int(sites[order[:3]].any()), 1.0 / (1 + int(np.flatnonzero(sites[order])[0]))


def _random_hit(n: int, n_sites: int, k: int) -> float:
    """Chance that k nodes drawn at random from n hold one of n_sites sites."""
    k = min(k, n)
    return 1.0 - comb(n - n_sites, k) / comb(n, k)


READINGS = ("_least_confident", "_site_reading", "_site_scores")
READING_NAMES = {"_least_confident": "least confident node", "_site_reading": "site reading",
                 "_site_scores": "site scores"}
PER_READING = ("top1", "top3", "mrr", "span_overlap")


def localisation(rows: Sequence[dict], confidences_per_row: Sequence[Sequence[float]],
                 site_scores_per_row: Sequence[Sequence[float] | None] | None = None) -> dict:
    """Top-1 / top-3 / mrr localisation rates over the rows with at least one error site.

    ``rows`` need ``node_labels`` and ``node_arity``; ``confidences_per_row[i]`` are row i's
    node confidences (any score where higher = more likely correct); ``site_scores_per_row``
    (higher = more likely a site) adds the ``_site_scores`` reading. Each reading (the least
    confident node, the site reading, the site scores) has its keys ``top1_<reading>``,
    ``top3_<reading>``, ``mrr_<reading>``; the plain ``top1``, ``top3``, ``mrr`` are the
    method's pointer, the node "look here first" names: the site scores where the method has
    them, else the site reading (``pointer`` says which). Rows with ``node_spans`` and
    ``diff_marks`` add ``span_overlap`` (the pointed node's text overlaps the diff against gold,
    over those rows), rows with ``error_kind`` add ``top1_by_error_kind`` ({kind: {"n",
    "top1"}}), for the pointer and each reading. Ties go to the earlier node in post-order.
    Random = expected rate of a uniformly random node.

    >>> rows = [{"node_labels": [1, 1, 1, 0, 1, 0, 0], "node_arity": [0, 0, 0, 2, 0, 2, 2]},
    ...         {"node_labels": [1, 1, 1], "node_arity": [0, 0, 2]}]  # right: left out
    >>> out = localisation(rows, [[.9, .9, .9, .2, .9, .3, .1], [1, 1, 1]])
    >>> out["n_wrong_queries"], out["pointer"], out["top1"], out["top3"], out["mrr"]
    (1, 'site reading', 1.0, 1.0, 1.0)
    >>> out["top1_least_confident"], out["mrr_least_confident"]
    (0.0, 0.5)
    """
    if len(rows) != len(confidences_per_row):
        raise ValueError(f"{len(rows)} rows but {len(confidences_per_row)} confidence lists")
    with_site_scores = site_scores_per_row is not None and all(
        s is not None for r, s in zip(rows, site_scores_per_row) if not all(r["node_labels"]))
    readings = READINGS if with_site_scores else READINGS[:2]
    hits: dict[str, list] = {f"{k}{r}": [] for r in readings for k in PER_READING}
    kinds: dict[str, dict[str, list[int]]] = {r: {} for r in readings}
    random1, random3 = [], []
    pointed: list[tuple[float, int]] = []  # site scores: (the pointed node's score, it is a site)
    for i, (row, confidences) in enumerate(zip(rows, confidences_per_row)):
        labels, arity = row["node_labels"], row.get("node_arity")
        if all(labels) or not arity or len(arity) != len(labels) or len(confidences) != len(labels):
            continue
        sites = np.array(error_sites(labels, arity), dtype=bool)
        if not sites.any():
            continue
        conf = np.asarray(confidences, dtype=float)
        orders = {"_least_confident": np.argsort(conf, kind="stable"),
                  "_site_reading": np.argsort(-np.asarray(site_reading(conf, arity)), kind="stable")}
        if with_site_scores:
            orders["_site_scores"] = np.argsort(-np.asarray(site_scores_per_row[i], dtype=float),
                                                kind="stable")
        spans, marks = row.get("node_spans"), row.get("diff_marks")
        if with_site_scores:
            first = int(orders["_site_scores"][0])
            pointed.append((float(site_scores_per_row[i][first]), int(sites[first])))
        for suffix, order in orders.items():
            top1, top3, rr = _hits(order, sites)
            hits[f"top1{suffix}"].append(top1)
            hits[f"top3{suffix}"].append(top3)
            hits[f"mrr{suffix}"].append(rr)
            if spans is not None and marks:
                hits[f"span_overlap{suffix}"].append(int(span_overlaps(spans[order[0]], marks)))
            if row.get("error_kind"):
                kinds[suffix].setdefault(row["error_kind"], []).append(top1)
        random1.append(_random_hit(len(labels), int(sites.sum()), 1))
        random3.append(_random_hit(len(labels), int(sites.sum()), 3))
    pointer = readings[-1]
    out: dict = {"n_wrong_queries": len(random1), "pointer": READING_NAMES[pointer]}
    for key, values in hits.items():
        if values or not key.startswith("span_overlap"):
            out[key] = float(np.mean(values)) if values else float("nan")
    for key in PER_READING:
        if f"{key}{pointer}" in out:
            out[key] = out[f"{key}{pointer}"]
    if hits[f"span_overlap{pointer}"]:
        out["n_span_queries"] = len(hits[f"span_overlap{pointer}"])
    for suffix, per_kind in kinds.items():
        if per_kind:
            out[f"top1_by_error_kind{suffix}"] = {
                kind: {"n": len(v), "top1": float(np.mean(v))} for kind, v in sorted(per_kind.items())}
    if f"top1_by_error_kind{pointer}" in out:
        out["top1_by_error_kind"] = out[f"top1_by_error_kind{pointer}"]
    if pointed:
        out["pointer_reliability"] = pointer_reliability(*zip(*pointed))
    out["random_top1"] = float(np.mean(random1)) if random1 else float("nan")
    out["random_top3"] = float(np.mean(random3)) if random3 else float("nan")
    return out


def localisation_markdown(results: dict[str, dict], best_only: bool = False) -> str:
    """One line per method and reading (``best_only``: each method's pointer only, site scores
    before the site reading): top-1, top-3, mrr, span overlap, random top-1; then, when rows had
    error kinds, top-1 per kind for each method's pointer (kinds by wrong queries over all
    methods, most first; a tie in name order)."""
    lines = []
    for name, r in results.items():
        present = [suffix for suffix in READING_NAMES if f"top1{suffix}" in r]
        for suffix, reading in READING_NAMES.items():
            if suffix in present and (not best_only or suffix == present[-1]):
                lines.append([name, reading, r.get("n_wrong_queries", 0),
                              *(format_number(r.get(f"{k}{suffix}")) for k in PER_READING),
                              format_number(r.get("random_top1")), format_number(r.get("random_top3"))])
    out = markdown_table(["method", "reading", "wrong queries", "top-1", "top-3", "mrr",
                          "pointed span overlaps diff", "random top-1", "random top-3"], lines)
    by_kind = {}
    for name, r in results.items():
        suffix = next((s for s in reversed(READING_NAMES) if f"top1_by_error_kind{s}" in r), None)
        if suffix is not None:
            by_kind[f"{name} ({READING_NAMES[suffix]})"] = r[f"top1_by_error_kind{suffix}"]
    if by_kind:
        kinds = sorted({k for v in by_kind.values() for k in v}, key=lambda k: (-sum(
            v.get(k, {}).get("n", 0) for v in by_kind.values()), k))  # most queries first, ties by name
        out += "\n\nTop-1 per error kind (wrong queries of that kind):\n\n" + markdown_table(
            ["method", *kinds], [[name, *(f"{format_number(v[k]['top1'])} ({v[k]['n']})" if k in v else "" for k in kinds)]
                                 for name, v in by_kind.items()])
    reliability = {name: r["pointer_reliability"] for name, r in results.items() if r.get("pointer_reliability")}
    if reliability and not best_only:
        out += ("\n\nHow far to trust the pointer: wrong queries by the site score of the node pointed at, "
                "and the share of them where it is an error site:\n\n") + markdown_table(
            ["method", "site score", "wrong queries", "mean site score", "top-1"],
            [[name, f"{b['lo']:.1f}–{b['hi']:.1f}", b["n"], format_number(b["mean_score"]), format_number(b["top1"])]
             for name, bins in reliability.items() for b in bins])
    return out


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
