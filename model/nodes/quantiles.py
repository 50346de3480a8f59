"""Count features read as quantiles (``model.quantiles``): a node's ``question_words``,
``schema_columns``, ``tree_size``... become its mid-rank among a reference set of nodes, 0 to 1.

Why: these counts say more about which benchmark a query comes from than whether it is right
(BIRD's questions carry evidence, its schemas and queries are larger), so a model fitted on one
benchmark reads the other's counts as out of range. Read against each benchmark's own nodes,
"a large schema for this benchmark" means the same on both (``docs/research.md``, section 5). A run
fits the reference on its own nodes (no labels); a saved model keeps it, and ``Scorer`` reads
new queries against it, or against the scored rows themselves (``quantiles="rows"``: a file of
outputs from another benchmark or domain).

>>> names = ("kind", "tree_size")
>>> x = np.array([[0, 1.0], [0, 2.0], [1, 2.0], [1, 4.0]])
>>> q = Quantiles.fit(x, names, ("tree_size", "question_words"))
>>> q.features
('tree_size',)
>>> q.transform(np.array([[0, 2.0], [1, 3.0], [1, np.nan]]), names)[:, 1].tolist()
[0.5, 0.75, nan]
>>> Quantiles.from_dict(q.to_dict()) == q
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# The most shifted count features between Spider and BIRD (two-sample KS statistic,
# docs/research.md): the benchmark's size, the question's, the query's.
SHIFTED_FEATURES = ("question_words", "schema_columns", "schema_tables", "tree_values", "tree_joins",
                    "tree_size", "tables_sharing_name")


@dataclass
class Quantiles:
    """Per feature, the distinct values of a reference set of nodes and how many nodes have each
    value or a smaller one: enough to give any value its mid-rank among them."""

    features: tuple[str, ...]
    values: tuple[np.ndarray, ...]  # per feature: distinct values seen, ascending
    at_most: tuple[np.ndarray, ...]  # per feature: nodes with that value or less

    @classmethod
    def fit(cls, x: np.ndarray, names: Sequence[str], features: Sequence[str] = SHIFTED_FEATURES) -> Quantiles:
        """The reference: the rows ``x`` (nodes, ``names``); ``features`` not among ``names`` are
        skipped, and missing values (NaN) are not counted."""
        kept = tuple(n for n in features if n in names)
        values, at_most = [], []
        for n in kept:
            column = x[:, list(names).index(n)]
            distinct, counts = np.unique(column[~np.isnan(column)], return_counts=True)
            values.append(distinct.astype(float))
            at_most.append(np.cumsum(counts).astype(float))
        return cls(kept, tuple(values), tuple(at_most))

    def transform(self, x: np.ndarray, names: Sequence[str]) -> np.ndarray:
        """A copy of ``x`` with each reference feature replaced by its mid-rank among the
        reference nodes: (nodes below + nodes at most) / 2 / all; NaN stays NaN."""
        out = np.array(x, dtype=float, copy=True)
        for n, distinct, at_most in zip(self.features, self.values, self.at_most):
            if n not in names or not len(at_most):
                continue
            v = out[:, list(names).index(n)]
            seen = ~np.isnan(v)
            below = np.searchsorted(distinct, v[seen], "left")
            upto = np.searchsorted(distinct, v[seen], "right")
            count = np.concatenate([[0.0], at_most])
            v[seen] = (count[below] + count[upto]) / 2 / at_most[-1]
        return out

    def to_dict(self) -> dict:
        return {n: {"values": v.tolist(), "at_most": c.astype(int).tolist()}
                for n, v, c in zip(self.features, self.values, self.at_most)}

    @classmethod
    def from_dict(cls, d: dict) -> Quantiles:
        names = tuple(d)
        return cls(names, tuple(np.asarray(d[n]["values"], dtype=float) for n in names),
                   tuple(np.asarray(d[n]["at_most"], dtype=float) for n in names))

    def __eq__(self, other) -> bool:
        return isinstance(other, Quantiles) and self.to_dict() == other.to_dict()
