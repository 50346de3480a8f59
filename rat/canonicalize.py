"""Parse SQLite SQL with sqlglot and canonicalise it: lowercased identifiers, table aliases
resolved to table names, columns qualified, column aliases dropped, string quotes normalised.

This is a light, scope-by-scope pass written for speed: sqlglot's optimizer (`qualify`) would
do more, but costs several times the parse itself.

Spellings that always mean the same are written one way, so that they get one tree and hash:

- ``count(1)``, ``count('x')``, any ``count(<non-NULL constant>)`` is ``count(*)``: both count
  the rows (``count(NULL)`` is 0 and ``count(DISTINCT 1)`` is 1, so those stay).
- ``x BETWEEN a AND b`` is ``x >= a AND x <= b``, and ``x NOT BETWEEN a AND b`` is
  ``x < a OR x > b``: SQLite defines BETWEEN so, NULLs included. The conjuncts join the
  surrounding AND, and a wrong bound marks only its own comparison incorrect. Kept where ``x``
  calls a function known to draw or count (``random()``, ``nextval('s')``: `_DRAWING_NAMES`),
  which the spelled form would call twice.
- ``CASE x WHEN 1 THEN a END`` is ``CASE WHEN x = 1 THEN a END``: SQL defines the simple CASE so
  (``CASE x WHEN NULL`` never matches, as ``x = NULL`` never holds); kept where ``x`` calls a
  function that may give another value each call (``random()``, ``randomblob(1)``,
  ``nextval('s')``, any function sqlglot does not know), which the searched form would call once a WHEN.
- ``lag(x)`` and ``lag(x, 1, NULL)`` are ``lag(x, 1)`` (``lead`` too): the defaults written out.
- ``GROUP BY 1`` and ``ORDER BY 2`` name the first and second output columns of their SELECT
  (SQLite, PostgreSQL, MySQL, DuckDB, Snowflake and BigQuery read them so), and are written as
  those columns: ``GROUP BY 1`` and ``GROUP BY name`` get one tree. An ordinal past the last
  output or after a ``*``, and T-SQL's ``GROUP BY 1`` (a constant there), stay numbers.
- A table defined by ``WITH t AS (..)`` is read like the same subquery written in FROM: its
  columns are qualified ``derived.c`` (``derived_2.c``, ... for the next ones in the same FROM),
  as those of a subquery are. The tree builder already puts the CTE's query where it is read.
  ``WITH RECURSIVE t AS (base UNION [ALL] step)`` reads ``t`` in its step the same way. A ``*``
  in such a query stands for the columns of what it reads (by the schema; unknown where one's
  are): ``WITH s AS (SELECT * FROM t) SELECT a FROM s`` reads ``derived.a``, as ``s.a`` does.
- In a dialect other than SQLite, a function's documented synonym is its name, and so is
  another dialect's name of the same function (Snowflake's ``TIMESTAMPDIFF`` is ``DATEDIFF``,
  DuckDB's ``countif`` ``count_if``, Snowflake's ``BOOLOR_AGG`` ``bool_or``), ``ZEROIFNULL(x)`` is
  ``COALESCE(x, 0)``, ``REGEXP_LIKE(a, p)`` ``a REGEXP p``, ``YEAR(d)``, ``MONTH(d)``, .. and SQL
  Server's ``DATEPART(year, d)`` are ``EXTRACT(year FROM d)``, and named arguments (``input =>
  x``) come in the order of their names.
"""

import functools
import logging
import re
import threading
from collections.abc import Mapping

import sqlglot.errors
from sqlglot import expressions as exp
from sqlglot.dialects.sqlite import SQLite
from sqlglot.time import format_time
from sqlglot.tokens import TokenType
from sqlglot.trie import new_trie

from rat.dialects import SQLITE, Dialect
from rat.dialects import dialect as _dialect
from rat.errors import (
    DepthError,
    InternalError,
    ParseError,
    RATError,
    internal_errors,
    with_deep_stack,
)
from rat.kinds import DATE_PART_FIRST, DATE_PART_LAST
from rat.schema import Schema

_KEPT_FUNCTIONS = {"COUNT", "SUM", "AVG", "MIN", "MAX", "CAST", "GROUP_CONCAT"}
DIALECT = SQLite()
# SQLite as written: only aggregates and CAST become typed sqlglot nodes; every other function
# stays `Anonymous` with its own name and arguments (sqlglot would otherwise rewrite e.g.
# `strftime` into `TimeToStr(TsOrDsToTimestamp(..))`). The compiled sqlglot (sqlglotc) refuses
# a subclass of its Parser with a smaller FUNCTIONS table, so the tokens are renamed instead:
# a name the parser would type is read with _RENAMED in front, which it knows no builder for,
# and the prefix is taken off the Anonymous node it makes.
_RENAMED = "\ue003"  # a private-use code point: never in SQL
_TYPED_FUNCTIONS = frozenset(
    name for name in (*DIALECT.parser_class.FUNCTIONS, *DIALECT.parser_class.FUNCTION_PARSERS)
    if name not in _KEPT_FUNCTIONS and name not in DIALECT.parser_class.NO_PAREN_FUNCTION_PARSERS
)
_TYPE_TOKENS = frozenset(DIALECT.parser_class.TYPE_TOKENS)
_L_PAREN, _R_PAREN, _DOT = TokenType.L_PAREN, TokenType.R_PAREN, TokenType.DOT
_L_BRACKET, _R_BRACKET = TokenType.L_BRACKET, TokenType.R_BRACKET
_OPENING = frozenset({_L_PAREN, _L_BRACKET})
# What comes before a `*` that is a select item (not a multiplication): `SELECT *`, `, *`, `t.*`
_BEFORE_STAR_ITEM = frozenset({TokenType.SELECT, TokenType.COMMA, _DOT, TokenType.DISTINCT, TokenType.ALL})
_JSON_ARROWS = frozenset({TokenType.ARROW, TokenType.DARROW, TokenType.HASH_ARROW, TokenType.DHASH_ARROW})
# Pure-Python sqlglot parses about 950 nested parentheses within rat's deep-stack retry.
MAX_PARENTHESES = 800
# sqlglot's parser tries a call of a type's name (`date(`, `struct(`, PostgreSQL's `ARRAY[`) as a
# type first: its time doubles with each such call nested in another (22 deep, 147 characters:
# 23 s; 30 deep: hours), and each subscript `a[1][1]..` costs more than the last. Far above any
# real query's.
MAX_TYPE_CALLS = 6
MAX_BRACKETS = 100
# Type names sqlglot reads as TEXT, BIGINT, SMALLINT or BLOB that SQLite gives the NUMERIC affinity
_NUMERIC_TYPE_NAMES = frozenset({"STRING", "STR", "LONG", "SHORT", "BYTE", "BYTEA", "BINARY", "VARBINARY"})
_NUMERIC_TYPE_WORDS = re.compile(r"\b(?:" + "|".join(_NUMERIC_TYPE_NAMES) + r")\b", re.IGNORECASE)
_SIMPLE_NAME = re.compile(r"[a-z_][a-z0-9_]*\Z")
_RESERVED = {k.lower() for k in DIALECT.tokenizer_class.KEYWORDS if k.replace("_", "").isalpha()}
# The words a dialect's database refuses as an unquoted name (its reserved words), beside sqlglot's
# keywords (`_RESERVED`, quoted in every dialect) and those its generator quotes (MySQL's, DuckDB's,
# BigQuery's, Trino's, Redshift's RESERVED_KEYWORDS): canonical SQL quotes them. SQLite's: those its
# 3.40 refuses as a table's or column's name; PostgreSQL's: its documentation's "reserved" (and
# "reserved, can be function or type") key words; SQL Server's, Snowflake's: their documented
# reserved keywords; Databricks': Spark's ANSI reserved keywords.
_RESERVED_WORDS = {name: frozenset(words.split()) for name, words in {
    "sqlite": """add all alter and as autoincrement between case cast check collate commit constraint create
        current_date current_time current_timestamp default deferrable delete distinct drop else escape except
        exists foreign from group having in index insert intersect into is isnull join limit not nothing notnull
        null on or order primary raise references returning select set table then to transaction union unique
        update using values when where""",
    "postgres": """all analyse analyze and any array as asc asymmetric both case cast check collate column
        constraint create current_catalog current_date current_role current_time current_timestamp current_user
        default deferrable desc distinct do else end except false fetch for foreign from grant group having in
        initially intersect into lateral leading limit localtime localtimestamp not null offset on only or order
        placing primary references returning select session_user some symmetric system_user table then to
        trailing true union unique user using variadic when where window with authorization binary collation
        concurrently cross current_schema freeze full ilike inner is isnull join left like natural notnull outer
        overlaps right similar tablesample verbose""",
    "tsql": """add all alter and any as asc authorization backup begin between break browse bulk by cascade
        case check checkpoint close clustered coalesce collate column commit compute constraint contains
        containstable continue convert create cross current current_date current_time current_timestamp
        current_user cursor database dbcc deallocate declare default delete deny desc disk distinct distributed
        double drop dump else end errlvl escape except exec execute exists exit external fetch file fillfactor
        for foreign freetext freetexttable from full function goto grant group having holdlock identity
        identity_insert identitycol if in index inner insert intersect into is join key kill left like lineno
        load merge national nocheck nonclustered not null nullif of off offsets on open opendatasource openquery
        openrowset openxml option or order outer over percent pivot plan precision primary print proc procedure
        public raiserror read readtext reconfigure references replication restore restrict return revert revoke
        right rollback rowcount rowguidcol rule save schema securityaudit select semantickeyphrasetable
        semanticsimilaritydetailstable semanticsimilaritytable session_user set setuser shutdown some statistics
        system_user table tablesample textsize then to top tran transaction trigger truncate try_convert tsequal
        union unique unpivot update updatetext use user values varying view waitfor when where while with within
        writetext""",
    "snowflake": """all alter and any as between by case cast check column connect constraint create cross
        current current_date current_time current_timestamp current_user delete distinct drop else exists false
        following for from full grant group gscluster having ilike in increment inner insert intersect into is
        issue join lateral left like localtime localtimestamp minus natural not null of on or order qualify
        regexp revoke right rlike row rows sample select set some start table tablesample then to trigger true
        try_cast union unique update using values when whenever where with""",
    "databricks": """all alter and anti any as authorization both by case cast check collate column constraint
        create cross cube current current_date current_time current_timestamp current_user distinct drop else
        end escape except exists false fetch filter for foreign from full grant group grouping having in inner
        intersect into is join lateral leading left like minus natural not null of on only or order outer
        overlaps primary references right rollup select semi session_user some table then time to trailing
        union unique unknown user using when where with""",
}.items()}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# sqlglot's reprs of a token and of an expression class in its messages, as the text they stand for
_TOKEN_REPR = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: \d+, col: \d+, start: \d+, "
                         r"end: \d+, comments: \[.*?\]>")
_CLASS_REPR = re.compile(r"<class 'sqlglot\.[\w.]*?(\w+)'>")


def _bare_order_key(column: exp.Column) -> bool:
    """Whether `column` is an ORDER BY key (or a DISTINCT ON key) by itself, not inside an
    expression."""
    parent = column.parent
    if type(parent) is exp.Tuple:
        parent = parent.parent
    return type(parent) is exp.Ordered or type(parent) is exp.Distinct


def _plain(message: str) -> str:
    """sqlglot's parse error in words, on one line: a token as its text, an expression class as its name.

    >>> _plain("Expected table name but got <Token token_type: TokenType.SENTINEL, text: SENTINEL, line: 1, "
    ...        "col: 1, start: 0, end: 0, comments: []>")
    'Expected table name but got the end'
    >>> _plain("Required keyword: 'this' missing for <class 'sqlglot.expressions.core.LT'>")
    "Required keyword: 'this' missing for LT"
    """
    message = _TOKEN_REPR.sub(lambda m: "the end" if m.group(1) == "SENTINEL" else repr(m.group(2)), message)
    return " ".join(_CLASS_REPR.sub(lambda m: m.group(1), message).split())
_QUERY = (exp.Select, exp.SetOperation, exp.Subquery)
# far above any query of Spider or BIRD (BIRD dev's longest gold SQL has 1,446 characters);
# parsing 1 MB of SQL takes seconds and hundreds of MB
MAX_SQL_CHARS = 100_000
# Nodes of a tree (rat.tree refuses a larger one); here, the most nodes that copies of BETWEEN
# and simple CASE operands may make together (`_Copies`)
MAX_NODES = 100_000
_UNSUPPORTED_CLAUSES = ("laterals", "pivots", "connect", "qualify", "into", "sample", "match", "distribute",
                        "sort", "cluster", "for_")
_UNSUPPORTED_CLAUSE_SET = frozenset(_UNSUPPORTED_CLAUSES)
# how a refused clause is named, where its key is not its SQL
_CLAUSE_NAMES = {"match": "MATCH_RECOGNIZE", "distribute": "DISTRIBUTE BY", "sort": "SORT BY",
                 "cluster": "CLUSTER BY", "for_": "FOR XML / FOR JSON"}
# Functions other dialects parse with a syntax of their own (`EXTRACT(YEAR FROM d)`,
# `CONVERT(INT, x)`): left to sqlglot, which types them.
# SUBSTRING (`SUBSTRING(x FROM 1 FOR 3)` in PostgreSQL) is read back as substr(x, 1, 3),
# POSITION(a IN b) as instr(b, a); `TRIM(LEADING 'x' FROM s)` is built as ltrim(s, 'x') (rat.tree;
# Snowflake's and BigQuery's sqlglot read no FROM there, as their databases).
_SPECIAL_SYNTAX = frozenset({"EXTRACT", "TRY_CAST", "SAFE_CAST", "CONVERT", "TRY_CONVERT",
                             "SUBSTRING", "POSITION", "MATCH", "TRIM"})  # (MySQL's MATCH (a) AGAINST ('x'))
# ... and those only some dialects have: `overlay(s PLACING x FROM 2 FOR 3)`
_SPECIAL_SYNTAX_OF = {"OVERLAY": frozenset({"postgres", "databricks"})}
# Function names that are one function in every dialect rat reads: the canonical name.
_SAME_FUNCTIONS = {"substring": "substr", "ceiling": "ceil", "pow": "power"}
# SQLite's functions under other dialects' names (where the dialect has the function): SQLite's
# name and the order of its arguments; strftime(format, date), with SQLite's format codes, below.
# (None: every argument, in order: greatest(a, b, c) is SQLite's max(a, b, c))
_EXTREMES = {"greatest": ("max", None), "least": ("min", None)}
_STANDARD_CALLS = {"char_length": ("length", (0,)), "character_length": ("length", (0,)), **_EXTREMES}
_CASE_CALLS = {"lcase": ("lower", (0,)), "ucase": ("upper", (0,))}
_SQLITE_CALLS = {
    "postgres": {"strpos": ("instr", (0, 1)), **_STANDARD_CALLS},
    "duckdb": {"strpos": ("instr", (0, 1)), **_STANDARD_CALLS, **_CASE_CALLS},
    "bigquery": {"strpos": ("instr", (0, 1)), **_STANDARD_CALLS},
    "mysql": {"locate": ("instr", (1, 0)), "mid": ("substr", None), **_STANDARD_CALLS,
              **_CASE_CALLS},  # (MySQL's length counts bytes)
    "snowflake": {"charindex": ("instr", (1, 0)), **_EXTREMES},
    "tsql": {"charindex": ("instr", (1, 0)), "len": ("length", (0,)), **_EXTREMES},
    "databricks": {"locate": ("instr", (1, 0)), **_STANDARD_CALLS, **_CASE_CALLS},  # (its instr is SQLite's)
    "trino": {"strpos": ("instr", (0, 1)), **_EXTREMES},
    "redshift": {"strpos": ("instr", (0, 1)), "charindex": ("instr", (1, 0)), "len": ("length", (0,)),
                 **_STANDARD_CALLS},
}
# A dialect's other names of one of its functions (documented as its synonyms), and the names
# under which other dialects have the same function, for a call of so many arguments: the name rat
# writes. (BigQuery's COUNTIF is the others' COUNT_IF; MySQL's two-argument DATEDIFF, days between
# dates, is no TIMESTAMPDIFF.) The boolean aggregates are bool_or / bool_and (Snowflake's
# BOOLOR_AGG, BigQuery's LOGICAL_OR, the standard's EVERY, Databricks' SOME; its ANY(x) too:
# `Canonicalizer.expression`); an array's number of elements, 0 for an empty array, is
# cardinality (Snowflake's ARRAY_SIZE, BigQuery's ARRAY_LENGTH, DuckDB's array_length of a list;
# Databricks' size, which gives -1 for NULL outside ANSI mode as its cardinality does, but not its
# array_size, NULL there; nor PostgreSQL's array_length(a, 1), NULL for an empty array).
_EVERY = {"every": ("bool_and", 1)}
_SYNONYMS = {
    "snowflake": {"timestampdiff": ("datediff", 3), "timediff": ("datediff", 3),
                  "timestampadd": ("dateadd", 3), "timeadd": ("dateadd", 3),
                  "boolor_agg": ("bool_or", 1), "booland_agg": ("bool_and", 1), "array_size": ("cardinality", 1)},
    "databricks": {"timestampdiff": ("datediff", 3), "timestampadd": ("dateadd", 3), **_EVERY,
                   "some": ("bool_or", 1), "size": ("cardinality", 1)},
    "duckdb": {"countif": ("count_if", 1), "array_length": ("cardinality", 1), "datepart": ("date_part", 2)},
    "bigquery": {"countif": ("count_if", 1), "logical_or": ("bool_or", 1), "logical_and": ("bool_and", 1),
                 "array_length": ("cardinality", 1)},
    "postgres": _EVERY,
    "trino": _EVERY,
}
# Calls that are another function's with a 0 after the argument: ZEROIFNULL(x) is COALESCE(x,
# 0), NULLIFZERO(x) NULLIF(x, 0) (Snowflake; Databricks 16)
_ZERO_CALLS = {"zeroifnull": "coalesce", "nullifzero": "nullif"}
_ZERO_CALLS_OF = {"snowflake": _ZERO_CALLS, "databricks": _ZERO_CALLS}
# Functions that are `a REGEXP p` (sqlglot's RegexpLike; PostgreSQL's `a ~ p`, Databricks' `a RLIKE
# p`) called with two arguments: REGEXP_LIKE(a, p) (MySQL: "REGEXP and RLIKE are synonyms for
# REGEXP_LIKE()"; Snowflake, where RLIKE(a, p) too, anchored at both ends as its REGEXP is)
_REGEXP_CALLS = {"mysql": frozenset({"regexp_like"}), "snowflake": frozenset({"regexp_like", "rlike"}),
                 "databricks": frozenset({"regexp_like"}), "postgres": frozenset({"regexp_like"})}
# Functions that are EXTRACT(part FROM d) in a dialect, named by the part: YEAR(d), MONTH(d), ..
# (not SECOND(d): Databricks' EXTRACT(SECOND ..) keeps the fraction; nor WEEK(d), DAYOFWEEK(d):
# modes and week starts of their own); and the parts of SQL Server's DATEPART(part, d) that are
# EXTRACT's (its week and weekday follow the session's DATEFIRST, its second is whole)
_EXTRACT_PARTS = frozenset({"year", "quarter", "month", "day", "hour", "minute"})
_EXTRACTS = {"snowflake": _EXTRACT_PARTS, "duckdb": _EXTRACT_PARTS, "databricks": _EXTRACT_PARTS,
             "trino": _EXTRACT_PARTS, "mysql": frozenset({"year", "quarter", "month", "day"}),
             "tsql": frozenset({"year", "month", "day"})}
_DATEPART_EXTRACTS = {"tsql": _EXTRACT_PARTS}
# Dialects whose EXTRACT(part FROM d) takes the parts' abbreviations (`_DATE_PART_ABBREVIATIONS`)
_EXTRACT_ABBREVIATIONS = frozenset({"snowflake", "redshift"})
_STRFTIME = {"postgres": {"to_char": (1, 0)}, "snowflake": {"to_char": (1, 0), "to_varchar": (1, 0)},
             "mysql": {"date_format": (1, 0)}, "duckdb": {"strftime": (1, 0)},
             "bigquery": {"format_date": (0, 1), "format_timestamp": (0, 1), "format_datetime": (0, 1)},
             "tsql": {"format": (1, 0)}, "databricks": {"date_format": (1, 0)}, "trino": {"date_format": (1, 0)},
             "redshift": {"to_char": (1, 0)}}
# (SQLite's codes that mean the same in the others; its %f and %s do not)
_SQLITE_FORMAT_CODES = re.compile(r"%[dHjmMSwWY%]")
# sqlglot's names of constructs rat refuses, as the SQL writes them (others keep sqlglot's name).
_CONSTRUCTS = {"SafeFunc": "SAFE.", "TableFromRows": "TABLE(..)",
               "Table": "parenthesised join",  # (with an alias or a PIVOT: `parenthesised_join`)
               "Var": "a bare word", "Lambda": "a lambda (x -> ..)",
               "Dot": "a field of a struct value",  # PostgreSQL's `(c).f` (Dialect.struct_fields)
               "Bracket": "an array subscript of several indexes", "Slice": "an array slice",
               # literals and niladic keywords
               "UnicodeString": "U&'..'", "BitString": "b'..' (bits)",
               "HexString": "x'..' / 0x..", "National": "N'..'", "RawString": "r'..'", "ParseJSON": "JSON '..'",
               "Localtime": "LOCALTIME", "Localtimestamp": "LOCALTIMESTAMP", "CurrentSchema": "CURRENT_SCHEMA",
               "CurrentCatalog": "CURRENT_CATALOG", "CurrentRole": "CURRENT_ROLE", "CurrentUser": "CURRENT_USER",
               "SessionUser": "SESSION_USER", "CurrentDatetime": "CURRENT_DATETIME",
               # operators and other syntax
               "SessionParameter": "@@variable", "PropertyEQ": "':=' (an assignment)", "Distance": "<->",
               "Struct": "a struct value", "ToMap": "MAP {..}", "VarMap": "MAP(..)",
               "PositionalColumn": "#n (a column by its position)", "Unnest": "UNNEST(..)",
               "Pivot": "PIVOT", "Lateral": "LATERAL", "Values": "VALUES", "Tuple": "a row value (a, b)"}
# The unquoted words that are the current user's name, a function, per dialect: word -> the
# function (elsewhere each is a name). SQL's USER is CURRENT_USER, SESSION_USER the session's user
# (another after SET ROLE / EXECUTE AS): PostgreSQL, Redshift, SQL Server. MySQL, Snowflake, Trino
# have CURRENT_USER alone (MySQL's USER() and SESSION_USER() are calls). DuckDB's and Databricks'
# three are one function (documented aliases), read after a column of the name (`_USER_NAMES_FIRST`).
_SQL_USERS = {"user": exp.CurrentUser, "current_user": exp.CurrentUser, "session_user": exp.SessionUser}
_ALIASED_USERS = dict.fromkeys(("user", "current_user", "session_user"), exp.CurrentUser)
_CURRENT_USER = {"current_user": exp.CurrentUser}
_USER_FUNCTIONS = {"postgres": _SQL_USERS, "redshift": _SQL_USERS, "tsql": _SQL_USERS, "mysql": _CURRENT_USER,
                   "snowflake": _CURRENT_USER, "trino": _CURRENT_USER, "duckdb": _ALIASED_USERS,
                   "databricks": _ALIASED_USERS}
_USER_NAMES_FIRST = frozenset({"duckdb", "databricks"})
# Dialects whose GROUP BY takes a set quantifier, `GROUP BY ALL | DISTINCT <keys>` (elsewhere refused:
# SQL Server's GROUP BY ALL <keys> keeps the groups its WHERE removes)
_GROUP_BY_QUANTIFIER = frozenset({"postgres", "trino"})
_GROUPING_SETS = (exp.Rollup, exp.Cube, exp.GroupingSets)
# Dialects where `s['f']` and `struct_extract(s, 'f')` read a struct's field `s.f`
_KEYED_FIELDS = frozenset({"duckdb"})
# Dialects with string_agg(x, sep), SQLite's group_concat(x, sep) (MySQL's group_concat(x, y)
# joins x and y, then the rows with commas)
_STRING_AGG = frozenset({"sqlite", "postgres", "duckdb", "tsql", "bigquery"})
# Dialects where `->` is a lambda's arrow, and no JSON operator
_LAMBDA_ARROWS = frozenset({"databricks", "trino"})
# Functions read in FROM, and the columns of their rows where the query does not name them:
# () for one column, named by the function (or, in PostgreSQL, by the alias).
_TABLE_FUNCTION_COLUMNS = {
    **dict.fromkeys(("generate_series", "unnest", "range", "generate_subscripts", "regexp_split_to_table",
                     "string_to_table", "json_array_elements", "json_array_elements_text",
                     "jsonb_array_elements", "jsonb_array_elements_text"), ()),
    **dict.fromkeys(("json_each", "json_tree", "jsonb_each", "json_each_text", "jsonb_each_text"),
                    ("key", "value", "type", "atom", "id", "parent", "fullkey", "path")),
    "flatten": ("seq", "key", "path", "index", "value", "this"),  # Snowflake
}


def no_result_columns(sql: str, rat_dialect: Dialect) -> RATError:
    """The error of a SELECT without result columns (`SELECT`, `SELECT FROM t`): SQL that does not
    parse, but in PostgreSQL, which reads it (rows of no columns), where it is a construct rat
    does not read."""
    if rat_dialect.name == "postgres":
        return RATError("unsupported construct 'SELECT without result columns'", sql)
    return ParseError("cannot parse (SELECT without result columns)", sql)


def construct_name(node: exp.Expression) -> str:
    """How a message names the construct `node` (an expression rat does not read)."""
    if type(node) is exp.Bracket and node.args.get("safe"):  # (`items[0]`, `items[OFFSET(0)]` are read)
        return "SAFE_OFFSET / SAFE_ORDINAL"
    if type(node) is exp.ByteString:  # BigQuery's bytes, PostgreSQL's (Redshift's) escape string
        return "b'..' (bytes)" if node.args.get("is_bytes") else "E'..'"
    return _CONSTRUCTS.get(type(node).__name__, type(node).__name__)


# Date part names a date function takes unquoted (rat.kinds.DATE_PART_FIRST / _LAST say where).
# date_part(year, d)'s only where the database reads the bare word as the part (elsewhere a column).
BARE_DATE_PART = frozenset({"snowflake", "redshift"})
_DATE_PARTS = frozenset({
    "year", "yy", "yyyy", "quarter", "qq", "month", "mm", "week", "wk", "ww", "isoweek", "isowk",
    "day", "dd", "dayofyear", "dy", "dayofweek", "dw", "weekday", "hour", "hh", "minute", "mi",
    "second", "ss", "millisecond", "ms", "microsecond", "mcs", "nanosecond", "ns", "weekiso", "dayofweekiso"})
# A dialect's documented abbreviations of the date part its date functions take first, and the
# part each names (SQL Server: DATEADD's table; Snowflake: "Supported date and time parts";
# Redshift: "Date parts for date or timestamp functions"). Snowflake's and Redshift's `m` is a
# minute, SQL Server's a month.
_DATE_PART_ABBREVIATIONS = {
    "tsql": {"yy": "year", "yyyy": "year", "qq": "quarter", "q": "quarter", "mm": "month", "m": "month",
             "dy": "dayofyear", "y": "dayofyear", "dd": "day", "d": "day", "wk": "week", "ww": "week",
             "dw": "weekday", "w": "weekday", "hh": "hour", "mi": "minute", "n": "minute", "ss": "second",
             "s": "second", "ms": "millisecond", "mcs": "microsecond", "ns": "nanosecond",
             "tz": "tzoffset", "isowk": "iso_week", "isoww": "iso_week"},
    "snowflake": {
        **dict.fromkeys(("y", "yy", "yyy", "yyyy", "yr", "years", "yrs"), "year"),
        **dict.fromkeys(("mm", "mon", "mons", "months"), "month"),
        **dict.fromkeys(("d", "dd", "days", "dayofmonth"), "day"),
        **dict.fromkeys(("weekday", "dow", "dw"), "dayofweek"),
        **dict.fromkeys(("weekday_iso", "dow_iso", "dw_iso"), "dayofweekiso"),
        **dict.fromkeys(("yearday", "doy", "dy"), "dayofyear"),
        **dict.fromkeys(("w", "wk", "weekofyear", "woy", "wy"), "week"),
        **dict.fromkeys(("week_iso", "weekofyeariso", "weekofyear_iso"), "weekiso"),
        **dict.fromkeys(("q", "qtr", "qtrs", "quarters"), "quarter"),
        **dict.fromkeys(("h", "hh", "hr", "hours", "hrs"), "hour"),
        **dict.fromkeys(("m", "mi", "min", "minutes", "mins"), "minute"),
        **dict.fromkeys(("s", "sec", "seconds", "secs"), "second"),
        **dict.fromkeys(("ms", "msec", "milliseconds"), "millisecond"),
        **dict.fromkeys(("us", "usec", "microseconds"), "microsecond"),
        **dict.fromkeys(("ns", "nsec", "nanosec", "nsecond", "nanoseconds", "nanosecs", "nseconds"), "nanosecond"),
    },
    "redshift": {
        **dict.fromkeys(("y", "yr", "yrs", "years"), "year"),
        **dict.fromkeys(("qtr", "qtrs", "quarters"), "quarter"),
        **dict.fromkeys(("mon", "mons", "months"), "month"),
        **dict.fromkeys(("w", "weeks"), "week"),
        **dict.fromkeys(("dow", "dw", "weekday"), "dayofweek"),
        **dict.fromkeys(("doy", "dy", "yearday"), "dayofyear"),
        **dict.fromkeys(("d", "days"), "day"),
        **dict.fromkeys(("h", "hr", "hrs", "hours"), "hour"),
        **dict.fromkeys(("m", "min", "mins", "minutes"), "minute"),
        **dict.fromkeys(("s", "sec", "secs", "seconds"), "second"),
        **dict.fromkeys(("ms", "msec", "msecs", "milliseconds"), "millisecond"),
        **dict.fromkeys(("us", "usec", "usecs", "microseconds"), "microsecond"),
    },
}


def _date_part(call: exp.Anonymous, name: str, rat_dialect: Dialect) -> None:
    """A date function's unquoted date part (`DATEADD(day, 1, d)`) as a name, not a column: an
    `exp.Var` that `rat.tree` writes as a value, where the column pass would look it up in the
    schema and report it missing. A part the function takes first is named in full where the
    dialect documents its abbreviation (SQL Server's and Snowflake's `DATEADD(dd, 1, d)` is
    `DATEADD(day, 1, d)`), and so is one written as a string where the dialect reads it so
    (Snowflake's and Redshift's `DATEADD('day', 1, d)`)."""
    arguments = call.expressions
    positions = ([0] if name in DATE_PART_FIRST else []) + \
        ([len(arguments) - 1] if name in DATE_PART_LAST and len(arguments) > 1 else [])
    abbreviations = _DATE_PART_ABBREVIATIONS.get(rat_dialect.name, {}) if positions[:1] == [0] else {}
    for k in positions:
        argument = arguments[k] if arguments else None
        part = argument.name.lower() if argument is not None else ""
        if _bare_word(argument) and (part in _DATE_PARTS or k == 0 and part in abbreviations):
            argument.replace(exp.Var(this=abbreviations.get(part, part) if k == 0 else part))
        elif k == 0 and rat_dialect.name in BARE_DATE_PART and type(argument) is exp.Literal and argument.is_string \
                and (part in _DATE_PARTS or part in abbreviations):
            argument.replace(exp.Var(this=abbreviations.get(part, part)))


def _bare_word(argument: exp.Expression | None) -> bool:
    """Whether `argument` is a bare word: an unquoted name, unqualified (a date part, where a
    function takes one, or a column)."""
    return type(argument) is exp.Column and argument.args.get("table") is None \
        and isinstance(argument.this, exp.Identifier) and not argument.this.quoted


# What a quantified comparison's ANY / SOME compares with: `x = ANY (..)`, `x LIKE ANY (..)`
_QUANTIFIED = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike)


def _any_aggregate(node: exp.Any, rat_dialect: Dialect) -> bool:
    """Whether `node` is Databricks' aggregate any(x), bool_or(x) ("a synonym for bool_or"), not
    the ANY of a quantified comparison (`x = ANY (..)`)."""
    return rat_dialect.name == "databricks" and type(node.this) is exp.Paren \
        and not (isinstance(node.parent, _QUANTIFIED) and node.arg_key == "expression")


@functools.lru_cache(maxsize=4096)  # (names come from the SQL read)
def _reads_as_aggregate(rat_dialect: Dialect, name: str, arity: int) -> bool | None:
    """Whether sqlglot reads a call of function `name` with `arity` arguments in the dialect as
    an aggregate (True), another function's (False), or knows no such function (None)."""
    if not _SIMPLE_NAME.match(name):
        return None
    sql = f"SELECT {name}({', '.join(f'_{k}' for k in range(arity))})"
    try:
        with quiet_sqlglot():
            parsed = sqlglot_dialect(rat_dialect).parse(sql)[0]
    except (sqlglot.errors.SqlglotError, TypeError, ValueError):
        return None
    call = parsed.expressions[0] if isinstance(parsed, exp.Select) and len(parsed.expressions) == 1 else None
    if call is None or type(call) is exp.Anonymous or type(call) is exp.Column:
        return None
    return call.find(exp.AggFunc) is not None


def aggregates(expression: exp.Expression, rat_dialect: Dialect) -> tuple[bool, exp.Anonymous | None]:
    """Whether `expression`, as written in `rat_dialect` (before the resolver renames its calls:
    PostgreSQL's greatest(a, b) becomes max(a, b)), calls an aggregate: one sqlglot types
    (`count(x)`, also in a window), Databricks' any(x), or a call rat keeps by its name that sqlglot
    reads in the dialect as one, under that name or the name rat writes for it (`bool_or(x)`,
    `ARRAY_AGG(x)`, PostgreSQL's every(x); `_reads_as_aggregate`, `_SYNONYMS`); and, where it
    calls none, its first call of a function not known to aggregate or not (a user's own, SQLite's
    total), which may aggregate, else None."""
    if expression.find(exp.AggFunc):
        return True, None
    unknown = None
    for call in expression.find_all(exp.Anonymous, exp.Any):
        if type(call) is exp.Any:
            if _any_aggregate(call, rat_dialect):
                return True, None
            continue
        name, arity = call.name.lower(), len(call.expressions)
        known = _reads_as_aggregate(rat_dialect, name, arity)
        synonym, synonym_arity = _SYNONYMS.get(rat_dialect.name, {}).get(name, (None, 0))
        if known is None and synonym is not None and synonym_arity == arity:
            known = _reads_as_aggregate(rat_dialect, synonym, arity)  # (PostgreSQL's every: bool_and)
        if known:
            return True, None
        if known is None and unknown is None:
            unknown = call
    return False, unknown


# What the resolver notes of a query EXISTS reads (`rat.tree` reads it: `one_row`)
_ONE_ROW = "rat.one_row"


def one_row(select: exp.Select) -> bool:
    """Whether `select`, a query without GROUP BY that EXISTS reads, has a row always, however
    many its FROM and WHERE give, so that its SELECT list is part of what EXISTS reads: a list
    that calls an aggregate or may (`aggregates`, asked by the resolver of the list as written).
    True for a query the resolver did not note."""
    return select.meta.get(_ONE_ROW, True)


def _read_by_exists(select: exp.Select) -> bool:
    """Whether `select` is the query an EXISTS reads (where `rat.tree`'s `exists` finds it)."""
    parent = select.parent
    if type(parent) is exp.Subquery:
        parent = parent.parent
    return type(parent) is exp.Exists


def _one_spelling(call: exp.Anonymous, name: str, rat_dialect: Dialect) -> exp.Expression:
    """A call in a dialect other than SQLite, spelled one way where the dialect has several for
    it: a synonym's name as `_SYNONYMS` says, ZEROIFNULL(x) as COALESCE(x, 0) (`_ZERO_CALLS_OF`),
    REGEXP_LIKE(a, p) as `a REGEXP p` (`_REGEXP_CALLS`), YEAR(d) .. and SQL Server's DATEPART(year,
    d) as EXTRACT(year FROM d) (`_EXTRACTS`, `_DATEPART_EXTRACTS`), and the named arguments (`input
    => x`) by name (they may come in any order; the others come first). The call, or the
    expression that replaces it."""
    arguments = call.expressions
    dialect_name = rat_dialect.name
    synonym, arity = _SYNONYMS.get(dialect_name, {}).get(name, (None, 0))
    if synonym is not None and len(arguments) == arity:
        call.set("this", synonym)
    replacement = None
    if len(arguments) == 1 and name in _EXTRACTS.get(dialect_name, ()):
        replacement = exp.Extract(this=exp.Var(this=name.upper()), expression=arguments[0])
    elif len(arguments) == 2 and name == "datepart" and _bare_word(arguments[0]):
        part = arguments[0].name.lower()
        part = _DATE_PART_ABBREVIATIONS.get(dialect_name, {}).get(part, part)
        if part in _DATEPART_EXTRACTS.get(dialect_name, ()):
            replacement = exp.Extract(this=exp.Var(this=part.upper()), expression=arguments[1])
    elif len(arguments) == 1 and name in _ZERO_CALLS_OF.get(dialect_name, {}):
        call.set("this", _ZERO_CALLS_OF[dialect_name][name])
        call.set("expressions", [arguments[0], exp.Literal.number(0)])
    elif len(arguments) == 2 and name in _REGEXP_CALLS.get(dialect_name, ()):
        replacement = exp.RegexpLike(this=arguments[0], expression=arguments[1])
    if replacement is not None:
        call.replace(replacement)
        return replacement
    named = [k for k, a in enumerate(arguments) if type(a) is exp.Kwarg]
    if len(named) > 1:
        ordered = sorted((arguments[k] for k in named), key=lambda a: a.this.name.lower())
        for k, argument in zip(named, ordered, strict=True):
            arguments[k] = argument
        call.set("expressions", arguments)
    return call


def _as_sqlite_function(call: exp.Anonymous, name: str, rat_dialect: Dialect) -> None:
    """Another dialect's name for SQLite's instr, length or strftime (PostgreSQL's strpos(b, a)
    and to_char(d, 'YYYY'), MySQL's locate(a, b), char_length(a) and date_format(d, '%Y'), ...)
    as SQLite's call, in place: ``instr(b, a)``, ``length(a)``, ``strftime('%Y', d)`` (a format
    that SQLite's codes do not write, such as PostgreSQL's 'Mon', stays the dialect's call; a
    cast of the date to a date type, which sqlglot writes around SQLite's date strings, is
    dropped: in those dialects a date is what strftime formats)."""
    arguments = call.expressions
    sqlite_name, order = _SQLITE_CALLS.get(rat_dialect.name, {}).get(name, (None, ()))
    if sqlite_name is not None and (order is None and len(arguments) > 1 or len(arguments) == len(order or ())):
        call.set("this", sqlite_name)
        if order is not None:
            call.set("expressions", [arguments[k] for k in order])
        return
    order = _STRFTIME.get(rat_dialect.name, {}).get(name)
    if order is None or len(arguments) != 2:
        return
    written, date = (arguments[k] for k in order)
    if not (isinstance(written, exp.Literal) and written.is_string) \
            or (name == "to_char" or name == "to_varchar") and "%" in written.this:
        return  # (in to_char's format, % is itself)
    text = format_time(written.this, *_time_codes(rat_dialect)) or ""
    rest = _SQLITE_FORMAT_CODES.sub("", text)
    if rest == text or re.search(r"[A-Za-z%]", rest):
        return  # no date (a number's format), or a code or a word SQLite's strftime does not write
    if isinstance(date, exp.Cast) and date.to.this in exp.DataType.TEMPORAL_TYPES:
        date = date.this
    call.set("this", "strftime")
    call.set("expressions", [exp.Literal.string(text), date])


@functools.cache
def _time_codes(rat_dialect: Dialect) -> tuple[dict, dict]:
    """sqlglot's mapping of the dialect's date-format codes to strftime's, and its trie, for
    formatting: Spark's two-digit codes (`MM`, `dd`) map to `%m`, `%d` (sqlglot marks them
    `%mstrict`, `%dstrict`, for parsing dates strictly, which formatting does not do). Their
    `YYYY` is the week-based year (Dec 30 may be next year's), which strftime's `%Y` is not: no code."""
    dialect = sqlglot_dialect(rat_dialect)
    if not any(v.endswith("strict") for v in dialect.TIME_MAPPING.values()):
        return dialect.TIME_MAPPING, dialect.TIME_TRIE
    mapping = {k: v.removesuffix("strict") for k, v in dialect.TIME_MAPPING.items() if not k.startswith("Y")}
    return mapping, new_trie(mapping)


def _distinct_then_separator(call: exp.Anonymous, name: str) -> None:
    """`string_agg(DISTINCT x, ', ')` (also Snowflake's LISTAGG): DISTINCT x, then the separator,
    in place (sqlglot reads one DISTINCT of both, which it cannot write back)."""
    if name in ("string_agg", "listagg") and len(call.expressions) == 1:
        (argument,) = call.expressions
        ordered = argument if type(argument) is exp.Order else None  # (.. ORDER BY k): the separator's
        distinct = argument.this if ordered is not None else argument
        if type(distinct) is exp.Distinct and len(distinct.expressions) == 2:
            value, separator = distinct.expressions
            if ordered is not None:
                ordered.set("this", separator)
            call.set("expressions", [exp.Distinct(expressions=[value]), ordered or separator])


def _as_group_concat(call: exp.Expression) -> exp.GroupConcat | None:
    """`string_agg(x, sep)` (ordered by an `ORDER BY k` inside or by SQL Server's `WITHIN GROUP
    (ORDER BY k)`) as the node SQLite's `group_concat(x, sep ORDER BY k)` is read as: the same
    aggregate in every dialect that has string_agg. None for any other call, and for
    `string_agg(x)`, with no separator (SQLite's, PostgreSQL's and SQL Server's need one)."""
    ordering = None
    if type(call) is exp.WithinGroup:
        call, ordering = call.this, call.expression
        if type(ordering) is not exp.Order or ordering.this is not None:
            return None
    if type(call) is not exp.Anonymous or call.name.lower() != "string_agg" or len(call.expressions) != 2:
        return None
    value, separator = call.expressions
    if type(separator) is exp.Order and ordering is None:
        separator, ordering = separator.this, separator
    if isinstance(separator, exp.Order | exp.Limit):  # (BigQuery's `x ORDER BY k LIMIT n`)
        return None
    if ordering is not None:
        value = exp.Order(this=value, expressions=ordering.expressions)
    return exp.GroupConcat(this=value, separator=separator)


def _as_field(node: exp.Expression, rat_dialect: Dialect) -> exp.Dot | None:
    """DuckDB's `s['f']` and `struct_extract(s, 'f')` as the struct's field `s.f` (the `exp.Dot`
    rat.tree reads as `Field`), for a key spelt as a lowercase name: a MAP's `m['City']`, whose
    key's case counts where a field's does not, stays a subscript. None for anything else."""
    if type(node) is exp.Bracket and len(node.expressions) == 1 and not node.args.get("safe"):
        struct, key = node.this, node.expressions[0]
    elif type(node) is exp.Anonymous and node.name.lower() == "struct_extract" and len(node.expressions) == 2:
        struct, key = node.expressions
    else:
        return None
    if type(key) is not exp.Literal or not key.is_string or not _SIMPLE_NAME.match(key.this):
        return None
    return exp.Dot(this=struct, expression=exp.Identifier(this=key.this, quoted=_quoted(key.this, rat_dialect)))


def _with_rollup(group: exp.Group) -> None:
    """MySQL's `GROUP BY a, b WITH ROLLUP` (SQL Server's `WITH CUBE` too) is `GROUP BY ROLLUP (a,
    b)`, in place (sqlglot keeps the WITH as an empty `Rollup` beside the keys)."""
    for key, kind in (("rollup", exp.Rollup), ("cube", exp.Cube)):
        written = group.args.get(key)
        if written and not any(w.expressions for w in written) and group.expressions:
            group.set("expressions", [kind(expressions=list(group.expressions))])
            group.set(key, None)


def _orders_by_all(node: exp.Expression) -> bool:
    """Whether an ORDER BY key is the keyword ALL (a column so named is quoted: ALL is reserved)."""
    return (type(node) is exp.Var or type(node) is exp.Column and not node.table and isinstance(node.this, exp.Identifier)
            and not node.this.quoted) and node.name.upper() == "ALL"


_UNBOUNDED_TEXT = frozenset({exp.DataType.Type.VARCHAR, exp.DataType.Type.NVARCHAR, exp.DataType.Type.TEXT})


def _text_casts_dropped(concat: exp.Expression, rat_dialect: Dialect) -> None:
    """A concatenation's arguments cast to a string type of any length (Trino's `concat(CAST(a AS
    VARCHAR), ..)`, sqlglot's Trino for SQLite's `a || ..`) as the arguments themselves, in
    place: a concatenation makes its arguments strings as that cast does. Kept: a cast that can
    cut, to `VARCHAR(3)`, PostgreSQL's `CHAR` (one character), SQL Server's and Redshift's
    `VARCHAR` (30 and 256)."""
    types = _UNBOUNDED_TEXT if rat_dialect.name not in ("tsql", "redshift") else {exp.DataType.Type.TEXT}
    for key in ("this", "expression", "expressions"):
        value = concat.args.get(key)
        for argument in value if isinstance(value, list) else [value] if value is not None else []:
            if type(argument) is exp.Cast and argument.to.this in types and not argument.to.expressions:
                argument.replace(argument.this)


def _lateral_views(select: exp.Select, sql: str, rat_dialect: Dialect) -> None:
    """Spark's (Databricks', Hive's) `FROM t LATERAL VIEW explode(t.a) v AS x`, each row of `t`
    with each element of its array (or entry of its map), as the join other dialects write,
    `CROSS JOIN UNNEST(t.a) AS v(x)` (`LATERAL VIEW OUTER`, which keeps a row whose array is
    empty: `LEFT JOIN UNNEST(t.a) AS v(x) ON TRUE`), in place. RATError in a dialect without it,
    and for other generators: `posexplode` (its positions count from 0, where `WITH ORDINALITY`
    counts from 1, after the element), `inline`, `json_tuple`, ..."""
    if not rat_dialect.lateral_view:
        raise RATError(f"unsupported construct 'LATERAL VIEW' ({rat_dialect.name} has none)", sql)
    for lateral in select.args["laterals"]:
        generator = lateral.this  # (a call rat's parser keeps as written: Anonymous)
        named = generator.name.lower() if type(generator) is exp.Anonymous else type(generator).__name__
        if not lateral.args.get("view") or named != "explode" or len(generator.expressions) != 1:
            raise RATError(f"unsupported construct 'LATERAL VIEW {named}'", sql)
        unnest = exp.Unnest(expressions=list(generator.expressions), alias=lateral.args.get("alias"))
        select.append("joins", exp.Join(this=unnest, side="LEFT", on=exp.true()) if lateral.args.get("outer")
                      else exp.Join(this=unnest, kind="CROSS"))
    select.set("laterals", None)


def parenthesised_join(item: exp.Expression) -> exp.Expression | None:
    """The first FROM item of `item` where it is a join in parentheses (`(a JOIN b ON ..)`, which
    sqlglot reads as a subquery of the first item, a table or subquery holding the joins; `((a JOIN
    b) JOIN c)`: one of `(a JOIN b)`), else None. (`item`'s own joins are its enclosing join's.)"""
    while type(item) is exp.Subquery and not any(v for k, v in item.args.items() if k not in ("this", "joins")):
        item = item.this  # (one with an alias or a PIVOT is refused: `_CONSTRUCTS`)
        if type(item) is not exp.Select and item.args.get("joins"):  # (not `(SELECT .. FROM a JOIN b)`)
            return item
    return None


def _always_true(condition: exp.Expression | None) -> bool:
    """Whether a join condition is `1 = 1` (in parentheses or not). (sqlglot reads SQLite's join
    without ON as ON TRUE, and rat keeps that as it always has.)"""
    while isinstance(condition, exp.Paren):
        condition = condition.this
    return isinstance(condition, exp.EQ) and isinstance(condition.this, exp.Literal) \
        and condition.this == condition.expression


class _Reading:
    """How `rat` reads one dialect other than SQLite: sqlglot's dialect, the functions whose
    calls are renamed (see `_RENAMED`), the clauses refused, the lowercasing of canonical text."""

    def __init__(self, rat_dialect: Dialect):
        self.sqlglot = sqlglot.Dialect.get_or_raise(rat_dialect.name)
        parser = self.sqlglot.parser_class
        self.typed_functions = frozenset(
            name for name in (*parser.FUNCTIONS, *parser.FUNCTION_PARSERS)
            if name not in _KEPT_FUNCTIONS and name not in parser.NO_PAREN_FUNCTION_PARSERS
            and name not in _SPECIAL_SYNTAX and rat_dialect.name not in _SPECIAL_SYNTAX_OF.get(name, ()))
        self.type_tokens = frozenset(parser.TYPE_TOKENS)
        self.unsupported = tuple(c for c in _UNSUPPORTED_CLAUSES
                                 if not (c == "qualify" and rat_dialect.qualify)
                                 and not (c == "sample" and rat_dialect.using_sample))
        # Canonical text is lowercased outside its string literals, and outside quoted
        # identifiers where those keep their case.
        escapes = self.sqlglot.tokenizer_class.STRING_ESCAPES
        string = r"'(?:[^'\\]|\\.)*'" if "\\" in escapes else r"'[^']*'"
        self.kept = re.compile(string + (r'|"[^"]*"' if rat_dialect.case_sensitive else ""),
                               re.DOTALL)


_READINGS: dict[str, _Reading] = {}


def _reading(rat_dialect: Dialect) -> _Reading:
    reading = _READINGS.get(rat_dialect.name)
    if reading is None:
        reading = _READINGS[rat_dialect.name] = _Reading(rat_dialect)
    return reading


def _refuse_missing_syntax(tokens: list, rat_dialect: Dialect, sql: str) -> None:
    """A RATError for syntax sqlglot reads in any dialect that `rat_dialect`'s database refuses:
    `ILIKE`, `a::int`, SQL Server's `LIMIT`, `NULLS FIRST` / `NULLS LAST`, `<=>`, `INTERSECT ALL` /
    `EXCEPT ALL` (`Dialect`'s fields), with what the dialect writes instead; and PostgreSQL's `|/ a`
    in every dialect (sqlglot gives it the precedence of a function call).

    >>> _refuse_missing_syntax(DIALECT.tokenize("SELECT a::int FROM t"), SQLITE, "SELECT a::int FROM t")
    Traceback (most recent call last):
    rat.errors.RATError: unsupported construct '::' (sqlite has none: CAST(a AS type)) in SQL: 'SELECT a::int FROM t'
    """
    name, refused = rat_dialect.name, _MISSING_TOKENS.get(rat_dialect.name)
    if refused is None:
        refused = _MISSING_TOKENS[name] = frozenset(
            token for token, field in ((TokenType.ILIKE, "ilike"), (TokenType.DCOLON, "cast_operator"),
                                       (TokenType.LIMIT, "limit"), (TokenType.NULLSAFE_EQ, "null_safe_eq"))
            if not getattr(rat_dialect, field))
    kinds = [t.token_type for t in tokens]  # (each rule below looks only where it may apply)
    if TokenType.PIPE_SLASH in kinds:  # PostgreSQL's `|/ 16 + 9` is `|/ (16 + 9)`: sqlglot reads sqrt(16) + 9
        raise RATError("unsupported construct '|/' (its precedence is not read: write sqrt(a))", sql)
    if not refused.isdisjoint(kinds):
        kind = next(kind for kind in kinds if kind in refused)
        construct, instead = {
            TokenType.ILIKE: ("ILIKE", "its LIKE ignores case" if rat_dialect.like_ignores_case
                              else "lower(a) LIKE lower('x%')"),
            TokenType.DCOLON: ("::", "CAST(a AS type)"),
            TokenType.LIMIT: ("LIMIT", "TOP n, or OFFSET m ROWS FETCH NEXT n ROWS ONLY"),
            TokenType.NULLSAFE_EQ: ("<=>", "a IS b" if rat_dialect is SQLITE
                                    else "a IS NOT DISTINCT FROM b")}[kind]
        raise RATError(f"unsupported construct {construct!r} ({name} has none: {instead})", sql)
    if not rat_dialect.intersect_all and TokenType.ALL in kinds:  # INTERSECT ALL
        for k in range(1, len(tokens)):
            if kinds[k] is TokenType.ALL and kinds[k - 1] in _SET_OPERATORS:
                before, token = tokens[k - 1], tokens[k]
                raise RATError(f"unsupported construct '{before.text.upper()} {token.text.upper()}' ({name} has "
                               f"none: its {before.text.upper()} keeps no duplicates)", sql)
    if not rat_dialect.nulls_order and "nulls" in sql.lower():
        for k in range(len(tokens) - 1):
            if tokens[k].text.upper() == "NULLS" and tokens[k + 1].text.upper() in ("FIRST", "LAST"):
                raise RATError(f"unsupported construct 'NULLS {tokens[k + 1].text.upper()}' ({name} has none: "
                               "sort by CASE WHEN a IS NULL THEN 1 ELSE 0 END first)", sql)


# dialect name -> the token types of syntax it lacks (`_refuse_missing_syntax`)
_MISSING_TOKENS: dict[str, frozenset] = {}
_SET_OPERATORS = frozenset({TokenType.INTERSECT, TokenType.EXCEPT})
# what no comma, ON, AS or GROUP BY can be followed by: the end of the query, of a clause or of a list
_LIST_ENDS = frozenset({None, TokenType.SEMICOLON, _R_PAREN, TokenType.FROM, TokenType.WHERE, TokenType.GROUP_BY,
                        TokenType.HAVING, TokenType.ORDER_BY, TokenType.LIMIT, TokenType.UNION, TokenType.INTERSECT,
                        TokenType.EXCEPT})
# ... and what no AS can be followed by where any keyword after it is a name (PostgreSQL's, DuckDB's
# and Databricks' `count(*) AS limit`; SQLite, MySQL, BigQuery refuse most)
_AS_ENDS = frozenset({None, TokenType.SEMICOLON, _R_PAREN, TokenType.COMMA})
_KEYWORD_ALIASES = frozenset({"postgres", "duckdb", "databricks"})
_NEEDS_MORE = frozenset({TokenType.COMMA, TokenType.ON, TokenType.ALIAS, TokenType.GROUP_BY})
_QUERY_STARTS = frozenset({TokenType.SELECT, TokenType.WITH, TokenType.FROM})
_MALFORMED_WATCHED = _NEEDS_MORE | {_L_PAREN, _R_PAREN, TokenType.SELECT, TokenType.VALUES, TokenType.UNION,
                                    TokenType.INTERSECT, TokenType.EXCEPT, TokenType.FROM}


def _refuse_malformed(tokens: list, rat_dialect: Dialect, sql: str) -> None:
    """A RATError for SQL cut short or malformed that sqlglot reads as if it were whole, and the
    database refuses: a list with an empty item or ending in a comma (`SELECT a,, b`, `FROM t,`,
    `ORDER BY a,`; DuckDB ends any list so, BigQuery and Snowflake the SELECT list), `JOIN u ON`,
    `FROM t AS` or `GROUP BY` with nothing (or a comma) after it, and a query that begins with its FROM
    (`FROM t`: DuckDB's, BigQuery's).

    >>> _refuse_malformed(DIALECT.tokenize("SELECT a FROM t,"), SQLITE, "SELECT a FROM t,")
    Traceback (most recent call last):
    rat.errors.ParseError: cannot parse (nothing after ',' at line 1, col 16) in SQL: 'SELECT a FROM t,'
    """
    trailing = rat_dialect.trailing_comma
    kinds = [t.token_type for t in tokens]
    kinds.append(None)  # after the last token (and, as kinds[-1], before the first)
    selected = [False]  # for each parenthesis open: whether its query began with SELECT (or VALUES)
    # only the few tokens these rules read are walked (the walk of every token cost a fifth of a tree)
    # (BigQuery begins a query with FROM in its pipe syntax only: `FROM t |> WHERE a > 1`)
    pipe = rat_dialect.name == "bigquery" and TokenType.PIPE_GT in kinds
    watched = _NEEDS_MORE if rat_dialect.from_first or pipe else _MALFORMED_WATCHED
    for k in [k for k, kind in enumerate(kinds) if kind in watched]:
        kind = kinds[k]
        if kind in _NEEDS_MORE:
            after = kinds[k + 1]
            if kind is TokenType.ALIAS and rat_dialect.name in _KEYWORD_ALIASES:
                cut = after in _AS_ENDS  # (a keyword after AS is a name there: `count(*) AS limit`)
            else:  # (`ON ,`, `AS ,`, `GROUP BY ,` too: `JOIN u ON , v` is no `FROM t, u, v`)
                cut = after is TokenType.COMMA or after in _LIST_ENDS and not (
                    kind is TokenType.COMMA and (trailing == "any" or trailing == "select" and after is TokenType.FROM))
            if cut:
                token = tokens[k]
                raise ParseError(f"cannot parse (nothing after {token.text!r} at line {token.line}, col {token.col})",
                                 sql)
        elif kind is _L_PAREN:  # a query begins in it, unless it is a call's: trim(FROM s)
            begins = kinds[k + 1] in _QUERY_STARTS and kinds[k - 1] is not TokenType.VAR
            selected.append(False if begins else selected[-1])
        elif kind is _R_PAREN:
            if len(selected) > 1:
                selected.pop()
        elif kind is TokenType.SELECT or kind is TokenType.VALUES:
            selected[-1] = True
        elif kind is not TokenType.FROM:  # UNION, INTERSECT, EXCEPT
            if kinds[k - 1] is not TokenType.STAR and kinds[k - 1] is not TokenType.ALIAS:  # (not `* EXCEPT (a)`, `AS union`)
                selected[-1] = False
        elif not selected[-1]:
            token = tokens[k]
            raise ParseError(f"cannot parse (FROM before SELECT at line {token.line}, col {token.col}: "
                             f"{rat_dialect.name} reads SELECT .. FROM ..)", sql)


def _jinja_text(sql: str) -> bool:
    """Whether `sql` (which does not tokenize) holds Jinja's `{{ .. }}` or `{% .. %}`, strings and
    comments not told apart (in linear time).

    >>> _jinja_text("select {{ ref('o') }} where a = 'it''s"), _jinja_text("select '{{'")
    (True, False)
    """
    return any((at := sql.find(start)) >= 0 and sql.find(end, at + 2) >= 0 for start, end in (("{{", "}}"), ("{%", "%}")))


def _jinja(sql: str, where: str = "") -> ParseError:
    """The error of SQL that holds Jinja (`where` in it: ' at line 1, col 15', or nothing)."""
    return ParseError(f"cannot parse (a Jinja template{where}, as dbt writes models: compile it first, e.g. "
                      "dbt compile, and score the SQL under target/compiled/)", sql)


def _refuse_jinja(tokens: list, sql: str) -> None:
    """A ParseError where the SQL holds Jinja (an uncompiled dbt model): `{% .. %}` (sqlglot's
    BLOCK_START, also `{{-` / `{{+`) or `{{` outside strings and comments (two braces, adjacent:
    a struct or object literal, `{'a': {'b': 1}}`, opens with one; DuckDB's `MAP {{'a': 1}: 2}`,
    a map keyed by structs, is no Jinja). A Jinja comment `{# .. #}` is a comment to sqlglot in
    every dialect, read as one.

    >>> sql = "SELECT * FROM {{ ref('t') }}"
    >>> _refuse_jinja(_reader()[0].tokenize(sql), sql)
    Traceback (most recent call last):
    rat.errors.ParseError: cannot parse (a Jinja template at line 1, col 15, as dbt writes models: ...
    >>> _refuse_jinja(_reader()[0].tokenize("SELECT '{{ x }}'"), "SELECT '{{ x }}'")  # a string
    """
    for k, token in enumerate(tokens):
        kind = token.token_type
        if kind is TokenType.BLOCK_START or kind is TokenType.L_BRACE and k + 1 < len(tokens) \
                and tokens[k + 1].token_type is TokenType.L_BRACE and tokens[k + 1].start == token.end + 1 \
                and not (k > 0 and tokens[k - 1].token_type is TokenType.MAP):
            raise _jinja(sql, f" at line {token.line}, col {token.col}")


def sqlglot_dialect(rat_dialect: Dialect):
    """sqlglot's dialect object for `rat_dialect`."""
    return DIALECT if rat_dialect is SQLITE else _reading(rat_dialect).sqlglot


def parse(sql: str, rat_dialect: Dialect = SQLITE) -> exp.Expression:
    """Parse one statement (a trailing `;` is allowed); SQL that sqlglot cannot tokenize or
    parse is a RATError. Functions other than aggregates and CAST stay as written.

    >>> parse("SELECT 1;").sql()
    'SELECT 1'
    >>> parse("SELECT strftime('%Y', d) FROM t").sql()  # not TimeToStr(TsOrDsToTimestamp(..))
    "SELECT STRFTIME('%Y', d) FROM t"
    >>> parse("SELECT TOP 3 [a] FROM t", _dialect("tsql")).sql()
    'SELECT "a" FROM t LIMIT 3'
    """
    if not isinstance(sql, str):
        raise TypeError(f"sql: expected a str, found {type(sql).__name__}")
    if len(sql) > MAX_SQL_CHARS:
        raise RATError(f"{len(sql)} characters of SQL; at most {MAX_SQL_CHARS} are read", sql)
    sql = sql.removeprefix("\ufeff")  # a byte order mark (SQL read from a file), which SQLite skips
    try:
        tokenizer, parser = _reader(rat_dialect)
        try:
            tokens = tokenizer.tokenize(sql)
        except sqlglot.errors.TokenError:
            if "{" in sql and _jinja_text(sql):
                raise _jinja(sql) from None
            if rat_dialect is not SQLITE or "/*" not in sql or sql.endswith("/*"):
                raise  # (SQLite refuses a `/*` with nothing after it)
            tokens = tokenizer.tokenize(sql + "*/")  # SQLite ends a /* comment left open at the end of the SQL
        if "{" in sql:
            _refuse_jinja(tokens, sql)
        reading = None if rat_dialect is SQLITE else _reading(rat_dialect)
        if not rat_dialect.json_operators and any(t.token_type in _JSON_ARROWS for t in tokens):
            # (SQL Server's: sqlglot writes each as two calls of its left side, exponential in a chain)
            if rat_dialect.name in _LAMBDA_ARROWS:
                raise RATError(f"unsupported construct {_CONSTRUCTS['Lambda']!r}", sql)
            raise RATError(f"unsupported construct '->' ({rat_dialect.name} has no JSON operators)", sql)
        _refuse_missing_syntax(tokens, rat_dialect, sql)
        if rat_dialect.name == "tsql" and "system_user" in sql.lower() and any(
                t.token_type is TokenType.CURRENT_USER and t.text.upper() == "SYSTEM_USER" for t in tokens):
            # the login's name, which sqlglot reads as CURRENT_USER (the database user's)
            raise RATError("unsupported construct 'SYSTEM_USER'", sql)
        if rat_dialect is SQLITE and _NUMERIC_TYPE_WORDS.search(sql):
            _numeric_affinity_types(tokens)
        numbered = rat_dialect is SQLITE and (("?" in sql or ":" in sql) and _numbered_parameters(tokens, sql)
                                              or "$" in sql)  # (`$1`, `$a`: a name to sqlglot's SQLite)
        renamed = _rename_typed_functions(
            tokens, sql, _TYPED_FUNCTIONS if reading is None else reading.typed_functions,
            _TYPE_TOKENS if reading is None else reading.type_tokens)
        with quiet_sqlglot():
            # (a comment after the last `;` is a statement of its own to sqlglot)
            statements = [s for s in parser.parse(tokens, sql) if s is not None and type(s) is not exp.Semicolon]
    except sqlglot.errors.ParseError as error:
        detail = error.errors[0] if error.errors else {}
        where = f" at line {detail.get('line')}, col {detail.get('col')}" if detail else ""
        description = detail.get("description") or _ANSI.sub("", str(error))[:200]
        raise ParseError(f"cannot parse ({_plain(description)}{where})", sql) from None
    except sqlglot.errors.TokenError as error:  # (it quotes the SQL around the error, line breaks and all)
        raise ParseError(f"cannot parse ({' '.join(_ANSI.sub('', str(error))[:200].split())})", sql) from None
    except RATError:
        raise
    except (TypeError, ValueError) as error:
        # sqlglot's parser meeting a token where it expects an expression ('a ? b'), or naming by
        # what is no name (BigQuery's and Redshift's `FROM t, t.x ?`: an UNNEST aliased `?`)
        raise ParseError(f"cannot parse ({_plain(str(error))[:200]})", sql) from None
    except RecursionError:
        raise DepthError(sql) from None
    except Exception as error:
        raise InternalError("parse", error, sql) from error
    if len(statements) != 1:
        raise RATError(f"expected one statement, found {len(statements)}", sql)
    statement = statements[0]
    if not isinstance(statement, _QUERY):
        first = sql.split(None, 1)[0][:20] if sql.strip() else ""
        # CREATE TABLE / VIEW .. AS SELECT and INSERT INTO .. SELECT (a dbt materialisation's SQL)
        inside = isinstance(statement, exp.Create | exp.Insert) and isinstance(statement.args.get("expression"), _QUERY)
        raise RATError(f"not a query (a statement that begins {first!r}: a SELECT, WITH or set operation is read"
                       f"{'; score the SELECT inside it' if inside else ''})", sql)
    _refuse_malformed(tokens, rat_dialect, sql)
    if numbered:
        _numbered_placeholders(statement, sql)
    if not rat_dialect.full_join and any(j.side == "FULL" for j in statement.find_all(exp.Join)):
        raise RATError(f"unsupported construct 'FULL JOIN' ({rat_dialect.name} has none: "
                       "a LEFT JOIN's rows UNION a RIGHT JOIN's)", sql)
    if renamed:
        _restore_names(statement)
    if rat_dialect.json_operators and any(t.token_type is TokenType.ARROW for t in tokens):
        _json_arrows_in_calls(statement, rat_dialect)
    return statement


_JSON_GETS = (exp.JSONExtract, exp.JSONExtractScalar, exp.JSONBExtract, exp.JSONBExtractScalar)


def _json_arrows_in_calls(statement: exp.Expression, rat_dialect: Dialect) -> None:
    """sqlglot reads `j -> 'a'` inside a call's parentheses (`count(j -> 'a')`, `lower(j -> 'a'
    ->> 'b')`) as a lambda `j -> 'a'`, which rat reads in no dialect: one whose body is a JSON key
    (a string or a number), or JSON arrows applied to one, is the arrow it is written as, in place."""
    dialect = sqlglot_dialect(rat_dialect)
    for lam in list(statement.find_all(exp.Lambda)):
        body = lam.this
        while isinstance(body, _JSON_GETS):
            body = body.this
        if len(lam.expressions) == 1 and type(body) is exp.Literal:
            text = f"{lam.expressions[0].sql(dialect=dialect)} -> {lam.this.sql(dialect=dialect)}"
            lam.replace(sqlglot.parse_one(text, read=dialect))


def _reader(rat_dialect: Dialect = SQLITE):
    """This thread's tokenizer and parser of `rat_dialect`: made once (each resets itself per
    query), not per query as `sqlglot.parse_one` does."""
    if rat_dialect is SQLITE:
        reader = getattr(_READERS, "pair", None)
        if reader is None:
            reader = _READERS.pair = (DIALECT.tokenizer(), DIALECT.parser())
        return reader
    readers = getattr(_READERS, "others", None)
    if readers is None:
        readers = _READERS.others = {}
    reader = readers.get(rat_dialect.name)
    if reader is None:
        other = _reading(rat_dialect).sqlglot
        reader = readers[rat_dialect.name] = (other.tokenizer(), other.parser())
    return reader


_READERS = threading.local()


class _QuietWhileReading(logging.Filter):
    """Drops what sqlglot logs in this thread while rat parses or writes SQL (`quiet_sqlglot`):
    its warning that a statement "contains unsupported syntax. Falling back to parsing as a
    'Command'" quotes the SQL on a library user's stderr, and rat refuses that statement with a
    RATError of its own; its warning that the dialect does not support what it writes (MySQL's
    AT TIME ZONE, which its parser read) is about sqlglot's text, not the user's. Records
    sqlglot logs for anyone else's calls pass as before."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_READERS, "quiet", False)


logging.getLogger("sqlglot").addFilter(_QuietWhileReading())


class quiet_sqlglot:
    """sqlglot logs nothing from this thread meanwhile (`_QuietWhileReading`); a class, not a
    generator, for its cost: one is entered for every query parsed."""

    __slots__ = ("before",)

    def __enter__(self) -> None:
        self.before = getattr(_READERS, "quiet", False)
        _READERS.quiet = True

    def __exit__(self, *_) -> None:
        _READERS.quiet = self.before


def _star_replace(tokens: list, k: int, openers: dict[int, int]) -> bool:
    """Whether the word at ``tokens[k]`` (REPLACE, before a `(`) modifies a star select item:
    `* REPLACE (`, `t.* REPLACE (`, `* EXCLUDE (a) REPLACE (`; not `price * replace(a, ..)`.
    ``openers``: each `)`'s `(` (``_openers``)."""
    if k and tokens[k - 1].token_type is _R_PAREN:  # `.. EXCLUDE (a) REPLACE`: back to its `(`
        j = openers.get(k - 1, 0)
        if j < 1 or tokens[j - 1].text.upper() not in ("EXCLUDE", "EXCEPT"):
            return False
        k = j - 1
    return k >= 2 and tokens[k - 1].token_type is TokenType.STAR and tokens[k - 2].token_type in _BEFORE_STAR_ITEM


def _numeric_affinity_types(tokens: list) -> None:
    """Read a SQLite CAST's type that sqlglot takes for another (`STRING` and `STR` as TEXT,
    `LONG` as BIGINT, `VARBINARY` as BLOB, ..) as NUMERIC: SQLite gives a type name that holds
    none of INT, CHAR, CLOB, TEXT, BLOB, REAL, FLOA, DOUB the NUMERIC affinity, so that
    `CAST('12abc' AS STRING)` is 12. Only a CAST's: `AS string` after a column is its alias."""
    openers = _openers(tokens)
    closers = {opener: closer for closer, opener in openers.items()}
    for k, token in enumerate(tokens):
        if k < 3 or token.text.upper() not in _NUMERIC_TYPE_NAMES or tokens[k - 1].token_type is not TokenType.ALIAS:
            continue
        after = closers.get(k + 1, k) + 1 if k + 1 < len(tokens) and tokens[k + 1].token_type is _L_PAREN else k + 1
        opener = openers.get(after, 0)
        if opener and tokens[opener - 1].text.upper() == "CAST":
            token.token_type = TokenType.DECIMAL


_NUMBERED_MARKS = frozenset({TokenType.PLACEHOLDER, TokenType.COLON})
_PARAMETER_NAME_TOKENS = frozenset({TokenType.NUMBER, TokenType.VAR})


def _numbered_parameters(tokens: list, sql: str) -> bool:
    """Read SQLite's `?NNN` and `:NNN` parameters (`?1`, `:1`, `:1a`), which sqlglot tokenizes as
    `?` or `:` and then a number, as one token each, in place: `:1` a `:` and the name `1`, which
    sqlglot parses as the placeholder `:1`; `?1` the name `?1` (see `_numbered_placeholders`).
    Whether any `?NNN` was read. (SQLite's `?` takes the digits after it, `:` a name's characters.)

    >>> tokens = DIALECT.tokenize("SELECT ?1, :2b")
    >>> _numbered_parameters(tokens, "SELECT ?1, :2b"), [t.text for t in tokens]
    (True, ['SELECT', '?1', ',', ':', '2b'])
    """
    marks = [k for k, token in enumerate(tokens) if token.token_type in _NUMBERED_MARKS]
    numbered = False
    for k in reversed(marks):  # (from the end: merging takes tokens out after k)
        mark, end = tokens[k], k + 1
        if end == len(tokens) or tokens[end].token_type is not TokenType.NUMBER or tokens[end].start != mark.end + 1:
            continue
        if mark.token_type is TokenType.PLACEHOLDER:
            if not sql[tokens[end].start:tokens[end].end + 1].isdecimal():
                continue  # (`?1.5`, `?1e3`: not a parameter and a name after it, nor one SQLite reads)
            start, end, numbered = k, end + 1, True
        else:
            start = end
            while end < len(tokens) and tokens[end].token_type in _PARAMETER_NAME_TOKENS \
                    and tokens[end].start == tokens[end - 1].end + 1:
                end += 1
        first, last = tokens[start], tokens[end - 1]
        first.token_type, first.text, first.end = TokenType.VAR, sql[first.start:last.end + 1], last.end
        del tokens[start + 1:end]
    return numbered


_NAMED_MARKS = ("?", "$")


def _numbered_placeholders(statement: exp.Expression, sql: str) -> None:
    """Each `?NNN` (a name `?1` to sqlglot, see `_numbered_parameters`) and each `$AAAA` (`$1`, `$a`:
    a name to sqlglot's SQLite tokenizer) as the parameter it is, in place: an `exp.Var`, which
    sqlglot writes as it is (an `exp.Placeholder` with a name is written `:1`); a RATError where it
    is a table's, column's or function's name, as SQLite's is none (its `$a(1)` is one parameter).

    >>> statement = parse('SELECT $1, "$1" FROM t')
    >>> [type(e).__name__ for e in statement.expressions]
    ['Var', 'Column']
    """
    for identifier in list(statement.find_all(exp.Identifier)):
        if identifier.quoted or identifier.this[:1] not in _NAMED_MARKS:
            continue
        column = identifier.parent
        if type(column) is not exp.Column or column.this is not identifier or column.table:
            raise ParseError(f"cannot parse (a placeholder as a name: {identifier.this!r})", sql)
        column.replace(exp.Var(this=identifier.this))
    for call in statement.find_all(exp.Anonymous):
        if call.name[:1] in _NAMED_MARKS:
            raise ParseError(f"cannot parse (a placeholder as a name: {call.name!r})", sql)


def _openers(tokens: list) -> dict[int, int]:
    """The position of each `)`'s `(` among ``tokens`` (one pass)."""
    stack, out = [], {}
    for i, token in enumerate(tokens):
        if token.token_type is _L_PAREN:
            stack.append(i)
        elif token.token_type is _R_PAREN and stack:
            out[i] = stack.pop()
    return out


def _rename_typed_functions(tokens: list, sql: str, typed: frozenset = frozenset(),
                            type_tokens: frozenset = frozenset()) -> bool:
    """Prefix the name of each call of a function sqlglot would type (see `_RENAMED`);
    whether any was renamed. Parentheses nested more than MAX_PARENTHESES deep are a
    DepthError here, before parsing: how deep sqlglot's recursive parser gets depends on its
    build (compiled, it reads thousands of levels), and the tree must not. So is what sqlglot
    parses in exponential or quadratic time: more than MAX_TYPE_CALLS calls of a type's name
    (`type_tokens`) inside one another, more than MAX_BRACKETS subscripts or array brackets."""
    # Only the tokens before an opening parenthesis can be function names: find those first
    # (one pass in a comprehension), rather than looking at every token in a Python loop.
    opening = [i for i, token in enumerate(tokens) if token.token_type is _L_PAREN]
    opens = opening
    if "[" in sql:  # (rare: one more pass only then)
        opens = [i for i, token in enumerate(tokens) if token.token_type in _OPENING]
        if len(opens) - len(opening) > MAX_BRACKETS:
            raise RATError(f"more than {MAX_BRACKETS} subscripts or array brackets", sql)
    if len(opens) > MAX_TYPE_CALLS and len(
            [i for i in opens if i and tokens[i - 1].token_type in type_tokens]) > MAX_TYPE_CALLS:
        _check_type_calls(tokens, sql, type_tokens)
    if len(opening) > MAX_PARENTHESES:  # fewer cannot nest that deep
        depth = 0
        for token in tokens[:-1]:  # a last "(" opens nothing: sqlglot reports it
            kind = token.token_type
            if kind is _L_PAREN:
                depth += 1
                if depth > MAX_PARENTHESES:
                    raise DepthError(sql)
            elif kind is _R_PAREN:
                depth -= 1
    renamed, openers = False, None
    for i in opening:
        if i == 0:
            continue
        token = tokens[i - 1]  # `name(`, but not `table.name(`; BigQuery's `SAFE.name(` too
        if token.text.upper() == "REPLACE":
            openers = _openers(tokens) if openers is None else openers
            if _star_replace(tokens, i - 1, openers):
                continue  # `* REPLACE (..)`, `* EXCLUDE (a) REPLACE (..)`: a star's, not the function
        if token.text.upper() in typed \
                and (i == 1 or tokens[i - 2].token_type is not _DOT or i > 2 and tokens[i - 3].text.upper() == "SAFE"):
            token.text = _RENAMED + token.text
            renamed = True
    return renamed


def _check_type_calls(tokens: list, sql: str, type_tokens: frozenset) -> None:
    """RATError when calls of a type's name (`date(`, `ARRAY[`) nest more than MAX_TYPE_CALLS deep."""
    typed_open: list[bool] = []  # per open parenthesis or bracket: whether a type's name opened it
    depth = 0
    for i, token in enumerate(tokens):
        kind = token.token_type
        if kind in _OPENING:
            typed_call = i > 0 and tokens[i - 1].token_type in type_tokens
            typed_open.append(typed_call)
            depth += typed_call
            if depth > MAX_TYPE_CALLS:
                raise RATError(f"more than {MAX_TYPE_CALLS} calls of type names (such as date(..)) "
                               "inside one another", sql)
        elif (kind is _R_PAREN or kind is _R_BRACKET) and typed_open:
            depth -= typed_open.pop()


def _plain_star(star: exp.Star, sql: str, rat_dialect: Dialect) -> None:
    """RATError for `* REPLACE (..)`, `* EXCLUDE (a)` / `* EXCEPT (a)` / `* RENAME (a AS b)` where
    the dialect lacks them. Where it has them, `* EXCLUDE (a)` is read (`Exclude(*, t.a)`), `*
    REPLACE (upper(a) AS a)` too (`Star_replace(*, Named(Upper(t.a), a))`), and Snowflake's `* RENAME
    (a AS b)` is `*`: it names the columns, as an alias does, and rat drops aliases."""
    if star.args.get("replace") and not rat_dialect.star_replace:
        raise RATError(f"unsupported construct '* REPLACE' ({rat_dialect.name} has none)", sql)
    if (star.args.get("except_") or star.args.get("rename")) and not rat_dialect.star_exclude:
        raise RATError("unsupported construct '* EXCLUDE' / '* EXCEPT' / '* RENAME'", sql)
    star.set("rename", None)


def _restore_names(tree: exp.Expression) -> None:
    for node in tree.walk():
        if isinstance(node, exp.Anonymous | exp.Identifier) and isinstance(node.this, str) \
                and node.this.startswith(_RENAMED):
            node.set("this", node.this[len(_RENAMED):])


def canonical_ast(sql: str, schema: Schema | Mapping | None = None,
                  rat_dialect: Dialect = SQLITE) -> exp.Expression:
    """Parse `sql` (written in `rat_dialect`) and canonicalise the sqlglot tree in place (see
    `canonicalize`); `schema`: anything `Schema.of` reads (a mapping ``{table: [columns]}``)."""
    schema = Schema.of(schema)
    tree = parse(sql, rat_dialect)
    with internal_errors(sql, "canonicalise"):
        resolver = _Resolver(sql, schema, rat_dialect)
        resolver.query(tree, outer=(), ctes={}, keep_aliases=False)
        if resolver.between or resolver.simple_case:
            _refuse_many_copies(tree, sql)
        if resolver.between:
            _spell_between(tree)
        if resolver.simple_case:
            _spell_case(tree)
    return tree


def _refuse_many_copies(tree: exp.Expression, sql: str) -> None:
    """A RATError where spelling out BETWEEN and simple CASE would copy more than `MAX_NODES` nodes
    of their operands, counted before any copy is made: BETWEEN uses its operand twice, a simple
    CASE once a WHEN, and one nested in another's operand is copied with it, so nested ones copy
    each other's copies (BETWEEN twice a level: a 311-character query of 16 made 393,215 nodes in
    30 s, 25 levels ran past 10 minutes). One pass, children before parents: each node's size
    once spelled out."""
    sizes: dict[int, int] = {}
    maybe_random: set[int] = set()  # the nodes with a call of _MAYBE_RANDOM in them (`_spell_case`)
    drawing: set[int] = set()  # ... of _DRAWING (`_spell_between`)
    copied = 0
    for node in reversed(list(tree.walk(bfs=False))):
        size = 1
        for child in node.iter_expressions():
            size += sizes[id(child)]
            if id(child) in maybe_random:
                maybe_random.add(id(node))
            if id(child) in drawing:
                drawing.add(id(node))
        if isinstance(node, _MAYBE_RANDOM):
            maybe_random.add(id(node))
            if _draws_itself(node):
                drawing.add(id(node))
        if isinstance(node, exp.Between) and id(node.this) not in drawing:
            operand = sizes[id(node.this)]
            if node.args.get("symmetric"):  # (four uses of the operand, two of each bound)
                bounds = sizes[id(node.args["low"])] + sizes[id(node.args["high"])]
                copied += 3 * operand + bounds
                size += 3 * operand + bounds + 9
            else:
                copied += operand
                size += operand + 2
        elif isinstance(node, exp.Case) and node.args.get("this") is not None and id(node.this) not in maybe_random:
            operand, whens = sizes[id(node.this)], len(node.args.get("ifs") or ())
            copied += max(whens - 1, 0) * operand
            size += max(whens - 1, 0) * operand + whens * (1 + isinstance(node.this, _ATOMS))
        if copied > MAX_NODES:
            raise RATError(f"query too large (copies of its BETWEEN and simple CASE operands, one for each "
                           f"comparison they are spelled as, make more than {MAX_NODES} nodes)", sql)
        sizes[id(node)] = size


def _uses(node: exp.Expression, copies: int) -> list[exp.Expression]:
    """`copies` copies of ``node``, then ``node`` itself (its last use: no copy made)."""
    return [*(node.copy() for _ in range(copies)), node]


def _count_star(node: exp.Count) -> None:
    """`count(<non-NULL constant>)` is `count(*)` (see the module docstring)."""
    if _is_non_null_constant(node.this) and not node.expressions:
        node.set("this", exp.Star())


def _spell_between(tree: exp.Expression) -> None:
    """Rewrite BETWEEN in place (see the module docstring); runs after column resolution, so
    that the copies BETWEEN makes of its operand are resolved already. The innermost first: one in
    another's operand is rewritten before that operand is copied (`_refuse_many_copies`)."""
    for node in reversed(list(tree.find_all(exp.Between, bfs=False))):
        operand, low, high = node.this, node.args["low"], node.args["high"]
        if _draws(operand):
            continue
        parent = node.parent
        while isinstance(parent, exp.Paren):  # NOT (x BETWEEN a AND b)
            parent = parent.parent
        negated = isinstance(parent, exp.Not)
        replaced = parent if negated else node
        symmetric = node.args.get("symmetric")
        uses = _uses(operand, 3 if symmetric else 1)
        if symmetric:  # BETWEEN SYMMETRIC a AND b: between them in either order
            (low_copy, low), (high_copy, high) = _uses(low, 1), _uses(high, 1)
        spelled = _between(uses[-2:], low, high, negated)
        if symmetric:
            swapped = _between(uses[:2], high_copy, low_copy, negated)
            spelled = exp.And(this=exp.Paren(this=spelled), expression=exp.Paren(this=swapped)) if negated \
                else exp.Or(this=exp.Paren(this=spelled), expression=exp.Paren(this=swapped))
        # keeps `NOT (..)`, `(..) OR c` and an OR's `(..) AND c` right in SQL text (NOT BETWEEN, and
        # BETWEEN SYMMETRIC, is an OR: in an AND without them `x < a or x > b and c` reads another condition)
        bare = exp.Where | exp.Having | exp.Paren | (exp.Paren if isinstance(spelled, exp.Or) else exp.And)
        if not isinstance(replaced.parent, bare):
            spelled = exp.Paren(this=spelled)
        replaced.replace(spelled)


# Calls that may give another value each time (`random()`, `nextval('s')`): any function sqlglot
# does not know (`randomblob(1)`), and those it knows that draw or count
_MAYBE_RANDOM = (exp.Anonymous, *(getattr(exp, name) for name in (
    "Rand", "Randn", "Randstr", "Uniform", "Normal", "Uuid", "NextValueFor", "Seq1", "Seq2", "Seq4", "Seq8")
    if hasattr(exp, name)))


# ... of those, the ones known to draw or count (`_spell_between` keeps BETWEEN of one as it is):
# sqlglot's, and by name those it does not know (rat reads most calls as `exp.Anonymous`)
_DRAWING = tuple(kind for kind in _MAYBE_RANDOM if kind is not exp.Anonymous)
_DRAWING_NAMES = frozenset({"random", "randomblob", "rand", "randn", "randstr", "random_uuid", "uuid", "newid",
                            "newsequentialid", "gen_random_uuid", "uuid_generate_v4", "nextval", "uniform",
                            "normal", "seq1", "seq2", "seq4", "seq8", "generate_uuid", "crypt_gen_random"})


def _draws_itself(node: exp.Expression) -> bool:
    return isinstance(node, _DRAWING) or type(node) is exp.Anonymous and node.name.lower() in _DRAWING_NAMES


def _draws(node: exp.Expression) -> bool:
    """Whether ``node`` calls a function of `_DRAWING` / `_DRAWING_NAMES`: `abs(random()) % 10`."""
    return any(_draws_itself(n) for n in node.find_all(*_MAYBE_RANDOM))


def _spell_case(tree: exp.Expression) -> None:
    """`CASE x WHEN v THEN ..` as `CASE WHEN x = v THEN ..`, in place (see the module docstring);
    after column resolution, as `_spell_between`; the innermost first, as there."""
    for case in reversed(list(tree.find_all(exp.Case, bfs=False))):
        operand = case.args.get("this")
        if operand is None or operand.find(*_MAYBE_RANDOM) is not None:
            continue
        whens = case.args.get("ifs") or ()
        case.set("this", None)
        for when, use in zip(whens, _uses(operand, len(whens) - 1) if whens else ()):
            when.set("this", exp.EQ(this=_atom(use), expression=_atom(when.this)))


_ATOMS = (exp.Binary, exp.Unary, exp.Predicate)


def _atom(node: exp.Expression) -> exp.Expression:
    """`node`, in parentheses where it is an operator's (so that `x = (a = b)` stays so in text)."""
    return exp.Paren(this=node) if isinstance(node, _ATOMS) else node


def _default_offset(call: exp.Anonymous) -> None:
    """`lag(x)` and `lag(x, n, NULL)` (`lead` too) as `lag(x, 1)`, `lag(x, n)`, in place."""
    arguments = call.expressions
    if len(arguments) == 1 and not isinstance(arguments[0], exp.IgnoreNulls | exp.RespectNulls):
        call.set("expressions", [*arguments, exp.Literal.number(1)])
    elif len(arguments) == 3 and type(arguments[2]) is exp.Null:
        call.set("expressions", arguments[:2])


def _between(operands: list, low: exp.Expression, high: exp.Expression, negated: bool):
    """`low <= x AND x <= high` (negated: `x < low OR x > high`), ``operands`` the two uses of `x`."""
    first, second = operands
    if negated:
        return exp.Or(this=exp.LT(this=first, expression=low), expression=exp.GT(this=second, expression=high))
    return exp.And(this=exp.GTE(this=first, expression=low), expression=exp.LTE(this=second, expression=high))


def _is_non_null_constant(node: exp.Expression | None) -> bool:
    if isinstance(node, exp.Neg):
        node = node.this
    return isinstance(node, exp.Literal | exp.Boolean)


def canonicalize(sql: str, schema: Schema | None = None, dialect: str = "sqlite") -> str:
    """Canonical text of `sql` in its `dialect` (default SQLite): lowercase keywords and identifiers, table aliases
    resolved to table names, columns qualified where unambiguous, column aliases dropped
    (references to them in ORDER BY replaced by the aliased expression), single-quoted strings.

    >>> canonicalize('SELECT T1.Name AS n FROM Singer AS T1 WHERE T1.Age > "20" ORDER BY n')
    "select singer.name from singer where singer.age > '20' order by singer.name"
    >>> s = Schema({"singer": ["singer_id", "name"], "concert": ["singer_id", "year"]})
    >>> canonicalize("SELECT name, count(*) FROM singer AS s JOIN concert AS c "
    ...              "ON s.singer_id = c.singer_id WHERE year = 2014 GROUP BY name", s)
    'select singer.name, count(*) from singer join concert on singer.singer_id = concert.singer_id where concert.year = 2014 group by singer.name'
    >>> canonicalize('SELECT TOP 1 [Name] FROM Singer ORDER BY Age DESC', dialect="tsql")
    'select top 1 singer.name from singer order by singer.age desc'
    >>> canonicalize('SELECT "Name", name FROM Singer', dialect="postgres")
    'select singer."Name", singer.name from singer'
    """
    return with_deep_stack(_canonical_text, sql, schema, _dialect(dialect))


def _canonical_text(sql: str, schema: Schema | None, rat_dialect: Dialect = SQLITE) -> str:
    tree = canonical_ast(sql, schema, rat_dialect)
    try:
        with quiet_sqlglot():
            text = tree.sql(dialect=sqlglot_dialect(rat_dialect))
    except RecursionError:
        raise DepthError(sql) from None
    except sqlglot.errors.SqlglotError as error:  # e.g. UnsupportedError: about the SQL
        raise RATError(f"cannot generate SQL ({type(error).__name__}: {error})", sql) from None
    except Exception as error:
        raise InternalError("generate SQL", error, sql) from error
    return lowercase_outside_strings(text, rat_dialect)


def lowercase_outside_strings(text: str, rat_dialect: Dialect = SQLITE) -> str:
    if rat_dialect is not SQLITE:
        kept = _reading(rat_dialect).kept
        pieces, position = [], 0
        for match in kept.finditer(text):
            pieces += (text[position:match.start()].lower(), match.group())
            position = match.end()
        pieces.append(text[position:].lower())
        return "".join(pieces)
    # Identifiers are already lowercase; only string literals keep their case.
    parts = text.split("'")
    # Even-indexed parts lie outside '...' literals ('' escapes split into empty odd parts).
    return "'".join(p if i % 2 else p.lower() for i, p in enumerate(parts))


class _Scope:
    """The relations one SELECT reads: qualifier -> known columns (None when unknown)."""

    __slots__ = ("aliases", "derived", "implicit", "nodes", "references", "shadowed", "sources")

    def __init__(self) -> None:
        self.derived: set[str] = set()  # qualifiers of subqueries and CTE references
        self.sources: dict[str, frozenset[str] | None] = {}
        self.aliases: dict[str, str] = {}  # name or alias as written (lowercased) -> qualifier
        # the names of tables read under an alias (`orders o2`: `orders`), which no database
        # lets a column name: one is read here only where no outer scope names a table so
        self.implicit: set[str] = set()
        self.nodes: dict[str, exp.Expression] = {}  # qualifier -> its Table / Subquery node
        self.references: list[exp.Identifier] = []  # column qualifiers naming this scope
        # Qualifiers that a correlated reference to an outer scope also uses: renamed at the
        # end, so `e2.dept = e1.dept` on the same table does not become `emp.dept = emp.dept`.
        self.shadowed: set[str] = set()


def _is_star(projection: exp.Expression) -> bool:
    """Whether a select item is `*` or `t.*`."""
    return isinstance(projection, exp.Star) or type(projection) is exp.Column and isinstance(projection.this, exp.Star)


def _columns(names: list | None) -> frozenset | None:
    """A derived table's known columns, from its query's output names (None: unknown)."""
    return None if names is None else frozenset(names)


def reserved_words(rat_dialect: Dialect = SQLITE) -> frozenset[str]:
    """The lowercase words canonical SQL of `rat_dialect` quotes as names (`_RESERVED_WORDS`).

    >>> [w in reserved_words(_dialect("postgres")) for w in ("user", "order", "name")]
    [True, True, False]
    """
    words = _RESERVED_WORDS_OF.get(rat_dialect.name)
    if words is None:
        generated = sqlglot_dialect(rat_dialect).generator_class.RESERVED_KEYWORDS
        words = _RESERVED_WORDS_OF[rat_dialect.name] = frozenset(
            {*_RESERVED, *_RESERVED_WORDS.get(rat_dialect.name, ()), *(w.lower() for w in generated)})
    return words


_RESERVED_WORDS_OF: dict[str, frozenset[str]] = {}


def _quoted(name: str, rat_dialect: Dialect = SQLITE) -> bool:
    """Whether SQL of `rat_dialect` must quote the identifier `name` (lowercase): a reserved word,
    or a name of other characters than letters, digits and `_` (`my col`, `a-b`), or that begins
    with a digit.

    >>> [_quoted(n, _dialect("tsql")) for n in ("order", "user", "my col", "1x", "name")]
    [True, True, True, True, False]
    """
    cache = _quoting(rat_dialect)
    quoted = cache.get(name)
    if quoted is None:
        quoted = not _SIMPLE_NAME.match(name) or name in reserved_words(rat_dialect)
        if len(cache) < 1 << 16:
            cache[name] = quoted
    return quoted


def _quoting(rat_dialect: Dialect) -> dict[str, bool]:
    """The cache of `_quoted`'s answers in `rat_dialect`: name -> whether SQL must quote it."""
    cache = _QUOTED.get(rat_dialect.name)
    if cache is None:
        cache = _QUOTED[rat_dialect.name] = {}
    return cache


def _set_name(identifier: exp.Identifier, name: str, cache: dict[str, bool], rat_dialect: Dialect = SQLITE) -> None:
    """Name `identifier` `name`, quoted where SQL of `rat_dialect` must quote it (`cache`:
    `_quoting(rat_dialect)`)."""
    quoted = cache.get(name)
    if quoted is None:
        quoted = _quoted(name, rat_dialect)
    args = identifier.args
    if args.get("this") != name:
        identifier.set("this", name)
    if bool(args.get("quoted")) is not quoted:
        identifier.set("quoted", quoted)


_QUOTED: dict[str, dict[str, bool]] = {}  # dialect's name -> name -> whether SQL must quote it


def _set_label(identifier: exp.Identifier, label: str, upper: bool, keep_quotes: frozenset | set = frozenset(),
               rat_dialect: Dialect = SQLITE) -> None:
    """Write the identifier whose label (`rat.dialects.Dialect.label`) is `label`, in a dialect
    where quoted names keep their case (folding unquoted ones to upper case when `upper`).
    ``keep_quotes``: lowercase labels of quoted names read as the schema's (`_Resolver.fold`),
    written quoted still, so that canonical text lines up with the written SQL word for word."""
    if label[:1] == '"':
        name, quoted = label[1:-1].replace('""', '"'), True
    else:
        quoted = _quoted(label, rat_dialect) or label in keep_quotes
        name = label.upper() if quoted and upper else label
    identifier.set("this", name)
    identifier.set("quoted", quoted)


def _suffixed(name: str, k: int) -> str:
    """`name_k` (the k-th occurrence of a table or subquery in one FROM)."""
    return f"{name[:-1]}_{k}\"" if name[:1] == '"' else f"{name}_{k}"


class _Resolver:
    def __init__(self, sql: str, schema: Schema | None, rat_dialect: Dialect = SQLITE):
        self.sql = sql
        self.schema = schema
        self.between = False  # whether the query has a BETWEEN to spell out afterwards
        self.simple_case = False  # ... a CASE x WHEN
        self.dialect = rat_dialect
        self.cased = rat_dialect.case_sensitive
        self.keep_quotes: set[str] = set()  # see `fold`
        if self.cased:
            upper = rat_dialect.unquoted_case == "upper"
            self.set_name = lambda identifier, label: _set_label(identifier, label, upper, self.keep_quotes,
                                                                 rat_dialect)
        else:
            self.set_name = functools.partial(_set_name, cache=_quoting(rat_dialect), rat_dialect=rat_dialect)
        self.users = _USER_FUNCTIONS.get(rat_dialect.name, {})  # word -> the current-user function it is
        self.unsupported = _UNSUPPORTED_CLAUSE_SET if rat_dialect is SQLITE else \
            frozenset(_reading(rat_dialect).unsupported)

    def identifier(self, label: str) -> exp.Identifier:
        """A new identifier naming `label`."""
        if not self.cased:
            return exp.to_identifier(label)
        identifier = exp.Identifier()
        self.set_name(identifier, label)
        return identifier

    def fold(self, name: str, identifier) -> str:
        """The label of a name written `name` (an identifier's or alias's text), `identifier`
        being the Identifier it was written as (None: unquoted)."""
        if not self.cased:
            return name.lower()
        quoted = isinstance(identifier, exp.Identifier) and bool(identifier.args.get("quoted"))
        label = self.dialect.label(name, quoted)
        if label[:1] == '"' and self.schema is not None:
            # a quoted name that keeps its case ("Full Name", "User"): a Schema holds names in
            # lower case, so one it holds is read as the schema's name (a database's own schema
            # has "Full Name" as `full name`); any other keeps its case and quotes
            lower = name.lower()
            if lower in self.schema.tables or self.schema.tables_with_column(lower):
                self.keep_quotes.add(lower)
                return lower
        return label

    # ---- queries ----------------------------------------------------------------------
    def query(self, node: exp.Expression, outer: tuple, ctes: dict, keep_aliases: bool) -> list | None:
        """Resolve a query in place; returns its output column names when `keep_aliases`
        (a derived table's columns; None where a `*` reads columns not known)."""
        if type(node) is exp.Select and "with_" not in node.args:  # the usual case, at once
            return self.select(node, outer, ctes, keep_aliases)
        if isinstance(node, exp.Subquery):
            return self.query(node.this, outer, ctes, keep_aliases)
        with_ = node.args.get("with_")
        if with_ is not None:
            ctes = dict(ctes)
            recursive = bool(with_.args.get("recursive"))
            for cte in with_.expressions:
                name = self.fold(cte.alias, cte.args["alias"].this)
                column_names = [self.fold(c.name, c) for c in cte.args["alias"].columns]
                if recursive and self.reads(cte.this, name):
                    cte.set("recursive", True)  # the one test of it: rat.tree builds from this mark
                    names = self.recursive(cte.this, name, column_names, outer, ctes)
                else:
                    names = self.query(cte.this, outer, ctes, keep_aliases=True)
                self.set_name(cte.args["alias"].this, name)
                ctes[name] = _columns(column_names or names)
        if isinstance(node, exp.SetOperation):
            if node.args.get("by_name") or node.args.get("side") or node.args.get("kind"):
                # (DuckDB's UNION BY NAME, BigQuery's CORRESPONDING: columns paired by name)
                raise RATError(f"unsupported construct '{construct_name(node).upper()} BY NAME'", self.sql)
            names = self.query(node.this, outer, ctes, keep_aliases)
            self.query(node.expression, outer, ctes, keep_aliases)
            for key in ("order", "limit", "offset"):
                if node.args.get(key) is not None:
                    self.expression([node.args[key]], _Scope(), outer, ctes, {}, key)
            return names
        if isinstance(node, exp.Select):
            return self.select(node, outer, ctes, keep_aliases)
        raise RATError(f"unsupported construct {construct_name(node)!r}", self.sql)

    def reads(self, query: exp.Expression, name: str) -> bool:
        """Whether `query` reads a table named `name` (a CTE reading itself is recursive)."""
        return any(isinstance(t.this, exp.Identifier) and self.fold(t.name, t.this) == name
                   for t in query.find_all(exp.Table))

    def recursive(self, body: exp.Expression, name: str, column_names: list, outer: tuple,
                  ctes: dict) -> list | None:
        """Resolve the query of ``WITH RECURSIVE name AS (body)``: a base query, UNION [ALL], a
        step that reads `name` (the rows made so far) as it reads any CTE; the base's output
        column names."""
        if not isinstance(body, exp.Union) or self.reads(body.this, name) or any(
                body.args.get(k) is not None for k in ("order", "limit", "offset")):
            raise RATError(f"unsupported construct 'WITH RECURSIVE {name}': expected a query, "
                           f"UNION [ALL], then a query reading {name}", self.sql)
        names = self.query(body.this, outer, ctes, keep_aliases=True)
        ctes = {**ctes, name: _columns(column_names or names)}
        self.query(body.expression, outer, ctes, keep_aliases=True)
        return names

    def select(self, node: exp.Select, outer: tuple, ctes: dict, keep_aliases: bool) -> list | None:
        """Resolve a SELECT in place; its output column names when `keep_aliases` (a derived
        table's columns: a `*`'s are those of the FROM items it reads, `star_columns`; None where
        one's are unknown), else [] (nobody reads them)."""
        args = node.args
        if not args.get("expressions"):  # sqlglot reads a bare `SELECT`, `SELECT FROM t`
            raise no_result_columns(self.sql, self.dialect)
        if args.get("windows"):
            self.check_windows(node)
        if args.get("laterals"):
            _lateral_views(node, self.sql, self.dialect)
        if not self.unsupported.isdisjoint(args):  # one test for the usual case
            for key in _UNSUPPORTED_CLAUSES:
                if key in self.unsupported and args.get(key):
                    raise RATError(f"unsupported construct {_CLAUSE_NAMES.get(key, key.upper())!r}", self.sql)
        if args.get("kind"):  # BigQuery's SELECT AS STRUCT / AS VALUE: one column of another shape
            raise RATError(f"unsupported construct 'SELECT AS {args['kind'].upper()}'", self.sql)
        group, order = args.get("group"), args.get("order")
        if group is not None and group.args.get("totals"):  # ClickHouse's: no database rat runs on has it
            raise RATError("unsupported construct 'WITH TOTALS'", self.sql)
        if group is not None and group.args.get("all") is not None:  # (False: GROUP BY DISTINCT)
            group = self.group_by_all(node, group)
        if group is not None:
            _with_rollup(group)
        elif _read_by_exists(node):  # (its list as written: before its calls are renamed)
            verdicts = [aggregates(p, self.dialect) for p in node.expressions]
            node.meta[_ONE_ROW] = any(aggregating or unknown is not None for aggregating, unknown in verdicts)
        if order is not None and any(_orders_by_all(o.this) for o in order.expressions if isinstance(o, exp.Ordered)):
            self.order_by_all(node, order)
        scope = _Scope()
        from_ = args.get("from_")
        joins = [] if from_ is None else self.from_items(from_.this, args.get("joins") or (), scope, outer, ctes)
        chain = (scope, *outer)
        projections = node.expressions
        # (before the list is resolved: that drops a `* RENAME (..)`'s names)
        stars = {id(p): self.star_columns(p, scope) for p in projections if _is_star(p)} if keep_aliases else {}
        self.expression(projections, scope, chain, ctes, {}, "select")
        aliases: dict[str, exp.Expression] = {}
        names: list | None = []
        for projection in projections:
            if type(projection) is exp.Alias:
                self.named(projection)
                alias = self.fold(projection.alias, projection.args["alias"])
                aliases[alias] = projection.this
                if keep_aliases:
                    if names is not None:
                        names.append(alias)
                    self.set_name(projection.args["alias"], alias)
                else:
                    projection.replace(projection.this)
            elif id(projection) in stars:
                columns = stars[id(projection)]
                names = None if columns is None or names is None else names + sorted(columns)
            elif keep_aliases and names is not None:
                names.append(self.fold(projection.alias_or_name, projection.this)
                             if self.cased and type(projection) is exp.Column
                             else projection.alias_or_name.lower())
        for join in joins:
            join_args = join.args
            for key in ("on", "using", "match_condition"):  # (Snowflake's ASOF JOIN .. MATCH_CONDITION (..))
                if join_args.get(key) is not None:
                    self.expression([join_args[key]], scope, chain, ctes, {}, "on")
        for key in ("where", "group", "having", "qualify", "order", "limit", "offset"):
            clause = args.get(key)
            if clause is not None:
                self.expression([clause], scope, chain, ctes, aliases, key)
        if args.get("windows"):  # WINDOW w AS (PARTITION BY a ..): read where `OVER w` is (rat.tree)
            self.expression(list(args["windows"]), scope, chain, ctes, {}, "window")
        distinct = args.get("distinct")
        if distinct is not None and distinct.args.get("on") is not None:
            # DISTINCT ON (..) reads its keys as ORDER BY does (output names included).
            self.expression([distinct.args["on"]], scope, chain, ctes, aliases, "order")
        if args.get("group") is not None or args.get("order") is not None:
            self.ordinals(node)
        for qualifier in scope.shadowed:
            self.rename(scope, qualifier, chain)
        return names

    def star_columns(self, star: exp.Expression, scope: _Scope) -> frozenset | None:
        """The columns a select item `*` or `t.*` (`star`) stands for: those of every FROM item of
        `scope`, or of `t`'s, less an EXCLUDE / EXCEPT list's; None where one's columns are unknown
        (a table the schema lacks, no schema), and for Snowflake's `* RENAME` and `* ILIKE`."""
        if type(star) is exp.Column:
            table, star = star.args.get("table"), star.this
            qualifier = scope.aliases.get(self.fold(table.name, table)) if isinstance(table, exp.Identifier) else None
            sources = [scope.sources.get(qualifier) if qualifier is not None else None]
        else:
            sources = list(scope.sources.values())
        if None in sources or star.args.get("rename") or star.args.get("ilike"):
            return None
        columns = frozenset().union(*sources)
        for dropped in star.args.get("except_") or ():
            columns -= {self.fold(dropped.name, dropped.this if type(dropped) is exp.Column else dropped)}
        return columns

    def from_items(self, first: exp.Expression, joins, scope: _Scope, outer: tuple, ctes: dict) -> list[exp.Join]:
        """Resolve the FROM items `first` and `joins`' into `scope`: a parenthesised join's (`(a
        JOIN b ON ..) JOIN c`) are the FROM's, as written without the parentheses. Every join,
        those in parentheses too, whose conditions are resolved after the SELECT list."""
        every = []
        for k, item in enumerate([first, *(j.this for j in joins)]):
            join = joins[k - 1] if k else None
            if join is not None:
                if _always_true(join.args.get("on")) and not join.side:
                    join.set("on", None)  # `JOIN u ON (1 = 1)` (sqlglot's T-SQL for `JOIN u`)
                if join.args.get("method") == "NATURAL":
                    self.natural_to_using(join, first, joins)
                if isinstance(join.args.get("using"), list) and not join.args["using"]:
                    raise ParseError("cannot parse (JOIN .. USING without its columns)", self.sql)
                if join.args.get("using"):
                    self.using_to_on(join, first, joins)
            inner = parenthesised_join(item)
            if inner is None:
                self.source(item, scope, outer, ctes)
            else:
                every += self.from_items(inner, inner.args["joins"], scope, outer, ctes)
            if join is not None:
                every.append(join)
        return every

    def outputs(self, node: exp.Select, clause: str) -> list[exp.Expression]:
        """The SELECT's output expressions, for `GROUP BY ALL` / `ORDER BY ALL` (`clause`)."""
        outputs = [p.this if type(p) is exp.Alias else p for p in node.expressions]
        if any(isinstance(o, exp.Star) or type(o) is exp.Column and isinstance(o.this, exp.Star) for o in outputs):
            raise RATError(f"unsupported construct {clause!r} after a '*' (name its columns)", self.sql)
        return outputs

    def group_by_all(self, node: exp.Select, group: exp.Group) -> exp.Group | None:
        """DuckDB's, Snowflake's, BigQuery's `GROUP BY ALL`: by the SELECT's expressions without
        an aggregate (or a window), as if written out; after a lone `*` (every column, grouped:
        the distinct rows), `SELECT DISTINCT *` and no group (None). `GROUP BY ALL | DISTINCT
        <keys>` is PostgreSQL's and Trino's set quantifier (`_GROUP_BY_QUANTIFIER`): ALL, the
        default, keeps repeated grouping sets, DISTINCT drops them, so both are `GROUP BY <keys>`
        but DISTINCT of grouping sets (refused); SQL Server's `GROUP BY ALL <keys>` keeps the groups
        its WHERE removes, and the others have neither: refused."""
        written = "ALL" if group.args["all"] else "DISTINCT"
        name = self.dialect.name
        if group.expressions:
            if name == "tsql" and written == "ALL":
                raise RATError("unsupported construct 'GROUP BY ALL <keys>' (tsql: it keeps the groups the WHERE "
                               "removes, aggregating no rows; GROUP BY <keys> drops them)", self.sql)
            if name not in _GROUP_BY_QUANTIFIER:
                alone = ": its GROUP BY ALL takes no keys" if written == "ALL" and self.dialect.group_by_all else ""
                raise RATError(f"unsupported construct 'GROUP BY {written} <keys>' ({name} has none{alone})", self.sql)
            if written == "DISTINCT" and any(isinstance(k, _GROUPING_SETS) for k in group.expressions):
                raise RATError("unsupported construct 'GROUP BY DISTINCT' of grouping sets (it drops the "
                               "repeated grouping sets)", self.sql)
            group.set("all", None)
            return group
        if written == "DISTINCT":
            raise ParseError("cannot parse (GROUP BY DISTINCT without its keys)", self.sql)
        group.set("all", None)
        if not self.dialect.group_by_all:
            raise RATError("unsupported construct 'GROUP BY ALL'", self.sql)
        if [type(p) for p in node.expressions] == [exp.Star] and not node.args.get("having"):
            node.set("group", None)
            node.set("distinct", exp.Distinct())
            return None
        keys = [o.copy() for o in self.outputs(node, "GROUP BY ALL") if not self.aggregates(o)]
        if not keys:
            raise RATError("unsupported construct 'GROUP BY ALL' of aggregates alone", self.sql)
        group.set("expressions", keys)
        return group

    def aggregates(self, expression: exp.Expression) -> bool:
        """Whether a SELECT list's `expression` (as written) aggregates or is a window's
        (`aggregates`). A call of a function not known to aggregate or not is refused: grouped
        by, it would be a key."""
        if expression.find(exp.Window):
            return True
        aggregating, unknown = aggregates(expression, self.dialect)
        if unknown is not None and not aggregating:
            raise RATError(f"unsupported construct 'GROUP BY ALL' with {unknown.name}(..) (a function not known "
                           "to aggregate or not: write the GROUP BY keys)", self.sql)
        return aggregating

    def order_by_all(self, node: exp.Select, order: exp.Order) -> None:
        """DuckDB's `ORDER BY ALL [DESC]`: by the SELECT's expressions, left to right."""
        if not self.dialect.order_by_all or len(order.expressions) != 1:
            raise RATError("unsupported construct 'ORDER BY ALL'", self.sql)
        (written,) = order.expressions
        order.set("expressions", [exp.Ordered(this=o.copy(), desc=written.args.get("desc"),
                                              nulls_first=written.args.get("nulls_first"))
                                  for o in self.outputs(node, "ORDER BY ALL")])

    def check_windows(self, node: exp.Select) -> None:
        """A SELECT's named windows (`WINDOW w AS (..)`) are each defined once. (The tree's
        builder takes the clauses a window does not write from the one it names, `rat.tree`, so
        that a named window and the same window written out get one tree, each node with its
        own text.)"""
        defined: set[str] = set()
        for definition in node.args["windows"]:
            name = definition.name.lower()
            if name in defined:
                raise RATError(f"window {definition.name!r} is defined twice", self.sql)
            defined.add(name)

    def ordinals(self, node: exp.Select) -> None:
        """`GROUP BY 1` / `ORDER BY 2 DESC`: an integer names the k-th output column, which
        replaces it (resolved already), so that `GROUP BY 1` and `GROUP BY name` get one tree.
        Kept as written where a `*` comes first (its columns are not counted here), past the
        last output, and for T-SQL's GROUP BY (which has no ordinals)."""
        outputs = [p.this if type(p) is exp.Alias else p for p in node.expressions]
        stars = [k for k, p in enumerate(outputs) if isinstance(p, exp.Star) or
                 (type(p) is exp.Column and isinstance(p.this, exp.Star))]
        first_star = stars[0] if stars else len(outputs)
        items = []
        if node.args.get("group") is not None and self.dialect.name != "tsql":
            items += node.args["group"].expressions
        if node.args.get("order") is not None:
            items += [o.this for o in node.args["order"].expressions if type(o) is exp.Ordered]
        for item in items:
            if type(item) is exp.Literal and not item.is_string and item.this.isdigit():
                k = int(item.this)
                if 1 <= k <= first_star:
                    item.replace(outputs[k - 1].copy())

    def natural_to_using(self, join: exp.Join, first: exp.Expression, joins) -> None:
        """`a NATURAL JOIN b` is `a JOIN b USING (the columns of b that an earlier table has)`,
        by the schema (a CROSS JOIN where they share none); refused where a table's columns are
        unknown."""
        tables = [first] + [j.this for j in joins[: joins.index(join) + 1]]
        columns = [self.schema.tables.get(t.name.lower()) if self.schema is not None and isinstance(t, exp.Table)
                   else None for t in tables]
        if None in columns:
            raise RATError("unsupported construct 'NATURAL JOIN' (of a table not in the schema, or a subquery)",
                           self.sql)
        earlier = set().union(*columns[:-1])
        join.set("method", None)
        join.set("using", [exp.to_identifier(c) for c in columns[-1] if c in earlier] or None)

    def using_to_on(self, join: exp.Join, first: exp.Expression, joins) -> None:
        """`JOIN u USING (c)` is `JOIN u ON <left>.c = u.c`, the left table being the nearest
        earlier source that has `c` (by the schema), else the one just before the join. DuckDB's
        `ASOF JOIN u USING (k, t)` (no MATCH_CONDITION) is `ON <left>.k = u.k AND <left>.t >= u.t`:
        its last column is the inequality."""
        inequality = join.args.get("method") == "ASOF" and join.args.get("match_condition") is None
        earlier = [first] + [j.this for j in joins[: joins.index(join)]]
        if not earlier or not all(isinstance(t, exp.Table) for t in (*earlier, join.this)):
            raise RATError("unsupported construct 'USING' (join of a subquery)", self.sql)
        conditions = []
        for ident in join.args["using"]:
            name = ident.name
            left = earlier[-1]
            if self.schema is not None:
                having = [t for t in earlier if name.lower() in self.schema.tables.get(t.name.lower(), ())]
                left = having[-1] if having else left
            compare = exp.GTE if inequality and ident is join.args["using"][-1] else exp.EQ
            conditions.append(compare(this=exp.column(name, table=left.alias_or_name),
                                      expression=exp.column(name, table=join.this.alias_or_name)))
        join.set("using", None)
        join.set("on", exp.and_(*conditions) if len(conditions) > 1 else conditions[0])

    def rename(self, scope: _Scope, qualifier: str, chain) -> None:
        taken = {q for s in chain for q in s.sources}
        node = scope.nodes.pop(qualifier)
        base = "derived" if qualifier in scope.derived else self.fold(node.name, node.this)
        k = 2
        while _suffixed(base, k) in taken:
            k += 1
        new = _suffixed(base, k)
        scope.sources[new] = scope.sources.pop(qualifier)
        scope.nodes[new] = node
        if qualifier in scope.derived:
            scope.derived.discard(qualifier)
            scope.derived.add(new)
        node.set("alias", exp.TableAlias(this=self.identifier(new)))
        for identifier in scope.references:
            if identifier.this == qualifier:
                self.set_name(identifier, new)

    def source(self, node: exp.Expression, scope: _Scope, outer: tuple, ctes: dict) -> None:
        pivots = node.args.get("pivots")
        if pivots:  # `t PIVOT (...)`: sqlglot keeps it on the table
            self.pivot(node, scope, outer, ctes)
            return
        if isinstance(node, exp.Table):
            args = node.args
            if not isinstance(node.this, exp.Identifier):  # `FROM generate_series(..)`, `json_each(..)`
                call = node.this
                if call is None:  # PostgreSQL's ROWS FROM (f(..), g(..)): functions' rows side by side
                    raise RATError("unsupported construct 'ROWS FROM (..)'", self.sql)
                if isinstance(call, exp.Anonymous) and call.name.upper() == "TABLE" \
                        and len(call.expressions) == 1 and isinstance(call.expressions[0], exp.Func):
                    node.set("this", call.expressions[0])  # Snowflake's TABLE(FLATTEN(..)): its rows
                self.table_function(node, [node.this], scope, outer, ctes)
                return
            sample = args.get("sample")  # a share or number of its rows, where the dialect has it
            if sample is not None and not (self.dialect.table_sample and (sample.args.get("percent")
                                                                        or sample.args.get("size"))):
                raise RATError("unsupported construct 'TABLESAMPLE'", self.sql)
            if args.get("when") or args.get("version") or args.get("changes"):  # its rows at another time
                raise RATError("unsupported construct 'AT (..)' / 'FOR SYSTEM_TIME AS OF' / 'CHANGES'", self.sql)
            if args.get("partition"):  # MySQL's t PARTITION (p0): some of its rows
                raise RATError("unsupported construct 'PARTITION (..)'", self.sql)
            name = self.fold(node.name, node.this)
            if self.dialect is not SQLITE and node._meta:  # BigQuery's `proj.ds.t`
                node._meta.pop("quoted_table", None)
            other = None if args.get("db") is None else self.other_schema(node, name)
            if "db" in args or "catalog" in args:
                node.set("catalog", None)
                if other is None:
                    node.set("db", None)
                else:
                    self.set_name(args["db"], other)
            self.set_name(node.this, name)
            columns = ctes.get(name)  # (None: a CTE's unknown, `star_columns`)
            # another schema's `s.t` is the schema's table `s.t` (its columns unknown if it lacks it)
            table = name if other is None else f"{other}.{name}"
            if name not in ctes and self.schema is not None:
                columns = self.schema.columns(table)
            self.named(node.args.get("alias"))
            alias = self.fold(node.alias, node.args.get("alias") and node.args["alias"].this)
            # A CTE is read as the subquery it names (`derived`), a table by its own name.
            qualifier = self.qualifier("derived" if name in ctes else table, scope)
            if name in ctes:
                scope.derived.add(qualifier)
            scope.sources[qualifier] = columns
            scope.nodes[qualifier] = node
            scope.aliases[alias or name] = qualifier
            if alias and alias != name and name not in scope.aliases:
                scope.aliases[name] = qualifier
                scope.implicit.add(name)
            elif not alias or alias == name:
                scope.implicit.discard(name)
            if qualifier == name:
                node.set("alias", None)
            else:
                node.set("alias", exp.TableAlias(this=self.identifier(qualifier)))
        elif isinstance(node, exp.Subquery):
            names = self.query(node.this, outer, ctes, keep_aliases=True)
            self.derived_source(node, node.args.get("alias"), _columns(names), scope)
        elif isinstance(node, exp.Lateral):  # reads the FROM items before it
            apply = node.args.get("cross_apply") is not None  # SQL Server's CROSS / OUTER APPLY
            if node.args.get("view"):  # (Hive's LATERAL VIEW)
                raise RATError("unsupported construct 'LATERAL'", self.sql)
            if self.dialect.lateral != ("CROSS APPLY" if apply else "LATERAL"):
                self.refuse_lateral(node, apply)
            if isinstance(node.this, exp.Subquery):
                names = self.query(node.this.this, (scope, *outer), ctes, keep_aliases=True)
                alias = node.args.get("alias") or node.this.args.get("alias")
                self.derived_source(node, alias, _columns(names), scope)
            else:
                self.table_function(node, [node.this], scope, outer, ctes)
        elif isinstance(node, exp.Unnest):
            self.table_function(node, node.expressions, scope, outer, ctes)
        elif isinstance(node, exp.Values):  # (VALUES (1, 'a'), (2, 'b')) AS v(id, name)
            self.expression(node.expressions, scope, (scope, *outer), ctes, {}, "from")
            first = node.expressions[0] if node.expressions else None
            width = len(first.expressions) if isinstance(first, exp.Tuple) else 1
            # unnamed, its columns are column1, column2, ... (SQLite, PostgreSQL, DuckDB)
            self.derived_source(node, node.args.get("alias"),
                                frozenset(f"column{k}" for k in range(1, width + 1)), scope)
        else:
            raise RATError(f"unsupported construct {construct_name(node)!r} in FROM", self.sql)

    def refuse_lateral(self, node: exp.Lateral, apply: bool) -> None:
        """A RATError for a FROM item reading the ones before it written as the dialect does not:
        SQL Server's CROSS / OUTER APPLY elsewhere, LATERAL in SQL Server; with what it writes."""
        name, lateral = self.dialect.name, self.dialect.lateral
        outer = node.args.get("cross_apply") is False
        construct = ("OUTER APPLY" if outer else "CROSS APPLY") if apply else "LATERAL"
        if lateral == "LATERAL":
            instead = "LEFT JOIN LATERAL (..) ON TRUE" if outer else ", LATERAL (..) or JOIN LATERAL (..)"
        else:
            instead = "CROSS APPLY (..), or OUTER APPLY (..) for LEFT JOIN LATERAL" if lateral else ""
        raise RATError(f"unsupported construct {construct!r} ({name} has none{': ' + instead if instead else ''})",
                       self.sql)

    def named(self, alias: exp.Expression | None) -> None:
        """A RATError for an alias (a FROM item's `exp.TableAlias`, a column's `exp.Alias`) that is
        a placeholder: sqlglot reads `FROM t ?`, `FROM t AS :p`, `SELECT a AS ?` so, and no database."""
        if alias is not None and isinstance(alias.args.get("alias" if type(alias) is exp.Alias else "this"),
                                            exp.Placeholder | exp.Parameter):
            raise ParseError(f"cannot parse (a placeholder as an alias: {alias.sql(dialect=sqlglot_dialect(self.dialect))!r})",
                             self.sql)

    def derived_source(self, node: exp.Expression, alias: exp.TableAlias | None,
                       columns: frozenset | None, scope: _Scope, numbered: frozenset = frozenset()) -> None:
        """A FROM item read as a derived table (a subquery, a table function): ``derived``,
        ``derived_2``, ... with the columns its alias names (``AS s(x, y)``), else `columns`
        (None: unknown), and the `numbered` ones (a row number's)."""
        self.named(alias)
        if alias is not None and alias.columns:
            columns = frozenset(self.fold(c.name, c) for c in alias.columns)
        if columns is not None:
            columns |= numbered
        qualifier = self.qualifier("derived", scope)
        scope.derived.add(qualifier)
        scope.sources[qualifier] = columns
        scope.nodes[qualifier] = node
        name = self.fold(alias.name, alias.this) if alias is not None and alias.name else ""
        if name:
            scope.aliases[name] = qualifier
        node.set("alias", exp.TableAlias(this=exp.to_identifier(qualifier),
                                         columns=alias.columns if alias is not None else None))

    def pivot(self, node: exp.Expression, scope: _Scope, outer: tuple, ctes: dict) -> None:
        """`t PIVOT (agg(v) FOR k IN (a, b)) AS p`: the aggregates and `k` read `t` alone; its rows
        are a derived table whose columns are t's others (by which it groups) and one per value
        (as the dialect names them: sqlglot's). `t UNPIVOT (v FOR k IN (a, b))`: the columns `a`,
        `b` read `t`; its rows' columns are t's others, `k` and `v`. `t` is a table or a subquery
        (SQL Server's habit); a pivot of anything else, and one where the dialect lacks it, are
        refused."""
        pivot = node.args["pivots"][0]
        unpivot = bool(pivot.args.get("unpivot"))
        if not self.dialect.pivot or len(node.args["pivots"]) > 1 or not (
                isinstance(node, exp.Subquery) or isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier)):
            raise RATError(f"unsupported construct {'UNPIVOT' if unpivot else 'PIVOT'!r}", self.sql)
        for field in pivot.args.get("fields") or []:  # SQL Server's IN ([open], [closed]): the values
            for value in field.expressions if isinstance(field, exp.In) and not unpivot else ():
                if type(value) is exp.Column and value.args.get("table") is None:
                    value.replace(exp.Literal.string(value.name))
        read = _Scope()
        node.set("pivots", None)
        self.source(node, read, outer, ctes)
        node.set("pivots", [pivot])
        chain = (read, *outer)
        fields = pivot.args.get("fields") or []
        if unpivot:  # (the names `v`, `k` are the new columns': nothing to resolve)
            self.expression([c for f in fields for c in f.expressions], read, chain, ctes, {}, "pivot")
        else:
            self.expression([*pivot.expressions, *fields], read, chain, ctes, {}, "pivot")
        for qualifier in read.shadowed:
            self.rename(read, qualifier, chain)
        table_columns = next(iter(read.sources.values()), None)  # (the one source read)
        columns = None
        if table_columns is not None and unpivot and all(isinstance(f, exp.In) for f in fields):
            unpivoted = {c.name for f in fields for c in f.expressions}
            names = [*pivot.expressions, *(f.this for f in fields)]
            columns = (table_columns - unpivoted) | {self.fold(n.name, n) for n in names}
        elif table_columns is not None and all(isinstance(f, exp.In) for f in fields):
            used = {c.name for e in [*pivot.expressions, *fields] for c in e.find_all(exp.Column)}
            named = pivot.args.get("columns") or [e for f in fields for e in f.expressions]
            columns = (table_columns - used) | {self.fold(c.name, c) if isinstance(c, exp.Identifier)
                                                else c.alias_or_name.lower() for c in named}
        self.derived_source(pivot, pivot.args.get("alias"), columns, scope)

    def table_function(self, node: exp.Expression, calls: list, scope: _Scope, outer: tuple,
                       ctes: dict) -> None:
        """A function in FROM (`generate_series(1, 5) AS g(k)`, `unnest(t.tags) AS tag`, SQLite's
        `json_each(t.j)`): its arguments read the FROM items before it, its rows are a derived
        table whose columns are the alias's, else those `_TABLE_FUNCTION_COLUMNS` knows, and
        the row numbers' of `WITH ORDINALITY` / BigQuery's `WITH OFFSET` (sqlglot keeps an
        unnest's as its `offset`, its name apart from the alias's: named `ordinality` / `offset`
        where the query does not name it)."""
        offset = node.args.get("offset")
        numbered = frozenset()
        if isinstance(offset, exp.Identifier):
            numbered = frozenset({self.fold(offset.name, offset)})
        elif offset or node.args.get("ordinality"):  # (a function's `WITH ORDINALITY`: `ordinality`)
            numbered = frozenset({"offset" if self.dialect.name == "bigquery" else "ordinality"})
        call = calls[0] if len(calls) == 1 else None
        if isinstance(call, exp.Table | exp.Subquery | exp.Select) or not calls:
            raise RATError(f"unsupported construct {construct_name(node)!r} in FROM", self.sql)
        self.expression(calls, scope, (scope, *outer), ctes, {}, "from")
        alias = node.args.get("alias")
        function = "unnest" if isinstance(node, exp.Unnest) else \
            (call.name.lower() if isinstance(call, exp.Anonymous) else "")
        columns = _TABLE_FUNCTION_COLUMNS.get(function)
        if columns == ():  # one column, named by the alias (PostgreSQL) or the function
            name = self.fold(alias.name, alias.this) if alias is not None and alias.name else ""
            columns = (function, name) if name else (function,)
        self.derived_source(node, alias, frozenset(columns) if columns else None, scope, numbered)

    def other_schema(self, table: exp.Table, name: str) -> str | None:
        """The schema written before table `name` (lowercased) where the schema reads `name`
        from another one (`Schema.table_schemas`): that ``s.t`` is another table. Else None:
        the schema is dropped, as it is where the schema does not say."""
        db = table.args.get("db")
        if db is None or self.schema is None or not self.schema.table_schemas:
            return None
        read_from = self.schema.table_schemas.get(name)
        written = db.name.lower()
        return written if read_from is not None and written != read_from else None

    @staticmethod
    def qualifier(name: str, scope: _Scope) -> str:
        # A self-join's second occurrence of `t` is `t_2`, its third `t_3`, ...
        if name not in scope.sources:
            return name
        k = 2
        while _suffixed(name, k) in scope.sources:
            k += 1
        return _suffixed(name, k)

    # ---- expressions ------------------------------------------------------------------
    def expression(self, roots: list, scope, chain, ctes, aliases, clause) -> None:
        """Resolve the expressions `roots` of one clause in place, in order."""
        stack = roots[::-1]
        while stack:
            current = stack.pop()
            kind = type(current)
            if kind is exp.Column:
                self.column(current, scope, chain, aliases, clause)
                continue
            if kind is exp.Literal:  # the commonest leaf: nothing to resolve below it
                continue
            if (kind is exp.CurrentUser or kind is exp.SessionUser) and current.this is None:
                # sqlglot's reading of a bare CURRENT_USER / SESSION_USER (a call's name is renamed)
                word = "current_user" if kind is exp.CurrentUser else "session_user"
                function = self.user_function(word, chain, aliases, written_as_call=True)
                if function is None:  # a name in this dialect
                    column = exp.Column(this=exp.Identifier(this=word, quoted=False))
                    current.replace(column)
                    self.column(column, scope, chain, aliases, clause)
                elif function is not kind:  # DuckDB's SESSION_USER: its CURRENT_USER
                    current.replace(function())
                continue
            if isinstance(current, _QUERY):
                self.query(current, chain, ctes, keep_aliases=False)
                continue
            if self.dialect.name in _KEYED_FIELDS and (kind is exp.Bracket or kind is exp.Anonymous):
                field = _as_field(current, self.dialect)
                if field is not None:
                    current.replace(field)
                    current, kind = field, exp.Dot
            if kind is exp.Anonymous and self.dialect is not SQLITE:
                current = _one_spelling(current, current.name.lower(), self.dialect)
                kind = type(current)
            if kind is exp.Anonymous:
                name = current.name.lower()
                current.set("this", _SAME_FUNCTIONS.get(name, name))
                if name != "date_part" or self.dialect.name in BARE_DATE_PART:
                    _date_part(current, name, self.dialect)
                if self.dialect is not SQLITE:
                    _as_sqlite_function(current, name, self.dialect)
                _distinct_then_separator(current, name)
                if name == "lag" or name == "lead":
                    _default_offset(current)
                if name == "concat":
                    _text_casts_dropped(current, self.dialect)
            elif kind is exp.StrPosition and not current.args.get("position"):  # POSITION(a IN b)
                call = exp.Anonymous(this="instr", expressions=[current.this, current.args["substr"]])
                current.replace(call)
                current = call
            elif kind is exp.Substring:  # SUBSTRING(x FROM a FOR b): substr(x, a, b)
                call = exp.Anonymous(this="substr", expressions=[
                    current.args[k] for k in ("this", "start", "length") if current.args.get(k)])
                current.replace(call)
                current = call
            elif kind is exp.Count:
                _count_star(current)
            elif kind is exp.Extract and self.dialect.name in _EXTRACT_ABBREVIATIONS \
                    and type(current.this) is exp.Var:  # Snowflake's EXTRACT(yy FROM d): EXTRACT(year FROM d)
                part = current.this.name.lower()
                part = _DATE_PART_ABBREVIATIONS[self.dialect.name].get(part, part)
                current.set("this", exp.Var(this=part.upper()))
            elif kind is exp.Any and _any_aggregate(current, self.dialect):  # Databricks' any(x): bool_or(x)
                call = exp.Anonymous(this="bool_or", expressions=[current.this.this])
                current.replace(call)
                current = call
            elif kind is exp.Case and current.args.get("this") is not None:
                self.simple_case = True
            elif kind is exp.Between:
                self.between = True
                if current.args.get("symmetric") and not self.dialect.between_symmetric:
                    raise RATError("unsupported construct 'BETWEEN SYMMETRIC'", self.sql)
            elif kind is exp.Star and current.args:
                _plain_star(current, self.sql, self.dialect)
            elif kind is exp.Concat or kind is exp.DPipe:
                _text_casts_dropped(current, self.dialect)
            elif kind is exp.Introducer and current.name.lower() != "_binary" \
                    and type(current.expression) is exp.Literal and current.expression.is_string:
                current.replace(current.expression)  # MySQL's _utf8mb4'x': the string 'x' (_binary'x': bytes)
                continue
            elif kind is exp.SafeFunc:  # BigQuery's SAFE.f(x) is f(x) (NULL for an error), as SAFE_CAST is CAST
                call = current.this
                current.replace(call)
                stack.append(call)
                continue
            if self.dialect.name in _STRING_AGG and (kind is exp.WithinGroup or kind is exp.Anonymous
                                                     and type(current.parent) is not exp.WithinGroup):
                concat = _as_group_concat(current)  # (a WITHIN GROUP's string_agg: with its ordering)
                if concat is not None:
                    current.replace(concat)
                    current = concat
            stack.extend(current.iter_expressions())

    def column(self, column: exp.Column, scope: _Scope, chain, aliases, clause) -> None:
        args = column.args
        if self.dialect.struct_fields and args.get("table") is not None:
            field = self.struct_field(column, chain)
            if field is not None:
                column.replace(field)
                column = field.find(exp.Column)  # the struct's column, under its fields
                args = column.args
        if "db" in args or "catalog" in args:
            for key in ("db", "catalog"):
                if args.get(key) is not None:
                    column.set(key, None)
        identifier = args.get("this")
        table = args.get("table")
        if isinstance(identifier, exp.Star):
            if identifier.args:
                _plain_star(identifier, self.sql, self.dialect)
                self.expression(identifier.args.get("except_") or [], scope, chain, {}, {}, clause)
                self.expression([a.this for a in identifier.args.get("replace") or []], scope, chain, {}, {},
                                clause)
            if table is not None:
                self.resolve_table(table, chain)
            return
        if not isinstance(identifier, exp.Identifier):  # `a.(*)`, `a.(b)`, `a.?`: sqlglot's column of no name
            raise ParseError("cannot parse (a name is expected after '.')", self.sql)
        written = identifier.this
        name = self.fold(written, identifier) if self.cased else written.lower()
        if table is not None:
            self.set_name(identifier, name)
            self.resolve_table(table, chain)
            return
        if self.users and not identifier.quoted:
            function = self.user_function(written.lower(), chain, aliases, written_as_call=False)
            if function is not None:  # PostgreSQL's `user`: CURRENT_USER, not a column
                column.replace(function())
                return
        double_quoted = identifier.quoted and self.dialect.double_quoted_strings \
            and self._quote_char(identifier) == '"'
        owners = [q for q, cols in scope.sources.items() if cols is not None and name in cols]
        if clause == "order" and name in aliases and (not owners or self.dialect.name == "mysql"
                                                      or _bare_order_key(column)):
            # an output name, where it is the key itself; inside an expression (`ORDER BY name ||
            # ''`) SQLite, PostgreSQL and DuckDB read a column of the FROM tables first (MySQL the
            # output name)
            column.replace(aliases[name].copy())
            return
        if len(owners) == 1:
            self._qualify(column, identifier, name, owners[0], scope)
            return
        if owners:  # ambiguous: keep it unqualified, as written
            self.set_name(identifier, name)
            return
        if name in aliases and clause in ("where", "group", "having", "qualify"):
            column.replace(aliases[name].copy())
            return
        for outer_scope in chain[1:]:
            owners = [q for q, c in outer_scope.sources.items() if c is not None and name in c]
            if len(owners) == 1:
                self._qualify(column, identifier, name, owners[0], outer_scope)
                if owners[0] in scope.sources:
                    scope.shadowed.add(owners[0])
                return
        all_known = bool(scope.sources) and all(c is not None for c in scope.sources.values())
        if double_quoted and (all_known or not scope.sources or self.schema is None):
            # SQLite reads a "..." that names no column or output alias, here or in an outer
            # query, as a string literal (Spider writes values so).
            column.replace(exp.Literal.string(written))
            return
        unknown = [q for q, cols in scope.sources.items() if cols is None]
        if len(scope.sources) == 1 and unknown:
            self._qualify(column, identifier, name, unknown[0], scope)
            return
        self.set_name(identifier, name)

    def user_function(self, word: str, chain, aliases, written_as_call: bool) -> type | None:
        """The current-user function (`exp.CurrentUser`, `exp.SessionUser`) an unquoted, unqualified
        `word` is here (`_USER_FUNCTIONS`), or None where it is a name. Where the dialect reads a
        column of that name first (`_USER_NAMES_FIRST`), it is one where a FROM table (or an output
        name) has the name; where the tables' columns are not all known, as sqlglot reads it
        (`written_as_call`: its CURRENT_USER / SESSION_USER; a column `user`)."""
        function = self.users.get(word)
        if function is None or self.dialect.name not in _USER_NAMES_FIRST:
            return function
        columns = [c for scope in chain for c in scope.sources.values()]
        if word in aliases or any(c is not None and word in c for c in columns):
            return None
        return function if written_as_call or all(c is not None for c in columns) else None

    def struct_field(self, column: exp.Column, chain) -> exp.Dot | None:
        """A struct column's field written as a column (`Dialect.struct_fields`): `c.f`, `t.c.f`,
        `c.f.g`, `s.t.c.f` read as `Dot(c, f)` (sqlglot's field access), where the first name is
        no table or alias in scope but a column of one; a table's name or alias wins (DuckDB's and
        Databricks' rule; today's reading elsewhere). None where the name has no field: `t.c`, `s.t.c`, or a
        first name that is neither (a schema's, or a column not known: without a schema, `c.f`
        stays a table's column, as an undefined alias's `t2.c` does)."""
        parts = column.parts  # (catalog, db, table, column: those written)
        if not isinstance(parts[-1], exp.Identifier):  # `t.*`
            return None
        names = [self.fold(p.name, p) for p in parts]
        tables = {name for scope in chain for name in scope.aliases}
        if names[0] not in tables and any(names[0] in columns for scope in chain
                                          for columns in scope.sources.values() if columns):
            start = -1  # `c.f`: the column, unqualified
        else:  # `t.c.f`, or a schema's `s.t.c.f`
            start = next((k for k in range(min(3, len(parts) - 2)) if names[k] in tables), None)
            if start is None:
                return None
        read = exp.Column(this=parts[start + 1], table=parts[start] if start >= 0 else None)
        for field in parts[start + 2:]:
            read = exp.Dot(this=read, expression=field)
        return read

    def _quote_char(self, identifier: exp.Identifier) -> str:
        start = identifier.meta.get("start")
        return self.sql[start] if start is not None and start < len(self.sql) else '"'

    def _qualify(self, column, identifier, name, qualifier, owner: _Scope) -> None:
        self.set_name(identifier, name)
        if self.cased:
            table = exp.Identifier()
            self.set_name(table, qualifier)
        else:
            table = exp.Identifier(this=qualifier, quoted=_quoted(qualifier, self.dialect))
        column.set("table", table)
        owner.references.append(table)

    def resolve_table(self, table: exp.Identifier, chain) -> None:
        """Point a column's table qualifier (alias or name) at its scope's canonical name."""
        name = self.fold(table.name, table)
        for depth, scope in enumerate(chain):
            if name in scope.aliases:
                if name in scope.implicit and any(name in outer.aliases and name not in outer.implicit
                                                  for outer in chain[depth + 1:]):
                    continue  # `orders.c` under `FROM orders o2` in a subquery of `FROM orders`: the outer one
                qualifier = scope.aliases[name]
                self.set_name(table, qualifier)
                scope.references.append(table)
                if depth > 0 and qualifier in chain[0].sources:
                    chain[0].shadowed.add(qualifier)
                return
        self.set_name(table, name)
