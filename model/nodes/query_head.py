"""The whole-query head: P(the whole query is right) from everything the node model says about a
query, not only its least confident node.

It reads, per query, ``head_features``: the calibrated node confidences (least, second least,
mean and summed log-odds, the root's, counts below thresholds, the least per node kind group),
the site head's scores (highest, sum, the score of the least confident node) and the query-level
node features of the root's row (query shape, question cues, question-SQL linking over the whole
tree, execution). A small ``HistGradientBoostingClassifier`` over them, fitted on out-of-fold
node confidences (never the final node model's in-sample ones), its probability then mapped by
Platt scaling fitted on its own out-of-fold probabilities. Its target is whatever the training
examples' ``correct`` says (execution match where the data has databases, tree agreement
otherwise); ``QueryHead.label`` names it and the saved model keeps it.

>>> rng = np.random.default_rng(0)
>>> names = ("depth", "tree_size")
>>> def query(right):
...     n = int(rng.integers(2, 6)); conf = rng.uniform(0.7 if right else 0.2, 1.0, n)
...     x = np.column_stack([np.arange(n)[::-1], np.full(n, n)]).astype(float)
...     return head_features(conf, np.full(n, np.nan), ["column"] * (n - 1) + ["Project"], x, names)
>>> y = rng.integers(0, 2, 400)
>>> q = np.array([query(bool(r)) for r in y])
>>> head = QueryHead.fit(q, y, np.arange(400) % 4, head_feature_names(names), "execution",
...                      {"max_iter": 30})
>>> conf = head.confidence(q)
>>> bool(conf[y == 1].mean() > 0.6 > 0.4 > conf[y == 0].mean()), head.label
(True, 'execution')
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from model import metrics as M

VERSION = "qh-1"  # bump when head_features changes: a saved head of another version is refused
LABELS = ("execution", "tree", "mixed")
LABEL_MEANING = {  # what "right" means for a whole-query confidence fitted on each label
    "execution": "execution match (it returns gold's result)",
    "tree": "tree agreement (its tree is gold's; stricter than execution match)",
    "mixed": "execution match where the training data had databases, tree agreement elsewhere",
    "unrecorded": "a label its model file does not record"}
KIND_GROUPS = ("table", "column", "value", "operator")
THRESHOLDS = (0.5, 0.7, 0.9)
FEATURE_SETS = ("confidences", "confidences+sites", "all", "all_but_size")
DEFAULT_HGB = {"learning_rate": 0.05, "max_iter": 200, "max_leaf_nodes": 15, "min_samples_leaf": 40,
               "l2_regularization": 1.0}
# node features that say nothing about the query as a whole at the root (or are categorical)
_NOT_QUERY_LEVEL = ("kind", "parent_kind", "column_type", "depth", "child_index", "position", "n_children")
_EPS = 1e-6

CONFIDENCE_NAMES = (
    "n_nodes", "min_logit", "second_min_logit", "mean_logit", "sum_log_p", "root_logit",
    *(f"below_{t}" for t in THRESHOLDS), "share_below_0.9",
    *(f"min_logit_{g}" for g in KIND_GROUPS), *(f"below_0.9_{g}" for g in KIND_GROUPS))
SITE_NAMES = ("site_max", "site_sum", "site_at_least_confident", "site_second_max")


def _group(node_type: str) -> str:
    return node_type if node_type in ("table", "column", "value") else "operator"


def query_level_columns(feature_names: Sequence[str], feature_set: str = "all") -> tuple[str, ...]:
    """The node features whose root row the head reads (``all``): every numeric one that is not
    only about the root node itself; ``all_but_size`` leaves out those that measure the
    benchmark (question length, schema size: ``BENCHMARK_SIZE_FEATURES``)."""
    from model.nodes.features import BENCHMARK_SIZE_FEATURES

    left_out = _NOT_QUERY_LEVEL + (BENCHMARK_SIZE_FEATURES if feature_set == "all_but_size" else ())
    return tuple(n for n in feature_names if n not in left_out)


def head_feature_names(feature_names: Sequence[str], feature_set: str = "all") -> tuple[str, ...]:
    """The columns of ``head_features`` for a node model reading ``feature_names``.

    >>> head_feature_names(("kind", "tree_size"), "all")[-1]
    'root:tree_size'
    """
    if feature_set not in FEATURE_SETS:
        raise ValueError(f"the query head's features are one of {FEATURE_SETS}; found {feature_set!r}")
    names = CONFIDENCE_NAMES
    if feature_set != "confidences":
        names += SITE_NAMES
    if feature_set.startswith("all"):
        names += tuple(f"root:{n}" for n in query_level_columns(feature_names, feature_set))
    return names


def head_features(conf: Sequence[float], site: Sequence[float] | None, node_types: Sequence[str],
                  x: np.ndarray | None, feature_names: Sequence[str], feature_set: str = "all") -> np.ndarray:
    """One query's row of ``head_feature_names``: from its calibrated node confidences ``conf``
    (post-order, the root last), site scores ``site`` (NaN or None without a site head), node
    kinds and node feature rows ``x`` (columns ``feature_names``)."""
    p = np.clip(np.asarray(conf, dtype=float), _EPS, 1 - _EPS)
    logit = np.log(p) - np.log1p(-p)
    order = np.sort(logit)
    groups = np.array([_group(t) for t in node_types])
    row = [len(p), order[0], order[1] if len(order) > 1 else order[0], logit.mean(), float(np.log(p).sum()),
           logit[-1], *(float((p < t).sum()) for t in THRESHOLDS), float((p < 0.9).mean())]
    row += [float(logit[groups == g].min()) if (groups == g).any() else math.nan for g in KIND_GROUPS]
    row += [float((p[groups == g] < 0.9).sum()) for g in KIND_GROUPS]
    if feature_set != "confidences":
        s = np.full(len(p), np.nan) if site is None else np.asarray(site, dtype=float)
        if np.isnan(s).all():
            row += [math.nan] * len(SITE_NAMES)
        else:
            top = np.sort(np.nan_to_num(s, nan=-np.inf))[::-1]
            row += [float(top[0]), float(np.nansum(s)), float(s[int(np.argmin(logit))]),
                    float(top[1]) if len(top) > 1 and np.isfinite(top[1]) else math.nan]
    if feature_set.startswith("all"):
        columns = [list(feature_names).index(n) for n in query_level_columns(feature_names, feature_set)]
        row += (np.asarray(x, dtype=float)[-1, columns].tolist() if x is not None and len(x)
                else [math.nan] * len(columns))
    return np.asarray(row, dtype=float)


def label_of(executions: Sequence[bool | None], tree: bool = False) -> str:
    """The name of the labels ``correct`` gave examples with these execution matches."""
    if tree or all(e is None for e in executions):
        return "tree"
    return "execution" if all(e is not None for e in executions) else "mixed"


class QueryHead:
    """The fitted head: ``model_`` (a HistGradientBoostingClassifier over ``names``), Platt's
    ``coef`` and ``intercept`` on its log-odds, the ``label`` it was fitted on, ``feature_set``
    and its own out-of-fold ``metrics``."""

    def __init__(self, model: Any, coef: float, intercept: float, names: Sequence[str], label: str,
                 feature_set: str = "all", metrics: Mapping[str, float] | None = None):
        self.model_, self.coef, self.intercept = model, float(coef), float(intercept)
        self.names, self.label, self.feature_set = tuple(names), label, feature_set
        self.metrics = dict(metrics or {})
        self._compiled = None

    @classmethod
    def fit(cls, q: np.ndarray, y: np.ndarray, folds: np.ndarray, names: Sequence[str], label: str,
            hgb: Mapping[str, Any] | None = None, feature_set: str = "all", seed: int = 0) -> QueryHead:
        """Fit on query rows ``q`` (``head_features``, of out-of-fold node confidences) and labels
        ``y``: one classifier per fold of ``folds`` gives out-of-fold probabilities, which Platt's
        map is fitted on (and, each fold's map fitted on the others, the head's own metrics); the
        classifier kept is fitted on every row."""
        y = np.asarray(y).astype(int)
        hgb = {**DEFAULT_HGB, **(hgb or {})}
        folds = np.asarray(folds)
        oof = np.full(len(y), np.nan)
        for f in np.unique(folds) if np.unique(folds).size > 1 else ():
            rest = folds != f
            if np.unique(y[rest]).size < 2:
                continue
            oof[~rest] = _classifier(q[rest], y[rest], names, hgb, seed).predict_proba(q[~rest])[:, 1]
        scored = ~np.isnan(oof)
        coef, intercept = _platt(oof[scored], y[scored]) if scored.any() else (1.0, 0.0)
        metrics: dict[str, float] = {}
        if scored.any() and np.unique(y[scored]).size > 1:
            calibrated = np.full(len(y), np.nan)
            for f in np.unique(folds[scored]):
                here, rest = scored & (folds == f), scored & (folds != f)
                a, b = _platt(oof[rest], y[rest])
                calibrated[here] = _sigmoid(a * _logit(oof[here]) + b)
            metrics = {"query_auc": M.auc(calibrated[scored], y[scored]),
                       "query_ece": M.ece(calibrated[scored], y[scored]),
                       "query_brier": M.brier(calibrated[scored], y[scored]),
                       "mean_confidence": float(calibrated[scored].mean()),
                       "rate": float(y[scored].mean()), "queries": float(scored.sum())}
        model = _classifier(q, y, names, hgb, seed) if np.unique(y).size > 1 else None
        if model is None:  # one class only: Platt's intercept is the rate
            rate = float(np.clip(y.mean() if len(y) else 0.5, 1e-3, 1 - 1e-3))
            coef, intercept = 0.0, math.log(rate / (1 - rate))
        return cls(model, coef, intercept, names, label, feature_set, metrics)

    def confidence(self, q: np.ndarray) -> np.ndarray:
        """P(right) of query rows ``q`` (n, len(names))."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        if self.model_ is None:
            return np.full(len(q), _sigmoid(self.intercept))
        return _sigmoid(self.coef * _logit(self._probability(q)) + self.intercept)

    def _probability(self, q: np.ndarray) -> np.ndarray:
        from model.nodes.compiled import COMPILED_ROWS, CompiledTrees

        if self._compiled is None:
            try:  # scikit-learn's private tree arrays: another version may lay them out otherwise
                self._compiled = CompiledTrees(self.model_)
            except (AttributeError, KeyError, TypeError, ValueError, IndexError):
                self._compiled = False
        if self._compiled is False or len(q) > COMPILED_ROWS:
            return self.model_.predict_proba(q)[:, 1]
        return self._compiled.predict_proba1(q)

    def to_dict(self) -> dict[str, Any]:
        """What ``model.json`` keeps of it (the classifier goes to a skops file)."""
        return {"version": VERSION, "label": self.label, "feature_set": self.feature_set,
                "features": list(self.names), "coef": self.coef, "intercept": self.intercept,
                "fitted": self.model_ is not None, "metrics": self.metrics}


def _classifier(q: np.ndarray, y: np.ndarray, names: Sequence[str], hgb: Mapping[str, Any], seed: int):
    from model.nodes.estimator import fit_classifier

    return fit_classifier(q, y, names, dict(hgb), seed)  # no head column is categorical


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), _EPS, 1 - _EPS)
    return np.log(p) - np.log1p(-p)


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, dtype=float)))


def _platt(p: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(coef, intercept) of ``sigmoid(coef * logit(p) + intercept)`` fitted to ``y``."""
    if np.unique(y).size < 2:
        rate = float(np.clip(y.mean() if len(y) else 0.5, 1e-3, 1 - 1e-3))
        return 0.0, math.log(rate / (1 - rate))
    from sklearn.linear_model import LogisticRegression

    fitted = LogisticRegression(C=1e4, max_iter=1000).fit(_logit(p)[:, None], y)
    return float(fitted.coef_[0, 0]), float(fitted.intercept_[0])
