"""Rates without labels: how often a file's queries are right, estimated from the model's own
whole-query confidences, and those confidences moved to that rate (label shift).

A model's whole-query confidence is calibrated where it was fitted: on Spider dev, where 79.5%
of the 11 systems' queries execute to gold's result. A user's system may be right far less (or
more) often; read as it is, "0.8" then overstates. Under label shift (the share of right
queries differs, what a right or a wrong query looks like does not), the file's rate ``q`` is
what EM on the posteriors finds (Saerens, Latinne & Decaestecker, Neural Computation 2002): each
confidence ``p`` is moved to ``p' = p·w1 / (p·w1 + (1 − p)·w0)`` with ``w1 = q / π`` and
``w0 = (1 − q) / (1 − π)`` (``π``: the rate where the model was calibrated, from its model card),
and ``q`` is the mean of the moved confidences, until it settles. No label is read. The interval
is a bootstrap over the file's queries (EM run again on each resample).

For files of ``MIN_QUERIES`` or more queries: ``rat-score --label-shift``,
``Scorer.score_many(label_shift=None)`` (both off by default) and ``rat-adapt`` (on by default:
the teacher's soft labels); a single query (``Scorer.score``) is never shifted. Off by default
because, measured on Spider's 11 systems each held out of the whole-query calibrator, the mean
confidence is closer to a system's execution accuracy (0.024 on average) than EM's shift
(0.077): ``docs/results.md``, 'Rates without labels'.

>>> rng = np.random.default_rng(0)
>>> # a file's confidences from a model calibrated at 80% right: 300 look right, 200 wrong
>>> p = np.r_[rng.beta(9, 1, 300), rng.beta(2, 3, 200)]
>>> shift = estimate(p, 0.8, "execution")
>>> shift.fits, round(shift.rate, 2), 0 < shift.low <= shift.rate <= shift.high < 0.8
(True, 0.5, True)
>>> bool((shift.apply(p) < p).all())          # the file is right less often: every one moves down
True
>>> estimate(rng.beta(2, 2, 500), 0.8, "execution").fits  # far too few look right: EM runs to 0
False
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from model.nodes.estimator import BoostedNodeModel

MIN_QUERIES = 100  # files with fewer scored queries keep the model's own rates
# An estimate whose interval reaches this close to 0 or 1 means the confidences do not fit a label
# shift from the model's rate (EM runs to the boundary: on BIRD with the Spider model, where the
# confidences are off by more than the rate): nothing is moved.
EDGE = 0.01
BOOTSTRAP = 200  # resamples of the file's queries for the interval
_CLIP = 1e-6
# a model's calibrator pairs, as ``rat-calibrate`` names them (``recalibrated_on.refitted``): a
# model trained both ways has one used with a database and one without; one trained one way, one for all
PAIRS = {True: "with database", False: "without database", None: "all"}


def shift(p: np.ndarray | Sequence[float], source_rate: float, rate: float) -> np.ndarray:
    """``p`` (calibrated where ``source_rate`` were right) moved to data where ``rate`` are:
    ``p·w1 / (p·w1 + (1 − p)·w0)``, ``w1 = rate / source_rate``, ``w0 = (1 − rate) / (1 − source_rate)``.

    >>> [round(float(v), 3) for v in shift([0.5, 0.9], 0.8, 0.5)]
    [0.2, 0.692]
    >>> [round(float(v), 3) for v in shift([0.5, 0.9], 0.8, 0.8)]
    [0.5, 0.9]
    """
    p = np.clip(np.asarray(p, dtype=float), _CLIP, 1 - _CLIP)
    source_rate = float(np.clip(source_rate, _CLIP, 1 - _CLIP))
    w1, w0 = rate / source_rate, (1 - rate) / (1 - source_rate)
    return p * w1 / (p * w1 + (1 - p) * w0)


def em_rate(p: np.ndarray, source_rate: float, iters: int = 1000, tol: float = 1e-7) -> np.ndarray:
    """The rate EM settles on for each row of ``p`` (a vector, or resamples × queries): the
    rate ``q`` such that the mean of ``shift(p, source_rate, q)`` is ``q``.

    >>> p = np.r_[np.full(30, 0.9), np.full(70, 0.3)]  # a model fitted where half were right
    >>> round(float(em_rate(p, 0.5)), 2)
    0.44
    """
    p = np.clip(np.asarray(p, dtype=float), _CLIP, 1 - _CLIP)
    source_rate = float(np.clip(source_rate, _CLIP, 1 - _CLIP))
    rate = np.full(p.shape[:-1] + (1,), source_rate)
    for _ in range(iters):
        w1, w0 = rate / source_rate, (1 - rate) / (1 - source_rate)
        new = (p * w1 / (p * w1 + (1 - p) * w0)).mean(axis=-1, keepdims=True)
        done = np.abs(new - rate).max() < tol
        rate = new
        if done:
            break
    return rate[..., 0]


@dataclass(frozen=True)
class RateShift:
    """The estimated share of right queries in one file, its 95% interval, and the rate the
    model was calibrated at (``label``: what "right" means there, ``execution`` or ``tree``)."""

    rate: float
    low: float
    high: float
    source_rate: float
    label: str
    queries: int
    method: str = "em"

    @property
    def fits(self) -> bool:
        """The interval stays clear of 0 and 1 (``EDGE``): a rate the confidences can be moved to."""
        return EDGE < self.low and self.high < 1 - EDGE

    def apply(self, p: np.ndarray | Sequence[float]) -> np.ndarray:
        """Whole-query confidences moved from ``source_rate`` to ``rate``."""
        return shift(p, self.source_rate, self.rate)

    def to_dict(self) -> dict[str, Any]:
        """What ``rat-score`` stores in each output row (``label_shift``)."""
        return {"rate": round(self.rate, 4), "low": round(self.low, 4), "high": round(self.high, 4),
                "source_rate": round(self.source_rate, 4), "label": self.label, "queries": self.queries,
                "method": self.method, "fits": self.fits}

    def __str__(self) -> str:
        return (f"label shift: {self.queries} queries, estimated {self.rate:.3f} right "
                f"[95% {self.low:.3f}, {self.high:.3f}] ({self.label} labels) where the model was "
                f"calibrated at {self.source_rate:.3f}" + ("" if self.fits else
                "; the interval reaches 0 or 1: these confidences do not fit a label shift from the "
                "model's rate, not moved"))


def estimate(p: np.ndarray | Sequence[float], source_rate: float, label: str, n_bootstrap: int = BOOTSTRAP,
             seed: int = 0) -> RateShift:
    """EM's rate for the whole-query confidences ``p`` of one file, with a percentile interval
    over ``n_bootstrap`` resamples of its queries."""
    p = np.asarray(p, dtype=float)
    if p.ndim != 1 or not len(p):
        raise ValueError("estimate: give a non-empty vector of whole-query confidences")
    rate = float(em_rate(p, source_rate))
    low = high = rate
    if n_bootstrap:
        rng = np.random.default_rng(seed)
        rates = np.concatenate([em_rate(p[rng.integers(0, len(p), (n, len(p)))], source_rate)
                                for n in np.diff(np.r_[0:n_bootstrap:50, n_bootstrap])])
        low, high = (float(v) for v in np.quantile(rates, [0.025, 0.975]))
    return RateShift(rate, min(low, rate), max(high, rate), float(source_rate), label, len(p))


def query_label_for(model: BoostedNodeModel, with_database: bool) -> str:
    """What ``model``'s whole-query confidence means for a query scored with (or without) a
    database: the label its calibrator pair was fitted to (``execution``, ``tree`` or ``mixed``;
    ``unrecorded`` on an older card). A pair ``rat-calibrate`` (``model.scoring.recalibrate``)
    refitted on its own has its own label: ``query_label`` is the pair used with a database (or
    the only pair), ``query_label_without_database`` on the card the pair used without one.

    >>> from types import SimpleNamespace
    >>> refitted = SimpleNamespace(query_label="execution", without_database_=("calibrators",),
    ...                            info_={"query_label_without_database": "tree"})
    >>> query_label_for(refitted, True), query_label_for(refitted, False)
    ('execution', 'tree')
    """
    info = getattr(model, "info_", None) or {}
    if not with_database and getattr(model, "without_database_", None) is not None:
        saved = info.get("query_label_without_database")
        if saved in ("execution", "tree", "mixed"):
            return saved
    return str(getattr(model, "query_label", None) or "unrecorded")


def source_rate(model: BoostedNodeModel, with_database: bool = True) -> tuple[float, str] | None:
    """(share of right queries, label) where ``model``'s whole-query calibrator for queries scored
    with (or without) a database was fitted, from its model card: the pair's ``query_rate``
    (``query_rate_without_database`` for the pair used without one, where the card has it: both
    written by ``rat-calibrate``, the share right of the labelled outputs it refitted the pair on),
    else the share of its training outputs that were right by the labels it was trained on; None
    where the card lacks them (an adapted model: its rates are the teacher's, moved already) or
    where the confidence is calibrated to another label than the one counted. The label is the
    pair's (``query_label_for``)."""
    info = getattr(model, "info_", None) or {}
    trained = info.get("trained_on") or {}
    both = getattr(model, "without_database_", None) is not None
    label = query_label_for(model, with_database)
    if not with_database and both and "query_rate_without_database" in info:
        rate = info["query_rate_without_database"]  # (None: a pair fitted where no rate was recorded)
        return (float(rate), label) if rate is not None else None
    if info.get("query_rate") is not None:
        return float(info["query_rate"]), label
    recalibrated = info.get("recalibrated_on")
    if ("query_rate" not in info and isinstance(recalibrated, dict)  # (a card rat-calibrate wrote before query_rate)
            and PAIRS[with_database if both else None] in (recalibrated.get("refitted") or [])
            and 0 < (recalibrated.get("right_queries") or 0) < (recalibrated.get("queries") or 0)):
        return recalibrated["right_queries"] / recalibrated["queries"], label
    if not (trained.get("examples") and trained.get("correct_queries") is not None):
        return None
    counted = str(trained.get("labels") or "execution")  # execution: execution match where a database was read
    if label != counted and not (label == "mixed" and counted == "execution"):
        return None
    return trained["correct_queries"] / trained["examples"], label


def shift_scored(results: Sequence, model: BoostedNodeModel | None, at_least: int | None = None
                 ) -> RateShift | None:
    """Move ``results``' (``ScoredQuery``: one file's) whole-query confidences to the rate EM
    estimates on them, in place: each keeps its ``unshifted_confidence`` and the shared
    ``label_shift`` estimate. Nothing moves (None) for fewer than ``at_least`` (default
    ``MIN_QUERIES``) results, or for a model whose card lacks the rate it was calibrated at;
    nothing moves either, but the estimate is returned, where it does not ``fit``. The rate (and
    label) is that of the calibrator pair the results were scored with (``source_rate``); a file
    scored partly with, partly without a database by a model with two pairs: the pair most of
    them were scored with (with a database on a tie)."""
    with_database = sum(getattr(r, "with_database", True) is not False for r in results) * 2 >= len(results)
    source = source_rate(model, with_database) if model is not None else None
    if source is None or not results or len(results) < (at_least or MIN_QUERIES):
        return None
    p = np.array([r.query_confidence for r in results])
    found = estimate(p, *source)
    if not found.fits:
        return found
    for r, moved in zip(results, found.apply(p)):
        r.unshifted_confidence, r.query_confidence, r.label_shift = r.query_confidence, float(moved), found
    return found
