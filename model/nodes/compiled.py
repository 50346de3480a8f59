"""Fitted gradient-boosted trees as flat arrays: the same probabilities as scikit-learn's
``predict_proba`` for the few rows of one query, without its per-tree call."""

from __future__ import annotations

from typing import Any

import numpy as np

COMPILED_ROWS = 256  # up to this many rows CompiledTrees is faster than scikit-learn's predict


class CompiledTrees:
    """A fitted binary ``HistGradientBoostingClassifier`` whose trees are flat arrays, walked
    for every tree at once: the same probabilities as its ``predict_proba(x)[:, 1]`` (the same
    branch rules, leaf values summed in the same order), without scikit-learn's per-tree call,
    which dominates for the few rows of one query (300 trees x 2 models a query).

    >>> from sklearn.ensemble import HistGradientBoostingClassifier
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(400, 3)); x[:, 2] = rng.integers(0, 5, 400); x[::7, 0] = np.nan
    >>> y = (np.nan_to_num(x[:, 0]) + (x[:, 2] == 3) > 0.5).astype(int)
    >>> model = HistGradientBoostingClassifier(categorical_features=[2], max_iter=20).fit(x, y)
    >>> bool((CompiledTrees(model).predict_proba1(x) == model.predict_proba(x)[:, 1]).all())
    True
    """

    def __init__(self, model: Any):
        if model.n_trees_per_iteration_ != 1:
            raise ValueError("CompiledTrees reads binary classifiers")
        trees = [p[0] for p in model._predictors]
        sizes = np.array([len(t.nodes) for t in trees])
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        bitset_sizes = np.array([len(t.raw_left_cat_bitsets) for t in trees])
        bitset_offsets = np.concatenate([[0], np.cumsum(bitset_sizes)[:-1]])
        nodes = np.concatenate([t.nodes for t in trees])
        shift = np.repeat(offsets, sizes)
        self.model = model
        self.roots = offsets.astype(np.intp)
        leaf = nodes["is_leaf"].astype(bool)
        here = np.arange(len(nodes), dtype=np.intp)
        # a leaf points to itself on both sides: walking on from a leaf stays there
        self.left = np.where(leaf, here, nodes["left"].astype(np.intp) + shift)
        self.right = np.where(leaf, here, nodes["right"].astype(np.intp) + shift)
        self.feature = np.where(leaf, 0, nodes["feature_idx"]).astype(np.intp)
        self.threshold = nodes["num_threshold"].astype(np.float64)
        self.missing_left = nodes["missing_go_to_left"].astype(bool)
        self.is_categorical = nodes["is_categorical"].astype(bool) & ~leaf
        self.is_leaf = leaf
        self.value = nodes["value"].astype(np.float64)
        self.bitset = nodes["bitset_idx"].astype(np.intp) + np.repeat(bitset_offsets, sizes)
        self.left_bitsets = np.concatenate([t.raw_left_cat_bitsets for t in trees]) if bitset_sizes.sum() \
            else np.zeros((1, 8), dtype=np.uint32)
        self.known_bitsets, self.f_idx_map = model._bin_mapper.make_known_categories_bitsets()
        self.depth = int(nodes["depth"].max())
        self.encoding = _ordinal_encoding(model)

    def predict_proba1(self, x: np.ndarray) -> np.ndarray:
        """P(class 1) of each row of ``x``."""
        x = self.encode(np.asarray(x, dtype=np.float64))
        n = len(x)
        at = np.broadcast_to(self.roots, (n, len(self.roots))).copy()
        rows = np.arange(n)[:, None]
        for _ in range(self.depth):
            if self.is_leaf[at].all():
                break
            value = x[rows, self.feature[at]]
            left = value <= self.threshold[at]
            missing = np.isnan(value)
            if missing.any():
                left[missing] = self.missing_left[at[missing]]
            categorical = self.is_categorical[at] & ~missing
            if categorical.any():
                node, c_value = at[categorical], value[categorical]
                out_of_range = c_value < 0
                code = np.where(out_of_range, 0, c_value).astype(np.int64).astype(np.uint8)
                word, bit = code // 32, (code % 32).astype(np.uint32)
                in_left = (self.left_bitsets[self.bitset[node], word] >> bit) & 1
                known = (self.known_bitsets[self.f_idx_map[self.feature[node]], word] >> bit) & 1
                as_missing = out_of_range | ((in_left == 0) & (known == 0))
                left[categorical] = np.where(as_missing, self.missing_left[node], in_left == 1)
            at = np.where(left, self.left[at], self.right[at])
        # the baseline, then tree by tree in order, as scikit-learn adds them (cumsum is sequential)
        terms = np.hstack([np.full((n, 1), float(self.model._baseline_prediction.ravel()[0])), self.value[at]])
        raw = np.cumsum(terms, axis=1)[:, -1:]
        return self.model._loss.predict_proba(np.asfortranarray(raw))[:, 1]

    def encode(self, x: np.ndarray) -> np.ndarray:
        """``x`` as the trees read it: what the model's own preprocessing gives (categorical
        columns first, as ordinal codes; an unknown category or NaN is NaN), without its
        per-call overhead."""
        if self.encoding is None:
            return self.model._preprocess_X(x, reset=False)
        categorical, numeric, categories = self.encoding
        out = np.empty((len(x), len(categorical) + len(numeric)))
        for j, (column, known) in enumerate(zip(categorical, categories)):
            v = x[:, column]
            if not len(known):
                out[:, j] = np.nan
                continue
            code = np.minimum(np.searchsorted(known, v), len(known) - 1)
            out[:, j] = np.where(known[code] == v, code, np.nan)
        out[:, len(categorical):] = x[:, numeric]
        return out


def _ordinal_encoding(model) -> tuple[list[int], list[int], list[np.ndarray]] | None:
    """(categorical columns, numeric columns, categories) of the model's preprocessing, or None
    when it is not the plain one this reproduces."""
    from sklearn.preprocessing import OrdinalEncoder

    pre = getattr(model, "_preprocessor", None)
    if pre is None:
        return None
    parts = {name: (transformer, np.flatnonzero(columns) if np.asarray(columns).dtype == bool
                    else np.asarray(columns)) for name, transformer, columns in pre.transformers_}
    encoder = parts.get("encoder", (None,))[0]
    if not isinstance(encoder, OrdinalEncoder) or set(parts) - {"encoder", "numerical", "remainder"} \
            or len(parts.get("remainder", (None, []))[1]) or not np.isnan(encoder.unknown_value) \
            or not np.isnan(encoder.encoded_missing_value):
        return None
    # NaN, when seen in training, is the last category; it is encoded as NaN all the same
    return (list(parts["encoder"][1]), list(parts.get("numerical", (None, []))[1]),
            [np.asarray(c, dtype=np.float64)[~np.isnan(np.asarray(c, dtype=np.float64))]
             for c in encoder.categories_])
