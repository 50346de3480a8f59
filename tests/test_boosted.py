"""The boosted-tree node scorer end to end on the demo corpus: train(cfg) with model=features
writes predictions evaluate.py reads, with site scores and localisation."""

import json
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from model.nodes.outputs import read_predictions, tree_of
from model.train import train

CONF = Path(__file__).resolve().parents[1] / "conf"
FAST = ["model=features", "logger=none", "model.hgb.max_iter=30"]


def compose_cfg(config: str, overrides: list[str], output_dir: Path | None = None):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config, overrides=overrides)
    if output_dir is not None:
        with open_dict(cfg):
            cfg.paths.output_dir = str(output_dir)
    return cfg


@pytest.fixture(scope="module")
def boosted_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("boosted")
    metrics, objects = train(compose_cfg("train", FAST, out))
    return out, metrics, objects


def test_boosted_run_writes_readable_predictions(boosted_run):
    out, metrics, objects = boosted_run
    assert 0.5 < metrics["test/auc"] <= 1 and "test/localisation_top1" in metrics
    rows = read_predictions(out / "predictions" / "test.jsonl")
    test_dbs = {objects["table"].examples[k].db_id for k in objects["roles"][0]["test"]}
    assert rows and {r["db_id"] for r in rows} == test_dbs
    for row in rows:
        assert len(row["site_scores"]) == len(row["node_confidences"]) == len(row["node_labels"])
        assert tree_of(row) is not None and row["fold"] == 0
    assert (out / "predictions" / "val.jsonl").exists() and (out / "config.yaml").exists()
    assert json.loads((out / "metrics.json").read_text())["test/auc"] == pytest.approx(metrics["test/auc"])


def test_method_name_says_which_track(boosted_run, tmp_path):
    single = read_predictions(boosted_run[0] / "predictions" / "test.jsonl")[0]["method"]
    train(compose_cfg("train", [*FAST, "model.groups=single+consensus", "model.site_head=false"],
                      tmp_path))
    consensus = read_predictions(tmp_path / "predictions" / "test.jsonl")[0]["method"]
    assert "consensus" not in single and "consensus" in consensus


def test_evaluate_reports_localisation_per_method(boosted_run):
    from model.evaluate import evaluate

    out, _, _ = boosted_run
    results = evaluate(compose_cfg("evaluate", [f"run_dir={out}", "n_bootstrap=0",
                                                "breakdown_bootstrap=0"]))
    methods = results["node"]["methods"]
    assert len(methods) >= 2  # the scorer and node agreement
    for summary in methods.values():
        where = summary["localisation"]
        assert {"top1", "top3", "top1_site_reading", "top3_site_reading", "random_top1"} <= set(where)
    scorer = next(s for name, s in methods.items() if name.startswith("boosted"))
    assert "top1_site_scores" in scorer["localisation"]


def test_crossfit_predicts_every_example_once(tmp_path):
    cfg = compose_cfg("train", [*FAST, "data.protocol=crossfit", "data.folds=3",
                                "model.site_head=false"], tmp_path)
    _, objects = train(cfg)
    rows = read_predictions(tmp_path / "predictions" / "test.jsonl")
    assert len(rows) == len(objects["table"].examples)
    assert {r["fold"] for r in rows} == {0, 1, 2}
    folds_of_db = {}
    for r in rows:
        assert folds_of_db.setdefault(r["db_id"], r["fold"]) == r["fold"]  # schema-disjoint


def test_run_folds_scores_only_the_listed_folds(tmp_path):
    cfg = compose_cfg("train", [*FAST, "data.protocol=crossfit", "data.folds=3", "data.run_folds=[2]",
                                "model.site_head=false"], tmp_path)
    train(cfg)
    from test_node_model_v2 import assert_run_covers_only_fold

    assert_run_covers_only_fold(tmp_path, 2)


def test_drop_leaves_out_named_features_and_groups(tmp_path):
    _, objects = train(compose_cfg("train", [*FAST, "model.drop=[name_semantic,question]", "model.site_head=false"],
                                   tmp_path))
    names = objects["table"].names
    assert "name_semantic" not in names and "name_fuzzy" in names
    assert not any(n.startswith("cue_") or n == "question_words" for n in names)
    with pytest.raises(ValueError, match=r"model.drop: unknown feature or group \['nonsense'\]"):
        train(compose_cfg("train", [*FAST, "model.drop=[nonsense]"], tmp_path))


def test_a_database_free_model_scores_the_same_with_or_without_the_database(tmp_path):
    from model.data.datasets import database_path, load_schemas
    from model.scoring import Scorer

    _, objects = train(compose_cfg("train", [*FAST, "model.database=without"], tmp_path))
    table = objects["table"]
    info = json.loads((tmp_path / "model" / "model.json").read_text())
    assert info["config"]["database"] == "without"
    schemas = load_schemas(table.root)
    rows = [{"sql": e.sql, "question": e.question, "db_id": e.db_id, "schema": schemas[e.db_id],
             "database": database_path(table.root, e.db_id)} for e in table.examples[:30]]
    scorer = Scorer.load(tmp_path / "model")
    with_db = scorer.score_many(rows, progress=False, spans=False)
    without = scorer.score_many([{**r, "database": None} for r in rows], progress=False, spans=False)
    assert [[n.confidence for n in r.nodes] for r in with_db] == [[n.confidence for n in r.nodes] for r in without]


def test_a_model_for_both_modes_is_measured_and_calibrated_for_each(tmp_path):
    from model.nodes.estimator import BoostedNodeModel

    metrics, _ = train(compose_cfg("train", [*FAST, "model.database=both"], tmp_path))
    assert 0.5 < metrics["test/auc"] <= 1 and 0.5 < metrics["test_without_database/auc"] <= 1
    # its site head learns from the training pairs only: val/* are in-sample by the node calibrator alone
    in_sample = json.loads((tmp_path / "metrics.json").read_text())["in_sample"]
    assert "site head" not in in_sample["why"] and "val/localisation_top1_site_reading" in in_sample["keys"]
    assert "val/localisation_top1_site_scores" in metrics and not any(
        k.endswith("_site_scores") or k == "val/localisation_top1" for k in in_sample["keys"])
    saved = BoostedNodeModel.load(tmp_path / "model")
    assert saved.without_database_ is not None
    assert set(saved.info_["metrics"]) >= {"out_of_fold", "out_of_fold_without_database"}
    raw = np.linspace(0.05, 0.95, 7)
    assert not np.array_equal(saved.calibrate(raw, True), saved.calibrate(raw, False))
    assert saved.query_calibrator_for(False) is saved.without_database_[1]


def test_database_dropout_blanks_the_database_features_of_half_the_training_queries(tmp_path):
    from model.nodes.estimator import BoostedParams, training_rows
    from model.nodes.features import DATABASE_FEATURES

    _, objects = train(compose_cfg("train", [*FAST, "model.site_head=false"], tmp_path))
    table = objects["table"]
    indices = list(range(len(table.examples)))
    x, _, _ = table.stack(indices)
    dropped, _, _ = training_rows(table, indices, BoostedParams(database="dropout"))
    db = np.array([n in DATABASE_FEATURES for n in table.names])
    assert np.array_equal(x[:, ~db], dropped[:, ~db], equal_nan=True)
    starts = np.cumsum([0] + [len(table.examples[k].node_labels) for k in indices])[:-1]
    blank = np.isnan(dropped[starts][:, db]).all(axis=1) & ~np.isnan(x[starts][:, db]).all(axis=1)
    assert 0.3 < blank.mean() < 0.7
    with pytest.raises(ValueError, match="model.database must be one of"):
        BoostedParams.from_mapping({"database": "sometimes"})


def test_holdout_system_is_never_trained_on_and_the_only_one_tested(tmp_path):
    """The held-out system's outputs are never trained or validated on and are the only ones
    reported; the others' out-of-fold scores calibrate the saved model (without them its
    calibrators would be fitted on nothing: every query 0.5)."""
    cfg = compose_cfg("train", [*FAST, "data.protocol=crossfit", "data.folds=3", "data.holdout_system=demo_weak",
                                "model.site_head=false"], tmp_path)
    _, objects = train(cfg)
    examples = objects["table"].examples
    for role in objects["roles"]:
        assert any(examples[k].system == "demo_weak" for k in role["test"])
        assert all(examples[k].system != "demo_weak" for k in role["train"] + role["val"])
    rows = read_predictions(tmp_path / "predictions" / "test.jsonl")
    assert {r["system"] for r in rows} == {"demo_weak"}
    assert len(rows) == sum(e.system == "demo_weak" for e in examples)
    others = read_predictions(tmp_path / "predictions" / "calibration.jsonl")
    assert others and "demo_weak" not in {r["system"] for r in others}
    assert json.loads((tmp_path / "data.json").read_text())["holdout_system"] == "demo_weak"
    saved = objects["model"]
    assert saved.query_calibrator_.coef[0] > 0 and saved.calibrator_ is not None
    assert "demo_weak" not in saved.info_["trained_on"]["systems"]


def test_holdout_system_unknown_is_one_line(tmp_path):
    from model.errors import UsageError

    with pytest.raises(UsageError, match="data.holdout_system=nobody: no such system"):
        train(compose_cfg("train", [*FAST, "data.holdout_system=nobody"], tmp_path))


@pytest.mark.parametrize("model, message", [("features", "the boosted scorer learns from real predictions"),
                                            ("default", "no questions for split 'train'")])
def test_a_data_root_that_is_no_dataset_is_one_line(tmp_path, model, message):
    import os
    import subprocess
    import sys

    (tmp_path / "not_a_dataset").mkdir()
    command = [sys.executable, "train.py", f"data.root={tmp_path / 'not_a_dataset'}", "logger=none",
               f"hydra.run.dir={tmp_path / 'run'}", *([f"model={model}"] if model != "default" else [])]
    done = subprocess.run(command, check=False, cwd=Path(__file__).parents[1], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("train.py: error: ") and message in done.stderr


def test_compare_node_runs_names_a_file_without_node_confidences(tmp_path):
    import subprocess
    import sys

    for run in ("base", "sites_only"):
        (tmp_path / run / "predictions").mkdir(parents=True)
        row = {"question_id": "q1", "system": "s", "node_labels": [1, 0], "site_scores": [0.1, 0.9]}
        if run == "base":
            row["node_confidences"] = [0.9, 0.2]
        (tmp_path / run / "predictions" / "test.jsonl").write_text(json.dumps(row) + "\n")
    script = Path(__file__).resolve().parents[1] / "scripts" / "compare_node_runs.py"
    result = subprocess.run([sys.executable, str(script), "--baseline", str(tmp_path / "base"),
                             str(tmp_path / "sites_only")], capture_output=True, text=True, check=False)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().endswith("no usable node predictions (1 missing node_confidences)")
    assert "Traceback" not in result.stderr


def test_compare_node_runs_averages_leave_one_system_out_runs(tmp_path):
    import re
    import subprocess
    import sys

    crossfit = [*FAST, "data.protocol=crossfit", "data.folds=3", "model.site_head=false"]
    train(compose_cfg("train", crossfit, tmp_path / "all"))
    systems = ["demo_medium", "demo_strong", "demo_weak"]
    for system in systems:
        train(compose_cfg("train", [*crossfit, f"data.holdout_system={system}"], tmp_path / system))
    script = Path(__file__).resolve().parents[1] / "scripts" / "compare_node_runs.py"
    result = subprocess.run([sys.executable, str(script), "--baseline", str(tmp_path / "all"),
                             *(str(tmp_path / s) for s in systems), "--n-bootstrap", "10"],
                            capture_output=True, text=True, check=True)
    lines = result.stdout.strip().splitlines()
    rows = [line.split(" | ") for line in lines if line.startswith("| demo_")]
    assert [r[0] for r in rows] == [f"| {s}" for s in systems] and all(r[2] == "1" for r in rows)
    mean = re.search(r"mean over 3 systems: node AUC ([\d.]+) held out, ([\d.]+) when trained .*"
                     r"node agreement alone ([\d.]+)", lines[-1])
    assert mean, lines[-1]
    for column, value in ((5, mean[1]), (6, mean[2]), (11, mean[3])):
        assert float(value) == pytest.approx(np.mean([float(r[column]) for r in rows]), abs=1.5e-3)


def test_train_side_examples_only_ever_train(boosted_run):
    """model.train_predictions (a code LLM's answers to Spider train): examples of other databases that join every
    fold's training, never its validation or test; both models learn from them."""
    from omegaconf import OmegaConf

    from model.nodes.boosted import run_fold
    from model.nodes.estimator import BoostedParams
    from model.nodes.table import NodeTable, fold_roles

    table = boosted_run[2]["table"]
    side_db = min({e.db_id for e in table.examples})
    order = sorted(range(len(table.examples)), key=lambda k: table.examples[k].db_id == side_db)
    n_side = sum(e.db_id == side_db for e in table.examples)
    moved = NodeTable([table.examples[k] for k in order], [table.features[k] for k in order], table.names,
                      table.root, train_side=n_side)
    roles, info = fold_roles(moved, OmegaConf.create({"protocol": "split", "val_fraction": 0.25,
                                                      "test_fraction": 0.25}))
    side = moved.side_indices
    assert len(side) == n_side and {moved.examples[k].db_id for k in side} == {side_db}
    assert roles[0]["side"] == side and info["train_side"] == {"examples": n_side, "databases": 1}
    assert not set(side) & set(roles[0]["train"] + roles[0]["val"] + roles[0]["test"])
    fast = {"learning_rate": 0.1, "max_iter": 30, "max_leaf_nodes": 15, "min_samples_leaf": 20,
            "l2_regularization": 1.0}
    with_side = run_fold(moved, roles[0], BoostedParams(hgb=fast, train_side="all"))
    without_side = run_fold(moved, roles[0], BoostedParams(hgb=fast, train_side="none"))
    assert set(with_side.test) == set(roles[0]["test"])
    k = roles[0]["test"][0]  # the node model learnt from the train side too
    assert not np.array_equal(with_side.test[k][0], without_side.test[k][0])


def test_tree_labels_train_the_boosted_scorer_and_a_bad_label_kind_is_one_line(tmp_path):
    from model.errors import UsageError
    from model.nodes.datamodule import NodeDataModule

    _, objects = train(compose_cfg("train", [*FAST, "data.labels=tree", "model.site_head=false"], tmp_path))
    examples = objects["table"].examples
    assert examples and all(e.execution_match is None for e in examples)  # correct = the tree is gold's
    with pytest.raises(UsageError, match="data.labels must be execution or tree; found 'sites'"):
        NodeDataModule(labels="sites")


def test_drop_accepts_the_named_feature_sets():
    from model.nodes.features import BENCHMARK_SIZE_FEATURES, DATABASE_FEATURES, SINGLE_FEATURES
    from model.nodes.table import drop_columns

    x = [np.arange(2 * len(SINGLE_FEATURES), dtype=float).reshape(2, -1)]
    out, names = drop_columns(x, SINGLE_FEATURES, ["benchmark_size", "database"])
    assert set(names) == set(SINGLE_FEATURES) - set(BENCHMARK_SIZE_FEATURES) - set(DATABASE_FEATURES)
    assert out[0][0].tolist() == [float(SINGLE_FEATURES.index(n)) for n in names]


def test_site_head_inner_folds_go_by_query_when_one_database_trains(boosted_run):
    from model.nodes.estimator import row_groups

    table = boosted_run[2]["table"]
    first = table.examples[0].db_id
    one_db = [k for k, e in enumerate(table.examples) if e.db_id == first][:5]
    rows = sum(len(table.examples[k].node_labels) for k in one_db)
    assert len(set(row_groups(table, one_db, rows))) == 5  # a small run: folds by query
    other = next(k for k, e in enumerate(table.examples) if e.db_id != first)
    two_dbs = [*one_db, other]
    rows = sum(len(table.examples[k].node_labels) for k in two_dbs)
    assert set(row_groups(table, two_dbs, 2 * rows)) == {first, table.examples[other].db_id}  # by database


def test_train_side_reads_perturbations_and_never_an_eval_database(capsys):
    """model.train_side with data.use_perturbations builds perturbations of the train split's
    gold queries; on the demo corpus every train database is also an eval database, so all are
    left out (the train side never holds a database the eval split tests on)."""
    from model.nodes.table import load_table
    from model.train_boosted import params_of

    cfg = compose_cfg("train", [*FAST, "model.train_side=all", "data.train_perturbations=1",
                                "data.eval_perturbations=0"])
    table = load_table(cfg.data, params_of(cfg.model))
    out = capsys.readouterr().out
    assert "from 0 files and 1 perturbation(s) a question, 5 shared databases left out" in out
    assert table.train_side == 0


def test_eval_perturbations_train_only_the_folds_their_database_trains_in():
    """data.eval_perturbations: perturbations of the eval split's gold queries join the training
    rows (model.train_side=all), each only in the folds in which its database trains: never in a
    fold that validates or tests its database, and in some fold."""
    from model.nodes.boosted import run_fold
    from model.nodes.estimator import BoostedParams
    from model.nodes.table import fold_roles, load_table
    from model.train_boosted import params_of

    cfg = compose_cfg("train", [*FAST, "model.train_side=all", "data.train_perturbations=0",
                                "data.eval_perturbations=1", "data.protocol=crossfit"])
    table = load_table(cfg.data, params_of(cfg.model), progress=False)
    side = table.side_indices
    assert side and all(table.examples[k].system.startswith("perturb:") for k in side)
    roles, info = fold_roles(table, cfg.data)
    assert info["train_side"]["examples"] == len(side)
    for role in roles:
        held = {table.examples[j].db_id for j in role["val"] + role["test"]}
        trained = {table.examples[j].db_id for j in role["train"]}
        assert role["side"] and {table.examples[k].db_id for k in role["side"]} <= trained
        assert not {table.examples[k].db_id for k in role["side"]} & held
    assert set().union(*(role["side"] for role in roles)) == set(side)
    fast = {"learning_rate": 0.1, "max_iter": 30, "max_leaf_nodes": 15, "min_samples_leaf": 20,
            "l2_regularization": 1.0}
    with_side = run_fold(table, roles[0], BoostedParams(hgb=fast, train_side="all"))
    without_side = run_fold(table, roles[0], BoostedParams(hgb=fast, train_side="none"))
    k = roles[0]["test"][0]  # the node model learnt from the perturbations too
    assert set(with_side.test) == set(roles[0]["test"])
    assert not np.array_equal(with_side.test[k][0], without_side.test[k][0])


def test_monotone_node_model_follows_each_features_direction(boosted_run):
    """model.monotone: the node model's confidence never falls as a feature with direction +1
    rises (nor rises as one with direction -1 does); without it, no constraint is passed."""
    from model.nodes.estimator import BoostedParams, fit_classifier, training_rows
    from model.nodes.features import FEATURES

    table = boosted_run[2]["table"]
    x, y, _ = training_rows(table, list(range(len(table.examples))), BoostedParams())
    config = BoostedParams(hgb={"max_iter": 40}, monotone=True)
    assert "monotonic_cst" not in BoostedParams(hgb={"max_iter": 40}).node_hgb(table.names)
    model = fit_classifier(x, y, table.names, config.node_hgb(table.names))
    direction = {f.name: f.direction for f in FEATURES}
    rows = x[np.flatnonzero(~np.isnan(x[:, table.names.index("name_fuzzy")]))[:50]]
    assert len(rows) > 10
    for name in ("name_fuzzy", "name_rank"):
        j = table.names.index(name)
        grid = np.linspace(np.nanmin(x[:, j]), np.nanmax(x[:, j]), 6)
        swept = []
        for value in grid:
            changed = rows.copy()
            changed[:, j] = value
            swept.append(model.predict_proba(changed)[:, 1])
        steps = np.diff(np.array(swept), axis=0) * direction[name]
        assert (steps >= -1e-12).all(), name


def test_a_database_free_consensus_model_compares_the_other_answers_by_tree_only():
    """model.database=without: the consensus columns are the ones a user without databases gets
    (no result agreement, the reference answer by tree), not computed from executed results."""
    from model.nodes.features import DATABASE_FEATURES, consensus_features
    from model.nodes.table import load_table
    from model.train_boosted import params_of

    tables = {}
    for mode in ("with", "without"):
        cfg = compose_cfg("train", [*FAST, "model.groups=single+consensus", f"model.database={mode}"])
        tables[mode] = load_table(cfg.data, params_of(cfg.model), progress=False)
    col = tables["with"].names.index("result_agreement")
    assert "result_agreement" in DATABASE_FEATURES
    assert not np.isnan(np.concatenate([x[:, col] for x in tables["with"].features])).all()
    assert np.isnan(np.concatenate([x[:, col] for x in tables["without"].features])).all()
    by_tree = consensus_features(tables["without"].examples, [None] * len(tables["without"].examples))
    n = by_tree[0].shape[1]
    assert all(np.array_equal(x[:, -n:], c, equal_nan=True) for x, c in zip(tables["without"].features, by_tree))


def _all_right_on(table, databases):
    """``table`` with every output on ``databases`` right (as if every system answered them well)."""
    for example in table.examples:
        if databases is None or example.db_id in databases:
            example.node_labels[:] = [1] * len(example.node_labels)
            example.execution_match = True
    return table


@pytest.mark.parametrize("overrides, says", [
    (["data.protocol=crossfit", "data.folds=3"], ("fold {fold}/3's validation databases ({db}): every output on them "
     "is right ({nodes} nodes, all 1): the platt node calibrator fitted on them needs right and wrong nodes; "
     "use fewer folds (data.folds), add outputs, or model.calibration=none")),
    (["data.protocol=split"], ("the validation databases of data.protocol=split ({db}): every output on them is "
     "right ({nodes} nodes, all 1): the platt node calibrator fitted on them needs right and wrong nodes; try "
     "another data.split_seed or data.val_fraction, add outputs, or model.calibration=none")),
])
def test_a_validation_fold_whose_outputs_are_all_right_is_one_line_before_any_fold_is_fitted(
        tmp_path, monkeypatch, overrides, says):
    """A probe's own outputs, right on every question of one database: train.py fitted folds
    and then died in a traceback (ValueError) when that database validated a fold."""
    import model.train_boosted as tb
    from model.errors import UsageError
    from model.nodes.table import fold_roles

    cfg = compose_cfg("train", [*FAST, *overrides, "model.site_head=false"], tmp_path)
    table = tb.load_table(cfg.data, tb.params_of(cfg.model))
    roles, _ = fold_roles(table, cfg.data)
    first = roles[0]["val"]  # the databases that validate the first fold: every output on them right
    databases = sorted({table.examples[k].db_id for k in first})
    nodes = sum(len(table.examples[k].node_labels) for k in first)
    monkeypatch.setattr(tb, "load_table", lambda *a, **k: _all_right_on(table, set(databases)))
    monkeypatch.setattr(tb, "crossfit", lambda *a, **k: pytest.fail("a fold was fitted"))
    with pytest.raises(UsageError) as error:
        train(cfg)
    assert str(error.value) == says.format(fold=1, db=", ".join(databases), nodes=nodes)


def test_outputs_that_are_all_right_are_one_line_nothing_to_learn(tmp_path, monkeypatch):
    import model.train_boosted as tb
    from model.errors import UsageError

    cfg = compose_cfg("train", [*FAST, "model.calibration=none"], tmp_path)
    table = _all_right_on(tb.load_table(cfg.data, tb.params_of(cfg.model)), None)
    monkeypatch.setattr(tb, "load_table", lambda *a, **k: table)
    monkeypatch.setattr(tb, "crossfit", lambda *a, **k: pytest.fail("a fold was fitted"))
    with pytest.raises(UsageError, match=rf"^all {len(table.examples)} outputs match gold: nothing to learn "):
        train(cfg)


def test_a_dev_database_missing_from_tables_json_is_counted_as_such(tmp_path):
    """The database's SQLite file is there: 'unknown db_id' read as a typo in dev.json."""
    import shutil

    from model.nodes.examples import build_examples
    from model.synth.demo import demo_root

    root = tmp_path / "data"
    shutil.copytree(demo_root(), root)
    tables = json.loads((root / "tables.json").read_text())
    (root / "tables.json").write_text(json.dumps(tables[1:]))
    gone = tables[0]["db_id"]
    assert (root / "database" / gone / f"{gone}.sqlite").exists()
    _, report = build_examples(root, "dev", prediction_files=[root / "predictions" / "demo_weak.jsonl"],
                               execution_cache=tmp_path / "exec", verbose=False)
    assert report.skipped["db_id not in tables.json"] > 0 and "unknown db_id" not in report.skipped
