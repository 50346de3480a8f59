"""Abstention: TrustSQL's reliability score RS(c) and risk-coverage curves.

A system answers when its confidence is at least a threshold and abstains otherwise. TrustSQL
(Lee et al. 2024) scores each item +1 when answered and correct, 0 when abstained, and -c when
answered and wrong; RS(c) is the mean. c = 0 rewards answering everything, c = N (the number of
test items) makes a single wrong answer cost more than all correct answers can earn.

>>> reliability_score([0.9, 0.6, 0.2], [1, 0, 0], threshold=0.5, penalty=10)
-3.0
>>> choose_threshold([0.9, 0.6, 0.2], [1, 0, 0], penalty=10)   # answer only the 0.9
0.75
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from model.data.folds import fold_splits
from model.metrics import check_scores

DEFAULT_PENALTIES: tuple[float | str, ...] = (0, 10, "N")


def reliability_score(confidences, labels, threshold: float, penalty: float) -> float:
    """RS(c): mean of +1 (conf >= threshold and correct), 0 (abstained), -penalty (answered, wrong)."""
    conf, y = check_scores(confidences, labels)
    answered = conf >= threshold
    scores = np.where(answered, np.where(y == 1, 1.0, -float(penalty)), 0.0)
    return float(scores.mean())


def _threshold_scores(conf: np.ndarray, y: np.ndarray, penalty: float):
    """Every distinct threshold (each distinct confidence, plus +inf = abstain on all) with the
    total score it earns; one sort, then cumulative sums over the items answered."""
    values, inverse = np.unique(conf, return_inverse=True)  # ascending
    correct = np.bincount(inverse, weights=y, minlength=values.size)
    wrong = np.bincount(inverse, weights=1.0 - y, minlength=values.size)
    # threshold values[k] answers every item with confidence >= values[k]
    gain = correct - penalty * wrong
    totals = np.cumsum(gain[::-1])[::-1]
    return np.append(values, np.inf), np.append(totals, 0.0)


def choose_threshold(confidences, labels, penalty: float) -> float:
    """The threshold maximising RS(penalty) on these (calibration) items.

    Any threshold between the lowest answered confidence and the next lower one scores the
    same here; the midpoint is returned, so that unseen items falling in the gap are treated
    as close calls either way (0.0 when everything is answered, ``inf`` when nothing is).
    Ties between thresholds go to the lowest (answer more).
    """
    conf, y = check_scores(confidences, labels)
    thresholds, totals = _threshold_scores(conf, y, float(penalty))
    best = np.flatnonzero(totals == totals.max())[0]
    if best == 0:
        return 0.0
    if best == thresholds.size - 1:
        return float("inf")
    return float((thresholds[best - 1] + thresholds[best]) / 2.0)


def resolve_penalty(penalty: float | str, n_test: int) -> float:
    """``"N"`` is the number of test items (TrustSQL's harshest setting); numbers pass through."""
    if isinstance(penalty, str):
        if penalty.strip().upper() == "N":
            return float(n_test)
        return float(penalty)
    return float(penalty)


def abstention_table(calibration: tuple[Sequence[float], Sequence[int]],
                     test: tuple[Sequence[float], Sequence[int]],
                     penalties: Sequence[float | str] = DEFAULT_PENALTIES) -> list[dict]:
    """RS(c) on ``test`` with the threshold chosen on ``calibration``, for each penalty.

    Each row: penalty (as given), c (its value), threshold, rs (thresholded), rs_answer_all,
    rs_abstain_all (always 0), coverage (fraction answered), risk (error rate of the answered).
    """
    cal_conf, cal_y = check_scores(*calibration)
    test_conf, test_y = check_scores(*test)
    rows = []
    for penalty in penalties:
        c = resolve_penalty(penalty, test_conf.size)
        threshold = choose_threshold(cal_conf, cal_y, c)
        answered = test_conf >= threshold
        rows.append({
            "penalty": str(penalty),
            "c": c,
            "threshold": threshold,
            "rs": reliability_score(test_conf, test_y, threshold, c),
            "rs_answer_all": reliability_score(test_conf, test_y, -np.inf, c),
            "rs_abstain_all": 0.0,
            "coverage": float(answered.mean()),
            "risk": float(1.0 - test_y[answered].mean()) if answered.any() else float("nan"),
        })
    return rows


def cross_fitted_abstention_table(confidences, labels, groups=None,
                                  penalties: Sequence[float | str] = DEFAULT_PENALTIES,
                                  n_folds: int = 5, seed: int = 0) -> list[dict]:
    """``abstention_table`` when there is no separate calibration set: each fold's threshold is
    chosen on the other folds (``GroupKFold`` by ``groups`` when given, else a shuffled
    ``KFold``), and RS is the mean over all items of their held-out scores. N = all items.
    ``threshold`` in a row is then the median of the folds' thresholds.
    """
    conf, y = check_scores(confidences, labels)
    folds = fold_splits(conf.size, groups, n_folds, seed)
    rows = []
    for penalty in penalties:
        c = resolve_penalty(penalty, conf.size)
        answered = np.zeros(conf.size, dtype=bool)
        thresholds = []
        for train, held_out in folds:
            t = choose_threshold(conf[train], y[train], c)
            thresholds.append(t)
            answered[held_out] = conf[held_out] >= t
        scores = np.where(answered, np.where(y == 1, 1.0, -c), 0.0)
        rows.append({
            "penalty": str(penalty),
            "c": c,
            "threshold": float(np.median(thresholds)),
            "rs": float(scores.mean()),
            "rs_answer_all": reliability_score(conf, y, -np.inf, c),
            "rs_abstain_all": 0.0,
            "coverage": float(answered.mean()),
            "risk": float(1.0 - y[answered].mean()) if answered.any() else float("nan"),
        })
    return rows


def risk_coverage(confidences, labels) -> tuple[np.ndarray, np.ndarray]:
    """The risk-coverage curve: answering the most confident items first, for each distinct
    threshold, the fraction answered (coverage, ascending) and their error rate (risk).

    >>> coverage, risk = risk_coverage([0.9, 0.8, 0.3, 0.3], [1, 0, 1, 0])
    >>> coverage.tolist(), risk.tolist()
    ([0.25, 0.5, 1.0], [0.0, 0.5, 0.5])
    """
    conf, y = check_scores(confidences, labels)
    values, inverse = np.unique(conf, return_inverse=True)
    wrong = np.bincount(inverse, weights=1.0 - y, minlength=values.size)[::-1]
    count = np.bincount(inverse, minlength=values.size)[::-1]
    answered = np.cumsum(count)
    return answered / conf.size, np.cumsum(wrong) / answered


def aurc(confidences, labels) -> float:
    """Area under the risk-coverage curve (lower is better): the risk averaged over coverage,
    each item weighing 1/N (the usual discrete AURC; tied items share their group's risk).

    >>> aurc([0.9, 0.1], [1, 0])   # risk 0 at coverage 1/2, 1/2 at coverage 1
    0.25
    """
    return curve_area(*risk_coverage(confidences, labels))


def curve_area(coverage, risk) -> float:
    """AURC of a curve from ``risk_coverage``: sum of risk times each point's coverage step."""
    coverage, risk = np.asarray(coverage, float), np.asarray(risk, float)
    return float(np.sum(risk * np.diff(coverage, prepend=0.0)))
