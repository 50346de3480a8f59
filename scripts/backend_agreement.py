"""The shipped model on Spider dev with its databases in SQLite, PostgreSQL and DuckDB: node AUC
and whole-query AUC of ``Scorer.pretrained()`` scoring the 11 systems' predictions against the
SQLite files and against copies of them (``model.data.copy_database``) in a PostgreSQL server
and in DuckDB, side by side.

    python scripts/backend_agreement.py [--postgres ADMIN_URL] [--systems codes_7b,...] [--limit N]

The SQL is the predictions' own (SQLite); against a copy, the scorer runs it as
``model.data.execution.runnable_sql`` writes it for that backend, so the trees, and the node
labels, are the same three times and only the database differs. Without ``--postgres`` a
throwaway PostgreSQL server is started (tests/servers.py: Debian's postgresql package).
Labels as in training: ``rat.label_nodes`` against gold, execution match for the whole query.
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
from model.data.copy_database import copy_database
from model.data.datasets import database_path, load_schemas
from model.nodes.examples import build_examples
from model.scoring import RowError, Scorer

SHARED = Path(os.environ.get("RAT_SHARED_DATA", REPO.parent / "shared" / "data"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres", help="an admin URL of a PostgreSQL server to copy into "
                                           "(default: start a throwaway one)")
    parser.add_argument("--systems", help="comma-separated prediction file stems (default: all 11)")
    parser.add_argument("--limit", type=int, help="score only the first N labelled predictions")
    args = parser.parse_args()
    root = SHARED / "spider"
    if not (root / "dev.json").exists():
        sys.exit(f"needs Spider under {SHARED} (RAT_SHARED_DATA)")
    files = sorted((SHARED / "predictions" / "spider_dev").iterdir())
    if args.systems:
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
            rows = [{"sql": e.sql, "question": e.question, "db_id": e.db_id,
                     "schema": schemas[e.db_id], "database": urls[backend][e.db_id]}
                    for e in examples]
            start = time.perf_counter()
            results[backend] = scorer.score_many(rows, progress=False, spans=False,
                                                 label_shift=False)
            print(f"scored against {backend} in {time.perf_counter() - start:.0f} s", flush=True)
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


if __name__ == "__main__":
    main()
