"""Calibrators (PS, isotonic, MPS): ranking behaviour, JSON round trip, and the CV protocols."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from model.calibrators import (
    BoostedCombiner,
    IsotonicCalibrator,
    MultivariatePlattScaler,
    PlattScaler,
    TunedMPS,
    calibration_test_split,
    load_calibrator,
    logit_from_log_prob,
)
from model.data.folds import crossfit_roles, fold_splits, schema_disjoint_folds


@pytest.fixture
def two_signals():
    """Labels that depend on two independent scores, so the pair ranks better than either."""
    rng = np.random.default_rng(0)
    s1, s2 = rng.uniform(0.01, 0.99, 600), rng.uniform(0.01, 0.99, 600)
    p = 1 / (1 + np.exp(-(3 * np.log(s1 / (1 - s1)) + 3 * np.log(s2 / (1 - s2)))))
    y = (rng.uniform(size=600) < p).astype(int)
    return s1, s2, y


def test_platt_keeps_auc_and_improves_brier(two_signals):
    s1, _, y = two_signals
    overconfident = s1 ** 0.2  # same ranking as s1, badly calibrated
    ps = PlattScaler().fit(overconfident, y)
    conf = ps.confidence(overconfident)
    assert roc_auc_score(y, conf) == pytest.approx(roc_auc_score(y, overconfident), abs=1e-12)
    assert np.mean((conf - y) ** 2) < np.mean((overconfident - y) ** 2)


def test_mps_can_change_auc(two_signals):
    s1, s2, y = two_signals
    x = np.stack([s1, s2], axis=1)
    mps = MultivariatePlattScaler(["s1", "s2"]).fit(x, y)
    assert roc_auc_score(y, mps.confidence(x)) > roc_auc_score(y, s1) + 0.05
    weights = mps.weights()
    assert set(weights) == {"intercept", "s1", "s2"} and weights["s1"] > 0 and weights["s2"] > 0


def test_platt_on_underflowing_log_probs_keeps_ranking():
    rng = np.random.default_rng(1)
    log_prob = rng.uniform(-900, -700, 300)  # exp() of these is exactly 0.0 in float64
    y = (rng.uniform(size=300) < (log_prob + 900) / 200).astype(int)
    conf = PlattScaler("log_prob").fit(log_prob, y).confidence(log_prob)
    assert np.isfinite(conf).all() and len(np.unique(conf)) > 250
    assert roc_auc_score(y, conf) == pytest.approx(roc_auc_score(y, log_prob), abs=1e-12)


def test_logit_from_log_prob_matches_direct_formula():
    p = np.array([1e-9, 0.2, 0.5, 0.999])
    np.testing.assert_allclose(logit_from_log_prob(np.log(p)), np.log(p / (1 - p)), rtol=1e-9)


def test_isotonic_is_monotone_and_bounded(two_signals):
    s1, _, y = two_signals
    conf = IsotonicCalibrator().fit(s1, y).confidence(np.sort(s1))
    assert (np.diff(conf) >= 0).all() and conf.min() >= 0 and conf.max() <= 1


@pytest.mark.parametrize("make", [lambda: PlattScaler(), lambda: PlattScaler("log_prob"),
                                  lambda: PlattScaler(C=1e6, eps=1e-6), IsotonicCalibrator, lambda: MultivariatePlattScaler(["a", "b"])])
def test_save_load_round_trip(make, two_signals, tmp_path):
    s1, s2, y = two_signals
    x = np.stack([s1, s2], axis=1) if isinstance(make(), MultivariatePlattScaler) else s1
    if getattr(make(), "score_kind", None) == "log_prob":
        x = np.log(s1)
    cal = make().fit(x, y)
    cal.save(tmp_path / "cal.json")
    back = load_calibrator(tmp_path / "cal.json")
    assert type(back) is type(cal)
    np.testing.assert_array_equal(back.predict_proba(x), cal.predict_proba(x))
    assert cal.predict_proba(x).shape == (len(y), 2)


def test_platt_eps_sets_where_exact_zeros_and_ones_go():
    """Confidences with 6 decimals: eps=1e-6 puts 1.0 next to 0.999999, eps=1e-12 far beyond."""
    conf = np.array([0.999999, 1.0, 0.000001, 0.0, 0.5, 0.6, 0.4, 0.7])
    y = np.array([1, 1, 0, 0, 1, 1, 0, 0])
    coarse, fine = PlattScaler(eps=1e-6), PlattScaler(eps=1e-12)
    assert coarse._feature(conf)[1] == pytest.approx(coarse._feature(conf)[0], abs=1e-6)
    assert fine._feature(conf)[1] == pytest.approx(2 * fine._feature(conf)[0], rel=0.01)
    old_file = {k: v for k, v in coarse.fit(conf, y).to_dict().items() if k != "eps"}
    assert load_calibrator(old_file).eps == 1e-12  # calibrators saved before eps existed
    with pytest.raises(ValueError, match="eps"):
        PlattScaler(eps=0.0)


def test_metrics_posthoc_maps_are_these_calibrators(two_signals):
    """model.metrics' BS-P / BS-I fits are PlattScaler / IsotonicCalibrator, not a second copy."""
    from model import metrics

    s1, _, y = two_signals
    # Same fit, same numbers; compared to 1e-9 rather than bit for bit, since a multithreaded
    # BLAS may sum in another order.
    np.testing.assert_allclose(metrics.fit_platt(s1, y)(s1),
                               PlattScaler(C=1e6, eps=1e-6).fit(s1, y).confidence(s1), rtol=0, atol=1e-9)
    np.testing.assert_allclose(metrics.fit_isotonic(s1, y)(s1),
                               IsotonicCalibrator().fit(s1, y).confidence(s1), rtol=0, atol=1e-9)


@pytest.mark.parametrize("make", [PlattScaler, IsotonicCalibrator, lambda: MultivariatePlattScaler(["a"])])
def test_labels_other_than_0_1_and_an_empty_fit_are_refused(make):
    scores = np.linspace(0.05, 0.95, 6)
    for labels, found in ([0, 0.9, 0, 0.9, 0, 0.9], "0.9"), ([0, 1, 0, 1, 0, -0.5], "-0.5"), \
            ([0, 1, 0, 1, 0, float("nan")], "nan"):
        with pytest.raises(ValueError, match=f"labels must be 0/1; found {found}$"):
            make().fit(scores if not isinstance(make(), MultivariatePlattScaler) else scores[:, None], labels)
    with pytest.raises(ValueError, match="nothing to fit on"):
        make().fit(np.zeros((0, 1)) if isinstance(make(), MultivariatePlattScaler) else [], [])


def test_an_unfitted_calibrator_or_a_file_missing_a_field_says_so(tmp_path):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError, match="IsotonicCalibrator is not fitted"):
        IsotonicCalibrator().save(tmp_path / "c.json")
    with pytest.raises(ValueError, match="a platt calibrator needs 'score_kind'"):
        load_calibrator({"kind": "platt"})


@pytest.mark.parametrize("make", [PlattScaler, IsotonicCalibrator, lambda: MultivariatePlattScaler(["a"]),
                                  lambda: TunedMPS(["a"]), lambda: BoostedCombiner(["a"])])
def test_labels_of_one_class_are_refused_not_fitted_to_a_constant(make):
    scores = np.array([[0.2], [0.5], [0.7]])
    with pytest.raises(ValueError, match="every one of its 3 labels is 1: it needs right and wrong"):
        make().fit(scores, [1, 1, 1])
    with pytest.raises(ValueError, match="0/1"):
        make().fit(scores, [0, 2, 1])


@pytest.mark.parametrize("scores, found", [([float("nan"), 0.5], "nan"), ([float("inf"), 0.5], "inf"),
                                           ([1.7, 0.5], "1.7"), ([-0.5, 0.5], "-0.5")])
def test_a_score_a_probability_calibrator_cannot_read_is_refused_at_fit_and_at_predict(scores, found):
    fitted = [PlattScaler().fit([0.2, 0.4, 0.6], [0, 1, 1]), IsotonicCalibrator().fit([0.2, 0.4, 0.6], [0, 1, 1])]
    for calibrator in fitted if found in ("nan", "inf") else fitted[:1]:  # (isotonic maps any finite score)
        with pytest.raises(ValueError, match=f"scores must be .*found {found}"):
            calibrator.confidence(scores)
        with pytest.raises(ValueError, match=f"scores must be .*found {found}"):
            type(calibrator)().fit([*scores, 0.3], [1, 0, 1])
    assert PlattScaler("raw").fit([1.7, -0.5, 3.0], [1, 0, 1]).confidence([5.0])[0] > 0.5  # raw: unbounded
    with pytest.raises(ValueError, match="found nan"):
        MultivariatePlattScaler(["a"]).fit([[0.1], [0.9]], [0, 1]).confidence([[float("nan")]])


def test_calibrators_are_scikit_learn_estimators_and_check_what_they_load(tmp_path):
    from sklearn.base import clone
    from sklearn.exceptions import NotFittedError

    assert PlattScaler("log_prob", C=2.0).get_params() == {"score_kind": "log_prob", "C": 2.0, "eps": 1e-12}
    assert clone(MultivariatePlattScaler(["a", "b"], C=3.0)).get_params()["feature_names"] == ["a", "b"]
    assert clone(TunedMPS(["a"])).get_params()["inner_folds"] == 5
    for unfitted in (PlattScaler(), MultivariatePlattScaler(["a"]), TunedMPS(["a"])):
        with pytest.raises(NotFittedError, match="is not fitted"):
            unfitted.save(tmp_path / "c.json")
    for saved, says in [
        ({"kind": "platt", "score_kind": "prob", "C": 1, "intercept": "x", "coef": 1.0, "constant": None}, "intercept"),
        ({"kind": "platt", "score_kind": "prob", "C": 1, "intercept": 0.0, "coef": None, "constant": None}, "coef"),
        ({"kind": "mps", "feature_names": ["a", "b"], "C": 1, "max_iter": 10, "intercept": 0.0, "coef": [1, 2, 3],
          "constant": None}, "coef"),
        ({"kind": "mps_tuned", "feature_names": ["a"], "C": 1, "intercept": 0.0, "coef": [1.0], "constant": None,
          "mean": None, "scale": None}, "mean"),
        ({"kind": "platt", "score_kind": "prob", "C": 1, "intercept": None, "coef": None, "constant": 5.0}, "constant"),
        ({"kind": "isotonic", "x_thresholds": [0.5], "y_thresholds": [2.0]}, "y_thresholds"),
        ({"kind": "isotonic", "x_thresholds": [0.9, 0.1], "y_thresholds": [0.1, 0.9]}, "x_thresholds"),
        ({"kind": "isotonic", "x_thresholds": [], "y_thresholds": []}, "x_thresholds"),
        ([1, 2], "expected an object"),
    ]:
        with pytest.raises(ValueError, match=says):
            load_calibrator(saved)


def test_schema_disjoint_folds_keep_each_database_in_one_fold():
    rng = np.random.default_rng(0)
    groups = rng.choice([f"db{i}" for i in range(40)], size=1000)
    folds = schema_disjoint_folds(groups, n_folds=5, seed=3)
    for g in np.unique(groups):
        assert len(np.unique(folds[groups == g])) == 1
    sizes = np.bincount(folds)
    assert len(sizes) == 5 and sizes.max() - sizes.min() < 0.1 * len(groups)
    with pytest.raises(ValueError, match="databases"):
        schema_disjoint_folds(["a", "b"], n_folds=5)


def test_fold_splits_hold_each_database_out_once():
    groups = np.repeat([f"db{i}" for i in range(7)], 3)
    splits = fold_splits(len(groups), groups, n_folds=5)
    held = np.concatenate([h for _, h in splits])
    assert len(splits) == 5 and sorted(held.tolist()) == list(range(len(groups)))
    for fit, h in splits:
        assert not set(groups[fit]) & set(groups[h])
    assert len(fold_splits(4, ["a", "a", "b", "b"], n_folds=5)) == 2
    with pytest.raises(ValueError, match="2 databases"):
        fold_splits(3, ["a", "a", "a"])


def test_crossfit_roles_rotate_test_and_validation():
    roles = [crossfit_roles(i, 5) for i in range(5)]
    assert [r["test"][0] for r in roles] == [0, 1, 2, 3, 4]
    assert [r["val"][0] for r in roles] == [1, 2, 3, 4, 0]
    assert all(len(set(r["train"]) | {r["test"][0], r["val"][0]}) == 5 for r in roles)


def test_calibration_test_split_is_schema_disjoint():
    groups = np.repeat([f"db{i}" for i in range(30)], 10)
    mask = calibration_test_split(groups, calibration_fraction=0.3, seed=1)
    assert not set(groups[mask]) & set(groups[~mask])
    assert 0.25 <= mask.mean() <= 0.4


def test_label_shift_recovers_the_rate_of_data_whose_classes_look_the_same_but_come_in_other_shares():
    """Scores calibrated where 80% are positive, applied where 30% are: EM finds 30% without a
    label, and the adjusted probabilities are calibrated there."""
    from model import metrics as M
    from model.label_shift import estimate

    rng = np.random.default_rng(0)

    def sample(n, rate):
        y = (rng.random(n) < rate).astype(int)
        return rng.normal(np.where(y == 1, 1.0, -1.0), 1.0), y

    def calibrated(x, rate):  # the Bayes posterior of the two unit-variance Gaussians at that rate
        odds = np.exp(2 * x) * rate / (1 - rate)
        return odds / (1 + odds)

    x, y = sample(20000, 0.3)
    p = calibrated(x, 0.8)  # calibrated for the source's 80%
    found = estimate(p, 0.8, "execution")
    adjusted, rate = found.apply(p), found.rate
    assert abs(rate - 0.3) < 0.02 and abs(p.mean() - 0.3) > 0.2
    assert found.low <= 0.3 <= found.high and found.high - found.low < 0.05
    assert M.ece(adjusted, y) < 0.02 < M.ece(p, y)
