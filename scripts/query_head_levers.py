"""The whole-query head's levers on a finished ``model=features`` crossfit run, without fitting
the node model again: its out-of-fold node confidences and site scores
(``<run>/predictions/test.jsonl``) are what every head variant is cross-fitted on, over the
run's own folds, exactly as the final model's head is (``model.nodes.estimator.fit_query_head``).

    python scripts/query_head_levers.py --run <run>

Prints one Markdown row per variant: whole-query AUC, ECE and Brier out of fold, against the
label it was fitted on, and AUC against every node right (tree agreement where the run has
tree node labels, ``data.labels=tree``), beside the least confident node's Platt map
(the whole-query confidence without a head). ``--without-database`` reads the same folds scored
without databases (``predictions/test_without_database.jsonl``, a ``model.database=dropout``
run). ``--save DIR`` writes the run's final model with its heads (with and without databases)
refitted as the first variant says, for ``rat-score`` and ``scripts/transfer.py``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from model import metrics as M
from model.calibrators import QueryCalibrator, query_aggregates
from model.nodes.estimator import BoostedParams, OutOfFold, fit_query_head
from model.nodes.outputs import read_predictions

CAPACITY = {
    "small": {"max_iter": 100, "max_leaf_nodes": 7, "min_samples_leaf": 80},
    "default": {},
    "large": {"max_iter": 400, "max_leaf_nodes": 31, "min_samples_leaf": 20},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="a model=features crossfit run directory")
    parser.add_argument("--sets", nargs="+", default=["confidences", "confidences+sites", "all", "all_but_size"])
    parser.add_argument("--capacity", nargs="+", choices=sorted(CAPACITY), default=["default"])
    parser.add_argument("--labels", nargs="+", choices=("auto", "tree"), default=["auto"])
    parser.add_argument("--without-database", action="store_true",
                        help="the out-of-fold scores without databases (predictions/test_without_database.jsonl)")
    parser.add_argument("--tree-auc", action="store_true",
                        help="also each variant's AUC against tree labels (its heads fitted again per fold: slower)")
    parser.add_argument("--save", type=Path, metavar="DIR",
                        help="write <run>/model with its heads refitted as the first variant says")
    args = parser.parse_args()

    from omegaconf import OmegaConf

    from model.nodes.table import load_table
    from model.train_boosted import params_of

    cfg = OmegaConf.load(args.run / "config.yaml")
    params = params_of(cfg.model)
    table = load_table(cfg.data, params, progress=False)
    index = {(e.question_id, e.system): k for k, e in enumerate(table.examples)}
    split = "test_without_database" if args.without_database else "test"
    conf, sites, fold = out_of_fold(args.run / "predictions" / f"{split}.jsonl", index)
    ks = sorted(conf)
    execution = np.array([int(bool(table.examples[k].correct)) for k in ks])
    tree = np.array([int(all(table.examples[k].node_labels)) for k in ks])
    folds = np.array([fold[k] for k in ks])
    aggregates = np.array([query_aggregates(conf[k]) for k in ks])
    least = np.full(len(ks), np.nan)
    for f in np.unique(folds):
        least[folds == f] = QueryCalibrator.fit(aggregates[folds != f], execution[folds != f]).confidence(
            aggregates[folds == f])
    print(f"{args.run} ({split}): {len(ks)} queries out of fold, {execution.mean():.1%} right by "
          f"{table.labels} labels, {tree.mean():.1%} with every node right by its node labels\n")
    print("| head | capacity | fitted on | AUC | ECE | Brier | mean confidence | rate | AUC vs every node right |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| none: least confident node, Platt | - | {table.labels} | {M.auc(least, execution):.4f} | "
          f"{M.ece(least, execution):.4f} | {M.brier(least, execution):.4f} | {least.mean():.3f} | "
          f"{execution.mean():.3f} | {M.auc(least, tree):.4f} |")
    keep = np.ones(len(table.names), dtype=bool)
    oof = OutOfFold({}, conf, fold, sites=sites)
    if args.save:
        save(args, table, index, keep)
        return
    for feature_set in args.sets:
        for capacity in args.capacity:
            for labels in args.labels:
                p = BoostedParams(query_head=feature_set, query_head_hgb=CAPACITY[capacity],
                                  query_head_labels=labels)
                head = fit_query_head(table, ks, p, oof, keep, table.names, not args.without_database, 0)
                m = head.metrics
                print(f"| {feature_set} | {capacity} | {head.label} | {m['query_auc']:.4f} | {m['query_ece']:.4f} | "
                      f"{m['query_brier']:.4f} | {m['mean_confidence']:.3f} | {m['rate']:.3f} | "
                      f"{tree_auc(table, ks, p, oof, keep, tree, folds, not args.without_database, args.tree_auc)} |",
                      flush=True)
    print(json.dumps({"queries": len(ks)}))


def out_of_fold(path: Path, index: dict) -> tuple[dict, dict, dict]:
    """(node confidences, site scores, fold) per table example of a run's predictions file."""
    conf, sites, fold = {}, {}, {}
    for r in read_predictions(path):
        k = index[r["question_id"], r["system"]]
        conf[k] = np.asarray(r["node_confidences"], dtype=float)
        sites[k] = np.asarray(r.get("site_scores") or [np.nan] * len(conf[k]), dtype=float)
        fold[k] = int(r["fold"])
    return conf, sites, fold


def save(args, table, index, keep) -> None:
    """The run's final model with both heads refitted as the first variant says, to ``args.save``."""
    import shutil

    from model.nodes.estimator import BoostedNodeModel

    model = BoostedNodeModel.load(args.run / "model")
    p = BoostedParams(query_head=args.sets[0], query_head_hgb=CAPACITY[args.capacity[0]],
                      query_head_labels=args.labels[0])
    for split, database in (("test", True), ("test_without_database", False)):
        path = args.run / "predictions" / f"{split}.jsonl"
        if not path.is_file():
            continue
        conf, sites, fold = out_of_fold(path, index)
        head = fit_query_head(table, sorted(conf), p, OutOfFold({}, conf, fold, sites=sites), keep,
                              table.names, database, 0)
        if database:
            model.query_head_ = head
        else:
            model.query_head_without_database_ = head
        print(f"{split}: {head.label} labels, out-of-fold AUC {head.metrics['query_auc']:.4f}, "
              f"ECE {head.metrics['query_ece']:.4f}")
    model.info_["config"].update({"query_head": p.query_head, "query_head_hgb": p.query_head_hgb,
                                  "query_head_labels": p.query_head_labels})
    model.save(args.save)
    if (args.run / "config.json").is_file():  # transfer.py reads the run's labels from beside the model
        shutil.copy(args.run / "config.json", args.save.parent / "config.json")
    print(f"saved to {args.save}")


def tree_auc(table, ks, p, oof, keep, tree, folds, database: bool, wanted: bool) -> str:
    """The variant's out-of-fold confidences (each fold's head fitted on the others) against every
    node right by the run's node labels (tree agreement under ``data.labels=tree``): how it ranks
    where only tree labels exist ("-" unless ``wanted``)."""
    if not wanted:
        return "-"
    from model.nodes.estimator import query_head_rows

    q = query_head_rows(table, ks, oof.confidences, oof.sites, keep, table.names, p.query_head, database)
    from model.nodes.query_head import QueryHead, head_feature_names

    y = tree if p.query_head_labels == "tree" else np.array([int(bool(table.examples[k].correct)) for k in ks])
    out = np.full(len(ks), np.nan)
    names = head_feature_names(table.names, p.query_head)
    for f in np.unique(folds):
        rest = folds != f
        head = QueryHead.fit(q[rest], y[rest], folds[rest], names, "", p.query_head_hgb, p.query_head)
        out[~rest] = head.confidence(q[~rest])
    return f"{M.auc(out, tree):.4f}"


if __name__ == "__main__":
    main()
