"""Choosing one query among several candidates for a question: how often the chosen one is right.

Reads a run's out-of-fold predictions (``<run>/predictions/test.jsonl``: every system's query for
every question, each scored by a model fitted on other databases) and, for each question whose
candidates all have an execution label, chooses one candidate by each rule of ``RULES``
(``model.scoring.choice``); prints each rule's execution accuracy beside each system alone and
the oracle (a right candidate wherever there is one), with a 95% interval of the difference to
the best system alone (bootstrap over questions, paired). Beside them, two votes that are not
rules of the scorer: over the SQL text (case and spaces ignored), and, with ``--data-root``, over
the candidates' results (each run on its database; rows compared as a multiset).

    python scripts/candidate_choice.py --run runs/single --data-root ../shared/data/spider
"""

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model.data.datasets import database_path
from model.data.execution import default_cache_dir, execute_many, result_digest
from model.data.jsonl import read_jsonl
from model.nodes.outputs import tree_of
from model.scoring.choice import RULES, choose


def candidates_by_question(path: Path) -> tuple[dict[str, list[dict]], list[str]]:
    """The labelled rows of each question that every system answered (a label each), and the
    systems."""
    rows = defaultdict(list)
    for row in read_jsonl(path):
        if row.get("execution_match") is not None:
            rows[row["question_id"]].append(row)
    systems = sorted({r["system"] for group in rows.values() for r in group})
    return {q: sorted(g, key=lambda r: r["system"]) for q, g in rows.items() if len(g) == len(systems)}, systems


def text_key(row: dict) -> str:
    return " ".join(row["sql"].lower().split()).rstrip(";").strip()


def result_keys(rows: list[dict], root: Path) -> list[object]:
    """Each candidate's result as a multiset of rows (``result_digest``), run read-only through
    the execution cache (the training run's executions are read from it); a query that fails
    or stops is a vote of its own."""
    ran = execute_many([(database_path(root, r["db_id"]), r["sql"]) for r in rows], cache_dir=default_cache_dir(),
                       workers=2)
    return [object() if error is not None else result_digest(result) for result, error in ran]


def confidence(row: dict) -> float:
    return row["query_confidence"] if row.get("query_confidence") is not None else min(row["node_confidences"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="a train.py run directory")
    parser.add_argument("--data-root", type=Path, help="the Spider folder: also vote over the results")
    parser.add_argument("--bootstrap", type=int, default=1000)
    args = parser.parse_args(argv)
    predictions = args.run / "predictions" / "test.jsonl"
    if not predictions.is_file():
        parser.error(f"--run {args.run}: no predictions/test.jsonl (a train.py run directory)")
    if args.data_root is not None and not (args.data_root / "database").is_dir():
        parser.error(f"--data-root {args.data_root}: no database/ folder (a Spider folder)")
    if args.bootstrap < 1:
        parser.error(f"--bootstrap must be at least 1, found {args.bootstrap}")
    groups, systems = candidates_by_question(predictions)
    if not groups:
        parser.error(f"--run {args.run}: no question whose answers all have an execution label")
    questions = sorted(groups)
    right = {s: np.array([int(bool(next(r for r in groups[q] if r["system"] == s)["execution_match"]))
                          for q in questions]) for s in systems}
    best = max(systems, key=lambda s: right[s].mean())
    chosen = {}
    for rule in RULES:
        picks = [choose([tree_of(r).hash for r in groups[q]], [confidence(r) for r in groups[q]], rule) for q in questions]
        chosen[rule] = np.array([int(bool(groups[q][i]["execution_match"])) for q, i in zip(questions, picks)])
    keys = {"most common SQL text (a vote, not a rule)": {id(r): text_key(r) for q in questions for r in groups[q]}}
    if args.data_root:
        rows = [r for q in questions for r in groups[q]]
        keys["most common result (every candidate run)"] = dict(zip(map(id, rows), result_keys(rows, args.data_root)))
    for name, key in keys.items():
        picks = [choose([key[id(r)] for r in groups[q]], [confidence(r) for r in groups[q]], "most common tree")
                 for q in questions]
        chosen[name] = np.array([int(bool(groups[q][i]["execution_match"])) for q, i in zip(questions, picks)])
    oracle = np.array([int(any(r["execution_match"] for r in groups[q])) for q in questions])
    rng = np.random.default_rng(0)
    samples = rng.integers(0, len(questions), size=(args.bootstrap, len(questions)))
    print(f"{len(questions)} questions, {len(systems)} candidates each ({predictions})")
    print(f"{'choice':<40} {'execution accuracy':>18}  vs {best} alone (95% interval)")
    for s in sorted(systems, key=lambda s: -right[s].mean()):
        print(f"{'system ' + s:<40} {right[s].mean():>18.3f}")
    print(f"{'a candidate at random (mean)':<40} {np.mean([right[s].mean() for s in systems]):>18.3f}")
    for rule, hits in chosen.items():
        diff = hits - right[best]
        low, high = np.percentile(diff[samples].mean(axis=1), [2.5, 97.5])
        print(f"{rule:<40} {hits.mean():>18.3f}  {diff.mean():+.3f} ({low:+.3f} to {high:+.3f})")
    print(f"{'oracle (right where any is)':<40} {oracle.mean():>18.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
