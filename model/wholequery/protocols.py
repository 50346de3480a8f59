"""The one place that knows the whole-query protocols: which rows a combiner is fitted on and
which it is measured on, for one system's predictions. Folds are always by database
(``model.data.folds.schema_disjoint_folds``), assigned on all systems' rows so that every system
and method is measured on the same questions.

- ``one``: fit on one fold, test on the other four (the calibration papers' protocol);
- ``rest``: fit on the other folds, test on the held-out one (k-fold cross-fitting);
- ``loso``: like ``rest``, but fit only on the *other systems'* rows: what a user with a new
  system gets without any of its labels;
- ``pooled``: like ``rest``, but fit on every system's rows of the other folds (one combiner for
  all systems, ten times the fitting data);
- ``split``: one fixed calibration/test division of the databases.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from model.calibrators import calibration_test_split
from model.data.folds import schema_disjoint_folds

PROTOCOLS = ("one", "rest", "loso", "pooled", "split")


def database_folds(db_ids: np.ndarray, n_folds: int = 5, seed: int = 0) -> np.ndarray:
    """Fold of every row, by database."""
    return schema_disjoint_folds(db_ids, n_folds, seed)


def fit_test_splits(systems: np.ndarray, db_ids: np.ndarray, system: str, protocol: str,
                    n_folds: int = 5, seed: int = 0, calibration_fraction: float = 0.2
                    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(fit mask, test mask) over all rows, per fold, for ``system``'s predictions.

    >>> systems = np.array(["a", "a", "b", "b"]); dbs = np.array(["x", "y", "x", "y"])
    >>> [(f.tolist(), t.tolist()) for f, t in fit_test_splits(systems, dbs, "a", "loso", n_folds=2)]
    [([False, False, False, True], [True, False, False, False]), ([False, False, True, False], [False, True, False, False])]
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}; found {protocol!r}")
    own = systems == system
    if protocol == "split":
        calibration = calibration_test_split(db_ids, calibration_fraction, seed)
        yield own & calibration, own & ~calibration
        return
    folds = database_folds(db_ids, n_folds, seed)
    for k in range(n_folds):
        if protocol == "one":
            yield own & (folds == k), own & (folds != k)
        else:
            fit_rows = ~own if protocol == "loso" else own if protocol == "rest" else np.ones_like(own)
            yield (folds != k) & fit_rows, own & (folds == k)
