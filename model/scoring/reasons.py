"""Why a node got a low confidence, in plain language, from the named node features.

A reason is a feature whose value pushed the node's confidence down: setting that one feature to
its typical value (the median over correct nodes of the same kind in the training data,
``model.nodes.estimator.typical_values``) and scoring the node again raises its confidence. The
reasons shown are the (up to three) features with the largest such rise, so each comes with a
measured effect (``Reason.gain``): the explanation is faithful by construction to the one-feature
change it names. Structural features (tree size, depth, node position) are context, not a
reason a person can act on, and are never shown.

>>> render("value_in_column", 0.0, ReasonContext(label="'Alameda'", kind="value",
...        compared_column="schools.county"))
"literal 'Alameda' not found in column schools.county"
>>> render("tables_sharing_name", 3.0, ReasonContext(label="singer.name", kind="column"))
'3 tables have a column named name'
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from model.nodes.features import CUES, FEATURES, OPERATOR_CUES
from rat.kinds import NUMBER

EXPLAINABLE_GROUPS = ("linking", "semantic", "values", "execution", "question", "lm", "consensus")
# question_words is context (how long the question is), not something a reader can check
EXPLAINABLE = tuple(f.name for f in FEATURES if f.group in EXPLAINABLE_GROUPS and f.name != "question_words")
MIN_GAIN = 0.01  # a reason must raise the node's confidence by at least this much
MAX_REASONS = 3
# reasons that name the schema's tables or columns matching the question better (ReasonContext.better)
NAMING_BETTER = ("name_rank", "name_gap")
NAMED_AT_MOST = 3  # names in one reason at most ("and 2 more" for the rest)
# reasons about a literal: said only of a literal the question could say (``is_literal``)
VALUE_REASONS = frozenset(f.name for f in FEATURES if f.group == "values")
# the operators a question cue is about (those whose words, ``OPERATOR_CUES``, hold all the cue's),
# and for "each" / "per" the grouping a query may lack: its aggregates and its result (Project);
# a cue reason is said only of these nodes
CUE_OPERATORS = {cue: frozenset(op for op, said in OPERATOR_CUES.items() if set(phrases) <= set(said))
                 for cue, phrases in CUES.items()}
CUE_OPERATORS["cue_each"] |= {"Count", "Sum", "Avg", "Max", "Min", "Project"}  # (where a missing GROUP BY shows)


@dataclass(frozen=True)
class ReasonContext:
    """What a reason's sentence may name about its node."""

    label: str  # the node's label: "singer.name", "'Alameda'", "Count"
    kind: str  # table | column | value | the operator label
    compared_column: str | None = None  # for a literal: the column it is compared with
    execution_error: str | None = None  # why the query did not run on its database
    # for a table or column: the schema's names of its kind that match the question best
    # (``best_matches``), named by name_rank and name_gap; filled only for such a reason
    better: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reason:
    feature: str  # the feature's name (docs/node_features.md)
    value: float  # its value at this node
    typical: float  # the typical value among correct nodes of this kind
    gain: float  # confidence of the node with the feature at its typical value, minus its confidence
    text: str  # the sentence shown to people

    def to_dict(self) -> dict:
        return {"feature": self.feature, "text": self.text, "value": _json_float(self.value),
                "typical": _json_float(self.typical), "gain": round(self.gain, 4)}


def is_literal(label: str) -> bool:
    """Whether a value leaf's label (``ReasonContext.label``) is a literal the question could
    say: a quoted string or a number; not a keyword (NULL, TRUE, ``current_timestamp``), a bare
    word a function names (a date part, a type, a struct field's name) or a query parameter.

    >>> [is_literal(x) for x in ("'Alameda'", "-30", "1e5", "true", "null", "current_date", "day", "source", "?")]
    [True, True, True, False, False, False, False, False, False]
    """
    return label[:1] == "'" or bool(NUMBER.match(label))


def says(feature: str, ctx: ReasonContext) -> bool:
    """Whether a reason from ``feature`` says something about the node of ``ctx``: a literal's
    reasons only of a literal (``is_literal``), a question cue's only of the operators it is about
    (``CUE_OPERATORS``; an ``Orderby_desc_nulls_last`` is an ``Orderby_desc``).

    >>> says("value_fuzzy", ReasonContext("true", "value")), says("value_fuzzy", ReasonContext("'x'", "value"))
    (False, True)
    >>> says("cue_each", ReasonContext("t.a", "column")), says("cue_each", ReasonContext("Groupby", "Groupby"))
    (False, True)
    """
    if feature in VALUE_REASONS and ctx.kind == "value":
        return is_literal(ctx.label)
    if feature in CUE_OPERATORS:
        return ctx.kind.partition("_nulls_")[0] in CUE_OPERATORS[feature]
    return True


def _json_float(v: float) -> float | None:
    return None if math.isnan(v) else round(float(v), 4)


def _name(ctx: ReasonContext) -> str:
    return f"{ctx.kind} {ctx.label}" if ctx.kind in ("table", "column") else ctx.label


def _bare(ctx: ReasonContext) -> str:
    return ctx.label.rpartition(".")[2] if ctx.kind == "column" else ctx.label


def _table(ctx: ReasonContext) -> str:
    return ctx.label.rpartition(".")[0] or "its table"


def named(names: Sequence[str]) -> str:
    """Names in a sentence: at most ``NAMED_AT_MOST``, then how many more.

    >>> named(["a.x"]), named(["a.x", "b.x", "c.x", "d.x", "e.x"])
    ('a.x', 'a.x, b.x, c.x and 2 more')
    """
    shown = ", ".join(names[:NAMED_AT_MOST])
    return shown + (f" and {len(names) - NAMED_AT_MOST} more" if len(names) > NAMED_AT_MOST else "")


def _better(ctx: ReasonContext) -> list[str]:
    """``ctx.better``: those of the node's own table where it has any (a column named as the
    better one is in several tables)."""
    own = [name for name in ctx.better if name.startswith(_table(ctx) + ".")]
    return own or list(ctx.better)


def _cue_words(cue: str) -> str:
    return " / ".join(f"'{c}'" for c in CUES[cue][:3])


def failed_run(error: str | None) -> str:
    """Why the query fails to run, as far as it is known (a query stopped by a timeout or the
    result budget is not one: its result features are unknown, ``model.nodes.features``).

    >>> failed_run("OperationalError: no such column: x")
    'the query fails to run on the database (OperationalError: no such column: x)'
    """
    if not error:
        return "the query fails to run on the database"
    error = error if len(error) <= 120 else error[:119] + "…"
    return f"the query fails to run on the database ({error})"


def _yes(v: float) -> bool:
    return not math.isnan(v) and v >= 0.5


_TEMPLATES: dict[str, Callable[[float, ReasonContext], str]] = {
    # linking
    "name_word_share": lambda v, c: (f"{_name(c)}: none of its words occur in the question" if v == 0
                                     else f"{_name(c)}: only {v:.0%} of its words occur in the question"),
    "name_phrase": lambda v, c: (f"the words of {_name(c)} occur together in the question" if _yes(v)
                                 else f"the words of {_name(c)} do not occur together in the question"),
    "name_fuzzy": lambda v, c: f"{_name(c)} matches the question's words only loosely (similarity {v:.2f})",
    "name_rank": lambda v, c: (f"{v:.0f} other {c.kind} name(s) of the schema match the question better"
                               + (f" (the best: {named(_better(c))})" if c.better else "")
                               if v >= 1 else f"{_name(c)} is the schema's best match for the question"),
    "name_gap": lambda v, c: (f"another {c.kind} of the schema matches the question better"
                              + (f": {named(_better(c))}" if c.better else "") + f" (by {v:.2f})"),
    "table_word_share": lambda v, c: (f"its table {_table(c)} is not mentioned in the question" if v == 0
                                      else f"its table {_table(c)} is only partly mentioned in the question"),
    "is_primary_key": lambda v, c: f"{_name(c)} is {'' if _yes(v) else 'not '}a primary key",
    "is_foreign_key": lambda v, c: f"{_name(c)} is {'' if _yes(v) else 'not '}part of a foreign key",
    "tables_sharing_name": lambda v, c: f"{v:.0f} tables have a column named {_bare(c)}",
    "in_schema": lambda v, c: f"{_name(c)} is {'' if _yes(v) else 'not '}in the schema",
    "table_in_tree": lambda v, c: (f"its table {_table(c)} is in the FROM clause" if _yes(v)
                                   else f"its table {_table(c)} is not in the FROM clause"),
    "column_type": lambda v, c: f"the type of {_name(c)} is unusual for this position",
    "is_star": lambda v, c: f"the column is {'' if _yes(v) else 'not '}*",
    "join_on_fk": lambda v, c: ("the join condition follows a declared foreign key" if _yes(v)
                                else "the join condition does not follow a declared foreign key"),
    "join_fk_share": lambda v, c: f"only {v:.0%} of the join's conditions follow declared foreign keys",
    "subtree_min_link": lambda v, c: (_TEMPLATES["name_word_share"](v, c) if c.kind in ("table", "column")
                                      else "a table or column inside it is not mentioned in the question"
                                      if v == 0 else f"a name inside it is only {v:.0%} mentioned in the question"),
    "subtree_mean_link": lambda v, c: f"the names inside it are {v:.0%} mentioned in the question on average",
    # semantic
    "name_semantic": lambda v, c: f"{_name(c)} is far in meaning from the question (cosine {v:.2f})",
    "name_semantic_rank": lambda v, c: f"{v:.0f} other {c.kind} name(s) are closer in meaning to the question",
    "name_semantic_gap": lambda v, c: f"another {c.kind} is closer in meaning to the question (by {v:.2f})",
    "subtree_min_semantic": lambda v, c: f"a name inside it is far in meaning from the question ({v:.2f})",
    # values
    "value_is_number": lambda v, c: f"the literal {c.label} is {'' if _yes(v) else 'not '}a number",
    "value_in_question": lambda v, c: (f"literal {c.label} occurs in the question" if _yes(v)
                                       else f"literal {c.label} does not occur in the question"),
    "value_fuzzy": lambda v, c: f"literal {c.label} matches the question's words only loosely ({v:.2f})",
    "value_in_column": lambda v, c: (f"literal {c.label} found in column {c.compared_column or 'compared'}"
                                     if _yes(v) else
                                     f"literal {c.label} not found in column {c.compared_column or 'compared'}"),
    "value_in_column_nocase": lambda v, c: (
        f"literal {c.label} not found in column {c.compared_column or 'compared'}, even ignoring case"
        if not _yes(v) else f"literal {c.label} found in column {c.compared_column} when case is ignored"),
    "compared_literal_found": lambda v, c: (
        (f"the literal compared with {_name(c)} is {'' if _yes(v) else 'not '}found in it") if c.kind == "column"
        else f"literal {c.label} is {'' if _yes(v) else 'not '}found in column {c.compared_column or 'compared'}"),
    "literal_elsewhere": lambda v, c: (
        (f"the literal compared with {_name(c)} is stored in {v:.0f} other column(s) of the database"
         if c.kind == "column" else f"literal {c.label} is stored in {v:.0f} other column(s) of the database")
        if v >= 1 else ("the literal compared with it is stored in no other column" if c.kind == "column"
                        else f"literal {c.label} is stored in no other column")),
    "literal_near_match": lambda v, c: (
        (f"literal {c.label} is stored in {c.compared_column or 'its column'}" if v >= 1 else
         f"literal {c.label} is not stored in {c.compared_column or 'its column'}; the closest stored value "
         f"is {v:.0%} similar") if c.kind == "value" else
        f"the literal compared with {_name(c)} is {'stored in it' if v >= 1 else f'at best {v:.0%} similar to its values'}"),
    "subtree_min_value_in_question": lambda v, c: ("a literal inside it does not occur in the question"
                                                   if not _yes(v) else "its literals occur in the question"),
    "subtree_min_value_in_column": lambda v, c: ("a literal inside it is not found in its column"
                                                 if not _yes(v) else "its literals are found in their columns"),
    "question_numbers_unused": lambda v, c: f"{v:.0f} number(s) in the question are not used by the query",
    # execution
    "exec_error": lambda v, c: failed_run(c.execution_error) if _yes(v) else "the query runs on the database",
    "exec_empty": lambda v, c: "the query returns no rows" if _yes(v) else "the query returns rows",
    "exec_log_rows": lambda v, c: (f"the query returns {round(math.expm1(v)):,} row(s)" if round(math.expm1(v))
                                   else "the query returns no rows"),
    "exec_columns": lambda v, c: f"the query returns {v:.0f} column(s)",
    "exec_null_column": lambda v, c: ("a returned column is entirely NULL" if _yes(v)
                                      else "no returned column is entirely NULL"),
    "exec_zero": lambda v, c: "the query returns a single 0 (or NULL)" if _yes(v) else "the result is not a single 0",
    # question
    "question_words": lambda v, c: f"the question is {v:.0f} words long",
    "cue_match": lambda v, c: (f"the question has a word that asks for {c.label}" if _yes(v)
                               else f"no word of the question asks for {c.label} (such as "
                               f"{' / '.join(repr(w) for w in OPERATOR_CUES.get(c.label, ('?',))[:3])})"),
    # scorer LM
    "lm_span_min_logprob": lambda v, c: f"the scorer LM finds a token of this part unlikely (log p {v:.1f})",
    "lm_span_mean_logprob": lambda v, c: f"the scorer LM finds this part unlikely (mean log p {v:.1f})",
    "lm_query_mean_logprob": lambda v, c: f"the scorer LM finds the whole query unlikely (mean log p {v:.1f})",
    # consensus
    "agreement": lambda v, c: f"only {v:.0%} of the other systems' queries contain this part",
    "parent_agreement": lambda v, c: f"only {v:.0%} of the other systems' queries contain its parent",
    "subtree_min_agreement": lambda v, c: f"a part inside it is in only {v:.0%} of the other systems' queries",
    "root_agreement": lambda v, c: f"only {v:.0%} of the other systems wrote the same whole query",
    "tree_agreement": lambda v, c: f"{v:.0%} of the other systems wrote an identical tree",
    "result_agreement": lambda v, c: f"{v:.0%} of the other systems' queries return the same rows",
    "n_other_systems": lambda v, c: f"{v:.0f} other system(s) answered this question",
    "reference_agreement": lambda v, c: f"only {v:.0%} of the queries that give the other systems' most "
                                        "common different answer contain this part",
    "reference_site": lambda v, c: f"the other systems' most common different answer departs from this "
                                   f"query here ({v:.0%} of it)",
    "reference_share": lambda v, c: f"{v:.0%} of the other systems agree on one answer different from this one",
}
def _cue_template(cue: str) -> Callable[[float, ReasonContext], str]:
    return lambda v, c: (f"the question says {_cue_words(cue)}" if _yes(v)
                         else f"the question does not say {_cue_words(cue)}")


_TEMPLATES.update({cue: _cue_template(cue) for cue in CUES})


def _count_against(noun: str) -> Callable[[float, float, ReasonContext], str]:
    """A count of the result (``log1p`` of rows; columns) beside the typical one (``noun``: "row"
    or "column")."""
    def sentence(v: float, typical: float, c: ReasonContext) -> str:
        count, usual = ((round(math.expm1(v)), round(math.expm1(typical))) if noun == "row"
                        else (round(v), round(typical)))
        if noun == "row" and count == 0:
            return "the query returns no rows"
        than = ("" if count == usual else
                f", {'more' if count > usual else 'fewer'} than a right query typically does ({usual:,})")
        return f"the query returns {count:,} {noun}(s){than}: {LOWERS}"
    return sentence


LOWERS = "this lowers the confidence"
# facts that are no fault by themselves (a row count, a primary key): said with what the model
# reads in them, against the typical value of a right query, where they lowered the confidence
_AGAINST_TYPICAL: dict[str, Callable[[float, float, ReasonContext], str]] = {
    "exec_log_rows": _count_against("row"),
    "exec_columns": _count_against("column"),
    "is_primary_key": lambda v, t, c: f"{_TEMPLATES['is_primary_key'](v, c)}: {LOWERS}",
    "is_foreign_key": lambda v, t, c: f"{_TEMPLATES['is_foreign_key'](v, c)}: {LOWERS}",
}


def render(feature: str, value: float, ctx: ReasonContext, typical: float = math.nan) -> str:
    """The plain-language sentence of one reason; with the ``typical`` value of a right node
    (``Reason.typical``), a fact that is no fault by itself says it lowered the confidence.

    >>> ctx = ReasonContext(label="singer.name", kind="column")
    >>> render("exec_log_rows", math.log1p(13), ctx), render("exec_log_rows", math.log1p(13), ctx, math.log(2))
    ('the query returns 13 row(s)', 'the query returns 13 row(s), more than a right query typically does (1): this lowers the confidence')
    """
    if feature in _AGAINST_TYPICAL and not math.isnan(typical):
        return _AGAINST_TYPICAL[feature](value, typical, ctx)
    template = _TEMPLATES.get(feature)
    if template is None:
        doc = next((f.doc for f in FEATURES if f.name == feature), feature)
        return f"{doc}: {value:g}"
    return template(value, ctx)


def explain_nodes(saved, x: np.ndarray, nodes: list[int], contexts: list[ReasonContext],
                  kind_groups: list[str], base: np.ndarray, database: bool = True,
                  better: Callable[[str], tuple[str, ...]] | None = None) -> dict[int, list[Reason]]:
    """Reasons of the nodes ``nodes`` of one query: ``x`` is its feature matrix (nodes,
    features, ``saved.features_`` order), ``base`` its nodes' calibrated confidences (with a
    database or not: ``database``). One prediction scores every (node, feature set to typical)
    variant. ``better(kind)``: the schema's names of a kind ("table", "column") that match the
    question best (``best_matches``), asked only for a reason that names them."""
    col = {name: j for j, name in enumerate(saved.features_)}
    candidates = [name for name in EXPLAINABLE if name in col]
    variants, owners = [], []
    for i in nodes:
        typical = saved.typical_.get(kind_groups[i], {})
        for name in candidates:
            if not says(name, contexts[i]):
                continue
            value, usual = x[i, col[name]], typical.get(name)
            if usual is None or np.isnan(value) or value == usual:
                continue
            row = x[i].copy()
            row[col[name]] = usual
            variants.append(row)
            owners.append((i, name, float(value), float(usual)))
    out: dict[int, list[Reason]] = {i: [] for i in nodes}
    if not variants:
        return out
    gains = saved.node_confidence(np.vstack(variants), database) - base[[o[0] for o in owners]]
    for (i, name, value, usual), gain in sorted(zip(owners, gains), key=lambda p: -p[1]):
        if gain >= MIN_GAIN and len(out[i]) < MAX_REASONS:
            ctx = contexts[i]
            if name in NAMING_BETTER and better is not None and ctx.kind in ("table", "column"):
                ctx = replace(ctx, better=better(ctx.kind))
            out[i].append(Reason(name, value, usual, float(gain), render(name, value, ctx, usual)))
    return out


def best_matches(question: str, schema, kind: str) -> tuple[str, ...]:
    """The tables (``kind`` "table") or columns ("table.column", every table's column of that
    name) of ``schema`` (a ``rat.Schema``) whose names match ``question`` best, as name_rank and
    name_gap rank them (``model.nodes.features.SchemaIndex``); none without a schema.

    >>> import rat
    >>> best_matches("Which countries are the suppliers in?", rat.Schema({"suppliers": ["id", "country"],
    ...              "buyers": ["id", "country", "city"]}), "column")
    ('suppliers.country', 'buyers.country')
    """
    from model.nodes.features import QuestionIndex, SchemaIndex

    if schema is None:
        return ()
    index = SchemaIndex(schema, QuestionIndex(question))
    scores = index.tables if kind == "table" else index.columns
    known = [s for s in scores.values() if not math.isnan(s)]
    if not known:
        return ()
    top = {name for name, s in scores.items() if s == max(known)}
    if kind == "table":
        return tuple(t for t in schema.tables if t in top)
    return tuple(f"{t}.{c}" for t, columns in schema.tables.items() for c in columns if c in top and c != "*")


def literal_of(label: str) -> str:
    """How a literal is quoted in a reason: as its node's label has it (a LIKE pattern's
    wildcards, a separator's spaces kept: a reason names the literal the query holds), a
    double-quoted string in single quotes.

    >>> literal_of("'%New York%'"), literal_of("', '"), literal_of('"dq"'), literal_of("2014")
    ("'%New York%'", "', '", "'dq'", '2014')
    """
    if len(label) >= 2 and label[0] == '"' and label[-1] == '"':
        return sql_literal(label[1:-1].replace('""', '"'))
    return label


def sql_literal(text: str) -> str:
    """A value (a stored one, a literal's text) quoted as an SQL string literal: in single quotes,
    a quote inside doubled, every other character as it is (a backslash is one; a line break is
    one), so that the text pasted into a query is that value.

    >>> print(sql_literal("O'Brien"), sql_literal("a\\\\b"))
    'O''Brien' 'a\\b'
    """
    return "'" + text.replace("'", "''") + "'"
