"""`rat` across SQL dialects: the dialect argument of to_tree / canonicalize / sql_spans and
`python -m rat --dialect`; the same query written natively in each dialect (or transpiled there
by sqlglot) gives the SQLite tree; constructs a dialect lacks stay refused in it.
(The per-dialect label cases are fixtures: tests/fixtures/rat/dialects.txt.)"""

import json
import os
import re
import subprocess
import sys

import pytest
import sqlglot

import rat

SCHEMA = rat.Schema({"singer": ["singer_id", "name", "country", "age"],
                     "concert": ["concert_id", "singer_id", "year"]})
KNOWN = "bigquery, databricks, duckdb, mysql, postgres, redshift, snowflake, sqlite, trino, tsql"


@pytest.mark.parametrize("call", [
    lambda: rat.to_tree("SELECT 1", dialect="oracle"),
    lambda: rat.canonicalize("SELECT 1", dialect="oracle"),
    lambda: rat.sql_spans("SELECT 1", dialect="oracle"),
])
def test_unknown_dialect_is_one_line_naming_the_known(call):
    with pytest.raises(rat.RATError) as info:
        call()
    assert str(info.value) == f"unknown dialect 'oracle' (known: {KNOWN})"


def test_an_unknown_dialects_name_is_shown_within_bounds():
    """A megabyte of name is not echoed (the services pass a request's `dialect` here)."""
    with pytest.raises(rat.RATError) as info:
        rat.to_tree("SELECT 1", dialect="x" * 10**6)
    assert str(info.value) == f"unknown dialect of 1000000 characters (known: {KNOWN})"


def test_dialect_names_ignore_case():
    assert rat.to_tree("SELECT a FROM t", dialect="TSQL") == rat.to_tree("SELECT a FROM t")


@pytest.mark.parametrize("dialect, native, sqlite", [
    ("tsql", "SELECT TOP 3 [Name] FROM [Singer] ORDER BY [Age] DESC",
     "SELECT name FROM singer ORDER BY age DESC LIMIT 3"),
    ("tsql", "SELECT name FROM singer ORDER BY age OFFSET 2 ROWS FETCH NEXT 3 ROWS ONLY",
     "SELECT name FROM singer ORDER BY age LIMIT 3 OFFSET 2"),
    ("postgres", "SELECT name FROM singer ORDER BY age FETCH FIRST 3 ROWS ONLY",
     "SELECT name FROM singer ORDER BY age LIMIT 3"),
    ("postgres", "SELECT name FROM singer ORDER BY age FETCH FIRST ROW ONLY",
     "SELECT name FROM singer ORDER BY age LIMIT 1"),
    ("postgres", "SELECT age::real FROM singer WHERE country = 'France'",
     "SELECT CAST(age AS REAL) FROM singer WHERE country = 'France'"),
    ("mysql", "SELECT `T1`.`name` FROM `singer` AS `T1` WHERE `T1`.`country` = \"France\"",
     "SELECT T1.name FROM singer AS T1 WHERE T1.country = 'France'"),
    ("mysql", "SELECT name FROM singer LIMIT 2, 3", "SELECT name FROM singer LIMIT 3 OFFSET 2"),
    ("bigquery", "SELECT s.name FROM `db.singer` AS s WHERE s.country = \"France\"",
     "SELECT name FROM singer WHERE country = 'France'"),
    ("snowflake", 'SELECT "NAME" FROM SINGER WHERE "AGE" > 20',
     "SELECT name FROM singer WHERE age > 20"),
    ("duckdb", 'SELECT "Name" FROM "Singer" WHERE age::int > 20',
     "SELECT name FROM singer WHERE CAST(age AS INT) > 20"),
    # IF(c, a, b), Snowflake's IFF, SQLite's and SQL Server's IIF are CASE WHEN c THEN a ELSE b END
    *((dialect, f"SELECT {call}(age > 20, 'old', name) FROM singer",
       "SELECT CASE WHEN age > 20 THEN 'old' ELSE name END FROM singer")
      for dialect, call in (("mysql", "IF"), ("bigquery", "IF"), ("duckdb", "IF"), ("snowflake", "IFF"),
                            ("tsql", "IIF"), ("sqlite", "iif"))),
    ("bigquery", r"SELECT name FROM singer WHERE REGEXP_CONTAINS(name, r'^A\d')",  # a raw string
     r"SELECT name FROM singer WHERE regexp_contains(name, '^A\d')"),
    # GROUP BY ALL: by the SELECT's expressions without an aggregate; DuckDB's ORDER BY ALL
    *((dialect, "SELECT country AS c, upper(name), count(*) AS n FROM singer GROUP BY ALL",
       "SELECT country, upper(name), count(*) FROM singer GROUP BY country, upper(name)")
      for dialect in ("duckdb", "snowflake", "bigquery")),
    # after a lone *: every column grouped, the distinct rows (as DuckDB answers: test below)
    *((dialect, "SELECT * FROM singer GROUP BY ALL ORDER BY name", "SELECT DISTINCT * FROM singer ORDER BY name")
      for dialect in ("duckdb", "snowflake", "bigquery")),
    ("postgres", "SELECT country, count(*) FROM singer GROUP BY ALL country",  # ALL: the default
     "SELECT country, count(*) FROM singer GROUP BY country"),
    ("duckdb", "SELECT country, name FROM singer ORDER BY ALL DESC",
     "SELECT country, name FROM singer ORDER BY country DESC, name DESC"),
    # SQLite's instr(text, part) under other names
    *((dialect, f"SELECT {call} FROM singer", "SELECT instr(name, 'a') FROM singer")
      for dialect, call in (("postgres", "POSITION('a' IN name)"), ("postgres", "strpos(name, 'a')"),
                            ("mysql", "LOCATE('a', name)"), ("tsql", "CHARINDEX('a', name)"),
                            ("snowflake", "POSITION('a' IN name)"), ("duckdb", "position('a' IN name)"))),
    ("mysql", "SELECT CHAR_LENGTH(name) FROM singer", "SELECT length(name) FROM singer"),
    ("tsql", "SELECT LEN(name) FROM singer", "SELECT length(name) FROM singer"),
    *((dialect, "SELECT GREATEST(age, singer_id, 3), LEAST(age, 1) FROM singer",
       "SELECT max(age, singer_id, 3), min(age, 1) FROM singer") for dialect in ("postgres", "snowflake", "tsql")),
    # SQLite's strftime(format, date) under other names, formats and argument orders
    *((dialect, f"SELECT name FROM singer WHERE {call} = '2012-05'",
       "SELECT name FROM singer WHERE strftime('%Y-%m', age) = '2012-05'")
      for dialect, call in (("postgres", "to_char(age, 'YYYY-MM')"), ("postgres", "to_char(age::timestamp, 'YYYY-MM')"),
                            ("snowflake", "TO_VARCHAR(age, 'YYYY-MM')"), ("mysql", "DATE_FORMAT(age, '%Y-%m')"),
                            ("duckdb", "strftime(age, '%Y-%m')"), ("bigquery", "FORMAT_DATE('%Y-%m', age)"),
                            ("tsql", "FORMAT(age, 'yyyy-MM')"))),
    # x / NULLIF(y, 0): SQLite's x / y (NULL where y is 0), as sqlglot writes it elsewhere
    ("postgres", "SELECT age / NULLIF(singer_id, 0) FROM singer", "SELECT age / singer_id FROM singer"),
    # PostgreSQL's BETWEEN SYMMETRIC: between the bounds in either order
    ("postgres", "SELECT name FROM singer WHERE age BETWEEN SYMMETRIC 30 AND 20",
     "SELECT name FROM singer WHERE age BETWEEN 30 AND 20 OR age BETWEEN 20 AND 30"),
    ("postgres", "SELECT name FROM singer WHERE age NOT BETWEEN SYMMETRIC 30 AND 20",
     "SELECT name FROM singer WHERE age NOT BETWEEN 30 AND 20 AND age NOT BETWEEN 20 AND 30"),
    # TRIM([BOTH | LEADING | TRAILING] [chars] FROM s): SQLite's trim / ltrim / rtrim(s[, chars])
    *((dialect, ("SELECT TRIM(BOTH 'x' FROM name), TRIM(LEADING 'x' FROM name), TRIM(TRAILING FROM name), "
                 "TRIM('x' FROM country) FROM singer"),
       "SELECT trim(name, 'x'), ltrim(name, 'x'), rtrim(name), trim(country, 'x') FROM singer")
      for dialect in ("postgres", "mysql", "duckdb", "tsql", "databricks", "trino", "redshift")),
    ("postgres", "SELECT overlay(name PLACING 'x' FROM 2 FOR 3) FROM singer", "SELECT overlay(name, 'x', 2, 3) FROM singer"),
    ("databricks", "SELECT overlay(name PLACING 'x' FROM 2) FROM singer", "SELECT overlay(name, 'x', 2) FROM singer"),
    # PostgreSQL's and DuckDB's escape strings: the string their escapes spell
    *((dialect, r"SELECT name FROM singer WHERE name = E'it\'s' OR name = E'a''b'",
       "SELECT name FROM singer WHERE name = 'it''s' OR name = 'a''b'") for dialect in ("postgres", "duckdb")),
    # a power (PostgreSQL's, DuckDB's, Redshift's `^`); sqrt(a) (`|/ a` is refused)
    *((dialect, "SELECT age ^ 2 FROM singer", "SELECT power(age, 2) FROM singer")
      for dialect in ("postgres", "duckdb", "redshift")),
    *((dialect, "SELECT sqrt(age) + 1 FROM singer", "SELECT sqrt(age) + 1 FROM singer") for dialect in ("postgres", "redshift")),
    # a function's other name: MySQL's LCASE, UCASE (DuckDB's, Databricks' too), MID; CEILING and POW everywhere
    ("mysql", "SELECT LCASE(name), UCASE(country), MID(name, 2, 3), MID(name, 2), CEILING(age), POW(age, 2) FROM singer",
     "SELECT lower(name), upper(country), substr(name, 2, 3), substr(name, 2), ceil(age), power(age, 2) FROM singer"),
    *((dialect, "SELECT lcase(name), ucase(country) FROM singer", "SELECT lower(name), upper(country) FROM singer")
      for dialect in ("duckdb", "databricks")),
    ("sqlite", "SELECT ceiling(age), pow(age, 2) FROM singer", "SELECT ceil(age), power(age, 2) FROM singer"),
    # MySQL's character set introducer: the string
    ("mysql", "SELECT name FROM singer WHERE country = _utf8mb4'France' OR name = _latin1'x' COLLATE latin1_bin",
     "SELECT name FROM singer WHERE country = 'France' OR name = 'x' COLLATE latin1_bin"),
    # string_agg(x, sep) is SQLite's group_concat(x, sep), its ordering however written
    *((dialect, "SELECT string_agg(name, ', ' ORDER BY age DESC), string_agg(country, ';') FROM singer",
       "SELECT group_concat(name, ', ' ORDER BY age DESC), group_concat(country, ';') FROM singer")
      for dialect in ("postgres", "duckdb", "bigquery", "sqlite")),
    ("tsql", "SELECT STRING_AGG(name, ', ') WITHIN GROUP (ORDER BY age DESC), STRING_AGG(country, ';') FROM singer",
     "SELECT group_concat(name, ', ' ORDER BY age DESC), group_concat(country, ';') FROM singer"),
])
def test_native_spellings_give_the_sqlite_tree(dialect, native, sqlite):
    assert rat.to_tree(native, SCHEMA, dialect) == rat.to_tree(sqlite, SCHEMA)
    assert rat.to_tree(native, SCHEMA, dialect).hash == rat.to_tree(sqlite, SCHEMA).hash


SPIDER_LIKE = [
    ("SELECT T2.name, count(*) FROM concert AS T1 JOIN singer AS T2 ON T1.singer_id = "
     "T2.singer_id WHERE T1.year BETWEEN 2014 AND 2015 GROUP BY T2.name HAVING count(*) > 1"),
    "SELECT name FROM singer WHERE age > (SELECT avg(age) FROM singer) ORDER BY age DESC LIMIT 3",
    ("SELECT country FROM singer WHERE name LIKE '%a%' EXCEPT SELECT country FROM singer "
     "WHERE age < 30"),
    "SELECT DISTINCT country FROM singer WHERE singer_id NOT IN (SELECT singer_id FROM concert)",
    "SELECT max(age), min(age) FROM singer WHERE country = 'France' OR country = 'Spain'",
]


@pytest.mark.parametrize("dialect", sorted(rat.DIALECTS))
@pytest.mark.parametrize("sql", SPIDER_LIKE)
def test_queries_transpiled_by_sqlglot_give_the_sqlite_tree(dialect, sql):
    transpiled = sqlglot.transpile(sql, read="sqlite", write=dialect)[0]
    assert rat.to_tree(transpiled, SCHEMA, dialect) == rat.to_tree(sql, SCHEMA), transpiled


@pytest.mark.parametrize("dialect, sql, construct", [
    ("sqlite", "SELECT DISTINCT ON (country) name FROM singer", "DISTINCT ON"),
    ("mysql", "SELECT DISTINCT ON (country) name FROM singer", ""),
    ("sqlite", "SELECT name FROM singer QUALIFY row_number() OVER (ORDER BY age) = 1", ""),
    ("postgres", "SELECT name FROM singer QUALIFY row_number() OVER (ORDER BY age) = 1", ""),
    ("sqlite", "SELECT TOP 3 name FROM singer", "cannot parse"),
    ("postgres", "SELECT name FROM singer ORDER BY age FETCH FIRST 10 PERCENT ROWS ONLY", "PERCENT"),
    ("sqlite", "SELECT name FROM singer ORDER BY age FETCH FIRST 3 ROWS WITH TIES", "WITH TIES"),
    ("mysql", "SELECT sum(age) OVER (ORDER BY age ROWS 2 PRECEDING EXCLUDE TIES) FROM singer",
     "EXCLUDE"),
    ("sqlite", "SELECT sum(age) OVER w FROM singer", "window 'w' is not defined"),
    ("sqlite", "SELECT sum(age) OVER v FROM singer WINDOW w AS (ORDER BY age)",
     "window 'v' is not defined"),
    ("postgres", "SELECT sum(age) OVER w FROM singer WINDOW w AS (ORDER BY age), w AS (ORDER BY name)",
     "window 'w' is defined twice"),
    ("sqlite", "SELECT name FROM singer, LATERAL (SELECT 1)", "LATERAL"),
    ("bigquery", "SELECT name FROM singer, LATERAL (SELECT 1)", "LATERAL"),
    # read as if the clause were not there, they were silently the query without it
    ("postgres", "SELECT country, count(*) FROM singer GROUP BY ALL", "GROUP BY ALL"),
    ("duckdb", "SELECT *, count(*) FROM singer GROUP BY ALL", "'GROUP BY ALL' after a '*'"),
    ("snowflake", "SELECT name FROM singer ORDER BY ALL", "'ORDER BY ALL'"),
    ("sqlite", "SELECT name FROM singer ORDER BY all", "'ORDER BY ALL'"),
    ("postgres", "SELECT * EXCLUDE (age) FROM singer", "EXCLUDE"),
    ("mysql", "SELECT singer.* EXCEPT (age) FROM singer", "EXCEPT"),
    ("postgres", "SELECT * RENAME (age AS a) FROM singer", "RENAME"),
    ("postgres", "SELECT * REPLACE (upper(name) AS name) FROM singer", "'* REPLACE' (postgres has none)"),
    ("databricks", "SELECT * EXCEPT (age) REPLACE (upper(name) AS name) FROM singer", "'* REPLACE'"),
    ("sqlite", "SELECT name FROM singer TABLESAMPLE SYSTEM (10)", "TABLESAMPLE"),
    ("duckdb", "SELECT name, age FROM singer UNION BY NAME SELECT age, name FROM singer", "'UNION BY NAME'"),
    ("bigquery", "SELECT name FROM singer UNION ALL CORRESPONDING SELECT name FROM singer", "BY NAME"),
    ("bigquery", "SELECT AS STRUCT name, age FROM singer", "'SELECT AS STRUCT'"),
    ("snowflake", "SELECT name FROM singer AT(OFFSET => -60)", "AT (..)"),
    ("bigquery", "SELECT name FROM singer FOR SYSTEM_TIME AS OF CURRENT_TIMESTAMP()", "FOR SYSTEM_TIME AS OF"),
    ("mysql", "SELECT name FROM singer PARTITION (p0)", "'PARTITION (..)'"),
    ("mysql", "SELECT name FROM singer TABLESAMPLE SYSTEM (10)", "TABLESAMPLE"),
    ("postgres", "SELECT name FROM singer USING SAMPLE 10%", "SAMPLE"),
    ("postgres", "SELECT lag(age) IGNORE NULLS OVER (ORDER BY age) FROM singer", "IGNORE NULLS"),
    ("mysql", "SELECT age AT TIME ZONE 'UTC' FROM singer", "AT TIME ZONE"),
    # named as the SQL writes them, not by sqlglot's class names (Var, Between, SafeFunc)
    ("duckdb", "SELECT name FROM singer WHERE age BETWEEN SYMMETRIC 30 AND 20", "'BETWEEN SYMMETRIC'"),
    ("tsql", "SELECT name FROM singer CROSS JOIN LATERAL (SELECT 1 AS x) AS s", "LATERAL"),
    # TRIM(.. FROM ..), OVERLAY(.. PLACING ..), E'..', `^` as XOR where the database lacks them
    *((dialect, "SELECT TRIM(BOTH 'x' FROM name) FROM singer", "cannot parse") for dialect in ("sqlite", "snowflake", "bigquery")),
    *((dialect, "SELECT overlay(name PLACING 'x' FROM 2) FROM singer", "cannot parse") for dialect in ("sqlite", "mysql", "duckdb")),
    ("redshift", "SELECT E'a\\nb' FROM singer", "E'..'"),
    ("bigquery", "SELECT b'ab' FROM singer", "b'..' (bytes)"),  # bytes, not a string
    *((dialect, "SELECT age ^ 2 FROM singer", f"'^' ({dialect} has no bitwise XOR operator rat reads)")
      for dialect in ("sqlite", "snowflake", "trino", "tsql", "bigquery", "databricks")),  # (the last: of another precedence)
    *((dialect, "SELECT name FROM singer MINUS ALL SELECT name FROM singer", "'MINUS ALL'") for dialect in ("snowflake", "redshift")),
    ("bigquery", "FROM singer SELECT name", "FROM before SELECT"),
    # PostgreSQL's `|/ 16 + 9` is `|/ (16 + 9)`, which sqlglot reads as sqrt(16) + 9
    *((dialect, "SELECT |/ age + 9 FROM singer", "unsupported construct '|/' (its precedence is not read: write sqrt(a))")
      for dialect in ("postgres", "redshift")),  # (but in its pipe syntax, as below)
    ("postgres", "SELECT * FROM (singer JOIN concert ON singer.singer_id = concert.singer_id) AS j", "parenthesised join"),
    # a lambda, a struct's field, a subscript rat does not read: in words, not sqlglot's classes
    *((dialect, "SELECT filter(items, x -> x.qty > 5) FROM singer", "unsupported construct 'a lambda (x -> ..)'")
      for dialect in ("databricks", "trino", "duckdb", "snowflake")),
    *((dialect, sql, "unsupported construct 'a field of a struct value'")  # (read where the dialect has structs)
      for dialect, sql in (("postgres", "SELECT (items).sku FROM singer"), ("postgres", "SELECT items[1].sku FROM singer"),
                           ("snowflake", "SELECT items[0].sku FROM singer"))),
    ("bigquery", "SELECT items[SAFE_OFFSET(0)] FROM singer", "unsupported construct 'SAFE_OFFSET / SAFE_ORDINAL'"),
    ("duckdb", "SELECT items[1, 2] FROM singer", "unsupported construct 'an array subscript of several indexes'"),
    ("duckdb", "SELECT items[1:2] FROM singer", "unsupported construct 'an array slice'"),
])
def test_constructs_refused_where_they_do_not_belong(dialect, sql, construct):
    with pytest.raises(rat.RATError) as info:
        rat.to_tree(sql, dialect=dialect)
    assert construct in str(info.value) and repr(sql)[:40] in str(info.value)


@pytest.mark.parametrize("dialect, native, sqlite", [
    ("postgres", "SELECT name FROM singer WHERE name->>'k' = 'x' AND name->0 IS NULL",
     "SELECT name FROM singer WHERE name->>'$.k' = 'x' AND name->'$[0]' IS NULL"),
    ("mysql", "SELECT name FROM singer WHERE name->>'$.k' = 'x'",
     "SELECT name FROM singer WHERE name->>'$.k' = 'x'"),
    ("duckdb", "SELECT count(*) FILTER (WHERE age > 20) FROM singer",
     "SELECT count(*) FILTER (WHERE age > 20) FROM singer"),
])
def test_json_paths_filters_and_limit_all_read_alike(dialect, native, sqlite):
    assert rat.to_tree(native, SCHEMA, dialect) == rat.to_tree(sqlite, SCHEMA)


def test_a_json_operator_is_not_sqlites_json_extract():
    """`a -> '$.k'` gives a string's JSON (`'"x"'`), json_extract(a, '$.k') its text (`'x'`)."""
    arrow, function = (rat.to_tree(f"SELECT {e} FROM singer", SCHEMA)
                       for e in ("name -> '$.k'", "json_extract(name, '$.k')"))
    assert arrow != function and arrow.children[0].label == "Json_get"


@pytest.mark.parametrize("dialect, now", [("postgres", "now()"), ("duckdb", "now()"), ("mysql", "NOW()"),
                                         ("mysql", "CURRENT_TIMESTAMP()"), ("tsql", "GETDATE()")])
def test_now_is_current_timestamp_where_the_dialect_says_so(dialect, now):
    now, stamp = (rat.to_tree(f"SELECT name FROM singer WHERE age > {e}", SCHEMA, dialect)
                  for e in (now, "CURRENT_TIMESTAMP"))
    assert now == stamp
    assert rat.to_tree("SELECT now()") != rat.to_tree("SELECT CURRENT_TIMESTAMP")  # SQLite has none


def test_formats_sqlite_does_not_write_stay_the_dialects_call():
    def tree(sql, dialect="postgres"):
        return rat.serialize(rat.to_tree(sql, SCHEMA, dialect))

    assert "To_char" in tree("SELECT to_char(age, 'Mon YYYY') FROM singer")  # a month's name
    assert "To_char" in tree("SELECT to_char(age, '9999') FROM singer")  # a number's format
    assert "To_char" in tree("SELECT to_char(age, '%s') FROM singer")  # % is itself in to_char
    assert "Date_format" in tree("SELECT DATE_FORMAT(age, '%W') FROM singer", "mysql")  # a weekday's name
    assert "('%S')" in tree("SELECT DATE_FORMAT(age, '%s') FROM singer", "mysql")  # MySQL's seconds
    # in SQLite the others' names are other (unknown) functions
    assert "Strpos" in tree("SELECT strpos(name, 'a') FROM singer", "sqlite")


def test_limit_all_is_no_limit_where_the_dialect_has_it():
    assert rat.to_tree("SELECT name FROM singer LIMIT ALL OFFSET 2", SCHEMA, "postgres") == \
        rat.to_tree("SELECT name FROM singer OFFSET 2", SCHEMA, "postgres")
    assert rat.to_tree("SELECT name FROM singer LIMIT ALL", SCHEMA, "duckdb") == \
        rat.to_tree("SELECT name FROM singer", SCHEMA)
    # SQLite and MySQL read a name there ("no such column: ALL")
    assert rat.to_tree("SELECT name FROM singer LIMIT ALL", SCHEMA).label == "Limit"


def test_interval_units_and_frames_are_canonical():
    tree = rat.serialize(rat.to_tree(
        "SELECT sum(age) OVER (ORDER BY age ROWS BETWEEN 1 PRECEDING AND UNBOUNDED FOLLOWING) "
        "FROM singer WHERE age > 2 + INTERVAL '3 Hours'", SCHEMA, "postgres"))
    assert "((1)Preceding)(Unbounded_following)Rows" in tree
    assert "((3)(hour)Interval)" in tree
    node = rat.to_tree("SELECT INTERVAL '1 day 2 hours'", dialect="postgres").children[0]
    assert rat.serialize(node) == "(('1 day 2 hours')Interval)"
    leaves = {n.label: rat.node_kind(n, p) for p in node.postorder() for n in p.children}
    assert leaves == {"'1 day 2 hours'": "value"}
    odd = rat.to_tree("SELECT INTERVAL 'nan' DAY", dialect="postgres").children[0]
    assert rat.serialize(odd) == "(('nan')(day)Interval)"  # a string, not a number (nor a column)


def test_like_and_ilike_by_dialect():
    """ILIKE, where a dialect has it, never equals LIKE (each such dialect's LIKE tells case
    apart), and LIKE is never ILIKE's negation; the dialects whose LIKE ignores case have none."""
    sql = "SELECT name FROM singer WHERE name {} 'a%'"
    for dialect, spec in rat.DIALECTS.items():
        assert not (spec.ilike and spec.like_ignores_case), dialect
        if not spec.ilike:
            continue
        like, ilike = (rat.to_tree(sql.format(op), dialect=dialect) for op in ("LIKE", "ILIKE"))
        assert like != ilike, dialect
        not_ilike = rat.to_tree(sql.format("NOT ILIKE"), dialect=dialect)
        assert not_ilike != ilike and not_ilike.hash != like.hash, dialect


def test_quoted_identifier_case_by_dialect():
    # PostgreSQL folds unquoted names to lower case, Snowflake to upper; both keep quoted case.
    plain = rat.to_tree("SELECT name FROM singer")
    for dialect, same, different in [("postgres", '"name"', '"Name"'),
                                     ("snowflake", '"NAME"', '"name"'),
                                     ("duckdb", '"Name"', None), ("tsql", "[NAME]", None),
                                     ("mysql", "`Name`", None), ("bigquery", "`NAME`", None)]:
        assert rat.to_tree(f"SELECT {same} FROM singer", dialect=dialect) == plain, dialect
        if different is not None:
            tree = rat.to_tree(f"SELECT {different} FROM singer", dialect=dialect)
            assert tree != plain and tree.children[0].label == f"singer.{different}", dialect


def test_dialect_hashes_identical_across_processes():
    code = ("import rat, json, sys; t = rat.to_tree(sys.argv[1], dialect='postgres'); "
            "print(json.dumps([n.hash for n in t.postorder()]))")
    sql = 'SELECT DISTINCT ON (country) "Name" FROM singer WHERE name ILIKE \'a%\''
    outputs = []
    for seed in ("1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run([sys.executable, "-c", code, sql], env=env, check=True,
                                capture_output=True, text=True)
        outputs.append(json.loads(result.stdout))
    assert outputs[0] == outputs[1] == [n.hash for n in rat.to_tree(sql, dialect="postgres")
                                        .postorder()]


def test_cli_dialect():
    run = [sys.executable, "-m", "rat", "SELECT name FROM singer WHERE name ILIKE 'a%'",
           "--gold", "SELECT name FROM singer WHERE name LIKE 'a%'"]
    postgres = subprocess.run([*run, "--dialect", "postgres"], capture_output=True, text=True,
                              check=True).stdout
    assert "    Ilike  [INCORRECT]" in postgres and "root hash differs from gold" in postgres
    sqlite = subprocess.run(run, capture_output=True, text=True, check=False)  # SQLite has no ILIKE
    assert sqlite.returncode == 2 and sqlite.stderr.startswith("python -m rat: error: sql: unsupported construct 'ILIKE' (sqlite has none")
    assert len(sqlite.stderr.strip().splitlines()) == 1 and "Traceback" not in sqlite.stderr
    bad = subprocess.run([*run, "--dialect", "oracle"], capture_output=True, text=True,
                         check=False)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "invalid choice: 'oracle'" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("sql, dialect, part", [
    ("SELECT DATEADD(day, -1, d) FROM t", "snowflake", 0),
    ("SELECT DATEDIFF(DAY, a, d) FROM t", "tsql", 0),
    ("SELECT TIMESTAMPDIFF(MONTH, a, d) FROM t", "mysql", 0),
    ("SELECT DATE_DIFF(a, d, DAY) FROM t", "bigquery", 2),
])
def test_a_date_part_is_a_name_not_a_column(sql, dialect, part):
    # read as a column, it was qualified (t.day) or reported "not in the schema"
    for schema in (None, {"t": ["a", "d"]}):
        function = rat.to_tree(sql, schema, dialect=dialect).children[0]
        unit = function.children[part]
        assert unit.label in ("day", "month") and rat.node_kind(unit, function) == "value"


def test_quoted_mixed_case_names_the_schema_holds_are_the_schemas_names():
    # an ORM's quoted names ("User", "Full Name"): a Schema holds them in lower case
    schema = {"User": ["id", "Full Name"], "orders": ["id", "userId"]}
    sql = 'SELECT u."Full Name" FROM "User" AS u JOIN orders AS o ON o."userId" = u.id WHERE "Other" = 1'
    labels = {n.label for n in rat.to_tree(sql, schema, dialect="postgres").postorder()}
    assert {"user.full name", "orders.userid", "user"} <= labels and '"Other"' in labels
    without = {n.label for n in rat.to_tree(sql, None, dialect="postgres").postorder()}
    assert '"User"."Full Name"' in without  # no schema: names keep their case and quotes


@pytest.mark.parametrize("dialect", ["postgres", "duckdb", "snowflake"])
def test_a_table_of_another_schema_is_another_table_where_the_schema_says_so(dialect):
    schema = rat.Schema({"orders": ["id", "status"], "customers": ["id"]},
                        table_schemas={"orders": "public", "customers": "public"})
    tree = lambda sql, s=schema: rat.to_tree(sql, s, dialect=dialect)
    gold = tree("SELECT status FROM orders WHERE id = 3")
    assert tree("SELECT status FROM public.orders WHERE id = 3") == gold
    pred = "SELECT a.status FROM archive.orders AS a JOIN customers ON customers.id = a.id"
    wrong = tree(pred)
    in_schema = next(n for n in wrong.postorder() if n.label == "In_schema")
    assert [(c.label, rat.node_kind(c, in_schema)) for c in in_schema.children] == [
        ("orders", "table"), ("archive", "value")]
    # the table's name is in gold; its schema, and what holds it, are not
    labels = dict(zip((n.label for n in wrong.postorder()), rat.label_nodes(wrong, gold)))
    assert labels["orders"] == 1 and labels["archive"] == labels["In_schema"] == 0
    spans = rat.sql_spans(pred, wrong, schema, dialect=dialect)
    assert spans.unmapped == 0
    texts = {n.label: spans.text(i) for i, n in enumerate(wrong.postorder())}
    assert texts["archive"] == "archive" and texts["In_schema"].startswith("archive.orders")
    # a schema that does not say where its tables are read from: every schema is dropped
    assert tree("SELECT status FROM archive.orders WHERE id = 3", {"orders": ["id", "status"]}) == gold


def test_functions_in_from_and_lateral_subqueries_are_derived_tables():
    schema = {"posts": ["id", "tags", "n"], "u": ["a", "b"]}

    def tree(sql, dialect="postgres"):
        return rat.serialize(rat.to_tree(sql, schema, dialect=dialect))

    # the alias's column, the alias as PostgreSQL's one column, CROSS JOIN or a comma: one tree
    tagged = tree("SELECT tag, count(*) FROM posts, unnest(posts.tags) AS tag GROUP BY tag")
    assert tagged == tree("SELECT t.tag, count(*) FROM posts CROSS JOIN unnest(tags) AS t(tag) GROUP BY 1")
    # unnest of a call (not of a column) names its column by the alias too
    assert tree("SELECT tag FROM posts, unnest(string_to_array(posts.tags, ',')) AS tag").startswith("((derived.tag)")
    assert "((posts.tags)Unnest)" in tagged and "(derived.tag)" in tagged
    days = tree("SELECT d FROM generate_series(1, 7) AS d")
    assert days == tree("SELECT g.d FROM generate_series(1, 7) AS g(d)") == \
        "((derived.d)((1)(7)Generate_series)Project)"
    assert days != tree("SELECT d FROM generate_series(1, 8) AS d")
    # an argument reads the FROM items before it (PostgreSQL's functions in FROM are lateral)
    assert "((1)(posts.n)Generate_series)" in tree("SELECT k FROM posts, generate_series(1, n) AS g(k)")
    # SQLite's json_each has its columns
    assert tree("SELECT value FROM posts, json_each(posts.tags)", "sqlite") == \
        "((derived.value)((posts)((posts.tags)Json_each)Product)Project)"
    # a LATERAL subquery, SQL Server's CROSS APPLY: the subquery, its columns reading the row
    lateral = tree("SELECT s.b FROM posts CROSS JOIN LATERAL (SELECT b FROM u WHERE u.a = posts.id LIMIT 1) AS s")
    assert lateral == tree("SELECT s.b FROM posts CROSS APPLY (SELECT TOP 1 b FROM u WHERE u.a = posts.id) s", "tsql")
    assert "((u.a)(posts.id)Eq)" in lateral
    # rows numbered WITH ORDINALITY (from 1), BigQuery's WITH OFFSET (from 0): a column of their own
    numbered = tree("SELECT tag, k FROM posts, unnest(posts.tags) WITH ORDINALITY AS u(tag, k)")
    assert numbered == "((derived.tag)(derived.k)((posts)(((posts.tags)Unnest)Ordinality)Product)Project)"
    assert numbered == tree("SELECT u.tag, u.k FROM posts, unnest(tags) WITH ORDINALITY AS u(tag, k)", "duckdb")
    assert tree("SELECT k, n FROM generate_series(1, 3) WITH ORDINALITY AS g(k, n)") == \
        "((derived.k)(derived.n)(((1)(3)Generate_series)Ordinality)Project)"
    assert tree("SELECT g, ordinality FROM generate_series(1, 3) WITH ORDINALITY AS g") == \
        "((derived.g)(derived.ordinality)(((1)(3)Generate_series)Ordinality)Project)"  # unnamed: `ordinality`
    offset = tree("SELECT tag, pos FROM posts, UNNEST(posts.tags) AS tag WITH OFFSET AS pos", "bigquery")
    assert offset == "((derived.tag)(derived.pos)((posts)(((posts.tags)Unnest)With_offset)Product)Project)"
    # Snowflake's TABLE(FLATTEN(..)) is FLATTEN(..), with FLATTEN's columns
    flattened = tree("SELECT f.value FROM posts, LATERAL FLATTEN(input => posts.tags) f", "snowflake")
    assert flattened.startswith("((derived.value)")
    assert flattened == tree("SELECT f.value FROM posts, TABLE(FLATTEN(input => posts.tags)) AS f", "snowflake")
    # OUTER APPLY keeps the rows the subquery has none for: LEFT JOIN LATERAL .. ON TRUE
    outer = tree("SELECT s.b FROM posts LEFT JOIN LATERAL (SELECT b FROM u WHERE u.a = posts.id LIMIT 1) AS s ON TRUE")
    assert outer == tree("SELECT s.b FROM posts OUTER APPLY (SELECT TOP 1 b FROM u WHERE u.a = posts.id) s", "tsql")
    assert outer != lateral and "Left_join" in outer
    assert "((1)(2)Array)" in tree("SELECT x FROM unnest(ARRAY[1, 2]) AS x")


def test_ordered_aggregates_regexes_conversions_and_groupings():
    schema = {"orders": ["id", "status", "amount", "tags"], "posts": ["id", "tags"]}

    def tree(sql, dialect="postgres"):
        return rat.to_tree(sql, schema, dialect=dialect)

    # an aggregate's ordering is its last arguments, however the dialect writes it
    ordered = tree("SELECT array_agg(status ORDER BY amount DESC) FROM orders")
    assert ordered == tree("SELECT ARRAY_AGG(status) WITHIN GROUP (ORDER BY amount DESC) FROM orders", "snowflake")
    assert rat.serialize(ordered).startswith("(((orders.status)((orders.amount)Orderby_desc)Array_agg)")
    assert ordered != tree("SELECT array_agg(status ORDER BY amount) FROM orders")
    median = tree("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) FROM orders")
    assert "((0.5)((orders.amount)Orderby_asc)Percentile_cont)" in rat.serialize(median)
    concat = tree("SELECT GROUP_CONCAT(status ORDER BY id SEPARATOR '; ') FROM orders", "mysql")
    assert "((orders.status)((orders.id)Orderby_asc)('; ')Group_concat)" in rat.serialize(concat)
    first3 = tree("SELECT ARRAY_AGG(status ORDER BY amount LIMIT 3) FROM orders", "bigquery")  # BigQuery's
    assert "((orders.status)((orders.amount)Orderby_asc)((3)Limit)Array_agg)" in rat.serialize(first3)
    # case-insensitive regular expressions and SIMILAR TO are nodes of their own
    assert tree("SELECT id FROM orders WHERE status ~* '^a'") != tree("SELECT id FROM orders WHERE status ~ '^a'")
    assert tree("SELECT id FROM orders WHERE status !~* 'x'") == tree("SELECT id FROM orders WHERE NOT status ~* 'x'")
    assert "Not_similar_to" in rat.serialize(tree("SELECT id FROM orders WHERE status NOT SIMILAR TO 'a%'"))
    assert tree("SELECT id FROM posts WHERE tags @> ARRAY[1]") != tree("SELECT id FROM posts WHERE tags <@ ARRAY[1]")
    # SQL Server's CONVERT is CAST; with a style, it keeps it
    assert tree("SELECT CONVERT(int, amount) FROM orders", "tsql") == tree("SELECT CAST(amount AS INT) FROM orders")
    assert "((orders.amount)(23)(text)Convert)" in rat.serialize(tree("SELECT CONVERT(varchar, amount, 23) FROM orders", "tsql"))
    # ROLLUP keeps its order; it is not the plain GROUP BY
    rollup = tree("SELECT status, count(*) FROM orders GROUP BY ROLLUP (status, id)")
    assert rollup != tree("SELECT status, count(*) FROM orders GROUP BY ROLLUP (id, status)")
    assert rollup != tree("SELECT status, count(*) FROM orders GROUP BY status, id")
    assert "Grouping_sets" in rat.serialize(tree("SELECT status, count(*) FROM orders GROUP BY GROUPING SETS ((status), ())"))
    # Snowflake's FLATTEN with a named argument: its rows' columns are known
    flatten = tree("SELECT f.value FROM posts, LATERAL FLATTEN(input => posts.tags) f", "snowflake")
    named = next(n for n in flatten.postorder() if n.label == "Named")
    assert [rat.node_kind(c, named) for c in named.children] == ["column", "value"]
    assert flatten.children[0].label == "derived.value"
    for sql, dialect in [("SELECT EXTRACT(EPOCH FROM (amount - id)) FROM orders", "postgres"),
                         ("SELECT DATEDIFF(day, id, amount), CONVERT(varchar, amount, 23) FROM orders", "tsql"),
                         ("SELECT f.value FROM posts, LATERAL FLATTEN(input => posts.tags) f", "snowflake")]:
        assert rat.sql_spans(sql, tree(sql, dialect), schema, dialect).unmapped == 0, sql


def test_escape_star_exclude_with_ties_and_safe_calls_are_read():
    """`LIKE p ESCAPE '!'` (every dialect), `* EXCLUDE (a)` / BigQuery's `* EXCEPT (a)`, `WITH TIES`
    and `PERCENT` limits, BigQuery's `SAFE.f(x)`: read where the dialect has them, each node
    with its span (refused before)."""
    def tree(sql, dialect):
        return rat.to_tree(sql, SCHEMA, dialect=dialect)

    escaped = "SELECT name FROM singer WHERE name LIKE '50!%%' ESCAPE '!'"
    for dialect in sorted(rat.DIALECTS):
        assert "((((singer.name)('50!%%')Like)('!')Escape)(singer)Selection)" in rat.serialize(tree(escaped, dialect))
    assert tree(escaped, "sqlite") != tree("SELECT name FROM singer WHERE name LIKE '50!%%'", "sqlite")
    excluded = tree("SELECT * EXCLUDE (age) FROM singer", "duckdb")
    assert rat.serialize(excluded) == "(((*)(singer.age)Exclude)(singer)Project)"
    assert tree("SELECT * RENAME (age AS years) FROM singer", "snowflake") == tree("SELECT * FROM singer", "snowflake")
    assert excluded == tree("SELECT * EXCEPT (age) FROM singer", "bigquery") == \
        tree("SELECT * EXCLUDE (age) FROM singer", "snowflake") != tree("SELECT * FROM singer", "duckdb")
    assert "((singer.*)(singer.age)Exclude)" in rat.serialize(tree(
        "SELECT singer.*  EXCEPT (age), concert.year FROM singer JOIN concert USING (singer_id)", "bigquery"))
    ties = tree("SELECT name FROM singer ORDER BY age FETCH FIRST 3 ROWS WITH TIES", "postgres")
    assert ties.label == "Limit_with_ties" and rat.node_kind(ties) == "relation"
    assert ties == tree("SELECT TOP 3 WITH TIES name FROM singer ORDER BY age", "tsql") != \
        tree("SELECT name FROM singer ORDER BY age LIMIT 3", "postgres")
    assert tree("SELECT TOP 10 PERCENT name FROM singer ORDER BY age", "tsql").label == "Limit_percent"
    # against gold: a plain LIMIT 3 is wrong in its operator, not its count; a column excluded
    # from `*` is not the column selected
    assert rat.label_nodes(tree("SELECT name FROM singer ORDER BY age LIMIT 3", "postgres"), ties) == [1] * 6 + [0]
    assert rat.label_nodes(tree("SELECT age FROM singer", "duckdb"), excluded) == [0, 1, 0]
    assert tree("SELECT SAFE.SUBSTR(name, 1, 2), SAFE.LOG(age) FROM singer", "bigquery") == \
        tree("SELECT SUBSTR(name, 1, 2), LOG(age) FROM singer", "bigquery")
    for sql, dialect in [(escaped, "postgres"), ("SELECT * EXCLUDE (age) FROM singer", "duckdb"),
                         ("SELECT singer.* EXCEPT (age) FROM singer", "bigquery"),
                         ("SELECT TOP 10 PERCENT WITH TIES name FROM singer ORDER BY age", "tsql"),
                         ("SELECT SAFE.SUBSTR(name, 1, 2) FROM singer", "bigquery")]:
        spans = rat.sql_spans(sql, tree(sql, dialect), SCHEMA, dialect)
        assert spans.unmapped == 0 and None not in spans.spans, sql


def test_star_replace_is_the_stars_columns_with_one_replaced():
    """DuckDB's, Snowflake's and BigQuery's `* REPLACE (f(a) AS a)` (after an EXCLUDE too) is
    `Star_replace(*, Named(f(t.a), a))`, each node with its span; `replace(..)` the function is
    as it was; the replaced column's value is what tells two such queries apart."""
    def tree(sql, dialect="duckdb"):
        return rat.to_tree(sql, SCHEMA, dialect=dialect)

    replaced = "SELECT * REPLACE (upper(name) AS name) FROM singer"
    assert rat.serialize(tree(replaced)) == "(((*)(((singer.name)Upper)(name)Named)Star_replace)(singer)Project)"
    assert tree(replaced) == tree(replaced, "bigquery") == tree(replaced.replace("name)", "NAME)"), "snowflake")
    assert tree(replaced) != tree("SELECT * FROM singer") and \
        tree(replaced) != tree("SELECT * REPLACE (lower(name) AS name) FROM singer")
    both = "SELECT s.* EXCLUDE (age) REPLACE (upper(s.name) AS name, s.singer_id + 1 AS singer_id) FROM singer s"
    assert rat.serialize(tree(both)).startswith("((((singer.*)(singer.age)Exclude)(((singer.name)Upper)(name)Named)")
    assert rat.serialize(tree("SELECT replace(name, 'a', 'b') FROM singer")) == \
        "(((singer.name)('a')('b')Replace)(singer)Project)"
    for dialect in ("sqlite", "duckdb"):  # a multiplication by replace(..) is no star's
        assert "(((singer.age)((singer.name)('a')('b')Replace)Mul)" in rat.serialize(
            tree("SELECT age * replace(name, 'a', 'b') FROM singer", dialect))
    for sql, dialect in [(replaced, "duckdb"), (both, "duckdb"), (both.replace("EXCLUDE", "EXCEPT"), "bigquery"),
                         ('SELECT * REPLACE (age + 1 AS "Age") FROM singer', "snowflake")]:
        spans = rat.sql_spans(sql, tree(sql, dialect), SCHEMA, dialect)
        assert spans.unmapped == 0 and None not in spans.spans, sql
    named = rat.sql_spans(replaced, tree(replaced), SCHEMA, "duckdb")
    assert [named.text(i) for i in range(4)] == ["*", "singer.name", "upper(singer.name)", "name"]


def test_a_natural_join_is_the_join_using_the_columns_both_tables_have():
    schema = {"t": ["a", "b", "x"], "s": ["a", "c", "x"], "u": ["d"]}

    def tree(sql, dialect="sqlite"):
        return rat.to_tree(sql, schema, dialect=dialect)

    for dialect in ("sqlite", "postgres", "mysql"):
        assert tree("SELECT b FROM t NATURAL JOIN s", dialect) == tree("SELECT b FROM t JOIN s ON t.a = s.a AND s.x = t.x")
        assert tree("SELECT b FROM t NATURAL LEFT JOIN s", dialect) == tree("SELECT b FROM t LEFT JOIN s USING (a, x)")
    assert tree("SELECT b FROM t NATURAL JOIN u") == tree("SELECT b FROM t CROSS JOIN u")  # no column shared
    assert tree("SELECT d FROM t JOIN s USING (a) NATURAL JOIN u") == tree("SELECT d FROM t JOIN s USING (a), u")
    for sql, read_with in [("SELECT b FROM t NATURAL JOIN s", None),
                           ("SELECT b FROM t NATURAL JOIN (SELECT a FROM s) AS q", schema),
                           ("SELECT b FROM t NATURAL JOIN nowhere", schema)]:
        with pytest.raises(rat.RATError, match="'NATURAL JOIN'"):
            rat.to_tree(sql, read_with)
    sql = "SELECT b FROM t NATURAL JOIN s"
    assert rat.sql_spans(sql, tree(sql), schema).unmapped == 0


@pytest.mark.parametrize("dialect, sql", [
    ("sqlite", "SELECT u.k FROM u LEFT JOIN ((t JOIN s ON t.a = s.a) JOIN t AS t2 ON t2.a = s.x) ON u.k = t.b"),
    ("postgres", "SELECT p.a FROM ((SELECT a FROM s) p JOIN t ON p.a = t.a) RIGHT JOIN u ON u.k = t.b"),
    ("postgres", "SELECT TRIM(LEADING 'x' FROM b), overlay(b PLACING 'y' FROM 2), E'\\n', a ^ 2, sqrt(a), a # 1 FROM t"),
    ("sqlite", "SELECT CASE a + 1 WHEN 2 THEN 'x' WHEN b = 1 THEN 'y' END, lag(b) OVER (ORDER BY a) FROM t"),
    ("snowflake", "SELECT DATE_PART('year', b), DATE_TRUNC(MONTH, b) FROM t"),
])
def test_rewritten_constructs_keep_their_text_and_read_back_alike(dialect, sql):
    """Each node of the constructs read another way (a join in parentheses, a RIGHT JOIN, TRIM(..
    FROM ..), a simple CASE, ..) has its canonical text, which reads back as the same tree."""
    schema = {"t": ["a", "b"], "s": ["a", "x"], "u": ["k"]}
    tree = rat.to_tree(sql, schema, dialect)
    assert rat.sql_spans(sql, tree, schema, dialect).unmapped == 0
    assert rat.to_tree(rat.canonicalize(sql, schema, dialect), schema, dialect) == tree


def test_a_named_window_is_the_window_written_out_and_each_node_has_its_text():
    """`OVER w` with `WINDOW w AS (..)` is the same tree as the window written out, its clauses'
    nodes the text of the WINDOW clause (the canonical text keeps it)."""
    schema = {"t": ["a", "b", "c"]}
    named = "SELECT a, sum(c) OVER w, avg(c) OVER w FROM t WINDOW w AS (PARTITION BY a ORDER BY b)"
    tree = rat.to_tree(named, schema, dialect="postgres")
    assert tree == rat.to_tree("SELECT a, sum(c) OVER (PARTITION BY a ORDER BY b), "
                               "avg(c) OVER (PARTITION BY a ORDER BY b) FROM t", schema, dialect="postgres")
    spans = rat.sql_spans(named, tree, schema, "postgres")
    assert spans.unmapped == 0 and None not in spans.spans
    texts = {n.label: spans.text(k) for k, n in enumerate(tree.postorder()) if n.label in ("Avg", "Partitionby")}
    assert texts == {"Avg": "avg(t.c)", "Partitionby": "partition by t.a"}
    assert spans.sql.endswith("window w as (partition by t.a order by t.b)")
    chained = "SELECT sum(c) OVER w2 FROM t WINDOW w AS (PARTITION BY a ROWS 2 PRECEDING), w2 AS (w ORDER BY b)"
    assert rat.to_tree(chained, schema, dialect="postgres") == rat.to_tree(
        "SELECT sum(c) OVER (PARTITION BY a ORDER BY b ROWS 2 PRECEDING) FROM t", schema, dialect="postgres")
    with pytest.raises(rat.RATError, match=r"window 'w' is defined in a loop \(w -> w2 -> w\)"):
        rat.to_tree("SELECT sum(c) OVER w FROM t WINDOW w AS (w2), w2 AS (w)", schema, dialect="postgres")
    with pytest.raises(rat.RATError, match="window 'v' is not defined"):
        rat.to_tree("SELECT sum(c) OVER w FROM t WINDOW w AS (v ORDER BY b)", schema, dialect="postgres")


def test_full_text_search_and_jsonb_keys_are_read():
    """MySQL's `MATCH (a) AGAINST ('x' [IN .. MODE])`, PostgreSQL's `v @@ q` (`Match_against`),
    SQLite's `docs MATCH 'x'` and PostgreSQL's jsonb `?`, `?|`, `?&` (refused before)."""
    schema = {"t": ["a", "b", "j", "docs", "q"]}

    def tree(sql, dialect):
        return rat.serialize(rat.to_tree(sql, schema, dialect=dialect))

    assert "((t.a)(t.b)('x')(boolean_mode)Match_against)" in tree(
        "SELECT a FROM t WHERE MATCH (a, b) AGAINST ('x' IN BOOLEAN MODE)", "mysql")
    assert "(((t.a)To_tsvector)(('x')To_tsquery)Match_against)" in tree(
        "SELECT a FROM t WHERE to_tsvector(a) @@ to_tsquery('x')", "postgres")
    assert "((t.docs)('x')Match)" in tree("SELECT a FROM t WHERE docs MATCH 'x'", "sqlite")
    assert "(((t.j)('k')Json_has_key)((t.j)(('a')('b')Array)Json_has_any_key)((t.j)(('c')Array)Json_has_all_keys)And)" \
        in tree("SELECT a FROM t WHERE j ? 'k' AND j ?| array['a', 'b'] AND j ?& array['c']", "postgres")
    sql = "SELECT MATCH (a) AGAINST ('x' IN NATURAL LANGUAGE MODE) AS s FROM t"
    read = rat.to_tree(sql, schema, dialect="mysql")
    match = next(n for n in read.postorder() if n.label == "Match_against")
    assert [rat.node_kind(c, match) for c in match.children] == ["column", "value", "value"]
    spans = rat.sql_spans(sql, read, schema, "mysql")
    assert spans.unmapped == 0 and None not in spans.spans
    assert spans.text(read.postorder().index(match.children[-1])) == "in natural language mode"


def test_ignore_nulls_time_zones_and_subscripts():
    def tree(sql, dialect):
        return rat.to_tree(sql, {"t": ["a", "b", "tags", "ts"]}, dialect=dialect)

    ignoring = tree("SELECT lag(a) IGNORE NULLS OVER (ORDER BY b) FROM t", "snowflake")
    assert ignoring != tree("SELECT lag(a) OVER (ORDER BY b) FROM t", "snowflake")
    assert "(((t.a)(1)Lag)Ignore_nulls)" in rat.serialize(ignoring)  # (lag(a) is lag(a, 1))
    assert tree("SELECT lag(a) RESPECT NULLS OVER (ORDER BY b) FROM t", "bigquery") == \
        tree("SELECT lag(a) OVER (ORDER BY b) FROM t", "bigquery")
    assert "((t.ts)('UTC')At_time_zone)" in rat.serialize(tree("SELECT ts AT TIME ZONE 'UTC' FROM t", "postgres"))
    # PostgreSQL counts from 1, BigQuery's OFFSET from 0: one element
    first = tree("SELECT tags[1] FROM t", "postgres")
    assert first == tree("SELECT tags[OFFSET(0)] FROM t", "bigquery") != tree("SELECT tags[2] FROM t", "postgres")
    spans = rat.sql_spans("SELECT tags[1] FROM t", first, {"t": ["a", "b", "tags", "ts"]}, "postgres")
    assert spans.unmapped == 0 and spans.text(1) == "1"


def test_pivots_are_an_aggregate_by_the_values_of_a_column():
    schema = {"orders": ["id", "region", "status", "amount"]}

    def tree(sql, dialect):
        return rat.serialize(rat.to_tree(sql, schema, dialect=dialect))

    pivot = "SELECT {} FROM orders PIVOT (SUM(amount) FOR status IN ('open', 'closed')) AS p"
    star = tree(pivot.format("*"), "snowflake")
    assert star == "((*)(((orders.amount)Sum)((orders.status)(('open')('closed')Val_list)In)(orders)Pivot)Project)"
    pivoted = rat.to_tree(pivot.format("*"), schema, "snowflake").children[1]
    assert [rat.node_kind(c, pivoted) for c in pivoted.children] == ["operator", "operator", "table"]
    assert star == tree(pivot.format("*"), "duckdb") == tree(pivot.format("*"), "bigquery")
    # its columns: the table's others (grouped by) and the values'; the pivoted ones are gone
    assert tree(pivot.format("p.region"), "snowflake").startswith("((derived.region)")
    assert tree(pivot.format("amount"), "duckdb").startswith("((amount)")
    # SQL Server's pivot of a subquery, its values named in brackets, is the same pivot
    subquery = "SELECT region FROM (SELECT region, status, amount FROM orders) AS s PIVOT (SUM(amount) FOR status IN ({})) AS p"
    assert tree(subquery.format("[open], [closed]"), "tsql") == tree(subquery.format("'open', 'closed'"), "duckdb")
    assert "((derived.status)(('open')('closed')Val_list)In)" in tree(subquery.format("[open], [closed]"), "tsql")
    spans = rat.sql_spans(pivot.format("p.region"), rat.to_tree(pivot.format("p.region"), schema, "snowflake"),
                          schema, dialect="snowflake")
    assert spans.unmapped == 0
    for dialect in ("sqlite", "postgres", "mysql"):  # which have no PIVOT
        with pytest.raises(rat.RATError, match="'PIVOT'"):
            rat.to_tree(pivot.format("*"), schema, dialect=dialect)
    # UNPIVOT: the unpivoted columns read the table; its rows' columns are the others and the two named
    unpivot = "SELECT {} FROM orders UNPIVOT (v FOR k IN (region, status)) AS u"
    unpivoted = tree(unpivot.format("u.id, u.k, u.v"), "snowflake")
    assert unpivoted == "((derived.id)(derived.k)(derived.v)((orders.region)(orders.status)(orders)Unpivot)Project)"
    assert unpivoted == tree(unpivot.format("id, k, v"), "duckdb") == tree(unpivot.format("id, k, v"), "bigquery") \
        == tree("SELECT id, k, v FROM orders UNPIVOT (v FOR k IN ([region], [status])) AS u", "tsql")
    assert tree(unpivot.format("amount"), "duckdb").startswith("((derived.amount)")
    assert tree(unpivot.format("region"), "duckdb").startswith("((region)")  # unpivoted: gone
    assert "Unpivot_include_nulls" in tree("SELECT * FROM orders UNPIVOT INCLUDE NULLS (v FOR k IN (region, status))",
                                           "snowflake")
    sql = unpivot.format("u.k, u.v")
    spans = rat.sql_spans(sql, rat.to_tree(sql, schema, "snowflake"), schema, dialect="snowflake")
    assert spans.unmapped == 0 and None not in spans.spans
    with pytest.raises(rat.RATError, match="'UNPIVOT'"):
        rat.to_tree(unpivot.format("*"), schema, dialect="postgres")


def test_a_table_sample_is_a_share_or_number_of_its_rows():
    """`TABLESAMPLE SYSTEM (10)` (PostgreSQL, DuckDB, BigQuery, SQL Server), Snowflake's `SAMPLE
    (10)` / `SAMPLE (100 ROWS)`: `Sample_percent(10, t)` / `Sample_rows(100, t)`, the method and
    seed not kept; refused in SQLite and MySQL."""
    sampled = rat.to_tree("SELECT name FROM singer TABLESAMPLE SYSTEM (10) WHERE age > 20", SCHEMA, dialect="postgres")
    assert rat.serialize(sampled) == \
        "((singer.name)(((singer.age)(20)Gt)((10)(singer)Sample_percent)Selection)Project)"
    assert sampled == rat.to_tree("SELECT name FROM singer SAMPLE (10) WHERE age > 20", SCHEMA, dialect="snowflake") \
        == rat.to_tree("SELECT name FROM singer TABLESAMPLE (10 PERCENT) WHERE age > 20", SCHEMA, dialect="tsql")
    assert "((100)(singer)Sample_rows)" in rat.serialize(
        rat.to_tree("SELECT name FROM singer SAMPLE (100 ROWS)", SCHEMA, dialect="snowflake"))
    sql = "SELECT name FROM singer TABLESAMPLE BERNOULLI (10) REPEATABLE (42)"
    spans = rat.sql_spans(sql, rat.to_tree(sql, SCHEMA, dialect="postgres"), SCHEMA, "postgres")
    assert spans.unmapped == 0 and None not in spans.spans and spans.text(2) == "singer"


def test_a_frames_exclude_is_its_last_leaf():
    """`EXCLUDE CURRENT ROW / GROUP / TIES` (SQLite, PostgreSQL, DuckDB): a leaf of the frame, with
    its text; `EXCLUDE NO OTHERS` is the default."""
    window = "SELECT sum(age) OVER (ORDER BY age RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW{}) FROM singer"
    ties = rat.to_tree(window.format(" EXCLUDE TIES"), SCHEMA)
    assert "((Unbounded_preceding)(Current_row)(Exclude_ties)Range)" in rat.serialize(ties)
    assert ties != rat.to_tree(window.format(""), SCHEMA) == rat.to_tree(window.format(" EXCLUDE NO OTHERS"), SCHEMA)
    current = window.format(" EXCLUDE CURRENT ROW")
    tree = rat.to_tree(current, SCHEMA, dialect="postgres")
    assert tree == rat.to_tree(current, SCHEMA, dialect="duckdb")
    spans = rat.sql_spans(current, tree, SCHEMA, "postgres")
    assert spans.unmapped == 0 and None not in spans.spans
    assert spans.text([n.label for n in tree.postorder()].index("Exclude_current_row")) == "exclude current row"


def test_asof_joins_are_read_where_the_dialect_has_them():
    """DuckDB's `ASOF [LEFT] JOIN .. ON k AND t >= s` (or `USING (k, t)`, its last column the
    inequality) and Snowflake's `ASOF JOIN .. MATCH_CONDITION (t >= s) ON k`, which keeps every
    left row (DuckDB's LEFT), are `Asof_[left_]join`."""
    schema = {"t": ["k", "ts", "a"], "s": ["k", "ts", "b"]}

    def tree(sql, dialect):
        return rat.to_tree(sql, schema, dialect=dialect)

    duck = "SELECT t.a, s.b FROM t ASOF {}JOIN s ON t.k = s.k AND t.ts >= s.ts"
    assert rat.serialize(tree(duck.format(""), "duckdb")) == \
        "((t.a)(s.b)((t)(s)(((t.k)(s.k)Eq)((t.ts)(s.ts)Gte)And)Asof_join)Project)"
    snowflake = "SELECT t.a, s.b FROM t ASOF JOIN s MATCH_CONDITION (t.ts >= s.ts) {}"
    assert tree(duck.format("LEFT "), "duckdb") == tree(snowflake.format("ON t.k = s.k"), "snowflake") == \
        tree(snowflake.format("USING (k)"), "snowflake")
    assert tree(duck.format("LEFT "), "duckdb").children[-1].label == "Asof_left_join"
    spans = rat.sql_spans(snowflake.format("ON t.k = s.k"), tree(snowflake.format("ON t.k = s.k"), "snowflake"),
                          schema, "snowflake")
    assert spans.unmapped == 0 and None not in spans.spans
    # DuckDB's USING (k, ts): the last column is the inequality
    assert tree("SELECT t.a, s.b FROM t ASOF JOIN s USING (k, ts)", "duckdb") == tree(duck.format(""), "duckdb")
    assert tree("SELECT t.a, s.b FROM t ASOF LEFT JOIN s USING (k, ts)", "duckdb") == tree(duck.format("LEFT "), "duckdb")
    with pytest.raises(rat.RATError, match="'ASOF JOIN"):
        tree(duck.format(""), "postgres")


def test_rollups_semi_joins_national_strings_and_distinct_string_aggregates():
    schema = {"orders": ["id", "status", "region", "customer_id"], "customers": ["id"]}

    def tree(sql, dialect):
        return rat.to_tree(sql, schema, dialect=dialect)

    # MySQL's WITH ROLLUP, SQL Server's WITH CUBE: the ROLLUP / CUBE of the keys (not a plain GROUP BY)
    rollup = tree("SELECT status, region, count(*) FROM orders GROUP BY ROLLUP (status, region)", "postgres")
    assert tree("SELECT status, region, count(*) FROM orders GROUP BY status, region WITH ROLLUP", "mysql") == rollup
    assert tree("SELECT status, region, count(*) FROM orders GROUP BY status, region", "mysql") != rollup
    assert tree("SELECT status, count(*) FROM orders GROUP BY status WITH CUBE", "tsql") == \
        tree("SELECT status, count(*) FROM orders GROUP BY CUBE (status)", "tsql")
    # DuckDB's SEMI / ANTI JOIN keep the left rows with / without a match: not an inner join
    on = "orders o {} customers c ON c.id = o.customer_id"
    inner, semi, anti = (rat.serialize(tree(f"SELECT o.id FROM {on.format(j)}", "duckdb"))
                         for j in ("JOIN", "SEMI JOIN", "ANTI JOIN"))
    assert "Semi_join" in semi and "Anti_join" in anti and "Product" in inner
    assert anti == rat.serialize(tree(f"SELECT o.id FROM {on.format('LEFT ANTI JOIN')}", "duckdb"))
    with pytest.raises(rat.RATError, match="'SEMI JOIN'"):
        tree(f"SELECT o.id FROM {on.format('SEMI JOIN')}", "snowflake")
    # SQL Server's N'..' is the string
    assert tree("SELECT id FROM orders WHERE status = N'paid'", "tsql") == \
        tree("SELECT id FROM orders WHERE status = 'paid'", "tsql")
    # string_agg(DISTINCT x, sep): DISTINCT x, [its ordering,] then the separator (was one DISTINCT of
    # both, unmapped)
    for sql in ("SELECT string_agg(DISTINCT status, ', ') FROM orders",
                "SELECT string_agg(DISTINCT status, ', ' ORDER BY status) FROM orders"):
        distinct = tree(sql, "postgres")
        assert rat.serialize(distinct).startswith("((((orders.status)Distinct)")
        assert "(', ')Group_concat)" in rat.serialize(distinct)
        assert rat.sql_spans(sql, distinct, schema, dialect="postgres").unmapped == 0


def test_intersect_all_and_except_all_keep_duplicates():
    def tree(sql):
        return rat.to_tree(sql, SCHEMA, dialect="postgres")

    for operation in ("INTERSECT", "EXCEPT"):
        every, distinct = (tree(f"SELECT name FROM singer {operation}{k} SELECT name FROM singer WHERE age > 20")
                           for k in (" ALL", ""))
        assert every != distinct and every.label == operation.capitalize() + "_all"
    assert tree("SELECT country FROM singer INTERSECT ALL SELECT name FROM singer") == \
        tree("SELECT name FROM singer INTERSECT ALL SELECT country FROM singer")  # commutative, as INTERSECT


@pytest.mark.parametrize("dialect, parameter", [("postgres", "$1"), ("sqlite", "?"), ("sqlite", ":country"),
                                                ("tsql", "@country"), ("snowflake", ":country"), ("postgres", "%(country)s")])
def test_query_parameters_are_values(dialect, parameter):
    tree = rat.to_tree(f"SELECT name FROM singer WHERE country = {parameter}", SCHEMA, dialect=dialect)
    eq = tree.children[1].children[0]
    assert eq.label == "Eq" and eq.children[1].label == parameter
    assert rat.node_kind(eq.children[1], eq) == "value" and rat.kinds.is_parameter(parameter)


@pytest.mark.parametrize("parameter", ["?1", ":1", "?12", ":1a", "$1", "$abc", "$1a"])
def test_sqlite_numbered_and_dollar_parameters_are_values(parameter):
    """SQLite's `?NNN` and `:NNN` (sqlglot reads a `?` or `:` and then a number) and `$AAAA` (a
    name to sqlglot's SQLite tokenizer), with a schema and without: the parameter as written, a
    value, at its own text in the canonical SQL; as a name (`AS ?1`, `t.$1`) refused, as SQLite
    refuses it."""
    sql = f"SELECT name FROM singer WHERE age > {parameter} AND country = ?"
    for schema in (SCHEMA, None):
        tree = rat.to_tree(sql, schema)
        nodes = list(tree.postorder())
        k = next(k for k, node in enumerate(nodes) if node.label == "Gt")
        assert nodes[k].children[1].label == parameter, (schema, tree)
        assert rat.node_kind(nodes[k].children[1], nodes[k]) == "value"
        spans = rat.sql_spans(sql, tree, schema)
        assert spans.unmapped == 0 and spans.sql[slice(*spans.spans[k - 1])] == parameter
    assert rat.to_tree(f"SELECT {parameter}, {parameter}").children[:2] == (rat.Node(parameter),) * 2
    for refused in (f"SELECT name AS {parameter} FROM singer", f"SELECT singer.{parameter} FROM singer"):
        with pytest.raises(rat.RATError):
            rat.to_tree(refused)


@pytest.mark.parametrize("parameter", ["$1", "$abc"])
def test_a_sqlite_dollar_parameter_wins_over_a_column_of_its_name(parameter):
    """Even where a table has a column named `$1`, SQLite reads an unquoted `$1` as the parameter;
    `"$1"` quoted is the column; `FROM $1` and `$a(1)` (a Tcl parameter so named) are refused."""
    named = rat.Schema({"t": [parameter, "a"]})
    assert rat.to_tree(f"SELECT {parameter} FROM t", named).children[0] == rat.Node(parameter)
    assert rat.to_tree(f'SELECT "{parameter}" FROM t', named).children[0] == rat.Node(f"t.{parameter}")
    for refused in (f"SELECT * FROM {parameter}", f"SELECT {parameter}(1)"):
        with pytest.raises(rat.RATError):
            rat.to_tree(refused)


def test_values_lists_are_rows():
    schema = {"t": ["a", "b"]}

    def tree(sql, dialect="postgres"):
        return rat.to_tree(sql, schema, dialect=dialect)

    inline = tree("SELECT t.b, m.label FROM t JOIN (VALUES (1, 'x'), (2, 'y')) AS m(id, label) ON m.id = t.a")
    assert "(((1)('x')Tuple)((2)('y')Tuple)Values)" in rat.serialize(inline)
    assert "(derived.label)" in rat.serialize(inline)
    assert inline != tree("SELECT t.b, m.label FROM t JOIN (VALUES (1, 'x'), (2, 'z')) AS m(id, label) ON m.id = t.a")
    # unnamed, SQLite's and PostgreSQL's columns are column1, column2, ...
    assert tree("SELECT column2 FROM (VALUES (1, 'a'))", "sqlite").children[0].label == "derived.column2"
    # x IN (VALUES (1), (2)) and BigQuery's x IN UNNEST([1, 2]) are x IN (1, 2)
    listed = tree("SELECT a FROM t WHERE a IN (1, 2)")
    assert tree("SELECT a FROM t WHERE a IN (VALUES (1), (2))") == listed
    assert tree("SELECT a FROM t WHERE a IN UNNEST([1, 2])", "bigquery") == listed
    assert "((t.b)Unnest)Not_in" in rat.serialize(tree("SELECT a FROM t WHERE a NOT IN UNNEST(t.b)", "bigquery"))
    spans = rat.sql_spans("SELECT column2 FROM (VALUES (1, 'a'))", tree("SELECT column2 FROM (VALUES (1, 'a'))", "sqlite"),
                          schema, "sqlite")
    assert spans.unmapped == 0


# A construct of `rat.dialects.Dialect`'s fields, as Databricks, Trino and Redshift write it
NATIVE = {
    "distinct_on": "SELECT DISTINCT ON (country) name FROM singer ORDER BY country, age",
    "qualify": "SELECT name FROM singer QUALIFY row_number() OVER (ORDER BY age) = 1",
    "at_time_zone": "SELECT age AT TIME ZONE 'UTC' FROM singer",
    "json_operators": "SELECT name -> 'a' FROM singer",
    "pivot": "SELECT * FROM singer PIVOT (sum(age) FOR country IN ('x', 'y'))",
    "with_ties": "SELECT name FROM singer ORDER BY age FETCH FIRST 3 ROWS WITH TIES",
    "group_by_all": "SELECT country, count(*) FROM singer GROUP BY ALL",
    "order_by_all": "SELECT name, age FROM singer ORDER BY ALL",
    "star_exclude": "SELECT * EXCEPT (age) FROM singer",
    "star_replace": "SELECT * REPLACE (upper(name) AS name) FROM singer",
    "semi_join": "SELECT singer.name FROM singer LEFT SEMI JOIN concert ON singer.singer_id = concert.singer_id",
    "lateral": "SELECT singer.name, x.year FROM singer CROSS JOIN LATERAL (SELECT year FROM concert "
               "WHERE concert.singer_id = singer.singer_id) AS x",
    "ignore_nulls": "SELECT lag(age) IGNORE NULLS OVER (ORDER BY age) FROM singer",
    "table_sample": "SELECT name FROM singer TABLESAMPLE (10 PERCENT)",
    "frame_exclude": "SELECT sum(age) OVER (ORDER BY age ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING "
                     "EXCLUDE CURRENT ROW) FROM singer",
    "between_symmetric": "SELECT name FROM singer WHERE age BETWEEN SYMMETRIC 30 AND 20",
    "lateral_view": "SELECT singer.name, x FROM singer LATERAL VIEW explode(singer.name) v AS x",
    "using_sample": "SELECT name FROM singer USING SAMPLE 10%",
}


@pytest.mark.parametrize("dialect", ["databricks", "trino", "redshift"])
def test_databricks_trino_and_redshift_read_the_constructs_they_have(dialect):
    """Each construct is read where the dialect's field says it has it, and refused (one
    RATError) where it does not; their date formats, string positions and current time are
    SQLite's calls."""
    spec = rat.DIALECTS[dialect]
    for field, sql in NATIVE.items():
        try:
            rat.to_tree(sql, SCHEMA, dialect=dialect)
            read = True
        except rat.RATError:
            read = False
        assert read is bool(getattr(spec, field)), (dialect, field)
    native = {"databricks": "SELECT date_format(age, 'yyyy-MM-dd'), locate('a', name), now() FROM singer",
              "trino": "SELECT date_format(age, '%Y-%m-%d'), strpos(name, 'a'), now() FROM singer",
              "redshift": "SELECT to_char(age, 'YYYY-MM-DD'), charindex('a', name), getdate() FROM singer"}[dialect]
    assert rat.to_tree(native, SCHEMA, dialect=dialect) == rat.to_tree(
        "SELECT strftime('%Y-%m-%d', age), instr(name, 'a'), CURRENT_TIMESTAMP FROM singer", SCHEMA)


def test_a_concatenations_casts_to_a_string_of_any_length_are_its_arguments():
    """`concat(CAST(a AS VARCHAR), ..)` (sqlglot's Trino for SQLite's `a || ..`) is `a || ..`; a
    cast that can cut is kept: `VARCHAR(3)`, PostgreSQL's `CHAR`, SQL Server's `VARCHAR` (30)."""
    plain = rat.to_tree("SELECT name || age FROM singer", SCHEMA)
    for sql, dialect in [("SELECT concat(CAST(name AS VARCHAR), CAST(age AS VARCHAR)) FROM singer", "trino"),
                         ("SELECT name::text || age::varchar FROM singer", "postgres"),
                         ("SELECT CAST(name AS TEXT) || CAST(age AS TEXT) FROM singer", "sqlite")]:
        assert rat.to_tree(sql, SCHEMA, dialect=dialect) == plain, sql
    for sql, dialect in [("SELECT name::varchar(3) || age FROM singer", "postgres"),
                         ("SELECT name::char || age FROM singer", "postgres"),
                         ("SELECT concat(CAST(name AS VARCHAR), age) FROM singer", "tsql")]:
        assert "Cast" in rat.serialize(rat.to_tree(sql, SCHEMA, dialect=dialect)), sql


def test_duckdbs_using_sample_positional_join_and_named_arguments():
    """DuckDB's `USING SAMPLE` of a query samples its FROM clause's rows (before WHERE), `a
    POSITIONAL JOIN b` pairs rows by position, `f(a := 1)` names an argument as `=>` does; each
    node with its span."""
    def tree(sql, dialect="duckdb"):
        return rat.to_tree(sql, SCHEMA, dialect=dialect)

    sampled = "SELECT name FROM singer JOIN concert USING (singer_id) USING SAMPLE 10% WHERE age > 20"
    assert rat.serialize(tree(sampled)) == ("((singer.name)(((singer.age)(20)Gt)((10)((singer)(concert)((singer.singer_id)"
                                            "(concert.singer_id)Eq)Product)Sample_percent)Selection)Project)")
    assert tree("SELECT name FROM singer USING SAMPLE 10%") == tree("SELECT name FROM singer TABLESAMPLE 10%")
    paired = tree("SELECT singer.name, concert.year FROM singer POSITIONAL JOIN concert")
    assert "((singer)(concert)Positional_join)" in rat.serialize(paired)
    named = "SELECT struct_pack(a := age, b := 1) FROM singer"
    assert "(((singer.age)(a)Named)((1)(b)Named)Struct_pack)" in rat.serialize(tree(named))
    for sql in (sampled, "SELECT singer.name, concert.year FROM singer POSITIONAL JOIN concert", named):
        spans = rat.sql_spans(sql, tree(sql), SCHEMA, "duckdb")
        assert spans.unmapped == 0 and None not in spans.spans, sql
    with pytest.raises(rat.RATError, match="'SAMPLE'"):
        tree("SELECT name FROM singer USING SAMPLE 10%", "postgres")


def test_a_positional_joins_sides_are_relations():
    """DuckDB's `a POSITIONAL JOIN b` reads two relations (tables or joins), never two columns."""
    for sql, sides in [("SELECT * FROM singer POSITIONAL JOIN concert", ["table", "table"]),
                       ("SELECT singer.name FROM singer, concert POSITIONAL JOIN singer AS s2", ["relation", "table"])]:
        paired = next(n for n in rat.to_tree(sql, SCHEMA, dialect="duckdb").postorder()
                      if n.label == "Positional_join")
        assert rat.node_kind(paired) == "relation"
        assert [rat.node_kind(side, paired) for side in paired.children] == sides


def test_duckdbs_subscript_by_a_name_and_string_agg_are_a_field_and_group_concat():
    """DuckDB's `s['f']` and `struct_extract(s, 'f')` are the field `s.f` (a MAP's `m.k` is
    `m['k']` there too), a key that is no lowercase name stays a subscript (a MAP's keys keep
    their case); `string_agg(x, sep)` is `group_concat(x, sep)`, which DuckDB runs alike."""
    schema = rat.Schema({"people": ["id", "name", "address", "m"]})

    def tree(sql, dialect="duckdb"):
        return rat.to_tree(sql, schema, dialect=dialect)

    dotted = tree("SELECT address.city FROM people WHERE address.zip = '1'")
    for sql in ("SELECT address['city'] FROM people WHERE address['zip'] = '1'",
                "SELECT struct_extract(address, 'city') FROM people p WHERE p.address['zip'] = '1'"):
        assert tree(sql) == dotted
        assert rat.sql_spans(sql, tree(sql), schema, "duckdb").unmapped == 0
    assert rat.serialize(tree("SELECT address['city']['zip'] FROM people")) == \
        "((((people.address)(city)Field)(zip)Field)(people)Project)"
    assert rat.serialize(tree("SELECT m['City'] FROM people")) == "(((people.m)('City')Subscript)(people)Project)"
    assert tree("SELECT m['City'] FROM people") != tree("SELECT m['city'] FROM people")
    # elsewhere a subscript by a string is no field (PostgreSQL's jsonb, Trino's map)
    for dialect in ("postgres", "trino"):
        assert "Subscript" in rat.serialize(tree("SELECT address['city'] FROM people", dialect))
    concat = tree("SELECT string_agg(DISTINCT name, ', ' ORDER BY name) FROM people")
    assert concat == tree("SELECT group_concat(DISTINCT name, ', ' ORDER BY name) FROM people")
    assert "Group_concat" in rat.serialize(concat)
    # string_agg(x), with no separator (SQLite's needs one); Databricks' and MySQL's are not rat's to map
    for sql, dialect in [("SELECT string_agg(name) FROM people", "duckdb"),
                         ("SELECT string_agg(name, ',') FROM people", "databricks"),
                         ("SELECT string_agg(name, ',') FROM people", "mysql")]:
        assert "String_agg" in rat.serialize(tree(sql, dialect))
    # a binary string is no text: refused, as before
    with pytest.raises(rat.RATError, match="Introducer"):
        rat.to_tree("SELECT name FROM singer WHERE name = _binary'x'", SCHEMA, dialect="mysql")


def test_duckdb_runs_the_spellings_rat_reads_as_one_alike():
    """DuckDB itself gives one value for `s['f']`, `struct_extract(s, 'f')` and `s.f`, for a
    MAP's `m['k']` and `m.k` (and another for `m['K']`), for `string_agg` and `group_concat`."""
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.execute("CREATE TABLE p AS SELECT {'city': 'X'} AS s, MAP {'K': 1, 'k': 2} AS m, x "
                "FROM (VALUES ('a'), ('b')) v(x)")
    (row,) = con.execute("SELECT DISTINCT s['city'], struct_extract(s, 'city'), s.city, m['k'], m.k, m['K'] "
                         "FROM p").fetchall()
    assert row == ("X", "X", "X", 2, 2, 1)
    assert con.execute("SELECT string_agg(x, ';' ORDER BY x DESC), group_concat(x, ';' ORDER BY x DESC), "
                       "lcase('A'), ucase('a') FROM p").fetchall() == [("b;a", "b;a", "a", "A")]


def test_a_lateral_view_of_explode_is_the_join_with_unnest():
    """Databricks' `LATERAL VIEW explode(a) v AS x` is Trino's (and PostgreSQL's) `CROSS JOIN
    UNNEST(a) AS v(x)`, its `LATERAL VIEW OUTER` PostgreSQL's `LEFT JOIN LATERAL unnest(a) ..
    ON TRUE`; other generators are refused, naming them."""
    schema = rat.Schema({"events": ["id", "user_id", "tags"], "users": ["id", "name"]})
    view = ("SELECT e.id, u.name, tag FROM events e JOIN users u ON e.user_id = u.id "
            "LATERAL VIEW explode(e.tags) t AS tag WHERE tag = 'x'")
    unnest = ("SELECT e.id, u.name, tag FROM events e JOIN users u ON e.user_id = u.id "
              "CROSS JOIN UNNEST(e.tags) AS t(tag) WHERE tag = 'x'")
    assert rat.to_tree(view, schema, dialect="databricks") == rat.to_tree(unnest, schema, dialect="trino") == \
        rat.to_tree(unnest, schema, dialect="postgres")
    assert "((events.tags)Unnest)" in rat.serialize(rat.to_tree(view, schema, dialect="databricks"))
    # OUTER keeps the rows whose array is empty: PostgreSQL's LEFT JOIN LATERAL unnest(..) ON TRUE
    outer = rat.to_tree(view.replace("LATERAL VIEW", "LATERAL VIEW OUTER"), schema, dialect="databricks")
    left = unnest.replace("CROSS JOIN UNNEST(e.tags) AS t(tag)", "LEFT JOIN LATERAL unnest(e.tags) AS t(tag) ON TRUE")
    assert outer == rat.to_tree(left, schema, dialect="postgres") != rat.to_tree(view, schema, dialect="databricks")
    with pytest.raises(rat.RATError, match="^unsupported construct 'LATERAL VIEW posexplode'"):
        rat.to_tree("SELECT e.id FROM events e LATERAL VIEW posexplode(e.tags) t AS pos, tag", schema,
                    dialect="databricks")
    for dialect in sorted(set(rat.DIALECTS) - {"databricks"}):  # (sqlglot parses it in every dialect)
        with pytest.raises(rat.RATError, match=f"^unsupported construct 'LATERAL VIEW' \\({dialect} has none\\)"):
            rat.to_tree(view, schema, dialect=dialect)


STRUCTS = rat.Schema({"orders": ["id", "shipping", "items", "payload"], "shipping": ["id", "city"],
                      "events": ["name", "params"]})


@pytest.mark.parametrize("dialect, field, column", [
    # a column's field, the column qualified or not: its column a column of the schema
    *((dialect, "SELECT shipping.city FROM orders", "SELECT o.shipping.city FROM orders AS o")
      for dialect in ("bigquery", "duckdb", "databricks", "trino", "redshift")),
    # the table alias first: `t.c.f`, a schema's `s.t.c.f`
    *((dialect, "SELECT o.shipping.city FROM orders AS o", "SELECT sales.orders.shipping.city FROM sales.orders AS o")
      for dialect in ("bigquery", "duckdb", "databricks", "trino", "redshift")),
    # an element of an unnested array of structs, named by a column alias
    ("bigquery", "SELECT item.sku FROM orders AS o CROSS JOIN UNNEST(o.items) AS item",
     "SELECT item.sku FROM orders AS o, UNNEST(o.items) item"),
    ("databricks", "SELECT item.sku FROM orders o LATERAL VIEW explode(o.items) v AS item",
     "SELECT v.item.sku FROM orders o LATERAL VIEW explode(o.items) v AS item"),
    ("trino", "SELECT item.sku FROM orders o CROSS JOIN UNNEST(o.items) AS u(item)",
     "SELECT u.item.sku FROM orders o CROSS JOIN UNNEST(o.items) AS u(item)"),
])
def test_a_struct_columns_field_is_a_field_of_the_column(dialect, field, column):
    """`shipping.city` where `shipping` is no table in scope but a column of one is the field
    `city` of the column `orders.shipping`, never an unknown column `shipping.city`."""
    tree = rat.to_tree(field, STRUCTS, dialect)
    assert tree == rat.to_tree(column, STRUCTS, dialect)
    assert tree != rat.to_tree(field.replace("city", "zip").replace("sku", "qty"), STRUCTS, dialect)
    fields = [n for n in tree.postorder() if n.label == "Field"]
    assert fields and all([rat.node_kind(c, n) for c in n.children] == ["column", "value"] for n in fields)
    columns = {n.label for n in tree.postorder() if rat.node_kind(n) == "column"}
    assert columns <= {"orders.shipping", "orders.items", "derived.item"}
    spans = rat.sql_spans(field, tree, STRUCTS, dialect)
    assert spans.unmapped == 0
    assert spans.text(tree.postorder().index(fields[0].children[1])) in ("city", "sku")


def test_struct_fields_are_read_where_the_dialect_has_them():
    def tree(sql, dialect="bigquery"):
        return rat.serialize(rat.to_tree(sql, STRUCTS, dialect))

    assert tree("SELECT shipping.city, count(*) FROM orders GROUP BY shipping.city") == \
        "(((orders.shipping)(city)Field)((*)Count)(((orders.shipping)(city)Field)(orders)Groupby)Project)"
    # a field of a field, of an array's element, of Redshift's SUPER
    assert "(((derived.p)(value)Field)(text)Field)" in tree("SELECT p.value.text FROM events, UNNEST(params) p")
    assert "(((orders.items)(0)Subscript)(sku)Field)" in tree("SELECT items[OFFSET(0)].sku FROM orders")
    assert "(((orders.payload)(0)Subscript)(status)Field)" in tree("SELECT o.payload[0].status FROM orders o",
                                                                      "redshift")
    # s.a.b, `s` the alias of t: t's column a, its field b (in each dialect with fields)
    for dialect in ("bigquery", "duckdb", "databricks", "trino", "redshift"):
        assert rat.serialize(rat.to_tree("SELECT s.a.b FROM t AS s", {"t": ["a"]}, dialect)) == \
            "(((t.a)(b)Field)(t)Project)"
    # a table's name or alias wins over a column of that name (as in DuckDB, Databricks)
    assert "(shipping.city)" in tree("SELECT shipping.city FROM orders JOIN shipping ON orders.id = shipping.id")
    # `s.t.c`: a schema's table's column; a name neither table nor column keeps its reading
    assert tree("SELECT sales.orders.id FROM sales.orders") == "((orders.id)(orders)Project)"
    assert tree("SELECT nope.city FROM orders") == "((nope.city)(orders)Project)"
    # PostgreSQL's composite needs (c).f; Snowflake reads an OBJECT's fields with `:`
    for dialect in ("postgres", "snowflake", "sqlite", "mysql", "tsql"):
        assert "Field" not in rat.serialize(rat.to_tree("SELECT shipping.city FROM orders", STRUCTS, dialect))


DOC_ROWS = [("`DISTINCT ON (..)`", "distinct_on"), ("`QUALIFY`", "qualify"),
            ("a FROM item reading the ones before it", "lateral"), ("`IGNORE NULLS`", "ignore_nulls"),
            ("`AT TIME ZONE`", "at_time_zone"), ("`->` / `->>`", "json_operators"), ("`PIVOT` / `UNPIVOT`", "pivot"),
            ("`BETWEEN SYMMETRIC`", "between_symmetric"), ("`SEMI JOIN` / `ANTI JOIN`", "semi_join"),
            ("`GROUP BY ALL`", "group_by_all"), ("`ORDER BY ALL`", "order_by_all"),
            ("`* EXCLUDE (a)` / `* EXCEPT (a)`", "star_exclude"), ("`* REPLACE (f(a) AS a)`", "star_replace"),
            ("`WITH TIES`", "with_ties"),
            ("`TOP n PERCENT`", "limit_percent"), ("a frame's `EXCLUDE`", "frame_exclude"),
            ("jsonb's key tests `?`, `?\\|`, `?&`", "jsonb_keys"), ("`TABLESAMPLE`", "table_sample"),
            ("`ASOF JOIN`", "asof_join"), ("`LATERAL VIEW explode(..)`", "lateral_view"),
            ("a query's `USING SAMPLE`", "using_sample"), ("`POSITIONAL JOIN`", "positional_join"),
            ("a struct column's field, `c.f` / `t.c.f`", "struct_fields"),
            ("`CURRENT_TIMESTAMP` by another name", "now"),
            ("a bitwise XOR operator, `a ^ b` (PostgreSQL's `a # b`)", "bitwise_xor"), ("`a ILIKE 'x%'`", "ilike"),
            ("`a::int`", "cast_operator"), ("`LIMIT n`", "limit"), ("`FULL JOIN`", "full_join"),
            ("`NULLS FIRST` / `NULLS LAST`", "nulls_order"), ("`INTERSECT ALL` / `EXCEPT ALL`", "intersect_all"),
            ("`FETCH FIRST n ROWS ONLY`", "fetch_first"), ("`a <=> b`", "null_safe_eq"),
            ("a query that begins with its FROM, `FROM t`", "from_first"),
            ("a list that ends in a comma, `SELECT a, FROM t`", "trailing_comma")]


# Syntax sqlglot reads in every dialect, as each dialect with it writes it
EVERYWHERE = {
    "ilike": "SELECT name FROM singer WHERE name ILIKE 'a%'",
    "cast_operator": "SELECT age::int FROM singer",
    "limit": "SELECT name FROM singer ORDER BY age LIMIT 3",
    "full_join": "SELECT singer.name, concert.year FROM singer FULL OUTER JOIN concert "
                 "ON singer.singer_id = concert.singer_id",
    "nulls_order": "SELECT name FROM singer ORDER BY age DESC NULLS LAST",
    "intersect_all": "SELECT name FROM singer INTERSECT ALL SELECT name FROM singer WHERE age > 20",
    "fetch_first": "SELECT name FROM singer ORDER BY age FETCH FIRST 3 ROWS ONLY",
}


@pytest.mark.parametrize("dialect", sorted(rat.DIALECTS))
def test_syntax_the_database_would_refuse_is_refused_saying_what_it_writes(dialect):
    """ILIKE, `::`, LIMIT, FULL JOIN and NULLS FIRST / LAST are read where the dialect has them
    and refused (one RATError naming the construct, the dialect and what it writes instead)
    where its database would refuse the query; sqlglot parses each in every dialect."""
    spec = rat.DIALECTS[dialect]
    for field, sql in EVERYWHERE.items():
        sqlglot.parse_one(sql, read=dialect)
        if getattr(spec, field):
            rat.to_tree(sql, SCHEMA, dialect=dialect)
            continue
        with pytest.raises(rat.RATError, match=f"^unsupported construct '[A-Z: ]+' \\({dialect} has none: ") as refused:
            rat.to_tree(sql, SCHEMA, dialect=dialect)
        assert "\n" not in str(refused.value)
    # the spellings each has instead read as the tree the others give
    if not spec.limit:
        assert rat.to_tree("SELECT TOP 3 name FROM singer ORDER BY age", SCHEMA, dialect=dialect) == \
            rat.to_tree(EVERYWHERE["limit"], SCHEMA)
    if not spec.cast_operator:
        assert rat.to_tree("SELECT CAST(age AS INT) FROM singer", SCHEMA, dialect=dialect) == \
            rat.to_tree(EVERYWHERE["cast_operator"], SCHEMA, dialect="postgres")
    # a column named like the words is no construct
    rat.to_tree("SELECT nulls, first FROM t", dialect=dialect)
    if not spec.fetch_first:  # (each has LIMIT)
        assert rat.to_tree(EVERYWHERE["limit"], SCHEMA, dialect=dialect) == \
            rat.to_tree(EVERYWHERE["fetch_first"], SCHEMA, dialect="postgres")


@pytest.mark.parametrize("dialect", sorted(rat.DIALECTS))
def test_null_safe_equal_from_first_and_trailing_commas_only_where_the_dialect_has_them(dialect):
    """`a <=> b` (MySQL, Databricks), a query that begins with FROM (DuckDB, BigQuery) and a list
    ending in a comma (DuckDB: any list; Snowflake, BigQuery: the SELECT list) are read where the
    database reads them; elsewhere sqlglot reads them all the same and rat refuses them."""
    spec = rat.DIALECTS[dialect]
    null_safe = "SELECT name <=> country FROM singer"
    if spec.null_safe_eq:
        assert rat.to_tree(null_safe, SCHEMA, dialect=dialect) == \
            rat.to_tree("SELECT name IS NOT DISTINCT FROM country FROM singer", SCHEMA, dialect="postgres")
    else:
        with pytest.raises(rat.RATError, match=f"^unsupported construct '<=>' \\({dialect} has none: a IS "):
            rat.to_tree(null_safe, SCHEMA, dialect=dialect)
    star = rat.to_tree("SELECT * FROM singer", SCHEMA, dialect=dialect)
    for sql in ["FROM singer", "SELECT * FROM (FROM singer)", "WITH s AS (SELECT * FROM singer) FROM s"]:
        if spec.from_first:
            assert rat.to_tree(sql, SCHEMA, dialect=dialect).size() >= star.size()
        else:
            with pytest.raises(rat.RATError, match=f"^cannot parse \\(FROM before SELECT at line 1, col [0-9]+: {dialect}"):
                rat.to_tree(sql, SCHEMA, dialect=dialect)
    if dialect == "bigquery":  # a FROM first in its pipe syntax only
        assert rat.to_tree("FROM singer |> WHERE age > 1", SCHEMA, dialect=dialect).size() > star.size()
    # FROM inside a call or after IS DISTINCT is no query's
    rat.to_tree("SELECT name FROM singer WHERE (name IS DISTINCT FROM country) AND age > 1", SCHEMA, dialect=dialect)
    plain = rat.to_tree("SELECT name, age FROM singer ORDER BY age", SCHEMA, dialect=dialect)
    for sql, where in [("SELECT name, age, FROM singer ORDER BY age", "select"),
                       ("SELECT name, age FROM singer ORDER BY age,", "any")]:
        if spec.trailing_comma in (where, "any"):
            assert rat.to_tree(sql, SCHEMA, dialect=dialect) == plain
        else:
            with pytest.raises(rat.RATError, match="^cannot parse \\(nothing after ',' at line 1, col "):
                rat.to_tree(sql, SCHEMA, dialect=dialect)


def test_duckdb_reads_what_rat_reads_in_duckdb_and_sqlite_refuses():
    """DuckDB itself runs the FROM-first query and the trailing commas rat reads in DuckDB;
    SQLite refuses them, and the constructs rat refuses in SQLite."""
    import sqlite3

    duckdb = pytest.importorskip("duckdb")
    con, lite = duckdb.connect(), sqlite3.connect(":memory:")
    for db in (con, lite):
        db.execute("CREATE TABLE t (a INT, b INT)")
    for sql in ["FROM t", "SELECT a, FROM t", "SELECT a FROM t ORDER BY a,", "SELECT a FROM t,",
                "SELECT a FROM t INTERSECT ALL SELECT b FROM t", "SELECT a FROM t FETCH FIRST 1 ROWS ONLY"]:
        con.execute(sql).fetchall()
        rat.to_tree(sql, dialect="duckdb")
        with pytest.raises(sqlite3.OperationalError):
            lite.execute(sql)
        with pytest.raises(rat.RATError):
            rat.to_tree(sql)


def test_the_table_of_constructs_in_rat_md_is_the_dialects():
    """docs/rat.md's table of the constructs each dialect reads says what `rat.DIALECTS` holds,
    a row for every field of `rat.dialects.Dialect` that says whether a construct is read."""
    import dataclasses
    from pathlib import Path

    order = ["sqlite", "postgres", "mysql", "duckdb", "snowflake", "bigquery", "tsql", "databricks", "trino", "redshift"]

    def cell(value):
        return ("yes" if value else "—") if isinstance(value, bool) else (f"`{value}`" if value else "—")

    rows = [f"| {title} (`{field}`) | " + " | ".join(cell(getattr(rat.DIALECTS[d], field)) for d in order) + " |"
            for title, field in DOC_ROWS]
    doc = (Path(__file__).parents[1] / "docs" / "rat.md").read_text()
    assert "\n".join(rows) in doc
    described = {"name", "like_ignores_case", "unquoted_case", "double_quoted_strings"}  # (the table below it)
    described.add("concat_skips_nulls")  # (a line below that table, naming the dialects)
    assert "SQLite (3.44 on), PostgreSQL, SQL Server and DuckDB\n  (`Dialect.concat_skips_nulls`)" in doc
    assert sorted(d for d in order if rat.DIALECTS[d].concat_skips_nulls) == ["duckdb", "postgres", "sqlite", "tsql"]
    assert {f.name for f in dataclasses.fields(rat.dialects.Dialect)} == described | {field for _, field in DOC_ROWS}


def test_group_by_all_after_a_lone_star_is_the_distinct_rows_in_duckdb():
    """The equivalence the tree of `SELECT * .. GROUP BY ALL` rests on, asked of DuckDB itself."""
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1, 'a'), (1, 'a'), (1, 'b'), (NULL, 'b'), (NULL, 'b')) v(x, y)")
    grouped, distinct = (sorted(con.execute(sql).fetchall(), key=repr)
                         for sql in ("SELECT * FROM t GROUP BY ALL", "SELECT DISTINCT * FROM t"))
    assert grouped == distinct and len(grouped) == 3
    assert rat.to_tree("SELECT * FROM t GROUP BY ALL", dialect="duckdb") == \
        rat.to_tree("SELECT DISTINCT * FROM t", dialect="duckdb")


@pytest.mark.parametrize("dialect, one, other", [
    ("postgres", "SELECT id FROM o WHERE d IS NOT NULL", "SELECT id FROM o WHERE d IS NULL"),  # (negate was dropped)
    ("postgres", "SELECT id FROM o WHERE d NOTNULL", "SELECT id FROM o WHERE d ISNULL"),
    ("bigquery", "SELECT tags[ORDINAL(1)] FROM t", "SELECT tags[OFFSET(1)] FROM t"),  # ORDINAL counts from 1
    ("sqlite", "SELECT CAST(a AS BOOLEAN) FROM t", "SELECT CAST(a AS INTEGER) FROM t"),
    ("postgres", "SELECT CAST(a AS NUMERIC) FROM t", "SELECT CAST(a AS REAL) FROM t"),
    ("sqlite", "SELECT id FROM orders WHERE amount > (SELECT avg(amount) FROM orders o2 WHERE o2.region = orders.region)",
     "SELECT id FROM orders WHERE amount > (SELECT avg(amount) FROM orders o2 WHERE o2.region = o2.region)"),
    # two subqueries joined: the difference's sign (derived tables were named by position, joined as a set)
    ("postgres", "SELECT p.s - r.s FROM (SELECT sum(a) AS s FROM refunds) r JOIN (SELECT sum(a) AS s FROM pay) p ON TRUE",
     "SELECT r.s - p.s FROM (SELECT sum(a) AS s FROM pay) p JOIN (SELECT sum(a) AS s FROM refunds) r ON TRUE"),
    ("duckdb", "WITH p AS (SELECT sum(a) AS s FROM pay), r AS (SELECT sum(a) AS s FROM refunds) SELECT p.s - r.s FROM r, p",
     "WITH p AS (SELECT sum(a) AS s FROM pay), r AS (SELECT sum(a) AS s FROM refunds) SELECT r.s - p.s FROM r, p"),
    ("tsql", "SELECT 'Mr. ' + region FROM orders", "SELECT region + 'Mr. ' FROM orders"),  # strings joined in order
    ("sqlite", "SELECT id AS region FROM orders ORDER BY region || ''", "SELECT id AS region FROM orders ORDER BY id || ''"),
    ("sqlite", "SELECT id FROM orders WHERE like(region, 'a%')", "SELECT id FROM orders WHERE region LIKE 'a%'"),
    ("bigquery", "SELECT DIV(amount, 2) FROM orders", "SELECT amount / 2 FROM orders"),  # 3 against 3.5
    ("duckdb", "SELECT amount // 2 FROM orders", "SELECT amount / 2 FROM orders"),
    ("postgres", "SELECT region, id, count(*) FROM orders GROUP BY ROLLUP (region, id)",
     "SELECT region, id, count(*) FROM orders GROUP BY ROLLUP (id, region)"),  # other subtotals
    ("databricks", "SELECT date_format(d, 'YYYY') FROM t", "SELECT date_format(d, 'yyyy') FROM t"),  # week year
    ("sqlite", ("SELECT p.s - r.s FROM (SELECT sum(a) AS s FROM refunds) r, (SELECT sum(a) AS s FROM pay) p "
     "WHERE EXISTS (SELECT 1 FROM (SELECT b FROM u) d WHERE d.b = p.s)"),
     ("SELECT r.s - p.s FROM (SELECT sum(a) AS s FROM pay) p, (SELECT sum(a) AS s FROM refunds) r "
     "WHERE EXISTS (SELECT 1 FROM (SELECT b FROM u) d WHERE d.b = r.s)")),
    # a power, a bitwise XOR
    ("postgres", "SELECT amount ^ 2 FROM orders", "SELECT amount # 2 FROM orders"),
    ("mysql", "SELECT amount ^ 2 FROM orders", "SELECT power(amount, 2) FROM orders"),
    ("postgres", "SELECT TRIM(LEADING 'x' FROM region) FROM orders", "SELECT TRIM(TRAILING 'x' FROM region) FROM orders"),
    ("databricks", "SELECT trim(region, 'x') FROM orders", "SELECT trim(BOTH 'x' FROM region) FROM orders"),  # (trimStr first)
    *(("databricks", f"SELECT {name}(region, 'x') FROM orders", f"SELECT TRIM({side} 'x' FROM region) FROM orders")
      for name, side in (("ltrim", "LEADING"), ("rtrim", "TRAILING"))),
    ("sqlite", "SELECT * FROM orders o LEFT JOIN t ON o.id = t.id", "SELECT * FROM orders o RIGHT JOIN t ON o.id = t.id"),
    # a * lists the columns in the tables' order: b RIGHT JOIN a is no a LEFT JOIN b there
    *((dialect, f"SELECT {star} FROM orders o RIGHT JOIN t ON o.id = t.id",
       f"SELECT {star} FROM t LEFT JOIN orders o ON o.id = t.id")
      for dialect in ("sqlite", "postgres") for star in ("*", "o.*, t.k", "count(*), *")),
    ("postgres", "SELECT * FROM u JOIN (orders o RIGHT JOIN t ON o.id = t.id) ON u.k = t.k",
     "SELECT * FROM u JOIN (t LEFT JOIN orders o ON o.id = t.id) ON u.k = t.k"),
    ("postgres", "SELECT u.k FROM u LEFT JOIN (orders JOIN t ON orders.id = t.id) ON t.k = u.k",
     "SELECT u.k FROM u LEFT JOIN orders ON TRUE JOIN t ON orders.id = t.id AND t.k = u.k"),
    # random() called once, not once a WHEN
    ("sqlite", "SELECT CASE abs(random()) % 2 WHEN 0 THEN 'a' WHEN 1 THEN 'b' END FROM orders",
     "SELECT CASE WHEN abs(random()) % 2 = 0 THEN 'a' WHEN abs(random()) % 2 = 1 THEN 'b' END FROM orders"),
    *((dialect, f"SELECT CASE {call} WHEN 0 THEN 'a' WHEN 1 THEN 'b' END FROM orders",
       f"SELECT CASE WHEN {call} = 0 THEN 'a' WHEN {call} = 1 THEN 'b' END FROM orders")
      for dialect, call in (("sqlite", "hex(randomblob(1)) < '80'"), ("postgres", "nextval('s')"),
                            ("duckdb", "random(3)"), ("snowflake", "RANDOM(42)"), ("databricks", "rand(7) < 0.5"))),
    # CONCAT skips NULL arguments (SQLite 3.44's, PostgreSQL's, SQL Server's, DuckDB's), || gives NULL
    *((dialect, "SELECT concat(region, id) FROM orders", "SELECT region || id FROM orders")
      for dialect in ("sqlite", "postgres", "duckdb")),
    ("tsql", "SELECT region + ' ' + id FROM orders", "SELECT CONCAT(region, ' ') + id FROM orders"),
    # SQLite compares with the left operand's explicit collation where both have one
    ("sqlite", "SELECT id FROM orders WHERE region COLLATE NOCASE = 'x' COLLATE BINARY",
     "SELECT id FROM orders WHERE 'x' COLLATE BINARY = region COLLATE NOCASE"),
    ("sqlite", "SELECT id FROM orders WHERE region COLLATE NOCASE > 'W' COLLATE BINARY",
     "SELECT id FROM orders WHERE 'W' COLLATE BINARY < region COLLATE NOCASE"),
    # ... and once a BETWEEN, not once for each bound
    *((dialect, f"SELECT id FROM orders WHERE {call} {negated}BETWEEN 2 AND 5",
       f"SELECT id FROM orders WHERE {call} {'< 2 OR' if negated else '>= 2 AND'} {call} {'>' if negated else '<='} 5")
      for dialect, call in (("sqlite", "abs(random()) % 10"), ("mysql", "rand() * 10"), ("postgres", "nextval('s')"))
      for negated in ("", "NOT ")),
    ("postgres", "SELECT id FROM orders WHERE random() * 10 BETWEEN SYMMETRIC 2 AND 5",
     "SELECT id FROM orders WHERE random() * 10 BETWEEN 2 AND 5 OR random() * 10 BETWEEN 5 AND 2"),
    ("postgres", "SELECT lag(amount, 2) OVER (ORDER BY id) FROM orders", "SELECT lag(amount) OVER (ORDER BY id) FROM orders"),
    ("postgres", "SELECT date_trunc('month', d) FROM orders", "SELECT date_trunc('year', d) FROM orders"),
    # an unquoted date part is a column but in Snowflake and Redshift; date_part only where it is a function
    *((dialect, "SELECT date_part(year, d) FROM orders", "SELECT EXTRACT(year FROM d) FROM orders")
      for dialect in ("postgres", "duckdb", "databricks")),
    *((dialect, "SELECT date_part('year', d) FROM orders", "SELECT EXTRACT(year FROM d) FROM orders")
      for dialect in ("mysql", "tsql", "bigquery", "trino")),
    *((dialect, "SELECT date_trunc(month, d) FROM orders", "SELECT date_trunc('month', d) FROM orders")
      for dialect in ("postgres", "duckdb", "databricks", "trino")),
])
def test_queries_of_other_meanings_get_other_trees(dialect, one, other):
    """Pairs a probe of real-world SQL found read as one tree (a wrong query called right)."""
    schema = rat.Schema({"orders": ["id", "amount", "region"]})
    assert rat.to_tree(one, schema, dialect).hash != rat.to_tree(other, schema, dialect).hash


@pytest.mark.parametrize("dialect, one, other", [
    ("bigquery", "SELECT tags[ORDINAL(2)] FROM t", "SELECT tags[OFFSET(1)] FROM t"),
    ("postgres", "SELECT id FROM o WHERE NOT (d IS NOT NULL)", "SELECT id FROM o WHERE d IS NULL"),
    ("sqlite", "SELECT id FROM orders WHERE amount > (SELECT avg(amount) FROM orders o2 WHERE o2.region = orders.region)",
     "SELECT id FROM orders o WHERE amount > (SELECT avg(amount) FROM orders o2 WHERE o2.region = o.region)"),
    ("postgres", "SELECT p.s - r.s FROM (SELECT sum(a) AS s FROM refunds) r JOIN (SELECT sum(a) AS s FROM pay) p ON TRUE",
     "SELECT p.s - r.s FROM (SELECT sum(a) AS s FROM pay) p JOIN (SELECT sum(a) AS s FROM refunds) r ON TRUE"),
    ("duckdb", "WITH p AS (SELECT sum(a) AS s FROM pay), r AS (SELECT sum(a) AS s FROM refunds) SELECT p.s - r.s FROM r, p",
     "SELECT x.s - y.s FROM (SELECT sum(a) AS s FROM pay) x, (SELECT sum(a) AS s FROM refunds) y"),
    # CONCAT gives NULL where an argument is, as || does, in these (SQLite's, PostgreSQL's, .. skips NULLs)
    *((dialect, "SELECT CONCAT(region, id) FROM orders", "SELECT region || id FROM orders")
      for dialect in ("snowflake", "bigquery", "trino", "databricks", "redshift")),
    ("tsql", "SELECT region + ' ' + id FROM orders", "SELECT (region + ' ') + id FROM orders"),
    # the right operand's explicit collation is not the comparison's where the left has one (SQLite)
    ("sqlite", "SELECT id FROM orders WHERE region COLLATE NOCASE = 'x' COLLATE BINARY",
     "SELECT id FROM orders WHERE region COLLATE NOCASE = 'x'"),
    ("sqlite", "SELECT id FROM orders WHERE 'x' COLLATE BINARY = (region COLLATE NOCASE)",
     "SELECT id FROM orders WHERE region = 'x' COLLATE BINARY"),
    ("sqlite", "SELECT id FROM orders WHERE region COLLATE NOCASE = 'x'", "SELECT id FROM orders WHERE 'x' = region COLLATE NOCASE"),
    ("sqlite", "SELECT id FROM orders WHERE glob('a*', region)", "SELECT id FROM orders WHERE region GLOB 'a*'"),
    ("postgres", "SELECT id FROM orders WHERE id = ANY (ARRAY[1, 2])", "SELECT id FROM orders WHERE id IN (1, 2)"),
    ("sqlite", "SELECT id FROM orders WHERE NOT (amount > 10)", "SELECT id FROM orders WHERE amount <= 10"),
    ("postgres", "SELECT id FROM orders WHERE region IS DISTINCT FROM NULL", "SELECT id FROM orders WHERE region IS NOT NULL"),
    ("sqlite", "SELECT ifnull(amount, 0) FROM orders", "SELECT coalesce(amount, 0) FROM orders"),
    # (sqlglot reads `j -> 'a'` inside a call as a lambda)
    ("postgres", "SELECT lower(region -> 'a' ->> 'b') FROM orders", "SELECT lower((region -> 'a') ->> 'b') FROM orders"),
    ("postgres", "SELECT id FROM orders WHERE d > now() - INTERVAL '2 weeks'",
     "SELECT id FROM orders WHERE d > now() - INTERVAL '14 days'"),
    ("postgres", "SELECT id FROM orders WHERE id <> ALL (SELECT amount FROM orders)",
     "SELECT id FROM orders WHERE id NOT IN (SELECT amount FROM orders)"),
    ("postgres", "SELECT region, id, count(*) FROM orders GROUP BY GROUPING SETS ((region), (id))",
     "SELECT region, id, count(*) FROM orders GROUP BY GROUPING SETS ((id), (region))"),
    ("duckdb", "SELECT region, id, count(*) FROM orders GROUP BY CUBE (region, id)",
     "SELECT region, id, count(*) FROM orders GROUP BY CUBE (id, region)"),
    ("postgres", "SELECT rank() OVER (PARTITION BY region, id ORDER BY amount) FROM orders",
     "SELECT rank() OVER (PARTITION BY id, region ORDER BY amount) FROM orders"),
    ("tsql", "SELECT '5' + amount FROM orders", "SELECT amount + '5' FROM orders"),  # '5' is read as 5
    # the simple CASE is the searched one (`CASE x WHEN NULL` never matches, as `x = NULL` never holds)
    *((dialect, "SELECT CASE region WHEN 'a' THEN 1 WHEN NULL THEN 2 ELSE 0 END FROM orders",
       "SELECT CASE WHEN region = 'a' THEN 1 WHEN region = NULL THEN 2 ELSE 0 END FROM orders")
      for dialect in ("sqlite", "postgres", "mysql", "tsql")),
    # lag / lead: an offset of 1 and a NULL default, written or not
    ("sqlite", "SELECT lag(amount) OVER (ORDER BY id), lead(amount) OVER (ORDER BY id) FROM orders",
     "SELECT lag(amount, 1) OVER (ORDER BY id), lead(amount, 1, NULL) OVER (ORDER BY id) FROM orders"),
    ("postgres", "SELECT lag(amount) OVER (ORDER BY id) FROM orders", "SELECT lag(amount, 1, NULL) OVER (ORDER BY id) FROM orders"),
    # a date part in any case, quoted or (Snowflake) not; PostgreSQL's date_part is EXTRACT
    *((dialect, "SELECT date_trunc('month', d) FROM orders", "SELECT date_trunc('MONTH', d) FROM orders")
      for dialect in ("postgres", "duckdb", "redshift", "trino", "databricks")),
    ("snowflake", "SELECT DATE_TRUNC('MONTH', d), DATE_PART('year', d) FROM orders",
     "SELECT DATE_TRUNC(month, d), EXTRACT(YEAR FROM d) FROM orders"),
    *((dialect, "SELECT extract(year FROM d) FROM orders", "SELECT date_part('year', d) FROM orders")
      for dialect in ("postgres", "duckdb", "databricks", "redshift", "snowflake")),
    ("redshift", "SELECT date_part(year, d), date_trunc(month, d) FROM orders",
     "SELECT EXTRACT(year FROM d), date_trunc('MONTH', d) FROM orders"),
    # b RIGHT JOIN a is a LEFT JOIN b
    *((dialect, "SELECT o.id, t.k FROM orders o LEFT JOIN t ON o.id = t.id",
       "SELECT o.id, t.k FROM t RIGHT JOIN orders o ON o.id = t.id") for dialect in ("sqlite", "postgres", "mysql")),
    ("postgres", "SELECT orders.id, t.k FROM orders JOIN u ON TRUE LEFT JOIN t ON orders.id = t.id",
     "SELECT orders.id, t.k FROM t RIGHT JOIN (orders JOIN u ON TRUE) ON orders.id = t.id"),
    # a join in parentheses is the join written without them
    *((dialect, "SELECT * FROM (orders JOIN t ON orders.id = t.id) JOIN u ON t.k = u.k",
       "SELECT * FROM orders JOIN t ON orders.id = t.id JOIN u ON t.k = u.k") for dialect in ("sqlite", "postgres")),
    ("postgres", "SELECT u.k FROM u JOIN (orders o JOIN t ON o.id = t.id) ON t.k = u.k WHERE o.amount > 1",
     "SELECT u.k FROM orders o JOIN t ON o.id = t.id JOIN u ON t.k = u.k WHERE o.amount > 1"),
    ("mysql", "SELECT * FROM ((orders LEFT JOIN t ON orders.id = t.id) JOIN u ON t.k = u.k)",
     "SELECT * FROM orders LEFT JOIN t ON orders.id = t.id JOIN u ON t.k = u.k"),
    ("postgres", r"SELECT id FROM orders WHERE amount > 1 AND E'x\\y\n' = region",
     "SELECT id FROM orders WHERE amount > 1 AND 'x\\y\n' = region"),  # (a backslash, a line break)
    *(("databricks", f"SELECT {name}('x', region) FROM orders", f"SELECT TRIM({side} 'x' FROM region) FROM orders")
      for name, side in (("ltrim", "LEADING"), ("rtrim", "TRAILING"))),  # (Databricks' trimStr first)
    ("sqlite", "SELECT count(*) FROM orders o LEFT JOIN t ON o.id = t.id",
     "SELECT count(*) FROM t RIGHT JOIN orders o ON o.id = t.id"),
    ("mysql", "SELECT id FROM orders WHERE amount > 1 XOR region = 'a'", "SELECT id FROM orders WHERE region = 'a' XOR amount > 1"),
    # a date part as a string, or by a documented abbreviation (Snowflake's `m` is a minute, SQL Server's a month)
    *((dialect, "SELECT DATEADD('day', 7, d), DATEDIFF('month', d, e) FROM orders",
       "SELECT DATEADD(day, 7, d), DATEDIFF(month, d, e) FROM orders") for dialect in ("snowflake", "redshift")),
    ("snowflake", "SELECT DATEADD(d, 7, d), DATEDIFF(mm, d, e), DATEDIFF(m, d, e), DATE_TRUNC('mon', d) FROM orders",
     "SELECT DATEADD(day, 7, d), DATEDIFF(month, d, e), DATEDIFF(minute, d, e), DATE_TRUNC(month, d) FROM orders"),
    ("tsql", "SELECT DATEADD(dd, 7, d), DATEADD(yyyy, 1, d), DATEDIFF(mm, d, e), DATEDIFF(m, d, e), DATEPART(dw, d) FROM orders",
     ("SELECT DATEADD(day, 7, d), DATEADD(year, 1, d), DATEDIFF(month, d, e), DATEDIFF(month, d, e), "
      "DATEPART(weekday, d) FROM orders")),
    # Redshift's documented date-part abbreviations, a column of that name or not; Snowflake's ISO parts
    ("redshift", "SELECT DATEADD(d, 1, x), DATEADD(m, 1, x), DATEDIFF(mon, x, x) FROM t",
     "SELECT DATEADD(day, 1, x), DATEADD(minute, 1, x), DATEDIFF(month, x, x) FROM t"),
    ("snowflake", "SELECT DATE_PART(week_iso, x), DATE_PART(dow_iso, x) FROM t",
     "SELECT DATE_PART(weekiso, x), DATE_PART(dayofweekiso, x) FROM t"),
    # NULLS FIRST / LAST where it is the dialect's default order, or SQLite's (as sqlglot writes
    # SQLite's ORDER BY for PostgreSQL)
    ("sqlite", "SELECT id FROM orders ORDER BY amount NULLS FIRST, region DESC NULLS LAST", "SELECT id FROM orders ORDER BY amount, region DESC"),
    ("postgres", "SELECT id FROM orders ORDER BY amount NULLS LAST, region DESC NULLS FIRST", "SELECT id FROM orders ORDER BY amount, region DESC"),
    ("postgres", "SELECT id FROM orders ORDER BY amount NULLS FIRST, region DESC NULLS LAST", "SELECT id FROM orders ORDER BY amount, region DESC"),
    ("duckdb", "SELECT id FROM orders ORDER BY amount NULLS FIRST", "SELECT id FROM orders ORDER BY amount"),
    *((dialect, "SELECT id FROM orders ORDER BY amount NULLS LAST, region DESC NULLS LAST", "SELECT id FROM orders ORDER BY amount, region DESC")
      for dialect in ("duckdb", "trino")),
    ("databricks", "SELECT id FROM orders ORDER BY ALL DESC NULLS LAST", "SELECT id FROM orders ORDER BY id DESC"),
    ("databricks", "SELECT id, amount FROM orders ORDER BY ALL NULLS LAST",
     "SELECT id, amount FROM orders ORDER BY id NULLS LAST, amount NULLS LAST"),
    # SQLite: a double-quoted output alias (WHERE, GROUP BY) or outer query's column is that, not a string
    ("sqlite", 'SELECT region AS r, count(*) FROM orders WHERE "r" <> \'x\' GROUP BY "r"',
     "SELECT region AS r, count(*) FROM orders WHERE region <> 'x' GROUP BY region"),
    ("sqlite", 'SELECT id FROM orders WHERE EXISTS (SELECT 1 FROM t WHERE "Region" = \'x\')',
     "SELECT id FROM orders WHERE EXISTS (SELECT 1 FROM t WHERE orders.region = 'x')"),
    # SQLite: a type name with none of INT, CHAR, CLOB, TEXT, BLOB, REAL, FLOA, DOUB casts to NUMERIC
    ("sqlite", "SELECT CAST(amount AS STRING), CAST(region AS long), CAST(id AS VARBINARY(8)) AS string FROM orders",
     "SELECT CAST(amount AS NUMERIC), CAST(region AS NUMERIC), CAST(id AS NUMERIC(8)) AS string FROM orders"),
])
def test_the_same_query_written_otherwise_gets_the_same_tree(dialect, one, other):
    schema = rat.Schema({"orders": ["id", "amount", "region"], "t": ["id", "x", "d", "m"]})  # (d, m: date parts too)
    assert rat.to_tree(one, schema, dialect).hash == rat.to_tree(other, schema, dialect).hash


@pytest.mark.parametrize("dialect, one, other", [
    # a NULLS FIRST / LAST that puts NULLs elsewhere than the dialect does unasked and SQLite does
    ("sqlite", "SELECT id FROM orders ORDER BY amount NULLS LAST", "SELECT id FROM orders ORDER BY amount"),
    ("sqlite", "SELECT id FROM orders ORDER BY amount DESC NULLS FIRST", "SELECT id FROM orders ORDER BY amount DESC"),
    ("duckdb", "SELECT id FROM orders ORDER BY amount DESC NULLS FIRST", "SELECT id FROM orders ORDER BY amount DESC"),
    ("databricks", "SELECT id FROM orders ORDER BY ALL NULLS LAST", "SELECT id FROM orders ORDER BY ALL"),
    ("bigquery", "SELECT row_number() OVER (ORDER BY amount NULLS LAST) FROM orders",
     "SELECT row_number() OVER (ORDER BY amount) FROM orders"),
    # SQLite: a double-quoted alias is no string; STRING is NUMERIC, not TEXT
    ("sqlite", 'SELECT region AS r, count(*) FROM orders GROUP BY "r"',
     "SELECT region AS r, count(*) FROM orders GROUP BY 'r'"),
    ("sqlite", "SELECT CAST(amount AS STRING) FROM orders", "SELECT CAST(amount AS TEXT) FROM orders"),
])
def test_a_query_that_means_another_gets_another_tree(dialect, one, other):
    schema = rat.Schema({"orders": ["id", "amount", "region"]})
    assert rat.to_tree(one, schema, dialect).hash != rat.to_tree(other, schema, dialect).hash


@pytest.mark.parametrize("dialect, sql, construct", [

    ("snowflake", "SELECT * FROM o MATCH_RECOGNIZE (PARTITION BY id ORDER BY d PATTERN (x+) DEFINE x AS a > 1)",
     "MATCH_RECOGNIZE"),
    ("postgres", "SELECT r, count(*) FROM o GROUP BY r WITH TOTALS", "WITH TOTALS"),
    ("databricks", "SELECT a FROM t DISTRIBUTE BY a", "DISTRIBUTE BY"),
    ("databricks", "SELECT a FROM t CLUSTER BY a", "CLUSTER BY"),
    ("tsql", "SELECT a FROM t FOR JSON PATH", "FOR XML / FOR JSON"),
])
def test_a_clause_rat_would_drop_is_refused(dialect, sql, construct):
    """These clauses were dropped without a word: the query read as the one without them."""
    with pytest.raises(rat.RATError, match=re.escape(f"unsupported construct '{construct}'")):
        rat.to_tree(sql, dialect=dialect)


def test_concat_skipping_nulls_is_its_own_node_and_sql_servers_plus_after_it_joins_strings():
    """CONCAT skips NULL arguments in SQLite (3.44), PostgreSQL, SQL Server and DuckDB, where `a ||
    b` is NULL: `Concat_skip_nulls`, not `||`'s `Concat` (it was, in every dialect); SQL Server's
    `+` after one joins strings, as after `+`'s own."""
    for dialect in ("sqlite", "postgres", "duckdb", "tsql"):
        assert rat.serialize(rat.to_tree("SELECT concat(a, b) FROM t", dialect=dialect)) \
            == "(((t.a)(t.b)Concat_skip_nulls)(t)Project)"
    assert rat.serialize(rat.to_tree("SELECT CONCAT(a, ' ') + b FROM t", dialect="tsql")) \
        == "((((t.a)(' ')Concat_skip_nulls)(t.b)Concat)(t)Project)"
    assert rat.to_tree("SELECT concat(a, b) FROM t") == rat.to_tree("SELECT CONCAT(a, b) FROM t", dialect="postgres")


def test_a_column_read_through_a_star_is_the_subquerys_in_a_join_and_after_except():
    """A CTE of `SELECT *` (dbt's import CTE) has the columns of what it reads: one another FROM
    item also has is ambiguous, left as written (it was the other item's: `customers.customer_id`)."""
    schema = {"orders": ["order_id", "customer_id", "amount"], "customers": ["customer_id", "name"]}
    sql = ("WITH r AS (SELECT * FROM orders) SELECT customer_id, amount, name FROM r "
           "JOIN customers c ON r.customer_id = c.customer_id")
    assert rat.serialize(rat.to_tree(sql, schema, "snowflake")).startswith(
        "((customer_id)(derived.amount)(customers.name)")
    # BigQuery's * EXCEPT (a), Snowflake's * EXCLUDE (a): without a
    for dialect, star in (("bigquery", "* EXCEPT (amount)"), ("snowflake", "* EXCLUDE (amount)")):
        tree = rat.serialize(rat.to_tree(f"WITH r AS (SELECT {star} FROM orders) SELECT order_id, amount FROM r",
                                         schema, dialect))
        assert tree.startswith("((derived.order_id)(amount)")


def test_sql_servers_group_by_all_with_keys_is_refused():
    """SQL Server's `GROUP BY ALL a` keeps the groups its WHERE removes (their aggregates over no
    rows): not `GROUP BY a`, as it was read. (PostgreSQL's is: ALL is its default.)"""
    sql = "SELECT a, count(*) FROM t WHERE b > 1 GROUP BY ALL a"
    with pytest.raises(rat.RATError, match=r"^unsupported construct 'GROUP BY ALL <keys>' \(tsql: "):
        rat.to_tree(sql, dialect="tsql")
    assert rat.to_tree(sql, dialect="postgres") == rat.to_tree(sql.replace(" ALL", ""), dialect="postgres")
    rat.to_tree(sql.replace(" ALL", ""), dialect="tsql")


@pytest.mark.parametrize("dialect, one, other", [
    # Snowflake's TIMESTAMPDIFF, TIMEDIFF are DATEDIFF; TIMESTAMPADD, TIMEADD DATEADD (Databricks': with a unit)
    *(("snowflake", f"SELECT {name}(hour, d, e) FROM t", "SELECT DATEDIFF(hour, d, e) FROM t")
      for name in ("TIMESTAMPDIFF", "TIMEDIFF")),
    *(("snowflake", f"SELECT {name}(hour, 1, d) FROM t", "SELECT DATEADD(hour, 1, d) FROM t")
      for name in ("TIMESTAMPADD", "TIMEADD")),
    ("databricks", "SELECT timestampdiff(hour, d, e), timestampadd(day, 1, d) FROM t",
     "SELECT datediff(hour, d, e), dateadd(day, 1, d) FROM t"),
    # YEAR(d), MONTH(d), .. are EXTRACT(year FROM d) (SQL Server's DATEPART(year, d)), as DATE_PART is
    *((dialect, "SELECT YEAR(d), QUARTER(d), MONTH(d), DAY(d), HOUR(d), MINUTE(d) FROM t",
       ("SELECT EXTRACT(year FROM d), EXTRACT(quarter FROM d), EXTRACT(month FROM d), EXTRACT(day FROM d), "
        "EXTRACT(hour FROM d), EXTRACT(minute FROM d) FROM t")) for dialect in ("snowflake", "duckdb", "databricks", "trino")),
    ("snowflake", "SELECT YEAR(d) FROM t", "SELECT DATE_PART(year, d) FROM t"),
    ("mysql", "SELECT YEAR(d), MONTH(d), DAY(d) FROM t", "SELECT EXTRACT(YEAR FROM d), EXTRACT(MONTH FROM d), EXTRACT(DAY FROM d) FROM t"),
    ("tsql", "SELECT YEAR(d), MONTH(d), DAY(d) FROM t", "SELECT DATEPART(year, d), DATEPART(month, d), DATEPART(day, d) FROM t"),
    # DuckDB's countif is count_if; BigQuery's COUNTIF the count_if of the others
    ("duckdb", "SELECT countif(d > 1) FROM t", "SELECT count_if(d > 1) FROM t"),
    # named arguments in any order
    ("snowflake", "SELECT f.value FROM t, LATERAL FLATTEN(outer => true, input => t.d) f",
     "SELECT f.value FROM t, LATERAL FLATTEN(input => t.d, outer => true) f"),
])
def test_one_functions_other_names_and_argument_orders_get_its_tree(dialect, one, other):
    schema = {"t": ["d", "e"]}
    assert rat.to_tree(one, schema, dialect) == rat.to_tree(other, schema, dialect)
    assert rat.sql_spans(one, rat.to_tree(one, schema, dialect), schema, dialect).unmapped == 0


def test_count_if_is_one_function_across_dialects_and_some_calls_stay_their_own():
    schema = {"t": ["d", "e"]}
    assert rat.to_tree("SELECT COUNTIF(d > 1) FROM t", schema, "bigquery") == \
        rat.to_tree("SELECT COUNT_IF(d > 1) FROM t", schema, "snowflake")
    # a date part a function reads otherwise (Databricks' second(d) is whole seconds, EXTRACT's not)
    assert rat.to_tree("SELECT second(d) FROM t", schema, "databricks") != \
        rat.to_tree("SELECT EXTRACT(second FROM d) FROM t", schema, "databricks")
    # MySQL's two-argument DATEDIFF (days) is no TIMESTAMPDIFF; SQLite's trees are as they were
    assert rat.to_tree("SELECT DATEDIFF(d, e) FROM t", schema, "mysql") != \
        rat.to_tree("SELECT TIMESTAMPDIFF(day, d, e) FROM t", schema, "mysql")
    assert rat.serialize(rat.to_tree("SELECT year(d), countif(d) FROM t", schema)) == \
        "(((t.d)Year)((t.d)Countif)(t)Project)"


@pytest.mark.parametrize("dialect, apply, instead", [
    ("snowflake", "CROSS APPLY", "snowflake has none: , LATERAL (..) or JOIN LATERAL (..)"),
    ("snowflake", "OUTER APPLY", "snowflake has none: LEFT JOIN LATERAL (..) ON TRUE"),
    ("postgres", "CROSS APPLY", "postgres has none: , LATERAL (..) or JOIN LATERAL (..)"),
    ("bigquery", "CROSS APPLY", "bigquery has none"),
])
def test_cross_apply_where_the_dialect_has_none_is_refused_saying_what_it_writes(dialect, apply, instead):
    sql = f"SELECT s.b FROM t {apply} (SELECT b FROM u WHERE u.a = t.a) s"
    with pytest.raises(rat.RATError, match=f"^unsupported construct '{apply}' \\({re.escape(instead)}"):
        rat.to_tree(sql, dialect=dialect)
    with pytest.raises(rat.RATError, match=r"^unsupported construct 'LATERAL' \(tsql has none: CROSS APPLY"):
        rat.to_tree("SELECT s.b FROM t, LATERAL (SELECT b FROM u WHERE u.a = t.a) s", dialect="tsql")


@pytest.mark.parametrize("dialect, one, other", [
    # SQL Server's DATEPART(part, d) (YEAR(d) too) is EXTRACT(part FROM d), as everywhere else
    ("tsql", "SELECT DATEPART(year, d), DATEPART(mm, d), YEAR(d), DATEPART(qq, d), DATEPART(hour, d) FROM t",
     ("SELECT EXTRACT(YEAR FROM d), EXTRACT(MONTH FROM d), EXTRACT(YEAR FROM d), EXTRACT(QUARTER FROM d), "
      "EXTRACT(HOUR FROM d) FROM t")),
    # Snowflake's and Redshift's EXTRACT take the parts' abbreviations, as DATE_PART does
    ("snowflake", "SELECT EXTRACT(yy FROM d), EXTRACT(mm FROM d) FROM t", "SELECT DATE_PART('year', d), MONTH(d) FROM t"),
    ("redshift", "SELECT EXTRACT(yr FROM d) FROM t", "SELECT date_part(year, d) FROM t"),
    ("duckdb", "SELECT datepart('year', d) FROM t", "SELECT EXTRACT(year FROM d) FROM t"),  # (its alias of date_part)
    # ZEROIFNULL(x) is COALESCE(x, 0), NULLIFZERO(x) NULLIF(x, 0) (Snowflake; Databricks 16)
    *((dialect, "SELECT ZEROIFNULL(d), e / NULLIFZERO(d) FROM t", "SELECT COALESCE(d, 0), e / NULLIF(d, 0) FROM t")
      for dialect in ("snowflake", "databricks")),
    # the boolean aggregates: bool_or / bool_and by their other names
    ("postgres", "SELECT every(d) FROM t", "SELECT bool_and(d) FROM t"),
    ("trino", "SELECT every(d) FROM t", "SELECT bool_and(d) FROM t"),
    ("databricks", "SELECT some(d), any(d), every(e) FROM t", "SELECT bool_or(d), bool_or(d), bool_and(e) FROM t"),
    # an array's number of elements: Databricks' size is its cardinality, DuckDB's array_length of a list too
    ("databricks", "SELECT size(d) FROM t", "SELECT cardinality(d) FROM t"),
    ("duckdb", "SELECT array_length(d) FROM t", "SELECT cardinality(d) FROM t"),
    # REGEXP_LIKE(a, p) is `a REGEXP p` (MySQL, Snowflake: RLIKE too), `a RLIKE p` (Databricks), `a ~ p` (PostgreSQL)
    ("mysql", "SELECT d FROM t WHERE REGEXP_LIKE(d, 'x') AND NOT REGEXP_LIKE(e, 'y')",
     "SELECT d FROM t WHERE d REGEXP 'x' AND e NOT RLIKE 'y'"),
    ("snowflake", "SELECT d FROM t WHERE REGEXP_LIKE(d, 'x') OR RLIKE(e, 'y')", "SELECT d FROM t WHERE d REGEXP 'x' OR e RLIKE 'y'"),
    ("databricks", "SELECT d FROM t WHERE regexp_like(d, 'x')", "SELECT d FROM t WHERE d RLIKE 'x'"),
    ("postgres", "SELECT d FROM t WHERE regexp_like(d, 'x')", "SELECT d FROM t WHERE d ~ 'x'"),
])
def test_a_functions_other_spellings_in_a_dialect_get_one_tree(dialect, one, other):
    schema = {"t": ["d", "e"]}
    assert rat.to_tree(one, schema, dialect) == rat.to_tree(other, schema, dialect)
    assert rat.sql_spans(one, rat.to_tree(one, schema, dialect), schema, dialect).unmapped == 0


def test_one_function_under_each_dialects_name_is_one_tree_and_others_stay_apart():
    def tree(sql, dialect):
        return rat.serialize(rat.to_tree(sql, {"t": ["d", "e"]}, dialect))
    extract = "(((t.d)(year)Extract)(t)Project)"
    assert {tree("SELECT DATEPART(year, d) FROM t", "tsql"), tree("SELECT DATE_PART('year', d) FROM t", "snowflake"),
            tree("SELECT YEAR(d) FROM t", "mysql"), tree("SELECT EXTRACT(YEAR FROM d) FROM t", "postgres")} == {extract}
    assert {tree("SELECT BOOLOR_AGG(d) FROM t", "snowflake"), tree("SELECT bool_or(d) FROM t", "postgres"),
            tree("SELECT LOGICAL_OR(d) FROM t", "bigquery"), tree("SELECT bool_or(d) FROM t", "duckdb")} == \
        {"(((t.d)Bool_or)(t)Project)"}
    assert {tree("SELECT BOOLAND_AGG(d) FROM t", "snowflake"), tree("SELECT LOGICAL_AND(d) FROM t", "bigquery")} == \
        {"(((t.d)Bool_and)(t)Project)"}
    assert {tree("SELECT ARRAY_SIZE(d) FROM t", "snowflake"), tree("SELECT ARRAY_LENGTH(d) FROM t", "bigquery"),
            tree("SELECT cardinality(d) FROM t", "trino")} == {"(((t.d)Cardinality)(t)Project)"}
    # not the same: a week (SQL Server's DATEFIRST), PostgreSQL's array_length (NULL for an empty array),
    # Databricks' array_size (NULL for NULL where size gives -1), a match type, DuckDB's `len` (a string's too)
    assert tree("SELECT DATEPART(week, d) FROM t", "tsql") == "(((week)(t.d)Datepart)(t)Project)"
    assert tree("SELECT array_length(d, 1) FROM t", "postgres") != tree("SELECT cardinality(d) FROM t", "postgres")
    assert tree("SELECT array_size(d) FROM t", "databricks") != tree("SELECT size(d) FROM t", "databricks")
    assert tree("SELECT d FROM t WHERE REGEXP_LIKE(d, 'x', 'i')", "mysql") != tree("SELECT d FROM t WHERE d REGEXP 'x'", "mysql")
    assert tree("SELECT len(d) FROM t", "duckdb") != tree("SELECT cardinality(d) FROM t", "duckdb")
    # `x = ANY (..)` stays a comparison with each value in Databricks
    assert "Bool_or" not in tree("SELECT d FROM t WHERE d = ANY (SELECT e FROM t)", "databricks")


@pytest.mark.parametrize("dialect, sql", [
    ("snowflake", "SELECT d, BOOLOR_AGG(e), ARRAY_AGG(e), LISTAGG(e, ','), MEDIAN(e), COUNT_IF(e) FROM t GROUP BY ALL"),
    ("duckdb", "SELECT d, bool_or(e), list(e), string_agg(e, ','), count_if(e), median(e) FROM t GROUP BY ALL"),
    ("bigquery", "SELECT d, LOGICAL_OR(e), COUNTIF(e), ARRAY_AGG(e), ANY_VALUE(e) FROM t GROUP BY ALL"),
    ("databricks", "SELECT d, collect_list(e), any(e), some(e), every(e), percentile(e, 0.5) FROM t GROUP BY ALL"),
])
def test_group_by_all_leaves_out_every_aggregate_however_named(dialect, sql):
    """GROUP BY ALL groups by the expressions without an aggregate: any aggregate, not only those
    sqlglot types in SQLite (bool_or(e) was a key: `GROUP BY d, bool_or(e)`)."""
    schema = {"t": ["d", "e"]}
    assert rat.to_tree(sql, schema, dialect) == rat.to_tree(sql.replace("GROUP BY ALL", "GROUP BY d"), schema, dialect)


def test_group_by_all_over_a_function_not_known_to_aggregate_or_not_is_refused():
    with pytest.raises(rat.RATError, match=r"^unsupported construct 'GROUP BY ALL' with my_udf\(..\) "):
        rat.to_tree("SELECT d, my_udf(e) FROM t GROUP BY ALL", dialect="duckdb")
    # known to sqlglot as no aggregate: a key
    assert rat.to_tree("SELECT upper(d), count(*) FROM t GROUP BY ALL", dialect="duckdb") == \
        rat.to_tree("SELECT upper(d), count(*) FROM t GROUP BY upper(d)", dialect="duckdb")


@pytest.mark.parametrize("dialect", ["sqlite", "mysql", "duckdb", "snowflake", "bigquery", "databricks", "redshift"])
def test_group_by_all_or_distinct_with_keys_is_refused_where_the_dialect_has_no_such_quantifier(dialect):
    """`GROUP BY ALL a` (SQL Server's: another meaning) and `GROUP BY DISTINCT a` (PostgreSQL's,
    Trino's) were read as `GROUP BY a` in every dialect."""
    for quantifier in ("ALL", "DISTINCT"):
        with pytest.raises(rat.RATError, match=rf"^unsupported construct 'GROUP BY {quantifier} <keys>' \({dialect}"):
            rat.to_tree(f"SELECT a, count(*) FROM t GROUP BY {quantifier} a", dialect=dialect)


@pytest.mark.parametrize("dialect", ["postgres", "trino"])
def test_group_by_all_or_distinct_with_keys_is_read_where_it_is_a_set_quantifier(dialect):
    """PostgreSQL's and Trino's `GROUP BY ALL | DISTINCT <keys>`: ALL (the default) keeps repeated
    grouping sets, DISTINCT drops them, so that of plain keys is `GROUP BY <keys>`; DISTINCT of
    grouping sets, which may repeat (ROLLUP (a, b), ROLLUP (a)), is refused."""
    plain = rat.to_tree("SELECT a, count(*) FROM t GROUP BY a", dialect=dialect)
    for quantifier in ("ALL", "DISTINCT"):
        assert rat.to_tree(f"SELECT a, count(*) FROM t GROUP BY {quantifier} a", dialect=dialect) == plain
    rat.to_tree("SELECT a, count(*) FROM t GROUP BY ALL ROLLUP (a, b), ROLLUP (a)", dialect=dialect)
    with pytest.raises(rat.RATError, match=r"^unsupported construct 'GROUP BY DISTINCT' of grouping sets "):
        rat.to_tree("SELECT a, count(*) FROM t GROUP BY DISTINCT ROLLUP (a, b), ROLLUP (a)", dialect=dialect)


_EXISTS = "SELECT d FROM a WHERE EXISTS (SELECT {} FROM t WHERE t.d = a.d{})"


@pytest.mark.parametrize("dialect, aggregate", [
    ("postgres", "bool_or(e)"), ("postgres", "every(e)"), ("postgres", "array_agg(e)"),
    ("snowflake", "BOOLOR_AGG(e)"), ("snowflake", "LISTAGG(e, ',')"), ("snowflake", "MEDIAN(e)"),
    ("duckdb", "bool_or(e)"), ("duckdb", "list(e)"), ("bigquery", "LOGICAL_OR(e)"), ("bigquery", "COUNTIF(e)"),
    ("databricks", "any(e)"), ("databricks", "some(e)"), ("databricks", "collect_list(e)"),
    ("sqlite", "count(e)"), ("sqlite", "total(e)"),  # (SQLite's total: an aggregate sqlglot does not know)
    ("duckdb", "my_udf(e)"),  # a function not known to aggregate or not may
])
def test_exists_keeps_a_select_list_that_aggregates_however_named(dialect, aggregate):
    """`EXISTS (SELECT agg(e) FROM t WHERE c)` without GROUP BY has a row always: not the tree of
    `EXISTS (SELECT 1 FROM t WHERE c)` (bool_or(e), BOOLOR_AGG(e), ARRAY_AGG(e) .. were dropped as
    any SELECT list there is: only aggregates sqlglot types in SQLite were kept)."""
    schema = {"a": ["d"], "t": ["d", "e"]}
    assert rat.to_tree(_EXISTS.format(aggregate, ""), schema, dialect) != \
        rat.to_tree(_EXISTS.format("1", ""), schema, dialect)
    # grouped, it has a row where the plain query has one
    assert rat.to_tree(_EXISTS.format(aggregate, " GROUP BY t.d"), schema, dialect) == \
        rat.to_tree(_EXISTS.format("1", " GROUP BY t.d"), schema, dialect)


@pytest.mark.parametrize("dialect, expression", [
    ("postgres", "greatest(e, 1)"), ("mysql", "GREATEST(e, 1)"), ("snowflake", "LEAST(e, 1, 2)"),
    ("sqlite", "max(e, 1)"), ("duckdb", "upper(e)"), ("snowflake", "ZEROIFNULL(e)"),
])
def test_exists_drops_a_select_list_without_an_aggregate(dialect, expression):
    """The test reads the list as written: greatest(e, 1) is rat's max(e, 1) once canonicalised,
    which sqlglot reads in PostgreSQL as the aggregate max."""
    schema = {"a": ["d"], "t": ["d", "e"]}
    assert rat.to_tree(_EXISTS.format(expression, ""), schema, dialect) == \
        rat.to_tree(_EXISTS.format("1", ""), schema, dialect)
