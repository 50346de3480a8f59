"""Fit on Spider and BIRD together, test on each: the boosted scorer cross-fitted over the
databases of both benchmarks at once (Spider dev's 11 systems with their databases, BIRD dev's 4
CodeS systems without; held-out databases always), its out-of-fold numbers printed per benchmark
beside each benchmark's own cross-fitted run (``--spider-run``, ``--bird-run``: their
``metrics.json``).

    python benchmarks/joint_fit.py --spider-run /tmp/runs/pretrained_dropout --bird-run /tmp/runs/bird
    python benchmarks/joint_fit.py --labels tree --spider-run <Spider run with data.labels=tree> ...

``--labels tree`` labels Spider by tree comparison too, so that both benchmarks' labels mean the
same (execution labels on Spider disagree with BIRD's tree labels).
"""

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hydra import compose, initialize_config_dir

from model.nodes.boosted import (
    BoostedConfig,
    NodeTable,
    crossfit,
    fold_roles,
    load_table,
    scores_summary,
)

SHARED = Path(os.environ.get("RAT_SHARED_DATA", REPO.parent / "shared" / "data"))


def config(data: str, database: str, labels: str = "execution"):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose("train", overrides=["model=features", f"data={data}", f"data.root={SHARED / data}",
                                           f"model.database={database}", "logger=none", f"data.labels={labels}",
                                           "model.train_predictions=null"])  # each benchmark's dev outputs alone


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", default="dropout", help="model.database for the joint model")
    parser.add_argument("--spider-run", type=Path)
    parser.add_argument("--bird-run", type=Path)
    parser.add_argument("--labels", default="execution", choices=["execution", "tree"],
                        help="Spider's labels (data.labels); BIRD's are always by tree comparison")
    args = parser.parse_args()
    spider_cfg, bird_cfg = config("spider", args.database, args.labels), config("bird", args.database)
    boosted = BoostedConfig.from_cfg(spider_cfg.model)
    spider, bird = load_table(spider_cfg.data, boosted), load_table(bird_cfg.data, boosted)
    if spider.names != bird.names:
        sys.exit("the two tables have different feature columns")
    table = NodeTable(spider.examples + bird.examples, spider.features + bird.features, spider.names, spider.root)
    roles, _ = fold_roles(table, spider_cfg.data)  # schema-disjoint folds over both benchmarks' databases
    print(f"joint: {len(spider.examples)} Spider + {len(bird.examples)} BIRD predictions, "
          f"{len({e.db_id for e in table.examples})} databases in {len(roles)} folds", flush=True)
    test, _, _ = crossfit(table, roles, boosted)
    n = len(spider.examples)
    print("\n| tested on | fitted on | node AUC | whole-query AUC | look-here-first top-1 |\n|---|---|---|---|---|")
    for name, keep, run in ((f"Spider dev (with databases, {args.labels} labels)", lambda k: k < n, args.spider_run),
                            ("BIRD dev (no databases, tree labels)", lambda k: k >= n, args.bird_run)):
        m = scores_summary(table, {k: v for k, v in test.items() if keep(k)})
        print(f"| {name} | Spider + BIRD | {m['auc']:.3f} | {m['query_auc']:.3f} | "
              f"{m['localisation_top1_site_scores']:.3f} |")
        if run is not None:
            own = json.loads((run / "metrics.json").read_text())
            print(f"| {name} | itself ({run.name}) | {own['test/auc']:.3f} | {own['test/query_auc']:.3f} | "
                  f"{own['test/localisation_top1_site_scores']:.3f} |")


if __name__ == "__main__":
    main()
