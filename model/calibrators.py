"""Post-hoc calibrators: of node confidences (``fit_calibrator``), of the boosted model's whole-query
confidence (``QueryCalibrator``), for whole-query confidence (PS, isotonic, MPS), and the papers'
protocols. The saved model and evaluation both read them from here.

Every calibrator maps base scores to P(query is correct) as a scikit-learn estimator (`fit` /
`predict_proba`, `get_params`, `clone`), refuses labels of one class and scores it cannot read
(NaN; a probability outside [0, 1]) at fit and at predict, and round-trips through JSON (checked
as it is read), so a fitted head is saved with its run and
reloaded by `evaluate.py` without pickles. The protocols are those of the two calibration
papers: 5-fold schema-disjoint cross-validation (fit on one fold, evaluate on the other four,
mean ± std) and a fixed schema-disjoint calibration/test split.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

__all__ = [
    "BoostedCombiner",
    "Calibrator",
    "IsotonicCalibrator",
    "MultivariatePlattScaler",
    "PlattScaler",
    "QueryCalibrator",
    "TunedMPS",
    "calibration_test_split",
    "fit_calibrator",
    "load_calibrator",
    "logit_from_log_prob",
    "one_class",
    "query_aggregates",
]

_EPS = 1e-12


def _small_fit():
    """Context for scikit-learn logistic regressions on a few thousand rows: one BLAS thread.

    Waking a BLAS thread pool costs more than such fits (about 5x slower measured); entering the
    context costs ~3 ms, so the isotonic fit (~1 ms, no BLAS) goes without. The one place the
    project sets this, for the calibrators here and so for `model.metrics`.
    """
    return threadpool_limits(1)


def logit_from_log_prob(log_prob: np.ndarray) -> np.ndarray:
    """logit(p) = log p - log(1 - p), computed from log p so that p = 1e-300 stays finite.

    >>> logit_from_log_prob(np.log(np.array([0.5, 0.9]))).round(4).tolist()
    [0.0, 2.1972]
    >>> float(logit_from_log_prob(np.array([-800.0]))[0])  # p underflows, its logit does not
    -800.0
    """
    log_prob = np.minimum(np.asarray(log_prob, dtype=np.float64), -_EPS)  # p = 1 has logit +inf
    return log_prob - np.log(-np.expm1(log_prob))


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # exact sigmoid without overflow warnings


def _as_column(x: np.ndarray | Sequence[float]) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    if x.ndim != 1:
        raise ValueError(f"expected one score per query, shape (n,) or (n, 1); found {x.shape}")
    return _finite(x)


def _finite(x: np.ndarray) -> np.ndarray:
    """``x`` when every score is a finite number (a NaN would come out as a NaN confidence).

    >>> _finite(np.array([0.5, float("nan"), float("inf")]))
    Traceback (most recent call last):
    ValueError: scores must be finite numbers; found nan, inf
    """
    bad = x[~np.isfinite(x)]
    if bad.size:
        raise ValueError(f"scores must be finite numbers; found {', '.join(str(v) for v in dict.fromkeys(bad.tolist()))}")
    return x


def _two_columns(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 0.0, 1.0)
    return np.stack([1.0 - p, p], axis=1)  # (n, 2): P(wrong), P(correct), as scikit-learn


def _check_labels(y: np.ndarray | Sequence[int], n: int) -> np.ndarray:
    """`y` as 0/1 integers: n of them, each 0 or 1 (0.9 or NaN is refused, not read as 0).

    >>> _check_labels([0.0, 1, True], 3).tolist()
    [0, 1, 1]
    >>> _check_labels([0, 0.9, float("nan")], 3)
    Traceback (most recent call last):
    ValueError: labels must be 0/1; found 0.9, nan
    """
    y = np.asarray(y).ravel()
    if y.shape[0] != n:
        raise ValueError(f"expected {n} labels, found {y.shape[0]}")
    if n == 0:
        raise ValueError("nothing to fit on: no scores and labels")
    other = [v for v in y.tolist() if not (isinstance(v, (bool, int, float)) and v in (0, 1))]
    if other:
        shown = sorted({repr(v) for v in other})
        raise ValueError(f"labels must be 0/1; found {', '.join(shown[:5])}{', ...' if len(shown) > 5 else ''}")
    return y.astype(np.int64)


def one_class(labels) -> int | None:
    """The one label of 0/1 ``labels`` where all are alike (a fold of a system whose queries are
    all right), else None. No calibrator fits on one class (it would give that class's rate, 0 or
    1, whatever the score): a caller says the rate or leaves the scores as they are.

    >>> one_class([1, 1, 1]), one_class(np.array([0, 1]))
    (1, None)
    """
    values = np.unique(np.asarray(labels))
    return int(values[0]) if len(values) == 1 else None


def _both_classes(y: np.ndarray) -> np.ndarray:
    """0/1 labels ``y`` when both occur (``one_class``).

    >>> _both_classes(np.array([1, 1]))
    Traceback (most recent call last):
    ValueError: cannot fit a calibrator on labels of one class: every one of its 2 labels is 1: it needs right and wrong
    """
    label = one_class(y)
    if label is not None:
        raise ValueError(f"cannot fit a calibrator on labels of one class: every one of its {len(y)} labels is "
                         f"{label}: it needs right and wrong")
    return y


class Calibrator(BaseEstimator):
    """Base class: `fit(x, y)`, `predict_proba(x) -> (n, 2)`, `save(path)`, `to_dict()`; its
    parameters are those of its `__init__` (scikit-learn's `get_params`, `clone`)."""

    kind: str = ""

    def __sklearn_is_fitted__(self) -> bool:
        return getattr(self, "coef_", None) is not None or getattr(self, "constant_", None) is not None

    def fit(self, x, y) -> Calibrator:  # pragma: no cover - interface
        raise NotImplementedError

    def predict_proba(self, x) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def confidence(self, x) -> np.ndarray:
        """P(correct) per query, shape (n,): `predict_proba(x)[:, 1]`."""
        return self.predict_proba(x)[:, 1]

    def to_dict(self) -> dict:  # pragma: no cover - interface
        raise NotImplementedError

    def save(self, path: Path | str) -> None:
        if not self.__sklearn_is_fitted__():
            raise NotFittedError(f"this {type(self).__name__} is not fitted: call fit first")
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))


def _fit_logistic(x: np.ndarray, y: np.ndarray, C: float, max_iter: int
                  ) -> tuple[float | None, float | None, np.ndarray | None]:
    """(constant, intercept, coef) of Platt's logistic map on features ``x`` (n, k): scikit-learn's
    L2 fit (labels of one class are refused); the constant is None (files may hold one)."""
    _both_classes(y)
    with _small_fit():
        lr = LogisticRegression(C=C, max_iter=max_iter).fit(x, y)
    return None, float(lr.intercept_[0]), lr.coef_[0].astype(np.float64)


def _logistic_proba(x: np.ndarray, constant: float | None, intercept: float | None,
                    coef: np.ndarray | None, owner: object) -> np.ndarray:
    if constant is not None:
        return _two_columns(np.full(len(x), constant))
    if coef is None:
        raise RuntimeError(f"{type(owner).__name__} is not fitted; call fit(x, y) first")
    return _two_columns(_sigmoid(intercept + x @ coef))


class PlattScaler(Calibrator):
    """Platt scaling, `sigmoid(w0 + w1 * logit(s))`, fit by logistic regression.

    `score_kind="prob"` takes s in [0, 1] (clipped to [eps, 1 - eps] before the logit);
    `score_kind="log_prob"` takes log s, for scores such as a sequence probability that
    underflow to 0 in float64; `"raw"` takes an unbounded score as it is. Because w1 is a single
    scalar, PS never changes the ranking of queries (it is monotone), only the probabilities.
    `C` is scikit-learn's inverse L2 strength (1.0: its default, as the SCF paper; a large C is
    Platt's unregularised fit). `eps` should match the scores' resolution: confidences written
    with 6 decimals (node-model predictions) hold exact 0s and 1s that `eps=1e-12` would put at
    logit +-27.6, far from their neighbours at +-13.8.
    """

    kind = "platt"

    def __init__(self, score_kind: str = "prob", C: float = 1.0, eps: float = _EPS):
        if score_kind not in ("prob", "log_prob", "raw"):
            raise ValueError(f"score_kind must be 'prob', 'log_prob' or 'raw'; found {score_kind!r}")
        if not 0.0 < eps < 0.5:
            raise ValueError(f"eps must be in (0, 0.5); found {eps}")
        self.score_kind = score_kind
        self.C = C
        self.eps = eps
        self.intercept_: float | None = None
        self.coef_: float | None = None
        self.constant_: float | None = None  # set when the fit data hold one class only

    def _feature(self, x) -> np.ndarray:
        s = _as_column(x)
        if self.score_kind == "prob":
            outside = s[(s < 0.0) | (s > 1.0)]
            if outside.size:  # (clipped, 1.7 would read as 1 - eps)
                raise ValueError("scores must be probabilities in [0, 1] (score_kind='prob'); found "
                                 + ", ".join(str(v) for v in dict.fromkeys(outside.tolist()[:5])))
            p = np.clip(s, self.eps, 1.0 - self.eps)
            return np.log(p) - np.log1p(-p)
        if self.score_kind == "log_prob":
            return logit_from_log_prob(s)
        return s  # already an unbounded score (e.g. a logit)

    def fit(self, x, y) -> PlattScaler:
        z = self._feature(x)[:, None]
        self.constant_, self.intercept_, coef = _fit_logistic(z, _check_labels(y, len(z)), self.C, 1000)
        self.coef_ = None if coef is None else float(coef[0])
        return self

    def predict_proba(self, x) -> np.ndarray:
        coef = None if self.coef_ is None else np.array([self.coef_])
        return _logistic_proba(self._feature(x)[:, None], self.constant_, self.intercept_, coef, self)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "score_kind": self.score_kind, "C": self.C, "eps": self.eps,
                "intercept": self.intercept_, "coef": self.coef_, "constant": self.constant_}

    @classmethod
    def from_dict(cls, d: Mapping) -> PlattScaler:
        c = cls(d["score_kind"], _number(d, "C", positive=True), d.get("eps", _EPS))  # files saved before eps existed
        c.constant_, c.intercept_, coef = _saved_logistic(d, 1)
        c.coef_ = None if coef is None else float(coef[0])
        return c


class IsotonicCalibrator(Calibrator):
    """Isotonic regression of correctness on one score (monotone, piecewise linear, clipped)."""

    kind = "isotonic"

    def __init__(self):
        self.x_thresholds_: np.ndarray | None = None
        self.y_thresholds_: np.ndarray | None = None

    def __sklearn_is_fitted__(self) -> bool:
        return self.x_thresholds_ is not None

    def fit(self, x, y) -> IsotonicCalibrator:
        s = _as_column(x)
        y = _both_classes(_check_labels(y, len(s)))
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(s, y)
        self.x_thresholds_, self.y_thresholds_ = iso.X_thresholds_, iso.y_thresholds_
        return self

    def predict_proba(self, x) -> np.ndarray:
        if self.x_thresholds_ is None:
            raise RuntimeError("IsotonicCalibrator is not fitted; call fit(x, y) first")
        # np.interp clips outside the range, which is IsotonicRegression(out_of_bounds="clip").
        return _two_columns(np.interp(_as_column(x), self.x_thresholds_, self.y_thresholds_))

    def to_dict(self) -> dict:
        return {"kind": self.kind, "x_thresholds": self.x_thresholds_.tolist(),
                "y_thresholds": self.y_thresholds_.tolist()}

    @classmethod
    def from_dict(cls, d: Mapping) -> IsotonicCalibrator:
        c = cls()
        c.x_thresholds_ = _vector(d, "x_thresholds")
        c.y_thresholds_ = _vector(d, "y_thresholds", len(c.x_thresholds_), probabilities=True)
        if not len(c.x_thresholds_) or (np.diff(c.x_thresholds_) < 0).any():
            raise ValueError(f"x_thresholds: expected one or more numbers in increasing order; "
                             f"found {d['x_thresholds']!r:.60}")
        if (np.diff(c.y_thresholds_) < 0).any():
            raise ValueError(f"y_thresholds: expected numbers that never decrease; found {d['y_thresholds']!r:.60}")
        return c


class MultivariatePlattScaler(Calibrator):
    """MPS: `sigmoid(w0 + sum_i w_i * s_i)` over named base scores (SCF, log-probs, ...).

    Fit with scikit-learn's `LogisticRegression` at its defaults (L2, C=1, lbfgs), as the SCF
    paper does. Unlike PS it can re-rank queries, so it can raise (or lower) AUC.
    """

    kind = "mps"

    def __init__(self, feature_names: Sequence[str], C: float = 1.0, max_iter: int = 1000):
        self.feature_names = feature_names  # (as given: scikit-learn's clone checks it is)
        self.C = C
        self.max_iter = max_iter  # the default 100 sometimes stops short on unscaled log-probs
        self.intercept_: float | None = None
        self.coef_: np.ndarray | None = None
        self.constant_: float | None = None

    def _features(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim == 1 and len(self.feature_names) == 1:
            x = x[:, None]
        if x.ndim != 2 or x.shape[1] != len(self.feature_names):
            raise ValueError(f"expected (n, {len(self.feature_names)}) features "
                             f"{list(self.feature_names)}; found shape {x.shape}")
        _finite(x.ravel())
        return x

    def fit(self, x, y) -> MultivariatePlattScaler:
        x = self._features(x)
        self.constant_, self.intercept_, self.coef_ = _fit_logistic(
            x, _check_labels(y, len(x)), self.C, self.max_iter)
        return self

    def predict_proba(self, x) -> np.ndarray:
        return _logistic_proba(self._features(x), self.constant_, self.intercept_, self.coef_, self)

    def weights(self) -> dict[str, float]:
        """The fitted weight of each named feature, plus `"intercept"`."""
        if self.coef_ is None:
            return {"intercept": float("nan"), **{n: 0.0 for n in self.feature_names}}
        return {"intercept": self.intercept_,
                **{n: float(w) for n, w in zip(self.feature_names, self.coef_)}}

    def to_dict(self) -> dict:
        return {"kind": self.kind, "feature_names": list(self.feature_names), "C": self.C,
                "max_iter": self.max_iter, "intercept": self.intercept_,
                "coef": None if self.coef_ is None else self.coef_.tolist(),
                "constant": self.constant_}

    @classmethod
    def from_dict(cls, d: Mapping) -> MultivariatePlattScaler:
        c = cls(_names(d), _number(d, "C", positive=True), d["max_iter"])
        c.constant_, c.intercept_, c.coef_ = _saved_logistic(d, len(c.feature_names))
        return c


class TunedMPS(Calibrator):
    """MPS with standardised features and its L2 strength chosen by inner cross-validation on
    the fit data (``LogisticRegressionCV``, log loss): the same model as the paper's MPS, fitted
    so that features on different scales (log-probabilities, agreement rates) are used.
    """

    kind = "mps_tuned"
    CS = tuple(np.logspace(-4, 3, 15))

    def __init__(self, feature_names: Sequence[str], inner_folds: int = 5, seed: int = 0):
        self.feature_names = feature_names
        self.inner_folds, self.seed = inner_folds, seed
        self.mean_: np.ndarray | None = None
        self.scale_: np.ndarray | None = None
        self.C_: float | None = None
        self.intercept_: float | None = None
        self.coef_: np.ndarray | None = None
        self.constant_: float | None = None

    def _features(self, x) -> np.ndarray:
        return MultivariatePlattScaler._features(self, x)

    def fit(self, x, y) -> TunedMPS:
        from sklearn.linear_model import LogisticRegressionCV
        from sklearn.model_selection import StratifiedKFold

        x, y = self._features(x), _check_labels(y, len(x))
        _both_classes(y)
        self.mean_, self.scale_ = x.mean(axis=0), x.std(axis=0) + 1e-12
        folds = min(self.inner_folds, int(np.bincount(y, minlength=2).min()))
        if folds < 2:  # one query of a class: too few to choose C by cross-validation
            self.constant_ = float(y.mean())
            return self
        with _small_fit(), warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # sklearn 1.8's notices about 1.10 defaults
            lr = LogisticRegressionCV(Cs=list(self.CS), cv=StratifiedKFold(folds, shuffle=True, random_state=self.seed),
                                      scoring="neg_log_loss", max_iter=2000).fit((x - self.mean_) / self.scale_, y)
        self.constant_, self.C_ = None, float(lr.C_[0])
        self.intercept_, self.coef_ = float(lr.intercept_[0]), lr.coef_[0].astype(np.float64)
        return self

    def predict_proba(self, x) -> np.ndarray:
        x = self._features(x)
        z = (x - self.mean_) / self.scale_ if self.mean_ is not None else x
        return _logistic_proba(z, self.constant_, self.intercept_, self.coef_, self)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "feature_names": list(self.feature_names), "C": self.C_,
                "mean": None if self.mean_ is None else self.mean_.tolist(),
                "scale": None if self.scale_ is None else self.scale_.tolist(),
                "intercept": self.intercept_, "coef": None if self.coef_ is None else self.coef_.tolist(),
                "constant": self.constant_}

    @classmethod
    def from_dict(cls, d: Mapping) -> TunedMPS:
        c = cls(_names(d))
        c.constant_, c.intercept_, c.coef_ = _saved_logistic(d, len(c.feature_names))
        c.C_ = None if d["C"] is None else _number(d, "C", positive=True)
        c.mean_, c.scale_ = (None if c.coef_ is None and d[k] is None else _vector(d, k, len(c.feature_names))
                             for k in ("mean", "scale"))
        return c


class BoostedCombiner(Calibrator):
    """A non-linear combiner: scikit-learn's ``HistGradientBoostingClassifier`` over the named
    features, its scores then calibrated (``"sigmoid"``: Platt, or ``"isotonic"``) by
    ``CalibratedClassifierCV`` with 3 internal folds. Not saved as JSON (refit it from
    ``base_scores.csv``)."""

    kind = "hgb"

    def __init__(self, feature_names: Sequence[str], method: str = "sigmoid", seed: int = 0):
        self.feature_names = feature_names
        self.method, self.seed = method, seed
        self.model_ = None
        self.constant_: float | None = None

    def _features(self, x) -> np.ndarray:
        return MultivariatePlattScaler._features(self, x)

    def fit(self, x, y) -> BoostedCombiner:
        from sklearn.calibration import CalibratedClassifierCV
        from sklearn.ensemble import HistGradientBoostingClassifier

        x, y = self._features(x), _check_labels(y, len(x))
        if int(np.bincount(_both_classes(y), minlength=2).min()) < 3:  # too few of a class for 3 folds
            self.constant_ = float(y.mean())
            return self
        hgb = HistGradientBoostingClassifier(learning_rate=0.05, max_iter=150, max_leaf_nodes=15,
                                             min_samples_leaf=20, l2_regularization=1.0, random_state=self.seed)
        with _small_fit():
            self.model_ = CalibratedClassifierCV(hgb, method=self.method, cv=3).fit(x, y)
        self.constant_ = None
        return self

    def __sklearn_is_fitted__(self) -> bool:
        return self.model_ is not None or self.constant_ is not None

    def predict_proba(self, x) -> np.ndarray:
        x = self._features(x)
        if self.constant_ is not None:
            return _two_columns(np.full(len(x), self.constant_))
        if self.model_ is None:
            raise RuntimeError("BoostedCombiner is not fitted; call fit(x, y) first")
        return _two_columns(self.model_.predict_proba(x)[:, 1])

    def to_dict(self) -> dict:
        raise NotImplementedError("a boosted combiner is not saved as JSON; refit it from base_scores.csv")


_KINDS = {c.kind: c for c in (PlattScaler, IsotonicCalibrator, MultivariatePlattScaler, TunedMPS)}


def load_calibrator(path_or_dict: Path | str | Mapping) -> Calibrator:
    """Rebuild a calibrator written by `Calibrator.save` (or given as its `to_dict()`); ValueError
    (naming the field) for one that no fit could have written: a coefficient that is no finite
    number, or of the wrong length, a probability outside [0, 1], thresholds out of order."""
    d = path_or_dict if isinstance(path_or_dict, (Mapping, list)) else json.loads(Path(path_or_dict).read_text())
    if not isinstance(d, Mapping):
        raise ValueError(f"a saved calibrator: expected an object, found {type(d).__name__}")  # noqa: TRY004  (a file's content)
    if not isinstance(d.get("kind"), str) or d["kind"] not in _KINDS:
        raise ValueError(f"unknown calibrator kind {d.get('kind')!r}; expected one of {sorted(_KINDS)}")
    try:
        return _KINDS[d["kind"]].from_dict(d)
    except KeyError as error:
        raise ValueError(f"a {d['kind']} calibrator needs {error}; it is not in {sorted(d)}") from None


def _number(d: Mapping, key: str, lo: float = -math.inf, hi: float = math.inf, positive: bool = False) -> float:
    """``d[key]`` as a finite float in [lo, hi] (above 0 with ``positive``); ValueError naming it."""
    value = d[key]
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or not lo <= value <= hi or positive and value <= 0):
        wanted = "above 0" if positive else f"in [{lo:g}, {hi:g}]" if math.isfinite(lo) else "(finite)"
        raise ValueError(f"{key}: expected a number {wanted}, found {value!r:.40}")
    return float(value)


def _vector(d: Mapping, key: str, n: int | None = None, probabilities: bool = False) -> np.ndarray:
    """``d[key]`` as a 1-D array of finite floats (``n`` of them; in [0, 1] with ``probabilities``)."""
    value = d[key]
    wanted = f"{'a list' if n is None else n} {'probabilities' if probabilities else 'finite numbers'}"
    if not isinstance(value, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        raise ValueError(f"{key}: expected {wanted}, found {value!r:.60}")
    x = np.asarray(value, dtype=np.float64)
    if (n is not None and len(x) != n) or not np.isfinite(x).all() or probabilities and ((x < 0) | (x > 1)).any():
        raise ValueError(f"{key}: expected {wanted}, found {value!r:.60}")
    return x


def _names(d: Mapping) -> list[str]:
    names = d["feature_names"]
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise ValueError(f"feature_names: expected a list of names, found {names!r:.60}")
    return names


def _saved_logistic(d: Mapping, n: int) -> tuple[float | None, float | None, np.ndarray | None]:
    """(constant, intercept, coef) of a saved logistic map: a probability, or a finite intercept
    and ``n`` finite coefficients (a one-feature Platt scaler's coef: one number)."""
    if d["constant"] is not None:
        return _number(d, "constant", 0.0, 1.0), None, None
    coef = d["coef"]
    if coef is None:
        raise ValueError("coef: missing (and no constant): an unfitted calibrator")
    return None, _number(d, "intercept"), _vector({"coef": coef if isinstance(coef, list) else [coef]}, "coef", n)


# ---------------------------------------------------------------------------------- protocols


def calibration_test_split(groups: Sequence[str], calibration_fraction: float = 0.2,
                           seed: int = 0) -> np.ndarray:
    """Boolean mask, True for the calibration queries, of a fixed schema-disjoint split."""
    groups = np.asarray(groups)
    names = np.unique(groups)
    order = np.random.default_rng(seed).permutation(len(names))
    target = calibration_fraction * len(groups)
    chosen, size = set(), 0
    for g in names[order]:
        if size >= target:
            break
        chosen.add(g)
        size += int((groups == g).sum())
    return np.isin(groups, list(chosen))


def fit_calibrator(kind: str, scores, labels) -> Calibrator | None:
    """A node-confidence calibrator (``platt`` | ``isotonic``) fitted on held-out scores; None for
    ``none`` or no scores. Node models use it on their validation databases (the boosted scorer
    per fold, the neural model per cross-fitting fold)."""
    if kind not in ("platt", "isotonic", "none"):
        raise ValueError(f"calibration must be platt, isotonic or none; found {kind!r}")
    if kind == "none" or len(scores) == 0:
        return None
    calibrator = PlattScaler("prob", eps=1e-6) if kind == "platt" else IsotonicCalibrator()
    return calibrator.fit(scores, labels)


# ------------------------------------------------------------------- the boosted model's query


# Whole-query confidence: logistic regression over these aggregates of the node confidences.
# The least confident node alone (Platt scaling of it) measured best on Spider dev out of fold:
# query AUC 0.767, where adding the root's and the mean logit gave 0.759.
QUERY_FEATURES = ("min_logit",)


def query_aggregates(confidences: Sequence[float]) -> list[float]:
    """``QUERY_FEATURES`` of one query's node confidences (post-order: the root is last).

    >>> [round(v, 2) for v in query_aggregates([0.9, 0.5, 0.8])]
    [0.0]
    """
    p = np.clip(np.asarray(confidences, dtype=float), 1e-6, 1 - 1e-6)
    return [float((np.log(p) - np.log1p(-p)).min())]


class QueryCalibrator:
    """P(the whole query is right) from ``query_aggregates``: a logistic regression fitted on
    out-of-fold node confidences against execution match.

    >>> q = QueryCalibrator.fit(np.array([[-2.0], [-1.0], [1.0], [2.0]]), np.array([0, 0, 1, 1]))
    >>> bool(q.confidence(np.array([[2.0]]))[0] > 0.5 > q.confidence(np.array([[-2.0]]))[0])
    True
    """

    def __init__(self, coef: list[float], intercept: float):
        self.coef, self.intercept = coef, intercept

    def __repr__(self) -> str:
        return f"QueryCalibrator(coef={self.coef!r}, intercept={self.intercept!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, QueryCalibrator) and (self.coef, self.intercept) == (other.coef, other.intercept)

    @classmethod
    def fit(cls, aggregates: np.ndarray, labels: np.ndarray, sample_weight: np.ndarray | None = None
            ) -> QueryCalibrator:
        if len(labels) == 0 or one_class(labels) is not None:  # one class only: a constant
            rate = float(np.clip(labels.mean() if len(labels) else 0.5, 1e-3, 1 - 1e-3))
            return cls([0.0] * aggregates.shape[1], math.log(rate / (1 - rate)))
        fitted = LogisticRegression(C=1.0, max_iter=1000).fit(aggregates, labels, sample_weight=sample_weight)
        return cls([float(c) for c in fitted.coef_[0]], float(fitted.intercept_[0]))

    def confidence(self, aggregates: np.ndarray) -> np.ndarray:
        z = np.asarray(aggregates, dtype=float) @ np.asarray(self.coef) + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    def to_dict(self) -> dict:
        return {"features": list(QUERY_FEATURES), "coef": self.coef, "intercept": self.intercept}
