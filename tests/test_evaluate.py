"""evaluate.py end to end on a node-level run built from the demo corpus, plus its pieces."""

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

import model.evaluate as evaluate_module
import rat
from model import metrics
from model.errors import UsageError
from model.eval import baselines, report
from model.evaluate import evaluate

REPO = Path(__file__).resolve().parents[1]




def node_type(node) -> str:
    kind = rat.node_kind(node)
    return node.label if kind in ("relation", "operator") else kind.capitalize()


def write_demo_run(run_dir: Path, seed: int = 0) -> dict[str, int]:
    """A run directory as train.py leaves it, with confidences that depend on the node labels
    (noisy), so that the metrics have something to find."""
    from model.data.datasets import load_questions, load_schemas
    from model.data.predictions import load_predictions
    from model.synth.demo import demo_root

    root = demo_root()
    questions = load_questions(root, "dev")
    schemas = load_schemas(root)
    by_id = {q.question_id: q for q in questions}
    val_dbs = set(sorted({q.db_id for q in questions})[::3])
    rng = random.Random(seed)
    splits = {"val": [], "test": []}
    for path in sorted((root / "predictions").glob("*.jsonl")):
        for p in load_predictions(path, questions):
            q = by_id[p.question_id]
            try:
                tree = rat.to_tree(p.sql, schemas[q.db_id])
                gold = rat.to_tree(q.gold_sql, schemas[q.db_id])
            except rat.RATError:
                continue
            labels = rat.label_nodes(tree, gold)
            conf = [min(1.0, max(0.0, 0.35 + 0.4 * y + rng.gauss(0, 0.2))) for y in labels]
            splits["val" if q.db_id in val_dbs else "test"].append({
                "question_id": p.question_id, "db_id": p.db_id, "system": p.system,
                "sql": p.sql, "node_types": [node_type(n) for n in tree.postorder()],
                "node_labels": labels, "node_confidences": conf, "tree": rat.serialize(tree),
                "node_names": [n.label for n in tree.postorder()],
                "node_arity": [len(n.children) for n in tree.postorder()]})
    (run_dir / "predictions").mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        (run_dir / "predictions" / f"{split}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows))
    return {k: len(v) for k, v in splits.items()}


def make_cfg(**overrides):
    args = [f"{k}={v}" for k, v in overrides.items()]
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose(config_name="evaluate", overrides=args)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run")
    sizes = write_demo_run(run_dir)
    assert sizes["val"] > 50 and sizes["test"] > 50
    return run_dir


@pytest.fixture(scope="module")
def evaluated(demo_run):
    from model.synth.demo import demo_root

    cfg = make_cfg(run_dir=demo_run, data_root=demo_root(), n_bootstrap=20,
                   breakdown_bootstrap=10, **{"html.max_examples": 15})
    return demo_run / "eval", evaluate(cfg)


def test_run_evaluation_writes_every_file(evaluated):
    out_dir, results = evaluated
    assert json.loads((out_dir / "metrics.json").read_text()) == results
    for stem in ("node_reliability_uniform", "node_reliability_monotonic",
                 "node_reliability_markers", "query_reliability", "risk_coverage"):
        assert (out_dir / "plots" / f"{stem}.png").stat().st_size > 5000
        assert (out_dir / "plots" / f"{stem}.svg").exists()
    md = (out_dir / "report.md").read_text()
    assert "| method | N | Acc | BS-P | AUC | ECE | ECE-P |" in md
    assert "RAT node model" in md and "node agreement" in md and "RS(c)" in md
    assert "![Risk-coverage curve](plots/risk_coverage.png)" in md


def test_node_metrics_match_a_direct_computation(evaluated, demo_run):
    _, results = evaluated
    rows = [json.loads(line) for line in (demo_run / "predictions" / "test.jsonl").open()]
    conf = np.concatenate([r["node_confidences"] for r in rows])
    labels = np.concatenate([r["node_labels"] for r in rows])
    model = results["node"]["methods"]["RAT node model"]
    assert model["n"] == conf.size
    assert model["metrics"]["auc"] == pytest.approx(metrics.auc(conf, labels))
    assert model["metrics"]["ece"] == pytest.approx(metrics.ece(conf, labels))
    assert 0.8 < model["metrics"]["auc"] < 1.0  # the planted signal is found
    assert set(results["node"]["by_node_type"]) >= {"Column", "Table", "Project"}
    agreement = results["node"]["methods"]["node agreement (consensus)"]
    assert 0.5 < agreement["metrics"]["auc"] <= 1.0


def test_abstention_uses_the_validation_split(evaluated, demo_run):
    _, results = evaluated
    table = results["query"]["abstention"]
    assert table["protocol"].startswith("threshold chosen on the calibration split")
    by_c = {row["penalty"]: row for row in table["rows"]}
    assert set(by_c) == {"0", "10", "N"}
    assert by_c["0"]["coverage"] == 1.0
    assert by_c["N"]["c"] == results["query"]["summary"]["n"]
    assert by_c["10"]["rs"] >= by_c["10"]["rs_answer_all"]


@pytest.mark.parametrize("split, calibration_split", [("val", "val"), ("test", "test")])
def test_abstention_thresholds_are_never_chosen_on_the_evaluated_split(demo_run, tmp_path, capsys, split,
                                                                      calibration_split):
    """calibration_split naming the evaluated split (split=val, val the default calibration split):
    thresholds chosen on the items they score would give the best RS(c) possible there; they come
    from the split's other schema-disjoint folds, as for a predictions file, with a line saying so."""
    results = evaluate(make_cfg(run_dir=demo_run, split=split, calibration_split=calibration_split,
                                out_dir=tmp_path / "eval", n_bootstrap=0, breakdown_bootstrap=0,
                                **{"html.max_examples": 5}))
    protocol = results["query"]["abstention"]["protocol"]
    assert protocol.startswith("threshold chosen on the other ") and protocol.endswith("schema-disjoint folds")
    assert f"calibration_split={calibration_split} is the evaluated split" in capsys.readouterr().err


def write_cross_fitted_run(demo_run: Path, run_dir: Path, protocol: str | None) -> int:
    """A cross-fitted run as train.py writes one (data.protocol crossfit): val.jsonl holds
    test.jsonl's (question, system) pairs again, each scored in-sample by the fold model
    calibrated on it (here: confidences that give every label away); the number of pairs."""
    rows = [json.loads(line) for line in (demo_run / "predictions" / "test.jsonl").read_text().splitlines()]
    val = [{**r, "node_confidences": [0.99 if y else 0.01 for y in r["node_labels"]]} for r in rows]
    (run_dir / "predictions").mkdir(parents=True)
    for split, items in (("test", rows), ("val", val)):
        (run_dir / "predictions" / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in items))
    if protocol:
        (run_dir / "data.json").write_text(json.dumps({"protocol": protocol, "examples": len(rows)}))
    return len({(r["question_id"], r["system"]) for r in rows})


QUICK = {"n_bootstrap": 0, "breakdown_bootstrap": 0, "html.max_examples": 5}


@pytest.mark.parametrize("protocol", ["crossfit", None])
def test_a_cross_fitted_run_chooses_thresholds_on_other_folds_not_on_its_in_sample_val(
        demo_run, tmp_path, capsys, protocol):
    """A cross-fitted run's val.jsonl scores the evaluated pairs themselves, in-sample: RS(c)
    thresholds chosen there would be chosen on the items they score. They come from the
    evaluated split's other schema-disjoint folds (what calibration_split=test gives), with a
    line saying so; the report says val (and the run's val/* numbers) are in-sample. Told by
    data.json's protocol, or, without one, by the pairs val.jsonl shares with test.jsonl."""
    run = tmp_path / "run"
    pairs = write_cross_fitted_run(demo_run, run, protocol)
    results = evaluate(make_cfg(run_dir=run, out_dir=tmp_path / "eval", **QUICK))
    err = capsys.readouterr().err
    reference = evaluate(make_cfg(run_dir=run, calibration_split="test", out_dir=tmp_path / "ref", **QUICK))
    assert results["query"]["abstention"] == reference["query"]["abstention"]
    assert results["query"]["abstention"]["protocol"].startswith("threshold chosen on the other ")
    line = (f"predictions/val.jsonl holds {pairs} of the {pairs} evaluated (question, system) pairs; RS(c) "
            "thresholds are chosen on the other schema-disjoint folds of test instead")
    assert [e for e in err.splitlines() if "RS(c) thresholds" in e] == [
        f"run_dir={run}{' is cross-fitted (data.json: protocol crossfit)' if protocol else ''}: {line}"]
    assert results["cross_fitted"]["pairs_in_both"] == pairs and results["in_sample"] is False
    assert "calibration_rows_skipped" not in results
    md = (tmp_path / "eval" / "report.md").read_text()
    assert "Cross-fitted run (" in md and "val/* numbers (val/localisation_* among them)" in md
    assert "not on val." in md and "**In-sample**" not in md


def test_the_in_sample_val_of_a_cross_fitted_run_is_marked_so(demo_run, tmp_path, capsys):
    """split=val of a cross-fitted run: every number (the site head's localisation top-1 near 1)
    is in-sample, and metrics.json and the report say so."""
    run = tmp_path / "run"
    write_cross_fitted_run(demo_run, run, "crossfit")
    results = evaluate(make_cfg(run_dir=run, split="val", out_dir=tmp_path / "eval", **QUICK))
    assert results["in_sample"] is True and results["cross_fitted"]["in_sample"] is True
    assert results["query"]["abstention"]["protocol"].startswith("threshold chosen on the other ")
    assert "split=val of a cross-fitted run" in capsys.readouterr().err
    md = (tmp_path / "eval" / "report.md").read_text()
    assert "**In-sample**: the evaluated split is that val" in md
    assert "### Error localisation (in-sample)" in md and "\n### Error localisation\n" not in md


def test_a_split_protocol_run_keeps_its_held_out_val(demo_run, tmp_path, capsys):
    """data.json protocol split, val on other databases: thresholds from val as before, no note."""
    run = tmp_path / "run"
    (run / "predictions").mkdir(parents=True)
    for split in ("val", "test"):
        (run / "predictions" / f"{split}.jsonl").write_bytes((demo_run / "predictions" / f"{split}.jsonl").read_bytes())
    (run / "data.json").write_text(json.dumps({"protocol": "split"}))
    results = evaluate(make_cfg(run_dir=run, out_dir=tmp_path / "eval", **QUICK))
    assert results["query"]["abstention"]["protocol"] == "threshold chosen on the calibration split"
    assert "cross_fitted" not in results and "in_sample" not in results
    assert "RS(c) thresholds" not in capsys.readouterr().err
    assert "Cross-fitted" not in (tmp_path / "eval" / "report.md").read_text()


def test_html_view_shows_least_confident_queries_with_trees(evaluated):
    out_dir, _ = evaluated
    page = (out_dir / "report.html").read_text()
    assert page.count("<div class='example'>") == 15
    assert page.count("<svg") == 15 and "class='rat'" in page
    shown = [float(x.split("query confidence ")[1].split("<")[0].split(" ")[0])
             for x in page.split("<div class='meta'>")[1:]]
    assert shown == sorted(shown)
    # "look here first": one line per example, naming the most likely error site, outlined
    assert page.count("Look here first:") == 15 and 'class="s ' in page and " look\"" in page


def test_generic_csv_predictions(tmp_path):
    rng = np.random.default_rng(0)
    conf = rng.random(300)
    lines = ["confidence,label,db_id"] + [
        f"{c:.4f},{int(rng.random() < c)},db{i % 7}" for i, c in enumerate(conf)]
    path = tmp_path / "scores.csv"
    path.write_text("\n".join(lines) + "\n")
    results = evaluate(make_cfg(predictions=path, n_bootstrap=10))
    out_dir = tmp_path / "scores_csv_eval"
    assert (out_dir / "metrics.json").exists() and not (out_dir / "report.html").exists()
    # a scores.jsonl beside it gets its own folder: neither evaluation overwrites the other's
    jsonl = tmp_path / "scores.jsonl"
    jsonl.write_text("".join(json.dumps(dict(zip(["confidence", "label", "db_id"], line.split(",")))) + "\n"
                             for line in lines[1:]))
    evaluate(make_cfg(predictions=jsonl, n_bootstrap=0))
    assert json.loads((out_dir / "metrics.json").read_text())["source"] == str(path)
    assert json.loads((tmp_path / "scores_jsonl_eval" / "metrics.json").read_text())["source"] == str(jsonl)
    assert results["query"]["summary"]["n"] == 300
    assert "schema-disjoint folds" in results["query"]["abstention"]["protocol"]
    assert "node" not in results


def test_the_abstention_protocol_names_the_folds_used(tmp_path):
    """3 databases hold 3 schema-disjoint folds, whatever n_folds asks for."""
    rng = np.random.default_rng(0)
    path = tmp_path / "scores.csv"
    path.write_text("confidence,label,db_id\n" + "".join(
        f"{c:.4f},{int(rng.random() < c)},db{i % 3}\n" for i, c in enumerate(rng.random(90))))
    results = evaluate(make_cfg(predictions=path, n_bootstrap=0, n_folds=5))
    assert results["query"]["abstention"]["protocol"] == "threshold chosen on the other 2 of 3 schema-disjoint folds"


def test_missing_input_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="run_dir"):
        evaluate(make_cfg())
    with pytest.raises(UsageError, match="no predictions/test.jsonl"):
        evaluate(make_cfg(run_dir=tmp_path))


@pytest.mark.slow
def test_cli_prints_the_main_table(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps({"confidence": c, "label": int(c > 0.4), "group": i % 3})
                            + "\n" for i, c in enumerate(np.linspace(0, 1, 60))))
    done = subprocess.run([sys.executable, "evaluate.py", f"predictions={path}", "n_bootstrap=5"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "| confidence | 60 |" in done.stdout and "RS(c)" in done.stdout


def test_tree_svg_and_spans_colour_every_node():
    tree = rat.to_tree("SELECT name FROM singer WHERE age > 20")
    n = len(tree.postorder())
    conf = np.linspace(0, 1, n).tolist()
    svg = report.tree_svg(tree, conf, labels=[1] * (n - 1) + [0])
    assert svg.count("<rect") == n and svg.count("<line") == n - 1
    assert report.confidence_colour(0.0) in svg and report.confidence_colour(1.0) in svg
    assert svg.count("✗") == 1
    with pytest.raises(ValueError):
        report.tree_svg(tree, conf[:-1])
    page = report.html_report([{"tree": tree, "confidences": conf, "sql": "SELECT 1"}])
    assert page.count('class="node"') == n


def test_node_agreement_counts_other_systems_only():
    trees = {("a", "q1"): rat.to_tree("SELECT x FROM t"),
             ("b", "q1"): rat.to_tree("SELECT y FROM t"),
             ("c", "q1"): rat.to_tree("SELECT x FROM t"),
             ("a", "q2"): rat.to_tree("SELECT z FROM t")}
    out = baselines.node_agreement(trees)
    assert out["a", "q1"] == [0.5, 1.0, 0.5]
    assert out["b", "q1"] == [0.0, 1.0, 0.0]
    assert ("a", "q2") not in out  # answered by one system only


def test_perturbations_are_left_out_unless_asked_for(tmp_path):
    entry = evaluate_module
    rows = [{"system": "codes_7b"}, {"system": "perturb:column"}, {"system": "din_sql"}]
    assert [r["system"] for r in entry.select_systems(rows, "real")] == ["codes_7b", "din_sql"]
    assert entry.select_systems(rows, "all") == rows
    assert entry.select_systems(rows[1:2], "real") == rows[1:2]  # nothing real: keep what there is
    with pytest.raises(UsageError, match="systems must be real or all; found 'some'"):
        entry.select_systems(rows, "some")


def test_data_root_comes_from_the_run_config(tmp_path):
    entry = evaluate_module
    assert entry.run_data_root(tmp_path) is None
    (tmp_path / "config.yaml").write_text("data:\n  root: /data/spider\n")
    assert entry.run_data_root(tmp_path) == Path("/data/spider")


def test_a_data_root_that_is_a_file_says_so():
    file = REPO / "pyproject.toml"
    assert evaluate_module.gold_sources(file, []) == ({}, {}, f"data_root={file}: a file, not the benchmark's folder")


@pytest.mark.parametrize("arg, message", [
    ("run_dir=/no/such/run", "run_dir=/no/such/run: no such directory"),
    (f"run_dir={REPO / 'pyproject.toml'}", f"run_dir={REPO / 'pyproject.toml'}: a file, not a run directory"),
    ("predictions=/no/such/file.jsonl", "predictions=/no/such/file.jsonl: no such file"),
])
def test_missing_inputs_are_one_line_and_exit_2(tmp_path, arg, message):
    result = subprocess.run([sys.executable, str(REPO / "evaluate.py"), arg], check=False, capture_output=True,
                            text=True, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"evaluate.py: error: {message}"


@pytest.mark.parametrize("options, message", [
    (["n_bins=0"], "n_bins: expected a whole number of at least 1, found 0"),
    (["n_folds=1"], "n_folds: expected a whole number of at least 2, found 1"),
    (["level=2"], "level: expected a number between 0 and 1, found 2"),
    (["min_bin_size=5", "max_bin_size=2"], "max_bin_size: 2 is below min_bin_size (5)"),
    (["penalties=[0,abc]"], "penalties: expected numbers of at least 0 or N, found 'abc'"),
])
def test_numeric_options_out_of_range_are_one_line_and_exit_2(tmp_path, options, message):
    scores = tmp_path / "scores.csv"
    scores.write_text("confidence,label\n0.9,1\n0.2,0\n")
    result = subprocess.run([sys.executable, str(REPO / "evaluate.py"), f"predictions={scores}", *options],
                            check=False, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip() == f"evaluate.py: error: {message}"


def test_a_run_dir_without_predictions_says_so(tmp_path):
    result = subprocess.run([sys.executable, str(REPO / "evaluate.py"), f"run_dir={tmp_path}"],
                            check=False, capture_output=True, text=True)
    assert result.returncode == 2 and "no predictions/test.jsonl in it" in result.stderr


def test_malformed_rows_are_counted_and_left_out(tmp_path):
    write_demo_run(tmp_path)
    path = tmp_path / "predictions" / "test.jsonl"
    good = path.read_text().splitlines()
    bad = json.loads(good[0])
    bad["node_labels"] = bad["node_labels"] + [1]  # one label too many
    path.write_text("\n".join([*good, json.dumps(bad), json.dumps({"question_id": "x"})]) + "\n")
    results = evaluate(make_cfg(run_dir=tmp_path, n_bootstrap=0, breakdown_bootstrap=0))
    assert results["rows_read"] == len(good) + 2 and results["rows"] == len(good)
    assert results["rows_skipped"] == {"node_labels length differs": 1, "missing node_labels": 1}
    assert "left out: 1 node_labels length differs, 1 missing node_labels" in (tmp_path / "eval" / "report.md").read_text()


def test_bad_score_rows_are_counted_and_the_run_goes_on(tmp_path):
    rng = np.random.default_rng(1)
    good = [{"confidence": float(c), "label": int(rng.random() < c), "group": i % 5}
            for i, c in enumerate(rng.random(80))]
    bad = ['"abc"', "abc", json.dumps({"confidence": float("nan"), "label": 1}), json.dumps([0.5, 1]),
           json.dumps({"confidence": 0.5}), json.dumps({"confidence": 0.5, "label": "x"}),
           json.dumps({"confidence": "high", "label": 1}), json.dumps({"confidence": 1.5, "label": 0})]
    path = tmp_path / "scores.jsonl"
    path.write_text("\n".join([*map(json.dumps, good[:40]), *bad, *map(json.dumps, good[40:])]) + "\n")
    results = evaluate(make_cfg(predictions=path, n_bootstrap=0, breakdown_bootstrap=0))
    assert results["rows_read"] == 88 and results["rows"] == 80 and results["query"]["summary"]["n"] == 80
    assert results["rows_skipped"] == {"not an object": 2, "not a JSON line": 1, "confidence not in [0, 1]": 2,
                                       "no label": 1, "label not 0/1": 1, "confidence not a number": 1}
    (tmp_path / "only_bad.jsonl").write_text("\n".join(bad) + "\n")
    done = subprocess.run([sys.executable, "evaluate.py", f"predictions={tmp_path / 'only_bad.jsonl'}"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "no predictions to evaluate (2 not an object, 1 not a JSON line" in done.stderr, done.stderr


def test_rows_of_wrong_types_are_counted_by_reason_and_left_out(tmp_path, capsys):
    """Each of these rows, beside good ones, is left out and counted by its reason (one line on
    stderr per file), in the evaluated split and in the calibration split, never a crash."""
    write_demo_run(tmp_path)
    test_path, val_path = (tmp_path / "predictions" / f"{s}.jsonl" for s in ("test", "val"))
    good = test_path.read_text().splitlines()
    row = json.loads(good[0])
    n = len(row["node_confidences"])
    bad = [{"question_id": "dev_1"},  # first, so that the file is still read as node predictions
           {**row, "node_confidences": 0.5}, {**row, "node_confidences": ["abc"] * n},
           {**row, "node_confidences": [None] * n}, {**row, "node_confidences": [float("nan")] * n},
           {**row, "node_confidences": [7.5] * n},
           {**row, "node_confidences": [], "node_labels": [], "node_names": [], "node_arity": [], "node_types": []},
           {**row, "node_labels": ["x"] * n}, {**row, "node_arity": ["x"] * n}, {**row, "node_arity": [-3] * n},
           {**row, "query_confidence": "abc"}, {**row, "site_scores": "abc"}, {**row, "site_scores": [0.5] * (n + 1)},
           {**row, "question_id": ["dev_1"]}, {**row, "db_id": ["x"]}, {**row, "system": 7}, {**row, "sql": 5},
           {**row, "node_names": list(range(n))}]
    test_path.write_text("\n".join([*map(json.dumps, bad), *good]) + "\n")
    val = val_path.read_text().splitlines()
    val_path.write_text("\n".join([json.dumps({**json.loads(val[0]), "node_confidences": "abc"}), *val[1:]]) + "\n")
    results = evaluate(make_cfg(run_dir=tmp_path, n_bootstrap=0, breakdown_bootstrap=0, **{"html.max_examples": 5}))
    assert results["rows_read"] == len(good) + len(bad) and results["rows"] == len(good)
    assert results["rows_skipped"] == {
        "missing node_labels": 1, "node_confidences not a list of numbers in [0, 1]": 5, "no nodes": 1,
        "node_labels not a list of 0/1": 1, "node_arity not a list of non-negative integers": 2,
        "query_confidence not a number in [0, 1]": 1, "site_scores not a list of numbers": 1,
        "site_scores length differs": 1, "question_id not a string": 1, "db_id not a string": 1,
        "system not a string": 1, "sql not a string": 1, "node_names not a list of strings": 1}
    assert results["calibration_rows_skipped"] == {"node_confidences not a list of numbers in [0, 1]": 1}
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{test_path}: left out {len(bad)} of {len(good) + len(bad)} rows: ")
    assert "5 node_confidences not a list of numbers in [0, 1]" in err[0] and "1 missing node_labels" in err[0]
    assert err[1] == f"{val_path}: left out 1 of {len(val)} rows: 1 node_confidences not a list of numbers in [0, 1]"


def test_a_predictions_file_of_one_database_leaves_out_only_the_thresholded_abstention(demo_run, tmp_path):
    """No calibration split and one database: no other fold to choose an RS(c) threshold on; the
    table is left out with a line saying so, everything else is evaluated."""
    rows = [json.loads(line) for line in (demo_run / "predictions" / "test.jsonl").read_text().splitlines()]
    db = max({r["db_id"] for r in rows}, key=[r["db_id"] for r in rows].count)
    path = tmp_path / "one_db.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows if r["db_id"] == db))
    results = evaluate(make_cfg(predictions=path, n_bootstrap=0, breakdown_bootstrap=0, **{"html.max_examples": 5}))
    abstention = results["query"]["abstention"]
    assert abstention["rows"] == [] and abstention["protocol"].startswith("not computed")
    assert 0 <= abstention["aurc"] <= 1 and results["node"]["methods"]["RAT node model"]["n"] > 0
    md = (tmp_path / "one_db_jsonl_eval" / "report.md").read_text()
    assert "cannot be chosen on other folds of a single database" in md and "AURC" in md
    assert "Platt scaling fitted on schema-disjoint folds (none here: one database)" in md


def test_node_agreement_left_out_of_a_single_system_evaluation_is_said(demo_run, tmp_path, capsys):
    """One system's predictions (data.holdout_system): no other system to agree with; the
    baseline is left out with a line saying so, on stderr and in the report."""
    rows = [json.loads(line) for line in (demo_run / "predictions" / "test.jsonl").read_text().splitlines()]
    system = rows[0]["system"]
    path = tmp_path / "one_system.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows if r["system"] == system))
    results = evaluate(make_cfg(predictions=path, n_bootstrap=0, breakdown_bootstrap=0, **{"html.max_examples": 5}))
    assert list(results["node"]["methods"]) == ["RAT node model"]
    assert "node agreement: left out (one system in the evaluated split)" in capsys.readouterr().err.splitlines()
    md = (tmp_path / "one_system_jsonl_eval" / "report.md").read_text()
    assert "Left out: the node agreement (consensus) baseline (one system in the evaluated split)." in md


@pytest.mark.parametrize("name, text, message", [
    ("deep.json", "[" * 100000, "deep.json: JSON nested too deeply"),
    ("big.csv", 'confidence,label\n0.5,1\n"' + "x" * 200_000 + '",1\n',
     "big.csv: not a readable CSV file (field larger than field limit"),
])
def test_unreadable_files_are_one_line_naming_them(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        evaluate(make_cfg(predictions=path))


def test_an_out_dir_that_cannot_be_made_is_one_line_before_the_work(tmp_path, monkeypatch):
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps({"confidence": c, "label": int(c > 0.5), "group": i % 3}) + "\n"
                            for i, c in enumerate(np.linspace(0, 1, 30))))
    (tmp_path / "a_file").write_text("")
    monkeypatch.setattr(evaluate_module, "query_level", lambda *a: pytest.fail("worked before checking out_dir"))
    with pytest.raises(UsageError, match=f"out_dir {tmp_path / 'a_file' / 'eval'}: cannot be written"):
        evaluate(make_cfg(predictions=path, out_dir=tmp_path / "a_file" / "eval"))


def test_an_unusable_data_root_says_what_is_left_out(demo_run, tmp_path, capsys):
    results = evaluate(make_cfg(run_dir=demo_run, data_root=tmp_path / "missing", out_dir=tmp_path / "eval",
                                n_bootstrap=0, breakdown_bootstrap=0, **{"html.max_examples": 5}))
    reason = f"data_root={tmp_path / 'missing'}: no such folder"
    assert capsys.readouterr().err.splitlines() == [f"evaluation without gold SQL and difficulty: {reason}"]
    assert "by_difficulty" not in results["node"]
    assert f"the table by Spider difficulty ({reason})" in (tmp_path / "eval" / "report.md").read_text()


def test_a_broken_run_config_is_one_line_naming_it(tmp_path):
    (tmp_path / "config.yaml").write_text("data: [unclosed\n  - x: :")
    with pytest.raises(UsageError, match=f"{tmp_path / 'config.yaml'}: not a readable config"):
        evaluate_module.run_data_root(tmp_path)


def test_a_run_config_is_read_without_resolving_interpolations(tmp_path, monkeypatch):
    # a run directory from someone else: ${oc.env:..} would put this machine's secret in the report
    monkeypatch.setenv("RAT_TEST_SECRET", "s3cr3t-value")
    (tmp_path / "config.yaml").write_text("data:\n  root: /nonexistent/${oc.env:RAT_TEST_SECRET}\n")
    root = evaluate_module.run_data_root(tmp_path)
    assert str(root) == "/nonexistent/${oc.env:RAT_TEST_SECRET}" and "s3cr3t" not in str(root)


@pytest.mark.parametrize("inputs, message", [
    ({"predictions": "{run}/predictions/test.jsonl"}, "run_dir and predictions: give one of them"),
    ({"new_system.scored": "{run}/predictions/test.jsonl"}, "new_system.scored and run_dir: give one of them"),
])
def test_two_inputs_that_conflict_are_one_line_naming_both(demo_run, inputs, message):
    """Neither is left out silently: the user is told which two were given."""
    cfg = make_cfg(run_dir=demo_run, **{k: v.format(run=demo_run) for k, v in inputs.items()})
    with pytest.raises(UsageError, match=message):
        evaluate(cfg)


def test_a_data_root_of_another_benchmark_is_refused(demo_run, tmp_path):
    """Question ids (dev_12) name questions of any benchmark: a data_root holding none of the
    predictions' databases would pair them with another benchmark's gold SQL and difficulty."""
    from model.synth.demo import demo_root

    other = tmp_path / "other"
    other.mkdir()
    for name in ("tables.json", "dev.json"):
        items = json.loads((demo_root() / name).read_text())
        (other / name).write_text(json.dumps([{**item, "db_id": f"other_{item['db_id']}"} for item in items]))
    with pytest.raises(UsageError, match=f"data_root={other}: holds none of the predictions' databases \\(.*\\); give the data_root"):
        evaluate(make_cfg(run_dir=demo_run, data_root=other, out_dir=tmp_path / "eval", n_bootstrap=0))
    rows = [{"question_id": "dev_0", "db_id": "supply_chain"}, {"question_id": "dev_1", "db_id": "clinic"}]
    found = evaluate_module._questions(demo_root(), rows)
    assert "dev_0" in found and "dev_1" not in found  # dev_1 is a question of supply_chain


def test_the_whole_query_heading_names_the_label_used(tmp_path):
    rows = [{"node_confidences": [0.9, 0.2], "node_labels": [1, 0], "execution_match": True},
            {"node_confidences": [0.8], "node_labels": [1]}]
    assert evaluate_module.query_scores(rows[:1])["label_name"] == "execution match"
    assert evaluate_module.query_scores(rows[1:])["label_name"] == "all nodes correct"
    both = evaluate_module.query_scores(rows)
    assert both["label"].tolist() == [1, 1]  # execution match where known
    assert both["label_name"] == "execution match, else all nodes correct (1 of 2)"
