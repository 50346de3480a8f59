"""TrustSQL RS(c), thresholds chosen on calibration data, risk-coverage curves."""

import numpy as np
import pytest

from model.eval import abstention as ab

# title, confidences, labels, threshold, penalty, expected RS (by hand)
RS_CASES = [
    ("answer all, no penalty", [0.9, 0.6, 0.2], [1, 0, 0], 0.0, 0, 1 / 3),
    ("one wrong answer costs 10", [0.9, 0.6, 0.2], [1, 0, 0], 0.5, 10, (1 - 10) / 3),
    ("abstain on everything", [0.9, 0.6, 0.2], [1, 0, 0], 0.95, 1000, 0.0),
    ("threshold is inclusive", [0.5, 0.5], [1, 1], 0.5, 3, 1.0),
]


@pytest.mark.parametrize("title, conf, labels, threshold, penalty, expected", RS_CASES,
                         ids=[c[0] for c in RS_CASES])
def test_reliability_score(title, conf, labels, threshold, penalty, expected):
    assert ab.reliability_score(conf, labels, threshold, penalty) == pytest.approx(expected)


def test_choose_threshold_maximises_rs_by_brute_force():
    rng = np.random.default_rng(0)
    conf = np.round(rng.random(300), 2)
    labels = (rng.random(300) < conf).astype(int)
    for penalty in (0, 1, 10, 300):
        t = ab.choose_threshold(conf, labels, penalty)
        best = max(ab.reliability_score(conf, labels, c, penalty)
                   for c in list(np.unique(conf)) + [np.inf])
        assert ab.reliability_score(conf, labels, t, penalty) == pytest.approx(best)
    assert ab.choose_threshold(conf, labels, 0) == 0.0  # c = 0: answer everything
    assert ab.choose_threshold([0.9, 0.6, 0.2], [1, 0, 0], 10) == pytest.approx(0.75)
    assert ab.choose_threshold([0.9, 0.8], [0, 0], 1) == np.inf  # all wrong: abstain


def test_abstention_table_uses_calibration_threshold_and_baselines():
    rng = np.random.default_rng(1)
    conf = rng.random(2000)
    labels = (rng.random(2000) < conf).astype(int)
    cal, test = (conf[:1000], labels[:1000]), (conf[1000:], labels[1000:])
    rows = ab.abstention_table(cal, test, penalties=(0, 10, "N"))
    assert [r["penalty"] for r in rows] == ["0", "10", "N"]
    assert rows[2]["c"] == 1000.0
    for row in rows:
        assert row["threshold"] == ab.choose_threshold(*cal, row["c"])
        assert row["rs"] == pytest.approx(
            ab.reliability_score(*test, row["threshold"], row["c"]))
        assert row["rs_abstain_all"] == 0.0
    assert rows[0]["coverage"] > rows[1]["coverage"] >= rows[2]["coverage"]
    # with an informative confidence, thresholding beats answering everything at c = 10
    assert rows[1]["rs"] > rows[1]["rs_answer_all"]
    assert rows[1]["risk"] < 1 - labels[1000:].mean()


def test_cross_fitted_table_keeps_groups_apart():
    rng = np.random.default_rng(2)
    conf = rng.random(600)
    labels = (rng.random(600) < conf).astype(int)
    groups = rng.integers(0, 12, 600)
    rows = ab.cross_fitted_abstention_table(conf, labels, groups, penalties=(0, 10))
    assert rows[0]["coverage"] == 1.0 and rows[0]["rs"] == pytest.approx(labels.mean())
    assert rows[1]["rs"] > rows[1]["rs_answer_all"]
    with pytest.raises(ValueError):
        ab.cross_fitted_abstention_table(conf, labels, np.zeros(600))


def test_risk_coverage_curve_and_area():
    coverage, risk = ab.risk_coverage([0.9, 0.8, 0.3, 0.3], [1, 0, 1, 0])
    assert coverage.tolist() == [0.25, 0.5, 1.0] and risk.tolist() == [0.0, 0.5, 0.5]
    # a perfect ranking has lower AURC than a reversed one
    labels = np.array([1, 1, 1, 0, 0])
    good, bad = np.array([0.9, 0.8, 0.7, 0.2, 0.1]), np.array([0.1, 0.2, 0.3, 0.8, 0.9])
    assert ab.aurc(good, labels) < ab.aurc(bad, labels)
    assert ab.aurc(good, labels) == pytest.approx((0 + 0 + 0 + 1 / 4 + 2 / 5) / 5)
