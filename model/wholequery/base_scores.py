"""Base scores: one row per (system, question) with a database, its execution label and every
signal the calibrators combine: pooled token probabilities (from a `model.lm.token_probabilities` score
file), sub-clause frequencies and execution agreement against each source of additional outputs
(the other systems' predictions for the same question; the prediction's own `samples`; samples
drawn from the scorer LM), and the node model's tree-level confidences (root, least confident
node). Questions without a database are dropped.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from model.data.execution import DEFAULT_TIMEOUT_S
from model.data.jsonl import iter_jsonl
from model.lm.token_probabilities import POOLINGS
from model.wholequery.scf import FEATURE_NAMES as SCF_NAMES
from model.wholequery.scf import decompose, subclause_frequencies

LABEL_OUTCOME = "match"


@dataclass
class BaseScores:
    """One row per (system, question) with a database: ids, 0/1 label, named score columns."""

    system: np.ndarray  # (n,) str
    question_id: np.ndarray  # (n,) str
    db_id: np.ndarray  # (n,) str
    label: np.ndarray  # (n,) int, 1 = execution match with the gold SQL
    columns: dict[str, np.ndarray] = field(default_factory=dict)  # name -> (n,) float

    def __len__(self) -> int:
        return len(self.label)

    def subset(self, mask: np.ndarray) -> BaseScores:
        return BaseScores(self.system[mask], self.question_id[mask], self.db_id[mask], self.label[mask],
                          {k: v[mask] for k, v in self.columns.items()})

    def write_csv(self, path: Path) -> None:
        names = list(self.columns)
        with Path(path).open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["system", "question_id", "db_id", "label", *names])
            for i in range(len(self)):
                w.writerow([*map(_cell, (self.system[i], self.question_id[i], self.db_id[i])), int(self.label[i]),
                            *(f"{self.columns[n][i]:.6g}" for n in names)])

    @classmethod
    def read_csv(cls, path: Path) -> BaseScores:
        with Path(path).open() as f:
            rows = list(csv.reader(f))
        head, body = rows[0], rows[1:]
        col = {h: [r[i] for r in body] for i, h in enumerate(head)}
        text = {h: [_uncell(v) for v in col.pop(h)] for h in ("system", "question_id", "db_id")}
        return cls(np.array(text["system"]), np.array(text["question_id"]), np.array(text["db_id"]),
                   np.array(col.pop("label"), dtype=int),
                   {k: np.array(v, dtype=np.float64) for k, v in col.items()})


def _cell(text) -> str:
    r"""A text cell a spreadsheet will not run: one starting ``= + - @``, a tab or a carriage
    return (a formula, in Excel or LibreOffice) gets a leading ``'``, taken off by ``_uncell``.

    >>> _cell('=HYPERLINK("http://x")'), _uncell(_cell("=1+1")), _cell("'quoted"), _uncell("'quoted")
    ('\'=HYPERLINK("http://x")', '=1+1', "''quoted", 'quoted')
    """
    text = str(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r", "'") else text


def _uncell(text: str) -> str:
    return text[1:] if text[:1] == "'" else text


def build_base_scores(questions, predictions, schemas: Mapping, db_paths: Mapping[str, Path | None],
                      scores: Mapping | None = None, exec_cache_dir: Path | None = None,
                      workers: int = 1, timeout_s: float = DEFAULT_TIMEOUT_S, progress: bool = True,
                      additional_outputs: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
                      ) -> BaseScores:
    """The base-score table of `predictions` (`model.data.predictions.Prediction`s, any systems).

    `scores`: `{(system, question_id): model.lm.token_probabilities.PooledScore}` (see `model.lm.token_probabilities.read_scores`),
    adding `log_prod`, `geo`, `min`, `avg`. SCF (`scf_<source>_<signal>`) and execution agreement
    (`exec_<source>`) come from the sources present: `systems` when there are at least two systems,
    `samples` when predictions carry samples, and each `additional_outputs` source
    (`{source: {question_id: [sql, ...]}}`, the same outputs for every system's prediction of a
    question; e.g. `{"lm_nucleus": ...}` from `model.lm.token_probabilities.sample_outputs`).
    """
    from model.data.execution import execute_pairs

    by_q = {q.question_id: q for q in questions}
    preds = [p for p in predictions if p.question_id in by_q and db_paths.get(by_q[p.question_id].db_id)]
    systems = sorted({p.system for p in preds})
    per_question: dict[str, dict[str, str]] = defaultdict(dict)
    for p in preds:
        per_question[p.question_id][p.system] = p.sql
    # Additional outputs per prediction and source.
    additional: list[dict[str, list[str]]] = []
    for p in preds:
        by_source = {}
        if len(systems) > 1:
            by_source["systems"] = [sql for s, sql in sorted(per_question[p.question_id].items()) if s != p.system]
        if p.samples:
            by_source["samples"] = list(p.samples)
        for src, per_q in (additional_outputs or {}).items():
            if src in ("systems", "samples"):
                raise ValueError(f"additional output source {src!r} is reserved; pick another name")
            if per_q.get(p.question_id):
                by_source[src] = list(per_q[p.question_id])
        additional.append(by_source)
    source_names = sorted({s for a in additional for s in a})

    def db(p) -> Path:
        return db_paths[by_q[p.question_id].db_id]

    # One execution call: labels (pred vs gold) and agreement pairs (pred vs each additional output).
    pairs = [(db(p), p.sql, by_q[p.question_id].gold_sql) for p in preds]
    agreement_slices = []
    for p, sources in zip(preds, additional):
        spans = {}
        for src in source_names:
            start = len(pairs)
            pairs.extend((db(p), p.sql, other) for other in sources.get(src, []))
            spans[src] = (start, len(pairs))
        agreement_slices.append(spans)
    outcomes = execute_pairs(pairs, timeout_s=timeout_s, cache_dir=exec_cache_dir, workers=workers,
                             progress=progress)
    label = np.array([o == LABEL_OUTCOME for o in outcomes[: len(preds)]], dtype=int)

    columns: dict[str, np.ndarray] = {}
    for src in source_names:
        agree = np.zeros(len(preds))
        for i, spans in enumerate(agreement_slices):
            a, b = spans[src]
            if b > a:
                agree[i] = np.mean([o == LABEL_OUTCOME for o in outcomes[a:b]])
        columns[f"exec_{src}"] = agree

    decomposed: dict[tuple[str, str], object] = {}

    def dec(sql: str, db_id: str):
        key = (sql, db_id)
        if key not in decomposed:
            decomposed[key] = decompose(sql, schemas.get(db_id))
        return decomposed[key]

    for src in source_names:
        scf = np.zeros((len(preds), len(SCF_NAMES)))
        for i, (p, sources) in enumerate(zip(preds, additional)):
            db_id = by_q[p.question_id].db_id
            scf[i] = subclause_frequencies(dec(p.sql, db_id), [dec(o, db_id) for o in sources.get(src, [])])
        for j, name in enumerate(SCF_NAMES):
            columns[f"scf_{src}_{name}"] = scf[:, j]

    table = BaseScores(np.array([p.system for p in preds]), np.array([p.question_id for p in preds]),
                       np.array([by_q[p.question_id].db_id for p in preds]), label, columns)
    return add_pooled_scores(table, scores) if scores is not None else table


def add_pooled_scores(table: BaseScores, scores: Mapping) -> BaseScores:
    """`table` with columns `log_prod`, `geo`, `min`, `avg` from `{(system, question_id): PooledScore}`."""
    keys = list(zip(table.system.tolist(), table.question_id.tolist()))
    missing = [k for k in keys if k not in scores]
    if missing:
        from model.errors import UsageError

        raise UsageError(f"the token-probability scores lack {len(missing)} of {len(keys)} predictions, e.g. "
                         f"{missing[:3]}: score every prediction (model.lm.token_probabilities without --limit)")
    columns = dict(table.columns)
    for name in ("log_prod", *POOLINGS[1:]):
        columns[name] = np.array([getattr(scores[k], name) for k in keys], dtype=np.float64)
    return BaseScores(table.system, table.question_id, table.db_id, table.label, columns)


NODE_COLUMNS = ("node_root", "node_min")


def add_node_confidences(table: BaseScores, node_confidences: Mapping[tuple[str, str], Sequence[float]],
                         prefix: str = "node") -> BaseScores:
    """`table` with the node model's tree-level confidences, on the rows that have them.

    `node_confidences`: `{(system, question_id): per-node confidences in post-order}` (root
    last), e.g. from `read_node_confidences`. Adds `node_root` (the root's confidence: the whole
    tree is right) and `node_min` (the least confident node). Rows without an entry are dropped
    rather than imputed, so that every method is measured on the same predictions; a node
    model's `test.jsonl` covers only its test databases. ``prefix`` names the columns (``nodec``
    for a consensus node scorer).
    """
    keys = list(zip(table.system.tolist(), table.question_id.tolist()))
    keep = np.array([bool(node_confidences.get(k)) for k in keys], dtype=bool)
    if not keep.any():
        raise ValueError(f"no node confidences for any of the {len(keys)} predictions, e.g. {keys[:3]}; "
                         f"expected (system, question_id) keys such as {list(node_confidences)[:3]}")
    kept = table.subset(keep)
    confidences = [node_confidences[k] for k, k_kept in zip(keys, keep) if k_kept]
    columns = dict(kept.columns)
    columns[f"{prefix}_root"] = np.array([c[-1] for c in confidences], dtype=np.float64)
    columns[f"{prefix}_min"] = np.array([min(c) for c in confidences], dtype=np.float64)
    return BaseScores(kept.system, kept.question_id, kept.db_id, kept.label, columns)


def read_node_confidences(path: Path) -> dict[tuple[str, str], list[float]]:
    """`{(system, question_id): node_confidences}` from a node model's predictions JSONL
    (`<run>/predictions/test.jsonl` as written by `train.py`)."""
    return {(row["system"], row["question_id"]): [float(c) for c in row["node_confidences"]]
            for row in iter_jsonl(path)}


def node_confidences_from_checkpoint(checkpoint: Path | str, questions, predictions, schemas: Mapping,
                                     device: str | None = None, progress: bool = True
                                     ) -> dict[tuple[str, str], list[float]]:
    """Node confidences of `predictions` scored by a trained node model (`model.nodes.infer.NeuralCheckpoint`:
    a `.ckpt` or a run directory). Queries it cannot read (RAT errors, too long) get no entry."""
    from tqdm.auto import tqdm

    import rat
    from model.nodes.infer import NeuralCheckpoint

    scorer = NeuralCheckpoint(checkpoint, device=device)
    by_q = {q.question_id: q for q in questions}
    out = {}
    for p in tqdm([p for p in predictions if p.question_id in by_q], desc="node model", unit="sql",
                  disable=not progress):
        q = by_q[p.question_id]
        try:
            nodes = scorer.score(schemas.get(q.db_id), q.question, p.sql, q.db_id)
        except (rat.RATError, ValueError):
            continue
        out[(p.system, p.question_id)] = [n.confidence for n in nodes]
    return out


def generate_lm_samples(model, tokenizer, questions, schemas: Mapping, modes: Sequence[str] = ("nucleus",),
                        n: int = 5, progress: bool = True, **options) -> dict[str, dict[str, list[str]]]:
    """Additional outputs drawn from the scorer LM: `{"lm_<mode>": {question_id: [sql, ...]}}`.

    The prompt is the scorer's (`model.lm.token_probabilities.prompt_text`); `options` go to
    `model.lm.token_probabilities.sample_outputs` (`top_p`, `temperature`, `max_new_tokens`, `batch_size`,
    `seed`, `device`). GPU-oriented: on a CPU, use it for a handful of questions.
    """
    from model.lm.token_probabilities import prompt_text, sample_outputs

    def prompt(q) -> str:
        schema = schemas.get(q.db_id)
        return prompt_text(q.question, schema.tables if schema is not None else None, q.evidence)

    prompts = [prompt(q) for q in questions]
    out = {}
    for mode in modes:
        samples = sample_outputs(model, tokenizer, prompts, n=n, mode=mode, progress=progress, **options)
        out[f"lm_{mode}"] = {q.question_id: s for q, s in zip(questions, samples)}
    return out


# ------------------------------------------------------------------------------------ methods
