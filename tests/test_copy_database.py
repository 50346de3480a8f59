"""The loader (model/data/copy_database.py) on the embedded demo databases and on a dirty SQLite
file, into real PostgreSQL and MariaDB servers (tests/servers.py) and DuckDB: every row arrives,
keys are kept, dirty values are counted, a second copy replaces the first, bad input is one line."""

import sqlite3
from pathlib import Path

import pytest

from model.data.copy_database import copy_database, main, target
from model.synth.demo import demo_root

DEMO = sorted((demo_root() / "database").glob("*/*.sqlite"))


def _sqlite_rows(path: Path) -> dict[str, list]:
    with sqlite3.connect(path) as conn:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {n.lower(): sorted(map(repr, conn.execute(f'SELECT * FROM "{n}"'))) for n in names}


def _rows(url: str, tables) -> dict[str, list]:
    """Each table's rows through the copy's URL, as sorted reprs (floats as SQLite gives them)."""
    t = target(url)
    if t.kind == "duckdb":
        import duckdb

        conn = duckdb.connect(str(t.path), read_only=True)
        fetch = lambda q: conn.execute(q).fetchall()
    elif t.kind == "postgres":
        import psycopg

        conn = psycopg.connect(host=t.host, port=t.port, user=t.user, password=t.password,
                               dbname=t.database)
        fetch = lambda q: conn.execute(q).fetchall()
    else:
        import pymysql

        conn = pymysql.connect(host=t.host, port=t.port, user=t.user, password=t.password,
                               database=t.database)

        def fetch(q):
            with conn.cursor() as cursor:
                cursor.execute(q.replace('"', "`"))
                return cursor.fetchall()
    try:
        return {n: sorted(repr(tuple(r)) for r in fetch(f'SELECT * FROM "{n}"')) for n in tables}
    finally:
        conn.close()


def _check_demo(url_of, grant=None):
    for path in DEMO:
        report = copy_database(path, url_of(path.stem, True), grant=grant)
        expected = _sqlite_rows(path)
        assert report.tables == len(expected) and report.rows == sum(map(len, expected.values()))
        assert report.primary_keys == len(expected)  # every demo table has one
        assert report.foreign_keys > 0 and not report.foreign_keys_skipped, report.foreign_keys_skipped
        assert not report.retyped and report.emptied == 0
        assert _rows(url_of(path.stem, False), expected) == expected
    first = _sqlite_rows(DEMO[0])
    again = copy_database(DEMO[0], url_of(DEMO[0].stem, True), grant=grant)  # replaces the first
    assert again.rows == sum(map(len, first.values())) and again.primary_keys == len(first)
    assert _rows(url_of(DEMO[0].stem, False), first) == first  # no row twice


def test_demo_databases_into_duckdb(tmp_path):
    pytest.importorskip("duckdb")
    _check_demo(lambda name, admin: f"duckdb:///{tmp_path}/{name}.duckdb")


def test_demo_databases_into_postgres(postgres_server):
    # the copy makes the database; the read-only scorer role reads it through --grant
    _check_demo(lambda name, admin: postgres_server.url(name, admin=admin), grant="rat_scorer")


def test_demo_databases_into_mariadb(mysql_server):
    _check_demo(lambda name, admin: mysql_server.url(name, admin=admin), grant="rat_scorer")


@pytest.fixture
def dirty(tmp_path) -> Path:
    """A SQLite file as dirty as Spider's: text in an INTEGER column, blanks in a REAL one, a
    primary key holding NULL, a foreign key to a missing table and one with an orphan row."""
    path = tmp_path / "dirty.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript("""
            CREATE TABLE "Team" (id INTEGER PRIMARY KEY, name TEXT, founded INTEGER, rating REAL,
                                 season TEXT, zip TEXT);
            INSERT INTO "Team" VALUES (1, 'Ajax', 1900, 4.5, '2014', '0123'),
                                      (2, 'Benfica', 'unknown', '', '2015', '45'),
                                      (3, 'Celtic', 1887, 3, NULL, '6');
            CREATE TABLE player (pid TEXT PRIMARY KEY, team_id INTEGER, coach INTEGER,
                                 FOREIGN KEY (team_id) REFERENCES "Team"(id),
                                 FOREIGN KEY (coach) REFERENCES coach(id));
            INSERT INTO player VALUES ('p1', 1, NULL), ('p2', 9, NULL), (NULL, 3, NULL);
        """)
    conn.close()
    return path


def _check_dirty(report):
    assert report.tables == 2 and report.rows == 6  # no row lost
    assert report.retyped == ["team.founded INTEGER -> TEXT (text values)"]
    assert report.emptied == 1  # rating '' -> NULL, the column stays numeric
    assert report.integer_text == ["team.season TEXT -> BIGINT"]  # not zip: '0123' stays text
    assert report.primary_keys == 1 and report.primary_keys_skipped == ["player: holds NULL"]
    assert sorted(report.foreign_keys_skipped) == [
        "player(coach) -> coach: references a missing table",
        "player(team_id) -> team: values with no parent row"]


def test_dirty_values_are_counted_and_no_row_is_lost(dirty, tmp_path):
    pytest.importorskip("duckdb")
    url = f"duckdb:///{tmp_path}/out/"
    report = copy_database(dirty, url)
    _check_dirty(report)
    assert report.url == f"duckdb:///{tmp_path}/out/dirty.duckdb"
    rows = _rows(report.url, ["team", "player"])
    assert rows["team"] == sorted(map(repr, [(1, "Ajax", "1900", 4.5, 2014, "0123"),
                                             (2, "Benfica", "unknown", None, 2015, "45"),
                                             (3, "Celtic", "1887", 3.0, None, "6")]))
    kept = copy_database(dirty, url, name="declared", value_types=False)
    assert kept.integer_text == [] and _rows(kept.url, ["team"])["team"][0].endswith("'2014', '0123')")
    assert len(rows["player"]) == 3


def test_dirty_values_into_postgres(dirty, postgres_server):
    report = copy_database(dirty, postgres_server.url(admin=True), name="dirty_pg")
    _check_dirty(report)
    import psycopg

    t = target(report.url)
    with psycopg.connect(host=t.host, port=t.port, user=t.user, password=t.password,
                         dbname=t.database) as conn:
        types = dict(conn.execute("SELECT column_name, data_type FROM information_schema.columns"
                                  " WHERE table_name = 'team'").fetchall())
    assert types == {"id": "bigint", "name": "text", "founded": "text",
                     "rating": "double precision", "season": "bigint", "zip": "text"}


def test_command_line_copies_a_folder_with_progress(tmp_path, capsys):
    pytest.importorskip("duckdb")
    assert main([str(demo_root() / "database"), f"duckdb:///{tmp_path}/"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(DEMO) + 1 and lines[0].startswith(f"[1/{len(DEMO)}] {DEMO[0].stem}: ")
    tables = sum(len(_sqlite_rows(p)) for p in DEMO)
    assert lines[-1].startswith(f"together: {len(DEMO)} databases: {tables} tables, ")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{p.stem}.duckdb" for p in DEMO)


@pytest.mark.parametrize("args, message", [
    (["missing.sqlite", "duckdb:///x.duckdb"], "python -m model.data.copy_database: error: no SQLite file or folder at missing.sqlite"),
    ([str(DEMO[0]), "oracle://h/db"], "python -m model.data.copy_database: error: cannot copy into 'oracle': the URL must start with"),
])
def test_bad_input_is_one_line_exit_2(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_unreachable_server_is_one_line(capsys):
    assert main([str(DEMO[0]), "postgresql://nobody:pw@127.0.0.1:9/db"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m model.data.copy_database: error: postgresql://nobody:***@127.0.0.1:9/db: "
                          "OperationalError") and err.count("\n") == 1


def test_url_parameters_reach_the_driver(postgres_server, mysql_server, capsys):
    """A URL's query parameters are the driver's (libpq's `sslmode`, `host=<socket folder>&port=`;
    MySQL's `unix_socket`), never dropped: the copy went to 127.0.0.1:5432 without SSL."""
    pg = f"postgresql://rat_admin:admin-pw@/rat?host={postgres_server.folder}&port={postgres_server.port}"
    report = copy_database(DEMO[0], pg, name="by_socket")
    assert report.rows > 0 and _rows(postgres_server.url("by_socket", admin=True), _sqlite_rows(DEMO[0]))
    assert main([str(DEMO[0]), postgres_server.url(admin=True) + "?sslmode=require"]) == 2
    err = capsys.readouterr().err
    assert "SSL" in err and "admin-pw" not in err and err.count("\n") == 1, err
    assert main([str(DEMO[0]), postgres_server.url(admin=True) + "?nosuch=1"]) == 2
    err = capsys.readouterr().err
    assert 'invalid connection option "nosuch"' in err and err.count("\n") == 1, err
    socket = f"mysql+pymysql://rat_admin:admin-pw@/rat?unix_socket={mysql_server.socket}"
    assert copy_database(DEMO[0], socket, name="by_socket").rows == report.rows
    assert main([str(DEMO[0]), mysql_server.url(admin=True) + "?nosuch=1"]) == 2
    err = capsys.readouterr().err
    assert "unknown URL parameters ['nosuch']" in err and "admin-pw" not in err, err


def test_grant_names_a_mysql_account_with_its_host(mysql_server):
    """`--grant user@host` grants to that account (before, always to 'user'@'%': the GRANT to the
    account 'rat_host@127.0.0.1'@'%' failed, no such user); `--grant user` is any host's."""
    import pymysql

    admin = pymysql.connect(host=mysql_server.host, port=mysql_server.port, user="rat_admin",
                            password="admin-pw", autocommit=True)
    with admin, admin.cursor() as cursor:
        cursor.execute("CREATE USER IF NOT EXISTS 'rat_host'@'127.0.0.1' IDENTIFIED BY 'host-pw'")
    assert main([str(DEMO[0]), mysql_server.url(admin=True), "--name", "granted", "--grant", "rat_host@127.0.0.1"]) == 0
    expected = _sqlite_rows(DEMO[0])
    url = f"mysql+pymysql://rat_host:host-pw@{mysql_server.host}:{mysql_server.port}/granted"
    assert _rows(url, expected) == expected


def test_a_mysql_grant_into_a_database_with_other_tables_is_the_copied_tables_alone(mysql_server):
    """Copied into a database that holds other tables, --grant gave SELECT on the whole database:
    the account read ``shop.secret``, which the copy did not make. It is granted the copied
    tables alone, and the copy's line says so."""
    import pymysql

    admin = pymysql.connect(host=mysql_server.host, port=mysql_server.port, user="rat_admin",
                            password="admin-pw", autocommit=True)
    with admin, admin.cursor() as cursor:
        cursor.execute("CREATE DATABASE shop")
        cursor.execute("CREATE TABLE shop.secret (card text)")
        cursor.execute("CREATE USER 'rat_reader'@'%' IDENTIFIED BY 'reader-pw'")
    report = copy_database(DEMO[0], mysql_server.url(admin=True), "shop", grant="rat_reader")
    url = f"mysql+pymysql://rat_reader:reader-pw@{mysql_server.host}:{mysql_server.port}/shop"
    with pytest.raises(pymysql.err.OperationalError, match="SELECT command denied"):
        _rows(url, {"secret": []})
    expected = _sqlite_rows(DEMO[0])
    assert _rows(url, expected) == expected
    assert "SELECT granted on the copied tables alone (the database holds 1 other table: secret)" in report.line()


def test_a_mariadb_copy_runs_spiders_sqlite_gold_as_sqlite_does(mysql_server, tmp_path):
    """Spider's car_1 copied to MariaDB gave gold_error on 156 of its 184 pairs in rat-exec: its
    SQLite habits (a subquery in FROM without an alias, an integer quotient, text compared with
    SQLite's case) were written for PostgreSQL and DuckDB alone. And with --grant table by table,
    a table the copy lacks read "SELECT command denied" rather than that it does not exist."""
    import json

    from model.data.databases import open_database
    from model.data.execution import evaluate_on_database

    path = tmp_path / "cars.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE Countries (CountryId INTEGER PRIMARY KEY, CountryName TEXT, Cars INTEGER, "
                     "Code TEXT)")
        conn.executemany("INSERT INTO Countries VALUES (?, ?, ?, ?)",
                         [(1, "usa", 7, "1"), (2, "france", 3, "2x"), (3, "Japan", 4, " 3")])
    conn.close()
    copy_database(path, mysql_server.url("cars", admin=True), grant="rat_scorer")
    golds = ["SELECT count(*) FROM (SELECT CountryName FROM COUNTRIES INTERSECT SELECT CountryName FROM countries)",
             "SELECT sum(Cars) / count(*) FROM countries",
             "SELECT count(*) FROM countries WHERE CountryName = 'France'",
             'SELECT T1.CountryId FROM countries AS T1 WHERE t1.CountryName = "Japan"',
             "SELECT count(*) FROM countries AS T1 JOIN countries AS T2 ON T1.CountryId = T2.Code"]
    with open_database(path) as lite:  # (each a count: the prediction is SQLite's number)
        expected = [lite.execute(gold)[0][0][0] for gold in golds]
    assert expected[:4] == [3, 4, 0, 3], expected
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"sql": f"SELECT {n}", "gold": gold}) + "\n"
                             for gold, n in zip(golds, expected, strict=True)))
    with open_database(mysql_server.url("cars")) as database:
        report = evaluate_on_database(database, pairs, "sqlite", progress=False)
        _, error = database.execute("SELECT * FROM nosuch")
    assert report["outcomes"]["match"] == len(golds), report
    assert "doesn't exist" in error and "denied" not in error, error
