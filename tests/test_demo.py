"""The embedded demo corpus: Spider layout, fast deterministic build, every gold runs, realistic
pseudo-system error rates."""

import json
import sqlite3
import time

import pytest

from model.data.datasets import database_path, load_questions, load_schemas
from model.data.execution import execute_pairs
from model.data.predictions import load_predictions
from model.synth import demo

SPIDER_TABLE_FIELDS = {"db_id", "table_names", "table_names_original", "column_names",
                       "column_names_original", "column_types", "primary_keys", "foreign_keys"}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    demo.build_demo(root)  # first build may load MiniLM once for the schema embeddings
    start = time.perf_counter()
    again = demo.build_demo(tmp_path_factory.mktemp("demo_again"))
    return root, again, time.perf_counter() - start


def test_builds_in_seconds(built):
    _, _, seconds = built
    assert seconds < 10, f"demo build took {seconds:.1f} s"


def test_build_is_deterministic(built):
    root, again, _ = built
    for name in ["tables.json", "train.json", "dev.json",
                 *(f"predictions/{s}.jsonl" for s in demo.DEMO_SYSTEMS)]:
        assert (root / name).read_text() == (again / name).read_text(), name


def test_spider_layout(built):
    root, _, _ = built
    tables = json.loads((root / "tables.json").read_text())
    assert len(tables) >= 4  # a schema-disjoint train/val/test split needs several databases
    for entry in tables:
        assert SPIDER_TABLE_FIELDS <= set(entry)
        assert len(entry["column_names"]) == len(entry["column_types"])
        assert entry["foreign_keys"], f"{entry['db_id']} has no foreign keys"
        assert database_path(root, entry["db_id"]) is not None
    for split in ("train", "dev"):
        rows = json.loads((root / f"{split}.json").read_text())
        assert all({"question", "query", "db_id"} <= set(r) for r in rows)
        # every database appears in both splits, so either can be split by db_id
        assert {r["db_id"] for r in rows} == {t["db_id"] for t in tables}
    n = len(load_questions(root, "train")) + len(load_questions(root, "dev"))
    assert 300 <= n <= 600


def test_every_gold_runs_and_returns_rows(built):
    root, _, _ = built
    for split in ("train", "dev"):
        for q in load_questions(root, split):
            with sqlite3.connect(database_path(root, q.db_id)) as conn:
                rows = conn.execute(q.gold_sql).fetchall()
            assert any(v is not None for row in rows for v in row), q.gold_sql


def test_templates_cover_the_sql_constructs(built):
    root, _, _ = built
    text = " ".join(q.gold_sql.upper() for q in load_questions(root, "train")
                    + load_questions(root, "dev"))
    for construct in ("JOIN", "GROUP BY", "HAVING", "ORDER BY", "LIMIT", "NOT IN", "INTERSECT",
                      "EXCEPT", "UNION", "LIKE", "BETWEEN", "DISTINCT", "AVG(", "(SELECT"):
        assert construct in text, construct


def test_predictions_have_samples_and_realistic_error_rates(built):
    root, _, _ = built
    questions = load_questions(root, "dev")
    gold = {q.question_id: q for q in questions}
    rates = {}
    for system in demo.DEMO_SYSTEMS:
        predictions = load_predictions(root / "predictions" / f"{system}.jsonl", questions)
        assert len(predictions) == len(questions)
        assert all(len(p.samples) == demo.SAMPLES_PER_PREDICTION for p in predictions)
        outcomes = execute_pairs([(database_path(root, p.db_id), p.sql,
                                   gold[p.question_id].gold_sql) for p in predictions],
                                 progress=False)
        rates[system] = 1 - outcomes.count("match") / len(outcomes)
    assert all(0.12 <= r <= 0.45 for r in rates.values()), rates
    assert rates["demo_strong"] < rates["demo_weak"], rates


def test_demo_root_caches_and_rebuilds_when_the_builder_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("RAT_CACHE", str(tmp_path))
    root = demo.demo_root()
    assert root == tmp_path / "demo" and load_schemas(root)
    stamp = (root / "dev.json").stat().st_mtime_ns
    assert demo.demo_root() == root and (root / "dev.json").stat().st_mtime_ns == stamp
    monkeypatch.setattr(demo, "_source_digest", lambda: "a-new-builder")
    demo.demo_root()
    assert (root / "VERSION").read_text().strip() == "a-new-builder"
