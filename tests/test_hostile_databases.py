"""Databases and DDL files built to cost or to leave files: a SQLite file whose `-wal` lies beside
it without its `-shm`, an empty file, a catalogue of millions of columns, DDL of one huge
statement. Each is refused in one line naming the file, quickly, and nothing is written beside it."""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from model.data import databases, execution
from model.data.databases import DatabaseError, open_database, schema_from_ddl
from model.errors import UsageError


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_wal_without_its_shm_is_refused_and_nothing_is_written_beside_it(tmp_path: Path) -> None:
    """Reading it left a new 32 KB `-shm` beside the database: SQLite writes one to read a `-wal`.
    A `-wal` without its `-shm` means a writer that did not close (or a copy of the two files):
    refused, naming the file and what to do, and the folder is as it was."""
    source = tmp_path / "live" / "shop.sqlite"
    source.parent.mkdir()
    conn = sqlite3.connect(source)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.executescript("CREATE TABLE singer (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO singer VALUES (1, 'a');")
    folder = tmp_path / "copy"
    folder.mkdir()
    shutil.copy(source, folder / "shop.sqlite")
    shutil.copy(f"{source}-wal", folder / "shop.sqlite-wal")  # (the writer still open: its rows only in the -wal)
    conn.close()
    db = folder / "shop.sqlite"
    before = _files(folder)
    problem = execution.sqlite_problem(db)
    assert problem is not None and "shop.sqlite-wal lies beside it without shop.sqlite-shm" in problem
    assert "wal_checkpoint" in problem
    rows, error = execution.execute_sql(db, "SELECT count(*) FROM singer")
    assert rows is None and "without shop.sqlite-shm" in error
    with pytest.raises(DatabaseError, match=r"shop\.sqlite: shop\.sqlite-wal lies beside it without"):
        open_database(db)
    assert _files(folder) == before
    # with its -shm (a database open elsewhere) it is read as before, nothing added
    (folder / "shop.sqlite-shm").write_bytes(b"")
    assert execution.execute_sql(db, "SELECT count(*) FROM singer") == ([(1,)], None)
    assert sorted(_files(folder)) == sorted([*before, "shop.sqlite-shm"])


def test_an_empty_file_is_a_database_of_no_tables_named_so(tmp_path: Path, capsys) -> None:
    """SQLite reads a file of no bytes as a database of no tables (as `sqlite3.connect` leaves
    one): `--sql` said `no table 'singer'` of it; it is `--database ..: no tables`, as a file's
    rows say."""
    from model.scoring.cli import main

    empty = tmp_path / "zero.sqlite"
    empty.write_bytes(b"")
    assert execution.sqlite_problem(empty) is None
    assert main(["--database", str(empty), "--sql", "SELECT name FROM singer"]) == 2
    err = capsys.readouterr().err
    assert f"--database {empty}: no tables (an empty database" in err and err.count("\n") == 1, err
    assert empty.read_bytes() == b""


def _wide(path: Path, tables: int, columns: int) -> Path:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t0 (id INTEGER PRIMARY KEY, " + ", ".join(f"c{i} INT" for i in range(columns)) + ")")
        for t in range(1, tables):
            conn.execute(f"CREATE TABLE t{t} (id INTEGER PRIMARY KEY, "
                         + ", ".join(f"c{i} INT REFERENCES t{t - 1}" for i in range(columns)) + ")")
    return path


def test_a_schema_past_the_caps_is_refused_in_one_line(tmp_path: Path, monkeypatch) -> None:
    """A catalogue of 1,000 tables of 2,000 columns took a minute and 3 GB to read (then to score
    against): past MAX_SCHEMA_COLUMNS columns or MAX_SCHEMA_TABLES tables it is refused as read."""
    db = _wide(tmp_path / "wide.sqlite", 30, 40)
    monkeypatch.setattr(databases, "MAX_SCHEMA_COLUMNS", 500)
    with open_database(db) as opened, pytest.raises(DatabaseError, match=r"wide\.sqlite: its schema has more than 500 columns"):
        opened.schema()
    monkeypatch.setattr(databases, "MAX_SCHEMA_COLUMNS", 200_000)
    monkeypatch.setattr(databases, "MAX_SCHEMA_TABLES", 20)
    with open_database(db) as opened, pytest.raises(DatabaseError, match=r"wide\.sqlite: its schema has 30 tables, more than the 20"):
        opened.schema()
    monkeypatch.setattr(databases, "MAX_SCHEMA_TABLES", 10_000)
    with open_database(db) as opened:
        schema = opened.schema()
    assert len(schema.tables) == 30 and len(schema.tables["t5"]) == 41
    # `REFERENCES t4` (no column): the parent's primary key, read once for all of its 40 columns
    assert ("t5.c0", "t4.id") in schema.foreign_keys and len(schema.foreign_keys) == 29 * 40


def test_a_schema_read_has_one_time_limit_for_all_of_it(tmp_path: Path, monkeypatch) -> None:
    """Each of the ~3,000 catalogue queries had its own time limit: the whole read none. Past
    SCHEMA_READ_S (and the database's own timeout) for all of it, one line names the file."""
    db = _wide(tmp_path / "slow.sqlite", 50, 100)
    monkeypatch.setattr(databases, "SCHEMA_READ_S", 0.0)
    # (its first read, sqlite_problem's, has a minute)
    with open_database(db, timeout_s=1e-6) as opened, \
            pytest.raises(DatabaseError, match=r"slow\.sqlite: its schema was not read within 1e-06 s"):
        opened.schema()


def test_one_huge_ddl_statement_is_refused_before_sqlglot_reads_it(tmp_path: Path) -> None:
    """4 MB of `x x x` (or `* * *`, or comments) in one statement under the 16 MiB cap took
    minutes and GBs to parse: past MAX_STATEMENT_CHARS a statement (with the comments before
    it) is refused in one line naming the file and the line, at once."""
    junk = tmp_path / "junk.sql"
    junk.write_text("CREATE TABLE singer (id INT);\n\nCREATE TABLE t (a INT, " + "x " * 300_000 + ");\n")
    started = time.monotonic()
    with pytest.raises(UsageError, match=r"junk\.sql: line 3: a statement longer than 256 KiB"), junk.open() as f:
        schema_from_ddl(f, "sqlite", source=str(junk))
    assert time.monotonic() - started < 5
    # the `;` in comments and strings does not hide it: measured on sqlglot's statements too
    hidden = "CREATE TABLE t (a INT, " + "/* ; */ x " * 30_000 + ");\n"
    with pytest.raises(UsageError, match=r"DDL: line 1: a statement longer than 256 KiB"):
        schema_from_ddl(hidden, "sqlite")
    # a table of 2,000 columns (about 30 KB) still reads
    wide = "CREATE TABLE w (" + ", ".join(f"column_{i} VARCHAR(20)" for i in range(2000)) + ");"
    assert len(schema_from_ddl(wide, "postgres").tables["w"]) == 2000


def test_a_ddl_file_is_read_within_one_time_limit(monkeypatch) -> None:
    """Each statement was read however long the whole file took: past SCHEMA_READ_S, one line
    names the file and the line where it stopped."""
    monkeypatch.setattr(databases, "SCHEMA_READ_S", 0.0)
    with pytest.raises(UsageError, match=r"dump\.sql: line 2: its DDL was not read within 0 s \(0 statements"):
        schema_from_ddl("\nCREATE TABLE a (x INT);\nCREATE TABLE b (y INT);\n", "postgres", source="dump.sql")


def test_a_replaced_database_files_old_connection_is_closed(tmp_path: Path) -> None:
    """A file replaced while scoring went on (os.replace) is read anew, but each old file's kept
    connection stayed open until eight newer files pushed it out: the deleted files' space held.
    Opening the path again closes what was kept for its old file."""
    db = tmp_path / "shop.sqlite"
    for version in range(3):
        new = tmp_path / f"new{version}.sqlite"
        with sqlite3.connect(new) as conn:
            conn.execute("CREATE TABLE t (v INT)")
            conn.execute("INSERT INTO t VALUES (?)", (version,))
        conn.close()
        os.replace(new, db)
        assert execution.execute_sql(db, "SELECT v FROM t") == ([(version,)], None)
    kept = [k for k in execution._kept() if k[0] == str(db)]
    assert len(kept) == 1, kept
    def target(fd: Path) -> str:
        try:
            return os.readlink(fd)
        except OSError:  # (the listing's own descriptor, closed)
            return ""

    deleted = [t for t in map(target, Path(f"/proc/{os.getpid()}/fd").iterdir()) if str(tmp_path) in t and "(deleted)" in t]
    assert not deleted, deleted
