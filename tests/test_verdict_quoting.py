"""What a verdict quotes for people: a double-quoted name that SQLite (MySQL, BigQuery) reads as
a string, the stored values it names as closest (as SQL literals), a literal that differs from a
stored value only in Unicode normalisation, and the marks under the SQL in a terminal."""

import sqlite3
import unicodedata

import pytest

from model import Scorer
from model.scoring.scorer import marked_sql
from model.scoring.verdict import Policy, quoted_names

EVERYTHING = Policy(run_at=0.0, regenerate_below=0.0)  # every query the policy alone would run


@pytest.fixture(scope="module")
def scorer():
    return Scorer.pretrained()


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    path = tmp_path_factory.mktemp("quoting") / "shop.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("""
        CREATE TABLE "Customers" ("CustomerID" INTEGER PRIMARY KEY, "Full Name" TEXT, "City" TEXT, "Country" TEXT);
        CREATE TABLE "Order Details" ("OrderID" INTEGER PRIMARY KEY,
            "CustomerID" INTEGER REFERENCES "Customers"("CustomerID"), "Unit Price" REAL, "Placed" TEXT);
        INSERT INTO "Customers" VALUES (1, 'O''Brien', 'München', 'Germany'), (2, 'Renée Dubois', 'Paris', 'France'),
            (3, 'a\\b', 'Köln', 'Germany'), (4, 'line1
line2', 'Lyon', 'France');
        INSERT INTO "Order Details" VALUES (10, 1, 9.5, '2024-01-01'), (11, 2, 3.0, '2024-02-01'),
            (12, 3, 1.0, '2024-03-01');""")
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize("sql, written, closest", [
    ('SELECT "Unit Prce" FROM "Order Details"', '"Unit Prce"', '"unit price"'),
    ('SELECT "CustomerID" FROM "Customers" ORDER BY "Ful Name"', '"Ful Name"', '"full name"'),
    ('SELECT count(*) FROM "Customers" GROUP BY "Citty"', '"Citty"', '"city"'),
    ('SELECT "CustomerID" FROM "Customers" WHERE "Citty" = \'Paris\'', '"Citty"', '"city"'),
    ('SELECT sum("Unit Prce") FROM "Order Details"', '"Unit Prce"', '"unit price"'),
    ('SELECT round("Unit Prce", 1) FROM "Order Details"', '"Unit Prce"', '"unit price"'),
])
def test_a_misspelled_double_quoted_name_is_never_run(scorer, shop, sql, written, closest):
    """SQLite runs such a query, the misspelled name a string in every row: the shipped model
    gave `SELECT "Unit Prce" ..` 0.95 and the verdict `run`. Under a policy that would run
    anything, the verdict is review, its first reason names the string and the closest column,
    and the text to look at first is the quoted name."""
    verdict = scorer.check(sql, question="Unit prices and customers?", database=shop, policy=EVERYTHING)
    table = "order details" if "Order Details" in sql else "customers"
    name = written.strip('"')
    assert verdict.action == "review", verdict
    assert verdict.reasons[0] == (f"{written} names no column of {table} (closest: {closest}); "
                                  f"SQLite reads it as the string '{name}'"), verdict.reasons
    assert verdict.look_here_first["text"] == written
    start, end = verdict.look_here_first["span"]
    assert sql[start:end] == written
    assert f"Check this part first: `{written}`" in verdict.feedback
    assert verdict.scored.nodes[verdict.look_here_first["node"]].kind == "value"


@pytest.mark.parametrize("sql", [
    'SELECT "CustomerID" FROM "Customers" WHERE "Country" = "France"',  # Spider's and BIRD's values
    'SELECT "CustomerID" FROM "Customers" WHERE "Country" IN ("France", "Germany")',
    'SELECT "CustomerID" FROM "Customers" WHERE "Country" != "Country A"',  # a value like a name
    'SELECT "CustomerID" FROM "Customers" WHERE "Full Name" LIKE "%Brien"',
    'SELECT "OrderID" FROM "Order Details" WHERE strftime("%Y", "Placed") = "2024"',
    'SELECT "OrderID", CASE WHEN "Unit Price" > 5 THEN "dear" ELSE "cheap" END FROM "Order Details"',
    'SELECT "Unit Price" FROM "Order Details"',  # a column: SQLite reads it as one
])
def test_double_quoted_values_and_names_are_left_as_they_were(scorer, shop, sql):
    """Every double-quoted literal of Spider's and BIRD's gold queries (2,215) is compared with a
    column; a value so written keeps the verdict it had (run, under a policy that runs all)."""
    verdict = scorer.check(sql, question="Customers from France?", database=shop, policy=EVERYTHING)
    assert quoted_names(verdict.scored) == {}
    assert verdict.action == "run" and not any("reads it as the string" in r for r in verdict.reasons)
    assert verdict.look_here_first["node"] == verdict.scored.look_here_first


def test_without_a_schema_nothing_is_said():
    scored = Scorer.pretrained().score('SELECT "Unit Prce" FROM orders', reasons=False)
    assert quoted_names(scored) == {}


@pytest.mark.parametrize("dialect", ["mysql", "bigquery"])
def test_mysql_and_bigquery_read_every_double_quoted_text_as_a_string(scorer, dialect):
    """There a double-quoted name is a string even where it is a column's name (names are
    quoted with backticks)."""
    schema = {"order details": ["orderid", "unit price"]}
    sql = 'SELECT "Unit Price" FROM `Order Details`'
    scored = scorer.score(sql, schema=schema, dialect=dialect, reasons=False)
    shown = {"mysql": "MySQL", "bigquery": "BigQuery"}[dialect]
    assert list(quoted_names(scored).values()) == [
        (f"{shown} reads \"Unit Price\" as the string 'Unit Price', not a column: it quotes names with "
        "backticks (closest column: `unit price`)")]
    verdict = scorer.check(sql, schema=schema, dialect=dialect, policy=EVERYTHING)
    assert verdict.action == "review" and verdict.look_here_first["text"] == '"Unit Price"'


@pytest.mark.parametrize("dialect", ["postgres", "duckdb"])
def test_where_double_quotes_name_a_column_there_is_no_string(scorer, dialect):
    scored = scorer.score('SELECT "Unit Prce" FROM orders', schema={"orders": ["unit price"]}, dialect=dialect,
                          reasons=False)
    assert quoted_names(scored) == {}


def literal_sentence(scorer, sql, database):
    from model.scoring.verdict import _literal_sentence

    scored = scorer.score(sql, database=database, reasons=False)
    return [s for s in (_literal_sentence(scored, n.index, database) for n in scored.nodes if n.kind == "value") if s]


@pytest.mark.parametrize("literal, closest", [
    ("'a\\c'", "'a\\b'"),  # a backslash is one character (Python's repr doubled it)
    ("'OBrien'", "'O''Brien'"),  # (repr: "O'Brien")
    ("'line1 line2'", "'line1\nline2'"),  # (repr: 'line1\\nline2')
])
def test_the_closest_stored_values_are_quoted_as_sql_literals(scorer, shop, literal, closest):
    sql = f'SELECT "CustomerID" FROM "Customers" WHERE "Full Name" = {literal}'
    assert literal_sentence(scorer, sql, shop) == [
        f"the literal {literal} is not a value of customers.full name; closest: {closest}"]


def test_a_literal_differing_only_in_unicode_normalisation_says_so(scorer, shop):
    """`'München'` typed decomposed (NFD) is no stored value; its closest, `'München'`, looked the same."""
    typed = unicodedata.normalize("NFD", "München")
    sql = f"SELECT \"CustomerID\" FROM \"Customers\" WHERE \"City\" = '{typed}'"
    assert literal_sentence(scorer, sql, shop) == [
        (f"the literal '{typed}' is not a value of customers.city; it differs from the stored 'München' only in "
        "Unicode normalisation (the query's is NFD (decomposed), the stored value NFC (composed))")]
    assert literal_sentence(scorer, sql.replace(typed, "Munchen"), shop) == [
        "the literal 'Munchen' is not a value of customers.city; closest: 'München'"]


@pytest.mark.parametrize("sql, first, line, marks", [
    ("SELECT 名前 FROM t WHERE x = 1", (7, 9), "SELECT 名前 FROM t WHERE x = 1", "       ^^^^"),
    ("SELECT '🎉' AS p, x FROM t", (17, 18), "SELECT '🎉' AS p, x FROM t", " " * 18 + "^"),
    ("SELECT 'Mu\u0308nchen', x FROM t", (19, 20), "SELECT 'Mu\u0308nchen', x FROM t", " " * 18 + "^"),
])
def test_the_marks_under_the_sql_stand_under_their_text(sql, first, line, marks):
    """A wide character takes two columns in a terminal, a combining mark none; a CRLF line end
    is one space (it showed as U+FFFD and a space)."""
    shown, marked = marked_sql(sql, first)
    assert shown == line and marked == marks + " look here first"


def test_the_marks_under_sql_of_several_lines_stand_under_their_line():
    """SQL of several lines (a dbt model of 129 lines) was shown on one line of 3,500 characters,
    the marks near column 2,900, and a `--` comment seemed to hide the rest: the lines holding
    a mark are shown, numbered, CRLF and CR ending lines as LF does, `...` for those left out."""
    assert marked_sql("SELECT x\r\nFROM t\r\nWHERE y = 1", (24, 25)) == ["3 | WHERE y = 1", "  |       ^ look here first"]
    assert marked_sql("SELECT x\rFROM t", (9, 13)) == ["2 | FROM t", "  | ^^^^ look here first"]
    sql = "WITH a AS (\n  SELECT x FROM t\n)\n" + "SELECT x\n" * 8 + "FROM a\nLIMIT 5"
    assert marked_sql(sql, (21, 22), (len(sql) - 7, len(sql))) == [
        " 2 |   SELECT x FROM t", "   |          ^", "   ...", "13 | LIMIT 5", "   | ------- look here first; - then"]
