"""Qwen2.5-Coder-1.5B vs SmolLM2-135M on a stated subset of Spider dev, on the CPU: cost per query
of token scoring and of the frozen embedder, the whole-query AUC of the token probabilities, and
what the full runs would cost at the measured rates.

Subset: the first ``--questions`` Spider dev questions of one shuffle by ``--seed`` (spread over the databases, so
the schema-disjoint folds of the whole-query protocol have several databases each), every
prediction of the chosen systems for them. Scores are cached per model under ``--cache-dir``
(``<name>.jsonl``, keyed by model, prompt and SQL), so a second run only re-reads them; timings
are of the run that scored (the printed "new pairs" says how many were scored in this run).

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/qwen_coder_subset.py \
        --data-root ../shared/data/spider --predictions ../shared/data/predictions/spider_dev \
        --questions 60 --cache-dir runs/qwen_subset/scores --out runs/qwen_subset

``--lms qwen_coder qwen_coder_llama_cpp`` times the same GGUF run by transformers (float32 copy) and
by llama.cpp side by side. Needs ``make setup-qwen``; runs the embedder part with ``--embed`` (layer 0: the paper's input
table; ``--embed-layers 2`` also times the first decoder layers whose hidden states would be cached).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model.data.cache import cache_dir
from model.data.datasets import database_path, load_questions, load_schemas
from model.data.predictions import load_predictions
from model.eval import metrics as M
from model.eval.calibration import MultivariatePlattScaler
from model.lm import load_causal_lm
from model.lm.scoring import prediction_files, prompt_text, score_predictions
from model.wholequery.base_scores import build_base_scores
from model.wholequery.methods import Method, default_methods, evaluate_methods, format_tables

FULL_SPIDER = {"questions": 972, "predictions": 10_692, "distinct_pairs": 8_171}  # docs/results.md
LMS = {"smollm2": None, "qwen_coder": "qwen_coder",  # label -> load_causal_lm name
       "qwen_coder_llama_cpp": "qwen_coder@llama.cpp"}  # the same GGUF, run by llama.cpp


def subset(root: Path, predictions: Path, n_questions: int, seed: int, systems: list[str] | None):
    questions = load_questions(root, "dev")
    order = list(range(len(questions)))
    random.Random(seed).shuffle(order)  # the first n of one shuffle: a larger subset holds a smaller one
    chosen = sorted(order[:n_questions])
    by_id = {questions[i].question_id: questions[i] for i in chosen}
    preds = [p for f in prediction_files([predictions]) for p in load_predictions(f, questions)
             if p.question_id in by_id and p.sql.strip() and (not systems or p.system in systems)]
    return questions, by_id, preds


def distinct_pairs(preds, by_id, schemas) -> int:
    def prompt(p):
        q = by_id[p.question_id]
        s = schemas.get(q.db_id)
        return prompt_text(q.question, s.tables if s else None, q.evidence)

    return len({(prompt(p), p.sql.strip()) for p in preds})


def score(label: str, preds, by_id, schemas, cache: Path) -> tuple[dict, dict]:
    """Pooled scores of every prediction and the cost of computing them (seconds)."""
    before = sum(1 for _ in cache.open()) if cache.exists() else 0
    t0 = time.perf_counter()
    model, tokenizer = load_causal_lm(LMS[label])
    loaded = time.perf_counter() - t0
    t1 = time.perf_counter()
    scores = score_predictions(model, tokenizer, preds, by_id, schemas, cache_path=cache, progress=False)
    scored = time.perf_counter() - t1
    after = sum(1 for _ in cache.open())
    del model
    return ({(p.system, p.question_id): s for p, s in zip(preds, scores)},
            {"load_s": loaded, "score_s": scored, "new_pairs": after - before})


def paired_difference(a, b, labels: list[str], seed: int = 0, n: int = 1000) -> str:
    """Pooled raw-prod AUC of b minus a, with a 95% bootstrap interval over questions (paired:
    both LMs scored the same predictions)."""
    key_a = {(s, q): i for i, (s, q) in enumerate(zip(a.system, a.question_id))}
    order = np.array([key_a[(s, q)] for s, q in zip(b.system, b.question_id)])
    y, pa, pb = b.label, np.exp(a.columns["log_prod"][order]), np.exp(b.columns["log_prod"])
    questions = np.unique(b.question_id)
    rows_of = {q: np.flatnonzero(b.question_id == q) for q in questions}
    rng, diffs = np.random.default_rng(seed), []
    for _ in range(n):
        idx = np.concatenate([rows_of[q] for q in rng.choice(questions, len(questions))])
        if 0 < y[idx].sum() < len(idx):
            diffs.append(M.auc(pb[idx], y[idx]) - M.auc(pa[idx], y[idx]))
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return (f"pooled raw prod AUC, {labels[1]} - {labels[0]}: {M.auc(pb, y) - M.auc(pa, y):+.3f} "
            f"(95% bootstrap over {len(questions)} questions: {lo:+.3f} .. {hi:+.3f})")


def embed_cost(label: str, root: Path, prediction_dir: Path, by_id: dict, layers: list[int]) -> list[str]:
    """Seconds per node-model input (schema + question + tree, the datamodule's tokenization) for
    the frozen embedder at each layer; inputs of the subset's first system only."""
    from model.lm import load_tokenizer
    from model.nodes.embedder import FrozenEmbedder
    from model.nodes.examples import build_examples, tokenize_examples

    files = prediction_files([prediction_dir])[:1]
    examples, _ = build_examples(root, "dev", prediction_files=files, verbose=False)
    examples = [e for e in examples if e.question_id in by_id]
    tokenizer = load_tokenizer(LMS[label])
    tokenized = tokenize_examples(examples, tokenizer, 2048)
    rows = [torch.tensor(t.input_ids) for t in tokenized]
    lines = []
    for layer in layers:
        embedder = FrozenEmbedder(LMS[label], layer=layer)
        t0 = time.perf_counter()
        for r in rows:
            embedder(r[None], torch.ones_like(r)[None])  # (1, tokens, hidden), one input at a time
        seconds = time.perf_counter() - t0
        lines.append(f"embed {label} layer {layer}: {len(rows)} inputs ({np.mean([len(r) for r in rows]):.0f} "
                     f"tokens on average) in {seconds:.2f} s = {seconds / len(rows):.4f} s per input")
        del embedder
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-root", type=Path, required=True)
    ap.add_argument("--predictions", type=Path, required=True)
    ap.add_argument("--questions", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--systems", nargs="*", default=None, help="default: every system in --predictions")
    ap.add_argument("--lms", nargs="+", default=list(LMS), choices=list(LMS))
    ap.add_argument("--cache-dir", type=Path, required=True, help="token log-prob caches, one file per LM")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--embed", action="store_true", help="also time the frozen embedder")
    ap.add_argument("--embed-layers", type=int, nargs="+", default=[0])
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)

    _, by_id, preds = subset(args.data_root, args.predictions, args.questions, args.seed, args.systems)
    schemas = load_schemas(args.data_root)
    n_pairs = distinct_pairs(preds, by_id, schemas)
    n_db = len({q.db_id for q in by_id.values()})
    print(f"subset: {len(by_id)} Spider dev questions (seed {args.seed}, {n_db} databases), "
          f"{len(preds)} predictions of {len({p.system for p in preds})} systems, {n_pairs} distinct "
          f"(prompt, SQL) pairs")
    db_paths = {q.db_id: database_path(args.data_root, q.db_id) for q in by_id.values()}
    report, pooled_scores = [], {}
    for label in args.lms:
        scores, cost = score(label, preds, by_id, schemas, args.cache_dir / f"{label}.jsonl")
        line = (f"{label}: load {cost['load_s']:.1f} s; scored {cost['new_pairs']} new pairs in "
                f"{cost['score_s']:.1f} s")
        if cost["new_pairs"]:
            per_pair = cost["score_s"] / cost["new_pairs"]
            line += f" = {per_pair:.2f} s per distinct pair"
            if cost["new_pairs"] == n_pairs:  # a cold run: every question and prediction was paid for here
                per_q = cost["score_s"] / len(by_id)
                line += (f", {per_q:.2f} s per question, {cost['score_s'] / len(preds):.2f} s per prediction; "
                         f"full Spider dev ({FULL_SPIDER['questions']} questions) at this rate: "
                         f"{per_q * FULL_SPIDER['questions'] / 3600:.1f} h (by questions)")
            line += (f"; full Spider dev ({FULL_SPIDER['distinct_pairs']} pairs) at this rate: "
                     f"{per_pair * FULL_SPIDER['distinct_pairs'] / 3600:.1f} h on one core")
        print(line, flush=True)
        table = build_base_scores(list(by_id.values()), preds, schemas, db_paths, scores,
                                  exec_cache_dir=cache_dir("exec"), progress=False)
        pooled = M.auc(np.exp(table.columns["log_prod"]), table.label)
        pooled_scores[label] = table
        per_system = {s: M.auc(np.exp(table.columns["log_prod"][table.system == s]), table.label[table.system == s])
                      for s in np.unique(table.system)}
        print(f"{label}: {len(table)} labelled predictions (accuracy {table.label.mean():.3f}); raw prod AUC "
              f"pooled over systems {pooled:.3f}, mean over systems {np.nanmean(list(per_system.values())):.3f}",
              flush=True)
        methods = [m for m in default_methods(list(table.columns))
                   if m.name in ("prod", "geo", "min", "avg", "MPS(log_prod + geo + min + avg)")]
        methods.append(Method("MPS(log_prod)", ("log_prod",), lambda: MultivariatePlattScaler(("log_prod",))))
        results = evaluate_methods(table, methods, protocol="cv", fit_on="rest")
        tables = format_tables(results, auc_methods=["prod", "MPS(log_prod + geo + min + avg)"])
        (args.out / f"tables_{label}.md").write_text(tables + "\n")
        report.append(f"## {label}\n\n{line}\n\n{tables}\n")
        print(tables.split("\n\n")[0], flush=True)
    if len(pooled_scores) == 2:
        line = paired_difference(*pooled_scores.values(), labels=list(pooled_scores), seed=args.seed)
        print(line, flush=True)
        report.append(line + "\n")
    if args.embed:
        for label in args.lms:
            for line in embed_cost(label, args.data_root, args.predictions, by_id, args.embed_layers):
                print(line, flush=True)
                report.append(line + "\n")
    (args.out / "report.md").write_text("\n".join(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
