"""Which node features differ most between Spider dev and BIRD dev: per feature, the two-sample
Kolmogorov-Smirnov statistic of its non-missing values over all nodes of the 11 Spider systems'
and the 4 CodeS systems' predictions, the share missing and the medians (cached features).

    python benchmarks/feature_shift.py [--top 15]
"""

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from joint_fit import config
from scipy.stats import ks_2samp

from model.nodes.boosted import BoostedConfig, load_table


def shift_statistics(xa: np.ndarray, xb: np.ndarray, names) -> dict[str, float]:
    """Per feature column, the two-sample KS statistic of its non-missing values in the two row
    sets (0.0 where either has none): features only, no labels."""
    out = {}
    for j, name in enumerate(names):
        a, b = xa[:, j][~np.isnan(xa[:, j])], xb[:, j][~np.isnan(xb[:, j])]
        out[name] = float(ks_2samp(a, b).statistic) if len(a) and len(b) else 0.0
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--top", type=int, default=15, help="features to print, most shifted first")
    args = parser.parse_args()
    spider_cfg, bird_cfg = config("spider", "dropout"), config("bird", "dropout")
    boosted = BoostedConfig.from_cfg(spider_cfg.model)
    spider, bird = load_table(spider_cfg.data, boosted, progress=False), load_table(bird_cfg.data, boosted, progress=False)
    xs, _, _ = spider.stack(range(len(spider.examples)))
    xb, _, _ = bird.stack(range(len(bird.examples)))
    ks = shift_statistics(xs, xb, spider.names)
    rows = []
    for j, name in enumerate(spider.names):
        a, b = xs[:, j][~np.isnan(xs[:, j])], xb[:, j][~np.isnan(xb[:, j])]
        rows.append((ks[name] if len(a) and len(b) else float("nan"), name, np.isnan(xs[:, j]).mean(),
                     np.isnan(xb[:, j]).mean(), np.median(a) if len(a) else np.nan, np.median(b) if len(b) else np.nan))
    rows.sort(key=lambda r: -np.nan_to_num(r[0], nan=-1))
    print("\n| feature | KS | missing, Spider | missing, BIRD | median, Spider | median, BIRD |\n|---|---|---|---|---|---|")
    for ks, name, ma, mb, da, db in rows[:args.top]:
        print(f"| {name} | {ks:.3f} | {ma:.2f} | {mb:.2f} | {da:.3g} | {db:.3g} |")


if __name__ == "__main__":
    main()
