"""Whole-query calibration pipeline: predictions -> base scores -> calibrators -> metrics table.

Base scores per prediction: pooled token probabilities (from a `model.scoring` score file),
sub-clause frequencies and execution agreement against each source of additional outputs
(the other systems' predictions for the same question; the prediction's own `samples`;
optionally samples drawn from the scorer LM, `--lm-samples nucleus beam`, meant for a GPU), and
optionally the node model's tree-level confidence (root and least confident node, from its
predictions file or a checkpoint). Labels are execution matches with the gold SQL (questions
without a database are dropped).
Every method is evaluated per system with the papers' protocol: 5 schema-disjoint folds, fit on
one fold and evaluate on the other four, mean ± std over folds; or a fixed calibration/test split.

CLI: `python -m model.wholequery --data-root ../shared/data/spider
--predictions ../shared/data/predictions/spider_dev --out runs/wholequery [--scores scores.jsonl]`.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from model import metrics as M
from model.calibration import (
    Calibrator,
    IsotonicCalibrator,
    MultivariatePlattScaler,
    PlattScaler,
    calibration_test_split,
    schema_disjoint_folds,
)
from model.scf import FEATURE_NAMES as SCF_NAMES
from model.scf import decompose, subclause_frequencies
from model.scoring import POOLINGS, SAMPLE_MODES

__all__ = [
    "NODE_COLUMNS",
    "BaseScores",
    "Method",
    "add_node_confidences",
    "add_pooled_scores",
    "build_base_scores",
    "default_methods",
    "evaluate_methods",
    "format_tables",
    "generate_lm_samples",
    "main",
    "node_confidences_from_checkpoint",
    "read_node_confidences",
    "sources",
]

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
                w.writerow([self.system[i], self.question_id[i], self.db_id[i], int(self.label[i]),
                            *(f"{self.columns[n][i]:.6g}" for n in names)])

    @classmethod
    def read_csv(cls, path: Path) -> BaseScores:
        with Path(path).open() as f:
            rows = list(csv.reader(f))
        head, body = rows[0], rows[1:]
        col = {h: [r[i] for r in body] for i, h in enumerate(head)}
        return cls(np.array(col.pop("system")), np.array(col.pop("question_id")), np.array(col.pop("db_id")),
                   np.array(col.pop("label"), dtype=int),
                   {k: np.array(v, dtype=np.float64) for k, v in col.items()})


def build_base_scores(questions, predictions, schemas: Mapping, db_paths: Mapping[str, Path | None],
                      scores: Mapping | None = None, exec_cache_dir: Path | None = None,
                      workers: int = 1, timeout_s: float = 30.0, progress: bool = True,
                      additional_outputs: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
                      ) -> BaseScores:
    """The base-score table of `predictions` (`model.data.predictions.Prediction`s, any systems).

    `scores`: `{(system, question_id): model.scoring.PooledScore}` (see `model.scoring.read_scores`),
    adding `log_prod`, `geo`, `min`, `avg`. SCF (`scf_<source>_<signal>`) and execution agreement
    (`exec_<source>`) come from the sources present: `systems` when there are at least two systems,
    `samples` when predictions carry samples, and each `additional_outputs` source
    (`{source: {question_id: [sql, ...]}}`, the same outputs for every system's prediction of a
    question; e.g. `{"lm_nucleus": ...}` from `model.scoring.sample_outputs`).
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
        raise ValueError(f"score file lacks {len(missing)} of {len(keys)} predictions, e.g. {missing[:3]}")
    columns = dict(table.columns)
    for name in ("log_prod", *POOLINGS[1:]):
        columns[name] = np.array([getattr(scores[k], name) for k in keys], dtype=np.float64)
    return BaseScores(table.system, table.question_id, table.db_id, table.label, columns)


NODE_COLUMNS = ("node_root", "node_min")


def add_node_confidences(table: BaseScores, node_confidences: Mapping[tuple[str, str], Sequence[float]]
                         ) -> BaseScores:
    """`table` with the node model's tree-level confidences, on the rows that have them.

    `node_confidences`: `{(system, question_id): per-node confidences in post-order}` (root
    last), e.g. from `read_node_confidences`. Adds `node_root` (the root's confidence: the whole
    tree is right) and `node_min` (the least confident node). Rows without an entry are dropped
    rather than imputed, so that every method is measured on the same predictions; a node
    model's `test.jsonl` covers only its test databases.
    """
    keys = list(zip(table.system.tolist(), table.question_id.tolist()))
    keep = np.array([bool(node_confidences.get(k)) for k in keys], dtype=bool)
    if not keep.any():
        raise ValueError(f"no node confidences for any of the {len(keys)} predictions, e.g. {keys[:3]}; "
                         f"expected (system, question_id) keys such as {list(node_confidences)[:3]}")
    kept = table.subset(keep)
    confidences = [node_confidences[k] for k, k_kept in zip(keys, keep) if k_kept]
    columns = dict(kept.columns)
    columns["node_root"] = np.array([c[-1] for c in confidences], dtype=np.float64)
    columns["node_min"] = np.array([min(c) for c in confidences], dtype=np.float64)
    return BaseScores(kept.system, kept.question_id, kept.db_id, kept.label, columns)


def read_node_confidences(path: Path) -> dict[tuple[str, str], list[float]]:
    """`{(system, question_id): node_confidences}` from a node model's predictions JSONL
    (`<run>/predictions/test.jsonl` as written by `train.py`)."""
    out = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            out[(row["system"], row["question_id"])] = [float(c) for c in row["node_confidences"]]
    return out


def node_confidences_from_checkpoint(checkpoint: Path | str, questions, predictions, schemas: Mapping,
                                     device: str | None = None, progress: bool = True
                                     ) -> dict[tuple[str, str], list[float]]:
    """Node confidences of `predictions` scored by a trained node model (`model.infer.NodeScorer`:
    a `.ckpt` or a run directory). Queries it cannot read (RAT errors, too long) get no entry."""
    from tqdm.auto import tqdm

    import rat
    from model.infer import NodeScorer

    scorer = NodeScorer(checkpoint, device=device)
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

    The prompt is the scorer's (`model.scoring.prompt_text`); `options` go to
    `model.scoring.sample_outputs` (`top_p`, `temperature`, `max_new_tokens`, `batch_size`,
    `seed`, `device`). GPU-oriented: on a CPU, use it for a handful of questions.
    """
    from model.scoring import prompt_text, sample_outputs

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


@dataclass(frozen=True)
class Method:
    """A named confidence: base-score columns -> calibrator (None = the raw score itself)."""

    name: str
    features: tuple[str, ...]
    make: Callable[[], Calibrator] | None = None
    # How to read a single raw feature: "prob" (a probability: PS on its logit), "log_prob" (PS
    # on the logit computed from the log), "fraction" (an agreement rate k/n with exact 0s and
    # 1s, whose logits would be +-27: PS on the raw value, Platt's original form).
    score_kind: str = "prob"

    @property
    def platt_kind(self) -> str:
        return {"prob": "prob", "log_prob": "log_prob", "fraction": "raw"}[self.score_kind]

    def raw(self, table: BaseScores) -> np.ndarray:
        x = table.columns[self.features[0]]
        return np.exp(x) if self.score_kind == "log_prob" else x


def sources(columns: Sequence[str]) -> list[str]:
    """The sources of additional outputs in a table's columns (`exec_<source>`): `systems`,
    `samples`, then any others (e.g. `lm_nucleus`) by name.

    >>> sources(["exec_lm_beam", "exec_samples", "log_prod", "exec_systems"])
    ['systems', 'samples', 'lm_beam']
    """
    found = [c[len("exec_"):] for c in columns if c.startswith("exec_")]
    return sorted(found, key=lambda s: ({"systems": 0, "samples": 1}.get(s, 2), s))


def default_methods(columns: Sequence[str]) -> list[Method]:
    """Raw scores (evaluated raw, after PS and after isotonic) and MPS combinations available."""
    methods = []
    if "log_prod" in columns:
        methods.append(Method("prod", ("log_prod",), score_kind="log_prob"))
        methods += [Method(n, (n,)) for n in POOLINGS[1:]]
    if "node_root" in columns:
        methods += [Method(n, (n,)) for n in NODE_COLUMNS]
        methods.append(Method("MPS(node root + min)", NODE_COLUMNS,
                              lambda: MultivariatePlattScaler(NODE_COLUMNS)))
    for src in sources(columns):
        methods.append(Method(f"exec_agreement_{src}", (f"exec_{src}",), score_kind="fraction"))
        if f"scf_{src}_product" in columns:
            methods.append(Method(f"scf_product_{src}", (f"scf_{src}_product",), score_kind="fraction"))
    scf = {src: tuple(f"scf_{src}_{n}" for n in SCF_NAMES) for src in sources(columns)
           if f"scf_{src}_product" in columns}
    for src, feats in scf.items():
        methods.append(Method(f"MPS(SCF {src})", feats, lambda f=feats: MultivariatePlattScaler(f)))
        ex = (*feats, f"exec_{src}")
        methods.append(Method(f"MPS(SCF {src} + exec)", ex, lambda f=ex: MultivariatePlattScaler(f)))
        if "node_root" in columns:
            nx = (*NODE_COLUMNS, *ex)
            methods.append(Method(f"MPS(node + SCF {src} + exec)", nx, lambda f=nx: MultivariatePlattScaler(f)))
    if "log_prod" in columns:
        lp = ("log_prod",)
        methods.append(Method("MPS(log_prod + geo + min + avg)", (*lp, *POOLINGS[1:]),
                              lambda: MultivariatePlattScaler(("log_prod", *POOLINGS[1:]))))
        for src, feats in scf.items():
            f1 = (*lp, *feats)
            methods.append(Method(f"MPS(log_prod + SCF {src})", f1, lambda f=f1: MultivariatePlattScaler(f)))
            f2 = (*f1, f"exec_{src}")
            methods.append(Method(f"MPS(log_prod + SCF {src} + exec)", f2,
                                  lambda f=f2: MultivariatePlattScaler(f)))
    return methods


def _ece(c, y):
    return M.ece(c, y, n_bins=10)


METRICS = {"brier": M.brier, "auc": M.auc, "ece": _ece}


def _evaluate_once(method: Method, fit: BaseScores, test: BaseScores) -> dict[str, float]:
    """Metrics of one method fitted on `fit`, measured on `test`."""
    y = test.label
    out = {}
    if method.make is None:  # a raw score: raw, after PS (-P), after isotonic (-I)
        raw = method.raw(test)
        out.update({k: f(raw, y) for k, f in METRICS.items()})
        x_fit, x_test = fit.columns[method.features[0]], test.columns[method.features[0]]
        ps = PlattScaler(method.platt_kind).fit(x_fit, fit.label).confidence(x_test)
        iso = IsotonicCalibrator().fit(x_fit, fit.label).confidence(x_test)
        out.update({"brier_platt": M.brier(ps, y), "ece_platt": _ece(ps, y),
                    "brier_isotonic": M.brier(iso, y), "ece_isotonic": _ece(iso, y)})
    else:
        cal = method.make().fit(_matrix(fit, method.features), fit.label)
        conf = cal.confidence(_matrix(test, method.features))
        out.update({k: f(conf, y) for k, f in METRICS.items()})
        out.update({"brier_platt": out["brier"], "ece_platt": out["ece"]})  # MPS is a Platt scaler
    return {k: float(v) for k, v in out.items()}


def _matrix(table: BaseScores, features: Sequence[str]) -> np.ndarray:
    return np.stack([table.columns[f] for f in features], axis=1)  # (n, n_features)


def evaluate_methods(table: BaseScores, methods: Sequence[Method], protocol: str = "cv",
                     n_folds: int = 5, seed: int = 0, calibration_fraction: float = 0.2,
                     fit_on: str = "one") -> dict[str, dict[str, dict[str, tuple[float, float]]]]:
    """`{system: {method: {metric: (mean, std)}}}` (std is 0 for the fixed split).

    `fit_on="one"` is the papers' CV (fit on one fold, test on the other four); `"rest"` is the
    usual k-fold (fit on four, test on one), which gives MPS five times more fitting data.

    Folds/splits are by database and identical across systems and methods, so every method of a
    system is measured on the same queries.
    """
    if protocol not in ("cv", "split"):
        raise ValueError(f"protocol must be 'cv' or 'split'; found {protocol!r}")
    # Assigned on all rows (every system answers the same questions), so folds balance queries.
    if protocol == "cv":
        fold_of_db = dict(zip(table.db_id, schema_disjoint_folds(table.db_id, n_folds, seed)))
    else:
        calib = dict(zip(table.db_id, calibration_test_split(table.db_id, calibration_fraction, seed)))
    results: dict[str, dict[str, dict[str, tuple[float, float]]]] = {}
    for system in np.unique(table.system):
        sys_table = table.subset(table.system == system)
        if protocol == "cv":
            folds = np.array([fold_of_db[d] for d in sys_table.db_id])
            splits = [(folds == k, folds != k) if fit_on == "one" else (folds != k, folds == k)
                      for k in range(n_folds)]
        else:
            mask = np.array([calib[d] for d in sys_table.db_id])
            splits = [(mask, ~mask)]
        results[str(system)] = {}
        for method in methods:
            runs = [_evaluate_once(method, sys_table.subset(f), sys_table.subset(t)) for f, t in splits]
            results[str(system)][method.name] = {
                k: (float(np.nanmean([r[k] for r in runs])), float(np.nanstd([r[k] for r in runs])))
                for k in runs[0]}
    return results


def fit_calibrators(table: BaseScores, methods: Sequence[Method]) -> dict[str, dict[str, Calibrator]]:
    """Per system, each calibrated method fitted on all of that system's rows (to save and reuse).

    Raw-score methods give their Platt scaler (`<name>+PS`) and isotonic map (`<name>+isotonic`).
    """
    fitted: dict[str, dict[str, Calibrator]] = {}
    for system in np.unique(table.system):
        t = table.subset(table.system == system)
        fitted[str(system)] = {}
        for m in methods:
            if m.make is None:
                x = t.columns[m.features[0]]
                fitted[str(system)][f"{m.name}+PS"] = PlattScaler(m.platt_kind).fit(x, t.label)
                fitted[str(system)][f"{m.name}+isotonic"] = IsotonicCalibrator().fit(x, t.label)
            else:
                fitted[str(system)][m.name] = m.make().fit(_matrix(t, m.features), t.label)
    return fitted


# ------------------------------------------------------------------------------------ tables

_COLUMNS = (("brier", "BS"), ("brier_platt", "BS-P"), ("auc", "AUC"), ("ece", "ECE"),
            ("ece_platt", "ECE-P"), ("brier_isotonic", "BS-I"), ("ece_isotonic", "ECE-I"))


def format_tables(results: Mapping, accuracy: Mapping[str, float] | None = None,
                  auc_methods: Sequence[str] | None = None) -> str:
    """Markdown: the mean over systems per method, then per-system AUC of chosen methods."""
    systems = list(results)
    methods = list(next(iter(results.values())))
    lines = ["| method | " + " | ".join(h for _, h in _COLUMNS) + " |",
             "|---|" + "---:|" * len(_COLUMNS)]
    for m in methods:
        cells = []
        for key, _ in _COLUMNS:
            vals = [results[s][m].get(key, (np.nan, 0))[0] for s in systems]
            cells.append("–" if np.all(np.isnan(vals)) else f"{np.nanmean(vals):.3f}")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    auc_methods = list(auc_methods or methods)
    lines += ["", "| system | " + ("acc | " if accuracy else "") + " | ".join(auc_methods) + " |",
              "|---|" + ("---:|" if accuracy else "") + "---:|" * len(auc_methods)]
    for s in systems:
        acc = f"{accuracy[s]:.3f} | " if accuracy else ""
        lines.append(f"| {s} | {acc}" + " | ".join(
            f"{results[s][m]['auc'][0]:.3f} ± {results[s][m]['auc'][1]:.3f}" for m in auc_methods) + " |")
    mean_acc = f"{np.mean(list(accuracy.values())):.3f} | " if accuracy else ""
    lines.append(f"| **mean** | {mean_acc}" + " | ".join(
        f"{np.mean([results[s][m]['auc'][0] for s in systems]):.3f}" for m in auc_methods) + " |")
    return "\n".join(lines)


def mps_weight_report(fitted: Mapping[str, Mapping[str, Calibrator]], method: str) -> str:
    """Markdown: MPS weights per feature (sub-clause), mean ± std over systems."""
    weights = [c.weights() for s in fitted.values() for n, c in s.items()
               if n == method and isinstance(c, MultivariatePlattScaler)]
    if not weights:
        return ""
    lines = [f"| feature | weight in {method} (mean ± std over systems) |", "|---|---:|"]
    for name in weights[0]:
        v = [w[name] for w in weights]
        lines.append(f"| {name} | {np.mean(v):+.3f} ± {np.std(v):.3f} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> None:
    from model.data.datasets import database_path, load_questions, load_schemas
    from model.data.predictions import load_predictions
    from model.scoring import prediction_files, read_scores

    ap = argparse.ArgumentParser(prog="python -m model.wholequery", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-root", type=Path, default=None)
    ap.add_argument("--split", default="dev")
    ap.add_argument("--predictions", nargs="+", default=None, help="prediction files or folders")
    ap.add_argument("--out", type=Path, required=True, help="output folder")
    ap.add_argument("--scores", type=Path, default=None, help="pooled scores from python -m model.scoring")
    ap.add_argument("--base-scores", type=Path, default=None,
                    help="reuse a base_scores.csv written earlier instead of recomputing")
    ap.add_argument("--protocol", choices=["cv", "split"], default="cv")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--fit-on", choices=["one", "rest"], default="one",
                    help="cv: fit on one fold and test on the rest (the papers), or the reverse")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--exec-cache", type=Path, default=None, help="default: .cache/exec")
    ap.add_argument("--node-predictions", type=Path, default=None,
                    help="node-model predictions JSONL (<run>/predictions/test.jsonl): adds node_root, "
                         "node_min and keeps only the predictions it covers")
    ap.add_argument("--node-checkpoint", type=Path, default=None,
                    help="a node-model .ckpt or run directory: scores every prediction (slow on a CPU)")
    lm = ap.add_argument_group("LM samples", "a third SCF source drawn from the scorer LM; off by default, "
                                             "meant for a GPU")
    lm.add_argument("--lm-samples", nargs="+", choices=SAMPLE_MODES, default=[],
                    help="add source lm_<mode>: nucleus sampling and/or beam search")
    lm.add_argument("--lm-model", default=None, help="HF id or folder; default: packaged SmolLM2-135M")
    lm.add_argument("--lm-gguf-file", default=None)
    lm.add_argument("--lm-n", type=int, default=5, help="samples (or beams returned) per question")
    lm.add_argument("--lm-top-p", type=float, default=0.9)
    lm.add_argument("--lm-max-new-tokens", type=int, default=128)
    lm.add_argument("--lm-batch-size", type=int, default=8)
    lm.add_argument("--device", default=None, help="for the LM and the node model; default: cuda if available")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    if args.node_predictions and args.node_checkpoint:
        ap.error("give --node-predictions or --node-checkpoint, not both")
    if args.base_scores is None and (args.data_root is None or args.predictions is None):
        ap.error("--data-root and --predictions are required unless --base-scores is given")
    if args.base_scores is not None and args.lm_samples:
        ap.error("--lm-samples needs --data-root and --predictions (its outputs are executed)")
    if args.node_checkpoint and (args.data_root is None or args.predictions is None):
        ap.error("--node-checkpoint needs --data-root and --predictions (the queries it scores)")

    args.out.mkdir(parents=True, exist_ok=True)
    if args.data_root is not None and args.predictions is not None:
        questions = load_questions(args.data_root, args.split)
        schemas = load_schemas(args.data_root)
        preds = [p for f in prediction_files(args.predictions) for p in load_predictions(f, questions)]
    if args.base_scores is not None:
        table = BaseScores.read_csv(args.base_scores)
        if args.scores is not None:
            # Scores computed elsewhere (e.g. on a GPU) join a table saved earlier, so execution
            # and SCF are not recomputed.
            table = add_pooled_scores(table, read_scores(args.scores))
    else:
        from model.data.execution import default_cache_dir

        db_paths = {q.db_id: database_path(args.data_root, q.db_id) for q in questions}
        scores = read_scores(args.scores) if args.scores else None
        lm_outputs = _lm_samples(args, questions, preds, schemas, db_paths) if args.lm_samples else None
        table = build_base_scores(questions, preds, schemas, db_paths, scores,
                                  exec_cache_dir=args.exec_cache or default_cache_dir(),
                                  workers=args.workers, progress=not args.no_progress,
                                  additional_outputs=lm_outputs)
    if args.node_predictions or args.node_checkpoint:
        if args.node_predictions:
            node_confidences = read_node_confidences(args.node_predictions)
        else:
            wanted = set(zip(table.system.tolist(), table.question_id.tolist()))
            node_confidences = node_confidences_from_checkpoint(
                args.node_checkpoint, questions, [p for p in preds if (p.system, p.question_id) in wanted],
                schemas, args.device, progress=not args.no_progress)
        n_before = len(table)
        table = add_node_confidences(table, node_confidences)
        print(f"node confidences for {len(table)} of {n_before} predictions; evaluating on those")
    table.write_csv(args.out / "base_scores.csv")  # the rows and columns every method is measured on

    methods = default_methods(list(table.columns))
    results = evaluate_methods(table, methods, args.protocol, args.folds, args.seed, fit_on=args.fit_on)
    fitted = fit_calibrators(table, methods)
    for system, cals in fitted.items():
        folder = args.out / "calibrators" / system
        folder.mkdir(parents=True, exist_ok=True)
        for name, cal in cals.items():
            cal.save(folder / (name.replace(" ", "_").replace("/", "_") + ".json"))
    accuracy = {s: float(table.label[table.system == s].mean()) for s in results}
    key = [m.name for m in methods if m.make is None or "exec" in m.name or "SCF" in m.name]
    text = format_tables(results, accuracy, auc_methods=[m for m in key if not m.startswith("scf_product")])
    mps = [m.name for m in methods if m.name.startswith("MPS(SCF")][:1]
    if mps:
        text += "\n\n" + mps_weight_report(fitted, mps[0])
    (args.out / "metrics.json").write_text(json.dumps(
        {"protocol": args.protocol, "fit_on": args.fit_on, "folds": args.folds, "seed": args.seed, "n": len(table),
         "accuracy": accuracy, "results": results}, indent=1))
    (args.out / "tables.md").write_text(text + "\n")
    print(f"{len(table)} predictions, {len(results)} systems, protocol={args.protocol}"
          + (f", fit on {args.fit_on} fold(s)" if args.protocol == "cv" else ""))
    print(text)


def _lm_samples(args, questions, preds, schemas, db_paths) -> dict[str, dict[str, list[str]]]:
    """The CLI's LM-sampled outputs for the questions with predictions and a database; also
    written to `<out>/lm_samples.jsonl` for inspection."""
    import torch

    from model.lm import load_causal_lm

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, tokenizer = load_causal_lm(args.lm_model, args.lm_gguf_file)
    model.to(device).eval()
    asked = {p.question_id for p in preds}
    chosen = [q for q in questions if q.question_id in asked and db_paths.get(q.db_id)]
    outputs = generate_lm_samples(model, tokenizer, chosen, schemas, args.lm_samples, n=args.lm_n,
                                  progress=not args.no_progress, top_p=args.lm_top_p,
                                  max_new_tokens=args.lm_max_new_tokens, batch_size=args.lm_batch_size,
                                  seed=args.seed, device=device)
    with (args.out / "lm_samples.jsonl").open("w") as f:
        for source, per_q in outputs.items():
            for qid, samples in per_q.items():
                f.write(json.dumps({"source": source, "question_id": qid, "samples": samples}) + "\n")
    return outputs


if __name__ == "__main__":
    main()
