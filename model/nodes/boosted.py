"""Cross-fitting the boosted node model (``model.nodes.estimator.BoostedNodeModel``): every
example of a ``NodeTable`` gets an out-of-fold confidence and site scores.

Protocols (``data.protocol``, ``model.nodes.table.fold_roles``): ``split`` divides the eval
split's databases into train / val / test once; ``crossfit`` puts them into ``data.folds``
schema-disjoint folds and, for fold i, trains on the other folds but the next, calibrates on the
next (``model.data.folds.crossfit_roles``) and predicts fold i. ``model.train_boosted`` runs it
for ``train.py model=features`` and fits the final model on the out-of-fold scores.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from model import metrics as M
from model.nodes.estimator import (
    BoostedNodeModel,
    BoostedParams,
    scored_rows,
    site_head_scores,
    split_rows,
)
from model.nodes.table import NodeTable


@dataclass
class FoldResult:
    test: dict[int, tuple[np.ndarray, np.ndarray | None]]  # example -> (confidences, site scores)
    val: dict[int, tuple[np.ndarray, np.ndarray | None]]
    seconds: float
    raw_test: dict[int, np.ndarray] = field(default_factory=dict)  # example -> uncalibrated scores


def run_fold(table: NodeTable, role: dict[str, list[int]], params: BoostedParams, seed: int = 0,
             columns: np.ndarray | None = None) -> FoldResult:
    """Fit on role["train"], calibrate on role["val"], score role["val"] and role["test"]
    (``BoostedNodeModel.fit(table, train, validation=val, side=side)``).

    The site head learns from role["train"] (the node model's probabilities from inner folds)
    and role["val"] (the node model's own, out of sample there): its val scores are in-sample,
    its test scores out of fold.
    ``columns`` (a boolean mask over ``table.names``) keeps only some features (ablations).
    """
    start = time.perf_counter()
    model = BoostedNodeModel(params, seed).fit(table, role["train"], validation=role["val"],
                                               side=role.get("side", []), columns=columns)
    keep = np.ones(len(table.names), dtype=bool) if columns is None else columns
    out, raw_test = {}, {}
    for part in ("val", "test"):
        indices = role[part]
        x = scored_rows(table, indices, params)[0][:, keep] if indices else np.zeros((0, int(keep.sum())))
        raw = model.node_model_.predict_proba(x)[:, 1] if len(x) else np.zeros(0)
        site = site_head_scores(model.site_model_, x, raw, [table.examples[k].node_arity for k in indices],
                                params.site_context, model.features_) \
            if model.site_model_ is not None and len(x) else None
        conf_rows = split_rows(np.asarray(model.calibrate(raw)), table, indices)
        site_rows = split_rows(site, table, indices) if site is not None else [None] * len(conf_rows)
        out[part] = {k: (c, s) for k, c, s in zip(indices, conf_rows, site_rows)}
        if part == "test":
            raw_test = dict(zip(indices, split_rows(raw, table, indices)))
    return FoldResult(out["test"], out["val"], time.perf_counter() - start, raw_test)


def check_roles(table: NodeTable, roles: list[dict[str, list[int]]], params: BoostedParams,
                protocol: str = "crossfit", n_folds: int | None = None, fold_ids: Sequence[int] | None = None
                ) -> None:
    """Before anything is fitted, what the estimator would refuse midway, after fitting the folds
    before it (a traceback): a ``UsageError`` in one line naming the fold, its databases and what
    to do. Outputs whose nodes are all right (or all wrong): nothing to learn; a fold whose
    training outputs are (the node model needs right and wrong nodes), or, with a node
    calibrator (``model.calibration``), whose validation outputs are (it would be fitted to one
    class). ``protocol``, ``n_folds`` and ``fold_ids`` (``data.run_folds``) name the folds."""
    from model.calibrators import one_class
    from model.errors import UsageError

    side = table.side_indices if params.train_side == "all" else []
    every = [*range(len(table.examples) - table.train_side), *side]
    labels = np.concatenate([table.examples[k].node_labels for k in every]) if every else np.zeros(0)
    if (label := one_class(labels)) is not None:
        n, right = len(every), sum(table.examples[k].correct for k in every)
        if label:
            found = f"all {n} outputs match gold" if right == n else f"every node of the {n} outputs is right"
        else:
            found = f"no node of the {n} outputs is right"
        raise UsageError(f"{found}: nothing to learn (the node model learns from right and wrong nodes); "
                         "add outputs with mistakes (another system's, or answers to harder questions)")
    n_folds = n_folds or len(roles)
    for i, role in enumerate(roles):
        fold = fold_ids[i] if fold_ids else i
        for part, what in (("train", "training"), ("val", "validation")):
            indices = role[part] + (list(role.get("side", [])) if part == "train" and side else [])
            if part == "val" and (params.calibration == "none" or not indices):  # (none: no calibrator,
                continue  # as data.val_fraction=0 leaves it)
            where = (f"fold {fold + 1}/{n_folds}'s {what} databases" if protocol == "crossfit"
                     else f"the {what} databases of data.protocol=split")
            databases = sorted({table.examples[k].db_id for k in role[part]})
            names = ", ".join(databases[:4]) + (f" and {len(databases) - 4} more" if len(databases) > 4 else "")
            fewer = ("use fewer folds (data.folds)" if protocol == "crossfit"
                     else "try another data.split_seed or data.val_fraction")
            if not indices:
                raise UsageError(f"{where}: no outputs to train on; {fewer}")
            labels = np.concatenate([table.examples[k].node_labels for k in indices])
            if (label := one_class(labels)) is None:
                continue
            found = f"every output on them is {'right' if label else 'wrong'} ({len(labels)} nodes, all {label})"
            needs = ("the node model fitted on them needs right and wrong nodes" if part == "train" else
                     f"the {params.calibration} node calibrator fitted on them needs right and wrong nodes")
            calibration = ", or model.calibration=none" if part == "val" else ""
            raise UsageError(f"{where} ({names}): {found}: {needs}; {fewer}, add outputs{calibration}")


def crossfit(table: NodeTable, roles: list[dict[str, list[int]]], params: BoostedParams, seed: int = 0,
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
        result = run_fold(table, role, params, seed, columns)
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
    """Column indices of each feature group present in ``names`` (``FEATURES[].group``), in
    ``FEATURES`` order.

    >>> feature_groups(["kind", "depth", "name_fuzzy", "exec_error"])
    {'structure': [0, 1], 'linking': [2], 'execution': [3]}
    """
    from model.nodes.features import FEATURES

    group_of = {f.name: f.group for f in FEATURES}
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


def fold_scorers(table: NodeTable, roles: list[dict[str, list[int]]], params: BoostedParams, seed: int = 0
                 ) -> list[tuple[np.ndarray, Any]]:
    """Per fold, (its test rows, its node model) as ``run_fold`` fits them (trained on the fold's
    training databases with ``model.database``'s treatment, calibrated on its validation
    databases, the test rows as ``scored_rows`` gives them): ``group_importance``'s blocks for an
    out-of-fold importance."""
    blocks = []
    for role in roles:
        model = BoostedNodeModel(replace(params, site_head=False), seed).fit(table, role["train"],
                                                                            validation=role["val"])

        def score(rows: np.ndarray, model=model) -> np.ndarray:
            return model.calibrate(model.node_model_.predict_proba(rows)[:, 1])

        blocks.append((scored_rows(table, role["test"], params)[0], score))
    return blocks
