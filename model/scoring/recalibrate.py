"""Recalibrate a saved model on a small labelled sample of your own outputs: its node calibrator
(raw node probability -> confidence) and whole-query calibrator are fitted again on a few
queries whose gold SQL you know; the node model and the site head stay as they are, so node
AUC and "look here first" do not change, only what the confidences mean.

Why: a model used away from the data it was fitted on (another benchmark, your own questions,
a model adapted with ``rat-adapt`` whose teacher learnt labels that mean something else) ranks
nodes well but its probabilities keep its training data's rates of right queries. Both
calibrators have two parameters (Platt scaling of the node probability; a logistic regression
on the least confident node's logit), so a few dozen labelled queries fit them
(``docs/research.md``, section 5, measures how many).

Labels: each row's ``gold`` SQL (or, with ``--data-root``, the question's gold), compared as in
training: by execution match where the row's database can be read (a SQLite file; a PostgreSQL,
MySQL or DuckDB database, where both queries run in their dialects: ``database_outcome``), or
the row says ``correct``, else by tree comparison with gold (``labels="tree"``: tree
comparison always).

    rat-calibrate --model adapted/ --data-root <data> --predictions labelled.jsonl --out calibrated/
    rat-calibrate --database postgresql://scorer:pw@host/shop --predictions labelled.jsonl --out calibrated/
    rat-score --model calibrated/ --data-root <data> --predictions new.jsonl
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import numpy as np

import rat
from model.calibrators import QueryCalibrator, one_class, query_aggregates
from model.data.databases import is_sqlite_path
from model.data.execution import sqlite_sql
from model.label_shift import PAIRS, query_label_for, source_rate
from model.nodes.estimator import BoostedNodeModel

LABELS = ("execution", "tree")
FOLDS = 5  # the cross-fit's folds of labelled queries (``select``)
# With ``select`` (the default), a calibrator pair is refitted only on at least this many labelled
# queries of its own: the cross-fit's folds then each hold out two queries and fit on eight. On
# fewer, one or two queries' labels decide (one wrong query refitted the shipped model to a mean
# confidence of 0.22 on a database where 76% of the queries are right); ``select=False``
# (``--always-refit``) refits on any number.
MIN_QUERIES = 2 * FOLDS
# execution outcome -> execution match (a failed gold query gives no label)
_MATCH = {"match": True, "mismatch": False, "pred_error": False, "timeout": False}


from model.errors import RecalibrationError


@dataclass
class Recalibration:
    """The recalibrated model, what it was fitted on, and how the model as given did there."""

    model: BoostedNodeModel
    queries: int
    nodes: int
    right_queries: int
    labels: Counter  # how each query was labelled: execution | given | tree
    errors: Counter = field(default_factory=Counter)  # reason -> rows not used
    # on the labelled sample, before: mean whole-query confidence, and whole-query and node ECE
    before: dict[str, float] = field(default_factory=dict)
    refitted: list[str] = field(default_factory=list)  # the calibrator pairs replaced ("all", "with database"...)
    # of those, the ones whose whole-query calibrator was kept: their queries all right or all wrong
    query_kept: list[str] = field(default_factory=list)
    # the pairs that had labelled queries of both kinds of node but were kept, and why (one line each)
    kept: dict[str, str] = field(default_factory=dict)

    @property
    def outcome(self) -> str:
        """What was done, in one line (``rat-calibrate`` prints it)."""
        if self.refitted:
            done = f"calibrators refitted ({', '.join(self.refitted)})"
            return done + "".join(f"; kept ({pair}): {why}" for pair, why in self.kept.items())
        if not self.kept:
            return "calibrators kept: no pair had labelled queries with both right and wrong nodes"
        return "calibrators kept " + "; ".join(f"({pair}): {why}" for pair, why in self.kept.items()) \
            + " (--always-refit to refit)"


def given_label(correct) -> bool | None:
    """A row's ``correct`` as a label: true / false, 1 / 0 (ints, or floats 1.0 / 0.0), or those
    words or digits as text in any case; None for anything else (no label to guess at).

    >>> [given_label(v) for v in (True, 0, 1.0, "TRUE", " false ", "1", "yes", 2, None)]
    [True, False, True, True, False, True, None, None, None]
    """
    if isinstance(correct, str):
        return {"true": True, "1": True, "false": False, "0": False}.get(correct.strip().lower())
    if isinstance(correct, (bool, int, float, np.bool_, np.integer, np.floating)) and correct in (0, 1):
        return bool(correct)
    return None


def recalibrate(model: BoostedNodeModel, rows: Sequence[Mapping], calibration: str = "platt", labels: str = "execution",
                select: bool = True, progress: bool = True, workers: int | None = None) -> Recalibration:
    """``model`` with its node and whole-query calibrators fitted again on ``rows``
    (``Scorer.score_many`` rows, each with its ``gold`` SQL; ``correct``, if a row has it, is
    its execution match, used instead of running the SQL). Rows scored with a database refit the
    calibrators used with one, rows without the ones used without (the same pair, for a model
    trained only one way). ``calibration``: ``platt`` (two parameters; default) or ``isotonic``
    (for hundreds of queries or more). ``select``: a pair is replaced only where it has at least
    ``MIN_QUERIES`` labelled queries and, cross-fitted over ``FOLDS`` folds of them, a refitted
    pair predicts whether they are right better (Brier score) than the model as given; a model
    that is calibrated already stays as it is rather than take on a few labels' noise (``kept``
    says why). Each refitted pair records what its confidences now mean (``query_label_for``) and
    the share of right queries its whole-query calibrator was fitted at (``query_rate``, read by
    ``model.label_shift``). Rows that cannot be read are counted, not fatal.

    >>> from model.scoring import Scorer
    >>> gold = "SELECT name FROM singer WHERE age > 40"
    >>> rows = [{"sql": sql, "gold": gold, "question": "Names of singers older than 40?"}
    ...         for sql in (gold, "SELECT name FROM singer WHERE age < 40", "SELECT age FROM singer")]
    >>> shipped = Scorer.pretrained().saved
    >>> result = recalibrate(shipped, rows, progress=False)
    >>> result.queries, result.right_queries, dict(result.labels)
    (3, 1, {'tree': 3})
    >>> result.refitted, result.kept  # scored without a database: too few to refit that pair on
    ([], {'without database': '3 labelled outputs, fewer than 10'})
    >>> forced = recalibrate(shipped, rows, select=False, progress=False)
    >>> forced.refitted, query_label_for(forced.model, False), query_label_for(forced.model, True)
    (['without database'], 'tree', 'execution')
    """
    from model import metrics as M
    from model.data.execution import execute_pairs
    from model.nodes.examples import node_labels
    from model.scoring.scorer import RowError, Scorer, readable_database

    if labels not in LABELS:
        raise RecalibrationError(f"labels must be execution or tree; found {labels!r}")
    if calibration not in ("platt", "isotonic"):
        raise RecalibrationError(f"calibration must be platt or isotonic; found {calibration!r}")
    errors: Counter = Counter()
    usable = []
    for row in rows:
        if not isinstance(row.get("gold"), str) or not row["gold"].strip():
            errors["no gold SQL"] += 1
        elif row.get("correct") is not None and given_label(row["correct"]) is None:
            errors["malformed correct (true/false or 1/0)"] += 1  # "maybe" or 2 is no label to guess at
        else:
            usable.append({**row, "correct": given_label(row["correct"])} if row.get("correct") is not None else row)
    if not usable:
        raise RecalibrationError(f"none of the {len(rows)} rows could be labelled ("
                                 + ", ".join(f"{why} {n}" for why, n in errors.most_common()) + ")")
    results = Scorer(model).score_many(usable, progress=progress, workers=workers,  # spans: keeps the trees
                                       features=model.features_, label_shift=False)
    errors.update(r.reason for r in results if isinstance(r, RowError))
    scored = [(row, r) for row, r in zip(usable, results) if not isinstance(r, RowError)]
    databases = [readable_database(row.get("database")) or r.with_database for row, r in scored]
    run = [k for k, (row, _) in enumerate(scored)
           if labels == "execution" and databases[k] and not isinstance(row.get("correct"), bool)]
    files = [k for k in run if is_sqlite_path(scored[k][0]["database"])]
    # SQL of another dialect runs as sqlglot writes it for SQLite; where it cannot, labels come from trees
    runnable = {k: (sqlite_sql(scored[k][0]["sql"], scored[k][1].dialect),
                    sqlite_sql(scored[k][0]["gold"], _gold_dialect(*scored[k]))) for k in files}
    files = [k for k in files if None not in runnable[k]]
    outcomes = dict(zip(files, execute_pairs([(scored[k][0]["database"], *runnable[k]) for k in files],
                                             progress=False))) if files else {}
    outcomes.update(_live_outcomes([(k, *scored[k]) for k in run if not is_sqlite_path(scored[k][0]["database"])],
                                   progress))
    kept, how = [], Counter()
    for k, (row, r) in enumerate(scored):
        if labels == "tree":
            match, way = None, "tree"
        elif isinstance(row.get("correct"), bool):
            match, way = row["correct"], "given"
        elif outcomes.get(k, "no_database") != "no_database":
            if outcomes[k] not in _MATCH:
                errors["gold SQL fails to execute"] += 1
                continue
            match, way = _MATCH[outcomes[k]], "execution"
        else:
            match, way = None, "tree"
        try:
            gold_tree = rat.to_tree(row["gold"], r.schema, _gold_dialect(row, r))
        except rat.RATError:
            errors["unparsable gold SQL"] += 1
            continue
        y = node_labels(r.tree, gold_tree, match)
        kept.append((r, databases[k], np.array(y), int(match) if match is not None else int(all(y)), way))
        how[way] += 1
    if not kept:
        raise RecalibrationError(f"none of the {len(rows)} rows could be labelled"
                                 + (f" ({', '.join(errors)})" if errors else ""))
    y_all = np.concatenate([y for _, _, y, *_ in kept])
    if (label := one_class(y_all)) is not None:
        raise RecalibrationError(f"the {len(kept)} labelled queries have only {'right' if label else 'wrong'} "
                                 "nodes: recalibration needs both")
    raw = [model.raw_node_probability(r.features) for r, *_ in kept]
    correct = np.array([c for *_, c, _ in kept])
    before_conf = np.array([r.query_confidence for r, *_ in kept])
    before = {"query_confidence": float(before_conf.mean()), "query_ece": M.ece(before_conf, correct),
              "node_ece": M.ece(np.concatenate([[n.confidence for n in r.nodes] for r, *_ in kept]), y_all)}
    new = BoostedNodeModel.from_parts(model.node_model_, model.site_model_, model.calibrator_, model.query_calibrator_, model.features_,
                     model.typical_, dict(model.info_), model.without_database_)
    modes = [True, False] if model.without_database_ is not None else [None]
    # each pair's label and the rate its whole-query calibrator was fitted at, as the model has them
    meaning = {mode: query_label_for(model, mode is not False) for mode in modes}
    rate = {mode: (found[0] if (found := source_rate(model, mode is not False)) else None) for mode in modes}
    refitted, query_kept, kept_why, pairs = [], [], {}, {}
    for mode in modes:
        picked = [k for k, (_, database, *_) in enumerate(kept) if mode is None or database == mode]
        if not picked or one_class(np.concatenate([kept[k][2] for k in picked])) is not None:
            continue  # no rows, or one class only, in this mode: its calibrators stay
        raws, ys = [raw[k] for k in picked], [kept[k][2] for k in picked]
        old_query = model.query_calibrator_for(mode is not False)
        if select and len(picked) < MIN_QUERIES:
            kept_why[PAIRS[mode]] = (f"{len(picked)} labelled output{'s' * (len(picked) != 1)}, "
                                     f"fewer than {MIN_QUERIES}")
            continue
        if select and _brier(before_conf[picked], correct[picked]) <= _brier(
                _cross_fitted(raws, ys, correct[picked], calibration, old_query, before_conf[picked]),
                correct[picked]):
            kept_why[PAIRS[mode]] = "a refit, cross-fitted, predicts these outputs no better"
            continue  # the model as given predicts these outputs as well as a refit would
        calibrator, query_calibrator = _fit_pair(raws, ys, correct[picked], calibration, old_query)
        refitted.append(PAIRS[mode])
        # what its confidences now mean: the labels they were fitted on (``correct`` given: execution)
        meant = {"tree" if kept[k][4] == "tree" else "execution" for k in picked}
        meaning[mode] = meant.pop() if len(meant) == 1 else "mixed"
        pairs[PAIRS[mode]] = {"queries": len(picked), "right_queries": int(correct[picked].sum()),
                              "label": meaning[mode]}
        if query_calibrator is old_query:
            query_kept.append(refitted[-1])  # (fitted where the model's was: its rate stays)
        else:
            rate[mode] = float(correct[picked].mean())
        if mode is False:
            new.without_database_ = (calibrator, query_calibrator)
        else:
            new.calibrator_, new.query_calibrator_ = calibrator, query_calibrator
    if refitted:  # the policy's thresholds were chosen on the confidences the old calibrators gave
        new.info_.pop("policy", None)
        # each pair's label and rate (model.label_shift reads the rate): the refitted ones' are
        # this sample's, the others' stay what they were (written out: the keys now differ by pair)
        new.info_["query_label"], new.info_["query_rate"] = meaning[modes[0]], rate[modes[0]]
        if False in modes:
            new.info_["query_label_without_database"] = meaning[False]
            new.info_["query_rate_without_database"] = rate[False]
    new.info_["recalibrated_on"] = {"queries": len(kept), "nodes": len(y_all), "right_queries": int(correct.sum()),
                                   "labels": dict(how), "calibration": calibration,
                                   "with_database": int(sum(d for _, d, *_ in kept)), "refitted": refitted,
                                   "pairs": pairs, "created": date.today().isoformat(),
                                   "before": {k: round(v, 4) for k, v in before.items()}}
    return Recalibration(new, len(kept), len(y_all), int(correct.sum()), how, errors, before, refitted, query_kept,
                         kept_why)


def _live_outcomes(rows: Sequence[tuple[int, Mapping, object]], progress: bool = False) -> dict[int, str]:
    """``execute_pairs``' outcome of each ``(k, row, scored)`` whose database is a URL, a DuckDB
    file, a connection or a ``Database`` (PostgreSQL, MySQL, DuckDB): both queries run on it,
    read-only, each in its dialect (``database_outcome``); each database opened once."""
    from tqdm.auto import tqdm

    from model.data.databases import Database, DatabaseError, open_database
    from model.data.execution import database_outcome

    opened: dict[object, Database | None] = {}
    outcomes = {}
    try:
        for k, row, scored in tqdm(rows, desc="labelling", unit="query", disable=not progress or not rows,
                                   leave=False):
            target = row["database"]
            key = str(target) if isinstance(target, (str, Path)) else id(target)
            if key not in opened:
                try:
                    opened[key] = open_database(target)
                except DatabaseError:
                    opened[key] = None  # (scored with it a moment ago): labels from trees
            if opened[key] is not None:
                outcomes[k] = database_outcome(opened[key], row["sql"], row["gold"], scored.dialect,
                                               _gold_dialect(row, scored), scored.schema)
    finally:
        for key, database in opened.items():
            if database is not None and not any(database is row["database"] for _, row, _ in rows):
                database.close()
    return outcomes


def _gold_dialect(row: Mapping, scored) -> str:
    """The dialect of a row's gold SQL: its ``gold_dialect`` (a benchmark's gold is SQLite's), else
    the dialect its prediction was read in."""
    return str(row.get("gold_dialect") or scored.dialect).lower()


def _fit_pair(raws: list[np.ndarray], ys: list[np.ndarray], correct: np.ndarray, calibration: str,
              old_query: QueryCalibrator):
    """The node calibrator (raw node probability -> label) and the whole-query calibrator (its
    confidences' ``query_aggregates`` -> query right) of labelled queries; ``old_query``, the
    model's, where the queries are all right or all wrong (fitted, it would be a constant)."""
    from model.calibrators import fit_calibrator

    calibrator = fit_calibrator(calibration, np.concatenate(raws), np.concatenate(ys))
    if one_class(correct) is not None:
        return calibrator, old_query
    aggregates = np.array([query_aggregates(calibrator.confidence(r)) for r in raws])
    return calibrator, QueryCalibrator.fit(aggregates, correct)


def _cross_fitted(raws: list[np.ndarray], ys: list[np.ndarray], correct: np.ndarray, calibration: str,
                  old_query: QueryCalibrator, given: np.ndarray, folds: int = FOLDS) -> np.ndarray:
    """Whole-query confidences of a refitted pair, each query's from a pair fitted on the other
    folds' queries (folds of queries, seeded); a fold whose training queries have one class of
    nodes only gets their share of right queries, and one with no training queries (a single
    labelled query) the model's own confidences ``given``: nothing was fitted, so a refit wins
    nothing there."""
    order = np.random.default_rng(0).permutation(len(raws)) % min(folds, len(raws))
    out = np.empty(len(raws))
    for f in np.unique(order):
        train, test = np.flatnonzero(order != f), np.flatnonzero(order == f)
        if len(train) == 0:
            out[test] = given[test]
            continue
        if one_class(np.concatenate([ys[k] for k in train])) is not None:
            out[test] = correct[train].mean()
            continue
        calibrator, query_calibrator = _fit_pair([raws[k] for k in train], [ys[k] for k in train], correct[train],
                                                 calibration, old_query)
        out[test] = [query_calibrator.confidence(np.array([query_aggregates(calibrator.confidence(raws[k]))]))[0]
                     for k in test]
    return out


def _brier(p: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((np.asarray(p, dtype=float) - y) ** 2))
