"""How far can reading the other systems' answers take "look here first"? The consensus track's
top-1 split by whether another system answered the question right, and what pointing at where
the query departs from one other answer would give.

For every wrong query with an error site (out of fold, a consensus run's ``predictions/test.jsonl``):

- **split**: top-1 of the consensus head, and of the single-system head (``--single``: the same
  queries in a single-system run), on the wrong queries where some other system's answer is right
  by execution, and on those where none is;
- **departures from one answer**: among the nodes that are error sites of the query against
  another answer's tree (``rat.label_nodes`` against it, ``error_sites``), the one the consensus
  head scores highest (its own first node when there are none): against the other answer the
  single-system node model trusts most (its lowest out-of-fold node confidence highest, from
  ``--single``), and, as a ceiling no scorer has, against an answer known to be right.

    python benchmarks/consensus_headroom.py <consensus run>/predictions/test.jsonl --single <single run>/predictions/test.jsonl
"""

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from model.eval.baselines import labels_against_others
from model.eval.localisation import error_sites
from model.nodes.outputs import tree_of


def fail(message: str) -> None:
    print(f"consensus_headroom.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def read_rows(path: Path) -> list[dict]:
    try:
        with path.open() as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, json.JSONDecodeError) as e:
        fail(f"{path}: {e}")


def pick(sites_against: list[int], head: np.ndarray) -> int:
    """The head's highest-scored node among ``sites_against``; its first node when there are none."""
    candidates = [i for i, s in enumerate(sites_against) if s]
    return max(candidates, key=lambda i: head[i]) if candidates else int(head.argmax())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("consensus", type=Path, help="a consensus run's predictions/test.jsonl")
    parser.add_argument("--single", type=Path, required=True, help="a single-system run's predictions/test.jsonl")
    args = parser.parse_args()
    rows = read_rows(args.consensus)
    single = {(r["question_id"], r["system"]): r for r in read_rows(args.single)}
    missing = [r for r in rows if (r["question_id"], r["system"]) not in single]
    if missing or any("site_scores" not in r for r in rows):
        fail("the two runs must score the same predictions, with site scores "
             f"({len(missing)} of {len(rows)} consensus rows have no single-system row)")
    by_question: dict[str, list[int]] = defaultdict(list)
    for k, r in enumerate(rows):
        by_question[r["question_id"]].append(k)
    count: dict[str, float] = defaultdict(float)
    for indices in by_question.values():
        trees = {k: tree_of(rows[k]) for k in indices}
        against = labels_against_others(trees) if len(indices) > 1 else {k: {} for k in indices}
        for k in indices:
            r = rows[k]
            sites = error_sites(r["node_labels"], r["node_arity"])
            if r["execution_match"] or not any(sites):
                continue
            head = np.asarray(r["site_scores"])
            own = single[r["question_id"], r["system"]]
            group = "right" if any(rows[m]["execution_match"] for m in indices if m != k) else "none"
            count[f"{group} n"] += 1
            count[f"{group} consensus"] += sites[int(head.argmax())]
            count[f"{group} single"] += sites[int(np.argmax(own["site_scores"]))]
            others = [m for m in indices if m != k and not all(against[k][m])]  # answers it departs from
            trusted = max(others, key=lambda m: min(single[rows[m]["question_id"], rows[m]["system"]]
                                                    ["node_confidences"]), default=None)
            count["trusted"] += sites[pick(error_sites(against[k][trusted], r["node_arity"]), head)
                                      if trusted is not None else int(head.argmax())]
            count["trusted is right"] += trusted is not None and bool(rows[trusted]["execution_match"])
            count["no other answer"] += trusted is None
            right = [m for m in others if rows[m]["execution_match"]]
            if right:
                count["oracle n"] += 1
                count["oracle"] += sites[pick(error_sites(against[k][right[0]], r["node_arity"]), head)]
                count["oracle head"] += sites[int(head.argmax())]
    n = count["right n"] + count["none n"]
    if not n:
        fail(f"{args.consensus}: no wrong query with an error site")
    print(f"wrong queries with an error site: {n:.0f}; consensus head top-1 "
          f"{(count['right consensus'] + count['none consensus']) / n:.3f}\n")
    print("| wrong queries | n | consensus head top-1 | single-system head top-1 |\n|---|---|---|---|")
    for group, words in (("right", "another system's answer is right"), ("none", "no other system's answer is right")):
        m = count[f"{group} n"]
        print(f"| {words} | {m:.0f} | {count[f'{group} consensus'] / max(m, 1):.3f} | "
              f"{count[f'{group} single'] / max(m, 1):.3f} |")
    print(f"\npointing at departures from the other answer the node model trusts most: top-1 "
          f"{count['trusted'] / n:.3f} (that answer right by execution for "
          f"{count['trusted is right'] / max(n - count['no other answer'], 1):.3f} of the queries; "
          f"{count['no other answer']:.0f} queries no other answer departs from)")
    m = count["oracle n"]
    print(f"ceiling, departures from an answer known to be right ({m:.0f} queries): top-1 "
          f"{count['oracle'] / max(m, 1):.3f}, against the consensus head's {count['oracle head'] / max(m, 1):.3f} "
          "on the same queries")


if __name__ == "__main__":
    main()
