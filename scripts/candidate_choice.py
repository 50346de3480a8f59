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

On a benchmark without databases (BIRD dev here), ``--scored`` reads ``rat-score``'s rows of every
candidate instead, each labelled right where its tree is the gold query's (``rat.to_tree``,
root hashes equal), the benchmark's ``--data-root`` giving the gold SQL and schemas:

    rat-score --model pretrained:spider_transfer --data-root ../shared/data/bird \\
        --predictions codes_1b.json codes_3b.json codes_7b.json codes_15b.json --out all.jsonl
    python scripts/candidate_choice.py --scored all.jsonl --data-root ../shared/data/bird
"""

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model.data.datasets import database_path, load_questions
from model.data.execution import default_cache_dir, execute_many, result_digest
from model.data.jsonl import read_jsonl
from model.nodes.outputs import tree_of
from model.scoring.choice import RULES, choose


def candidates_by_question(rows: list[dict]) -> tuple[dict[str, list[dict]], list[str]]:
    """The labelled rows (``right`` 0 or 1) of each question that every system answered, and the
    systems."""
    groups = defaultdict(list)
    for row in rows:
        groups[row["question_id"]].append(row)
    systems = sorted({r["system"] for group in groups.values() for r in group})
    return {q: sorted(g, key=lambda r: r["system"]) for q, g in groups.items() if len(g) == len(systems)}, systems


def run_rows(path: Path) -> list[dict]:
    """A run's out-of-fold rows with an execution label, each with ``right`` and its tree's ``hash``."""
    return [{**row, "right": int(bool(row["execution_match"])), "hash": tree_of(row).hash}
            for row in read_jsonl(path) if row.get("execution_match") is not None]


def scored_rows(path: Path, root: Path) -> list[dict]:
    """``rat-score``'s rows (benchmark questions, each with its system) with ``right``: the row's
    tree is its question's gold tree. A row whose SQL or gold cannot be read is left out."""
    import rat
    from model.data.datasets import load_schemas

    gold = {}
    for split in ("dev", "train"):
        try:
            gold |= {q.question_id: q for q in load_questions(root, split)}
        except (FileNotFoundError, ValueError):
            continue
    schemas = load_schemas(root)
    rows = []
    for row in read_jsonl(path):
        question = gold.get(str(row.get("question_id")))
        if question is None or row.get("query_confidence") is None:
            continue
        schema = schemas.get(question.db_id)
        try:
            tree = rat.to_tree(row["sql"], schema, row.get("dialect") or "sqlite")
            gold_tree = rat.to_tree(question.gold_sql, schema)
        except rat.RATError:
            continue
        rows.append({**row, "right": int(tree.hash == gold_tree.hash), "hash": tree.hash})
    return rows


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
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", type=Path, help="a train.py run directory (execution labels)")
    source.add_argument("--scored", type=Path, help="rat-score's rows of every candidate (tree labels; "
                        "needs --data-root, the benchmark)")
    parser.add_argument("--data-root", type=Path, help="the Spider folder: also vote over the results; with "
                        "--scored, the benchmark whose gold SQL labels the rows")
    parser.add_argument("--bootstrap", type=int, default=1000)
    args = parser.parse_args(argv)
    if args.bootstrap < 1:
        parser.error(f"--bootstrap must be at least 1, found {args.bootstrap}")
    if args.scored is not None:
        if not args.scored.is_file():
            parser.error(f"--scored {args.scored}: no such file")
        if args.data_root is None or not args.data_root.is_dir():
            parser.error("--scored needs --data-root, the benchmark folder its questions come from")
        predictions, label = args.scored, "tree match"
        rows = scored_rows(predictions, args.data_root)
    else:
        predictions, label = args.run / "predictions" / "test.jsonl", "execution accuracy"
        if not predictions.is_file():
            parser.error(f"--run {args.run}: no predictions/test.jsonl (a train.py run directory)")
        rows = run_rows(predictions)
    voting_results = args.data_root is not None and (args.data_root / "database").is_dir()
    if args.run is not None and args.data_root is not None and not voting_results:
        parser.error(f"--data-root {args.data_root}: no database/ folder (a Spider folder)")
    groups, systems = candidates_by_question(rows)
    if not groups:
        parser.error(f"{predictions}: no question whose answers all have a label")
    questions = sorted(groups)
    right = {s: np.array([next(r for r in groups[q] if r["system"] == s)["right"] for q in questions])
             for s in systems}
    best = max(systems, key=lambda s: right[s].mean())
    chosen = {}
    for rule in RULES:
        picks = [choose([r["hash"] for r in groups[q]], [confidence(r) for r in groups[q]], rule) for q in questions]
        chosen[rule] = np.array([groups[q][i]["right"] for q, i in zip(questions, picks)])
    keys = {"most common SQL text (a vote, not a rule)": {id(r): text_key(r) for q in questions for r in groups[q]}}
    if voting_results:
        rows = [r for q in questions for r in groups[q]]
        keys["most common result (every candidate run)"] = dict(zip(map(id, rows), result_keys(rows, args.data_root)))
    for name, key in keys.items():
        picks = [choose([key[id(r)] for r in groups[q]], [confidence(r) for r in groups[q]], "most common tree")
                 for q in questions]
        chosen[name] = np.array([groups[q][i]["right"] for q, i in zip(questions, picks)])
    oracle = np.array([int(any(r["right"] for r in groups[q])) for q in questions])
    rng = np.random.default_rng(0)
    samples = rng.integers(0, len(questions), size=(args.bootstrap, len(questions)))
    print(f"{len(questions)} questions, {len(systems)} candidates each ({predictions})")
    print(f"{'choice':<40} {label:>18}  vs {best} alone (95% interval)")
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
