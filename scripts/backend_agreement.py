"""The shipped model on Spider dev with its databases in SQLite, PostgreSQL and DuckDB: node AUC
and whole-query AUC of ``Scorer.pretrained()`` scoring the 11 systems' predictions against the
SQLite files and against copies of them (``model.data.copy_database``) in a PostgreSQL server
and in DuckDB, side by side.

    python scripts/backend_agreement.py [--postgres ADMIN_URL] [--systems codes_7b,...] [--limit N]

The SQL is the predictions' own (SQLite); against a copy, the scorer runs it as
``model.data.execution.runnable_sql`` writes it for that backend, so the trees, and the node
labels, are the same three times and only the database differs. Without ``--postgres`` a
throwaway PostgreSQL server is started (tests/servers.py: Debian's postgresql package).
Labels as in training: ``rat.label_nodes`` against gold, execution match for the whole query,
first as the SQLite files execute (the same labels for all three), then as each backend executes
(gold and prediction both run on that backend's copy, as ``runnable_sql`` writes them there: for
a PostgreSQL user a query PostgreSQL refuses is wrong; predictions whose gold fails there are
left out, and SQLite's AUCs over the same predictions are printed beside).
"""

import argparse
import os
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np

from model import metrics as M
from model.cli_types import positive_int
from model.data.copy_database import copy_database
from model.data.databases import open_database
from model.data.datasets import database_path, load_questions, load_schemas
from model.data.execution import prepare_sql, results_equal
from model.nodes.examples import build_examples, node_labels
from model.scoring import RowError, Scorer

SHARED = Path(os.environ.get("RAT_SHARED_DATA", REPO.parent / "shared" / "data"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", help="an admin URL of a PostgreSQL server to copy into "
                                           "(default: start a throwaway one)")
    parser.add_argument("--systems", help="comma-separated prediction file stems (default: all 11)")
    parser.add_argument("--limit", type=positive_int, help="score only the first N labelled predictions")
    args = parser.parse_args()
    root = SHARED / "spider"
    if not (root / "dev.json").exists():
        parser.error(f"needs Spider under {SHARED} (RAT_SHARED_DATA)")
    files = sorted((SHARED / "predictions" / "spider_dev").iterdir())
    if args.systems:
        unknown = [s for s in args.systems.split(",") if s not in {f.stem for f in files}]
        if unknown:
            parser.error(f"--systems: unknown system {unknown[0]!r} (known: {', '.join(f.stem for f in files)})")
        files = [f for f in files if f.stem in args.systems.split(",")]
    examples, _ = build_examples(root, "dev", prediction_files=files, require_database=True)
    examples = [e for e in examples if e.execution_match is not None][:args.limit]
    schemas = load_schemas(root)
    db_ids = sorted({e.db_id for e in examples})
    print(f"{len(examples)} labelled predictions of {len(files)} systems on {len(db_ids)} "
          "Spider dev databases", flush=True)
    with ExitStack() as stack:
        admin = args.postgres
        if admin is None:
            from tests.servers import PostgresServer

            admin = stack.enter_context(PostgresServer()).url(admin=True)
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="rat-duckdb-"))
        urls: dict[str, dict[str, str]] = {"sqlite": {d: str(database_path(root, d)) for d in db_ids},
                                           "postgres": {}, "duckdb": {}}
        start = time.perf_counter()
        for db in db_ids:
            urls["postgres"][db] = copy_database(database_path(root, db), admin).url
            urls["duckdb"][db] = copy_database(database_path(root, db), f"duckdb:///{folder}/").url
        print(f"copied into PostgreSQL and DuckDB in {time.perf_counter() - start:.0f} s", flush=True)
        scorer = Scorer.pretrained()
        results = {}
        for backend in ("sqlite", "postgres", "duckdb"):
            rows = [{"sql": e.sql, "question": e.question, "db_id": e.db_id, "dialect": "sqlite",
                     "schema": schemas[e.db_id], "database": urls[backend][e.db_id]}
                    for e in examples]
            start = time.perf_counter()
            results[backend] = scorer.score_many(rows, progress=False, spans=False,
                                                 label_shift=False)
            print(f"scored against {backend} in {time.perf_counter() - start:.0f} s", flush=True)
        gold = {q.question_id: q.gold_sql for q in load_questions(root, "dev")}
        outcomes = {b: _outcomes(examples, gold, urls[b], schemas) for b in ("postgres", "duckdb")}
    scored = [k for k in range(len(examples))
              if not any(isinstance(results[b][k], RowError) for b in results)]
    labels = np.concatenate([examples[k].node_labels for k in scored])
    correct = np.array([int(bool(examples[k].execution_match)) for k in scored])
    print(f"\n{len(scored)} predictions scored against all three ({labels.size} nodes)\n")
    print("| databases in | node AUC | whole-query AUC (query confidence) | whole-query AUC "
          "(least confident node) | largest node confidence gap to SQLite |\n|---|---|---|---|---|")
    base = None
    for backend, found in results.items():
        conf = np.concatenate([[n.confidence for n in found[k].nodes] for k in scored])
        query = np.array([found[k].query_confidence for k in scored])
        least = np.array([min(n.confidence for n in found[k].nodes) for k in scored])
        base = conf if base is None else base
        print(f"| {backend} | {M.auc(conf, labels):.4f} | {M.auc(query, correct):.4f} | "
              f"{M.auc(least, correct):.4f} | {np.max(np.abs(conf - base)):.4f} |")
    print("\nLabelled by execution on that backend (gold and prediction both run there); "
          "predictions whose gold fails there left out\n")
    print("| databases in | predictions | right there, wrong in SQLite | wrong there, right in "
          "SQLite | node AUC | whole-query AUC | SQLite's on the same predictions (SQLite's "
          "labels) |\n|---|---|---|---|---|---|---|")
    for backend, outcome in outcomes.items():
        kept = [k for k in scored if outcome[k] != "gold_error"]
        right = [outcome[k] == "match" for k in kept]
        own = np.concatenate([node_labels(*_trees(examples[k], gold, schemas), right[i])
                              if right[i] != bool(examples[k].execution_match)
                              else examples[k].node_labels for i, k in enumerate(kept)])
        same = np.concatenate([examples[k].node_labels for k in kept])
        sqlite_right = np.array([int(bool(examples[k].execution_match)) for k in kept])
        gained = sum(r and not s for r, s in zip(right, sqlite_right, strict=True))
        lost = sum(s and not r for r, s in zip(right, sqlite_right, strict=True))
        auc = {}
        for b in (backend, "sqlite"):
            auc[b] = (np.concatenate([[n.confidence for n in results[b][k].nodes] for k in kept]),
                      np.array([results[b][k].query_confidence for k in kept]))
        print(f"| {backend} | {len(kept)} | {gained} | {lost} | {M.auc(auc[backend][0], own):.4f} "
              f"| {M.auc(auc[backend][1], np.array(right, dtype=int)):.4f} | "
              f"{M.auc(auc['sqlite'][0], same):.4f} / {M.auc(auc['sqlite'][1], sqlite_right):.4f} |")


def _outcomes(examples, gold: dict[str, str], urls: dict[str, str], schemas) -> list[str]:
    """Each prediction's execution outcome on its copy: match, mismatch, pred_error, gold_error
    (both run there as the execution labels run them: ``prepare_sql``, then ``runnable_sql``)."""
    found: dict[tuple[str, str], tuple] = {}
    opened = {db: open_database(url) for db, url in urls.items()}
    outcomes = []
    try:
        for e in examples:
            for sql in (gold[e.question_id], e.sql):
                if (e.db_id, sql) not in found:
                    found[e.db_id, sql] = opened[e.db_id].run(prepare_sql(sql), "sqlite",
                                                              schemas[e.db_id])
            (gold_rows, gold_error), (rows, error) = (found[e.db_id, gold[e.question_id]],
                                                      found[e.db_id, e.sql])
            outcomes.append("gold_error" if gold_error else "pred_error" if error else
                            "match" if results_equal(gold_rows, rows, "order by" in
                                                     gold[e.question_id].lower()) else "mismatch")
    finally:
        for database in opened.values():
            database.close()
    return outcomes


def _trees(example, gold: dict[str, str], schemas):
    import rat

    schema = schemas[example.db_id]
    return rat.to_tree(example.sql, schema), rat.to_tree(gold[example.question_id], schema)


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
