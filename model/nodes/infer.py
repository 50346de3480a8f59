"""Score every RAT node of SQL queries with a trained checkpoint.

One query, printed as a tree with scores:

    python -m model.nodes.infer --ckpt <run dir or .ckpt> --schema <tables.json or Spider root> \\
        --db-id concert_singer --question "How many singers are there?" \\
        --sql "SELECT count(*) FROM singer"

A whole prediction file (any format ``model.data.predictions`` reads), with a progress bar,
written as a node predictions JSONL (``model.nodes.outputs``; no labels: nothing is compared
with gold here):

    python -m model.nodes.infer --ckpt <run> --data-root ../shared/data/spider --split dev \\
        --predictions preds.txt --out scored.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import rat
from model.errors import say_error
from rat.walks import depths_and_children

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


class NeuralCheckpoint:
    """A trained neural node model and its tokenizer, loaded from a checkpoint: what `Scorer.load`
    uses for a `.ckpt` (users score through `model.Scorer`, the one scorer class)."""

    def __init__(self, checkpoint: str | Path, device: str | None = None):
        import torch

        from model.lm import load_tokenizer
        from model.nodes.module import NodeConfidenceModule

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        saved = torch.load(resolve_checkpoint(checkpoint), map_location=device, weights_only=True)  # never code
        hparams = dict(saved["hyper_parameters"])
        # A fine-tuned encoder (model=minilm) is known by its weights: the embedder hyperparameters
        # a run saved lack fine_tune (NodeConfidenceModule pops it from the dict it saves), and
        # without it the encoder was built as a frozen causal LM's embedder.
        embedder = dict(hparams.get("embedder") or {})
        if any(name.startswith("backbone.") for name in saved["state_dict"]):
            embedder["fine_tune"] = True
        self.model = NodeConfidenceModule(**{**hparams, "embedder": embedder})
        self.model.load_state_dict(saved["state_dict"])
        self.model.to(device).eval()
        self.tokenizer = load_tokenizer(
            embedder.get("name_or_path"), embedder.get("gguf_file"), embedder.get("lm_cache_dir")
        )
        self.max_tokens = (int((hparams.get("encoder") or {}).get("max_positions", 512)) if self.model.fine_tune
                           else self.model.encoder.config.max_positions)

    def score(self, schema: rat.Schema | None, question: str, sql: str, db_id: str = "") -> list[NodeScore]:
        """Every node of ``sql``'s RAT with its confidence, in post-order (root last).

        Raises ``rat.RATError`` for SQL the RAT library cannot read, ``ValueError`` when the
        input cannot fit ``max_positions`` tokens even with the schema pruned.
        """
        from model.data.datasets import Question
        from model.nodes.examples import make_example

        example = make_example(Question("infer", db_id, question, gold_sql=""), sql, "infer", schema)
        (confidences,) = self.score_examples([example], progress=False)
        if confidences is None:
            raise ValueError("cannot score this query: it does not fit max_positions tokens")
        return [NodeScore(i, name, node_type, depth, children, float(c))
                for i, (name, node_type, (depth, children), c) in enumerate(zip(
                    example.node_names, example.node_types, depths_and_children(example.node_arity),
                    confidences))]

    def score_examples(self, examples, batch_size: int = 16, progress: bool = True
                       ) -> list[list[float] | None]:
        """Node confidences of each ``NodeExample`` (None for one that cannot fit), batched."""
        from tqdm.auto import tqdm

        from model.nodes.datamodule import Collate, pad_id
        from model.nodes.examples import tokenize_example

        collate = Collate(pad_id(self.tokenizer))
        out: list[list[float] | None] = [None] * len(examples)
        fitting = []
        for i, example in enumerate(examples):
            tokenized, _ = tokenize_example(example, self.tokenizer, self.max_tokens)
            if tokenized is not None:
                fitting.append((i, tokenized))
        bar = tqdm(total=len(fitting), desc="scoring", unit="query", disable=not progress)
        for start in range(0, len(fitting), batch_size):
            chunk = fitting[start:start + batch_size]
            for (i, _), confidences in zip(chunk, self.model.node_confidences([collate(chunk)])):
                out[i] = [float(c) for c in confidences]
            bar.update(len(chunk))
        bar.close()
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
    parser = argparse.ArgumentParser(prog="python -m model.nodes.infer", description=__doc__.split("\n")[0])
    parser.add_argument("--ckpt", required=True, help="a .ckpt file or a training run directory")
    parser.add_argument("--schema", help="tables.json (Spider format) or a dataset root")
    parser.add_argument("--db-id", default="", help="the database id in --schema")
    parser.add_argument("--question")
    parser.add_argument("--sql")
    parser.add_argument("--data-root", type=Path, help="with --predictions: the dataset the file answers")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--predictions", type=Path, help="a prediction file to score as a whole")
    parser.add_argument("--out", type=Path, help="with --predictions: the JSONL to write")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a tree")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    try:  # every user mistake is found before the model (seconds of imports) is loaded
        checkpoint = resolve_checkpoint(args.ckpt)
        if args.predictions:
            if not (args.data_root and args.out):
                parser.error("--predictions needs --data-root and --out")
            return score_file(checkpoint, args.data_root, args.split, args.predictions, args.out, args.device)
        if not (args.question and args.sql):
            parser.error("give --question and --sql, or --predictions")
        schema = load_schema(args.schema, args.db_id) if args.schema else None
        scores = NeuralCheckpoint(checkpoint, device=args.device).score(schema, args.question, args.sql, args.db_id)
    except (rat.RATError, ValueError, KeyError, FileNotFoundError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error  # no repr quotes
        say_error(parser.prog, message)
        return 2
    look = look_here_first(scores)
    if args.json:
        print(json.dumps({"sql": args.sql, "nodes": [asdict(s) for s in scores], "look_here": look}))
    else:
        color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
        print(format_tree(scores, color=color))
        print(f"look here first: {scores[look].label} (node {look}: wrong while its children are right, "
              "by the site reading of the confidences)")
    return 0


def look_here_first(scores: list[NodeScore]) -> int:
    """Post-order index of the most likely error site: the highest ``(1 - p(node)) * prod
    p(child)`` (``rat.walks.site_reading``).

    >>> look_here_first([NodeScore(0, "t.a", "column", 1, (), 0.9), NodeScore(1, "Project", "Project", 0, (0,), 0.2)])
    1
    """
    from rat.walks import site_reading

    reading = site_reading([s.confidence for s in scores], [len(s.children) for s in scores])
    return max(range(len(scores)), key=reading.__getitem__)


def score_file(checkpoint: Path, data_root: Path, split: str, predictions: Path, out: Path,
               device: str | None = None) -> int:
    """Score every prediction of a file in one call; unreadable SQL is counted, not fatal."""
    from collections import Counter

    from model.data.datasets import load_questions, load_schemas
    from model.data.jsonl import write_jsonl
    from model.data.predictions import load_predictions
    from model.nodes.examples import make_example
    from model.nodes.outputs import prediction_row

    if not data_root.is_dir():
        raise FileNotFoundError(f"--data-root {data_root}: no such directory")
    questions = {q.question_id: q for q in load_questions(data_root, split)}
    schemas = load_schemas(data_root)
    skipped: Counter = Counter()
    examples = []
    for p in load_predictions(predictions, list(questions.values())):
        try:
            q = questions[p.question_id]
            examples.append(make_example(q, p.sql, p.system, schemas.get(q.db_id)))
        except rat.RATError:
            skipped["unreadable SQL"] += 1
    scorer = NeuralCheckpoint(checkpoint, device=device)
    rows = []
    for example, confidences in zip(examples, scorer.score_examples(examples)):
        if confidences is None:
            skipped["too long"] += 1
            continue
        row = prediction_row(example, confidences, split)
        del row["node_labels"], row["execution_match"]  # no gold was consulted
        rows.append(row)
    write_jsonl(out, rows)
    print(f"scored {len(rows)} predictions -> {out}" + (f"; skipped {dict(skipped)}" if skipped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
