"""Perturb gold SQL into realistic wrong SQL, and classify how a wrong query differs from gold.

The paper's perturbation replaces one schema item (a column or a table) with another item of the
same database, sampled among the top-k most similar by cosine similarity of all-MiniLM-L6-v2
embeddings of the items' natural names ("products unit price"). Beyond the paper, the engine
makes the other mistakes real systems make on Spider dev (see scripts/perturbation_mix.py,
which measured the mix in DEFAULT_MIX): wrong comparison operator or value, missing or extra
condition, wrong aggregate, wrong join key, flipped ORDER BY direction, LIMIT, DISTINCT,
GROUP BY key, missing or extra projected column; and structural rewrites (weight 0 by default):
another set operation, NOT IN <-> EXCEPT, IN-subquery <-> JOIN.

Every perturbation works on the sqlglot tree of `rat.canonicalize(sql, schema)` (aliases
resolved, columns qualified), is seeded, and is returned only when it changes the SQL text.
Labels (execution and `rat.label_nodes`) are attached where examples are built
(`model.nodes.examples`), so a perturbation that still returns the gold result counts as correct.
"""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

import rat
from model.data.execution import sqlite_uri
from model.lm.sentence import embed_items

# Weights of each kind when a perturbation is drawn; kinds that do not apply to a query are
# skipped and the rest renormalised. Chosen from the 11 systems' wrong Spider dev predictions
# (scripts/perturbation_mix.py; table in BENCHMARKS.md): joins are the most common primary
# error (25%, plus most of the 33% restructured queries), wrong columns appear in 80% of wrong
# queries (kept high, as the paper's schema-item replacement), then value, aggregate,
# projection and GROUP BY errors (6-8% each); ORDER BY direction, LIMIT and DISTINCT are rare.
DEFAULT_MIX: dict[str, float] = {
    "column": 0.22,
    "table": 0.06,
    "join": 0.22,
    "projection": 0.08,
    "missing_condition": 0.05,
    "extra_condition": 0.04,
    "operator": 0.04,
    "value": 0.08,
    "aggregate": 0.08,
    "group_by": 0.07,
    "order_direction": 0.03,
    "limit": 0.02,
    "distinct": 0.01,
    # Structural rewrites (a third of real errors restructure the query): off in the default mix
    # until a cross-fitted measurement shows they help; turn on with data.example_options.mix.
    "set_operation": 0.0,
    "not_in_except": 0.0,
    "subquery_join": 0.0,
}
STRUCTURAL_KINDS = ("set_operation", "not_in_except", "subquery_join")
KINDS = tuple(DEFAULT_MIX)
SCHEMA_ITEM_KINDS = ("column", "table")  # the paper's perturbations
TOP_K = 5

COMPARISON_TYPES = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like)
_OPERATOR_SWAPS = {
    exp.EQ: (exp.NEQ, exp.GT, exp.LT, exp.Like), exp.NEQ: (exp.EQ,),
    exp.GT: (exp.GTE, exp.LT, exp.LTE, exp.EQ), exp.GTE: (exp.GT, exp.LTE, exp.LT),
    exp.LT: (exp.LTE, exp.GT, exp.GTE, exp.EQ), exp.LTE: (exp.LT, exp.GTE, exp.GT),
    exp.Like: (exp.EQ, exp.NEQ),
}
AGGREGATE_SWAPS = {
    exp.Max: (exp.Min, exp.Avg, exp.Sum), exp.Min: (exp.Max, exp.Avg),
    exp.Avg: (exp.Sum, exp.Max, exp.Min), exp.Sum: (exp.Avg, exp.Count, exp.Max),
    exp.Count: (exp.Sum, exp.Max),
}


@dataclass(frozen=True)
class Perturbation:
    sql: str  # the perturbed query (canonical SQLite text)
    kind: str  # one of KINDS
    detail: str  # what changed, e.g. "products.name -> products.category"


# ---------------------------------------------------------------------------------------------
# Schema-item similarity (all-MiniLM-L6-v2)

# ---------------------------------------------------------------------------------------------
# Scopes: which table each column reads


def _column_table(column: exp.Column, scope: Scope, schema: rat.Schema) -> str | None:
    """The schema table a column reads in its scope, or None (derived table, unknown)."""
    qualifier = column.table.lower()
    if qualifier:
        source = scope.sources.get(qualifier) or scope.sources.get(column.table)
        if isinstance(source, exp.Table):
            return source.name.lower()
        return qualifier if qualifier in schema.tables else None
    for source in scope.sources.values():
        if isinstance(source, exp.Table) and column.name.lower() in (
                schema.tables.get(source.name.lower()) or ()):
            return source.name.lower()
    return None


def _scope_tables(scope: Scope) -> dict[str, str]:
    """qualifier -> table name of the schema tables a scope reads directly."""
    return {alias: src.name.lower() for alias, src in scope.sources.items()
            if isinstance(src, exp.Table)}


def _is_select_scope(scope: Scope) -> bool:
    return isinstance(scope.expression, exp.Select)


def in_join_condition(node: exp.Expression) -> bool:
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Select):
        if isinstance(parent, exp.Join):
            return True
        parent = parent.parent
    return False


def _conjuncts(select: exp.Select) -> list[exp.Expression]:
    where = select.args.get("where")
    if where is None:
        return []
    condition = where.this
    return list(condition.flatten()) if isinstance(condition, exp.And) else [condition]


def _set_conjuncts(select: exp.Select, conditions: list[exp.Expression]) -> None:
    select.set("where", None)
    for condition in conditions:
        select.where(condition.copy(), append=True, copy=False)


def _tables_read(node: exp.Expression) -> set[str]:
    return {c.table.lower() for c in node.find_all(exp.Column)}


def _simple_select(select: exp.Expression, width: int | None = 1) -> bool:
    """One FROM table or more, no GROUP BY / ORDER BY / LIMIT / HAVING, `width` projections."""
    return (isinstance(select, exp.Select) and select.args.get("from_") is not None
            and not any(select.args.get(k) for k in ("group", "order", "limit", "having"))
            and (width is None or len(select.expressions) == width))


def _literal(value) -> exp.Expression:
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return exp.Literal.number(value)


# ---------------------------------------------------------------------------------------------
# The engine


class Perturber:
    """Perturbations of queries on one database.

    `schema` (what `rat.Schema.of` takes: a `rat.Schema`, a tables.json entry, a mapping) gives
    the items to draw from; `db_path` (optional) supplies realistic literal values for
    wrong-value and extra-condition perturbations.
    """

    def __init__(self, schema: rat.Schema | Mapping, db_path: Path | None = None,
                 mix: dict[str, float] | None = None, top_k: int = TOP_K):
        self.schema = rat.Schema.of(schema)
        self.db_path = Path(db_path) if db_path else None
        self.mix = dict(DEFAULT_MIX if mix is None else mix)
        unknown = set(self.mix) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown perturbation kinds {sorted(unknown)}; known: {KINDS}")
        self.top_k = top_k
        self.columns = [f"{t}.{c}" for t, cols in self.schema.tables.items() for c in cols]
        self.tables = list(self.schema.tables)
        self._vectors: dict[str, np.ndarray] | None = None
        self._values: dict[str, list] = {}
        self._trees: dict[str, exp.Expression] = {}

    # -- similarity --------------------------------------------------------------------------

    def _vector(self, item: str) -> np.ndarray:
        if self._vectors is None:
            items = self.tables + self.columns
            self._vectors = dict(zip(items, embed_items(items), strict=True))
        return self._vectors[item]

    def similar(self, item: str, candidates: list[str], rng: random.Random) -> str | None:
        """One of the top-k candidates most similar to `item` (uniformly among them)."""
        candidates = [c for c in dict.fromkeys(candidates) if c != item]
        if not candidates:
            return None
        if item not in self.tables and item not in self.columns:
            return rng.choice(candidates)
        target = self._vector(item)
        scores = np.array([float(self._vector(c) @ target) for c in candidates])
        order = np.argsort(-scores, kind="stable")[: self.top_k]
        return candidates[int(rng.choice(order))]

    def column_values(self, table: str, column: str) -> list:
        """Distinct values of a column in the database (empty without a database)."""
        key = f"{table}.{column}"
        if key not in self._values:
            values = []
            if self.db_path is not None and self.db_path.exists():
                try:
                    conn = sqlite3.connect(sqlite_uri(self.db_path), uri=True)
                    try:
                        rows = conn.execute(f'SELECT DISTINCT "{column}" FROM "{table}" '
                                            f'WHERE "{column}" IS NOT NULL LIMIT 200').fetchall()
                        values = sorted((r[0] for r in rows), key=lambda v: (str(type(v)), v))
                    finally:
                        conn.close()
                except (sqlite3.Error, TypeError):
                    values = []
            self._values[key] = values
        return self._values[key]

    # -- public API --------------------------------------------------------------------------

    def parse(self, sql: str) -> exp.Expression:
        """The sqlglot tree of the canonical form of `sql` (raises rat.RATError); callers copy
        it before changing it, because it is memoised."""
        if sql not in self._trees:
            canonical = rat.canonicalize(sql, self.schema)
            try:
                self._trees[sql] = sqlglot.parse_one(canonical, read="sqlite")
            except sqlglot.errors.SqlglotError as error:
                raise rat.RATError(f"cannot re-parse canonical SQL ({error})", sql) from None
        return self._trees[sql]

    def render(self, sql: str) -> str:
        """`sql` printed exactly as perturbations are printed (so style never tells them apart)."""
        return self.parse(sql).sql(dialect="sqlite")

    def perturb(self, sql: str, n: int = 1, seed: int = 0,
                kinds: tuple[str, ...] | None = None) -> list[Perturbation]:
        """Up to `n` distinct perturbations of `sql`, kinds drawn from the mix (or `kinds`).

        Same (sql, n, seed, mix) -> same output. Fewer than `n` come back when the query offers
        fewer distinct changes; unparsable SQL raises rat.RATError.
        """
        rng = random.Random(f"{seed}:{sql}")
        tree = self.parse(sql)
        original = tree.sql(dialect="sqlite")
        if kinds is None:
            weights = {k: w for k, w in self.mix.items() if w > 0}
        else:  # asked for by name: drawn even where the mix gives them no weight
            unknown = set(kinds) - set(KINDS)
            if unknown:
                raise ValueError(f"unknown perturbation kinds {sorted(unknown)}; known: {KINDS}")
            weights = {k: self.mix.get(k) or 1.0 for k in kinds}
        found: dict[str, Perturbation] = {}
        failures: Counter[str] = Counter()
        for _ in range(max(8, 6 * n)):
            if len(found) == n or not weights:
                break
            kind = rng.choices(list(weights), weights=list(weights.values()))[0]
            copy = tree.copy()
            detail = getattr(self, f"_{kind}")(copy, rng)
            if isinstance(detail, tuple):  # a rewrite of the root returns the new root
                detail, copy = detail
            text = copy.sql(dialect="sqlite") if detail else None
            if text is None or text == original or text in found:
                failures[kind] += 1
                if failures[kind] >= 3:  # this kind has nothing (new) to change here
                    del weights[kind]
                continue
            found[text] = Perturbation(text, kind, detail)
        return list(found.values())

    # -- kinds: each mutates `tree` in place and returns a description, or None ------------------

    def _columns(self, tree: exp.Expression, *, where: str = "any", scopes=None):
        """(column node, scope, table) for columns of schema tables, in a stable order."""
        out = []
        for scope in scopes if scopes is not None else traverse_scope(tree):
            for column in scope.columns:
                if not isinstance(column, exp.Column) or isinstance(column.this, exp.Star):
                    continue
                table = _column_table(column, scope, self.schema)
                if table is None or column.name.lower() not in (self.schema.tables.get(table) or ()):
                    continue
                if where == "no_join" and in_join_condition(column):
                    continue
                if where == "join" and not in_join_condition(column):
                    continue
                out.append((column, scope, table))
        return out

    def _replace_column(self, column, scope, table, rng, same_table_only=False):
        tables = _scope_tables(scope)
        candidates = [f"{t}.{c}" for t in dict.fromkeys(tables.values()) if not same_table_only
                      or t == table for c in self.schema.tables.get(t, ())]
        old = f"{table}.{column.name.lower()}"
        new = self.similar(old, candidates, rng)
        if new is None:
            return None
        new_table, new_column = new.split(".", 1)
        column.set("this", exp.to_identifier(new_column))
        if column.table or new_table != table:
            qualifier = next(a for a, t in tables.items() if t == new_table)
            column.set("table", exp.to_identifier(qualifier))
        return f"{old} -> {new}"

    def _column(self, tree, rng):
        columns = self._columns(tree, where="no_join")
        if not columns:
            return None
        return self._replace_column(*rng.choice(columns), rng)

    def _join(self, tree, rng):
        """Wrong join: one side of an ON equality becomes another column of its table (wrong
        key), or an unneeded table is joined along a foreign key (changes row multiplicity),
        the two join mistakes real systems make most."""
        columns = self._columns(tree, where="join")
        if columns and rng.random() < 0.5:
            return self._replace_column(*rng.choice(columns), rng, same_table_only=True)
        scopes = [s for s in traverse_scope(tree) if _is_select_scope(s) and _scope_tables(s)]
        links = []
        for scope in scopes:
            tables = _scope_tables(scope)
            for a, b in self.schema.foreign_keys:
                for near, far in ((a, b), (b, a)):
                    near_table, far_table = near.split(".", 1)[0], far.split(".", 1)[0]
                    if near_table in tables.values() and far_table not in tables.values():
                        links.append((scope, near, far))
        if not links:
            return None
        scope, near, far = rng.choice(links)
        near_table, near_column = near.split(".", 1)
        far_table, far_column = far.split(".", 1)
        qualifier = next(q for q, t in _scope_tables(scope).items() if t == near_table)
        on = exp.EQ(this=exp.column(near_column, table=qualifier),
                    expression=exp.column(far_column, table=far_table))
        scope.expression.join(exp.to_table(far_table), on=on, copy=False)
        return f"joined {far_table} on {near} = {far}"

    def _table(self, tree, rng):
        """Another table of the database; its columns map to the new table's most similar."""
        all_scopes = list(traverse_scope(tree))
        scopes = [s for s in all_scopes if _is_select_scope(s) and _scope_tables(s)]
        if not scopes:
            return None
        scope = rng.choice(scopes)
        qualifier, old = rng.choice(sorted(_scope_tables(scope).items()))
        in_scope = set(_scope_tables(scope).values())
        new = self.similar(old, [t for t in self.tables if t not in in_scope], rng)
        if new is None:
            return None
        source = scope.sources[qualifier]
        columns = [c for c in self._columns(tree, scopes=all_scopes)
                   if c[1] is scope and c[2] == old]
        source.set("this", exp.to_identifier(new))
        mapping: dict[str, str] = {}  # one consistent replacement per column of the old table
        for column, _, _ in columns:
            name = mapping.get(column.name.lower()) or f"{new}.{column.name.lower()}"
            if name not in self.columns:
                name = self.similar(f"{old}.{column.name.lower()}",
                                    [f"{new}.{c}" for c in self.schema.tables[new]], rng)
            mapping[column.name.lower()] = name
            column.set("this", exp.to_identifier(name.split(".", 1)[1]))
            if column.table and column.table.lower() == old and qualifier == old:
                column.set("table", exp.to_identifier(new))
        return f"{old} -> {new}"

    def _comparisons(self, tree):
        return [c for c in tree.find_all(*COMPARISON_TYPES) if not in_join_condition(c)]

    def _operator(self, tree, rng):
        comparisons = self._comparisons(tree)
        if not comparisons:
            return None
        node = rng.choice(comparisons)
        new_type = rng.choice(_OPERATOR_SWAPS[type(node)])
        node.replace(new_type(this=node.this.copy(), expression=node.expression.copy()))
        return f"{type(node).__name__} -> {new_type.__name__}"

    def _literal_column(self, literal: exp.Literal, tree) -> tuple[str, str] | None:
        """The (table, column) a literal is compared with, if any."""
        parent = literal.parent
        if isinstance(parent, exp.Between):
            parent = parent.this
        other = parent.this if isinstance(parent, (*COMPARISON_TYPES, exp.Between)) else parent
        if isinstance(parent, COMPARISON_TYPES):
            other = parent.this if parent.expression is literal else parent.expression
        if isinstance(other, exp.Column):
            for column, _, table in self._columns(tree):
                if column is other:
                    return table, column.name.lower()
        return None

    def _value(self, tree, rng):
        literals = [lit for lit in tree.find_all(exp.Literal)
                    if not lit.find_ancestor(exp.Limit, exp.Offset, exp.Ordered)]
        if not literals:
            return None
        literal = rng.choice(literals)
        source = self._literal_column(literal, tree)
        values = self.column_values(*source) if source else []
        old = literal.this
        if literal.is_string:
            pool = [v for v in values if isinstance(v, str) and v != old]
            new = rng.choice(pool) if pool else (old.lower() if old != old.lower() else old.title())
            if old.startswith("%") or old.endswith("%"):
                new = f"%{new.strip('%')}%"
        else:
            number = float(old)
            pool = [v for v in values if isinstance(v, (int, float)) and v != number]
            if pool:
                # A nearby value of the column, as systems misread numbers rather than invent them.
                pool.sort(key=lambda v: abs(v - number))
                new = rng.choice(pool[: max(3, len(pool) // 4)])
            else:
                new = number + rng.choice([-1, 1]) * max(1, round(abs(number) * rng.uniform(0.1, 0.5)))
            new = int(new) if float(new).is_integer() else new
        if str(new) == str(old):
            return None
        literal.replace(_literal(new))
        return f"{old!r} -> {new!r}"

    def _missing_condition(self, tree, rng):
        clauses = [c for c in tree.find_all(exp.Where, exp.Having)]
        if not clauses:
            return None
        clause = rng.choice(clauses)
        condition = clause.this
        if isinstance(condition, (exp.And, exp.Or)):
            kept = rng.choice([condition.this, condition.expression])
            dropped = condition.expression if kept is condition.this else condition.this
            condition.replace(kept.copy())
            return f"dropped {dropped.sql(dialect='sqlite')}"
        clause.pop()
        return f"dropped {condition.sql(dialect='sqlite')}"

    def _extra_condition(self, tree, rng):
        scopes = [s for s in traverse_scope(tree) if _is_select_scope(s) and _scope_tables(s)]
        if not scopes or self.db_path is None:
            return None
        scope = rng.choice(scopes)
        qualifier, table = rng.choice(sorted(_scope_tables(scope).items()))
        keys = {k.split(".", 1)[1] for k in self.schema.primary_keys if k.startswith(f"{table}.")}
        names = [c for c in self.schema.tables[table] if c not in keys and not c.endswith("_id")]
        if not names:
            return None
        column = rng.choice(names)
        values = self.column_values(table, column)
        if not values:
            return None
        value = values[rng.randrange(len(values))]
        op = exp.EQ if isinstance(value, str) else rng.choice([exp.GT, exp.LT])
        condition = op(this=exp.column(column, table=qualifier), expression=_literal(value))
        select = scope.expression
        where = select.args.get("where")
        select.where(condition, append=True, copy=False)
        return f"{'added' if where else 'new WHERE'} {condition.sql(dialect='sqlite')}"

    def _aggregate(self, tree, rng):
        aggregates = [a for a in tree.find_all(*AGGREGATE_SWAPS)
                      if not (isinstance(a, exp.Count) and isinstance(a.this, exp.Star))]
        if not aggregates:
            return None
        node = rng.choice(aggregates)
        inner = node.this
        if isinstance(inner, exp.Distinct) and rng.random() < 0.5:
            node.set("this", inner.expressions[0].copy())
            return f"{type(node).__name__}(DISTINCT x) -> {type(node).__name__}(x)"
        if isinstance(node, exp.Count) and not isinstance(inner, exp.Distinct) and rng.random() < 0.5:
            node.set("this", exp.Distinct(expressions=[inner.copy()]))
            return "count(x) -> count(DISTINCT x)"
        new_type = rng.choice(AGGREGATE_SWAPS[type(node)])
        node.replace(new_type(this=inner.copy()))
        return f"{type(node).__name__} -> {new_type.__name__}"

    def _group_by(self, tree, rng):
        groups = list(tree.find_all(exp.Group))
        if not groups:
            return None
        group = rng.choice(groups)
        keys = [c for c, _, _ in self._columns(tree) if c.parent is group]
        if keys and rng.random() < 0.7:
            column = rng.choice(keys)
            scope = next(s for c, s, _ in self._columns(tree) if c is column)
            table = _column_table(column, scope, self.schema)
            return self._replace_column(column, scope, table, rng)
        group.pop()
        return "dropped GROUP BY"

    def _order_direction(self, tree, rng):
        ordered = list(tree.find_all(exp.Ordered))
        if not ordered:
            return None
        node = rng.choice(ordered)
        desc = bool(node.args.get("desc"))
        node.set("desc", not desc)
        # SQLite sorts NULLs first ascending; saying so keeps sqlglot from adding NULLS LAST.
        node.set("nulls_first", desc)
        return f"{'DESC' if desc else 'ASC'} -> {'ASC' if desc else 'DESC'}"

    def _limit(self, tree, rng):
        limits = list(tree.find_all(exp.Limit))
        if limits:
            limit = rng.choice(limits)
            value = limit.expression
            if rng.random() < 0.5 or not isinstance(value, exp.Literal):
                limit.pop()
                return "dropped LIMIT"
            n = int(value.this)
            new = rng.choice([k for k in (1, 2, 3, 5, 10) if k != n])
            limit.set("expression", exp.Literal.number(new))
            return f"LIMIT {n} -> {new}"
        selects = [s for s in tree.find_all(exp.Select) if s.args.get("order")]
        if not selects:
            return None
        rng.choice(selects).limit(1, copy=False)
        return "added LIMIT 1"

    def _distinct(self, tree, rng):
        selects = list(tree.find_all(exp.Select))
        select = rng.choice(selects)
        if select.args.get("distinct"):
            select.set("distinct", None)
            return "dropped DISTINCT"
        select.set("distinct", exp.Distinct())
        return "added DISTINCT"

    def _projection(self, tree, rng):
        # Only outermost projections: the ones that decide the result's columns.
        selects = [s for s in tree.find_all(exp.Select)
                   if s is tree or isinstance(s.parent, exp.SetOperation)]
        if not selects:
            return None
        select = rng.choice(selects)
        expressions = select.expressions
        in_set_operation = isinstance(select.parent, exp.SetOperation)
        if len(expressions) > 1 and not in_set_operation and rng.random() < 0.5:
            dropped = expressions.pop(rng.randrange(len(expressions)))
            select.set("expressions", expressions)
            return f"dropped {dropped.sql(dialect='sqlite')}"
        scope = next((s for s in traverse_scope(tree) if s.expression is select), None)
        tables = _scope_tables(scope) if scope else {}
        if not tables or in_set_operation:
            return None  # set operations need equal widths; changing one side only breaks it
        present = {c.name.lower() for c in select.expressions if isinstance(c, exp.Column)}
        candidates = [(q, c) for q, t in sorted(tables.items()) for c in self.schema.tables[t]
                      if c not in present]
        if not candidates:
            return None
        qualifier, column = rng.choice(candidates)
        select.select(exp.column(column, table=qualifier), append=True, copy=False)
        return f"added {qualifier}.{column}"

    # -- structural rewrites ---------------------------------------------------------------------

    @staticmethod
    def _replace(node: exp.Expression, new: exp.Expression, tree: exp.Expression, detail: str):
        """Put `new` where `node` is; the new root comes back when `node` was the root."""
        if node is tree:
            return detail, new
        node.replace(new)
        return detail

    def _set_operation(self, tree, rng):
        """UNION / INTERSECT / EXCEPT becomes another of them (the operands stay)."""
        operations = list(tree.find_all(exp.Union, exp.Intersect, exp.Except))
        if not operations:
            return None
        node = rng.choice(operations)
        new_type = rng.choice([t for t in (exp.Union, exp.Intersect, exp.Except) if not isinstance(node, t)])
        new = new_type(this=node.this.copy(), expression=node.expression.copy(), distinct=True)
        return self._replace(node, new, tree, f"{type(node).__name__} -> {new_type.__name__}")

    def _not_in_except(self, tree, rng):
        """``a WHERE x NOT IN (SELECT y ...)`` <-> ``a EXCEPT SELECT y ...``: the same intent, but
        the projection now decides what is compared (and NULLs and duplicates differ)."""
        rewrites = []
        for select in tree.find_all(exp.Select):
            if not _simple_select(select) or isinstance(select.parent, exp.Subquery):
                continue
            for condition in _conjuncts(select):
                inner = condition.this if isinstance(condition, exp.Not) else None
                if isinstance(inner, exp.In) and isinstance(inner.args.get("query"), exp.Subquery):
                    rewrites.append(("except", select, condition))
        for node in tree.find_all(exp.Except):
            left, right = node.this, node.expression
            if (_simple_select(left) and isinstance(left.expressions[0], exp.Column)
                    and _simple_select(right, width=1)):
                rewrites.append(("not_in", node, None))
        if not rewrites:
            return None
        kind, node, condition = rng.choice(rewrites)
        if kind == "except":
            left = node.copy()
            _set_conjuncts(left, [c for c in _conjuncts(node) if c is not condition])
            right = condition.this.args["query"].this.copy()
            return self._replace(node, exp.Except(this=left, expression=right, distinct=True), tree,
                                 "NOT IN -> EXCEPT")
        left = node.this.copy()
        test = exp.Not(this=exp.In(this=left.expressions[0].copy(),
                                   query=exp.Subquery(this=node.expression.copy())))
        left.where(test, append=True, copy=False)
        return self._replace(node, left, tree, "EXCEPT -> NOT IN")

    def _subquery_join(self, tree, rng):
        """``WHERE x IN (SELECT t.y FROM t WHERE c)`` <-> ``JOIN t ON x = t.y WHERE c``: a join
        repeats rows where the subquery does not, the commonest restructuring mistake."""
        rewrites = []
        for select in tree.find_all(exp.Select):
            if not _simple_select(select, width=None):
                continue
            tables = {t.name.lower() for t in select.find_all(exp.Table) if t.parent_select is select}
            for condition in _conjuncts(select):
                query = condition.args.get("query") if isinstance(condition, exp.In) else None
                inner = query.this if isinstance(query, exp.Subquery) else None
                if (_simple_select(inner) and not inner.args.get("joins")
                        and isinstance(inner.expressions[0], exp.Column)
                        and inner.args["from_"].this.name.lower() not in tables):
                    rewrites.append(("join", select, condition))
            joins = select.args.get("joins") or []
            if len(joins) == 1 and isinstance(joins[0].args.get("on"), exp.EQ):
                rewrites.append(("in", select, joins[0]))
        if not rewrites:
            return None
        kind, select, part = rng.choice(rewrites)
        if kind == "join":
            inner = part.args["query"].this
            table = inner.args["from_"].this
            on = exp.EQ(this=part.this.copy(), expression=inner.expressions[0].copy())
            _set_conjuncts(select, [c for c in _conjuncts(select) if c is not part] + _conjuncts(inner))
            select.join(table.copy(), on=on, copy=False)
            return f"IN subquery -> JOIN {table.name}"
        # JOIN -> IN: only when the joined table is read by the ON clause and its own conditions.
        joined = (part.this.alias_or_name or "").lower()
        on = part.args["on"]
        near, far = (on.this, on.expression) if on.expression.table.lower() == joined else (on.expression, on.this)
        if not (isinstance(near, exp.Column) and isinstance(far, exp.Column)) or far.table.lower() != joined:
            return None
        if any(joined in _tables_read(e) for e in select.expressions):
            return None
        mine = [c for c in _conjuncts(select) if _tables_read(c) == {joined}]
        theirs = [c for c in _conjuncts(select) if joined not in _tables_read(c)]
        if len(mine) + len(theirs) != len(_conjuncts(select)):
            return None
        inner = exp.select(far.copy()).from_(part.this.copy())
        _set_conjuncts(inner, mine)
        _set_conjuncts(select, [*theirs, exp.In(this=near.copy(), query=exp.Subquery(this=inner))])
        part.pop()
        return f"JOIN {joined} -> IN subquery"
