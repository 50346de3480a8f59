"""Names that are keywords, quoted names and the SQL standard's niladic user functions: how `rat`
reads them per dialect, how canonical SQL writes them, and the messages and errors around them."""

import pickle
import re
import sqlite3

import pytest

import rat
from rat.errors import DepthError, InternalError, ParseError, RATError

# ---------------------------------------------------------------- USER, CURRENT_USER, SESSION_USER


@pytest.mark.parametrize("sql, dialect, expected", [
    # PostgreSQL, Redshift, SQL Server: USER is a reserved word, the current user (CURRENT_USER)
    ("SELECT user FROM acct", "postgres", "((Current_user)(acct)Project)"),
    ("SELECT current_user FROM acct", "postgres", "((Current_user)(acct)Project)"),
    ("SELECT session_user FROM acct", "postgres", "((Session_user)(acct)Project)"),
    ("SELECT a FROM acct WHERE owner = user", "postgres",
     "((acct.a)(((acct.owner)(Current_user)Eq)(acct)Selection)Project)"),
    ("SELECT user FROM acct", "redshift", "((Current_user)(acct)Project)"),
    ("SELECT session_user FROM acct", "redshift", "((Session_user)(acct)Project)"),
    ("SELECT user FROM acct", "tsql", "((Current_user)(acct)Project)"),
    ("SELECT current_user FROM acct", "tsql", "((Current_user)(acct)Project)"),
    ("SELECT session_user FROM acct", "tsql", "((Session_user)(acct)Project)"),
    # ... quoted, or after a dot, it is a name
    ('SELECT "user" FROM acct', "postgres", "((acct.user)(acct)Project)"),
    ("SELECT acct.user FROM acct", "postgres", "((acct.user)(acct)Project)"),
    ("SELECT [user] FROM acct", "tsql", "((acct.user)(acct)Project)"),
    # MySQL, Snowflake, Trino: CURRENT_USER is the function; USER and SESSION_USER are names
    ("SELECT current_user FROM acct", "mysql", "((Current_user)(acct)Project)"),
    ("SELECT current_user() FROM acct", "mysql", "((Current_user)(acct)Project)"),
    ("SELECT user FROM acct", "mysql", "((acct.user)(acct)Project)"),
    ("SELECT session_user FROM acct", "mysql", "((acct.session_user)(acct)Project)"),
    ("SELECT current_user FROM acct", "snowflake", "((Current_user)(acct)Project)"),
    ("SELECT user FROM acct", "snowflake", "((acct.user)(acct)Project)"),
    ("SELECT current_user FROM acct", "trino", "((Current_user)(acct)Project)"),
    ("SELECT user FROM acct", "trino", "((acct.user)(acct)Project)"),
    # SQLite and BigQuery have none of these words: each is a name
    ("SELECT user FROM acct", "sqlite", "((acct.user)(acct)Project)"),
    ("SELECT current_user FROM acct", "sqlite", "((acct.current_user)(acct)Project)"),
    ("SELECT session_user FROM acct", "sqlite", "((acct.session_user)(acct)Project)"),
    ("SELECT current_user FROM acct", "bigquery", "((acct.current_user)(acct)Project)"),
])
def test_user_words(sql, dialect, expected):
    assert rat.serialize(rat.to_tree(sql, None, dialect)) == expected


SCHEMA = {"acct": ["id", "user"], "plain": ["id"]}


@pytest.mark.parametrize("dialect", ["duckdb", "databricks"])
def test_user_words_read_a_column_first_where_the_database_does(dialect):
    """DuckDB and Databricks read `user`, `current_user`, `session_user` as a column where the
    FROM tables have one of that name, else as the current user (one function: documented aliases)."""
    def tree(sql, schema=SCHEMA):
        return rat.serialize(rat.to_tree(sql, schema, dialect))
    assert tree("SELECT user FROM acct") == "((acct.user)(acct)Project)"
    assert tree("SELECT user FROM plain") == "((Current_user)(plain)Project)"
    assert tree("SELECT current_user FROM plain") == "((Current_user)(plain)Project)"
    assert tree("SELECT session_user FROM plain") == "((Current_user)(plain)Project)"
    assert tree("SELECT current_user FROM t", {"t": ["current_user"]}) == "((t.current_user)(t)Project)"
    assert tree("SELECT session_user FROM t", {"t": ["session_user"]}) == "((t.session_user)(t)Project)"


def test_user_words_match_the_database_in_duckdb():
    duckdb = pytest.importorskip("duckdb")
    connection = duckdb.connect()
    connection.execute('CREATE TABLE acct (id INT, "user" TEXT); CREATE TABLE plain (id INT)')
    connection.execute("INSERT INTO acct VALUES (1, 'a column'); INSERT INTO plain VALUES (1)")
    assert connection.execute("SELECT user FROM acct").fetchall() == [("a column",)]
    assert connection.execute("SELECT user FROM plain").fetchall() == \
        connection.execute("SELECT current_user FROM plain").fetchall() != [("a column",)]


def test_sqlite_reads_current_user_as_a_name():
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE TABLE acct (current_user TEXT, session_user TEXT, user TEXT)")
    connection.execute("INSERT INTO acct VALUES ('c', 's', 'u')")
    assert connection.execute("SELECT current_user, session_user, user FROM acct").fetchall() == [("c", "s", "u")]


def test_system_user_is_refused_in_tsql():
    """SQL Server's SYSTEM_USER is the login's name, not the database user's: sqlglot reads it
    as CURRENT_USER, which it is not."""
    with pytest.raises(RATError, match="unsupported construct 'SYSTEM_USER'"):
        rat.to_tree("SELECT system_user FROM acct", None, "tsql")


@pytest.mark.parametrize("sql, dialect", [
    ("SELECT user, session_user FROM acct", "postgres"),
    ("SELECT a FROM acct WHERE owner = current_user", "postgres"),
    ("SELECT current_user FROM acct", "mysql"),
    ("SELECT user FROM acct", "tsql"),
    ("SELECT user FROM plain", "duckdb"),
    ("SELECT current_user FROM acct", "snowflake"),
])
def test_user_functions_round_trip_through_canonical_sql(sql, dialect):
    schema = SCHEMA if dialect == "duckdb" else None
    canonical = rat.canonicalize(sql, schema, dialect)
    assert rat.to_tree(canonical, schema, dialect) == rat.to_tree(sql, schema, dialect), canonical


# ---------------------------------------------------------------- messages name constructs in SQL


@pytest.mark.parametrize("sql, dialect, named", [
    ("SELECT U&'d\\0061t'", "postgres", "U&'..'"),
    ("SELECT b'abc'", "bigquery", "b'..' (bytes)"),
    ("SELECT b'0101'", "postgres", "b'..' (bits)"),
    ("SELECT E'a\\nb'", "redshift", "E'..'"),
    ("SELECT x'41'", "sqlite", "x'..' / 0x.."),
    ("SELECT 0x41", "tsql", "x'..' / 0x.."),
    ("SELECT localtimestamp", "postgres", "LOCALTIMESTAMP"),
    ("SELECT current_schema", "postgres", "CURRENT_SCHEMA"),
    ("SELECT @@version", "mysql", "@@variable"),
])
def test_unsupported_constructs_are_named_in_sql(sql, dialect, named):
    with pytest.raises(RATError) as raised:
        rat.to_tree(sql, None, dialect)
    assert str(raised.value).startswith(f"unsupported construct {named!r}"), str(raised.value)


def test_rows_from_is_refused_not_a_bug():
    with pytest.raises(RATError, match=r"^unsupported construct 'ROWS FROM \(\.\.\)'"):
        rat.to_tree("SELECT * FROM ROWS FROM (generate_series(1, 3))", None, "postgres")


def test_construct_names_fall_back_to_sqlglots():
    from sqlglot import exp

    from rat.canonicalize import construct_name
    assert construct_name(exp.UnicodeString(this="x")) == "U&'..'"
    assert construct_name(exp.Hint()) == "Hint"  # (one no message names yet)


# ---------------------------------------------------------------- reserved words in canonical SQL


NAMES = {"group": ["order", "select", "user", "date", "my col", "1x", "a-b", "id"],
         "order details": ["order", "id"]}
QUERIES = {
    "sqlite": [('SELECT "group"."order", "select", "user", "date", "my col", "1x", "a-b" FROM "group" '
               'WHERE "group"."order" = 1 GROUP BY "order" ORDER BY "group"."order"'),
               'SELECT "order details"."order" FROM "order details" ORDER BY "order details"."order"',
               'SELECT g."order" FROM "group" AS g JOIN "order details" AS o ON g.id = o.id'],
    "postgres": [('SELECT "group"."order", "select", "user", "date", "my col", "1x", "a-b" FROM "group" '
                 'WHERE "group"."order" = 1 ORDER BY "group"."order"')],
    "mysql": [("SELECT `group`.`order`, `select`, `user`, `date`, `my col`, `1x`, `a-b` FROM `group` "
              "WHERE `group`.`order` = 1")],
    "tsql": [("SELECT [group].[order], [select], [user], [date], [my col], [1x], [a-b] FROM [group] "
             "WHERE [group].[order] = 1"),
             "SELECT [order details].[order] FROM [order details] ORDER BY [order details].[order]"],
    "snowflake": ['SELECT "GROUP"."ORDER" FROM "GROUP" WHERE "GROUP"."ORDER" = 1'],
}
# The reserved words of QUERIES' names, per dialect (MySQL and SQLite have no reserved `user`)
RESERVED = {"sqlite": {"group", "order", "select"}, "mysql": {"group", "order", "select"},
            "postgres": {"group", "order", "select", "user"}, "tsql": {"group", "order", "select", "user"},
            "snowflake": {"group", "order"}}
_QUOTED_PIECES = re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`|\[[^\]]*\]")


def bare_names(canonical, dialect):
    """The reserved words written as names in `canonical` unquoted: before or after a `.`, or
    after FROM / JOIN."""
    text = _QUOTED_PIECES.sub("_", canonical)
    named = re.findall(r"(\w+)(?=\.)|(?<=\.)(\w+)|\b(?:from|join)\s+(\w+)", text)
    return sorted({w for match in named for w in match if w in RESERVED[dialect]})


def test_bare_names_finds_them():
    assert bare_names("select group.order from group where t.x = 1", "sqlite") == ["group", "order"]
    assert bare_names('select "group"."order", t.user from "group"', "postgres") == ["user"]


@pytest.mark.parametrize("dialect, sql", [(d, q) for d, qs in QUERIES.items() for q in qs])
@pytest.mark.parametrize("schema", [None, NAMES], ids=["no schema", "schema"])
def test_canonical_sql_quotes_reserved_words(dialect, sql, schema):
    canonical = rat.canonicalize(sql, schema, dialect)
    assert not bare_names(canonical, dialect), canonical
    # the same tree, labels and all: quotes change the text only
    assert rat.to_tree(canonical, schema, dialect) == rat.to_tree(sql, schema, dialect), canonical
    assert rat.serialize(rat.to_tree(canonical, schema, dialect)) == rat.serialize(rat.to_tree(sql, schema, dialect))


def test_canonical_sql_runs_in_sqlite():
    connection = sqlite3.connect(":memory:")
    connection.execute('CREATE TABLE "group" ("order" INT, "select" INT, "user" INT, "date" INT, "my col" INT, '
                       '"1x" INT, "a-b" INT, id INT)')
    connection.execute('CREATE TABLE "order details" ("order" INT, id INT)')
    for sql in QUERIES["sqlite"]:
        connection.execute(rat.canonicalize(sql, NAMES))  # no OperationalError: valid SQLite


def test_canonical_sql_runs_in_duckdb_for_postgres_names():
    """DuckDB's parser is PostgreSQL's: the names PostgreSQL reserves, it reserves too."""
    duckdb = pytest.importorskip("duckdb")
    connection = duckdb.connect()
    connection.execute('CREATE TABLE "group" ("order" INT, "select" INT, "user" INT, "date" INT, "my col" INT, '
                       '"1x" INT, "a-b" INT, id INT)')
    for sql in QUERIES["postgres"]:
        connection.execute(rat.canonicalize(sql, NAMES, "postgres"))


def test_spans_follow_quoted_names():
    sql = 'SELECT "group"."order" FROM "group" WHERE "group"."order" = 1'
    spans = rat.sql_spans(sql, None, NAMES, "postgres")
    assert spans.sql == rat.canonicalize(sql, NAMES, "postgres")
    assert spans.unmapped == 0
    labels = [n.label for n in spans.tree.postorder()]
    assert spans.text(labels.index("Eq")) == '"group"."order" = 1'


# ---------------------------------------------------------------- errors: pickling, bare SELECT


@pytest.mark.parametrize("error", [
    RATError("unsupported construct 'PIVOT'", "SELECT 1"),
    RATError("unknown dialect 'x'"),
    ParseError("cannot parse (x)", "SELEC 1"),
    DepthError("SELECT ((1))"),
    DepthError(),
    InternalError("build tree", KeyError("x"), "SELECT 1"),
])
def test_errors_pickle_round_trip(error):
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error) and copy.args == error.args
    assert vars(copy) == vars(error)


@pytest.mark.parametrize("sql", ["select", "SELECT", "SELECT   ;", "select from t", "select 1 union select",
                                 "with a as (select 1) select"])
def test_select_without_columns_is_a_parse_error(sql):
    with pytest.raises(ParseError, match=r"^cannot parse \(SELECT without result columns\)"):
        rat.to_tree(sql)
    with pytest.raises(ParseError):
        rat.canonicalize(sql)


def test_postgres_select_without_columns_is_refused_not_unparsed():
    """PostgreSQL reads `SELECT FROM t` (rows of no columns): SQL, but not what rat reads."""
    with pytest.raises(RATError) as raised:
        rat.to_tree("SELECT FROM t", None, "postgres")
    assert not isinstance(raised.value, ParseError)
