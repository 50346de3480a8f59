"""Build the relational algebra tree (RAT) of a query from its canonical sqlglot tree.

A SELECT becomes, from the leaves up:
Table / Product / Left_join -> Selection -> Groupby -> Having -> Qualify -> Project ->
Distinct / Distinct_on -> Orderby_asc / Orderby_desc -> Limit; a CTE is its query, put where it
is read, and a recursive one `Recursive(Union(base, step))` with its own rows read by the step
as a `Recursion` leaf; relational operators take their expressions first and
their input relation last, as in the paper's `((1)((player.heaviness)((..)(player)Project)
Orderby_desc)Limit)`. A SELECT without FROM has no input relation: `SELECT 1 WHERE 1 = 1` is
``((1)(((1)(1)Eq)Selection)Project)``.

`from_ast` is the builder's one public door besides `to_tree`: it can report every build step
to an observer (`rat.spans` uses it to find the SQL text of each node).
"""

from collections.abc import Callable, Mapping

from sqlglot import expressions as exp

from rat.canonicalize import (
    BARE_DATE_PART,
    MAX_NODES,
    canonical_ast,
    construct_name,
    no_result_columns,
    one_row,
    parenthesised_join,
    sqlglot_dialect,
)
from rat.dialects import SQLITE, Dialect
from rat.dialects import dialect as _dialect
from rat.errors import RATError, internal_errors, with_deep_stack
from rat.hashing import is_relation
from rat.kinds import NUMBER
from rat.node import Node
from rat.schema import Schema

# Trees deeper than this are refused: no Spider or BIRD query comes within a tenth of it, and
# it bounds the work of any recursive reader of trees.
MAX_DEPTH = 1000
# MAX_NODES (rat.canonicalize's): nodes of a tree, a CTE counted at each read: a chain of CTEs
# each reading the one before four times grows fourfold a level (a 1 KB query, 5 million nodes,
# seconds a walk); real queries' trees have hundreds (Spider's and BIRD's largest: below 300).

# on_step(step, expression, node, core): after the builder made `node` from the sqlglot
# `expression`. Steps: "expr" (an expression), "relation" (a FROM item), "query" (a SELECT,
# set operation, subquery or recursive CTE), "from" (a SELECT's FROM clause with its joins),
# "select" (a whole SELECT, modifiers included), "modifiers" (ORDER BY / LIMIT / OFFSET of a
# query; `core` is the relation they were applied to). Children are reported before parents.
BuildObserver = Callable[[str, exp.Expression, Node, "Node | None"], None]

_COMPARISONS = {
    exp.EQ: "Eq", exp.NEQ: "Neq", exp.GT: "Gt", exp.GTE: "Gte", exp.LT: "Lt", exp.LTE: "Lte",
}
_JSONB_KEYS = {exp.JSONBContainsTopKey: "Json_has_key", exp.JSONBContainsAnyTopKeys: "Json_has_any_key",
               exp.JSONBContainsAllTopKeys: "Json_has_all_keys"}
_BINARY = {
    **_COMPARISONS,
    exp.Add: "Add", exp.Sub: "Sub", exp.Mul: "Mul", exp.Div: "Div", exp.Mod: "Mod",
    exp.IntDiv: "Intdiv",  # MySQL's `a DIV b`, DuckDB's `a // b`: the quotient's whole part
    exp.DPipe: "Concat", exp.Like: "Like", exp.ILike: "Ilike", exp.Glob: "Glob",
    exp.RegexpLike: "Regexp", exp.Is: "Is", exp.BitwiseAnd: "Bitand", exp.BitwiseOr: "Bitor",
    exp.BitwiseLeftShift: "Shift_left", exp.BitwiseRightShift: "Shift_right",
    exp.BitwiseXor: "Bitxor",  # `a ^ b` (PostgreSQL: `a # b`), where the dialect has it
    exp.Pow: "Power",  # PostgreSQL's, DuckDB's, Redshift's `a ^ b`: SQLite's power(a, b)
    exp.NullSafeEQ: "Is", exp.NullSafeNEQ: "Is_not", exp.RegexpILike: "Iregexp",
    exp.SimilarTo: "Similar_to", exp.ArrayContainsAll: "Array_contains",
    exp.Escape: "Escape",  # `x LIKE p ESCAPE '!'`: Escape(Like(x, p), '!')
    exp.Match: "Match",  # SQLite's full-text `docs MATCH 'x'`
    # PostgreSQL's jsonb `j ? 'k'`, `j ?| array[..]`, `j ?& array[..]` (Dialect.jsonb_keys)
    **_JSONB_KEYS,
    exp.ArrayContainedBy: "Array_contained_by", exp.ArrayOverlaps: "Array_overlaps",
}
_AGGREGATES = {exp.Count: "Count", exp.Sum: "Sum", exp.Avg: "Avg", exp.Min: "Min",
               exp.Max: "Max", exp.GroupConcat: "Group_concat"}
# NOT applied to these becomes one node, e.g. `a NOT IN (..)` -> Not_in.
# (BETWEEN gets here only where its operand draws, `random()`: `Between`; `rat.canonicalize` spells
# out the others as two comparisons.)
# a concatenation's labels: `a || b`, CONCAT(a, b) where it skips NULLs (`Dialect.concat_skips_nulls`)
_CONCATS = ("Concat", "Concat_skip_nulls")
_NEGATED = {"In": "Not_in", "Like": "Not_like", "Glob": "Not_glob", "Exists": "Not_exists",
            "Is_null": "Is_not_null", "Is_not_null": "Is_null", "Regexp": "Not_regexp", "Ilike": "Not_ilike",
            "Iregexp": "Not_iregexp", "Similar_to": "Not_similar_to",
            # a comparison's complement (NULL where it is NULL: the same in three-valued logic)
            "Eq": "Neq", "Neq": "Eq", "Gt": "Lte", "Lte": "Gt", "Lt": "Gte", "Gte": "Lt"}
# GROUP BY ROLLUP (a, b) / CUBE (a, b) / GROUPING SETS ((a), ()): a Groupby key each.
_GROUPINGS = {exp.Rollup: "Rollup", exp.Cube: "Cube", exp.GroupingSets: "Grouping_sets"}
_NILADIC = {exp.CurrentTimestamp: "current_timestamp", exp.CurrentDate: "current_date",
            exp.CurrentTime: "current_time"}
# CURRENT_USER, SESSION_USER (PostgreSQL's `user` too: rat.canonicalize._USER_FUNCTIONS):
# functions called without arguments, as `current_user()` is
_USER_CALLS = {exp.CurrentUser: "Current_user", exp.SessionUser: "Session_user"}
_SET_OPERATIONS = {exp.Union: "Union", exp.Intersect: "Intersect", exp.Except: "Except"}
_CURRENT = frozenset(_NILADIC.values())
_JOIN_SIDES = {"LEFT": "Left_join", "RIGHT": "Right_join", "FULL": "Full_join", "SEMI": "Semi_join",
               "ANTI": "Anti_join", "ASOF": "Asof_join", "ASOF_LEFT": "Asof_left_join"}
# `->` gives JSON, `->>` its text (SQL value); jsonb's operators the same. Named apart from any
# function: SQLite's json_extract(a, p) (`Json_extract`) gives a string's text, `a -> p` its JSON.
_JSON = {exp.JSONExtract: "Json_get", exp.JSONBExtract: "Json_get",
         exp.JSONExtractScalar: "Json_get_text", exp.JSONBExtractScalar: "Json_get_text"}
# An interval's unit in the singular: `INTERVAL '7 days'` is `INTERVAL 7 DAY`.
_INTERVAL_UNITS = frozenset({"microsecond", "millisecond", "second", "minute", "hour", "day", "week",
                             "month", "quarter", "year", "decade"})
# TRIM(BOTH / LEADING / TRAILING .. FROM s): SQLite's call of the same meaning
_TRIMS = {"BOTH": "Trim", "LEADING": "Ltrim", "TRAILING": "Rtrim"}
# Dialects whose E'..' is a string with backslash escapes (sqlglot's ByteString; BigQuery's b'..' is bytes)
_ESCAPE_STRINGS = frozenset({"postgres", "duckdb"})
# Dialects whose date_part(unit, d) is EXTRACT(unit FROM d) (others have no date_part)
_DATE_PART_DIALECTS = frozenset({"postgres", "duckdb", "redshift", "snowflake", "databricks"})
# A window frame's bounds: `UNBOUNDED PRECEDING`, `CURRENT ROW`, `n PRECEDING` / `n FOLLOWING`.
_FRAME_KINDS = {"ROWS": "Rows", "RANGE": "Range", "GROUPS": "Groups"}


def to_tree(sql: str, schema: Schema | Mapping | None = None, dialect: str = "sqlite") -> Node:
    """The canonical RAT of `sql`, written in `dialect` (one of `rat.dialects.DIALECTS`:
    sqlite, postgres, mysql, duckdb, snowflake, bigquery, tsql, databricks, trino, redshift); `schema`: a `Schema`, a
    mapping ``{table: [columns]}`` or a `tables.json` entry (`Schema.of`). Raises `RATError` for
    SQL it cannot read, `TypeError` for arguments of the wrong type.

    >>> from rat.serialize import serialize
    >>> serialize(to_tree("SELECT player_api_id FROM Player ORDER BY heaviness DESC LIMIT 1"))
    '((1)((player.heaviness)((player.player_api_id)(player)Project)Orderby_desc)Limit)'
    >>> to_tree("SELECT a FROM t WHERE b > 10") == to_tree("select T.a from t as T where 10 < b")
    True
    >>> to_tree("SELECT 1 WHERE 1 = 1").children[1]
    Node('(((1)(1)Eq)Selection)')
    >>> to_tree("SELECT TOP 3 [Name] FROM t", dialect="tsql") == to_tree("SELECT name FROM t LIMIT 3")
    True
    >>> to_tree("SELECT a FROM t WHERE b ILIKE 'x%'", dialect="postgres").children[1]
    Node("(((t.b)('x%')Ilike)(t)Selection)")
    >>> to_tree("SELECT name FROM singer AS s", {"singer": ["name"]}).children[0]
    Node('(singer.name)')
    """
    return with_deep_stack(_to_tree, sql, schema, _dialect(dialect))


def _to_tree(sql: str, schema: Schema | None, rat_dialect: Dialect = SQLITE) -> Node:
    return from_ast(canonical_ast(sql, schema, rat_dialect), sql, None, rat_dialect)


def from_ast(ast: exp.Expression, sql: str, on_step: BuildObserver | None = None,
             rat_dialect: Dialect = SQLITE) -> Node:
    """The RAT of `ast`, a canonical sqlglot tree of `sql` (`rat.canonicalize.canonical_ast`,
    in `rat_dialect`), calling ``on_step`` (see `BuildObserver`) after each build step; raises
    only `RATError`.

    >>> from rat.canonicalize import canonical_ast
    >>> sql = "SELECT a FROM t LIMIT 3"
    >>> steps = []
    >>> tree = from_ast(canonical_ast(sql), sql, lambda *step: steps.append(step))
    >>> [(step, node.label) for step, expression, node, core in steps][:4]
    [('relation', 't'), ('from', 't'), ('expr', 't.a'), ('expr', '3')]
    >>> [(step, expression.sql(), node.label) for step, expression, node, core in steps][-1]
    ('query', 'SELECT t.a FROM t LIMIT 3', 'Limit')
    """
    builder = _Builder(sql, rat_dialect) if on_step is None else \
        _ObservedBuilder(sql, on_step, rat_dialect)
    with internal_errors(sql, "build tree"):
        tree = builder.query(ast, {})
    depth = tree.depth()
    if depth > MAX_DEPTH:
        raise RATError(f"query nested too deeply (tree depth {depth} > {MAX_DEPTH})", sql)
    if tree.size() > MAX_NODES:  # CTEs that read the one before several times: each read is inlined
        inlined = ", CTEs inlined where read," if ast.find(exp.CTE) is not None else ""
        raise RATError(f"query too large (its tree{inlined} has {tree.size()} nodes > {MAX_NODES})", sql)
    return tree


_WINDOW_CLAUSES = ("partition_by", "order", "spec")


def window_clauses(window: exp.Window, memo: dict) -> list | None:
    """The PARTITION BY, ORDER BY and frame of ``window``, each it does not write taken from the
    named window it names (`OVER w`, `OVER (w ROWS 2 PRECEDING)`, `WINDOW w2 AS (w ORDER BY b)`),
    as the database reads it; None where a name is not defined (or defined in a loop). The
    expressions are those of the WINDOW clause, not copies: their text is theirs. ``memo`` keeps
    each SELECT's named windows, resolved once for all its windows."""
    clauses = [window.args.get(k) for k in _WINDOW_CLAUSES]
    base = window.args.get("alias")
    if base is None:
        return clauses
    select = window.find_ancestor(exp.Select)
    named = memo.get(id(select))
    if named is None:
        named = memo[id(select)] = _named_windows(select)
    inherited = named.get(base.name.lower())
    return None if inherited is None else [c or i for c, i in zip(clauses, inherited)]


def _window_definitions(select: exp.Select | None) -> dict[str, exp.Window]:
    """The named windows of ``select``'s WINDOW clause, by lowercase name."""
    return {d.name.lower(): d for d in ((select.args.get("windows") if select is not None else None) or ())}


def _named_windows(select: exp.Select | None) -> dict[str, list | None]:
    """Each named window of ``select``'s WINDOW clause: its clauses with those of the window it
    names (None: it names one not defined, or itself through others); each name resolved once."""
    by_name = _window_definitions(select)
    resolved: dict[str, list | None] = {}
    for start in by_name:
        chain, name = [], start
        while name is not None and name not in resolved and name in by_name and name not in chain:
            chain.append(name)
            base = by_name[name].args.get("alias")
            name = base.name.lower() if base is not None else None
        inherited = [None] * len(_WINDOW_CLAUSES) if name is None else resolved.get(name)
        for link in reversed(chain):
            if inherited is not None:
                inherited = [by_name[link].args.get(k) or i for k, i in zip(_WINDOW_CLAUSES, inherited)]
            resolved[link] = inherited
    return resolved


def _undefined_window(window: exp.Window) -> str:
    """Why the named window ``window`` reads has no clauses: the name not defined, or a loop."""
    by_name = _window_definitions(window.find_ancestor(exp.Select))
    name, seen = window.args["alias"].name, []
    while name.lower() in by_name and name.lower() not in seen:
        seen.append(name.lower())
        name = by_name[name.lower()].args["alias"].name  # (a chain that ends has clauses)
    if name.lower() not in by_name:
        return f"window {name!r} is not defined"
    return f"window {name!r} is defined in a loop ({' -> '.join([*seen, name.lower()])})"


# The arguments of a SELECT that reads all of one query's rows and columns as they are: its
# list (`*`), its FROM and its WITH (`_star_of_one_query`)
_PASSING = frozenset({"expressions", "from_", "with_"})
# Relational operators over an ORDER BY that keep its order (`_ordered`)
_LIMITS = frozenset({"Limit", "Limit_percent", "Limit_with_ties", "Limit_percent_with_ties", "Offset"})


def _star_of_one_query(select: exp.Select, ctes: dict) -> bool:
    """Whether `select` is `SELECT * FROM (query) [AS s]` or `SELECT * FROM cte`, and nothing
    else: one bare `*` (no EXCLUDE, REPLACE, RENAME), one FROM item that is a subquery or a
    CTE's name (no join, PIVOT, sample), no other clause (WHERE, GROUP BY, ORDER BY, LIMIT,
    DISTINCT, ..). Its rows are the query's, column for column: its tree is the query's.

    >>> from rat.canonicalize import parse
    >>> [_star_of_one_query(parse(s), {"c": None}) for s in ("SELECT * FROM (SELECT a FROM t) AS s",
    ...  "SELECT * FROM c", "SELECT * FROM t", "SELECT * FROM c LIMIT 1", "SELECT a FROM c")]
    [True, True, False, False, False]
    """
    args = select.args
    if any(value for key, value in args.items() if key not in _PASSING):
        return False
    star = args["expressions"]
    if len(star) != 1 or type(star[0]) is not exp.Star or any(star[0].args.values()):
        return False
    item = args["from_"].this
    if item.args.get("pivots") or item.args.get("sample") is not None:
        return False
    if isinstance(item, exp.Subquery):
        return parenthesised_join(item) is None and isinstance(item.this, exp.Select | exp.SetOperation)
    return type(item) is exp.Table and isinstance(item.this, exp.Identifier) and item.name in ctes


def _ordered(relation: Node) -> bool:
    """Whether `relation` is a query's rows in the order of its ORDER BY (under its LIMIT): a
    SELECT over it keeps no order, so `SELECT * FROM (SELECT a FROM t ORDER BY a)` stays a
    Project of its `*`."""
    while relation.children and relation.label in _LIMITS:
        relation = relation.children[-1]
    return bool(relation.children) and relation.label.startswith("Orderby_")


def _from_items(first: exp.Expression, joins) -> list[exp.Expression]:
    """The FROM items `first` and `joins`', those of a join in parentheses in its place."""
    items = []
    for item in (first, *(j.this for j in joins)):
        inner = parenthesised_join(item)
        items += [item] if inner is None else _from_items(inner, inner.args["joins"])
    return items


def _date_unit(argument: exp.Expression, dialect: Dialect) -> str | None:
    """The date part `argument` names, in lower case (`'MONTH'`; Snowflake's and Redshift's unquoted
    `month`, which elsewhere is a column), else None."""
    if type(argument) is exp.Var and dialect.name in BARE_DATE_PART or type(argument) is exp.Literal \
            and argument.is_string and argument.this.isalpha():
        return argument.name.lower()
    return None


def _is_all(value) -> bool:
    return isinstance(value, exp.Var) and value.name.upper() == "ALL"


def _nulls_first_by_default(rat_dialect: Dialect, desc: bool) -> bool:
    """Whether the dialect sorts NULLs first where an ORDER BY key names no NULLS FIRST / LAST:
    as the smallest values (SQLite, MySQL, SQL Server, BigQuery, Databricks), the largest
    (PostgreSQL, Snowflake, Redshift) or last either way (DuckDB, Trino).

    >>> [_nulls_first_by_default(_dialect(d), False) for d in ("sqlite", "postgres", "duckdb")]
    [True, False, False]
    """
    ordering = sqlglot_dialect(rat_dialect).NULL_ORDERING
    return ordering == "nulls_are_small" and not desc or ordering == "nulls_are_large" and desc


def _zero_guard(node: exp.Expression) -> bool:
    """Whether `node` is NULLIF(y, 0): a divisor that gives NULL where y is 0, as SQLite's
    division by 0 does (sqlglot writes SQLite's x / y so in other dialects)."""
    return isinstance(node, exp.Anonymous) and node.name.lower() == "nullif" and len(node.expressions) == 2 \
        and isinstance(node.expressions[1], exp.Literal) and not node.expressions[1].is_string \
        and node.expressions[1].this in ("0", "0.0")


def _cast_type(to: exp.DataType) -> str:
    """A cast's type as SQLite writes it (`integer`, `real`, `text`: the same type in every
    dialect), but for the two SQLite writes as another whose cast gives other values: BOOLEAN
    (`integer` would cut 3.5 to 3) and DECIMAL / NUMERIC (`real` would give 3.0 for 3).

    >>> [_cast_type(exp.DataType.build(t)) for t in ("INT", "BOOLEAN", "NUMERIC(10, 2)", "FLOAT")]
    ['integer', 'boolean', 'numeric(10, 2)', 'real']
    """
    written = to.sql(dialect="sqlite").lower()
    if to.this == exp.DataType.Type.BOOLEAN:
        return "boolean"
    if to.this == exp.DataType.Type.DECIMAL:
        return "numeric" + written.removeprefix("real")
    return written


def _value_label(literal: exp.Literal) -> str:
    if literal.is_string:
        return "'" + literal.this.replace("'", "''") + "'"
    return literal.this


class _Builder:
    def __init__(self, sql: str, rat_dialect: Dialect = SQLITE):
        self.sql = sql
        self.dialect = rat_dialect
        self.cased = rat_dialect.case_sensitive
        self.windows: dict = {}  # each SELECT's named windows, resolved (window_clauses)
        self.renamed: dict[str, str] = {}  # derived tables' qualifiers, by content (derived_names)
        self.built: dict[int, Node] = {}  # FROM items built ahead of their FROM (derived_names)

    def label(self, identifier: exp.Identifier) -> str:
        """The label of an identifier rat does not resolve (a name the query gives): as
        `rat.dialects.Dialect.label` writes it."""
        return self.dialect.label(identifier.this, bool(identifier.args.get("quoted")))

    def name(self, identifier: exp.Identifier) -> str:
        """The label of a resolved identifier (see `rat.dialects.Dialect.label`)."""
        if not self.cased:
            return identifier.this
        return self.dialect.label(identifier.this, bool(identifier.args.get("quoted")))

    def unsupported(self, node: exp.Expression) -> RATError:
        return RATError(f"unsupported construct {construct_name(node)!r}", self.sql)

    # ---- relations --------------------------------------------------------------------
    def query(self, node: exp.Expression, ctes: dict[str, Node]) -> Node:
        if type(node) is exp.Select and "with_" not in node.args:  # the usual case, at once
            return self.select(node, ctes)
        if isinstance(node, exp.Subquery):
            return self.query(node.this, ctes)
        with_ = node.args.get("with_")
        if with_ is not None:
            ctes = dict(ctes)
            for cte in with_.expressions:
                name = cte.alias
                if cte.args.get("recursive"):  # rat.canonicalize marks a CTE that reads itself
                    # its step reads the rows made so far: a `Recursion` leaf
                    body = self.query(cte.this, {**ctes, name: Node("Recursion")})
                    ctes[name] = self.recursive(cte, Node("Recursive", (body,)))
                else:
                    ctes[name] = self.query(cte.this, ctes)
        if isinstance(node, exp.Select):
            return self.select(node, ctes)
        label = _SET_OPERATIONS.get(type(node))
        if label is None:
            raise self.unsupported(node)
        if not node.args.get("distinct"):  # UNION ALL; INTERSECT ALL / EXCEPT ALL keep duplicates too
            label += "_all"
        operands = []
        for side in (node.this, node.expression):
            operand = self.query(side, ctes)
            # (a UNION b) UNION c is one Union over a, b, c, as (a AND b) AND c is one And.
            plain = not any(side.args.get(k) for k in ("order", "limit", "offset"))
            if operand.label == label and not label.startswith("Except") and plain:
                operands.extend(operand.children)
            else:
                operands.append(operand)
        return self.modifiers(node, Node(label, operands), ctes)

    def select(self, node: exp.Select, ctes: dict[str, Node]) -> Node:
        outer = self.renamed
        self.renamed = self.derived_names(node, ctes)
        try:
            return self.select_body(node, ctes)
        finally:
            self.renamed = outer

    def derived_names(self, node: exp.Select, ctes) -> dict[str, str]:
        """The qualifiers to read in place of those of `node`'s FROM: the outer SELECTs' (less the
        ones this FROM defines again) and, where two or more subqueries or CTEs are joined, theirs
        by content. `rat.canonicalize` names derived tables by position (``derived``,
        ``derived_2``) while an inner join's items are a set (`Product`), so ``p JOIN r`` and ``r
        JOIN p`` would read ``derived.s - derived_2.s`` as two opposite differences of one tree;
        named in the order of their trees' hashes (ties, equal trees, by position), each name
        goes with one content whatever the order written. A table of a subquery's own FROM that
        has the name an outer one is read by takes another (``derived_0``)."""
        from_ = node.args.get("from_")
        items = [] if from_ is None else _from_items(from_.this, node.args.get("joins") or ())
        derived = [i for i in items if isinstance(i, exp.Subquery) and i.alias
                   or isinstance(i, exp.Table) and isinstance(i.this, exp.Identifier) and i.name in ctes and i.alias]
        own = {i.alias_or_name for i in items}
        renamed = {k: v for k, v in self.renamed.items() if k not in own}
        taken = set(renamed.values())
        for name in own & taken:  # an outer table read by a name this FROM gives its own
            new = name + "_0"  # (`rat.canonicalize` suffixes from _2)
            while new in taken or new in own:
                new += "_0"
            renamed[name] = new
            taken.add(new)
        if len(derived) < 2:
            return renamed
        self.renamed = renamed  # (a subquery in FROM reads no sibling, only outer SELECTs)
        built = [self.relation(i, ctes) for i in derived]
        self.built.update((id(i), b) for i, b in zip(derived, built))
        names = [i.alias for i in derived]
        order = sorted(range(len(derived)), key=lambda k: (built[k].hash, k))
        renamed.update((names[k], names[rank]) for rank, k in enumerate(order) if k != rank)
        return renamed

    def select_body(self, node: exp.Select, ctes: dict[str, Node]) -> Node:
        args = node.args
        projections = args.get("expressions")
        if not projections:  # (rat.canonicalize refuses it first)
            raise no_result_columns(self.sql, self.dialect)
        expr = self.expr
        # Each operator takes its input relation last; a SELECT without FROM has none.
        relation = self.from_clause(node, ctes)
        if relation is not None and relation.children and _star_of_one_query(node, ctes) and not _ordered(relation):
            # `SELECT * FROM (x)`, `WITH final AS (x) SELECT * FROM final`: x (not a recursive
            # CTE's step reading its own rows, a `Recursion` leaf)
            return relation
        if relation is not None and node.args.get("sample") is not None:  # DuckDB's USING SAMPLE: of FROM's rows
            relation = self.sample(node, relation, ctes)
        where = args.get("where")
        if where is not None:
            condition = expr(where.this, ctes)
            relation = Node("Selection", (condition,) if relation is None else (condition, relation))
        group = args.get("group")
        if group is not None:
            keys = [expr(k, ctes) for k in group.expressions]
            if relation is not None:
                keys.append(relation)
            relation = Node("Groupby", keys)
        having = args.get("having")
        if having is not None:
            condition = expr(having.this, ctes)
            relation = Node("Having", (condition,) if relation is None else (condition, relation))
        qualify = args.get("qualify")
        if qualify is not None:  # a filter on window results: after HAVING, before the SELECT list
            condition = expr(qualify.this, ctes)
            relation = Node("Qualify", (condition,) if relation is None else (condition, relation))
        columns = [expr(p, ctes) for p in projections]
        if relation is not None:
            columns.append(relation)
        relation = Node("Project", columns)
        distinct = args.get("distinct")
        if distinct is not None:
            on = distinct.args.get("on")
            if on is None:
                relation = Node("Distinct", (relation,))
            elif not self.dialect.distinct_on:
                raise RATError("unsupported construct 'DISTINCT ON'", self.sql)
            else:
                # The first row (by ORDER BY) of each group of equal keys, of the projection.
                keys = on.expressions if isinstance(on, exp.Tuple) else [on]
                relation = Node("Distinct_on", (*[expr(k, ctes) for k in keys], relation))
        return self.modifiers(node, relation, ctes)

    def modifiers(self, node: exp.Expression, relation: Node, ctes) -> Node:
        """ORDER BY and LIMIT/OFFSET, applied on top of the projection or set operation."""
        order = node.args.get("order")
        if order is not None:
            # ORDER BY a, b DESC == Orderby_asc(a, Orderby_desc(b, ..)): the outer key is primary.
            runs: list[tuple[str, list[Node]]] = []
            for ordered in order.expressions:
                label, key = self.sort_key(ordered, ctes)
                if runs and runs[-1][0] == label:
                    runs[-1][1].append(key)
                else:
                    runs.append((label, [key]))
            for label, keys in reversed(runs):
                relation = Node(label, (*keys, relation))
        limit = node.args.get("limit")
        offset = node.args.get("offset")
        if isinstance(limit, exp.Limit) and _is_all(limit.expression):
            # LIMIT ALL (PostgreSQL, DuckDB) is no limit; other dialects read `all` as a name
            offset = offset if offset is not None else limit.args.get("offset")
            limit = None
        if limit is not None:
            options = limit.args.get("limit_options")
            percent, ties = (bool(options.args.get(k)) for k in ("percent", "with_ties")) if options else (False, False)
            if percent and not self.dialect.limit_percent or ties and not self.dialect.with_ties:
                raise RATError(f"unsupported construct {'PERCENT' if percent else 'WITH TIES'!r}", self.sql)
            # TOP 10 PERCENT / FETCH FIRST 3 ROWS WITH TIES: `Limit_percent`, `Limit_with_ties`
            label = "Limit" + "_percent" * percent + "_with_ties" * ties
            if isinstance(limit, exp.Fetch):  # FETCH FIRST n ROWS ONLY is LIMIT n (n: 1)
                if not self.dialect.fetch_first:
                    raise RATError(f"unsupported construct 'FETCH FIRST' ({self.dialect.name} has none: LIMIT n)",
                                   self.sql)
                count = limit.args.get("count")
                count = exp.Literal.number(1) if count is None else count
            else:
                count = limit.expression
            offset = offset if offset is not None else limit.args.get("offset")
            children = [self.expr(count, ctes)]
            if offset is not None:
                offset_value = offset.expression if isinstance(offset, exp.Offset) else offset
                children.append(Node("Offset", (self.expr(offset_value, ctes),)))
            relation = Node(label, (*children, relation))
        elif offset is not None:
            offset_value = offset.expression if isinstance(offset, exp.Offset) else offset
            relation = Node("Offset", (self.expr(offset_value, ctes), relation))
        return relation

    def from_clause(self, node: exp.Select, ctes) -> Node | None:
        from_ = node.args.get("from_")
        if from_ is None:
            return None
        # (`SELECT *` lists the columns in the order of the tables: there `b RIGHT JOIN a` is no `a LEFT JOIN b`)
        stars = any(not isinstance(star.parent, exp.Count) for p in node.expressions for star in p.find_all(exp.Star))
        return self.joined(from_.this, node.args.get("joins") or (), ctes, swap=not stars)

    def joined(self, first: exp.Expression, joins, ctes, swap: bool = False) -> Node:
        """The FROM items `first` and `joins`' joined. Inner joins are flattened into one Product
        of every table and every ON conjunct, so any permutation of tables and conditions gives
        the same hash; a join in parentheses (`(a JOIN b ON ..) JOIN c`) is one too. With `swap`
        (the SELECT names its columns), `b RIGHT JOIN a ON c` is `a LEFT JOIN b ON c`."""
        built = self.built
        items = [built.pop(id(first)) if id(first) in built else self.relation(first, ctes)]
        if items[0].label == "Product" and parenthesised_join(first) is not None:
            items = list(items[0].children)
        for join in joins:
            right = built.pop(id(join.this)) if id(join.this) in built else self.relation(join.this, ctes)
            method = join.args.get("method")
            if method == "POSITIONAL" and self.dialect.positional_join:  # rows paired by position
                items = [Node("Positional_join", (items[0] if len(items) == 1 else Node("Product", items), right))]
                continue
            if method and (method != "ASOF" or not self.dialect.asof_join):
                raise RATError(f"unsupported construct '{method} JOIN'", self.sql)
            conditions = self.join_conditions(join, ctes)
            side = join.args.get("side")
            if method:  # ASOF JOIN (Snowflake's MATCH_CONDITION is one more condition): Asof_[left_]join
                if join.args.get("match_condition") is not None:
                    conditions += self.flatten(join.args["match_condition"], exp.And, ctes)
                side = "ASOF_LEFT" if (side or "").upper() == "LEFT" or self.dialect.asof_join == "left" else "ASOF"
            if isinstance(join.this, exp.Lateral) and join.this.args.get("cross_apply") is False:
                side = "LEFT"  # SQL Server's OUTER APPLY is LEFT JOIN LATERAL .. ON TRUE
            kind = (join.args.get("kind") or "").upper()
            if kind in ("SEMI", "ANTI"):  # DuckDB's: the left rows with (without) a match
                if not self.dialect.semi_join or side and side.upper() != "LEFT":
                    raise RATError(f"unsupported construct '{kind} JOIN'", self.sql)
                side = kind
            if side:
                label = _JOIN_SIDES.get(side.upper())
                if label is None:
                    raise RATError(f"unsupported construct '{side} JOIN'", self.sql)
                left = items[0] if len(items) == 1 else Node("Product", items)
                if label == "Right_join" and swap:  # `a RIGHT JOIN b ON c` is `b LEFT JOIN a ON c`
                    label, left, right = "Left_join", right, left
                condition = conditions[0] if len(conditions) == 1 else Node("And", conditions)
                items = [Node(label, (left, right, *([condition] if conditions else [])))]
            else:
                parenthesised = right.label == "Product" and parenthesised_join(join.this) is not None
                items.extend(right.children if parenthesised else (right,))
                items.extend(conditions)
        return items[0] if len(items) == 1 else Node("Product", items)

    def join_conditions(self, join: exp.Join, ctes) -> list[Node]:
        on = join.args.get("on")
        # sqlglot writes `ON TRUE` into a bare JOIN that another JOIN follows.
        if on is not None and not (isinstance(on, exp.Boolean) and on.this):
            return self.flatten(on, exp.And, ctes)
        using = join.args.get("using")
        if using:
            return [Node("Using", [self.expr(c, ctes) for c in using])]
        return []

    def recursive(self, cte: exp.CTE, node: Node) -> Node:
        """The `Recursive` node of a recursive CTE (the observed builder reports it)."""
        return node

    def made(self, expression: exp.Expression, node: Node) -> Node:
        """`node`, read from `expression` otherwise than `expr` reads it (the observed builder
        reports it)."""
        return node

    def relation(self, node: exp.Expression, ctes) -> Node:
        if isinstance(node, exp.Table):
            if not isinstance(node.this, exp.Identifier):  # a function's rows: `Generate_series(1, 5)`
                return self.numbered(node, self.expr(node.this, ctes), node.args.get("ordinality"))
            name = node.name
            if name in ctes:
                return self.sample(node, ctes[name], ctes)
            table = Node(self.name(node.this) if self.cased else name)
            schema = node.args.get("db")  # kept only where it names another table (rat.Schema)
            rows = table if schema is None else Node("In_schema", (table, Node(schema.name)))
            return self.pivot(node, self.sample(node, rows, ctes), ctes)
        if isinstance(node, exp.Subquery):
            inner = parenthesised_join(node)
            if inner is not None:
                return self.joined(inner, inner.args["joins"], ctes)
            return self.pivot(node, self.query(node.this, ctes), ctes)
        if isinstance(node, exp.Lateral):  # the subquery or function, reading what is before it
            if isinstance(node.this, exp.Unnest):
                return self.relation(node.this, ctes)
            return self.query(node.this.this, ctes) if isinstance(node.this, exp.Subquery) \
                else self.expr(node.this, ctes)
        if isinstance(node, exp.Unnest):
            return self.numbered(node, Node("Unnest", [self.expr(e, ctes) for e in node.expressions]),
                                 node.args.get("offset"))
        if isinstance(node, exp.Values):
            return self.expr(node, ctes)
        raise RATError(f"unsupported construct {construct_name(node)!r} in FROM", self.sql)

    def sample(self, node: exp.Table, rows: Node, ctes) -> Node:
        """`t TABLESAMPLE SYSTEM (10)`, Snowflake's `t SAMPLE (10)`: `Sample_percent(10, t)`;
        `SAMPLE (100 ROWS)`: `Sample_rows(100, t)` (a random share or number of its rows: the
        method and seed are not kept); else the rows."""
        sample = node.args.get("sample")
        if sample is None:
            return rows
        percent = sample.args.get("percent")
        if percent is not None:
            return Node("Sample_percent", (self.expr(percent, ctes), rows))
        return Node("Sample_rows", (self.expr(sample.args["size"], ctes), rows))

    def pivot(self, node: exp.Expression, rows: Node, ctes) -> Node:
        """`t PIVOT (agg(v) FOR k IN (a, b))`: Pivot(agg(v), In(k, (a, b)), t), its input relation
        last as other relational operators take theirs; `t UNPIVOT (v FOR k IN (a, b))`:
        Unpivot(t.a, t.b, t) (`Unpivot_include_nulls`: Snowflake's INCLUDE NULLS), the names of
        the new columns being names only; else the rows."""
        pivots = node.args.get("pivots")
        if not pivots:
            return rows
        if pivots[0].args.get("unpivot"):
            label = "Unpivot_include_nulls" if pivots[0].args.get("include_nulls") else "Unpivot"
            return Node(label, (*(self.expr(c, ctes) for f in pivots[0].args.get("fields") or ()
                                  for c in f.expressions), rows))
        return Node("Pivot", (*(self.expr(e, ctes) for e in pivots[0].expressions),
                              *(self.expr(f, ctes) for f in pivots[0].args.get("fields") or ()), rows))

    def numbered(self, node: exp.Expression, rows: Node, numbered) -> Node:
        """A function's rows `WITH ORDINALITY` (numbered from 1: `Ordinality(rows)`) or BigQuery's
        `WITH OFFSET` (from 0: `With_offset(rows)`); else the rows."""
        if not numbered:
            return rows
        return Node("With_offset" if self.dialect.name == "bigquery" else "Ordinality", (rows,))

    def star(self, star: exp.Star, node: Node, ctes) -> Node:
        """`*` or `t.*` (``node``), or DuckDB's / Snowflake's `* EXCLUDE (a)`, BigQuery's
        `* EXCEPT (a)`: `Exclude(*, t.a)`; and `* REPLACE (upper(a) AS a)`: `Star_replace(*,
        Named(Upper(t.a), a))`, the star's columns with `a`'s values replaced (`rat.canonicalize`
        drops RENAME)."""
        excluded, replaced = star.args.get("except_"), star.args.get("replace")
        if excluded:
            node = Node("Exclude", (node, *(self.expr(c, ctes) for c in excluded)))
        if replaced:
            node = Node("Star_replace", (node, *(Node("Named", (self.expr(a.this, ctes), Node(self.label(a.args["alias"]))))
                                            for a in replaced)))
        return node

    # ---- expressions ------------------------------------------------------------------
    def expr(self, node: exp.Expression, ctes) -> Node:
        kind = type(node)
        if kind is exp.Column:
            table = node.args.get("table")
            star = isinstance(node.this, exp.Star)
            if table is None:
                qualifier = None
            else:
                qualifier = self.name(table) if self.cased else table.this
                if self.renamed:
                    qualifier = self.renamed.get(qualifier, qualifier)
            if self.cased:
                name = "*" if star else self.name(node.this)
            else:
                name = "*" if star else node.this.this
            column = Node(f"{qualifier}.{name}" if qualifier is not None else name)
            return self.star(node.this, column, ctes) if star else column
        if kind is exp.Literal:
            return Node(_value_label(node))
        if kind is exp.Parameter or kind is exp.Placeholder or kind is exp.Var and node.name[:1] in ("?", "$"):
            # `$1`, `?`, `:id`, `@id`, SQLite's `?1` and `$1` (an exp.Var: rat.canonicalize._numbered_placeholders):
            # a value given later
            return Node(node.sql(dialect=sqlglot_dialect(self.dialect)))
        if kind is exp.RawString or kind is exp.National or kind is exp.ByteString and self.dialect.name in _ESCAPE_STRINGS:
            # BigQuery's r'^a\d', SQL Server's N'a', PostgreSQL's and DuckDB's E'it\'s' (sqlglot reads its escapes)
            return Node("'" + node.this.replace("'", "''") + "'")
        if kind is exp.Paren:
            return self.expr(node.this, ctes)
        label = _BINARY.get(kind)
        if label is not None:
            divisor = node.expression
            if kind is exp.Div and _zero_guard(divisor.unnest()):  # x / NULLIF(y, 0) is SQLite's x / y
                divisor = divisor.unnest().expressions[0]
            left, right = self.expr(node.this, ctes), self.expr(divisor, ctes)
            if kind in _JSONB_KEYS and not self.dialect.jsonb_keys:
                raise RATError(f"unsupported construct 'j ? k' ({self.dialect.name} has no jsonb key tests)", self.sql)
            if kind is exp.BitwiseXor and not self.dialect.bitwise_xor:
                raise RATError(f"unsupported construct '^' ({self.dialect.name} has no bitwise XOR operator rat reads)",
                               self.sql)  # (SQL Server's, BigQuery's, Databricks': of another precedence)
            if kind is exp.Is and isinstance(node.expression, exp.Null):  # PostgreSQL's IS NOT NULL: negate
                return Node("Is_not_null" if node.args.get("negate") else "Is_null", (left,))
            if (kind is exp.NullSafeEQ or kind is exp.NullSafeNEQ) and isinstance(node.expression, exp.Null):
                return Node("Is_null" if kind is exp.NullSafeEQ else "Is_not_null", (left,))  # IS [NOT] DISTINCT FROM NULL
            if kind is exp.Is and node.args.get("negate"):
                return Node("Not", (Node(label, (left, right)),))
            if (kind is exp.Like or kind is exp.ILike) and node.args.get("negate"):
                return Node(_NEGATED[label], (left, right))
            if node.args.get("escape") is not None:
                raise RATError("unsupported construct 'ESCAPE'", self.sql)
            if (kind is exp.EQ and right.label == "Any" or kind is exp.NEQ and right.label == "All") \
                    and len(right.children) == 1:
                # x = ANY (ARRAY[1, 2]) is x IN (1, 2), x = ANY (SELECT ..) is x IN (SELECT ..); <> ALL: NOT IN
                (inner,) = right.children
                if inner.label == "Array":
                    inner = Node("Val_list", inner.children)
                if inner.label == "Val_list" or is_relation(inner):
                    return Node("In" if kind is exp.EQ else "Not_in", (left, inner))
            if left.label == "Collate" and right.label == "Collate" and kind in _COMPARISONS and self.dialect is SQLITE:
                right = right.children[0]  # SQLite compares with the left's explicit collation: the right's is no part of it
            if kind is exp.Add and self.dialect.name == "tsql" and (
                    left.label in _CONCATS or right.label in _CONCATS or _text(node.this) or _text(node.expression)):
                label = "Concat"  # SQL Server's `+` of strings joins them (in order)
            return Node(label, (left, right))
        if kind is exp.Star:
            return self.star(node, Node("*"), ctes)
        if kind is exp.MatchAgainst:  # MySQL's MATCH (a, b) AGAINST ('x' [IN .. MODE]), PostgreSQL's v @@ q
            children = [*(self.expr(c, ctes) for c in node.expressions), self.expr(node.this, ctes)]
            modifier = node.args.get("modifier")
            if modifier:  # `IN BOOLEAN MODE`: the value `boolean_mode`
                children.append(Node("_".join(str(modifier).lower().split()[1:])))
            return Node("Match_against", children)
        label = _AGGREGATES.get(kind)
        if label is not None:
            children = self.arguments([node.this, *node.expressions], ctes)
            separator = node.args.get("separator")
            if separator is not None:
                children.append(self.expr(separator, ctes))
            return Node(label, children)
        if kind is exp.And or kind is exp.Or or kind is exp.Xor:  # (MySQL's logical `a XOR b`)
            return Node(kind.__name__, self.flatten(node, kind, ctes))
        if kind is exp.Not:
            inner = self.expr(node.this, ctes)
            negated = _NEGATED.get(inner.label)
            if negated is not None:
                return Node(negated, inner.children)
            return Node("Not", (inner,))
        if kind is exp.In:
            query = node.args.get("query")
            if query is not None:
                target = self.query(query, ctes)
            elif node.args.get("unnest") is not None:  # BigQuery's x IN UNNEST(array)
                arrays = node.args["unnest"].expressions
                target = Node("Val_list", [self.expr(v, ctes) for v in arrays[0].expressions]) \
                    if len(arrays) == 1 and type(arrays[0]) is exp.Array \
                    else Node("Unnest", [self.expr(e, ctes) for e in arrays])  # IN UNNEST([1, 2]): IN (1, 2)
            elif node.args.get("field") is not None:
                raise self.unsupported(node)
            else:
                values = node.expressions
                if len(values) == 1 and type(values[0]) is exp.Values and all(
                        type(row) is not exp.Tuple or len(row.expressions) == 1 for row in values[0].expressions):
                    # x IN (VALUES (1), (2)) is x IN (1, 2)
                    values = [row.expressions[0] if type(row) is exp.Tuple else row
                              for row in values[0].expressions]
                target = Node("Val_list", [self.expr(v, ctes) for v in values])
            return Node("In", (self.expr(node.this, ctes), target))
        if kind is exp.Null:
            return Node("null")
        if kind is exp.Boolean:
            return Node("true" if node.this else "false")
        if kind is exp.Neg:
            inner = node.this
            if isinstance(inner, exp.Literal) and not inner.is_string:
                return Node("-" + inner.this)
            return Node("Neg", (self.expr(inner, ctes),))
        if kind in _SET_OPERATIONS or kind is exp.Select or kind is exp.Subquery:
            return self.query(node, ctes)
        if kind is exp.Exists:
            return Node("Exists", (self.exists(node.this, ctes),))
        if kind is exp.Distinct:
            return Node("Distinct", [self.expr(e, ctes) for e in node.expressions])
        if kind is exp.Greatest or kind is exp.Least:
            # SQLite's multi-argument max(a, b) / min(a, b).
            children = [self.expr(node.this, ctes)] + [self.expr(e, ctes) for e in node.expressions]
            return Node("Max" if kind is exp.Greatest else "Min", children)
        if kind is exp.Between:  # one whose operand may call a function anew each time (`rat.canonicalize`)
            label = "Between_symmetric" if node.args.get("symmetric") else "Between"
            return Node(label, (self.expr(node.this, ctes), self.expr(node.args["low"], ctes),
                                self.expr(node.args["high"], ctes)))
        if kind is exp.Case:
            return self.case(node.args.get("this"), node.args.get("ifs") or (),
                             node.args.get("default"), ctes)
        if kind is exp.If:  # MySQL's, BigQuery's, DuckDB's IF(c, a, b): CASE WHEN c THEN a ELSE b END
            return self.case(None, [exp.If(this=node.this, true=node.args.get("true"))],
                             node.args.get("false"), ctes)
        if kind is exp.Anonymous:
            name = node.name.lower()
            arguments = node.expressions
            if (name == "iif" or name == "iff" and self.dialect.name == "snowflake") and len(arguments) == 3:
                # IIF(c, a, b) (Snowflake's IFF) is CASE WHEN c THEN a ELSE b END.
                when = exp.If(this=arguments[0], true=arguments[1])
                return self.case(None, [when], arguments[2], ctes)
            if name in ("like", "glob", "regexp") and self.dialect is SQLITE and len(arguments) == 2:
                # SQLite's like(p, x) is `x LIKE p` (glob and regexp too): the pattern comes first
                return Node(name.capitalize(), (self.expr(arguments[1], ctes), self.expr(arguments[0], ctes)))
            if name == "div" and len(arguments) == 2:  # BigQuery's, PostgreSQL's integer quotient
                return Node("Intdiv", self.arguments(arguments, ctes))
            if name in ("ltrim", "rtrim") and len(arguments) == 2 and self.dialect.name == "databricks":
                arguments = arguments[::-1]  # Databricks' ltrim(chars, s): SQLite's ltrim(s, chars)
            if name in ("ifnull", "nvl") and len(arguments) == 2:  # SQLite's, MySQL's, Snowflake's
                name = "coalesce"
            unit = _date_unit(arguments[0], self.dialect) if len(arguments) == 2 and (
                name == "date_trunc" and self.dialect is not SQLITE or name == "date_part" and self.dialect.name
                in _DATE_PART_DIALECTS) else None
            if unit is not None:  # date_trunc('MONTH', d) is date_trunc('month', d); date_part('year', d) EXTRACT(year FROM d)
                value = self.expr(arguments[1], ctes)
                if name == "date_part":
                    return Node("Extract", (value, self.made(arguments[0], Node(unit))))
                return Node("Date_trunc", (self.made(arguments[0], Node(f"'{unit}'")), value))
            if name == "concat" and self.dialect.concat_skips_nulls:
                name = "concat_skip_nulls"  # NULL arguments skipped, where `a || b` is NULL: no `Concat`
            if name == "count_big" and self.dialect.name == "tsql":
                name = "count"  # SQL Server's COUNT_BIG: COUNT as a bigint
            if name == self.dialect.now and not arguments:
                return Node("current_timestamp")
            if name in _CURRENT and not arguments and self.dialect is not SQLITE:
                return Node(name)  # MySQL's, Snowflake's CURRENT_DATE(): the keyword's value
            # a date part (rat.canonicalize made it an exp.Var) is a name, as Extract's unit is
            return Node(name.capitalize(), [child for a in arguments for child in (
                [Node(a.name)] if type(a) is exp.Var else self.arguments([a], ctes))])
        if kind is exp.Cast or kind is exp.TryCast:
            return Node("Cast", (self.expr(node.this, ctes), Node(_cast_type(node.args["to"]))))
        if kind is exp.Alias:
            return self.expr(node.this, ctes)
        if kind is exp.Tuple:
            return Node("Tuple", [self.expr(e, ctes) for e in node.expressions])
        if kind is exp.WithinGroup:  # percentile_cont(0.5) WITHIN GROUP (ORDER BY a): the ordering
            aggregate = self.expr(node.this, ctes)  # is the aggregate's last arguments (`arguments`)
            return Node(aggregate.label, (*aggregate.children, *self.ordering(node.expression, ctes)))
        if kind is exp.IgnoreNulls:  # lag(a) IGNORE NULLS OVER (..)
            if not self.dialect.ignore_nulls:
                raise RATError("unsupported construct 'IGNORE NULLS'", self.sql)
            return Node("Ignore_nulls", (self.expr(node.this, ctes),))
        if kind is exp.RespectNulls:  # what a window function does unasked
            return self.expr(node.this, ctes)
        if kind is exp.AtTimeZone:  # ts AT TIME ZONE 'UTC'
            if not self.dialect.at_time_zone:
                raise RATError("unsupported construct 'AT TIME ZONE'", self.sql)
            return Node("At_time_zone", (self.expr(node.this, ctes), self.expr(node.args["zone"], ctes)))
        if kind is exp.Bracket and len(node.expressions) == 1 and not node.args.get("safe"):
            # tags[1]: sqlglot counts from 0 in every dialect (PostgreSQL's [1] is its [0]), but
            # leaves BigQuery's tags[ORDINAL(1)] counted from 1 (offset 1): its [0] too
            index = node.expressions[0]
            if node.args.get("offset") == 1:
                index = exp.Literal.number(int(index.this) - 1) if index.is_int else exp.Sub(
                    this=index.copy(), expression=exp.Literal.number(1))
            return Node("Subscript", (self.expr(node.this, ctes), self.expr(index, ctes)))
        if kind is exp.Dot and self.dialect.struct_fields and isinstance(node.expression, exp.Identifier):
            # a struct's field: `shipping.city` is Field(orders.shipping, city), the name named last
            return Node("Field", (self.expr(node.this, ctes), Node(self.label(node.expression))))
        if kind is exp.Kwarg or kind is exp.PropertyEQ and isinstance(node.this, exp.Identifier):
            # Snowflake's `input => x`, DuckDB's `input := x`: the value, then the argument's name
            return Node("Named", (self.expr(node.expression, ctes), Node(node.this.name.lower())))
        if kind is exp.Convert:  # SQL Server's CONVERT(type, x[, style]): CAST, and its style
            style = node.args.get("style")
            to = Node(node.this.sql(dialect="sqlite").lower())
            return Node("Cast", (self.expr(node.expression, ctes), to)) if style is None else \
                Node("Convert", (self.expr(node.expression, ctes), self.expr(style, ctes), to))
        label = _GROUPINGS.get(kind)
        if label is not None:
            return Node(label, [self.expr(e, ctes) for e in node.expressions])
        if kind is exp.Values:  # rows: a Tuple each
            return Node("Values", [self.expr(row, ctes) if type(row) is exp.Tuple
                                   else Node("Tuple", (self.expr(row, ctes),)) for row in node.expressions])
        if kind is exp.Array:  # ARRAY[1, 2] (PostgreSQL), [1, 2] (DuckDB, BigQuery)
            return Node("Array", [self.expr(e, ctes) for e in node.expressions])
        if kind is exp.Collate:
            return Node("Collate", (self.expr(node.this, ctes), Node(node.expression.name.lower())))
        if kind in _NILADIC:
            return Node(_NILADIC[kind])
        if kind in _USER_CALLS and node.this is None:
            return Node(_USER_CALLS[kind])
        if kind is exp.Any or kind is exp.All:
            return Node(kind.__name__, (self.expr(node.this, ctes),))
        if kind is exp.Window:
            return self.window(node, ctes)
        if kind is exp.Extract:  # EXTRACT(YEAR FROM d): the unit is named last, as CAST's type
            return Node("Extract", (self.expr(node.expression, ctes), Node(node.name.lower())))
        if kind is exp.BitwiseNot:
            return Node("Bitnot", (self.expr(node.this, ctes),))
        if kind is exp.Sqrt:  # sqrt(a) (PostgreSQL's `|/ a` is refused: rat.canonicalize)
            return Node("Sqrt", (self.expr(node.this, ctes),))
        if kind is exp.Trim:  # TRIM([BOTH | LEADING | TRAILING] [chars] FROM s): SQLite's trim / ltrim / rtrim(s[, chars])
            if node.args.get("collation") is not None:
                raise RATError("unsupported construct 'TRIM(.. COLLATE ..)'", self.sql)
            label = _TRIMS[str(node.args.get("position") or "BOTH").upper()]
            return Node(label, self.arguments([node.this, node.expression], ctes))
        if kind is exp.Overlay:  # PostgreSQL's overlay(s PLACING x FROM 2 FOR 3): overlay(s, x, 2, 3)
            return Node("Overlay", self.arguments([node.this, node.expression, node.args["from_"],
                                                   node.args.get("for_")], ctes))
        if kind is exp.Interval:
            return self.interval(node, ctes)
        if kind is exp.Filter:  # count(*) FILTER (WHERE c): the aggregate, then its condition
            return Node("Filter", (self.expr(node.this, ctes), self.expr(node.expression.this, ctes)))
        label = _JSON.get(kind)
        if label is not None:  # the path as a value: `a->'k'` (PostgreSQL) is `a->'$.k'` (SQLite)
            path = node.expression
            path = Node(path.sql(dialect="sqlite")) if isinstance(path, exp.JSONPath) \
                else self.expr(path, ctes)
            return Node(label, (self.expr(node.this, ctes), path))
        raise self.unsupported(node)

    def exists(self, query: exp.Expression, ctes) -> Node:
        """What EXISTS reads: whether its query has rows. The SELECT list of a plain SELECT does
        not change that, so `EXISTS (SELECT 1 FROM t WHERE c)`, `.. (SELECT * ..)` and
        `.. (SELECT t.id ..)` are one `Exists(Selection(c, t))`; a list with an aggregate and no
        GROUP BY (one row, always: `rat.canonicalize.one_row`) is kept."""
        tree = self.query(query, ctes)
        select = query.this if isinstance(query, exp.Subquery) else query
        if tree.label != "Project" or type(select) is not exp.Select or "with_" in select.args:
            return tree
        args = select.args
        if not any(args.get(k) is not None for k in ("from_", "where", "group", "having", "qualify")):
            return tree  # no relation: `SELECT 1` is its one row
        if args.get("group") is None and one_row(select):
            return tree
        return tree.children[-1]

    def interval(self, node: exp.Interval, ctes) -> Node:
        """`Interval(amount, unit)`, the unit in the singular and lower case; `INTERVAL '7 days'`,
        `INTERVAL '7' DAY`, `INTERVAL 7 DAY` and `INTERVAL '1 week'` are one node; an interval of several parts
        (`'1 day 2 hours'`) is `Interval('1 day 2 hours')`."""
        amount, unit = node.this, node.args.get("unit")
        if isinstance(amount, exp.Literal) and amount.is_string and unit is not None \
                and NUMBER.match(amount.this.strip()):  # not 'nan' / 'inf', which float() reads
            amount = exp.Literal.number(amount.this.strip())
        if unit is None:
            return Node("Interval", (self.expr(amount, ctes),))
        name = unit.name.lower()
        if name.endswith("s") and name[:-1] in _INTERVAL_UNITS:
            name = name[:-1]
        value = self.expr(amount, ctes)
        if name == "week" and type(amount) is exp.Literal and not amount.is_string and amount.this.isdigit():
            value, name = self.made(node.this, Node(str(int(amount.this) * 7))), "day"  # a week is 7 days
        return Node("Interval", (value, Node(name)))

    def arguments(self, arguments: list, ctes) -> list[Node]:
        """A call's arguments; `x ORDER BY k` (string_agg's, array_agg's) is x, then its ordering;
        BigQuery's `x ORDER BY k LIMIT n` is those, then `Limit(n)`."""
        nodes = []
        for argument in arguments:
            if type(argument) is exp.Limit and argument.this is not None:
                nodes.extend(self.arguments([argument.this], ctes))
                nodes.append(Node("Limit", (self.expr(argument.expression, ctes),)))
            elif type(argument) is exp.Order:
                nodes.append(self.expr(argument.this, ctes))
                nodes.extend(self.ordering(argument, ctes))
            elif argument is not None:
                nodes.append(self.expr(argument, ctes))
        return nodes

    def ordering(self, order: exp.Order, ctes) -> list[Node]:
        """`Orderby_asc` / `Orderby_desc` (key) for each key of an ORDER BY inside an expression
        (a window, an aggregate)."""
        nodes = []
        for ordered in order.expressions:
            label, key = self.sort_key(ordered, ctes)
            nodes.append(Node(label, (key,)))
        return nodes

    def sort_key(self, ordered: exp.Expression, ctes) -> tuple[str, Node]:
        """The label of an ORDER BY key's operator, and the key's node: `Orderby_asc` /
        `Orderby_desc`, with `_nulls_first` / `_nulls_last` where a NULLS FIRST / LAST puts
        NULLs where neither the dialect unasked nor SQLite would (`a NULLS LAST` in SQLite, where
        NULLs sort first ascending). A NULLS FIRST / LAST of SQLite's order is no part of the tree
        either: sqlglot writes SQLite's `ORDER BY a DESC` as PostgreSQL's `a DESC NULLS LAST`,
        which must stay SQLite's tree (docs/research.md, 11)."""
        if not isinstance(ordered, exp.Ordered):
            return "Orderby_asc", self.expr(ordered, ctes)
        desc = bool(ordered.args.get("desc"))
        label = "Orderby_desc" if desc else "Orderby_asc"
        nulls_first = bool(ordered.args.get("nulls_first"))
        if nulls_first != _nulls_first_by_default(self.dialect, desc) and nulls_first == desc:  # (SQLite's: not desc)
            label += "_nulls_first" if nulls_first else "_nulls_last"
        return label, self.expr(ordered.this, ctes)

    def window(self, node: exp.Window, ctes) -> Node:
        clauses = window_clauses(node, self.windows)
        if clauses is None:
            raise RATError(_undefined_window(node), self.sql)
        partition, order, spec = clauses
        children = [self.expr(node.this, ctes)]
        if partition:
            children.append(Node("Partitionby", [self.expr(k, ctes) for k in partition]))
        if order is not None:
            children.extend(self.ordering(order, ctes))
        if spec is not None:
            frame = self.frame(spec, ctes)
            if frame is not None:
                children.append(frame)
        return Node("Over", children)

    def frame(self, spec: exp.WindowSpec, ctes) -> Node | None:
        """`Rows` / `Range` / `Groups` (start, end[, excluded]); `ROWS 2 PRECEDING` ends at the
        current row; `EXCLUDE TIES` (CURRENT ROW, GROUP) a last leaf `Exclude_ties`, where the
        dialect has it (`EXCLUDE NO OTHERS` is the default); None for the default frame (`RANGE
        BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW`), which is the frame of a window that names
        none."""
        exclude = spec.args.get("exclude")
        excluded = " ".join(exclude.name.upper().split()) if exclude is not None else "NO OTHERS"
        if excluded != "NO OTHERS" and not self.dialect.frame_exclude:
            raise RATError("unsupported construct 'EXCLUDE' in a window frame", self.sql)
        kind = _FRAME_KINDS.get(str(spec.args.get("kind") or "").upper())
        if kind is None:
            raise RATError("unsupported construct 'window frame'", self.sql)
        start = self.bound(spec.args.get("start"), spec.args.get("start_side"), ctes)
        end = self.bound(spec.args.get("end") or "CURRENT ROW", spec.args.get("end_side"), ctes)
        if excluded != "NO OTHERS":
            return Node(kind, (start, end, Node("Exclude_" + excluded.lower().replace(" ", "_"))))
        if kind == "Range" and start.label == "Unbounded_preceding" and end.label == "Current_row":
            return None
        return Node(kind, (start, end))

    def bound(self, value, side, ctes) -> Node:
        side = str(side or "").capitalize()
        if isinstance(value, str):
            word = value.upper()
            if word == "CURRENT ROW":
                return Node("Current_row")
            if word == "UNBOUNDED" and side in ("Preceding", "Following"):
                return Node(f"Unbounded_{side.lower()}")
            raise RATError(f"unsupported construct 'window frame bound {value}'", self.sql)
        if side not in ("Preceding", "Following"):
            raise RATError("unsupported construct 'window frame'", self.sql)
        return Node(side, (self.expr(value, ctes),))

    def flatten(self, node: exp.Expression, kind: type, ctes) -> list[Node]:
        # a AND (b AND c) is one And over a, b, c.
        operands: list[Node] = []
        stack = [node]
        while stack:
            current = stack.pop()
            while isinstance(current, exp.Paren):
                current = current.this
            if type(current) is kind:
                stack.append(current.expression)
                stack.append(current.this)
            else:
                operands.append(self.expr(current, ctes))
        return operands

    def case(self, operand, ifs, default, ctes) -> Node:
        children = [] if operand is None else [self.expr(operand, ctes)]
        for when in ifs:
            children.append(Node("When", (self.expr(when.this, ctes),
                                          self.expr(when.args["true"], ctes))))
        if default is not None:
            children.append(Node("Else", (self.expr(default, ctes),)))
        return Node("Case", children)


def _text(node: exp.Expression) -> bool:
    """Whether `node` is a string literal that is not a number (SQL Server reads `'5' + 1` as 6,
    `'a' + x` as a string)."""
    if type(node) is not exp.Literal or not node.is_string:
        return False
    try:
        float(node.this)
    except ValueError:
        return True
    return False


def _reporting(step: str, build):
    """The `_Builder` method `build`, reporting each node it makes to the observer as `step`."""

    def observed(self, node, ctes):
        result = build(self, node, ctes)
        self.on_step(step, node, result, None)
        return result

    return observed


class _ObservedBuilder(_Builder):
    """The builder, reporting each step to an observer (see `BuildObserver`)."""

    def __init__(self, sql: str, on_step: BuildObserver, rat_dialect: Dialect = SQLITE):
        super().__init__(sql, rat_dialect)
        self.on_step = on_step

    query = _reporting("query", _Builder.query)
    select = _reporting("select", _Builder.select)
    relation = _reporting("relation", _Builder.relation)
    expr = _reporting("expr", _Builder.expr)

    def modifiers(self, node, relation, ctes):
        result = super().modifiers(node, relation, ctes)
        self.on_step("modifiers", node, result, relation)
        return result

    def recursive(self, cte, node):
        self.on_step("query", cte, node, None)
        return node

    def made(self, expression, node):
        self.on_step("expr", expression, node, None)
        return node

    def from_clause(self, node, ctes):
        result = super().from_clause(node, ctes)
        if result is not None:  # a SELECT without FROM has no clause to report
            self.on_step("from", node, result, None)
        return result
