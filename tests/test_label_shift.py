"""Rates without labels (model.label_shift): EM finds a file's rate of right queries from the
model's confidences alone, within its bootstrap interval; Scorer.score_many(label_shift=None)
and rat-score --label-shift move the whole-query confidences of a file of 100 or more queries
to it, never a single query's (off by default)."""

import json

import numpy as np
import pytest

from model import label_shift as L
from tests.test_score_cli import rat_score
from tests.test_scorer import _rows, boosted_model  # noqa: F401  (the fixture)


def _calibrated_sample(n: int, rate: float, source_rate: float, seed: int):
    """Queries right with probability ``rate`` whose confidences are the Bayes posteriors of two
    Gaussian scores at ``source_rate``: calibrated where the model was fitted, not here."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < rate).astype(int)
    x = rng.normal(np.where(y == 1, 1.2, -1.2), 1.0)
    odds = np.exp(2.4 * x) * source_rate / (1 - source_rate)
    return odds / (1 + odds), y


@pytest.mark.parametrize("rate", [0.3, 0.55, 0.8, 0.92])
def test_em_recovers_the_rate_within_its_interval(rate):
    from model import metrics as M

    hits = 0
    for seed in range(10):
        p, y = _calibrated_sample(1000, rate, 0.795, seed)
        found = L.estimate(p, 0.795, "execution", seed=seed)
        hits += found.low <= rate <= found.high
        assert abs(found.rate - rate) < 0.06 and found.high - found.low < 0.12
        if abs(rate - 0.795) > 0.2:  # far from the source rate: the moved confidences are the calibrated ones
            assert M.ece(found.apply(p), y) < M.ece(p, y)
    assert hits >= 8  # a 95% interval


def test_the_shift_is_the_prior_ratio_formula_and_the_identity_at_the_source_rate():
    p = np.array([0.1, 0.5, 0.9])
    w1, w0 = 0.4 / 0.8, 0.6 / 0.2
    assert np.allclose(L.shift(p, 0.8, 0.4), p * w1 / (p * w1 + (1 - p) * w0))
    assert np.allclose(L.shift(p, 0.8, 0.8), p)
    assert float(L.em_rate(np.full(50, 0.7), 0.7)) == pytest.approx(0.7)


def test_a_bad_input_is_one_error():
    with pytest.raises(ValueError, match="non-empty vector"):
        L.estimate([], 0.8, "execution")


def test_score_many_shifts_a_file_of_100_queries_when_asked_and_never_a_single_query(boosted_model):  # noqa: F811
    folder, objects = boosted_model
    from model.scoring import Scorer

    table = objects["table"]
    scorer = Scorer.load(folder)
    source, label = L.source_rate(scorer.saved)
    trained = scorer.saved.info_["trained_on"]
    assert source == trained["correct_queries"] / trained["examples"] and label == trained["labels"]
    weak = [k for k, e in enumerate(table.examples) if e.system == "demo_weak"][:120]
    rows = _rows(table, weak)
    plain = scorer.score_many(rows, progress=False)  # off by default
    moved = scorer.score_many(rows, progress=False, label_shift=None)
    found = moved[0].label_shift
    assert found is not None and found.queries == len(rows) and all(r.label_shift is found for r in moved)
    assert found.low <= found.rate <= found.high and found.source_rate == pytest.approx(source)
    before = np.array([r.query_confidence for r in plain])
    assert np.allclose([r.unshifted_confidence for r in moved], before)
    assert np.allclose([r.query_confidence for r in moved], found.apply(before), atol=1e-9)
    if abs(found.rate - source) > 0.01:  # moved the way the rates differ
        after = np.array([r.query_confidence for r in moved])
        assert np.all(np.sign(after - before) == np.sign(found.rate - source))
    # nodes are not moved; a JSON row carries the estimate
    assert [n.confidence for n in moved[0].nodes] == [n.confidence for n in plain[0].nodes]
    assert moved[0].to_dict()["label_shift"]["rate"] == round(found.rate, 4)
    assert "label_shift" not in plain[0].to_dict()
    few = scorer.score_many(rows[:99], progress=False, label_shift=None)
    assert all(r.label_shift is None for r in few)
    assert scorer.score_many(rows[:99], progress=False, label_shift=True)[0].label_shift is not None  # any number
    one = scorer.score(**{k: rows[0][k] for k in ("sql", "question", "schema", "database", "db_id")})
    assert one.label_shift is None and one.query_confidence == pytest.approx(plain[0].query_confidence)


def test_rat_score_prints_and_stores_each_files_estimate(boosted_model, tmp_path):  # noqa: F811
    folder, objects = boosted_model
    root = objects["table"].root
    files = [root / "predictions" / f"demo_{s}.jsonl" for s in ("weak", "strong")]
    out, plain = tmp_path / "scored.jsonl", tmp_path / "plain.jsonl"
    common = ["--model", str(folder), "--data-root", str(root), "--split", "dev", "--no-reasons"]
    done = rat_score(*common, "--predictions", *map(str, files), "--out", str(out), "--label-shift")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    estimates = {}
    for f in files:
        line = next(line for line in done.stderr.splitlines() if line.startswith(f"rat-score: {f.name}: label shift"))
        estimates[f.stem] = float(line.split("estimated ")[1].split()[0])
    assert estimates["demo_weak"] < estimates["demo_strong"]  # each file alone
    for row in rows:
        shift = row["label_shift"]
        assert shift["rate"] == pytest.approx(estimates[row["system"]], abs=1e-3)
        assert shift["low"] <= shift["rate"] <= shift["high"] and shift["label"] == "execution"
    done = rat_score(*common, "--predictions", str(files[0]), "--out", str(plain))  # off by default
    assert done.returncode == 0 and "label shift" not in done.stderr
    unshifted = [json.loads(line) for line in plain.read_text().splitlines()]
    assert "label_shift" not in unshifted[0]
    weak = [r for r in rows if r["system"] == "demo_weak"]
    assert [r["query_confidence_unshifted"] for r in weak] == [r["query_confidence"] for r in unshifted]


def test_confidences_that_do_not_fit_a_label_shift_are_not_moved():
    """Confidences far below every rate the model knows (the Spider model on BIRD: mean 0.62
    where it was calibrated at 0.795) drive EM to 0: reported, nothing moved."""
    from model.scoring import Scorer
    from model.scoring.scorer import ScoredQuery

    shipped = Scorer.pretrained().saved
    source, _ = L.source_rate(shipped)
    p = np.random.default_rng(0).beta(5, 3, 400)  # mean 0.62
    found = L.estimate(p, source, "execution")
    assert found.low <= L.EDGE and not found.fits and "not moved" in str(found)
    results = [ScoredQuery("SELECT 1", "", [], float(v), 0, None) for v in p]
    assert L.shift_scored(results, shipped) == found
    assert [r.query_confidence for r in results] == list(p) and all(r.label_shift is None for r in results)
    fitting = L.estimate(np.random.default_rng(1).beta(6, 2, 400), 0.795, "execution")
    assert fitting.fits and L.EDGE < fitting.low


def test_the_module_example_is_a_shift_that_fits():
    """The module's example moves every confidence down: it must be an estimate that fits (one
    that reaches 0 moves nothing)."""
    import doctest

    test = doctest.DocTestParser().get_doctest(L.__doc__, dict(vars(L)), "model.label_shift", None, 0)
    runner = doctest.DocTestRunner()
    runner.run(test, out=lambda _: None, clear_globs=False)
    shift = test.globs["shift"]
    assert runner.failures == 0 and shift.fits and shift.rate < 0.8


def test_a_recalibrated_model_is_shifted_from_the_rate_it_was_recalibrated_at(tmp_path):
    """rat-calibrate on outputs 3 of 10 right: label shift then starts from 0.3 (with the label of
    those outputs), not the rate of the data the model was first fitted on; the pair that was not
    refitted keeps its rate. A card written before rat-calibrate recorded query_rate reads its
    recalibrated_on."""
    from model.nodes.estimator import BoostedNodeModel
    from model.scoring import Scorer
    from model.scoring.recalibrate import recalibrate
    from tests.test_recalibrate import singers_sqlite

    database = singers_sqlite(tmp_path / "singers.sqlite")
    gold = "SELECT name FROM singer WHERE age > {}"
    rows = [{"sql": gold.format(k + (i >= 3)), "gold": gold.format(k), "database": database,  # 3 right
             "question": f"Names of singers older than {k}?"} for i, k in enumerate(range(30, 40))]
    shipped = Scorer.pretrained().saved
    result = recalibrate(shipped, rows, select=False, progress=False)
    assert result.right_queries == 3 and result.refitted == ["with database"] and not result.query_kept
    result.model.save(tmp_path / "m")
    loaded = BoostedNodeModel.load(tmp_path / "m")
    assert L.source_rate(loaded) == (pytest.approx(0.3), "execution")
    assert L.source_rate(loaded, False) == L.source_rate(shipped, False)  # the pair used without one
    scored = Scorer(loaded).score_many(rows, progress=False, label_shift=True)
    assert scored[0].label_shift.source_rate == pytest.approx(0.3)
    older = {k: v for k, v in loaded.info_.items() if not k.startswith(("query_rate", "query_label_"))}
    old_card = BoostedNodeModel.from_parts(loaded.node_model_, loaded.site_model_, loaded.calibrator_,
                                           loaded.query_calibrator_, loaded.features_, loaded.typical_, older,
                                           loaded.without_database_)
    assert L.source_rate(old_card) == (pytest.approx(0.3), "execution")


def test_score_many_on_a_few_queries_says_when_the_estimate_does_not_fit(tmp_path):
    """label_shift=True on 10 confident queries: EM runs to 1, nothing moves, and each result
    holds the estimate (fits False), so "not estimated" (None) and "estimated, not moved" differ."""
    from model.scoring import Scorer
    from tests.test_recalibrate import singers_sqlite

    database = singers_sqlite(tmp_path / "singers.sqlite")
    rows = [{"sql": f"SELECT name FROM singer WHERE age > {20 + k}", "question": f"Names of singers older than "
             f"{20 + k}?", "database": database} for k in range(10)]
    scorer = Scorer.pretrained()
    plain = scorer.score_many(rows, progress=False)
    shifted = scorer.score_many(rows, progress=False, label_shift=True)
    found = shifted[0].label_shift
    assert found is not None and not found.fits and all(r.label_shift is found for r in shifted)
    assert [r.query_confidence for r in shifted] == [r.query_confidence for r in plain]  # not moved
    assert [r.unshifted_confidence for r in shifted] == [r.query_confidence for r in plain]
    row = shifted[0].to_dict()
    assert row["label_shift"]["fits"] is False and row["query_confidence_unshifted"] == row["query_confidence"]
    assert all(r.label_shift is None for r in plain)
