"""Draw the 50 BIRD dev predictions (seed 0) that tree labels call wrong, for the hand check of
how pessimistic tree labels are (docs/beyond_spider.md): each with its question, evidence, gold
and predicted SQL.

    python benchmarks/bird_label_sample.py <a data=bird run>/predictions/test.jsonl
"""

import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model.data.datasets import load_questions
from model.nodes.outputs import read_predictions

SHARED = Path(os.environ.get("RAT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def main() -> None:
    rows = read_predictions(Path(sys.argv[1]))
    wrong = [r for r in rows if not all(r["node_labels"])]
    random.seed(0)
    questions = {q.question_id: q for q in load_questions(SHARED / "bird", "dev")}
    print(f"{len(wrong)} of {len(rows)} predictions wrong by tree labels; 50 drawn\n")
    for i, r in enumerate(random.sample(wrong, 50)):
        q = questions[r["question_id"]]
        print(f"--- {i} {r['question_id']} {r['system']}\nQ: {q.question}\nE: {q.evidence}\n"
              f"G: {q.gold_sql}\nP: {r['sql']}\n")


if __name__ == "__main__":
    main()
