"""Where "look here first" misses: a run's out-of-fold site scores read against the error sites.

Prints, over the wrong queries with an error site (``model.eval.localisation.error_sites``):
top-1 with an interval, top-3 and mrr (``model.eval.localisation.localisation``); top-1 of the site head by the number of sites in the query; per system, its top-1 and what its
mix of site counts alone would give; for queries with one site, top-1
by the site's kind (leaf kinds, else the operator) and the most common (site kind, kind pointed
at) pairs of the misses; and, over all misses, whether the pointed node is right and outside
every site's subtree, right inside a site's subtree, or an ancestor of a site.

``--sample N``: also N one-site misses drawn at random (``--seed``; one per question and site),
each with its question, prediction, gold SQL, the site and the node pointed at, to be read by
hand (``--data-root`` holds the questions); ``--site-kind K`` draws them from the misses whose
site is of kind K only (a leaf type or an operator, as the per-kind table names them).

``--against OTHER``: the same wrong queries' top-1 in another run's test.jsonl (the baseline),
paired: the queries each gets and the other misses, and the difference with a 95% interval from
2,000 bootstrap draws of the databases (queries of one database move together). The first line
gives the run's own top-1 with such an interval.

    python scripts/site_misses.py <run>/predictions/test.jsonl [--top 12] [--sample 30 --seed 0 [--site-kind Project]] [--system S[,S2...]] [--against <baseline run>/predictions/test.jsonl]
"""

import argparse
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model.data.datasets import load_questions
from model.data.jsonl import iter_jsonl
from model.eval.localisation import localisation
from model.nodes.features import tree_shape
from rat.walks import error_sites


def kind(row: dict, i: int) -> str:
    """A leaf's type (column, value, table), else the operator's label."""
    t = row["node_types"][i]
    return t if t in ("column", "value", "table") else row["node_names"][i]


def miss_place(row: dict, pointed: int, sites: np.ndarray) -> str:
    shape = tree_shape(row["node_arity"])
    below = set(range(pointed - shape.size[pointed] + 1, pointed))  # post-order: the subtree precedes
    if below & set(np.flatnonzero(sites).tolist()):
        return "ancestor of a site"
    a = shape.parent[pointed]
    while a >= 0:
        if sites[a]:
            return "right, inside a site's subtree"
        a = shape.parent[a]
    return "right, outside every site's subtree"


REQUIRED = ("question_id", "db_id", "node_labels", "node_arity", "node_names", "node_types")


def rows_of(path: Path, systems: set[str] | None = None):
    """The rows of a run's test.jsonl (of ``systems`` only, when given); a line that is not JSON,
    or a row without the fields a run writes, is a ValueError naming the file."""
    for row in iter_jsonl(path):
        if not isinstance(row, dict) or not set(REQUIRED) <= row.keys():
            raise ValueError(f"{path}: a row without {', '.join(REQUIRED)} (a run's predictions/test.jsonl has them)")
        if not systems or row.get("system") in systems:
            yield row


def top1_hits(path: Path, systems: set[str] | None = None) -> dict[tuple[str, str], tuple[str, bool]]:
    """(question, system) -> (database, whether the site head's first node is an error site) for
    each wrong query of a test.jsonl with an error site and site scores."""
    out = {}
    for row in rows_of(path, systems):
        if all(row["node_labels"]) or row.get("site_scores") is None:
            continue
        sites = error_sites(row["node_labels"], row["node_arity"])
        if any(sites):
            out[row["question_id"], row.get("system", "")] = (row["db_id"], bool(sites[int(np.argmax(row["site_scores"]))]))
    return out


def database_draws(run: dict, keys: list, draws: int = 2000, seed: int = 0):
    """Bootstrap draws of the databases of ``keys`` (queries of one database move together):
    each draw the positions in ``keys`` of the drawn databases' queries."""
    databases = sorted({run[k][0] for k in keys})
    rows = defaultdict(list)
    for i, k in enumerate(keys):
        rows[run[k][0]].append(i)
    rng = np.random.default_rng(seed)
    for _ in range(draws):
        yield np.concatenate([rows[databases[j]] for j in rng.integers(0, len(databases), len(databases))])


def interval(run: dict, draws: int = 2000, seed: int = 0) -> str:
    """The run's top-1 with a 95% bootstrap interval over databases.

    >>> interval({("q1", "s"): ("a", True), ("q2", "s"): ("b", False)}, draws=10).split(" (")[0]
    'top-1 0.500'
    """
    keys = sorted(run)
    a = np.array([run[k][1] for k in keys], dtype=float)
    low, high = np.percentile([a[idx].mean() for idx in database_draws(run, keys, draws, seed)], [2.5, 97.5])
    n = len({run[k][0] for k in keys})
    return f"top-1 {a.mean():.3f} (95% interval over {n} databases {low:.3f} to {high:.3f})"


def paired(run: dict, baseline: dict, draws: int = 2000, seed: int = 0) -> str:
    """The run's top-1 against the baseline's on the wrong queries both have, paired by query,
    with a bootstrap interval over databases.

    >>> run = {("q1", "s"): ("a", True), ("q2", "s"): ("b", True), ("q3", "s"): ("b", False)}
    >>> base = {("q1", "s"): ("a", False), ("q2", "s"): ("b", True), ("q3", "s"): ("b", False)}
    >>> paired(run, base, draws=10).split(";")[0]
    '3 wrong queries in both: top-1 0.667 against 0.333 (+0.333'
    """
    keys = sorted(run.keys() & baseline.keys())
    a = np.array([run[k][1] for k in keys], dtype=float)
    b = np.array([baseline[k][1] for k in keys], dtype=float)
    diffs = [a[idx].mean() - b[idx].mean() for idx in database_draws(run, keys, draws, seed)]
    low, high = np.percentile(diffs, [2.5, 97.5])
    n = len({run[k][0] for k in keys})
    return (f"{len(keys)} wrong queries in both: top-1 {a.mean():.3f} against {b.mean():.3f} "
            f"({a.mean() - b.mean():+.3f}; 95% interval over {n} databases {low:+.3f} to {high:+.3f}); "
            f"this run alone gets {int(((a == 1) & (b == 0)).sum())}, the baseline alone {int(((a == 0) & (b == 1)).sum())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("predictions", type=Path, help="<run>/predictions/test.jsonl with site_scores")
    parser.add_argument("--top", type=int, default=12, help="rows of the per-kind tables")
    parser.add_argument("--sample", type=int, default=0, help="one-site misses to print for reading by hand")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-root", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/spider",
                        help="the benchmark folder with the run's questions (for --sample)")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--system", help="read only this system's predictions (or these, comma-separated)")
    parser.add_argument("--against", type=Path, help="a baseline run's predictions/test.jsonl: paired top-1")
    parser.add_argument("--site-kind", help="--sample: only one-site misses whose site is of this kind (e.g. Project)")
    args = parser.parse_args()
    args.system = set(args.system.split(",")) if args.system else None
    for path in (args.predictions, args.against):
        if path is not None and not path.is_file():
            parser.error(f"{path}: no such file (a run's predictions/test.jsonl)")
    by_count, by_kind, pairs, places = defaultdict(list), defaultdict(list), Counter(), Counter()
    misses: dict[tuple, dict] = {}  # (question, site label, pointed label) -> one row
    hits: dict[tuple[str, str], tuple[str, bool]] = {}  # as top1_hits gives them
    by_system: dict[str, list[tuple[int, bool]]] = defaultdict(list)  # (site count bucket, hit)
    try:
        rows = list(rows_of(args.predictions, args.system))
        against = top1_hits(args.against, args.system) if args.against is not None else None
    except ValueError as err:
        parser.error(str(err))
    pointer_rows = []  # the wrong queries with a site, for localisation's top-3 and mrr
    for row in rows:  # one pass over the run's rows
        if all(row["node_labels"]) or row.get("site_scores") is None:
            continue
        sites = np.array(error_sites(row["node_labels"], row["node_arity"]), dtype=bool)
        if not sites.any():
            continue
        pointer_rows.append(row)
        pointed = int(np.argmax(row["site_scores"]))  # ties: the earlier node, as localisation
        hit = bool(sites[pointed])
        hits[row["question_id"], row.get("system", "")] = (row["db_id"], hit)
        by_count[min(int(sites.sum()), 5)].append(hit)
        by_system[row.get("system", "")].append((min(int(sites.sum()), 5), hit))
        if not hit:
            places[miss_place(row, pointed, sites)] += 1
        if sites.sum() == 1:
            site = int(np.flatnonzero(sites)[0])
            by_kind[kind(row, site)].append(hit)
            if not hit:
                pairs[kind(row, site), kind(row, pointed)] += 1
                key = (row["question_id"], row["node_names"][site], row["node_names"][pointed])
                misses.setdefault(key, {**row, "site": site, "pointed": pointed})
    n = sum(len(v) for v in by_count.values())
    if not n:
        parser.error(f"{args.predictions}: no wrong query with an error site and site_scores "
                     "(written by a model=features run with the site head)")
    # top-3 and mrr of the site scores as localisation ranks them (its ties); the confidences feed
    # only its least-confident reading, not printed, so a row without them reads as all 0.5
    where = localisation(pointer_rows, [r.get("node_confidences") or [0.5] * len(r["node_labels"]) for r in pointer_rows],
                         [r["site_scores"] for r in pointer_rows])
    print(f"wrong queries with a site: {n}; {interval(hits)}; top-3 {where['top3']:.3f}, mrr {where['mrr']:.3f}")
    print("\n| error sites in the query | wrong queries | top-1 |\n|---|---|---|")
    for k, v in sorted(by_count.items()):
        print(f"| {k if k < 5 else '5 or more'} | {len(v)} | {np.mean(v):.3f} |")
    pooled = {k: np.mean(v) for k, v in by_count.items()}
    print("\nBy system (expected: the top-1 of its mix of site counts, each count at the top-1 of all the "
          "systems above)\n\n| system | wrong queries | one site | top-1 | expected from its site counts |\n|---|---|---|---|---|")
    for system, v in sorted(by_system.items(), key=lambda kv: np.mean([h for _, h in kv[1]])):
        print(f"| {system} | {len(v)} | {np.mean([c == 1 for c, _ in v]):.1%} | {np.mean([h for _, h in v]):.3f} | "
              f"{np.mean([pooled[c] for c, _ in v]):.3f} |")
    print("\nOne site: top-1 by the site's kind\n\n| site | queries | top-1 |\n|---|---|---|")
    for k, v in sorted(by_kind.items(), key=lambda kv: -len(kv[1]))[:args.top]:
        print(f"| {k} | {len(v)} | {np.mean(v):.3f} |")
    print("\nOne site, missed: (site, pointed at)\n\n| site | pointed at | queries |\n|---|---|---|")
    for (s, p), c in pairs.most_common(args.top):
        print(f"| {s} | {p} | {c} |")
    print("\nAll misses: the node pointed at\n\n| pointed node | misses |\n|---|---|")
    for place, c in places.most_common():
        print(f"| {place} | {c} |")
    if args.against is not None:
        print("\nAgainst " + str(args.against) + ": " + paired(hits, against))
    if args.sample:
        gold = {q.question_id: q for q in load_questions(args.data_root, args.split)}
        if any(gold.get(qid) is None or gold[qid].db_id != misses[qid, *rest]["db_id"] for qid, *rest in misses):
            parser.error(f"--data-root {args.data_root} --split {args.split}: not the run's questions")
        keys = sorted(k for k, row in misses.items() if args.site_kind in (None, kind(row, row["site"])))
        if not keys:
            parser.error(f"--site-kind {args.site_kind}: no one-site miss has a site of that kind")
        random.Random(args.seed).shuffle(keys)
        print(f"\n{min(args.sample, len(keys))} of {len(keys)} distinct one-site misses "
              f"(question, site, node pointed at):")
        for n, key in enumerate(keys[:args.sample], 1):
            row, q = misses[key], gold[key[0]]
            print(f"\n[{n}] {row['question_id']} {row['system']}: {q.question}\n  predicted: {row['sql']}\n"
                  f"  gold:      {q.gold_sql}\n  site: {kind(row, row['site'])} {key[1]}; "
                  f"pointed at: {kind(row, row['pointed'])} {key[2]}")


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
