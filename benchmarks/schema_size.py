"""What a query costs to score as its schema grows: the shipped model scores the same queries
against SQLite warehouses of more and more tables (each read from its database file, a few rows
a table), and prints, per size, the CPU milliseconds a query, the ratio to the smallest, the
seconds to read the schema from the database and the peak memory. A cost that grows with the
schema is work done per query that could be done once per schema.

    python benchmarks/schema_size.py --tables 20 200 1500 --queries 20

The warehouses are written here: ``--tables`` tables of 20 columns each (ids, amounts, dates,
text codes and names), with the same columns in each size's first tables, so every size scores
the same queries.
"""

from __future__ import annotations

import argparse
import random
import resource
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from model.cli_types import positive_int

WORDS = ["customer", "account", "order", "invoice", "payment", "shipment", "vendor", "product", "region",
         "campaign", "contract", "ledger", "budget", "employee", "department", "channel", "ticket", "carrier"]
KINDS = ["id", "code", "name", "amount_usd", "date", "status_code", "qty", "notes"]


def warehouse(path: Path, tables: int) -> None:
    """A SQLite file of ``tables`` tables t0.. of 20 columns and 3 rows each (the same for any size)."""
    rng = random.Random(0)
    with sqlite3.connect(path) as db:
        for t in range(tables):
            columns = ["id"] + [f"{rng.choice(WORDS)}_{rng.choice(WORDS)}_{KINDS[c % len(KINDS)]}_{c}"
                                for c in range(1, 20)]
            typed = ", ".join(f'"{c}" {"INTEGER" if c.endswith(("_id", "_qty")) or c == "id" else "TEXT"}'
                              for c in columns)
            db.execute(f"CREATE TABLE t{t} ({typed})")
            db.executemany(f"INSERT INTO t{t} VALUES ({', '.join('?' * len(columns))})",
                           [[k] + [f"v{k}_{c}" for c in range(1, 20)] for k in range(3)])


def queries(path: Path, n: int) -> list[dict]:
    """``n`` queries over the first tables (present at every size): a filter on a text code, a
    count, a join on ids."""
    with sqlite3.connect(path) as db:
        columns = {t: [r[1] for r in db.execute(f"PRAGMA table_info(t{t})")] for t in range(5)}
    out = []
    for k in range(n):
        t = k % 5
        c = columns[t][3]
        sql = [f"SELECT id FROM t{t} WHERE \"{c}\" = 'v1_3'", f"SELECT count(*) FROM t{t}",
               f"SELECT a.id FROM t{t} AS a JOIN t{(t + 1) % 5} AS b ON a.id = b.id"][k % 3]
        out.append({"sql": sql, "question": f"Which {c.replace('_', ' ')} rows are v1 3?", "db_id": "warehouse"})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=positive_int, nargs="+", default=[20, 200, 1500])
    parser.add_argument("--queries", type=positive_int, default=20)
    args = parser.parse_args(argv)
    if min(args.tables) < 5:
        parser.error(f"--tables: {min(args.tables)}: at least 5 each (the queries read the first five tables)")
    from model.data.databases import open_database
    from model.scoring import Scorer

    scorer = Scorer.pretrained()
    first = None
    with tempfile.TemporaryDirectory() as tmp:
        for tables in args.tables:
            path = Path(tmp) / f"warehouse_{tables}.sqlite"
            warehouse(path, tables)
            started = time.perf_counter()
            with open_database(path) as db:
                db.schema("warehouse")
            read_s = time.perf_counter() - started
            rows = [dict(r, database=str(path)) for r in queries(path, args.queries)]
            cpu = time.process_time()
            results = scorer.score_many(rows, progress=False, workers=1)
            per_query = (time.process_time() - cpu) / len(rows) * 1000
            first = first or per_query
            scored = sum(not hasattr(r, "kind") for r in results)
            print(f"{tables:>5} tables ({tables * 20:>6} columns): {per_query:7.1f} ms CPU a query "
                  f"({per_query / first:5.1f}x the smallest), schema read {read_s:6.2f} s, "
                  f"{scored}/{len(rows)} scored, peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
