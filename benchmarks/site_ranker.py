"""Look here first as a ranking problem: the site head fitted with a learning-to-rank objective
grouped by query (LightGBM's lambdarank), against today's head, on the same folds.

Each variant replaces only the site head's learner inside the project's own cross-fitting
(``model.nodes.boosted.crossfit``: the same node model, folds, inner folds, context and training
rows; wrong queries only): ``hgb`` is today's head (scikit-learn's HistGradientBoosting, binary
log-loss), ``lgb_binary`` the same objective in LightGBM (to tell the library from the
objective), ``lgb_lambdarank`` LightGBM's lambdarank with each wrong query a group, its sites
relevant, ``lgb_rank_xendcg`` the same with LightGBM's listwise cross-entropy objective. Prints top-1 / top-3 / mrr of each over Spider dev's wrong queries (out of fold).
Needs ``pip install lightgbm`` (not a dependency of the project).

    python benchmarks/site_ranker.py [--variants hgb,lgb_binary,lgb_lambdarank] [--groups single]
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from omegaconf import OmegaConf

from model.eval.localisation import localisation
from model.nodes import boosted
from model.nodes.features import categorical_mask

SHARED = Path(os.environ.get("RAT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
VARIANTS = ("hgb", "lgb_binary", "lgb_lambdarank", "lgb_rank_xendcg")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--groups", default="single", choices=["single", "single+consensus"])
    args = parser.parse_args()
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"--variants: unknown {unknown}; choose from {', '.join(VARIANTS)}")
    if any(v.startswith("lgb") for v in variants):
        try:
            import lightgbm  # noqa: F401
        except ImportError:
            parser.error("the lgb_* variants need LightGBM: pip install lightgbm")
    root = SHARED / "spider"
    data = OmegaConf.create({"root": str(root), "predictions": str(SHARED / "predictions" / "spider_dev" / "*"),
                             "protocol": "crossfit", "folds": 5, "eval_split": "dev"})
    model_cfg = OmegaConf.merge(OmegaConf.load(Path(__file__).resolve().parents[1] / "conf/model/features.yaml"),
                                OmegaConf.from_dotlist([f"groups={args.groups}"]))
    config = boosted.BoostedConfig.from_cfg(model_cfg)
    table = boosted.load_table(data, config)
    roles, _ = boosted.fold_roles(table, data)
    default_head = boosted.fit_site_head
    print(f"\n| site head ({config.method}) | wrong queries | top-1 | top-3 | mrr | node AUC | seconds |\n"
          "|---|---|---|---|---|---|---|")
    for variant in variants:
        boosted.fit_site_head = default_head if variant == "hgb" else lightgbm_site_head(variant.split("_", 1)[1])
        start = time.perf_counter()
        test, _, _ = boosted.crossfit(table, roles, config, progress=False)
        idx = sorted(test)
        rows = [{"node_labels": table.examples[k].node_labels, "node_arity": table.examples[k].node_arity}
                for k in idx]
        where = localisation(rows, [test[k][0] for k in idx], [test[k][1] for k in idx])
        conf = np.concatenate([test[k][0] for k in idx])
        labels = np.concatenate([table.examples[k].node_labels for k in idx])
        print(f"| {variant} | {where['n_wrong_queries']} | {where['top1']:.3f} | {where['top3']:.3f} | "
              f"{where['mrr']:.3f} | {boosted.M.auc(conf, labels):.3f} | {time.perf_counter() - start:.0f} |",
              flush=True)
    boosted.fit_site_head = default_head


if __name__ == "__main__":
    main()
