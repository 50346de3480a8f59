"""Perturbations of Spider train gold as "predictions" whose error site is known by construction:
one per question (`model.synth.perturb.Perturber`, DEFAULT_MIX, seeded), written as id-keyed
JSONL like SPLASH's files, so that a run reads them through ``data.train_predictions``:

    python benchmarks/perturbed_predictions.py --out /tmp/perturbed/train.jsonl --questions 4000
    python train.py model=features data=spider data.root=../shared/data/spider \\
        model.train_side=site data.train_predictions=/tmp/perturbed/train.jsonl

(Labels come as for every prediction: execution against gold on the train databases, nodes by
tree comparison, so a perturbation that still returns gold's rows counts as right.)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tqdm import tqdm

import rat
from model.data.datasets import database_path, load_questions, load_schemas
from model.synth.perturb import Perturber


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--questions", type=int, default=4000, help="train questions drawn (seeded)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    spider = args.data / "spider"
    if not (spider / "train_spider.json").exists():
        sys.exit(f"perturbed_predictions.py: error: Spider not found under {args.data} (pass --data)")
    questions = load_questions(spider, "train")
    questions = random.Random(args.seed).sample(questions, min(args.questions, len(questions)))
    schemas = load_schemas(spider)
    perturbers: dict[str, Perturber] = {}
    kinds, failed = Counter(), 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as out:
        for index, q in enumerate(tqdm(questions, desc="perturbing", unit="q")):
            if q.db_id not in schemas:
                failed += 1
                continue
            perturber = perturbers.get(q.db_id)
            if perturber is None:
                perturber = perturbers[q.db_id] = Perturber(schemas[q.db_id], database_path(spider, q.db_id))
            try:
                made = perturber.perturb(q.gold_sql, n=1, seed=args.seed * 100_003 + index)
            except rat.RATError:
                made = []
            if not made:
                failed += 1
                continue
            kinds[made[0].kind] += 1
            out.write(json.dumps({"question_id": q.question_id, "db_id": q.db_id, "sql": made[0].sql,
                                  "kind": made[0].kind}) + "\n")
    print(f"wrote {sum(kinds.values())} perturbations of {len(questions)} train questions to {args.out} "
          f"({failed} questions without one); kinds: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common()))


if __name__ == "__main__":
    main()
