"""Pooled token probabilities of predicted SQL under a scorer LM (teacher forcing).

The scorer reads `schema + question` and then the predicted SQL; each SQL token gets its
probability given everything before it, and the token probabilities are pooled into the
whole-query scores of the calibration papers: prod (sequence probability, kept as a log),
geo (geometric mean), min and avg. The space before the SQL belongs to the SQL segment, so
the first SQL token is " SELECT" as the LM would write it after "-- SQL:".

Fast path (`score_sql`, and `token_probabilities` for the unpooled per-token values):
identical (prompt, SQL) pairs are scored once, batches are sorted by length, the transformer
body runs once per batch and the output layer only at SQL positions (the vocabulary projection
dominates a small LM's cost), and results are cached on disk. `score_sql_naive` is the textbook
loop (full-vocabulary logits at every position, one pair at a time, no reuse), kept for tests
and `benchmarks/score_speed.py`.

`sample_outputs` draws additional SQL from the same LM and prompt (nucleus sampling or beam
search with HF `generate`), a source of additional outputs for sub-clause frequencies; it is
meant for a GPU (on a CPU, a few questions for a test).

CLI: `python -m model.lm.token_probabilities --data-root ../shared/data/spider --predictions DIR_OR_FILES
--out scores.jsonl [--model NAME --device cuda]`.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from model.data.jsonl import iter_jsonl

__all__ = [
    "SAMPLE_MODES",
    "PooledScore",
    "TokenProbabilities",
    "cut_sql",
    "main",
    "pool",
    "prediction_files",
    "prompt_text",
    "read_scores",
    "sample_outputs",
    "score_sql",
    "score_sql_naive",
    "scores_cache_path",
    "sql_token_ids",
    "token_probabilities",
]

POOLINGS = ("prod", "geo", "min", "avg")


@dataclass(frozen=True)
class PooledScore:
    """Pooled probabilities of one SQL; `log_prod` is log P(SQL | prompt), never underflowing."""

    n_tokens: int
    log_prod: float
    geo: float
    min: float
    avg: float

    @property
    def prod(self) -> float:
        return math.exp(self.log_prod)


def prompt_text(question: str, schema_tables: Mapping[str, Sequence[str]] | None = None,
                evidence: str = "") -> str:
    """The scorer's prompt: compact schema, question (+ BIRD evidence), then `-- SQL:`.

    >>> print(prompt_text("How many singers?", {"singer": ["singer_id", "name"]}))
    -- Tables: singer(singer_id, name)
    -- Question: How many singers?
    -- SQL:
    """
    lines = []
    if schema_tables:
        lines.append("-- Tables: " + "; ".join(f"{t}({', '.join(cols)})" for t, cols in schema_tables.items()))
    lines.append(f"-- Question: {question}")
    if evidence:
        lines.append(f"-- Evidence: {evidence}")
    lines.append("-- SQL:")
    return "\n".join(lines)


def pool(token_log_probs: Sequence[float]) -> PooledScore:
    """Pool per-token log-probabilities into prod (as a log), geo, min and avg.

    >>> s = pool([math.log(0.5), math.log(0.25)])
    >>> round(s.prod, 4), round(s.geo, 4), s.min, s.avg
    (0.125, 0.3536, 0.25, 0.375)
    """
    lp = np.asarray(token_log_probs, dtype=np.float64)
    if lp.size == 0:
        raise ValueError("cannot pool an empty SQL: it has no tokens")
    return PooledScore(int(lp.size), float(lp.sum()), float(np.exp(lp.mean())),
                       float(np.exp(lp.min())), float(np.exp(lp).mean()))


class TokenProbabilities(NamedTuple):
    """The SQL segment's tokens (`sql_token_ids`) and each one's probability under the scorer."""

    token_ids: list[int]
    probabilities: list[float]


def sql_token_ids(tokenizer, sql: str) -> list[int]:
    """The SQL segment's token ids as the scorer reads them: the space before the SQL is part of
    the SQL (so the first token is " SELECT", as the LM would write it after "-- SQL:")."""
    sql_ids = tokenizer(" " + sql.strip(), add_special_tokens=False)["input_ids"]
    if not sql_ids:
        raise ValueError(f"SQL {sql!r} tokenizes to nothing")
    return sql_ids


def _encode(tokenizer, prompt: str, sql: str) -> tuple[list[int], list[int]]:
    return tokenizer(prompt, add_special_tokens=True)["input_ids"], sql_token_ids(tokenizer, sql)


def scores_cache_path(model_name: str | None = None) -> Path:
    """The shared token log-prob cache of a scorer LM: ``<cache>/scores/<name>.jsonl``, ``smollm2``
    for the packaged default (``None``). Rows are keyed by model, prompt and SQL, so a file never
    mixes models' values; one file per model keeps each small to read.

    >>> scores_cache_path().name, scores_cache_path("qwen_coder").name, scores_cache_path().parent.name
    ('smollm2.jsonl', 'qwen_coder.jsonl', 'scores')
    """
    from model.data.cache import cache_dir

    name = "smollm2" if model_name is None else str(model_name).strip("/").replace("/", "--")
    return cache_dir("scores", f"{name}.jsonl")


def _cache_key(model_id: str, prompt: str, sql: str) -> str:
    return hashlib.sha256(f"{model_id}\x00{prompt}\x00{sql}".encode()).hexdigest()


def _llama_cpp(model) -> bool:
    """Whether ``model`` is a GGUF run by llama.cpp (``<name>@llama.cpp``): it scores on the CPU it
    was built for, through its own ``prompt_group_log_probs``."""
    from model.lm.load import LlamaCppLM

    return isinstance(model, LlamaCppLM)


def _model_id(model) -> str:
    if _llama_cpp(model):
        return model.model_id
    cfg = model.config
    model_id = f"{getattr(cfg, '_name_or_path', '')}|{cfg.model_type}|{cfg.vocab_size}|{model.num_parameters()}"
    dtype = next(model.parameters()).dtype
    # bfloat16/float16 values differ from float32 ones; float32 keys stay as they were (existing caches)
    return model_id if dtype == torch.float32 else f"{model_id}|{dtype}"


@torch.no_grad()
def _prompt_group_log_probs(model, prompt_ids: list[int], sql_batches: list[list[list[int]]],
                            pad_id: int, device: torch.device) -> list[list[float]]:
    """Log-probabilities of the tokens of several SQLs that share one prompt.

    The prompt (schema + question: most of the tokens) runs once; its key/value cache is then
    repeated across each batch of SQLs, which run with positions continuing after the prompt.
    """
    out = model.base_model(input_ids=torch.tensor([prompt_ids], device=device), use_cache=True)
    prompt_cache, last_hidden = out.past_key_values, out.last_hidden_state[0, -1]  # (d,)
    head, n_prompt, result = model.get_output_embeddings(), len(prompt_ids), []
    for batch in sql_batches:
        width = max(map(len, batch))
        ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), n_prompt + width), dtype=torch.long)
        mask[:, :n_prompt] = 1
        for i, sql in enumerate(batch):
            ids[i, : len(sql)] = torch.tensor(sql)
            mask[i, n_prompt : n_prompt + len(sql)] = 1  # right padding, never attended to
        cache = copy.deepcopy(prompt_cache)
        cache.batch_repeat_interleave(len(batch))
        positions = torch.arange(n_prompt, n_prompt + width)[None].expand(len(batch), -1)
        hidden = model.base_model(input_ids=ids.to(device), attention_mask=mask.to(device),
                                  past_key_values=cache, position_ids=positions.to(device),
                                  use_cache=True).last_hidden_state  # (B, width, d)
        # The prompt's last position predicts SQL token 0; SQL position k predicts token k+1.
        states = torch.cat([torch.cat([last_hidden[None], hidden[i, : len(sql) - 1]])
                            for i, sql in enumerate(batch)])  # (N_sql, d)
        targets = torch.tensor([t for sql in batch for t in sql], device=device)  # (N_sql,)
        logits = head(states).float()  # (N_sql, vocab): the output layer only at SQL positions
        log_probs = logits.gather(1, targets[:, None])[:, 0] - torch.logsumexp(logits, dim=-1)
        start = 0
        for sql in batch:
            result.append(log_probs[start : start + len(sql)].tolist())
            start += len(sql)
    return result


def _load_cache(path: Path | None) -> dict[str, list[float]]:
    r"""The scores a cache file holds. A run stopped while appending (killed, out of time) can
    leave part of a line at the end: it is cut off, so that the next run's appends stay whole
    lines, and those scores are computed again.

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "s.jsonl"
    >>> _ = p.write_text('{"key": "a", "token_log_probs": [-0.5]}\n{"key": "b", "token_lo')
    >>> _load_cache(p), p.read_text()
    ({'a': [-0.5]}, '{"key": "a", "token_log_probs": [-0.5]}\n')
    """
    if path is None or not path.exists():
        return {}
    data = path.read_bytes()
    whole = data.rfind(b"\n") + 1
    if whole < len(data):  # (a cache that is whole is only read: it may be read-only)
        with path.open("rb+") as f:
            f.truncate(whole)
    return {row["key"]: row["token_log_probs"] for row in iter_jsonl(path)}


def _sql_log_probs(model, tokenizer, items: Sequence[tuple[str, str]], batch_tokens: int,
                   cache_path: Path | None, progress: bool,
                   device: str | torch.device | None) -> list[list[float]]:
    """Per-token log-probabilities of each item's SQL, in order: the fast path shared by
    `score_sql` and `token_probabilities` (deduplication, length-sorted batches, disk cache)."""
    from tqdm.auto import tqdm

    llama_cpp = _llama_cpp(model)
    if not llama_cpp:
        device = torch.device(device) if device is not None else next(model.parameters()).device
    model_id = _model_id(model)
    keys = [_cache_key(model_id, p, s) for p, s in items]
    cache = _load_cache(cache_path)
    todo = {}  # key -> (prompt_ids, sql_ids), each distinct pair once
    for key, (p, s) in zip(keys, items):
        if key not in cache and key not in todo:
            todo[key] = _encode(tokenizer, p, s)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    groups: dict[tuple[int, ...], list[str]] = {}  # prompt ids -> keys of its distinct SQLs
    for key, (prompt_ids, _) in todo.items():
        groups.setdefault(tuple(prompt_ids), []).append(key)
    new: dict[str, list[float]] = {}
    if cache_path is not None:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
    bar = tqdm(total=len(todo), desc="scoring SQL", unit="sql", disable=not progress)
    for prompt_ids, group in groups.items():
        group.sort(key=lambda k: len(todo[k][1]))
        # Batches of SQLs whose (size x (prompt + longest SQL)) stays within the token budget.
        batches, batch = [], []
        for key in group:
            if batch and (len(batch) + 1) * (len(prompt_ids) + len(todo[key][1])) > batch_tokens:
                batches.append(batch)
                batch = []
            batch.append(key)
        batches.append(batch)
        log_probs = (model.prompt_group_log_probs(list(prompt_ids), [todo[k][1] for b in batches for k in b])
                     if llama_cpp else
                     _prompt_group_log_probs(model, list(prompt_ids), [[todo[k][1] for k in b] for b in batches],
                                             pad_id, device))
        done = dict(zip([k for b in batches for k in b], log_probs))
        new.update(done)
        if cache_path is not None:  # appended per prompt, so an interrupted run resumes
            with cache_path.open("a") as f:
                for key, lps in done.items():
                    f.write(json.dumps({"key": key, "token_log_probs": lps}) + "\n")
        bar.update(len(done))
    bar.close()
    cache.update(new)
    return [cache[k] for k in keys]


def score_sql(model, tokenizer, items: Sequence[tuple[str, str]], batch_tokens: int = 8192,
              cache_path: Path | None = None, progress: bool = True,
              device: str | torch.device | None = None) -> list[PooledScore]:
    """Pooled scores of each `(prompt, sql)` in `items`, in order (the fast path).

    `batch_tokens` bounds padded tokens per forward pass. With `cache_path` (a JSONL file),
    token log-probabilities already there are reused and new ones appended, keyed by model,
    prompt and SQL.
    """
    return [pool(lps) for lps in _sql_log_probs(model, tokenizer, items, batch_tokens, cache_path,
                                                progress, device)]


def token_probabilities(model, tokenizer, items: Sequence[tuple[str, str]], batch_tokens: int = 8192,
                        cache_path: Path | None = None, progress: bool = False,
                        device: str | torch.device | None = None) -> list[TokenProbabilities]:
    """Each `(prompt, sql)`'s SQL tokens and their probabilities by teacher forcing, in order.

    The very values `score_sql` pools (same fast path, same cache): for each item,
    `pool(log(probabilities))` is its `PooledScore`. `token_ids` are `sql_token_ids(tokenizer,
    sql)`; `tokenizer.convert_ids_to_tokens` spells them.
    """
    log_probs = _sql_log_probs(model, tokenizer, items, batch_tokens, cache_path, progress, device)
    return [TokenProbabilities(sql_token_ids(tokenizer, sql), np.exp(lps).tolist())
            for (_, sql), lps in zip(items, log_probs)]


@torch.no_grad()
def score_sql_naive(model, tokenizer, items: Sequence[tuple[str, str]]) -> list[PooledScore]:
    """Reference implementation: one pair at a time, log-softmax over the full logits."""
    device = next(model.parameters()).device
    scores = []
    for prompt, sql in items:
        p, s = _encode(tokenizer, prompt, sql)
        ids = torch.tensor([p + s], device=device)
        log_probs = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)  # (T, vocab)
        scores.append(pool([log_probs[len(p) - 1 + k, t].item() for k, t in enumerate(s)]))
    return scores


SAMPLE_MODES = ("nucleus", "beam")


def cut_sql(generated: str) -> str:
    """The SQL of a generated continuation: up to the first newline or ";", stripped.

    >>> cut_sql(" SELECT name FROM singer; -- done")
    'SELECT name FROM singer'
    >>> cut_sql(" SELECT count(*)\\n-- Question: next")
    'SELECT count(*)'
    """
    return generated.split("\n", 1)[0].split(";", 1)[0].strip()


@torch.no_grad()
def sample_outputs(model, tokenizer, prompts: Sequence[str], n: int = 5, mode: str = "nucleus",
                   top_p: float = 0.9, temperature: float = 1.0, num_beams: int | None = None,
                   max_new_tokens: int = 128, batch_size: int = 8, seed: int = 0,
                   device: str | torch.device | None = None, progress: bool = False) -> list[list[str]]:
    """`n` SQL outputs per prompt (a `prompt_text`) drawn from the scorer LM with HF `generate`.

    `mode="nucleus"`: sampling with `top_p` and `temperature` (seeded with `seed`, without
    touching the global RNG); `mode="beam"`: beam search with `num_beams` (default `n`) beams,
    returning the `n` best. Each output is the continuation cut at its first newline or ";"
    (`cut_sql`); a continuation with no SQL gives "" (it matches nothing in SCF). Meant for a
    GPU: on one busy CPU core the packaged 135M model took 6.5 s for 2 nucleus + 2 beam
    samples of one question.
    """
    from tqdm.auto import tqdm

    if mode not in SAMPLE_MODES:
        raise ValueError(f"mode must be one of {SAMPLE_MODES}; found {mode!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1; found {n}")
    device = torch.device(device) if device is not None else next(model.parameters()).device
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id or 0
    if mode == "nucleus":
        # top_k=0 turns off generate's default top-k of 50: the nucleus alone decides.
        options = {"do_sample": True, "top_p": top_p, "temperature": temperature, "top_k": 0}
    else:
        options = {"do_sample": False, "num_beams": max(num_beams or n, n)}
    out: list[list[str]] = []
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        for start in tqdm(range(0, len(prompts), batch_size), desc=f"sampling SQL ({mode})",
                          disable=not progress):
            encoded = [tokenizer(p, add_special_tokens=True)["input_ids"] for p in prompts[start:start + batch_size]]
            width = max(map(len, encoded))
            # Left padding: every prompt ends where generation starts.
            ids = torch.tensor([[pad_id] * (width - len(e)) + e for e in encoded], device=device)
            mask = torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in encoded], device=device)
            generated = model.generate(
                input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, num_return_sequences=n,
                pad_token_id=pad_id, stop_strings=["\n", ";"], tokenizer=tokenizer, **options,
            )  # (batch * n, width + new tokens), the n outputs of a prompt adjacent
            texts = tokenizer.batch_decode(generated[:, width:], skip_special_tokens=True)
            out.extend([cut_sql(t) for t in texts[i:i + n]] for i in range(0, len(texts), n))
    return out


def read_scores(path: Path) -> dict[tuple[str, str], PooledScore]:
    """`{(system, question_id): PooledScore}` from a file written by `main`."""
    return {(row["system"], row["question_id"]): PooledScore(
        row["n_tokens"], row["log_prod"], row["geo"], row["min"], row["avg"]) for row in iter_jsonl(path)}


def prediction_files(paths: Sequence[str | Path]) -> list[Path]:
    """The prediction files named by `paths`: files as given, folders' .txt/.csv/.json/.jsonl."""
    files = []
    for p in map(Path, paths):
        files.extend(sorted(f for f in p.iterdir() if f.suffix in (".txt", ".csv", ".json", ".jsonl"))
                     if p.is_dir() else [p])
    return files


def score_predictions(model, tokenizer, predictions: Sequence, questions: Mapping, schemas: Mapping,
                      cache_path: Path | None = None, batch_tokens: int = 8192, device=None,
                      progress: bool = True) -> list[PooledScore]:
    """Pooled scores of predictions (``model.data.predictions.Prediction``) under the scorer's
    prompt for their question (``questions``: question_id -> Question), in order."""

    def prompt(p) -> str:
        q = questions[p.question_id]
        schema = schemas.get(q.db_id)
        return prompt_text(q.question, schema.tables if schema is not None else None, q.evidence)

    return score_sql(model, tokenizer, [(prompt(p), p.sql) for p in predictions], batch_tokens=batch_tokens,
                     cache_path=cache_path, device=device, progress=progress)


def main(argv: Sequence[str] | None = None) -> None:
    from model.data.datasets import load_questions, load_schemas
    from model.data.predictions import load_predictions
    from model.lm import load_causal_lm

    ap = argparse.ArgumentParser(prog="python -m model.lm.token_probabilities", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-root", type=Path, required=True, help="Spider/BIRD folder (dev.json, tables.json)")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--predictions", nargs="+", required=True, help="prediction files or folders")
    ap.add_argument("--out", type=Path, required=True, help="JSONL: one pooled score per prediction")
    ap.add_argument("--model", default=None,
                    help="HF id, folder or short name (qwen_coder: make setup-qwen; qwen_coder@llama.cpp: "
                         "its GGUF run by llama.cpp); default: packaged SmolLM2-135M")
    ap.add_argument("--gguf-file", default=None)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--batch-tokens", type=int, default=8192)
    ap.add_argument("--cache", type=Path, default=None, help="token log-prob cache (JSONL)")
    ap.add_argument("--limit", type=int, default=None, help="score only the first N questions")
    args = ap.parse_args(argv)

    questions = load_questions(args.data_root, args.split)
    schemas = load_schemas(args.data_root)
    model, tokenizer = load_causal_lm(args.model, args.gguf_file, dtype=getattr(torch, args.dtype))
    if not _llama_cpp(model):
        model.to(args.device)
    by_id = {q.question_id: q for q in questions[: args.limit]}  # positional files need all questions
    preds = [p for f in prediction_files(args.predictions) for p in load_predictions(f, questions)
             if p.question_id in by_id and p.sql.strip()]

    scores = score_predictions(model, tokenizer, preds, by_id, schemas, cache_path=args.cache,
                               batch_tokens=args.batch_tokens, device=args.device)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as f:
        for p, s in zip(preds, scores):
            f.write(json.dumps({"system": p.system, "question_id": p.question_id, "sql": p.sql,
                                **asdict(s)}) + "\n")
    print(f"wrote {len(preds)} pooled scores to {args.out}")


if __name__ == "__main__":
    main()
