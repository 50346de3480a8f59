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

from model.eval.localisation import error_sites, post_order_children


def logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return float(np.log(p / (1 - p)))


def candidate_rows(row: dict, k: int, kinds: dict) -> tuple[list, list[int]]:
    """Features and site labels of the head's first ``k`` nodes of one prediction."""
    labels, arity = row["node_labels"], row["node_arity"]
    sites = error_sites(labels, arity)
    kids = post_order_children(arity)
    parent = {c: i for i, ks in enumerate(kids) for c in ks}
    score, p, n = np.array(row["site_scores"]), row["node_confidences"], len(labels)
    top = [int(i) for i in np.argsort(-score, kind="stable")[:k]]
    size = [1] * n
    for i in range(n):  # post-order: children first
        size[i] += sum(size[c] for c in kids[i])
    depth = [0] * n
    for i in range(n - 1, -1, -1):
        if i in parent:
            depth[i] = depth[parent[i]] + 1

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
    databases = sorted(set(db))
    np.random.RandomState(0).shuffle(databases)
    fold = np.array([{d: i % 5 for i, d in enumerate(databases)}[d] for d in db])
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
