"""A re-ranker over the site head's first candidates, tried for "look here first": a second
boosted model reads, for each of the head's top K nodes of a wrong query, its site score, rank,
gap and ratio to the first, node kind and parent kind, the node model's confidences around it,
its size and depth, and which other candidates lie above or below it; cross-fitted by database
(5 folds) on a run's out-of-fold ``predictions/test.jsonl``. Prints the head's top-1 and the
re-ranked top-1 / top-3 on the same wrong queries (those with an error site).

    python benchmarks/site_rerank.py <run>/predictions/test.jsonl [--top 6]
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sklearn.ensemble import HistGradientBoostingClassifier

from model.data.folds import schema_disjoint_folds
from model.eval.localisation import error_sites
from model.nodes.features import tree_shape
from model.nodes.sites import _logit


def logit(p: float) -> float:
    return float(_logit(p))


def candidate_rows(row: dict, k: int, kinds: dict) -> tuple[list, list[int]]:
    """Features and site labels of the head's first ``k`` nodes of one prediction."""
    labels, arity = row["node_labels"], row["node_arity"]
    sites = error_sites(labels, arity)
    shape = tree_shape(arity)
    kids, size, depth = shape.children, shape.size, shape.depth
    parent = {c: i for c, i in enumerate(shape.parent) if i >= 0}
    score, p, n = np.array(row["site_scores"]), row["node_confidences"], len(labels)
    top = [int(i) for i in np.argsort(-score, kind="stable")[:k]]

    def above(i: int) -> set:
        out = set()
        while i in parent:
            i = parent[i]
            out.add(i)
        return out

    ancestors = {i: above(i) for i in top}
    features, y = [], []
    for rank, i in enumerate(top):
        up = parent.get(i)
        features.append([
            rank, score[i], score[i] - score[top[0]], score[i] / max(score[top[0]], 1e-9),
            logit(p[i]), logit(p[up]) if up is not None else 5.0,
            min((logit(p[c]) for c in kids[i]), default=5.0), len(kids[i]), size[i], depth[i], n,
            kinds[row["node_types"][i]], kinds[row["node_types"][up]] if up is not None else len(kinds),
            sum(1 for j in top if j != i and i in ancestors[j]),  # candidates below this one
            sum(1 for j in ancestors[i] if j in top),  # candidates above it
            max((score[c] for c in kids[i]), default=0.0), score[up] if up is not None else 0.0,
            score[top[1]] if len(top) > 1 else 0.0])
        y.append(sites[i])
    return features, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("predictions", type=Path)
    parser.add_argument("--top", type=int, default=6)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.predictions.open()]
    kinds = {k: i for i, k in enumerate(sorted({t for r in rows for t in r["node_types"]}))}
    x, y, query, db = [], [], [], []
    for q, row in enumerate(rows):
        if row["execution_match"] or not any(error_sites(row["node_labels"], row["node_arity"])):
            continue
        features, labels = candidate_rows(row, args.top, kinds)
        x += features
        y += labels
        query += [q] * len(labels)
        db += [row["db_id"]] * len(labels)
    x, y, query, db = np.array(x, float), np.array(y), np.array(query), np.array(db)
    fold = schema_disjoint_folds(db, 5, seed=0)
    predicted = np.zeros(len(y))
    for f in range(5):
        model = HistGradientBoostingClassifier(learning_rate=0.05, max_iter=200, max_leaf_nodes=15,
                                               min_samples_leaf=40, categorical_features=[11, 12],
                                               random_state=0)
        model.fit(x[fold != f], y[fold != f])
        predicted[fold == f] = model.predict_proba(x[fold == f])[:, 1]
    head = top1 = top3 = 0
    queries = np.unique(query)
    for q in queries:
        idx = np.flatnonzero(query == q)
        order = idx[np.argsort(-predicted[idx], kind="stable")]
        head += y[idx[0]]
        top1 += y[order[0]]
        top3 += y[order[:3]].max()
    n = len(queries)
    print(f"{n} wrong queries with a site: head top-1 {head / n:.3f}; re-ranked over its first "
          f"{args.top}: top-1 {top1 / n:.3f}, top-3 {top3 / n:.3f}")


if __name__ == "__main__":
    main()
