"""Scoring throughput (SQL/s) of the optimised scorer vs the naive one, side by side.

Optimised (`model.lm.token_probabilities.score_sql`): identical (prompt, SQL) pairs scored once, each
question's prompt run once and its key/value cache shared by that question's SQLs, output layer
only at SQL positions. Naive (`score_sql_naive`): one pair at a time,
full-vocabulary log-softmax at every position, duplicates scored again. Both run on the same
items: the first `--questions` Spider dev questions x `--systems` real systems (duplicates
across systems are real), or the demo corpus when the shared data is absent. No disk cache.

    python benchmarks/score_speed.py [--questions 16 --systems 4 --device cpu]
"""

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch

from model.cli_types import positive_int
from model.data.datasets import load_questions, load_schemas
from model.data.predictions import load_predictions
from model.lm import load_causal_lm
from model.lm.token_probabilities import prompt_text, score_sql, score_sql_naive

SHARED = Path(os.environ.get("RAT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def items(n_questions: int, n_systems: int) -> tuple[list[tuple[str, str]], str]:
    if (SHARED / "spider" / "dev.json").exists():
        root, preds_dir, source = SHARED / "spider", SHARED / "predictions" / "spider_dev", "Spider dev"
        files = sorted(preds_dir.iterdir())[:n_systems]
    else:
        from model.synth.demo import demo_root

        root = demo_root()
        files, source = sorted((root / "predictions").glob("*.jsonl"))[:n_systems], "demo corpus"
    questions = load_questions(root, "dev")
    schemas = load_schemas(root)
    by_id = {q.question_id: q for q in questions[:n_questions]}
    out = []
    for f in files:
        for p in load_predictions(f, questions):  # positional files need every question
            if p.question_id not in by_id:
                continue
            q = by_id[p.question_id]
            out.append((prompt_text(q.question, schemas[q.db_id].tables, q.evidence), p.sql))
    return out, f"{source}: {len(by_id)} questions x {len(files)} systems"


def device(name: str) -> str:
    """``--device``: cpu, or cuda (cuda:N) or mps where torch sees one."""
    try:
        kind = torch.device(name).type
    except RuntimeError:
        kind = None
    available = {"cpu": True, "cuda": torch.cuda.is_available(), "mps": torch.backends.mps.is_available()}
    if kind not in available:
        raise argparse.ArgumentTypeError(f"{name!r}: expected cpu, cuda, cuda:N or mps")
    if not available[kind]:
        raise argparse.ArgumentTypeError(f"{name!r}: torch sees no {kind} device here")
    return name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=positive_int, default=16)
    ap.add_argument("--systems", type=positive_int, default=4)
    ap.add_argument("--device", type=device, default="cpu")
    ap.add_argument("--model", default=None, help="default: packaged SmolLM2-135M")
    args = ap.parse_args()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)) if args.device == "cpu" else torch.get_num_threads())
    try:
        model, tokenizer = load_causal_lm(args.model)
    except (ImportError, OSError) as e:  # a folder or hub id that is no LM (as model.nodes.features says it)
        ap.error(f"--model {args.model}: {str(e).splitlines()[0]}")
    model.to(args.device)
    pairs, source = items(args.questions, args.systems)
    print(f"{len(pairs)} SQL ({len(set(pairs))} distinct) from {source}; model "
          f"{model.config.model_type} {model.num_parameters() / 1e6:.0f}M params, vocab {model.config.vocab_size}, "
          f"device {args.device}")
    score_sql(model, tokenizer, pairs[:2], progress=False)  # warm-up

    t0 = time.perf_counter()
    fast = score_sql(model, tokenizer, pairs, progress=False)
    t_fast = time.perf_counter() - t0
    t0 = time.perf_counter()
    naive = score_sql_naive(model, tokenizer, pairs)
    t_naive = time.perf_counter() - t0
    diff = max(abs(a.log_prod - b.log_prod) for a, b in zip(fast, naive))
    print(f"{'path':<10}{'seconds':>10}{'SQL/s':>10}")
    print(f"{'optimised':<10}{t_fast:>10.2f}{len(pairs) / t_fast:>10.1f}")
    print(f"{'naive':<10}{t_naive:>10.2f}{len(pairs) / t_naive:>10.1f}")
    print(f"speed-up {t_naive / t_fast:.1f}x; max |log_prod difference| {diff:.2e}; "
          f"mean SQL tokens {np.mean([s.n_tokens for s in fast]):.1f}")


if __name__ == "__main__":
    from model.errors import user_errors

    with user_errors():  # a data root of another layout: one line
        main()
