"""rat-calibrate: a saved model's node and whole-query calibrators fitted again on a few labelled
outputs (their gold SQL); the node model and the site head are untouched, so rankings stay and
only the confidences move toward what the labels say. Mistakes are one line and exit code 2;
the databases are never changed."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from model import metrics as M
from model.calibrators import QueryCalibrator
from model.data.datasets import load_questions
from model.nodes.estimator import BoostedNodeModel
from model.scoring import RowError, Scorer
from model.scoring.recalibrate import RecalibrationError, recalibrate
from tests.test_scorer import _rows, boosted_model  # noqa: F401  (the fixture)

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def rat_calibrate(*args: str) -> subprocess.CompletedProcess:
    """The console script, as installed by ``pip install -e .``."""
    return subprocess.run([str(Path(sys.executable).parent / "rat-calibrate"), *args], check=False,
                          capture_output=True, text=True, env=ENV, timeout=600)


def _labelled(table, indices, with_database=True):
    golds = {q.question_id: q.gold_sql for q in load_questions(table.root, "dev")}
    rows = _rows(table, indices, with_database)
    for row, k in zip(rows, indices):
        row["gold"] = golds[table.examples[k].question_id]
    return rows


def _scores(model, rows):
    results = Scorer(model).score_many(rows, progress=False, spans=False)
    assert not [r for r in results if isinstance(r, RowError)]
    return results


def test_recalibration_moves_an_overconfident_model_to_its_labels_and_keeps_its_rankings(boosted_model):  # noqa: F811
    folder, objects = boosted_model
    table = objects["table"]
    model = BoostedNodeModel.load(folder)
    # the model as a user might meet it elsewhere: raw node probabilities, and whole queries far
    # too confident (the calibrators of another benchmark)
    overconfident = BoostedNodeModel.from_parts(model.node_model_, model.site_model_, None, QueryCalibrator([0.3], 3.0),
                                                model.features_, model.typical_, model.info_, model.without_database_)
    order = np.random.default_rng(0).permutation(len(table.examples))
    fit_on, held_out = order[:80], order[80:]
    result = recalibrate(overconfident, _labelled(table, fit_on), progress=False)
    assert result.queries == 80 and result.labels == {"execution": 80}
    assert result.right_queries == sum(table.examples[k].correct for k in fit_on)
    # the policy's thresholds were chosen on the old confidences: a refitted model has none
    assert "policy" in model.info_ and result.refitted and "policy" not in result.model.info_
    test = _labelled(table, held_out)
    before, after = _scores(overconfident, test), _scores(result.model, test)
    correct = np.array([table.examples[k].correct for k in held_out])
    labels = np.concatenate([table.examples[k].node_labels for k in held_out])

    def nodes(results):
        return np.concatenate([[n.confidence for n in r.nodes] for r in results])

    def queries(results):
        return np.array([r.query_confidence for r in results])

    assert M.ece(queries(after), correct) < 0.5 * M.ece(queries(before), correct)
    assert M.ece(nodes(after), labels) < M.ece(nodes(before), labels)
    # monotone maps: the same node ranking, the same site scores, the same "look here first"
    assert M.auc(nodes(after), labels) == pytest.approx(M.auc(nodes(before), labels), abs=1e-9)
    assert [r.look_here_first for r in after] == [r.look_here_first for r in before]
    assert result.model.node_model_ is model.node_model_ and result.model.site_model_ is model.site_model_
    card = result.model.info_["recalibrated_on"]
    assert card["queries"] == 80 and card["before"]["query_ece"] > 0.1 and "recalibrated_on" not in model.info_
    assert result.refitted == ["all"]  # chosen: the refit predicts the outputs far better
    assert result.model.query_label == "execution"  # what its confidences are now fitted to
    # a model calibrated on these outputs already keeps its calibrators (the default), or is refitted on asking
    again = recalibrate(result.model, _labelled(table, fit_on[:40]), progress=False)
    assert again.refitted == [] and again.model.query_calibrator_ is result.model.query_calibrator_
    assert recalibrate(result.model, _labelled(table, fit_on[:40]), select=False, progress=False).refitted == ["all"]


def test_rows_without_a_database_refit_the_calibrators_used_without_one():
    model = Scorer.pretrained().saved
    assert model.without_database_ is not None  # trained for both (model.database=dropout)
    gold = "SELECT name FROM singer WHERE age > 40"
    rows = [{"sql": sql, "gold": gold, "question": "Names of singers older than 40?"}
            for sql in (gold, "SELECT name FROM singer WHERE age < 40", "SELECT age FROM singer",
                        "SELECT name FROM singer", gold)]
    result = recalibrate(model, rows, select=False, progress=False)
    assert result.labels == {"tree": 5} and result.right_queries == 2 and result.refitted == ["without database"]
    new = result.model
    assert new.calibrator_ is model.calibrator_ and new.query_calibrator_ is model.query_calibrator_
    assert new.without_database_[1] != model.without_database_[1]
    # the pair used without a database is fitted on tree labels now; the one used with a database
    # (and query_label, which names it) still means execution match
    assert model.query_label == "execution" and new.query_label == "execution"
    from model.label_shift import query_label_for

    assert query_label_for(new, False) == "tree" and query_label_for(new, True) == "execution"


def test_given_labels_and_rows_that_cannot_be_labelled(boosted_model):  # noqa: F811
    folder, objects = boosted_model
    table = objects["table"]
    model = BoostedNodeModel.load(folder)
    rows = _labelled(table, range(30))
    rows[0]["correct"] = not table.examples[0].correct  # the user's label wins over execution
    rows[1]["gold"] = ""
    rows[2]["gold"] = "SELEKT nothing"
    rows[3]["sql"] = "not sql at all"
    rows[4]["correct"], rows[5]["correct"] = "maybe", 2  # no label to guess at: counted, not run instead
    result = recalibrate(model, rows, progress=False)
    assert result.labels == {"given": 1, "execution": 24} and result.queries == 25
    assert result.errors["no gold SQL"] == 1 and result.errors["gold SQL fails to execute"] == 1
    assert result.errors["malformed correct (true/false or 1/0)"] == 2 and sum(result.errors.values()) == 5
    by_tree = recalibrate(model, rows, labels="tree", progress=False)  # gold is parsed, not run
    assert by_tree.labels == {"tree": 25} and by_tree.errors["unparsable gold SQL"] == 1
    right = [r for k, r in enumerate(_labelled(table, range(len(table.examples)))) if table.examples[k].correct
             and len(set(table.examples[k].node_labels)) == 1][:10]
    with pytest.raises(RecalibrationError, match="only right nodes"):
        recalibrate(model, right, progress=False)
    with pytest.raises(RecalibrationError, match="none of the 2 rows"):
        recalibrate(model, [{"sql": "SELECT 1"}, {"sql": "SELECT 2", "gold": None}], progress=False)


def test_correct_may_be_written_as_0_1_or_true_false(boosted_model):  # noqa: F811
    folder, objects = boosted_model
    table = objects["table"]
    model = BoostedNodeModel.load(folder)
    rows = _labelled(table, range(8))
    ways = [(True, False), (1, 0), (1.0, 0.0), ("true", "false"), ("TRUE", "False"), (" True ", "FALSE"),
            ("1", "0"), (np.int64(1), np.int64(0))]
    for row, k, (right, wrong) in zip(rows, range(8), ways):
        row["correct"] = right if table.examples[k].correct else wrong
    result = recalibrate(model, rows, progress=False)
    assert result.labels == {"given": 8} and not result.errors
    assert result.right_queries == sum(table.examples[k].correct for k in range(8))


def test_outputs_that_are_all_wrong_keep_the_whole_query_calibrator(boosted_model):  # noqa: F811
    folder, objects = boosted_model
    table = objects["table"]
    model = BoostedNodeModel.load(folder)
    wrong = [k for k, e in enumerate(table.examples) if not e.correct and len(set(e.node_labels)) == 2][:20]
    result = recalibrate(model, _labelled(table, wrong), progress=False, select=False)
    assert result.right_queries == 0 and result.refitted == result.query_kept == ["all"]  # (one pair)
    assert result.model.query_calibrator_ == model.query_calibrator_  # not a constant near 0
    assert result.model.calibrator_ != model.calibrator_  # the node calibrator is refitted


def test_rat_calibrate_reads_gold_from_the_questions_and_leaves_the_databases_alone(boosted_model, tmp_path):  # noqa: F811
    folder, objects = boosted_model
    root = objects["table"].root
    file = min((root / "predictions").glob("*.jsonl"))
    bad = tmp_path / "labelled.jsonl"
    first = file.read_text().splitlines()[0] + "\n"  # a question's second row: its label not counted twice
    bad.write_text(file.read_text() + first + "{not json\n" + json.dumps({"db_id": "no_such_db", "sql": "SELECT 1"}) + "\n")
    databases = sorted((root / "database").rglob("*.sqlite"))
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in databases}
    out = tmp_path / "calibrated"
    done = rat_calibrate("--model", str(folder), "--data-root", str(root), "--predictions", str(bad),
                         "--out", str(out))
    assert done.returncode == 0, done.stderr
    summary, diagnosis = done.stderr.strip().splitlines()[-2:]
    n = len(file.read_text().splitlines())
    assert f"{n} labelled outputs" in summary and "execution" in summary
    assert "calibrators kept" in summary  # the demo model was calibrated on these very outputs
    assert "not used: 3" in summary and "duplicate question_id 1" in summary, summary
    assert diagnosis.startswith("rat-calibrate: before, on these outputs: mean whole-query confidence")
    assert json.loads((out / "model.json").read_text())["recalibrated_on"]["queries"] == n
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in databases} == before
    scored = Scorer.load(out).score_many(_rows(objects["table"], range(5)), progress=False)
    assert not [r for r in scored if isinstance(r, RowError)]


@pytest.mark.parametrize("which, message", [
    ("no gold", "--predictions: none of the 2 rows could be labelled (no gold SQL 2)"),
    ("no db_id", "--predictions: no row to label; left out: 2 (no db_id 2)"),
    ("missing file", "--predictions /no/such.jsonl: no such file"),
    ("out is a file", "exists and is not a model directory"),
    ("out is the shipped model", "a model this command reads (not overwritten"),
])
def test_rat_calibrate_mistakes_are_one_line_and_exit_2(which, message, tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"question": "How many?", "sql": f"SELECT count(*) FROM t{i}"}) + "\n"
                            for i in range(2)))
    out = tmp_path / "m"
    if which == "out is a file":
        out.write_text("keep me")
    if which == "out is the shipped model":  # rat-calibrate's default --model
        from model.scoring.scorer import PRETRAINED

        out = PRETRAINED["spider"]
        before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    if which == "no db_id":  # (with a benchmark's schemas, a row names its database)
        from model.synth.demo import demo_root

        rows.write_text("".join(json.dumps({"question": "How many?", "sql": "SELECT 1", "gold": "SELECT 1"}) + "\n"
                                for _ in range(2)))
    done = rat_calibrate("--predictions", "/no/such.jsonl" if which == "missing file" else str(rows),
                         "--out", str(out), *(["--data-root", str(demo_root())] if which == "no db_id" else []))
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr, done.stderr
    if which == "out is the shipped model":
        assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    else:
        assert (out.read_text() == "keep me") if which == "out is a file" else not out.exists()


def _singers(path: Path) -> None:
    import duckdb

    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, age INTEGER)")
        conn.execute("INSERT INTO singer VALUES (1, 'Ann', 52), (2, 'bob', 38), (3, 'Cleo', 41), (4, 'Dan', 40)")


# (prediction, gold): right by execution on _singers' rows in rows 0, 1 and 3; the last gold fails
LIVE = [("SELECT name FROM singer WHERE age > 40", "SELECT name FROM singer WHERE age > 40"),
        ("SELECT name FROM singer WHERE age >= 41", "SELECT name FROM singer WHERE age > 40"),
        ("SELECT name FROM singer WHERE age < 40", "SELECT name FROM singer WHERE age > 40"),
        ("SELECT name FROM singer WHERE name ILIKE 'b%'", "SELECT name FROM singer WHERE lower(name) LIKE 'b%'"),
        ("SELECT name FROM singer", "SELECT nickname FROM singer")]


def test_execution_labels_come_from_a_live_database_in_its_dialect(tmp_path):
    """Rows on a DuckDB file (a URL, a PostgreSQL or MySQL database alike) are labelled by
    running both queries there, read-only, each in its dialect: `age >= 41` is right where
    tree comparison says wrong; rat-calibrate --database does the same from a shell."""
    pytest.importorskip("duckdb")
    path = tmp_path / "singers.duckdb"
    _singers(path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    rows = [{"sql": sql, "gold": gold, "question": "Singers older than 40?", "database": path}
            for sql, gold in LIVE]
    model = Scorer.pretrained().saved
    result = recalibrate(model, rows, select=False, progress=False)
    assert result.labels == {"execution": 4} and result.right_queries == 3
    assert result.errors == {"gold SQL fails to execute": 1} and result.model.query_label == "execution"
    by_tree = recalibrate(model, rows, labels="tree", select=False, progress=False)
    assert by_tree.right_queries == 1  # the same rows, compared as trees
    labelled = tmp_path / "labelled.jsonl"
    labelled.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "database"}) + "\n" for r in rows))
    done = rat_calibrate("--database", str(path), "--predictions", str(labelled), "--out", str(tmp_path / "out"),
                         "--always-refit")
    assert done.returncode == 0, done.stderr
    summary, diagnosis = done.stderr.strip().splitlines()[-2:]
    assert "4 labelled outputs" in summary and "labels: execution 4" in summary and "not used: 1" in summary
    assert "75.0% right" in diagnosis
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


def test_rat_calibrate_on_a_full_disk_is_one_line_and_keeps_the_old_model(boosted_model, tmp_path, full_disk,  # noqa: F811
                                                                         capsys):
    """A model that cannot be written is one line, exit 2; a model folder given as --out is kept
    as it was, not half overwritten, and a new one is not made."""
    import shutil

    from model.scoring.cli import calibrate_main

    folder, objects = boosted_model
    root = objects["table"].root
    file = min((root / "predictions").glob("*.jsonl"))

    old = tmp_path / "old"
    shutil.copytree(folder, old)
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in old.iterdir()}
    for out in (old, tmp_path / "new"):
        assert calibrate_main(["--model", str(folder), "--data-root", str(root), "--predictions", str(file),
                               "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1] == f"rat-calibrate: error: --out {out}: cannot be written (No space left on device)", err
        assert not any("Traceback" in line for line in err)
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in old.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["old"]


def test_rows_no_reader_took_are_counted_when_none_can_be_labelled(tmp_path, capsys):
    """A file of a line that is not UTF-8 and a row without gold: the one line says both (it said
    'none of the 1 rows could be labelled', the unread line not counted)."""
    from model.scoring.cli import calibrate_main

    schema = tmp_path / "shop.sql"
    schema.write_text("CREATE TABLE singer (name text, age int);\n")
    file = tmp_path / "rows.jsonl"
    file.write_bytes(b'{"sql": "SELECT name FROM singer", "db_id": "shop"}\n\xff\xfe not text\n')
    assert calibrate_main(["--schema", str(schema), "--predictions", str(file), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("rat-calibrate: error: --predictions: none of the 1 rows could be labelled"), err
    assert "left out before: 1 (" in err[-1], err


def singers_sqlite(path: Path) -> Path:
    """A SQLite file of 40 singers (ages 21 to 60)."""
    import sqlite3

    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, age INTEGER, country TEXT)")
        conn.executemany("INSERT INTO singer VALUES (?, ?, ?, ?)",
                         [(k, f"s{k}", 20 + k, "FR" if k % 2 else "US") for k in range(1, 41)])
    conn.close()
    return path


def test_one_labelled_query_keeps_the_calibrators_by_default(tmp_path):
    """One confident wrong query refitted the shipped model's calibrators (the cross-fit's single
    fold had no training query and was scored 0.5, which beats a confident wrong answer): its
    confidences fell to a fifth. Under MIN_QUERIES labelled queries a pair is kept, and says why."""
    from model.scoring import recalibrate as R

    database = singers_sqlite(tmp_path / "singers.sqlite")
    model = Scorer.pretrained().saved
    wrong = [{"sql": "SELECT name FROM singer WHERE age < 40", "gold": "SELECT name FROM singer WHERE age > 40",
              "question": "Names of singers older than 40?", "database": database}]
    result = recalibrate(model, wrong, progress=False)
    assert result.labels == {"execution": 1} and result.right_queries == 0
    assert result.refitted == [] and result.model.calibrator_ is model.calibrator_
    assert result.model.query_calibrator_ is model.query_calibrator_ and "policy" in result.model.info_
    assert result.kept == {"with database": f"1 labelled output, fewer than {R.MIN_QUERIES}"}
    assert "fewer than 10" in result.outcome and "\n" not in result.outcome
    # a fold with nothing to fit on is the model's own confidence, not 0.5
    raw = [model.raw_node_probability(Scorer(model).score_many(wrong, progress=False)[0].features)]
    y = [np.array([1, 1, 0, 1][:len(raw[0])])]
    assert R._cross_fitted(raw, y, np.array([0]), "platt", model.query_calibrator_, np.array([0.9])).tolist() == [0.9]
    # --always-refit refits on any number
    assert recalibrate(model, wrong, select=False, progress=False).refitted == ["with database"]


def test_each_calibrator_pair_keeps_its_own_label_and_rate(tmp_path):
    """A refit of one pair (here the one used without a database, on tree labels) leaves the other
    pair's label and rate as they were; both survive a save and a load."""
    from model import label_shift as L

    model = Scorer.pretrained().saved
    gold = "SELECT name FROM singer WHERE age > 40"
    rows = [{"sql": sql, "gold": gold, "question": "Names of singers older than 40?"}
            for sql in (gold, "SELECT name FROM singer WHERE age < 40", "SELECT age FROM singer",
                        "SELECT name FROM singer", gold)]
    new = recalibrate(model, rows, select=False, progress=False).model
    shipped_rate = L.source_rate(model)
    new.save(tmp_path / "m")
    for loaded in (new, BoostedNodeModel.load(tmp_path / "m")):
        assert loaded.query_label == "execution"  # the pair used with a database: not refitted
        assert L.query_label_for(loaded, True) == "execution" and L.query_label_for(loaded, False) == "tree"
        assert L.source_rate(loaded, True) == pytest.approx(shipped_rate)
        assert L.source_rate(loaded, False) == (pytest.approx(2 / 5), "tree")
        assert loaded.info_["recalibrated_on"]["pairs"] == {
            "without database": {"queries": 5, "right_queries": 2, "label": "tree"}}
