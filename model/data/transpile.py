"""SQLite SQL (Spider's gold and the systems' predictions) written for another database's dialect.

sqlglot alone mistranslates one SQLite habit that Spider's SQL leans on: SQLite reads a
double-quoted ``"x"`` that names no column as the string ``'x'`` (``WHERE airline = "JetBlue
Airways"``), while sqlglot, which cannot know the database's columns, keeps it an identifier,
a column reference everywhere else. `from_sqlite` turns such names into string literals first,
with the schema's column names (and the query's own aliases) deciding what is a name, as SQLite
does, then lets sqlglot write the query in the target dialect. For PostgreSQL, DuckDB and MySQL,
`sqlite_habits` also writes what they refuse or read otherwise as SQLite means it: a subquery of
several rows compared with a value (SQLite takes its first row), with the schema's column types
what SQLite's type affinity makes of comparisons and sums (`sqlite_types`: ``horsepower > 150``
on a TEXT column compares text); in PostgreSQL and DuckDB a column neither grouped nor aggregated
(SQLite takes it from one row of the group); in PostgreSQL and MySQL a name in another case
(SQLite ignores the case; MySQL on Linux tells the case of table names and aliases apart) and a
subquery in FROM without an alias; in MySQL an integer divided by an integer (SQLite's quotient
is an integer), ``COLLATE NOCASE``, and a clear refusal of SQLite's functions MySQL has not
(``typeof()``, ``total()``, ``printf()``, ``julianday()``, ``GLOB``).

>>> from_sqlite('SELECT name FROM singer WHERE country = "France"', "postgres",
...             {"singer": ["name", "country"]})
"SELECT name FROM singer WHERE country = 'France'"
>>> from_sqlite('SELECT "Name" FROM singer LIMIT 3', "tsql", {"singer": ["name"]})
'SELECT TOP 3 [Name] FROM singer'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, UnsupportedError
from sqlglot.optimizer.scope import traverse_scope

import rat

__all__ = ["Spelling", "column_names", "from_sqlite", "sqlite_habits", "sqlite_strings", "sqlite_types"]

# SQLite's functions (and GLOB) that a dialect has not, which sqlglot writes there as they are
# (the database's error would name no SQLite habit): refused before the query is sent
_SQLITE_ONLY = frozenset({"glob", "typeof", "total", "printf", "julianday", "datetime", "unixepoch", "randomblob",
                          "zeroblob", "likelihood", "likely", "unlikely"})
_NOT_IN = {"mysql": _SQLITE_ONLY | {"format"},  # (MySQL's FORMAT(x, d) formats a number: SQLite's is printf)
           "postgres": _SQLITE_ONLY | {"hex", "quote", "time", "format"}}  # (PostgreSQL's format() has no %d)
# SQLite's date functions with a modifier (``date(d, '+1 day')``, ``strftime(f, d, 'start of month')``):
# no other dialect reads the modifiers
# where SQLite's date functions read their date (``strftime('%Y', 'now')``, ``date('now')``)
_DATE_OF = (exp.TimeToStr, exp.Date, exp.TsOrDsToTimestamp, exp.TsOrDsToDate, exp.TimeStrToTime, exp.StrToTime)
_MODIFIED = {"date": 1, "time": 1, "datetime": 1, "strftime": 2}  # name -> its arguments without one


@dataclass(frozen=True, eq=False)
class Spelling:
    """How a database that keeps the case of quoted names (PostgreSQL; MySQL's tables) spells the
    names SQLite's SQL, written for it in lower case, reads: ``tables``, lowercase table (another
    schema's: ``schema.table``) -> (its name, lowercase column -> its name); ``qualified``,
    lowercase ``schema.table`` -> (schema, table) for the tables of other schemas; ``elsewhere``,
    lowercase table -> the schema it is read from, off the search path. One for each database,
    compared and hashed as itself (a cache key that never reads its names)."""

    tables: Mapping[str, tuple[str, Mapping[str, str]]]
    qualified: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    elsewhere: Mapping[str, str] = field(default_factory=dict)


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
                schema: rat.Schema | Mapping[str, Iterable[str]] | None = None,
                habits: bool = True, table_names: Mapping[str, str] | Spelling | None = None) -> str:
    """``sql`` written for SQLite, as sqlglot writes it for ``dialect`` after `sqlite_strings`,
    then (``habits``) `sqlite_habits` to run there as SQLite runs it (``table_names``: see
    there); ``habits=False``: sqlglot's translation alone, the query a user of ``dialect`` would
    write.

    Raises sqlglot's ParseError / UnsupportedError where it cannot read or write it, and
    ValueError where ``sql`` holds other than one statement."""
    trees = sqlglot.parse(sql, read="sqlite")
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise ValueError(f"{len(trees)} statements, not one")
    tree = sqlite_strings(trees[0], sql, column_names(schema))
    if habits:
        tree = sqlite_habits(tree, dialect, schema, table_names)
    return tree.sql(dialect=dialect, unsupported_level=ErrorLevel.RAISE)


def sqlite_habits(tree: exp.Expression, dialect: str,
                  schema: rat.Schema | Mapping[str, Iterable[str]] | None = None,
                  table_names: Mapping[str, str] | Spelling | None = None) -> exp.Expression:
    """``tree`` (SQLite's) with the SQLite habits ``dialect`` refuses or reads otherwise written as
    it must write them to mean what SQLite reads. In PostgreSQL, DuckDB and MySQL: a subquery
    compared with a value as SQLite reads it, its first row (`_first_rows`), and, where
    ``schema`` (a `rat.Schema`) gives the columns' types, comparisons and sums as SQLite's type
    affinity makes them (`sqlite_types`). In PostgreSQL and DuckDB, which refuse a column neither
    grouped nor aggregated where SQLite takes it from one row of the group, that column as SQLite
    reads it (`_bare_columns`). In PostgreSQL and MySQL, where a quoted name (MySQL: a table's
    name or alias, on Linux) keeps its case, every name lowercased (SQLite ignores case in
    ``"TV_Channel"`` and `` `Name` `` as in ``TV_Channel``), a table that ``table_names``
    (lowercased name -> the database's; or a `Spelling`, which spells columns and other schemas'
    tables too: `_spelled`) spells otherwise written as the database spells it (a CTE in its
    scope or an alias of that name kept as it is), and
    a subquery in FROM or JOIN given the alias PostgreSQL 15 and older and MySQL require. In MySQL,
    SQLite's integer division, ``COLLATE NOCASE``, ``'now'`` and ``log()`` (`_mysql_functions`). In
    PostgreSQL and MySQL, a SQLite function the dialect has not refused (`_sqlite_only`).
    Other dialects: ``tree`` as it is.

    >>> sqlite_habits(sqlglot.parse_one('SELECT "Name" FROM (SELECT * FROM `TV_Channel`)',
    ...                               read="sqlite"), "postgres").sql("postgres")
    'SELECT "name" FROM (SELECT * FROM "tv_channel") AS _from_1'
    >>> sqlite_habits(sqlglot.parse_one("SELECT T1.Name FROM CARS AS T1 JOIN (SELECT id FROM Makers) "
    ...                                 "ON t1.Maker = id", read="sqlite"), "mysql",
    ...               table_names={"makers": "Makers"}).sql("mysql")
    'SELECT t1.name FROM cars AS t1 JOIN (SELECT id FROM `Makers`) AS _from_1 ON t1.maker = id'
    """
    if dialect not in ("postgres", "duckdb", "mysql"):
        return tree
    if dialect == "duckdb":
        if isinstance(schema, rat.Schema):
            sqlite_types(tree, dialect, schema)
        return _bare_columns(_first_rows(tree), dialect)
    for identifier in tree.find_all(exp.Identifier):
        if not (dialect == "mysql" and isinstance(identifier.parent, exp.Table)
                and identifier.arg_key in ("db", "catalog")):  # (MySQL's database: as written)
            identifier.set("this", identifier.this.lower())
    if table_names:
        _spelled(tree, table_names if isinstance(table_names, Spelling)
                 else Spelling({lower: (table, {}) for lower, table in table_names.items()}))
    if isinstance(schema, rat.Schema):  # (after the names: MySQL's is written as text, `_as_number`)
        sqlite_types(tree, dialect, schema)
    _first_rows(tree)
    if dialect == "postgres":
        _bare_columns(tree, dialect)
    taken = {i.this for i in tree.find_all(exp.Identifier)}
    count = 0
    for subquery in list(tree.find_all(exp.Subquery)):
        if isinstance(subquery.parent, (exp.From, exp.Join)) and not subquery.alias:
            count += 1
            while f"_from_{count}" in taken:
                count += 1
            subquery.set("alias", exp.TableAlias(this=exp.to_identifier(f"_from_{count}")))
    _sqlite_only(tree, dialect)
    if dialect == "mysql":
        _mysql_functions(tree, schema)
    return tree


def _spelled(tree: exp.Expression, spelling: Spelling) -> None:
    """``tree`` (its names lowercased) with each table, a column's qualifier that is a table's
    name, and each column as the database spells them (``spelling``): never a CTE where it is in
    scope, nor an alias (``WITH makers AS (..) .. FROM makers`` written ``FROM "Makers"`` read the
    table's rows); a table of another schema (``sales.orders``) as its schema and name are spelt,
    one read from a schema off the search path with that schema. A column is spelt as the tables
    the query reads that have it spell it (its qualifier's, where it has one), where they agree;
    not a name the query gives an output column (``ORDER BY total``).

    >>> spelling = Spelling({"customers": ("Customers", {"full name": "Full Name", "id": "id"}),
    ...                      "sales.orders": ("sales.Orders", {"total": "Total"})},
    ...                     {"sales.orders": ("sales", "Orders")})
    >>> tree = sqlglot.parse_one('SELECT c."full name", o.total FROM customers AS c JOIN sales.orders AS o '
    ...                          'ON c.id = o.id', read="postgres")
    >>> _spelled(tree, spelling); tree.sql("postgres")
    'SELECT c."Full Name", o."Total" FROM "Customers" AS c JOIN "sales"."Orders" AS o ON c.id = o.id'
    """
    aliases = {alias.name for alias in tree.find_all(exp.TableAlias)}
    outputs = {alias.alias for alias in tree.find_all(exp.Alias)}
    ctes = {id(table) for scope in traverse_scope(tree) for table in scope.tables
            if table.name in scope.cte_sources and not table.db}
    read: dict[str, set[str]] = {}  # a table's name or alias in the query -> the `spelling.tables` keys it reads
    for table in [t for t in tree.find_all(exp.Table) if id(t) not in ctes]:
        key = f"{table.db}.{table.name}" if table.db else table.name
        read.setdefault(table.name, set()).add(key)
        if table.alias:
            read.setdefault(table.alias, set()).add(key)
        if key in spelling.qualified:
            schema, name = spelling.qualified[key]
            table.set("db", exp.to_identifier(schema, quoted=True))
            table.set("this", exp.to_identifier(name, quoted=True))
        elif not table.db and key in spelling.tables:
            if spelling.tables[key][0] != key:
                table.set("this", exp.to_identifier(spelling.tables[key][0], quoted=True))
            if key in spelling.elsewhere:
                table.set("db", exp.to_identifier(spelling.elsewhere[key], quoted=True))
    everything = set().union(*read.values()) if read else set()
    for column in list(tree.find_all(exp.Column)):
        qualifier, db = column.table, column.args.get("db")
        if db is None and not qualifier and column.name in outputs:
            continue
        # (a qualifier that names no table read: a subquery's alias, whose columns are the tables')
        keys = {f"{db.name}.{qualifier}"} if db is not None else read.get(qualifier) or everything
        spelt = {spelling.tables[k][1][column.name] for k in keys
                 if k in spelling.tables and column.name in spelling.tables[k][1]}
        if len(spelt) == 1 and (name := spelt.pop()) != column.name:
            column.set("this", exp.to_identifier(name, quoted=True))
        if db is not None and f"{db.name}.{qualifier}" in spelling.qualified:
            schema, table = spelling.qualified[f"{db.name}.{qualifier}"]
            column.set("db", exp.to_identifier(schema, quoted=True))
            column.set("table", exp.to_identifier(table, quoted=True))
        elif db is None and qualifier in spelling.tables and qualifier not in aliases \
                and spelling.tables[qualifier][0] != qualifier:
            column.set("table", exp.to_identifier(spelling.tables[qualifier][0], quoted=True))


def _sqlite_only(tree: exp.Expression, dialect: str) -> None:
    """An UnsupportedError naming the first SQLite function (or GLOB) of ``tree`` that ``dialect``
    (PostgreSQL, MySQL) has not, or reads otherwise, rather than the database's error later
    (a query that runs in SQLite scored as one that fails): the functions of ``_NOT_IN``, and
    a date function with one of SQLite's modifiers.

    >>> _sqlite_only(sqlglot.parse_one("SELECT hex(name) FROM t", read="sqlite"), "postgres")
    Traceback (most recent call last):
    sqlglot.errors.UnsupportedError: hex() is not in postgres's SQL (SQLite's function)
    >>> _sqlite_only(sqlglot.parse_one("SELECT date(d, '+1 day') FROM t", read="sqlite"), "mysql")
    Traceback (most recent call last):
    sqlglot.errors.UnsupportedError: date() with a modifier ('+1 day') is not in mysql's SQL (SQLite's function)
    >>> _sqlite_only(sqlglot.parse_one("SELECT hex(name), date(d) FROM t", read="sqlite"), "mysql")
    """
    named = {exp.Glob: "GLOB", exp.Typeof: "typeof()", exp.Hex: "hex()", exp.Format: "format()"}
    for node in tree.find_all(*named, exp.Anonymous):
        name = named.get(type(node)) or f"{node.name.lower()}()"
        bare = name.lower().rstrip("()")
        if bare in _NOT_IN[dialect]:
            raise UnsupportedError(f"{name} is not in {dialect}'s SQL (SQLite's {'operator' if name == 'GLOB' else 'function'})")
        if isinstance(node, exp.Anonymous) and len(node.expressions) > _MODIFIED.get(bare, len(node.expressions)):
            modifier = node.expressions[_MODIFIED[bare]].sql("sqlite")[:40]
            raise UnsupportedError(f"{name} with a modifier ({modifier}) is not in {dialect}'s SQL (SQLite's function)")


def _mysql_functions(tree: exp.Expression, schema) -> exp.Expression:
    """``tree`` with what SQLite means by its functions and operators written as MySQL must:
    an integer divided by an integer (a literal, ``count()``, a column ``schema`` types an
    integer, and sums, ``min()``, ``max()`` and arithmetic of those) with ``DIV``, SQLite's
    integer quotient; ``x COLLATE NOCASE`` (MySQL has no such collation) as ``LOWER(x)``, the
    other side of its comparison too; SQLite's ``'now'`` of a date (``date('now')``, MySQL's
    NULL) as ``UTC_TIMESTAMP()`` (SQLite's is UTC), its base-10 ``log(x)`` as ``LOG10(x)``.

    >>> schema = rat.Schema({"t": ["a", "b"]}, column_types={"t.a": "bigint(20)", "t.b": "double"})
    >>> _mysql_functions(sqlglot.parse_one("SELECT count(*) / 2, a / 3, b / 2, a / (a * 2) FROM t "
    ...                                    "WHERE a = 'X' COLLATE NOCASE", read="sqlite"), schema).sql("mysql")
    "SELECT COUNT(*) DIV 2, a DIV 3, b / 2, a DIV (a * 2) FROM t WHERE LOWER(a) = LOWER('X')"
    >>> _mysql_functions(sqlglot.parse_one("SELECT strftime('%Y', 'now'), log(100)", read="sqlite"), schema).sql("mysql")
    "SELECT DATE_FORMAT(UTC_TIMESTAMP(), '%Y'), LOG10(100)"
    """
    for now in list(tree.find_all(exp.Literal)):  # SQLite's date 'now' (UTC): MySQL reads it as no date (NULL)
        if now.is_string and now.name.lower() == "now" and isinstance(now.parent, _DATE_OF):
            now.replace(exp.Anonymous(this="UTC_TIMESTAMP"))
    for log in list(tree.find_all(exp.Log)):  # SQLite's log(x) is base 10, MySQL's the natural logarithm
        if log.args.get("expression") is None:
            log.replace(exp.Anonymous(this="LOG10", expressions=[log.this.copy()]))
    tables = _tables_of(tree)
    for division in list(tree.find_all(exp.Div)):
        if _integral(division.this, tables, schema) and _integral(division.expression, tables, schema):
            division.replace(exp.IntDiv(this=division.this, expression=division.expression))
    for collate in list(tree.find_all(exp.Collate)):
        if collate.expression.name.lower() != "nocase":
            continue
        compared = collate.parent
        collate.replace(exp.Lower(this=collate.this))
        if isinstance(compared, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like)):
            for side in (compared.this, compared.expression):
                if not isinstance(side, exp.Lower):
                    side.replace(exp.Lower(this=side.copy()))
    return tree


_INTEGER_TYPE = re.compile(r"(?<![a-z])(?:tiny|small|medium|big)?int(?:eger)?\b")


def _integral(node: exp.Expression, tables: dict[str, set[str]], schema) -> bool:
    """Whether SQLite computes ``node`` as an integer, as far as the query and ``schema``'s
    declared types tell (a type Spider gives as "number" may be a float: not told)."""
    while isinstance(node, (exp.Paren, exp.Neg)):
        node = node.this
    if isinstance(node, exp.Literal):
        return not node.is_string and str(node.this).isdigit()
    if isinstance(node, exp.Count):
        return True
    if isinstance(node, (exp.Sum, exp.Max, exp.Min, exp.Abs)):
        return _integral(node.this, tables, schema)
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.IntDiv)):
        return _integral(node.this, tables, schema) and _integral(node.expression, tables, schema)
    if isinstance(node, exp.Column) and isinstance(schema, rat.Schema):
        declared = _declared_types(node, tables, schema)
        return bool(declared) and all(_INTEGER_TYPE.search(t.lower()) for t in declared)
    return False


def sqlite_types(tree: exp.Expression, dialect: str, schema: rat.Schema) -> exp.Expression:
    """``tree`` (SQLite's, written next for ``dialect``: postgres, duckdb or mysql) with what
    SQLite's type affinity makes of a comparison or a sum written as those must write it,
    the columns' types read from ``schema`` (Spider's words or declared types; a column whose
    type is not known is left as it is):

    - a TEXT column compared with an integer is compared as text (``horsepower > 150`` is
      ``horsepower > '150'``; PostgreSQL refuses text > integer);
    - a number or text column compared (``=``, ``<>``, ``IN``) with strings that are no
      number is compared as text: a number never equals such a string in SQLite
      (``continent = 'europe'`` is false, where PostgreSQL refuses 'europe' as a bigint);
    - two text columns compared (``=``, ``<>``) are compared as text (the copy may hold one's
      integers as integers); a number column equal to a text one as numbers, the text read as
      a number where it is one, else never equal (``T1.id = T2.code``);
    - in MySQL, whose collations ignore case (and trailing spaces), a text column compared with
      strings is compared as bytes, as SQLite's BINARY collation compares (``CAST(name AS
      BINARY) = 'France'`` finds no 'france');
    - ``avg()`` and ``sum()`` of a text or time column read each value as SQLite does: its
      leading number, else 0 (``'null'`` is 0, ``'2010-03-01'`` 2010; MySQL reads a text so itself).

    >>> schema = rat.Schema({"cars": ["hp", "country"]},
    ...                     column_types={"cars.hp": "text", "cars.country": "number"})
    >>> tree = sqlglot.parse_one("SELECT avg(hp) FROM cars WHERE hp > 150 AND country <> 'usa'",
    ...                          read="sqlite")
    >>> sqlite_types(tree, "duckdb", schema).sql("duckdb")  # doctest: +NORMALIZE_WHITESPACE
    "SELECT AVG(CASE WHEN hp IS NULL THEN NULL ELSE COALESCE(TRY_CAST(REGEXP_EXTRACT(CAST(hp AS
    TEXT), '^\\\\s*[-+]?(?:[0-9]+(?:\\\\.[0-9]*)?|\\\\.[0-9]+)(?:[eE][-+]?[0-9]+)?') AS DOUBLE), 0) END)
    FROM cars WHERE hp > '150' AND CAST(country AS TEXT) <> 'usa'"
    """
    tables = _tables_of(tree)

    def kind(node: exp.Expression) -> str | None:
        while isinstance(node, exp.Paren):
            node = node.this
        return _column_kind(node, tables, schema) if isinstance(node, exp.Column) else None

    for node in list(tree.find_all(exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE,
                                   exp.Between, exp.In)):
        if isinstance(node, (exp.EQ, exp.NEQ)) and kind(node.this) and kind(node.expression):
            _columns_compared(node, kind(node.this), kind(node.expression), dialect)
            continue
        column = node.this
        others = ([node.expression] if not isinstance(node, (exp.Between, exp.In)) else
                  [node.args["low"], node.args["high"]] if isinstance(node, exp.Between) else
                  list(node.expressions))
        if (not isinstance(node, (exp.Between, exp.In)) and kind(column) is None
                and kind(node.expression) is not None):
            column, others = node.expression, [node.this]
        found = kind(column)
        if found is None or not others:
            continue
        if found == "text" and all(_integer(o) is not None for o in others):
            for other in others:
                other.replace(exp.Literal.string(_integer(other)))
        elif dialect == "mysql" and found == "text" and all(isinstance(o, exp.Literal) and o.is_string
                                                            for o in others):
            column.replace(exp.cast(column.copy(), "BINARY"))
        elif (found in ("number", "text") and isinstance(node, (exp.EQ, exp.NEQ, exp.In))
              and all(isinstance(o, exp.Literal) and o.is_string and not _numeric(o.this)
                      for o in others)):
            column.replace(exp.cast(column.copy(), "TEXT"))
    for total in list(tree.find_all(exp.Avg, exp.Sum)) if dialect != "mysql" else ():
        # (MySQL reads a text as a number as SQLite's sum() does: its leading number, else 0)
        if kind(total.this) in ("text", "time"):
            total.this.replace(_leading_number(total.this.copy(), dialect))
    return tree


def _tables_of(tree: exp.Expression) -> dict[str, set[str]]:
    """Each table name and alias of ``tree`` (lowercased) -> the tables it names."""
    tables: dict[str, set[str]] = {}
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        tables.setdefault(name, set()).add(name)
        if table.alias:
            tables.setdefault(table.alias.lower(), set()).add(name)
    return tables


def _declared_types(column: exp.Column, tables: dict[str, set[str]], schema: rat.Schema) -> list[str]:
    """The types ``schema`` declares for ``column`` in each table it may be read from (in a query
    whose table names and aliases ``tables`` resolves)."""
    name = column.name.lower()
    if column.table:
        candidates = tables.get(column.table.lower(), set())
    else:
        candidates = {t for found in tables.values() for t in found
                      if name in (schema.columns(t) or ())}
    return [schema.column_types.get(f"{t}.{name}", "") for t in candidates]


def _column_kind(column: exp.Column, tables: dict[str, set[str]], schema: rat.Schema) -> str | None:
    """number, text or time: the type ``schema`` gives ``column`` (read in a query whose table
    names and aliases ``tables`` resolves), where all the tables it may be from agree; else None."""
    kinds = {_kind(t) for t in _declared_types(column, tables, schema)}
    return kinds.pop() if len(kinds) == 1 else None


def _kind(declared: str) -> str | None:
    """number, text or time for a type as Spider's tables.json or a database declares it;
    None for any other (boolean, uuid, json, interval, unknown)."""
    t = declared.lower()
    if t in ("number", "text"):
        return t
    if any(w in t for w in ("date", "time", "year")):
        return "time"
    if any(w in t for w in ("interval", "point", "bool")):
        return None
    if any(w in t for w in ("int", "real", "floa", "doub", "decimal", "numeric")):
        return "number"
    if any(w in t for w in ("char", "text", "clob", "string")):
        return "text"
    return None


# a number's text as SQLite reads it: LEADING, a text's leading number (sum(), avg()); NUMBER, a
# text that numeric affinity makes a number
_LEADING = r"^\s*[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
_NUMBER = re.compile(_LEADING[1:] + r"\s*")


def _numeric(text: str) -> bool:
    """Whether SQLite's numeric affinity makes ``text`` a number (or PostgreSQL's text of a
    float could spell it: NaN, Infinity)."""
    return bool(_NUMBER.fullmatch(text)) or text.strip().lstrip("+-").lower() in (
        "nan", "inf", "infinity")


def _integer(node: exp.Expression) -> str | None:
    """The text of an integer literal (``150``, ``-5``) as SQLite makes it text; else None."""
    sign = ""
    if isinstance(node, exp.Neg):
        sign, node = "-", node.this
    if isinstance(node, exp.Literal) and not node.is_string and str(node.this).isdigit():
        return sign + str(int(node.this))
    return None


def _columns_compared(node: exp.Expression, left: str, right: str, dialect: str) -> None:
    """``node`` (``a = b``, ``a <> b``: two columns of kinds ``left`` and ``right``) compared as
    SQLite compares them: two text columns as text; a number column equal to a text one as
    numbers (a text that is no number gives NULL, where SQLite gives false: the same rows in
    WHERE and ON, and still an equality a hash join can run)."""
    sides = [node.this, node.expression]
    if (left, right) == ("text", "text"):
        for side in sides:
            side.replace(exp.cast(side.copy(), "TEXT"))
    elif {left, right} == {"number", "text"} and isinstance(node, exp.EQ):
        side = sides[[left, right].index("text")]
        side.replace(_as_number(side.copy(), dialect))


def _as_number(column: exp.Expression, dialect: str) -> exp.Expression:
    """``column`` (text) as SQLite's numeric affinity reads it beside a number: the number its
    text is, else NULL (SQLite keeps it text, never equal to a number)."""
    text = exp.cast(column.copy(), "TEXT").sql(dialect)
    whole = f"'^{_NUMBER.pattern}$'"
    if dialect == "mysql":  # REGEXP as text: sqlglot writes REGEXP_LIKE(), which MariaDB has not
        whole = exp.Literal.string(f"^{_NUMBER.pattern}$").sql("mysql")  # (backslashes escaped)
        return exp.Case(ifs=[exp.If(this=exp.Var(this=f"{text} REGEXP {whole}"),
                                    true=exp.cast(exp.Var(this=text), "DOUBLE"))])
    number = (f"CASE WHEN REGEXP_FULL_MATCH({text}, {whole}) THEN CAST(TRIM({text}) AS DOUBLE) END"
              if dialect == "duckdb" else
              f"CASE WHEN {text} ~ {whole} THEN CAST({text} AS DOUBLE PRECISION) END")
    return sqlglot.parse_one(number, read=dialect)


def _leading_number(column: exp.Column, dialect: str) -> exp.Expression:
    """``column`` as SQLite's sum() and avg() read a text: its leading number, else 0."""
    text = exp.cast(column.copy(), "TEXT").sql(dialect)
    pattern = f"'{_LEADING}'"
    found = (f"TRY_CAST(REGEXP_EXTRACT({text}, {pattern}) AS DOUBLE)" if dialect == "duckdb" else
             f"CAST(SUBSTRING({text} FROM {pattern}) AS DOUBLE PRECISION)")
    return sqlglot.parse_one(f"CASE WHEN {column.sql(dialect)} IS NULL THEN NULL "
                             f"ELSE COALESCE({found}, 0) END", read=dialect)


def _first_rows(tree: exp.Expression) -> exp.Expression:
    """``tree`` with ``LIMIT 1`` on each subquery compared with a value that has no LIMIT: SQLite
    compares the value with the subquery's first row, where PostgreSQL and DuckDB refuse a
    subquery of more than one row.

    >>> _first_rows(sqlglot.parse_one("SELECT a FROM t WHERE b = (SELECT b FROM u ORDER BY c) "
    ...                               "AND b IN (SELECT b FROM u)", read="sqlite")).sql()
    'SELECT a FROM t WHERE b = (SELECT b FROM u ORDER BY c LIMIT 1) AND b IN (SELECT b FROM u)'
    """
    for subquery in list(tree.find_all(exp.Subquery)):
        if (isinstance(subquery.parent, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE))
                and isinstance(subquery.this, exp.Select) and not subquery.this.args.get("limit")):
            subquery.this.limit(1, copy=False)
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
