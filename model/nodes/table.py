"""The boosted node model's training data: labelled examples of real systems' outputs with their
node feature matrices (``NodeTable``, ``load_table``), and which examples train, validate and
test in each fold (``fold_roles``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from model.errors import UsageError
from model.nodes.features import build_features, reads_semantic
from rat.walks import error_sites

if TYPE_CHECKING:
    from model.nodes.estimator import BoostedParams

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
        """An example's error sites (``rat.walks.error_sites``) of its node labels."""
        return np.asarray(error_sites(example.node_labels, example.node_arity))


def load_table(data_cfg, params: BoostedParams, progress: bool = True) -> NodeTable:
    """Examples of the eval split's predictions (labelled as ``data.labels`` says: by execution
    where there is a database, or by tree comparison) and their features."""
    from model.data.datasets import database_path, load_schemas
    from model.data.predictions import prediction_files
    from model.nodes.examples import build_examples, data_root

    root = data_root(data_cfg.get("root"))
    files = prediction_files(root, data_cfg.get("predictions"))
    if not files:
        raise FileNotFoundError(f"the boosted scorer learns from real predictions; none found for {root}")
    with_databases = data_cfg.get("require_database", True)
    labels = data_cfg.get("labels", "execution")
    examples, _ = build_examples(root, data_cfg.get("eval_split", "dev"), prediction_files=files,
                                 max_questions=data_cfg.get("max_questions"), require_database=with_databases,
                                 evidence=data_cfg.get("evidence", False), labels=labels)
    if not examples:
        raise UsageError(f"no labelled predictions to learn from in {', '.join(str(f) for f in files)[:300]} "
                         "(each file or row was refused: see the lines above)")
    side = []
    # The train side: real outputs on the train split (model.train_predictions) and, with
    # data.use_perturbations, data.train_perturbations perturbations of each train gold query
    # (model.synth.perturb: wrong queries whose edit site is known by construction).
    perturbations = data_cfg.get("train_perturbations", 0) if data_cfg.get("use_perturbations") else 0
    eval_perturbations = data_cfg.get("eval_perturbations", 0) if data_cfg.get("use_perturbations") else 0
    if params.train_side != "none" and data_cfg.get("train_split") and (params.train_predictions or perturbations):
        side_files = prediction_files(root, params.train_predictions, default=False) \
            if params.train_predictions else []
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
    if params.train_side != "none" and eval_perturbations:
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
    features, names, report = build_features(examples, schemas, db_paths, consensus=params.consensus,
                                             consensus_by_result=params.database != "without",
                                             use_cache=params.use_cache,
                                             timeout_s=params.feature_timeout_s, progress=progress,
                                             lm=params.lm, semantic=reads_semantic(params.drop))
    if progress:
        print(report, flush=True)
    if params.drop:
        features, names = drop_columns(features, names, params.drop)
    quantiles = None
    if params.quantiles:  # every node of the run is the reference (features only, no labels)
        from model.nodes.quantiles import Quantiles

        quantiles = Quantiles.fit(np.vstack(features), names)
        features = [quantiles.transform(x, names) for x in features]
    return NodeTable(examples, features, names, root, train_side=len(side),
                     quantiles=quantiles, labels="execution" if with_databases and labels == "execution" else "tree")


def drop_columns(features: list[np.ndarray], names: tuple[str, ...], drop: Sequence[str]
                 ) -> tuple[list[np.ndarray], tuple[str, ...]]:
    """Leave out the named features, every feature of a named group, or of a named set
    (``FEATURE_SETS``: ``database``, ``benchmark_size``) (``model.drop``)."""
    from model.nodes.features import FEATURE_SETS, FEATURES

    check_drop(drop, names)
    group_of = {f.name: f.group for f in FEATURES}
    in_sets = {n for d in drop for n in FEATURE_SETS.get(d, ())}
    keep = np.array([n not in drop and group_of.get(n) not in drop and n not in in_sets for n in names])
    return [x[:, keep] for x in features], tuple(n for n, k in zip(names, keep) if k)


def check_drop(drop: Sequence[str], names: Sequence[str] = ()) -> None:
    """``model.drop`` names features (``FEATURES``, or ``names``: a table's), feature groups or sets
    (``FEATURE_SETS``) only: else one ``UsageError`` line naming those that are none, with the
    groups and sets there are.

    >>> check_drop(["semantic", "benchmark_size", "depth"])
    >>> check_drop(["nosuchfeature"])
    Traceback (most recent call last):
    model.errors.UsageError: model.drop: unknown feature or group ['nosuchfeature'] (groups: ...
    """
    from model.nodes.features import FEATURE_SETS, FEATURES

    groups = sorted({f.group for f in FEATURES})
    known = {f.name for f in FEATURES} | set(names) | set(groups) | set(FEATURE_SETS)
    unknown = [d for d in drop if d not in known]
    if unknown:
        raise UsageError(f"model.drop: unknown feature or group {unknown} (groups: {', '.join(groups)}; "
                         f"sets: {', '.join(FEATURE_SETS)}; the features: docs/training.md#node-features)")


def fold_roles(table: NodeTable, data_cfg) -> tuple[list[dict[str, list[int]]], dict[str, Any]]:
    """Per fold, the example indices that train, validate and test; and the databases of each
    fold (for data.json)."""
    from model.data.folds import (
        check_folds,
        check_split,
        crossfit_roles,
        schema_disjoint_folds,
        split_databases,
    )

    check_split(data_cfg)
    side = table.side_indices
    db_ids = [e.db_id for e in table.examples[:len(table.examples) - table.train_side]]
    protocol = data_cfg.get("protocol", "split")
    seed = data_cfg.get("split_seed", 0)
    if protocol == "crossfit":
        k = int(data_cfg.get("folds", 5))
        check_folds(db_ids, k)
        fold_of = schema_disjoint_folds(db_ids, k, seed)
        roles = []
        for i in range(k):
            role = crossfit_roles(i, k)
            roles.append({name: [j for j, f in enumerate(fold_of) if f in folds]
                          for name, folds in role.items()})
        dbs = {str(i): sorted({db for db, f in zip(db_ids, fold_of) if f == i}) for i in range(k)}
        info = {"protocol": "crossfit", "folds": dbs}
    else:
        split = split_databases(Counter(db_ids), data_cfg.get("val_fraction", 0.2),
                                data_cfg.get("test_fraction", 0.3), seed)
        roles = [{name: [j for j, db in enumerate(db_ids) if split[db] == name]
                  for name in ("train", "val", "test")}]
        info = {"protocol": "split", "db_split": split}
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
    """Leave one system out (``data.holdout_system``): train and validate without its outputs.
    Every system's outputs on a fold's test databases are still scored there (out of fold): the
    others' are what the saved model's calibrators are fitted on, the held-out system's what the
    run reports (``held_out``). The other systems' agreement features still count its trees, as
    they would count a new system's outputs at deployment."""
    from model.data.folds import check_holdout_system

    check_holdout_system(system, [e.system for e in table.examples])
    return [{name: [j for j in role[name] if name == "test" or table.examples[j].system != system]
             for name in role} for role in roles]


def held_out(table: NodeTable, scored: dict[int, Any], system: str | None) -> dict[int, Any]:
    """The held-out system's entries of ``scored`` (all of them without ``data.holdout_system``)."""
    return {k: v for k, v in scored.items() if table.examples[k].system == system} if system else scored
