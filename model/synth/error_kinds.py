"""How a wrong query differs from gold: the most structural aspect first (set operations and
subqueries, tables, joins, projection, conditions, ...). Used to measure real systems' error mix
(scripts/perturbation_mix.py) and to choose the perturbation mix that imitates it."""

from __future__ import annotations

from collections import Counter

import sqlglot
from sqlglot import exp

import rat
from model.synth.perturb import AGGREGATE_SWAPS, COMPARISON_TYPES, in_join_condition

ERROR_CLASSES = ("unparsable", "structure", "table", "join", "projection", "missing_condition",
                 "extra_condition", "aggregate", "group_by", "operator", "column", "value",
                 "order_direction", "limit", "distinct", "other")


def _join_key(condition: exp.Expression) -> str:
    """A join condition's text with the two sides of each equality in a fixed order."""
    parts = []
    for eq in condition.find_all(exp.EQ):
        parts.append(" = ".join(sorted((eq.this.sql(), eq.expression.sql()))))
    return " AND ".join(sorted(parts)) or condition.sql()


def _features(tree: exp.Expression) -> dict[str, object]:
    """Comparable aspects of a canonical query tree, one entry per error class."""
    def outside_join(nodes):
        return [n for n in nodes if not in_join_condition(n)]

    comparisons = outside_join(tree.find_all(*COMPARISON_TYPES, exp.Between, exp.In))
    outermost = [s for s in tree.find_all(exp.Select)
                 if s is tree or isinstance(s.parent, exp.SetOperation)]
    return {
        "structure": Counter(type(n).__name__ for n in tree.find_all(
            exp.Union, exp.Intersect, exp.Except, exp.Subquery)) + Counter(
            subqueries=sum(1 for s in tree.find_all(exp.Select) if s is not tree
                           and not isinstance(s.parent, exp.SetOperation))),
        "table": Counter(t.name.lower() for t in tree.find_all(exp.Table)),
        "join": Counter(_join_key(j.args["on"]) for j in tree.find_all(exp.Join)
                        if j.args.get("on")),
        "projection": [len(s.expressions) for s in outermost],
        "condition": len(comparisons),
        "aggregate": Counter(type(a).__name__ for a in tree.find_all(*AGGREGATE_SWAPS)),
        "group_by": Counter(g.sql() for grp in tree.find_all(exp.Group) for g in grp.expressions),
        "operator": Counter(type(c).__name__ for c in comparisons),
        "column": Counter(c.sql() for c in outside_join(tree.find_all(exp.Column))),
        "value": Counter(lit.sql() for lit in tree.find_all(exp.Literal)
                         if not lit.find_ancestor(exp.Limit)),
        "order_direction": [bool(o.args.get("desc")) for o in tree.find_all(exp.Ordered)],
        "limit": [lim.expression.sql() for lim in tree.find_all(exp.Limit)],
        "distinct": sum(1 for _ in tree.find_all(exp.Distinct)),
    }


def error_aspects(gold_sql: str, pred_sql: str, schema: rat.Schema | None = None) -> list[str]:
    """Every aspect in which `pred_sql` differs from `gold_sql`, most structural first.

    >>> error_aspects("SELECT name FROM singer WHERE age > 20", "SELECT name FROM singer WHERE age < 20")
    ['operator']
    >>> error_aspects("SELECT name FROM singer", "SELECT name, age FROM singer ORDER BY age DESC")
    ['projection', 'column', 'order_direction']
    """
    try:
        gold = sqlglot.parse_one(rat.canonicalize(gold_sql, schema), read="sqlite")
    except (rat.RATError, sqlglot.errors.SqlglotError):
        return ["other"]  # gold we cannot read: nothing to say about the prediction
    try:
        pred = sqlglot.parse_one(rat.canonicalize(pred_sql, schema), read="sqlite")
    except (rat.RATError, sqlglot.errors.SqlglotError):
        return ["unparsable"]
    g, p = _features(gold), _features(pred)
    aspects = []
    if g["structure"] != p["structure"]:
        aspects.append("structure")
    if g["table"] != p["table"]:
        same_count = sum(g["table"].values()) == sum(p["table"].values())
        aspects.append("table" if same_count else "join")
    elif g["join"] != p["join"]:
        aspects.append("join")
    if g["projection"] != p["projection"]:
        aspects.append("projection")
    if g["condition"] > p["condition"]:
        aspects.append("missing_condition")
    elif g["condition"] < p["condition"]:
        aspects.append("extra_condition")
    for aspect in ("aggregate", "group_by", "operator", "column", "value", "order_direction",
                   "limit", "distinct"):
        if g[aspect] != p[aspect]:
            aspects.append(aspect)
    return aspects or ["other"]


def classify_error(gold_sql: str, pred_sql: str, schema: rat.Schema | None = None) -> str:
    """The primary (most structural) way `pred_sql` differs from `gold_sql`; see ERROR_CLASSES."""
    return error_aspects(gold_sql, pred_sql, schema)[0]
