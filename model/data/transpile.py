"""SQLite SQL (Spider's gold and the systems' predictions) written for another database's dialect.

sqlglot alone mistranslates one SQLite habit that Spider's SQL leans on: SQLite reads a
double-quoted ``"x"`` that names no column as the string ``'x'`` (``WHERE airline = "JetBlue
Airways"``), while sqlglot, which cannot know the database's columns, keeps it an identifier,
a column reference everywhere else. `from_sqlite` turns such names into string literals first,
with the schema's column names (and the query's own aliases) deciding what is a name, as SQLite
does, then lets sqlglot write the query in the target dialect. For PostgreSQL and DuckDB,
`sqlite_habits` also writes what they refuse as SQLite means it: a column neither grouped nor
aggregated (SQLite takes it from one row of the group) and, in PostgreSQL, a quoted name in
another case (SQLite ignores the case) and a subquery in FROM without an alias.

>>> from_sqlite('SELECT name FROM singer WHERE country = "France"', "postgres",
...             {"singer": ["name", "country"]})
"SELECT name FROM singer WHERE country = 'France'"
>>> from_sqlite('SELECT "Name" FROM singer LIMIT 3', "tsql", {"singer": ["name"]})
'SELECT TOP 3 [Name] FROM singer'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel

import rat

__all__ = ["column_names", "from_sqlite", "sqlite_habits", "sqlite_strings"]


def column_names(schema: rat.Schema | Mapping[str, Iterable[str]] | None) -> set[str] | None:
    """The lowercased column and table names of ``schema`` (None: unknown)."""
    if schema is None:
        return None
    tables = schema.tables if isinstance(schema, rat.Schema) else schema
    names = {str(t).lower() for t in tables}
    for columns in tables.values():
        names.update(str(c).lower() for c in columns)
    return names


def sqlite_strings(tree: exp.Expression, sql: str, names: set[str] | None) -> exp.Expression:
    """``tree`` (parsed from SQLite ``sql``) with each unqualified double-quoted column that names
    no column of the schema and no alias of the query made the string literal SQLite reads it as
    (``names``: lowercased names, see `column_names`; None: the schema is unknown, left as is)."""
    if names is None:
        return tree
    aliases = {a.alias.lower() for a in tree.find_all(exp.Alias)}
    for column in list(tree.find_all(exp.Column)):
        identifier = column.this
        if column.table or not isinstance(identifier, exp.Identifier) or not identifier.quoted:
            continue
        start = identifier.meta.get("start")
        if start is None or start >= len(sql) or sql[start] != '"':
            continue  # `x` and [x] are always names in SQLite
        name = identifier.this.lower()
        if name not in names and name not in aliases:
            column.replace(exp.Literal.string(identifier.this))
    return tree


def from_sqlite(sql: str, dialect: str,
                schema: rat.Schema | Mapping[str, Iterable[str]] | None = None) -> str:
    """``sql`` written for SQLite, as sqlglot writes it for ``dialect`` after `sqlite_strings`.

    Raises sqlglot's ParseError / UnsupportedError where it cannot read or write it, and
    ValueError where ``sql`` holds other than one statement."""
    trees = sqlglot.parse(sql, read="sqlite")
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise ValueError(f"{len(trees)} statements, not one")
    tree = sqlite_strings(trees[0], sql, column_names(schema))
    return sqlite_habits(tree, dialect).sql(dialect=dialect, unsupported_level=ErrorLevel.RAISE)


def sqlite_habits(tree: exp.Expression, dialect: str) -> exp.Expression:
    """``tree`` (SQLite's) with the SQLite habits ``dialect`` refuses written as it must write
    them to mean what SQLite reads: in PostgreSQL, where a quoted name keeps its case, every name lowercased (SQLite
    ignores case in ``"TV_Channel"`` and `` `Name` `` as in ``TV_Channel``, which PostgreSQL
    reads as ``tv_channel``), and a subquery in FROM or JOIN given the alias PostgreSQL 15 and
    older require. In both, which refuse a column neither grouped nor aggregated where SQLite
    takes it from one row of the group, that column as SQLite reads it (`_bare_columns`).
    Other dialects: ``tree`` as it is.

    >>> sqlite_habits(sqlglot.parse_one('SELECT "Name" FROM (SELECT * FROM `TV_Channel`)',
    ...                               read="sqlite"), "postgres").sql("postgres")
    'SELECT "name" FROM (SELECT * FROM "tv_channel") AS _from_1'
    """
    if dialect == "duckdb":
        return _bare_columns(tree, dialect)
    if dialect != "postgres":
        return tree
    for identifier in tree.find_all(exp.Identifier):
        identifier.set("this", identifier.this.lower())
    _bare_columns(tree, dialect)
    taken = {i.this for i in tree.find_all(exp.Identifier)}
    count = 0
    for subquery in list(tree.find_all(exp.Subquery)):
        if isinstance(subquery.parent, (exp.From, exp.Join)) and not subquery.alias:
            count += 1
            while f"_from_{count}" in taken:
                count += 1
            subquery.set("alias", exp.TableAlias(this=exp.to_identifier(f"_from_{count}")))
    return tree


def _select_of(node: exp.Expression) -> exp.Select | None:
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Select):
        parent = parent.parent
    return parent


def _bare_columns(tree: exp.Expression, dialect: str) -> exp.Expression:
    """``tree`` with each column that a grouped (or aggregating) SELECT names outside its
    aggregates and its GROUP BY written as SQLite reads it: from the row of the one ``max()`` or
    ``min()`` aggregate where the SELECT has exactly one (``arg_max``, ``arg_min``), else from
    any row of the group (``any_value``; in PostgreSQL, which has neither before 16, the first
    of ``array_agg``, ordered by the aggregated value for ``max()`` and ``min()``).

    >>> _bare_columns(sqlglot.parse_one("SELECT name, max(age) FROM singer GROUP BY country",
    ...                                 read="sqlite"), "duckdb").sql("duckdb")
    'SELECT ARG_MAX(name, age), MAX(age) FROM singer GROUP BY country'
    >>> _bare_columns(sqlglot.parse_one("SELECT name, min(age) FROM singer", read="sqlite"),
    ...               "postgres").sql("postgres")
    'SELECT (ARRAY_AGG(name ORDER BY age ASC))[1], MIN(age) FROM singer'
    >>> _bare_columns(sqlglot.parse_one("SELECT T1.name, count(*) FROM a AS T1 GROUP BY T1.id",
    ...                                 read="sqlite"), "duckdb").sql("duckdb")
    'SELECT ANY_VALUE(T1.name), COUNT(*) FROM a AS T1 GROUP BY T1.id'
    """
    for select in list(tree.find_all(exp.Select)):
        group = select.args.get("group")
        places = list(select.expressions) + [select.args[k] for k in ("having", "order")
                                             if select.args.get(k) is not None]
        aggregates = [a for place in places for a in place.find_all(exp.AggFunc)
                      if _select_of(a) is select]
        if group is None and not any(_select_of(a) is select for e in select.expressions
                                     for a in e.find_all(exp.AggFunc)):
            continue
        keys = group.expressions if group is not None else []
        grouped = {k.sql().lower() for k in keys}
        names = {k.name.lower(): bool(k.table) for k in keys if isinstance(k, exp.Column)}
        aliases = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}
        extreme = aggregates[0] if len(aggregates) == 1 and isinstance(
            aggregates[0], (exp.Max, exp.Min)) else None
        for place in places:
            for column in list(place.find_all(exp.Column)):
                if (_select_of(column) is not select or isinstance(column.this, exp.Star)
                        or column.sql().lower() in grouped
                        # a grouped name, one side of it unqualified (a.x by x, x by a.x)
                        or (column.name.lower() in names
                            and not (column.table and names[column.name.lower()]))
                        or (not column.table and column.name.lower() in aliases)
                        or any(isinstance(a, exp.AggFunc) for a in _ancestors(column, select))):
                    continue
                column.replace(_one_row(column.copy(), extreme, dialect))
    return tree


def _one_row(column: exp.Column, extreme: exp.Expression | None, dialect: str) -> exp.Expression:
    if dialect == "duckdb":
        if extreme is None:
            return exp.AnyValue(this=column)
        kind = exp.ArgMax if isinstance(extreme, exp.Max) else exp.ArgMin
        return kind(this=column, expression=extreme.this.copy())
    order = "" if extreme is None else (f" ORDER BY {extreme.this.sql(dialect)} "
                                        f"{'DESC' if isinstance(extreme, exp.Max) else 'ASC'}"
                                        " NULLS LAST")
    return sqlglot.parse_one(f"(ARRAY_AGG({column.sql(dialect)}{order}))[1]", read=dialect)


def _ancestors(node: exp.Expression, stop: exp.Expression):
    parent = node.parent
    while parent is not None and parent is not stop:
        yield parent
        parent = parent.parent
