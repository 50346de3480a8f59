"""`python -m rat "SQL" [--schema tables.json --db-id ID] [--gold "SQL"]`: print the RAT
(indented), its post-order string and, with --gold, each node's label."""

import argparse
import json
import sys

from rat.errors import RATError
from rat.labels import label_nodes
from rat.node import Node
from rat.schema import Schema
from rat.serialize import serialize
from rat.tree import to_tree


def _indented(tree: Node, labels: dict[int, int] | None = None) -> list[str]:
    lines: list[str] = []
    order = {id(n): i for i, n in enumerate(tree.postorder())}

    def visit(node: Node, depth: int) -> None:
        mark = ""
        if labels is not None:
            mark = "  [correct]" if labels[order[id(node)]] else "  [INCORRECT]"
        lines.append("  " * depth + node.label + mark)
        for child in node.children:
            visit(child, depth + 1)

    visit(tree, 0)
    return lines


def load_schema(path: str, db_id: str) -> Schema:
    """The schema of `db_id` from a Spider/BIRD tables.json file."""
    with open(path) as f:
        for entry in json.load(f):
            if entry["db_id"] == db_id:
                return Schema.from_spider(entry)
    raise SystemExit(f"db_id {db_id!r} not found in {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rat", description=__doc__.split("\n")[0])
    parser.add_argument("sql", help="the (predicted) SQL query")
    parser.add_argument("--schema", help="Spider/BIRD tables.json")
    parser.add_argument("--db-id", help="database id within --schema")
    parser.add_argument("--gold", help="gold SQL: print each predicted node's label")
    args = parser.parse_args(argv)
    if bool(args.schema) != bool(args.db_id):
        parser.error("--schema and --db-id go together")
    schema = load_schema(args.schema, args.db_id) if args.schema else None
    try:
        tree = to_tree(args.sql, schema)
        gold = to_tree(args.gold, schema) if args.gold else None
    except RATError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    labels = None
    if gold is not None:
        labels = label_nodes(tree, gold)
    print("\n".join(_indented(tree, labels)))
    print()
    print(serialize(tree))
    if labels is not None:
        print()
        print(f"{sum(labels)}/{len(labels)} nodes correct; root hash "
              f"{'equals' if tree.hash == gold.hash else 'differs from'} gold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
