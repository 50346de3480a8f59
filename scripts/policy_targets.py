"""Whether a model's run / review / regenerate policy meets its stated target on its run's
out-of-fold predictions, and how many queries it lets run beside execution agreement (the share
of the other systems' queries for the same question that return the same rows,
``model.wholequery.base_scores``: ``exec_systems``) held to the same target and at the same risk.

    python scripts/policy_targets.py --model pretrained \\
        --predictions /path/to/run/predictions/test.jsonl --data-root ../shared/data/spider

Both scores get their thresholds the same way (``model.scoring.verdict.choose_policy``: the
lowest whose 95% upper bound on the wrong share among the queries run is within the target), on
all the rows ("in sample") and on the other folds for each fold ("held out"); "at the same risk"
is the largest share each score runs with at most the policy's measured wrong share (a threshold
chosen on the rows themselves, which favours it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from model.cli_types import existing_dir, existing_file, positive_int
from model.errors import UsageError
from model.scoring.verdict import MAX_WRONG, choose_policy, held_out, prediction_pairs


def coverage_at_risk(score: np.ndarray, labels: np.ndarray, risk: float) -> float:
    """The largest share of queries run (those at or above a threshold on ``score``) whose wrong
    share is at most ``risk``."""
    best = 0.0
    for t in np.unique(score):
        run = score >= t
        if np.mean(labels[run] == 0) <= risk:
            best = max(best, float(run.mean()))
    return best


def execution_agreement(rows: list[dict], data_root: Path, workers: int) -> np.ndarray:
    """Each row's share of the other systems' queries (rows of the same question) returning its rows."""
    from model.data.datasets import database_path, load_questions, load_schemas
    from model.data.execution import default_cache_dir
    from model.data.predictions import Prediction
    from model.wholequery.base_scores import build_base_scores

    questions = load_questions(data_root, "dev")
    schemas = load_schemas(data_root)
    db_paths = {q.db_id: database_path(data_root, q.db_id) for q in questions}
    predictions = [Prediction(r["question_id"], r["db_id"], r["sql"], r["system"]) for r in rows]
    table = build_base_scores(questions, predictions, schemas, db_paths, exec_cache_dir=default_cache_dir(),
                              workers=workers, progress=False)
    agreement = dict(zip(zip(table.system.tolist(), table.question_id.tolist()), table.columns["exec_systems"]))
    return np.array([agreement.get((r["system"], r["question_id"]), np.nan) for r in rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="pretrained")
    parser.add_argument("--predictions", type=existing_file, required=True)
    parser.add_argument("--data-root", type=existing_dir, required=True)
    parser.add_argument("--max-wrong", type=float, default=MAX_WRONG)
    parser.add_argument("--workers", type=positive_int, default=2)
    args = parser.parse_args(argv)
    from model.data.jsonl import iter_jsonl
    from model.scoring.inputs import load_scorer

    try:
        saved = load_scorer(args.model).saved
        rows = list(iter_jsonl(args.predictions))
        confidence, labels, label, folds = prediction_pairs(saved, rows)
    except UsageError as e:
        parser.error(str(e))
    agreement = execution_agreement(rows, args.data_root, args.workers)
    known = ~np.isnan(agreement)
    print(f"{len(rows)} out-of-fold predictions ({label}), {int(known.sum())} with a database to compare "
          f"on; {np.mean(labels[known] == 0):.1%} wrong; target: at most {args.max_wrong:.0%} wrong among "
          "the queries run (95% upper bound)")
    confidence, labels, folds, agreement = confidence[known], labels[known], folds[known], agreement[known]
    policy = choose_policy(confidence, labels, max_wrong=args.max_wrong)
    risk = policy.measured["run_wrong"] or 0.0
    print(f"{'score':<28} {'runs (in sample)':>17} {'wrong':>6} {'runs (held out)':>16} {'wrong':>6} "
          f"{'runs at ' + format(risk, '.1%') + ' wrong':>18}")
    n_folds = len(np.unique(folds))
    for name, score in (("whole-query confidence", confidence), ("execution agreement", agreement)):
        chosen = choose_policy(score, labels, max_wrong=args.max_wrong)
        wrong = chosen.measured["run_wrong"]
        held = f"{'-':>16} {'-':>6}"  # one fold: no other folds to choose its thresholds on
        if n_folds > 1:
            check = held_out(score, labels, folds, max_wrong=args.max_wrong)
            held = (f"{check['run_share']:>16.1%} "
                    f"{'-' if check['run_wrong'] is None else format(check['run_wrong'], '.1%'):>6}")
        print(f"{name:<28} {chosen.measured['run_share']:>17.1%} {'-' if wrong is None else format(wrong, '.1%'):>6} "
              f"{held} {coverage_at_risk(score, labels, risk):>18.1%}")
    if n_folds < 2:
        print(f"held out: needs a run of at least 2 folds (data.protocol=crossfit); {args.predictions} holds one")
    return 0


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        sys.exit(main())
