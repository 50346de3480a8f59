"""The shipped model on the real data it was fitted on: rat-score's interface on a real
prediction file, and the in-sample numbers its training run stored, reproduced by ``Scorer``."""

import json
import subprocess
import sys

import numpy as np
import pytest

from model import metrics as M
from model.data.datasets import database_path, load_schemas
from model.nodes.estimator import data_digest
from model.nodes.examples import build_examples
from model.scoring import RowError, Scorer

pytestmark = [pytest.mark.data, pytest.mark.slow]


def test_rat_score_on_a_real_prediction_file(shared_data, tmp_path):
    predictions = shared_data / "predictions" / "spider_dev" / "gpt4_zero_shot.csv"
    out = tmp_path / "scored.jsonl"
    done = subprocess.run([sys.executable, "-m", "model.scoring.cli", "--model", "pretrained",
                           "--data-root", str(shared_data / "spider"), "--split", "dev",
                           "--predictions", str(predictions), "--out", str(out)],
                          check=False, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) >= 1000 and len({r["question_id"] for r in rows}) == len(rows)
    for row in rows:
        assert 0 <= row["query_confidence"] <= 1 and 0 <= row["look_here_first"] < len(row["nodes"])
        assert all(0 <= n["confidence"] <= 1 and {"label", "site_score"} <= set(n) for n in row["nodes"])
    assert (tmp_path / "report.html").stat().st_size > 100_000


def test_pretrained_model_reproduces_its_in_sample_numbers(shared_data):
    root = shared_data / "spider"
    scorer = Scorer.pretrained()
    info = scorer.saved.info_
    files = sorted((shared_data / "predictions" / "spider_dev").iterdir())
    examples, _ = build_examples(root, "dev", prediction_files=files, require_database=True, verbose=False)
    examples = [e for e in examples if e.execution_match is not None]
    assert data_digest(examples) == info["trained_on"]["digest"]  # the data it was fitted on
    schemas = load_schemas(root)
    results = scorer.score_many([{"sql": e.sql, "question": e.question, "db_id": e.db_id,
                                  "schema": schemas[e.db_id], "database": database_path(root, e.db_id)}
                                 for e in examples], progress=False, spans=False)
    assert not [r for r in results if isinstance(r, RowError)]
    conf = np.concatenate([[n.confidence for n in r.nodes] for r in results])
    labels = np.concatenate([e.node_labels for e in examples])
    stored = info["metrics"]["in_sample"]
    assert M.auc(conf, labels) == pytest.approx(stored["auc"], abs=1e-6)
    assert M.brier(conf, labels) == pytest.approx(stored["brier"], abs=1e-6)


def test_rat_score_on_bird_rows_with_a_schema_alone(shared_data, tmp_path):
    bird = json.loads((shared_data / "bird" / "dev.json").read_text())[:40]
    rows = tmp_path / "bird.jsonl"
    rows.write_text("".join(json.dumps({"question": q["question"], "evidence": q.get("evidence", ""),
                                        "db_id": q["db_id"], "sql": q["SQL"]}) + "\n" for q in bird))
    out = tmp_path / "scored.jsonl"
    done = subprocess.run([sys.executable, "-m", "model.scoring.cli", "--model", "pretrained", "--schema",
                           str(shared_data / "bird" / "dev_tables.json"), "--predictions", str(rows),
                           "--out", str(out), "--no-reasons"], check=False, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(scored) == 40 and all("nodes" in r for r in scored)
    assert [r["question"] for r in scored] == [q["question"] for q in bird]  # evidence read, not echoed


def test_bird_track_trains_cross_fitted_on_tree_labels(shared_data, tmp_path):
    from model.train import train
    from tests.test_boosted import compose_cfg

    metrics, objects = train(compose_cfg("train", [
        "model=features", "logger=none", "data=bird", f"data.root={shared_data / 'bird'}",
        "data.max_questions=500", "data.folds=3", "model.hgb.max_iter=50"], tmp_path))
    examples = objects["table"].examples
    assert len({e.system for e in examples}) == 4 and all(e.execution_match is None for e in examples)
    assert 0 < sum(e.correct for e in examples) < len(examples)
    lines = (tmp_path / "predictions" / "test.jsonl").read_text().splitlines()
    assert len(lines) == len(examples) and 0.6 < metrics["test/auc"] <= 1
