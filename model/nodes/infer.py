"""Score every RAT node of a SQL query with a trained checkpoint, and print the tree with scores.

    python -m model.nodes.infer --ckpt <run dir or .ckpt> --schema <tables.json or Spider root> \\
        --db-id concert_singer --question "How many singers are there?" \\
        --sql "SELECT count(*) FROM singer"
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

import rat

# Confidence thresholds of the terminal colours: red below LOW, yellow below HIGH, green above.
LOW, HIGH = 0.5, 0.8


@dataclass(frozen=True)
class NodeScore:
    index: int  # position in the post-order (the order of node labels everywhere in the project)
    label: str  # the RAT node's label ("Project", "singer.name", "20")
    node_type: str  # "table" | "column" | "value" | the operator label
    depth: int  # 0 at the root
    children: tuple[int, ...]  # post-order indices of the children
    confidence: float  # probability that this node (its subtree) is correct


def resolve_checkpoint(path: str | Path) -> Path:
    """A ``.ckpt`` file as given, or a run directory's best checkpoint (else its last one)."""
    path = Path(path)
    if path.is_file():
        return path
    metrics = path / "metrics.json"
    if metrics.is_file():
        best = json.loads(metrics.read_text()).get("best_checkpoint")
        if best and Path(best).is_file():
            return Path(best)
    for candidate in (path / "checkpoints" / "last.ckpt", *sorted((path / "checkpoints").glob("*.ckpt"))):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"no checkpoint at {path} (expected a .ckpt file or a run directory)")


class NodeScorer:
    """A trained node model and its tokenizer, ready to score (schema, question, SQL) triples."""

    def __init__(self, checkpoint: str | Path, device: str | None = None):
        from model.lm import load_tokenizer
        from model.nodes.module import NodeConfidenceModule

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model = NodeConfidenceModule.load_from_checkpoint(resolve_checkpoint(checkpoint), map_location=device)
        self.model.eval()
        embedder = self.model.hparams.embedder
        self.tokenizer = load_tokenizer(
            embedder.get("name_or_path"), embedder.get("gguf_file"), embedder.get("lm_cache_dir")
        )
        self.max_tokens = self.model.encoder.config.max_positions

    def score(self, schema: rat.Schema | None, question: str, sql: str, db_id: str = "") -> list[NodeScore]:
        """Every node of ``sql``'s RAT with its confidence, in post-order (root last).

        Raises ``rat.RATError`` for SQL the RAT library cannot read, ``ValueError`` when the
        input cannot fit ``max_positions`` tokens even with the schema pruned.
        """
        from model.data.datasets import Question
        from model.nodes.datamodule import Collate, _pad_id
        from model.nodes.examples import make_example, tokenize_example

        example = make_example(Question("infer", db_id, question, gold_sql=""), sql, "infer", schema)
        tokenized, reason = tokenize_example(example, self.tokenizer, self.max_tokens)
        if tokenized is None:
            raise ValueError(f"cannot score this query: {reason}")
        batch = Collate(_pad_id(self.tokenizer))([(0, tokenized)])
        (confidences,) = self.model.node_confidences([batch])
        nodes = _postorder_with_depth(rat.to_tree(sql, schema))
        if len(nodes) != len(confidences):
            raise AssertionError(f"{len(confidences)} scores for {len(nodes)} RAT nodes")
        return [
            NodeScore(i, node.label, node_type, depth, children, float(c))
            for i, ((node, depth, children), node_type, c) in enumerate(zip(nodes, example.node_types, confidences))
        ]


def _postorder_with_depth(tree: rat.Node) -> list[tuple[rat.Node, int, tuple[int, ...]]]:
    """(node, depth, children's post-order indices) in the same post-order as ``Node.postorder``."""
    out: list[tuple[rat.Node, int, tuple[int, ...]]] = []

    def walk(node: rat.Node, depth: int) -> int:
        children = tuple(walk(child, depth + 1) for child in node.children)
        out.append((node, depth, children))
        return len(out) - 1

    walk(tree, 0)
    if [n.label for n, _, _ in out] != [n.label for n in tree.postorder()]:
        raise AssertionError("RAT post-order differs from rat.Node.postorder()")
    return out


def format_tree(scores: list[NodeScore], color: bool = False) -> str:
    """The RAT root first, children indented under their parent, each line led by its score.

    >>> print(format_tree([NodeScore(0, "singer", "table", 1, (), 0.91),
    ...                    NodeScore(1, "Project", "Project", 0, (0,), 0.42)]))
    0.42  Project
    0.91    singer
    """
    lines: list[str] = []

    def emit(i: int) -> None:
        s = scores[i]
        score = f"{s.confidence:.2f}"
        if color:
            code = "31" if s.confidence < LOW else "33" if s.confidence < HIGH else "32"
            score = f"\033[{code}m{score}\033[0m"
        lines.append(f"{score}  {'  ' * s.depth}{s.label}")
        for child in s.children:
            emit(child)

    if scores:
        emit(len(scores) - 1)
    return "\n".join(lines)


def load_schema(path: str | Path, db_id: str) -> rat.Schema:
    """The schema of ``db_id`` from a ``tables.json``-style file or a dataset root."""
    path = Path(path)
    if path.is_dir():
        from model.data.datasets import load_schemas

        schemas = load_schemas(path)
        if db_id not in schemas:
            raise KeyError(f"db_id {db_id!r} not in {path} ({len(schemas)} schemas)")
        return schemas[db_id]
    entries = json.loads(path.read_text())
    for entry in entries:
        if entry.get("db_id") == db_id:
            return rat.Schema.from_spider(entry)
    raise KeyError(f"db_id {db_id!r} not in {path} ({len(entries)} schemas)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ckpt", required=True, help="a .ckpt file or a training run directory")
    parser.add_argument("--schema", help="tables.json (Spider format) or a dataset root")
    parser.add_argument("--db-id", default="", help="the database id in --schema")
    parser.add_argument("--question", required=True)
    parser.add_argument("--sql", required=True)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a tree")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)

    schema = load_schema(args.schema, args.db_id) if args.schema else None
    scorer = NodeScorer(args.ckpt, device=args.device)
    try:
        scores = scorer.score(schema, args.question, args.sql, args.db_id)
    except (rat.RATError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"sql": args.sql, "nodes": [asdict(s) for s in scores]}))
    else:
        color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
        print(format_tree(scores, color=color))
    return 0


if __name__ == "__main__":
    sys.exit(main())
