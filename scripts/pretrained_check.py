"""The pretrained model against its own record: score the 11 systems' Spider dev files with
``Scorer.pretrained()`` (as ``rat-score`` does: features computed afresh, databases read-only)
and compare node AUC / Brier / ECE, whole-query AUC and localisation with the in-sample numbers
its training run stored in ``model.json``; then print the run's out-of-fold numbers (the ones
to expect on new queries) and the reasons' faithfulness.

    python scripts/pretrained_check.py [--model pretrained] [--faithfulness-queries 2000]

Faithfulness of the reasons, on the wrong queries: for each node below confidence 0.5, the rise
of its confidence when its reasons' features are set to their typical values (all at once), and
the same for as many features drawn at random among those the node could have been given as
reasons; and the share of such nodes that get at least one reason.
"""

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from model import metrics as M
from model.cli_types import positive_int
from model.data.datasets import database_path, load_schemas
from model.errors import UsageError
from model.eval.localisation import localisation
from model.nodes.estimator import kind_group
from model.nodes.examples import build_examples
from model.scoring import RowError, Scorer
from model.scoring.inputs import load_scorer
from model.scoring.reasons import EXPLAINABLE
from rat.walks import error_sites

SHARED = Path(os.environ.get("RAT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="pretrained")
    parser.add_argument("--faithfulness-queries", type=positive_int, default=2000)
    args = parser.parse_args()
    root = SHARED / "spider"
    if not (root / "dev.json").exists():
        parser.error(f"needs Spider under {SHARED} (RAT_SHARED_DATA)")
    try:
        scorer = load_scorer(args.model)
    except UsageError as e:
        parser.error(str(e))
    info = scorer.saved.info_
    files = sorted((SHARED / "predictions" / "spider_dev").iterdir())
    examples, _ = build_examples(root, "dev", prediction_files=files, require_database=True)
    examples = [e for e in examples if e.execution_match is not None]  # labelled, as in training
    schemas = load_schemas(root)
    rows = [{"sql": e.sql, "question": e.question, "db_id": e.db_id, "schema": schemas[e.db_id],
             "database": database_path(root, e.db_id)} for e in examples]
    results = scorer.score_many(rows, progress=True, spans=False, label_shift=False)
    kept = [(e, r) for e, r in zip(examples, results) if not isinstance(r, RowError)]
    conf = np.concatenate([[n.confidence for n in r.nodes] for _, r in kept])
    labels = np.concatenate([e.node_labels for e, _ in kept])
    query = np.array([r.query_confidence for _, r in kept])
    correct = np.array([int(bool(e.execution_match)) for e, _ in kept])
    where = localisation([{"node_labels": e.node_labels, "node_arity": e.node_arity} for e, _ in kept],
                         [[n.confidence for n in r.nodes] for _, r in kept],
                         [[n.site_score for n in r.nodes] for _, r in kept])
    rescored = {"auc": M.auc(conf, labels), "brier": M.brier(conf, labels), "ece": M.ece(conf, labels),
                "query_auc": M.auc(np.array([min(n.confidence for n in r.nodes) for _, r in kept]), correct),
                "localisation_top1_site_scores": where["top1_site_scores"]}
    stored = info["metrics"]["in_sample"]
    print(f"{len(kept)} of {len(examples)} labelled predictions scored "
          f"(trained on {info['trained_on']['examples']}, digest {info['trained_on']['digest']})\n")
    print("| in-sample | stored by the run | rescored by Scorer | difference |\n|---|---|---|---|")
    for key, value in rescored.items():
        print(f"| {key} | {stored[key]:.4f} | {value:.4f} | {value - stored[key]:+.4f} |")
    print(f"| calibrated query confidence: AUC / ECE | – | {M.auc(query, correct):.4f} / "
          f"{M.ece(query, correct):.4f} | in-sample |")
    oof = info["metrics"]["out_of_fold"]
    qc = info["metrics"].get("query_calibrator", {})
    print("\nout of fold (cross-fitted by database, from model.json): node AUC "
          f"{oof['test/auc']:.3f}, ECE {oof['test/ece']:.3f}, whole-query AUC (least confident node) "
          f"{oof['test/query_auc']:.3f}, calibrated query confidence AUC {qc.get('query_auc', float('nan')):.3f} "
          f"ECE {qc.get('query_ece', float('nan')):.3f}, look-here-first top-1 "
          f"{oof['test/localisation_top1_site_scores']:.3f}, top-3 {oof['test/localisation_top3_site_scores']:.3f}")
    faithfulness(scorer, kept, rows, args.faithfulness_queries)


def faithfulness(scorer: Scorer, kept, rows, n_queries: int) -> None:
    saved = scorer.saved
    rng = np.random.default_rng(0)
    wrong = [k for k, (e, _) in enumerate(kept) if not e.execution_match][:n_queries]
    examples = [kept[k][0] for k in wrong]
    results = scorer.score_many([rows[k] for k in wrong], progress=True, reasons=True, spans=False)
    feature_col = {n: j for j, n in enumerate(saved.features_)}
    gains, random_gains, low, explained, site_explained = [], [], 0, 0, 0
    for e, r in zip(examples, results):
        x = r.features
        sites = error_sites(e.node_labels, e.node_arity)
        for n in r.nodes:
            if n.confidence >= 0.5:
                continue
            low += 1
            if not n.reasons:
                continue
            explained += 1
            site_explained += sites[n.index]
            typical = saved.typical_[kind_group(n.kind)]
            eligible = [f for f in EXPLAINABLE if f in feature_col and f in typical
                        and not np.isnan(x[n.index, feature_col[f]]) and x[n.index, feature_col[f]] != typical[f]]
            chosen = [reason.feature for reason in n.reasons]
            drawn = list(rng.choice(eligible, size=min(len(chosen), len(eligible)), replace=False))
            for target, names_set in ((gains, chosen), (random_gains, drawn)):
                row = x[n.index].copy()
                for f in names_set:
                    row[feature_col[f]] = typical[f]
                target.append(saved.node_confidence(row[None])[0] - n.confidence)
    print(f"\nreasons on {len(wrong)} wrong queries: {low} nodes below 0.5, {explained} "
          f"({explained / max(low, 1):.1%}) with at least one reason")
    print(f"confidence rise with the reasons' features set to typical: mean {np.mean(gains):+.3f} "
          f"(median {np.median(gains):+.3f}); the same number of random eligible features: "
          f"mean {np.mean(random_gains):+.3f} (median {np.median(random_gains):+.3f})")


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
