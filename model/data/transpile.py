"""SQLite SQL (Spider's gold and the systems' predictions) written for another database's dialect.

sqlglot alone mistranslates one SQLite habit that Spider's SQL leans on: SQLite reads a
double-quoted ``"x"`` that names no column as the string ``'x'`` (``WHERE airline = "JetBlue
Airways"``), while sqlglot, which cannot know the database's columns, keeps it an identifier,
a column reference everywhere else. `from_sqlite` turns such names into string literals first,
with the schema's column names (and the query's own aliases) deciding what is a name, as SQLite
does, then lets sqlglot write the query in the target dialect.

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

__all__ = ["column_names", "from_sqlite", "sqlite_strings"]


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
    return tree.sql(dialect=dialect, unsupported_level=ErrorLevel.RAISE)
