"""Fine-tuned systems' wrong queries from another benchmark as the site head's training rows: the
four CodeS systems' BIRD dev answers (CodeS is fine-tuned, like the four Spider systems the head
points worst at) beside Spider's, for the site head of the default single-system command only.

The four systems below 0.55 held out on Spider dev are the four fine-tuned on Spider; their wrong
queries depart from gold in one place, often at an operator, and no fine-tuned system's answers to
Spider train exist here (docs/look_here_first.md, "Who is below the floor"). CodeS's BIRD answers
are the one source of fine-tuned systems' wrong queries the shared data holds. BIRD has no
databases: its answers are labelled by tree comparison with gold and their database features are
missing, as in ``data=bird``. The site head reads the node model around each node; for BIRD's rows
that context comes from BIRD's own node model, out of fold by database (one cross-fitting of
``data=bird`` with the default model settings), as the head's Spider rows read the node model's
out-of-fold probabilities. Each fold's site head then learns from its Spider rows and every BIRD
wrong query (each weighted by one of ``--weights``); the node model, folds and Spider rows are the default
command's (``site_ranker.default_crossfit``). Prints top-1 / top-3 / mrr over Spider dev's wrong
queries, for all systems and for the four fine-tuned ones.

    python benchmarks/bird_sites.py --write DIR [--weights 0,1]
"""

import argparse
import dataclasses
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from site_ranker import default_crossfit, measure

from model.nodes import boosted

SHARED = Path(os.environ.get("RAT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
FINE_TUNED = ("codes_7b", "graphix_t5", "codes_3b", "codes_1b")


def bird_rows(names: tuple[str, ...], config) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, site labels, rows per query) of BIRD dev's wrong queries as the site head reads them,
    with the context of BIRD's own node model out of fold (columns ``names``, Spider's)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(Path(__file__).resolve().parents[1] / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=["model=features", "data=bird", f"data.root={SHARED / 'bird'}"])
    # only the node model's out-of-fold probabilities are read: no site head is fitted for BIRD
    bird_config = dataclasses.replace(boosted.BoostedConfig.from_cfg(cfg.model), site_head=False)
    table = boosted.load_table(cfg.data, bird_config)
    if table.names != names:
        missing = sorted(set(names) ^ set(table.names))
        raise SystemExit(f"BIRD's features are not Spider's: {missing[:5]}")
    raw: dict[int, np.ndarray] = {}
    boosted.crossfit(table, boosted.fold_roles(table, cfg.data)[0], bird_config, progress=False, raw=raw)
    indices = sorted(raw)
    x, _, sites = table.stack(indices)
    rows, sites, sizes, _ = boosted.site_head_rows(table, indices, x, sites, names, config,
                                                   np.concatenate([raw[k] for k in indices]))
    print(f"BIRD dev: {len(sizes)} wrong queries of {len(indices)} answers (tree labels), "
          f"{int(sites.sum())} sites", flush=True)
    return rows, sites, sizes


def head_with(extra: tuple[np.ndarray, np.ndarray, np.ndarray], weight: float):
    """A ``fit_site_head`` that learns from its fold's rows and ``extra`` (weighted ``weight``)."""
    xb, sb, _ = extra

    def fit(table, indices, x, sites, names, config, seed=0, raw=None):
        if not config.site_head or not sites.any():
            return None
        x, sites, _, head_names = boosted.site_head_rows(table, indices, x, sites, names, config, raw)
        weights = np.r_[np.ones(len(x)), np.full(len(xb), weight)]
        return boosted.fit_classifier(np.vstack([x, xb]), np.r_[sites, sb], head_names,
                                      config.site_head_hgb(head_names), seed, sample_weight=weights)
    return fit


def group_top(written: Path, systems: tuple[str, ...]) -> tuple[int, float]:
    """(wrong queries, top-1) of ``systems`` in a written run (``site_misses.py``'s reading)."""
    from model.data.jsonl import iter_jsonl
    from model.eval.localisation import localisation

    rows = [r for r in iter_jsonl(written) if r["system"] in systems]
    where = localisation(rows, [r["node_confidences"] for r in rows], [r["site_scores"] for r in rows])
    return where["n_wrong_queries"], where["top1"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", default="0,1",
                        help="weights of BIRD's rows against Spider's, comma-separated (0: today's head)")
    parser.add_argument("--write", type=Path, metavar="DIR", required=True,
                        help="each run's out-of-fold rows go to DIR/weight_<w>.jsonl (for site_misses.py)")
    args = parser.parse_args()
    try:
        weights = [float(w) for w in args.weights.split(",")]
    except ValueError:
        parser.error(f"--weights: not numbers: {args.weights}")
    if any(w < 0 for w in weights):
        parser.error(f"--weights: a weight is below 0: {args.weights}")
    if not (SHARED / "bird").is_dir():
        parser.error(f"no BIRD data at {SHARED / 'bird'} (set RAT_SHARED_DATA to the shared data folder)")
    table, roles, config = default_crossfit([])
    extra = bird_rows(table.names, config) if any(w > 0 for w in weights) else None
    default_head = boosted.fit_site_head
    print("\n| BIRD rows' weight | wrong queries | top-1 | top-3 | mrr | node AUC | fine-tuned four: top-1 | seconds |\n"
          "|---|---|---|---|---|---|---|---|")
    for w in weights:
        boosted.fit_site_head = head_with(extra, w) if w > 0 else default_head
        name = f"weight_{w:g}"
        where, node_auc, seconds = measure(table, roles, config, args.write, name)
        n_ft, top_ft = group_top(args.write / f"{name}.jsonl", FINE_TUNED)
        print(f"| {w:g} | {where['n_wrong_queries']} | {where['top1']:.3f} | {where['top3']:.3f} | "
              f"{where['mrr']:.3f} | {node_auc:.3f} | {top_ft:.3f} ({n_ft}) | {seconds:.0f} |", flush=True)
    boosted.fit_site_head = default_head


if __name__ == "__main__":
    main()
