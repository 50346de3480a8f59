"""Transfer between benchmarks: a saved boosted model (``<run>/model``) scores another benchmark's
labelled predictions through ``Scorer``, as a user would, and prints node AUC, whole-query AUC
(least confident node) and look-here-first top-1 beside an in-domain run's out-of-fold numbers.

    python benchmarks/transfer.py --model /tmp/runs/db_without/model --data bird \\
        --in-domain /tmp/runs/bird
    python benchmarks/transfer.py --model /tmp/runs/bird/model --data spider --no-database \\
        --in-domain /tmp/runs/db_without

``--data spider|bird`` reads ``../shared/data/<name>`` and its predictions (the 11 Spider dev
systems, the 4 CodeS BIRD dev systems). BIRD has no databases here: tree labels, no database
features, and the evidence is read as part of the question. ``--no-database`` scores Spider without its databases (its labels stay execution
labels). A model never saw the other benchmark's databases, schemas or questions.
"""

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from model.data.datasets import database_path, load_schemas
from model.eval import metrics as M
from model.eval.localisation import localisation
from model.nodes.examples import build_examples
from model.scoring import RowError, Scorer

SHARED = Path(os.environ.get("RAT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
PREDICTIONS = {"spider": "spider_dev", "bird": "bird_dev"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, required=True, help="a <run>/model directory")
    parser.add_argument("--data", choices=sorted(PREDICTIONS), required=True)
    parser.add_argument("--no-database", action="store_true", help="score without the databases")
    parser.add_argument("--in-domain", type=Path, help="a run on --data whose metrics.json to print beside")
    args = parser.parse_args()
    root = SHARED / args.data
    files = sorted((SHARED / "predictions" / PREDICTIONS[args.data]).iterdir())
    with_databases = args.data == "spider"
    examples, _ = build_examples(root, "dev", prediction_files=files, require_database=with_databases,
                                 evidence=args.data == "bird")  # BIRD's questions with their evidence
    if with_databases:
        examples = [e for e in examples if e.execution_match is not None]
    schemas = load_schemas(root)
    use_db = with_databases and not args.no_database
    rows = [{"sql": e.sql, "question": e.question, "db_id": e.db_id, "schema": schemas[e.db_id],
             "database": database_path(root, e.db_id) if use_db else None} for e in examples]
    scorer = Scorer.load(args.model)
    results = scorer.score_many(rows, progress=True, spans=False)
    kept = [(e, r) for e, r in zip(examples, results) if not isinstance(r, RowError)]
    conf = np.concatenate([[n.confidence for n in r.nodes] for _, r in kept])
    labels = np.concatenate([e.node_labels for e, _ in kept])
    query = np.array([min(n.confidence for n in r.nodes) for _, r in kept])
    correct = np.array([int(e.correct) for e, _ in kept])
    where = localisation([{"node_labels": e.node_labels, "node_arity": e.node_arity} for e, _ in kept],
                         [[n.confidence for n in r.nodes] for _, r in kept],
                         [[n.site_score for n in r.nodes] for _, r in kept])
    trained = scorer.saved.info.get("trained_on", {})
    print(f"\nmodel {args.model} (trained on {trained.get('data_root')}: {trained.get('examples')} predictions, "
          f"database features: {scorer.saved.info.get('config', {}).get('database', 'with')}) -> "
          f"{args.data} dev, {len(kept)} predictions ({correct.mean():.1%} right), "
          f"{'with' if use_db else 'without'} databases\n")
    print("| | node AUC | whole-query AUC | look-here-first top-1 |\n|---|---|---|---|")
    print(f"| transfer | {M.auc(conf, labels):.3f} | {M.auc(query, correct):.3f} | "
          f"{where['top1_site_scores']:.3f} |")
    if args.in_domain:
        m = json.loads((args.in_domain / "metrics.json").read_text())
        print(f"| in domain ({args.in_domain.name}, out of fold) | {m['test/auc']:.3f} | {m['test/query_auc']:.3f} | "
              f"{m['test/localisation_top1_site_scores']:.3f} |")


if __name__ == "__main__":
    main()
