"""Boosted-tree node scorer: gradient-boosted trees over the cheap node features of
``model.nodes.features``, trained on real systems' outputs with execution labels.

    python train.py model=features                                   # demo corpus, seconds
    python train.py model=features data=spider data.root=../shared/data/spider data.protocol=crossfit
    python train.py model=features model.groups=single+consensus ... # consensus track
    python train.py model=features model.stack=<neural run>/predictions/test.jsonl ...  # stacked
    python train.py model=features model.stack=... model.stack_into=site ...  # site head only

Protocols (``cfg.data.protocol``): ``split`` divides the eval split's databases into train /
val / test once (``model.nodes.datamodule.split_databases``); ``crossfit`` puts them into
``cfg.data.folds`` schema-disjoint folds and, for fold i, trains on the other folds but the next,
calibrates on the next (``model.data.folds.crossfit_roles``) and predicts fold i, so every
example gets an out-of-fold confidence. A second model trained on error-site labels
(``model.eval.localisation.error_sites``) writes ``site_scores`` per node: the site head of
``model.nodes.sites``, which reads the node model's out-of-fold confidences around each node.

The run directory receives ``predictions/{val,test}.jsonl`` (``model.nodes.outputs`` rows with
``site_scores``, ``fold`` and ``method``), ``metrics.json``, ``config.yaml``/``config.json``
and ``data.json`` (databases per fold), as ``train.py`` does for the neural model.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from model import metrics as M
from model.data.jsonl import write_json
from model.eval.localisation import error_sites, localisation
from model.nodes.features import build_features, categorical_mask

if TYPE_CHECKING:
    from omegaconf import DictConfig

GROUP_CHOICES = ("single", "single+consensus")
DATABASE_MODES = ("with", "without", "dropout", "both")
TRAIN_SIDE_CHOICES = ("none", "site", "all", "auto")
SITE_MONOTONE_CHOICES = ("none", "context", "all")


@dataclass
class BoostedConfig:
    """What ``conf/model/features.yaml`` sets (see there for the meaning of each)."""

    groups: str = "single"  # single | single+consensus (the consensus track)
    site_head: bool = True  # also fit a model of error-site labels -> site_scores
    site_context: bool = True  # it reads the node model's out-of-fold confidences around each node
    site_wrong_only: bool = True  # it learns from the nodes of wrong queries only
    site_labels: str = "execution"  # execution | tree: the sites it learns are those of the node
    # labels, or also those of tree labels (where a query right by execution is written unlike gold)
    inner_folds: int = 3  # folds of the training databases that give those confidences
    train_side: str = "none"  # none | site | all: which models also learn from train_predictions;
    # auto: all where train_predictions names files, else none
    train_predictions: str | list[str] | None = None  # outputs on data.train_split's questions (globs,
    # id-keyed JSONL), on databases disjoint from the eval split's: a code LLM's answers, SPLASH's
    calibration: str = "platt"  # platt | isotonic | none, fitted on the validation databases
    hgb: dict[str, Any] = field(default_factory=lambda: {
        "learning_rate": 0.05, "max_iter": 300, "max_leaf_nodes": 31, "min_samples_leaf": 40,
        "l2_regularization": 1.0})
    site_hgb: dict[str, Any] | None = None  # the site head's own HGB settings (None: hgb's)
    site_bags: int = 1  # > 1: the site head is that many models, each fitted on a bootstrap draw
    # of the wrong queries, their probabilities averaged
    monotone: bool = False  # the node model's confidence follows each feature's known direction
    site_monotone: str = "none"  # none | context | all: the site head's chance of a site moves with
    # its context as a site would (model.nodes.sites.CONTEXT_DIRECTION); all: also against each
    # feature's known direction (a likely wrong node is a likely site)
    quantiles: bool = False  # the shifted count features read as quantiles among the run's nodes
    # (model.nodes.quantiles: what a saved model keeps, and reads new queries against)
    feature_timeout_s: float = 5.0
    use_cache: bool = True
    lm: bool | str = False  # scorer-LM log-probabilities over node spans (features group lm):
    # true = the packaged SmolLM2, or a scorer LM's name (qwen_coder) / path
    drop: tuple[str, ...] = ()  # feature names (or group names) left out, for ablations
    stack: str | None = None  # a neural run's out-of-fold predictions: its node logit becomes a feature
    stack_into: str = "both"  # both | site: which models read that feature (site: the site head
    # only; the node model fits as if the column were missing)
    save_model: bool = True  # fit a final model on all labelled predictions -> <run>/model/
    database: str = "with"  # with | without | dropout | both: the database features
    # (DATABASE_FEATURES) as computed, always missing (a database-free model), missing for a
    # random half of the training queries, or every training query twice, with and without them
    # (dropout and both: one model for scoring with and without a database)
    test_database: bool = True  # false: validate and test with the database features missing

    @classmethod
    def from_cfg(cls, model_cfg) -> BoostedConfig:
        from omegaconf import DictConfig, OmegaConf  # [train]: the scorer never calls this

        from model.cli import UsageError  # a mistake in the model config: one line, exit 2

        values = OmegaConf.to_container(model_cfg, resolve=True) if isinstance(model_cfg, DictConfig) \
            else dict(model_cfg)
        known = {k: values[k] for k in cls.__dataclass_fields__ if k in values}
        known["drop"] = tuple(known.get("drop") or ())
        config = cls(**known)
        if config.groups not in GROUP_CHOICES:
            raise UsageError(f"model.groups must be one of {GROUP_CHOICES}; found {config.groups!r}")
        if config.database not in DATABASE_MODES:
            raise UsageError(f"model.database must be one of {DATABASE_MODES}; found {config.database!r}")
        if config.train_side not in TRAIN_SIDE_CHOICES:
            raise UsageError(f"model.train_side must be one of {TRAIN_SIDE_CHOICES}; found {config.train_side!r}")
        if config.train_side == "auto":
            config.train_side = "all" if config.train_predictions else "none"
        if config.site_labels not in ("execution", "tree"):
            raise UsageError(f"model.site_labels must be execution or tree; found {config.site_labels!r}")
        if config.site_bags < 1:
            raise UsageError(f"model.site_bags must be 1 or more; found {config.site_bags!r}")
        for name in ("monotone", "quantiles"):
            if not isinstance(getattr(config, name), bool):
                raise UsageError(f"model.{name} must be true or false; found {getattr(config, name)!r}")
        if config.site_monotone is True or config.site_monotone is False:  # model.site_monotone=true|false
            config.site_monotone = "all" if config.site_monotone else "none"
        if config.site_monotone not in SITE_MONOTONE_CHOICES:
            raise UsageError(f"model.site_monotone must be one of {SITE_MONOTONE_CHOICES}; found {config.site_monotone!r}")
        if config.stack_into not in ("both", "site"):
            raise UsageError(f"model.stack_into must be both or site; found {config.stack_into!r}")
        if config.calibration not in ("platt", "isotonic", "none"):
            raise UsageError(f"model.calibration must be platt, isotonic or none; found {config.calibration!r}")
        return config

    def node_hgb(self, names: Sequence[str]) -> dict[str, Any]:
        """The node model's HGB settings for feature columns ``names``: ``hgb``, and with
        ``monotone`` each feature's direction (``Feature.direction``) as a monotonic constraint."""
        if not self.monotone:
            return self.hgb
        from model.nodes.features import FEATURES

        direction = {f.name: f.direction for f in FEATURES}
        return {**self.hgb, "monotonic_cst": [direction.get(n, 0) for n in names]}

    def site_head_hgb(self, names: Sequence[str]) -> dict[str, Any]:
        """The site head's HGB settings for columns ``names`` (features, then context): ``site_hgb``
        or ``hgb``, and with ``site_monotone`` monotonic constraints: each context column's
        ``CONTEXT_DIRECTION`` (``context``), and each feature's direction reversed (``all``)."""
        hgb = self.site_hgb or self.hgb
        if self.site_monotone in ("none", False, None):
            return hgb
        from model.nodes.features import FEATURES
        from model.nodes.sites import CONTEXT_DIRECTION

        direction = dict(CONTEXT_DIRECTION)
        if self.site_monotone in ("all", True):
            direction |= {f.name: -f.direction for f in FEATURES}
        return {**hgb, "monotonic_cst": [direction.get(n, 0) for n in names]}

    @property
    def consensus(self) -> bool:
        return self.groups == "single+consensus"

    @property
    def method(self) -> str:
        """The method name evaluate.py shows: the consensus track says so."""
        stacked = " + neural" if self.stack else ""
        track = "consensus" if self.consensus else "single-system"
        return f"boosted node features{stacked} ({track})"


# ---------------------------------------------------------------------------------------------
# Data


@dataclass
class NodeTable:
    """Examples with their feature matrices, and node-level arrays stacked over examples."""

    examples: list
    features: list[np.ndarray]  # per example: (nodes, features)
    names: tuple[str, ...]
    root: Path
    train_side: int = 0  # the last ``train_side`` examples come from model.train_predictions and
    # the perturbations (data.use_perturbations): they only ever train, never validate or test
    # (those on an eval-split database only the folds in which it trains: fold_roles)
    site_labels: str = "execution"  # model.site_labels: "tree" adds the sites of tree labels
    quantiles: Any = None  # model.quantiles: the reference (Quantiles) the features were read against
    labels: str = "execution"  # the node labels: execution (against a database) or tree (by comparison with gold)

    @property
    def side_indices(self) -> list[int]:
        return list(range(len(self.examples) - self.train_side, len(self.examples)))

    def stack(self, indices: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(X, node labels, error-site labels) of the examples ``indices``."""
        x = np.vstack([self.features[k] for k in indices])
        y = np.concatenate([self.examples[k].node_labels for k in indices]).astype(int)
        sites = np.concatenate([self.sites(self.examples[k]) for k in indices]).astype(int)
        return x, y, sites

    def sites(self, example) -> np.ndarray:
        """An example's error sites (``model.eval.localisation.error_sites``) of its node labels,
        with ``site_labels="tree"`` also those of its tree labels: a query that runs to gold's
        result but is written unlike gold has sites too, where an equivalent query departs."""
        sites = np.asarray(error_sites(example.node_labels, example.node_arity))
        if self.site_labels == "tree" and example.tree_labels is not None:
            sites = np.maximum(sites, error_sites(example.tree_labels, example.node_arity))
        return sites


def load_table(data_cfg, config: BoostedConfig, progress: bool = True) -> NodeTable:
    """Examples of the eval split's predictions (labelled as ``data.labels`` says: by execution
    where there is a database, or by tree comparison) and their features."""
    from model.data.datasets import database_path, load_schemas
    from model.nodes.datamodule import NodeDataModule
    from model.nodes.examples import build_examples

    source = NodeDataModule(root=data_cfg.get("root"), predictions=data_cfg.get("predictions"))
    root, files = source.root, source.prediction_files()
    if not files:
        raise FileNotFoundError(f"the boosted scorer learns from real predictions; none found for {root}")
    with_databases = data_cfg.get("require_database", True)
    labels = data_cfg.get("labels", "execution")
    if labels == "sites":
        from model.cli import UsageError

        raise UsageError("data.labels=sites trains the neural node model on where wrong queries are wrong; "
                         "the boosted scorer learns sites in its site head (model.site_head): use execution or tree")
    examples, _ = build_examples(root, data_cfg.get("eval_split", "dev"), prediction_files=files,
                                 max_questions=data_cfg.get("max_questions"), require_database=with_databases,
                                 evidence=data_cfg.get("evidence", False), labels=labels)
    side = []
    # The train side: real outputs on the train split (model.train_predictions) and, with
    # data.use_perturbations, data.train_perturbations perturbations of each train gold query
    # (model.synth.perturb: wrong queries whose edit site is known by construction).
    perturbations = data_cfg.get("train_perturbations", 0) if data_cfg.get("use_perturbations") else 0
    eval_perturbations = data_cfg.get("eval_perturbations", 0) if data_cfg.get("use_perturbations") else 0
    if config.train_side != "none" and data_cfg.get("train_split") and (config.train_predictions or perturbations):
        side_files = source.prediction_files(config.train_predictions, default=False) \
            if config.train_predictions else []
        side, _ = build_examples(root, data_cfg.get("train_split"), prediction_files=side_files,
                                 perturbations_per_query=perturbations, seed=data_cfg.get("seed", 0),
                                 max_questions=data_cfg.get("max_questions"), require_database=with_databases,
                                 evidence=data_cfg.get("evidence", False), labels=labels)
        overlap = {e.db_id for e in side} & {e.db_id for e in examples}
        side = [e for e in side if e.db_id not in overlap]  # never a database the eval split tests on
        if progress:
            print(f"train side ({data_cfg.get('train_split')}): {len(side)} examples from "
                  f"{len(side_files)} files and {perturbations} perturbation(s) a question"
                  f"{f', {len(overlap)} shared databases left out' if overlap else ''}",
                  flush=True)
    if config.train_side != "none" and eval_perturbations:
        # data.eval_perturbations perturbations of each eval-split gold query: on the eval split's
        # databases, so each trains only the folds in which its database trains (fold_roles)
        perturbed, _ = build_examples(root, data_cfg.get("eval_split", "dev"),
                                      perturbations_per_query=eval_perturbations, seed=data_cfg.get("seed", 0),
                                      max_questions=data_cfg.get("max_questions"), require_database=with_databases,
                                      evidence=data_cfg.get("evidence", False), labels=labels)
        side = list(side) + perturbed
        if progress:
            print(f"eval side ({data_cfg.get('eval_split', 'dev')}): {len(perturbed)} perturbations, "
                  f"{eval_perturbations} a question, each training the folds its database trains in", flush=True)
    if with_databases and labels == "execution":  # execution labels; else (BIRD here: no databases,
        examples = [e for e in examples if e.execution_match is not None]  # or data.labels=tree) tree labels
        side = [e for e in side if e.execution_match is not None]
    examples = list(examples) + list(side)
    schemas = load_schemas(root)
    db_paths = {db: database_path(root, db) for db in {e.db_id for e in examples}}
    # a database-free model's consensus columns are what a user without databases gets: the
    # other answers compared by tree, not by result
    features, names, report = build_features(examples, schemas, db_paths, consensus=config.consensus,
                                             consensus_by_result=config.database != "without",
                                             use_cache=config.use_cache,
                                             timeout_s=config.feature_timeout_s, progress=progress,
                                             lm=config.lm)
    if progress:
        print(report, flush=True)
    if config.stack:
        features, names = stack_neural(examples, features, names, Path(config.stack), progress)
    if config.drop:
        features, names = drop_columns(features, names, config.drop)
    quantiles = None
    if config.quantiles:  # every node of the run is the reference (features only, no labels)
        from model.nodes.quantiles import Quantiles

        quantiles = Quantiles.fit(np.vstack(features), names)
        features = [quantiles.transform(x, names) for x in features]
    return NodeTable(examples, features, names, root, train_side=len(side), site_labels=config.site_labels,
                     quantiles=quantiles, labels="execution" if with_databases and labels == "execution" else "tree")


def drop_columns(features: list[np.ndarray], names: tuple[str, ...], drop: Sequence[str]
                 ) -> tuple[list[np.ndarray], tuple[str, ...]]:
    """Leave out the named features, every feature of a named group, or of a named set
    (``FEATURE_SETS``: ``database``, ``benchmark_size``) (``model.drop``)."""
    from model.nodes.features import FEATURE_SETS, FEATURES

    group_of = {f.name: f.group for f in FEATURES}
    unknown = [d for d in drop if d not in names and d not in group_of.values() and d not in FEATURE_SETS]
    if unknown:
        raise ValueError(f"model.drop: unknown feature or group {unknown}; features are listed in "
                         "docs/node_features.md")
    in_sets = {n for d in drop for n in FEATURE_SETS.get(d, ())}
    keep = np.array([n not in drop and group_of.get(n) not in drop and n not in in_sets for n in names])
    return [x[:, keep] for x in features], tuple(n for n, k in zip(names, keep) if k)


STACK_FEATURE = "neural_logit"


def stack_neural(examples: list, features: list[np.ndarray], names: tuple[str, ...], path: Path,
                 progress: bool = True) -> tuple[list[np.ndarray], tuple[str, ...]]:
    """Append the neural node model's out-of-fold node logit (from its ``predictions/test.jsonl``)
    as a feature; an example the file does not cover, or covers with another tree, gets NaN."""
    from model.nodes.outputs import read_predictions

    if not path.is_file():
        raise FileNotFoundError(f"model.stack={path}: no such predictions file")
    rows = {(r["question_id"], r["system"]): r for r in read_predictions(path)}
    out, matched = [], 0
    for e, x in zip(examples, features):
        row = rows.get((e.question_id, e.system))
        column = np.full((len(x), 1), np.nan)
        if row is not None and row.get("node_names") == list(e.node_names):
            p = np.clip(np.asarray(row["node_confidences"], dtype=float), 1e-6, 1 - 1e-6)
            column[:, 0] = np.log(p / (1 - p))
            matched += 1
        out.append(np.hstack([x, column]))
    if progress:
        print(f"stacked {path}: neural logits for {matched} of {len(examples)} examples", flush=True)
    return out, (*names, STACK_FEATURE)


def fold_roles(table: NodeTable, data_cfg) -> tuple[list[dict[str, list[int]]], dict[str, Any]]:
    """Per fold, the example indices that train, validate and test; and the databases of each
    fold (for data.json)."""
    from model.data.folds import crossfit_roles, schema_disjoint_folds
    from model.nodes.datamodule import split_databases

    side = table.side_indices
    db_ids = [e.db_id for e in table.examples[:len(table.examples) - table.train_side]]
    protocol = data_cfg.get("protocol", "split")
    seed = data_cfg.get("split_seed", 0)
    if protocol == "crossfit":
        k = int(data_cfg.get("folds", 5))
        fold_of = schema_disjoint_folds(db_ids, k, seed)
        roles = []
        for i in range(k):
            role = crossfit_roles(i, k)
            roles.append({name: [j for j, f in enumerate(fold_of) if f in folds]
                          for name, folds in role.items()})
        dbs = {str(i): sorted({db for db, f in zip(db_ids, fold_of) if f == i}) for i in range(k)}
        info = {"protocol": "crossfit", "folds": dbs}
    elif protocol == "split":
        split = split_databases(Counter(db_ids), data_cfg.get("val_fraction", 0.2),
                                data_cfg.get("test_fraction", 0.3), seed)
        roles = [{name: [j for j, db in enumerate(db_ids) if split[db] == name]
                  for name in ("train", "val", "test")}]
        info = {"protocol": "split", "db_split": split}
    else:
        raise ValueError(f"data.protocol must be split or crossfit; found {protocol!r}")
    if holdout := data_cfg.get("holdout_system"):
        roles, info = hold_out_system(table, roles, holdout), {**info, "holdout_system": holdout}
    if side:  # model.train_predictions (other databases): training examples of every fold; those
        # on an eval-split database (data.eval_perturbations) of the folds in which it trains
        evaluated = set(db_ids)
        trains = [{db_ids[j] for j in role["train"]} for role in roles]
        roles = [{**role, "side": [k for k in side if table.examples[k].db_id not in evaluated
                                   or table.examples[k].db_id in dbs]} for role, dbs in zip(roles, trains)]
        info = {**info, "train_side": {"examples": len(side), "databases": len({table.examples[k].db_id for k in side})}}
    return roles, info


def hold_out_system(table: NodeTable, roles: list[dict[str, list[int]]], system: str
                    ) -> list[dict[str, list[int]]]:
    """Leave one system out (``data.holdout_system``): train and validate without its outputs,
    test on its outputs only. The other systems' agreement features still count its trees, as
    they would count a new system's outputs at deployment."""
    from model.data.folds import check_holdout_system, holdout_keeps

    check_holdout_system(system, [e.system for e in table.examples])
    return [{name: [j for j in role[name] if holdout_keeps(table.examples[j].system, name, system)]
             for name in role} for role in roles]


# ---------------------------------------------------------------------------------------------
# Models


def fit_classifier(x: np.ndarray, y: np.ndarray, names: Sequence[str], hgb: dict, seed: int = 0,
                   sample_weight: np.ndarray | None = None):
    """A HistGradientBoostingClassifier with the categorical node kinds declared. A column that is
    missing in every training row (no database, an unstacked fold) is set constant for the fit:
    scikit-learn's binning fails on an all-NaN column, and a constant one is never split on."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    empty = np.isnan(x).all(axis=0) if len(x) else np.zeros(x.shape[1], dtype=bool)
    if empty.any():
        x = x.copy()
        x[:, empty] = 0.0
    model = HistGradientBoostingClassifier(categorical_features=categorical_mask(names),
                                           random_state=seed, early_stopping=False, **hgb)
    return model.fit(x, y, sample_weight=sample_weight)


def fit_node_model(x: np.ndarray, y: np.ndarray, names: Sequence[str], config: BoostedConfig, seed: int = 0):
    """The node model on rows ``x`` (columns ``names``), with ``config.node_hgb``. With
    ``model.stack_into=site`` the stacked neural logit is left out of the fit (set missing, so
    never split on): only the site head reads it."""
    if config.stack and config.stack_into == "site" and STACK_FEATURE in names:
        x = x.copy()
        x[:, list(names).index(STACK_FEATURE)] = np.nan
    return fit_classifier(x, y, names, config.node_hgb(names), seed)


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


def training_rows(table: NodeTable, indices: Sequence[int], config: BoostedConfig, seed: int = 0
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``table.stack(indices)`` with the database features as ``model.database`` trains them."""
    x, y, sites = table.stack(indices)
    if config.database == "without":
        x = without_database(x, table.names)
    elif config.database == "dropout":  # a random half of the queries, all their nodes
        sizes = [len(table.examples[k].node_labels) for k in indices]
        blank = dropped_database(len(indices), seed)
        x = without_database(x, table.names, np.flatnonzero(np.repeat(blank, sizes)))
    elif config.database == "both":
        x, y, sites = np.vstack([x, without_database(x, table.names)]), np.tile(y, 2), np.tile(sites, 2)
    return x, y, sites


def scored_rows(table: NodeTable, indices: Sequence[int], config: BoostedConfig) -> tuple[np.ndarray, np.ndarray]:
    """(X, node labels) of ``indices`` as a fold validates and tests them: without the database
    features for a database-free model or ``model.test_database=false``."""
    x, y, _ = table.stack(indices)
    if config.database == "without" or not config.test_database:
        x = without_database(x, table.names)
    return x, y


def _split_rows(values: np.ndarray, table: NodeTable, indices: Sequence[int]) -> list[np.ndarray]:
    sizes = [len(table.examples[k].node_labels) for k in indices]
    return np.split(values, np.cumsum(sizes)[:-1])


def site_head_rows(table: NodeTable, indices: Sequence[int], x: np.ndarray, sites: np.ndarray,
                   names: Sequence[str], config: BoostedConfig, raw: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    """What the site head learns from: (rows, site labels, rows per query, column names) of the
    training rows ``x`` of the examples ``indices`` (``training_rows``; ``model.database=both``
    repeats them), with ``config.site_context`` the context read from ``raw`` (the node model's
    out-of-fold probabilities of those rows), with ``config.site_wrong_only`` wrong queries only."""
    from model.nodes.sites import context_names, with_context

    sizes = np.array([len(table.examples[k].node_labels) for k in indices])
    repeat = len(x) // max(int(sizes.sum()), 1)
    sizes = np.tile(sizes, repeat)
    names = tuple(names)
    if config.site_context:
        if raw is None or len(raw) != len(x):
            raise ValueError("the site head reads the node model's out-of-fold probabilities of its rows")
        x = with_context(x, raw, [table.examples[k].node_arity for k in indices] * repeat, names)
        names = (*names, *context_names(names))
    if config.site_wrong_only:
        wrong = np.add.reduceat(sites, np.r_[0, np.cumsum(sizes)[:-1]]) > 0
        keep = np.repeat(wrong, sizes)
        x, sites, sizes = x[keep], sites[keep], sizes[wrong]
    return x, sites, sizes, names


def fit_site_head(table: NodeTable, indices: Sequence[int], x: np.ndarray, sites: np.ndarray,
                  names: Sequence[str], config: BoostedConfig, seed: int = 0, raw: np.ndarray | None = None):
    """The site head (``model.nodes.sites``), fitted on ``site_head_rows``: one classifier, or
    with ``config.site_bags`` > 1 a list of them, each fitted on a bootstrap draw of the queries
    (a query drawn twice weighs twice; seeds ``seed``, ``seed + 1``...), read by ``site_probability``."""
    if not config.site_head or not sites.any():
        return None
    x, sites, sizes, names = site_head_rows(table, indices, x, sites, names, config, raw)
    hgb = config.site_head_hgb(names)
    if config.site_bags == 1:
        return fit_classifier(x, sites, names, hgb, seed)
    models = []
    for b in range(config.site_bags):
        draws = np.bincount(np.random.default_rng(seed + b).integers(0, len(sizes), len(sizes)), minlength=len(sizes))
        models.append(fit_classifier(x, sites, names, hgb, seed, sample_weight=np.repeat(draws, sizes).astype(float)))
    return models


def site_probability(site_model, x: np.ndarray, predict=None) -> np.ndarray:
    """P(site) of rows ``x`` (with context) from a site head: one classifier, or the mean over a
    list of them (``model.site_bags``); ``predict(model, x)`` reads one classifier (default
    ``predict_proba(x)[:, 1]``; a saved model passes its compiled trees).

    >>> class Const:
    ...     def __init__(self, p): self.p = p
    ...     def predict_proba(self, x): return np.column_stack([1 - self.p * np.ones(len(x)), self.p * np.ones(len(x))])
    >>> site_probability([Const(0.2), Const(0.6)], np.zeros((2, 1))).round(3).tolist()
    [0.4, 0.4]
    """
    predict = predict or (lambda model, rows: model.predict_proba(rows)[:, 1])
    models = site_model if isinstance(site_model, list) else [site_model]
    return np.mean([predict(m, x) for m in models], axis=0)


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

    return site_probability(site_model, with_context(x, raw, arities, names) if context else x)


def inner_out_of_fold(x: np.ndarray, y: np.ndarray, groups: np.ndarray, names: Sequence[str],
                      config: BoostedConfig, seed: int = 0) -> np.ndarray:
    """Out-of-fold node-model probabilities of training rows: the node model fitted once per
    fold of their groups (``row_groups``: databases; ``config.inner_folds``), without that fold."""
    from model.data.folds import schema_disjoint_folds

    k = min(config.inner_folds, len(np.unique(groups)))
    if k < 2:
        raise ValueError(f"the site head's inner folds need 2 training queries or more; found {k} "
                         "(model.site_context=false fits the site head without them)")
    fold = schema_disjoint_folds(groups, k, seed)
    out = np.empty(len(x))
    for i in range(k):
        model = fit_node_model(x[fold != i], y[fold != i], names, config, seed)
        out[fold == i] = model.predict_proba(x[fold == i])[:, 1]
    return out


@dataclass
class FoldResult:
    test: dict[int, tuple[np.ndarray, np.ndarray | None]]  # example -> (confidences, site scores)
    val: dict[int, tuple[np.ndarray, np.ndarray | None]]
    seconds: float
    raw_test: dict[int, np.ndarray] = field(default_factory=dict)  # example -> uncalibrated scores


def run_fold(table: NodeTable, role: dict[str, list[int]], config: BoostedConfig, seed: int = 0,
             columns: np.ndarray | None = None) -> FoldResult:
    """Fit on role["train"], calibrate on role["val"], score role["val"] and role["test"].

    The site head learns from role["train"] (the node model's probabilities from inner folds),
    role["val"] and, with ``model.train_side=site``, role["side"] (the node model's own, out of
    sample there): its val scores are in-sample, its test scores out of fold.
    ``columns`` (a boolean mask over ``table.names``) keeps only some features (ablations).
    """
    start = time.perf_counter()
    keep = np.ones(len(table.names), dtype=bool) if columns is None else columns
    names = [n for n, k in zip(table.names, keep) if k]
    side = role.get("side", [])
    train = role["train"] + (side if config.train_side == "all" else [])
    x, y, sites = training_rows(table, train, config, seed)
    x = x[:, keep]
    node_model = fit_node_model(x, y, names, config, seed)
    held = {}  # val and test: features as scored, labels, sites, node-model probabilities
    for part in ("val", "test"):
        if role[part]:
            xp, yp = scored_rows(table, role[part], config)
            sp = table.stack(role[part])[2]
        else:
            xp, yp, sp = np.zeros((0, len(table.names))), np.zeros(0, dtype=int), np.zeros(0, dtype=int)
        xp = xp[:, keep]
        held[part] = (xp, yp, sp, node_model.predict_proba(xp)[:, 1] if len(xp) else np.zeros(0))
    site_model = None
    if config.site_head:
        raw = inner_out_of_fold(x, y, row_groups(table, train, len(x)), names, config, seed) if (
            config.site_context) else None
        n = 2 if config.database == "both" else 1
        extra = [(role["val"], held["val"][0], held["val"][2], held["val"][3])] if n == 1 else []
        if config.train_side == "site" and side:  # databases the node model never saw
            xs, _, sites_side = training_rows(table, side, config, seed + 1)
            extra.append((side, xs[:, keep], sites_side, node_model.predict_proba(xs[:, keep])[:, 1]))
        for indices, xe, se, re in extra:  # out-of-sample for the node model: its own probabilities
            train, x, sites = train + list(indices), join_rows(x, xe, n), join_rows(sites, se, n)
            raw = join_rows(raw, re, n) if raw is not None else None
        site_model = fit_site_head(table, train, x, sites, names, config, seed, raw)
    scored = {}
    for part in ("val", "test"):
        xp, yp, _, raw = held[part]
        site = site_head_scores(site_model, xp, raw, [table.examples[k].node_arity for k in role[part]],
                                config.site_context, names) if site_model is not None and len(xp) else None
        scored[part] = (raw, yp, site)
    raw_val, y_val, _ = scored["val"]
    from model.calibrators import fit_calibrator

    calibrator = fit_calibrator(config.calibration, raw_val, y_val)
    out = {}
    for part in ("val", "test"):
        raw, _, site = scored[part]
        conf = calibrator.confidence(raw) if calibrator is not None and len(raw) else raw
        conf_rows = _split_rows(np.asarray(conf), table, role[part])
        site_rows = _split_rows(site, table, role[part]) if site is not None else [None] * len(conf_rows)
        out[part] = {k: (c, s) for k, c, s in zip(role[part], conf_rows, site_rows)}
    raw_test = dict(zip(role["test"], _split_rows(scored["test"][0], table, role["test"])))
    return FoldResult(out["test"], out["val"], time.perf_counter() - start, raw_test)


def crossfit(table: NodeTable, roles: list[dict[str, list[int]]], config: BoostedConfig, seed: int = 0,
             columns: np.ndarray | None = None, progress: bool = True, fold_ids: Sequence[int] | None = None,
             raw: dict[int, np.ndarray] | None = None
             ) -> tuple[dict[int, tuple], dict[int, tuple], dict[int, int]]:
    """Out-of-fold (test) and validation scores of every example, and the fold of each
    (``fold_ids[i]`` for ``roles[i]``; default the position). ``raw``, when given, receives
    every example's uncalibrated out-of-fold scores."""
    test, val, fold_of = {}, {}, {}
    for i, role in enumerate(roles):
        fold = fold_ids[i] if fold_ids else i
        name = f"{fold + 1}" if fold_ids else f"{fold + 1}/{len(roles)}"
        result = run_fold(table, role, config, seed, columns)
        test.update(result.test)
        val.update(result.val)
        if raw is not None:
            raw.update(result.raw_test)
        fold_of.update({k: fold for k in role["test"]})
        if progress:
            conf = np.concatenate([c for c, _ in result.test.values()]) if result.test else np.zeros(0)
            labels = np.concatenate([table.examples[k].node_labels for k in result.test]) if result.test \
                else np.zeros(0)
            print(f"  fold {name}: train {len(role['train'])} / val {len(role['val'])} / "
                  f"test {len(role['test'])} examples, test node AUC {M.auc(conf, labels):.3f}, "
                  f"{result.seconds:.1f} s", flush=True)
    return test, val, fold_of


# ---------------------------------------------------------------------------------------------
# Grouped permutation importance


def feature_groups(names: Sequence[str]) -> dict[str, list[int]]:
    """Column indices of each feature group present in ``names`` (``FEATURES[].group``; a stacked
    neural logit is the group ``neural``), in ``FEATURES`` order.

    >>> feature_groups(["kind", "depth", "name_fuzzy", "exec_error"])
    {'structure': [0, 1], 'linking': [2], 'execution': [3]}
    """
    from model.nodes.features import FEATURES

    group_of = {f.name: f.group for f in FEATURES} | {STACK_FEATURE: "neural"}
    out: dict[str, list[int]] = {}
    for j, name in enumerate(names):
        out.setdefault(group_of[name], []).append(j)
    return out


@dataclass
class GroupImportance:
    """How much node AUC one feature group carries: ``drop`` = AUC as scored minus AUC with the
    group's columns permuted (mean over repeats; ``std`` their spread). ``missing``: the group's
    columns are NaN in every row scored (nothing to permute: the drop is 0 by construction)."""

    drop: float
    std: float
    missing: bool = False


def group_importance(blocks: Sequence[tuple[np.ndarray, Any]], labels: np.ndarray, names: Sequence[str],
                     repeats: int = 3, seed: int = 0, by: str = "group") -> tuple[float, dict[str, GroupImportance]]:
    """Grouped permutation importance of node AUC: (AUC as scored, per feature group the drop in
    AUC when all of the group's columns are permuted together, one row permutation for all of
    them, within each block). ``by="feature"``: per feature, each column alone.

    ``blocks``: (feature rows, scorer) pairs scored one after the other, ``labels`` the node
    labels of all their rows in order: one block for a saved model on another benchmark, or one
    per cross-fitting fold (its test rows and its own model: out of fold). A scorer maps rows to
    node confidences in [0, 1].

    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(2000, 3)); y = (x[:, 2] > 0).astype(int)
    >>> sigmoid = lambda r: 1 / (1 + np.exp(-r[:, 2]))
    >>> auc, drops = group_importance([(x, sigmoid)], y, ["depth", "name_fuzzy", "question_words"])
    >>> auc, round(drops["structure"].drop, 3), drops["question"].drop > 0.4
    (1.0, 0.0, True)
    >>> _, drops = group_importance([(x, sigmoid)], y, ["depth", "name_fuzzy", "question_words"], by="feature")
    >>> list(drops), drops["depth"].drop == 0.0
    (['depth', 'name_fuzzy', 'question_words'], True)
    """
    if by not in ("group", "feature"):
        raise ValueError(f"by={by!r}: 'group' or 'feature'")
    rng = np.random.default_rng(seed)
    base = float(M.auc(np.concatenate([score(x) for x, score in blocks]), labels))
    out = {}
    units = feature_groups(names) if by == "group" else {name: [j] for j, name in enumerate(names)}
    for group, columns in units.items():
        if all(np.isnan(x[:, columns]).all() for x, _ in blocks):
            out[group] = GroupImportance(0.0, 0.0, missing=True)
            continue
        drops = []
        for _ in range(repeats):
            scores = []
            for x, score in blocks:
                shuffled = x.copy()
                shuffled[:, columns] = x[rng.permutation(len(x))][:, columns]
                scores.append(score(shuffled))
            drops.append(base - float(M.auc(np.concatenate(scores), labels)))
        out[group] = GroupImportance(float(np.mean(drops)), float(np.std(drops)))
    return base, out


def fold_scorers(table: NodeTable, roles: list[dict[str, list[int]]], config: BoostedConfig, seed: int = 0
                 ) -> list[tuple[np.ndarray, Any]]:
    """Per fold, (its test rows, its node model) as ``run_fold`` fits them (trained on the fold's
    training databases with ``model.database``'s treatment, calibrated on its validation
    databases, the test rows as ``scored_rows`` gives them): ``group_importance``'s blocks for an
    out-of-fold importance."""
    from model.calibrators import fit_calibrator

    blocks = []
    for role in roles:
        x, y, _ = training_rows(table, role["train"], config, seed)
        model = fit_node_model(x, y, table.names, config, seed)
        calibrator = None
        if role["val"]:
            xv, yv = scored_rows(table, role["val"], config)
            calibrator = fit_calibrator(config.calibration, model.predict_proba(xv)[:, 1], yv)

        def score(rows: np.ndarray, model=model, calibrator=calibrator) -> np.ndarray:
            raw = model.predict_proba(rows)[:, 1]
            return calibrator.confidence(raw) if calibrator is not None else raw

        blocks.append((scored_rows(table, role["test"], config)[0], score))
    return blocks


# ---------------------------------------------------------------------------------------------
# Metrics


def scores_summary(table: NodeTable, scored: dict[int, tuple], n_bins: int = 10) -> dict[str, float]:
    """Node AUC / Brier / ECE, whole-query AUC of the least confident node, localisation."""
    return summary_and_pointer(table, scored, n_bins)[0]


def summary_and_pointer(table: NodeTable, scored: dict[int, tuple],
                        n_bins: int = 10) -> tuple[dict[str, float], list[dict] | None]:
    """``scores_summary`` and, from the same localisation, how far to trust the pointer
    (``model.eval.localisation.pointer_reliability``: the wrong queries by the site score of the
    node pointed at, and how often it is an error site); None without site scores."""
    indices = sorted(scored)
    if not indices:
        return {}, None
    conf = np.concatenate([scored[k][0] for k in indices])
    labels = np.concatenate([table.examples[k].node_labels for k in indices]).astype(int)
    query_conf = np.array([scored[k][0].min() for k in indices])
    query_labels = np.array([int(table.examples[k].correct) for k in indices])
    rows = [{"node_labels": table.examples[k].node_labels, "node_arity": table.examples[k].node_arity}
            for k in indices]
    sites = [scored[k][1] for k in indices]
    where = localisation(rows, [scored[k][0] for k in indices],
                         sites if all(s is not None for s in sites) else None)
    out = {**M.core_metrics(conf, labels, n_bins), "query_auc": M.auc(query_conf, query_labels),
           "nodes": float(len(conf)), "queries": float(len(indices))}
    out.update({f"localisation_{k}": float(v) for k, v in where.items() if isinstance(v, (int, float))})
    return out, where.get("pointer_reliability")


# ---------------------------------------------------------------------------------------------
# Entry point (train.py calls it for model.scorer=boosted)


def train_boosted(cfg: DictConfig) -> tuple[dict[str, float], dict[str, Any]]:
    """Fit the boosted scorer on the data config's predictions; write the run directory."""
    from model.nodes.outputs import prediction_row, write_predictions

    config = BoostedConfig.from_cfg(cfg.model)
    seed = int(cfg.get("seed", 0))
    output_dir = Path(cfg.paths.output_dir)
    table = load_table(cfg.data, config)
    roles, folds_info = fold_roles(table, cfg.data)
    fold_ids = []
    if folds_info["protocol"] == "crossfit":
        from model.data.folds import check_run_folds

        fold_ids = check_run_folds(cfg.data.get("run_folds"), len(roles))
    if fold_ids:  # data.run_folds: only these folds
        roles = [roles[f] for f in fold_ids]
        folds_info["folds"] = {str(f): folds_info["folds"][str(f)] for f in fold_ids}
    print(f"boosted node scorer ({config.method}, {len(table.names)} features, "
          f"protocol {folds_info['protocol']}, {len(roles)} fold(s))", flush=True)
    oof_raw: dict[int, np.ndarray] = {}
    test, val, fold_of = crossfit(table, roles, config, seed, fold_ids=fold_ids or None, raw=oof_raw)
    val_fold = {k: (fold_ids[i] if fold_ids else i) for i, role in enumerate(roles) for k in role["val"]}

    summary, pointer = summary_and_pointer(table, test)
    metrics = {f"test/{k}": v for k, v in summary.items()}
    # how far to trust "look here first", out of fold: what Scorer says beside each pointer
    reliability = {"with_database": pointer}
    metrics.update({f"val/{k}": v for k, v in scores_summary(table, val).items()})
    without = None
    if config.database in ("dropout", "both") and config.test_database:
        # a model for both: the same folds scored (and calibrated) without databases too
        print("the same folds without databases:", flush=True)
        raw2: dict[int, np.ndarray] = {}
        test2, _, _ = crossfit(table, roles, replace(config, test_database=False), seed,
                               fold_ids=fold_ids or None, raw=raw2)
        summary2, reliability["without_database"] = summary_and_pointer(table, test2)
        metrics2 = {f"test/{k}": v for k, v in summary2.items()}
        metrics.update({f"test_without_database/{k[5:]}": v for k, v in metrics2.items()})
        without = (raw2, {k: conf for k, (conf, _) in test2.items()}, metrics2)
    for split, scored, folds in (("test", test, fold_of), ("val", val, val_fold)):
        rows = []
        for k in sorted(scored):
            conf, site = scored[k]
            extra = {"fold": folds[k], "method": config.method}
            if site is not None:
                extra["site_scores"] = [round(float(s), 6) for s in site]
            rows.append(prediction_row(table.examples[k], conf, split, **extra))
        write_predictions(output_dir / "predictions" / f"{split}.jsonl", rows)

    from omegaconf import OmegaConf

    resolved = OmegaConf.to_container(cfg, resolve=True)
    resolved["data"]["root"] = str(table.root)  # evaluate.py finds the databases here
    write_json(output_dir / "config.json", resolved)
    (output_dir / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(resolved)))
    write_json(output_dir / "data.json", {**folds_info, "examples": len(table.examples),
                                           "features": list(table.names)})
    saved = None
    if config.save_model:  # the final model: fitted on every labelled prediction the run has
        saved = save_final_model(table, roles, config, oof_raw, test, fold_of, metrics, folds_info,
                                 seed, output_dir / "model", without,
                                 {k: v for k, v in reliability.items() if v})
        metrics.update({f"query/{k}": v for k, v in saved.info["metrics"]["query_calibrator"].items()})
    write_json(output_dir / "metrics.json", metrics)
    print("  ".join(f"{k} {v:.3f}" for k, v in metrics.items()
                    if k.startswith(("test/", "query/", "test_without_database/"))))
    return metrics, {"table": table, "roles": roles, "config": config, "model": saved}


def save_final_model(table: NodeTable, roles: list[dict[str, list[int]]], config: BoostedConfig,
                     oof_raw: dict, test: dict, fold_of: dict, metrics: dict, folds_info: dict,
                     seed: int, folder: Path, without: tuple | None = None, reliability: dict | None = None):
    """Fit the final model on every example the run trains, validates or tests on (a held-out
    system stays out: ``data.holdout_system``), score those examples with it (the in-sample
    numbers a reload must reproduce) and save it to ``folder`` (``model.nodes.saved``), with
    ``reliability`` (``summary_and_pointer``'s out of fold, with and without databases) when given."""
    from model.nodes.saved import fit_saved_model

    holdout = folds_info.get("holdout_system")
    indices = sorted({k for role in roles for part in ("train", "val", "test") for k in role[part]
                      if table.examples[k].system != holdout})
    side = sorted({k for role in roles for k in role.get("side", [])})
    oof_conf = {k: conf for k, (conf, _) in test.items()}
    oof_metrics = {k: v for k, v in metrics.items() if k.startswith("test/")}
    saved, query_metrics = fit_saved_model(table, indices, config, oof_raw, oof_conf, fold_of,
                                           oof_metrics, seed, without, side)
    x, _, _ = table.stack(indices)
    if config.database == "without" or not config.test_database:
        x = without_database(x, table.names)
    raw = saved.raw_node_probability(x)
    conf = saved.calibrate(raw)
    site = saved.site_score(x, raw, [table.examples[k].node_arity for k in indices])
    scored = dict(zip(indices, zip(_split_rows(conf, table, indices), _split_rows(site, table, indices))))
    in_sample = scores_summary(table, scored)
    saved.info["metrics"].update({"in_sample": in_sample, "query_calibrator": query_metrics})
    saved.info["trained_on"]["protocol"] = folds_info["protocol"]
    if reliability:
        saved.info["pointer_reliability"] = reliability
    saved.save(folder)
    print(f"final model ({len(indices)} examples) saved to {folder}; in-sample node AUC "
          f"{in_sample.get('auc', float('nan')):.3f}", flush=True)
    return saved
