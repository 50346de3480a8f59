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
>>> p = rng.beta(2, 2, 500)                   # confidences of a model calibrated at 80% right
>>> shift = estimate(p, 0.8, "execution")
>>> 0 < shift.low <= shift.rate <= shift.high < 0.8
True
>>> bool((shift.apply(p) < p).all())          # the file is right less often: every one moves down
True
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
                "method": self.method}

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


def source_rate(model: BoostedNodeModel) -> tuple[float, str] | None:
    """(share of right queries, label) where ``model``'s whole-query confidence was calibrated,
    from its model card (``query_rate`` where the card has it, else the share of its training
    outputs that were right by the labels it was trained on); None where the card lacks them (an
    adapted model: its rates are the teacher's, moved already) or where the confidence is
    calibrated to another label than the one counted."""
    info = model.info_ or {}
    trained = info.get("trained_on", {})
    label = str(getattr(model, "query_label", None) or trained.get("labels") or "execution")
    if info.get("query_rate") is not None:
        return float(info["query_rate"]), label
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
    nothing moves either, but the estimate is returned, where it does not ``fit``."""
    source = source_rate(model) if model is not None else None
    if source is None or not results or len(results) < (at_least or MIN_QUERIES):
        return None
    p = np.array([r.query_confidence for r in results])
    found = estimate(p, *source)
    if not found.fits:
        return found
    for r, moved in zip(results, found.apply(p)):
        r.unshifted_confidence, r.query_confidence, r.label_shift = r.query_confidence, float(moved), found
    return found
