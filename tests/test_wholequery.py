"""The whole-query pipeline end to end on the demo corpus (3 systems with samples)."""

import json

import numpy as np
import pytest

from model.calibrators import load_calibrator
from model.wholequery import (
    NODE_COLUMNS,
    BaseScores,
    add_node_confidences,
    build_base_scores,
    default_methods,
    evaluate_methods,
    node_confidences_from_checkpoint,
    read_node_confidences,
    sources,
)
from model.wholequery.__main__ import main


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from model.data.datasets import database_path, load_questions, load_schemas
    from model.data.predictions import load_predictions
    from model.synth.demo import demo_root

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
    first, out = tmp_path / "first", tmp_path / "run"
    main(["--data-root", str(root), "--predictions", str(root / "predictions"), "--out", str(first),
          "--exec-cache", str(cache), "--folds", "3", "--no-progress"])
    assert "| prod |" not in (first / "tables.md").read_text()
    # Scores made elsewhere join the saved table without recomputing execution and SCF.
    main(["--base-scores", str(first / "base_scores.csv"), "--scores", str(tmp_path / "scores.jsonl"),
          "--out", str(out), "--folds", "3"])
    text = (out / "tables.md").read_text()
    assert "| prod |" in text and "MPS(log_prod + SCF systems + exec)" in text
    again = BaseScores.read_csv(out / "base_scores.csv")
    np.testing.assert_array_equal(again.label, table.label)
    np.testing.assert_allclose(again.columns["exec_systems"], table.columns["exec_systems"], rtol=1e-5)
    cal = load_calibrator(out / "calibrators" / "demo_strong" / "MPS(SCF_samples).json")
    assert len(cal.feature_names) == 20
    assert json.loads((out / "metrics.json").read_text())["results"]["demo_weak"]["prod"]["auc"][0] > 0


def test_additional_output_source_gold_agreement_is_the_label(demo):
    """A source whose only output is the gold SQL: execution agreement with it is the label."""
    from model.data.datasets import database_path, load_questions, load_schemas

    root, preds, table, cache = demo
    questions = load_questions(root, "dev")
    gold = {"lm_gold": {q.question_id: [q.gold_sql] for q in questions}}
    db_paths = {q.db_id: database_path(root, q.db_id) for q in questions}
    with_gold = build_base_scores(questions, preds, load_schemas(root), db_paths, exec_cache_dir=cache,
                                  progress=False, additional_outputs=gold)
    np.testing.assert_array_equal(with_gold.columns["exec_lm_gold"], table.label)
    np.testing.assert_array_equal(with_gold.columns["scf_samples_product"], table.columns["scf_samples_product"])
    assert with_gold.columns["scf_lm_gold_product"][table.label == 1].mean() > \
        with_gold.columns["scf_lm_gold_product"][table.label == 0].mean()
    names = {m.name for m in default_methods(list(with_gold.columns))}
    assert {"exec_agreement_lm_gold", "MPS(SCF lm_gold + exec)"} <= names
    assert sources(list(with_gold.columns)) == ["systems", "samples", "lm_gold"]
    with pytest.raises(ValueError, match="reserved"):
        build_base_scores(questions, preds[:1], load_schemas(root), db_paths, exec_cache_dir=cache,
                          progress=False, additional_outputs={"samples": {}})


def _node_rows(table, every=2):
    """Synthetic node-model predictions for every other row: informative but noisy confidences."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(0, len(table), every):
        n_nodes = int(rng.integers(2, 7))
        conf = rng.uniform(0.6, 1.0, n_nodes)
        conf[-1] = np.clip(0.3 + 0.5 * table.label[i] + rng.normal(0, 0.2), 0.01, 0.99)  # the root
        rows.append({"question_id": str(table.question_id[i]), "system": str(table.system[i]),
                     "db_id": str(table.db_id[i]), "node_confidences": [round(float(c), 6) for c in conf]})
    rows.append({"question_id": "dev_0", "system": "perturb:column", "node_confidences": [0.5]})  # not in table
    return rows


def test_node_confidences_join_on_covered_rows(demo):
    _, _, table, _ = demo
    rows = _node_rows(table)
    node = {(r["system"], r["question_id"]): r["node_confidences"] for r in rows}
    joined = add_node_confidences(table, node)
    assert len(joined) == len(rows) - 1 and set(NODE_COLUMNS) <= set(joined.columns)
    for i in range(len(joined)):
        conf = node[joined.system[i], joined.question_id[i]]
        assert joined.columns["node_root"][i] == conf[-1] and joined.columns["node_min"][i] == min(conf)
    original = {(s, q): y for s, q, y in zip(table.system, table.question_id, table.label)}
    assert [original[s, q] for s, q in zip(joined.system, joined.question_id)] == joined.label.tolist()
    with pytest.raises(ValueError, match="no node confidences"):
        add_node_confidences(table, {("nobody", "dev_0"): [0.5]})


def test_cli_adds_node_confidences_from_a_predictions_file(demo, tmp_path):
    _, _, table, _ = demo
    path = tmp_path / "test.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _node_rows(table)))
    assert read_node_confidences(path)[str(table.system[0]), str(table.question_id[0])]
    table.write_csv(tmp_path / "base.csv")
    out = tmp_path / "run"
    main(["--base-scores", str(tmp_path / "base.csv"), "--node-predictions", str(path), "--out", str(out),
          "--folds", "3"])
    text = (out / "tables.md").read_text()
    assert "| node_root |" in text and "| MPS(node + SCF systems + exec) |" in text
    assert len(BaseScores.read_csv(out / "base_scores.csv")) == (len(table) + 1) // 2
    results = json.loads((out / "metrics.json").read_text())["results"]
    assert all(results[s]["node_root"]["auc"][0] > 0.7 for s in results)  # the planted root signal


def test_node_confidences_from_a_checkpoint_skip_unreadable_queries(demo, monkeypatch):
    import rat
    from model.nodes import infer

    root, preds, _, _ = demo

    class FakeScorer:  # stands in for a trained checkpoint: confidence 1/(position + 1)
        def __init__(self, checkpoint, device=None):
            assert checkpoint == "run_dir"

        def score(self, schema, question, sql, db_id=""):
            if "join" in sql.lower():
                raise rat.RATError("unsupported in this fake")
            nodes = rat.to_tree(sql, schema).postorder()
            return [infer.NodeScore(i, n.label, "", 0, (), 1 / (i + 1)) for i, n in enumerate(nodes)]

    from model.data.datasets import load_questions, load_schemas

    monkeypatch.setattr(infer, "NeuralCheckpoint", FakeScorer)
    some = preds[:20]
    out = node_confidences_from_checkpoint("run_dir", load_questions(root, "dev"), some, load_schemas(root),
                                           progress=False)
    readable = [p for p in some if "join" not in p.sql.lower()]
    assert set(out) == {(p.system, p.question_id) for p in readable} and readable
    assert all(c[0] == 1.0 and c[-1] == 1 / len(c) for c in out.values())


def test_cli_lm_samples_flag_wires_the_lm_source(demo, tmp_path, monkeypatch):
    """--lm-samples: the scorer LM is loaded, its samples become source lm_<mode> (here a fake
    LM that "samples" the gold SQL, so the source's execution agreement is the label)."""
    import model.wholequery.__main__ as cli
    from model import lm

    class FakeLM:
        def to(self, device):
            return self

        def eval(self):
            return self

    root, _, table, cache = demo
    monkeypatch.setattr(lm, "load_causal_lm", lambda *a, **k: (FakeLM(), None))

    def fake_generate(model, tokenizer, questions, schemas, modes, n, progress, **options):
        assert options["top_p"] == 0.8 and n == 2
        return {f"lm_{m}": {q.question_id: [q.gold_sql] * n for q in questions} for m in modes}

    monkeypatch.setattr(cli, "generate_lm_samples", fake_generate)
    out = tmp_path / "run"
    main(["--data-root", str(root), "--predictions", str(root / "predictions"), "--out", str(out),
          "--exec-cache", str(cache), "--folds", "3", "--no-progress", "--lm-samples", "beam",
          "--lm-n", "2", "--lm-top-p", "0.8", "--device", "cpu"])
    again = BaseScores.read_csv(out / "base_scores.csv")
    np.testing.assert_array_equal(again.columns["exec_lm_beam"], table.label)
    assert "MPS(SCF lm_beam + exec)" in (out / "tables.md").read_text()
    rows = [json.loads(line) for line in (out / "lm_samples.jsonl").read_text().splitlines()]
    assert {r["source"] for r in rows} == {"lm_beam"} and all(len(r["samples"]) == 2 for r in rows)


def test_base_scores_csv_runs_no_formula_and_reads_back_the_same(tmp_path):
    import csv

    from model.wholequery.base_scores import BaseScores

    names = np.array(['=HYPERLINK("http://evil","x")', "@SUM(1+1)", "-2+3", "'quoted", "plain"])
    scores = BaseScores(names, np.array(["q1", "q2", "+q3", "q4", "q5"]), np.array(["d"] * 5),
                        np.array([1, 0, 1, 0, 1]), {"geo": np.array([0.1, 0.2, 0.3, 0.4, 0.5])})
    scores.write_csv(tmp_path / "b.csv")
    with (tmp_path / "b.csv").open() as f:
        cells = [row[:3] for row in list(csv.reader(f))[1:]]
    assert all(cell[:1] not in "=+-@" for row in cells for cell in row)  # no cell a spreadsheet would run
    back = BaseScores.read_csv(tmp_path / "b.csv")
    assert list(back.system) == list(names) and list(back.question_id) == ["q1", "q2", "+q3", "q4", "q5"]


def test_scores_of_other_predictions_are_one_line_naming_what_is_missing(tmp_path, capsys):
    """python -m model.wholequery --base-scores T --scores S, S scored on part of T's predictions
    (--limit): one line, exit 2 (it was a traceback)."""
    from model.wholequery.base_scores import BaseScores

    BaseScores(np.array(["s", "s"]), np.array(["q1", "q2"]), np.array(["d", "d"]), np.array([1, 0]),
               {"exec_ok": np.array([1.0, 1.0])}).write_csv(tmp_path / "b.csv")
    (tmp_path / "scores.jsonl").write_text("")
    with pytest.raises(SystemExit) as exit_:
        main(["--base-scores", str(tmp_path / "b.csv"), "--scores", str(tmp_path / "scores.jsonl"),
              "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith("python -m model.wholequery: error: the token-probability scores lack 2 of 2"), err


def test_a_fold_or_a_system_whose_queries_are_all_right_says_its_rate_and_stops_nothing():
    """Calibrators refuse labels of one class: a fold of a system whose queries were all right
    stopped the whole evaluation. Such a fold's calibrated methods say its rate; such a system
    gets no calibrator fitted; train.calibrate_folds leaves such a fold's confidences as they are."""
    from model.train import calibrate_folds
    from model.wholequery import methods as Mm
    from model.wholequery.base_scores import NODE_COLUMNS, BaseScores

    rng = np.random.default_rng(0)
    n = 200
    system = np.array(["strong"] * 100 + ["mixed"] * 100)
    labels = np.r_[(np.arange(100) % 50 != 0).astype(int), (rng.random(100) > 0.4).astype(int)]
    table = BaseScores(system, np.array([str(i) for i in range(n)]), np.array([f"db{i % 10}" for i in range(n)]),
                       labels, {c: rng.random(n) for c in NODE_COLUMNS})
    results = Mm.evaluate_methods(table, Mm.default_methods(list(NODE_COLUMNS)), "cv")
    assert set(results) == {"strong", "mixed"}
    perfect = table.subset((system == "strong") & (labels == 1))  # "strong" without its two wrong queries
    assert Mm.fit_calibrators(perfect, Mm.default_methods(list(NODE_COLUMNS))) == {"strong": {}}
    rows = {"val": [{"fold": 0, "node_confidences": [0.9, 0.8], "node_labels": [1, 1]},
                    {"fold": 1, "node_confidences": [0.9, 0.2, 0.6, 0.3], "node_labels": [1, 0, 1, 0]}],
            "test": [{"fold": 0, "node_confidences": [0.6, 0.4], "node_labels": [1, 0]}]}
    calibrate_folds(rows, "platt")
    assert rows["test"][0]["node_confidences"] == [0.6, 0.4]
