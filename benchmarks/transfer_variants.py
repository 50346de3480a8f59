"""Transfer between Spider and BIRD for feature variants, quickly: the node model fitted on all of
one benchmark (as a run's final model is: seed 0, ``model.database=dropout`` for Spider), scored
on the other without databases; node AUC (and, in brackets, the whole-query AUC of the least
confident node, uncalibrated). It reproduces ``benchmarks/transfer.py``'s node
AUC of the same configuration (the baseline printed 0.720 / 0.733 / 0.695 as transfer.py did).

    python benchmarks/transfer_variants.py old_types,types,drop_size,quantile

Columns: S_exec (Spider, execution labels) and S_tree (Spider, tree labels) -> B (BIRD dev, tree
labels); B -> S_exec and B -> S_tree (Spider dev without databases, each kind of label).
Variants:

- ``old_types``: BIRD's SQLite column types read as 'other', as before ``column_type`` knew them;
- ``types``: the features as computed (every variant below has them);
- ``drop_size``: without question_words, schema_tables, schema_columns (``model.drop=[benchmark_size]``);
- ``quantile``: the most shifted count features (``SHIFTED_FEATURES``, ``model.quantiles``) replaced by their quantile among the
  nodes of their own benchmark (each benchmark's empirical CDF, no labels used);
- ``reweight``: training nodes weighted by how much they look like the tested benchmark's nodes
  (importance weights p/(1-p), clipped to [0.1, 10], from a classifier telling the two
  benchmarks' feature rows apart: the tested benchmark's features only, never its labels);
- ``rank_share``: the name's rank among the schema's names (``name_rank``) as a share of the
  schema's columns (for a column) or tables (for a table), and ``tables_sharing_name`` as a share
  of its tables: ranks and counts that grow with the schema's size (BIRD's are larger) read
  relative to it (put it before ``drop_size``, which drops the schema sizes it divides by);
- ``kind_weight``: training nodes weighted by how much more common their (kind, parent kind)
  is among the tested benchmark's nodes than among the training benchmark's (the ratio of the
  two shares, clipped to [0.1, 10], scaled to mean 1; the tested benchmark's features only,
  never its labels): importance weighting over the one low-dimensional shift ``reweight`` does
  not saturate on;
- ``nodb``: the Spider models fitted with no database features at all (``model.database=without``)
  instead of on a random half of the queries with them (``dropout``): BIRD is scored without;
- ``kind_prior``: the tested benchmark's probabilities moved, node kind by node kind, to that
  kind's rate of right nodes there, estimated by EM without labels (``prior_shift``, Saerens et
  al.) from the training benchmark's rate for the kind: the benchmarks' node kinds are wrong at
  different rates, which pooled node AUC reads across kinds;
- ``perturb``: the training benchmark's model also learns from ``--perturbations N`` (default 1) perturbations of
  each of its dev gold queries (``model.synth.perturb``, the default mix, seed 0; labelled as its
  predictions are: Spider by execution, BIRD by tree comparison): more kinds of error than its
  systems make, so that the model leans less on one benchmark's systems;
- ``perturb_train``: as ``perturb``, but Spider's perturbations are of its *train* gold queries
  (about 8,600 questions on 146 other databases; BIRD has no train split here: its dev ones);
- ``small``: a more regularised node model (``SMALL_HGB``: fewer, smaller trees, larger leaves);
- ``monotone``: the node model's confidence constrained to rise (or fall) with the linking and
  value features whose direction is known (``model.monotone``, ``Feature.direction``: more of
  the name found in the question, the literal found in its column...);
- ``drop_shift``: without every feature whose two-sample KS statistic between the two benchmarks'
  nodes is above ``SHIFT_DROP`` (0.3, fixed before measuring; the features only, no labels:
  ``benchmarks/feature_shift.py`` prints the statistics);
- ``quantile_shift``: every numeric feature whose KS statistic is above ``SHIFT_QUANTILE`` (0.1)
  replaced by its quantile among its own benchmark's nodes (as ``quantile``, for more features);
- ``drop_query_size``: without the query's own size counts (``tree_values``, ``tree_joins``,
  ``tree_size``), beside ``drop_size``;
- ``semantic``: with the MiniLM name-question similarities (group ``semantic``), which every other
  variant leaves out as the runs do (``model.drop=[semantic]``);
- ``no_evidence``: the BIRD model learns from BIRD's questions without their evidence
  (``data.evidence=false``), as Spider's questions come; Spider -> BIRD still reads the evidence,
  as a user scoring BIRD would pass it;
- ``lm``: with the scorer LM's span surprise (group ``lm``, ``model.lm=true``: SmolLM2, or the LM
  ``--lm NAME`` names as ``model.lm=NAME`` would, e.g. ``--lm qwen_coder@llama.cpp``; its scores
  must be in the cache, or they are computed first, for an hour or more on a CPU);
- ``additive``: the node model with one split per tree (``max_depth=1``, 600 trees, learning rate
  0.1): a sum of one function per feature, no interactions, which may extrapolate across
  benchmarks more gently;
- ``kind_pairs``: each tree may combine a feature only with the node's kind and its parent's kind
  (``interaction_cst``): one function per feature and node kind, no other interactions;
- ``consensus``: the consensus track (``model.groups=single+consensus``: each node read against
  the other systems' answers to the question; 10 other systems on Spider, 3 on BIRD), without
  databases on both sides: Spider's consensus columns are computed without result digests, as
  a user without the database gets them (no ``result_agreement``; reference answers by tree);
- ``bag``: the mean of ``BAGS`` node models, each fitted on a bootstrap draw of the training
  benchmark's databases (a database drawn twice weighs twice; seeds 0..4): less variance;
- ``pseudo``: adapting to the tested benchmark with its unlabelled outputs. A consensus model
  (the same variant with ``consensus``) fitted on the training benchmark's labels reads the
  tested benchmark's outputs beside each other (no databases) and gives each of their nodes a
  probability of being right; the single-system node model then learns from the training
  benchmark's labels and from those probabilities (each tested node twice, right with weight p,
  wrong with weight 1 - p). Out of fold on the tested benchmark (5 folds by database): the
  nodes of a fold are scored by a model that read the other folds' outputs only. The tested
  benchmark's labels are never read; its outputs are, which the plain protocol (fit on one
  benchmark, score the other) does not allow: a user with several systems' answers on their
  own questions could do it (``--in-domain`` and ``--label-control`` skip these variants: run
  the variant without ``pseudo`` for its in-domain reference);
- ``self_train``: with ``pseudo``, a control: the probabilities come from the single-system
  node model fitted on the training benchmark (self-training, one system's query at a time),
  not from a consensus model;
- ``distill``: with ``pseudo``, the single-system node model learns from the tested benchmark's
  pseudo-labels only, not from the training benchmark's labels: what a user holding two saved
  models (a single-system one and a consensus one) and their own outputs can do, with no
  training data at hand (``rat-adapt``);
- ``a+b``: both variants at once (e.g. ``drop_size+small``).

With more than one variant, a last line gives the AUC of the mean of the variants' probabilities
(their models as one ensemble). ``--label-control`` adds, per variant, a control for the kind of
labels: Spider in domain (5 folds by database, scored without databases, execution labels) with
the node model fitted on execution labels and on tree labels (what a BIRD model learns from).
``--in-domain`` adds, per variant, the in-domain reference of the same node model: each
benchmark out of fold (5 folds by database), scored without databases (one model a fold, also
for ``bag``; ``reweight`` does not apply in domain).

    python benchmarks/transfer_variants.py types --label-control
    python benchmarks/transfer_variants.py consensus,consensus+lm+drop_size+small+monotone --in-domain
"""

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from feature_shift import shift_statistics
from joint_fit import config
from omegaconf import open_dict

from model.data.folds import schema_disjoint_folds
from model.eval import metrics as M
from model.nodes.boosted import (
    BoostedConfig,
    NodeTable,
    drop_columns,
    fit_classifier,
    load_table,
    training_rows,
    without_database,
)
from model.nodes.features import (
    BENCHMARK_SIZE_FEATURES,
    COLUMN_TYPES,
    FEATURES,
    KIND_CODE,
    categorical_mask,
)
from model.nodes.quantiles import SHIFTED_FEATURES, Quantiles

QUERY_SIZE = ["tree_values", "tree_joins", "tree_size"]
SHIFT_DROP, SHIFT_QUANTILE = 0.3, 0.1
FEATURE_GROUP = {f.name: f.group for f in FEATURES}
SHIFT: dict[str, float] = {}  # feature -> KS statistic between the benchmarks, set in main()
VARIANTS = ("old_types", "types", "drop_size", "quantile", "small", "reweight", "monotone", "drop_shift",
            "quantile_shift", "drop_query_size", "semantic", "no_evidence", "lm", "additive", "kind_pairs",
            "consensus", "bag", "pseudo", "self_train", "distill", "kind_weight", "rank_share", "nodb", "kind_prior", "perturb", "perturb_train")
ADDITIVE_HGB = {"learning_rate": 0.1, "max_iter": 600, "max_depth": 1, "min_samples_leaf": 40,
                "l2_regularization": 1.0}
BAGS = 5
SMALL_HGB = {"learning_rate": 0.05, "max_iter": 150, "max_leaf_nodes": 15, "min_samples_leaf": 200,
             "l2_regularization": 5.0}


def table(name: str, labels: str, lm: bool | str = False, evidence: bool = True, consensus: bool = False,
          perturbations: int = 0, split: str = "dev") -> NodeTable:
    """The benchmark's predictions and features; with ``perturbations``, followed (as
    ``train_side`` rows: ``load_table``'s ``data.train_perturbations`` / ``data.eval_perturbations``)
    by that many perturbations of each gold query of ``split`` (``perturb``, ``perturb_train``)."""
    # model.database=without here only makes the consensus columns those a user without databases
    # gets (no result digests); which rows lose their database features is set where a model is
    # fitted (training_rows) or scored (without_database)
    cfg = config(name, "without")
    with open_dict(cfg):
        cfg.data.labels = labels
        cfg.model.drop = []  # variants without ``semantic`` (``lm``) leave that group out in transform()
        cfg.model.lm = lm
        cfg.model.groups = "single+consensus" if consensus else "single"
        if name == "bird":
            cfg.data.evidence = evidence
        if perturbations:
            cfg.model.train_side = "all"
            cfg.data.update(use_perturbations=True,
                            train_perturbations=perturbations if split == "train" else 0,
                            eval_perturbations=perturbations if split == "dev" else 0)
    return load_table(cfg.data, BoostedConfig.from_cfg(cfg.model), progress=False)


PERTURBATIONS = 1  # perturb: perturbations of each gold query (--perturbations N)


def transform(tab: NodeTable, variant: str, bird: bool) -> NodeTable:
    """The table as the variant (``a+b``: each part in turn) sees it."""
    parts = variant.split("+")
    drop = [g for g in ("semantic", "lm", "consensus") if g not in parts and any(FEATURE_GROUP.get(n) == g for n in tab.names)]
    if drop:
        features, names = drop_columns(tab.features, tab.names, drop)
        tab = NodeTable(tab.examples, features, names, tab.root, labels=tab.labels)
    for part in parts:
        tab = _apply(tab, part, bird)
    return tab


def _apply(tab: NodeTable, variant: str, bird: bool) -> NodeTable:
    names = list(tab.names)
    xs = [x.copy() for x in tab.features]
    if variant == "old_types" and bird:  # BIRD's integer/real/date columns read as 'other', as before
        j = names.index("column_type")
        for x in xs:
            x[np.isin(x[:, j], [COLUMN_TYPES.index("number"), COLUMN_TYPES.index("time")]), j] = 0
    keep = list(range(len(names)))
    if variant == "rank_share":
        kind, rank, sharing = (names.index(n) for n in ("kind", "name_rank", "tables_sharing_name"))
        columns, tables = names.index("schema_columns"), names.index("schema_tables")
        for x in xs:
            size = np.where(x[:, kind] == KIND_CODE["table"], x[:, tables], x[:, columns])
            x[:, rank] = x[:, rank] / np.maximum(size, 1)
            x[:, sharing] = x[:, sharing] / np.maximum(x[:, tables], 1)
    if variant == "drop_size":
        keep = [j for j, n in enumerate(names) if n not in BENCHMARK_SIZE_FEATURES]
    if variant == "drop_shift":
        keep = [j for j, n in enumerate(names) if SHIFT.get(n, 0.0) <= SHIFT_DROP]
    if variant == "drop_query_size":
        keep = [j for j, n in enumerate(names) if n not in QUERY_SIZE]
    if variant in ("quantile", "quantile_shift"):  # each benchmark's own empirical CDF over its nodes
        categorical = dict(zip(names, categorical_mask(names)))
        shifted = SHIFTED_FEATURES if variant == "quantile" else [
            n for n in names if SHIFT.get(n, 0.0) > SHIFT_QUANTILE and not categorical[n]]
        reference = Quantiles.fit(np.vstack(xs), names, shifted)  # those a variant before kept
        xs = [reference.transform(x, names) for x in xs]
    return NodeTable(tab.examples, [x[:, keep] for x in xs], tuple(names[j] for j in keep), tab.root, labels=tab.labels)


def node_hgb(parts: list[str], names) -> dict:
    """The node model's HGB settings for a variant's parts."""
    hgb = SMALL_HGB if "small" in parts else ADDITIVE_HGB if "additive" in parts else BoostedConfig().hgb
    hgb = BoostedConfig(hgb=hgb, monotone="monotone" in parts).node_hgb(names)
    if "kind_pairs" in parts:
        kinds = [names.index(n) for n in ("kind", "parent_kind")]
        hgb = {**hgb, "interaction_cst": [kinds + [j] for j in range(len(names)) if j not in kinds]}
    return hgb


class Bagged:
    """The mean probability of several fitted classifiers."""

    def __init__(self, models: list):
        self.models = models

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return np.mean([m.predict_proba(x) for m in self.models], axis=0)


def database_draws(tab: NodeTable, n: int) -> list[np.ndarray]:
    """Per node row, how often its database is drawn in each of ``n`` bootstrap draws of the
    table's databases (seeds 0..n-1)."""
    dbs = sorted({e.db_id for e in tab.examples})
    node_db = np.repeat([dbs.index(e.db_id) for e in tab.examples], [len(e.node_labels) for e in tab.examples])
    out = []
    for seed in range(n):
        counts = np.bincount(np.random.default_rng(seed).integers(0, len(dbs), len(dbs)), minlength=len(dbs))
        out.append(counts[node_db].astype(float))
    return out


def importance_weights(source: np.ndarray, target: np.ndarray, names) -> np.ndarray:
    """p(target | x) / p(source | x) for each source row, from a classifier of the two feature
    sets (database features left out: the target is scored without), scaled to mean 1."""
    from model.nodes.features import DATABASE_FEATURES

    keep = [j for j, n in enumerate(names) if n not in DATABASE_FEATURES]
    x = np.vstack([source[:, keep], target[:, keep]])
    d = np.r_[np.zeros(len(source)), np.ones(len(target))]
    clf = fit_classifier(x, d, [names[j] for j in keep], {"max_iter": 100, "max_leaf_nodes": 15})
    p = np.clip(clf.predict_proba(source[:, keep])[:, 1], 1e-3, 1 - 1e-3)
    w = np.clip(p / (1 - p) * len(source) / len(target), 0.1, 10.0)
    return w / w.mean()


def kind_weights(source: np.ndarray, target: np.ndarray, names) -> np.ndarray:
    """share of each source row's (kind, parent kind) among the target rows over its share among
    the source rows, clipped to [0.1, 10], scaled to mean 1.

    >>> kind_weights(np.array([[0, 0], [0, 0], [1, 0]]), np.array([[1, 0], [0, 0]]), ["kind", "parent_kind"]).round(2).tolist()
    [0.75, 0.75, 1.5]
    """
    cols = [list(names).index("kind"), list(names).index("parent_kind")]

    def shares(x):
        keys, counts = np.unique(x[:, cols], axis=0, return_counts=True)
        return {tuple(k): c / len(x) for k, c in zip(keys.tolist(), counts)}

    s, t = shares(source), shares(target)
    w = np.array([t.get(k, 0.0) / s[k] for k in map(tuple, source[:, cols].tolist())])
    w = np.clip(w, 0.1, 10.0)
    return w / w.mean()


def kind_prior(p: np.ndarray, tested_kind: np.ndarray, train_kind: np.ndarray, train_y: np.ndarray,
               least: int = 50) -> np.ndarray:
    """``p`` with each node kind's probabilities moved by ``prior_shift`` from the kind's rate of
    right nodes among the training rows to the rate EM estimates for it on the tested rows (no
    tested labels); kinds with fewer than ``least`` rows on either side are left as they are."""
    from model.eval.calibration import prior_shift

    out = p.copy()
    for kind in np.unique(tested_kind):
        tested, train = tested_kind == kind, train_kind == kind
        if tested.sum() >= least and train.sum() >= least:
            out[tested] = prior_shift(p[tested], float(train_y[train].mean()))[0]
    return out


def query_auc(p: np.ndarray, tab: NodeTable, indices=None) -> float:
    """Whole-query AUC of the least confident node: ``p`` holds the nodes of ``tab``'s examples
    (``indices``, default all) in order."""
    examples = [tab.examples[k] for k in (range(len(tab.examples)) if indices is None else indices)]
    sizes = np.cumsum([len(e.node_labels) for e in examples])[:-1]
    return M.auc(np.array([q.min() for q in np.split(p, sizes)]), np.array([int(e.correct) for e in examples]))


def in_domain(train: NodeTable, parts: list[str], mode: str, tested: NodeTable | None = None
              ) -> tuple[float, float]:
    """Node AUC and whole-query AUC out of fold (5 folds by database), scored without databases:
    the node model fitted on ``train``'s labels, scored on ``tested``'s (default: the same
    examples; ``train`` may hold more after them, ``perturb``'s, which train only the folds of
    other databases than their own)."""
    tested = tested or train
    folds = schema_disjoint_folds([e.db_id for e in train.examples])
    ps, ys, order = [], [], []
    for f in range(int(folds.max()) + 1):
        x, y, _ = training_rows(train, np.flatnonzero(folds != f), BoostedConfig(database=mode))
        model = fit_classifier(x, y, train.names, node_hgb(parts, list(train.names)))
        test = np.flatnonzero(folds[:len(tested.examples)] == f)
        xt, yt, _ = tested.stack(test)
        ps.append(model.predict_proba(without_database(xt, tested.names))[:, 1])
        ys.append(yt)
        order.extend(test)
    p = np.concatenate(ps)
    return M.auc(p, np.concatenate(ys)), query_auc(p, tested, order)


def adapted(source: NodeTable, source_cons: NodeTable, mode: str, tested: NodeTable, tested_cons: NodeTable,
            parts: list[str]) -> np.ndarray:
    """``pseudo``: the probability of each of ``tested``'s nodes (its order), out of fold by
    database, from a single-system node model fitted on ``source``'s labels and on the
    other folds' pseudo-labels (a consensus model fitted on ``source_cons``, scored on
    ``tested_cons`` without databases); with ``distill``, on those pseudo-labels only."""
    x, y, _ = training_rows(source_cons, range(len(source_cons.examples)), BoostedConfig(database=mode))
    labeller = fit_classifier(x, y, source_cons.names, node_hgb(parts, list(source_cons.names)))
    xc, _, _ = tested_cons.stack(range(len(tested_cons.examples)))
    pseudo = labeller.predict_proba(without_database(xc, tested_cons.names))[:, 1]
    xs, ys, _ = training_rows(source, range(len(source.examples)), BoostedConfig(database=mode))
    xt, _, _ = tested.stack(range(len(tested.examples)))
    xt = without_database(xt, tested.names)
    sizes = [len(e.node_labels) for e in tested.examples]
    folds = np.repeat(schema_disjoint_folds([e.db_id for e in tested.examples]), sizes)
    hgb = node_hgb(parts, list(source.names))
    p = np.empty(len(xt))
    for f in range(int(folds.max()) + 1):
        other = folds != f
        n = int(other.sum())
        x_src, y_src = (xs[:0], ys[:0]) if "distill" in parts else (xs, ys)
        model = fit_classifier(np.vstack([x_src, xt[other], xt[other]]), np.r_[y_src, np.ones(n), np.zeros(n)],
                               source.names, hgb,
                               sample_weight=np.r_[np.ones(len(x_src)), pseudo[other], 1 - pseudo[other]])
        p[~other] = model.predict_proba(xt[~other])[:, 1]
    return p


def label_control(se: NodeTable, st: NodeTable, parts: list[str]) -> str:
    """Spider out of fold by database, without databases, on execution labels: the node model
    fitted on execution labels vs on tree labels."""
    return ("Spider in domain, execution labels: "
            f"fitted on execution labels {in_domain(se, parts, 'dropout')[0]:.3f}, "
            f"fitted on tree labels {in_domain(st, parts, 'dropout', se)[0]:.3f}")


def usage_error(message: str) -> None:
    print(f"transfer_variants.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def main() -> None:
    argv = sys.argv[1:]
    if "--perturbations" in argv:  # perturb: how many perturbations of each gold query
        at = argv.index("--perturbations")
        try:
            globals()["PERTURBATIONS"] = int(argv[at + 1])
        except (IndexError, ValueError):
            usage_error("--perturbations takes a number")
        argv = argv[:at] + argv[at + 2:]
    lm_name: bool | str = True  # the lm variant's scorer LM: True = the packaged SmolLM2 (model.lm=true)
    if "--lm" in argv:  # e.g. --lm qwen_coder@llama.cpp (its scores cached by an earlier train.py run)
        at = argv.index("--lm")
        if at + 1 >= len(argv):
            usage_error("--lm takes a scorer LM's name (as model.lm=)")
        lm_name = argv[at + 1]
        argv = argv[:at] + argv[at + 2:]
    args = [a for a in argv if a not in ("--label-control", "--in-domain")]
    control, reference = "--label-control" in argv, "--in-domain" in argv
    variants = args[0].split(",") if args else list(VARIANTS)
    unknown = [p for v in variants for p in v.split("+") if p not in VARIANTS]
    if unknown:
        usage_error(f"unknown variant {unknown[0]!r} (one of {', '.join(VARIANTS)})")
    start = time.time()
    lm = lm_name if any("lm" in v.split("+") for v in variants) else False
    cons = any({"consensus", "pseudo"} & set(v.split("+")) for v in variants)
    spider_exec, spider_tree = table("spider", "execution", lm, consensus=cons), table("spider", "tree", lm, consensus=cons)
    bird = table("bird", "execution", lm, consensus=cons)
    bird_question_only = table("bird", "execution", lm, evidence=False, consensus=cons) if any(
        "no_evidence" in v.split("+") for v in variants) else None
    print(f"tables {time.time() - start:.0f} s", flush=True)
    xs, xb = (t.stack(range(len(t.examples)))[0] for t in (spider_exec, bird))
    SHIFT.update(shift_statistics(xs, xb, spider_exec.names))  # the features' shift, no labels
    print("shifted above {:.1f}: {}".format(SHIFT_DROP, ", ".join(n for n, k in SHIFT.items() if k > SHIFT_DROP)), flush=True)
    directions = (("S_exec", "B"), ("S_tree", "B"), ("B", "S_exec"), ("B", "S_tree"))
    scores: dict[tuple[str, str], list[np.ndarray]] = {d: [] for d in directions}
    labels: dict[tuple[str, str], np.ndarray] = {}
    for variant in variants:
        start = time.time()
        se, st = transform(spider_exec, variant, False), transform(spider_tree, variant, False)
        b = transform(bird, variant, True)
        parts = variant.split("+")
        b_train = transform(bird_question_only, variant, True) if "no_evidence" in parts else b
        if "pseudo" in parts:
            plain = "+".join(p for p in parts if p not in ("pseudo", "self_train", "distill"))
            with_cons = plain if "self_train" in parts else plain + "+consensus"
            tabs = {key: (transform(t, plain, key == "B"), transform(t, with_cons, key == "B"))
                    for key, t in (("S_exec", spider_exec), ("S_tree", spider_tree), ("B", bird))}
            out = []
            for key, label, mode in (("S_exec", "B", "dropout"), ("S_tree", "B", "dropout"), ("B", "S_exec", "with"),
                                     ("B", "S_tree", "with")):
                p = adapted(*tabs[key], mode, *tabs[label], parts)
                y = tabs[label][0].stack(range(len(tabs[label][0].examples)))[1]
                scores[key, label].append(p)
                labels[key, label] = y
                out.append(f"{key}->{label} {M.auc(p, y):.3f} (query {query_auc(p, tabs[label][0]):.3f})")
            print(f"{variant} (adapted, out of fold on the tested benchmark): " + "  ".join(out)
                  + f"  ({time.time() - start:.0f} s)", flush=True)
            continue
        models, fitted_on = {}, {}
        spider_mode = "without" if "nodb" in parts else "dropout"
        if {"perturb", "perturb_train"} & set(parts):  # the training tables with the perturbations
            plain = "+".join(p for p in parts if p not in ("perturb", "perturb_train"))
            split = "train" if "perturb_train" in parts else "dev"
            se_train, st_train = (transform(table("spider", labels, lm, consensus=cons, perturbations=PERTURBATIONS,
                                                  split=split), plain, False) for labels in ("execution", "tree"))
            b_train = transform(table("bird", "execution", lm, consensus=cons, perturbations=PERTURBATIONS),
                                plain, True)
        else:
            se_train, st_train = se, st
        for key, tab, mode in (("S_exec", se_train, spider_mode), ("S_tree", st_train, spider_mode),
                               ("B", b_train, "with")):
            x, y, _ = training_rows(tab, range(len(tab.examples)), BoostedConfig(database=mode))
            fitted_on[key] = (x[:, list(tab.names).index("kind")], y)
            hgb = node_hgb(parts, list(tab.names))
            weight = None
            if "reweight" in parts:
                other = se if key == "B" else b
                weight = importance_weights(x, other.stack(range(len(other.examples)))[0], tab.names)
            if "kind_weight" in parts:
                other = se if key == "B" else b
                weight = kind_weights(x, other.stack(range(len(other.examples)))[0], tab.names)
            if "bag" in parts:
                models[key] = Bagged([fit_classifier(x, y, tab.names, hgb,
                                                     sample_weight=draw if weight is None else draw * weight)
                                      for draw in database_draws(tab, BAGS)])
            else:
                models[key] = fit_classifier(x, y, tab.names, hgb, sample_weight=weight)
        out = []
        for key, tested, label in (("S_exec", b, "B"), ("S_tree", b, "B"), ("B", se, "S_exec"), ("B", st, "S_tree")):
            x, y, _ = tested.stack(range(len(tested.examples)))
            x = without_database(x, tested.names)
            p = models[key].predict_proba(x)[:, 1]
            if "kind_prior" in parts:
                p = kind_prior(p, x[:, list(tested.names).index("kind")], *fitted_on[key])
            scores[key, label].append(p)
            labels[key, label] = y  # the same nodes in the same order for every variant
            out.append(f"{key}->{label} {M.auc(p, y):.3f} (query {query_auc(p, tested):.3f})")
        print(f"{variant}: " + "  ".join(out) + f"  ({time.time() - start:.0f} s)", flush=True)
        if control:
            assert [e.question_id for e in se.examples] == [e.question_id for e in st.examples]
            print(f"{variant}: {label_control(se, st, parts)}", flush=True)
        if reference:
            cells = ["{} {:.3f} (query {:.3f})".format(name, *in_domain(train, parts, mode, tested))
                     for name, train, mode, tested in (("S_exec", se_train, "dropout", se), ("S_tree", st_train, "dropout", st),
                                                       ("B", b_train, "with", b))]
            print(f"{variant}: in domain, no databases: " + "  ".join(cells), flush=True)
    if len(variants) > 1:  # the variants' models together: the mean of their probabilities
        print("mean of the variants above: " + "  ".join(
            f"{a}->{b} {M.auc(np.mean(scores[a, b], axis=0), labels[a, b]):.3f}" for a, b in directions), flush=True)


if __name__ == "__main__":
    main()
