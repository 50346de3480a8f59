"""Sub-clause frequencies (SCF): how often each sub-clause of a query recurs in other outputs.

As in "Calibrating LLMs for Text-to-SQL Parsing by Leveraging Sub-clause Frequencies" (Liu et
al., 2025): a query is split at its set operation (NONE, UNION, INTERSECT, EXCEPT) into two
sub-queries, each cut into 9 sub-clauses (DISTINCT, SELECT, FROM, ON, WHERE, GROUP BY, HAVING,
ORDER BY, LIMIT; NONE when absent). A chain `a UNION b EXCEPT c` is split at its first set
operation: `a`, and the rest as one sub-query whose sub-clauses join those of `b` and `c`.
Against each additional output (samples, other systems' predictions) the set operation scores
1 if it matches and each sub-clause 1/0, under the pairing of sub-queries that matches most;
averaging over the additional outputs gives 19 frequencies, and their product is the 20th
signal.

Sub-clauses are compared on canonical SQL (`rat.canonicalize`: aliases resolved, identifiers
lowercased), with cheap commutative normalisation (FROM tables, ON/WHERE/HAVING conjuncts and
GROUP BY keys sorted; `=` operands sorted), so `T1.name` and `singer.name` agree.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import sqlglot
from sqlglot import exp

import rat

__all__ = [
    "FEATURE_NAMES",
    "SET_OPERATIONS",
    "SUB_CLAUSES",
    "Decomposition",
    "decompose",
    "match_vector",
    "subclause_frequencies",
]

SET_OPERATIONS = ("none", "union", "intersect", "except")
SUB_CLAUSES = ("distinct", "select", "from", "on", "where", "group_by", "having", "order_by", "limit")
# 1 set operation + 9 sub-clauses of each of the 2 sub-queries + their product = 20 signals.
FEATURE_NAMES = (
    ("set_op",)
    + tuple(f"q{i}_{c}" for i in (1, 2) for c in SUB_CLAUSES)
    + ("product",)
)

SubQuery = tuple[str | None, ...]  # one entry per SUB_CLAUSES; None = NONE (clause absent)
_EMPTY: SubQuery = (None,) * len(SUB_CLAUSES)


@dataclass(frozen=True)
class Decomposition:
    """A query cut for SCF: its set operation and two sub-queries of 9 normalised sub-clauses."""

    set_op: str
    sub_queries: tuple[SubQuery, SubQuery]


def _sql(e: exp.Expression) -> str:
    return e.sql(dialect="sqlite")


def _conjuncts(e: exp.Expression | None) -> list[exp.Expression]:
    if e is None:
        return []
    if isinstance(e, (exp.Where, exp.Having)):
        return _conjuncts(e.this)
    if isinstance(e, exp.And):
        return _conjuncts(e.left) + _conjuncts(e.right)
    if isinstance(e, exp.Paren) and isinstance(e.this, exp.And):
        return _conjuncts(e.this)
    return [e]


def _predicate(e: exp.Expression) -> str:
    """A comparison with commutative operands written in a fixed order (`b = a` -> `a = b`)."""
    if isinstance(e, (exp.EQ, exp.NEQ)):
        left, right = sorted((_sql(e.left), _sql(e.right)))
        return f"{left} {'=' if isinstance(e, exp.EQ) else '<>'} {right}"
    return _sql(e)


def _condition(e: exp.Expression | None) -> str | None:
    parts = _conjuncts(e)
    return " and ".join(sorted(_predicate(p) for p in parts)) if parts else None


def _source(e: exp.Expression) -> str:
    if isinstance(e, exp.Table):
        return _sql(e.this) if e.this is not None else _sql(e)  # table name; alias dropped
    return _sql(e.unalias() if isinstance(e, exp.Alias) else e)


def _select_clauses(select: exp.Select, outer_order=None, outer_limit=None) -> SubQuery:
    joins = select.args.get("joins") or []
    from_ = select.args.get("from_") or select.args.get("from")
    sources = ([_source(from_.this)] if from_ is not None else []) + [_source(j.this) for j in joins]
    on = [c for j in joins for c in _conjuncts(j.args.get("on"))]
    group = select.args.get("group")
    order = select.args.get("order") or outer_order
    limit = select.args.get("limit") or outer_limit

    def order_key(o: exp.Ordered) -> str:
        return _sql(o.this) + (" desc" if o.args.get("desc") else "")

    return (
        "distinct" if select.args.get("distinct") else None,
        ", ".join(_sql(e) for e in select.expressions) or None,
        ", ".join(sorted(sources)) or None,
        " and ".join(sorted(_predicate(c) for c in on)) or None,
        _condition(select.args.get("where")),
        ", ".join(sorted(_sql(g) for g in group.expressions)) if group is not None else None,
        _condition(select.args.get("having")),
        ", ".join(order_key(o) for o in order.expressions) if order is not None else None,
        _sql(limit.expression if isinstance(limit, exp.Limit) and limit.expression else limit)
        if limit is not None else None,
    )


def _set_op_name(e: exp.Expression) -> str:
    if isinstance(e, exp.Union):
        return "union"
    if isinstance(e, exp.Intersect):
        return "intersect"
    if isinstance(e, exp.Except):
        return "except"
    return "none"


def _unwrap(e: exp.Expression) -> exp.Expression:
    while isinstance(e, (exp.Subquery, exp.Paren)):
        e = e.this
    return e


def _operands(e: exp.Expression) -> tuple[list[SubQuery], list[str]]:
    """The sub-queries of a chain of set operations and the operations between them, in text
    order (sqlglot nests `a UNION b UNION c` to the left, as SQLite evaluates it).

    ORDER BY / LIMIT written after the last operand apply to the whole set operation; they are
    read as clauses of the last sub-query, where they appear in the text.
    """
    e = _unwrap(e)
    op = _set_op_name(e)
    if op == "none":
        if isinstance(e, exp.Select):
            return [_select_clauses(e)], []
        return [(None, _sql(e), *([None] * (len(SUB_CLAUSES) - 2)))], []  # not a SELECT: its text
    left, left_ops = _operands(e.left)
    right_e = _unwrap(e.right)
    order, limit = e.args.get("order"), e.args.get("limit")
    if isinstance(right_e, exp.Select):
        right, right_ops = [_select_clauses(right_e, order, limit)], []
    else:
        right, right_ops = _operands(right_e)
    return left + right, left_ops + [op] + right_ops


def _chain(sub_queries: Sequence[SubQuery], ops: Sequence[str]) -> SubQuery:
    """Several sub-queries as one: each sub-clause is theirs joined by the set operations
    ("actor.name union director.name"), NONE only where every one of them has NONE."""
    merged = []
    for parts in zip(*sub_queries):
        if all(part is None for part in parts):
            merged.append(None)
            continue
        text = parts[0] or "none"
        for op, part in zip(ops, parts[1:]):
            text += f" {op} {part or 'none'}"
        merged.append(text)
    return tuple(merged)


@functools.lru_cache(maxsize=65536)
def _decompose_text(sql: str) -> Decomposition | None:
    try:
        tree = _unwrap(sqlglot.parse_one(sql, dialect="sqlite"))
    except (sqlglot.errors.SqlglotError, ValueError, RecursionError):
        return None
    if _set_op_name(tree) == "none" and not isinstance(tree, exp.Select):
        return None  # not a query (e.g. an INSERT or a bare expression)
    sub_queries, ops = _operands(tree)
    if not ops:
        return Decomposition("none", (sub_queries[0], _EMPTY))
    # A chain (a UNION b EXCEPT c) is split at its first set operation, as the SCF paper's
    # Spider-style parse nests it (a, then "b EXCEPT c" as the second sub-query): the rest is
    # one sub-query whose sub-clauses join its operands', so no operand is dropped.
    return Decomposition(ops[0], (sub_queries[0], _chain(sub_queries[1:], ops[1:])))


@functools.lru_cache(maxsize=65536)  # schemas hash by identity: one cache entry per loaded schema
def decompose(sql: str, schema: rat.Schema | None = None) -> Decomposition | None:
    """Split `sql` into set operation + 2 x 9 normalised sub-clauses; None if unparsable.

    The query is canonicalised first (`rat.canonicalize`); when that fails the raw text is
    decomposed instead, and only SQL that sqlglot cannot parse as a query gives None.

    >>> d = decompose("SELECT name FROM singer WHERE age > 20 UNION SELECT name FROM actor")
    >>> d.set_op, d.sub_queries[0][SUB_CLAUSES.index("where")] is not None
    ('union', True)
    """
    try:
        text = rat.canonicalize(sql, schema)
    except (rat.RATError, RecursionError):
        text = sql
    return _decompose_text(text) or (_decompose_text(sql) if text != sql else None)


def _sub_query_matches(a: SubQuery, b: SubQuery) -> np.ndarray:
    return np.array([x == y for x, y in zip(a, b)], dtype=np.float64)


def match_vector(query: Decomposition | None, other: Decomposition | None) -> np.ndarray:
    """19 indicators: set operation, then 9 sub-clauses of each sub-query (best pairing).

    An unparsable side (None) matches nothing.
    """
    if query is None or other is None:
        return np.zeros(len(FEATURE_NAMES) - 1)
    (a1, a2), (b1, b2) = query.sub_queries, other.sub_queries
    straight = np.concatenate([_sub_query_matches(a1, b1), _sub_query_matches(a2, b2)])
    crossed = np.concatenate([_sub_query_matches(a1, b2), _sub_query_matches(a2, b1)])
    best = crossed if crossed.sum() > straight.sum() else straight
    return np.concatenate([[float(query.set_op == other.set_op)], best])


def subclause_frequencies(query: str | Decomposition | None,
                          additional: Sequence[str | Decomposition | None],
                          schema: rat.Schema | Mapping | None = None) -> np.ndarray:
    """The 20 SCF signals (`FEATURE_NAMES`) of `query` against the additional outputs.

    Strings are decomposed with `decompose(., schema)` (`schema`: what `rat.Schema.of` takes);
    pass `Decomposition`s to reuse work across many queries. With no additional outputs every
    signal is 0.
    """
    schema = rat.Schema.of(schema)
    def as_decomposition(q):
        return decompose(q, schema) if isinstance(q, str) else q

    q = as_decomposition(query)
    if len(additional) == 0:
        return np.zeros(len(FEATURE_NAMES))
    freqs = np.mean([match_vector(q, as_decomposition(o)) for o in additional], axis=0)  # (19,)
    return np.concatenate([freqs, [np.prod(freqs)]])
