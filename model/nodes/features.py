"""Cheap, named features of every RAT node, for the boosted-tree node scorer (model.nodes.boosted).

One row per node (post-order), one column per entry of ``FEATURES``. Two tracks are kept apart:

- *single-system* (groups structure, linking, values, execution, question): what one system's
  output, the question, the schema and the database say about a node. Computed once per
  (question, SQL, database) and cached on disk under ``cache_dir("features")``.
- *scorer LM* (group lm, single-system, optional: ``lm=True``): the scorer LM's token
  log-probabilities (``model.lm.token_probabilities``, the whole-query scorer's cache) over the node's span
  of the SQL. Spans come from ``rat.sql_spans`` in the canonical text; the LM scored the SQL as
  written, so canonical words are matched to written words (``difflib`` over word sequences;
  an alias ``T1`` is matched to the table name it stands for by position).
- *consensus* (group consensus): how the node agrees with the other systems' outputs for the same
  question (``model.eval.baselines.node_agreement`` semantics). Needs every system's output, so it
  is computed per collection of examples and never mixed into the single-system track.

Databases are only read: a SQLite file through ``model.data.execution.execute_sql`` (``mode=ro``),
any other backend through a read-only ``model.data.databases.Database`` (PostgreSQL, MySQL,
DuckDB). A missing database, a failing lookup or a timeout makes the feature NaN, never an error.

>>> from model.nodes.examples import make_example
>>> from model.data.datasets import Question
>>> q = Question(question_id="dev_0", db_id="d", question="How many singers are older than 20?",
...              gold_sql="")
>>> ex = make_example(q, "SELECT count(*) FROM singer WHERE age > 20", "s", None)
>>> table = single_system_features(ex, None, None)
>>> table.values.shape == (len(ex.node_labels), len(SINGLE_FEATURES))
True
>>> row = dict(zip(SINGLE_FEATURES, table.values[ex.node_types.index("value")]))
>>> float(row["value_in_question"]), bool(np.isnan(row["value_in_column"]))
(1.0, True)
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import math
import os
import pickle
import re
import sys
import tempfile
import threading
import time
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rapidfuzz.distance import Indel
from rapidfuzz.process import cdist

try:  # difflib's algorithm compiled: the same ratios, about 3x faster (the fuzzy name matching's cost)
    from cydifflib import SequenceMatcher
except ImportError:  # pragma: no cover - cydifflib is a dependency; pure Python gives the same numbers
    from difflib import SequenceMatcher

import rat
from model.data.cache import cache_dir
from model.data.databases import Database, DatabaseError, SqliteDatabase
from model.data.execution import (
    DEFAULT_MAX_RESULT_BYTES,
    MAX_ROWS,
    NOT_WRITTEN,
    check_deadline,
    result_digest,
    time_left,
    unfinished,
)
from model.nodes.outputs import tree_of
from rat.align import diff_tokens
from rat.labels import labels_against_others
from rat.walks import error_sites, post_order_children

VERSION = "nf-7"  # bump when a feature's definition changes: the cache key includes it
# The versions whose saved models may score this version's rows: the features and what they
# mean are the same. nf-7 reads a negative amount of date arithmetic (Snowflake's DATEADD(day, -30, d))
# as the question's number 30; no Spider or BIRD dev prediction's node changes. nf-6 reads a query stopped before its end (a timeout, a result past the
# memory guards), and another dialect's query that runnable_sql does not write for its database,
# as one whose result is unknown (NaN, as without a database) where nf-5 read it as failing to
# run; no query the shipped models were fitted on was either (they are SQLite's, on SQLite; each
# of the 11 systems' Spider dev predictions and the code LLM's Spider train answers run with
# model.data.execution.execute_sql at 5 s and the default budget). nf-5 changed only which
# schema entry a self-join's later table (`t_2.c`: `t.c`'s) and a subquery's or CTE's column (`derived.c`: none, so NaN as without a schema) are
# looked up in; nf-4 read those as columns missing from the schema (82 of the 11 systems' 11,362
# Spider dev predictions), and an nf-4 model now gets them right where it was fitted on them wrong.
READ_BY = ("nf-4", "nf-5", "nf-6", VERSION)
NAN = float("nan")


@dataclass(frozen=True)
class Feature:
    name: str
    group: str  # structure | linking | semantic | values | execution | question | lm | consensus
    doc: str
    categorical: bool = False
    # +1: the higher, the likelier the node is right (more of the name found in the question,
    # the literal found in its column); -1: the lower; 0: no known direction. model.monotone
    # constrains the node model to follow it.
    direction: int = 0

    @property
    def track(self) -> str:
        """single (cached per query) | lm (optional, from the scorer's cache) | consensus."""
        return self.group if self.group in ("lm", "consensus") else "single"


FEATURES: tuple[Feature, ...] = (
    # structure
    Feature("kind", "structure", "node kind: table, column, value or the operator label", True),
    Feature("parent_kind", "structure", "kind of the parent node ('root' for the root)", True),
    Feature("depth", "structure", "edges from the root"),
    Feature("height", "structure", "edges to the deepest leaf below"),
    Feature("subtree_size", "structure", "nodes in the subtree"),
    Feature("n_children", "structure", "number of children"),
    Feature("child_index", "structure", "position among the parent's children (0 = first)"),
    Feature("position", "structure", "post-order index / tree size"),
    Feature("tree_size", "structure", "nodes in the whole tree"),
    Feature("tree_tables", "structure", "table leaves in the tree"),
    Feature("tree_joins", "structure", "Product / join nodes in the tree"),
    Feature("tree_selections", "structure", "Selection nodes in the tree"),
    Feature("tree_projects", "structure", "Project nodes (1 + subqueries)"),
    Feature("tree_values", "structure", "value leaves in the tree"),
    Feature("label_repeats", "structure", "nodes of the tree with the same label"),
    Feature("schema_tables", "structure", "tables in the schema"),
    Feature("schema_columns", "structure", "columns in the schema"),
    # schema linking (columns and tables; NaN for other nodes)
    Feature("name_word_share", "linking", "share of the name's words found in the question", direction=1),
    Feature("name_phrase", "linking", "the name's words occur as one phrase in the question", direction=1),
    Feature("name_fuzzy", "linking", "best difflib ratio of the name against question n-grams", direction=1),
    Feature("name_rank", "linking", "rank of the name's fuzzy score among all schema names of its kind (0 = best)", direction=-1),
    Feature("name_gap", "linking", "best fuzzy score of any schema name of its kind minus this one's", direction=-1),
    Feature("name_semantic", "semantic", "cosine of MiniLM embeddings of the name and the question", direction=1),
    Feature("name_semantic_rank", "semantic", "rank of name_semantic among all schema names of its kind (0 = best)"),
    Feature("name_semantic_gap", "semantic", "best name_semantic of any schema name of its kind minus this one's"),
    Feature("subtree_min_semantic", "semantic", "min name_semantic over the subtree's names"),
    Feature("table_word_share", "linking", "for a column: word share of its table's name", direction=1),
    Feature("is_primary_key", "linking", "the column is a primary key"),
    Feature("is_foreign_key", "linking", "the column takes part in a declared foreign key"),
    Feature("tables_sharing_name", "linking", "tables with a column of this name"),
    Feature("in_schema", "linking", "the table / table.column exists in the schema (a self-join's `t_2.c` is `t.c`; NaN for a subquery's column)", direction=1),
    Feature("table_in_tree", "linking", "for a column: its table is a table leaf of the tree", direction=1),
    Feature("column_type", "linking", "schema type of the column (text, number, time...)", True),
    Feature("is_star", "linking", "the column is *"),
    Feature("join_on_fk", "linking", "Eq of two columns of different tables: follows a declared foreign key", direction=1),
    Feature("join_fk_share", "linking", "Product / join: share of its column equalities on foreign keys", direction=1),
    Feature("subtree_min_link", "linking", "min name_word_share over the subtree's names", direction=1),
    Feature("subtree_mean_link", "linking", "mean name_word_share over the subtree's names", direction=1),
    # values
    Feature("value_is_number", "values", "the literal is a number"),
    Feature("value_in_question", "values", "the literal (quotes and % stripped) occurs in the question", direction=1),
    Feature("value_fuzzy", "values", "best difflib ratio of the literal against question n-grams", direction=1),
    Feature("value_in_column", "values", "the literal occurs in the compared column (= or LIKE)", direction=1),
    Feature("value_in_column_nocase", "values", "the literal occurs in the compared column, ignoring case", direction=1),
    Feature("compared_literal_found", "values",
            "the literal of the node's comparison occurs in its column, ignoring case (the literal and the column both get it)"),
    Feature("literal_elsewhere", "values",
            "other columns of the database holding the comparison's text literal, ignoring case (literal and column)"),
    Feature("literal_near_match", "values",
            "best difflib ratio of the comparison's text literal against its column's values (literal and column)"),
    Feature("subtree_min_value_in_question", "values", "min value_in_question over the subtree's literals", direction=1),
    Feature("subtree_min_value_in_column", "values", "min value_in_column over the subtree's literals", direction=1),
    Feature("question_numbers_unused", "values", "numbers of the question that are no literal of the tree", direction=-1),
    # the predicted query's own execution (broadcast to every node)
    Feature("exec_error", "execution", "the predicted query fails to run"),
    Feature("exec_empty", "execution", "it returns no rows"),
    Feature("exec_log_rows", "execution", "log(1 + rows returned)"),
    Feature("exec_columns", "execution", "columns returned"),
    Feature("exec_null_column", "execution", "some returned column is all NULL"),
    Feature("exec_zero", "execution", "a single returned value equal to 0"),
    # question
    Feature("question_words", "question", "words in the question"),
    Feature("cue_match", "question", "the question holds a cue word of the node's operator (NaN: no cues)", direction=1),
    Feature("cue_count", "question", "'how many', 'number of', 'count'"),
    Feature("cue_average", "question", "'average', 'mean'"),
    Feature("cue_sum", "question", "'total', 'sum'"),
    Feature("cue_superlative", "question", "'most', 'highest', 'least', 'lowest', ..."),
    Feature("cue_negation", "question", "'not', 'no', 'never', 'without', ..."),
    Feature("cue_each", "question", "'each', 'every', 'per', 'for all'"),
    Feature("cue_distinct", "question", "'distinct', 'different', 'unique'"),
    Feature("cue_order", "question", "'order', 'sort', 'ascending', 'descending', 'alphabetical'"),
    Feature("cue_compare", "question", "'more than', 'less than', 'greater', 'above', 'below', ..."),
    Feature("cue_both", "question", "'both', 'and also'"),
    Feature("cue_or", "question", "'or', 'either'"),
    # scorer LM over the node's span (optional)
    Feature("lm_span_min_logprob", "lm", "lowest scorer-LM token log-probability in the node's span"),
    Feature("lm_span_mean_logprob", "lm", "mean scorer-LM token log-probability in the node's span"),
    Feature("lm_query_mean_logprob", "lm", "mean scorer-LM token log-probability of the whole SQL"),
    # consensus (other systems' outputs for the same question)
    Feature("agreement", "consensus", "share of the other systems' trees that contain the node"),
    Feature("parent_agreement", "consensus", "agreement of the parent (the root: its own)"),
    Feature("subtree_min_agreement", "consensus", "min agreement over the subtree"),
    Feature("root_agreement", "consensus", "agreement of the root"),
    Feature("tree_agreement", "consensus", "share of the other systems with the identical tree"),
    Feature("result_agreement", "consensus", "share of the other systems whose result is the same multiset of rows"),
    Feature("n_other_systems", "consensus", "other systems answering the question"),
    # The reference answer: the most common answer among the other systems that differs from
    # this one (by result when both ran, else by tree). If this query is wrong, the reference
    # is the likeliest right answer, and where this query departs from it is the likeliest site.
    Feature("reference_agreement", "consensus", "share of the reference answer's trees that contain the node"),
    Feature("reference_site", "consensus",
            "share of the reference answer's trees against which the node is an error site "
            "(missing from the tree while its children are in it)"),
    Feature("reference_share", "consensus", "share of the other systems that give the reference answer"),
)
FEATURE_NAMES = tuple(f.name for f in FEATURES)
SINGLE_FEATURES = tuple(f.name for f in FEATURES if f.track == "single")
LM_FEATURES = tuple(f.name for f in FEATURES if f.track == "lm")
CONSENSUS_FEATURES = tuple(f.name for f in FEATURES if f.track == "consensus")
GROUPS = tuple(dict.fromkeys(f.group for f in FEATURES))
# What needs the database (the query's own execution, literals looked up in their columns, the
# other systems' results): NaN when scoring without one (model.database=without|dropout trains for that)
DATABASE_FEATURES = tuple(f.name for f in FEATURES if f.group == "execution") + (
    "value_in_column", "value_in_column_nocase", "subtree_min_value_in_column", "result_agreement",
    "compared_literal_found", "literal_elsewhere", "literal_near_match")
# Sizes that say which benchmark a query comes from more than whether it is right (BIRD's
# questions carry their evidence, its schemas are larger): the features most shifted between
# Spider and BIRD; model.drop=[benchmark_size] leaves them out (docs/research.md, transfer)
BENCHMARK_SIZE_FEATURES = ("question_words", "schema_tables", "schema_columns")
# Named sets model.drop accepts beside feature and group names
FEATURE_SETS = {"database": DATABASE_FEATURES, "benchmark_size": BENCHMARK_SIZE_FEATURES}

# Categorical vocabularies: index = code (HistGradientBoosting needs small non-negative ints).
OPERATORS = (
    "Add", "And", "Avg", "Bitand", "Bitnot", "Bitor", "Case", "Cast", "Collate", "Concat",
    "Count", "Distinct", "Div", "Else", "Eq", "Except", "Exists", "Full_join", "Glob",
    "Group_concat", "Groupby", "Gt", "Gte", "Having", "In", "Intersect", "Is", "Is_not",
    "Is_not_null", "Is_null", "Left_join", "Like", "Limit", "Lt", "Lte", "Max", "Min", "Mod",
    "Mul", "Neg", "Neq", "Not", "Not_exists", "Not_glob", "Not_in", "Not_like", "Not_regexp",
    "Offset", "Orderby_asc", "Orderby_desc", "Over", "Partitionby", "Product", "Project",
    "Regexp", "Right_join", "Selection", "Shift_left", "Shift_right", "Sub", "Sum", "Tuple",
    "Union", "Union_all", "Using", "Val_list", "When",
)
KINDS = ("other", "root", "table", "column", "value", *OPERATORS)
KIND_CODE = {k: i for i, k in enumerate(KINDS)}


def known_kind(kind: str) -> bool:
    """Whether the node features have a code of their own for a node of ``kind`` (a table,
    column or value, or one of ``OPERATORS``): any other operator (``Strftime``, ``Coalesce``,
    ``Or``) is coded ``other``, one kind for all, so a model fitted on these features cannot
    tell what it does.

    ``In_schema`` (another schema's table) is read as the table it names.

    >>> known_kind("Count"), known_kind("column"), known_kind("Strftime"), known_kind("In_schema")
    (True, True, False, True)
    """
    return kind in KIND_CODE and kind not in ("other", "root") or kind == "In_schema"


COLUMN_TYPES = ("other", "text", "number", "time", "boolean")


def column_type(declared: str) -> str:
    """The ``COLUMN_TYPES`` entry of a column type as a schema declares it: Spider's own words,
    or SQLite declarations as BIRD's schemas give them (SQLite's affinity rules: INT, REAL,
    FLOAT, DOUBLE, DECIMAL, NUMERIC are numbers; DATE, TIME are times; CHAR, TEXT, CLOB text).

    >>> [column_type(t) for t in ("number", "integer", "REAL", "datetime", "varchar(20)", "others")]
    ['number', 'number', 'number', 'time', 'text', 'other']
    """
    t = declared.lower()
    if t in COLUMN_TYPES:
        return t
    if any(w in t for w in ("int", "real", "floa", "doub", "decimal", "numeric", "number")):
        return "number"
    if any(w in t for w in ("date", "time")):
        return "time"
    if "bool" in t:
        return "boolean"
    if any(w in t for w in ("char", "text", "clob", "string")):
        return "text"
    return "other"

# Question cues: global cue features, and the cues of each operator for `cue_match`.
CUES = {
    "cue_count": ("how many", "number of", "count"),
    "cue_average": ("average", "mean"),
    "cue_sum": ("total", "sum"),
    "cue_superlative": ("most", "highest", "largest", "biggest", "maximum", "least", "lowest",
                        "smallest", "minimum", "fewest", "oldest", "youngest", "latest",
                        "earliest", "best", "worst", "top"),
    "cue_negation": ("not", "no", "never", "without", "except", "n't", "other than"),
    "cue_each": ("each", "every", "per", "for all"),
    "cue_distinct": ("distinct", "different", "unique"),
    "cue_order": ("order", "sort", "sorted", "ascending", "descending", "alphabetical"),
    "cue_compare": ("more than", "less than", "greater", "larger than", "smaller than", "above",
                    "below", "over", "under", "at least", "at most", "fewer", "higher than",
                    "lower than", "before", "after", "older", "younger", "exceed"),
    "cue_both": ("both", "and also"),
    "cue_or": ("or", "either"),
}
OPERATOR_CUES = {
    "Count": CUES["cue_count"], "Avg": CUES["cue_average"], "Sum": CUES["cue_sum"],
    "Max": CUES["cue_superlative"], "Min": CUES["cue_superlative"],
    "Orderby_desc": CUES["cue_superlative"] + CUES["cue_order"],
    "Orderby_asc": CUES["cue_superlative"] + CUES["cue_order"],
    "Limit": CUES["cue_superlative"] + ("first", "one"),
    "Distinct": CUES["cue_distinct"],
    "Not_in": CUES["cue_negation"], "Except": CUES["cue_negation"], "Neq": CUES["cue_negation"],
    "Not_like": CUES["cue_negation"], "Not": CUES["cue_negation"],
    "Groupby": CUES["cue_each"] + ("by", "for each"),
    "Having": CUES["cue_compare"] + CUES["cue_superlative"],
    "Gt": CUES["cue_compare"], "Lt": CUES["cue_compare"], "Gte": CUES["cue_compare"],
    "Lte": CUES["cue_compare"],
    "Intersect": CUES["cue_both"] + ("and",), "Union": CUES["cue_or"] + ("and",),
    "Or": CUES["cue_or"], "Like": ("contain", "include", "start", "begin", "end", "with", "like",
                                   "substring", "word", "letter"),
}
JOINS = {"Product", "Left_join", "Right_join", "Full_join", "Semi_join", "Anti_join"}
COMPARISONS = {"Eq", "Neq", "Gt", "Gte", "Lt", "Lte", "Like", "Not_like", "In", "Not_in", "Glob"}
# What adds an amount to a date, as rat labels it in each dialect (Snowflake's, SQL Server's and
# Redshift's DATEADD(day, -30, d), MySQL's DATE_ADD(d, INTERVAL -30 DAY), DuckDB's TO_DAYS(-30),
# Snowflake's ADD_MONTHS(d, -3), ...; an INTERVAL itself): its amount written negative is the
# question's "the last 30 days", so a literal -30 there is the question's 30 (elsewhere, as in
# `x > -30`, the sign is the question's to say)
DATE_ARITHMETIC = frozenset({
    "Dateadd", "Date_add", "Date_sub", "Timeadd", "Timestampadd", "Timestamp_add", "Timestamp_sub",
    "Datetime_add", "Datetime_sub", "Time_add", "Time_sub", "Adddate", "Subdate", "Add_months",
    "Interval", "To_years", "To_months", "To_weeks", "To_days", "To_hours", "To_minutes", "To_seconds"})

_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")


# ---------------------------------------------------------------------------------------------
# Text helpers


def words(text: str) -> list[str]:
    """Lowercase word tokens, with snake_case and camelCase split and a plural 's' dropped.

    >>> words("Singer_ID of the concertHalls")
    ['singer', 'id', 'of', 'the', 'concert', 'hall']
    """
    return [_stem(w) for w in _WORD.findall(_CAMEL.sub(" ", text).lower())]


@functools.lru_cache(maxsize=1 << 14)
def name_phrase(name: str) -> str:
    """A table or column name as questions are matched against it: its ``words``, joined
    (remembered: a service matches the same schemas' names request after request)."""
    return " ".join(words(name))


def _stem(word: str) -> str:
    if len(word) > 3 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def has_cue(question_text: str, cues: Sequence[str]) -> bool:
    """A cue as a whole word or phrase of the (lowercased, space-padded) question."""
    return any(f" {cue} " in question_text for cue in cues)


class QuestionIndex:
    """What the features ask of one question, memoised (fuzzy n-gram matching is the cost)."""

    def __init__(self, question: str, vector: np.ndarray | None = None):
        self.vector = vector  # unit-norm MiniLM embedding of the question (None: semantic features NaN)
        self.text = " " + " ".join(re.findall(r"[a-z0-9']+|n't", question.lower())) + " "
        self.words = words(question)
        self.word_set = set(self.words)
        self.joined = " " + " ".join(self.words) + " "
        self.numbers = {w for w in re.findall(r"-?\d+(?:\.\d+)?", question)}
        self._fuzzy: dict[str, float] = {}
        self._gram_memo: dict[int, list[str]] = {}

    def word_share(self, name_words: Sequence[str]) -> float:
        return sum(w in self.word_set for w in name_words) / len(name_words) if name_words else NAN

    def phrase(self, name_words: Sequence[str]) -> float:
        return float(f" {' '.join(name_words)} " in self.joined) if name_words else NAN

    def fuzzy(self, phrase: str) -> float:
        """Best difflib ratio of ``phrase`` against the question's n-grams of about its length.

        Exactly difflib's number, computed cheaply: n-grams are tried in decreasing order of an
        upper bound on their ratio (the longest common subsequence's) until no bound is above
        the best ratio found.

        >>> q = QuestionIndex("How many singers are from France?")
        >>> q.fuzzy("singer"), round(q.fuzzy("country"), 3), round(q.fuzzy("home town"), 3)
        (1.0, 0.4, 0.5)
        """
        return self.fuzzy_many([phrase])[0]

    def fuzzy_many(self, phrases: Sequence[str], deadline: float | None = None) -> list[float]:
        """``fuzzy`` of each phrase; the bounds of all phrases of one length at once (``best_ratios``,
        which checks ``deadline``)."""
        todo: dict[int, list[str]] = defaultdict(list)
        for phrase in dict.fromkeys(phrases):
            if phrase in self._fuzzy:
                continue
            if phrase and f" {phrase} " in self.joined:  # the phrase is one of the n-grams: ratio 1
                self._fuzzy[phrase] = 1.0
                continue
            todo[max(1, len(phrase.split()))].append(phrase)
        for n, group in todo.items():
            self._fuzzy.update(zip(group, best_ratios(group, self._grams(n), deadline=deadline)))
        return [self._fuzzy[p] for p in phrases]

    def _grams(self, n: int) -> list[str]:
        """The question's distinct n-grams of n-1, n and n+1 words (a question that repeats a
        word costs no more than one that says it once).

        >>> QuestionIndex("name name name name")._grams(1)
        ['name', 'name name']
        """
        if n not in self._gram_memo:
            self._gram_memo[n] = list(dict.fromkeys(
                " ".join(self.words[i:i + size]) for size in sorted({max(1, n - 1), n, n + 1})
                for i in range(max(1, len(self.words) - size + 1))))
        return self._gram_memo[n]


# Difflib's ratio is computed for pairs of texts up to this product of their lengths, and up to
# this sum of products for one text; beyond, the bound stands in (Spider dev with databases and
# BIRD dev without: at most 2,747 a pair, 116,276 a text)
MAX_RATIO_CELLS = 10_000
RATIO_BUDGET = 1_000_000
RATIO_BLOCK = 1_024  # texts whose bounds are computed at once (a schema of 100,000 names: 100 blocks)


def best_ratios(texts: Sequence[str], candidates: Sequence[str], text_first: bool = False,
                deadline: float | None = None) -> list[float]:
    """For each text, the best difflib ratio against any of ``candidates`` (0 when there are none).
    difflib's ratio can depend on the order of its two strings: the candidate is its first
    (``SequenceMatcher(a=candidate, b=text)``), or with ``text_first`` the text (as the literal
    lookups first computed it).

    Difflib's number, computed cheaply: candidates are tried in decreasing order of an upper
    bound on their ratio (2 * longest common subsequence / total length: difflib's matching
    blocks are a common subsequence; rapidfuzz computes it for all pairs at once) until no bound
    is above the best ratio found. Difflib's cost grows up to the cube of the lengths (a
    4,000-character question against a 9,000-character literal: 110 s), so a pair of more than
    ``MAX_RATIO_CELLS`` (length times length), or one past ``RATIO_BUDGET`` of them for one
    text, counts at its bound.

    >>> [round(r, 3) for r in best_ratios(["poland", "polnd"], ["germany", "poland"])]
    [1.0, 0.909]
    >>> best_ratios(["xy" * 4600], ["x" * 4000])  # at its bound: 2 * 4,000 / 13,200
    [0.6060606060606061]
    """
    if not candidates:
        return [0.0] * len(texts)
    texts, candidates = list(texts), list(candidates)
    if len(texts) > RATIO_BLOCK:  # the bounds a block of texts at a time: memory of one block, the deadline between
        out: list[float] = []
        for start in range(0, len(texts), RATIO_BLOCK):
            check_deadline(deadline, "features")
            out += best_ratios(texts[start:start + RATIO_BLOCK], candidates, text_first)
        return out
    matcher = SequenceMatcher(autojunk=False)
    bounds = cdist(texts, candidates, scorer=Indel.normalized_similarity, dtype=np.float64)
    out = []
    fixed, varying = (matcher.set_seq1, matcher.set_seq2) if text_first else (matcher.set_seq2, matcher.set_seq1)
    for text, row in zip(texts, bounds):
        best, spent = 0.0, 0
        fixed(text)
        for k in np.argsort(-row, kind="stable"):
            if row[k] <= best:
                break
            cells = len(text) * len(candidates[k])
            if cells > MAX_RATIO_CELLS or spent + cells > RATIO_BUDGET:
                best = float(row[k])  # (every later bound is at most this one)
                break
            spent += cells
            varying(candidates[k])
            best = max(best, matcher.ratio())
        out.append(best)
    return out


# ---------------------------------------------------------------------------------------------
# Tree shape from the post-order (names, arity) of an example: no SQL parsing


@dataclass
class Shape:
    parent: list[int]  # -1 for the root
    children: list[list[int]]
    depth: list[int]
    height: list[int]
    size: list[int]
    child_index: list[int]


def tree_shape(arity: Sequence[int]) -> Shape:
    """Parent, children, depth, height, subtree size of each post-order node.

    >>> s = tree_shape([0, 0, 2, 0, 2])  # ((a)(b)X)(c)Y
    >>> s.parent, s.depth, s.height, s.size
    ([2, 2, 4, 4, -1], [2, 2, 1, 1, 0], [0, 0, 1, 0, 2], [1, 1, 3, 1, 5])
    """
    n = len(arity)
    children = post_order_children(arity)
    parent, height, size, child_index = [-1] * n, [0] * n, [1] * n, [0] * n
    for i, kids in enumerate(children):
        for j, c in enumerate(kids):
            parent[c], child_index[c] = i, j
            height[i] = max(height[i], height[c] + 1)
            size[i] += size[c]
    depth = [0] * n
    for i in reversed(range(n)):
        if parent[i] >= 0:
            depth[i] = depth[parent[i]] + 1
    return Shape(parent, children, depth, height, size, child_index)


def literal_text(label: str) -> str:
    """The text of a literal node: quotes and LIKE wildcards stripped.

    >>> literal_text("'%New York%'"), literal_text("2014")
    ('New York', '2014')
    """
    if label[:1] in "'\"" and label[-1:] == label[:1]:
        label = label[1:-1]
    return label.strip("%").strip()


def question_forms(text: str, parent_label: str | None) -> tuple[str, ...]:
    """How the question may write a literal's ``text`` (``literal_text``) whose parent node is
    labelled ``parent_label``: as itself, and a negative amount added to a date (``DATE_ARITHMETIC``)
    also without its sign (the question's "last 30 days" is DATEADD(day, -30, d)).

    >>> question_forms("-30", "Dateadd"), question_forms("-30", "Gt"), question_forms("30", "Interval")
    (('-30', '30'), ('-30',), ('30',))
    """
    if text[:1] == "-" and parent_label in DATE_ARITHMETIC and _is_number(text):
        return text, text[1:]
    return (text,)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# Single-system features


@dataclass
class NodeFeatures:
    """Feature rows of one example: ``values[node, feature]`` in the order of ``names``."""

    names: tuple[str, ...]
    values: np.ndarray  # (nodes, features), float64 with NaN for "not applicable / unknown"
    result_digest: str | None = None  # the predicted query's result (multiset), for consensus
    # why the predicted query did not run: the database's error (`exec_error`), or why it was not
    # run or read to the end (parameters, a timeout, a result over the budget: its result features
    # unknown); None where it ran or had no database
    execution_error: str | None = None
    # the literals the `literal_elsewhere` feature looked up (post-order node index): the other
    # columns that store each, in the schema's order (None: unknown); None for a row read from an
    # older cache
    columns_holding: dict[int, tuple[str, ...] | None] | None = None


SCAN_ROWS = 100_000  # rows of a column a literal lookup reads at most: a large database costs no more
SCAN_BUDGET = 2_000_000  # rows one search of every column for a literal reads at most, all columns together
# columns one read of that search reads (SQLite allows 2,000 result columns, DuckDB an expression
# depth of 1,000), and columns it searches at most (beyond: unknown, as a failed read), each in at
# least SCAN_BUDGET // HOLDING_COLUMNS rows
HOLDING_CHUNK, HOLDING_COLUMNS = 200, 3_000
EVERY_COLUMN = "every column"  # what a search of every column for a literal reads (DatabaseProbe._timed_out)
# the look-ups of one query (its literals: in their column? elsewhere? near which value?) read for at
# most this many read time limits together (10 s with scoring's 5 s), the rest unknown: reads each
# just under the limit no longer add up (160 literals on a 270 MB table: half an hour)
LOOKUP_TIME_LIMITS = 2
LOOKUPS_SPENT = "not read: the query's look-ups had their time"


class SharedLookups:
    """Answers of database lookups kept for every ``DatabaseProbe`` of this process (rat-serve's
    requests read the same columns again and again), the least recently used dropped once their
    keys and answers hold more than ``max_bytes`` (as ``held_bytes`` counts them). Thread-safe."""

    def __init__(self, max_bytes: int = 64_000_000):
        self.max_bytes = max_bytes
        self._answers: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: tuple):
        with self._lock:
            found = self._answers.get(key)
            if found is None:
                return _UNKNOWN
            self._answers.move_to_end(key)
            return found[0]

    def put(self, key: tuple, answer) -> None:
        size = held_bytes((key, answer)) + _ENTRY_BYTES
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._answers.pop(key, None)
            self._held += size - (old[1] if old else 0)
            self._answers[key] = (answer, size)
            while self._held > self.max_bytes:
                _, (_, dropped) = self._answers.popitem(last=False)
                self._held -= dropped


def held_bytes(value) -> int:
    """The bytes Python holds for ``value``: itself and, for a tuple, list, set or frozenset,
    everything in it (an object held twice counted twice).

    >>> held_bytes("") < held_bytes("x" * 100) < held_bytes(("x" * 100, {"y" * 100}))
    True
    """
    size = sys.getsizeof(value)
    if isinstance(value, (tuple, list, set, frozenset)):
        size += sum(held_bytes(item) for item in value)
    return size


_ENTRY_BYTES = 100  # a SharedLookups entry's own cost: its slot in the dict, its (answer, size) pair
_UNKNOWN = object()  # a lookup not answered yet
SHARED_LOOKUPS = SharedLookups()


class DatabaseProbe:
    """Read-only lookups in one database, memoised (and, answered without error, shared with the
    next probes of the same database content: ``SHARED_LOOKUPS``): does a literal occur in a column?
    ``database``: a SQLite file (a missing one counts as none), an open
    ``model.data.databases.Database`` of any backend (its lookups written in its SQL), or None.
    ``deadline`` (``time.monotonic()``; None: none): every read gets at most the time left, and
    one past it raises ``DeadlineExceeded``; ``max_result_bytes``: the result budget of each read.
    After ``new_query()`` the look-ups read for ``LOOKUP_TIME_LIMITS`` times ``timeout_s`` at most
    together, until the next ``new_query()``."""

    def __init__(self, database: Path | Database | None, timeout_s: float = 2.0,
                 deadline: float | None = None, max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES):
        if database is not None and not isinstance(database, Database):
            try:
                database = SqliteDatabase(Path(database), timeout_s=timeout_s, max_rows=MAX_ROWS,
                                          max_result_bytes=max_result_bytes)
            except DatabaseError:  # no such file: no database
                database = None
        self.database: Database | None = database
        # the SQLite file, when the database is one (None otherwise)
        self.db_path = database.path if isinstance(database, SqliteDatabase) else None
        self.dialect = database.dialect if database is not None else "sqlite"
        self.timeout_s = timeout_s
        self.deadline, self.max_result_bytes = deadline, max_result_bytes
        self._memo: dict[tuple, tuple[float, float]] = {}
        # tables (and ``EVERY_COLUMN``) a look-up of which timed out: not looked up again by this
        # probe (a 5M-row table cost each literal of a query, and each row of a file, the time limit)
        self._timed_out: set[str] = set()
        # columns a search for a literal failed to read (``columns_holding``): not read again
        self._failed: set[frozenset[str]] = set()
        self._lookups_until: float | None = None  # when this query's look-ups stop reading (None: never)

    def new_query(self) -> None:
        """Start the look-ups of a query: together they read for ``LOOKUP_TIME_LIMITS`` read time
        limits at most; the ones after are unknown, not read, and not remembered (the next query
        reads them in its own time)."""
        self._lookups_until = time.monotonic() + LOOKUP_TIME_LIMITS * self.timeout_s

    def _execute(self, sql: str, timeout_s: float | None = None, reads: str | None = None
                 ) -> tuple[list | None, str | None]:
        """``sql`` run within the time left; a look-up of ``reads`` (a table, or ``EVERY_COLUMN``)
        where one timed out before is not run (unknown), nor one past the query's look-up time
        (``LOOKUPS_SPENT``)."""
        if reads in self._timed_out:
            return None, f"not read: a look-up in {reads} timed out before"
        seconds = time_left(self.deadline, self.timeout_s if timeout_s is None else timeout_s, "features")
        left = math.inf if reads is None or self._lookups_until is None else self._lookups_until - time.monotonic()
        if left <= 0:
            return None, LOOKUPS_SPENT
        rows, error = self.database.execute(sql, min(seconds, left), self.max_result_bytes)
        if reads is not None and error is not None and error.startswith("timeout after "):
            if left < seconds:  # cut short by the query's look-up time: the table may be quick
                return None, LOOKUPS_SPENT
            self._timed_out.add(reads)
        return rows, error

    def _recall(self, key: tuple):
        """The lookup ``key``'s answer from this probe's memo, else from the answers shared by every
        probe of this database's content (``SHARED_LOOKUPS``, copied into the memo), else
        ``_UNKNOWN``."""
        if key in self._memo:
            return self._memo[key]
        shared = self._shared_key(key)
        known = SHARED_LOOKUPS.get(shared) if shared is not None else _UNKNOWN
        if known is not _UNKNOWN:
            self._memo[key] = known
        return known

    def _share(self, key: tuple, answer) -> None:
        """Keep a lookup's answer (one read without error) for the next probes of this database."""
        shared = self._shared_key(key)
        if shared is not None:
            SHARED_LOOKUPS.put(shared, answer)

    def _shared_key(self, key: tuple) -> tuple | None:
        """``key`` for this database's content: its name and ``cache_identity`` (a SQLite or
        DuckDB file's size and modification time, so a changed file is read again); None for no
        database or a live server, whose data can change at any moment: not shared."""
        identity = getattr(self.database, "cache_identity", None)
        return None if identity is None else (self.database.name, identity, self.max_result_bytes, key)

    def _names(self, table: str, column: str) -> tuple[str, str]:
        db = self.database
        return db.table_name(table), db.column_name(table, column)

    def value_in_column(self, table: str, column: str, literal: str, like: bool) -> tuple[float, float]:
        """(exact, case-insensitive) occurrence of ``literal`` (a SQL literal) in table.column."""
        key = (table, column, literal, like)
        known = self._recall(key)
        if known is not _UNKNOWN:
            return known
        result = (NAN, NAN)
        if self.database is not None and column != "*":
            tab, col = self._names(table, column)
            literal, text = self.database.literal(literal), self.database.text_type()
            # SQLite's meaning on every backend: LIKE ignores case, = does not
            folded = f"lower(CAST({col} AS {text}))", f"lower(CAST({literal} AS {text}))"
            if like:
                op = "ILIKE" if self.dialect in ("postgres", "duckdb") else "LIKE"
                tests = f"{col} {op} {literal}", f"{folded[0]} {op} {folded[1]}"
            else:
                tests = self.database.equals(table, column, col, literal), self.database.same_text(*folded)
            sql = f"SELECT EXISTS(SELECT 1 FROM {tab} WHERE {tests[0]}), EXISTS(SELECT 1 FROM {tab} WHERE {tests[1]})"
            rows, error = self._execute(sql, reads=table)
            if error == LOOKUPS_SPENT:
                return result
            if error is None and rows:
                result = (float(rows[0][0]), float(rows[0][1]))
                self._share(key, result)
        self._memo[key] = result
        return result

    def columns_holding(self, literal: str, columns: Sequence[str]) -> set[str] | None:
        """Which of ``columns`` ("table.column") hold the text ``literal`` (a SQL literal), ignoring
        case, in their first ``SCAN_ROWS`` rows (fewer when there are so many columns that they
        would read more than ``SCAN_BUDGET`` rows together): one read for each ``HOLDING_CHUNK`` of
        them. None without a database, for more than ``HOLDING_COLUMNS`` columns, or when a read
        fails or times out (unknown, not "none of them"); a read that failed is not tried again by
        this probe, for any literal; the reads of one search together get one read's time limit
        (``timeout_s``), and after a search timed out the probe searches no more."""
        key = ("holding", literal, tuple(columns))
        if self._recall(key) is _UNKNOWN:
            found: set[str] | None = None if self.database is None else set()
            if self.database is not None and columns:
                rows_each = max(SCAN_BUDGET // HOLDING_COLUMNS, min(SCAN_ROWS, SCAN_BUDGET // len(columns)))
                error = "too many columns" if len(columns) > HOLDING_COLUMNS else None
                until = time.monotonic() + self.timeout_s  # its reads together: one read's time limit
                for start in range(0, len(columns) if error is None else 0, HOLDING_CHUNK):
                    chunk = columns[start:start + HOLDING_CHUNK]
                    hits, error = self._holding(literal, chunk, rows_each, until - time.monotonic())
                    if error == LOOKUPS_SPENT:
                        return None
                    if error is not None:
                        break
                    found |= hits
                searched = error is None or len(columns) <= HOLDING_COLUMNS
                present = [n for n in columns if self.database.has_table(n.rsplit(".", 1)[0])] if error and searched else []
                if 0 < len(present) < len(columns):  # a table the schema names and the database lacks
                    found = self.columns_holding(literal, present)
                elif error is not None:
                    found = None
                    if searched and not error.startswith("not read: "):
                        self._failed.add(frozenset(chunk))
            self._memo[key] = found
            if found is not None:
                self._share(key, found)
        return self._memo[key]

    def _holding(self, literal: str, chunk: Sequence[str], rows_each: int, seconds: float
                 ) -> tuple[set[str], str | None]:
        """(which of ``chunk`` hold ``literal`` in their first ``rows_each`` rows, the read's error):
        one read of at most ``seconds`` (past them: timed out); not run (an error) where a read of
        these columns failed before."""
        if any(failed <= set(chunk) for failed in self._failed):
            return set(), "not read: a search of these columns failed before"
        alias = "" if self.dialect == "sqlite" else " AS s"  # SQLite's own SQL as it was
        text, value = self.database.text_type(), self.database.literal(literal)
        probes = [f'EXISTS(SELECT 1 FROM (SELECT {c} AS v FROM {t} LIMIT {rows_each}){alias} '
                  f'WHERE {self.database.same_text(f"lower(CAST(v AS {text}))", f"lower({value})")})'
                  for t, c in (self._names(*name.rsplit(".", 1)) for name in chunk)]
        rows, error = self._execute("SELECT " + ", ".join(probes), max(seconds, 0.001), reads=EVERY_COLUMN)
        if error is None and not rows:
            error = "no row"
        return (set() if error else {name for name, hit in zip(chunk, rows[0]) if hit}), error

    def near_match(self, table: str, column: str, text: str) -> float:
        """Best difflib ratio of ``text`` against the column's distinct values (lower case, among
        its first ``SCAN_ROWS`` rows, at most 5,000 values; NaN without a database or on an error)."""
        key = ("values", table, column)
        if self._recall(key) is _UNKNOWN:
            values: list[str] | None = None
            if self.database is not None:
                tab, col = self._names(table, column)
                alias = "" if self.dialect == "sqlite" else " AS s"
                rows, error = self._execute(f'SELECT DISTINCT lower(CAST(v AS {self.database.text_type()})) '
                                            f'FROM (SELECT {col} AS v FROM {tab} LIMIT {SCAN_ROWS}){alias} '
                                            'LIMIT 5000', reads=table)
                if error == LOOKUPS_SPENT:
                    return NAN
                values = None if error else [r[0] for r in rows if r[0] is not None]
            self._memo[key] = values
            if values is not None:
                self._share(key, values)
        values = self._memo[key]
        if values is None:
            return NAN
        text = text.lower()
        return 1.0 if text in values else best_ratios([text], values, text_first=True)[0]

    def run(self, sql: str, timeout_s: float) -> tuple[list | None, str | None]:
        if self.database is None:
            return None, "no database"
        return self._execute(sql, timeout_s)


@functools.lru_cache(maxsize=64)  # schemas hash by identity: made once per loaded schema
def schema_names(schema: rat.Schema) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """A schema's tables, its distinct column names, and the ``name_phrase`` of each table then
    each column: what ``SchemaIndex`` matches every question against (made once a schema, not
    once a row: a schema of many names costs each row their words otherwise)."""
    tables = tuple(schema.tables)
    columns = tuple(dict.fromkeys(c for cols in schema.tables.values() for c in cols))
    return tables, columns, tuple(name_phrase(name) for name in tables + columns)


class SchemaIndex:
    """Per (question, schema): fuzzy and (with a question vector) MiniLM scores of every table and
    column name, ranked."""

    def __init__(self, schema: rat.Schema | None, question: QuestionIndex, deadline: float | None = None):
        self.schema = schema
        self.tables: dict[str, float] = {}
        self.columns: dict[str, float] = {}
        self.semantic: dict[str, dict[str, float]] = {"table": {}, "column": {}}
        self._ordered: dict = {}  # (rank_gap's sorted scores and their best, per kind)
        if schema is None:
            return
        tables, columns, phrases = schema_names(schema)
        scores = question.fuzzy_many(phrases, deadline)
        self.tables = dict(zip(tables, scores[:len(tables)]))
        self.columns = dict(zip(columns, scores[len(tables):]))
        if question.vector is not None:
            from model.lm.sentence import embed_items

            for kind, names in (("table", sorted(self.tables)), ("column", sorted(self.columns))):
                if names:
                    cosines = embed_items(names) @ question.vector
                    self.semantic[kind] = {n: float(c) for n, c in zip(names, cosines)}
        self.foreign = {frozenset(pair) for pair in schema.foreign_keys}
        self.fk_columns = {c for pair in schema.foreign_keys for c in pair}

    def rank_gap(self, kind: str, name: str, score: float) -> tuple[float, float]:
        return self._rank_gap(kind, self.tables if kind == "table" else self.columns, score)

    def semantic_features(self, kind: str, name: str) -> tuple[float, float, float]:
        """(cosine, rank, gap) of a table or column name against the question; NaN when unknown."""
        scores = self.semantic[kind]
        if name not in scores:
            return NAN, NAN, NAN
        return (scores[name], *self._rank_gap(("semantic", kind), scores, scores[name]))

    def _rank_gap(self, key, scores: dict[str, float], score: float) -> tuple[float, float]:
        """(how many of ``scores`` are above ``score``, the best one less it): from their sorted
        values, kept per ``key`` (each node read the whole schema's before: nodes x names)."""
        if not scores:
            return NAN, NAN
        if key not in self._ordered:  # (a NaN is never above)
            self._ordered[key] = sorted(v for v in scores.values() if not math.isnan(v)), max(scores.values())
        ordered, top = self._ordered[key]
        return float(len(ordered) - bisect.bisect_right(ordered, score)), top - score


# why a query is not run where it has a database: unknown results, as without one
NOT_RUN_PARAMETERS = "it has parameters, given their values only when it runs"
_NOT_RUN = (NOT_RUN_PARAMETERS, NOT_WRITTEN)


def _result_features(rows: list | None, error: str | None) -> tuple[list[float], str | None]:
    if error == "no database" or unfinished(error) or error is not None and error.startswith(_NOT_RUN):
        return [NAN] * 6, None  # its result unknown, as without a database
    if error is not None:
        return [1.0, NAN, NAN, NAN, NAN, NAN], None
    n_cols = len(rows[0]) if rows else NAN
    null_column = float(any(all(r[j] is None for r in rows) for j in range(len(rows[0])))) if rows else NAN
    zero = float(len(rows) == 1 and len(rows[0]) == 1 and rows[0][0] in (0, None))
    digest = result_digest(rows)
    return [0.0, float(not rows), math.log1p(len(rows)), n_cols, null_column, zero], digest


def single_system_features(example, schema: rat.Schema | None, db_path: Path | Database | None,
                           timeout_s: float = 5.0, probe: DatabaseProbe | None = None,
                           question: QuestionIndex | None = None,
                           schema_index: SchemaIndex | None = None, dialect: str = "sqlite") -> NodeFeatures:
    """The single-system rows of one ``NodeExample`` (pure but for read-only database reads).
    ``db_path``: a SQLite file or an open ``Database``. ``dialect``: the dialect ``example.sql``
    is written in; the database runs it as ``runnable_sql`` writes it for the database's own.

    ``probe``, ``question`` and ``schema_index`` may be shared across examples of the same
    database / question to reuse their memos; they are built here when not given.
    """
    names, arity, kinds = list(example.node_names), list(example.node_arity), list(example.node_types)
    n = len(names)
    if not (len(arity) == len(kinds) == n):
        raise ValueError(f"{example.question_id}: {n} names, {len(arity)} arities, {len(kinds)} types")
    shape = tree_shape(arity)
    question = question or QuestionIndex(example.question)
    schema_index = schema_index or SchemaIndex(schema, question)
    probe = probe or DatabaseProbe(db_path, timeout_s)
    col = {name: j for j, name in enumerate(SINGLE_FEATURES)}
    holding: dict[int, tuple[str, ...] | None] = {}
    x = np.full((n, len(SINGLE_FEATURES)), NAN)

    # whole-tree and question values, the same for every node
    tree_tables = {names[i] for i in range(n) if kinds[i] == "table"}
    # another schema's table `In_schema(t, s)` is the schema's `s.t`, as its columns name it
    # (it and its schema name `s`, a leaf, are read as that table: `s` is no literal the question says)
    schema_names = {k: f"{names[c[1]]}.{names[c[0]]}" for i, c in enumerate(shape.children)
                    if names[i] == "In_schema" and len(c) == 2 for k in (i, c[1])}
    tree_tables |= set(schema_names.values())
    node_kinds = [("table" if i in schema_names else k) for i, k in enumerate(kinds)] if schema_names else kinds
    label_count: dict[str, int] = defaultdict(int)
    for name in names:
        label_count[name] += 1
    literals = {form for i in range(n) if kinds[i] == "value" for form in question_forms(
        literal_text(names[i]), names[shape.parent[i]] if shape.parent[i] >= 0 else None)}
    parameters = sorted({names[i] for i in range(n) if kinds[i] == "value" and rat.kinds.is_parameter(names[i])})
    rows, error = None, "no database"
    if parameters and probe.database is not None:  # not run: its values are given when it runs
        error = f"{NOT_RUN_PARAMETERS} ({', '.join(parameters[:3])})"
    elif probe.database is not None:
        runnable, error = probe.database.written(example.sql, dialect, schema)
        if runnable is not None:
            rows, error = probe.run(runnable, timeout_s)
    probe.new_query()  # the look-ups' time starts once the query has run
    result, digest = _result_features(rows, error)
    broadcast = {
        "tree_size": n, "tree_tables": sum(k == "table" for k in kinds),
        "tree_joins": sum(k in JOINS for k in kinds), "tree_selections": kinds.count("Selection"),
        "tree_projects": kinds.count("Project"), "tree_values": kinds.count("value"),
        "schema_tables": len(schema.tables) if schema else NAN,
        "schema_columns": sum(map(len, schema.tables.values())) if schema else NAN,
        "question_numbers_unused": sum(num not in literals for num in question.numbers),
        "question_words": len(question.words),
        **dict(zip(("exec_error", "exec_empty", "exec_log_rows", "exec_columns", "exec_null_column",
                    "exec_zero"), result)),
        **{cue: float(has_cue(question.text, phrases)) for cue, phrases in CUES.items()},
    }
    for name, value in broadcast.items():
        x[:, col[name]] = value

    for i in range(n):
        kind, name, p = node_kinds[i], schema_names.get(i, names[i]), shape.parent[i]
        x[i, col["kind"]] = KIND_CODE.get(kind, 0)
        x[i, col["parent_kind"]] = KIND_CODE["root"] if p < 0 else KIND_CODE.get(node_kinds[p], 0)
        x[i, col["depth"]], x[i, col["height"]] = shape.depth[i], shape.height[i]
        x[i, col["subtree_size"]], x[i, col["n_children"]] = shape.size[i], arity[i]
        x[i, col["child_index"]], x[i, col["position"]] = shape.child_index[i], i / n
        x[i, col["label_repeats"]] = label_count[name]
        if kind in OPERATOR_CUES:
            x[i, col["cue_match"]] = float(has_cue(question.text, OPERATOR_CUES[kind]))
        if kind == "table":
            table_words = words(name)
            x[i, col["name_word_share"]] = question.word_share(table_words)
            x[i, col["name_phrase"]] = question.phrase(table_words)
            score = x[i, col["name_fuzzy"]] = question.fuzzy(" ".join(table_words))
            x[i, col["name_rank"]], x[i, col["name_gap"]] = schema_index.rank_gap("table", name, score)
            (x[i, col["name_semantic"]], x[i, col["name_semantic_rank"]],
             x[i, col["name_semantic_gap"]]) = schema_index.semantic_features("table", name)
            if schema is not None:
                x[i, col["in_schema"]] = float(name in schema.tables)
        elif kind == "column":
            _column_features(x[i], col, name, schema, schema_index, question, tree_tables)
        elif kind == "value":
            _value_features(x, col, i, names, kinds, shape, question, probe, schema, holding)
        elif kind == "Eq" and schema is not None:
            pair = [names[c] for c in shape.children[i] if kinds[c] == "column" and "." in names[c]]
            if len(pair) == 2 and pair[0].split(".")[0] != pair[1].split(".")[0]:
                # a self-join's `t_2.c` is `t.c` in the schema's keys
                pair = [schema.source(c) or c for c in pair]
                x[i, col["join_on_fk"]] = float(frozenset(pair) in schema_index.foreign)

    # bottom-up subtree aggregates (post-order: children before parents); math.isnan: numpy's costs
    # ~0.5 us a scalar
    link_sum, link_count = [0.0] * n, [0] * n
    for i in range(n):
        kids = shape.children[i]
        if kinds[i] in JOINS and schema is not None:
            fk = [x[c, col["join_on_fk"]] for c in _descendants(i, shape) if kinds[c] == "Eq"]
            fk = [v for v in fk if not math.isnan(v)]
            x[i, col["join_fk_share"]] = float(np.mean(fk)) if fk else NAN
        for own, low, mean in (("name_word_share", "subtree_min_link", "subtree_mean_link"),
                               ("name_semantic", "subtree_min_semantic", None),
                               ("value_in_question", "subtree_min_value_in_question", None),
                               ("value_in_column", "subtree_min_value_in_column", None)):
            values = [x[i, col[own]]] + [x[c, col[low]] for c in kids]
            values = [v for v in values if not math.isnan(v)]
            if values:
                x[i, col[low]] = min(values)
        share = x[i, col["name_word_share"]]
        link_sum[i] = (0.0 if math.isnan(share) else share) + sum(link_sum[c] for c in kids)
        link_count[i] = (0 if math.isnan(share) else 1) + sum(link_count[c] for c in kids)
        x[i, col["subtree_mean_link"]] = link_sum[i] / link_count[i] if link_count[i] else NAN
    return NodeFeatures(SINGLE_FEATURES, x, digest, None if error == "no database" else error, holding)


def _descendants(i: int, shape: Shape) -> list[int]:
    # post-order: a subtree occupies the `size` positions ending at its root
    return list(range(i - shape.size[i] + 1, i))


def _of_subquery(column: str, schema: rat.Schema | None) -> bool:
    """Whether a column label is a subquery's or CTE's (``derived.c``), not a table's."""
    table = column.rpartition(".")[0]
    return rat.schema.is_derived(table) and (schema is None or table not in schema.tables)


def _column_features(row: np.ndarray, col: dict, name: str, schema: rat.Schema | None,
                     schema_index: SchemaIndex, question: QuestionIndex, tree_tables: set) -> None:
    if name == "*":
        row[col["is_star"]] = 1.0
        return
    row[col["is_star"]] = 0.0
    table, _, column = name.rpartition(".")
    column_words = words(column)
    row[col["name_word_share"]] = question.word_share(column_words)
    row[col["name_phrase"]] = question.phrase(column_words)
    score = row[col["name_fuzzy"]] = question.fuzzy(" ".join(column_words))
    row[col["name_rank"]], row[col["name_gap"]] = schema_index.rank_gap("column", column, score)
    (row[col["name_semantic"]], row[col["name_semantic_rank"]],
     row[col["name_semantic_gap"]]) = schema_index.semantic_features("column", column)
    if _of_subquery(name, schema):  # the schema says nothing of it
        row[col["table_in_tree"]] = 1.0
        return
    if table:  # a self-join's `t_2` is the table `t` of the FROM clause (`rat.Schema.source`)
        names = schema.tables_of(table) if schema is not None else rat.schema.qualifiers(table)
        own = next((t for t in names if t in tree_tables), None)
        row[col["table_word_share"]] = question.word_share(words(own or table))
        row[col["table_in_tree"]] = float(own is not None)
    if schema is None:
        return
    source = schema.source(name)
    name = source or name
    row[col["is_primary_key"]] = float(name in schema.primary_keys)
    row[col["is_foreign_key"]] = float(name in schema_index.fk_columns)
    row[col["tables_sharing_name"]] = len(schema.tables_with_column(column))
    row[col["in_schema"]] = float(source is not None)
    row[col["column_type"]] = COLUMN_TYPES.index(column_type(schema.column_types.get(name, "other")))


def other_text_columns(schema: rat.Schema, own: str) -> list[str]:
    """The schema's columns, but ``own``, that may store a text literal compared with ``own``
    (its text columns and those of no known type), in the schema's order: where the
    ``literal_elsewhere`` feature looks for it, and a verdict names where it is stored."""
    return [f"{t}.{c}" for t, columns in schema.tables.items() for c in columns if f"{t}.{c}" != own
            and c != "*" and column_type(schema.column_types.get(f"{t}.{c}", "text")) in ("text", "other")]


def _value_features(x: np.ndarray, col: dict, i: int, names: Sequence[str], kinds: Sequence[str],
                    shape: Shape, question: QuestionIndex, probe: DatabaseProbe,
                    schema: rat.Schema | None = None, holding: dict | None = None) -> None:
    """The value features of the literal at ``i``; ``holding``: where it keeps the other columns
    the ``literal_elsewhere`` look-up found it in (``NodeFeatures.columns_holding``)."""
    row = x[i]
    label = names[i]
    text = literal_text(label)
    is_number = _is_number(text)
    row[col["value_is_number"]] = float(is_number)
    if is_number:
        forms = question_forms(text, names[shape.parent[i]] if shape.parent[i] >= 0 else None)
        row[col["value_in_question"]] = float(any(
            form in question.numbers or form.endswith(".0") and form[:-2] in question.numbers for form in forms))
    else:
        padded = f" {' '.join(re.findall(r'[a-z0-9]+', text.lower()))} "
        row[col["value_in_question"]] = float(padded.strip() != "" and padded in question.text)
        row[col["value_fuzzy"]] = question.fuzzy(" ".join(words(text))) if text else 0.0
    p = shape.parent[i]
    if p < 0 or kinds[p] not in COMPARISONS:
        return
    compared = [c for c in shape.children[p] if kinds[c] == "column" and "." in names[c]]
    columns = [names[c] for c in compared]
    if len(columns) != 1 or label[:1] not in "'\"0123456789-":
        return
    if _of_subquery(columns[0], schema):
        return  # no stored values to look in
    if schema is not None:
        columns = [schema.source(columns[0]) or columns[0]]
    table, _, column = columns[0].rpartition(".")
    like = kinds[p] in ("Like", "Not_like")
    exact, nocase = probe.value_in_column(table, column, label, like=like)
    row[col["value_in_column"]], row[col["value_in_column_nocase"]] = exact, nocase
    if probe.database is None:
        return
    # where else the literal is, and how near the column's values come: a literal found in
    # another column points at the column, one close to a stored value at the literal
    both = (i, compared[0])
    x[both, col["compared_literal_found"]] = nocase
    if is_number or like or schema is None or not text:
        return
    others = other_text_columns(schema, columns[0])
    found = probe.columns_holding(label, others)
    x[both, col["literal_elsewhere"]] = NAN if found is None else min(len(found), 5)
    if holding is not None:  # (named by a verdict: not looked up again)
        holding[i] = None if found is None else tuple(c for c in others if c in found)
    x[both, col["literal_near_match"]] = probe.near_match(table, column, text)


# ---------------------------------------------------------------------------------------------
# Consensus features


def _question_agreements(examples: Sequence, real: Sequence[bool] | None = None):
    """Per question answered by two or more (``real``) examples: (their indices, index -> tree,
    index -> node agreement array, index -> other index -> node labels against its tree),
    agreement being ``model.eval.baselines.node_agreement``."""
    by_question: dict[str, list[int]] = defaultdict(list)
    for k, e in enumerate(examples):
        if real is None or real[k]:
            by_question[e.question_id].append(k)
    for indices in by_question.values():
        if len(indices) < 2:
            continue
        trees = {k: tree_of({"node_names": examples[k].node_names, "node_arity": examples[k].node_arity})
                 for k in indices}
        # keyed by example index, not system: two outputs of one system stay apart
        labels = labels_against_others(trees)
        yield indices, trees, {k: np.mean(list(labels[k].values()), axis=0) for k in indices}, labels


def reference_answer(k: int, others: Sequence[int], trees: dict, result_digests: Sequence[str | None]) -> list[int]:
    """The other answers that give the most common answer different from answer ``k``'s: the
    same result when ``k``'s query ran, else the same tree (ties: the first met). Empty when
    every other answer is ``k``'s own.

    >>> import rat
    >>> trees = {i: rat.to_tree(q) for i, q in enumerate(["SELECT a FROM t", "SELECT b FROM t",
    ...                                                  "SELECT b FROM t", "SELECT c FROM t"])}
    >>> reference_answer(0, [1, 2, 3], trees, [None] * 4)  # by tree: b twice
    [1, 2]
    >>> reference_answer(0, [1, 2, 3], trees, ["r1", "r2", "r2", "r1"])  # c gives a's rows
    [1, 2]
    >>> reference_answer(0, [1, 2, 3], trees, ["r1", "r2", "r3", "r3"])  # b and c give the same rows
    [2, 3]
    """
    def answer(m: int):
        by_result = result_digests[k] is not None and result_digests[m] is not None
        return ("result", result_digests[m]) if by_result else ("tree", trees[m].hash)

    own = answer(k)
    groups: dict[tuple, list[int]] = {}
    for m in others:
        if answer(m) != own:
            groups.setdefault(answer(m), []).append(m)
    return max(groups.values(), key=len, default=[])


def node_agreements(examples: Sequence) -> list[np.ndarray | None]:
    """Per example, each node's agreement with the other real outputs for its question (None for
    an example that is a perturbation, a gold query, or its question's only output).

    >>> import rat
    >>> from types import SimpleNamespace as E
    >>> def ex(system, sql):
    ...     nodes = rat.to_tree(sql).postorder()
    ...     return E(question_id="q", system=system, node_names=[n.label for n in nodes],
    ...              node_arity=[len(n.children) for n in nodes])
    >>> out = node_agreements([ex("a", "SELECT x FROM t"), ex("b", "SELECT y FROM t"),
    ...                        ex("perturb:column", "SELECT x FROM t")])
    >>> out[0].tolist(), out[2]
    ([0.0, 1.0, 0.0], None)
    """
    real = [not (e.system.startswith("perturb:") or e.system == "gold") for e in examples]
    out: list[np.ndarray | None] = [None] * len(examples)
    for _, _, agreements, _ in _question_agreements(examples, real):
        for k, agreement in agreements.items():
            out[k] = agreement
    return out


def consensus_features(examples: Sequence, result_digests: Sequence[str | None]) -> list[np.ndarray]:
    """Consensus rows (nodes, len(CONSENSUS_FEATURES)) of every example, against the other
    examples of the same question (one per system). Questions answered once get NaN rows.

    ``agreement`` is ``model.eval.baselines.node_agreement``: the share of the other trees in
    which the node occurs (``rat.label_nodes``, contextual hashes).
    """
    out: list[np.ndarray] = [np.full((len(e.node_labels), len(CONSENSUS_FEATURES)), NAN)
                             for e in examples]
    col = {name: j for j, name in enumerate(CONSENSUS_FEATURES)}
    for indices, trees, agreements, labels in _question_agreements(examples):
        for k in indices:
            others = [m for m in indices if m != k]
            x, tree = out[k], trees[k]
            agreement = agreements[k]
            shape = tree_shape(examples[k].node_arity)
            x[:, col["agreement"]] = agreement
            x[:, col["parent_agreement"]] = [agreement[p] if p >= 0 else agreement[i]
                                             for i, p in enumerate(shape.parent)]
            x[:, col["subtree_min_agreement"]] = [agreement[i - shape.size[i] + 1: i + 1].min()
                                                  for i in range(len(agreement))]
            x[:, col["root_agreement"]] = agreement[-1]
            x[:, col["tree_agreement"]] = np.mean([trees[m].hash == tree.hash for m in others])
            digest = result_digests[k]
            if digest is not None:
                x[:, col["result_agreement"]] = np.mean([result_digests[m] == digest for m in others])
            x[:, col["n_other_systems"]] = len(others)
            reference = reference_answer(k, others, trees, result_digests)
            if reference:
                x[:, col["reference_agreement"]] = np.mean([labels[k][m] for m in reference], axis=0)
                x[:, col["reference_site"]] = np.mean([error_sites(labels[k][m], examples[k].node_arity)
                                                       for m in reference], axis=0)
                x[:, col["reference_share"]] = len(reference) / len(others)
    return out


# ---------------------------------------------------------------------------------------------
# Building with the disk cache


def _db_stamp(db_path: Path | Database | None) -> str | None:
    """What a cached row's database was: ``"none"``, a file's size and time, or None: rows
    read from this database are not cached (``Database.cache_identity``: a live server)."""
    if isinstance(db_path, Database):
        return db_path.cache_identity
    if db_path is None or not Path(db_path).exists():
        return "none"
    stat = Path(db_path).stat()
    return f"{stat.st_size}:{stat.st_mtime_ns}"


def _schema_digest(schema: rat.Schema | None) -> str:
    if schema is None:
        return "none"
    parts = [sorted(schema.tables.items()), schema.primary_keys, schema.foreign_keys,
             sorted(schema.column_types.items())]
    # types read otherwise since column_type learnt SQLite's words (BIRD): rows cached before
    # are not reused; a schema in Spider's words keeps its digest (and its cached rows)
    renamed = sorted((k, column_type(v)) for k, v in schema.column_types.items()
                     if column_type(v) not in (v, "other"))
    if renamed:
        parts.append(renamed)
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def cache_key(example, schema_digest: str, db_stamp: str, semantic: bool = True,
              dialect: str = "sqlite") -> str:
    """Digest of everything a single-system row depends on (and the features' VERSION); a row
    without the MiniLM columns (``semantic=False``) has its own key, and so has SQL of another
    dialect than SQLite. The tree is part of it: a `rat` that reads the same SQL otherwise
    (`GROUP BY 1` as a column) never meets rows cached for the old tree."""
    parts = [VERSION, example.db_id, example.question, example.sql, example.tree_text, schema_digest,
             db_stamp]
    if dialect != "sqlite":
        parts.append(f"dialect:{dialect}")
    text = json.dumps(parts if semantic else [*parts, "no-semantic"])
    return hashlib.sha256(text.encode()).hexdigest()


def reads_semantic(drop: Sequence[str] = ()) -> bool:
    """Whether a model that leaves out ``drop`` (``model.drop``: feature, group or set names)
    reads any MiniLM column; when it does not, ``build_features(semantic=False)`` embeds nothing.

    >>> reads_semantic(["semantic"]), reads_semantic(["name_semantic"]), reads_semantic([])
    (False, True, True)
    """
    in_sets = {n for d in drop for n in FEATURE_SETS.get(d, ())}
    return any(f.name not in drop and f.group not in drop and f.name not in in_sets
               for f in FEATURES if f.group == "semantic")


def _cache_path(folder: Path, key: str) -> Path:
    return folder / key[:2] / f"{key}.pkl"


def _write_atomic(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)


@dataclass
class FeatureReport:
    examples: int = 0
    nodes: int = 0
    cache_hits: int = 0
    seconds: float = 0.0
    # each example's `NodeFeatures.execution_error` (None for rows read from the cache)
    execution_errors: list[str | None] = field(default_factory=list)
    # each example's `NodeFeatures.columns_holding` (empty for a row of an older cache)
    columns_holding: list[dict[int, tuple[str, ...] | None]] = field(default_factory=list)

    def __str__(self) -> str:
        rate = self.nodes / self.seconds if self.seconds else float("inf")
        return (f"features: {self.examples} examples, {self.nodes} nodes, {self.cache_hits} from "
                f"cache, {self.seconds:.1f} s ({rate:.0f} nodes/s)")


def build_features(examples: Sequence, schemas: dict[str, rat.Schema],
                   db_paths: dict[str, Path | Database | None],
                   consensus: bool = False, use_cache: bool = True, cache_folder: Path | None = None,
                   timeout_s: float = 5.0, progress: bool = False, lm: bool | str = False,
                   semantic: bool = True, consensus_by_result: bool = True, deadline: float | None = None,
                   max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES, dialects: Sequence[str] | None = None
                   ) -> tuple[list[np.ndarray], tuple[str, ...], FeatureReport]:
    """Feature matrices (one per example, nodes x features) and their column names.

    Single-system rows come from the cache when present (``cache_dir("features", VERSION)``),
    else are computed and stored; scorer-LM columns are appended when ``lm`` (``True``: the
    packaged SmolLM2; a name such as ``"qwen_coder"`` or a path: that scorer LM) and consensus
    columns when ``consensus`` (``consensus_by_result=False``: as without databases, the other
    answers compared by tree only, no ``result_agreement``). ``semantic=False`` leaves the MiniLM
    columns NaN (no embedding: for a model that does not read them, ``reads_semantic``); such rows
    are cached under their own key.
    ``deadline`` / ``max_result_bytes``: each database's ``DatabaseProbe`` (a scoring request's
    time budget: ``DeadlineExceeded`` once it has passed; its result budget). ``dialects``: each
    example's SQL dialect (``rat.DIALECTS``; default: all SQLite).
    """
    start = time.perf_counter()
    folder = (cache_folder or cache_dir("features", VERSION)) if use_cache else None
    report = FeatureReport(examples=len(examples))
    # without the cache no key is needed (a scoring request: the schema digests and file stats go)
    schema_digests = {db: _schema_digest(s) for db, s in schemas.items()} if use_cache else {}
    probes: dict[str, DatabaseProbe] = {}
    # per question text (rows of one question under several ids share its matches: their cost
    # grows with the schema's names)
    questions: dict[str, QuestionIndex] = {}
    schema_indexes: dict[tuple[str, str], SchemaIndex] = {}
    singles: list[NodeFeatures] = []
    question_vectors: dict[str, np.ndarray] | None = None
    dialects = list(dialects) if dialects is not None else ["sqlite"] * len(examples)
    for k, e in enumerate(examples):
        db_path = db_paths.get(e.db_id)
        stamp = _db_stamp(db_path) if use_cache else None
        cached = use_cache and stamp is not None
        path = _cache_path(folder, cache_key(e, schema_digests.get(e.db_id, "none"), stamp, semantic,
                                             dialects[k])) if cached else None
        table = None
        if cached and path.exists():
            try:
                with open(path, "rb") as f:
                    table = pickle.load(f)
            except (OSError, pickle.UnpicklingError, EOFError, AttributeError):
                table = None
        if table is not None and table.values.shape == (len(e.node_labels), len(SINGLE_FEATURES)):
            report.cache_hits += 1
        else:
            time_left(deadline, timeout_s, "features")
            if e.db_id not in probes:
                probes[e.db_id] = DatabaseProbe(db_path, timeout_s, deadline, max_result_bytes)
            if e.question not in questions:
                if question_vectors is None:  # first cache miss: embed every question at once
                    question_vectors = _question_vectors(examples) if semantic else {}
                questions[e.question] = QuestionIndex(e.question, question_vectors.get(e.question))
            index_key = (e.question, e.db_id)
            if index_key not in schema_indexes:
                schema_indexes[index_key] = SchemaIndex(schemas.get(e.db_id), questions[e.question], deadline)
            table = single_system_features(e, schemas.get(e.db_id), db_path, timeout_s,
                                           probes[e.db_id], questions[e.question],
                                           schema_indexes[index_key], dialects[k])
            if cached:
                _write_atomic(path, table)
        singles.append(table)
        report.nodes += len(e.node_labels)
        if progress and (k + 1) % 1000 == 0:
            print(f"  features: {k + 1}/{len(examples)} examples, {time.perf_counter() - start:.0f} s",
                  flush=True)
    matrices = [t.values for t in singles]
    report.execution_errors = [t.execution_error for t in singles]
    report.columns_holding = [t.columns_holding or {} for t in singles]
    names = SINGLE_FEATURES
    if lm:
        extra = lm_span_features(examples, schemas, progress=progress, lm_model=None if lm is True else lm,
                                 dialects=dialects)
        matrices = [np.hstack([m, c]) for m, c in zip(matrices, extra)]
        names = names + LM_FEATURES
    if consensus:
        digests = [t.result_digest if consensus_by_result else None for t in singles]
        extra = consensus_features(examples, digests)
        matrices = [np.hstack([m, c]) for m, c in zip(matrices, extra)]
        names = names + CONSENSUS_FEATURES
    report.seconds = time.perf_counter() - start
    return matrices, names, report


# SQL words and punctuation, for span matching; a quoted string or name is one word, its text
# what the quotes hold (in brackets, SQL Server's names only: not an array's ARRAY['a', 'b'])
_SQL_WORD = re.compile(r"""'((?:[^']|'')*)'|"((?:[^"]|"")*)"|`([^`]*)`|\[(\w[\w $#@-]*)]|\w+|[^\w\s]""")
_BACKSLASH_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


@functools.cache
def _sql_word(dialect: str) -> re.Pattern | None:
    """``_SQL_WORD`` of a dialect whose strings escape with a backslash as its sqlglot tokenizer
    reads them (Snowflake, Redshift, BigQuery, MySQL, Databricks: `'O\\'Brien'`, which sqlglot
    writes for Snowflake's and Redshift's `'O''Brien'`; a doubled quote is read too), in its
    double-quoted strings as well where ``"`` quotes a string (BigQuery, MySQL, Databricks);
    None: a dialect without (``_SQL_WORD``)."""
    from rat.canonicalize import sqlglot_dialect

    tokenizer = sqlglot_dialect(rat.dialects.dialect(dialect)).tokenizer_class
    if "\\" not in tokenizer.STRING_ESCAPES:
        return None
    double = r'"((?:[^"\\]|\\.|"")*)"' if '"' in tokenizer.QUOTES else r'"((?:[^"]|"")*)"'
    return re.compile(r"'((?:[^'\\]|\\.|'')*)'|" + double + r"|`([^`]*)`|\[(\w[\w $#@-]*)]|\w+|[^\w\s]", re.DOTALL)


def word_spans(text: str, dialect: str = "sqlite") -> list[tuple[str, int, int]]:
    """(lower-cased word, start, end) of each SQL word of ``text``, written in ``dialect``; a
    string or a name in quotes (single, double, backticks, brackets) is one word, what the quotes
    hold, its span the quotes' (``"T1".age`` matches ``singer.age`` as ``T1.age`` does;
    ``"France"`` matches ``'France'``); in a dialect whose strings escape with a backslash, a
    quote so escaped is a doubled one (``'O\\'Brien'`` matches ``'O''Brien'``).

    >>> word_spans('SELECT "T1".name FROM t WHERE a = "New York"')[1:4], word_spans("a = 'New York'")[-1]
    ([('t1', 7, 11), ('.', 11, 12), ('name', 12, 16)], ('new york', 4, 14))
    >>> word_spans("a = 'O\\\\'Brien' AND b", "snowflake")[2:]
    [("o''brien", 4, 14), ('and', 15, 18), ('b', 19, 20)]
    """
    pattern = _sql_word(dialect) if dialect != "sqlite" else None
    if pattern is None:
        return [(next((g for g in m.groups() if g is not None), m.group()).lower(), m.start(), m.end())
                for m in _SQL_WORD.finditer(text)]
    return [(_BACKSLASH_ESCAPE.sub(_doubled, next((g for g in m.groups() if g is not None), m.group())).lower(),
             m.start(), m.end()) for m in pattern.finditer(text)]


def _doubled(escape: re.Match) -> str:
    """A backslash-escaped quote as a doubled one (other escapes as written)."""
    return escape.group(1) * 2 if escape.group(1) in "'\"" else escape.group()


def written_word_of(canonical: str, written: str, dialect: str = "sqlite"
                    ) -> tuple[list[tuple[int, int]], list[int | None], list[tuple[str, int, int]]]:
    """Match the canonical SQL's words to the written SQL's (both in ``dialect``): the canonical
    words' character spans, for each the index of its written word (None where the texts differ
    unevenly), and the written words (``word_spans(written, dialect)``).

    >>> spans, match, written = written_word_of("select singer.name from singer", "SELECT T1.name FROM singer AS T1")
    >>> match, written[match[3]]
    ([0, 1, 2, 3, 4, 5], ('name', 10, 14))
    """
    a, b = word_spans(canonical, dialect), word_spans(written, dialect)
    match: list[int | None] = [None] * len(a)
    for op, i1, i2, j1, j2 in diff_tokens([w for w, _, _ in a], [w for w, _, _ in b]):
        if op == "equal" or (op == "replace" and i2 - i1 == j2 - j1):
            for k in range(i2 - i1):
                match[i1 + k] = j1 + k
    return [(s, e) for _, s, e in a], match, b


@functools.lru_cache(maxsize=1)
def _scorer_lm(lm_model: str | None):
    """The scorer LM, loaded once per process: a scorer's batches (``Scorer.score_many``) each
    read its span log-probs, and loading Qwen takes seconds. A scorer LM that is not installed is
    a ``UsageError`` naming it (one line from train.py and rat-score)."""
    from model.errors import UsageError
    from model.lm import load_causal_lm

    try:
        return load_causal_lm(lm_model)
    except (ImportError, OSError) as e:
        raise UsageError(f"scorer LM {lm_model or 'smollm2 (packaged)'}: {str(e).splitlines()[0]}") from None


def lm_span_features(examples: Sequence, schemas: dict[str, rat.Schema], model=None, tokenizer=None,
                     cache_path: Path | None = None, progress: bool = False,
                     lm_model: str | None = None, dialects: Sequence[str] | None = None) -> list[np.ndarray]:
    """Scorer-LM rows (nodes, len(LM_FEATURES)) of every example: token log-probabilities of the
    written SQL (``model.lm.token_probabilities.token_probabilities`` with the whole-query scorer's prompt
    and disk cache, so SQL the whole-query track scored is not scored again) pooled over the
    written words matched to each node's canonical span. A node without a span, or whose words
    are not matched, gets NaN. ``lm_model``: the scorer LM when ``model`` is not given (``None``:
    the packaged SmolLM2; ``"qwen_coder"``...); its cache is ``scores_cache_path(lm_model)``.
    ``dialects``: each example's SQL dialect (default: all SQLite)."""
    from model.lm.token_probabilities import prompt_text, scores_cache_path, token_probabilities

    if model is None or tokenizer is None:
        model, tokenizer = _scorer_lm(lm_model)
    items = []
    for e in examples:
        schema = schemas.get(e.db_id)
        items.append((prompt_text(e.question, schema.tables if schema is not None else None), e.sql))
    scored = token_probabilities(model, tokenizer, items, progress=progress,
                                 cache_path=cache_path or scores_cache_path(lm_model))
    out = []
    dialects = list(dialects) if dialects is not None else ["sqlite"] * len(examples)
    for e, (_, probabilities), dialect in zip(examples, scored, dialects):
        x = np.full((len(e.node_labels), len(LM_FEATURES)), NAN)
        written = " " + e.sql.strip()  # what the scorer read (model.lm.token_probabilities.sql_token_ids)
        offsets = tokenizer(written, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        log_p = np.log(np.clip(np.asarray(probabilities, dtype=float), 1e-12, 1.0))
        if len(offsets) != len(log_p) or not len(log_p):
            out.append(x)
            continue
        x[:, 2] = log_p.mean()
        spans = rat.sql_spans(e.sql, tree_of({"node_names": e.node_names, "node_arity": e.node_arity}),
                              schemas.get(e.db_id), dialect)
        canonical_words, match, words = written_word_of(spans.sql, written, dialect)
        tokens_of_word = [[t for t, (s, end) in enumerate(offsets) if s < we and end > ws] for _, ws, we in words]
        for i, span in enumerate(spans.spans):
            if span is None:
                continue
            tokens = sorted({t for (ws, we), j in zip(canonical_words, match)
                             if j is not None and ws >= span[0] and we <= span[1] for t in tokens_of_word[j]})
            if tokens:
                x[i, 0], x[i, 1] = log_p[tokens].min(), log_p[tokens].mean()
        out.append(x)
    return out


def _question_vectors(examples: Sequence) -> dict[str, np.ndarray]:
    """MiniLM embeddings of every distinct question (one batch), for the semantic linking features."""
    from model.lm.sentence import embed_texts

    texts = sorted({" ".join(e.question.split()) for e in examples})
    vectors = embed_texts(texts) if texts else np.zeros((0, 0))
    by_text = dict(zip(texts, vectors))
    return {e.question: by_text[" ".join(e.question.split())] for e in examples}


def categorical_mask(names: Sequence[str]) -> np.ndarray:
    """Which columns HistGradientBoosting should treat as categorical."""
    categorical = {f.name for f in FEATURES if f.categorical}
    return np.array([name in categorical for name in names])


def feature_doc_table() -> str:
    """The FEATURES table as Markdown (docs/node_features.md prints it)."""
    lines = ["| feature | group | what |", "|---|---|---|"]
    lines += [f"| `{f.name}` | {f.group} | {f.doc} |" for f in FEATURES]
    return "\n".join(lines)
