"""Regression tests for the memory guard of execution (model/data/execution.py): results are
fetched in chunks and refused past a byte budget, as past the row cap; refusals are failed
queries, never cached, and the budget is a parameter down to the CLI."""

import json
import sqlite3
import sys
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
    real = execution.rows_bytes

    def spy(rows):
        held.append(len(rows))
        return real(rows)

    monkeypatch.setattr(execution, "rows_bytes", spy)
    execute_sql(shop_db, WIDE, max_result_bytes=1 << 20)
    # about 1 MiB of rows (a few hundred bytes each) were fetched, not 64,000
    assert sum(held) < 10_000 and max(held) <= 1_000


def test_the_estimate_is_close_to_the_real_size(shop_db):
    rows, _ = execute_sql(shop_db, "SELECT * FROM item a, item b")
    exact = sum(8 + sys.getsizeof(r) + sum(map(sys.getsizeof, r)) for r in rows)
    assert 0.8 * exact <= execution.rows_bytes(rows) <= 1.2 * exact


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
