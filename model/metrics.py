"""Calibration and error-detection metrics: pure functions of confidences and 0/1 labels.

Convention everywhere: ``confidences[i]`` is the predicted probability that item ``i`` (a node,
a token, a whole query) is correct, and ``labels[i]`` is 1 when it is correct, 0 when it is wrong.

>>> conf = [0.9, 0.8, 0.3, 0.2]
>>> labels = [1, 1, 0, 1]
>>> round(brier(conf, labels), 4)
0.195
>>> auc(conf, labels)   # the wrong item is ranked below 2 of the 3 correct ones
0.6666666666666666
>>> round(ece(conf, labels, n_bins=10), 4)
0.35
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

from model.data.folds import fold_splits

ArrayLike = Sequence[float] | np.ndarray

# Display names used in tables: the papers' abbreviations.
DISPLAY_NAMES = {
    "n": "N",
    "accuracy": "Acc",
    "brier": "BS",
    "auc": "AUC",
    "ece": "ECE",
    "ace_adaptive": "ACE (adaptive)",
    "ece_monotonic": "ECE (mono)",
    "brier_platt": "BS-P",
    "ece_platt": "ECE-P",
    "ece_monotonic_platt": "ECE-P (mono)",
    "brier_isotonic": "BS-I",
    "ece_isotonic": "ECE-I",
}


def check_scores(confidences: ArrayLike, labels: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Validate and convert to float arrays; errors say what was expected and found."""
    conf, y = np.asarray(confidences, dtype=float), np.asarray(labels, dtype=float)
    if conf.ndim > 1 or y.ndim > 1:  # (a (queries, nodes) table read flat would pair other labels)
        raise ValueError(f"expected one confidence per item and one label per item, 1-D; found shapes "
                         f"{conf.shape} and {y.shape}")
    conf, y = conf.reshape(-1), y.reshape(-1)
    if conf.shape != y.shape:
        raise ValueError(f"confidences and labels differ in length: {conf.size} vs {y.size}")
    if conf.size == 0:
        raise ValueError("no samples: confidences and labels are empty")
    if not np.all(np.isfinite(conf)) or conf.min() < 0.0 or conf.max() > 1.0:
        bad = conf[~np.isfinite(conf) | (conf < 0.0) | (conf > 1.0)]
        raise ValueError(f"confidences must be finite and in [0, 1], found {bad.size} outside: "
                         f"{', '.join(str(v) for v in np.unique(bad)[:5])}")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError(f"labels must be 0 or 1, found values {np.unique(y)[:10]}")
    return conf, y


# --------------------------------------------------------------------------- scores


def brier(confidences: ArrayLike, labels: ArrayLike) -> float:
    """Brier score: mean squared difference between confidence and the 0/1 label (lower is better).

    >>> brier([1.0, 0.0, 0.5], [1, 1, 0])
    0.4166666666666667
    """
    conf, y = check_scores(confidences, labels)
    return float(np.mean((conf - y) ** 2))


def auc(confidences: ArrayLike, labels: ArrayLike) -> float:
    """Error-detection AUC: the AUROC of the confidence for separating correct (1) from wrong (0).

    It is the probability that a random correct item has a higher confidence than a random wrong
    one (ties count one half), the same number as ``sklearn.metrics.roc_auc_score(labels, conf)``.
    0.5 is chance, 1.0 ranks every wrong item below every correct one. With a single class
    (all correct or all wrong) the AUC is undefined and ``nan`` is returned.

    >>> auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
    0.75
    >>> auc([0.2, 0.9], [1, 1])
    nan
    """
    conf, y = check_scores(confidences, labels)
    n_pos = int(y.sum())
    n_neg = y.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    # Mann-Whitney U from average ranks: ties get half credit, exactly as the ROC area.
    ranks = rankdata(conf)
    u = ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


# --------------------------------------------------------------------------- binning


@dataclass(frozen=True)
class Bins:
    """Per-bin statistics of a binning of (confidence, label) pairs; arrays of length n_bins.

    Empty bins (possible with uniform binning) have ``count`` 0 and ``nan`` statistics.
    """

    lower: np.ndarray  # (n_bins,) lower edge in confidence
    upper: np.ndarray  # (n_bins,) upper edge in confidence
    count: np.ndarray  # (n_bins,) int, samples in the bin
    mean_confidence: np.ndarray  # (n_bins,) average confidence of the bin's samples
    accuracy: np.ndarray  # (n_bins,) fraction of the bin's samples with label 1

    @property
    def calibration_error(self) -> float:
        """Sample-weighted mean of |accuracy - mean confidence| over the non-empty bins."""
        filled = self.count > 0
        gaps = np.abs(self.accuracy[filled] - self.mean_confidence[filled])
        return float(np.sum(gaps * self.count[filled]) / np.sum(self.count[filled]))


def _bins_from_index(conf: np.ndarray, y: np.ndarray, index: np.ndarray, n_bins: int,
                     lower: np.ndarray, upper: np.ndarray) -> Bins:
    count = np.bincount(index, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.bincount(index, weights=conf, minlength=n_bins) / count
        accuracy = np.bincount(index, weights=y, minlength=n_bins) / count
    return Bins(lower, upper, count, mean_conf, accuracy)


def _bins_from_blocks(conf: np.ndarray, y: np.ndarray, order: np.ndarray, sizes) -> Bins:
    """The bins of consecutive blocks of ``sizes`` samples in confidence ``order``."""
    sizes = np.asarray(sizes, dtype=int)
    index = np.empty(conf.size, dtype=int)
    index[order] = np.repeat(np.arange(sizes.size), sizes)
    ends = np.cumsum(sizes)
    sorted_conf = conf[order]
    return _bins_from_index(conf, y, index, sizes.size, sorted_conf[ends - sizes], sorted_conf[ends - 1])


def _tie_starts(sorted_conf: np.ndarray) -> np.ndarray:
    """Where each run of equal confidences starts in sorted order: the blocks a binning by
    rank keeps whole, so that the bins do not depend on the input order of tied samples."""
    return np.flatnonzero(np.diff(sorted_conf, prepend=-np.inf))


def _check_bins(n_bins) -> None:
    if isinstance(n_bins, bool) or not isinstance(n_bins, (int, np.integer)) or n_bins < 1:
        raise ValueError(f"n_bins must be a whole number >= 1, got {n_bins!r}")


def uniform_bins(confidences: ArrayLike, labels: ArrayLike, n_bins: int = 10) -> Bins:
    """``n_bins`` equal-width bins [k/n, (k+1)/n); the last one is closed so that 1.0 is counted.

    >>> b = uniform_bins([0.0, 0.05, 1.0], [0, 1, 1], n_bins=2)
    >>> b.count.tolist(), b.accuracy.tolist()
    ([2, 1], [0.5, 1.0])
    """
    _check_bins(n_bins)
    conf, y = check_scores(confidences, labels)
    # floor(c * n) puts c = k/n into bin k (mathematically [k/n, (k+1)/n)); 1.0 goes to the last.
    index = np.minimum(np.floor(conf * n_bins).astype(int), n_bins - 1)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    return _bins_from_index(conf, y, index, n_bins, edges[:-1], edges[1:])


def adaptive_bins(confidences: ArrayLike, labels: ArrayLike, n_bins: int = 10) -> Bins:
    """Equal-mass bins (Nixon et al. 2019): sorted by confidence, split into ``n_bins`` groups
    whose sizes differ by at most one (fewer bins when there are fewer samples than bins).
    Equal confidences go together into the bin of their middle one (a bin left empty by that
    is dropped), so that tied samples in another order give the same bins.

    >>> adaptive_bins([0.9, 0.1, 0.2, 0.8], [1, 0, 1, 1], n_bins=2).accuracy.tolist()
    [0.5, 1.0]
    >>> adaptive_bins([0.1, 0.5, 0.5, 0.5], [0, 1, 0, 1], n_bins=2).count.tolist()
    [1, 3]
    """
    _check_bins(n_bins)
    conf, y = check_scores(confidences, labels)
    order = np.argsort(conf, kind="stable")
    n_used = min(n_bins, conf.size)
    chunk_sizes = np.full(n_used, conf.size // n_used)
    chunk_sizes[: conf.size % n_used] += 1  # (as np.array_split)
    chunk_ends = np.cumsum(chunk_sizes)
    run_starts = _tie_starts(conf[order])
    run_sizes = np.diff(np.append(run_starts, conf.size))
    run_chunk = np.searchsorted(chunk_ends, run_starts + (run_sizes - 1) // 2, side="right")
    sizes = np.bincount(run_chunk, weights=run_sizes, minlength=n_used)
    return _bins_from_blocks(conf, y, order, sizes[sizes > 0])


def monotonic_bins(confidences: ArrayLike, labels: ArrayLike, min_bin_size: int = 10,
                   max_bin_size: int = 1000) -> Bins:
    """Monotonic binning (Matsubara et al. 2023, "TCE", the PAVA-BC procedure).

    Pool-adjacent-violators over the samples sorted by confidence, with bin-size constraints:
    adjacent bins are pooled while the left one is smaller than ``min_bin_size`` samples, or while
    the left one's accuracy is >= the right one's (a violation of monotonicity) and the pooled bin
    would hold at most ``max_bin_size`` samples. The result is the finest binning whose accuracy
    increases with confidence, every bin holding at least ``min_bin_size`` samples (unless there
    are fewer samples than that in all) and at most ``max_bin_size`` where monotonicity allows.
    The last ``min_bin_size`` samples start the last bin (so it is never too small); the bin
    before it is pooled into it when it is too small or when monotonicity requires it and the
    size bound allows it. Equal confidences are never split: each run of them starts as one
    block (which may exceed ``max_bin_size``), so tied samples in another order give the same bins.

    >>> b = monotonic_bins([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [1, 0, 0, 1, 1, 1], min_bin_size=1)
    >>> b.count.tolist(), b.accuracy.tolist()
    ([3, 3], [0.3333333333333333, 1.0])
    """
    if min_bin_size < 1 or max_bin_size < min_bin_size:
        raise ValueError(
            f"need 1 <= min_bin_size <= max_bin_size, got {min_bin_size}, {max_bin_size}"
        )
    conf, y = check_scores(confidences, labels)
    order = np.argsort(conf, kind="stable")
    n = conf.size
    # Runs of equal confidences are the starting blocks (never split); the tail is the runs
    # holding the last min_bin_size samples.
    run_starts = _tie_starts(conf[order])
    run_correct = np.add.reduceat(y[order].astype(int), run_starts).tolist()
    run_sizes = np.diff(np.append(run_starts, n)).tolist()
    n_head_runs = max(int(np.searchsorted(run_starts, n - min_bin_size, side="right")) - 1, 0)

    # Stack of blocks (number of correct, size). Plain ints and one inlined loop: this is the
    # hot spot of bootstrapped monotonic ECEs. Only the top block can be below min_bin_size, so
    # "left block too small" is the whole size rule (for a pushed singleton it is TCE's
    # "pooled size <= min_bin_size"); otherwise pool while mean(left) >= mean(right)
    # (cross-multiplied to stay in integers) and the pooled block fits in max_bin_size.
    correct: list[int] = []
    sizes: list[int] = []
    blocks = list(zip(run_correct[:n_head_runs], run_sizes[:n_head_runs]))
    blocks.append((sum(run_correct[n_head_runs:]), sum(run_sizes[n_head_runs:])))  # the tail
    for k_right, size_right in blocks:
        while sizes:
            k_left, size_left = correct[-1], sizes[-1]
            if size_left >= min_bin_size and (
                size_left + size_right > max_bin_size or k_left * size_right < k_right * size_left
            ):
                break
            correct.pop()
            sizes.pop()
            k_right += k_left
            size_right += size_left
        correct.append(k_right)
        sizes.append(size_right)
    return _bins_from_blocks(conf, y, order, sizes)


def ece(confidences: ArrayLike, labels: ArrayLike, n_bins: int = 10) -> float:
    """Expected calibration error with ``n_bins`` equal-width bins (see ``uniform_bins``).

    sum over non-empty bins of (bin size / N) * |accuracy(bin) - mean confidence(bin)|.

    >>> ece([0.25, 0.25, 0.75, 0.75], [0, 0, 1, 0], n_bins=2)
    0.25
    """
    return uniform_bins(confidences, labels, n_bins).calibration_error


def ace_adaptive(confidences: ArrayLike, labels: ArrayLike, n_bins: int = 10) -> float:
    """Adaptive calibration error: ECE over equal-mass bins (Nixon et al. 2019, "ACE").

    Not netcal's ``ACE``, which is the *unweighted* average over equal-width bins.

    >>> round(ace_adaptive([0.1, 0.2, 0.8, 0.9], [0, 0, 1, 1], n_bins=2), 6)
    0.15
    """
    return adaptive_bins(confidences, labels, n_bins).calibration_error


def ece_monotonic(confidences: ArrayLike, labels: ArrayLike, min_bin_size: int = 10,
                  max_bin_size: int = 1000) -> float:
    """ECE over monotonic bins (``monotonic_bins``), as in the fine-grained paper's appendix.

    >>> # bins {0.1, 0.2, 0.3}: |1/3 - 0.2|; {0.4, 0.5, 0.6}: |1 - 0.5|; each half the samples
    >>> round(ece_monotonic([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [1, 0, 0, 1, 1, 1], min_bin_size=1), 4)
    0.3167
    """
    return monotonic_bins(confidences, labels, min_bin_size, max_bin_size).calibration_error


# --------------------------------------------------------------------------- post-hoc calibration

# Confidences are often written with 6 decimals (node-model predictions), so exact 0s and 1s
# sit at the resolution's logit (+-13.8), next to their neighbours, not at +-27.6.
_PLATT_EPS = 1e-6
_PLATT_C = 1e6  # essentially unregularised, as in Platt's method (the data are 1-dimensional)


def fit_platt(confidences: ArrayLike, labels: ArrayLike) -> Callable[[ArrayLike], np.ndarray]:
    """Platt scaling: a logistic regression on logit(confidence); returns the fitted map.

    The fit is ``model.calibrators.PlattScaler`` (the whole-query calibrator), unregularised.
    With a single class in ``labels`` the map returns that class's rate (0 or 1) for every input.

    >>> platt = fit_platt([0.9, 0.8, 0.7, 0.6, 0.3], [1, 1, 0, 1, 0])
    >>> bool(platt([0.95])[0] > platt([0.2])[0])
    True
    """
    from model.calibrators import PlattScaler, one_class

    conf, y = check_scores(confidences, labels)
    if (label := one_class(y)) is not None:  # (the calibrator refuses one class)
        return lambda c: np.full(np.asarray(c, dtype=float).size, float(label))
    scaler = PlattScaler("prob", C=_PLATT_C, eps=_PLATT_EPS).fit(conf, y)
    return lambda c: scaler.confidence(np.asarray(c, dtype=float).reshape(-1))


def fit_isotonic(confidences: ArrayLike, labels: ArrayLike) -> Callable[[ArrayLike], np.ndarray]:
    """Isotonic regression of the label on the confidence (clipped outside the fitted range);
    the fit is ``model.calibrators.IsotonicCalibrator``; with a single class, that class's rate."""
    from model.calibrators import IsotonicCalibrator, one_class

    conf, y = check_scores(confidences, labels)
    if (label := one_class(y)) is not None:
        return lambda c: np.full(np.asarray(c, dtype=float).size, float(label))
    iso = IsotonicCalibrator().fit(conf, y)
    return lambda c: iso.confidence(np.asarray(c, dtype=float).reshape(-1))


def _cross_fit(fit: Callable, confidences: ArrayLike, labels: ArrayLike,
               groups: ArrayLike | None, n_folds: int, seed: int) -> np.ndarray:
    conf, y = check_scores(confidences, labels)
    out = np.empty_like(conf)
    for train, held_out in fold_splits(conf.size, groups, n_folds, seed):
        out[held_out] = fit(conf[train], y[train])(conf[held_out])
    return out


def platt_cv(confidences: ArrayLike, labels: ArrayLike, groups: ArrayLike | None = None,
             n_folds: int = 5, seed: int = 0) -> np.ndarray:
    """Out-of-fold Platt-scaled confidences (the inputs of BS-P and ECE-P).

    Protocol: the samples are split into ``n_folds`` folds; with ``groups`` (e.g. the database
    id) by ``GroupKFold``, so that no group is in two folds (schema-disjoint); without groups by
    a shuffled ``KFold`` seeded with ``seed``. For each fold a Platt map is fitted on the other
    folds and applied to it. Every sample thus gets a recalibrated confidence from a map that
    never saw it (nor, with groups, its database).
    """
    return _cross_fit(fit_platt, confidences, labels, groups, n_folds, seed)


def isotonic_cv(confidences: ArrayLike, labels: ArrayLike, groups: ArrayLike | None = None,
                n_folds: int = 5, seed: int = 0) -> np.ndarray:
    """Out-of-fold isotonic-regression confidences (the inputs of BS-I and ECE-I); the protocol
    is ``platt_cv``'s."""
    return _cross_fit(fit_isotonic, confidences, labels, groups, n_folds, seed)


# --------------------------------------------------------------------------- uncertainty


def bootstrap_ci(metric_fn: Callable[[np.ndarray, np.ndarray], float], confidences: ArrayLike,
                 labels: ArrayLike, n: int = 1000, seed: int = 0, level: float = 0.95,
                 groups: ArrayLike | None = None) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of ``metric_fn(confidences, labels)``.

    Resamples the samples with replacement ``n`` times; with ``groups``, whole groups are
    resampled instead (a cluster bootstrap: use it when samples of one group, e.g. the nodes of a
    query, are correlated). Resamples where the metric is ``nan`` (an AUC with one class) are
    ignored; if all are, ``(nan, nan)`` is returned.
    """
    conf, y = check_scores(confidences, labels)
    values = [metric_fn(conf[i], y[i]) for i in bootstrap_indices(conf.size, n, seed, groups)]
    return percentile_interval(values, level)


def bootstrap_indices(size: int, n: int = 1000, seed: int = 0, groups: ArrayLike | None = None
                      ) -> Iterator[np.ndarray]:
    """``n`` bootstrap resamples of ``range(size)`` as index arrays: samples drawn with
    replacement, or with ``groups`` (one label per sample) whole groups drawn with replacement.
    Any statistic of several arrays over the same samples (a paired difference) can be
    bootstrapped by indexing each array with the same draws."""
    rng = np.random.default_rng(seed)
    if groups is None:
        for _ in range(n):
            yield rng.integers(0, size, size)
        return
    _, group_index = np.unique(np.asarray(groups), return_inverse=True)
    members = np.argsort(group_index, kind="stable")
    starts = np.concatenate([[0], np.cumsum(np.bincount(group_index))])
    n_groups = starts.size - 1
    for _ in range(n):
        picked = rng.integers(0, n_groups, n_groups)
        yield np.concatenate([members[starts[g]:starts[g + 1]] for g in picked])


def percentile(values: ArrayLike, q: float) -> float:
    """The ``q``-th percentile (0 to 100) of measured ``values`` (latencies), as one of them: the
    value at the nearest rank (a half rank up); nan when there are none. A NaN among them is
    refused (sorted last, it would move every percentile).

    >>> percentile([30, 10, 20, 40], 50), percentile([1, 2, 3, 4, 5], 95), percentile([], 95)
    (30.0, 5.0, nan)
    """
    ordered = np.sort(np.asarray(values, dtype=float).reshape(-1))
    if np.isnan(ordered).any():
        raise ValueError(f"values must be numbers; found {int(np.isnan(ordered).sum())} nan")
    if ordered.size == 0:
        return float("nan")
    return float(ordered[min(ordered.size - 1, int(q / 100 * (ordered.size - 1) + 0.5))])


def percentile_interval(values: ArrayLike, level: float = 0.95) -> tuple[float, float]:
    """The central ``level`` percentile interval of bootstrap ``values``, ignoring non-finite
    ones; ``(nan, nan)`` when none is finite."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return float("nan"), float("nan")
    tail = (1.0 - level) / 2.0 * 100.0
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return float(low), float(high)


def core_metric_fns(n_bins: int = 10) -> dict[str, Callable[[ArrayLike, ArrayLike], float]]:
    """The three numbers every table starts with, as functions of (confidences, labels):
    Brier, AUC, ECE with ``n_bins`` uniform bins."""
    return {"brier": brier, "auc": auc, "ece": lambda c, y: ece(c, y, n_bins)}


def core_metrics(confidences: ArrayLike, labels: ArrayLike, n_bins: int = 10) -> dict[str, float]:
    """Brier, AUC and ECE of one set of confidences.

    >>> core_metrics([0.9, 0.8, 0.3, 0.2], [1, 1, 0, 0])["auc"]
    1.0
    """
    return {name: float(fn(confidences, labels)) for name, fn in core_metric_fns(n_bins).items()}


POST_HOC = ("brier_platt", "ece_platt", "ece_monotonic_platt", "brier_isotonic", "ece_isotonic")


def summary(confidences: ArrayLike, labels: ArrayLike, groups: ArrayLike | None = None,
            n_bins: int = 10, n_folds: int = 5, n_bootstrap: int = 1000, seed: int = 0,
            level: float = 0.95, min_bin_size: int = 10, max_bin_size: int = 1000) -> dict:
    """Every metric of this module with its bootstrap interval, as a JSON-ready dict.

    ``{"n", "accuracy", "metrics": {name: value}, "ci": {name: [low, high]}}`` with names
    brier, auc, ece, ace_adaptive, ece_monotonic, and the post-hoc variants brier_platt (BS-P),
    ece_platt (ECE-P), ece_monotonic_platt, brier_isotonic (BS-I), ece_isotonic (ECE-I).
    The post-hoc confidences come from ``platt_cv``/``isotonic_cv`` with ``groups``; their
    intervals bootstrap those out-of-fold confidences (the calibration maps are fitted once, so
    the intervals do not include the variability of refitting them). ``n_bootstrap=0`` skips
    the intervals. ``groups`` is used for the folds only, not for the bootstrap.
    """
    conf, y = check_scores(confidences, labels)
    binned = {
        "ece": lambda c, t: ece(c, t, n_bins),
        "ace_adaptive": lambda c, t: ace_adaptive(c, t, n_bins),
        "ece_monotonic": lambda c, t: ece_monotonic(c, t, min_bin_size, max_bin_size),
    }
    plans: dict[str, tuple[Callable, np.ndarray]] = {
        "brier": (brier, conf),
        "auc": (auc, conf),
        **{name: (fn, conf) for name, fn in binned.items()},
    }
    platt = isotonic = None
    if conf.size < 2:
        missing = f"{conf.size} sample: no held-out fold to fit Platt/isotonic on"
    elif groups is not None and np.unique(np.asarray(groups)).size < 2:
        missing = "fewer than 2 databases: no schema-disjoint fold to fit Platt/isotonic on"
    else:
        platt = platt_cv(conf, y, groups, n_folds, seed)
        isotonic = isotonic_cv(conf, y, groups, n_folds, seed)
    if platt is not None:
        plans.update({
            "brier_platt": (brier, platt),
            "ece_platt": (binned["ece"], platt),
            "ece_monotonic_platt": (binned["ece_monotonic"], platt),
            "brier_isotonic": (brier, isotonic),
            "ece_isotonic": (binned["ece"], isotonic),
        })
    metrics = {name: float(fn(c, y)) for name, (fn, c) in plans.items()}
    ci = {}
    if n_bootstrap > 0:
        ci = {name: list(bootstrap_ci(fn, c, y, n_bootstrap, seed, level))
              for name, (fn, c) in plans.items()}
    out = {"n": int(conf.size), "accuracy": float(y.mean()), "metrics": metrics, "ci": ci}
    if platt is None:  # the keys stay, as NaN (null in JSON), with the reason beside them
        metrics.update(dict.fromkeys(POST_HOC, float("nan")))
        out["post_hoc_missing"] = missing
    return out


# How far to trust "look here first": the pointed node's site score against how often it is a site
RELIABILITY_EDGES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)  # pointer_reliability: bins of the pointed node's site score


def pointer_reliability(scores: Sequence[float], hits: Sequence[int], edges: Sequence[float] = RELIABILITY_EDGES
                        ) -> list[dict]:
    """How far to trust "look here first": the wrong queries binned by the site score of the node
    pointed at (equal-width bins), each bin's count, mean score and top-1 (the share whose
    pointed node is an error site). Empty bins are left out, and queries without a site score
    (NaN: a model without a site head).

    >>> pointer_reliability([0.9, 0.95, 0.3], [1, 0, 0])
    [{'lo': 0.2, 'hi': 0.4, 'n': 1, 'mean_score': 0.3, 'top1': 0.0}, {'lo': 0.8, 'hi': 1.0, 'n': 2, 'mean_score': 0.925, 'top1': 0.5}]
    """
    scores, hits = np.asarray(scores, dtype=float), np.asarray(hits, dtype=float)
    if scores.ndim != 1 or scores.shape != hits.shape:
        raise ValueError(f"expected one score and one hit per query; found shapes {scores.shape} and {hits.shape}")
    if ((scores < 0) | (scores > 1)).any() or not np.isin(hits, (0, 1)).all():  # (NaN: no site score)
        raise ValueError("scores must be in [0, 1] (or NaN) and hits 0 or 1; found "
                         f"{scores[(scores < 0) | (scores > 1)][:3].tolist()}, {hits[~np.isin(hits, (0, 1))][:3].tolist()}")
    scored = ~np.isnan(scores)
    scores, hits = scores[scored], hits[scored]
    which = _bin_of(scores, edges)
    return [{"lo": float(edges[b]), "hi": float(edges[b + 1]), "n": int((which == b).sum()),
             "mean_score": round(float(scores[which == b].mean()), 6), "top1": float(hits[which == b].mean())}
            for b in range(len(edges) - 1) if (which == b).any()]


def _bin_of(scores, edges: Sequence[float]) -> np.ndarray:
    """The bin of each score: [lo, hi), the last one closed."""
    return np.clip(np.searchsorted(edges, scores, side="right") - 1, 0, len(edges) - 2)


def pointer_rate(bins: Sequence[dict], score: float) -> float | None:
    """The top-1 of ``pointer_reliability``'s bin that holds ``score`` (None: no such bin, or NaN).

    >>> bins = pointer_reliability([0.9, 0.95, 0.3], [1, 0, 0])
    >>> pointer_rate(bins, 1.0), pointer_rate(bins, 0.35), pointer_rate(bins, 0.5)
    (0.5, 0.0, None)
    """
    if score is None or np.isnan(score):
        return None
    last = RELIABILITY_EDGES[-1]  # as _bin_of: the last bin is closed
    return next((float(b["top1"]) for b in bins
                 if b["lo"] <= score < b["hi"] or (b["hi"] >= last and b["lo"] <= score)), None)


def in_sample_note(keys: list[str], fitted: str) -> dict:
    """metrics.json's word on the ``keys`` measured on the validation pairs that ``fitted`` (a
    part of the model: each fold's calibrator) was fitted on, which the run writes beside the
    held-out test/*: ``{"in_sample": {"keys": [...], "why": "..."}}``, or {} without any."""
    if not keys:
        return {}
    return {"in_sample": {"keys": list(keys), "why": f"measured on the validation pairs that fitted {fitted}: "
                          "in-sample numbers; test/* are the held-out ones"}}
