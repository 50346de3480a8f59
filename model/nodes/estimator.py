"""The boosted node model as an estimator: ``BoostedNodeModel`` (node model + site head +
calibrators) with its parameters ``BoostedParams``, in the scikit-learn style: ``fit(table) ->
self``, ``predict_proba``, ``site_scores``, ``save`` / ``load``; fitted state in attributes ending
in ``_``. Training (``model.nodes.boosted``, ``train.py model=features``) and scoring
(``model.scoring.Scorer``) both go through it; a config only chooses its parameters.

>>> import numpy as np
>>> from model.nodes.table import NodeTable
>>> from model.nodes.examples import NodeExample
>>> rng = np.random.default_rng(0)
>>> def example(k):  # a column under a Project; a node is right where its feature is above 0
...     x = rng.normal(size=(2, 1)); right = (x[:, 0] > 0).astype(int).tolist()
...     return NodeExample(f"q{k}", f"db{k % 4}", "sys", "SELECT a FROM t", "", [], right, ["column", "Project"],
...                        None, node_names=["t.a", "Project"], node_arity=[0, 1]), x
>>> examples, features = zip(*(example(k) for k in range(200)))
>>> table = NodeTable(list(examples), list(features), ("depth",), Path("."))
>>> params = BoostedParams(hgb={"max_iter": 20}, site_context=False, calibration="none")
>>> model = BoostedNodeModel(params).fit(table, range(160))
>>> conf = model.predict_proba(table, range(160, 200))
>>> labels = np.concatenate([table.examples[k].node_labels for k in range(160, 200)])
>>> bool(conf[labels == 1].mean() > 0.8 > 0.2 > conf[labels == 0].mean())
True
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from model import metrics as M
from model.calibrators import (
    QUERY_FEATURES,
    Calibrator,
    QueryCalibrator,
    fit_calibrator,
    one_class,
    query_aggregates,
)
from model.errors import ModelFileError, UsageError
from model.nodes.compiled import COMPILED_ROWS, CompiledTrees
from model.nodes.features import categorical_mask
from model.nodes.table import NodeTable, check_drop

GROUP_CHOICES = ("single", "single+consensus")
DATABASE_MODES = ("with", "without", "dropout", "both")
TRAIN_SIDE_CHOICES = ("none", "all", "auto")
CONFIG_KEYS = ("scorer", "embedder", "encoder")  # conf/model/features.yaml's keys for train.py and the data config
LABEL_MEANING = {  # what "right" means for a whole-query confidence fitted on each label
    "execution": "execution match (it returns gold's result)",
    "tree": "tree agreement (its tree is gold's; stricter than execution match)",
    "mixed": "execution match where the training data had databases, tree agreement elsewhere",
    "unrecorded": "a label its model file does not record"}


@dataclass
class BoostedParams:
    """The boosted node model's parameters: what ``conf/model/features.yaml`` chooses (there and
    in docs/training.md, the meaning of each). The first group shapes the estimator; the rest
    (from ``groups`` on ``feature_timeout_s``...) the training table it reads."""

    groups: str = "single"  # single | single+consensus (the consensus track)
    site_head: bool = True  # also fit a model of error-site labels -> site_scores
    site_context: bool = True  # it reads the node model's out-of-fold confidences around each node
    site_wrong_only: bool = True  # it learns from the nodes of wrong queries only
    inner_folds: int = 3  # folds of the training databases that give those confidences
    train_side: str = "none"  # none | all: whether both models also learn from train_predictions;
    # auto: all where train_predictions names files, else none
    train_predictions: str | list[str] | None = None  # outputs on data.train_split's questions (globs,
    # id-keyed JSONL), on databases disjoint from the eval split's: a code LLM's answers, SPLASH's
    calibration: str = "platt"  # platt | isotonic | none, fitted on the validation databases
    hgb: dict[str, Any] = field(default_factory=lambda: {
        "learning_rate": 0.05, "max_iter": 300, "max_leaf_nodes": 31, "min_samples_leaf": 40,
        "l2_regularization": 1.0})
    monotone: bool = False  # the node model's confidence follows each feature's known direction
    quantiles: bool = False  # the shifted count features read as quantiles among the run's nodes
    # (model.nodes.quantiles: what a saved model keeps, and reads new queries against)
    feature_timeout_s: float = 5.0
    use_cache: bool = True
    lm: bool | str = False  # scorer-LM log-probabilities over node spans (features group lm):
    # true = the packaged SmolLM2, or a scorer LM's name (qwen_coder) / path
    drop: tuple[str, ...] = ("semantic",)  # feature names (or group names) left out (conf/model/features.yaml's)
    save_model: bool = True  # fit a final model on all labelled predictions -> <run>/model/
    database: str = "with"  # with | without | dropout | both: the database features
    # (DATABASE_FEATURES) as computed, always missing (a database-free model), missing for a
    # random half of the training queries, or every training query twice, with and without them
    # (dropout and both: one model for scoring with and without a database)
    test_database: bool = True  # false: validate and test with the database features missing

    def __post_init__(self) -> None:
        """Checked where it is built: ``UsageError`` (one line) names a value out of range."""
        if self.groups not in GROUP_CHOICES:
            raise UsageError(f"model.groups must be one of {GROUP_CHOICES}; found {self.groups!r}")
        if self.database not in DATABASE_MODES:
            raise UsageError(f"model.database must be one of {DATABASE_MODES}; found {self.database!r}")
        if self.train_side not in TRAIN_SIDE_CHOICES:
            raise UsageError(f"model.train_side must be one of {TRAIN_SIDE_CHOICES}; found {self.train_side!r}")
        if self.train_side == "auto":
            self.train_side = "all" if self.train_predictions else "none"
        for name in ("monotone", "quantiles", "site_head", "site_wrong_only", "test_database"):
            if not isinstance(getattr(self, name), bool):
                raise UsageError(f"model.{name} must be true or false; found {getattr(self, name)!r}")
        if self.calibration not in ("platt", "isotonic", "none"):
            raise UsageError(f"model.calibration must be platt, isotonic or none; found {self.calibration!r}")
        if not isinstance(self.hgb, Mapping):
            raise UsageError(f"model.hgb must be a mapping of HistGradientBoostingClassifier settings; "
                             f"found {type(self.hgb).__name__}")
        self.hgb = dict(self.hgb)  # (a Hydra DictConfig is written to model.json as its text)
        from sklearn.ensemble import HistGradientBoostingClassifier

        unknown = sorted(set(self.hgb) - set(HistGradientBoostingClassifier().get_params()))
        if unknown:
            raise UsageError(f"model.hgb: HistGradientBoostingClassifier has no setting {unknown[0]!r}")
        from sklearn.utils._param_validation import InvalidParameterError

        try:  # (a value out of range: scikit-learn's own check, here rather than at fit)
            HistGradientBoostingClassifier(**self.hgb)._validate_params()
        except InvalidParameterError as error:
            raise UsageError(f"model.hgb: {error}") from None
        if isinstance(self.drop, str):
            self.drop = (self.drop,)
        if not isinstance(self.drop, (tuple, list)) or not all(isinstance(d, str) for d in self.drop):
            raise UsageError(f"model.drop must be a list of feature or group names; found {self.drop!r}")
        self.drop = tuple(self.drop)
        check_drop(self.drop)
        if not isinstance(self.lm, (bool, str)):
            raise UsageError(f"model.lm must be true, false or a scorer LM's name or path; found {self.lm!r}")
        timeout = self.feature_timeout_s
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            raise UsageError(f"model.feature_timeout_s must be a number of seconds above 0; found {timeout!r}")
        if isinstance(self.inner_folds, bool) or not isinstance(self.inner_folds, int) or self.inner_folds < 2:
            raise UsageError(f"model.inner_folds must be a whole number of at least 2; found {self.inner_folds!r}")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> BoostedParams:
        """The parameters a config sets (``conf/model/features.yaml`` as a plain mapping; its keys
        for train.py, ``CONFIG_KEYS``, are not the estimator's), checked: ``UsageError`` (one line)
        names a value out of range, or a key that is neither (a typo such as ``calibratoin``)."""
        unknown = sorted(set(values) - set(cls.__dataclass_fields__) - set(CONFIG_KEYS))
        if unknown:
            raise UsageError(f"model: no key {unknown[0]!r} (the keys: {', '.join(cls.__dataclass_fields__)})")
        known = {k: values[k] for k in cls.__dataclass_fields__ if k in values}
        if "drop" in known:
            drop = known["drop"] or ()
            known["drop"] = drop if isinstance(drop, str) else tuple(drop)  # (one name: that name)
        return cls(**known)

    def node_hgb(self, names: Sequence[str]) -> dict[str, Any]:
        """The node model's HGB settings for feature columns ``names``: ``hgb``, and with
        ``monotone`` each feature's direction (``Feature.direction``) as a monotonic constraint."""
        if not self.monotone:
            return self.hgb
        from model.nodes.features import FEATURES

        direction = {f.name: f.direction for f in FEATURES}
        return {**self.hgb, "monotonic_cst": [direction.get(n, 0) for n in names]}

    @property
    def consensus(self) -> bool:
        return self.groups == "single+consensus"

    @property
    def method(self) -> str:
        """The method name evaluate.py shows: the consensus track says so."""
        track = "consensus" if self.consensus else "single-system"
        return f"boosted node features ({track})"



def fit_classifier(x: np.ndarray, y: np.ndarray, names: Sequence[str], hgb: dict, seed: int = 0,
                   sample_weight: np.ndarray | None = None):
    """A HistGradientBoostingClassifier with the categorical node kinds declared. A column that is
    missing in every training row (no database, an unstacked fold) is set constant for the fit:
    scikit-learn's binning fails on an all-NaN column, and a constant one is never split on.
    Labels of one class are refused: scikit-learn fits them, and its ``predict_proba(x)[:, 1]``
    is then about 0 for every row, whichever the class."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    if len(y) == 0 or (label := one_class(y)) is not None:
        found = f"every one of its {len(y)} labels is {label}" if len(y) else "it has no rows"
        raise ValueError(f"cannot fit a node classifier: {found}, and it needs right and wrong nodes")

    empty = np.isnan(x).all(axis=0) if len(x) else np.zeros(x.shape[1], dtype=bool)
    if empty.any():
        x = x.copy()
        x[:, empty] = 0.0
    model = HistGradientBoostingClassifier(categorical_features=categorical_mask(names),
                                           random_state=seed, early_stopping=False, **hgb)
    return model.fit(x, y, sample_weight=sample_weight)


def fit_node_model(x: np.ndarray, y: np.ndarray, names: Sequence[str], params: BoostedParams, seed: int = 0):
    """The node model on rows ``x`` (columns ``names``), with ``params.node_hgb``."""
    return fit_classifier(x, y, names, params.node_hgb(names), seed)


def without_database(x: np.ndarray, names: Sequence[str], rows: np.ndarray | None = None) -> np.ndarray:
    """``x`` with the database features missing (NaN) in ``rows`` (default: all), as when
    scoring without a database."""
    from model.nodes.features import DATABASE_FEATURES

    columns = np.array([n in DATABASE_FEATURES for n in names])
    x = x.copy()
    x[np.ix_(np.arange(len(x)) if rows is None else rows, np.flatnonzero(columns))] = np.nan
    return x


def dropped_database(n_queries: int, seed: int = 0) -> np.ndarray:
    """Which training queries ``model.database=dropout`` trains without their database features."""
    return np.random.default_rng(seed).random(n_queries) < 0.5


def training_rows(table: NodeTable, indices: Sequence[int], params: BoostedParams, seed: int = 0
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``table.stack(indices)`` with the database features as ``model.database`` trains them."""
    x, y, sites = table.stack(indices)
    if params.database == "without":
        x = without_database(x, table.names)
    elif params.database == "dropout":  # a random half of the queries, all their nodes
        sizes = [len(table.examples[k].node_labels) for k in indices]
        blank = dropped_database(len(indices), seed)
        x = without_database(x, table.names, np.flatnonzero(np.repeat(blank, sizes)))
    elif params.database == "both":
        x, y, sites = np.vstack([x, without_database(x, table.names)]), np.tile(y, 2), np.tile(sites, 2)
    return x, y, sites


def scored_rows(table: NodeTable, indices: Sequence[int], params: BoostedParams) -> tuple[np.ndarray, np.ndarray]:
    """(X, node labels) of ``indices`` as a fold validates and tests them: without the database
    features for a database-free model or ``model.test_database=false``."""
    x, y, _ = table.stack(indices)
    if params.database == "without" or not params.test_database:
        x = without_database(x, table.names)
    return x, y


def split_rows(values: np.ndarray, table: NodeTable, indices: Sequence[int]) -> list[np.ndarray]:
    sizes = [len(table.examples[k].node_labels) for k in indices]
    return np.split(values, np.cumsum(sizes)[:-1])


def site_head_rows(table: NodeTable, indices: Sequence[int], x: np.ndarray, sites: np.ndarray,
                   names: Sequence[str], params: BoostedParams, raw: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    """What the site head learns from: (rows, site labels, rows per query, column names) of the
    training rows ``x`` of the examples ``indices`` (``training_rows``; ``model.database=both``
    repeats them), with ``params.site_context`` the context read from ``raw`` (the node model's
    out-of-fold probabilities of those rows), with ``params.site_wrong_only`` wrong queries only."""
    from model.nodes.sites import context_names, with_context

    sizes = np.array([len(table.examples[k].node_labels) for k in indices])
    repeat = len(x) // max(int(sizes.sum()), 1)
    sizes = np.tile(sizes, repeat)
    names = tuple(names)
    if params.site_context:
        if raw is None or len(raw) != len(x):
            raise ValueError("the site head reads the node model's out-of-fold probabilities of its rows")
        x = with_context(x, raw, [table.examples[k].node_arity for k in indices] * repeat, names)
        names = (*names, *context_names(names))
    if params.site_wrong_only:
        wrong = np.add.reduceat(sites, np.r_[0, np.cumsum(sizes)[:-1]]) > 0
        keep = np.repeat(wrong, sizes)
        x, sites, sizes = x[keep], sites[keep], sizes[wrong]
    return x, sites, sizes, names


def fit_site_head(table: NodeTable, indices: Sequence[int], x: np.ndarray, sites: np.ndarray,
                  names: Sequence[str], params: BoostedParams, seed: int = 0, raw: np.ndarray | None = None):
    """The site head (``model.nodes.sites``): one classifier with ``params.hgb``, fitted on
    ``site_head_rows``."""
    if not params.site_head or not sites.any():
        return None
    x, sites, _, names = site_head_rows(table, indices, x, sites, names, params, raw)
    return fit_classifier(x, sites, names, params.hgb, seed)


def join_rows(a: np.ndarray, b: np.ndarray, repeat: int = 1) -> np.ndarray:
    """Training rows of two example lists as ``training_rows`` gives those of the joined list
    (with ``repeat`` blocks, as ``model.database=both`` makes them).

    >>> join_rows(np.array([1, 2, 1, 2]), np.array([3, 3]), repeat=2).tolist()
    [1, 2, 3, 1, 2, 3]
    """
    return np.concatenate([np.concatenate([u, v]) for u, v in zip(np.split(a, repeat), np.split(b, repeat))])


def row_groups(table: NodeTable, indices: Sequence[int], rows: int) -> np.ndarray:
    """The group of each of ``rows`` training rows of ``indices`` (repeated as ``training_rows``
    repeats them) for the site head's inner folds: its database, or its query when the rows
    come from fewer than 2 databases (a small run: folds by query rather than none)."""
    sizes = np.array([len(table.examples[k].node_labels) for k in indices])
    repeat = rows // max(int(sizes.sum()), 1)
    databases = [table.examples[k].db_id for k in indices]
    groups = databases if len(set(databases)) >= 2 else [str(k) for k in indices]
    return np.repeat(np.tile(groups, repeat), np.tile(sizes, repeat))


def site_head_scores(site_model, x: np.ndarray, raw: np.ndarray, arities: Sequence[Sequence[int]],
                     context: bool, names: Sequence[str]) -> np.ndarray:
    """The site head's scores of rows ``x`` (columns ``names``; trees ``arities``, stacked),
    given the node model's probabilities ``raw`` of the same rows."""
    from model.nodes.sites import with_context

    return site_model.predict_proba(with_context(x, raw, arities, names) if context else x)[:, 1]


def inner_out_of_fold(x: np.ndarray, y: np.ndarray, groups: np.ndarray, names: Sequence[str],
                      params: BoostedParams, seed: int = 0) -> np.ndarray:
    """Out-of-fold node-model probabilities of training rows: the node model fitted once per
    fold of their groups (``row_groups``: databases; ``params.inner_folds``), without that fold.
    Where the rows without a fold are of one class (a database whose outputs are all right, the
    others in that fold), that class is the fold's probability: no classifier fits on one class."""
    from model.data.folds import schema_disjoint_folds

    k = min(params.inner_folds, len(np.unique(groups)))
    if k < 2:
        raise ValueError(f"the site head's inner folds need 2 training queries or more; found {k} "
                         "(model.site_context=false fits the site head without them)")
    fold = schema_disjoint_folds(groups, k, seed)
    out = np.empty(len(x))
    for i in range(k):
        if (label := one_class(y[fold != i])) is not None:
            out[fold == i] = float(label)
            continue
        model = fit_node_model(x[fold != i], y[fold != i], names, params, seed)
        out[fold == i] = model.predict_proba(x[fold == i])[:, 1]
    return out



def kind_group(node_type: str) -> str:
    """The groups typical feature values are kept for: table, column, value, operator."""
    return node_type if node_type in ("table", "column", "value") else "operator"


def typical_values(x: np.ndarray, y: np.ndarray, node_types: Sequence[str],
                   names: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per kind group, the median of every feature over the *correct* nodes: the value a reason
    compares a node's feature with ("what a right node usually shows")."""
    groups = np.array([kind_group(t) for t in node_types])
    out: dict[str, dict[str, float]] = {}
    for group in ("table", "column", "value", "operator"):
        rows = x[(groups == group) & (y == 1)]
        values = {}
        for j, name in enumerate(names):
            column = rows[:, j][~np.isnan(rows[:, j])] if len(rows) else np.zeros(0)
            if len(column):
                values[name] = float(np.median(column))
        out[group] = values
    return out


def data_digest(examples: Sequence) -> str:
    """A digest of the labelled predictions a model was fitted on (ids, system, SQL, label)."""
    text = json.dumps(sorted((e.question_id, e.system, e.sql, bool(e.execution_match)) for e in examples))
    return hashlib.sha256(text.encode()).hexdigest()[:16]



def _training_raw(indices: Sequence[int], params: BoostedParams, out_of_fold: OutOfFold, seed: int
                  ) -> np.ndarray | None:
    """The run's out-of-fold node probabilities of the final model's training rows
    (``training_rows``), for its site head: scored without a database where those rows are
    (``model.database=dropout|both``). None when some example has none."""
    if not params.site_context or any(k not in out_of_fold.raw for k in indices):
        return None
    with_db = [out_of_fold.raw[k] for k in indices]
    if params.database not in ("dropout", "both") or out_of_fold.without_database is None:
        return np.concatenate(with_db)
    raw2 = out_of_fold.without_database.raw
    if any(k not in raw2 for k in indices):
        return None
    if params.database == "both":
        return np.concatenate(with_db + [raw2[k] for k in indices])
    blank = dropped_database(len(indices), seed)
    return np.concatenate([raw2[k] if b else r for k, r, b in zip(indices, with_db, blank)])


def _calibrators(table: NodeTable, indices: Sequence[int], params: BoostedParams, oof_raw: dict, oof_conf: dict, fold_of: dict
                 ) -> tuple[Calibrator | None, QueryCalibrator, dict[str, float]]:
    """The node calibrator (out-of-fold raw scores -> labels), the whole-query calibrator
    (out-of-fold confidences -> correct) and the latter's own cross-fitted metrics."""
    oof = [k for k in indices if k in oof_raw]
    raw = np.concatenate([oof_raw[k] for k in oof]) if oof else np.zeros(0)
    labels = np.concatenate([table.examples[k].node_labels for k in oof]) if oof else np.zeros(0)
    calibrator = fit_calibrator(params.calibration, raw, labels)
    aggregates, query_labels = query_rows(table, oof, oof_conf)
    folds = np.array([fold_of.get(k, 0) for k in oof])
    query_oof = np.full(len(oof), np.nan)
    for fold in np.unique(folds) if np.unique(folds).size > 1 else ():  # its own out-of-fold scores
        rest = folds != fold
        query_oof[~rest] = QueryCalibrator.fit(aggregates[rest], query_labels[rest]).confidence(
            aggregates[~rest])
    query_metrics = {}
    if len(oof) and np.unique(folds).size > 1:
        query_metrics = {"query_auc": M.auc(query_oof, query_labels),
                         "query_ece": M.ece(query_oof, query_labels),
                         "query_brier": M.brier(query_oof, query_labels)}
    return calibrator, fit_query_calibrator(table, oof, oof_conf), query_metrics


def query_rows(table: NodeTable, indices: Sequence[int], confidences: Mapping[int, np.ndarray]
               ) -> tuple[np.ndarray, np.ndarray]:
    """What the whole-query calibrator learns from: each example's ``query_aggregates`` of its
    held-out node ``confidences`` (shape ``(len(indices), len(QUERY_FEATURES))``) and whether the
    query is right."""
    aggregates = np.array([query_aggregates(confidences[k]) for k in indices]).reshape(-1, len(QUERY_FEATURES))
    return aggregates, np.array([int(table.examples[k].correct) for k in indices], dtype=int)


def fit_query_calibrator(table: NodeTable, indices: Sequence[int], confidences: Mapping[int, np.ndarray]
                         ) -> QueryCalibrator:
    """The whole-query calibrator (``QueryCalibrator``) fitted on the node ``confidences`` of the
    examples ``indices``, held out from the node model (a run's out-of-fold scores, or a fit's
    validation examples); a constant 0.5 without any. The one fit of it, for both."""
    if not len(indices):
        return QueryCalibrator([0.0] * len(QUERY_FEATURES), 0.0)
    return QueryCalibrator.fit(*query_rows(table, indices, confidences))


@dataclass
class OutOfFold:
    """A cross-fitting run's out-of-fold scores of the examples a final model is fitted on: what
    its calibrators learn from (``BoostedNodeModel.fit(..., out_of_fold=...)``)."""

    raw: dict[int, np.ndarray]  # example -> uncalibrated node probabilities
    confidences: dict[int, np.ndarray]  # example -> calibrated node confidences
    fold: dict[int, int]  # example -> its fold
    metrics: dict[str, float] = field(default_factory=dict)  # the run's out-of-fold metrics (the model card)
    without_database: OutOfFold | None = None  # the same folds scored without databases
    # (model.database=dropout|both: the model's second pair of calibrators)


class BoostedNodeModel(BaseEstimator):
    """Node model (P(node right)) + site head (P(node is where a wrong query goes wrong)) +
    calibrators (node confidences, whole-query confidence), fitted on a ``NodeTable``.

    A scikit-learn estimator: ``get_params`` / ``set_params`` (``params``, a ``BoostedParams``,
    and ``seed``; nested as ``params__calibration`` and so on, each field of ``BoostedParams``,
    as in a grid search), ``sklearn.base.clone``, ``NotFittedError`` before ``fit``. It learns from a
    ``NodeTable`` and example indices rather than an ``(X, y)`` pair, and ``predict_proba``
    returns one confidence per node (shape ``(nodes,)``), so the checks of tabular estimators
    (``check_estimator``) do not apply.

    Fitted attributes: ``node_model_`` and ``site_model_`` (HistGradientBoostingClassifier; the
    site head None without one), ``calibrator_`` (raw node probability ->
    confidence, or None), ``query_calibrator_``, ``features_`` (the columns the models read),
    ``typical_`` (node kind group -> feature -> the median over right nodes: what the reasons
    compare with), ``info_`` (what it was trained on, its metrics, its parameters; the model
    card), ``without_database_`` (the calibrator pair for rows scored without a database, for a
    model trained for both) and ``query_metrics_`` (the whole-query calibrator's own out-of-fold
    metrics).
    """

    def __init__(self, params: BoostedParams | None = None, seed: int = 0):
        self.params = params  # None: BoostedParams()'s defaults
        self.seed = seed

    @property
    def params_(self) -> BoostedParams:
        """The parameters in use: ``params``, or the defaults where it is None."""
        return self.params if self.params is not None else BoostedParams()

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """``params`` and ``seed``; with ``deep``, each field of ``params_`` too, as
        ``params__<field>`` (scikit-learn's nested parameters)."""
        out = super().get_params(deep=False)
        if deep and isinstance(self.params_, BoostedParams):
            out.update((f"params__{name}", getattr(self.params_, name)) for name in BoostedParams.__dataclass_fields__)
        return out

    def set_params(self, **values: Any) -> BoostedNodeModel:
        """scikit-learn's ``set_params``; ``params__<field>`` values make a new ``params``: ``params_``
        with those fields changed, checked as it is built (``UsageError`` names a value out of
        range; the ``BoostedParams`` it replaces, which a clone's twin may share, is left as it is)."""
        from dataclasses import replace

        nested = {k.removeprefix("params__"): values.pop(k) for k in list(values) if k.startswith("params__")}
        unknown = sorted(set(nested) - set(BoostedParams.__dataclass_fields__))
        if unknown:
            raise ValueError(f"Invalid parameter 'params__{unknown[0]}' for BoostedNodeModel: BoostedParams has "
                             f"no field {unknown[0]!r}")
        super().set_params(**values)
        if nested:
            self.params = replace(self.params_, **nested)
        return self

    # ------------------------------------------------------------------------- fitting

    def fit(self, table: NodeTable, train: Sequence[int] | None = None, *, validation: Sequence[int] = (),
            side: Sequence[int] = (), out_of_fold: OutOfFold | None = None,
            columns: np.ndarray | None = None) -> BoostedNodeModel:
        """Fit on the examples ``train`` of ``table`` (default: all but its train side).

        ``validation``: held-out examples the node calibrator and then the whole-query
        calibrator (on the calibrated node confidences there, ``fit_query_calibrator``) are
        fitted on (a cross-fitting fold's validation databases); the site head learns from them
        too. ``out_of_fold``: a cross-fitting run's scores of ``train``: the calibrators are
        fitted on them instead (a run's final model), and the site head reads its out-of-fold
        node probabilities. Without either there is no node calibrator and the whole-query
        calibrator is a constant.
        ``side``: examples of ``params.train_predictions`` (with ``train_side=all`` both models
        learn from them). ``columns``: a boolean mask over
        ``table.names`` that keeps only some features (ablations).
        """
        if not isinstance(self.params_, BoostedParams):
            raise TypeError(f"params: expected a BoostedParams, found {type(self.params).__name__}")
        p, seed = self.params_, self.seed
        train = (list(range(len(table.examples) - table.train_side)) if train is None
                 else _checked_indices(table, train, "train"))
        if not train:
            raise ValueError("train: no examples to fit on")
        validation = _checked_indices(table, validation, "validation")
        if validation and out_of_fold is None and p.calibration != "none":
            labels = np.concatenate([table.examples[k].node_labels for k in validation])
            if (label := one_class(labels)) is not None:  # (fitted to one class, every confidence would be it)
                raise ValueError(f"validation: every one of its {len(labels)} node labels is {label}: "
                                 f"the {p.calibration} node calibrator fitted on it needs right and wrong nodes")
        keep = np.ones(len(table.names), dtype=bool) if columns is None else np.asarray(columns, dtype=bool)
        names = tuple(n for n, k in zip(table.names, keep) if k)
        side = list(side) if p.train_side != "none" else []
        node_rows = train + (side if p.train_side == "all" else [])
        x, y, sites = training_rows(table, node_rows, p, seed)
        x = x[:, keep]
        node_model = fit_node_model(x, y, names, p, seed)
        xv, yv = scored_rows(table, validation, p) if validation else (np.zeros((0, len(table.names))), np.zeros(0))
        xv = xv[:, keep]
        raw_val = node_model.predict_proba(xv)[:, 1] if len(xv) else np.zeros(0)
        site_model = None
        if p.site_head:
            raw = None
            if p.site_context:
                raw = _training_raw(node_rows, p, out_of_fold, seed) if out_of_fold is not None else None
                if raw is None:  # examples the run did not score out of fold (or a fold's own fit)
                    raw = inner_out_of_fold(x, y, row_groups(table, node_rows, len(x)), names, p, seed)
            n = 2 if p.database == "both" else 1
            # out of sample for the node model: its own probabilities there
            extra = [(validation, xv, table.stack(validation)[2] if validation else np.zeros(0, dtype=int),
                      raw_val)] if n == 1 and validation else []
            site_rows = node_rows
            for indices, xe, se, re in extra:
                site_rows, x, sites = site_rows + list(indices), join_rows(x, xe, n), join_rows(sites, se, n)
                raw = join_rows(raw, re, n) if raw is not None else None
            site_model = fit_site_head(table, site_rows, x, sites, names, p, seed, raw)
        self.node_model_, self.site_model_, self.features_ = node_model, site_model, names
        self._compiled = {}
        self.without_database_ = None
        self.query_metrics_: dict[str, float] = {}
        all_metrics: dict[str, dict] = {}
        if out_of_fold is not None:
            self.calibrator_, self.query_calibrator_, self.query_metrics_ = _calibrators(
                table, train, p, out_of_fold.raw, out_of_fold.confidences, out_of_fold.fold)
            all_metrics["out_of_fold"] = {**out_of_fold.metrics, **{
                f"test/calibrated_{k}": v for k, v in self.query_metrics_.items()}}
            without = out_of_fold.without_database
            if without is not None:
                cal2, qcal2, qmetrics2 = _calibrators(table, train, p, without.raw, without.confidences,
                                                      out_of_fold.fold)
                self.without_database_ = (cal2, qcal2)
                all_metrics["out_of_fold_without_database"] = {
                    **without.metrics, **{f"test/calibrated_{k}": v for k, v in qmetrics2.items()}}
        else:  # both calibrators on the validation examples (none: a constant whole-query confidence)
            self.calibrator_ = fit_calibrator(p.calibration, raw_val, yv)
            conf_val = self.calibrate(raw_val) if len(raw_val) else raw_val
            self.query_calibrator_ = fit_query_calibrator(
                table, validation, dict(zip(validation, split_rows(conf_val, table, validation))))
        x_plain, y_plain, _ = table.stack(train)  # every node once, as computed
        x_plain = x_plain[:, keep]
        node_types = [t for k in train for t in table.examples[k].node_types]
        self.typical_ = typical_values(x_plain, y_plain, node_types, names)
        self.info_ = _model_card(table, train, side, p, all_metrics)
        return self

    # ------------------------------------------------------------------------- scoring a table

    def predict_proba(self, table: NodeTable, indices: Sequence[int] | None = None) -> np.ndarray:
        """Calibrated node confidences (P(node right)) of the examples ``indices`` of ``table``
        (default all), their nodes stacked in order: the rows as a fold tests them
        (``scored_rows``: without database features for a database-free model)."""
        check_is_fitted(self, "node_model_")
        x = self._rows(table, indices)
        return self.calibrate(self.raw_node_probability(x), self._database) if len(x) else np.zeros(0)

    def site_scores(self, table: NodeTable, indices: Sequence[int] | None = None) -> np.ndarray:
        """The site head's scores of the same nodes (NaN without a site head)."""
        check_is_fitted(self, "node_model_")
        indices = _checked_indices(table, indices, "indices")
        x = self._rows(table, indices)
        if not len(x):
            return np.zeros(0)
        return self.site_score(x, self.raw_node_probability(x), [table.examples[k].node_arity for k in indices])

    @property
    def _database(self) -> bool:
        return self.params_.database != "without" and self.params_.test_database

    def _rows(self, table: NodeTable, indices: Sequence[int] | None) -> np.ndarray:
        indices = _checked_indices(table, indices, "indices")
        if not len(indices):
            return np.zeros((0, len(self.features_)))
        x, _ = scored_rows(table, list(indices), self.params_)
        if tuple(table.names) == self.features_:
            return x
        missing = [n for n in self.features_ if n not in table.names]
        if missing:
            raise ValueError(f"the table lacks {len(missing)} feature(s) the model reads: {', '.join(missing[:5])}"
                             f"{', ...' if len(missing) > 5 else ''}")
        return x[:, [table.names.index(n) for n in self.features_]]

    # ------------------------------------------------------------------------- scoring feature rows

    @property
    def quantiles_(self):
        """The reference its count features are read against (``model.quantiles``: the training
        run's nodes; a ``Quantiles``), or None when it reads them as they are."""
        check_is_fitted(self, "node_model_")
        if "quantiles" not in self.info_:
            return None
        from model.nodes.quantiles import Quantiles

        return Quantiles.from_dict(self.info_["quantiles"])

    @property
    def site_context(self) -> bool:
        """Whether the site head reads the node model's confidences around each node
        (``model.nodes.sites``) beside the node's features."""
        return bool(self.params_.site_context)

    def node_confidence(self, x: np.ndarray, database: bool = True) -> np.ndarray:
        """Calibrated confidences of feature rows ``x`` (nodes, features_); ``database``: whether
        the rows were computed with the query's database (it picks the calibrator)."""
        return self.calibrate(self.raw_node_probability(x), database)

    def raw_node_probability(self, x: np.ndarray) -> np.ndarray:
        check_is_fitted(self, "node_model_")
        return self._probability(self.node_model_, x)

    def calibrate(self, raw: np.ndarray, database: bool = True) -> np.ndarray:
        check_is_fitted(self, "node_model_")
        calibrator = self.calibrator_ if database or self.without_database_ is None else self.without_database_[0]
        return calibrator.confidence(raw) if calibrator is not None and len(raw) else raw

    def confidences(self, raw: np.ndarray, database: bool = True) -> tuple[np.ndarray, float]:
        """One query's calibrated node confidences (post-order) and whole-query confidence from
        its nodes' raw probabilities (the least confident node's Platt map)."""
        conf = self.calibrate(raw, database)
        return conf, float(self.query_calibrator_for(database).confidence(np.array([query_aggregates(conf)]))[0])

    @property
    def query_label(self) -> str:
        """What the whole-query confidence is calibrated to: ``execution`` (execution match),
        ``tree`` (the tree equals gold's) or ``mixed``: the head's label, else the one its card
        records (``query_label``, else the training run's labels), else ``unrecorded``."""
        check_is_fitted(self, "node_model_")
        saved = self.info_.get("query_label") or self.info_.get("trained_on", {}).get("labels")
        return saved if saved in ("execution", "tree", "mixed") else "unrecorded"  # an older card

    def query_calibrator_for(self, database: bool) -> QueryCalibrator:
        check_is_fitted(self, "node_model_")
        return self.query_calibrator_ if database or self.without_database_ is None else self.without_database_[1]

    def site_score(self, x: np.ndarray, raw: np.ndarray | None = None,
                   arities: Sequence[Sequence[int]] | None = None) -> np.ndarray:
        """Site scores of feature rows ``x``; a head that reads context needs the node model's
        raw probabilities of the same rows and the trees' ``arities`` (stacked in order)."""
        check_is_fitted(self, "node_model_")
        if self.site_model_ is None:
            return np.full(len(x), np.nan)
        if self.site_context:
            from model.nodes.sites import with_context

            if raw is None or arities is None:
                raise ValueError("this site head reads the node model's confidences: pass raw and arities")
            x = with_context(x, raw, arities, self.features_)
        return self._probability(self.site_model_, x)

    def _probability(self, model: Any, x: np.ndarray) -> np.ndarray:
        """``model.predict_proba(x)[:, 1]``; the same numbers from ``CompiledTrees`` for the few
        rows of a query or two, where scikit-learn's per-tree calls are the cost. Trees that
        cannot be walked safely (``model.nodes.compiled.trees_problem``) are a ``ModelFileError``,
        never handed to scikit-learn's predictor."""
        if "_compiled" not in self.__dict__:
            self._compiled: dict[int, CompiledTrees | None] = {}
        if id(model) not in self._compiled:
            which = "node model" if model is self.node_model_ else "site model"
            try:  # it reads scikit-learn's private tree arrays: another version may lay them out otherwise
                self._compiled[id(model)] = CompiledTrees(model)
            except ModelFileError as e:  # trees scikit-learn's predictor cannot walk safely either: no fallback
                raise ModelFileError(f"the {which}: {e}") from None
            except (IndexError, RecursionError) as e:  # (the same, found while compiling them)
                raise ModelFileError(f"the {which}: its trees cannot be walked ({type(e).__name__})") from None
            except (AttributeError, KeyError, TypeError, ValueError):  # (another layout; over 64 leaves)
                self._compiled[id(model)] = None
        compiled = self._compiled[id(model)]
        if compiled is None or len(x) > COMPILED_ROWS:
            return model.predict_proba(x)[:, 1]
        return compiled.predict_proba1(x)

    # ------------------------------------------------------------------------- files

    def save(self, folder: str | Path) -> Path:
        """Write the model directory (``model.nodes.model_file``)."""
        from model.nodes.model_file import write_model

        check_is_fitted(self, "node_model_")
        return write_model(folder, node_model=self.node_model_, site_model=self.site_model_,
                           calibrator=self.calibrator_, query_calibrator=self.query_calibrator_,
                           features=self.features_, typical=self.typical_,
                           info={**self.info_, "query_label": self.query_label},
                           without_database=self.without_database_)

    @classmethod
    def load(cls, folder: str | Path) -> BoostedNodeModel:
        """Read a model directory; ``ModelFileError`` (one line) when it cannot be used."""
        from model.nodes.model_file import read_model

        parts = read_model(folder)
        try:
            return cls.from_parts(**parts)
        except (UsageError, TypeError) as e:  # a config its parameters refuse
            raise ModelFileError(f"{Path(folder) / 'model.json'}: config: {e}") from None

    @classmethod
    def from_parts(cls, node_model: Any, site_model: Any | None, calibrator: Calibrator | None,
                   query_calibrator: QueryCalibrator, features: Sequence[str], typical: dict, info: dict,
                   without_database: tuple[Calibrator | None, QueryCalibrator] | None = None
                   ) -> BoostedNodeModel:
        """A fitted model from its parts (what ``model.nodes.model_file.read_model`` returns);
        its parameters are those its card records."""
        saved = {"site_context": False, **info.get("config", {})}
        params = BoostedParams(**{k: v for k, v in saved.items() if k in BoostedParams.__dataclass_fields__
                                  and k != "drop"}, drop=tuple(saved.get("drop") or ()))
        model = cls(params)
        model.node_model_, model.site_model_, model.calibrator_ = node_model, site_model, calibrator
        model.query_calibrator_, model.features_, model.typical_ = query_calibrator, tuple(features), typical
        model.info_, model.without_database_, model.query_metrics_ = info, without_database, {}
        return model


def _checked_indices(table: NodeTable, indices: Sequence[int] | None, name: str) -> list[int]:
    """``indices`` as a list (None: every example of ``table``); ``IndexError`` naming ``name``
    for one that is not a whole number in range (a negative index is not read from the end)."""
    n = len(table.examples)
    if indices is None:
        return list(range(n))
    out = list(indices)
    bad = next((k for k in out if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 0 <= k < n),
               None)
    if bad is not None:
        raise IndexError(f"{name}: {bad!r} is not an example of the table (0 to {n - 1})")
    return out


def _model_card(table: NodeTable, indices: Sequence[int], side: Sequence[int], params: BoostedParams,
                metrics: dict) -> dict[str, Any]:
    """What a saved model says about itself: feature version, parameters, what it was trained on
    (the examples ``indices``, the train side ``side``) and ``metrics``."""
    from model.nodes.features import VERSION

    examples = [table.examples[k] for k in indices]
    labels = np.concatenate([e.node_labels for e in examples]) if examples else np.zeros(0)
    info = {
        "feature_version": VERSION, "created": date.today().isoformat(),
        "method": params.method,
        "config": {"groups": params.groups, "lm": params.lm, "calibration": params.calibration,
                   "site_head": params.site_head,
                   "hgb": params.hgb, "monotone": params.monotone,
                   "quantiles": params.quantiles,
                   "drop": list(params.drop),
                   "database": params.database,
                   "test_database": params.test_database, "site_context": params.site_context,
                   "site_wrong_only": params.site_wrong_only, "train_side": params.train_side,
                   "train_predictions": params.train_predictions if side else None},
        "trained_on": {"data_root": table.root.name, "labels": table.labels, "examples": len(examples),
                       "nodes": len(labels),
                       "questions": len({e.question_id for e in examples}),
                       "databases": len({e.db_id for e in examples}),
                       "systems": dict(sorted(Counter(e.system for e in examples).items())),
                       "correct_queries": int(sum(e.correct for e in examples)),
                       "correct_nodes": int(np.sum(labels)),
                       "digest": data_digest(examples),
                       "train_side_examples": len(side)},
        # test/query_auc: the least confident node's; test/calibrated_query_*: the calibrated
        # whole-query confidence's (cross-fitted over the same folds)
        "metrics": metrics,
    }
    if table.quantiles is not None:  # what new queries' counts are read against (model.quantiles)
        info["quantiles"] = table.quantiles.to_dict()
    return info
