"""A structure prior for the site head, from the gold queries of similar questions: for each
Spider dev question, the ``--k`` Spider *train* questions nearest to it (MiniLM embeddings of the
questions with their schema's names, numbers, quoted and capitalised words masked as ``x``;
train's databases are disjoint from dev's, so no fold sees its own databases), and their gold
trees' node kinds. Each node of a prediction then reads how common its kind is among the
neighbours' gold (``rp_type_share``), its (kind, parent kind) pair (``rp_pair_share``), how many
more nodes of its kind the query has than they do on average (``rp_count_gap``), how much of the
children the neighbours' gold commonly puts under its kind the query lacks
(``rp_child_missing``), and, for the whole query, how far its kinds overlap theirs
(``rp_query_overlap``) and the nearest neighbour's similarity (``rp_top_sim``): what the question
says the query should look like, for the one-site misses at an operator (docs/look_here_first.md).
Fits the default single-system command's cross-fitting with and without the six columns (the
node model and the site head read them; ``structure_prior_node_only``: the node model only) and
prints top-1 / top-3 / mrr and node AUC.
``--default-command``: the default command as it is now, with Qwen's answers to Spider train as
training rows (``site_ranker.default_crossfit``); an answer's neighbours are the train questions
of *other* databases (as every dev question's are).

    python benchmarks/structure_prior.py [--k 20] [--write DIR] [--set site_monotone=context ...] [--default-command]
        [--variants today,structure_prior,structure_prior_node_only]
"""

import argparse
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from site_ranker import default_crossfit, measure, spider_crossfit

import rat
from model.data.datasets import load_questions, load_schemas
from model.lm.sentence import embed_texts
from model.nodes import boosted
from model.nodes.examples import node_types

SHARED = Path(os.environ.get("RAT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
NAMES = ("rp_type_share", "rp_pair_share", "rp_count_gap", "rp_child_missing", "rp_query_overlap", "rp_top_sim")


def masked(question: str, names: set[str]) -> str:
    """The question with schema names, numbers, quotes and capitalised words (not the first) as x.

    >>> masked("How many singers are older than 30 in 'France'?", {"singer", "singers"})
    'how many x are older than x in x ?'
    """
    out: list[str] = []
    for w in re.findall(r"[A-Za-z]+|\d+(?:\.\d+)?|'[^']*'|\"[^\"]*\"|\S", question):
        schema_word = w.lower() in names
        out.append("x" if schema_word or w[:1].isdigit() or w[:1] in "'\"" or (w[:1].isupper() and out) else w.lower())
    return " ".join(out)


def schema_words(schema) -> set[str]:
    words: set[str] = set()
    for table, columns in schema.tables.items():
        for name in (table, *columns):
            for w in re.split(r"[\s_]+", name.lower()):
                if len(w) > 2:
                    words |= {w, w + "s", w + "es", w.rstrip("s")}
    return words


def parents(arity) -> list[int]:
    """The post-order parent of each node (-1: the root).

    >>> parents([0, 0, 2])
    [2, 2, -1]
    """
    parent, stack = [-1] * len(arity), []
    for i, a in enumerate(arity):
        for _ in range(a):
            parent[stack.pop()] = i
        stack.append(i)
    return parent


def skeleton(types, arity) -> tuple[Counter, Counter]:
    parent = parents(arity)
    return Counter(types), Counter((t, types[p] if p >= 0 else "ROOT") for t, p in zip(types, parent))


def prior_columns(example, neighbours: list[tuple[Counter, Counter]], top_sim: float) -> np.ndarray:
    k = len(neighbours)
    types, arity = list(example.node_types), list(example.node_arity)
    counts, pairs = skeleton(types, arity)
    parent = parents(arity)
    type_share, pair_share, mean_count = Counter(), Counter(), Counter()
    for t_counts, p_counts in neighbours:
        for t, n in t_counts.items():
            type_share[t] += 1 / k
            mean_count[t] += n / k
        for p in p_counts:
            pair_share[p] += 1 / k
    kinds = set(counts) | set(mean_count)
    overlap = sum(min(counts[t], mean_count[t]) for t in kinds) / max(
        sum(max(counts[t], mean_count[t]) for t in kinds), 1e-9)
    out = np.zeros((len(types), len(NAMES)))
    for i, t in enumerate(types):
        up = types[parent[i]] if parent[i] >= 0 else "ROOT"
        missing = sum(s for (c, p), s in pair_share.items() if p == t and (c, p) not in pairs and s >= 0.5)
        out[i] = [type_share[t], pair_share[(t, up)], counts[t] - mean_count[t], missing, overlap, top_sim]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=20, help="neighbours per question (default 20)")
    parser.add_argument("--write", type=Path, metavar="DIR", help="each variant's out-of-fold rows as DIR/<variant>.jsonl")
    parser.add_argument("--set", nargs="*", default=[], help="model overrides, e.g. site_monotone=context")
    parser.add_argument("--variants", default="today,structure_prior",
                        help="of today, structure_prior, structure_prior_node_only (the six read by the node model only)")
    parser.add_argument("--default-command", action="store_true",
                        help="the default command with Qwen's answers to Spider train as training rows")
    args = parser.parse_args()
    if args.k < 1:
        parser.error(f"--k must be 1 or more; found {args.k}")
    unknown = set(args.variants.split(",")) - {"today", "structure_prior", "structure_prior_node_only"}
    if unknown:
        parser.error(f"--variants: unknown {sorted(unknown)}")
    root = SHARED / "spider"
    if not (root / "train_spider.json").is_file():
        parser.error(f"Spider train not found under {root} (set RAT_SHARED_DATA)")
    schemas = load_schemas(root)
    train, skeletons = [], []
    questions = load_questions(root, "train")
    for q in questions:
        try:
            tree = rat.to_tree(q.gold_sql, schemas.get(q.db_id))
        except rat.RATError:
            continue
        skeletons.append(skeleton(node_types(tree), [len(n.children) for n in tree.postorder()]))
        train.append(q)
    dev = load_questions(root, "dev")
    start = time.perf_counter()
    train_vec = embed_texts([masked(q.question, schema_words(schemas[q.db_id])) for q in train])
    dev_vec = embed_texts([masked(q.question, schema_words(schemas[q.db_id])) for q in dev])
    sims = dev_vec @ train_vec.T
    nearest = np.argsort(-sims, axis=1)[:, :args.k]
    row = {q.question_id: i for i, q in enumerate(dev)}
    print(f"{len(train)} of {len(questions)} train gold queries as trees (the rest unparsable, left out), "
          f"{len(dev)} dev questions embedded, {time.perf_counter() - start:.0f} s",
          flush=True)

    table, roles, config = (default_crossfit if args.default_command else spider_crossfit)(args.set)
    train_row = {q.question_id: i for i, q in enumerate(train)}
    train_db = np.array([q.db_id for q in train])
    extra, side, unmatched = [], 0, 0
    for e in table.examples:
        if e.question_id in row and e.db_id == dev[row[e.question_id]].db_id:
            d = row[e.question_id]
            near, sim = nearest[d], sims[d]
        elif e.question_id in train_row:  # an answer to a train question: other databases only
            side += 1
            sim = np.where(train_db == e.db_id, -np.inf, train_vec @ train_vec[train_row[e.question_id]])
            near = np.argsort(-sim)[:args.k]
        else:  # a train question whose gold is not a tree here: no prior
            unmatched += 1
            extra.append(np.full((len(e.node_types), len(NAMES)), np.nan))
            continue
        extra.append(prior_columns(e, [skeletons[j] for j in near], float(sim[near[0]])))
    print(f"{len(table.examples)} examples ({side} on train databases, {unmatched} without a prior), "
          f"{len(table.names)} features", flush=True)
    names, features = table.names, table.features

    def node_model_only(table, indices, x, *rest):  # the site head fits as if the six were missing
        x = x.copy()
        x[:, [table.names.index(n) for n in NAMES]] = np.nan
        return default_head(table, indices, x, *rest)

    default_head = boosted.fit_site_head
    print("\n| site head | k | top-1 | top-3 | mrr | node AUC | seconds |\n|---|---|---|---|---|---|---|")
    for variant in args.variants.split(","):
        table.names = names if variant == "today" else (*names, *NAMES)
        table.features = features if variant == "today" else [np.hstack([f, x]) for f, x in zip(features, extra)]
        boosted.fit_site_head = node_model_only if variant == "structure_prior_node_only" else default_head
        where, node_auc, seconds = measure(table, roles, config, args.write, variant)
        print(f"| {variant} | {args.k} | {where['top1']:.3f} | {where['top3']:.3f} | {where['mrr']:.3f} | "
              f"{node_auc:.3f} | {seconds:.0f} |", flush=True)
    boosted.fit_site_head = default_head

if __name__ == "__main__":
    main()
