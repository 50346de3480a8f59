"""Safe execution and test-suite-style comparison (model/data/execution.py)."""

import hashlib
import json
import os
import pickle
import sqlite3
import time
from pathlib import Path

import pytest

from model.data import exec_command, execution
from model.data.execution import execute_many, execute_pairs, execute_sql, results_equal, summarize

FIXTURES = Path(__file__).parent / "fixtures" / "exec"

SINGERS = [
    (1, "Joe", "France", 52),
    (2, "Ann", "Spain", 29),
    (3, "Li", "France", 41),
    (4, "Bo", "Chad", 30),
]


def make_concert_db(path: Path) -> Path:
    """A small Spider-like database: singer, concert, and a 300-row table for runaway joins."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INT)"
        )
        conn.execute(
            "CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, singer_id INT, year TEXT)"
        )
        conn.execute("CREATE TABLE number (n INT)")
        conn.executemany("INSERT INTO singer VALUES (?, ?, ?, ?)", SINGERS)
        conn.executemany(
            "INSERT INTO concert VALUES (?, ?, ?)", [(1, 1, "2014"), (2, 1, "2015"), (3, 3, "2014")]
        )
        conn.executemany("INSERT INTO number VALUES (?)", [(i,) for i in range(300)])
    conn.close()
    return path


@pytest.fixture
def concert_db(tmp_path: Path) -> Path:
    return make_concert_db(tmp_path / "database" / "concert" / "concert.sqlite")


def read_cases(name: str) -> list[dict[str, str]]:
    """Blocks of ``key: value`` lines, each starting with ``# title: ...``."""
    cases: list[dict[str, str]] = []
    for line in (FIXTURES / name).read_text().splitlines():
        if line.startswith("# title:"):
            cases.append({"title": line.removeprefix("# title:").strip()})
        elif cases and ":" in line and not line.startswith("#"):
            key, _, value = line.partition(":")
            cases[-1][key.strip()] = value.strip()
    return cases


def as_rows(text: str) -> list[tuple]:
    return [tuple(row) for row in json.loads(text)]


@pytest.mark.parametrize("case", read_cases("results_equal.txt"), ids=lambda c: c["title"])
def test_results_equal(case: dict[str, str]) -> None:
    got = results_equal(
        as_rows(case["gold"]), as_rows(case["pred"]), json.loads(case["order_matters"])
    )
    assert got is json.loads(case["expected"])


@pytest.mark.parametrize("case", read_cases("outcomes.txt"), ids=lambda c: c["title"])
def test_outcomes(case: dict[str, str], concert_db: Path) -> None:
    outcome = execute_pairs(
        [(concert_db, case["pred"], case["gold"])], timeout_s=0.3, progress=False
    )
    assert outcome == [case["expected"]]


def test_keep_distinct_option(concert_db: Path) -> None:
    pair = (
        concert_db,
        "SELECT count(country) FROM singer",
        "SELECT count(DISTINCT country) FROM singer",
    )
    assert execute_pairs([pair], progress=False, distinct=False) == ["match"]
    assert execute_pairs([pair], progress=False, distinct=True) == ["mismatch"]


def test_no_database_and_summary(concert_db: Path) -> None:
    pairs = [
        (None, "SELECT 1", "SELECT 1"),
        (concert_db, "SELECT 1", "SELECT 1"),
        (concert_db, "x", "SELECT 1"),
    ]
    outcomes = execute_pairs(pairs, progress=False)
    assert outcomes == ["no_database", "match", "pred_error"]
    assert summarize(outcomes) == {
        "match": 1,
        "mismatch": 0,
        "pred_error": 1,
        "timeout": 0,
        "gold_error": 0,
        "no_database": 1,
    }
    with pytest.raises(ValueError, match="unknown outcomes"):
        summarize(["matched"])


def test_execute_sql_returns_rows_or_error(concert_db: Path) -> None:
    rows, error = execute_sql(
        concert_db, "SELECT name FROM singer WHERE country = 'France' ORDER BY name"
    )
    assert (rows, error) == ([("Joe",), ("Li",)], None)
    rows, error = execute_sql(concert_db, "SELEC name")
    assert rows is None and "syntax error" in error


def test_invalid_utf8_text_is_decoded_not_raised(tmp_path: Path) -> None:
    db = tmp_path / "latin.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (name TEXT)")
        conn.execute("INSERT INTO t VALUES (CAST(X'4361666ee9' AS TEXT))")  # "Cafn" + Latin-1 é
    conn.close()
    rows, error = execute_sql(db, "SELECT name FROM t")
    assert error is None and rows == [("Cafn",)]


# ------------------------------------------------------------------------------ read-only walls

WRITES = [
    "DROP TABLE singer",
    "DELETE FROM singer",
    "UPDATE singer SET age = 0",
    "INSERT INTO singer VALUES (9, 'X', 'Y', 1)",
    "CREATE TABLE evil (x)",
    "CREATE TEMP TABLE evil (x)",
    "ALTER TABLE singer ADD COLUMN evil INT",
    "CREATE INDEX evil ON singer(age)",
    "ATTACH DATABASE 'attached.sqlite' AS other",
    "ATTACH DATABASE ':memory:' AS other",
    "VACUUM INTO 'copy.sqlite'",
    "VACUUM",
    "PRAGMA writable_schema = ON",
    "PRAGMA journal_mode = WAL",
    "PRAGMA user_version = 7",
    "REINDEX",
    "SELECT load_extension('evil')",
]


def tree_digest(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (new files show up as new keys)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("sql", WRITES)
def test_writes_cannot_change_any_file(
    sql: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # relative ATTACH/VACUUM INTO targets would land here
    dbs = [make_concert_db(tmp_path / "database" / name / f"{name}.sqlite") for name in ("a", "b")]
    assert all(
        db.stat().st_mode & 0o200 for db in dbs
    )  # writable files: only our walls protect them
    before = tree_digest(tmp_path)

    rows, error = execute_sql(dbs[0], sql)
    outcomes = execute_pairs(
        [(db, sql, "SELECT count(*) FROM singer") for db in dbs], progress=False
    )

    assert rows is None and error
    assert outcomes == ["pred_error", "pred_error"]
    assert tree_digest(tmp_path) == before
    assert execute_sql(dbs[0], "SELECT count(*) FROM singer") == ([(len(SINGERS),)], None)


def test_missing_database_file_is_not_created(tmp_path: Path) -> None:
    ghost = tmp_path / "ghost.sqlite"
    rows, error = execute_sql(ghost, "SELECT 1")
    assert rows is None and "unable to open" in error
    assert not ghost.exists()


# ------------------------------------------------------------------------------------ timeouts

RUNAWAY = [
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
    "SELECT count(*) FROM number a, number b, number c, number d, number e",  # 300^5 rows
]


@pytest.mark.parametrize("sql", RUNAWAY, ids=["recursive_cte", "cross_join"])
def test_timeout_really_fires(sql: str, concert_db: Path) -> None:
    start = time.monotonic()
    rows, error = execute_sql(concert_db, sql, timeout_s=0.5)
    elapsed = time.monotonic() - start
    assert rows is None and error.startswith("timeout")
    assert 0.5 <= elapsed < 2.0

    start = time.monotonic()
    assert execute_pairs([(concert_db, sql, "SELECT 1")], timeout_s=0.5, progress=False) == [
        "timeout"
    ]
    assert time.monotonic() - start < 2.0


@pytest.mark.skipif(execution.sqlite_temp_bytes() is None, reason="no /proc/self/fd")
def test_a_sort_spilling_past_the_temporary_files_budget_stops(concert_db: Path, monkeypatch) -> None:
    """A sort past SQLite's page cache spills to temporary files, bounded before only by the time
    limit (GBs within it): past MAX_TEMP_BYTES the query stops, unfinished (its result unknown)."""
    rows = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 300000) "
    spilling = rows + "SELECT x FROM c ORDER BY randomblob(100) LIMIT 1 OFFSET 299999"
    monkeypatch.setattr(execution, "MAX_TEMP_BYTES", 2 << 20)
    start = time.monotonic()
    result, error = execute_sql(concert_db, spilling, timeout_s=20)
    assert result is None and error == "temporary files past 2 MiB (this process's, on disk)"
    assert execution.unfinished(error) and time.monotonic() - start < 10
    # (as a result past the memory guards: a failed query)
    assert execute_pairs([(concert_db, spilling, "SELECT 1")], timeout_s=20, progress=False) == ["pred_error"]
    assert execute_sql(concert_db, rows + "SELECT count(*) FROM c", timeout_s=20) == ([(300000,)], None)
    assert execution.sqlite_temp_bytes() == 0  # (closed with the query)


def test_timed_out_gold_is_a_gold_error(concert_db: Path) -> None:
    assert execute_pairs([(concert_db, "SELECT 1", RUNAWAY[0])], timeout_s=0.3, progress=False) == [
        "gold_error"
    ]


# ------------------------------------------------------------------------------ wide results


def test_wide_results_do_not_blow_up() -> None:
    # 12 columns that are rotations of one vector: every column holds the same bag of values, so
    # test-suite's candidate pruning keeps all 12! permutations alive.
    width, height = 12, 40
    base = [(r * 7) % 5 for r in range(height)]
    gold = [tuple(base[(r + c) % height] for c in range(width)) for r in range(height)]
    shuffle = [5, 0, 11, 3, 8, 1, 10, 2, 7, 4, 9, 6]
    pred = [tuple(row[c] for c in shuffle) for row in gold]
    row = list(pred[0])
    i, j = next((i, j) for i in range(width) for j in range(width) if row[i] != row[j])
    row[i], row[j] = row[j], row[i]
    broken = [tuple(row), *pred[1:]]  # same cells in every row, but no column permutation fits
    start = time.monotonic()
    assert results_equal(gold, pred, order_matters=False)
    assert results_equal(gold, list(reversed(pred)), order_matters=False)
    assert not results_equal(gold, broken, order_matters=False)
    assert time.monotonic() - start < 1.0


def test_identical_columns_need_no_search() -> None:
    gold = [(i,) * 15 for i in range(50)]
    start = time.monotonic()
    assert results_equal(gold, list(reversed(gold)), order_matters=False)
    assert time.monotonic() - start < 0.5


# --------------------------------------------------------------------------------- disk cache


def test_cache_makes_reruns_skip_execution(concert_db: Path, tmp_path: Path, monkeypatch) -> None:
    pairs = [
        (concert_db, "SELECT name FROM singer", "SELECT name FROM singer ORDER BY age"),
        (concert_db, "SELECT nope", "SELECT 1"),
        (concert_db, RUNAWAY[0], "SELECT 1"),
    ]
    cache = tmp_path / "cache"
    first = execute_pairs(pairs, timeout_s=0.3, cache_dir=cache, progress=False)
    assert first == ["mismatch", "pred_error", "timeout"]

    def refuse(*args):
        raise AssertionError("executed a query that should have come from the cache")

    monkeypatch.setattr(execution, "_run", refuse)
    assert execute_pairs(pairs, timeout_s=0.3, cache_dir=cache, progress=False) == first
    with pytest.raises(AssertionError, match="should have come from the cache"):
        execute_pairs(
            pairs, timeout_s=0.7, cache_dir=cache, progress=False
        )  # timeout is in the key


def test_execute_many_answers_as_execute_sql_and_reads_what_execute_pairs_ran(concert_db: Path, tmp_path: Path,
                                                                             monkeypatch) -> None:
    cache = tmp_path / "cache"
    execute_pairs([(concert_db, "SELECT name FROM singer", "SELECT nope")], cache_dir=cache, progress=False)
    jobs = [(concert_db, "SELECT name FROM singer"), (concert_db, "SELECT nope"), (concert_db, "SELECT name FROM singer")]
    ran = execute_many(jobs, progress=False)
    assert ran == [execute_sql(db, sql) for db, sql in jobs] and ran[1][0] is None and "nope" in ran[1][1]

    def refuse(*args):
        raise AssertionError("executed a query that should have come from the cache")

    monkeypatch.setattr(execution, "_run", refuse)
    assert execute_many(jobs, cache_dir=cache, progress=False) == ran


def test_cache_notices_a_changed_database(concert_db: Path, tmp_path: Path) -> None:
    pair = [(concert_db, "SELECT count(*) FROM singer", "SELECT 4")]
    cache = tmp_path / "cache"
    assert execute_pairs(pair, cache_dir=cache, progress=False) == ["match"]
    with sqlite3.connect(concert_db) as conn:
        conn.execute("DELETE FROM singer WHERE singer_id = 1")
    conn.close()
    assert execute_pairs(pair, cache_dir=cache, progress=False) == ["mismatch"]


def test_cache_notices_a_commit_in_the_wal_file(tmp_path: Path) -> None:
    """A database in WAL mode whose writer is still open: a commit sits in its ``-wal`` file,
    the file itself unchanged."""
    db = tmp_path / "wal.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (x)")
        conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(4)])
    conn.close()
    pair = [(db, "SELECT count(*) FROM t", "SELECT 4")]
    cache = tmp_path / "cache"
    writer = sqlite3.connect(db)
    try:
        writer.execute("SELECT 1").fetchall()  # (opens the -wal file)
        assert execute_pairs(pair, cache_dir=cache, progress=False) == ["match"]
        before = db.stat()
        with writer:
            writer.execute("DELETE FROM t WHERE x = 0")
        assert (db.stat().st_mtime_ns, db.stat().st_size) == (before.st_mtime_ns, before.st_size)
        assert execute_pairs(pair, cache_dir=cache, progress=False) == ["mismatch"]
    finally:
        writer.close()


def test_cache_notices_an_edit_that_restores_the_mtime(concert_db: Path, tmp_path: Path, monkeypatch) -> None:
    pair = [(concert_db, "SELECT count(*) FROM singer", "SELECT 4")]
    cache = tmp_path / "cache"
    assert execute_pairs(pair, cache_dir=cache, progress=False) == ["match"]
    with sqlite3.connect(cache / "execution.sqlite") as conn:  # just written: not remembered
        assert conn.execute("SELECT count(*) FROM db_state").fetchone() == (0,)
    conn.close()
    monkeypatch.setattr(execution, "_RACY_NS", -time.time_ns())  # remembered however recent
    assert execute_pairs(pair, cache_dir=cache, progress=False) == ["match"]
    before = concert_db.stat()
    time.sleep(0.05)
    with sqlite3.connect(concert_db) as conn:
        conn.execute("UPDATE singer SET singer_id = 0 WHERE singer_id = 1")
        conn.execute("DELETE FROM singer WHERE singer_id = 2")
    conn.close()
    os.utime(concert_db, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (concert_db.stat().st_mtime_ns, concert_db.stat().st_size) == (before.st_mtime_ns, before.st_size)
    assert execute_pairs(pair, cache_dir=cache, progress=False) == ["mismatch"]


class _Opens:
    """Unpickled, it opens (creates) a file: what a planted cache entry could do instead."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return open, (str(self.path), "w")


def test_the_cache_file_runs_no_code_and_an_unreadable_entry_is_run_again(concert_db: Path, tmp_path: Path) -> None:
    pairs = [(concert_db, "SELECT name FROM singer", "SELECT name FROM singer"),
             (concert_db, "SELECT age FROM singer", "SELECT age FROM singer WHERE age > 40")]
    cache = tmp_path / "cache"
    assert execute_pairs(pairs, cache_dir=cache, progress=False) == ["match", "mismatch"]
    marker = tmp_path / "code ran"
    planted = [pickle.dumps(_Opens(marker)), "[[1], [1, 2]]", '"rows?"', "[[{}]]", '[[{"bytes": "!"}]]', "[" * 100_000]
    for payload in planted:
        with sqlite3.connect(cache / "execution.sqlite") as conn:
            tables = [t for t, in conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'result%'")]
            for table in tables:
                conn.execute(f"UPDATE {table} SET payload = ?", (payload,))
        conn.close()
        assert execute_pairs(pairs, cache_dir=cache, progress=False) == ["match", "mismatch"], payload[:20]
        assert not marker.exists()


def test_a_cache_of_pickles_is_not_read(concert_db: Path, tmp_path: Path) -> None:
    """A cache written by an older version (pickled results) is a miss: its answers are not used."""
    cache = tmp_path / "cache"
    cache.mkdir()
    sha = hashlib.sha256(concert_db.read_bytes()).hexdigest()
    with sqlite3.connect(cache / "execution.sqlite") as conn:
        conn.execute("CREATE TABLE result (db_sha256 TEXT, sql TEXT, timeout_s REAL, status TEXT, payload BLOB, "
                     "PRIMARY KEY (db_sha256, sql, timeout_s))")
        conn.execute("INSERT INTO result VALUES (?, ?, ?, ?, ?)",
                     (sha, "SELECT 4", execution.DEFAULT_TIMEOUT_S, "ok", pickle.dumps([(5,)])))
    conn.close()
    assert execute_pairs([(concert_db, "SELECT count(*) FROM singer", "SELECT 4")], cache_dir=cache,
                         progress=False) == ["match"]


def test_the_cache_gives_back_every_kind_of_value_as_it_was(concert_db: Path, tmp_path: Path, monkeypatch) -> None:
    sql = ("SELECT x'00ff', 1e999, -1e999, 9223372036854775807, NULL, 'é\U0001F600', 0.1, -0.0, 1.0, 7 "
           "UNION ALL SELECT '', x'', 0, 0.0, 'a', NULL, -1, 2.5e-300, 'b', 3")
    cache = tmp_path / "cache"
    ran = execute_many([(concert_db, sql)], cache_dir=cache, progress=False)
    monkeypatch.setattr(execution, "_run", lambda *args: pytest.fail("not from the cache"))
    again = execute_many([(concert_db, sql)], cache_dir=cache, progress=False)
    assert again == ran and repr(again) == repr(ran)
    assert [list(map(type, row)) for row in again[0][0]] == [list(map(type, row)) for row in ran[0][0]]


def test_no_more_processes_than_queries_to_run(concert_db: Path, monkeypatch) -> None:
    started = []

    class Pool:
        def __init__(self, processes, initializer=None, initargs=()):
            started.append(processes)

        def __enter__(self):
            return self

        def __exit__(self, *_):
            pass

        def imap(self, function, args, chunksize):
            return map(function, args)

    context = type("Context", (), {"Pool": Pool})
    monkeypatch.setattr(execution.multiprocessing, "get_context", lambda method: context)
    pairs = [(concert_db, "SELECT 1", "SELECT 2"), (concert_db, "SELECT 2", "SELECT 1")]
    assert execute_pairs(pairs, workers=100, progress=False) == ["mismatch", "mismatch"]
    assert started == [2]


def test_parallel_workers_agree_with_serial(concert_db: Path) -> None:
    golds = [
        "SELECT name FROM singer ORDER BY age",
        "SELECT count(*) FROM concert",
        "SELECT max(age) FROM singer",
    ]
    preds = [
        "SELECT name FROM singer ORDER BY age DESC",
        "SELECT count(*) FROM concert",
        "SELECT age FROM x",
    ]
    pairs = [(concert_db, p, g) for g in golds for p in preds]
    serial = execute_pairs(pairs, progress=False)
    assert execute_pairs(pairs, workers=2, progress=False) == serial
    assert set(serial) == {"match", "mismatch", "pred_error"}


# ------------------------------------------------------------------------------------------ CLI


@pytest.fixture
def spider_root(tmp_path: Path) -> Path:
    root = tmp_path / "spider"
    make_concert_db(root / "database" / "concert" / "concert.sqlite")
    dev = [
        {
            "db_id": "concert",
            "question": "How many singers?",
            "query": "SELECT count(*) FROM singer",
        },
        {
            "db_id": "concert",
            "question": "Oldest singer?",
            "query": "SELECT name FROM singer ORDER BY age DESC LIMIT 1",
        },
        {
            "db_id": "concert",
            "question": "Countries?",
            "query": "SELECT DISTINCT country FROM singer",
        },
        {"db_id": "lost", "question": "Anything?", "query": "SELECT 1"},
    ]
    (root / "dev.json").write_text(json.dumps(dev))
    return root


def test_cli_json(spider_root: Path, tmp_path: Path, capsys) -> None:
    predictions = tmp_path / "system.txt"
    # Row 3 is the DISTINCT quirk: test-suite drops DISTINCT from the gold, so the gold keeps
    # France twice and the GROUP BY answer no longer matches it.
    predictions.write_text(
        "SELECT count(*) FROM singer;\nselect name from singer order by age desc limit 1\n"
        "SELECT country FROM singer GROUP BY country\nSELECT 1\n"
    )
    code = exec_command.main(
        [
            "--root",
            str(spider_root),
            "--predictions",
            str(predictions),
            "--json",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-progress",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["execution_accuracy"] == pytest.approx(2 / 3)
    assert report["outcomes"]["match"] == 2 and report["outcomes"]["mismatch"] == 1
    assert report["outcomes"]["no_database"] == 1
    assert report["missing_databases"] == ["lost"] and report["unreadable_databases"] == {}


def test_cli_names_a_database_it_cannot_read_and_leaves_its_questions_out(spider_root: Path, tmp_path: Path,
                                                                          capsys) -> None:
    corrupt = spider_root / "database" / "lost" / "lost.sqlite"
    corrupt.parent.mkdir(parents=True)
    corrupt.write_bytes(b"not a database" * 100)
    predictions = tmp_path / "system.txt"
    predictions.write_text("SELECT count(*) FROM singer\nSELECT 1\nSELECT 1\nSELECT 1\n")
    code = exec_command.main(["--root", str(spider_root), "--predictions", str(predictions),
                           "--cache-dir", str(tmp_path / "cache"), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0 and "execution accuracy: 33.3% (1/3)" in out, out
    assert "unreadable database: lost (cannot be read as a SQLite database (DatabaseError: file is not a " \
           "database)); its questions are counted as without a database" in out
    assert corrupt.read_bytes() == b"not a database" * 100


def test_cli_text_and_skipped_rows(spider_root: Path, tmp_path: Path, capsys) -> None:
    predictions = tmp_path / "system.jsonl"
    rows = [
        {"question_id": "dev_0", "db_id": "concert", "sql": "SELECT count(*) FROM singer"},
        {"question_id": "dev_1", "db_id": "other_db", "sql": "SELECT 1"},
        {"question_id": "dev_2", "db_id": "concert", "sql": "SELECT DISTINCT country FROM singer"},
    ]
    predictions.write_text("\n".join(json.dumps(r) for r in rows) + "\n{not json\n")
    code = exec_command.main(
        [
            "--root",
            str(spider_root),
            "--predictions",
            str(predictions),
            "--no-cache",
            "--no-progress",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "execution accuracy: 66.7% (2/3)" in out
    assert "db_id not its question's 1" in out and "not a JSON line 1" in out
    assert "pred_error 1" in out  # the question whose row was skipped


def test_cli_row_count_mismatch_is_reported(spider_root: Path, tmp_path: Path, capsys) -> None:
    predictions = tmp_path / "short.txt"
    predictions.write_text("SELECT 1\n")
    code = exec_command.main(
        ["--root", str(spider_root), "--predictions", str(predictions), "--no-cache"]
    )
    assert code == 2
    assert "1 predictions but 4 questions" in capsys.readouterr().err


def test_open_connections_follow_the_file_and_keep_no_transaction(concert_db: Path, tmp_path: Path) -> None:
    """A thread keeps its read-only connections between queries (model.data.execution._open):
    a database replaced by another file is read afresh, and a statement that opens a
    transaction does not leave it open on a kept connection."""
    from model.data import execution

    assert execute_sql(concert_db, "SELECT count(*) FROM singer") == ([(4,)], None)
    other = make_concert_db(tmp_path / "other.sqlite")
    with sqlite3.connect(other) as conn:
        conn.execute("DELETE FROM singer WHERE singer_id > 1")
    conn.close()
    other.replace(concert_db)
    assert execute_sql(concert_db, "SELECT count(*) FROM singer") == ([(1,)], None)
    assert execute_sql(concert_db, "BEGIN")[1] == "statement returns no result set"
    assert execute_sql(concert_db, "SELECT count(*) FROM singer") == ([(1,)], None)
    kept = execution._CONNECTIONS.open
    assert kept and not any(c.in_transaction for c in kept.values())
    before = concert_db.read_bytes()  # a kept connection refuses writes as a fresh one does
    assert execute_sql(concert_db, "DELETE FROM singer")[1] == "DatabaseError: not authorized"
    assert execute_sql(concert_db, "SELECT count(*) FROM singer") == ([(1,)], None)
    assert concert_db.read_bytes() == before
    for k in range(12):  # at most _OPEN_CONNECTIONS stay open
        execute_sql(make_concert_db(tmp_path / f"db{k}.sqlite"), "SELECT 1")
    assert len(execution._CONNECTIONS.open) == execution._OPEN_CONNECTIONS


@pytest.mark.parametrize("sql", ["SELECT randomblob(1000000000)",
                                 "SELECT length(zeroblob(600000000) || zeroblob(600000000))"])
def test_a_huge_value_is_refused_before_it_exists(sql: str, concert_db: Path) -> None:
    # the value would be 1 GB inside SQLite before any row is fetched; the length limit stops
    # it at once, and the process's peak memory stays far below it
    import subprocess
    import sys

    probe = (
        "import resource, sys, time; from model.data.execution import execute_sql\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "start = time.monotonic()\n"
        f"rows, error = execute_sql(sys.argv[1], {sql!r})\n"
        "grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before\n"
        "print(rows, error, grown // 1024, round(time.monotonic() - start, 2), sep='|')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, str(concert_db)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    rows, error, grown_mb, seconds = done.stdout.strip().split("|")
    assert rows == "None" and "too big" in error, done.stdout
    assert int(grown_mb) < 100 and float(seconds) < 5, done.stdout


def test_the_value_limit_follows_a_smaller_result_budget(concert_db: Path) -> None:
    rows, error = execute_sql(concert_db, "SELECT randomblob(3000000)", max_result_bytes=1 << 20)
    assert rows is None and "too big" in error
    rows, error = execute_sql(concert_db, "SELECT length(randomblob(3000000))")
    assert rows == [(3000000,)] and error is None


def test_deadline_helpers() -> None:
    from model.data.execution import DeadlineExceeded, check_deadline, time_left

    check_deadline(None)
    assert time_left(None, 2.0) == 2.0 and 0 < time_left(time.monotonic() + 1, 5.0) <= 1
    with pytest.raises(DeadlineExceeded, match="features ran past its time limit"):
        time_left(time.monotonic() - 0.01, 5.0, "features")


def test_cancelled_work_stops_at_its_next_check_and_its_running_query_at_once(concert_db: Path) -> None:
    """Another thread cancels this one's work (rat-serve: its client went away): a SQLite query
    running with 60 s left is interrupted, and the next deadline check raises."""
    import threading

    from model.data.execution import DeadlineExceeded, cancellable, check_deadline

    cancel = threading.Event()
    slow = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT max(n) FROM c"
    threading.Timer(0.3, cancel.set).start()
    start = time.monotonic()
    with cancellable(cancel):
        rows, error = execute_sql(concert_db, slow, timeout_s=60)
        assert rows is None and error.startswith("timeout") and time.monotonic() - start < 5
        with pytest.raises(DeadlineExceeded, match="scoring was cancelled"):
            check_deadline(time.monotonic() + 60)
    check_deadline(time.monotonic() + 60)  # outside: the event no longer reaches this thread
    assert execute_sql(concert_db, "SELECT 1")[0] == [(1,)]


@pytest.mark.parametrize("option, value", [("--timeout", "nan"), ("--timeout", "0"), ("--timeout", "-1"),
                                           ("--max-result-mb", "-5"), ("--workers", "0")])
def test_cli_numbers_that_are_not_positive_are_one_line(spider_root: Path, tmp_path: Path, capsys,
                                                        option: str, value: str) -> None:
    predictions = tmp_path / "p.txt"
    predictions.write_text("SELECT 1\n" * 4)
    code = exec_command.main(["--root", str(spider_root), "--predictions", str(predictions), "--no-cache",
                           option, value])
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == f"rat-exec: error: {option} {float(value):g}: must be a positive number"


def test_cli_on_your_own_database_runs_both_queries_there_in_its_dialect(tmp_path: Path, capsys) -> None:
    """rat-exec --database: rows {sql, gold} run on a DuckDB file (a PostgreSQL or MySQL URL
    alike), read-only, in the database's dialect unless a row names its own; a gold that fails is
    outside the accuracy; a row without both strings, and a line that is no JSON, are counted."""
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "singers.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE singer (name TEXT, age INTEGER)")
        conn.execute("INSERT INTO singer VALUES ('Ann', 52), ('bob', 38), ('Cleo', 41), ('Dan', 40)")
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    gold = "SELECT name FROM singer WHERE age > 40"
    rows = [{"sql": gold, "gold": gold}, {"sql": "SELECT name FROM singer WHERE age >= 41", "gold": gold},
            {"sql": "SELECT name FROM singer WHERE name LIKE 'b%'", "gold": "SELECT 'bob'"},
            # DuckDB's LIKE tells case apart; read as SQLite's it runs as ILIKE and finds 'bob'
            {"sql": "SELECT name FROM singer WHERE name LIKE 'B%'", "gold": "SELECT 'bob'"},
            {"sql": "SELECT name FROM singer WHERE name LIKE 'B%'", "gold": "SELECT 'bob'", "dialect": "sqlite"},
            {"sql": "SELECT name FROM singer", "gold": "SELECT nickname FROM singer"}, {"sql": "SELECT 1"},
            {"sql": "DELETE FROM singer", "gold": gold}, {"sql": gold, "gold": gold, "dialect": "oracle"},
            # run as written: DISTINCT kept (test-suite's removal would break DISTINCT ON)
            {"sql": "SELECT DISTINCT ON (age > 40) name FROM singer ORDER BY age > 40, name",
             "gold": "SELECT min(name) FROM singer GROUP BY age > 40"}]
    predictions = tmp_path / "pairs.jsonl"
    predictions.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{not json\n")
    code = exec_command.main(["--database", str(path), "--predictions", str(predictions), "--json", "--no-progress"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["questions"] == 8 and report["with_database"] == 7
    assert report["outcomes"]["match"] == 5 and report["outcomes"]["mismatch"] == 1
    assert report["outcomes"]["pred_error"] == 1  # the DELETE: refused, never sent
    assert report["outcomes"]["gold_error"] == 1 and report["execution_accuracy"] == pytest.approx(5 / 7)
    assert report["skipped_rows"] == {"not a JSON line": 1, "no sql or gold string": 1, "unknown dialect": 1}
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert exec_command.main(["--database", str(tmp_path / "none.duckdb"), "--predictions", str(predictions)]) == 2
    assert "none.duckdb: no such database file" in capsys.readouterr().err
    assert exec_command.main(["--database", str(path), "--predictions", str(predictions), "--distinct"]) == 2
    assert "--distinct is for --root" in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--workers", "100000"], "rat-exec: error: --workers 100000: at most "),
    (["--dialect", "postgres"], "rat-exec: error: --dialect is for --database"),
])
def test_cli_option_mistakes_are_one_line(spider_root: Path, tmp_path: Path, capsys, extra, message) -> None:
    predictions = tmp_path / "p.txt"
    predictions.write_text("SELECT 1\n" * 4)
    code = exec_command.main(["--root", str(spider_root), "--predictions", str(predictions), "--no-cache",
                              "--no-progress", *extra])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith(message), err


def test_cli_input_mistakes_are_one_line_naming_the_input(spider_root: Path, tmp_path: Path, capsys) -> None:
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"sql": "SELECT 1", "gold": "SELECT 1"}) + "\n")
    noise = tmp_path / "noise.bin"
    noise.write_bytes(bytes(range(256)) * 64)
    folder = tmp_path / "folder.txt"
    folder.mkdir()
    cases = [(["--database", str(noise), "--predictions", str(pairs)], str(noise)),
             (["--database", str(pairs), "--predictions", str(pairs)], str(pairs)),
             (["--database", "", "--predictions", str(pairs)], "--database"),
             (["--root", str(spider_root), "--predictions", str(folder)], str(folder)),
             (["--database", str(noise), "--predictions", str(folder)], str(folder))]
    for args, named in cases:
        start = time.monotonic()
        code = exec_command.main([*args, "--no-cache", "--no-progress"])
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1, (args, err)
        assert named in err and "Errno" not in err and "None" not in err, (args, err)
        assert time.monotonic() - start < 5, args


def test_an_open_database_counts_a_result_too_large_as_a_failed_query_as_a_file_does(tmp_path: Path) -> None:
    """database_outcome (rat-exec --database) and execute_pairs (rat-exec --root) count alike: a
    result past the memory guards is pred_error, running out of time a timeout (it counted both
    as timeouts)."""
    from model.data.databases import open_database

    path = tmp_path / "t.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (a TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [("x" * 1000,)] * 200)
    big, gold = "SELECT a FROM t", "SELECT count(*) FROM t"
    slow = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT max(n) FROM c"
    with open_database(path, max_result_bytes=50_000, timeout_s=0.5) as db:
        outcomes = [execution.database_outcome(db, sql, gold) for sql in (big, slow)]
    files = execute_pairs([(path, big, gold), (path, slow, gold)], timeout_s=0.5, max_result_bytes=50_000)
    assert outcomes == files == ["pred_error", "timeout"]


def test_cli_on_your_own_database_reads_sqlite_double_quoted_strings_as_sqlite_does(tmp_path: Path, capsys) -> None:
    """A row in SQLite's dialect (Spider's gold) keeps SQLite's meaning on another backend: its
    `"Europe"` is the string SQLite reads (the database's schema says it names no column)."""
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "world.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE country (name TEXT, continent TEXT)")
        conn.execute("INSERT INTO country VALUES ('France', 'Europe'), ('Peru', 'South America')")
    gold = 'SELECT name FROM country WHERE continent = "Europe"'
    predictions = tmp_path / "pairs.jsonl"
    predictions.write_text(json.dumps({"sql": "SELECT 'France'", "gold": gold, "dialect": "sqlite"}) + "\n")
    code = exec_command.main(["--database", str(path), "--predictions", str(predictions), "--json", "--no-progress"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["outcomes"]["match"] == 1, report


def test_a_prediction_that_does_not_parse_is_a_wrong_prediction_on_an_open_database(tmp_path: Path) -> None:
    """rat-exec --database counted a prediction of another dialect that sqlglot cannot read as
    no_database (left out of the accuracy); one that parses but cannot be written stays so."""
    from model.data.databases import open_database

    path = make_concert_db(tmp_path / "c.sqlite")
    gold = "SELECT name FROM singer"
    with open_database(path) as db:
        assert execution.database_outcome(db, "SELECT name FROM singer WHERE (", gold, "postgres") == "pred_error"
        assert execution.database_outcome(db, "SELECT 1; SELECT 2", gold, "postgres") == "pred_error"
        assert execution.database_outcome(db, "SELECT * EXCLUDE (age) FROM singer", gold, "duckdb") == "no_database"


def test_nan_equals_nan_in_results() -> None:
    """PostgreSQL and DuckDB return NaN; a prediction's NaN where the gold has NaN was a mismatch."""
    nan = float("nan")
    assert results_equal([(nan, 1), (2.0, 3)], [(float("nan"), 1), (2.0, 3)], order_matters=True)
    assert results_equal([(1, nan)], [(float("nan"), 1)], order_matters=False)  # columns swapped
    assert execution._outcome(("ok", [(nan,)]), ("ok", [(float("nan"),)]), False) == "match"
    assert not results_equal([(nan,)], [(1.0,)], order_matters=False)


def test_a_locking_read_on_mysql_loses_its_lock_and_nothing_else() -> None:
    """The lock was taken off by writing the query again through sqlglot, which writes MySQL's
    REGEXP as REGEXP_LIKE (a function MariaDB has not): now cut out of the text."""
    sql = "SELECT name FROM singer WHERE name REGEXP '^A' /* for update */ FOR UPDATE SKIP LOCKED"
    assert execution.runnable_sql(sql, "mysql", "mysql") == "SELECT name FROM singer WHERE name REGEXP '^A' /* for update */"
    quoted = "SELECT 'for update' FROM singer"
    assert execution.runnable_sql(quoted, "mysql", "mysql") == quoted


def test_a_lock_after_a_backslash_escaped_quote_is_cut_as_mysql_reads_the_string() -> None:
    """MySQL reads ``\\'`` in a string as a quote: the text was cut inside the string ``'it\\'s
    FOR UPDATE'`` and the real lock kept (MariaDB: "Cannot execute statement in a READ ONLY
    transaction"). PostgreSQL's plain string has no escapes: ``'a\\'`` ends there."""
    for sql in [r"SELECT name FROM singer WHERE name = 'it\'s FOR UPDATE' FOR UPDATE",
                r"SELECT name FROM singer WHERE name = 'it\'s' FOR UPDATE"]:
        assert execution.unlocked_sql(sql, "mysql") == sql.removesuffix(" FOR UPDATE")
    sql = r"SELECT name FROM singer WHERE name = 'a\' FOR UPDATE"
    assert execution.unlocked_sql(sql, "postgres") == sql.removesuffix(" FOR UPDATE")


@pytest.mark.parametrize("sql, written", [
    # MySQL on Linux tells the case of table names and aliases apart; SQLite does not
    ("SELECT T1.Name FROM SINGER AS T1 JOIN Concert AS t2 ON T1.Singer_ID = t2.singer_id",
     "SELECT t1.name FROM singer AS t1 JOIN concert AS t2 ON t1.singer_id = t2.singer_id"),
    # MySQL requires an alias of a subquery in FROM
    ("SELECT count(*) FROM (SELECT name FROM singer INTERSECT SELECT name FROM singer)",
     "SELECT COUNT(*) FROM (SELECT name FROM singer INTERSECT SELECT name FROM singer) AS _from_1"),
    # SQLite's quotient of two integers is an integer; a compared subquery's first row
    ("SELECT count(*) / 3, age / 2, age * 1.0 / 2 FROM singer WHERE age > (SELECT age FROM singer)",
     "SELECT COUNT(*) DIV 3, age DIV 2, age * 1.0 / 2 FROM singer WHERE age > (SELECT age FROM singer LIMIT 1)"),
    # SQLite's = on text tells case apart, MySQL's collation does not; NOCASE is no MySQL collation
    ('SELECT name FROM singer WHERE country = "France" OR name = \'joe\' COLLATE NOCASE',
     "SELECT name FROM singer WHERE CAST(country AS BINARY) = 'France' OR LOWER(name) = LOWER('joe')"),
])
def test_sqlite_sql_is_written_for_mysql_as_sqlite_means_it(sql, written) -> None:
    """SQLite's habits were written for PostgreSQL and DuckDB alone: on MySQL Spider's gold failed
    (`FROM CONTINENTS`, a FROM subquery without an alias: 156 of car_1's 184 pairs gold_error)."""
    import rat

    schema = rat.Schema({"singer": ["singer_id", "name", "country", "age"], "concert": ["concert_id", "singer_id"]},
                        column_types={"singer.singer_id": "bigint(20)", "singer.name": "longtext",
                                      "singer.country": "longtext", "singer.age": "bigint(20)",
                                      "concert.singer_id": "bigint(20)"})
    assert execution.runnable_sql(sql, "sqlite", "mysql", schema) == written


def test_a_table_the_database_spells_otherwise_and_a_function_mysql_lacks_are_said() -> None:
    """A table name as the database spells it (``table_names``); SQLite's typeof(), total(),
    GLOB.. are not sent to MySQL to fail there with its own error: the reason names them."""
    sql = "SELECT T1.name FROM Singer AS T1 WHERE singer.age > 1"
    assert execution.runnable_sql(sql, "sqlite", "mysql", None, {"singer": "Singer"}) == \
        "SELECT t1.name FROM `Singer` AS t1 WHERE `Singer`.age > 1"
    for sql, named in [("SELECT typeof(age) FROM singer", "typeof()"), ("SELECT total(age) FROM singer", "total()"),
                       ("SELECT name FROM singer WHERE name GLOB 'J*'", "GLOB")]:
        assert execution.runnable_sql(sql, "sqlite", "mysql") is None
        assert execution.not_written("sqlite", "mysql", sql) == \
            f"not in the database's SQL: {named} is not in mysql's SQL (SQLite's {'operator' if named == 'GLOB' else 'function'})"


@pytest.mark.parametrize("dialect", ["postgres", "mysql"])
def test_a_cte_or_alias_named_as_a_table_is_not_spelled_as_the_table(dialect) -> None:
    """A CTE where it is in scope, or a subquery's alias, named as a table the database spells
    otherwise kept its name: ``FROM "Makers"`` read the table's rows where SQLite reads the CTE's
    (silently wrong), ``"Makers".id`` of the alias ``makers`` failed; the table itself, outside
    the CTE's scope, is still spelled as the database spells it."""
    names = {"makers": "Makers"}
    quote = '"' if dialect == "postgres" else "`"
    for sql in ["WITH makers AS (SELECT 99 AS id) SELECT makers.id FROM makers",
                "SELECT makers.id FROM (SELECT 7 AS id) AS makers"]:
        assert execution.runnable_sql(sql, "sqlite", dialect, None, names) == sql
    assert execution.runnable_sql("SELECT id FROM Makers WHERE id IN (WITH makers AS (SELECT 1 AS id) "
                                  "SELECT id FROM makers)", "sqlite", dialect, None, names) == \
        f"SELECT id FROM {quote}Makers{quote} WHERE id IN (WITH makers AS (SELECT 1 AS id) SELECT id FROM makers)"


def test_a_deeply_nested_query_is_written_on_a_deep_stack_and_one_past_it_is_a_reason(concert_db: Path) -> None:
    """sqlglot recurses about 20 frames a level of parentheses: 60 levels of another dialect's
    query ran out of the default stack (a RecursionError out of rat-score, rat-serve's 500, the
    batch's other rows lost); they are written on rat's deep stack, and a query deeper than that
    too is one that cannot be written, said so."""
    from model.scoring.scorer import Scorer

    nested = "SELECT " + "(" * 60 + "age" + ")" * 60 + " FROM singer WHERE name = 'Joe'"
    written = execution.runnable_sql(nested, "postgres", "sqlite")
    assert written is not None and written.count("(") == 60
    assert execution.unlocked_sql(nested + " FOR UPDATE", "mysql") == nested
    assert not execution._unparsable(nested, "postgres")
    endless = "SELECT " + "(" * 5000 + "1" + ")" * 5000
    assert execution.runnable_sql(endless, "postgres", "sqlite") is None
    assert execution.not_written("postgres", "sqlite", endless).endswith("nested too deeply to be written for the database")
    results = Scorer.pretrained().score_many([{"sql": nested, "dialect": "postgres", "database": concert_db},
                                              {"sql": "SELECT name FROM singer", "database": concert_db}], progress=False)
    assert [type(r).__name__ for r in results] == ["ScoredQuery", "ScoredQuery"] and results[0].with_database
