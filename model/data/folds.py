"""Schema-disjoint folds: the one place that splits items by database.

Every protocol of the project holds databases out, never single items, so that a score is
always measured on databases its model (or calibrator) never saw:

- ``schema_disjoint_folds``: a fold index per item, databases balanced by item count (seeded);
  the whole-query papers' protocol and the node model's cross-fitting over dev use it.
- ``fold_splits``: (fit, held-out) index pairs of those folds, for out-of-fold fitting of a
  post-hoc map (BS-P/ECE-P, abstention thresholds, whole-query combiners); a shuffled ``KFold``
  when there are no groups.
- ``crossfit_roles``: for cross-fitting fold ``i`` of ``k``, which folds train, validate, test.
- ``split_databases``: one fixed train / val / test division of the databases (``protocol=split``).
- ``check_split``, ``check_run_folds``, ``check_holdout_system``, ``holdout_keeps``: the protocol,
  partial-run and leave-one-system-out settings, shared by the neural and the boosted node scorers.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np


def schema_disjoint_folds(groups: Sequence[str], n_folds: int = 5, seed: int = 0) -> np.ndarray:
    """Fold index per item such that every database (group) lies in exactly one fold.

    Databases are shuffled with ``seed``, then, largest first, each goes to the currently
    smallest fold, so folds hold about the same number of items.

    >>> schema_disjoint_folds(["a", "a", "b", "c", "c", "c"], n_folds=2).tolist()
    [1, 1, 1, 0, 0, 0]
    """
    groups = np.asarray(groups)
    names, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    if len(names) < n_folds:
        raise ValueError(f"need at least {n_folds} databases for {n_folds} folds; found {len(names)}")
    order = np.random.default_rng(seed).permutation(len(names))
    order = order[np.argsort(-counts[order], kind="stable")]  # big databases first: better balance
    fold_of_group = np.empty(len(names), dtype=np.int64)
    sizes = np.zeros(n_folds, dtype=np.int64)
    for g in order:
        k = int(np.argmin(sizes))
        fold_of_group[g] = k
        sizes[k] += counts[g]
    return fold_of_group[inverse]


def fold_splits(n_items: int, groups: Sequence[str] | None = None, n_folds: int = 5,
                seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """(fit indices, held-out indices) per fold: the folds of ``schema_disjoint_folds`` (no
    database in two folds), or, without groups, a ``KFold`` shuffled with ``seed``. Fewer
    databases or items than ``n_folds`` give that many folds; fewer than 2 is a ValueError.

    >>> [h.tolist() for _, h in fold_splits(4, ["a", "a", "b", "c"], n_folds=3)]
    [[0, 1], [3], [2]]
    """
    index = np.arange(n_items)
    if groups is None:
        from sklearn.model_selection import KFold

        n_splits = min(n_folds, n_items)
        if n_splits < 2:
            raise ValueError(f"out-of-fold fitting needs at least 2 items; found {n_items}")
        return list(KFold(n_splits=n_splits, shuffle=True, random_state=seed).split(index))
    groups = np.asarray(groups)
    if groups.shape != (n_items,):
        raise ValueError(f"groups has {groups.size} entries, expected {n_items}")
    n_splits = min(n_folds, np.unique(groups).size)
    if n_splits < 2:
        raise ValueError(f"out-of-fold fitting needs at least 2 databases; found {n_splits}")
    folds = schema_disjoint_folds(groups, n_splits, seed)
    return [(index[folds != k], index[folds == k]) for k in range(n_splits)]


def crossfit_roles(fold: int, n_folds: int) -> dict[str, list[int]]:
    """Folds that test, validate and train the model of cross-fitting fold ``fold``: test = the
    fold, validation = the next one, train = the rest.

    >>> crossfit_roles(4, 5)
    {'test': [4], 'val': [0], 'train': [1, 2, 3]}
    """
    if not 0 <= fold < n_folds or n_folds < 3:
        raise ValueError(f"fold {fold} of {n_folds}: need 0 <= fold < n_folds and n_folds >= 3")
    val = (fold + 1) % n_folds
    return {"test": [fold], "val": [val], "train": [f for f in range(n_folds) if f not in (fold, val)]}


def check_split(data_cfg) -> None:
    """A data config's protocol and its numbers (``data.protocol``; ``data.folds`` of cross-fitting,
    3 at least: test, validation and training; ``data.val_fraction`` and ``data.test_fraction`` of
    a split): one ``UsageError`` line naming the first out of range (train.py: before any work).

    >>> check_split({"protocol": "crossfit", "folds": 1})
    Traceback (most recent call last):
    model.errors.UsageError: data.folds must be a whole number of 3 or more (test, validation and training folds); found 1
    """
    from model.errors import UsageError

    protocol = data_cfg.get("protocol", "split")
    if protocol == "crossfit":
        folds = data_cfg.get("folds", 5)
        if isinstance(folds, bool) or not isinstance(folds, int) or folds < 3:
            raise UsageError("data.folds must be a whole number of 3 or more (test, validation and training "
                             f"folds); found {folds!r}")
    elif protocol == "split":
        check_fractions(data_cfg.get("val_fraction", 0.2), data_cfg.get("test_fraction", 0.3))
    else:
        raise UsageError(f"data.protocol must be split or crossfit; found {protocol!r}")


def check_fractions(val_fraction: float, test_fraction: float) -> None:
    """Each a number from 0 to below 1, together below 1: else a ``UsageError`` line naming it."""
    from model.errors import UsageError

    for key, value in (("data.val_fraction", val_fraction), ("data.test_fraction", test_fraction)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise UsageError(f"{key} must be a number from 0 to below 1; found {value!r}")
    if val_fraction + test_fraction >= 1:
        raise UsageError(f"data.val_fraction + data.test_fraction must be below 1; found {val_fraction} + {test_fraction}")


def check_folds(db_ids: Sequence[str], n_folds: int) -> None:
    """``data.folds`` no more than the eval split's databases (each fold holds one at least);
    else a one-line UsageError (the neural and the boosted run alike) that suggests only what can
    work: fewer folds, or ``data.protocol=split``, where there are 3 databases or more; where
    there are fewer, neither can (every protocol holds databases out: ``split_databases``).

    >>> check_folds(["a", "b", "c", "d"], 5)
    Traceback (most recent call last):
    model.errors.UsageError: data.folds=5: the eval split has only 4 databases with examples; use data.folds=3 or 4, or data.protocol=split
    >>> check_folds(["a", "a"], 5)
    Traceback (most recent call last):
    model.errors.UsageError: data.folds=5: the eval split has 1 database with examples; training needs 3 at least ...
    """
    n = len(set(db_ids))
    if n < MIN_DATABASES:
        from model.errors import UsageError

        raise UsageError(too_few_databases(f"data.folds={n_folds}", n))
    if n < n_folds:
        from model.errors import UsageError

        folds = "data.folds=3" if n == 3 else f"data.folds=3 or {n}" if n == 4 else f"data.folds=3 to {n}"
        raise UsageError(f"data.folds={n_folds}: the eval split has only {n} databases with examples; "
                         f"use {folds}, or data.protocol=split")


MIN_DATABASES = 3  # one to train on, one to validate (calibrate) on, one to test on


def too_few_databases(setting: str, n: int) -> str:
    """The message for ``n`` (< 3) databases: neither protocol can split them three ways."""
    return (f"{setting}: the eval split has {n} database{'s' if n != 1 else ''} with examples; training "
            f"needs {MIN_DATABASES} at least (whole databases to train, validate and test on, under either "
            "data.protocol): add outputs on other databases' questions")


def check_run_folds(run_folds: Sequence[int] | None, n_folds: int) -> list[int]:
    """``data.run_folds`` as ints, every one a fold of ``n_folds``; else a one-line UsageError."""
    folds = [int(f) for f in run_folds or []]
    bad = [f for f in folds if not 0 <= f < n_folds]
    if bad:
        from model.errors import UsageError

        raise UsageError(f"data.run_folds: folds are numbered 0..{n_folds - 1}; found {bad}")
    return folds


def check_holdout_system(system: str, systems: Sequence[str]) -> None:
    """``data.holdout_system`` must name one of ``systems`` and leave another to train on."""
    systems = sorted(set(systems))
    if system not in systems or len(systems) < 2:
        from model.errors import UsageError

        why = "no such system" if system not in systems else "no other system to train on"
        raise UsageError(f"data.holdout_system={system}: {why}; found {systems}")


def holdout_keeps(system: str, role: str, holdout: str | None) -> bool:
    """Leave one system out: the held-out system's outputs only test, the others never do.

    >>> [holdout_keeps(s, r, "b") for s, r in (("a", "train"), ("b", "train"), ("a", "test"), ("b", "test"))]
    [True, False, False, True]
    """
    return not holdout or (system == holdout) == (role == "test")


def split_databases(
    questions_per_db: dict[str, int], val_fraction: float, test_fraction: float, seed: int = 0
) -> dict[str, str]:
    """Assign each database to "train", "val" or "test" so that about ``test_fraction`` and
    ``val_fraction`` of the questions land in test and val, and at least one database each (val
    and test: where their fraction is above 0). Fewer databases than that is a ``UsageError`` (one
    line): a split with nothing to train, validate or test on would fail later, in a traceback.

    >>> split = split_databases({"a": 10, "b": 10, "c": 10, "d": 10, "e": 10}, 0.2, 0.4, seed=0)
    >>> sorted(split.values())
    ['test', 'test', 'train', 'train', 'val']
    >>> split == split_databases({"e": 10, "d": 10, "c": 10, "b": 10, "a": 10}, 0.2, 0.4, seed=0)
    True
    >>> sorted(split_databases({"a": 1, "b": 1, "c": 100}, 0.2, 0.3, seed=1).values())
    ['test', 'train', 'val']
    >>> split_databases({"a": 10, "b": 10}, 0.2, 0.3)
    Traceback (most recent call last):
    model.errors.UsageError: data.protocol=split: the eval split has 2 databases with examples; training needs 3 ...
    """
    from model.errors import UsageError

    check_fractions(val_fraction, test_fraction)
    roles = ["train", *(s for s, f in (("val", val_fraction), ("test", test_fraction)) if f > 0)]
    if len(questions_per_db) < len(roles):
        n = len(questions_per_db)
        if len(roles) == MIN_DATABASES:
            raise UsageError(too_few_databases("data.protocol=split", n))
        raise UsageError(f"data.protocol=split: the eval split has {n} database{'s' if n != 1 else ''} with "
                         f"examples; it needs {len(roles)} at least (to {', '.join(roles)} on)")
    dbs = sorted(questions_per_db)
    random.Random(seed).shuffle(dbs)
    total = sum(questions_per_db.values())
    out, taken = {}, {"test": 0, "val": 0}
    targets = {"test": test_fraction * total, "val": val_fraction * total}
    for db in dbs:
        split = next((s for s in ("test", "val") if taken[s] < targets[s] and (
            taken[s] == 0 or taken[s] + questions_per_db[db] / 2 <= targets[s])), "train")
        out[db] = split
        if split != "train":
            taken[split] += questions_per_db[db]
    for role in roles:  # a role left empty (a few databases of unequal size): the smallest
        # database of the role with the most moves to it (no other assignment changes)
        if role not in out.values():
            giver = max((r for r in roles if r != role), key=lambda r: sum(v == r for v in out.values()))
            out[min((d for d in dbs if out[d] == giver), key=lambda d: (questions_per_db[d], d))] = role
    return out
