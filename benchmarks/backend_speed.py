"""Scoring throughput with the databases in SQLite, PostgreSQL and DuckDB, side by side in one
run, and the connections left open once ``score_many`` returns.

    python benchmarks/backend_speed.py [--queries 1000] [--turns 2] [--postgres ADMIN_URL]

Items: ``--queries`` Spider dev predictions with a database, taken evenly over the 11 systems'
files; ``Scorer.pretrained()``; every row names its database: the SQLite file, or the URL of its
copy (``model.data.copy_database``) in a PostgreSQL server (a throwaway one from
tests/servers.py unless ``--postgres``) or in DuckDB, read through a read-only role. Nothing is
cached between runs: the scorer computes every feature and runs every query on its database
(SQLite's open connections are kept, as always). A live database makes ``score_many`` score in one
process, so SQLite is timed both ways: its default (worker processes) and ``workers=1``. The
settings take turns; queries/s is the mean over the turns (each turn in brackets). Connections
left open: PostgreSQL sessions of the scorer's role in ``pg_stat_activity`` (given a second to
end), and this process's open files on the SQLite / DuckDB database files, after each
``score_many``.
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

from model.cli_types import positive_int
from model.data.copy_database import copy_database, target
from model.data.datasets import database_path, load_questions, load_schemas
from model.data.predictions import load_predictions
from model.scoring import RowError, Scorer

SHARED = Path(os.environ.get("RAT_SHARED_DATA", REPO.parent / "shared" / "data"))
SCORER_ROLE = "rat_scorer"


def dataset(n: int) -> tuple[Path, list[dict]]:
    root = SHARED / "spider"
    questions = load_questions(root, "dev")
    by_id = {q.question_id: q for q in questions}
    schemas = load_schemas(root)
    rows = []
    for f in sorted((SHARED / "predictions" / "spider_dev").iterdir()):
        for p in load_predictions(f, questions):
            if database_path(root, p.db_id) is not None:
                rows.append({"sql": p.sql, "question": by_id[p.question_id].question,
                             "db_id": p.db_id, "schema": schemas[p.db_id]})
    step = max(1, len(rows) // n)
    return root, rows[::step][:n]


def open_files(suffixes: tuple[str, ...]) -> int:
    """This process's open file descriptors on files ending in ``suffixes``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").endswith(suffixes)
        except OSError:
            continue
    return count


def postgres_sessions(admin_url: str, settle_s: float = 1.0) -> int:
    """Sessions of the scorer's role, once those closed have had ``settle_s`` to end (a closed
    connection's server process leaves ``pg_stat_activity`` a moment after the client let go)."""
    import psycopg

    t = target(admin_url)
    with psycopg.connect(host=t.host, port=t.port, user=t.user, password=t.password,
                         dbname="postgres", autocommit=True) as conn:
        deadline = time.perf_counter() + settle_s
        while True:
            count = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s",
                                 (SCORER_ROLE,)).fetchone()[0]
            if count == 0 or time.perf_counter() > deadline:
                return count
            time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=positive_int, default=1000)
    parser.add_argument("--turns", type=positive_int, default=2)
    parser.add_argument("--postgres", help="an admin URL of a PostgreSQL server (default: start "
                                           "a throwaway one); the role rat_scorer must exist")
    args = parser.parse_args()
    if not (SHARED / "spider" / "dev.json").exists():
        parser.error(f"needs Spider under {SHARED} (RAT_SHARED_DATA)")
    root, rows = dataset(args.queries)
    db_ids = sorted({r["db_id"] for r in rows})
    with ExitStack() as stack:
        admin = args.postgres
        if admin is None:
            from tests.servers import PostgresServer, ServerUnavailable

            try:
                server = stack.enter_context(PostgresServer())
            except ServerUnavailable as reason:
                print(f"skipped: {reason}")
                return
            admin = server.url(admin=True)
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="rat-duckdb-"))
        where = {"sqlite": {}, "postgres": {}, "duckdb": {}}
        for db in db_ids:
            where["sqlite"][db] = str(database_path(root, db))
            copied = copy_database(database_path(root, db), admin, grant=SCORER_ROLE).url
            t = target(copied)
            where["postgres"][db] = copied.replace(f"{t.user}:{t.password}@",
                                                   f"{SCORER_ROLE}:scorer-pw@") \
                if args.postgres is None else copied
            where["duckdb"][db] = copy_database(database_path(root, db), f"duckdb:///{folder}/").url
        print(f"{len(rows)} Spider dev predictions on {len(db_ids)} databases; "
              f"{os.cpu_count()} CPU cores, load {os.getloadavg()[0]:.1f}\n", flush=True)
        scorer = Scorer.pretrained()
        settings = {"sqlite (worker processes)": ("sqlite", {}),
                    "sqlite, workers=1": ("sqlite", {"workers": 1}),
                    "postgres": ("postgres", {}), "duckdb": ("duckdb", {})}
        speeds = {name: [] for name in settings}
        left_open = {name: 0 for name in settings}
        errors = {name: 0 for name in settings}
        scorer.score_many([{**rows[0], "database": where["sqlite"][rows[0]["db_id"]]}],
                          progress=False, label_shift=False)  # warm: the model is loaded
        for _ in range(args.turns):
            for name, (backend, options) in settings.items():
                batch = [{**r, "database": where[backend][r["db_id"]]} for r in rows]
                start = time.perf_counter()
                results = scorer.score_many(batch, progress=False, label_shift=False, dialect="sqlite", **options)
                speeds[name].append(len(batch) / (time.perf_counter() - start))
                errors[name] = sum(isinstance(r, RowError) for r in results)
                if backend == "postgres":
                    left_open[name] = max(left_open[name], postgres_sessions(admin))
                else:
                    suffix = (".sqlite",) if backend == "sqlite" else (".duckdb", ".duckdb.wal")
                    left_open[name] = max(left_open[name], open_files(suffix))
    base = sum(speeds["sqlite, workers=1"]) / args.turns
    print("| databases in | queries/s (turns) | vs SQLite, workers=1 | row errors | "
          "connections open after score_many |\n|---|---|---|---|---|")
    for name, turns in speeds.items():
        mean = sum(turns) / len(turns)
        print(f"| {name} | {mean:.0f} ({', '.join(f'{s:.0f}' for s in turns)}) | "
              f"{mean / base:.2f}x | {errors[name]} | {left_open[name]} |")


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
