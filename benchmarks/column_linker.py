"""A learned column linker for "look here first": MiniLM fine-tuned as a cross-encoder on Spider
train's gold queries ("does the gold query of this question use this column?"), read by the node
model and the site head as six more columns.

The node features link a column to the question by string matching and by the cosine of two
separate MiniLM embeddings; a cross-encoder reads the question and the column together. Each
node then gets: for a column, the linker's logit (``cl_logit``), its rank among all the schema's
columns (``cl_rank``, 0 = the likeliest) and how far below the likeliest it is (``cl_gap``); the
lowest logit among the columns of its subtree (``cl_subtree_min``); for a table, its likeliest
column's logit (``cl_table_best``); and, for the whole query, the likeliest column of the schema
that the query does not use (``cl_unused_best``: a missing column or condition).

Out of fold throughout: Spider train's questions are split in two by database; each half's linker
scores the other half's questions (the training rows of the default command are Qwen's answers to
them), and the two linkers' mean logit scores the dev questions (dev's databases are in neither).
The linker's scores are cached in ``--cache`` (a JSON file); a second run reads them. Prints the
linker's AUC over dev's (question, column) pairs, then the default command's cross-fitting
without and with the six columns (top-1 / top-3 / mrr, node AUC).

    python benchmarks/column_linker.py [--cache .cache/column_linker.json] [--write DIR] [--epochs 1]
        [--negatives 8] [--variants today,column_linker]
"""

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from site_ranker import default_crossfit, measure

import rat
from model.data.datasets import load_questions, load_schemas
from model.data.folds import schema_disjoint_folds
from model.eval import metrics as M
from model.eval.localisation import post_order_children
from model.nodes.examples import node_types
from model.nodes.features import QuestionIndex, SchemaIndex

SHARED = Path(os.environ.get("RAT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
NAMES = ("cl_logit", "cl_rank", "cl_gap", "cl_subtree_min", "cl_table_best", "cl_unused_best")
MAX_LENGTH = 64


def column_text(column: str, column_type: str | None = None) -> str:
    """What the cross-encoder reads of a column: its table's and its own name as words, and its type.

    >>> column_text("singer.song_release_year", "number")
    'singer . song release year (number)'
    """
    words = re.sub(r"[_\s]+", " ", column.replace(".", " . ")).strip()
    return f"{words} ({column_type})" if column_type else words


def schema_columns(schema: rat.Schema) -> list[str]:
    """Every ``table.column`` of a schema, in order."""
    return [f"{table}.{column}" for table, columns in schema.tables.items() for column in columns]


def gold_columns(tree, schema: rat.Schema) -> set[str]:
    """The schema's columns a gold tree uses: its column nodes (``node_types``) that name a
    ``table.column`` of the schema (not ``*``, and not a column of an alias rat could not resolve).

    >>> s = rat.Schema(tables={"singer": ("name", "age")})
    >>> sorted(gold_columns(rat.to_tree("SELECT name FROM singer WHERE age > 37.5", s), s))
    ['singer.age', 'singer.name']
    """
    columns = set(schema_columns(schema))
    return {n.label for n, kind in zip(tree.postorder(), node_types(tree)) if kind == "column" and n.label in columns}


def training_pairs(items: list[tuple[str, rat.Schema, set[str]]], negatives: int, seed: int
                   ) -> list[tuple[str, str, float]]:
    """(question, column text, 1 if gold uses it) for each gold column of each question and up to
    ``negatives`` other columns: half from the gold columns' tables (the hard ones), half from
    anywhere in the schema."""
    rng = np.random.default_rng(seed)
    pairs = []
    for question, schema, gold in items:
        columns = schema_columns(schema)
        others = [c for c in columns if c not in gold]
        near = [c for c in others if c.split(".")[0] in {g.split(".")[0] for g in gold}]
        pick = list(rng.permutation(near)[:negatives // 2]) if near else []
        rest = [c for c in others if c not in pick]
        pick += list(rng.permutation(rest)[:negatives - len(pick)]) if rest else []
        pairs += [(question, column_text(c, schema.column_types.get(c)), 1.0) for c in gold]
        pairs += [(question, column_text(c, schema.column_types.get(c)), 0.0) for c in pick]
    return pairs


def load_encoder():
    """MiniLM (the packaged all-MiniLM-L6-v2) with a one-logit classification head."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from model.lm.load import packaged_path
    from model.lm.sentence import SENTENCE_MODEL

    path = str(packaged_path(SENTENCE_MODEL) or SENTENCE_MODEL)
    hf_logging.set_verbosity_error()
    return AutoTokenizer.from_pretrained(path), AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)


def train_linker(pairs: list[tuple[str, str, float]], epochs: int = 1, batch: int = 32, lr: float = 3e-5,
                 seed: int = 0, label: str = ""):
    """The cross-encoder fitted on ``pairs`` (binary cross-entropy), with progress lines."""
    import torch

    torch.manual_seed(seed)
    tokenizer, model = load_encoder()
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    rng = np.random.default_rng(seed)
    steps, start = 0, time.perf_counter()
    total = epochs * ((len(pairs) + batch - 1) // batch)
    for _ in range(epochs):
        order = rng.permutation(len(pairs))
        for i in range(0, len(order), batch):
            chunk = [pairs[j] for j in order[i:i + batch]]
            enc = tokenizer([c[0] for c in chunk], [c[1] for c in chunk], padding=True, truncation=True,
                            max_length=MAX_LENGTH, return_tensors="pt")
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                model(**enc).logits.squeeze(-1), torch.tensor([c[2] for c in chunk]))
            loss.backward()
            optimiser.step()
            optimiser.zero_grad()
            steps += 1
            if steps % 200 == 0 or steps == total:
                print(f"  linker {label}: step {steps}/{total}, loss {loss.item():.3f}, "
                      f"{time.perf_counter() - start:.0f} s", flush=True)
    model.eval()
    return tokenizer, model


def score_columns(encoder, question: str, schema: rat.Schema, batch: int = 256) -> dict[str, float]:
    """The linker's logit of every column of ``schema`` for ``question``."""
    import torch

    tokenizer, model = encoder
    columns = schema_columns(schema)
    out: list[float] = []
    with torch.no_grad():
        for i in range(0, len(columns), batch):
            part = columns[i:i + batch]
            enc = tokenizer([question] * len(part), [column_text(c, schema.column_types.get(c)) for c in part],
                            padding=True, truncation=True, max_length=MAX_LENGTH, return_tensors="pt")
            out += model(**enc).logits.squeeze(-1).tolist()
    return dict(zip(columns, out))


def linker_columns(names: list[str], arity: list[int], scores: dict[str, float] | None) -> np.ndarray:
    """(nodes, len(NAMES)) of one post-order tree (node labels ``names``) from the linker's
    logits of its schema's columns (None: NaN throughout).

    >>> x = linker_columns(["t.a", "t", "Project"], [0, 0, 2], {"t.a": 1.0, "t.b": 3.0, "u.c": -1.0})
    >>> x[0].tolist()  # t.a: logit 1, one column above it, 2 below the best; t.b unused (3)
    [1.0, 1.0, 2.0, 1.0, nan, 3.0]
    >>> float(x[1, NAMES.index("cl_table_best")]), float(x[2, NAMES.index("cl_subtree_min")])
    (3.0, 1.0)
    """
    n = len(names)
    out = np.full((n, len(NAMES)), np.nan)
    if not scores:
        return out
    values = np.array(list(scores.values()))
    best = values.max()
    used = set(names)
    unused = [v for c, v in scores.items() if c not in used]
    out[:, 5] = max(unused) if unused else np.nan
    tables: dict[str, float] = {}
    for column, value in scores.items():
        table = column.split(".")[0]
        tables[table] = max(tables.get(table, -np.inf), value)
    own = np.full(n, np.nan)
    for i, name in enumerate(names):
        if name in scores:
            own[i] = scores[name]
            out[i, 0], out[i, 1], out[i, 2] = own[i], float((values > own[i]).sum()), best - own[i]
        elif name in tables:
            out[i, 4] = tables[name]
    lowest = own.copy()
    for i, kids in enumerate(post_order_children(arity)):
        below = [lowest[c] for c in kids if not np.isnan(lowest[c])]
        if below:
            lowest[i] = min(below + ([own[i]] if not np.isnan(own[i]) else []))
    out[:, 3] = lowest
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path(".cache/column_linker.json"),
                        help="the linker's scores (JSON); read when present, else written")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--negatives", type=int, default=8, help="other columns per training question")
    parser.add_argument("--write", type=Path, metavar="DIR", help="each variant's out-of-fold rows as DIR/<variant>.jsonl")
    parser.add_argument("--variants", default="today,column_linker")
    args = parser.parse_args()
    unknown = set(args.variants.split(",")) - {"today", "column_linker"}
    if unknown:
        parser.error(f"--variants: unknown {sorted(unknown)}")
    if args.epochs < 1 or args.negatives < 1:
        parser.error("--epochs and --negatives must be 1 or more")
    scores = None
    if args.cache.is_file():
        try:
            scores = json.loads(args.cache.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            parser.error(f"--cache {args.cache}: not a linker cache this script wrote ({err})")
        if not isinstance(scores, dict):
            parser.error(f"--cache {args.cache}: not a linker cache this script wrote (not a JSON object)")
    root = SHARED / "spider"
    if not (root / "train_spider.json").is_file():
        parser.error(f"Spider train not found under {root} (set RAT_SHARED_DATA)")
    schemas = load_schemas(root)
    dev = load_questions(root, "dev")
    if scores is not None:
        print(f"linker scores of {len(scores)} questions from {args.cache}", flush=True)
    else:
        train, golds = [], []
        for q in load_questions(root, "train"):
            try:
                golds.append(gold_columns(rat.to_tree(q.gold_sql, schemas.get(q.db_id)), schemas[q.db_id]))
            except rat.RATError:
                continue
            train.append(q)
        fold = schema_disjoint_folds([q.db_id for q in train], 2, 0)
        scores, dev_sum = {}, {}
        for f in (0, 1):
            items = [(q.question, schemas[q.db_id], g) for q, g, k in zip(train, golds, fold) if k != f]
            pairs = training_pairs(items, args.negatives, seed=f)
            print(f"linker {f}: {len(pairs)} pairs from {len(items)} train questions", flush=True)
            encoder = train_linker(pairs, args.epochs, seed=f, label=str(f))
            start = time.perf_counter()
            for q, k in zip(train, fold):
                if k == f:
                    scores[q.question_id] = score_columns(encoder, q.question, schemas[q.db_id])
            for q in dev:
                for c, v in score_columns(encoder, q.question, schemas[q.db_id]).items():
                    dev_sum.setdefault(q.question_id, {})[c] = dev_sum.get(q.question_id, {}).get(c, 0.0) + v / 2
            print(f"  linker {f}: scored {int((fold == f).sum())} train and {len(dev)} dev questions, "
                  f"{time.perf_counter() - start:.0f} s", flush=True)
        scores.update(dev_sum)
        args.cache.parent.mkdir(parents=True, exist_ok=True)
        args.cache.write_text(json.dumps({q: {c: round(v, 4) for c, v in s.items()} for q, s in scores.items()}))
        print(f"linker scores of {len(scores)} questions -> {args.cache}", flush=True)
    y, s, fuzzy = [], [], []  # against the node features' own link: the name's best fuzzy match
    for q in dev:
        try:
            gold = gold_columns(rat.to_tree(q.gold_sql, schemas.get(q.db_id)), schemas[q.db_id])
        except rat.RATError:
            continue
        names = SchemaIndex(schemas[q.db_id], QuestionIndex(q.question)).columns
        for c, v in scores.get(q.question_id, {}).items():
            y.append(int(c in gold))
            s.append(v)
            fuzzy.append(names[c.split(".", 1)[1]])
    print(f"linker AUC over dev (question, column) pairs: {M.auc(1 / (1 + np.exp(-np.array(s))), np.array(y)):.3f} "
          f"(the column name's fuzzy match with the question, name_fuzzy: {M.auc(np.array(fuzzy), np.array(y)):.3f}; "
          f"{len(y)} pairs, {sum(y)} used by gold)", flush=True)

    table, roles, config = default_crossfit([])
    dev_db = {q.question_id: q.db_id for q in dev}
    extra, scored = [], 0
    for e in table.examples:
        known = e.question_id in scores and (e.question_id not in dev_db or dev_db[e.question_id] == e.db_id)
        scored += known
        extra.append(linker_columns(list(e.node_names), list(e.node_arity), scores[e.question_id] if known else None))
    print(f"{len(table.examples)} examples, {scored} with linker scores", flush=True)
    names, features = table.names, table.features
    print("\n| variant | top-1 | top-3 | mrr | node AUC | seconds |\n|---|---|---|---|---|---|")
    for variant in args.variants.split(","):
        table.names = names if variant == "today" else (*names, *NAMES)
        table.features = features if variant == "today" else [np.hstack([f, x]) for f, x in zip(features, extra)]
        where, node_auc, seconds = measure(table, roles, config, args.write, variant)
        print(f"| {variant} | {where['top1']:.3f} | {where['top3']:.3f} | {where['mrr']:.3f} | {node_auc:.3f} | "
              f"{seconds:.0f} |", flush=True)


if __name__ == "__main__":
    main()
