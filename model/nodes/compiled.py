"""Fitted gradient-boosted trees as flat arrays: the same probabilities as scikit-learn's
``predict_proba`` for the rows of one query or a few, without its per-tree call."""

from __future__ import annotations

from typing import Any

import numpy as np

from model.errors import ModelFileError

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
        problem = trees_problem(model)
        if problem is not None:  # (scikit-learn's own predictor would read past its arrays)
            raise ModelFileError(problem)
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


def trees_problem(model: Any) -> str | None:
    """What makes a fitted ``HistGradientBoostingClassifier``'s trees unsafe to walk, or None.
    scikit-learn's compiled predictor follows a tree's indices without checking them (a child,
    a feature, a category set out of range reads outside its arrays: the process is killed), and
    ``CompiledTrees`` recurses through them; a model read from a file is checked here first.

    Each tree: a non-empty 1-D array of scikit-learn's ``PREDICTOR_RECORD_DTYPE``; each split's
    children later nodes of its tree (no loop) and no node the child of two splits; its feature
    a column the model reads (a categorical split: a categorical feature, its category set one
    of the tree's, of 8 words of 32 bits); a numeric split's threshold a number or +inf (what
    scikit-learn writes where every value but a missing one goes left); each leaf's value a
    finite number, and the largest of them added over the trees (with the baseline) finite.

    >>> from sklearn.ensemble import HistGradientBoostingClassifier
    >>> model = HistGradientBoostingClassifier(max_iter=3).fit(np.arange(40.0)[:, None], np.arange(40) >= 20)
    >>> trees_problem(model) is None
    True
    >>> nodes = model._predictors[1][0].nodes; nodes["left"][0] = 0
    >>> trees_problem(model)
    "tree 1: node 0's children (0, 2) are not later nodes of the tree (1 to 2)"
    """
    from sklearn.ensemble._hist_gradient_boosting.common import PREDICTOR_RECORD_DTYPE
    from sklearn.ensemble._hist_gradient_boosting.predictor import TreePredictor

    if getattr(model, "_in_fit", False):
        return "marked as being fitted (its trees would read binned rows)"
    try:
        width = model._preprocess_X(np.zeros((1, model.n_features_in_)), reset=False).shape[1]
        categorical = np.asarray(model._bin_mapper.is_categorical_, dtype=bool).ravel()
        baseline = np.abs(np.asarray(model._baseline_prediction, dtype=np.float64)).sum()
        predictors = model._predictors
        per_iteration = model.n_trees_per_iteration_
    except Exception as e:  # noqa: BLE001  (a missing or junk part: each fails its own way)
        return f"its trees cannot be read ({type(e).__name__})"
    if not isinstance(predictors, list) or not predictors or not all(
            isinstance(trees, list) and len(trees) == per_iteration
            and all(isinstance(tree, TreePredictor) for tree in trees) for trees in predictors):
        return f"expected a list of {per_iteration} tree(s) per iteration"
    if not np.isfinite(baseline):
        return "its baseline is not a finite number"
    trees = [tree for trees in predictors for tree in trees]
    for k, tree in enumerate(trees):
        nodes, bitsets = tree.nodes, tree.raw_left_cat_bitsets
        if not isinstance(nodes, np.ndarray) or nodes.dtype != PREDICTOR_RECORD_DTYPE or nodes.ndim != 1 \
                or not len(nodes):
            return f"tree {k}: expected a 1-D array of scikit-learn's node records"
        if not isinstance(bitsets, np.ndarray) or bitsets.dtype != np.uint32 or bitsets.ndim != 2 \
                or bitsets.shape[1] != 8:
            return f"tree {k}: expected its category sets as rows of 8 words of 32 bits"
    # every tree's nodes at once: node j of the whole is node local[j] of tree of_tree[j]
    nodes = np.concatenate([tree.nodes for tree in trees])
    sizes = np.array([len(tree.nodes) for tree in trees])
    start = np.cumsum(sizes) - sizes
    of_tree = np.repeat(np.arange(len(trees)), sizes)
    local = np.arange(len(nodes)) - start[of_tree]

    def first(wrong: np.ndarray, among: np.ndarray) -> tuple[int, int, int]:
        """(tree, node of the tree, position in ``among``) of the first ``wrong`` of ``among``."""
        i = int(np.argmax(wrong))
        return int(of_tree[among[i]]), int(local[among[i]]), i

    split = np.flatnonzero(nodes["is_leaf"] == 0)  # (scikit-learn: any other value is a leaf)
    splits, size = nodes[split], sizes[of_tree[split]]
    left, right = splits["left"].astype(np.int64), splits["right"].astype(np.int64)
    wrong = (left <= local[split]) | (right <= local[split]) | (left >= size) | (right >= size)
    if wrong.any():
        k, node, i = first(wrong, split)
        return (f"tree {k}: node {node}'s children ({left[i]}, {right[i]}) are not later nodes of the tree "
                f"({node + 1} to {size[i] - 1})")
    children = np.concatenate([left, right]) + np.tile(start[of_tree[split]], 2)
    if len(np.unique(children)) < len(children):
        k = int(of_tree[np.sort(children)[np.flatnonzero(np.diff(np.sort(children)) == 0)[0]]])
        return f"tree {k}: a node is the child of two splits"
    feature = splits["feature_idx"].astype(np.int64)
    wrong = (feature < 0) | (feature >= width)
    if wrong.any():
        k, node, i = first(wrong, split)
        return f"tree {k}: node {node} splits on feature {feature[i]}; the model reads {width}"
    is_categorical = splits["is_categorical"] != 0
    wrong = is_categorical & ~np.append(categorical, False)[np.minimum(feature, len(categorical))]
    if wrong.any():
        k, node, i = first(wrong, split)
        return f"tree {k}: node {node} makes a categorical split of feature {feature[i]}, which is not categorical"
    sets = np.array([len(tree.raw_left_cat_bitsets) for tree in trees])[of_tree[split]]
    wrong = is_categorical & (splits["bitset_idx"] >= sets)
    if wrong.any():
        k, node, i = first(wrong, split)
        return f"tree {k}: node {node} reads category set {splits['bitset_idx'][i]}; the tree has {sets[i]}"
    threshold = splits["num_threshold"]
    wrong = ~is_categorical & (np.isnan(threshold) | (threshold == -np.inf))
    if wrong.any():
        k, node, _ = first(wrong, split)
        return f"tree {k}: node {node}'s threshold is not a number"
    value = np.where(nodes["is_leaf"] != 0, nodes["value"], 0.0)
    if not np.isfinite(value).all():
        k = int(of_tree[np.argmax(~np.isfinite(value))])
        return f"tree {k}: a leaf's value is not a finite number"
    with np.errstate(over="ignore"):
        largest = baseline + np.maximum.reduceat(np.abs(value), start).sum()
    if not np.isfinite(largest):
        return "its leaf values add up past the largest number"
    return None


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
