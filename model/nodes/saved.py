"""The saved boosted node scorer: what a ``model=features`` run writes to ``<run>/model/`` and
what ``Scorer.load`` reads.

A model directory holds ``model.json`` (feature list and version, calibrators, typical feature
values for the reasons, what it was trained on, its out-of-fold and in-sample metrics) and the
two gradient-boosted models as skops files (``node_model.skops``, ``site_model.skops``). skops
loads only the types listed in ``TRUSTED_TYPES``; a file asking for anything else is refused,
so loading a downloaded model never runs code from it (plain pickle would).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from model.calibrators import Calibrator, load_calibrator
from model.data.jsonl import write_json

FORMAT = "rat-confidence boosted node scorer"
FORMAT_VERSION = 1
# What skops may rebuild beside scikit-learn's and numpy's own trusted types. A model file that
# needs anything else is refused (ModelFileError), never loaded.
TRUSTED_TYPES = (
    "functools.partial",
    "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
    "sklearn.utils.validation.check_array",
)
# Whole-query confidence: logistic regression over these aggregates of the node confidences.
# The least confident node alone (Platt scaling of it) measured best on Spider dev out of fold:
# query AUC 0.767, where adding the root's and the mean logit gave 0.759.
QUERY_FEATURES = ("min_logit",)


from model.errors import ModelFileError


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), 1e-6, 1 - 1e-6)
    return np.log(p) - np.log1p(-p)


def query_aggregates(confidences: Sequence[float]) -> list[float]:
    """``QUERY_FEATURES`` of one query's node confidences (post-order: the root is last).

    >>> [round(v, 2) for v in query_aggregates([0.9, 0.5, 0.8])]
    [0.0]
    """
    z = _logit(np.asarray(confidences, dtype=float))
    return [float(z.min())]


@dataclass
class QueryCalibrator:
    """P(the whole query is right) from ``query_aggregates``: a logistic regression fitted on
    out-of-fold node confidences against execution match."""

    coef: list[float]
    intercept: float

    @classmethod
    def fit(cls, aggregates: np.ndarray, labels: np.ndarray, sample_weight: np.ndarray | None = None
            ) -> QueryCalibrator:
        from sklearn.linear_model import LogisticRegression

        if len(set(labels.tolist())) < 2:  # one class only: a constant
            rate = float(np.clip(labels.mean() if len(labels) else 0.5, 1e-3, 1 - 1e-3))
            return cls([0.0] * aggregates.shape[1], math.log(rate / (1 - rate)))
        fitted = LogisticRegression(C=1.0, max_iter=1000).fit(aggregates, labels, sample_weight=sample_weight)
        return cls([float(c) for c in fitted.coef_[0]], float(fitted.intercept_[0]))

    def confidence(self, aggregates: np.ndarray) -> np.ndarray:
        z = np.asarray(aggregates, dtype=float) @ np.asarray(self.coef) + self.intercept
        return 1.0 / (1.0 + np.exp(-z))


COMPILED_ROWS = 256  # up to this many rows CompiledTrees is faster than scikit-learn's predict


class CompiledTrees:
    """A fitted binary ``HistGradientBoostingClassifier`` whose trees are flat arrays, walked
    for every tree at once: the same probabilities as its ``predict_proba(x)[:, 1]`` (the same
    branch rules, leaf values summed in the same order), without scikit-learn's per-tree call,
    which dominates for the few rows of one query (300 trees x 2 models a query).

    >>> from sklearn.ensemble import HistGradientBoostingClassifier
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(400, 3)); x[:, 2] = rng.integers(0, 5, 400); x[::7, 0] = np.nan
    >>> y = (np.nan_to_num(x[:, 0]) + (x[:, 2] == 3) > 0.5).astype(int)
    >>> model = HistGradientBoostingClassifier(categorical_features=[2], max_iter=20).fit(x, y)
    >>> bool((CompiledTrees(model).predict_proba1(x) == model.predict_proba(x)[:, 1]).all())
    True
    """

    def __init__(self, model: Any):
        if model.n_trees_per_iteration_ != 1:
            raise ValueError("CompiledTrees reads binary classifiers")
        trees = [p[0] for p in model._predictors]
        sizes = np.array([len(t.nodes) for t in trees])
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        bitset_sizes = np.array([len(t.raw_left_cat_bitsets) for t in trees])
        bitset_offsets = np.concatenate([[0], np.cumsum(bitset_sizes)[:-1]])
        nodes = np.concatenate([t.nodes for t in trees])
        shift = np.repeat(offsets, sizes)
        self.model = model
        self.roots = offsets.astype(np.intp)
        leaf = nodes["is_leaf"].astype(bool)
        here = np.arange(len(nodes), dtype=np.intp)
        # a leaf points to itself on both sides: walking on from a leaf stays there
        self.left = np.where(leaf, here, nodes["left"].astype(np.intp) + shift)
        self.right = np.where(leaf, here, nodes["right"].astype(np.intp) + shift)
        self.feature = np.where(leaf, 0, nodes["feature_idx"]).astype(np.intp)
        self.threshold = nodes["num_threshold"].astype(np.float64)
        self.missing_left = nodes["missing_go_to_left"].astype(bool)
        self.is_categorical = nodes["is_categorical"].astype(bool) & ~leaf
        self.is_leaf = leaf
        self.value = nodes["value"].astype(np.float64)
        self.bitset = nodes["bitset_idx"].astype(np.intp) + np.repeat(bitset_offsets, sizes)
        self.left_bitsets = np.concatenate([t.raw_left_cat_bitsets for t in trees]) if bitset_sizes.sum() \
            else np.zeros((1, 8), dtype=np.uint32)
        self.known_bitsets, self.f_idx_map = model._bin_mapper.make_known_categories_bitsets()
        self.depth = int(nodes["depth"].max())
        self.encoding = _ordinal_encoding(model)

    def predict_proba1(self, x: np.ndarray) -> np.ndarray:
        """P(class 1) of each row of ``x``."""
        x = self.encode(np.asarray(x, dtype=np.float64))
        n = len(x)
        at = np.broadcast_to(self.roots, (n, len(self.roots))).copy()
        rows = np.arange(n)[:, None]
        for _ in range(self.depth):
            if self.is_leaf[at].all():
                break
            value = x[rows, self.feature[at]]
            left = value <= self.threshold[at]
            missing = np.isnan(value)
            if missing.any():
                left[missing] = self.missing_left[at[missing]]
            categorical = self.is_categorical[at] & ~missing
            if categorical.any():
                node, c_value = at[categorical], value[categorical]
                out_of_range = c_value < 0
                code = np.where(out_of_range, 0, c_value).astype(np.int64).astype(np.uint8)
                word, bit = code // 32, (code % 32).astype(np.uint32)
                in_left = (self.left_bitsets[self.bitset[node], word] >> bit) & 1
                known = (self.known_bitsets[self.f_idx_map[self.feature[node]], word] >> bit) & 1
                as_missing = out_of_range | ((in_left == 0) & (known == 0))
                left[categorical] = np.where(as_missing, self.missing_left[node], in_left == 1)
            at = np.where(left, self.left[at], self.right[at])
        # the baseline, then tree by tree in order, as scikit-learn adds them (cumsum is sequential)
        terms = np.hstack([np.full((n, 1), float(self.model._baseline_prediction.ravel()[0])), self.value[at]])
        raw = np.cumsum(terms, axis=1)[:, -1:]
        return self.model._loss.predict_proba(np.asfortranarray(raw))[:, 1]

    def encode(self, x: np.ndarray) -> np.ndarray:
        """``x`` as the trees read it: what the model's own preprocessing gives (categorical
        columns first, as ordinal codes; an unknown category or NaN is NaN), without its
        per-call overhead."""
        if self.encoding is None:
            return self.model._preprocess_X(x, reset=False)
        categorical, numeric, categories = self.encoding
        out = np.empty((len(x), len(categorical) + len(numeric)))
        for j, (column, known) in enumerate(zip(categorical, categories)):
            v = x[:, column]
            if not len(known):
                out[:, j] = np.nan
                continue
            code = np.minimum(np.searchsorted(known, v), len(known) - 1)
            out[:, j] = np.where(known[code] == v, code, np.nan)
        out[:, len(categorical):] = x[:, numeric]
        return out


def _ordinal_encoding(model) -> tuple[list[int], list[int], list[np.ndarray]] | None:
    """(categorical columns, numeric columns, categories) of the model's preprocessing, or None
    when it is not the plain one this reproduces."""
    from sklearn.preprocessing import OrdinalEncoder

    pre = getattr(model, "_preprocessor", None)
    if pre is None:
        return None
    parts = {name: (transformer, np.flatnonzero(columns) if np.asarray(columns).dtype == bool
                    else np.asarray(columns)) for name, transformer, columns in pre.transformers_}
    encoder = parts.get("encoder", (None,))[0]
    if not isinstance(encoder, OrdinalEncoder) or set(parts) - {"encoder", "numerical", "remainder"} \
            or len(parts.get("remainder", (None, []))[1]) or not np.isnan(encoder.unknown_value) \
            or not np.isnan(encoder.encoded_missing_value):
        return None
    # NaN, when seen in training, is the last category; it is encoded as NaN all the same
    return (list(parts["encoder"][1]), list(parts.get("numerical", (None, []))[1]),
            [np.asarray(c, dtype=np.float64)[~np.isnan(np.asarray(c, dtype=np.float64))]
             for c in encoder.categories_])


@dataclass
class SavedModel:
    """A fitted boosted node scorer and everything needed to use and describe it."""

    node_model: Any  # HistGradientBoostingClassifier: node right (1) / wrong (0)
    site_model: Any | None  # HistGradientBoostingClassifier: error site (1) / not; a list of them
    # when the run bagged its site head (model.site_bags), their probabilities averaged
    calibrator: Calibrator | None  # raw node probability -> calibrated confidence
    query_calibrator: QueryCalibrator
    features: tuple[str, ...]  # the columns the models read, in order
    typical: dict[str, dict[str, float]]  # node kind group -> feature -> typical value (reasons)
    info: dict[str, Any] = field(default_factory=dict)  # trained_on, metrics, config, ...
    # For rows scored without a database, when the model was trained for both (model.database=
    # dropout|both): the node and whole-query calibrators fitted on out-of-fold scores without one
    without_database: tuple[Calibrator | None, QueryCalibrator] | None = None
    _compiled: dict[int, CompiledTrees | None] = field(default_factory=dict, repr=False, compare=False)

    @property
    def feature_version(self) -> str:
        return self.info.get("feature_version", "")

    @property
    def quantiles(self):
        """The reference its count features are read against (``model.quantiles``: the training
        run's nodes; a ``Quantiles``), or None when it reads them as they are."""
        if "quantiles" not in self.info:
            return None
        from model.nodes.quantiles import Quantiles

        return Quantiles.from_dict(self.info["quantiles"])

    def node_confidence(self, x: np.ndarray, database: bool = True) -> np.ndarray:
        """Calibrated confidences of feature rows ``x`` (nodes, features); ``database``: whether
        the rows were computed with the query's database (it picks the calibrator)."""
        return self.calibrate(self._probability(self.node_model, x), database)

    def calibrate(self, raw: np.ndarray, database: bool = True) -> np.ndarray:
        calibrator = self.calibrator if database or self.without_database is None else self.without_database[0]
        return calibrator.confidence(raw) if calibrator is not None else raw

    def confidences(self, raw: np.ndarray, database: bool = True) -> tuple[np.ndarray, float]:
        """One query's calibrated node confidences (post-order) and whole-query confidence from
        its nodes' raw probabilities."""
        conf = self.calibrate(raw, database)
        return conf, float(self.query_calibrator_for(database).confidence(np.array([query_aggregates(conf)]))[0])

    def raw_node_probability(self, x: np.ndarray) -> np.ndarray:
        return self._probability(self.node_model, x)

    def query_calibrator_for(self, database: bool) -> QueryCalibrator:
        return self.query_calibrator if database or self.without_database is None else self.without_database[1]

    @property
    def site_context(self) -> bool:
        """Whether the site head reads the node model's confidences around each node
        (``model.nodes.sites``) beside the node's features."""
        return bool(self.info.get("config", {}).get("site_context", False))

    def site_score(self, x: np.ndarray, raw: np.ndarray | None = None,
                   arities: Sequence[Sequence[int]] | None = None) -> np.ndarray:
        """Site scores of feature rows ``x``; a head that reads context needs the node model's
        raw probabilities of the same rows and the trees' ``arities`` (stacked in order)."""
        if self.site_model is None:
            return np.full(len(x), np.nan)
        if self.site_context:
            from model.nodes.sites import with_context

            if raw is None or arities is None:
                raise ValueError("this site head reads the node model's confidences: pass raw and arities")
            x = with_context(x, raw, arities, self.features)
        from model.nodes.boosted import site_probability

        return site_probability(self.site_model, x, self._probability)

    def _probability(self, model: Any, x: np.ndarray) -> np.ndarray:
        """``model.predict_proba(x)[:, 1]``; the same numbers from ``CompiledTrees`` for the few
        rows of a query or two, where scikit-learn's per-tree calls are the cost."""
        if id(model) not in self._compiled:
            try:  # it reads scikit-learn's private tree arrays: another version may lay them out otherwise
                self._compiled[id(model)] = CompiledTrees(model)
            except (AttributeError, KeyError, TypeError, ValueError, IndexError):
                self._compiled[id(model)] = None
        compiled = self._compiled[id(model)]
        if compiled is None or len(x) > COMPILED_ROWS:
            return model.predict_proba(x)[:, 1]
        return compiled.predict_proba1(x)

    # ------------------------------------------------------------------------- files

    def save(self, folder: str | Path) -> Path:
        import skops.io as sio

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        sio.dump(self.node_model, folder / "node_model.skops")
        if self.site_model is not None:
            sio.dump(self.site_model, folder / "site_model.skops")
        write_json(folder / "model.json", {
            "format": FORMAT, "format_version": FORMAT_VERSION, **self.info,
            "features": list(self.features),
            "calibrator": self.calibrator.to_dict() if self.calibrator is not None else None,
            "query_calibrator": {"features": list(QUERY_FEATURES), "coef": self.query_calibrator.coef,
                                 "intercept": self.query_calibrator.intercept},
            "typical": self.typical,
            **({"without_database": {
                "calibrator": self.without_database[0].to_dict() if self.without_database[0] is not None else None,
                "query_calibrator": {"features": list(QUERY_FEATURES), "coef": self.without_database[1].coef,
                                     "intercept": self.without_database[1].intercept}}}
               if self.without_database is not None else {}),
        })
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> SavedModel:
        """Read a model directory; ``ModelFileError`` (one line) when it cannot be used."""
        from model.nodes.features import VERSION

        folder = Path(folder)
        meta_path = folder / "model.json"
        if not meta_path.is_file():
            raise ModelFileError(f"{folder}: no model.json (expected a directory written by a "
                                 "model=features run, <run>/model)")
        try:
            meta = json.loads(meta_path.read_text())
        except json.JSONDecodeError as e:
            raise ModelFileError(f"{meta_path}: not valid JSON ({e.msg}, line {e.lineno})") from None
        if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
            raise ModelFileError(f"{meta_path}: not a {FORMAT} of format version {FORMAT_VERSION} "
                                 f"(found {meta.get('format')!r} version {meta.get('format_version')!r})")
        if meta.get("feature_version") != VERSION:
            raise ModelFileError(
                f"{folder}: saved with node features {meta.get('feature_version')!r}, this version "
                f"computes {VERSION!r}; retrain it (python train.py model=features ...)")
        node_model = _load_skops(folder / "node_model.skops")
        site_path = folder / "site_model.skops"
        site_model = _load_skops(site_path) if site_path.is_file() else None
        qc = meta.pop("query_calibrator")
        if qc.get("features") != list(QUERY_FEATURES):
            raise ModelFileError(f"{meta_path}: whole-query calibrator reads {qc.get('features')}, this "
                                 f"version {list(QUERY_FEATURES)}; retrain it")
        without = meta.pop("without_database", None)
        if without is not None:
            wq = without["query_calibrator"]
            if wq.get("features") != list(QUERY_FEATURES):
                raise ModelFileError(f"{meta_path}: whole-query calibrator reads {wq.get('features')}, this "
                                     f"version {list(QUERY_FEATURES)}; retrain it")
            without = (load_calibrator(without["calibrator"]) if without.get("calibrator") else None,
                       QueryCalibrator(wq["coef"], wq["intercept"]))
        info = {k: v for k, v in meta.items() if k not in ("features", "calibrator", "typical")}
        return cls(node_model, site_model,
                   load_calibrator(meta["calibrator"]) if meta.get("calibrator") else None,
                   QueryCalibrator(qc["coef"], qc["intercept"]), tuple(meta["features"]),
                   meta.get("typical", {}), info, without)


def _load_skops(path: Path):
    import skops.io as sio

    if not path.is_file():
        raise ModelFileError(f"{path}: missing")
    try:
        untrusted = sio.get_untrusted_types(file=path)
    except Exception as e:  # noqa: BLE001  (a damaged or foreign file: skops raises several kinds)
        raise ModelFileError(f"{path}: not a readable skops file ({type(e).__name__})") from None
    refused = sorted(set(untrusted) - set(TRUSTED_TYPES))
    if refused:
        raise ModelFileError(f"{path}: refers to types this project does not trust: {', '.join(refused)}")
    return sio.load(path, trusted=list(untrusted))


# ---------------------------------------------------------------------------------------------
# Fitting the final model of a run


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


def fit_saved_model(table, indices: Sequence[int], config, oof_raw: dict[int, np.ndarray],
                    oof_conf: dict[int, np.ndarray], fold_of: dict[int, int], metrics: dict,
                    seed: int = 0, without_database: tuple[dict, dict, dict] | None = None,
                    side: Sequence[int] = ()) -> tuple[SavedModel, dict[str, float]]:
    """The final model of a run: node and site models fitted on every labelled example in
    ``indices``, the node calibrator on the run's out-of-fold raw scores, the whole-query
    calibrator on its out-of-fold confidences. Returns the model and the whole-query
    calibrator's own out-of-fold metrics (fitted on the other folds, applied to each).
    ``without_database``: (out-of-fold raw scores, confidences, metrics) of the same folds
    scored without databases, for a model trained for both: its second pair of calibrators.
    ``side``: examples of ``model.train_predictions`` (``model.train_side``: the site head learns
    from them, and with ``all`` the node model too)."""
    from model.nodes.boosted import (
        fit_node_model,
        fit_site_head,
        inner_out_of_fold,
        join_rows,
        row_groups,
        training_rows,
    )
    from model.nodes.features import VERSION

    side = list(side) if config.train_side != "none" else []
    node_rows = list(indices) + (side if config.train_side == "all" else [])
    x, y, sites = training_rows(table, node_rows, config, seed)
    node_model = fit_node_model(x, y, table.names, config, seed)
    raw = None
    if config.site_context and config.site_head:
        raw = _training_raw(node_rows, config, oof_raw, without_database, seed)
        if raw is None:  # examples the run did not score out of fold (train_side=all): fit again
            raw = inner_out_of_fold(x, y, row_groups(table, node_rows, len(x)), table.names, config, seed)
    site_rows = node_rows
    if config.train_side == "site" and side:  # databases the node model never saw
        xs, _, sites_side = training_rows(table, side, config, seed + 1)
        n = 2 if config.database == "both" else 1
        site_rows, x, sites = node_rows + side, join_rows(x, xs, n), join_rows(sites, sites_side, n)
        raw = join_rows(raw, node_model.predict_proba(xs)[:, 1], n) if raw is not None else None
    site_model = fit_site_head(table, site_rows, x, sites, table.names, config, seed, raw)
    calibrator, query_calibrator, query_metrics = _calibrators(table, indices, config, oof_raw, oof_conf, fold_of)
    without = None
    out_of_fold = {**metrics, **{f"test/calibrated_{k}": v for k, v in query_metrics.items()}}
    all_metrics = {"out_of_fold": out_of_fold}
    if without_database is not None:
        raw2, conf2, metrics2 = without_database
        cal2, qcal2, qmetrics2 = _calibrators(table, indices, config, raw2, conf2, fold_of)
        without = (cal2, qcal2)
        all_metrics["out_of_fold_without_database"] = {
            **metrics2, **{f"test/calibrated_{k}": v for k, v in qmetrics2.items()}}
    x_plain, y_plain, _ = table.stack(indices)  # every node once, as computed
    node_types = [t for k in indices for t in table.examples[k].node_types]
    examples = [table.examples[k] for k in indices]
    info = {
        "feature_version": VERSION, "created": date.today().isoformat(),
        "method": config.method,
        "config": {"groups": config.groups, "lm": config.lm, "calibration": config.calibration,
                   "hgb": config.hgb, "site_hgb": config.site_hgb, "site_bags": config.site_bags,
                   "monotone": config.monotone, "site_monotone": config.site_monotone,
                   "quantiles": config.quantiles,
                   "drop": list(config.drop),
                   "database": config.database,
                   "test_database": config.test_database, "site_context": config.site_context,
                   "site_labels": config.site_labels,
                   "site_wrong_only": config.site_wrong_only, "train_side": config.train_side,
                   "train_predictions": config.train_predictions if side else None},
        "trained_on": {"data_root": table.root.name, "labels": table.labels, "examples": len(examples),
                       "nodes": len(y_plain),
                       "questions": len({e.question_id for e in examples}),
                       "databases": len({e.db_id for e in examples}),
                       "systems": dict(sorted(Counter(e.system for e in examples).items())),
                       "correct_queries": int(sum(e.correct for e in examples)),
                       "correct_nodes": int(y_plain.sum()),
                       "digest": data_digest(examples),
                       "train_side_examples": len(side)},
        # test/query_auc: the least confident node's; test/calibrated_query_*: the calibrated
        # whole-query confidence's (cross-fitted over the same folds)
        "metrics": all_metrics,
    }
    if table.quantiles is not None:  # what new queries' counts are read against (model.quantiles)
        info["quantiles"] = table.quantiles.to_dict()
    saved = SavedModel(node_model, site_model, calibrator, query_calibrator, tuple(table.names),
                       typical_values(x_plain, y_plain, node_types, table.names), info, without)
    return saved, query_metrics


def _training_raw(indices: Sequence[int], config, oof_raw: dict, without_database: tuple | None,
                  seed: int) -> np.ndarray | None:
    """The run's out-of-fold node probabilities of the final model's training rows
    (``training_rows``), for its site head: scored without a database where those rows are
    (``model.database=dropout|both``). None when some example has none."""
    from model.nodes.boosted import dropped_database

    if not config.site_context or any(k not in oof_raw for k in indices):
        return None
    with_db = [oof_raw[k] for k in indices]
    if config.database not in ("dropout", "both") or without_database is None:
        return np.concatenate(with_db)
    raw2 = without_database[0]
    if any(k not in raw2 for k in indices):
        return None
    if config.database == "both":
        return np.concatenate(with_db + [raw2[k] for k in indices])
    blank = dropped_database(len(indices), seed)
    return np.concatenate([raw2[k] if b else r for k, r, b in zip(indices, with_db, blank)])


def _calibrators(table, indices: Sequence[int], config, oof_raw: dict, oof_conf: dict, fold_of: dict
                 ) -> tuple[Calibrator | None, QueryCalibrator, dict[str, float]]:
    """The node calibrator (out-of-fold raw scores -> labels), the whole-query calibrator
    (out-of-fold confidences -> correct) and the latter's own cross-fitted metrics."""
    from model import metrics as M
    from model.calibrators import fit_calibrator

    oof = [k for k in indices if k in oof_raw]
    raw = np.concatenate([oof_raw[k] for k in oof]) if oof else np.zeros(0)
    labels = np.concatenate([table.examples[k].node_labels for k in oof]) if oof else np.zeros(0)
    calibrator = fit_calibrator(config.calibration, raw, labels)
    aggregates = np.array([query_aggregates(oof_conf[k]) for k in oof]).reshape(-1, len(QUERY_FEATURES))
    query_labels = np.array([int(table.examples[k].correct) for k in oof])
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
    query_calibrator = QueryCalibrator.fit(aggregates, query_labels) if len(oof) else QueryCalibrator(
        [0.0] * len(QUERY_FEATURES), 0.0)
    return calibrator, query_calibrator, query_metrics
