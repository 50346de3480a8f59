"""Fitted gradient-boosted trees as flat arrays: the same probabilities as scikit-learn's
``predict_proba`` for the rows of one query or a few, without its per-tree call."""

from __future__ import annotations

from typing import Any

import numpy as np

COMPILED_ROWS = 512  # up to this many rows CompiledTrees is faster than scikit-learn's predict on one thread


class CompiledTrees:
    """A fitted binary ``HistGradientBoostingClassifier`` read for every tree at once: the same
    probabilities as its ``predict_proba(x)[:, 1]`` (the same branch rules, leaf values summed
    in the same order), without scikit-learn's per-tree call, which dominates for the few rows
    of one query (300 trees x 2 models a query).

    How: each split's test (feature, threshold, missing side; categorical: the left set) is
    decided once per row for all the splits that share it; a tree's exit leaf is then found
    without walking it (QuickScorer, Lucchese et al., SIGIR 2015): its leaves, numbered left to
    right, are bits of a word; every split that sends the row right clears the leaves of its
    left subtree, and the lowest bit left standing is the leaf the walk would reach. The words
    of all trees are ANDed together at once, so the number of array operations does not grow
    with the trees' depth.

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
        trees = [p[0].nodes for p in model._predictors]
        leaves = max(int(t["is_leaf"].sum()) for t in trees)
        if leaves > 64:
            raise ValueError(f"CompiledTrees reads trees of at most 64 leaves; found {leaves}")
        self.word = np.uint32 if leaves <= 32 else np.uint64
        self.all_leaves = self.word(np.iinfo(self.word).max)
        splits = max(int((~t["is_leaf"].astype(bool)).sum()) for t in trees)
        self.slots = 1 << max(0, splits - 1).bit_length()  # a power of two: ANDed by halves
        self.model = model
        self.encoding = _ordinal_encoding(model)
        known_bitsets, f_idx_map = model._bin_mapper.make_known_categories_bitsets()
        # slot j of tree k: its j-th split's test and leaf mask; unused slots keep every leaf
        tests: dict[tuple, int] = {}
        test_nodes: list[tuple[np.void, np.ndarray]] = []  # a split of each test, its tree's bitsets
        self.test = np.zeros((self.slots, len(trees)), dtype=np.intp)
        self.masks = np.full((self.slots, len(trees)), self.all_leaves, dtype=self.word)
        self.leaf_values = np.zeros((len(trees), leaves))
        self.leaf_start = (np.arange(len(trees)) * leaves)[:, None]  # tree k's leaves in leaf_values.ravel()
        for k, (tree, predictor) in enumerate(zip(trees, model._predictors)):
            bitsets = predictor[0].raw_left_cat_bitsets
            order, below = _leaves_left_to_right(tree)
            self.leaf_values[k, :len(order)] = tree["value"][order]
            full = (1 << len(order)) - 1
            for j, i in enumerate(np.flatnonzero(~tree["is_leaf"].astype(bool))):
                node = tree[i]
                key = (("categorical", int(node["feature_idx"]), bitsets[node["bitset_idx"]].tobytes())
                       if node["is_categorical"] else ("numeric", int(node["feature_idx"]), float(node["num_threshold"])))
                key += (bool(node["missing_go_to_left"]),)
                if key not in tests:
                    tests[key] = len(tests)
                    test_nodes.append((node, bitsets))
                self.test[j, k] = tests[key]
                self.masks[j, k] = full & ~below[i]  # right: none of the left subtree's leaves
        self.test_flat = self.test.ravel()
        self.n_tests = len(tests)
        numeric = [t for t, (node, _) in enumerate(test_nodes) if not node["is_categorical"]]
        self.numeric_tests = np.array(numeric, dtype=np.intp)
        n_features = model.n_features_in_
        # NaN reads as -inf where missing values go left (then <= any threshold), stays NaN elsewhere
        self.numeric_feature = np.array([int(test_nodes[t][0]["feature_idx"]) + n_features
                                         * bool(test_nodes[t][0]["missing_go_to_left"]) for t in numeric],
                                        dtype=np.intp)
        self.numeric_threshold = np.array([float(test_nodes[t][0]["num_threshold"]) for t in numeric])[:, None]
        # categorical tests: a table per feature, test x (code 0..255, then 256: missing or negative)
        code = np.arange(256)
        word, bit = code // 32, (code % 32).astype(np.uint32)
        self.categorical = []
        for feature in sorted({int(node["feature_idx"]) for node, _ in test_nodes if node["is_categorical"]}):
            ids = [t for t, (node, _) in enumerate(test_nodes)
                   if node["is_categorical"] and int(node["feature_idx"]) == feature]
            rows = []
            for t in ids:
                node, bitsets = test_nodes[t]
                in_left = (bitsets[node["bitset_idx"], word] >> bit) & 1
                known = (known_bitsets[f_idx_map[feature], word] >> bit) & 1
                missing_left = bool(node["missing_go_to_left"])
                # a category neither sent left nor seen in training is read as missing
                rows.append(np.append(np.where((in_left == 0) & (known == 0), missing_left, in_left == 1),
                                      missing_left))
            self.categorical.append((feature, np.array(ids, dtype=np.intp), np.array(rows, dtype=bool)))
        self.baseline = float(model._baseline_prediction.ravel()[0])

    def predict_proba1(self, x: np.ndarray) -> np.ndarray:
        """P(class 1) of each row of ``x``."""
        x = self.encode(np.asarray(x, dtype=np.float64))
        n = len(x)
        xt = x.T  # (features, rows)
        go_left = np.empty((max(1, self.n_tests), n), dtype=bool)  # one row when no tree splits
        both = np.vstack([xt, np.where(np.isnan(xt), -np.inf, xt)])
        go_left[self.numeric_tests] = both[self.numeric_feature] <= self.numeric_threshold
        for feature, ids, table in self.categorical:
            value = xt[feature]
            column = np.full(n, 256, dtype=np.intp)
            valid = value >= 0  # not NaN, not negative
            column[valid] = value[valid].astype(np.int64).astype(np.uint8)
            go_left[ids] = table[:, column]
        keep = np.where(go_left, self.all_leaves, self.word(0))  # left: every leaf stays
        words = keep.take(self.test_flat, axis=0).reshape(self.slots, -1, n)  # (slots, trees, rows)
        words |= self.masks[:, :, None]
        half = self.slots
        while half > 1:
            half //= 2
            words = words[:half] & words[half:2 * half]
        standing = words[0]  # (trees, rows)
        lowest = standing & (~standing + self.word(1))
        leaf = np.frexp(lowest.astype(np.float64))[1] - 1  # the lowest set bit's position
        # the baseline, then tree by tree in order, as scikit-learn adds them (cumsum is sequential)
        terms = np.empty((len(self.leaf_values) + 1, n))  # (1 + trees, rows)
        terms[0] = self.baseline
        self.leaf_values.take(leaf + self.leaf_start, out=terms[1:])  # take_along_axis, cheaper
        raw = np.cumsum(terms, axis=0)[-1]
        return self.model._loss.predict_proba(np.asfortranarray(raw[:, None]))[:, 1]

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


def _leaves_left_to_right(tree: np.ndarray) -> tuple[list[int], dict[int, int]]:
    """A tree's leaves (node indices) from left to right, and for each split the bits (leaf
    positions) of its left subtree."""
    order: list[int] = []
    below: dict[int, int] = {}

    def leaf_bits(i: int) -> int:
        if tree["is_leaf"][i]:
            order.append(i)
            return 1 << (len(order) - 1)
        left = leaf_bits(int(tree["left"][i]))
        below[i] = left
        return left | leaf_bits(int(tree["right"][i]))

    leaf_bits(0)
    return order, below


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
