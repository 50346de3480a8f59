"""Look here first, per system and leave-one-system-out: does the site head point at where a
wrong query goes wrong for a system it never saw?

    python scripts/localisation_loso.py --out /tmp/loso.json
    python scripts/localisation_loso.py --groups single+consensus --systems codes_7b gpt4_few_shot
    python scripts/localisation_loso.py --from-json /tmp/loso_a.json /tmp/loso_b.json  # one table

One table of features is loaded; for the cross-fitted run (every system in training, scored out
of fold by database) and for each system held out (``data.holdout_system``: trained and
validated without its outputs, tested on them), the same folds are fitted and the held-out
system's wrong queries read: top-1 / top-3 / mrr of the site scores, top-1 span overlap with
the gold diff, node AUC, and top-1 per error kind. Prints a Markdown table with the mean and
the lowest system, the same readings pooled over every system's wrong queries, and top-1 per
error kind pooled over the systems (each system's queries read by the model that saw it / the
model that never did).
The model is ``conf/model/features.yaml`` as ``data=spider`` sets it (``--set`` overrides): Qwen's
committed answers to Spider train train both models (``--train-predictions none`` leaves them
out, as the default command did before 2026-11-26's fourteenth session).
Slow: 12 cross-fits (about 5 node-model fits each, 3 more for the site head's inner folds).
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from omegaconf import OmegaConf

from model import metrics as M
from model.data.datasets import load_schemas
from model.eval.localisation import localisation
from model.evaluate import _questions, with_gold_diff
from model.nodes.boosted import crossfit
from model.nodes.outputs import tree_of
from model.nodes.table import fold_roles, held_out, load_table
from model.train_boosted import params_of

SHARED = Path(os.environ.get("RAT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
CONF = Path(__file__).resolve().parents[1] / "conf"
KEYS = ("top1_site_scores", "top3_site_scores", "mrr_site_scores", "span_overlap_site_scores")


def readings(table, scored: dict, indices: list[int], questions: dict, schemas: dict) -> dict:
    """Node AUC and the site scores' localisation readings of the examples ``indices``."""
    rows = [{"node_labels": table.examples[k].node_labels, "node_arity": table.examples[k].node_arity,
             "node_names": table.examples[k].node_names, "sql": table.examples[k].sql,
             "question_id": table.examples[k].question_id, "db_id": table.examples[k].db_id}
            for k in indices]
    trees = {i: t for i, r in enumerate(rows) if (t := tree_of(r)) is not None}
    rows = with_gold_diff(rows, trees, questions, schemas)
    where = localisation(rows, [scored[k][0] for k in indices], [scored[k][1] for k in indices])
    conf = np.concatenate([scored[k][0] for k in indices])
    labels = np.concatenate([table.examples[k].node_labels for k in indices])
    return {"auc": M.auc(conf, labels), "n_wrong_queries": where["n_wrong_queries"],
            "n_span_queries": where.get("n_span_queries", 0),
            **{k: where.get(k, float("nan")) for k in KEYS},
            "top1_by_error_kind": where.get("top1_by_error_kind_site_scores", {})}


def pooled(results: dict, part: str) -> dict:
    """The readings over every system's wrong queries together (weighted by their numbers), and
    top-1 per error kind: {kind: {"n", "top1"}}."""
    out = {}
    for key in KEYS:
        weight = "n_span_queries" if key.startswith("span") else "n_wrong_queries"
        n = sum(r[part].get(weight, 0) for r in results.values())
        out[key] = sum(r[part][key] * r[part].get(weight, 0) for r in results.values()
                       if r[part].get(weight, 0)) / n if n else float("nan")
    kinds: dict[str, list[float]] = {}
    for r in results.values():
        for kind, v in r[part].get("top1_by_error_kind", {}).items():
            kinds.setdefault(kind, [0, 0.0])
            kinds[kind][0] += v["n"]
            kinds[kind][1] += v["n"] * v["top1"]
    out["top1_by_error_kind"] = {k: {"n": n, "top1": hits / n} for k, (n, hits) in kinds.items()}
    return out


def report(results: dict, method: str, seconds: float | None = None) -> None:
    """Print the per-system table, its mean and lowest rows, and the two LOSO targets."""

    def fmt(v):
        return "–" if v is None or np.isnan(v) else f"{v:.3f}"

    print(f"\nLook here first ({method}), Spider dev: per system in the cross-fitted run "
          "(all systems trained on, out of fold by database) / that system held out\n")
    header = ["system", "wrong queries", "node AUC", "top-1", "top-3", "mrr", "top-1 span overlaps diff"]
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    cols = ("auc", *KEYS)
    for s, r in results.items():
        print(f"| {s} | {r['in_run']['n_wrong_queries']} | " + " | ".join(
            f"{fmt(r['in_run'][c])} / {fmt(r['held_out'][c])}" for c in cols) + " |")
    mean = {p: {c: float(np.mean([r[p][c] for r in results.values()])) for c in cols} for p in ("in_run", "held_out")}
    low = {p: {c: float(np.min([r[p][c] for r in results.values()])) for c in cols} for p in ("in_run", "held_out")}
    for name, agg in (("mean over systems", mean), ("lowest system", low)):
        print(f"| **{name}** | | " + " | ".join(f"{fmt(agg['in_run'][c])} / {fmt(agg['held_out'][c])}"
                                               for c in cols) + " |")
    pool = {p: pooled(results, p) for p in ("in_run", "held_out")}
    n_all = sum(r["in_run"]["n_wrong_queries"] for r in results.values())
    print(f"| **all {len(results)} systems' wrong queries pooled** | {n_all} | – | " + " | ".join(
        f"{fmt(pool['in_run'][c])} / {fmt(pool['held_out'][c])}" for c in KEYS) + " |")
    kinds = sorted(pool["in_run"]["top1_by_error_kind"], key=lambda k: -pool["in_run"]["top1_by_error_kind"][k]["n"])
    if kinds:
        print("\nTop-1 per error kind, pooled over the systems: in the run / held out (wrong queries)\n")
        print("| " + " | ".join(kinds) + " |\n|" + "---|" * len(kinds))
        print("| " + " | ".join(
            f"{fmt(pool['in_run']['top1_by_error_kind'][k]['top1'])} / "
            f"{fmt(pool['held_out']['top1_by_error_kind'].get(k, {}).get('top1'))} "
            f"({pool['in_run']['top1_by_error_kind'][k]['n']})" for k in kinds) + " |")
    gap = mean["in_run"]["top1_site_scores"] - mean["held_out"]["top1_site_scores"]
    print(f"\nleave-one-system-out mean top-1 {mean['held_out']['top1_site_scores']:.3f} vs "
          f"{mean['in_run']['top1_site_scores']:.3f} in the run (gap {gap:+.3f}; target within 0.03); "
          f"lowest held-out system {low['held_out']['top1_site_scores']:.3f} (target >= 0.55)"
          + (f"; {seconds:.0f} s" if seconds is not None else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", default="single", choices=["single", "single+consensus"])
    parser.add_argument("--systems", nargs="*", help="systems to hold out (default: all)")
    parser.add_argument("--out", type=Path, help="write the numbers as JSON here")
    parser.add_argument("--set", nargs="*", default=[], help="model overrides, e.g. site_context=false")
    parser.add_argument("--train-predictions", default=None,
                        help="outputs on Spider train for model.train_side (model.train_predictions; default: "
                             "data=spider's, the committed answers of data/llm_answers/; none: leave them out)")
    parser.add_argument("--from-json", nargs="+", type=Path, metavar="FILE",
                        help="print the table of earlier --out files (same method), fitting nothing")
    args = parser.parse_args()
    if args.from_json:
        missing = [f for f in args.from_json if not f.is_file()]
        if missing:
            parser.error(f"--from-json: no file {missing[0]}")
        saved = [json.loads(f.read_text()) for f in args.from_json]
        if len({d["method"] for d in saved}) > 1:
            parser.error("--from-json: the files are of different methods")
        report({s: r for d in saved for s, r in d["systems"].items()}, saved[0]["method"])
        return
    root = SHARED / "spider"
    known = sorted(p.stem for p in (SHARED / "predictions" / "spider_dev").glob("*"))
    unknown = [s for s in args.systems or () if s not in known]
    if unknown:  # told before the features of every example are built
        parser.error(f"--systems: unknown system {unknown[0]!r} (known: {', '.join(known)})")
    data = OmegaConf.create({"root": str(root), "predictions": str(SHARED / "predictions" / "spider_dev" / "*"),
                             "train_split": "train",
                             "llm_answers": OmegaConf.load(CONF / "data/spider.yaml").llm_answers,
                             "protocol": "crossfit", "folds": 5, "eval_split": "dev"})
    model_cfg = OmegaConf.merge(OmegaConf.load(CONF / "model/features.yaml"),
                                OmegaConf.from_dotlist([f"groups={args.groups}", *args.set]))
    if args.train_predictions:
        model_cfg.train_predictions = None if args.train_predictions == "none" else args.train_predictions
    config = params_of(OmegaConf.merge({"data": data}, {"model": model_cfg}).model)
    table = load_table(data, config)
    schemas = load_schemas(root)
    eval_rows = [{"question_id": e.question_id} for e in table.examples]
    questions = _questions(root, eval_rows)
    systems = args.systems or sorted({e.system for e in table.examples[:len(table.examples) - table.train_side]})
    start = time.perf_counter()
    roles, _ = fold_roles(table, data)
    everyone, _, _ = crossfit(table, roles, config, progress=False)
    print(f"cross-fitted run: {time.perf_counter() - start:.0f} s", flush=True)
    results = {}
    for s in systems:
        mine = sorted(k for k in everyone if table.examples[k].system == s)
        held_roles, _ = fold_roles(table, OmegaConf.merge(data, {"holdout_system": s}))
        held, _, _ = crossfit(table, held_roles, config, progress=False)
        results[s] = {"in_run": readings(table, everyone, mine, questions, schemas),
                      "held_out": readings(table, held, sorted(held_out(table, held, s)), questions, schemas)}
        r = results[s]
        print(f"  {s}: top-1 {r['in_run']['top1_site_scores']:.3f} in the run, "
              f"{r['held_out']['top1_site_scores']:.3f} held out ({time.perf_counter() - start:.0f} s)", flush=True)

    report(results, config.method, time.perf_counter() - start)
    if args.out:
        args.out.write_text(json.dumps({"method": config.method, "systems": results}, indent=1))


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
