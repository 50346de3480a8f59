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
    ("single teacher", "--predictions: the teacher reads one system's answer alone"),
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
