"""Metrics against hand-computed tiny cases and against independent implementations."""

import math

import numpy as np
import pytest

from model import metrics as m

# title, confidences, labels, expected {metric: value}; computed by hand (see comments).
TINY_CASES = [
    (
        "confidences exactly 0 and 1",
        # bin 0: conf 0, acc 1/2 (weight 1/2); bin 9: conf 1, acc 1 -> ECE 1/4
        # AUC: positives {0, 1, 1} vs negative {0}: 0.5 + 1 + 1 over 3 pairs
        [0.0, 0.0, 1.0, 1.0], [0, 1, 1, 1],
        {"brier": 0.25, "ece": 0.25, "auc": 2.5 / 3},
    ),
    (
        "empty middle bins",
        [0.05, 0.95], [0, 1],
        {"brier": 0.0025, "ece": 0.05, "auc": 1.0},
    ),
    (
        "single class: AUC undefined",
        [0.2, 0.6], [1, 1],
        {"brier": 0.4, "ece": 0.6, "auc": math.nan},
    ),
    (
        "wrong items ranked highest",
        [0.9, 0.8, 0.1], [0, 0, 1],
        {"auc": 0.0},
    ),
    (
        "equal-mass bins of two",
        # {0.1, 0.3}: |0.5 - 0.2|; {0.6, 0.9}: |0.5 - 0.75|; each half the samples
        [0.1, 0.3, 0.6, 0.9], [1, 0, 0, 1],
        {"ace_adaptive_2": 0.275, "ece_2": 0.275},
    ),
    (
        "monotonic binning pools one violation",
        # bins {0.2} acc 0, {0.4, 0.6} acc 1/2, {0.8} acc 1: gaps 0.2, 0, 0.2 over 4 samples
        [0.2, 0.4, 0.6, 0.8], [0, 1, 0, 1],
        {"ece_monotonic_min1": 0.1, "ece_monotonic_max1": 0.4, "ece_monotonic_min2": 0.0},
    ),
]

METRIC_FNS = {
    "brier": m.brier,
    "auc": m.auc,
    "ece": m.ece,
    "ece_2": lambda c, y: m.ece(c, y, n_bins=2),
    "ace_adaptive_2": lambda c, y: m.ace_adaptive(c, y, n_bins=2),
    "ece_monotonic_min1": lambda c, y: m.ece_monotonic(c, y, min_bin_size=1),
    "ece_monotonic_max1": lambda c, y: m.ece_monotonic(c, y, min_bin_size=1, max_bin_size=1),
    "ece_monotonic_min2": lambda c, y: m.ece_monotonic(c, y, min_bin_size=2),
}


@pytest.mark.parametrize("title, conf, labels, expected", TINY_CASES, ids=[c[0] for c in TINY_CASES])
def test_tiny_cases(title, conf, labels, expected):
    for name, value in expected.items():
        got = METRIC_FNS[name](conf, labels)
        if math.isnan(value):
            assert math.isnan(got), (title, name, got)
        else:
            assert got == pytest.approx(value, abs=1e-12), (title, name, got)


def test_uniform_bins_count_every_sample_once_including_0_and_1():
    bins = m.uniform_bins([0.0, 0.1, 0.15, 0.5, 0.999, 1.0], [0, 1, 0, 1, 1, 1], n_bins=10)
    assert bins.count.tolist() == [1, 2, 0, 0, 0, 1, 0, 0, 0, 2]
    assert np.isnan(bins.accuracy[2]) and np.isnan(bins.mean_confidence[2])
    assert bins.lower[0] == 0.0 and bins.upper[-1] == 1.0


@pytest.mark.parametrize("bad", [([0.5, 1.2], [0, 1]), ([0.5], [0, 1]), ([0.5], [2]), ([], [])])
def test_invalid_inputs_raise(bad):
    with pytest.raises(ValueError):
        m.ece(*bad)


def _random(n, seed):
    rng = np.random.default_rng(seed)
    conf = rng.random(n)
    # a non-monotone truth, so that the gaps change sign and the binning matters
    truth = 0.5 + 0.4 * np.sin(6 * conf)
    return conf, (rng.random(n) < truth).astype(int)


@pytest.mark.parametrize("n, n_bins", [(50, 10), (1000, 10), (3001, 15), (2000, 5)])
def test_ece_matches_netcal(n, n_bins):
    netcal = pytest.importorskip("netcal.metrics")
    conf, labels = _random(n, seed=n)
    expected = netcal.ECE(bins=n_bins).measure(conf, labels)
    assert m.ece(conf, labels, n_bins) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("n, n_bins", [(1000, 10), (2000, 20)])
def test_adaptive_ace_matches_netcal_equal_mass_ece(n, n_bins):
    # netcal's "ACE" is a different metric; its ECE with equal_intervals=False is Nixon's ACE.
    netcal = pytest.importorskip("netcal.metrics")
    conf, labels = _random(n, seed=7)
    expected = netcal.ECE(bins=n_bins, equal_intervals=False).measure(conf, labels)
    assert m.ace_adaptive(conf, labels, n_bins) == pytest.approx(expected, rel=1e-9)
    assert m.ace_adaptive(conf, labels, n_bins) != pytest.approx(m.ece(conf, labels, n_bins))


def test_auc_matches_sklearn_with_ties():
    from sklearn.metrics import roc_auc_score

    conf, labels = _random(500, seed=3)
    conf = np.round(conf, 1)  # many ties
    assert m.auc(conf, labels) == pytest.approx(roc_auc_score(labels, conf), rel=1e-12)


def test_monotonic_bins_are_isotonic_regression_without_size_constraints():
    from sklearn.isotonic import IsotonicRegression

    conf, labels = _random(400, seed=5)
    bins = m.monotonic_bins(conf, labels, min_bin_size=1, max_bin_size=conf.size)
    order = np.argsort(conf, kind="stable")
    fitted = IsotonicRegression().fit_transform(np.arange(conf.size), labels[order])
    # each sample's bin accuracy is the isotonic fit at its rank
    per_sample = np.repeat(bins.accuracy, bins.count)
    np.testing.assert_allclose(per_sample, fitted, atol=1e-12)
    assert np.all(np.diff(bins.accuracy) > 0)


@pytest.mark.parametrize("min_size, max_size", [(10, 1000), (25, 60), (5, 5)])
def test_monotonic_bins_respect_size_constraints(min_size, max_size):
    conf, labels = _random(997, seed=11)
    bins = m.monotonic_bins(conf, labels, min_size, max_size)
    assert bins.count.sum() == conf.size
    assert bins.count.min() >= min_size
    # pooling past max_size never happens, except when the bins are still below min_size
    assert bins.count.max() <= max(max_size, 2 * min_size)
    assert np.all(bins.lower[1:] >= bins.upper[:-1])


def test_monotonic_with_fewer_samples_than_min_bin_size_is_one_bin():
    bins = m.monotonic_bins([0.2, 0.9, 0.4], [1, 0, 0], min_bin_size=10)
    assert bins.count.tolist() == [3]


@pytest.mark.parametrize("metric", [
    lambda c, y: m.ace_adaptive(c, y, n_bins=7),
    lambda c, y: m.ece_monotonic(c, y),
    lambda c, y: m.ece_monotonic(c, y, min_bin_size=1),
    lambda c, y: m.ece_monotonic(c, y, min_bin_size=3, max_bin_size=8),
], ids=["ace_adaptive", "ece_monotonic", "ece_monotonic_min1", "ece_monotonic_max8"])
def test_rank_binned_metrics_do_not_depend_on_the_order_of_tied_samples(metric):
    conf, labels = _random(300, seed=13)
    conf = np.round(conf, 1)  # runs of equal confidences with mixed labels
    rng = np.random.default_rng(0)
    values = [metric(conf[p], labels[p]) for p in [np.arange(conf.size)] + [rng.permutation(conf.size)
                                                                            for _ in range(5)]]
    assert np.ptp(values) < 1e-12, values  # (sums in another order: the last bits may differ)


def test_rank_bins_keep_equal_confidences_together():
    conf, labels = _random(300, seed=13)
    conf = np.round(conf, 1)
    for bins in (m.adaptive_bins(conf, labels, 7), m.monotonic_bins(conf, labels, 3, 8)):
        assert bins.count.sum() == conf.size and bins.count.min() > 0
        assert np.all(bins.lower[1:] > bins.upper[:-1])


def _overconfident(n, seed, n_groups=20):
    rng = np.random.default_rng(seed)
    true_p = rng.random(n)
    labels = (rng.random(n) < true_p).astype(int)
    logit = np.log(true_p) - np.log1p(-true_p)
    conf = 1 / (1 + np.exp(-3 * logit))  # overconfident by a factor of 3 in logit space
    return conf, labels, rng.integers(0, n_groups, n)


def test_platt_and_isotonic_recalibrate_overconfident_scores():
    conf, labels, groups = _overconfident(4000, seed=0)
    platt = m.platt_cv(conf, labels, groups)
    isotonic = m.isotonic_cv(conf, labels, groups)
    assert m.ece(platt, labels) < 0.5 * m.ece(conf, labels)
    assert m.ece(isotonic, labels) < 0.5 * m.ece(conf, labels)
    assert m.brier(platt, labels) < m.brier(conf, labels)
    # Platt is monotone in the confidence within a fold, so the ranking barely changes
    assert m.auc(platt, labels) == pytest.approx(m.auc(conf, labels), abs=0.02)


@pytest.mark.parametrize("cv", [m.platt_cv, m.isotonic_cv])
def test_posthoc_cv_never_sees_the_held_out_group(cv):
    conf, labels, groups = _overconfident(1000, seed=1, n_groups=10)
    before = cv(conf, labels, groups)
    flipped = labels.copy()
    flipped[groups == 3] = 1 - flipped[groups == 3]
    after = cv(conf, flipped, groups)
    # group 3's own recalibrated scores come from maps fitted without group 3's labels
    np.testing.assert_array_equal(before[groups == 3], after[groups == 3])
    assert not np.array_equal(before, after)


def test_posthoc_cv_needs_two_groups_and_handles_single_class_folds():
    with pytest.raises(ValueError):
        m.platt_cv([0.2, 0.8], [0, 1], groups=["a", "a"])
    # group "b" is all correct: the map fitted on it alone predicts 1 for group "a"
    out = m.platt_cv([0.2, 0.3, 0.7], [1, 1, 0], groups=["b", "b", "a"], n_folds=2)
    assert out[2] == 1.0


def test_bootstrap_ci_brackets_the_estimate_and_shrinks_with_n():
    widths = []
    for n in (200, 5000):
        conf, labels = _random(n, seed=2)
        low, high = m.bootstrap_ci(m.ece, conf, labels, n=200, seed=0)
        assert low <= m.ece(conf, labels) <= high
        widths.append(high - low)
    assert widths[1] < widths[0] / 2
    conf, labels = _random(300, seed=2)
    assert m.bootstrap_ci(m.brier, conf, labels, n=50, seed=1) == m.bootstrap_ci(
        m.brier, conf, labels, n=50, seed=1
    )
    assert m.bootstrap_ci(m.auc, [0.1, 0.9], [1, 1], n=20) == pytest.approx((math.nan,) * 2,
                                                                           nan_ok=True)


def test_cluster_bootstrap_is_wider_for_correlated_groups():
    # 20 groups of 50 identical samples: the information is 20 samples, not 1000
    rng = np.random.default_rng(0)
    group_conf = rng.random(20)
    group_label = (rng.random(20) < 0.5).astype(int)
    conf, labels = np.repeat(group_conf, 50), np.repeat(group_label, 50)
    groups = np.repeat(np.arange(20), 50)
    iid = m.bootstrap_ci(m.brier, conf, labels, n=300, seed=0)
    clustered = m.bootstrap_ci(m.brier, conf, labels, n=300, seed=0, groups=groups)
    assert (clustered[1] - clustered[0]) > 3 * (iid[1] - iid[0])


def test_bootstrap_indices_draw_whole_groups_the_same_for_every_array():
    groups = np.array([7, 7, 7, 3, 3, 9])
    draws = list(m.bootstrap_indices(len(groups), n=30, seed=0, groups=groups))
    assert len(draws) == 30
    for picked in draws:
        counts = np.bincount(picked, minlength=len(groups))
        for g in np.unique(groups):
            assert len(set(counts[groups == g])) == 1  # a group is drawn whole or not at all
        assert len(np.unique(groups[picked])) <= 3
    again = list(m.bootstrap_indices(len(groups), n=30, seed=0, groups=groups))
    assert all((a == b).all() for a, b in zip(draws, again))  # a paired statistic sees the same draws
    assert all(len(i) == 6 for i in m.bootstrap_indices(6, n=5, seed=1))
    assert m.percentile_interval([np.nan, np.inf]) == pytest.approx((math.nan,) * 2, nan_ok=True)


def test_summary_reports_every_metric_with_intervals():
    conf, labels, groups = _overconfident(600, seed=4)
    out = m.summary(conf, labels, groups, n_bootstrap=30)
    assert set(out["metrics"]) == {
        "brier", "auc", "ece", "ace_adaptive", "ece_monotonic", "brier_platt", "ece_platt",
        "ece_monotonic_platt", "brier_isotonic", "ece_isotonic",
    }
    assert out["n"] == 600 and out["accuracy"] == pytest.approx(labels.mean())
    assert out["metrics"]["ece"] == pytest.approx(m.ece(conf, labels))
    assert out["metrics"]["brier_platt"] == pytest.approx(
        m.brier(m.platt_cv(conf, labels, groups), labels))
    for name, (low, high) in out["ci"].items():
        assert low <= high, name
    assert m.summary(conf, labels, n_bootstrap=0)["ci"] == {}


def test_a_nan_confidence_is_named_and_pointer_bins_leave_out_queries_without_a_site_score():
    from model.metrics import check_scores, pointer_reliability

    with pytest.raises(ValueError, match=r"found 2 outside: 2\.0, nan"):
        check_scores([0.5, float("nan"), 0.5, 2.0], [1, 0, 1, 1])
    bins = pointer_reliability([0.9, float("nan"), 0.3], [1, 1, 0])
    assert [(b["n"], b["mean_score"]) for b in bins] == [(1, 0.3), (1, 0.9)]


def test_what_the_metrics_cannot_read_is_refused_and_one_sample_is_named_as_the_cause():
    missing = m.summary([0.9], [1], n_bootstrap=0)["post_hoc_missing"]
    assert "1 sample" in missing and "databases" not in missing
    assert "fewer than 2 databases" in m.summary([0.9, 0.1, 0.5], [1, 0, 1], groups=["a"] * 3,
                                                  n_bootstrap=0)["post_hoc_missing"]
    for scores, hits in [([1.7, 0.5], [1, 0]), ([-0.3], [1]), ([0.9], [5]), ([0.9, 0.8], [1])]:
        with pytest.raises(ValueError):
            m.pointer_reliability(scores, hits)
    with pytest.raises(ValueError, match="nan"):
        m.percentile([float("nan"), 1, 2], 50)
    with pytest.raises(ValueError, match="n_bins must be a whole number"):
        m.ece([0.5, 0.9], [1, 0], n_bins=2.5)
    with pytest.raises(ValueError, match="one confidence per item"):
        m.brier([[0.5, 0.2], [0.1, 0.3]], [1, 0, 1, 0])
