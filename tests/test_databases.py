"""Live databases (model.data.databases) against real servers: PostgreSQL and MariaDB started by
tests/servers.py, DuckDB and SQLite files. A demo database (music_events, the embedded demo
corpus) is copied into each; writes attempted through the scorer's connection fail and change
nothing, the schema read from each database is the one declared, scores against each backend
match the SQLite file's, and rat-score / rat-serve take URLs."""

import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import rat
from model.data.databases import DatabaseError, open_database, schema_from_ddl
from model.data.execution import cancellable, unfinished
from model.errors import UsageError
from model.nodes.features import DatabaseProbe
from model.synth.demo.databases import (
    generate_rows,
    load_database_specs,
    spider_table_entry,
    write_database,
)
from tests.servers import DEFAULT_DATABASE, free_port, page_dom, start_service

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled",
       "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(REPO)}
DB_ID = "music_events"
TYPES = {"postgres": {"INTEGER": "INTEGER", "REAL": "DOUBLE PRECISION", "TEXT": "TEXT"},
         "duckdb": {"INTEGER": "INTEGER", "REAL": "DOUBLE", "TEXT": "TEXT"},
         "mysql": {"INTEGER": "INTEGER", "REAL": "DOUBLE", "TEXT": "VARCHAR(255)"}}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo database: its declaration, its rows and its SQLite file."""
    spec = load_database_specs()[DB_ID]
    rows = generate_rows(spec)
    path = tmp_path_factory.mktemp("demo") / f"{DB_ID}.sqlite"
    write_database(spec, rows, path)
    return spec, rows, path


def ddl(spec, kind: str) -> list[str]:
    quote = (lambda n: f"`{n}`") if kind == "mysql" else (lambda n: f'"{n}"')
    statements = []
    for table in spec.tables.values():
        columns = [f"{quote(c.name)} {TYPES[kind][c.sql_type]}" for c in table.columns]
        columns.append(f"PRIMARY KEY ({', '.join(map(quote, table.primary_key))})")
        columns += [f"FOREIGN KEY ({quote(c)}) REFERENCES {quote(p)} ({quote(pc)})" for c, p, pc in table.fks]
        statements.append(f"CREATE TABLE {quote(table.name)} ({', '.join(columns)})")
    return statements


def copy_into(kind: str, conn, spec, rows) -> None:
    """The demo tables (keys included) and all their rows, through a loading connection."""
    cursor = conn.cursor()
    for statement in ddl(spec, kind):
        cursor.execute(statement)
    mark = "?" if kind == "duckdb" else "%s"
    for table in spec.tables.values():
        cursor.executemany(f"INSERT INTO {table.name} VALUES ({', '.join([mark] * len(table.columns))})",
                           rows[table.name])
    conn.commit()


@pytest.fixture(scope="module")
def pg_demo(postgres_server, demo):
    """(scorer URL, superuser URL) of the demo copy in PostgreSQL."""
    import psycopg

    spec, rows, _ = demo
    url = postgres_server.create_database(DB_ID)
    admin = postgres_server.url(DB_ID, admin=True)
    with psycopg.connect(admin) as conn:
        if conn.execute("SELECT to_regclass('artists')").fetchone()[0] is None:
            copy_into("postgres", conn, spec, rows)
    return url, admin


@pytest.fixture(scope="module")
def mysql_demo(mysql_server, demo):
    import pymysql

    spec, rows, _ = demo
    url = mysql_server.create_database(DB_ID)
    conn = pymysql.connect(host=mysql_server.host, port=mysql_server.port, user="rat_admin",
                           password="admin-pw", database=DB_ID)
    with conn:
        with conn.cursor() as cursor:
            cursor.execute("SHOW TABLES")
            present = cursor.fetchall()
        if not present:
            copy_into("mysql", conn, spec, rows)
    return url, mysql_server.url(DB_ID, admin=True)


@pytest.fixture(scope="module")
def duck_demo(demo, tmp_path_factory):
    duckdb = pytest.importorskip("duckdb")
    spec, rows, _ = demo
    path = tmp_path_factory.mktemp("duck") / f"{DB_ID}.duckdb"
    conn = duckdb.connect(str(path))
    copy_into("duckdb", conn, spec, rows)
    conn.close()
    return path


def checksum(kind: str, target) -> str:
    """sha256 over every table's name and all its rows, read through a loading connection."""
    digest = hashlib.sha256()
    if kind == "postgres":
        import psycopg

        with psycopg.connect(target) as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")]
            for t in tables:
                digest.update(repr((t, conn.execute(f'SELECT * FROM "{t}" ORDER BY 1').fetchall())).encode())
    elif kind == "mysql":
        import pymysql

        from model.data.databases import parse_url

        u = parse_url(target)
        conn = pymysql.connect(host=u["host"], port=u["port"], user=u["user"], password=u["password"],
                               database=u["database"])
        with conn, conn.cursor() as cursor:
            cursor.execute("SHOW TABLES")
            for (t,) in sorted(cursor.fetchall()):
                cursor.execute(f"SELECT * FROM `{t}` ORDER BY 1")
                digest.update(repr((t, cursor.fetchall())).encode())
    else:  # a file: its bytes
        digest.update(Path(target).read_bytes())
    return digest.hexdigest()


# ---------------------------------------------------------------------------- write attempts

COMMON_WRITES = [
    "INSERT INTO venues VALUES (99, 'x', 'y', 1)",
    "UPDATE venues SET capacity = 0",
    "DELETE FROM concerts",
    "DROP TABLE concerts",
    "CREATE TABLE intruder (x INTEGER)",
    "ALTER TABLE venues ADD COLUMN x INTEGER",
    "SELECT 1; DROP TABLE concerts",
    "SELECT 1; DELETE FROM venues",
    "/* hidden */ DROP TABLE venues",
    "(DELETE FROM venues)",
]


def assert_writes_fail(db, statements, before: str, after) -> None:
    for sql in statements:
        rows, error = db.execute(sql, timeout_s=2.0)
        assert rows is None and error, (sql, rows)
    assert after() == before


def test_postgres_refuses_every_write_and_changes_nothing(pg_demo, tmp_path):
    url, admin = pg_demo
    marker = tmp_path / "copied"
    before = checksum("postgres", admin)
    writes = COMMON_WRITES + [
        f"COPY venues TO PROGRAM 'touch {marker}'",
        "COPY venues FROM '/etc/passwd'",
        "SET default_transaction_read_only = off",
        "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
        "WITH gone AS (DELETE FROM venues RETURNING *) SELECT * FROM gone",
        "SELECT * FROM venues FOR UPDATE; COMMIT; DROP TABLE venues",
        "SELECT lo_import('/etc/passwd')",
        "DO $$ BEGIN DELETE FROM venues; END $$",
    ]
    with open_database(url) as db:
        assert_writes_fail(db, writes, before, lambda: checksum("postgres", admin))
        # a setting changed by a query (set_config in a SELECT) lasts only for its transaction
        db.execute("SELECT set_config('default_transaction_read_only', 'off', false)")
        assert db.execute("SHOW default_transaction_read_only")[1]  # SHOW is not a query: refused
        rows, error = db.execute("SELECT current_setting('default_transaction_read_only'), "
                                 "current_setting('transaction_read_only')")
        assert rows == [("on", "on")], error
        assert_writes_fail(db, ["DELETE FROM venues"], before, lambda: checksum("postgres", admin))
        start = time.monotonic()
        rows, error = db.execute("SELECT pg_sleep(5)", timeout_s=1.0)
        assert rows is None and error.startswith("timeout") and time.monotonic() - start < 3
        assert db.execute("SELECT count(*) FROM venues") == ([(10,)], None)  # still usable
    # even the superuser's connection sends no COPY (only reads are sent at all)
    with open_database(admin) as db:
        assert_writes_fail(db, [f"COPY venues TO PROGRAM 'touch {marker}'", "DROP TABLE venues"],
                           before, lambda: checksum("postgres", admin))
    assert not marker.exists()


def test_a_failed_postgres_query_is_its_error_alone(pg_demo, caplog):
    """The error comes back as the result; psycopg's "error ignored terminating <Pipeline>"
    warning for the aborted pipeline is not logged (it went to stderr once per failed query)."""
    url, _ = pg_demo
    with caplog.at_level(logging.WARNING), open_database(url) as db:
        for sql in ("SELECT no_such_column FROM venues", "SELECT 1 / (count(*) - 10) FROM venues",
                    "SELECT CAST(name AS INTEGER) FROM venues"):
            rows, error = db.execute(sql)
            assert rows is None and error, sql
    assert not [r for r in caplog.records if "terminating" in r.getMessage()]


def test_failed_postgres_queries_leave_the_next_ones_alone(pg_demo):
    """Failing and good queries in turn on one connection: every good one answers (psycopg once
    took the statements a failed query's pipeline skipped for prepared, and from the fifth query
    on every good one failed with 'prepared statement "_pg3_3" does not exist')."""
    url, _ = pg_demo
    with open_database(url) as db:
        for i in range(12):
            rows, error = db.execute("SELECT count(*) FROM venues")
            assert error is None and rows and rows[0][0] > 0, (i, error)
            rows, error = db.execute("SELECT CAST(name AS INTEGER) FROM venues")
            assert rows is None and "InvalidTextRepresentation" in error, (i, error)


def test_duckdb_refuses_every_write_and_reads_no_file(duck_demo, tmp_path):
    before = checksum("duckdb", duck_demo)
    out = tmp_path / "out.csv"
    writes = COMMON_WRITES + [
        f"COPY venues TO '{out}'",
        f"ATTACH '{tmp_path / 'new.duckdb'}' AS other",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SELECT * FROM read_csv('/etc/passwd')",
        "FROM read_text('/etc/passwd')",
        "SELECT * FROM '/etc/passwd'",
        "SET enable_external_access = true",
        "SELECT 1; COPY venues TO '/tmp/x.csv'",
    ]
    with open_database(duck_demo) as db:
        assert db.dialect == "duckdb"
        assert_writes_fail(db, writes, before, lambda: checksum("duckdb", duck_demo))
        start = time.monotonic()
        rows, error = db.execute("SELECT count(*) FROM range(100000000000) a", timeout_s=1.0)
        assert rows is None and error.startswith("timeout") and time.monotonic() - start < 5
        assert db.execute("FROM venues SELECT count(*)") == ([(10,)], None)
    assert not out.exists() and not (tmp_path / "new.duckdb").exists()


def test_duckdb_work_past_its_memory_is_stopped_and_spills_nothing_beside_the_file(duck_demo):
    """A DuckDB file rat opens has a bounded working memory (1 GiB unless told), not DuckDB's 80%
    of the machine, and writes no `<file>.tmp` folder to spill into: a query past it is stopped
    (its result unknown, as past a timeout), the next one runs."""
    before = checksum("duckdb", duck_demo)
    with open_database(duck_demo) as db:
        assert db.memory_limit == "1.0 GiB"
    with open_database(duck_demo, duckdb_memory_mib=64) as db:
        assert db.memory_limit == "64.0 MiB"
        rows, error = db.execute("SELECT count(*) FROM (SELECT i, count(*) FROM range(20000000) t(i) GROUP BY i)",
                                 timeout_s=30)
        assert rows is None and error == "working memory past 64.0 MiB" and unfinished(error)
        assert db.execute("FROM venues SELECT count(*)") == ([(10,)], None)
    assert checksum("duckdb", duck_demo) == before
    assert sorted(p.name for p in duck_demo.parent.iterdir()) == [duck_demo.name]


def test_mysql_refuses_every_write_and_changes_nothing(mysql_demo, tmp_path):
    url, admin = mysql_demo
    before = checksum("mysql", admin)
    writes = COMMON_WRITES + [
        "SELECT * FROM venues INTO OUTFILE '/tmp/rat-venues.txt'",
        "SELECT 1 INTO DUMPFILE '/tmp/rat-dump.txt'",
        "SET SESSION TRANSACTION READ WRITE",
        "LOAD DATA INFILE '/etc/passwd' INTO TABLE venues",
        "REPLACE INTO venues VALUES (1, 'x', 'y', 1)",
        "LOCK TABLES venues WRITE",
    ]
    for path in ("/tmp/rat-venues.txt", "/tmp/rat-dump.txt"):
        Path(path).unlink(missing_ok=True)
    with open_database(url) as db:
        assert db.dialect == "mysql"
        assert_writes_fail(db, writes, before, lambda: checksum("mysql", admin))
        start = time.monotonic()
        rows, error = db.execute("SELECT SLEEP(5)", timeout_s=1.0)
        assert rows is None and error.startswith("timeout") and time.monotonic() - start < 3
        assert db.execute("SELECT count(*) FROM venues") == ([(10,)], None)
    # the superuser's connection too: a read-only transaction, and no file written
    with open_database(admin) as db:
        assert_writes_fail(db, ["SELECT * FROM venues INTO OUTFILE '/tmp/rat-venues.txt'",
                                "DELETE FROM venues"], before, lambda: checksum("mysql", admin))
    assert not Path("/tmp/rat-venues.txt").exists() and not Path("/tmp/rat-dump.txt").exists()


def test_mysql_runs_no_executable_comment_and_no_file_write_hidden_by_comments(mysql_demo):
    admin = mysql_demo[1]
    before = checksum("mysql", admin)
    with open_database(admin) as db:  # even the superuser's connection: never sent
        for sql, says in (("/*!40101 CREATE TABLE rat_made */ SELECT 1", "a /*! ... */ comment"),
                          ("SELECT 1 /*M!100000 , sleep(1) */", "a /*! ... */ comment"),
                          ("SELECT * FROM venues INTO/**/OUTFILE '/tmp/rat-c.txt'", "INTO OUTFILE"),
                          ("SELECT * FROM venues INTO -- c\nDUMPFILE '/tmp/rat-c.txt'", "INTO OUTFILE")):
            rows, error = db.execute(sql)
            assert rows is None and says in error, (sql, error)
    assert checksum("mysql", admin) == before and not Path("/tmp/rat-c.txt").exists()


def test_effects_that_outlive_the_transaction_are_refused(pg_demo, mysql_demo, duck_demo):
    """A session lock survives ROLLBACK and a sequence's next value is never rolled back: such
    functions are refused by name before the statement is sent (a caller's writable DuckDB
    connection ran nextval)."""
    import duckdb
    import psycopg

    caller = psycopg.connect(pg_demo[0], autocommit=True)  # a caller's connection: its locks are never let go
    with open_database(caller) as db:
        for sql in ("SELECT pg_advisory_lock(42)", "SELECT pg_try_advisory_lock_shared(1, 2)",
                    "SELECT \"pg_advisory_lock\"(7)", "SELECT nextval('s')", "SELECT pg_advisory_lock/**/(42)",
                    "SELECT pg_catalog.pg_advisory_lock(42)", "SELECT pg_catalog . \"pg_advisory_lock\" -- c\n (42)",
                    "SELECT pg_advisory_lock /* a /* nested */ comment */ (42)", "SELECT 1 FROM pg_advisory_lock(42)"):
            rows, error = db.execute(sql)
            assert rows is None and error.startswith("refused: pg_") or "nextval" in sql, (sql, error)
            assert "() has an effect that outlives the query" in error, (sql, error)
        rows, error = db.execute('SELECT U&"pg\\0061dvisory_lock"(42)')
        assert rows is None and 'U&"..."' in error, error
        assert db.execute("SELECT 'pg_advisory_lock' AS word, '/* pg_advisory_lock */' AS text") == (
            [("pg_advisory_lock", "/* pg_advisory_lock */")], None)  # the name as text is no call
    with psycopg.connect(pg_demo[1], autocommit=True) as other:  # lock 42 is free
        assert other.execute("SELECT pg_try_advisory_lock(42)").fetchone()[0] is True
        other.execute("SELECT pg_advisory_unlock_all()")
    caller.close()
    with open_database(mysql_demo[0]) as db:
        rows, error = db.execute("SELECT GET_LOCK('rat', 0)")
        assert rows is None and "get_lock() has an effect that outlives the query" in error
    conn = duckdb.connect()  # a caller's own, writable connection
    conn.execute("CREATE SEQUENCE s")
    with open_database(conn) as db:
        assert db.execute("SELECT nextval('s')")[0] is None
    assert conn.execute("SELECT nextval('s')").fetchone()[0] == 1  # untouched before
    conn.close()


def test_a_query_that_ends_its_own_connection_fails_alone(pg_demo):
    """pg_terminate_backend / pg_cancel_backend are refused by name; a function of the user's own
    that ends the scorer's connection loses it twice: that query fails, the next ones run on a
    new connection (a whole predictions file, score_many or a rat-serve request went on)."""
    import psycopg

    url, admin = pg_demo
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE OR REPLACE FUNCTION rat_end_me() RETURNS bool LANGUAGE sql "
                     "AS $$ SELECT pg_terminate_backend(pg_backend_pid()) $$")
    try:
        with open_database(url) as db:
            for sql in ("SELECT pg_terminate_backend(pg_backend_pid())", "SELECT pg_cancel_backend (pg_backend_pid())"):
                rows, error = db.execute(sql)
                assert rows is None and error.startswith("refused: pg_") and "ends a session" in error, error
            rows, error = db.execute("SELECT rat_end_me()")
            assert rows is None and "connection lost" in error and "ends its own connection" in error, error
            assert db.execute("SELECT count(*) FROM venues") == ([(10,)], None)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("DROP FUNCTION rat_end_me()")


def test_select_into_is_refused_as_no_read(pg_demo, mysql_demo):
    """SELECT .. INTO makes a table (PostgreSQL) or sets variables (MySQL): refused in one line, as
    any statement that does not read; a string or a name holding `into` is no INTO."""
    with open_database(pg_demo[0]) as db:
        for sql in ("SELECT 1 AS a INTO public.pwn3", "SELECT * INTO TEMP tmp_x FROM venues",
                    "WITH v AS (SELECT 1 AS a) SELECT a INTO t2 FROM v"):
            rows, error = db.execute(sql)
            assert rows is None and error.startswith("refused: SELECT .. INTO writes a table"), (sql, error)
        assert db.execute("SELECT 'into' AS into_word") == ([("into",)], None)
    with open_database(mysql_demo[0]) as db:
        rows, error = db.execute("SELECT 1 INTO @x")
        assert rows is None and "SELECT .. INTO" in error, error


def test_a_lost_connection_is_tried_again_once_and_never_read_as_a_failed_query(pg_demo):
    import psycopg

    url, admin = pg_demo

    def terminate(application: str) -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                         (application,))

    with open_database(url) as db:  # opened here: connected again
        assert db.execute("SELECT count(*) FROM venues") == ([(10,)], None)
        terminate("rat-confidence")
        assert db.execute("SELECT count(*) FROM venues") == ([(10,)], None)
    caller = psycopg.connect(url, application_name="rat-caller")  # the caller's: cannot be
    with open_database(caller) as db:
        assert db.execute("SELECT count(*) FROM venues") == ([(10,)], None)
        terminate("rat-caller")
        with pytest.raises(DatabaseError, match="connection lost"):
            db.execute("SELECT count(*) FROM venues")
    caller.close()


SCHEMAS = [
    "CREATE SCHEMA IF NOT EXISTS sales", "CREATE SCHEMA IF NOT EXISTS archive",
    "CREATE TABLE IF NOT EXISTS venues (venue_id INTEGER PRIMARY KEY, name TEXT)",
    ("CREATE TABLE IF NOT EXISTS sales.invoices (invoice_id INTEGER PRIMARY KEY, "
     "venue_id INTEGER REFERENCES venues (venue_id), region TEXT)"),
    "CREATE TABLE IF NOT EXISTS sales.venues (other INTEGER PRIMARY KEY)",  # public's venues comes first
    # a name in two schemas off the path
    "CREATE TABLE IF NOT EXISTS sales.notes (a INTEGER REFERENCES sales.venues (other))",
    "CREATE TABLE IF NOT EXISTS archive.notes (b INTEGER)",
]
MULTI_SCHEMA = {"venues": ("venue_id", "name"), "invoices": ("invoice_id", "venue_id", "region"),
                "notes": ("b",), "sales.venues": ("other",), "sales.notes": ("a",)}


def assert_other_schemas_read(db) -> None:
    """The tables ``db`` reads from a database holding SCHEMAS, the default search path."""
    schema = db.schema()
    assert {t: c for t, c in schema.tables.items()} == MULTI_SCHEMA
    assert "invoices.invoice_id" in schema.primary_keys
    # (DuckDB has no foreign keys across schemas)
    assert db.dialect == "duckdb" or ("invoices.venue_id", "venues.venue_id") in schema.foreign_keys
    # the keys of another schema's table (`sales.venues` beside the `venues` read) are its own
    assert "sales.venues.other" in schema.primary_keys and "venues.venue_id" in schema.primary_keys
    assert ("sales.notes.a", "sales.venues.other") in schema.foreign_keys
    assert db.table_name("invoices") == '"sales"."invoices"' and db.table_name("venues") == '"venues"'
    probe = DatabaseProbe(db)
    assert probe.value_in_column("invoices", "region", "'North'", like=False) == (1.0, 1.0)
    assert db.execute("SELECT count(*) FROM sales.invoices") == ([(1,)], None)
    # a schema written where the table is read from is dropped; another is another table
    home = "main" if db.dialect == "duckdb" else "public"
    assert schema.table_schemas == {"venues": home, "invoices": "sales", "notes": "archive"}

    def tree(sql):
        return rat.to_tree(sql, schema, dialect=db.dialect)

    assert tree(f"SELECT name FROM {home}.venues") == tree("SELECT name FROM venues")
    assert tree("SELECT region FROM sales.invoices") == tree("SELECT region FROM invoices")
    shadowed = tree("SELECT count(*) FROM sales.venues")  # not public's venues
    assert shadowed != tree("SELECT count(*) FROM venues")
    assert shadowed.children[1] == rat.Node("In_schema", (rat.Node("venues"), rat.Node("sales")))
    # a name two schemas off the path share: the first by name is read, the other is another table
    assert tree("SELECT b FROM archive.notes") == tree("SELECT b FROM notes")
    assert tree("SELECT a FROM sales.notes") != tree("SELECT a FROM archive.notes")
    # another schema's table has its own columns, and its values are looked up in it
    assert rat.serialize(tree("SELECT other FROM venues v JOIN sales.venues s ON v.venue_id = s.other")) \
        .startswith("((sales.venues.other)")
    assert schema.source("sales.venues.other") == "sales.venues" + ".other"
    assert db.table_name("sales.venues") == '"sales"."venues"'
    assert probe.value_in_column("sales.venues", "other", "7", like=False) == (1.0, 1.0)
    assert probe.value_in_column("sales.venues", "other", "1", like=False) == (0.0, 0.0)


def test_tables_of_other_postgres_schemas_are_read_by_their_names(postgres_server):
    """The search path's tables first (as PostgreSQL resolves a name), then those of other
    schemas whose names are theirs alone; their lookups name their schema."""
    import psycopg

    url = postgres_server.create_database("schemas")
    with psycopg.connect(postgres_server.url("schemas", admin=True), autocommit=True) as conn:
        for statement in SCHEMAS:
            conn.execute(statement)
        if conn.execute("SELECT count(*) FROM sales.invoices").fetchone()[0] == 0:
            conn.execute("INSERT INTO venues VALUES (1, 'Hall')")
            conn.execute("INSERT INTO sales.invoices VALUES (1, 1, 'North')")
            conn.execute("INSERT INTO sales.venues VALUES (7)")
        conn.execute("GRANT USAGE ON SCHEMA sales, archive TO rat_scorer")
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public, sales, archive TO rat_scorer")
    with open_database(url) as db:
        assert_other_schemas_read(db)
    with open_database(url + "?options=-csearch_path%3Dsales,public") as db:  # sales first
        schema = db.schema()
        assert schema.tables["venues"] == ("other",) and schema.tables["invoices"][0] == "invoice_id"
        assert schema.tables["public.venues"] == ("venue_id", "name")
        # sales.invoices refers to public's venues, now `public.venues`, not the `venues` read
        assert ("invoices.venue_id", "public.venues.venue_id") in schema.foreign_keys
        assert {"venues.other", "public.venues.venue_id"} <= set(schema.primary_keys)
        assert db.table_name("invoices") == '"invoices"' and "notes" in schema.tables


def test_materialized_views_are_read_from_postgres_and_from_its_dump(postgres_server):
    """A materialized view (which information_schema does not list) is a table of its columns,
    read from the catalogue and from pg_dump's `CREATE MATERIALIZED VIEW .. WITH NO DATA`; what the
    role may not SELECT is not read."""
    import psycopg

    url = postgres_server.create_database("matviews")
    admin = postgres_server.url("matviews", admin=True)
    with psycopg.connect(admin, autocommit=True) as conn:
        for statement in ("CREATE SCHEMA IF NOT EXISTS sales",
                          "CREATE TABLE IF NOT EXISTS orders (id integer PRIMARY KEY, created_at timestamp, total numeric)",
                          "CREATE TABLE IF NOT EXISTS secrets (code text)",
                          ("CREATE MATERIALIZED VIEW IF NOT EXISTS sales.daily_revenue AS SELECT created_at::date AS day, "
                           "sum(total) AS revenue FROM orders GROUP BY 1"),
                          "GRANT USAGE ON SCHEMA sales TO rat_scorer", "GRANT SELECT ON sales.daily_revenue TO rat_scorer",
                          "REVOKE SELECT ON secrets FROM rat_scorer"):
            conn.execute(statement)
    with open_database(url) as db:
        schema = db.schema()
        assert schema.tables == {"orders": ("id", "created_at", "total"), "daily_revenue": ("day", "revenue")}
        assert schema.column_types["daily_revenue.day"] == "date" and schema.table_schemas["daily_revenue"] == "sales"
        assert db.execute("SELECT day FROM sales.daily_revenue") == ([], None)
    dump = subprocess.run([str(postgres_server.bin / "pg_dump"), "--schema-only", admin],
                          capture_output=True, text=True, check=True).stdout
    assert "WITH NO DATA" in dump
    from_dump = schema_from_ddl(dump, "postgres")
    assert from_dump.tables["daily_revenue"] == ("day", "revenue") and "secrets" in from_dump.tables


def test_tables_of_other_duckdb_schemas_are_read_by_their_names(tmp_path):
    import duckdb

    path = tmp_path / "schemas.duckdb"
    with duckdb.connect(str(path)) as conn:
        for statement in SCHEMAS:
            conn.execute(statement.replace(" REFERENCES venues (venue_id)", ""))
        conn.execute("INSERT INTO venues VALUES (1, 'Hall')")
        conn.execute("INSERT INTO sales.invoices VALUES (1, 1, 'North')")
        conn.execute("INSERT INTO sales.venues VALUES (7)")
    with open_database(path) as db:
        assert_other_schemas_read(db)


def test_a_column_of_another_schemas_table_is_scored_as_that_tables(tmp_path, scorer):
    """`sales.venues` shares its name with the `venues` read: its column `other` is its own
    (not a column missing from `venues`), its values looked up in it."""
    test_tables_of_other_duckdb_schemas_are_read_by_their_names(tmp_path)
    scored = scorer.score("SELECT count(*) FROM sales.venues WHERE other = 7", question="How many others are 7?",
                          database=tmp_path / "schemas.duckdb", dialect="duckdb")
    column = next(n for n in scored.nodes if n.label == "sales.venues.other")
    literal = next(n for n in scored.nodes if n.label == "7")
    assert not {"in_schema", "value_in_column"} & {r.feature for r in column.reasons + literal.reasons}
    assert column.confidence > 0.5 and scored.query_confidence > 0.5


@pytest.mark.parametrize("url", [
    "postgresql:/scorer:secretpw@localhost:{port}/shop", "postgresql//scorer:secretpw@localhost:{port}/shop",
    "postgresql:scorer:secretpw@localhost:{port}/shop", " postgresql:/scorer:secretpw@localhost:{port}/shop",
    # a password with an unencoded @ / : is read whole (libpq was asked to resolve the host 'ss')
    "postgresql://scorer:secretpw@ss/w:rd@127.0.0.1:{port}/shop", " postgresql://scorer:secretpw@127.0.0.1:{port}/shop",
])
def test_a_mistyped_database_url_never_prints_its_password(url, capsys):
    from model.scoring.cli import main

    pytest.importorskip("psycopg")
    assert main(["--database", url.format(port=free_port()), "--sql", "SELECT 1"]) == 2
    err = capsys.readouterr().err
    assert "secretpw" not in err and "ss/w" not in err and "'ss'" not in err and err.count("\n") == 1, err
    assert ("cannot connect" if "://" in url else "not a valid database URL") in err, err


def test_a_password_with_an_at_sign_is_masked_whole():
    from model.data.databases import mask_password

    assert mask_password("postgresql://scorer:p@ss/w@db:5432/shop?sslmode=require") == \
        "postgresql://scorer:***@db:5432/shop?sslmode=require"


@pytest.mark.parametrize("url", ["postgresql://u:sekret@[::1/shop", "mysql://u:sekret@\uff03host/shop"])
def test_a_malformed_url_is_one_line_naming_it_without_its_password(url):
    from model.data.databases import mask_password, parse_url

    for attempt in (parse_url, open_database):
        with pytest.raises(DatabaseError) as raised:
            attempt(url)
        message = str(raised.value)
        assert message.startswith(mask_password(url) + ": not a valid database URL"), message
        assert "sekret" not in message and "\n" not in message


def test_a_file_that_is_not_a_database_is_refused_when_opened(tmp_path):
    for name, content in (("rows.jsonl", b'{"sql": "SELECT 1"}\n' * 50), ("noise.sqlite", bytes(range(256)) * 40)):
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(DatabaseError, match=f"^{re.escape(str(path))}: cannot be read as a SQLite database"):
            open_database(path)


def test_a_result_of_huge_values_is_read_in_small_chunks_up_to_its_budget(tmp_path):
    """300 strings of 1 MB, a budget of 8 MiB: the driver is asked for a first chunk of 16 rows
    and reading stops past the budget, never after a first fetch of hundreds of such rows."""
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "t.duckdb"
    duckdb.connect(str(path)).close()
    asked = []

    class Counted:  # the connection, its cursors' fetches counted
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def execute(self, *args):
            return Counted(self.inner.execute(*args))

        def fetchmany(self, n):
            asked.append(n)
            return self.inner.fetchmany(n)

    with open_database(path, max_result_bytes=8 << 20) as db:
        db.conn = Counted(db.conn)
        rows, error = db.execute("SELECT repeat('x', 1000000) FROM range(300)")
        db.conn = db.conn.inner
    assert rows is None and error.startswith("result larger than 8 MiB"), error
    assert asked == [16], asked


def test_postgres_fetches_grow_while_rows_are_small_and_stay_within_the_budget(pg_demo):
    """The cursor's FETCH asks for 2 rows first (libpq holds them whole), then as many as half the
    budget left holds at the largest row read (up to 8 times the last, at least 16): 600 rows of
    10 MB stop after a few (a fixed FETCH FORWARD 1024 held 5.8 GB, a first 16 160 MB), 5,000
    small rows take four fetches, one row one."""
    asked = []

    class Counted:  # the connection (its cursors too), the FETCHes sent counted
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def cursor(self, **kwargs):
            return Counted(self.inner.cursor(**kwargs))

        def execute(self, sql, *args, **kwargs):
            if sql.startswith("FETCH FORWARD"):
                asked.append(int(sql.split()[2]))
            return self.inner.execute(sql, *args, **kwargs)

    with open_database(pg_demo[0], max_result_bytes=64 << 20) as db:
        db.conn = Counted(db.conn)
        rows, error = db.execute("SELECT repeat('x', 10000000) FROM generate_series(1, 600)")
        assert rows is None and error.startswith("result larger than 64 MiB") and asked == [2, 2, 1, 1, 1], (error, asked)
        asked.clear()
        rows, error = db.execute("SELECT g, 'row ' || g FROM generate_series(1, 5000) g")
        assert error is None and len(rows) == 5000 and rows[-1] == (5000, "row 5000")
        assert asked == [2, 128, 1024, 8192], asked
        asked.clear()
        assert db.execute("SELECT count(*) FROM venues") == ([(10,)], None) and asked == [2]
        db.conn = db.conn.inner


def test_postgres_rows_of_huge_values_stay_within_the_time_limit_and_the_budget(pg_demo):
    """16 values of 50 MB (the first FETCH of 16 held 800 MB, ran past the 5 s limit and failed
    with psycopg's "cannot exit pipeline mode while busy"), an array of 5 million elements (each
    normalised before the budget refused it): both refused as larger than the budget, in time."""
    with open_database(pg_demo[0], timeout_s=5, max_result_bytes=32 << 20) as db:
        for sql in ("SELECT repeat('x', 50000000) FROM generate_series(1, 16)",
                    "SELECT array_agg(g) FROM generate_series(1, 5000000) g"):
            started = time.monotonic()
            rows, error = db.execute(sql)
            assert rows is None and error.startswith("result larger than 32 MiB"), error
            assert time.monotonic() - started < 5, sql
        assert "within 1 rows" in error  # (refused before its elements were normalised)
        assert db.execute("SELECT 1") == ([(1,)], None)


def test_sqlite_refuses_every_write_and_changes_nothing(demo):
    path = demo[2]
    before = checksum("sqlite", path)
    with open_database(f"sqlite:///{path}") as db:
        assert_writes_fail(db, COMMON_WRITES + [f"ATTACH '{path}.2' AS x", "PRAGMA query_only = OFF"],
                           before, lambda: checksum("sqlite", path))
    assert not Path(f"{path}.2").exists()


def test_rows_and_bytes_are_capped_on_every_backend(pg_demo, mysql_demo, duck_demo, demo):
    cross = "SELECT a.name, b.name, c.name FROM venues a, venues b, venues c"  # 1,000 rows
    pairs = "SELECT a.name, b.name FROM venues a, venues b"  # 100 rows
    for target in (pg_demo[0], mysql_demo[0], duck_demo, demo[2]):
        with open_database(target, max_rows=500) as db:
            rows, error = db.execute(cross)
            assert rows is None and "more than 500 rows" in error, (target, error)
            rows, error = db.execute(pairs, max_result_bytes=4096)
            assert rows is None and "larger than" in error, (target, error)
            assert len(db.execute(pairs)[0]) == 100
            assert db.execute("SELECT count(*) FROM venues") == ([(10,)], None)  # usable after


# ---------------------------------------------------------------------------- schema, values


def known_schema(spec):
    tables = {t.name: [c.name for c in t.columns] for t in spec.tables.values()}
    primary = {f"{t.name}.{k}" for t in spec.tables.values() for k in t.primary_key}
    foreign = {(f"{t.name}.{c}", f"{p}.{pc}") for t in spec.tables.values() for c, p, pc in t.fks}
    return tables, primary, foreign


def test_the_schema_read_from_each_database_is_the_declared_one(pg_demo, mysql_demo, duck_demo, demo):
    spec, _, path = demo
    tables, primary, foreign = known_schema(spec)
    for target in (pg_demo[0], mysql_demo[0], duck_demo, path):
        with open_database(target) as db:
            schema = db.schema(DB_ID)
        assert {t: list(c) for t, c in schema.tables.items()} == tables, target
        assert set(schema.primary_keys) == primary and set(schema.foreign_keys) == foreign, target
        assert schema.column_types["concerts.ticket_price"].lower() in ("double precision", "double", "real")
        if target == mysql_demo[0]:  # MySQL's `db.t` names a database: another one's is another table
            assert set(schema.table_schemas.values()) == {DB_ID}
            assert rat.to_tree(f"SELECT name FROM {DB_ID}.venues", schema, "mysql") == \
                rat.to_tree("SELECT name FROM venues", schema, "mysql") != \
                rat.to_tree("SELECT name FROM other.venues", schema, "mysql")
    # the same tables written as DDL in PostgreSQL's dialect
    ddl_schema = schema_from_ddl(";\n".join(ddl(spec, "postgres")), "postgres", DB_ID)
    assert {t: list(c) for t, c in ddl_schema.tables.items()} == tables
    assert set(ddl_schema.primary_keys) == primary and set(ddl_schema.foreign_keys) == foreign


def keys_of(schema: rat.Schema) -> tuple:
    return schema.tables, set(schema.primary_keys), set(schema.foreign_keys)


@pytest.mark.parametrize("options", [["--schema-only"], []])
def test_a_pg_dump_is_the_schema_the_database_has(pg_demo, postgres_server, caplog, options):
    """pg_dump --schema-only (keys in ALTER TABLE .. ADD CONSTRAINT, SETs, sequences), or a whole
    dump with its rows (COPY .. FROM stdin), read as DDL is the schema read from the server's
    catalogue, with no note from sqlglot."""
    url, admin = pg_demo
    dump = subprocess.run([str(postgres_server.bin / "pg_dump"), *options, admin],
                          capture_output=True, text=True, check=True).stdout
    assert "ADD CONSTRAINT" in dump and "FOREIGN KEY" in dump
    assert ("FROM stdin" in dump) == (not options)
    with caplog.at_level(logging.WARNING):
        from_dump = schema_from_ddl(dump, "postgres", DB_ID)
    assert not caplog.records
    with open_database(url) as db:
        assert keys_of(from_dump) == keys_of(db.schema())
    assert from_dump.foreign_keys


def test_a_pg_dump_of_several_schemas_is_the_schema_the_database_has(postgres_server):
    """Tables of several schemas, a name in two of them, keys across them: the dump read as DDL
    picks the same table for each name as the catalogue, with the same keys."""
    import psycopg

    url = postgres_server.create_database("schemas_dump")
    with psycopg.connect(postgres_server.url("schemas_dump", admin=True), autocommit=True) as conn:
        for statement in SCHEMAS:
            conn.execute(statement)
        conn.execute("GRANT USAGE ON SCHEMA sales, archive TO rat_scorer")
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public, sales, archive TO rat_scorer")
    dump = subprocess.run([str(postgres_server.bin / "pg_dump"), "--schema-only",
                           postgres_server.url("schemas_dump", admin=True)],
                          capture_output=True, text=True, check=True).stdout
    from_dump = schema_from_ddl(dump, "postgres")
    with open_database(url) as db:
        read = db.schema()
    assert keys_of(from_dump) == keys_of(read) and from_dump.table_schemas == read.table_schemas
    assert ("sales.notes.a", "sales.venues.other") in from_dump.foreign_keys


VIEWS = ["CREATE TABLE people (id integer PRIMARY KEY, name varchar(40), age integer)",
         "CREATE TABLE pets (id integer PRIMARY KEY, owner_id integer REFERENCES people (id), kind varchar(20))",
         "CREATE VIEW adults AS SELECT * FROM people WHERE age >= 18",
         ("CREATE VIEW owners AS SELECT p.name AS owner, pets.kind, count(*) AS pets FROM people p "
         "JOIN pets ON pets.owner_id = p.id GROUP BY p.name, pets.kind"),
         "CREATE VIEW names (who) AS SELECT name FROM people UNION SELECT kind FROM pets"]


def test_views_in_a_pg_dump_and_a_mysqldump_are_read_as_their_catalogues_list_them(postgres_server, mysql_server):
    """A catalogue lists views beside tables (their columns, no keys): pg_dump's and mysqldump's
    views (mysqldump's in version comments, `/*!50001 .. */`) read as DDL give the same tables;
    and a PostgreSQL partition its parent's foreign keys, as its catalogue does."""
    import shutil

    import psycopg
    import pymysql

    url = postgres_server.create_database("views_dump")
    with psycopg.connect(postgres_server.url("views_dump", admin=True), autocommit=True) as conn:
        conn.execute("DROP VIEW IF EXISTS adults, owners, names; DROP TABLE IF EXISTS visits, pets, people")
        for statement in VIEWS:
            conn.execute(statement)
        # a partitioned table: its partition has its keys (pg_dump writes the foreign key on the parent only)
        conn.execute("CREATE TABLE visits (id integer, person_id integer REFERENCES people (id), at date, "
                     "PRIMARY KEY (id, at)) PARTITION BY RANGE (at)")
        conn.execute("CREATE TABLE visits_2024 PARTITION OF visits FOR VALUES FROM ('2024-01-01') TO ('2025-01-01')")
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO rat_scorer")
    dump = subprocess.run([str(postgres_server.bin / "pg_dump"), "--schema-only",
                           postgres_server.url("views_dump", admin=True)], capture_output=True, text=True, check=True).stdout
    from_dump = schema_from_ddl(dump, "postgres")
    with open_database(url) as db:
        assert keys_of(from_dump) == keys_of(db.schema())
    assert from_dump.tables["owners"] == ("owner", "kind", "pets") and from_dump.tables["names"] == ("who",)
    assert ("visits_2024.person_id", "people.id") in from_dump.foreign_keys
    dump_bin = shutil.which("mariadb-dump") or shutil.which("mysqldump")
    if dump_bin is None:
        pytest.skip("no mariadb-dump / mysqldump")
    url = mysql_server.create_database("views_dump")
    conn = pymysql.connect(host=mysql_server.host, port=mysql_server.port, user="rat_admin", password="admin-pw",
                           database="views_dump", autocommit=True)
    with conn, conn.cursor() as cursor:
        cursor.execute("DROP VIEW IF EXISTS adults, owners, names")
        cursor.execute("DROP TABLE IF EXISTS pets, people")
        for statement in VIEWS:
            cursor.execute(statement)
    dump = subprocess.run([dump_bin, "--no-data", "-h", mysql_server.host, "-P", str(mysql_server.port),
                           "-u", "rat_admin", "-padmin-pw", "--protocol=TCP", "views_dump"],
                          capture_output=True, text=True, check=True).stdout
    assert "/*!50001 VIEW `owners` AS" in dump
    from_dump = schema_from_ddl(dump, "mysql", "views_dump")
    with open_database(url) as db:
        assert keys_of(from_dump) == keys_of(db.schema())
    assert from_dump.tables["adults"] == ("id", "name", "age")


def test_a_duckdb_export_is_the_schema_the_database_has(tmp_path):
    """DuckDB's EXPORT DATABASE (its schema.sql: tables, keys, views) read as DDL is the schema
    read from the database's catalogue."""
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "shop.duckdb"
    conn = duckdb.connect(str(path))
    for statement in VIEWS[:2] + ["CREATE VIEW adults AS SELECT * FROM people WHERE age >= 18",
                                  ("CREATE VIEW owners AS SELECT p.name AS owner, pets.kind, count(*) AS pets "
                                  "FROM people p JOIN pets ON pets.owner_id = p.id GROUP BY ALL")]:
        conn.execute(statement)
    conn.execute(f"EXPORT DATABASE '{tmp_path / 'export'}'")
    conn.close()
    from_export = schema_from_ddl((tmp_path / "export" / "schema.sql").read_text(), "duckdb")
    with open_database(path) as db:
        read = db.schema()
    assert keys_of(from_export) == keys_of(read) and from_export.table_schemas == read.table_schemas
    assert from_export.tables["owners"] == ("owner", "kind", "pets") and from_export.foreign_keys


@pytest.mark.parametrize("options", [["--no-data"], []])
def test_a_mysqldump_is_the_schema_the_database_has(mysql_demo, mysql_server, options):
    """mysqldump --no-data (CONSTRAINT .. FOREIGN KEY in CREATE TABLE, comments, engines), or a
    whole dump with its rows (INSERT lines, skipped)."""
    import shutil

    dump_bin = shutil.which("mariadb-dump") or shutil.which("mysqldump")
    if dump_bin is None:
        pytest.skip("no mariadb-dump / mysqldump")
    url, _ = mysql_demo
    dump = subprocess.run([dump_bin, *options, "-h", mysql_server.host, "-P", str(mysql_server.port),
                           "-u", "rat_admin", "-padmin-pw", "--protocol=TCP", DB_ID],
                          capture_output=True, text=True, check=True).stdout
    assert "CONSTRAINT" in dump and ("INSERT INTO" in dump) == (not options)
    from_dump = schema_from_ddl(dump, "mysql", DB_ID)
    with open_database(url) as db:
        assert keys_of(from_dump) == keys_of(db.schema())
    assert from_dump.foreign_keys


def test_a_dumps_rows_are_not_read_and_ddl_past_the_limit_is_one_line(monkeypatch, tmp_path):
    """A whole dump's rows (INSERT lines, COPY blocks) are skipped as its lines are read, so any
    size of data costs no parse; DDL itself past MAX_DDL_CHARS is one line asking for the schema."""
    from model.data import databases
    from model.scoring.inputs import read_schemas

    monkeypatch.setattr(databases, "MAX_DDL_CHARS", 2_000)
    rows = "".join(f"INSERT INTO `t` VALUES ({k},'n;{k}'),({k + 1},'m');\n" for k in range(0, 2_000, 2))
    rows += "INSERT INTO `t` VALUES " + ",".join(f"({k},'long;\\n')" for k in range(3_000)) + ";\n"  # one line
    dump = tmp_path / "shop.sql"
    dump.write_text("CREATE TABLE `t` (`id` int NOT NULL, `name` text, PRIMARY KEY (`id`));\n" + rows)
    assert len(rows) > 20 * databases.MAX_DDL_CHARS
    shop = read_schemas(dump, dialect="mysql")["shop"]
    assert shop.tables == {"t": ("id", "name")} and shop.primary_keys == ("t.id",)
    copy = "CREATE TABLE t (id int);\nCOPY public.t (id) FROM stdin;\n" + "1\n" * 5_000 + "\\.\n"
    assert schema_from_ddl(copy, "postgres").tables == {"t": ("id",)}
    big, one_line = tmp_path / "big.sql", tmp_path / "one_line.sql"
    big.write_text("".join(f"CREATE TABLE t{k} (id int PRIMARY KEY, name text);\n" for k in range(100)))
    one_line.write_text("".join(f"CREATE TABLE t{k} (id int PRIMARY KEY, name text); " for k in range(100)))
    for path in (big, one_line):  # (a line past the limit is read in pieces, not whole)
        with pytest.raises(UsageError, match=r"^--schema .*.sql: more than [0-9.e-]+ MiB of DDL .*\(pg_dump --schema-only"):
            read_schemas(path, dialect="mysql")


@pytest.mark.parametrize("options", [["--inserts"], ["--inserts", "--rows-per-insert=50"], ["--column-inserts"]])
def test_a_pg_dump_with_inserts_is_read_without_its_rows(postgres_server, monkeypatch, options):
    """pg_dump's INSERTs, one row each or 50 to a statement over as many lines, of values with
    ';' and line breaks in them: read to each statement's end, none of it parsed (a DDL limit far
    below the rows' size is not reached), the schema the database has."""
    import psycopg

    from model.data import databases

    url = postgres_server.create_database("inserts_dump")
    with psycopg.connect(postgres_server.url("inserts_dump", admin=True), autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS tags, notes")
        conn.execute('CREATE TABLE notes (id int PRIMARY KEY, "it\'s" text, body text)')
        conn.execute("INSERT INTO notes SELECT g, 'a;', 'line ' || g || E';\nCREATE TABLE x (a int);\n' "
                     "|| repeat('z', 40) FROM generate_series(1, 2000) g")
        conn.execute("CREATE TABLE tags (note_id int REFERENCES notes, tag text)")
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO rat_scorer")
    dump = subprocess.run([str(postgres_server.bin / "pg_dump"), *options,
                           postgres_server.url("inserts_dump", admin=True)],
                          capture_output=True, text=True, check=True).stdout
    assert dump.count("INSERT INTO") in (2000, 40) and len(dump) > 100_000
    monkeypatch.setattr(databases, "MAX_DDL_CHARS", 20_000)
    from_dump = schema_from_ddl(dump, "postgres")
    with open_database(url) as db:
        assert keys_of(from_dump) == keys_of(db.schema())
    assert from_dump.tables == {"notes": ("id", "it's", "body"), "tags": ("note_id", "tag")}


@pytest.mark.parametrize("dialect, rows", [
    ("mysql", "INSERT INTO `t` VALUES\n(1,'it\\'s; \\\\',\"a\nCREATE TABLE x (a int);\"),\n(2,'b');\n"),
    ("tsql", "INSERT INTO [t] ([it's]) VALUES (N'a;\nb')\nINSERT [dbo].[t] ([id]) VALUES (2)\nGO\n"),
    ("sqlite", "INSERT INTO \"t\" VALUES(1,'a'); INSERT INTO t VALUES(2,'b\n');CREATE TABLE u (v int);\n"),
])
def test_insert_statements_are_skipped_to_their_end(dialect, rows):
    """An INSERT is skipped to its ';' outside quotes (MySQL's backslash escapes and double-quoted
    strings, SQL Server's bracketed names), or to the next statement where none ends it (SQL
    Server's scripts); what follows its ';' on the line is read."""
    schema = schema_from_ddl("CREATE TABLE t (id int PRIMARY KEY, name text);\n" + rows +
                             "CREATE TABLE w (id int PRIMARY KEY);\n", dialect)
    assert set(schema.tables) == ({"t", "u", "w"} if dialect == "sqlite" else {"t", "w"})


@pytest.mark.parametrize("dialect, ddl", [
    ("databricks", ("CREATE TABLE default.customers (id BIGINT NOT NULL, name STRING, CONSTRAINT pk PRIMARY KEY (id)) "
                   "USING DELTA;\nCREATE TABLE orders (id BIGINT, customer_id BIGINT, CONSTRAINT fk FOREIGN KEY "
                   "(customer_id) REFERENCES customers(id)) USING DELTA TBLPROPERTIES ('delta.appendOnly' = 'true');")),
    ("redshift", ("CREATE TABLE public.customers (id INTEGER NOT NULL ENCODE az64, name VARCHAR(256) ENCODE lzo, "
                 "PRIMARY KEY (id)) DISTSTYLE KEY DISTKEY(id) SORTKEY(id);\n"
                 "CREATE TABLE orders (id INTEGER, customer_id INTEGER REFERENCES customers(id));")),
])
def test_ddl_of_databricks_and_redshift_is_read_with_its_keys(dialect, ddl):
    """Databricks' Delta tables (USING, TBLPROPERTIES, informational keys) and Redshift's
    (ENCODE, DISTKEY, SORTKEY): the tables in the dialect's default schema, with their keys."""
    schema = schema_from_ddl(ddl, dialect)
    assert schema.tables == {"customers": ("id", "name"), "orders": ("id", "customer_id")}
    assert schema.primary_keys == ("customers.id",) and schema.foreign_keys == (("orders.customer_id", "customers.id"),)
    assert set(schema.table_schemas.values()) == {"default" if dialect == "databricks" else "public"}


@pytest.mark.parametrize("script, dialect", [("ssms_script.sql", "tsql"), ("snowflake_get_ddl.sql", "snowflake")])
def test_scripts_of_sql_server_and_snowflake_are_read_with_their_keys(script, dialect):
    """SSMS's "Script Table as" (GO between statements, PRIMARY KEY CLUSTERED, keys added by ALTER
    TABLE) and Snowflake's GET_DDL (with a view of `SELECT *`), as those tools write them."""
    text = (Path(__file__).parent / "fixtures" / "ddl" / script).read_text()
    schema = schema_from_ddl(text, dialect)
    assert set(schema.tables) == {"customers", "orders"} | ({"big_orders"} if dialect == "snowflake" else set())
    if dialect == "snowflake":
        assert schema.tables["big_orders"] == schema.tables["orders"]
    assert set(schema.primary_keys) == {"customers.id", "orders.id"}
    assert len(schema.foreign_keys) == 1 and schema.foreign_keys[0][1] == "customers.id"


def test_ddl_tables_of_schemas_are_read_as_the_database_resolves_their_names():
    """A table declared without a schema is in the dialect's default one (PostgreSQL's public);
    a name off it is read from the first schema by name, another schema's table of that name is
    the table `archive.invoices`, with its own keys, as `_pick_tables` reads a catalogue."""
    schema = schema_from_ddl("CREATE TABLE sales.invoices (id INT PRIMARY KEY, region TEXT); "
                             "CREATE TABLE archive.invoices (id INT PRIMARY KEY, closed DATE, "
                             "  venue INT REFERENCES venues); "
                             "CREATE TABLE venues (id INT PRIMARY KEY, invoice INT REFERENCES sales.invoices (id))",
                             "postgres")
    assert schema.tables == {"sales.invoices": ("id", "region"), "invoices": ("id", "closed", "venue"),
                             "venues": ("id", "invoice")}
    assert schema.table_schemas == {"invoices": "archive", "venues": "public"}
    assert set(schema.primary_keys) == {"sales.invoices.id", "invoices.id", "venues.id"}
    assert set(schema.foreign_keys) == {("invoices.venue", "venues.id"), ("venues.invoice", "sales.invoices.id")}
    tree = lambda sql: rat.to_tree(sql, schema, dialect="postgres")
    assert tree("SELECT closed FROM archive.invoices") == tree("SELECT closed FROM invoices")
    assert rat.serialize(tree("SELECT region FROM sales.invoices JOIN venues ON venues.invoice = invoices.id")) \
        .startswith("((sales.invoices.region)(((invoices)(sales)In_schema)")
    assert tree("SELECT id FROM public.venues") == tree("SELECT id FROM venues")
    # names in another case name the same table (as rat.Schema reads them)
    cased = schema_from_ddl("CREATE TABLE Singer (Singer_ID INT PRIMARY KEY); CREATE TABLE concert "
                            "(id INT, singer_id INT REFERENCES singer); ALTER TABLE CONCERT ADD PRIMARY KEY (id)",
                            "postgres")
    assert cased.primary_keys == ("singer.singer_id", "concert.id")
    assert cased.foreign_keys == (("concert.singer_id", "singer.singer_id"),)




def test_results_are_the_same_on_every_backend(pg_demo, mysql_demo, duck_demo, demo):
    queries = [
        "SELECT count(*), avg(ticket_price), sum(attendance), min(concert_date) FROM concerts",
        "SELECT avg(attendance), avg(capacity) FROM concerts JOIN venues USING (venue_id)",
        "SELECT name FROM venues WHERE city LIKE '%lon%' ORDER BY name",  # SQLite's LIKE ignores case
        "SELECT country, count(*) FROM artists GROUP BY country ORDER BY country",
        'SELECT title FROM albums WHERE release_year > 2000 AND title != "x" ORDER BY title LIMIT 3',
    ]
    spec, _, path = demo
    schema = rat.Schema.from_spider(spider_table_entry(spec))
    with open_database(path) as sqlite:
        expected = [sqlite.execute(q) for q in queries]
    assert all(error is None and rows for rows, error in expected)
    for target in (pg_demo[0], mysql_demo[0], duck_demo):
        with open_database(target) as db:
            got = [db.run(q, "sqlite", schema) for q in queries]
        assert got == expected, target


# ---------------------------------------------------------------------------- scoring


QUESTIONS = [
    ("Which venues are in London?", "SELECT name FROM venues WHERE city = 'London'"),
    ("How many concerts cost more than 100?", "SELECT count(*) FROM concerts WHERE ticket_price > 100"),
    ("Average attendance per artist", ("SELECT T1.name, avg(T2.attendance) FROM artists AS T1 JOIN "
                                       "concerts AS T2 ON T1.artist_id = T2.artist_id GROUP BY T1.name")),
    ("Venues with lon in the city", "SELECT name FROM venues WHERE city LIKE '%lon%'"),
    ("Albums before 1990 by sales", ("SELECT title FROM albums WHERE release_year < 1990 "
                                     "ORDER BY copies_sold DESC LIMIT 3")),
    ("Artists named Nobody", "SELECT name FROM artists WHERE name = 'Nobody Here'"),
]


@pytest.fixture(scope="module")
def scorer():
    from model.scoring import Scorer

    return Scorer.pretrained()


def test_scores_against_postgres_mysql_and_duckdb_match_the_sqlite_file(scorer, pg_demo, mysql_demo, duck_demo,
                                                                        demo):
    from model.nodes.features import FEATURES

    spec, _, path = demo
    schema = spider_table_entry(spec)
    rows = [{"sql": sql, "question": q, "schema": schema, "db_id": DB_ID} for q, sql in QUESTIONS]
    names = list(scorer.saved.features_)
    database_columns = [j for j, n in enumerate(names)
                        if any(f.name == n and f.group in ("execution", "values") for f in FEATURES)]
    assert database_columns
    reference = scorer.score_many([{**r, "database": path} for r in rows], progress=False, workers=1)
    for target in (pg_demo[0], mysql_demo[0], duck_demo):  # SQLite's SQL, as sqlglot writes it there
        scored = scorer.score_many([{**r, "database": target} for r in rows], progress=False, dialect="sqlite")
        for ref, got in zip(reference, scored, strict=True):
            np.testing.assert_array_equal(got.features[:, database_columns], ref.features[:, database_columns])
            assert abs(got.query_confidence - ref.query_confidence) <= 0.01
            assert max(abs(a.confidence - b.confidence) for a, b in zip(got.nodes, ref.nodes)) <= 0.01
    # the execution features are there (not NaN as without a database)
    exec_error = names.index("exec_error")
    assert not np.isnan(reference[0].features[:, exec_error]).any()


@pytest.mark.parametrize("sql, labels", [
    (("WITH RECURSIVE y(year) AS (SELECT 1990 UNION ALL SELECT year + 1 FROM y WHERE year < 2000) "
      "SELECT y.year, count(a.album_id) FROM y LEFT JOIN albums AS a ON a.release_year = y.year GROUP BY y.year"),
     {"Recursive", "Recursion"}),
    (("SELECT v.name, c.top FROM venues AS v CROSS JOIN LATERAL "
      "(SELECT max(attendance) AS top FROM concerts WHERE concerts.venue_id = v.venue_id) AS c"), {"Max", "Product"}),
    ("SELECT k FROM generate_series(1, 3) AS g(k) WHERE k <= (SELECT count(*) FROM venues)", {"Generate_series"}),
    ("SELECT name FROM public.venues WHERE name <> ALL (ARRAY['Hall'])", {"Not_in", "Val_list"}),  # NOT IN ('Hall')
], ids=["recursive", "lateral", "generate_series", "array"])
def test_postgres_constructs_score_and_run_on_postgres(scorer, pg_demo, sql, labels):
    scored = scorer.score(sql, "Which?", database=pg_demo[0], db_id=DB_ID, dialect="postgres")
    assert scored.execution_error is None
    assert scored.features[0, list(scorer.saved.features_).index("exec_error")] == 0.0
    assert labels <= {n.label for n in scored.nodes} and all(n.span is not None for n in scored.nodes)
    assert 0 < scored.query_confidence < 1


def test_an_sqlalchemy_engine_is_read_through_its_url(scorer, pg_demo, demo):
    """An SQLAlchemy Engine (or Connection) is the database its URL names, opened read-only with
    rat's own connection, in its dialect; the engine's pool is left as it was."""
    sqlalchemy = pytest.importorskip("sqlalchemy")
    from model.data.databases import database_dialect

    url, _ = pg_demo
    _, _, path = demo
    engine = sqlalchemy.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    lite = sqlalchemy.create_engine(f"sqlite:///{path}")
    assert (database_dialect(engine), database_dialect(lite)) == ("postgres", "sqlite")
    question, sql = QUESTIONS[3]
    by_url = scorer.score(sql, question, database=url, db_id=DB_ID)
    with engine.connect() as connection:
        for target in (engine, connection):
            got = scorer.score(sql, question, database=target, db_id=DB_ID)
            assert got.dialect == "postgres" and got.to_dict() == by_url.to_dict()
        assert engine.pool.checkedout() == 1  # the Connection here; rat's own are closed
    engine.dispose()
    assert scorer.score(sql, question, database=lite, db_id=DB_ID).to_dict() == \
        scorer.score(sql, question, database=path, db_id=DB_ID).to_dict()
    with pytest.raises(DatabaseError, match="password authentication failed") as caught:
        scorer.score(sql, database=sqlalchemy.create_engine(url.replace("scorer-pw", "wrong-pw")))
    assert "wrong-pw" not in str(caught.value)


def test_rat_calibrate_labels_by_running_both_queries_on_postgres(scorer, pg_demo):
    """Execution labels on a PostgreSQL database: gold and prediction run there (read-only, in
    PostgreSQL's dialect); a prediction that returns gold's rows by another tree is right."""
    from model.scoring.recalibrate import recalibrate

    url, _ = pg_demo
    rows = [{"sql": sql, "gold": sql, "question": q, "database": url} for q, sql in QUESTIONS]
    rows.append({**rows[0], "sql": rows[0]["sql"].replace("'London'", "'Paris'")})  # wrong
    rows.append({**rows[1], "sql": rows[1]["sql"].replace("> 100", ">= 100.01")})  # right, another tree
    result = recalibrate(scorer.saved, rows, select=False, progress=False)
    assert result.labels == {"execution": len(rows)} and result.right_queries == len(rows) - 1


def test_the_password_can_stay_off_the_url_and_the_command_line(scorer, pg_demo, mysql_demo, tmp_path, monkeypatch):
    """PostgreSQL: libpq's PGPASSWORD (or ~/.pgpass); MySQL / MariaDB: a my.cnf [client] section
    named by `?read_default_file=` (what `mysql` itself reads): a URL without its password
    scores as the one with it, and one whose file lacks it is refused by the server."""
    question, sql = QUESTIONS[0]
    for url, bare in [(pg_demo[0], pg_demo[0].replace(":scorer-pw@", "@")),
                      (mysql_demo[0], mysql_demo[0].replace(":scorer-pw@", "@") + f"?read_default_file={tmp_path / 'my.cnf'}")]:
        assert "scorer-pw" not in bare
        with monkeypatch.context() as env:
            env.delenv("PGPASSWORD", raising=False)
            (tmp_path / "my.cnf").write_text("[client]\nuser = rat_scorer\n")
            with pytest.raises(DatabaseError, match="cannot connect"):
                scorer.score(sql, question, database=bare, db_id=DB_ID)
            env.setenv("PGPASSWORD", "scorer-pw")
            (tmp_path / "my.cnf").write_text("[client]\npassword = scorer-pw\n")
            assert scorer.score(sql, question, database=bare, db_id=DB_ID).to_dict() == \
                scorer.score(sql, question, database=url, db_id=DB_ID).to_dict()


def test_score_many_leaves_no_connection_open(scorer, pg_demo):
    import psycopg

    url, admin = pg_demo

    def scorer_connections() -> int:
        with psycopg.connect(admin) as conn:
            return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = 'rat_scorer'").fetchone()[0]

    assert scorer_connections() == 0
    rows = [{"sql": sql, "question": q, "database": url, "db_id": DB_ID} for q, sql in QUESTIONS]
    scored = scorer.score_many(rows + [{**rows[0], "database": url.replace(DB_ID, "rat"), "db_id": "rat"}], progress=False)
    assert len(scored) == len(rows) + 1
    assert scorer_connections() == 0
    # the schema was read from the database: its keys are there
    assert "venues.venue_id" in scored[0].schema.primary_keys
    # a database that cannot be opened is one line naming it, password masked
    with pytest.raises(DatabaseError, match=r"^postgresql://rat_scorer:\*\*\*@.*cannot connect") as caught:
        scorer.score("SELECT 1", database=url.replace("scorer-pw", "wrong"))
    assert "wrong" not in str(caught.value) and "\n" not in str(caught.value)
    assert scorer_connections() == 0


# ---------------------------------------------------------------------------- commands


def rat_score(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "model.scoring.cli", *args], check=False,
                          capture_output=True, text=True, env=ENV, timeout=300, cwd=REPO)


def test_rat_score_reads_a_postgres_url(pg_demo, tmp_path):
    url, _ = pg_demo
    done = rat_score("--database", url, "--question", "Which venues are in London?",
                     "--sql", "SELECT name FROM venues WHERE city = 'London'", "--json")
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)
    assert 0 < row["query_confidence"] < 1 and [n["label"] for n in row["nodes"]][-1] == "Project"
    assert row["dialect"] == "postgres"  # the URL's dialect, none named
    # a DDL file as the schema, SQL in PostgreSQL's dialect: the URL's (the DDL read in it too)
    schema_file = tmp_path / "music.sql"
    schema_file.write_text(";\n".join(ddl(load_database_specs()[DB_ID], "postgres")) + ";\n")
    predictions = tmp_path / "rows.jsonl"
    predictions.write_text(json.dumps({"db_id": "music", "question": "Venues in London",
                                       "sql": "SELECT name FROM venues WHERE city ILIKE 'london'"}) + "\n")
    out = tmp_path / "scored.jsonl"
    done = rat_score("--database", url, "--schema", str(schema_file),
                     "--predictions", str(predictions), "--out", str(out))
    assert done.returncode == 0, done.stderr
    (scored,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert "Ilike" in [n["label"] for n in scored["nodes"]]


@pytest.mark.parametrize("change, message", [
    (lambda u: u.replace("scorer-pw", "wrong-pw"), "password authentication failed"),
    (lambda u: u.rsplit("/", 1)[0] + "/no_such_db", 'database "no_such_db" does not exist'),
    (lambda u: re.sub(r":\d+/", f":{free_port()}/", u), "cannot connect (Connection refused"),  # nothing listens
    (lambda u: u.replace("postgresql://", "oracle://"), "unknown database URL scheme 'oracle'"),
    (lambda u: u, "no table 'nosuch'"),
])
def test_rat_score_database_mistakes_are_one_line_and_exit_2(pg_demo, tmp_path, change, message):
    url = change(pg_demo[0])
    out = tmp_path / "out.jsonl"
    predictions = tmp_path / "p.jsonl"
    predictions.write_text(json.dumps({"db_id": DB_ID, "sql": "SELECT 1"}) + "\n")
    sql = "SELECT name FROM nosuch" if "nosuch" in message else "SELECT name FROM venues"
    done = rat_score("--database", url, "--sql", sql)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert "scorer-pw" not in done.stderr and "wrong-pw" not in done.stderr
    if "nosuch" not in message:
        done = rat_score("--database", url, "--predictions", str(predictions), "--out", str(out))
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert not out.exists() and not (tmp_path / "report.html").exists()


def test_rat_serve_answers_with_a_named_postgres_connection(pg_demo, tmp_path):
    url, _ = pg_demo
    proc, base = start_service("--processes", "1", "--database", f"music={url}", env=ENV)
    try:
        assert json.loads(urllib.request.urlopen(base + "/databases").read()) == {
            "databases": ["music"], "dialects": {"music": "postgres"}}
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if chromium is not None:  # the page lists it with the SQL it reads (headless Chromium)
            dom = page_dom(chromium, base, {}, tmp_path / "profile")
            assert '<option value="music">music (postgres SQL)</option>' in dom, dom[-2000:]
        body = {"queries": [{"db_id": "music", "question": "Which venues are in London?",
                             "sql": "SELECT name FROM venues WHERE city = 'London'"},
                            {"db_id": "music", "database": url, "sql": "SELECT 1"}]}
        request = urllib.request.Request(base + "/score", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:  # a URL of its own: refused
            urllib.request.urlopen(request, timeout=60)
        assert refused.value.code == 400
        body["queries"].pop()
        # PostgreSQL's own SQL, no dialect named: the connection's
        body["queries"].append({"db_id": "music", "sql": "SELECT DISTINCT ON (city) name FROM venues ORDER BY city"})
        request = urllib.request.Request(base + "/score", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            row, own = json.loads(answer.read())["results"]
        assert 0 < row["query_confidence"] < 1
        assert own["dialect"] == "postgres" and "Distinct_on" in [n["label"] for n in own["nodes"]]
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_rat_serve_with_a_bad_named_connection_is_one_line_and_exit_2(pg_demo):
    url = pg_demo[0].replace("scorer-pw", "wrong-pw")
    done = subprocess.run([sys.executable, "-m", "model.scoring.service", "--database", f"music={url}", "--port", "0"],
                          check=False, capture_output=True, text=True, env=ENV, timeout=300, cwd=REPO)
    assert done.returncode == 2 and "password authentication failed" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "wrong-pw" not in done.stderr


def test_a_missing_driver_is_one_line_naming_the_extra():
    script = ("import sys; sys.modules['psycopg'] = None; from model.scoring.cli import main; "
              "raise SystemExit(main(['--database', 'postgresql://u:secret@localhost/shop', "
              "'--sql', 'SELECT 1']))")
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True,
                          env=ENV, timeout=300, cwd=REPO)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "needs the [postgres] extra (psycopg is not installed)" in done.stderr
    assert "postgresql://u:***@localhost/shop" in done.stderr and "secret" not in done.stderr


def test_a_session_lock_a_users_function_takes_is_let_go_after_the_statement(pg_demo):
    """Refusing lock functions by name cannot catch a function of the user's own that takes
    one: on a connection of our own, every statement ends by letting all advisory locks go."""
    import psycopg

    url, admin = pg_demo
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE OR REPLACE FUNCTION rat_grab(k int) RETURNS int LANGUAGE sql "
                     "AS $$ SELECT pg_advisory_lock(k); SELECT k $$")
    try:
        with open_database(url) as db, psycopg.connect(admin, autocommit=True) as other:
            assert db.execute("SELECT rat_grab(43)") == ([(43,)], None)
            rows, error = db.execute("SELECT rat_grab(44), 1 / 0")  # taken, then the query fails
            assert rows is None and "DivisionByZero" in error
            for key in (43, 44):  # free while the scorer's connection is still open
                assert other.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0] is True
            other.execute("SELECT pg_advisory_unlock_all()")
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("DROP FUNCTION rat_grab(int)")


def test_a_callers_mysql_connection_with_a_transaction_open_is_refused_not_committed(mysql_server, mysql_demo):
    """START TRANSACTION READ ONLY commits what a MySQL session has pending: a connection passed in
    with a transaction open is refused, as PostgreSQL's is, and its write stays the caller's to
    roll back (it was committed)."""
    import pymysql

    conn = pymysql.connect(host=mysql_server.host, port=mysql_server.port, user="rat_admin",
                           password="admin-pw", database=DB_ID, autocommit=False)
    with conn:
        with conn.cursor() as cursor:
            cursor.execute("CREATE TEMPORARY TABLE pending (a INT) ENGINE=InnoDB")
            cursor.execute("INSERT INTO pending VALUES (1)")
        with pytest.raises(DatabaseError, match="the connection has a transaction open; commit or roll it back"):
            open_database(conn)
        conn.rollback()
        with conn.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pending")
            assert cursor.fetchone() == (0,)
        with open_database(conn) as db:  # nothing pending: read as any connection
            assert db.run("SELECT count(*) FROM venues")[1] is None


def test_mysql_url_mistakes_are_one_line_and_a_password_anywhere_is_masked(mysql_demo, tmp_path):
    url = mysql_demo[0]
    cnf = tmp_path / "my.cnf"
    cnf.write_text("password=Sup3rSecret\n")  # no [client] section
    for bad, says in ((f"{url}?charset=nosuch", "unknown charset 'nosuch'"),
                      (f"{url}?read_default_file={cnf}", "cannot read read_default_file"),
                      (f"{url.split('?')[0]}?password=WRONGPW&charset=utf8mb4", "password=***")):
        with pytest.raises(DatabaseError, match=re.escape(says)) as error:
            open_database(bad)
        assert "Sup3rSecret" not in str(error.value) and "WRONGPW" not in str(error.value)


def test_a_locking_read_runs_without_its_lock_on_postgres_and_mysql(pg_demo, mysql_demo):
    """SELECT .. FOR UPDATE / FOR SHARE / LOCK IN SHARE MODE: the read-only transaction refuses the
    lock, and the query was scored as failing to run; it runs as the rows it reads (runnable_sql)."""
    for url, dialect, locks in ((pg_demo[0], "postgres", ("FOR UPDATE", "FOR SHARE NOWAIT", "FOR NO KEY UPDATE")),
                                (mysql_demo[0], "mysql", ("FOR UPDATE", "LOCK IN SHARE MODE"))):
        with open_database(url) as db:
            plain = db.run("SELECT name FROM venues ORDER BY name", dialect)
            assert plain[1] is None and plain[0]
            for lock in locks:
                assert db.run(f"SELECT name FROM venues ORDER BY name {lock}", dialect) == plain, (dialect, lock)
            if dialect == "mysql":  # (a lock after MySQL's escaped quote: cut inside the string, kept)
                assert db.run(r"SELECT name FROM venues WHERE name <> 'it\'s' ORDER BY name FOR UPDATE", dialect) == plain


def test_a_locking_read_postgres_cannot_lock_fails_as_it_would_and_the_others_run(pg_demo):
    """PostgreSQL refuses FOR UPDATE / FOR SHARE with an aggregate, DISTINCT, GROUP BY, UNION or a
    window before it refuses the lock in a read-only transaction: those fail as they would, the
    others give the rows read without the lock."""
    with open_database(pg_demo[0]) as db:
        plain = db.run("SELECT name FROM venues WHERE city = 'London' ORDER BY name", "postgres")
        assert plain[1] is None and plain[0]
        for lock in ("FOR UPDATE", "FOR SHARE NOWAIT", "FOR KEY SHARE SKIP LOCKED", "FOR UPDATE OF v"):
            sql = f"SELECT name FROM venues AS v WHERE city = 'London' ORDER BY name {lock}"
            assert db.run(sql, "postgres") == plain, lock
            assert db.run(sql, "mysql" if lock == "FOR UPDATE" else "postgres") == plain, lock
        for sql, says in (("SELECT count(*) FILTER (WHERE city > 'L') FROM venues FOR UPDATE", "aggregate functions"),
                          ("SELECT DISTINCT ON (city) name FROM venues FOR SHARE", "DISTINCT clause"),
                          ("SELECT city FROM venues GROUP BY city FOR UPDATE", "GROUP BY clause"),
                          ("SELECT name FROM venues UNION SELECT city FROM venues FOR UPDATE", "UNION"),
                          ("SELECT row_number() OVER () FROM venues FOR UPDATE", "window functions")):
            rows, error = db.run(sql, "postgres")
            assert rows is None and f"is not allowed with {says}" in error, (sql, error)


@pytest.mark.parametrize("sql, dialect, says", [
    # MySQL reads `#` in a string as text and `--` before no space as two minus signs
    ("SELECT '#', a FROM t INTO OUTFILE '/tmp/x'", "mysql", "INTO OUTFILE"),
    ("SELECT 1--1 INTO DUMPFILE '/tmp/y'", "mysql", "INTO OUTFILE"),
    ("SELECT \"#\" INTO/* c */OUTFILE '/tmp/x'", "mysql", "INTO OUTFILE"),
    # with NO_BACKSLASH_ESCAPES, 'a\' is a whole string and the INTO after it code
    ("SELECT 'a\\' , 'b' INTO OUTFILE '/tmp/x' -- '", "mysql", "INTO OUTFILE"),
    ("SELECT 1 FROM dual LIMIT 1 INTO @b", "mysql", "SELECT .. INTO"),
    ("SELECT @c := 5", "mysql", ":= sets a user variable"),
    ("WITH x AS (SELECT 1) DELETE FROM orders WHERE id = 1 RETURNING *", "duckdb", "found DELETE after WITH"),
    ("WITH x AS (SELECT 1) INSERT INTO orders SELECT * FROM x", "duckdb", "found INSERT after WITH"),
    ("(WITH x (a) AS (SELECT 1) UPDATE orders SET id = 0)", "postgres", "found UPDATE after WITH"),
    ("WITH x AS (SELECT 1) UPDATE orders SET id = 0", "mysql", "found UPDATE after WITH"),
    ("WITH gone AS (DELETE FROM orders RETURNING *) SELECT * FROM gone", "postgres", "found DELETE in parentheses"),
    ('WITH d AS (UPDATE "Customers" SET city = 1 RETURNING *) SELECT 1', "postgres", "found UPDATE in parentheses"),
    ("WITH d AS (UPDATE _log SET n = 1 RETURNING *) SELECT 1", "postgres", "found UPDATE in parentheses"),
    # dblink's functions run SQL on a connection of their own, outside the read-only transaction
    ("SELECT * FROM dblink_exec('dbname=shop', 'DELETE FROM t')", "postgres", "dblink_exec() runs SQL on another"),
    ("SELECT public.dblink_connect('c', 'host=h') FROM t", "postgres", "dblink_connect() runs SQL on another"),
    ("SELECT * FROM dblink('dbname=shop', 'SELECT 1') AS t(a int)", "postgres", "dblink() runs SQL on another"),
    ("WITH x AS (SELECT 1) -- a comment\n /* and one */ MERGE INTO t USING x ON true WHEN MATCHED THEN DELETE",
     "postgres", "found MERGE after WITH"),
    ("SELECT 1 /* ; */ ; -- x\nDELETE FROM t", "postgres", None),  # (two statements: refused on sending)
    ("SELECT '#' AS h, 1--1 AS two, 'into -- x' AS s, `into` FROM t # into", "mysql", None),
    ("WITH RECURSIVE t (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 3) SELECT * FROM t", "postgres", None),
    ("WITH x AS MATERIALIZED (SELECT 1) FROM x", "duckdb", None),
    ("WITH x AS (SELECT 1), y AS (SELECT 2) (SELECT * FROM x UNION SELECT * FROM y)", "postgres", None),
    ("SELECT $$it's (DELETE$$, E'\\' (DELETE', name FROM t WHERE a IN (1) FOR UPDATE", "postgres", None),
    ("SELECT count(update), replace(a, 'x', 'y') FROM t", "postgres", None),
])
def test_refusal_reads_the_code_as_the_database_does(sql, dialect, says):
    """Words are looked for in the query's code, as each database reads it: not in strings, quoted
    names or comments, and MySQL's `#` in a string and `--` before no space are code (they hid
    INTO OUTFILE, which wrote files on the server); a WITH whose statement writes is no read (a
    caller's DuckDB connection ran WITH .. DELETE and lost the rows)."""
    from model.data.databases import refusal

    refused = refusal(sql, dialect)
    assert refused is None if says is None else says in (refused or ""), (sql, refused)


def test_mysql_writes_no_file_and_sets_no_variable_on_a_callers_connection_which_stays_open(mysql_server, mysql_demo):
    """Through the superuser's own connection (FILE privilege), passed in: no file written
    whatever the comments and strings around INTO OUTFILE, no user variable set on the caller's
    session; no failure closes it (an unknown column, a statement with no result set, a result
    stopped for its size: its rows are read to their end), and the next query runs on it."""
    import pymysql

    admin = mysql_demo[1]
    before = checksum("mysql", admin)
    files = [Path(f"/tmp/rat-w{k}.txt") for k in range(3)]
    for f in files:
        f.unlink(missing_ok=True)
    conn = pymysql.connect(host=mysql_server.host, port=mysql_server.port, user="rat_admin",
                           password="admin-pw", database=DB_ID, autocommit=True)
    with conn, open_database(conn, max_rows=5) as db:
        for sql in (f"SELECT '#', name FROM venues INTO OUTFILE '{files[0]}'",
                    f"SELECT 1--1 INTO DUMPFILE '{files[1]}'",
                    f"SELECT 'a\\' , 'b' INTO OUTFILE '{files[2]}' -- '",
                    "SELECT 1 FROM dual LIMIT 1 INTO @b", "SELECT @c := 5"):
            rows, error = db.execute(sql)
            assert rows is None and error.startswith("refused:"), (sql, error)
        assert db.execute("SELECT '#', 1--1, @b, @c") == ([("#", 2, None, None)], None)
        # what the refusal stops, sent anyway: the caller's connection stays open through each
        for sql, says in (("SELECT 1 FROM dual LIMIT 1 INTO @b", "no result set"),
                          ("SELECT no_such_column FROM venues", "no_such_column"),
                          ("SELECT seq FROM seq_1_to_1000000", "rows")):
            start = time.monotonic()
            rows, error = db._execute(sql, 5.0, 1 << 20)
            assert rows is None and says in error and time.monotonic() - start < 10, (sql, error)
            assert conn.open and db.execute("SELECT count(*) FROM venues") == ([(10,)], None), sql
    assert not any(f.exists() for f in files) and checksum("mysql", admin) == before


def test_mariadbs_time_limit_without_an_error_is_a_timeout(mysql_demo):
    """MariaDB's max_statement_time stops BENCHMARK() and returns its 0 without an error: a
    statement that ran to the limit is a timeout (it was a result, 0, after the whole limit)."""
    with open_database(mysql_demo[0]) as db:
        start = time.monotonic()
        rows, error = db.execute("SELECT BENCHMARK(2000000000, MD5('a'))", timeout_s=1.0)
        assert rows is None and error == "timeout after 1 s" and time.monotonic() - start < 5, (rows, error)
        assert db.execute("SELECT count(*) FROM venues") == ([(10,)], None)


def test_a_callers_writable_duckdb_connection_is_read_in_a_read_only_transaction(duck_demo, tmp_path):
    """A DuckDB connection passed in may write: WITH .. DELETE / INSERT / UPDATE are refused, and
    a write that gets past the refusal fails in the read-only transaction each statement runs in
    (it deleted rows); one with a transaction open is refused when opened, as PostgreSQL's."""
    import duckdb

    path = tmp_path / "writable.duckdb"
    shutil.copy(duck_demo, path)
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE notes AS SELECT range AS id FROM range(5)")
    with open_database(conn) as db:
        for sql in ("WITH x AS (SELECT 1) DELETE FROM notes WHERE id > 0 RETURNING *",
                    "WITH x AS (SELECT 1) INSERT INTO notes SELECT 99 FROM x RETURNING *",
                    "WITH x AS (SELECT 1) UPDATE notes SET id = 0 RETURNING *"):
            rows, error = db.execute(sql)
            assert rows is None and error.startswith("refused: only a query that reads"), (sql, error)
            rows, error = db._execute(sql, 5.0, 1 << 20)  # sent anyway
            assert rows is None and "read-only" in error, (sql, error)
        assert db.execute("SELECT count(*), sum(id) FROM notes") == ([(5, 10)], None)
    conn.begin()
    with pytest.raises(DatabaseError, match="the connection has a transaction open"):
        open_database(conn)
    conn.rollback()
    conn.close()


def test_a_duckdb_float_aggregate_is_the_same_from_run_to_run(tmp_path):
    """A DuckDB file rat opens runs one thread: with several, avg over 3M rows differed in its last
    digits between runs of the same query, and a query compared with itself was a mismatch."""
    import duckdb

    path = tmp_path / "floats.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE t AS SELECT i % 10 AS g, (i * 0.37) % 1000 / 3.0 AS x FROM range(3000000) r(i)")
    with open_database(path) as db:
        assert db.execute("SELECT current_setting('threads')") == ([(1,)], None)
        results = {str(db.execute("SELECT g, avg(x) FROM t GROUP BY g ORDER BY g")) for _ in range(4)}
    assert len(results) == 1, results


def test_a_mysql_url_takes_a_password_with_a_question_mark_and_tls_parameters(mysql_server):
    """A password may hold an unencoded `?` (it was read as the query's start: "the port is not a
    number"); SQLAlchemy's TLS parameters reach pymysql (they were unknown URL parameters)."""
    import pymysql

    from model.data.databases import connection_kwargs, parse_url

    admin = pymysql.connect(host=mysql_server.host, port=mysql_server.port, user="rat_admin",
                            password="admin-pw", autocommit=True)
    with admin, admin.cursor() as cursor:
        cursor.execute("CREATE USER IF NOT EXISTS 'rat_q'@'%' IDENTIFIED BY 'S3cr@t:p/w#x?'")
        cursor.execute(f"GRANT SELECT ON `{DEFAULT_DATABASE}`.* TO 'rat_q'@'%'")
    url = f"mysql+pymysql://rat_q:S3cr@t:p/w#x?@{mysql_server.host}:{mysql_server.port}/{DEFAULT_DATABASE}"
    with open_database(url) as db:
        assert db.execute("SELECT 1") == ([(1,)], None)
    kwargs = connection_kwargs(parse_url(f"{url}?ssl_ca=/ca.pem&ssl_check_hostname=false&charset=utf8mb4"), "x")
    assert kwargs["ssl"] == {"ca": "/ca.pem", "check_hostname": False} and kwargs["password"] == "S3cr@t:p/w#x?"
    with pytest.raises(DatabaseError, match="cannot connect") as error:
        open_database(f"{url}?ssl_ca=/no/such/ca.pem")
    assert "S3cr" not in str(error.value)


def libpq_string(url: str, password: str | None = None) -> str:
    """libpq's ``key=value`` connection string of a PostgreSQL URL (``password``: another one)."""
    from model.data.databases import parse_url

    parts = parse_url(url)
    return (f"host={parts['host']} port={parts['port']} dbname={parts['database']} user={parts['user']} "
            f"password={password or parts['password']}")


def test_a_libpq_connection_string_is_opened_as_postgres_and_its_password_never_printed(pg_demo, capsys):
    from model.data.databases import database_dialect, mask_password
    from model.scoring.cli import main

    dsn = libpq_string(pg_demo[0])
    assert database_dialect(dsn) == "postgres" and mask_password(dsn).endswith(" password=***")
    assert mask_password("shop=host=h password='a b\\' c' sslmode=require") == "shop=host=h password=*** sslmode=require"
    with open_database(dsn) as db:
        assert db.dialect == "postgres" and db.execute("SELECT count(*) FROM venues")[1] is None
        assert "scorer-pw" not in db.name
    wrong = libpq_string(pg_demo[0], "Wrong-Secret3")
    with pytest.raises(DatabaseError, match="password authentication failed") as raised:
        open_database(wrong)
    assert "Wrong-Secret3" not in str(raised.value)
    assert main(["--database", wrong, "--sql", "SELECT name FROM venues"]) == 2
    err = capsys.readouterr().err
    assert "Wrong-Secret3" not in err and "password authentication failed" in err and err.count("\n") == 1, err
    with pytest.raises(DatabaseError) as raised:  # not libpq's string (a stray word): a path, masked
        open_database(wrong + " stray")
    assert "Wrong-Secret3" not in str(raised.value) and "password=***" in str(raised.value)


def test_a_callers_connection_with_its_own_row_factory_is_read_as_rows_of_values(pg_demo, tmp_path):
    """A caller's psycopg connection returning dicts or named tuples (``row_factory``), or a
    sqlite3 one returning dicts, gives the same rows and schema as the URL."""
    import sqlite3

    import psycopg
    from psycopg.rows import dict_row, namedtuple_row

    from model.data.execution import database_outcome

    url, _ = pg_demo
    sql = "SELECT name, city FROM venues ORDER BY name"
    with open_database(url) as db:
        expected, schema = db.execute(sql), db.schema()
    for factory in (dict_row, namedtuple_row):
        with psycopg.connect(url, row_factory=factory) as conn:
            db = open_database(conn)
            assert db.execute(sql) == expected and db.schema().tables == schema.tables
            assert database_outcome(db, "SELECT 1", "SELECT 2", "postgres", "postgres") == "mismatch"
    path = tmp_path / "t.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (a INTEGER)")
    conn = sqlite3.connect(path)
    conn.row_factory = lambda cursor, row: dict(zip([c[0] for c in cursor.description], row, strict=True))
    with open_database(conn) as db:
        assert db.execute("SELECT count(*) FROM t") == ([(0,)], None)
    conn.close()


def test_rat_score_says_a_table_the_role_may_not_read_is_not_readable_not_missing(pg_demo, capsys):
    import psycopg

    from model.scoring.cli import main

    url, admin = pg_demo
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS secret (id int, ssn text)")
        conn.execute("REVOKE SELECT ON secret FROM rat_scorer")
    for sql, says in (("SELECT ssn FROM secret", "table 'secret' is not readable by this role"),
                      ("SELECT ssn FROM nosuch", "no table 'nosuch' in"),
                      ("SELECT relname FROM pg_class", "table 'pg_class' is not in the schema read from")):
        assert main(["--database", url, "--sql", sql]) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1 and "scorer-pw" not in err, err


def test_a_callers_closed_postgres_connection_is_one_line_never_a_failed_query(pg_demo):
    import psycopg

    conn = psycopg.connect(pg_demo[0])
    conn.close()
    with pytest.raises(DatabaseError, match="^<psycopg Connection>: the connection is closed$"):
        open_database(conn)
    conn = psycopg.connect(pg_demo[0])
    db = open_database(conn)
    conn.close()
    with pytest.raises(DatabaseError, match="the connection is closed"):
        db.execute("SELECT 1")


# ------------------------------------------------------------------ DuckDB files and connections


def test_a_damaged_duckdb_file_is_one_line_naming_it_never_a_failed_query(tmp_path, capsys):
    """A DuckDB file with a damaged block (its checksum no longer matches) opens, and a query that
    reads the block is the database's error: one line naming the file (rat-score: exit 2), not a
    query that fails to run."""
    import duckdb

    from model.scoring.cli import main

    path = tmp_path / "damaged.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE t AS SELECT range AS id, 'name ' || range AS name FROM range(200000)")
    data = bytearray(path.read_bytes())
    middle = len(data) // 2  # a block of the table's rows (the catalogue is written after them)
    data[middle:middle + 64] = bytes(b ^ 0xFF for b in data[middle:middle + 64])
    path.write_bytes(data)
    with open_database(path) as db:
        assert db.schema().tables == {"t": ("id", "name")}
        with pytest.raises(DatabaseError, match=rf"^{re.escape(str(path))}: cannot be read \(Corrupt database file: "):
            db.execute("SELECT sum(id), max(name) FROM t")
    assert main(["--database", str(path), "--sql", "SELECT sum(id), max(name) FROM t"]) == 2
    err = capsys.readouterr().err
    assert "cannot be read (Corrupt database file" in err and err.count("\n") == 1, err


def test_a_callers_closed_duckdb_connection_is_one_line_never_a_failed_query(tmp_path):
    """A closed DuckDB connection passed in, or closed after: the error PostgreSQL's gives (it
    was duckdb's ConnectionException when opened, and a failed query after)."""
    import duckdb

    path = tmp_path / "closed.duckdb"
    conn = duckdb.connect(str(path))
    conn.execute("CREATE TABLE t (a INTEGER)")
    conn.close()
    with pytest.raises(DatabaseError, match="^<_?duckdb DuckDBPyConnection>: the connection is closed$"):
        open_database(conn)
    conn = duckdb.connect(str(path))
    db = open_database(conn)
    conn.close()
    with pytest.raises(DatabaseError, match="the connection is closed$"):
        db.execute("SELECT 1")


def test_a_duckdb_files_write_ahead_log_is_part_of_its_cache_identity(tmp_path):
    """Rows written to a DuckDB file's `.wal` and not checkpointed (its writer ended without
    closing) are read by DuckDB: the identity the feature cache keys on changes with them (it was
    the file's size and time alone, and cached look-ups of the old rows were used)."""
    import duckdb

    path = tmp_path / "logged.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE t AS SELECT range AS id FROM range(10)")
    with open_database(path) as db:
        before = db.cache_identity, db.execute("SELECT count(*) FROM t")
    writer = (f"import duckdb, os; conn = duckdb.connect({str(path)!r}); "
              "conn.execute('INSERT INTO t SELECT range FROM range(5)'); os._exit(0)")
    subprocess.run([sys.executable, "-c", writer], check=True)
    assert Path(f"{path}.wal").stat().st_size > 0
    with open_database(path) as db:
        after = db.cache_identity, db.execute("SELECT count(*) FROM t")
    assert before[1] == ([(10,)], None) and after[1] == ([(15,)], None)
    assert after[0] != before[0]


def test_a_sqlite_file_named_duckdb_is_read_as_what_its_header_says(tmp_path, demo):
    """A SQLite file named `.duckdb` is SQLite's by its header (as a DuckDB file named `.db` is
    DuckDB's), not a DuckDB error about extensions; a duckdb:// URL of it says what it is."""
    from model.data.databases import database_dialect

    path = tmp_path / "shop.duckdb"
    shutil.copy(demo[2], path)
    assert database_dialect(path) == "sqlite"
    with open_database(path) as db:
        assert db.dialect == "sqlite" and db.execute("SELECT count(*) FROM venues") == ([(10,)], None)
    with pytest.raises(DatabaseError, match=rf"^duckdb:///{re.escape(str(path))}: a SQLite database file, not DuckDB's "
                                            rf"\(open sqlite:///{re.escape(str(path))}, or its path\)$"):
        open_database(f"duckdb:///{path}")


def test_a_duckdb_file_open_in_the_process_says_to_pass_its_connection(duck_demo, tmp_path):
    import duckdb

    path = tmp_path / "open.duckdb"
    shutil.copy(duck_demo, path)
    with duckdb.connect(str(path)) as conn:
        with pytest.raises(DatabaseError, match="different configuration.*; it is open in this process already: "
                                                "pass that connection instead of its path$"):
            open_database(path)
        with open_database(conn) as db:
            assert db.execute("SELECT count(*) FROM venues") == ([(10,)], None)


def test_a_duckdb_export_read_without_its_dialect_suggests_duckdb(tmp_path):
    """EXPORT DATABASE's schema.sql read as SQLite (no --dialect) stops at a list column and
    suggests --dialect duckdb where its types are DuckDB's (it suggested postgres, which reads
    most of DuckDB's DDL); PostgreSQL's own DDL still suggests postgres."""
    duckdb = pytest.importorskip("duckdb")
    with duckdb.connect(str(tmp_path / "shop.duckdb")) as conn:
        conn.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, name VARCHAR, score DOUBLE, tags VARCHAR[])")
        conn.execute(f"EXPORT DATABASE '{tmp_path / 'export'}'")
    schema_sql = (tmp_path / "export" / "schema.sql").read_text()
    with pytest.raises(UsageError, match=r"cannot read table people as sqlite DDL .*; it reads as duckdb DDL: --dialect duckdb$"):
        schema_from_ddl(schema_sql)
    assert schema_from_ddl(schema_sql, "duckdb").tables == {"people": ("id", "name", "score", "tags")}
    with pytest.raises(UsageError, match=r"--dialect postgres$"):
        schema_from_ddl("CREATE TABLE public.people (id integer NOT NULL, score double precision, tags text[]);")


# ---------------------------------------------------------------- MySQL: a server that stops answering


class StallingProxy:
    """A TCP proxy on a free localhost port to ``upstream`` ((host, port); None: nothing behind
    it) that, once ``stall()`` is called (from the start without an upstream), reads and never
    answers, as a hung server does; every connection is dropped after ``release_s`` (a client
    that waits without a limit then fails, after that long)."""

    def __init__(self, upstream: tuple[str, int] | None = None, release_s: float = 30.0):
        import socket
        import threading

        self.upstream, self.stalled = upstream, threading.Event()
        if upstream is None:
            self.stalled.set()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()
        self.release = threading.Timer(release_s, self.close)
        self.release.daemon = True
        self.release.start()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed
                return
            self.sockets.append(client)
            if self.stalled.is_set():
                continue
            server = socket.create_connection(self.upstream)
            self.sockets.append(server)
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source, sink) -> None:
        try:
            while data := source.recv(65536):
                if not self.stalled.is_set():
                    sink.sendall(data)
        except OSError:
            pass

    def stall(self) -> None:
        self.stalled.set()

    def close(self) -> None:
        import socket

        self.release.cancel()
        for sock in self.sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


def test_a_mysql_server_that_stops_answering_ends_each_request_in_bounded_time(mysql_server, mysql_demo, monkeypatch):
    """A MySQL server that accepts and never answers, or stops answering during a query: opening
    it is one line after CONNECT_TIMEOUT_S, a statement waiting on it a timeout past its limit and
    CONNECT_TIMEOUT_S, and the next one, which finds the server hung, the database's error (pymysql
    waited without a limit: each blocked until the connection was dropped, 20 s here)."""
    from model.data import databases

    monkeypatch.setattr(databases, "CONNECT_TIMEOUT_S", 1)
    hung = StallingProxy(release_s=20)
    proxy = StallingProxy((mysql_server.host, mysql_server.port), release_s=20)
    try:
        start = time.monotonic()
        with pytest.raises(DatabaseError, match=r"cannot connect \(the server did not answer within 1 s\)$"):
            open_database(f"mysql+pymysql://rat_scorer:scorer-pw@127.0.0.1:{hung.port}/{DB_ID}")
        assert time.monotonic() - start < 5
        with open_database(f"mysql+pymysql://rat_scorer:scorer-pw@127.0.0.1:{proxy.port}/{DB_ID}") as db:
            assert db.execute("SELECT count(*) FROM venues") == ([(10,)], None)
            proxy.stall()
            start = time.monotonic()
            assert db.execute("SELECT count(*) FROM venues", timeout_s=1.0) == (None, "timeout after 1 s")
            assert time.monotonic() - start < 5
            start = time.monotonic()
            with pytest.raises(DatabaseError, match=r"cannot connect \(the server did not answer within 1 s\)$"):
                db.execute("SELECT count(*) FROM venues")
            assert time.monotonic() - start < 5
    finally:
        hung.close()
        proxy.close()



# ----------------------------------------------- a statement whose work is cancelled; a hung PostgreSQL

# Statements that run for seconds: a sleep, MariaDB's BENCHMARK() (stopped, it returns 0 without
# an error), a PostgreSQL cursor read in several FETCHes, a DuckDB cross join
SLOW = {"pg_demo": ["SELECT pg_sleep(5)", "SELECT g, pg_sleep(0.01) FROM generate_series(1, 1000) g"],
        "mysql_demo": ["SELECT SLEEP(5)", "SELECT BENCHMARK(2000000000, MD5('a'))"],
        "duck_demo": ["SELECT count(*) FROM range(100000) a, range(100000) b WHERE a.range + b.range = -1"]}


def cancelled_after(db, sql: str, after_s: float) -> tuple[tuple, float]:
    """``db.execute(sql)`` (a 10 s limit) in a thread whose work is cancelled (``cancellable``)
    ``after_s`` seconds after it starts (0: before it starts): its answer and the seconds it took."""
    cancel, answer = threading.Event(), []

    def run() -> None:
        with cancellable(cancel):
            start = time.monotonic()
            answer.append(db.execute(sql, timeout_s=10.0))
            answer.append(time.monotonic() - start)

    if not after_s:
        cancel.set()
    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(after_s)
    cancel.set()
    worker.join(30)
    return answer[0], answer[1]


@pytest.mark.parametrize("after_s", [0.3, 0.0])
@pytest.mark.parametrize("backend", ["pg_demo", "mysql_demo", "duck_demo"])
def test_a_statement_whose_work_is_cancelled_stops_at_once_and_its_connection_answers_the_next(
        backend, after_s, request):
    """rat-serve cancels the work of a request whose client went away (``cancellable``): a
    statement running on PostgreSQL, MariaDB or DuckDB, or about to run, stops at once, a timeout
    as a SQLite query's, and the same connection answers the next statement (each ran on to its
    own time limit, 10 s here)."""
    demo = request.getfixturevalue(backend)
    with open_database(demo if backend == "duck_demo" else demo[0]) as db:
        conn = db.conn
        for sql in SLOW[backend]:
            answer, took = cancelled_after(db, sql, after_s)
            assert answer == (None, "timeout after 10 s") and took < 1.5, (sql, answer, took)
            assert db.execute("SELECT count(*) FROM venues") == ([(10,)], None)
            assert db.conn is conn, sql


def test_a_postgres_server_that_stops_answering_ends_each_request_in_bounded_time(postgres_server, pg_demo,
                                                                                  monkeypatch):
    """A PostgreSQL server that stops answering during a statement: the statement is a timeout
    past its limit and CONNECT_TIMEOUT_S (its connection closed), one cancelled meanwhile a
    timeout once the server has not taken the cancel within CONNECT_TIMEOUT_S, and the next one,
    which finds the server hung, the database's error (psycopg waited without a limit: until the
    connection was dropped, 20 s here)."""
    from model.data import databases

    monkeypatch.setattr(databases, "CONNECT_TIMEOUT_S", 2)
    proxy = StallingProxy((postgres_server.host, postgres_server.port), release_s=20)
    url = f"postgresql://rat_scorer:scorer-pw@127.0.0.1:{proxy.port}/{DB_ID}"
    try:
        with open_database(url) as db, open_database(url) as cancelled:
            for each in (db, cancelled):
                assert each.execute("SELECT count(*) FROM venues") == ([(10,)], None)
            proxy.stall()
            start = time.monotonic()
            assert db.execute("SELECT count(*) FROM venues", timeout_s=1.0) == (None, "timeout after 1 s")
            assert time.monotonic() - start < 5
            answer, took = cancelled_after(cancelled, "SELECT count(*) FROM venues", 0.3)
            assert answer == (None, "timeout after 10 s") and took < 4, (answer, took)
            start = time.monotonic()
            with pytest.raises(DatabaseError, match="cannot connect"):
                db.execute("SELECT count(*) FROM venues")
            assert time.monotonic() - start < 5
    finally:
        proxy.close()


# ------------------------------------------------------------------------- mysqldump's other output


def mariadb_dump(mysql_server, *args: str) -> str:
    dump_bin = shutil.which("mariadb-dump") or shutil.which("mysqldump")
    if dump_bin is None:
        pytest.skip("no mariadb-dump / mysqldump")
    return subprocess.run([dump_bin, "-h", mysql_server.host, "-P", str(mysql_server.port), "-u", "rat_admin",
                           "-padmin-pw", "--protocol=TCP", *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def two_databases(mysql_server):
    """Two MariaDB databases, `dump_a` (a sequence, a trigger, a function, a procedure whose body
    creates a table, an event) and `dump_b` (a table of the same name as dump_a's, another)."""
    import pymysql

    urls = {name: mysql_server.create_database(name) for name in ("dump_a", "dump_b")}
    conn = pymysql.connect(host=mysql_server.host, port=mysql_server.port, user="rat_admin", password="admin-pw",
                           autocommit=True)
    with conn, conn.cursor() as cursor:
        cursor.execute("USE dump_a")
        for statement in (
                "CREATE TABLE people (id INT PRIMARY KEY, name VARCHAR(20))",
                "CREATE TABLE pets (id INT PRIMARY KEY, owner_id INT, FOREIGN KEY (owner_id) REFERENCES people (id))",
                "CREATE SEQUENCE ids START WITH 5",
                "CREATE TRIGGER upper_name BEFORE INSERT ON people FOR EACH ROW BEGIN SET NEW.name = UPPER(NEW.name); END",
                "CREATE FUNCTION plus_one(x INT) RETURNS INT DETERMINISTIC BEGIN DECLARE y INT; SET y = x + 1; RETURN y; END",
                ("CREATE PROCEDURE fill(IN n INT) BEGIN DECLARE i INT DEFAULT 0; "
                 "CREATE TEMPORARY TABLE scratch (k INT, label VARCHAR(10)); WHILE i < n DO "
                 "IF i % 2 = 0 THEN INSERT INTO scratch VALUES (i, 'even; odd'); END IF; SET i = i + 1; END WHILE; END"),
                "CREATE EVENT tidy ON SCHEDULE EVERY 1 DAY DO DELETE FROM people WHERE id < 0"):
            cursor.execute(statement)
        cursor.execute("USE dump_b")
        cursor.execute("CREATE TABLE orders (id INT PRIMARY KEY, total DOUBLE)")
        cursor.execute("CREATE TABLE people (pid INT PRIMARY KEY, orders_id INT REFERENCES orders (id))")
    return urls


def test_a_mysqldump_with_sequences_routines_triggers_and_events_is_the_schema(mysql_server, two_databases):
    """mysqldump's `DO SETVAL(..)` after a MariaDB sequence (it stopped the read) and its stored
    programs between `DELIMITER ;;` and `DELIMITER ;` (their bodies hold `;`: --routines stopped
    the read; a body's CREATE TABLE is no table) are skipped."""
    dump = mariadb_dump(mysql_server, "--no-data", "--routines", "--events", "dump_a")
    assert "DO SETVAL(" in dump and "DELIMITER ;;" in dump and "PROCEDURE `fill`" in dump
    with open_database(two_databases["dump_a"]) as db:
        assert keys_of(schema_from_ddl(dump, "mysql", "dump_a")) == keys_of(db.schema())


def test_a_mysqldump_of_several_databases_is_read_for_the_one_named(mysql_server, two_databases):
    """`mysqldump --databases a b` (each database's tables after its `USE`) is read as the database
    its db_id names (its tables were merged into one schema, the second `people` dropped); naming
    neither is one line naming them."""
    dump = mariadb_dump(mysql_server, "--routines", "--databases", "dump_a", "dump_b")
    assert "USE `dump_b`;" in dump
    for name, url in two_databases.items():
        with open_database(url) as db:
            assert keys_of(schema_from_ddl(dump, "mysql", name)) == keys_of(db.schema(name))
    with pytest.raises(UsageError, match=r"^--schema all.sql: the schemas of 2 databases \(dump_a, dump_b\): "
                                         r"name the one to read as its db_id \(--db-id dump_a\)$"):
        schema_from_ddl(dump, "mysql", "all", "--schema all.sql")


def test_postgres_names_differing_only_in_case_leave_one_out_not_the_database(postgres_server, caplog):
    """PostgreSQL's "MixedCase" beside mixedcase, and a table's "Name" beside name: the whole
    database could not be read (one line, exit 2, even for a query of another table); the
    spelling an unquoted name reads (lower case) is kept, one warning names the one left out,
    and the rest of the schema is read (never one table with the columns of both)."""
    import psycopg

    url = postgres_server.create_database("mixed_case")
    with psycopg.connect(postgres_server.url("mixed_case", admin=True), autocommit=True) as conn:
        conn.execute('CREATE TABLE IF NOT EXISTS "MixedCase" (a int)')
        conn.execute("CREATE TABLE IF NOT EXISTS mixedcase (b int)")
        conn.execute('CREATE TABLE IF NOT EXISTS people ("Name" text, name text, city text)')
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO rat_scorer")
    with caplog.at_level("WARNING", logger="model.data.databases"), open_database(url) as db:
        schema = db.schema()
    assert schema.columns("mixedcase") == {"b"}, schema.columns("mixedcase")
    assert schema.columns("people") == {"city", "name"}
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "'public.MixedCase', 'public.people.Name' left out" in warning, warning


def test_sqlite_written_sql_finds_a_table_postgres_spells_in_another_case(postgres_server):
    """SQLite reads `makers`, `MAKERS` and `Makers` as one table; a PostgreSQL table created as
    "Makers" keeps its case, and the SQLite-written query lowercases its names: the table is
    then spelt as the database spells it (it was 'relation "makers" does not exist')."""
    import psycopg

    url = postgres_server.create_database("spelling")
    with psycopg.connect(postgres_server.url("spelling", admin=True), autocommit=True) as conn:
        conn.execute('CREATE TABLE IF NOT EXISTS "Makers" (id int PRIMARY KEY, name text)')
        conn.execute('DELETE FROM "Makers"')
        conn.execute("""INSERT INTO "Makers" VALUES (1, 'amc'), (2, 'ford')""")
        conn.execute('GRANT SELECT ON "Makers" TO rat_scorer')
    with open_database(url) as db:
        schema = db.schema()
        rows, error = db.run("SELECT count(*) FROM MAKERS AS T1 WHERE T1.name = 'ford'", "sqlite", schema)
        assert (rows, error) == ([(1,)], None)
        rows, error = db.run("SELECT Makers.name FROM makers ORDER BY Makers.id", "sqlite", schema)
        assert (rows, error) == ([("amc",), ("ford",)], None)


def test_mysql_look_ups_compare_text_as_bytes_and_numbers_as_numbers(mysql_server):
    """SQLite's `=`: a text column's 'Anthony ' is not 'Anthony' (MariaDB's collations ignore
    trailing spaces and case: compared as bytes), and a number column's 32.0 is '32.0' (compared
    as bytes, '32' is not: it was no match)."""
    import pymysql

    url = mysql_server.create_database("lookups")
    conn = pymysql.connect(host=mysql_server.host, port=mysql_server.port, user="rat_admin",
                           password="admin-pw", database="lookups", autocommit=True)
    with conn.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS item")
        cursor.execute("CREATE TABLE item (name VARCHAR(20), price DOUBLE, qty BIGINT)")
        cursor.execute("INSERT INTO item VALUES ('Anthony ', 32.0, 5)")
    conn.close()
    with open_database(url) as db:
        probe = DatabaseProbe(db)
        assert probe.value_in_column("item", "name", "'Anthony'", like=False) == (0.0, 0.0)
        assert probe.value_in_column("item", "name", "'Anthony '", like=False) == (1.0, 1.0)
        assert probe.value_in_column("item", "price", "'32.0'", like=False)[0] == 1.0
        assert probe.value_in_column("item", "qty", "'05'", like=False)[0] == 1.0


def test_sqlite_date_and_math_functions_run_as_sqlite_means_them_or_are_said(postgres_server, mysql_server):
    """SQLite's functions PostgreSQL has not (typeof(), hex(), a date modifier, GLOB) were sent and
    failed there (a query that runs in SQLite scored as one that fails): the reason names them,
    as on MySQL. On MariaDB, SQLite's 'now' (strftime('%Y', 'now'): NULL) and its base-10 log()
    (MySQL's is natural) give SQLite's answers."""
    from datetime import UTC, datetime

    with open_database(postgres_server.create_database("fns")) as db:
        for sql, named in [("SELECT typeof(1)", "typeof() is not"), ("SELECT hex('a')", "hex() is not"),
                           ("SELECT format('%d', 5)", "format() is not"),  # (PostgreSQL's has no %d)
                           ("SELECT date('2020-01-01', '+1 day')", "date() with a modifier ('+1 day') is not")]:
            rows, error = db.run(sql, "sqlite", None)
            assert rows is None and error == f"not in the database's SQL: {named} in postgres's SQL (SQLite's function)"
    with open_database(mysql_server.create_database("fns")) as db:
        rows, error = db.run("SELECT strftime('%Y', 'now'), log(100), date('2020-01-01', '+1 day') IS NULL", "sqlite", None)
        assert error.endswith("date() with a modifier ('+1 day') is not in mysql's SQL (SQLite's function)")
        rows, error = db.run("SELECT strftime('%Y-%m-%d %H', 'now'), log(100)", "sqlite", None)  # (SQLite's now is UTC)
        assert error is None and rows == [(datetime.now(UTC).strftime("%Y-%m-%d %H"), 2.0)]


def test_a_sqlite_schema_is_read_over_a_few_connections_whatever_its_tables(tmp_path, monkeypatch):
    """Each connection reads the whole catalogue again: one per PRAGMA made a schema of 1,500
    tables take a minute. The schema read (keys, REFERENCES without columns) is the same."""
    import sqlite3

    path = tmp_path / "many.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY, name TEXT)")
        for k in range(60):
            conn.execute(f"CREATE TABLE t{k} (a INTEGER, b TEXT, p INTEGER REFERENCES parent, PRIMARY KEY (b, a))")
    conn.close()
    opened = []
    connect = sqlite3.connect
    with open_database(path) as db:
        monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: opened.append(a) or connect(*a, **k))
        schema = db.schema("many")
        monkeypatch.undo()
    assert len(schema.tables) == 61 and schema.tables["t59"] == ("a", "b", "p")
    assert schema.primary_keys[:3] == ("parent.id", "t0.b", "t0.a")
    assert ("t59.p", "parent.id") in schema.foreign_keys and schema.column_types["t0.b"] == "TEXT"
    assert 1 <= len(opened) <= 3, f"{len(opened)} connections to read the schema"
    assert all("mode=ro" in a[0] for a in opened)
