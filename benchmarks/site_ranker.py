"""Look here first as a ranking problem: the site head fitted with a learning-to-rank objective
grouped by query (LightGBM's lambdarank), against today's head, on the same folds.

Each variant replaces only the site head's learner inside the project's own cross-fitting
(``model.nodes.boosted.crossfit``: the same node model, folds, inner folds, context and training
rows; wrong queries only): ``hgb`` is today's head (scikit-learn's HistGradientBoosting, binary
log-loss), ``lgb_binary`` the same objective in LightGBM (to tell the library from the
objective), ``lgb_lambdarank`` LightGBM's lambdarank with each wrong query a group, its sites
relevant, ``lgb_rank_xendcg`` the same with LightGBM's listwise cross-entropy objective,
``pairwise`` a classifier over pairs of nodes of a wrong query ("i is a site, j is not": both
nodes' features and context, their differences, where j lies from i), a node's score its mean
win probability in its query, ``hgb_pairwise`` the mean of its rank and today's head's, and
``hgb_bag`` today's head with ``model.site_bags=5`` (five heads on bootstrap draws of the wrong
queries, averaged), ``tree_context`` today's head also reading the site context of a second node
model fitted on tree labels (out of fold over the head's rows, inner folds by database),
``tree_sites`` today's head learning the sites of tree labels, so from every query that differs
from gold (right by execution or not; ``model.site_labels=tree``), and ``tree_both`` the two together; ``tree_context_bag``,
``tree_sites_bag`` and ``tree_both_bag`` are those with ``model.site_bags=5`` (the small gains of bagging and of
tree labels, together); ``one_site_x3`` today's head with the wrong queries that have one site
weighted 3, ``one_site_head`` the mean of today's head and a head fitted on those queries only (the
misses that set the floor depart from gold in one place), ``one_site_only`` that head alone; ``autocontext`` a second head over
today's, reading the first's out-of-fold site scores of the node, its parent, children, siblings
and subtree (sites compete along a path: a site's ancestors are not sites); ``agreed_sites`` today's
head with the wrong queries whose every site most other systems' answers share weighted
``AGREED_WEIGHT`` (a mistake most systems make alike is often gold's own reading).
``--default-command``: on the default command's table as it is now (Qwen's answers to Spider train
as training rows; ``default_crossfit``) rather than without the answers.
Prints top-1 / top-3 / mrr of each over Spider dev's wrong queries (out of fold). The ``lgb_*``
variants need ``pip install lightgbm`` (not a dependency of the project).

    python benchmarks/site_ranker.py [--variants hgb,lgb_binary,lgb_lambdarank,pairwise,tree_context] [--groups single] [--write DIR]
        [--default-command]
"""

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from omegaconf import OmegaConf

from model.eval.localisation import localisation, post_order_children
from model.nodes import boosted
from model.nodes.boosted import fit_classifier
from model.nodes.features import categorical_mask
from model.nodes.sites import SITE_CONTEXT, with_context

SHARED = Path(os.environ.get("RAT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
VARIANTS = ("hgb", "lgb_binary", "lgb_lambdarank", "lgb_rank_xendcg", "pairwise", "hgb_pairwise", "hgb_bag",
            "tree_context", "tree_sites", "tree_both", "tree_context_bag", "tree_sites_bag", "tree_both_bag",
            "one_site_x3", "one_site_head", "one_site_only", "autocontext", "agreed_sites")
BAGS = 5  # hgb_bag: today's head with model.site_bags=5 (bootstrap draws of the wrong queries, averaged)
PAIR_CAP = 300  # training pairs drawn at most from one wrong query (sites x other nodes, both orders)


class Ranker:
    """A LightGBM model with the ``predict_proba`` the site head's callers use (column 1: the
    score; only its order within a query is read)."""

    def __init__(self, model, names):
        self.model, self.names = model, names

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        score = self.model.predict(x) if not hasattr(self.model, "predict_proba") else \
            self.model.predict_proba(x)[:, 1]
        return np.column_stack([-score, score])


def lightgbm_site_head(objective: str):
    """A ``fit_site_head`` whose learner is LightGBM with ``objective`` (binary, or a ranking one,
    each query a group), on the rows today's head learns from (``site_head_rows``), with the
    node model's boosting settings."""
    import lightgbm as lgb

    def fit(table, indices, x, sites, names, config, seed=0, raw=None):
        if not config.site_head or not sites.any():
            return None
        x, sites, groups, names = boosted.site_head_rows(table, indices, x, sites, names, config, raw)
        hgb = config.site_hgb or config.hgb
        params = {"learning_rate": hgb["learning_rate"], "n_estimators": hgb["max_iter"],
                  "num_leaves": hgb["max_leaf_nodes"], "min_child_samples": hgb["min_samples_leaf"],
                  "reg_lambda": hgb["l2_regularization"], "random_state": seed, "verbose": -1,
                  "subsample_for_bin": len(x)}
        categorical = [int(j) for j in np.flatnonzero(categorical_mask(names))]
        if objective != "binary":
            model = lgb.LGBMRanker(objective=objective, **params)
            model.fit(x, sites, group=groups, categorical_feature=categorical)
        else:
            model = lgb.LGBMClassifier(objective="binary", **params)
            model.fit(x, sites, categorical_feature=categorical)
        return Ranker(model, names)

    return fit


def tree_relations(arity) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(parent of every node, -1 for the root; its depth; ancestor matrix: [i, j] true when j is
    a proper ancestor of i) of one post-order tree.

    >>> parent, depth, above = tree_relations([0, 0, 2, 1])  # Root(Op(a, b))
    >>> parent.tolist(), depth.tolist(), above[0].tolist()
    ([2, 2, 3, -1], [2.0, 2.0, 1.0, 0.0], [False, False, True, True])
    """
    children = post_order_children(arity)
    n = len(arity)
    parent = np.full(n, -1)
    for i, kids in enumerate(children):
        parent[kids] = i
    depth = np.zeros(n)
    above = np.zeros((n, n), dtype=bool)
    for i in range(n - 1, -1, -1):  # post-order: a parent comes after its children
        if parent[i] >= 0:
            depth[i] = depth[parent[i]] + 1
            above[i] = above[parent[i]]
            above[i, parent[i]] = True
    return parent, depth, above


def pair_rows(x: np.ndarray, numeric: np.ndarray, arity, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Rows of "is node i the site rather than node j?" for one query: i's features, j's, their
    numeric differences, and where j lies from i (ancestor, descendant, sibling, depth apart)."""
    parent_of, depth, above = tree_relations(arity)
    relation = np.column_stack([above[i, j], above[j, i], (parent_of[i] == parent_of[j]) & (parent_of[i] >= 0),
                                depth[i] - depth[j]]).astype(float)
    return np.hstack([x[i], x[j], x[i][:, numeric] - x[j][:, numeric], relation])


class PairwiseHead:
    """A site head over pairs of nodes of one query: a boosted classifier of "i is a site and j is
    not" (both orders), whose score of a node is its mean win probability against the query's
    other nodes; with ``pointwise`` (today's head), the mean of the two heads' ranks in the query."""

    def __init__(self, model, numeric, pointwise=None):
        self.model, self.numeric, self.pointwise = model, numeric, pointwise

    def scores(self, x: np.ndarray, arities) -> np.ndarray:
        out, start = [], 0
        for arity in arities:
            n = len(arity)
            xq = x[start:start + n]
            start += n
            if n == 1:
                out.append(np.full(1, 0.5))
                continue
            i, j = np.nonzero(~np.eye(n, dtype=bool))
            win = self.model.predict_proba(pair_rows(xq, self.numeric, arity, i, j))[:, 1]
            score = np.bincount(i, weights=win, minlength=n) / (n - 1)
            if self.pointwise is not None:
                point = self.pointwise.predict_proba(xq)[:, 1]
                score = (np.argsort(np.argsort(score)) + np.argsort(np.argsort(point)) + (score + point) / 4) / (2 * n)
            out.append(score)
        return np.concatenate(out) if out else np.zeros(0)


def pairwise_site_head(with_pointwise: bool = False):
    """A ``fit_site_head`` learning from pairs (a site, another node of its wrong query); with
    ``with_pointwise``, beside today's head."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    def fit(table, indices, x, sites, names, config, seed=0, raw=None):
        if not config.site_head or not sites.any():
            return None
        sizes = np.array([len(table.examples[k].node_labels) for k in indices])
        repeat = len(x) // max(int(sizes.sum()), 1)
        arities = [table.examples[k].node_arity for k in indices] * repeat
        has_site = np.add.reduceat(sites, np.r_[0, np.cumsum(np.tile(sizes, repeat))[:-1]]) > 0
        if config.site_wrong_only:  # the queries site_head_rows keeps, in order
            arities = [a for a, w in zip(arities, has_site) if w]
        x, sites, sizes, names = boosted.site_head_rows(table, indices, x, sites, names, config, raw)
        assert [len(a) for a in arities] == list(sizes)
        categorical = categorical_mask(names)
        numeric = ~categorical
        rng = np.random.default_rng(seed)
        rows, labels, start = [], [], 0
        for size, arity in zip(sizes, arities):
            s = sites[start:start + size]
            xq = x[start:start + size]
            start += size
            pos, neg = np.flatnonzero(s), np.flatnonzero(s == 0)
            if not len(pos) or not len(neg):
                continue
            pi, nj = np.meshgrid(pos, neg, indexing="ij")
            pi, nj = pi.ravel(), nj.ravel()
            if len(pi) > PAIR_CAP // 2:
                keep = rng.choice(len(pi), PAIR_CAP // 2, replace=False)
                pi, nj = pi[keep], nj[keep]
            rows += [pair_rows(xq, numeric, arity, pi, nj), pair_rows(xq, numeric, arity, nj, pi)]
            labels += [np.ones(len(pi)), np.zeros(len(pi))]
        xp, yp = np.vstack(rows), np.concatenate(labels)
        mask = np.concatenate([categorical, categorical, np.zeros(numeric.sum() + 4, dtype=bool)])
        empty = np.isnan(xp).all(axis=0)
        xp[:, empty] = 0.0
        hgb = config.site_hgb or config.hgb
        model = HistGradientBoostingClassifier(categorical_features=mask, random_state=seed,
                                               early_stopping=False, **hgb).fit(xp, yp)
        print(f"    pairwise head: {len(xp)} pairs from {len(sizes)} wrong queries", flush=True)
        pointwise = fit_classifier(x, sites, names, hgb, seed) if with_pointwise else None
        return PairwiseHead(model, numeric, pointwise)

    return fit


def one_site_site_head(mode: str):
    """A ``fit_site_head`` for the wrong queries with one error site: they weigh 3 in today's
    head (``weight``), or a second head learns from them alone and the two are averaged
    (``separate``; ``boosted.site_probability`` reads a list of heads as their mean), or that
    head alone scores every query (``only``: read on the one-site queries, it says whether the
    other queries' rows help or hinder pointing into them)."""
    if mode not in ("weight", "separate", "only"):
        raise ValueError(f"one_site_site_head: unknown mode {mode!r}")

    def fit(table, indices, x, sites, names, config, seed=0, raw=None):
        if not config.site_head or not sites.any():
            return None
        x, sites, sizes, names = boosted.site_head_rows(table, indices, x, sites, names, config, raw)
        one = np.add.reduceat(sites, np.r_[0, np.cumsum(sizes)[:-1]]) == 1
        hgb = config.site_head_hgb(names)
        if mode == "weight":
            return fit_classifier(x, sites, names, hgb, seed, sample_weight=np.repeat(np.where(one, 3.0, 1.0), sizes))
        keep = np.repeat(one, sizes)
        alone = fit_classifier(x[keep], sites[keep], names, hgb, seed)
        return alone if mode == "only" else [fit_classifier(x, sites, names, hgb, seed), alone]

    return fit


def pairwise_site_head_scores(site_model, x, raw, arities, context, names):
    """``boosted.site_head_scores`` for a ``PairwiseHead`` (it needs each query's nodes together)."""
    if not isinstance(site_model, PairwiseHead):
        return DEFAULT_SCORES(site_model, x, raw, arities, context, names)
    return site_model.scores(with_context(x, raw, arities, names) if context else x, arities)


DEFAULT_SCORES = boosted.site_head_scores


class TreeContextHead:
    """Today's head reading a second context: that of a node model fitted on tree labels."""

    def __init__(self, head, tree_model):
        self.head, self.tree_model = head, tree_model


def tree_label_rows(table, indices, rows: int) -> np.ndarray:
    """Tree labels of the training rows of ``indices`` (repeated as ``training_rows`` repeats them)."""
    y = np.concatenate([table.examples[k].tree_labels for k in indices])
    return np.tile(y, rows // max(len(y), 1))


def tree_context_site_head(table, indices, x, sites, names, config, seed=0, raw=None):
    """``fit_site_head`` whose rows also carry the site context of a node model fitted on tree
    labels (every query: a right-by-execution query written unlike gold has wrong nodes too),
    out of fold over the head's own rows (inner folds by database)."""
    if not config.site_head or not sites.any():
        return None
    y_tree = tree_label_rows(table, indices, len(x))
    tree_raw = boosted.inner_out_of_fold(x, y_tree, boosted.row_groups(table, indices, len(x)), names, config, seed)
    tree_model = fit_classifier(x, y_tree, names, config.node_hgb(names), seed)
    sizes = [table.examples[k].node_arity for k in indices]
    arities = sizes * (len(x) // max(sum(map(len, sizes)), 1))
    extra = with_context(np.zeros((len(x), 0)), tree_raw, arities)
    xx = np.hstack([x, extra])
    nn = (*names, *(f"tree_{c}" for c in SITE_CONTEXT))
    return TreeContextHead(DEFAULT_HEAD(table, indices, xx, sites, nn, config, seed, raw), tree_model)


def tree_context_scores(site_model, x, raw, arities, context, names):
    if not isinstance(site_model, TreeContextHead):
        return pairwise_site_head_scores(site_model, x, raw, arities, context, names)
    extra = with_context(np.zeros((len(x), 0)), site_model.tree_model.predict_proba(x)[:, 1], arities)
    nn = (*names, *(f"tree_{c}" for c in SITE_CONTEXT))
    return DEFAULT_SCORES(site_model.head, np.hstack([x, extra]), raw, arities, context, nn)


AGREED_WEIGHT = 0.3  # agreed_sites: the weight of a wrong query whose every site most other systems share


def agreed_sites_site_head(table, indices, x, sites, names, config, seed=0, raw=None):
    """``fit_site_head`` with the wrong queries whose every error site at least half of the other
    systems' answers also contain (``node_agreements``) weighted ``AGREED_WEIGHT``: a "mistake"
    most systems make alike is often gold's own reading (an annotation choice), noise for the
    head to learn from. Train-side answers (one system a question) keep weight 1."""
    from model.nodes.features import node_agreements

    if not config.site_head or not sites.any():
        return None
    if getattr(table, "node_agreements", None) is None:  # once per table, not once per fold
        table.node_agreements = node_agreements(table.examples)
    agreements = table.node_agreements
    sizes = np.array([len(table.examples[k].node_labels) for k in indices])
    repeat = len(x) // max(int(sizes.sum()), 1)
    all_sizes = np.tile(sizes, repeat)
    starts = np.r_[0, np.cumsum(all_sizes)[:-1]]
    weights = np.ones(len(all_sizes))
    for q, (k, start, size) in enumerate(zip(np.tile(list(indices), repeat), starts, all_sizes)):
        a, where = agreements[k], np.flatnonzero(sites[start:start + size])
        if a is not None and len(where) and (a[where] >= 0.5).all():
            weights[q] = AGREED_WEIGHT
    xh, sh, hsizes, hnames = boosted.site_head_rows(table, indices, x, sites, names, config, raw)
    if config.site_wrong_only:
        weights = weights[np.add.reduceat(sites, starts) > 0]
    print(f"    agreed_sites: {int((weights < 1).sum())} of {len(weights)} wrong queries weighted {AGREED_WEIGHT}",
          flush=True)
    return fit_classifier(xh, sh, hnames, config.site_head_hgb(hnames), seed, sample_weight=np.repeat(weights, hsizes))


class AutoContextHead:
    """Two heads: the first is today's; the second reads, beside the same rows, the first's
    site scores of the node's neighbourhood (``site_context`` of 1 - P(site): its own score, its
    parent's, its children's and siblings' highest, the highest below it, its rank in the query)."""

    def __init__(self, first, second):
        self.first, self.second = first, second


def site_score_context(scores: np.ndarray, arities) -> np.ndarray:
    """The neighbourhood of each node's first-stage site score (``site_context`` read with
    "right" = "not a site", so its lowest child logit is the child likeliest to be a site)."""
    return with_context(np.zeros((len(scores), 0)), 1.0 - np.asarray(scores), arities)


def autocontext_site_head(table, indices, x, sites, names, config, seed=0, raw=None):
    """``fit_site_head`` in two stages (auto-context): today's head, out of fold over its own
    rows (inner folds by database, as the node model's context is), gives every node a first
    site score; a second head learns from the rows with that score's neighbourhood appended.
    Sites compete along a path (a site's ancestors are not sites), which one node's row alone
    cannot see."""
    from model.data.folds import schema_disjoint_folds

    if not config.site_head or not sites.any():
        return None
    sizes = np.array([len(table.examples[k].node_labels) for k in indices])
    repeat = len(x) // max(int(sizes.sum()), 1)
    groups = boosted.row_groups(table, indices, len(x))
    arities = [table.examples[k].node_arity for k in indices] * repeat
    xh, sh, hsizes, hnames = boosted.site_head_rows(table, indices, x, sites, names, config, raw)
    if config.site_wrong_only:
        all_sizes = np.tile(sizes, repeat)
        wrong = np.add.reduceat(sites, np.r_[0, np.cumsum(all_sizes)[:-1]]) > 0
        groups = groups[np.repeat(wrong, all_sizes)]
        arities = [a for a, w in zip(arities, wrong) if w]
    assert [len(a) for a in arities] == hsizes.tolist(), "head rows and trees out of step"
    hgb = config.site_head_hgb(hnames)
    k = min(config.inner_folds, len(np.unique(groups)))
    fold = schema_disjoint_folds(groups, k, seed)
    first_oof = np.empty(len(xh))
    for i in range(k):
        model = fit_classifier(xh[fold != i], sh[fold != i], hnames, hgb, seed)
        first_oof[fold == i] = model.predict_proba(xh[fold == i])[:, 1]
    first = fit_classifier(xh, sh, hnames, hgb, seed)
    x2 = np.hstack([xh, site_score_context(first_oof, arities)])
    names2 = (*hnames, *(f"first_{c}" for c in SITE_CONTEXT))
    second = fit_classifier(x2, sh, names2, config.site_head_hgb(names2), seed)
    return AutoContextHead(first, second)


def autocontext_scores(site_model, x, raw, arities, context, names):
    if not isinstance(site_model, AutoContextHead):
        return tree_context_scores(site_model, x, raw, arities, context, names)
    xc = with_context(x, raw, arities, names) if context else x
    first = site_model.first.predict_proba(xc)[:, 1]
    return site_model.second.predict_proba(np.hstack([xc, site_score_context(first, arities)]))[:, 1]


def read_out_of_fold(table, test: dict) -> tuple[dict, float]:
    """Localisation (``model.eval.localisation.localisation``) and node AUC of a cross-fitting's
    out-of-fold results (example -> (confidences, site scores))."""
    idx = sorted(test)
    rows = [{"node_labels": table.examples[k].node_labels, "node_arity": table.examples[k].node_arity}
            for k in idx]
    where = localisation(rows, [test[k][0] for k in idx], [test[k][1] for k in idx])
    conf = np.concatenate([test[k][0] for k in idx])
    labels = np.concatenate([table.examples[k].node_labels for k in idx])
    return where, boosted.M.auc(conf, labels)


def write_rows(path: Path, table, test: dict) -> None:
    """Out-of-fold rows as ``benchmarks/site_misses.py`` and ``compare_node_runs.py`` read them
    (one JSON line an example, with the node model's confidences and the site head's scores)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for k in sorted(test):
            e = table.examples[k]
            f.write(json.dumps({"question_id": e.question_id, "db_id": e.db_id, "system": e.system,
                                "execution_match": e.execution_match, "node_labels": list(e.node_labels),
                                "node_arity": list(e.node_arity), "node_names": list(e.node_names),
                                "node_types": list(e.node_types),
                                "node_confidences": [round(float(v), 6) for v in test[k][0]],
                                "site_scores": [round(float(v), 6) for v in test[k][1]]}) + "\n")


def spider_crossfit(overrides: list[str]) -> tuple:
    """(table, fold roles, config) of the default single-system command's cross-fitting of
    Spider dev (``conf/model/features.yaml`` with ``overrides``, e.g. ``["site_monotone=context"]``)."""
    data = OmegaConf.create({"root": str(SHARED / "spider"), "protocol": "crossfit", "folds": 5, "eval_split": "dev",
                             "predictions": str(SHARED / "predictions" / "spider_dev" / "*")})
    config = boosted.BoostedConfig.from_cfg(OmegaConf.merge(
        OmegaConf.load(Path(__file__).resolve().parents[1] / "conf/model/features.yaml"), OmegaConf.from_dotlist(overrides)))
    table = boosted.load_table(data, config)
    return table, boosted.fold_roles(table, data)[0], config


def default_crossfit(overrides: list[str]) -> tuple:
    """(table, fold roles, config) of the default command itself, ``python train.py model=features
    data=spider data.root=<shared>/spider`` with ``model.<override>`` for each of ``overrides``:
    unlike ``spider_crossfit``, with the training rows of ``data.llm_answers`` (Qwen's answers
    to Spider train). Run from the repository's root (the answers' path is relative to it)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(Path(__file__).resolve().parents[1] / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=["model=features", "data=spider", f"data.root={SHARED / 'spider'}",
                                          *(f"model.{o}" for o in overrides)])
    config = boosted.BoostedConfig.from_cfg(cfg.model)
    table = boosted.load_table(cfg.data, config)
    return table, boosted.fold_roles(table, cfg.data)[0], config


def measure(table, roles, config, write: Path | None = None, name: str = "") -> tuple[dict, float, float]:
    """One cross-fitting of ``table`` (the project's own folds, node model and site head as set):
    its out-of-fold localisation, node AUC and seconds; with ``write``, its rows to
    ``<write>/<name>.jsonl`` for ``site_misses.py``."""
    start = time.perf_counter()
    test, _, _ = boosted.crossfit(table, roles, config, progress=False)
    where, node_auc = read_out_of_fold(table, test)
    if write:
        write_rows(write / f"{name}.jsonl", table, test)
    return where, node_auc, time.perf_counter() - start


DEFAULT_HEAD = boosted.fit_site_head


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--groups", default="single", choices=["single", "single+consensus"])
    parser.add_argument("--write", type=Path, metavar="DIR",
                        help="also write each variant's out-of-fold rows to DIR/<variant>.jsonl "
                             "(for benchmarks/site_misses.py, e.g. --against)")
    parser.add_argument("--default-command", action="store_true",
                        help="the default command's table now (with Qwen's answers to Spider train; single only)")
    args = parser.parse_args()
    if args.default_command and args.groups != "single":
        parser.error("--default-command: the single-system track only (--groups single)")
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown {unknown}; choose from {', '.join(VARIANTS)}")
    if any(v.startswith("lgb") for v in variants):
        try:
            import lightgbm  # noqa: F401
        except ImportError:
            parser.error("the lgb_* variants need LightGBM: pip install lightgbm")
    table, roles, config = default_crossfit([]) if args.default_command else spider_crossfit([f"groups={args.groups}"])
    default_head = boosted.fit_site_head
    print(f"\n| site head ({config.method}) | wrong queries | top-1 | top-3 | mrr | node AUC | seconds |\n"
          "|---|---|---|---|---|---|---|")
    for variant in variants:
        bagged = variant.endswith("_bag")
        base = variant.removesuffix("_bag") if variant != "hgb_bag" else variant
        boosted.fit_site_head = (default_head if variant in ("hgb", "hgb_bag")
                                 else autocontext_site_head if variant == "autocontext"
                                 else agreed_sites_site_head if variant == "agreed_sites"
                                 else tree_context_site_head if base in ("tree_context", "tree_both")
                                 else one_site_site_head({"one_site_x3": "weight", "one_site_head": "separate"}.get(variant, "only"))
                                 if variant.startswith("one_site")
                                 else default_head if base == "tree_sites"
                                 else pairwise_site_head(variant == "hgb_pairwise") if variant.endswith("pairwise")
                                 else lightgbm_site_head(variant.split("_", 1)[1]))
        boosted.site_head_scores = autocontext_scores
        variant_config = dataclasses.replace(config, site_bags=BAGS if bagged else config.site_bags,
                                             site_labels="tree" if base in ("tree_sites", "tree_both") else "execution")
        table.site_labels = variant_config.site_labels  # model.site_labels: the sites the head learns
        where, node_auc, seconds = measure(table, roles, variant_config, args.write, variant)
        print(f"| {variant} | {where['n_wrong_queries']} | {where['top1']:.3f} | {where['top3']:.3f} | "
              f"{where['mrr']:.3f} | {node_auc:.3f} | {seconds:.0f} |", flush=True)
    boosted.fit_site_head = default_head
    boosted.site_head_scores = DEFAULT_SCORES


if __name__ == "__main__":
    main()
