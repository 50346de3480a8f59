"""`python -m rat "SQL" [--schema tables.json --db-id ID] [--gold "SQL"] [--dialect D]`: print the RAT
(indented), its post-order string and, with --gold, each node's label. Bad input of any kind
gives one line on stderr and a non-zero exit status, never a traceback. `python -m rat
--version` says which sqlglot runs: its version, and "compiled (sqlglotc)" or "pure Python"."""

import argparse
import json
import sys

from rat.build import version_line
from rat.dialects import DIALECTS
from rat.errors import RATError
from rat.labels import label_nodes
from rat.node import Node
from rat.schema import Schema
from rat.serialize import serialize
from rat.text import printable
from rat.tree import to_tree


def _indented(tree: Node, labels: list[int] | None = None) -> list[str]:
    lines: list[str] = []
    order = {id(n): i for i, n in enumerate(tree.postorder())}
    stack = [(tree, 0)]  # iterative: a tree can be up to rat.tree.MAX_DEPTH deep
    while stack:
        node, depth = stack.pop()
        mark = ""
        if labels is not None:
            mark = "  [correct]" if labels[order[id(node)]] else "  [INCORRECT]"
        lines.append("  " * depth + printable(node.label) + mark)
        stack.extend((child, depth + 1) for child in reversed(node.children))
    return lines


def load_schema(path: str, db_id: str) -> Schema:
    """The schema of `db_id` from a Spider/BIRD tables.json file; ValueError (naming the file)
    when it cannot be read, is not such a file, or lacks `db_id`."""
    try:
        with open(path, encoding="utf-8") as f:
            entries = json.load(f)
        for entry in entries:
            if entry["db_id"] == db_id:
                return Schema.from_spider(entry)
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot read {path} ({type(error).__name__}: {error})") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not JSON ({error})") from None
    except (KeyError, TypeError, IndexError, AttributeError, ValueError) as error:
        raise ValueError(
            f"{path} is not a Spider/BIRD tables.json ({type(error).__name__}: {error})"
        ) from None
    raise ValueError(f"db_id {db_id!r} not found in {path}")


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {printable(message)}\n")


def main(argv: list[str] | None = None) -> int:
    parser = _OneLineParser(prog="python -m rat", description=__doc__.split("\n")[0])
    parser.add_argument("sql", help="the (predicted) SQL query")
    parser.add_argument("--schema", help="Spider/BIRD tables.json")
    parser.add_argument("--db-id", help="database id within --schema")
    parser.add_argument("--gold", help="gold SQL: print each predicted node's label")
    parser.add_argument("--dialect", default="sqlite", type=str.lower, choices=sorted(DIALECTS),
                        help="the SQL dialect both queries are written in (default: sqlite)")
    parser.add_argument("--version", action="version", version=version_line(),
                        help="sqlglot's version and build (compiled or pure Python)")
    args = parser.parse_args(argv)
    if bool(args.schema) != bool(args.db_id):
        parser.error("--schema and --db-id go together")
    try:
        schema = load_schema(args.schema, args.db_id) if args.schema else None
    except ValueError as error:
        print(f"{parser.prog}: error: {printable(str(error))}", file=sys.stderr)
        return 2
    try:  # SQL rat cannot read: one line naming it, exit 2 as for any other input
        tree = to_tree(args.sql, schema, args.dialect)
    except RATError as error:
        print(f"{parser.prog}: error: sql: {printable(str(error))}", file=sys.stderr)
        return 2
    try:
        gold = to_tree(args.gold, schema, args.dialect) if args.gold is not None else None
    except RATError as error:
        print(f"{parser.prog}: error: --gold: {printable(str(error))}", file=sys.stderr)
        return 2
    labels = None
    if gold is not None:
        labels = label_nodes(tree, gold)
    lines = [*_indented(tree, labels), "", printable(serialize(tree))]
    if labels is not None:
        verdict = "equals" if tree.hash == gold.hash else "differs from"
        lines += ["", f"{sum(labels)}/{len(labels)} nodes correct; root hash {verdict} gold"]
    text = "\n".join(lines) + "\n"
    # Labels keep what the SQL was written with, e.g. undecodable bytes from the command line.
    sys.stdout.write(text.encode(sys.stdout.encoding or "utf-8", "backslashreplace")
                     .decode(sys.stdout.encoding or "utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
