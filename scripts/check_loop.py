"""A text-to-SQL loop with a check before each query runs: the query the generator writes is
scored (``Scorer.check``); one the verdict lets run is run, one it sends back goes to the
generator again with the feedback, one for review is left for a person. On the demo corpus,
with the demo pseudo-systems as the generator (docs/scoring.md, "In a text-to-SQL loop").

    python scripts/check_loop.py                    # the questions sent back, in full; then a summary

The pseudo-systems cannot read the feedback: a retry asks the next, stronger one (demo_weak, then
demo_medium, then demo_strong). A language model would get the feedback in its prompt.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from model.cli_types import non_negative_int, positive_int

GENERATORS = ("demo_weak", "demo_medium", "demo_strong")


def demo_generator(root: Path):
    """``generate(question_id, feedback, attempt) -> sql``: the pseudo-systems' answers in turn."""
    answers = {system: {row["question_id"]: row["sql"] for row in map(json.loads, (root / "predictions" /
                                                                                   f"{system}.jsonl").open())}
               for system in GENERATORS}

    def generate(question_id: str, feedback: str | None, attempt: int) -> str:
        return answers[GENERATORS[min(attempt, len(GENERATORS) - 1)]][question_id]

    return generate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=positive_int, default=None, help="the first N dev questions (default all)")
    parser.add_argument("--show", type=non_negative_int, default=2,
                        help="print the loop in full for the first N questions whose first query is sent back")
    parser.add_argument("--tries", type=positive_int, default=len(GENERATORS), help="generations per question at most")
    args = parser.parse_args(argv)
    from model import Scorer
    from model.data.execution import execute_pairs
    from model.synth.demo import demo_root

    root = demo_root()
    questions = json.loads((root / "dev.json").read_text())[: args.questions]
    generate = demo_generator(root)
    scorer = Scorer.pretrained()
    outcome: Counter = Counter()
    first_tries: Counter = Counter()
    runs = []  # (database, sql, gold) of every query run
    shown = 0
    for k, q in enumerate(questions):
        qid, database = f"dev_{k}", root / "database" / q["db_id"] / f"{q['db_id']}.sqlite"
        lines = [f"Q: {q['question']}  [{q['db_id']}]"]
        feedback = None
        for attempt in range(args.tries):
            sql = generate(qid, feedback, attempt)
            verdict = scorer.check(sql, question=q["question"], database=database)
            if attempt == 0:
                first_tries[verdict.action] += 1
            lines.append(f"  try {attempt + 1}: {sql}\n    -> {verdict.action} ({verdict.query_confidence:.2f})")
            if verdict.action == "regenerate" and attempt + 1 < args.tries:
                feedback = verdict.feedback
                lines.append("    feedback: " + feedback.replace("\n", "\n              "))
                continue
            if verdict.action == "run":
                runs.append((database, sql, q["query"]))
            outcome[verdict.action if verdict.action != "regenerate" else "regenerate (no tries left)"] += 1
            if attempt and verdict.action != "regenerate":
                outcome["settled on a retry"] += 1
            break
        if len(lines) > 2 and shown < args.show:  # sent back at least once
            print("\n".join(lines) + "\n")
            shown += 1
    right = sum(o == "match" for o in execute_pairs(runs, progress=False))
    print(f"{len(questions)} questions; first tries: " + ", ".join(f"{first_tries[a]} {a}" for a in
                                                                     ("run", "review", "regenerate")))
    print(f"after the loop: {outcome['run']} run ({right} of them right by execution), {outcome['review']} "
          f"for review, {outcome['regenerate (no tries left)']} still sent back after {args.tries} tries; "
          f"{outcome['settled on a retry']} run or left for review on a retry")
    return 0


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        sys.exit(main())
