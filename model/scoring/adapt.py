"""Adapt a single-system model to your own outputs, without labels: a consensus model (the
teacher) reads several systems' answers to the same questions side by side and says how likely
each node is right; the single-system model's node model is fitted again on those
probabilities, over the same questions' feature rows. The adapted model then scores one
system's query alone, as before, on the questions and databases it was adapted to.

Why: a model fitted on one benchmark loses on another (Spider -> BIRD), and the consensus track,
which reads the other systems' answers, loses much less (``docs/research.md``, section 5);
what it reads about your outputs is what the single-system model learns from here. No gold SQL
and no training data are needed: two saved models (by default the shipped ones: ``pretrained``,
and ``pretrained:spider_consensus`` as the teacher) and your outputs.

What is kept from the single-system model: its feature columns, settings (``hgb``,
``monotone``, ``database``, ``site_context``) and reasons' feature names. What is new: the node
model, the site head (fitted on the teacher's site scores, each node weighted by how likely its
query is wrong), the typical feature values, and the whole-query calibrator (fitted against the
teacher's whole-query confidences). The node model learns the teacher's calibrated
probabilities, so its own output is the confidence (no node calibrator). Where your outputs are
right more or less often than the teacher's training data (BIRD's far less often than
Spider's), those probabilities are first moved to the rates EM estimates on your outputs
(label shift, ``model.label_shift``; for ``MIN_QUERIES`` or more outputs, where the estimate
fits a label shift): without that, the adapted confidences keep the teacher's benchmark's rates.

    rat-adapt --schema tables.json --predictions system_a.jsonl system_b.jsonl system_c.jsonl --out adapted/
    rat-score --model adapted/ --schema tables.json --predictions new.jsonl
"""

from __future__ import annotations

import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date

import numpy as np

from model import label_shift as L
from model.calibrators import QueryCalibrator, query_aggregates
from model.errors import AdaptError
from model.nodes.estimator import BoostedNodeModel, kind_group, typical_values

# questions that two or more systems answer: the teacher reads nothing else about the outputs
MIN_SHARED_QUESTIONS = 20


@dataclass
class Adaptation:
    """The adapted model and what it was adapted on."""

    model: BoostedNodeModel
    queries: int  # outputs the teacher scored (rows that could not be read: ``errors``)
    nodes: int
    questions: int
    shared_questions: int  # questions answered by two or more systems (what the teacher reads)
    systems: dict[str, int]
    errors: Counter = field(default_factory=Counter)  # reason -> rows not used
    teacher_rates: tuple[float, float] | None = None  # right nodes, right queries where the teacher was fitted
    estimated_rates: tuple[float, float] | None = None  # the same, estimated on the outputs (label_shift)
    query_shift: L.RateShift | None = None  # the right queries' estimate, with its interval
    # label_shift asked for but nothing moved: why, in one line (rat-adapt prints it); None otherwise
    not_shifted: str | None = None


def adapt(model: BoostedNodeModel, teacher: BoostedNodeModel, rows: Sequence[Mapping], seed: int = 0,
          progress: bool = True, workers: int | None = None, hgb: Mapping | None = None,
          label_shift: bool = False, check: Callable[[list], None] | None = None) -> Adaptation:
    """``model`` (single-system) fitted again on ``teacher``'s (consensus) node confidences of
    ``rows`` (``Scorer.score_many`` rows, each with its ``question_id`` and ``system``: several
    systems' answers to the same questions). Rows that cannot be read are counted, not fatal.
    ``hgb``: the node model's settings (default: ``model``'s own, with its monotonic constraints).
    ``label_shift``: the teacher's node and whole-query confidences are moved from the rates of
    right nodes and queries it was trained on to the rates EM estimates on ``rows``
    (``model.label_shift``; skipped for fewer than ``model.label_shift.MIN_QUERIES`` scored
    rows and for a teacher whose model card lacks its rates, and not applied where the estimates
    do not fit a label shift, as with ``rat-score --label-shift``: the right queries' interval
    reaching 0 or 1, or the right nodes' rate within ``model.label_shift.EDGE`` of them;
    ``not_shifted`` says why; off by default: measured on Spider's systems, it moved the rate of
    right queries away from theirs, docs/scoring.md). ``check``: called with the teacher's
    ``ScoredQuery`` of each row it scored, before anything is fitted; what it raises stops the
    adaptation there (rat-adapt's outputs read against another schema: the tables as the teacher
    read them, each output parsed once).

    >>> from model.scoring import Scorer
    >>> single = Scorer.pretrained().saved
    >>> adapt(single, single, [])
    Traceback (most recent call last):
    ...
    model.errors.AdaptError: the teacher reads one system's answer alone (a model=features run with model.groups=single+consensus reads the others)
    """
    from model.nodes.estimator import (
        BoostedParams,
        dropped_database,
        fit_classifier,
        without_database,
    )
    from model.nodes.features import CONSENSUS_FEATURES
    from model.scoring.scorer import RowError, Scorer, readable_database

    if model.quantiles_ is not None or teacher.quantiles_ is not None:
        raise AdaptError("a model that reads count features as quantiles (model.quantiles=true) cannot be "
                         "adapted yet; score your outputs with --quantiles rows instead",
                         "model" if model.quantiles_ is not None else "teacher")
    if not set(teacher.features_) & set(CONSENSUS_FEATURES):
        raise AdaptError("the teacher reads one system's answer alone (a model=features run with "
                         "model.groups=single+consensus reads the others)", "teacher")
    if set(model.features_) & set(CONSENSUS_FEATURES):
        raise AdaptError("the model to adapt reads other systems' answers: adapt a single-system model", "model")
    systems: dict[str, set] = defaultdict(set)  # question -> the systems answering it
    for r in rows:
        if r.get("question_id") is not None:
            systems[str(r["question_id"])].add(str(r.get("system")))
    shared = sum(len(s) > 1 for s in systems.values())
    if shared < MIN_SHARED_QUESTIONS:
        raise AdaptError(f"{shared} questions are answered by two or more systems; at least "
                         f"{MIN_SHARED_QUESTIONS} are needed (rows need a question_id and a system; give one "
                         "file per system)")
    results = Scorer(teacher).score_many(rows, progress=progress, spans=False, workers=workers,
                                         features=model.features_, label_shift=False)
    errors = Counter(r.reason for r in results if isinstance(r, RowError))
    scored = [(row, r) for row, r in zip(rows, results) if not isinstance(r, RowError)]
    if not scored:
        raise AdaptError(f"none of the {len(rows)} rows could be scored ({', '.join(errors)})")
    if check is not None:
        check([r for _, r in scored])
    x = np.vstack([r.features for _, r in scored])
    soft = np.concatenate([[n.confidence for n in r.nodes] for _, r in scored])
    target = np.array([r.query_confidence for _, r in scored])
    rates = _source_rates(teacher) if label_shift and len(scored) >= L.MIN_QUERIES else None
    estimated = query_shift = not_shifted = None
    if label_shift and len(scored) < L.MIN_QUERIES:
        not_shifted = (f"label shift: {len(scored)} outputs scored, fewer than {L.MIN_QUERIES}: no rate "
                       "estimated, the teacher's confidences not moved")
    elif label_shift and rates is None:
        not_shifted = "label shift: the teacher's model card lacks its rates of right nodes and queries: not moved"
    if rates is not None:
        node_rate = float(L.em_rate(soft, rates[0]))
        query_shift = L.estimate(target, rates[1], str(teacher.info_["trained_on"].get("labels") or "execution"))
        if not query_shift.fits:  # (EM ran to 0 or 1: moved there, every soft label would be one class)
            not_shifted = str(query_shift)
        elif not L.EDGE < node_rate < 1 - L.EDGE:
            not_shifted = (f"label shift: right nodes estimated {node_rate:.3f}, within {L.EDGE} of 0 or 1: these "
                           "confidences do not fit a label shift from the teacher's rates, not moved")
        else:
            soft = L.shift(soft, rates[0], node_rate)
            target = L.shift(target, rates[1], query_shift.rate)
            estimated = (node_rate, query_shift.rate)
    config = model.info_.get("config", {})
    database = config.get("database", "with")
    with_db = np.array([readable_database(row.get("database")) for row, _ in scored])
    sizes = [len(r.nodes) for _, r in scored]
    if database == "without":
        x = without_database(x, model.features_)
    elif database in ("dropout", "both"):  # as the model was trained: a random half without
        blank = np.repeat(dropped_database(len(scored), seed) & with_db, sizes)
        x = without_database(x, model.features_, np.flatnonzero(blank))
    settings = BoostedParams(hgb=dict(hgb or config.get("hgb") or BoostedParams().hgb),
                             monotone=bool(config.get("monotone"))).node_hgb(model.features_)
    n = len(x)
    if progress:
        print(f"adapt: fitting the node model on {n} nodes of {len(scored)} outputs "
              f"({settings.get('max_iter', 100)} trees)", file=sys.stderr, flush=True)
    started = time.monotonic()
    node_model = fit_classifier(np.vstack([x, x]), np.r_[np.ones(n), np.zeros(n)], model.features_, settings, seed,
                                sample_weight=np.r_[soft, 1 - soft])
    if progress:
        print(f"adapt: node model fitted in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    systems = dict(sorted(Counter(str(row.get("system")) for row, _ in scored).items()))
    questions = len({str(r.question_id) for _, r in scored})
    adapted_on = {"outputs": len(scored), "questions": questions, "shared_questions": shared,
                  "databases": len({str(r.db_id) for _, r in scored}), "systems": systems,
                  # label shift: the teacher's rates of right nodes / queries, and those estimated here
                  "teacher_rates": list(rates) if rates else None,
                  "estimated_rates": [round(r, 4) for r in estimated] if estimated else None,
                  "label_shift": query_shift.to_dict() if query_shift else None, "not_shifted": not_shifted}
    adapted = BoostedNodeModel.from_parts(node_model, model.site_model_, None, model.query_calibrator_, model.features_,
                         model.typical_, _adapted_info(model, teacher, adapted_on), None)
    raw = adapted.raw_node_probability(x)
    confidence = np.split(raw, np.cumsum(sizes)[:-1])
    aggregates = np.array([query_aggregates(c) for c in confidence])
    adapted.query_calibrator_ = QueryCalibrator.fit(np.vstack([aggregates, aggregates]),
                                                   np.r_[np.ones(len(target)), np.zeros(len(target))],
                                                   sample_weight=np.r_[target, 1 - target])
    kinds = [kind_group(node.kind) for _, r in scored for node in r.nodes]
    adapted.typical_ = typical_values(x, (soft >= 0.5).astype(int), kinds, model.features_)
    sites = np.concatenate([[n.site_score for n in r.nodes] for _, r in scored])
    if model.site_model_ is not None and not np.isnan(sites).any():
        adapted.site_model_ = _site_head(model, x, raw, [[len(n.children) for n in r.nodes] for _, r in scored],
                                        sites, np.repeat(1 - target, sizes), seed)
    return Adaptation(adapted, len(scored), n, questions, shared, systems, errors, rates, estimated,
                      query_shift, not_shifted)


def _site_head(model: BoostedNodeModel, x: np.ndarray, raw: np.ndarray, arities: list[list[int]], sites: np.ndarray,
               wrong: np.ndarray, seed: int):
    """The site head fitted again on the teacher's site scores (soft labels: where a wrong query
    goes wrong), each node weighted by how likely its query is wrong (the site head answers "if
    wrong, where?"); with ``site_context`` it reads the adapted node model's probabilities."""
    from model.nodes.estimator import fit_classifier
    from model.nodes.sites import context_names, with_context

    names = tuple(model.features_)
    if model.site_context:
        x, names = with_context(x, raw, arities, names), (*names, *context_names(names))
    config = model.info_.get("config", {})
    settings = dict(config.get("hgb") or {})
    sites = np.clip(sites, 0.0, 1.0)
    return fit_classifier(np.vstack([x, x]), np.r_[np.ones(len(x)), np.zeros(len(x))], names, settings, seed,
                          sample_weight=np.r_[sites * wrong, (1 - sites) * wrong])


def _source_rates(teacher: BoostedNodeModel) -> tuple[float, float] | None:
    """(right nodes, right queries) as shares of what the teacher was trained on, from its card."""
    trained = teacher.info_.get("trained_on", {})
    if not all(trained.get(k) for k in ("correct_nodes", "nodes", "correct_queries", "examples")):
        return None
    return trained["correct_nodes"] / trained["nodes"], trained["correct_queries"] / trained["examples"]


def _adapted_info(model: BoostedNodeModel, teacher: BoostedNodeModel, adapted_on: dict) -> dict:
    """The model card of the adapted model: the base model's description under ``base_model``
    (its metrics are the base model's, measured before adaptation)."""
    base = {k: model.info_.get(k) for k in ("method", "trained_on", "metrics", "created", "pointer_reliability")}
    # the site head is fitted again: the base model's pointer reliability does not describe it, nor
    # its policy (thresholds chosen on the base model's out-of-fold confidences) the new confidences
    return {**{k: v for k, v in model.info_.items()
               if k not in ("metrics", "trained_on", "created", "pointer_reliability", "policy")},
            "created": date.today().isoformat(),
            "method": f"{model.info_.get('method', 'boosted node features')}, adapted",
            "metrics": {}, "trained_on": {"adapted_on": adapted_on}, "base_model": base,
            # its whole-query confidence learns the teacher's: it means what the teacher's means
            "query_label": teacher.query_label,
            "teacher": {k: teacher.info_.get(k) for k in ("method", "trained_on", "created")}}
