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
import os
import re
import sys
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import rat
from model.errors import ModelFileError, UsageError, say_error
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
    """A ``.ckpt`` file as given, or a run directory's best checkpoint (else its last one).

    The best is the one its ``metrics.json`` names, read only inside the run directory: named
    elsewhere (the run was moved, or came from another machine), the file of that name in its
    ``checkpoints/`` is taken, else its ``last.ckpt``; a run with no checkpoint of its own is a
    ``ModelFileError`` naming the outside one, to be given itself. A ``metrics.json`` that is not
    a JSON object is a ``ModelFileError`` naming it.
    """
    path = Path(path)
    if path.is_file():
        return path
    metrics, outside = path / "metrics.json", None
    if metrics.is_file():
        best = _best_checkpoint(metrics)
        if best:
            named = Path(os.path.normpath(os.path.abspath(path / best)))  # (relative: to the run)
            inside = named.is_relative_to(os.path.normpath(os.path.abspath(path)))
            for candidate in ((named,) if inside else ()) + (path / "checkpoints" / named.name,):
                if candidate.name and candidate.is_file():
                    return candidate
            outside = None if inside else best
    for candidate in (path / "checkpoints" / "last.ckpt", *sorted((path / "checkpoints").glob("*.ckpt"))):
        if candidate.is_file():
            return candidate
    if outside:
        raise ModelFileError(f"{metrics}: its best_checkpoint {outside} is outside the run directory; give that "
                             ".ckpt itself to load it"[:400])
    raise FileNotFoundError(f"no checkpoint at {path} (expected a .ckpt file or a run directory)")


def _best_checkpoint(metrics: Path) -> str | None:
    """The ``best_checkpoint`` a run's ``metrics.json`` names (None or "" when none)."""
    from model.data.jsonl import read_json

    try:
        record = read_json(metrics)
    except UsageError as e:  # (one line naming the file)
        raise ModelFileError(str(e)) from None
    except (OSError, ValueError, RecursionError) as e:
        raise ModelFileError(f"{metrics}: cannot be read ({type(e).__name__})") from None
    if not isinstance(record, dict):
        raise ModelFileError(f"{metrics}: expected a JSON object, found {type(record).__name__}")
    best = record.get("best_checkpoint")
    if best is not None and not isinstance(best, str):
        raise ModelFileError(f"{metrics}: best_checkpoint: expected a path, found {type(best).__name__}")
    return best


# A hub id as from_pretrained takes it ("org/name" or "name"); anything else names a local path.
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
_GGUF_NAME = re.compile(r"[A-Za-z0-9_][\w.-]*\.gguf")


def read_checkpoint(path: Path, lm_cache_dir: str | Path | None = None, cache_dir: str | Path | None = None
                    ) -> tuple[dict, dict]:
    """``(hyperparameters, state_dict)`` of a checkpoint, read as data from a file that may come from
    anywhere: tensors and plain values only (never code); every setting known and checked, and the
    weights the hyperparameters build compared with the state_dict before anything is built or an
    LM loaded; anything else is a one-line ``ModelFileError`` naming the file.

    The paths are this machine's, never the file's: the embedder's ``lm_cache_dir`` and
    ``cache_dir`` are the arguments (None: the project's LM cache, hidden states in memory), and its
    ``table`` is not read (the LM's own rows are the same). Its LM, ``name_or_path``, is the packaged
    one, a short name (``qwen_coder``) or a hub id (passed to ``from_pretrained`` as it is); a local
    path is read only under the LM cache. ``gguf_file`` is a file name in that folder.
    """
    import pickle
    import zipfile

    import torch

    from model.nodes.module import (
        EMBEDDER_SETTINGS,
        ENCODER_SETTINGS,
        FINE_TUNED_SETTINGS,
        HYPERPARAMETERS,
        check_weights,
    )

    try:
        with warnings.catch_warnings():  # torch's own notes on a refused file: the one line below says it
            warnings.simplefilter("ignore")
            saved = torch.load(path, map_location="cpu", weights_only=True, mmap=True)  # never code
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, KeyError, TypeError,
            AttributeError, zipfile.BadZipFile) as e:
        raise ModelFileError(f"{path}: not a checkpoint this project can read ({type(e).__name__}; "
                             "only tensors and plain values are loaded, never code)") from None

    def refuse(problem: str):  # (a name in the file may hold a line break: one line all the same)
        raise ModelFileError(f"{path}: {' '.join(problem.splitlines())}"[:400])

    def mapping(value, name: str, known, prefix: str = "") -> dict:
        if not isinstance(value, dict):
            refuse(f"{name}: expected a mapping, found {type(value).__name__}")
        unknown = sorted(str(k) for k in value if k not in known)
        if unknown:
            refuse(f"unknown hyperparameter {prefix}{unknown[0]} (a checkpoint of another version of this project?)")
        return dict(value)

    if not isinstance(saved, dict):
        refuse(f"not a checkpoint (a {type(saved).__name__}, not a mapping)")
    hparams = mapping(saved.get("hyper_parameters"), "hyper_parameters", HYPERPARAMETERS)
    state_dict = saved.get("state_dict")
    if not isinstance(state_dict, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                                   for k, v in state_dict.items()):
        refuse("state_dict: expected a mapping of names to tensors")
    embedder = mapping(hparams.get("embedder") or {}, "embedder", EMBEDDER_SETTINGS, "embedder.")
    # A fine-tuned encoder (model=minilm) is known by its weights: the embedder hyperparameters
    # a run saved lack fine_tune (NodeConfidenceModule popped it from the dict it saved), and
    # without it the encoder was built as a frozen causal LM's embedder.
    if any(name.startswith("backbone.") for name in state_dict):
        embedder["fine_tune"] = True
    fine_tune = embedder.get("fine_tune", False)
    if not isinstance(fine_tune, bool):
        refuse(f"embedder.fine_tune: expected true or false, found {fine_tune!r}")
    encoder = mapping(hparams.get("encoder") or {}, "encoder", FINE_TUNED_SETTINGS if fine_tune else ENCODER_SETTINGS,
                      "encoder.")
    for name in ("lm_cache_dir", "cache_dir", "table"):  # paths: this machine's
        embedder.pop(name, None)
    embedder["lm_cache_dir"] = lm_cache_dir
    if not fine_tune:
        embedder["cache_dir"] = cache_dir
    _check_lm(embedder, lm_cache_dir, refuse)
    hparams.update(embedder=embedder, encoder=encoder)
    try:
        check_weights(hparams, state_dict)
    except ValueError as e:
        refuse(str(e))
    return hparams, state_dict


def _check_lm(embedder: dict, lm_cache_dir, refuse) -> None:
    """``refuse`` an LM a checkpoint names that is not the packaged one, a short name, a hub id or
    a folder under the LM cache (see ``read_checkpoint``)."""
    from model.lm import default_cache_dir
    from model.lm.load import LLAMA_CPP
    from model.lm.parts import SPLIT_GGUFS

    name, gguf_file = embedder.get("name_or_path"), embedder.get("gguf_file")
    for key, value in (("name_or_path", name), ("gguf_file", gguf_file)):
        if value is not None and not isinstance(value, str):
            refuse(f"embedder.{key}: expected a name, found {type(value).__name__}")
    if gguf_file is not None and not _GGUF_NAME.fullmatch(gguf_file):
        refuse(f"embedder.gguf_file {gguf_file!r}: expected a .gguf file's name in name_or_path's folder")
    if name is None or name in SPLIT_GGUFS:
        return
    if name.endswith(LLAMA_CPP):
        refuse(f"embedder.name_or_path {name!r}: a llama.cpp LM gives no token vectors to embed with")
    if _HUB_ID.fullmatch(name) and ".." not in name:
        return
    cache = os.path.normpath(os.path.abspath(lm_cache_dir or default_cache_dir()))
    if not Path(os.path.normpath(os.path.abspath(name))).is_relative_to(cache):
        refuse(f"embedder.name_or_path {name!r} is a local path outside the LM cache {cache}: a checkpoint "
               "names a hub id or the packaged LM (to use that folder, put it, or a link to it, in the LM cache)")


class NeuralCheckpoint:
    """A trained neural node model and its tokenizer, loaded from a checkpoint: what `Scorer.load`
    uses for a `.ckpt` (users score through `model.Scorer`, the one scorer class). The file is
    read as data (``read_checkpoint``): ``lm_cache_dir`` (None: the project's) and ``cache_dir``
    (hidden states of ``embedder.layer`` > 0; None: in memory) are the caller's, never the file's."""

    def __init__(self, checkpoint: str | Path, device: str | None = None,
                 lm_cache_dir: str | Path | None = None, cache_dir: str | Path | None = None):
        import torch

        from model.lm import load_tokenizer
        from model.nodes.module import NodeConfidenceModule

        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        path = resolve_checkpoint(checkpoint)
        hparams, state_dict = read_checkpoint(path, lm_cache_dir, cache_dir)
        embedder = hparams["embedder"]
        try:
            self.model = NodeConfidenceModule(**hparams)
            self.tokenizer = load_tokenizer(embedder.get("name_or_path"), embedder.get("gguf_file"), lm_cache_dir)
        except UsageError as e:  # an embedder setting, or an LM that cannot be loaded: naming the file
            raise ModelFileError(f"{path}: {e}"[:600]) from None
        try:
            self.model.load_state_dict(state_dict)
        except RuntimeError as e:  # (the LM's own widths: the rest was compared before)
            raise ModelFileError(f"{path}: its weights do not fit the LM it names "
                                 f"({embedder.get('name_or_path') or 'the packaged SmolLM2'}): "
                                 f"{' '.join(str(e).split())}"[:400]) from None
        self.model.to(device).eval()
        self.max_tokens = (int(hparams["encoder"].get("max_positions", 512)) if self.model.fine_tune
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
