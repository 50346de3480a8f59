"""The whole-query pipeline end to end on the demo corpus (3 systems with samples)."""

import json

import numpy as np
import pytest

from model.calibration import load_calibrator
from model.wholequery import BaseScores, build_base_scores, default_methods, evaluate_methods, main


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from model.data.datasets import database_path, load_questions, load_schemas
    from model.data.demo import demo_root
    from model.data.predictions import load_predictions

    root = demo_root()
    questions = load_questions(root, "dev")
    preds = [p for f in sorted((root / "predictions").glob("*.jsonl")) for p in load_predictions(f, questions)]
    db_paths = {q.db_id: database_path(root, q.db_id) for q in questions}
    cache = tmp_path_factory.mktemp("exec")
    table = build_base_scores(questions, preds, load_schemas(root), db_paths, exec_cache_dir=cache,
                              progress=False)
    return root, preds, table, cache


def test_base_scores_have_both_sources_and_valid_ranges(demo):
    _, preds, table, _ = demo
    assert len(table) == len(preds) and set(table.system) == {p.system for p in preds}
    for src in ("systems", "samples"):
        assert f"exec_{src}" in table.columns and f"scf_{src}_product" in table.columns
        for name, col in table.columns.items():
            assert np.all((col >= 0) & (col <= 1)), name
    assert 0 < table.label.mean() < 1


def test_agreement_scores_separate_correct_from_wrong(demo):
    _, _, table, _ = demo
    for col in ("exec_samples", "exec_systems", "scf_samples_product"):
        x, y = table.columns[col], table.label
        assert x[y == 1].mean() > x[y == 0].mean(), col


def test_identical_prediction_agrees_with_itself(demo):
    """A prediction whose samples all equal it has every sample sub-clause frequency at 1."""
    _, preds, table, _ = demo
    same = [i for i, p in enumerate(preds) if p.samples and all(s == p.sql for s in p.samples)]
    assert same, "the demo corpus should contain unanimous samples"
    i = same[0]
    assert table.columns["scf_samples_product"][i] == 1.0 and table.columns["exec_samples"][i] == 1.0


def test_protocols_give_metrics_for_every_method(demo):
    _, _, table, _ = demo
    methods = default_methods(list(table.columns))
    names = {m.name for m in methods}
    assert {"exec_agreement_systems", "MPS(SCF samples)", "MPS(SCF systems + exec)"} <= names
    for protocol in ("cv", "split"):
        results = evaluate_methods(table, methods, protocol=protocol, n_folds=3)
        for system, per_method in results.items():
            for name, m in per_method.items():
                assert 0 <= m["brier"][0] <= 1 and m["auc"][0] > 0.5, (system, name, m)


def test_cli_writes_tables_calibrators_and_reads_a_score_file(demo, tmp_path):
    root, preds, table, cache = demo
    rng = np.random.default_rng(0)
    with (tmp_path / "scores.jsonl").open("w") as f:
        for p in preds:
            lp = rng.uniform(-5, -0.1, 8)
            f.write(json.dumps({"system": p.system, "question_id": p.question_id, "sql": p.sql, "n_tokens": 8,
                                "log_prod": lp.sum(), "geo": float(np.exp(lp.mean())),
                                "min": float(np.exp(lp.min())), "avg": float(np.exp(lp).mean())}) + "\n")
    out = tmp_path / "run"
    main(["--data-root", str(root), "--predictions", str(root / "predictions"), "--out", str(out),
          "--scores", str(tmp_path / "scores.jsonl"), "--exec-cache", str(cache), "--folds", "3",
          "--no-progress"])
    text = (out / "tables.md").read_text()
    assert "| prod |" in text and "MPS(log_prod + SCF systems + exec)" in text
    again = BaseScores.read_csv(out / "base_scores.csv")
    np.testing.assert_array_equal(again.label, table.label)
    np.testing.assert_allclose(again.columns["exec_systems"], table.columns["exec_systems"], rtol=1e-5)
    cal = load_calibrator(out / "calibrators" / "demo_strong" / "MPS(SCF_samples).json")
    assert len(cal.feature_names) == 20
    assert json.loads((out / "metrics.json").read_text())["results"]["demo_weak"]["prod"]["auc"][0] > 0
