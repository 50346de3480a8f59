"""A model on a system it was not fitted on (model.wholequery.new_system, evaluate.py new_system.*):
the demo model trained without one pseudo-system scores that system's file alone through
rat-score; evaluate.py reports its rates by the named label, confidence, ECE, whole-query and
node AUC with intervals, and draws the reliability diagram."""

import json

import numpy as np
import pytest

from model.errors import UsageError
from model.train import train
from tests.test_boosted import FAST, compose_cfg
from tests.test_score_cli import rat_score

HELD_OUT = "demo_weak"


@pytest.fixture(scope="module")
def held_out_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("held_out")
    _, objects = train(compose_cfg("train", [*FAST, "data.protocol=crossfit", "data.folds=3",
                                             f"data.holdout_system={HELD_OUT}"], out))
    return out, objects


def _evaluate(**overrides):
    from model.evaluate import evaluate

    return evaluate(compose_cfg("evaluate", [f"{k}={v}" for k, v in overrides.items()]))


def test_a_held_out_systems_file_is_reported_with_intervals_and_a_diagram(held_out_run, tmp_path):
    run, objects = held_out_run
    root = objects["table"].root
    scored = tmp_path / "scored.jsonl"
    done = rat_score("--model", str(run / "model"), "--data-root", str(root), "--split", "dev", "--no-reasons",
                     "--predictions", str(root / "predictions" / f"{HELD_OUT}.jsonl"), "--out", str(scored),
                     "--label-shift")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "eval"
    result = _evaluate(**{"new_system.scored": scored, "data_root": root, "out_dir": out, "n_bootstrap": 50})
    (r,) = result["new_system"]["systems"]
    examples = [e for e in objects["table"].examples if e.system == HELD_OUT]
    rows = [json.loads(line) for line in scored.read_text().splitlines()]
    assert r["system"] == HELD_OUT and r["label"] == "execution" and r["queries"] == len(rows)
    # the rates are the labels' (computed from gold, not read from the model)
    by_id = {e.question_id: e for e in examples}
    expected = np.mean([bool(by_id[str(row["question_id"])].execution_match) for row in rows])
    assert r["rate"][0] == pytest.approx(expected, abs=1e-4)
    assert r["tree_rate"][0] <= r["rate"][0] + 1e-9  # tree agreement is stricter than execution
    assert r["mean_confidence"][0] == pytest.approx(np.mean([row["query_confidence"] for row in rows]), abs=1e-4)
    assert r["gap"][0] == pytest.approx(r["mean_confidence"][0] - r["rate"][0], abs=2e-4)
    for key in ("rate", "mean_confidence", "ece", "query_auc", "node_auc"):
        value, (low, high) = r[key]
        assert low <= value <= high, key
    # 216 queries, --label-shift: the estimate and the numbers before the shift are reported
    assert r["label_shift"]["queries"] == len(rows)
    assert r["unshifted_mean_confidence"][0] == pytest.approx(
        np.mean([row["query_confidence_unshifted"] for row in rows]), abs=1e-4)
    report = (out / "report.md").read_text()
    assert "| demo_weak | " in report and "estimated rate (label shift)" in report
    png = out / "plots" / "reliability_new_system.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "metrics.json").read_text())["systems"][0]["system"] == HELD_OUT


def test_mistakes_are_one_line(tmp_path):
    with pytest.raises(UsageError, match="no such file"):
        _evaluate(**{"new_system.scored": tmp_path / "missing.jsonl", "data_root": tmp_path})
    (tmp_path / "x.jsonl").write_text("{}\n")
    with pytest.raises(UsageError, match="data_root"):
        _evaluate(**{"new_system.scored": tmp_path / "x.jsonl"})


def test_leave_one_system_out_calibrator_only_on_a_cross_fitted_run(held_out_run, tmp_path):
    """scripts/leave_one_system_out.py --calibrator-only: each system's whole-query calibrator
    fitted on the other systems' out-of-fold scores; the table and the rate estimators printed."""
    import subprocess
    import sys
    from pathlib import Path

    run, _ = held_out_run
    both = tmp_path / "run" / "predictions"
    both.mkdir(parents=True)
    rows = [line for name in ("test", "calibration")
            for line in (run / "predictions" / f"{name}.jsonl").read_text().splitlines()]
    (both / "test.jsonl").write_text("\n".join(rows) + "\n")
    script = Path(__file__).resolve().parents[1] / "scripts" / "leave_one_system_out.py"
    out = tmp_path / "loso.json"
    done = subprocess.run([sys.executable, str(script), "--calibrator-only", str(tmp_path / "run"),
                           "--n-bootstrap", "20", "--out", str(out)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())
    parsed = [json.loads(line) for line in rows]
    assert sorted(results) == sorted({r["system"] for r in parsed})
    for system, both_ in results.items():
        r = both_["with"]
        mine = [bool(x["execution_match"]) for x in parsed if x["system"] == system]
        assert r["rate"][0] == pytest.approx(np.mean(mine), abs=1e-4) and r["queries"] == len(mine)
        assert set(r["estimators"]) == {"em", "source_oof"} and r["label_shift"]["rate"] == round(r["estimators"]["em"], 4)
        assert f"| {system} | {len(mine)} |" in done.stdout
    assert "mean error: em" in done.stdout


def test_leave_one_system_out_scores_the_held_out_file_alone_with_and_without_databases(held_out_run, tmp_path):
    """scripts/leave_one_system_out.py on a demo run trained without one system: rat-score with
    the run's saved model on that system's file, with and without databases, before and after
    label shift, against its execution labels."""
    import subprocess
    import sys
    from pathlib import Path

    run, objects = held_out_run
    root = objects["table"].root
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / HELD_OUT).symlink_to(run)
    script = Path(__file__).resolve().parents[1] / "scripts" / "leave_one_system_out.py"
    out = tmp_path / "loso.json"
    done = subprocess.run([sys.executable, str(script), "--runs", str(tmp_path / "runs"), "--systems", HELD_OUT,
                           "--data-root", str(root), "--predictions", str(root / "predictions"),
                           "--n-bootstrap", "20", "--out", str(out)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())[HELD_OUT]
    examples = [e for e in objects["table"].examples if e.system == HELD_OUT]
    for where in ("with", "without"):
        r = result[where]
        assert r["queries"] == len(examples) and r["label"] == "execution"
        assert r["rate"][0] == pytest.approx(np.mean([bool(e.execution_match) for e in examples]), abs=1e-4)
        assert "unshifted_mean_confidence" in r or "label_shift" not in r
    assert result["with"]["mean_confidence"] != result["without"]["mean_confidence"]  # databases read or not
    assert f"| {HELD_OUT} | {len(examples)} |" in done.stdout
    # the run's own out-of-fold rows: the held-out system's file as the run scored it, no label shift
    oof = result["out of fold, with"]
    assert oof["queries"] == len(examples) and "label_shift" not in oof
    assert oof["rate"][0] == pytest.approx(result["with"]["rate"][0], abs=1e-4)
    assert "out of fold, with databases" in done.stdout


def test_queries_without_their_database_are_labelled_by_tree_and_the_label_says_mixed():
    from model.wholequery.new_system import SystemScores, report

    nodes = [np.array([0.9, 0.8])] * 4
    mixed = SystemScores("a", np.array([0.9, 0.8, 0.3, 0.6]), None, np.array([1.0, np.nan, 0.0, np.nan]),
                         np.array([0, 1, 0, 0]), nodes, [np.array([1, 1])] * 4)
    assert mixed.label == "mixed" and mixed.right.tolist() == [1, 1, 0, 0]
    assert report(mixed, n_bootstrap=20)["label"] == "mixed"
    full = SystemScores("b", mixed.confidence, None, np.array([1.0, 0.0, 0.0, 1.0]), mixed.tree, nodes, nodes)
    assert full.label == "execution" and full.right.tolist() == [1, 0, 0, 1]
    assert SystemScores("c", mixed.confidence, None, None, mixed.tree, nodes, nodes).label == "tree"


def test_nodes_the_model_reads_as_unknown_operators_are_reported_apart():
    """Rows whose nodes are marked ``unfamiliar``: their count, node AUC and overconfidence in
    the report and its table; files without such nodes keep the table as it was."""
    from model.wholequery.new_system import SystemScores, markdown, report

    conf = [np.array([0.9, 0.8, 0.7]), np.array([0.6, 0.9, 0.2]), np.array([0.5, 0.4, 0.9])] * 4
    labels = [np.array([1, 0, 1]), np.array([1, 1, 0]), np.array([0, 0, 1])] * 4
    marks = [np.array([False, True, True]), np.array([False, False, True]), np.array([True, False, False])] * 4
    base = (np.linspace(0.2, 0.9, 12), None, None, np.array([1, 0] * 6), conf, labels)
    r = report(SystemScores("a", *base, node_unfamiliar=marks), n_bootstrap=50)
    u = np.concatenate(marks)
    c, y = np.concatenate(conf)[u], np.concatenate(labels)[u]
    assert r["unfamiliar_nodes"] == 16 and r["unfamiliar_node_gap"][0] == pytest.approx(c.mean() - y.mean(), abs=1e-4)
    # the marked nodes: right at 0.7, wrong at 0.8, 0.2 and 0.5
    assert r["unfamiliar_node_auc"][0] == pytest.approx(2 / 3, abs=1e-4) and r["unfamiliar_node_auc"][1] is not None
    plain = report(SystemScores("b", *base), n_bootstrap=20)
    assert plain["unfamiliar_nodes"] == 0 and "unfamiliar_node_auc" not in plain
    assert "unfamiliar nodes" in markdown([r, plain])[0] and "unfamiliar" not in markdown([plain])[0]
    assert markdown([r, plain])[3].endswith("| 0 | – | – |")


def _scored_rows(system: str, n: int, offset: int = 0) -> list[dict]:
    """rat-score-shaped rows for the demo corpus's first ``n`` dev answers of demo_strong: one
    node per node of the predicted tree, so that each row can be labelled."""
    import rat
    from model.data.datasets import load_questions, load_schemas
    from model.data.predictions import load_predictions
    from model.synth.demo import demo_root

    root = demo_root()
    schemas = load_schemas(root)
    preds = load_predictions(root / "predictions" / "demo_strong.jsonl", load_questions(root, "dev"))
    rows = []
    for k, p in enumerate(preds[offset:offset + n]):
        size = len(rat.to_tree(p.sql, schemas[p.db_id]).postorder())
        rows.append({"question_id": p.question_id, "db_id": p.db_id, "sql": p.sql, "system": system,
                     "query_confidence": 0.3 + 0.05 * (k % 10), "nodes": [{"confidence": 0.8}] * size})
    return rows


def test_bad_rows_are_counted_and_hostile_system_names_are_only_labels(tmp_path, capsys, monkeypatch):
    """One bad row leaves out that row, counted by reason, never the file or its system; a system
    named like a path writes nothing outside the temporary folder and is reported by its name."""
    import tempfile

    from model.synth.demo import demo_root

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    hostile = "../" * 12 + str(tmp_path).lstrip("/") + "/PWNED"
    good = _scored_rows("ok", 12)
    bad = [{**good[0], "sql": None}, {k: v for k, v in good[1].items() if k != "sql"},
           {**good[2], "nodes": [{"label": "x"}] * len(good[2]["nodes"])},
           {**good[3], "query_confidence": "abc"}, {**good[4], "query_confidence": None},
           {**good[5], "question_id": "dev_99999"}]
    lines = [json.dumps(r) for r in good[:6]] + ["{not json", "[" * 100000] + [json.dumps(r) for r in bad]
    lines += [json.dumps(good[0])]  # a second row for dev_0: the first is kept
    lines += [json.dumps(r) for r in good[6:]]
    lines += [json.dumps(r) for r in _scored_rows(hostile, 3, 20) + _scored_rows("a/b", 2, 30)]
    scored = tmp_path / "scored.jsonl"
    scored.write_text("\n".join(lines) + "\n")
    result = _evaluate(**{"new_system.scored": scored, "data_root": demo_root(), "out_dir": tmp_path / "eval",
                          "n_bootstrap": 0})["new_system"]
    by_system = {r["system"]: r["queries"] for r in result["systems"]}
    assert by_system == {"ok": 12, hostile: 3, "a/b": 2}
    assert result["rows_skipped"] == {
        "not a JSON line": 2, "no sql (a string)": 2, "nodes not a list of objects with a confidence in [0, 1]": 1,
        "query_confidence not a number in [0, 1]": 2, "unknown question_id": 1,
        "duplicate question_id (the first kept)": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval", "scored.jsonl", "temp"]
    assert not any(temp.iterdir())
    err = capsys.readouterr().err
    assert f"{scored}: left out 9 of 26 rows: 2 not a JSON line, 2 no sql (a string)" in err
    assert ".jsonl" not in json.dumps(result["rows_skipped"])  # no temporary file is named


def test_an_undefined_auc_is_null_in_metrics_json(tmp_path):
    """One query: no AUC can be computed; metrics.json stays strict JSON (null, never NaN)."""
    from model.synth.demo import demo_root

    scored = tmp_path / "scored.jsonl"
    scored.write_text(json.dumps(_scored_rows("one", 1)[0]) + "\n")
    _evaluate(**{"new_system.scored": scored, "data_root": demo_root(), "out_dir": tmp_path / "eval",
                 "n_bootstrap": 5})

    def refuse(constant):
        raise ValueError(f"{constant} in metrics.json")

    (r,) = json.loads((tmp_path / "eval" / "metrics.json").read_text(), parse_constant=refuse)["systems"]
    assert r["query_auc"][0] is None


def test_rows_are_paired_with_questions_only_on_their_database(tmp_path, capsys):
    """A row whose db_id is not its question's is left out and counted; a file none of whose
    rows' db_id is its question's (another benchmark's, question ids alike) is one line."""
    from model.synth.demo import demo_root

    rows = _scored_rows("ok", 12)
    scored = tmp_path / "scored.jsonl"
    scored.write_text("".join(json.dumps({**r, "db_id": "elsewhere"} if k < 2 else r) + "\n"
                              for k, r in enumerate(rows)))
    result = _evaluate(**{"new_system.scored": scored, "data_root": demo_root(), "out_dir": tmp_path / "eval",
                          "n_bootstrap": 0})["new_system"]
    assert [(r["system"], r["queries"]) for r in result["systems"]] == [("ok", 10)]
    assert result["rows_skipped"] == {"db_id not its question's": 2}
    assert f"{scored}: left out 2 of 12 rows: 2 db_id not its question's" in capsys.readouterr().err
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps({**r, "db_id": f"other_{k % 4}"}) + "\n" for k, r in enumerate(rows)))
    with pytest.raises(UsageError, match=r"no row's db_id is its dev question's \(the rows' databases: other_0, "
                                         r"other_1, other_2 and 1 more\); give the data_root"):
        _evaluate(**{"new_system.scored": other, "data_root": demo_root(), "out_dir": tmp_path / "eval2"})
    assert not (tmp_path / "eval2").exists()


def test_a_system_the_model_was_fitted_on_is_said_to_be_in_sample(tmp_path, capsys):
    """Rows rat-score marked fitted_on_system with this benchmark's name: one line per such
    system, the table marks it and the heading no longer says the model was not fitted on it;
    marked with another benchmark's name: a line saying so, marked `in-sample?` (the folder's name
    is all there is to tell: a Spider download in `spider_data` was said to be another benchmark)."""
    from model.synth.demo import demo_root

    root = demo_root()
    rows = ([{**r, "fitted_on_system": root.name} for r in _scored_rows("seen", 6)]
            + [{**r, "fitted_on_system": "spider"} for r in _scored_rows("elsewhere", 6, 10)]
            + _scored_rows("new", 6, 20))
    scored = tmp_path / "scored.jsonl"
    scored.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = _evaluate(**{"new_system.scored": scored, "data_root": root, "out_dir": tmp_path / "eval",
                          "n_bootstrap": 0})["new_system"]
    by_system = {r["system"]: r for r in result["systems"]}
    assert by_system["seen"]["in_sample"] is True and by_system["seen"]["fitted_on_system"] == root.name
    assert by_system["elsewhere"]["in_sample"] is None and "in_sample" not in by_system["new"]
    out = capsys.readouterr().out
    assert out.startswith("# A model on systems it was not fitted on, and 1 it was fitted on (marked in-sample) "
                          "and 1 of a name it was fitted on elsewhere (marked: see the notes)")
    assert ("seen: the model was fitted on this system's outputs: in-sample numbers; see data.holdout_system / "
            "scripts/leave_one_system_out.py for out-of-fold ones") in out
    assert (f"elsewhere: the model was fitted on the outputs of a system of this name on spider: if {root.name} "
            "is spider's benchmark in another folder, these numbers are in-sample") in out
    assert "| seen (in-sample) | 6 |" in out and "| elsewhere (in-sample?) | 6 |" in out and "| new | 6 |" in out
    report = (tmp_path / "eval" / "report.md").read_text()
    assert "| seen (in-sample) |" in report and "seen: the model was fitted on" in report
    only = tmp_path / "only.jsonl"
    only.write_text("".join(json.dumps(r) + "\n" for r in rows[:6]))
    _evaluate(**{"new_system.scored": only, "data_root": root, "out_dir": tmp_path / "eval2", "n_bootstrap": 0})
    assert capsys.readouterr().out.startswith("# A model on systems it was fitted on (in-sample numbers)")


def test_a_system_of_a_fitted_name_on_a_benchmark_of_another_format_is_not_in_sample(tmp_path, capsys):
    """The shipped models were fitted on Spider dev outputs of systems named like BIRD's CodeS
    files: on a BIRD-layout data_root (model.data.datasets.is_bird) rows marked fitted_on_system
    `spider` are another benchmark's outputs, unmarked (in_sample false, one line saying why);
    marked with a BIRD folder's other name, it may be this benchmark elsewhere: `in-sample?`."""
    import shutil

    from model.synth.demo import demo_root

    demo = demo_root()
    root = tmp_path / "bird_copy"  # the demo's dev questions in BIRD's layout (no databases: tree labels)
    root.mkdir()
    dev = json.loads((demo / "dev.json").read_text())
    (root / "dev.json").write_text(json.dumps([{"db_id": q["db_id"], "question": q["question"], "SQL": q["query"],
                                                "evidence": "", "difficulty": "simple"} for q in dev]))
    shutil.copy(demo / "tables.json", root / "dev_tables.json")
    rows = ([{**r, "fitted_on_system": "spider"} for r in _scored_rows("codes", 6)]
            + [{**r, "fitted_on_system": "bird"} for r in _scored_rows("bird_seen", 6, 10)])
    scored = tmp_path / "scored.jsonl"
    scored.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = _evaluate(**{"new_system.scored": scored, "data_root": root, "out_dir": tmp_path / "eval",
                          "n_bootstrap": 0})["new_system"]
    by_system = {r["system"]: r for r in result["systems"]}
    assert by_system["codes"]["label"] == "tree" and by_system["codes"]["queries"] == 6
    assert by_system["codes"]["in_sample"] is False and by_system["codes"]["fitted_on_system"] == "spider"
    assert by_system["bird_seen"]["in_sample"] is None
    out = capsys.readouterr().out
    assert out.startswith("# A model on systems it was not fitted on, and 1 of a name it was fitted on elsewhere "
                          "(marked: see the notes)")
    assert ("codes: the model was fitted on the outputs of a system of this name on spider (Spider's format, by "
            "its name); bird_copy is in BIRD's: another benchmark's outputs, not in-sample") in out
    assert "| codes | 6 |" in out and "| bird_seen (in-sample?) | 6 |" in out
    only = tmp_path / "only.jsonl"
    only.write_text("".join(json.dumps(r) + "\n" for r in rows[:6]))
    _evaluate(**{"new_system.scored": only, "data_root": root, "out_dir": tmp_path / "eval2", "n_bootstrap": 0})
    out = capsys.readouterr().out
    assert out.startswith("# A model on systems it was not fitted on: ") and "(in-sample" not in out
