"""Would more labelled wrong queries help "look here first"? A learning curve of the site head.

The project's own cross-fitting on Spider dev (the default single-system command's folds, node
model, inner folds and site head; ``--set`` overrides the model config), with only a share of
the *questions* of each fold's training and validation databases kept (all 11 systems'
predictions of a kept question; drawn with ``--seed``); the test databases are scored whole, so
every row reads the same 2,184 wrong queries. If top-1 still rises steeply from 75% to 100%, more
wrong queries of the same kind (another system's predictions on Spider train, say) should help;
if it is flat, the head is short of information, not of examples.

    python benchmarks/site_learning_curve.py [--fractions 0.5 0.75 1.0] [--seed 0] [--set site_monotone=context ...]
"""

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from site_ranker import measure, spider_crossfit

SHARED = Path(os.environ.get("RAT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def keep_questions(roles: list[dict[str, list[int]]], questions: list[str], fraction: float, seed: int
                   ) -> list[dict[str, list[int]]]:
    """``roles`` with only ``fraction`` of the distinct questions of "train" and "val" kept
    (``questions[k]``: example k's question; the same draw in every fold); "test" whole.

    >>> keep_questions([{"train": [0, 1, 2], "val": [3], "test": [4]}], ["a", "a", "b", "c", "d"], 1.0, 0)
    [{'train': [0, 1, 2], 'val': [3], 'test': [4]}]
    >>> keep_questions([{"train": [0, 1, 2], "val": [], "test": []}], ["a", "a", "b"], 0.5, 0)[0]["train"] in ([0, 1], [2])
    True
    """
    distinct = sorted(set(questions))
    rng = np.random.default_rng(seed)
    kept = set(np.array(distinct)[rng.permutation(len(distinct))[:round(fraction * len(distinct))]].tolist())
    return [{**role, **{part: [k for k in role[part] if questions[k] in kept] for part in ("train", "val")}}
            for role in roles]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.5, 0.75, 1.0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", nargs="*", default=[], help="model overrides, e.g. site_monotone=context")
    args = parser.parse_args()
    if any(not 0 < f <= 1 for f in args.fractions):
        parser.error(f"--fractions must lie in (0, 1]; found {args.fractions}")
    root = SHARED / "spider"
    if not (root / "dev.json").is_file():
        parser.error(f"Spider not found under {root} (set RAT_SHARED_DATA)")
    table, roles, config = spider_crossfit(args.set)
    questions = [e.question_id for e in table.examples]
    print("\n| share of training questions | training wrong queries (fold mean) | top-1 | top-3 | mrr | node AUC | seconds |\n"
          "|---|---|---|---|---|---|---|")
    for fraction in args.fractions:
        kept = keep_questions(roles, questions, fraction, args.seed)
        wrong = np.mean([sum(not table.examples[k].correct for k in r["train"] + r["val"]) for r in kept])
        where, node_auc, seconds = measure(table, kept, config)
        print(f"| {fraction:.2f} | {wrong:.0f} | {where['top1']:.3f} | {where['top3']:.3f} | {where['mrr']:.3f} | "
              f"{node_auc:.3f} | {seconds:.0f} |", flush=True)


if __name__ == "__main__":
    main()
