"""Regression tests for the memory guard of execution (model/data/execution.py): results are
read row by row and refused past a byte budget, as past the row cap; refusals are failed
queries, never cached, and the budget is a parameter down to the CLI."""

import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from model.data import exec_command, execution
from model.data.execution import execute_pairs, execute_sql

WIDE = "SELECT * FROM item a, item b, item c"  # 40^3 = 64,000 rows of 9 columns


@pytest.fixture
def shop_db(tmp_path: Path) -> Path:
    path = tmp_path / "database" / "shop" / "shop.sqlite"
    path.parent.mkdir(parents=True)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT, price REAL)")
        conn.executemany("INSERT INTO item VALUES (?, ?, ?)",
                         [(i, f"item number {i}", i * 1.5) for i in range(40)])
    conn.close()
    return path


def test_result_past_the_byte_budget_is_refused(shop_db):
    rows, error = execute_sql(shop_db, WIDE, max_result_bytes=1 << 20)
    assert rows is None and error.startswith("result larger than 1 MiB")
    rows, error = execute_sql(shop_db, WIDE, max_result_bytes=1 << 30)
    assert error is None and len(rows) == 40**3


def test_the_byte_budget_bounds_the_rows_held(shop_db, monkeypatch):
    held = []
    real = execution.result_guard

    def spy(max_rows, max_bytes):
        guard = real(max_rows, max_bytes)

        def counted(cursor, row):
            held.append(row)
            return guard(cursor, row)
        return counted

    monkeypatch.setattr(execution, "result_guard", spy)
    execute_sql(shop_db, WIDE, max_result_bytes=1 << 20)
    # about 1 MiB of rows (a few hundred bytes each) were read, not 64,000
    assert 1_000 < len(held) < 10_000


def test_the_budget_is_the_exact_size_of_the_rows(shop_db):
    rows, _ = execute_sql(shop_db, "SELECT * FROM item a, item b")
    exact = sum(8 + sys.getsizeof(r) + sum(map(sys.getsizeof, r)) for r in rows)
    assert execute_sql(shop_db, "SELECT * FROM item a, item b", max_result_bytes=exact) == (rows, None)
    _, error = execute_sql(shop_db, "SELECT * FROM item a, item b", max_result_bytes=exact - 1)
    assert error.startswith("result larger than") and f"after {len(rows)} rows" in error


def test_a_query_of_huge_values_holds_about_its_budget(shop_db):
    """300 values of 1 MB, a budget of 8 MiB: reading stops one row past it, rather than after a
    first chunk of hundreds of such rows (256 MB)."""
    script = textwrap.dedent(f"""
        import resource, sys
        from model.data.execution import execute_sql
        huge = ("WITH RECURSIVE c(i, x) AS (SELECT 1, zeroblob(1000000) UNION ALL "
                "SELECT i + 1, zeroblob(1000000) FROM c WHERE i < 300) SELECT x FROM c")
        execute_sql({str(shop_db)!r}, "SELECT 1")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        rows, error = execute_sql({str(shop_db)!r}, huge, max_result_bytes=8 << 20)
        assert rows is None and error.startswith("result larger than 8 MiB"), error
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
    """)
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parents[1])
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 40 << 20  # the budget, one row, SQLite's own copy: not 256 MB


def test_a_printf_repeating_a_character_past_the_value_limit_is_refused(shop_db):
    """SQLite's `%.*c` loop runs on after the length limit refuses its value (about 20 s a
    conversion, inside one call: no time limit stops it); other printf / format calls are SQLite's."""
    sql = "SELECT printf('%.*c%.*c', 2147483647, 'x', 2147483647, 'y'), count(*) FROM item"
    rows, error = execute_sql(shop_db, sql, timeout_s=2)
    assert rows is None and error == "OperationalError: printf: a %c repeated more than 67108864 times"
    assert execute_sql(shop_db, "SELECT printf('%5.2f|%.*c|%s', 3.14159, 3, 'x', NULL), format('%d%%', 7)") == \
        ([(" 3.14|xxx|", "7%")], None)


def test_row_cap_still_applies(shop_db):
    rows, error = execute_sql(shop_db, WIDE, max_rows=1_000)
    assert rows is None and error == "result has more than 1000 rows"


def test_a_refused_result_is_a_failed_query_and_is_not_cached(shop_db, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    pairs = [(shop_db, WIDE, "SELECT 1"), (shop_db, "SELECT 1", WIDE)]
    small = {"timeout_s": 5, "cache_dir": cache, "progress": False, "max_result_bytes": 1 << 20}
    assert execute_pairs(pairs, **small) == ["pred_error", "gold_error"]
    # A larger budget re-runs the query rather than reusing the refusal ...
    large = {**small, "max_result_bytes": 1 << 30}
    assert execute_pairs([(shop_db, WIDE, WIDE)], **large) == ["match"]
    # ... and results within budget come from the cache as before.
    monkeypatch.setattr(execution, "_run", lambda *args: pytest.fail("not from the cache"))
    assert execute_pairs([(shop_db, "SELECT 1", "SELECT 1")], **small) == ["match"]


def test_parallel_workers_apply_the_budget(shop_db):
    pairs = [(shop_db, WIDE, "SELECT 1"), (shop_db, "SELECT 1", "SELECT 1")]
    assert execute_pairs(pairs, workers=2, progress=False, max_result_bytes=1 << 20) == [
        "pred_error", "match"]


def test_cli_budget_option(shop_db, tmp_path, capsys):
    root = shop_db.parents[2]
    (root / "dev.json").write_text(json.dumps(
        [{"db_id": "shop", "question": "q", "query": "SELECT count(*) FROM item"}]))
    predictions = tmp_path / "p.txt"
    predictions.write_text(WIDE + "\n")
    args = ["--root", str(root), "--predictions", str(predictions), "--no-cache",
            "--no-progress", "--json"]
    assert exec_command.main([*args, "--max-result-mb", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["outcomes"]["pred_error"] == 1
    assert exec_command.main(args) == 0
    assert json.loads(capsys.readouterr().out)["outcomes"]["mismatch"] == 1
