"""Loaders and the execution evaluator on the real public data (../shared/data)."""

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest

from model.data.datasets import database_path, load_questions
from model.data.exec_command import evaluate_file
from model.data.execution import execute_pairs, execute_sql
from model.data.predictions import load_predictions

pytestmark = pytest.mark.data


def manifest(shared_data: Path) -> dict:
    return json.loads((shared_data / "predictions" / "MANIFEST.json").read_text())


def test_spider_questions_and_official_hardness(shared_data: Path) -> None:
    root = shared_data / "spider"
    dev = load_questions(root, "dev")
    assert len(dev) == 1034
    # the breakdown every Spider paper reports for dev
    assert Counter(q.difficulty for q in dev) == {
        "easy": 248,
        "medium": 446,
        "hard": 174,
        "extra": 166,
    }
    assert len(load_questions(root, "train")) == 7000 + 1659
    missing = {q.db_id for q in dev if database_path(root, q.db_id) is None}
    assert missing == {"wta_1"}
    assert sum(q.db_id == "wta_1" for q in dev) == 62


def test_bird_questions(shared_data: Path) -> None:
    dev = load_questions(shared_data / "bird", "dev")
    assert len(dev) == 1534
    assert Counter(q.difficulty for q in dev) == {
        "simple": 925,
        "moderate": 464,
        "challenging": 145,
    }
    assert dev[0].evidence.startswith("Eligible free rate for K-12")
    assert sum(bool(q.evidence) for q in dev) == 1386  # the rest have an empty hint
    assert database_path(shared_data / "bird", dev[0].db_id) is None  # the copy has no databases


def test_every_published_prediction_file_loads(shared_data: Path) -> None:
    for track, entries in manifest(shared_data).items():
        split = track.split("_", 1)[1]  # spider_dev -> dev; spider_train: id-keyed, partial
        questions = load_questions(shared_data / entries[0]["split"].split("/")[0], split)
        for entry in entries:
            skipped: Counter[str] = Counter()
            predictions = load_predictions(shared_data / entry["file"], questions, skipped=skipped,
                                           allow_partial=split == "train")
            assert len(predictions) == entry["rows"], entry["file"]
            assert split == "train" or len(predictions) == len(questions), entry["file"]
            assert not skipped, (entry["file"], skipped)
            assert sum(not p.sql for p in predictions) <= 2, entry["file"]


def file_digests(paths: list[Path]) -> dict[Path, str]:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def test_real_databases_are_never_changed(shared_data: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # where a relative ATTACH would create its file
    root = shared_data / "spider"
    dbs = [database_path(root, db_id) for db_id in ("concert_singer", "pets_1", "car_1")]
    folders = {db.parent: sorted(db.parent.iterdir()) for db in dbs}
    before = file_digests(dbs)
    attacks = [
        "DROP TABLE singer",
        "DELETE FROM Pets",
        "UPDATE cars_data SET mpg = 0",
        "INSERT INTO singer (Singer_ID) VALUES (999)",
        "ATTACH DATABASE 'x.sqlite' AS x",
        "PRAGMA writable_schema = ON",
        "VACUUM INTO 'copy.sqlite'",
        "CREATE TABLE evil (x)",
        "PRAGMA journal_mode = DELETE",
        "VACUUM",
    ]
    outcomes = execute_pairs(
        [(db, sql, "SELECT 1") for db in dbs for sql in attacks], progress=False
    )
    for db in dbs:
        for sql in attacks:
            assert execute_sql(db, sql)[0] is None
    assert set(outcomes) == {"pred_error"}
    assert file_digests(dbs) == before
    assert {folder: sorted(folder.iterdir()) for folder in folders} == folders
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_execution_accuracy_matches_reference(shared_data: Path, tmp_path: Path) -> None:
    """Our accuracy on the 972 dev questions with a database is within 0.5 points of the reference
    (test-suite-sql-eval semantics) for every published system."""
    cache = tmp_path / "cache"  # shared across systems, so the gold queries run once
    for entry in manifest(shared_data)["spider_dev"]:
        report = evaluate_file(
            shared_data / "spider",
            "dev",
            shared_data / entry["file"],
            cache_dir=cache,
            workers=2,
            progress=False,
        )
        assert report["with_database"] == 972
        assert report["outcomes"]["gold_error"] == 0
        ours = 100 * report["execution_accuracy"]
        assert abs(ours - entry["execution_accuracy_reference"]) <= 0.5, (entry["system"], ours)
