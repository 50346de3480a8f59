"""Speed of `rat`: `to_tree` over every Spider gold query against `sqlglot.parse_one` alone on
the same queries in the same run, and `label_nodes` per (prediction, gold) pair against one
`to_tree`.

    python benchmarks/rat_speed.py [--data-root ../shared/data] [--repeat 3]
"""

import argparse
import json
import time
from pathlib import Path

import sqlglot

import rat
from rat.canonicalize import parse as rat_parse  # rat's own parse step, shown for reference

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-root", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    spider = args.data_root / "spider"
    schemas = {e["db_id"]: rat.Schema.from_spider(e)
               for e in json.loads((spider / "tables.json").read_text())}
    queries = []
    for split in ("dev", "train_spider", "train_others"):
        queries += [(r["query"], r["db_id"])
                    for r in json.loads((spider / f"{split}.json").read_text())]
    n = len(queries)

    # Interleaved per query, so that load from other processes hits all three alike.
    candidates = {
        "parse": lambda q, d: sqlglot.parse_one(q, read="sqlite"),
        "own_parse": lambda q, d: rat_parse(q),
        "tree": lambda q, d: rat.to_tree(q, schemas[d]),
    }
    best = dict.fromkeys(candidates, float("inf"))
    clock = time.perf_counter
    for _ in range(args.repeat):
        totals = dict.fromkeys(candidates, 0.0)
        for q, d in queries:
            for name, run in candidates.items():
                start = clock()
                run(q, d)
                totals[name] += clock() - start
        best = {name: min(best[name], totals[name]) for name in candidates}
    parse, own_parse, tree = best["parse"], best["own_parse"], best["tree"]
    print(f"Spider gold queries (dev + train_spider + train_others): {n}, best of {args.repeat}")
    print(f"sqlglot.parse_one (sqlite): {parse:.3f} s  {n / parse:8.0f} queries/s"
          f"  {1e6 * parse / n:7.1f} us/query")
    print(f"rat's parse step alone:     {own_parse:.3f} s  {n / own_parse:8.0f} queries/s"
          f"  {1e6 * own_parse / n:7.1f} us/query  (sqlglot with rat's SQLite dialect)")
    print(f"rat.to_tree (with schema):  {tree:.3f} s  {n / tree:8.0f} queries/s"
          f"  {1e6 * tree / n:7.1f} us/query")
    print(f"to_tree / parse_one ratio:  {tree / parse:.2f}  (target <= 2)")

    # label_nodes on real pairs: a system's Spider dev prediction against its gold query.
    dev = json.loads((spider / "dev.json").read_text())
    predictions = (args.data_root / "predictions" / "spider_dev" / "codes_7b.txt")
    pairs, pair_gold = [], []
    for row, pred_sql in zip(dev, predictions.read_text().splitlines()):
        schema = schemas[row["db_id"]]
        try:
            pairs.append((rat.to_tree(pred_sql, schema), rat.to_tree(row["query"], schema)))
            pair_gold.append((row["query"], row["db_id"]))
        except rat.RATError:
            pass

    # Fresh trees each time (hashes are cached on nodes, and a real caller labels each pair
    # once, so the cost includes computing every hash), interleaved with one to_tree of the
    # same gold query.
    label_best = tree_best = float("inf")
    for _ in range(args.repeat):
        label_total = tree_total = 0.0
        for (pred, gold), (gold_sql, db_id) in zip(pairs, pair_gold):
            pred, gold = _copy(pred), _copy(gold)
            start = clock()
            rat.label_nodes(pred, gold)
            middle = clock()
            rat.to_tree(gold_sql, schemas[db_id])
            label_total += middle - start
            tree_total += clock() - middle
        label_best, tree_best = min(label_best, label_total), min(tree_best, tree_total)
    per_pair = label_best / len(pairs)
    per_tree = tree_best / len(pairs)
    print(f"label_nodes per pair (codes_7b vs gold, {len(pairs)} pairs, hashes not cached):"
          f" {1e6 * per_pair:7.1f} us")
    print(f"to_tree per Spider dev gold query (same pairs):  {1e6 * per_tree:7.1f} us")
    print(f"label_nodes / to_tree ratio:  {per_pair / per_tree:.2f}  (target <= 1)")


def _copy(node: rat.Node) -> rat.Node:
    return rat.Node(node.label, [_copy(c) for c in node.children])


if __name__ == "__main__":
    main()
