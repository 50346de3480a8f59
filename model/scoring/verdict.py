"""What to do with a generated query: run it, ask a person, or send it back to be generated again.

A ``Policy`` turns the whole-query confidence into that action. It is stated as targets (at most
5% wrong among the queries run; at most 25% right among those sent back) and its thresholds are
chosen on the model's out-of-fold risk-coverage curve: the whole-query confidence of every
out-of-fold prediction against its execution match (``execution_match``; a prediction without a
database to run on counts by its tree, and the policy says how many did). A threshold is the
lowest one whose 95% upper bound (Wilson) on the wrong share among the queries it lets run is
within the target, so the target holds on new queries like those, not only on the curve. The
policy is saved with the model (``model.json``'s ``policy``).

>>> policy = choose_policy([0.9] * 80 + [0.5] * 10 + [0.1] * 10, [1] * 85 + [0] * 15)
>>> policy.run_at, policy.regenerate_below, policy.action(0.95), policy.action(0.5), policy.action(0.05)
(0.9, 0.5, 'run', 'review', 'regenerate')
>>> from model import Scorer
>>> verdict = Scorer.pretrained().check("SELECT name FROM singer WHERE country = 'Frence'",
...     question="Singers from France?", schema={"singer": ["singer_id", "name", "country"]})
>>> verdict.action in ("run", "review", "regenerate"), type(verdict).__name__
(True, 'Verdict')
>>> verdict.look_here_first["text"] in verdict.sql
True

``Scorer.check`` gives a ``Verdict``; ``guard`` wraps a ``run_sql(sql)`` function so that only
queries whose verdict is "run" reach it.

    python -m model.scoring.policy --model DIR --predictions RUN/predictions/test.jsonl \\
        --max-wrong 0.05 [--write]
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import math
import os
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from model.errors import UsageError, check_seconds
from model.nodes.policy import ACTIONS, MAX_RIGHT_REGENERATED, MAX_WRONG, Policy
from model.scoring.reasons import named, sql_literal

if TYPE_CHECKING:
    from model.scoring.scorer import ScoredQuery, Scorer

Z_95 = 1.6449  # one-sided 95% normal quantile: the Wilson bound the thresholds are chosen with
FEEDBACK_REASONS = 4  # sentences of feedback at most
# literals a verdict looks up in a whole table (each at most 2 s) where the values read lack them:
# a query of many literals (an IN list of hundreds) costs no more than these
WHOLE_TABLE_LOOKUPS = 4
# reasons about a literal and the column it is compared with: a verdict says them as the
# literal's own sentence (``_literal_sentence``: looked up in the column's stored values, its
# closest ones and the other columns that store it named), never of a range's bound
VALUE_FEATURES = ("value_in_column", "value_in_column_nocase", "literal_near_match",
                  "compared_literal_found", "subtree_min_value_in_column", "literal_elsewhere")
# one fact in other words, one sentence: which features of a reason say which fact
SAME_FACT = {"exec_empty": "rows", "exec_log_rows": "rows", "value_in_column": "found",
             "compared_literal_found": "found", "subtree_min_value_in_column": "found"}
NO_SCHEMA = "the tables and columns were not checked (no schema given)"


def wilson_upper(failures: int, n: int, z: float = Z_95) -> float:
    """One-sided upper bound on a rate from ``failures`` of ``n`` (Wilson score interval).

    >>> round(wilson_upper(5, 100), 3), wilson_upper(0, 0)
    (0.099, 1.0)
    """
    if n == 0:
        return 1.0
    p = failures / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return min(1.0, (centre + spread) / (1 + z * z / n))


def choose_policy(confidence: Sequence[float], correct: Sequence[int], max_wrong: float = MAX_WRONG,
                  max_right_regenerated: float = MAX_RIGHT_REGENERATED, label: str = "execution_match",
                  z: float = Z_95) -> Policy:
    """The thresholds that meet the targets on out-of-fold ``(confidence, correct)`` pairs: the
    lowest ``run_at`` whose run set's wrong share has its upper bound within ``max_wrong`` (the
    most queries run), the highest ``regenerate_below`` (up to ``run_at``) whose set sent back
    has its right share's upper bound within ``max_right_regenerated``. Thresholds fall only on
    the pairs' own confidences, so tied queries get one action."""
    conf = np.asarray(confidence, dtype=float)
    right = np.asarray(correct, dtype=int)
    if conf.shape != right.shape or conf.ndim != 1 or not len(conf) or np.isnan(conf).any():
        raise UsageError(f"a policy needs as many confidences as labels, none NaN; found {conf.shape} "
                         f"and {right.shape}")
    if not (0 < max_wrong < 1 and 0 < max_right_regenerated < 1):
        raise UsageError("the targets must be shares strictly between 0 and 1")
    ascending = np.sort(conf)
    wrong_below = np.concatenate([[0], np.cumsum(1 - right[np.argsort(conf, kind="stable")])])
    levels = np.unique(conf)  # each distinct confidence; a threshold t splits them at conf >= t
    below = np.searchsorted(ascending, levels, side="left")  # queries under each threshold
    n, wrong = len(conf), int(np.sum(right == 0))
    run_at = None
    for t, k in zip(levels, below):  # lowest first: the first that holds runs the most queries
        if wilson_upper(wrong - int(wrong_below[k]), n - int(k), z) <= max_wrong:
            run_at = float(t)
            break
    regenerate_below = 0.0
    for t, k in zip(levels, below):  # the set sent back (conf < t) grows with t
        if run_at is not None and t > run_at:
            break
        if k and wilson_upper(int(k) - int(wrong_below[k]), int(k), z) <= max_right_regenerated:
            regenerate_below = float(t)
    policy = Policy(run_at, regenerate_below, max_wrong, max_right_regenerated, label)
    return Policy(run_at, regenerate_below, max_wrong, max_right_regenerated, label,
                  measure(policy, conf, right))


def measure(policy: Policy, confidence: Sequence[float], correct: Sequence[int]) -> dict:
    """The shares of queries each action gets under ``policy``, and how many of them are wrong
    (run) or right (sent back)."""
    conf, right = np.asarray(confidence, dtype=float), np.asarray(correct, dtype=int)
    actions = np.array([policy.action(c) for c in conf])
    out: dict[str, float] = {"queries": len(conf), "wrong": round(float(np.mean(right == 0)), 4)}
    for action in ACTIONS:
        chosen = actions == action
        out[f"{action}_share"] = round(float(chosen.mean()), 4)
    run, back = actions == "run", actions == "regenerate"
    out["run_wrong"] = round(float(np.mean(right[run] == 0)), 4) if run.any() else None
    out["regenerate_right"] = round(float(np.mean(right[back] == 1)), 4) if back.any() else None
    return out


# ---------------------------------------------------------------------------------------------
# Out-of-fold pairs: from a training run (train.py) or its predictions file


def query_confidences(model, node_confidences: Sequence[Sequence[float]], database: bool = True) -> np.ndarray:
    """Whole-query confidences (as ``Scorer`` gives them, scored with or without a database) of
    queries' out-of-fold node confidences."""
    from model.calibrators import query_aggregates

    aggregates = np.array([query_aggregates(c) for c in node_confidences]).reshape(len(node_confidences), -1)
    return model.query_calibrator_for(database).confidence(aggregates)


def labels_of(execution_match: Sequence[bool | None], node_labels: Sequence[Sequence[int]]
              ) -> tuple[np.ndarray, str]:
    """0/1 whole-query labels by execution match, by the tree (every node right) only where a
    query has no execution label; and the name of what was used."""
    by_tree = [i for i, e in enumerate(execution_match) if e is None]
    labels = np.array([int(bool(e)) if e is not None else int(all(n)) for e, n in zip(execution_match, node_labels)])
    if not by_tree:
        return labels, "execution_match"
    if len(by_tree) == len(labels):
        return labels, "tree (no execution labels)"
    return labels, f"execution_match ({len(by_tree)} of {len(labels)} without a database: by tree)"


def training_policy(model, examples: Sequence, node_confidences: Sequence[Sequence[float]],
                    max_wrong: float = MAX_WRONG, max_right_regenerated: float = MAX_RIGHT_REGENERATED,
                    without_database: Sequence[Sequence[float]] | None = None) -> Policy | None:
    """The policy of a freshly fitted model from its run's out-of-fold node confidences of
    ``examples`` (``model.nodes.examples.NodeExample``), and with ``without_database`` (the same
    examples' node confidences scored without databases) its policy for such queries. None
    without any examples."""
    if not len(examples):
        return None
    labels, name = labels_of([e.execution_match for e in examples], [e.node_labels for e in examples])
    blind = None
    if without_database is not None and model.without_database_ is not None:
        blind = choose_policy(query_confidences(model, without_database, database=False), labels,
                              max_wrong, max_right_regenerated, name)
    policy = choose_policy(query_confidences(model, node_confidences), labels, max_wrong,
                           max_right_regenerated, name)
    return replace(policy, without_database=blind)


def prediction_pairs(model, rows: Sequence[Mapping], database: bool = True
                     ) -> tuple[np.ndarray, np.ndarray, str, np.ndarray]:
    """(whole-query confidence, label, label name, fold) of a run's prediction rows
    (``<run>/predictions/test.jsonl``, or ``test_without_database.jsonl`` with ``database``
    False): their ``query_confidence`` where every row has one, else the model's whole-query
    calibrator (with or without databases) on their out-of-fold node confidences."""
    if not rows:
        raise UsageError("no prediction rows")
    missing = [k for k, r in enumerate(rows) if not r.get("node_confidences")]
    if missing:
        raise UsageError(f"row {missing[0]}: no node_confidences (a train.py predictions file?)")
    labels, name = labels_of([r.get("execution_match") for r in rows], [r.get("node_labels") or [0] for r in rows])
    folds = np.array([int(r.get("fold", 0) or 0) for r in rows])
    if all(isinstance(r.get("query_confidence"), (int, float)) for r in rows):  # written by the run
        return np.array([float(r["query_confidence"]) for r in rows]), labels, name, folds
    return query_confidences(model, [r["node_confidences"] for r in rows], database), labels, name, folds


def held_out(confidence: np.ndarray, labels: np.ndarray, folds: np.ndarray, **targets) -> dict:
    """Each fold's queries under the policy chosen on the other folds, pooled: whether the
    targets hold on queries the thresholds were not chosen on."""
    actions = np.empty(len(confidence), dtype=object)
    for fold in np.unique(folds):
        rest = folds != fold
        policy = choose_policy(confidence[rest], labels[rest], **targets)
        actions[~rest] = [policy.action(c) for c in confidence[~rest]]
    run, back = actions == "run", actions == "regenerate"
    return {"folds": len(np.unique(folds)), "run_share": round(float(run.mean()), 4),
            "run_wrong": round(float(np.mean(labels[run] == 0)), 4) if run.any() else None,
            "regenerate_share": round(float(back.mean()), 4),
            "regenerate_right": round(float(np.mean(labels[back] == 1)), 4) if back.any() else None}


# ---------------------------------------------------------------------------------------------
# The verdict of one scored query


@dataclass
class Verdict:
    """What to do with one query (``action``: run | review | regenerate), why, and ``feedback``:
    a short text a text-to-SQL model can act on when the query is sent back."""

    action: str
    query_confidence: float
    look_here_first: dict  # {"text", "span", "label", "node", "site_score"}
    reasons: list[str]
    feedback: str
    sql: str
    policy: str  # the policy's stated target
    scored: ScoredQuery | None = field(default=None, repr=False)

    @property
    def scored_with_database(self) -> bool | None:
        """Whether the query was scored with its database (its result, its literals looked up)."""
        return None if self.scored is None else self.scored.with_database

    @property
    def scored_with_schema(self) -> bool | None:
        """Whether the query was scored with a schema (given, or read from its database): its
        tables and columns checked."""
        return None if self.scored is None else self.scored.schema is not None

    def to_dict(self) -> dict:
        return {"action": self.action, "query_confidence": round(self.query_confidence, 6),
                "look_here_first": self.look_here_first, "reasons": list(self.reasons),
                "feedback": self.feedback, "sql": self.sql, "policy": self.policy,
                "scored_with_database": self.scored_with_database, "scored_with_schema": self.scored_with_schema}

    def __str__(self) -> str:
        return f"{self.action} (query confidence {self.query_confidence:.2f}): {self.feedback}"


def verdict_of(scored: ScoredQuery, policy: Policy, database: str | Path | None = None) -> Verdict:
    """The verdict of a query ``Scorer.score`` scored (with reasons). Scored without its
    database, the policy's thresholds for such queries apply (``Policy.without_database``); a
    policy without them sends a query its thresholds would run to review instead, since its
    target was measured on queries scored with their databases; so is a query that reads no
    table (every gold query of Spider and BIRD reads one; the shipped model gives `SELECT 1`
    0.94: docs/scoring.md), and one scored without any schema (nor a database to read one
    from): none of its tables and columns was checked, and every query the thresholds were
    chosen on had its schema. A query that did not run to the end on its database says so. A
    double-quoted text read as a string where the query likely means a column (``quoted_names``:
    `SELECT "Unit Prce"`, which SQLite runs, scored 0.95) is never run either: its sentence leads
    the reasons, and the first such text is the verdict's place to look first, in place of the
    model's (``ScoredQuery.look_here_first``, which ``verdict.scored`` keeps)."""
    chosen = policy.for_database(scored.with_database)
    action = (chosen or policy).action(scored.query_confidence)
    notes, fixes = [], []  # (fixes: for the model that wrote the query too, in its feedback)
    if scored.schema is None:
        action = "review" if action == "run" else action
        fixes.append(NO_SCHEMA)
    if action == "run" and chosen is None:
        action = "review"
        notes.append("scored without its database (the policy's target holds for queries scored with one)")
    if action == "run" and not any(n.kind == "table" for n in scored.nodes):
        action = "review"  # (`SELECT 1`, `SELECT 'France'`: scored 0.94 by the shipped model)
        fixes.append("it reads no table: no query the policy's target was measured on answers from none")
    quoted = quoted_names(scored)
    if quoted and action == "run":
        action = "review"  # (a name SQLite read as a string: `SELECT "Unit Prce"` scored 0.95)
    target = (chosen or policy).target
    if not scored.with_database and chosen is not None:
        target += "; thresholds for queries scored without their database"
    look = scored.nodes[next(iter(quoted), scored.look_here_first)]
    where = {"text": look.text or look.label, "span": list(look.span) if look.span else None,
             "label": look.label, "node": look.index, "site_score": None if math.isnan(look.site_score)
             else round(look.site_score, 4)}
    sentences = list(quoted.values())
    sentences += _reason_sentences(scored, database)[:max(0, FEEDBACK_REASONS - len(sentences))]
    ran = _execution_sentence(scored.execution_error)
    if ran and ran not in sentences:
        fixes.insert(0, ran)
    return Verdict(action, scored.query_confidence, where, sentences + fixes + notes,
                   _feedback(scored, action, where, sentences + fixes), scored.sql, target, scored)


# where a double-quoted text that is a string stands for a column: an output, a key of GROUP BY or
# ORDER BY, an aggregate's argument (and a comparison's operand where no other holds a column)
COLUMN_PLACES = ("Project", "Groupby", "Orderby_asc", "Orderby_desc", "Distinct", "Count", "Sum", "Avg",
                 "Min", "Max", "Group_concat")
NAME_LIKE = 0.8  # elsewhere, a text at least this similar (difflib) to a column name of the query's tables
_DOUBLE_QUOTED = re.compile(r'(?s)"(?:[^"]|"")*"')
_DIALECT_NAMES = {"sqlite": "SQLite", "mysql": "MySQL", "bigquery": "BigQuery", "databricks": "Databricks"}


def quoted_names(scored: ScoredQuery) -> dict[int, str]:
    """The sentence of each double-quoted text the query's dialect read as a string where the
    query likely means a column (by node index, in post-order): SQLite reads `"x"` that
    names no column of the query's tables as the string 'x', MySQL, BigQuery and Databricks
    every `"x"`, so a misspelled name, `SELECT "Unit Prce"`, is a constant the model may score
    high. Said where a schema is given and the text stands where a column would
    (``COLUMN_PLACES``; a comparison's operand where no other operand holds a column), or
    elsewhere where it is ``NAME_LIKE`` a column name of the query's tables; never where it is
    compared with a column (`country = "France"`: Spider's and BIRD's queries write their
    values so).

    >>> from model import Scorer
    >>> scored = Scorer.pretrained().score('SELECT "Unit Prce" FROM orders WHERE country = "France"',
    ...     schema={"orders": ["id", "unit price", "country"]}, reasons=False)
    >>> print(*quoted_names(scored).values())
    "Unit Prce" names no column of orders (closest: "unit price"); SQLite reads it as the string 'Unit Prce'
    """
    from rat.dialects import dialect

    schema = scored.schema
    if schema is None:
        return {}
    tables = list(dict.fromkeys(n.label for n in scored.nodes if n.kind == "table" and n.label in schema.tables))
    columns = list(dict.fromkeys(c for t in tables for c in schema.tables[t] if c != "*"))
    parent_of = {c: n for n in scored.nodes for c in n.children}
    shown = _DIALECT_NAMES.get(scored.dialect, scored.dialect)
    out = {}
    for node in scored.nodes:
        text = node.text or ""
        if node.kind != "value" or not _DOUBLE_QUOTED.fullmatch(text):
            continue
        name = _sql_text(text)
        side, parent = node.index, parent_of.get(node.index)
        if parent is not None and parent.kind == "Val_list":
            side, parent = parent.index, parent_of.get(parent.index)
        if parent is not None and parent.kind in COMPARISONS:
            if any(_holds_column(scored, c) for c in parent.children if c != side):
                continue  # a value compared with a column: `country = "France"`
            placed = True  # (`"Citty" = 'x'`: no column to compare with)
        else:
            placed = parent is not None and parent.kind in COLUMN_PLACES
        closest = difflib.get_close_matches(name.lower(), columns, n=1, cutoff=0.6)
        if not placed and not difflib.get_close_matches(name.lower(), columns, n=1, cutoff=NAME_LIKE):
            continue
        if dialect(scored.dialect).double_quoted_strings:  # (SQLite: a name where it names a column)
            of = f" of {named(tables)}" if tables else ""
            near = f" (closest: {_quoted_name(closest[0], chr(34))})" if closest else ""
            out[node.index] = f"{text} names no column{of}{near}; {shown} reads it as the string {sql_literal(name)}"
        else:
            near = f" (closest column: {_quoted_name(closest[0], '`')})" if closest else ""
            out[node.index] = (f"{shown} reads {text} as the string {sql_literal(name)}, not a column: "
                               f"it quotes names with backticks{near}")
    return out


def _holds_column(scored: ScoredQuery, index: int) -> bool:
    stack = [index]
    while stack:
        node = scored.nodes[stack.pop()]
        if node.kind == "column":
            return True
        stack.extend(node.children)
    return False


def _quoted_name(name: str, quote: str) -> str:
    return quote + name.replace(quote, quote * 2) + quote


def _execution_sentence(error: str | None) -> str | None:
    """What a verdict says of a query that did not run to the end on its database (its result
    unknown: it gives no reason of its own) or failed there; None where it ran or had none.

    >>> _execution_sentence("timeout after 5 s"), _execution_sentence(None)
    ('the query did not finish within 5 s against the database', None)
    >>> _execution_sentence("result has more than 1000000 rows")
    'the query was stopped on the database (result has more than 1000000 rows): its result was not checked'
    """
    from model.data.execution import NOT_WRITTEN, unfinished
    from model.nodes.features import NOT_RUN_PARAMETERS
    from model.scoring.reasons import failed_run

    if error is None:
        return None
    if timeout := re.fullmatch(r"timeout after (\S+) s", error):
        return f"the query did not finish within {timeout[1]} s against the database"
    if unfinished(error):
        return f"the query was stopped on the database ({error}): its result was not checked"
    if error.startswith((NOT_RUN_PARAMETERS, NOT_WRITTEN)):
        return f"the query was not run on the database ({error}): its result was not checked"
    return failed_run(error)


class _Literals:
    """The literal sentences of one verdict, each literal looked up once, within the verdict's
    whole-table look-ups (``WHOLE_TABLE_LOOKUPS``)."""

    def __init__(self, scored: ScoredQuery, database: str | Path | None):
        self.scored, self.database = scored, database
        self.asked = [WHOLE_TABLE_LOOKUPS]
        self.said: dict[int, str | None] = {}

    def sentence(self, index: int) -> str | None:
        if index not in self.said:
            self.said[index] = _literal_sentence(self.scored, index, self.database, self.asked)
        return self.said[index]


def _reason_sentences(scored: ScoredQuery, database: str | Path | None) -> list[str]:
    """The reasons worth acting on, the look-here-first node's first, then the runner-up's, then
    the least confident nodes'; one sentence a fact (the rows returned; a literal missing from
    its column, said by its value node, the column or a node above them); a literal not found in
    its column names the closest stored values and the other columns that store it."""
    order = [scored.look_here_first] + ([scored.runner_up] if scored.runner_up is not None else [])
    order += sorted((n.index for n in scored.nodes if n.index not in order), key=lambda i: scored.nodes[i].confidence)
    out: list[str] = []
    facts: set[tuple] = set()
    literals = _Literals(scored, database)
    for i in order:
        for fact, text in _node_sentences(scored, i, literals):
            if fact not in facts and text not in out:
                facts.add(fact)
                out.append(text)
        if len(out) >= FEEDBACK_REASONS:
            break
    return out[:FEEDBACK_REASONS]


def _node_sentences(scored: ScoredQuery, index: int, literals: _Literals):
    """(fact, sentence) of each reason of a node: the sentences of the literals its reasons
    about literals are about, in their place."""
    node = scored.nodes[index]
    compared = [j for j in _literals_about(scored, index) if _comparison(scored, j) is not None]
    said = []
    if node.kind == "value" and node.reasons or any(r.feature in VALUE_FEATURES for r in node.reasons):
        # (below a node, the least confident literals first, and few: each may be a read)
        for j in sorted(compared, key=lambda j: scored.nodes[j].confidence)[:WHOLE_TABLE_LOOKUPS]:
            if text := literals.sentence(j):
                said.append(j)
                yield ("literal", j), text
    for reason in node.reasons:
        text = reason.text
        if reason.feature in VALUE_FEATURES:
            if said or not compared:  # said above; a range's bound, another argument: no stored value
                continue
            if reason.feature == "literal_elsewhere" and reason.value >= 1:
                holding = _columns_holding(scored, compared[0], literals.database)
                if holding:
                    text = (f"the literal {_written(scored.nodes[compared[0]])} compared with "
                            f"{_comparison(scored, compared[0]).shown()} is stored in {named(holding)}")
            yield (SAME_FACT.get(reason.feature, reason.feature), tuple(compared)), text
        else:
            yield (SAME_FACT.get(reason.feature, text),), text


def _literals_about(scored: ScoredQuery, index: int) -> list[int]:
    """The literals a node's reasons about literals are about: a literal its own; a column the
    literal it is compared with (as the features read it: the column beside the literal); any
    other node the literals below it."""
    node = scored.nodes[index]
    if node.kind == "value":
        return [index]
    if node.kind == "column":
        parent = next((n for n in scored.nodes if index in n.children), None)
        return [c for c in parent.children if scored.nodes[c].kind == "value"] if parent is not None else []
    below, stack = [], list(node.children)
    while stack:
        child = scored.nodes[stack.pop()]
        if child.kind == "value":
            below.append(child.index)
        stack.extend(child.children)
    return sorted(below)


# A literal is looked up among a column's stored values only where it is compared with them: one
# of an equality (the column on either side, an IN list's) should be a stored value; a pattern
# (LIKE, GLOB; on the right) should match one. A range's bound (<, BETWEEN) need not be stored,
# and a function's other argument (a format, a date part, a JSON path, a separator) is none.
EQUALITIES = ("Eq", "Neq", "In", "Not_in")
PATTERNS = ("Like", "Not_like", "Ilike", "Not_ilike", "Glob")
# the column may be wrapped in these: its values are compared as they give them
WRAPPERS: dict[str, Callable[[str], str]] = {"Lower": str.lower, "Upper": str.upper,
                                              "Trim": lambda v: v.strip(" ")}
COMPARISONS = EQUALITIES + PATTERNS + ("Gt", "Gte", "Lt", "Lte", "Is", "Is_not", "Not_glob")
_WRITTEN_LITERAL = re.compile(r"(?s)[EeNn]?'.*'|\".*\"|[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


@dataclass(frozen=True)
class _Comparison:
    operator: str  # Eq, In, Like, ...
    column: str  # "table.column"
    wrappers: tuple[str, ...]  # outermost first: lower(trim(col)) is ("Lower", "Trim")

    def shown(self) -> str:
        return functools.reduce(lambda text, w: f"{w.lower()}({text})", reversed(self.wrappers), self.column)

    def stored(self, values: Sequence[str]) -> list[str]:
        return [functools.reduce(lambda v, w: WRAPPERS[w](v), reversed(self.wrappers), v) for v in values]


def _comparison(scored: ScoredQuery, index: int) -> _Comparison | None:
    """How the literal at ``index`` is compared with one column's values; None where it is not.

    >>> from model import Scorer
    >>> scored = Scorer.pretrained().score("SELECT id FROM p WHERE lower(name) IN ('a') AND "
    ...     "substr(name, 2) = 'b' AND price > 3", schema={"p": ["id", "name", "price"]}, reasons=False)
    >>> [(n.label, _comparison(scored, n.index)) for n in scored.nodes if n.kind == "value"]
    ... # doctest: +NORMALIZE_WHITESPACE
    [("'a'", _Comparison(operator='In', column='p.name', wrappers=('Lower',))), ('2', None),
     ("'b'", None), ('3', None)]
    """
    parent_of = {c: n for n in scored.nodes for c in n.children}
    side, parent = index, parent_of.get(index)
    if parent is not None and parent.kind == "Val_list":  # col IN ('a', 'b')
        side, parent = parent.index, parent_of.get(parent.index)
        if parent is None or parent.kind not in ("In", "Not_in"):
            return None
    if parent is None or len(parent.children) != 2 or parent.kind not in EQUALITIES + PATTERNS:
        return None
    if parent.kind in PATTERNS + ("In", "Not_in") and parent.children[1] != side:
        return None  # `'abc' LIKE col`: the column is the pattern
    if parent.kind in PATTERNS and getattr(parent_of.get(parent.index), "kind", None) == "Escape":
        return None  # a pattern with an escape character: not read here
    other = scored.nodes[parent.children[0] if parent.children[1] == side else parent.children[1]]
    wrappers = []
    while other.kind in WRAPPERS and len(other.children) == 1:
        wrappers.append(other.kind)
        other = scored.nodes[other.children[0]]
    if other.kind != "column" or "." not in other.label:
        return None
    return _Comparison(parent.kind, other.label, tuple(wrappers))


def _sql_text(label: str) -> str:
    """The value of a literal's label: its quotes off, a doubled quote inside read as one."""
    if len(label) >= 2 and label[0] in "'\"" and label[-1] == label[0]:
        return label[1:-1].replace(label[0] * 2, label[0])
    return label


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def _matches(comparison: _Comparison, text: str, stored: Sequence[str]) -> bool:
    """Whether any of the ``stored`` values equals (matches, for a pattern) the literal ``text``:
    SQLite's LIKE, which ignores case (and so matches at least what another database's does);
    GLOB's own; numbers by value (5 is stored as 5.0 in a REAL column)."""
    if comparison.operator in PATTERNS:
        if comparison.operator == "Glob":
            pattern = re.compile(fnmatch.translate(text.replace("[^", "[!")), re.DOTALL)
        else:
            parts = (".*" if c == "%" else "." if c == "_" else re.escape(c) for c in text)
            pattern = re.compile("".join(parts), re.DOTALL | re.IGNORECASE)
        return any(pattern.fullmatch(v) for v in stored)
    if text in stored:
        return True
    number = _number(text)
    return number is not None and any(_number(v) == number for v in stored)


def _literal_sentence(scored: ScoredQuery, index: int, database: str | Path | None,
                     asked: list[int] | None = None) -> str | None:
    """"the literal 'Frence' is not a value of singer.country; closest: 'France'", "the pattern
    'Fx%' matches no value of singer.country", the literal quoted as the query writes it (None
    when it is stored there, is not compared with a column's values, or there is no database to
    look in). ``asked``: the whole-table look-ups left (one is spent here where the values read
    lack the literal; none left: no sentence, as for an unknown answer)."""
    node = scored.nodes[index]
    comparison = _comparison(scored, index) if node.label[:1] in "'\"0123456789-." else None
    if comparison is None or database is None:
        return None
    text = _sql_text(node.label)
    values = column_values(database, *comparison.column.rsplit(".", 1))
    if values is None:
        return None
    stored = comparison.stored(values)
    if _matches(comparison, text, stored):
        return None
    if asked is not None:  # (the values read are at most 5,000 of the first 100,000 rows': asked again)
        if asked[0] <= 0:
            return None
        asked[0] -= 1
    if _stored_in(database, comparison, node.label) is not False:
        return None
    written = _written(node)
    pattern = comparison.operator in PATTERNS
    sentence = (f"the pattern {written} matches no value of {comparison.shown()}" if pattern
                else f"the literal {written} is not a value of {comparison.shown()}")
    composed = unicodedata.normalize("NFC", text)
    if composed != text or not all(unicodedata.is_normalized("NFC", v) for v in stored):
        # (`'München'` typed decomposed, NFD: it looks like the stored value, and is not it)
        same = [v for v in stored if _matches(comparison, composed, [unicodedata.normalize("NFC", v)])]
        if same:
            return sentence + (f"; it differs from the stored {sql_literal(same[0])} only in Unicode normalisation "
                               f"(the query's is {_form(text)}, the stored value {_form(same[0])})")
    near = re.sub(r"[%_*?]+", " ", text).strip() if pattern else text
    lowered = {v.lower(): v for v in stored}
    closest = [lowered[v] for v in difflib.get_close_matches(near.lower(), list(lowered), n=3, cutoff=0.6)]
    holding = _columns_holding(scored, index, database)
    return (sentence + (f"; closest: {', '.join(sql_literal(v) for v in closest)}" if closest else "")
            + (f"; it is stored in {named(holding)}" if holding else ""))


def _form(text: str) -> str:
    """The Unicode normal form ``text`` is in: "NFC" (composed), "NFD" (decomposed), or neither.

    >>> _form("M\\u00fcnchen"), _form("Mu\\u0308nchen"), _form("u\\u0308 \\u00fc")
    ('NFC (composed)', 'NFD (decomposed)', 'neither NFC nor NFD')
    """
    if unicodedata.is_normalized("NFC", text):
        return "NFC (composed)"
    return "NFD (decomposed)" if unicodedata.is_normalized("NFD", text) else "neither NFC nor NFD"


def _written(node) -> str:
    """A literal as the query writes it (as its label reads, where the text is not one literal)."""
    from model.scoring.reasons import literal_of

    return node.text if node.text and _WRITTEN_LITERAL.fullmatch(node.text) else literal_of(node.label)


def _columns_holding(scored: ScoredQuery, index: int, database) -> list[str] | None:
    """The other columns of the schema that store the text literal at ``index`` (ignoring case,
    in their first rows), in the schema's order: as the ``literal_elsewhere`` feature counts
    them (``model.nodes.features.other_text_columns``), and where that feature looked the
    literal up, what its scoring found (``ScoredQuery.columns_holding``: not asked again); only
    a literal it did not look up (one of an IN list of two or more, one compared with a wrapped
    column, a quoted number) is looked up here. None for a pattern, a number, a literal compared
    with no column, without a schema or a database, or on an error or a timeout."""
    from model.data.databases import DatabaseError, open_database
    from model.nodes.features import DatabaseProbe, other_text_columns
    from model.scoring.fields import SCORING_RESULT_BYTES

    comparison, schema = _comparison(scored, index), scored.schema
    label = scored.nodes[index].label
    if (comparison is None or schema is None or database is None or comparison.operator in PATTERNS
            or label[:1] not in "'\"" or not _sql_text(label)):
        return None
    if index in scored.columns_holding:
        found = scored.columns_holding[index]
        return None if found is None else list(found)
    others = other_text_columns(schema, schema.source(comparison.column) or comparison.column)
    if not others:
        return []
    try:
        db = open_database(database, timeout_s=2.0)
    except DatabaseError:
        return None
    try:
        # (the scoring's result budget: its look-up, shared by the probes of one file, answers)
        found = DatabaseProbe(db, timeout_s=2.0, max_result_bytes=SCORING_RESULT_BYTES).columns_holding(label, others)
    except DatabaseError:
        return None
    finally:
        if db is not database:
            db.close()
    return None if found is None else [c for c in others if c in found]


def _stored_in(database, comparison: _Comparison, label: str) -> bool | None:
    """Whether the column holds (matches, for a pattern) the literal ``label``, asked of the
    whole table as ``_matches`` reads the values (a LIKE ignoring case, a number by value);
    None on an error or a timeout, or a GLOB outside SQLite: unknown."""
    from model.data.databases import DatabaseError, open_database

    try:
        db = open_database(database, timeout_s=2.0)
    except DatabaseError:
        return None
    try:
        table, column = comparison.column.rsplit(".", 1)
        col, quoted = db.column_name(table, column), label[:1] in "'\""
        literal = db.literal("'" + _sql_text(label).replace("'", "''") + "'" if quoted else label)
        expr = functools.reduce(lambda e, w: f"{w.upper()}({e})", reversed(comparison.wrappers),
                                f"CAST({col} AS {db.text_type()})")
        if comparison.operator == "Glob":
            if db.dialect != "sqlite":
                return None
            test = f"{expr} GLOB {literal}"
        elif comparison.operator in PATTERNS:
            test = f"LOWER({expr}) LIKE LOWER({literal})"
        elif quoted:
            test = f"{expr} = {literal}"
        elif _number(label) is None:
            return None
        else:  # a number: by value, or as the text the wrapped column gives
            test = f"{expr} = '{label}'" if comparison.wrappers else f"{col} = {label}"
        rows, error = db.execute(f"SELECT EXISTS(SELECT 1 FROM {db.table_name(table)} WHERE {test})")
    except DatabaseError:
        return None
    finally:
        if db is not database:
            db.close()
    return None if error or not rows else bool(rows[0][0])


def column_values(database, table: str, column: str) -> tuple[str, ...] | None:
    """Distinct stored values of ``table.column`` (at most 5,000, read-only; None on an error) in
    ``database``: a SQLite file (read once per column), a URL or an open connection
    (``model.data.databases.open_database``)."""
    from model.data.databases import is_database_url

    if isinstance(database, (str, Path)) and not is_database_url(str(database)):
        path = str(Path(database).resolve())
        return _file_values(path, _file_state(path), table, column)
    return _read_values(database, table, column)


def _file_state(path: str) -> tuple:
    """What the values read from a SQLite file are kept under: the file's and its ``-wal``'s
    (inode, mtime, size), so a file changed since is read again."""
    def state(name: str) -> tuple:
        try:
            stat = os.stat(name)
        except OSError:
            return ()
        return stat.st_ino, stat.st_mtime_ns, stat.st_size
    return state(path), state(f"{path}-wal")


@functools.lru_cache(maxsize=256)
def _file_values(path: str, state: tuple, table: str, column: str) -> tuple[str, ...] | None:
    return _read_values(path, table, column)


def _read_values(target, table: str, column: str) -> tuple[str, ...] | None:
    from model.data.databases import DatabaseError, open_database

    try:
        db = open_database(target, timeout_s=2.0)
    except DatabaseError:
        return None
    try:
        tab, col = db.table_name(table), db.column_name(table, column)
        alias = "" if db.dialect == "sqlite" else " AS s"
        rows, error = db.execute(f"SELECT DISTINCT CAST(v AS {db.text_type()}) FROM (SELECT {col} AS v "
                                 f"FROM {tab} LIMIT 100000){alias} LIMIT 5000")
    except DatabaseError:
        return None
    finally:
        if db is not target:
            db.close()
    return None if error or rows is None else tuple(str(r[0]) for r in rows if r[0] is not None)


def _feedback(scored: ScoredQuery, action: str, where: dict, reasons: list[str]) -> str:
    if action == "run":
        return f"The query is likely right (confidence {scored.query_confidence:.2f})."
    likely = "is likely wrong" if action == "regenerate" else "may be wrong"
    lines = [(f"The query {likely} (confidence {scored.query_confidence:.2f}). "
              f"Check this part first: `{where['text']}`.")]
    lines += [f"- {r}" for r in reasons]
    if action == "regenerate":
        lines.append("Write the query again, fixing these.")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Guarding run_sql


class QueryHeld(Exception):
    """A guarded ``run_sql`` was not called: the query's verdict was not "run" (``.verdict``)."""

    def __init__(self, verdict: Verdict):
        super().__init__(f"query not run ({verdict.action}, confidence {verdict.query_confidence:.2f}): "
                         f"{verdict.feedback.splitlines()[0]}")
        self.verdict = verdict


def guard(run_sql: Callable | None = None, *, scorer: Scorer | None = None, database: str | Path | None = None,
          schema=None, db_id: str | None = None, dialect: str | None = None,
          on_hold: Callable[[Verdict], Any] | None = None, policy: Policy | None = None,
          timeout_s: float | None = None):
    """Wrap ``run_sql(sql, ...)`` so that it is called only for a query whose verdict is "run";
    the wrapped function takes ``question=`` besides. Otherwise ``on_hold(verdict)`` is called and
    its value returned, or, without ``on_hold``, ``QueryHeld`` is raised (``.verdict``). As a
    decorator: ``@guard(scorer=scorer, database="shop.sqlite")``; ``policy`` defaults to the
    scorer's; ``timeout_s`` bounds each check as ``Scorer.check``'s does. A query that cannot be
    checked is not run either, and ``on_hold`` is not called: the check's error is raised (SQL
    the scorer cannot read, ``DROP TABLE`` among it: ``rat.RATError``; a check past ``timeout_s``:
    ``DeadlineExceeded``), since there is no verdict to hand it."""
    if run_sql is None:
        return lambda f: guard(f, scorer=scorer, database=database, schema=schema, db_id=db_id,
                               dialect=dialect, on_hold=on_hold, policy=policy, timeout_s=timeout_s)
    from rat.dialects import dialect as known_dialect

    if not callable(getattr(scorer, "check", None)):
        raise UsageError("guard needs scorer= (a Scorer: Scorer.pretrained() for the shipped model)"
                         + ("" if scorer is None else f"; found {type(scorer).__name__}"))
    for name, value in (("run_sql", run_sql), ("on_hold", on_hold)):
        if value is not None and not callable(value):
            raise TypeError(f"guard: {name} must be callable, found {type(value).__name__}")
    if policy is not None and not isinstance(policy, Policy):
        raise TypeError(f"guard: policy must be a Policy, found {type(policy).__name__}")
    if dialect is not None:
        known_dialect(dialect)  # an unknown name: a RATError now, not at the first call
    check_seconds(timeout_s, "guard: timeout_s")

    @functools.wraps(run_sql)
    def guarded(sql: str, *args, question: str = "", **kwargs):
        verdict = scorer.check(sql, question=question, schema=schema, database=database, db_id=db_id,
                               dialect=dialect, policy=policy, timeout_s=timeout_s)
        if verdict.action == "run":
            return run_sql(sql, *args, **kwargs)
        if on_hold is not None:
            return on_hold(verdict)
        raise QueryHeld(verdict)

    return guarded
