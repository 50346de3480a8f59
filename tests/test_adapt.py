"""rat-adapt: a single-system model fitted again on a consensus teacher's reading of a user's
unlabelled outputs (several systems on the same questions); it then scores one query alone.
Features are computed once for both models; mistakes are one line and exit code 2; the
databases are never changed."""

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from model.nodes.estimator import BoostedNodeModel
from model.scoring import RowError, Scorer
from model.scoring.adapt import AdaptError, adapt
from tests.test_scorer import _rows, boosted_model, consensus_model  # noqa: F401  (the fixtures)

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def rat_adapt(*args: str) -> subprocess.CompletedProcess:
    """The console script, as installed by ``pip install -e .``."""
    return subprocess.run([str(Path(sys.executable).parent / "rat-adapt"), *args], check=False,
                          capture_output=True, text=True, env=ENV, timeout=900)


def _with_systems(table, indices, with_database=False):
    rows = _rows(table, indices, with_database)
    for row, k in zip(rows, indices):
        row.update(question_id=table.examples[k].question_id, system=table.examples[k].system)
    return rows


def _confidences(results) -> np.ndarray:
    assert not [r for r in results if isinstance(r, RowError)]
    return np.concatenate([[n.confidence for n in r.nodes] for r in results])


def test_scoring_returns_another_models_features_as_that_model_computes_them(boosted_model, consensus_model):  # noqa: F811
    (single_dir, objects), (teacher_dir, _) = boosted_model, consensus_model
    rows = _with_systems(objects["table"], range(60), with_database=True)
    single = Scorer.load(single_dir)
    own = single.score_many(rows, progress=False, spans=False)
    other = Scorer.load(teacher_dir).score_many(rows, progress=False, spans=False, features=single.saved.features_)
    for a, b in zip(own, other):
        assert b.features.shape == a.features.shape and np.array_equal(a.features, b.features, equal_nan=True)
    # the teacher's own scores are the same with or without the extra columns
    plain = Scorer.load(teacher_dir).score_many(rows, progress=False, spans=False)
    assert np.array_equal(_confidences(plain), _confidences(other))


def test_the_adapted_model_learns_the_teachers_reading_and_scores_one_query_alone(boosted_model, consensus_model):  # noqa: F811
    (single_dir, objects), (teacher_dir, _) = boosted_model, consensus_model
    table = objects["table"]
    rows = _with_systems(table, range(len(table.examples)))
    base, teacher = BoostedNodeModel.load(single_dir), BoostedNodeModel.load(teacher_dir)
    result = adapt(base, teacher, rows, progress=False, hgb={**base.info_["config"]["hgb"], "max_iter": 200})
    assert result.queries == len(rows) and len(result.systems) == 3
    assert result.shared_questions == len({e.question_id for e in table.examples})
    taught = _confidences(Scorer(teacher).score_many(rows, progress=False, spans=False))
    alone = [{k: v for k, v in r.items() if k not in ("question_id", "system")} for r in rows]  # one query at a time
    before = _confidences(Scorer(base).score_many(alone, progress=False, spans=False))
    after = _confidences(Scorer(result.model).score_many(alone, progress=False, spans=False))
    # closer to the teacher than the model it started from (the teacher reads the other systems)
    assert np.mean(np.abs(after - taught)) < 0.75 * np.mean(np.abs(before - taught))
    info = result.model.info_
    assert info["method"].endswith("adapted") and info["trained_on"]["adapted_on"]["outputs"] == len(rows)
    assert info["base_model"]["trained_on"] == base.info_["trained_on"] and info["metrics"] == {}
    assert result.model.query_label == teacher.query_label == "execution"  # it learnt the teacher's confidence
    assert len(result.model.node_model_._predictors) == 200  # the settings given
    assert result.model.site_model_ is not base.site_model_  # fitted again, on the teacher's site scores


def test_a_teacher_must_read_the_other_answers_and_the_outputs_must_share_questions(boosted_model, consensus_model):  # noqa: F811
    (single_dir, objects), (teacher_dir, _) = boosted_model, consensus_model
    rows = _with_systems(objects["table"], range(40))
    single, teacher = BoostedNodeModel.load(single_dir), BoostedNodeModel.load(teacher_dir)
    with pytest.raises(AdaptError, match="teacher reads one system"):
        adapt(single, single, rows, progress=False)
    with pytest.raises(AdaptError, match="adapt a single-system model"):
        adapt(teacher, teacher, rows, progress=False)
    one_system = [r for r in rows if r["system"] == rows[0]["system"]]
    with pytest.raises(AdaptError, match="two or more systems"):
        adapt(single, teacher, one_system, progress=False)


def test_rat_adapt_writes_a_model_rat_score_reads_and_leaves_the_databases_alone(boosted_model, consensus_model, tmp_path):  # noqa: F811
    (single_dir, objects), (teacher_dir, _) = boosted_model, consensus_model
    root = objects["table"].root
    files = sorted((root / "predictions").glob("*.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(files[0].read_text() + "{not json\n" + json.dumps({"db_id": "no_such_db", "sql": "SELECT 1"}) + "\n")
    databases = sorted((root / "database").rglob("*.sqlite"))
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in databases}
    out = tmp_path / "adapted"
    done = rat_adapt("--model", str(single_dir), "--teacher", str(teacher_dir), "--data-root", str(root),
                     "--predictions", str(bad), *map(str, files[1:]), "--out", str(out), "--label-shift")
    assert done.returncode == 0, done.stderr
    summary, rates = done.stderr.strip().splitlines()[-2:]
    n = sum(len(p.read_text().splitlines()) for p in files)
    assert f"adapted on {n} outputs" in summary and "not used: 2" in summary, summary
    assert re.search(rf"-> {out} in \d+ s;", summary), summary  # (the fit is long and silent)
    adapted_on = json.loads((out / "model.json").read_text())["trained_on"]["adapted_on"]
    assert "policy" not in json.loads((out / "model.json").read_text())  # chosen for the base model's confidences
    assert rates.startswith("rat-adapt: right nodes") and adapted_on["estimated_rates"]
    shift = adapted_on["label_shift"]  # the right queries' estimate, printed with its interval
    assert shift["low"] <= shift["rate"] == adapted_on["estimated_rates"][1] <= shift["high"]
    assert f"[95% {shift['low']:.1%}, {shift['high']:.1%}]" in rates
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in databases} == before
    scored = subprocess.run([sys.executable, "-m", "model.scoring.cli", "--model", str(out), "--data-root", str(root),
                             "--no-reasons", "--predictions", str(files[0]), "--out", str(tmp_path / "s.jsonl")],
                            check=False, capture_output=True, text=True, env=ENV, timeout=600)
    assert scored.returncode == 0, scored.stderr
    assert "adapted" in scored.stderr and len((tmp_path / "s.jsonl").read_text().splitlines()) == len(
        files[0].read_text().splitlines())


def test_rat_adapt_moves_no_rate_unless_asked():
    """Label shift is opt-in: measured on Spider dev, it put the rate of right queries far off."""
    from model.scoring.cli import build_adapt_parser

    required = ["--predictions", "a.txt", "b.txt", "--out", "adapted"]
    assert build_adapt_parser().parse_args(required).label_shift is False
    assert build_adapt_parser().parse_args([*required, "--label-shift"]).label_shift is True


@pytest.mark.parametrize("which, message", [
    ("single teacher", ": the teacher reads one system's answer alone"),
    ("one file", "--predictions: 0 questions are answered by two or more systems; at least 20"),
    ("one file twice", "the same outputs twice"),
    ("missing file", "--predictions /no/such.jsonl: no such file"),
    ("no model", "--model /no/such/model"),
    ("no teacher", "--teacher pretrained:nope"),
    ("out is the model", "a model this command reads (not overwritten"),
    ("out unwritable", "cannot be written"),
    ("wrong columns", "--predictions: no output to adapt on; left out: 40 (no sql field 40)"),
])
def test_rat_adapt_mistakes_are_one_line_and_exit_2(which, message, boosted_model, consensus_model, tmp_path):  # noqa: F811
    (single_dir, objects), (teacher_dir, _) = boosted_model, consensus_model
    root = objects["table"].root
    files = [str(p) for p in sorted((root / "predictions").glob("*.jsonl"))]
    args = {"single teacher": ["--teacher", str(single_dir), "--predictions", *files],
            "one file": ["--teacher", str(teacher_dir), "--predictions", files[0]],
            "one file twice": ["--teacher", str(teacher_dir), "--predictions", files[0], files[0]],
            "no teacher": ["--teacher", "pretrained:nope", "--predictions", *files],
            "out is the model": ["--teacher", str(teacher_dir), "--predictions", *files, "--out", str(single_dir)],
            "out unwritable": ["--teacher", str(teacher_dir), "--predictions", *files,
                               "--out", str(tmp_path / "file" / "m")],
            "missing file": ["--teacher", str(teacher_dir), "--predictions", "/no/such.jsonl"],
            "no model": ["--model", "/no/such/model", "--teacher", str(teacher_dir), "--predictions", *files]
            }.get(which, [])
    if which not in ("no model", "wrong columns"):
        args = ["--model", str(single_dir), *args]
    (tmp_path / "file").write_text("a file where --out wants a folder")
    if which == "wrong columns":  # {id, db, query}: not the {question_id, db_id, sql} rows read
        renamed = []
        for k in range(2):
            renamed.append(tmp_path / f"system{k}.jsonl")
            renamed[-1].write_text("".join(json.dumps({"id": i, "db": "x", "query": f"SELECT {k}"}) + "\n"
                                           for i in range(20)))
        args = ["--model", str(single_dir), "--teacher", str(teacher_dir), "--predictions", *map(str, renamed)]
    done = rat_adapt(*args, "--data-root", str(root), *(() if "--out" in args else ("--out", str(tmp_path / "m"))))
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr, done.stderr
    assert not (tmp_path / "m").exists()


def test_rat_adapt_on_a_full_disk_is_one_line_and_keeps_the_old_model(boosted_model, consensus_model, tmp_path,  # noqa: F811
                                                                     full_disk, capsys):
    """A model that cannot be written is one line, exit 2; a model folder given as --out is kept
    as it was, not half overwritten."""
    import shutil

    from model.scoring.cli import adapt_main

    (single_dir, objects), (teacher_dir, _) = boosted_model, consensus_model
    root = objects["table"].root

    out = tmp_path / "adapted"
    shutil.copytree(single_dir, out)
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.iterdir()}
    assert adapt_main(["--model", str(single_dir), "--teacher", str(teacher_dir), "--data-root", str(root),
                       "--predictions", *map(str, sorted((root / "predictions").glob("*.jsonl"))),
                       "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"rat-adapt: error: --out {out}: cannot be written (No space left on device)", err
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["adapted"]


def _system_files(tmp_path: Path, db_id: str, n: int, systems=("a", "b")) -> list[str]:
    """One JSONL file per system, each answering the same ``n`` questions on ``db_id`` (by their gold SQL)."""
    from tests.test_score_cli import _demo_rows, _write_rows

    return [str(_write_rows(tmp_path / f"{s}.jsonl", _demo_rows(db_id, n, system=s))) for s in systems]


def _stopped_adapt(monkeypatch) -> list:
    """``model.scoring.adapt.adapt`` replaced by one that keeps the rows rat-adapt gives it and
    stops there (its fit takes minutes)."""
    given = []

    def stop(model, teacher, rows, **kwargs):
        given.append(list(rows))
        raise AdaptError("stopped here")

    monkeypatch.setattr("model.scoring.adapt.adapt", stop)
    return given


def test_rat_adapt_names_the_model_option_at_fault(tmp_path, capsys):
    """A single-system --teacher and a consensus --model were said to be mistakes of --predictions."""
    from model.scoring.cli import adapt_main
    from tests.test_score_cli import _demo_database

    common = ["--database", _demo_database("library"), "--predictions", *_system_files(tmp_path, "library", 20),
              "--out", str(tmp_path / "m")]
    for option, says in ((["--teacher", "pretrained"], "--teacher pretrained: the teacher reads one system's answer alone"),
                         (["--model", "pretrained:spider_consensus"],
                          "--model pretrained:spider_consensus: the model to adapt reads other systems' answers")):
        assert adapt_main([*option, *common]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"rat-adapt: error: {says}" in err, err
    assert not (tmp_path / "m").exists()


def test_an_empty_database_is_named_by_rat_adapt_and_rat_calibrate(tmp_path, capsys):
    """An empty .sqlite as --database: rat-calibrate said '--predictions: none of the 12 rows could
    be labelled (schema: no tables)'; now both commands name --database, in one line."""
    import sqlite3

    from model.scoring.cli import adapt_main, calibrate_main
    from tests.test_score_cli import _demo_rows, _write_rows

    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()
    labelled = _write_rows(tmp_path / "labelled.jsonl", [{**r, "gold": r["sql"]} for r in _demo_rows("library", 12)])
    for main, files in ((calibrate_main, [str(labelled)]), (adapt_main, _system_files(tmp_path, "library", 20))):
        assert main(["--database", str(empty), "--predictions", *files, "--out", str(tmp_path / "m")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"error: --database {empty}: no tables" in err, err


def test_rat_adapt_refuses_outputs_most_of_which_read_tables_the_database_lacks(tmp_path, capsys, monkeypatch):
    """Outputs on one database adapted on against another (--database of the wrong file): the
    teacher read every one as 'not in the schema' and the model was fitted on that, silently;
    now one line, exit 2, before any fit. The tables are those the teacher's scoring read: each
    output is parsed once (a check of its own parsed every output first, then the teacher again)."""
    from model.scoring.cli import adapt_main
    from tests.test_score_cli import _demo_database

    fits = []

    def stop(*args, **kwargs):  # (the fit takes minutes)
        fits.append(args)
        raise AdaptError("stopped at the fit")

    def parsed_again(*args):
        raise AssertionError("the outputs parsed for their tables beside the teacher's scoring")

    monkeypatch.setattr("model.nodes.estimator.fit_classifier", stop)
    monkeypatch.setattr("model.scoring.cli._tables_read", parsed_again)
    files = _system_files(tmp_path, "library", 20)
    clinic = _demo_database("clinic")
    assert adapt_main(["--database", clinic, "--predictions", *files, "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"rat-adapt: error: --predictions: 40 of 40 outputs read only tables --database {clinic} "
                       "lacks (the schema of these outputs?)"), err
    assert not [line for line in err if "error" in line or "adapt:" in line][:-1], err  # (one line; no fit begun)
    assert fits == [] and not (tmp_path / "m").exists()
    assert adapt_main(["--database", _demo_database("library"), "--predictions", *files,
                       "--out", str(tmp_path / "m")]) == 2  # their own database: on to the fit
    assert "--predictions: stopped at the fit" in capsys.readouterr().err and len(fits) == 1
    assert not (tmp_path / "m").exists()


def test_rat_adapt_reads_rows_without_a_question_id_by_db_id_and_question(tmp_path, capsys, monkeypatch):
    """docs/scoring.md: rat-adapt reads JSONL rows {question_id | question, db_id, sql}; rows
    without a question_id were each a question of their own ('0 questions are answered by two or
    more systems'): now grouped by db_id and question, as --choose groups them, a question_id
    of a row of the same question lent to the others."""
    from model.scoring.cli import adapt_main
    from tests.test_score_cli import _demo_database, _demo_rows, _write_rows

    given = _stopped_adapt(monkeypatch)
    a, b = _demo_rows("library", 20, system="a"), _demo_rows("library", 20, system="b")
    b[0]["question_id"] = "mine_0"  # one system's row with an id: the other system's row of it takes that id
    files = [str(_write_rows(tmp_path / "a.jsonl", a)), str(_write_rows(tmp_path / "b.jsonl", b))]
    assert adapt_main(["--database", _demo_database("library"), "--predictions", *files,
                       "--out", str(tmp_path / "m")]) == 2
    assert "stopped here" in capsys.readouterr().err
    systems: dict = {}
    for row in given[0]:
        systems.setdefault(row.get("question_id"), set()).add(row["system"])
    assert None not in systems and len(systems) == len({r["question"] for r in a}), systems
    assert all(s == {"a", "b"} for s in systems.values()) and systems["mine_0"] == {"a", "b"}


def test_rows_given_twice_without_a_question_id_are_read_once(tmp_path, capsys, monkeypatch):
    """rat-calibrate counted an exact duplicate row without a question_id twice (40 rows twice:
    '80 labelled outputs'), as rat-adapt read it twice: one is read, the other counted."""
    from model.errors import RecalibrationError
    from model.scoring.cli import calibrate_main
    from tests.test_score_cli import _demo_database, _demo_rows, _write_rows

    given = []

    def stop(model, rows, **kwargs):
        given.append(list(rows))
        raise RecalibrationError("stopped here")

    monkeypatch.setattr("model.scoring.recalibrate.recalibrate", stop)
    rows = [{**r, "gold": r["sql"]} for r in _demo_rows("library", 10)]
    other = {**rows[0], "sql": rows[0]["sql"] + " LIMIT 1"}  # the same question, another query: kept
    labelled = _write_rows(tmp_path / "labelled.jsonl", rows + rows + [other])
    assert calibrate_main(["--database", _demo_database("library"), "--predictions", str(labelled),
                           "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert "--predictions: stopped here; left out before: 10 (duplicate row 10)" in err, err
    assert len(given[0]) == 11


def test_rat_adapt_says_why_label_shift_moved_nothing(tmp_path, capsys, monkeypatch):
    """rat-adapt --label-shift on 90 outputs (under 100) moved no rate, silently: the reason
    adapt gives (Adaptation.not_shifted) is printed."""
    from model.scoring import Scorer
    from model.scoring.adapt import Adaptation
    from model.scoring.cli import adapt_main
    from tests.test_score_cli import _demo_database

    single = Scorer.pretrained().saved
    why = "label shift: 40 outputs scored, fewer than 100: no rate estimated, the teacher's confidences not moved"
    monkeypatch.setattr("model.scoring.adapt.adapt", lambda model, teacher, rows, **kwargs: Adaptation(
        single, len(rows), 0, 20, 20, {"a": 20, "b": 20}, not_shifted=why))
    assert adapt_main(["--database", _demo_database("library"), "--predictions", *_system_files(tmp_path, "library", 20),
                       "--out", str(tmp_path / "m"), "--label-shift"]) == 0
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"rat-adapt: {why}"


def test_a_label_shift_that_does_not_fit_is_not_applied(tmp_path):
    """Three systems' outputs that are all wrong: EM's rate runs to 0. Moved there, every soft
    label was 0 and the adapted model said ~0 for everything (a constant); as rat-score
    --label-shift, nothing is moved, and ``not_shifted`` says why in one line."""
    from model import label_shift as L
    from tests.test_recalibrate import singers_sqlite

    database = singers_sqlite(tmp_path / "singers.sqlite")
    wrong = {"s1": "SELECT country FROM singer WHERE singer_id = {k}", "s2": "SELECT age FROM singer WHERE name = 'x{k}'",
             "s3": "SELECT count(*) FROM singer WHERE age < {k}"}
    rows = [{"sql": sql.format(k=k), "question": f"Names of singers older than {20 + k}?", "question_id": f"q{k}",
             "system": system, "database": database} for system, sql in wrong.items() for k in range(40)]
    assert len(rows) >= L.MIN_QUERIES
    single, teacher = Scorer.pretrained().saved, Scorer.pretrained("spider_consensus").saved
    result = adapt(single, teacher, rows, progress=False, label_shift=True, hgb={"max_iter": 20})
    assert result.query_shift is not None and not result.query_shift.fits
    assert result.estimated_rates is None  # nothing moved
    confidences = [r.query_confidence for r in Scorer(result.model).score_many(rows, progress=False)]
    assert np.mean(confidences) > 0.05  # not the constant ~0 a shift to 0 gave
    assert "not moved" in result.not_shifted and "\n" not in result.not_shifted
    assert result.model.info_["trained_on"]["adapted_on"]["not_shifted"] == result.not_shifted
