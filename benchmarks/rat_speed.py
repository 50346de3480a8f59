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

REPO = Path(__file__).resolve().parents[1]


def best_of(repeat: int, run) -> float:
    """Smallest wall time of `repeat` runs (the least disturbed by other processes)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


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

    parse = best_of(args.repeat, lambda: [sqlglot.parse_one(q, read="sqlite") for q, _ in queries])
    from rat.canonicalize import parse as rat_parse  # rat's own parse step, for reference

    own_parse = best_of(args.repeat, lambda: [rat_parse(q) for q, _ in queries])
    tree = best_of(args.repeat, lambda: [rat.to_tree(q, schemas[d]) for q, d in queries])
    print(f"Spider gold queries (dev + train_spider + train_others): {n}")
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
    pairs = []
    for row, pred_sql in zip(dev, predictions.read_text().splitlines()):
        schema = schemas[row["db_id"]]
        try:
            pairs.append((rat.to_tree(pred_sql, schema), rat.to_tree(row["query"], schema)))
        except rat.RATError:
            pass

    def label_fresh():
        # Fresh trees each time: hashes are cached on nodes, and a real caller labels each
        # pair once, so the cost measured includes computing every hash.
        for pred, gold in fresh:
            rat.label_nodes(pred, gold)

    label_times = []
    for _ in range(args.repeat):
        fresh = [(_copy(p), _copy(g)) for p, g in pairs]
        start = time.perf_counter()
        label_fresh()
        label_times.append(time.perf_counter() - start)
    label = min(label_times)
    dev_queries = [(row["query"], row["db_id"]) for row in dev]
    dev_tree = best_of(args.repeat, lambda: [rat.to_tree(q, schemas[d]) for q, d in dev_queries])
    per_pair = label / len(pairs)
    per_tree = dev_tree / len(dev_queries)
    print(f"label_nodes per pair (codes_7b vs gold, {len(pairs)} pairs, hashes not cached):"
          f" {1e6 * per_pair:7.1f} us")
    print(f"to_tree per Spider dev gold query:  {1e6 * per_tree:7.1f} us")
    print(f"label_nodes / to_tree ratio:  {per_pair / per_tree:.2f}  (target <= 1)")


def _copy(node: rat.Node) -> rat.Node:
    return rat.Node(node.label, [_copy(c) for c in node.children])


if __name__ == "__main__":
    main()
