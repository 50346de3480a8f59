"""Boosted node features on Spider dev (11 systems), out of fold over 5 schema-disjoint folds:
single-system and consensus tracks apart; per node kind; ablation and permutation importance per
feature group; leave-one-system-out. Prints the tables of docs/results.md.

    .venv/bin/python scripts/node_features_results.py                       # everything
    .venv/bin/python scripts/node_features_results.py --stages main,kinds   # some stages
    .venv/bin/python scripts/node_features_results.py --stages loso --loso-systems codes_1b,graphix_t5

Stages: main (both tracks + node agreement), kinds (per node kind AUC), ablation (each group
removed, single track), importance (grouped permutation importance on held-out folds, PNG under
docs/), loso (train without system s, test on s, inside the same folds).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from model import metrics as M
from model.cli_types import existing_dir
from model.eval.localisation import localisation
from model.eval.report import format_number, markdown_table
from model.nodes.boosted import crossfit
from model.nodes.estimator import BoostedParams, fit_classifier
from model.nodes.features import FEATURES
from model.nodes.table import fold_roles, load_table

REPO = Path(__file__).resolve().parents[1]
SINGLE_GROUPS = ("structure", "linking", "semantic", "values", "execution", "question", "lm")
STAGES = ("main", "kinds", "ablation", "importance", "loso")


def track_columns(names, groups) -> np.ndarray:
    group_of = {f.name: f.group for f in FEATURES}
    return np.array([group_of[n] in groups for n in names])


def summary_row(table, scored) -> dict[str, float]:
    """Node AUC, ECE-P (Platt out of fold by database), whole-query AUC of the least confident
    node, localisation (raw, site reading, site scores)."""
    idx = sorted(scored)
    conf = np.concatenate([scored[k][0] for k in idx])
    labels = np.concatenate([table.examples[k].node_labels for k in idx]).astype(int)
    groups = np.concatenate([[table.examples[k].db_id] * len(scored[k][0]) for k in idx])
    s = M.summary(conf, labels, groups, n_bootstrap=0)["metrics"]
    query = M.auc([scored[k][0].min() for k in idx], [int(bool(table.examples[k].execution_match)) for k in idx])
    rows = [{"node_labels": table.examples[k].node_labels, "node_arity": table.examples[k].node_arity} for k in idx]
    sites = [scored[k][1] for k in idx]
    where = localisation(rows, [scored[k][0] for k in idx], sites if all(x is not None for x in sites) else None)
    return {"node AUC": s["auc"], "ECE": s["ece"], "ECE-P": s["ece_platt"], "query AUC (min node)": query,
            # each reading's own keys (the plain top1/top3 repeat the method's pointer)
            **{k: v for k, v in where.items() if k.startswith(("top1_", "top3_", "random", "n_wrong"))
               and not k.startswith("top1_by_error_kind")}}


def print_table(title: str, rows: dict[str, dict[str, float]]) -> None:
    columns = list(dict.fromkeys(c for r in rows.values() for c in r))
    cells = [[name, *(format_number(r.get(c), 0 if c.startswith("n_") else 3) for c in columns)]
             for name, r in rows.items()]
    print(f"\n{title}\n\n" + markdown_table(["method", *columns], cells), flush=True)


def agreement_scores(table) -> dict[int, tuple]:
    j = table.names.index("agreement")
    return {k: (x[:, j], None) for k, x in enumerate(table.features) if not np.isnan(x[:, j]).any()}


def stage_names(text: str) -> set[str]:
    """``--stages``: comma-separated names of STAGES."""
    unknown = [s for s in text.split(",") if s not in STAGES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown stage {unknown[0]!r} (known: {', '.join(STAGES)})")
    return set(text.split(","))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=existing_dir, default=str(REPO.parent / "shared" / "data" / "spider"))
    parser.add_argument("--stages", type=stage_names, default=",".join(STAGES))
    parser.add_argument("--loso-systems", default="all", help="comma-separated systems, or all")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--no-lm", action="store_true", help="leave out the scorer-LM span group")
    args = parser.parse_args()
    if args.folds < 3:  # each fold is tested, the next validates, the rest train
        parser.error(f"--folds {args.folds}: at least 3")
    known = sorted(p.stem for p in (args.root.parent / "predictions" / "spider_dev").glob("*"))
    unknown = [s for s in args.loso_systems.split(",") if s not in known] if args.loso_systems != "all" else []
    if unknown:
        parser.error(f"--loso-systems: unknown system {unknown[0]!r} (known: {', '.join(known)})")
    stages = args.stages
    data_cfg = OmegaConf.create({"root": str(args.root), "predictions": f"{args.root}/../predictions/spider_dev/*",
                                 "eval_split": "dev", "protocol": "crossfit", "folds": args.folds})
    config = BoostedParams(groups="single+consensus", lm=not args.no_lm)
    table = load_table(data_cfg, config, progress=False)
    roles, _ = fold_roles(table, data_cfg)
    single = track_columns(table.names, SINGLE_GROUPS)
    print(f"{len(table.examples)} examples, {sum(len(e.node_labels) for e in table.examples)} nodes, "
          f"{len(table.names)} features ({int(single.sum())} single-system), {len(roles)} folds")
    results: dict[str, dict] = {}

    if stages & {"main", "kinds"}:
        for track, columns in (("boosted features, single-system", single), ("boosted features (consensus)", None)):
            start = time.perf_counter()
            results[track], _, _ = crossfit(table, roles, config, columns=columns, progress=False)
            print(f"  {track}: {time.perf_counter() - start:.0f} s", flush=True)
        results["node agreement (consensus)"] = agreement_scores(table)
    if "main" in stages:
        print_table("Out of fold, all Spider dev (11 systems)",
                    {name: summary_row(table, scored) for name, scored in results.items()})
    if "kinds" in stages:
        kinds = {}
        for name, scored in results.items():
            idx = sorted(scored)
            conf = np.concatenate([scored[k][0] for k in idx])
            labels = np.concatenate([table.examples[k].node_labels for k in idx])
            types = np.concatenate([table.examples[k].node_types for k in idx])
            values, counts = np.unique(types, return_counts=True)
            for kind in values[np.argsort(-counts)]:
                mask = types == kind
                if mask.sum() >= 1000 and 0 < labels[mask].mean() < 1:
                    kinds.setdefault(str(kind), {"nodes": float(mask.sum()), "accuracy": float(labels[mask].mean())})
                    kinds[str(kind)][name] = M.auc(conf[mask], labels[mask])
        print_table("Node AUC per node kind (kinds with >= 1000 nodes)", kinds)

    if "ablation" in stages:
        fast = BoostedParams(site_head=False)
        rows = {}
        for dropped in ("none", *(g for g in SINGLE_GROUPS if track_columns(table.names, (g,)).any())):
            columns = single & ~track_columns(table.names, (dropped,))
            scored, _, _ = crossfit(table, roles, fast, columns=columns, progress=False)
            r = summary_row(table, scored)
            rows[f"single-system without {dropped}"] = {k: r[k] for k in ("node AUC", "query AUC (min node)",
                                                                            "top1_least_confident", "top3_least_confident")}
            print(f"  ablation {dropped} done", flush=True)
        print_table("Ablation (single-system track, site head off): each group removed", rows)

    if "importance" in stages:
        importance(table, roles, single)

    if "loso" in stages:
        systems = sorted({e.system for e in table.examples}) if args.loso_systems == "all" else args.loso_systems.split(",")
        fast = BoostedParams(site_head=False)
        rows = {}
        for system in systems:
            held_out = [{"train": [k for k in r["train"] if table.examples[k].system != system],
                         "val": [k for k in r["val"] if table.examples[k].system != system],
                         "test": [k for k in r["test"] if table.examples[k].system == system]} for r in roles]
            scored, _, _ = crossfit(table, held_out, fast, columns=single, progress=False)
            r = summary_row(table, scored)
            rows[system] = {k: r[k] for k in ("node AUC", "ECE-P", "query AUC (min node)",
                                               "top1_least_confident", "top3_least_confident")}
            print(f"  loso {system} done", flush=True)
        mean = {k: float(np.mean([r[k] for r in rows.values()])) for k in next(iter(rows.values()))}
        rows[f"mean over {len(systems)}"] = mean
        print_table("Leave one system out (single-system track, site head off; same 5 folds)", rows)


def importance(table, roles, single: np.ndarray, repeats: int = 3, seed: int = 0) -> None:
    """Drop in held-out node AUC when a group's columns are permuted together (rows shuffled),
    model fitted on each fold's training databases; mean over folds and repeats."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    config = BoostedParams()
    groups = (*SINGLE_GROUPS, "consensus")
    drops: dict[str, dict[str, list[float]]] = {"single-system": {}, "consensus": {}}
    rng = np.random.default_rng(seed)
    for track, columns in (("single-system", single), ("consensus", np.ones_like(single))):
        names = [n for n, k in zip(table.names, columns) if k]
        for role in roles:
            x, y, _ = table.stack(role["train"])
            model = fit_classifier(x[:, columns], y, names, config.hgb, seed)
            xt, yt, _ = table.stack(role["test"])
            xt = xt[:, columns]
            base = M.auc(model.predict_proba(xt)[:, 1], yt)
            for group in groups:
                cols = track_columns(names, (group,))
                if not cols.any():
                    continue
                for _ in range(repeats):
                    shuffled = xt.copy()
                    shuffled[:, cols] = xt[rng.permutation(len(xt))][:, cols]
                    drops[track].setdefault(group, []).append(base - M.auc(model.predict_proba(shuffled)[:, 1], yt))
        print(f"  importance {track} done", flush=True)
    rows = {g: {f"{t} AUC drop": float(np.mean(d[g])) if g in d else float("nan") for t, d in drops.items()}
            for g in groups}
    print_table("Permutation importance per feature group (held-out node AUC drop; mean over folds x 3)", rows)
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    width = 0.4
    for j, track in enumerate(drops):
        values = [np.mean(drops[track].get(g, [np.nan])) for g in groups]
        ax.bar(np.arange(len(groups)) + (j - 0.5) * width, values, width, label=track)
    ax.set_xticks(np.arange(len(groups)), groups)
    ax.set_ylabel("node AUC drop when permuted")
    ax.set_title("What signals wrong nodes (Spider dev, held-out folds)")
    ax.legend()
    fig.tight_layout()
    path = REPO / "docs" / "node_features_importance.png"
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
