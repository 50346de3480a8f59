"""Scoring SQL written for other databases: the shipped model reads PostgreSQL's ILIKE,
DISTINCT ON and :: casts and SQL Server's TOP through Scorer.score(dialect=...), rat-score
--dialect and rat-serve's per-query dialect, with a confidence for every node and a
look-here-first span in the SQL as written; SQLite's results are unchanged; an unknown dialect
is one line (exit 2, a 400)."""

import json
import subprocess
import sys

import numpy as np
import pytest
import sqlglot

from model.data.datasets import database_path, load_questions, load_schemas
from model.data.execution import sqlite_sql
from model.errors import UsageError
from model.scoring import RowError, Scorer
from model.synth.demo import demo_root
from tests.test_score_cli import ENV

DB = "supply_chain"
POSTGRES = ("SELECT DISTINCT ON (country) name, rating::int FROM suppliers WHERE name ILIKE 'a%' "
            "ORDER BY country, rating DESC")
TSQL = "SELECT TOP 5 [name] FROM products ORDER BY unit_price DESC"
WINDOWS = ("SELECT country, count(*) FILTER (WHERE rating > 3), avg(rating) OVER (ORDER BY country "
           "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM suppliers GROUP BY country LIMIT ALL")
NAMED = ("SELECT country, avg(rating) OVER w, max(rating) OVER w FROM suppliers GROUP BY country "
         "WINDOW w AS (ORDER BY country ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)")


@pytest.fixture(scope="module")
def scorer():
    return Scorer.pretrained()


@pytest.fixture(scope="module")
def demo():
    root = demo_root()
    return root, load_schemas(root)


def assert_scored(scored, sql: str, labels: set[str]) -> None:
    assert labels <= {n.label for n in scored.nodes}
    assert all(0.0 <= n.confidence <= 1.0 for n in scored.nodes)
    assert 0.0 < scored.query_confidence < 1.0
    look = scored.nodes[scored.look_here_first]
    assert look.span is not None and 0 <= look.span[0] < look.span[1] <= len(sql)
    assert sql[look.span[0]:look.span[1]] == look.text


@pytest.mark.parametrize("dialect, sql, labels", [
    ("postgres", POSTGRES, {"Distinct_on", "Ilike", "Cast", "integer"}),
    ("tsql", TSQL, {"Limit", "5", "Orderby_desc"}),
])
def test_other_dialects_score_against_the_demo_database(scorer, demo, dialect, sql, labels):
    root, schemas = demo
    scored = scorer.score(sql, "Which suppliers?", schema=schemas[DB], database=database_path(root, DB),
                          db_id=DB, dialect=dialect)
    assert_scored(scored, sql, labels)
    names = list(scorer.saved.features_)
    assert scored.features[0, names.index("exec_error")] == 0.0  # ran, as sqlglot writes it for SQLite
    with pytest.raises(Exception, match="DISTINCT ON|cannot parse|unsupported"):
        scorer.score(sql, schema=schemas[DB])  # read as SQLite, neither is SQL


def test_filters_frames_and_named_windows_score_and_run(scorer, demo):
    root, schemas = demo
    names = list(scorer.saved.features_)
    for sql in (WINDOWS, NAMED):
        scored = scorer.score(sql, "Suppliers per country?", schema=schemas[DB], db_id=DB,
                              database=database_path(root, DB), dialect="postgres")
        assert_scored(scored, sql, {"Rows", "Preceding", "Current_row"})
        assert scored.features[0, names.index("exec_error")] == 0.0  # ran, written for SQLite
        assert all(n.span is not None for n in scored.nodes)  # a named window's clauses: the WINDOW clause
        if sql is NAMED:
            assert [n.text for n in scored.nodes if n.label in ("Avg", "Max", "Rows")] == \
                ["avg(rating)", "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW", "max(rating)",
                 "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW"]
        else:
            assert "Filter" in {n.label for n in scored.nodes}


def test_sql_the_database_cannot_run_as_it_means_is_scored_without_its_result(scorer, demo):
    """Another dialect's SQL that sqlglot writes for SQLite as what SQLite cannot run (DuckDB's
    `* EXCLUDE`) or as another query (`WITH TIES` dropped) is not run: its result features are
    unknown, as without a database, not a failure to run; `execution_error` says why."""
    root, schemas = demo
    names = list(scorer.saved.features_)
    for sql, dialect in [("SELECT * EXCLUDE (city) FROM suppliers", "duckdb"),
                         ("SELECT name FROM suppliers ORDER BY rating FETCH FIRST 3 ROWS WITH TIES", "postgres")]:
        scored = scorer.score(sql, "Which suppliers?", schema=schemas[DB], database=database_path(root, DB),
                              dialect=dialect)
        assert scored.execution_error.startswith(f"not in the database's SQL: this {dialect} SQL cannot be written")
        assert np.isnan(scored.features[0, names.index("exec_error")])
        assert f"did not run on the database: {scored.execution_error}" in str(scored)
    ran = scorer.score("SELECT name FROM suppliers ORDER BY rating FETCH FIRST 3 ROWS ONLY", "Which suppliers?",
                       schema=schemas[DB], database=database_path(root, DB), dialect="postgres")
    assert ran.execution_error is None and ran.features[0, names.index("exec_error")] == 0.0


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_a_recursive_cte_scores_and_runs(scorer, demo, dialect):
    root, schemas = demo
    sql = ("WITH RECURSIVE r(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM r WHERE k < 5) "
           "SELECT r.k, count(s.supplier_id) FROM r LEFT JOIN suppliers AS s ON s.rating = r.k GROUP BY r.k")
    scored = scorer.score(sql, "How many suppliers have each rating from 1 to 5?", schema=schemas[DB],
                          database=database_path(root, DB), db_id=DB, dialect=dialect)
    assert_scored(scored, sql, {"Recursive", "Recursion", "Union_all", "Left_join"})
    assert all(n.span is not None for n in scored.nodes)
    assert scored.execution_error is None
    assert scored.features[0, list(scorer.saved.features_).index("exec_error")] == 0.0


def test_sqlite_is_written_unchanged_and_other_dialects_for_sqlite():
    assert sqlite_sql("SELECT name FROM t WHERE name LIKE 'a%'") == "SELECT name FROM t WHERE name LIKE 'a%'"
    assert "ROW_NUMBER()" in sqlite_sql(POSTGRES, "postgres")
    assert sqlite_sql(TSQL, "tsql").endswith("LIMIT 5")


def test_the_default_is_sqlite_and_a_rows_own_dialect_wins(scorer, demo):
    root, schemas = demo
    sql = "SELECT name FROM suppliers WHERE country = 'Poland'"
    row = {"sql": sql, "question": "Suppliers in Poland?", "db_id": DB, "schema": schemas[DB],
           "database": database_path(root, DB)}
    default, explicit, own = scorer.score_many([row, row, {**row, "dialect": "SQLite"}], progress=False,
                                               reasons=True)
    assert default.to_dict() == explicit.to_dict() == own.to_dict()
    assert default.to_dict() == scorer.score(sql, "Suppliers in Poland?", schema=schemas[DB],
                                             database=database_path(root, DB), db_id=DB).to_dict()
    pg = {**row, "sql": POSTGRES}
    wrong, right = scorer.score_many([pg, {**pg, "dialect": "postgres"}], progress=False)
    assert isinstance(wrong, RowError) and not isinstance(right, RowError)


def test_an_unknown_dialect_is_one_line(scorer):
    with pytest.raises(UsageError, match=r"^unknown dialect 'oracle' \(known: bigquery, databricks, duckdb"):
        scorer.score("SELECT 1", dialect="oracle")
    (bad,) = scorer.score_many([{"sql": "SELECT 1", "dialect": "oracle"}], progress=False)
    assert isinstance(bad, RowError) and bad.message.startswith("unknown dialect 'oracle'")


def test_sqlite_queries_transpiled_score_the_same_without_a_database(scorer, demo):
    root, schemas = demo
    questions = load_questions(root, "dev")[::20]
    for dialect in ("postgres", "tsql", "mysql"):
        rows = [{"sql": q.gold_sql, "question": q.question, "db_id": q.db_id, "schema": schemas[q.db_id]}
                for q in questions]
        moved = [{**r, "sql": sqlglot.transpile(r["sql"], read="sqlite", write=dialect)[0], "dialect": dialect}
                 for r in rows]
        for a, b in zip(*(scorer.score_many(x, progress=False, workers=1) for x in (rows, moved))):
            assert [n.label for n in a.nodes] == [n.label for n in b.nodes]
            assert max(abs(x.confidence - y.confidence) for x, y in zip(a.nodes, b.nodes)) <= 0.01


def rat_score(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "model.scoring.cli", *args], check=False,
                          capture_output=True, text=True, env=ENV, timeout=600)


def test_rat_score_dialect(demo):
    root, _ = demo
    done = rat_score("--data-root", str(root), "--db-id", DB, "--dialect", "postgres", "--sql", POSTGRES, "--json")
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)
    assert row["nodes"] and all(0 <= n["confidence"] <= 1 for n in row["nodes"])
    start, end = row["look_here_span"]
    assert 0 <= start < end <= len(POSTGRES)
    done = rat_score("--data-root", str(root), "--db-id", DB, "--dialect", "tsql", "--sql", TSQL)
    assert done.returncode == 0 and "Limit" in done.stdout and "look here first:" in done.stdout, done.stderr
    done = rat_score("--dialect", "oracle", "--sql", "SELECT 1")
    assert done.returncode == 2 and done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
    assert "--dialect: unknown dialect 'oracle' (known: bigquery" in done.stderr


def test_rat_serve_dialect_per_query_and_by_default(scorer, demo):
    from fastapi.testclient import TestClient

    from model.scoring.service import create_app

    root, schemas = demo
    client = TestClient(create_app(scorer, root, schemas, dialect="tsql"))
    answer = client.post("/score", json={"queries": [
        {"db_id": DB, "sql": POSTGRES, "dialect": "postgres"}, {"db_id": DB, "sql": TSQL}]})
    assert answer.status_code == 200, answer.text
    pg, ts = answer.json()["results"]
    assert "Distinct_on" in {n["label"] for n in pg["nodes"]} and "Limit" in {n["label"] for n in ts["nodes"]}
    for result, sql in ((pg, POSTGRES), (ts, TSQL)):
        assert result["look_here_span"] and result["look_here_span"][1] <= len(sql)
    bad = client.post("/score", json={"queries": [{"db_id": DB, "sql": TSQL}, {"sql": "SELECT 1", "dialect": "oracle"}]})
    assert bad.status_code == 400 and bad.json()["detail"].startswith("queries[1].dialect: unknown dialect 'oracle'")
    bad = client.post("/score", json={"sql": "SELECT 1", "dialect": ["postgres"]})
    assert bad.status_code == 400 and bad.json()["detail"].startswith("dialect: expected a string, found list")  # (one query: its own fields)
    done = subprocess.run([sys.executable, "-m", "model.scoring.service", "--dialect", "oracle"], check=False,
                          capture_output=True, text=True, env=ENV, timeout=120)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "--dialect: unknown dialect 'oracle'" in done.stderr


def test_quoted_mixed_case_names_are_found_and_pointed_at_where_written():
    from model import Scorer

    sql = 'SELECT "Full Name", "CamelCase" FROM "User" WHERE id = 3'
    scored = Scorer.pretrained().score(sql, question="the full name of user 3",
                                       schema={"User": ["id", "Full Name", "CamelCase"]}, dialect="postgres")
    written = {n.label: sql[n.span[0]:n.span[1]] for n in scored.nodes if n.span}
    assert written["user.full name"] == '"Full Name"' and written["user.camelcase"] == '"CamelCase"'
    assert written["user"] == '"User"'
    assert not [r for n in scored.nodes for r in n.reasons if "not in the schema" in r.text]


def test_a_struct_field_is_scored_as_a_field_of_its_column_not_a_column_missing_from_the_schema():
    """BigQuery's `shipping.city` (a STRUCT column's field) was the column leaf shipping.city,
    "not in the schema": a right query scored about 0.02."""
    from model import Scorer
    from model.data.databases import schema_from_ddl

    schema = schema_from_ddl("CREATE TABLE sales.orders (id INT64, shipping STRUCT<city STRING, zip STRING>, "
                             "items ARRAY<STRUCT<sku STRING, qty INT64>>)", "bigquery")
    for sql in ("SELECT shipping.city, COUNT(*) FROM sales.orders GROUP BY shipping.city",
                "SELECT item.sku FROM sales.orders AS o CROSS JOIN UNNEST(o.items) AS item"):
        scored = Scorer.pretrained().score(sql, question="orders per city", schema=schema, dialect="bigquery")
        assert not [r for n in scored.nodes for r in n.reasons if "not in the schema" in r.text], sql
        assert "Field" in {n.kind for n in scored.nodes} and scored.query_confidence > 0.1, sql


def test_sql_of_the_databases_own_dialect_read_as_sqlite_says_which_to_give(scorer, tmp_path):
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "shop.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE orders (id INTEGER, status TEXT)")
    sql = "SELECT DISTINCT ON (status) id FROM orders ORDER BY status"
    wrong, right, own = scorer.score_many([{"sql": sql, "database": path, "dialect": "sqlite"},
                                           {"sql": sql, "database": path, "dialect": "duckdb"},
                                           {"sql": sql, "database": path}], progress=False)
    assert isinstance(wrong, RowError) and wrong.message.endswith(
        "(read as sqlite SQL; the database is duckdb: dialect 'duckdb' reads its own)")
    assert not isinstance(right, RowError) and own.to_dict() == right.to_dict()
    # the same SQL on a SQLite file has nothing to add
    (plain,) = scorer.score_many([{"sql": sql, "database": demo_root() / "database" / DB / f"{DB}.sqlite"}],
                                 progress=False)
    assert isinstance(plain, RowError) and "read as" not in plain.message


def test_without_a_dialect_the_sql_is_read_in_the_databases_own(scorer, tmp_path):
    """A DuckDB file's LIKE tells case apart; read as SQLite's SQL the query would run as ILIKE
    there and find the row the user's own run will not."""
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "shop.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE singer (name TEXT, country TEXT)")
        conn.execute("INSERT INTO singer VALUES ('Ann', 'France'), ('Bob', 'Spain')")
    sql, question = "SELECT name FROM singer WHERE name LIKE 'a%'", "Singers whose name starts with a"
    own = scorer.score(sql, question=question, database=path)
    named = scorer.score(sql, question=question, database=path, dialect="duckdb")
    as_sqlite = scorer.score(sql, question=question, database=path, dialect="sqlite")
    assert own.dialect == "duckdb" and own.to_dict()["dialect"] == "duckdb"
    assert own.query_confidence == named.query_confidence != as_sqlite.query_confidence
    empty = list(scorer.saved.features_).index("exec_empty")
    assert own.features[-1, empty] == 1.0 and as_sqlite.features[-1, empty] == 0.0
    # rat-score: the file's dialect, none named; a JSONL row's own still wins
    done = subprocess.run([sys.executable, "-m", "model.scoring.cli", "--database", str(path), "--sql", sql,
                           "--question", question, "--json"], capture_output=True, text=True, env=ENV, check=False)
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)
    assert row["dialect"] == "duckdb" and row["query_confidence"] == round(own.query_confidence, 6)
    assert f"query confidence: {own.query_confidence:.2f} (read as duckdb SQL)" in str(own)  # the printout says so
    # no database: SQLite's
    assert scorer.score(sql, question=question, schema={"singer": ["name", "country"]}).dialect == "sqlite"
    # a DuckDB file by another name is known by its header
    renamed = path.rename(tmp_path / "shop.db")
    assert scorer.score(sql, question=question, database=renamed).to_dict() == own.to_dict()


def test_another_schemas_table_is_read_as_that_table_not_as_a_literal_and_an_unknown_operator(scorer):
    """`FROM sales.orders` beside a `public.orders`: `In_schema(orders, sales)`. Its schema name
    was read as a literal the question should say (the pointer on it in every query a probe
    tried) and `In_schema` as an operator the model does not know."""
    import rat

    schema = rat.Schema({"orders": ["id", "status"], "sales.orders": ["id", "status"]},
                        table_schemas={"orders": "public"})
    scored = scorer.score("SELECT count(*) FROM sales.orders WHERE status = 'paid'", schema=schema,
                          question="How many orders are paid?", dialect="postgres")
    nodes = {n.label: n for n in scored.nodes}
    assert {"In_schema", "sales", "orders"} <= set(nodes)
    assert not any(n.unfamiliar for n in scored.nodes)
    assert not any("literal" in r.text for n in (nodes["sales"], nodes["In_schema"]) for r in n.reasons)


@pytest.mark.parametrize("dialect, literal", [
    *((d, "'O''Brien'") for d in ("sqlite", "postgres", "duckdb", "mysql", "tsql", "snowflake", "redshift", "trino")),
    *((d, "'O\\'Brien'") for d in ("mysql", "snowflake", "redshift", "bigquery", "databricks")),
    *((d, '"O\\"Brien"') for d in ("mysql", "bigquery", "databricks")),
    ("mysql", '"O""Brien"'), ("snowflake", "'a\\\\'"), ("bigquery", "'a\\\\'"),
    *((d, "'O''Brien -- no comment'") for d in ("sqlite", "postgres", "mysql", "snowflake", "redshift")),
    *((d, "'O\\'Brien -- no comment'") for d in ("mysql", "snowflake", "bigquery")),
])
def test_a_string_with_an_escaped_quote_keeps_every_span_after_it(dialect, literal):
    """sqlglot writes Snowflake's and Redshift's `'O''Brien'` as `'O\\'Brien'`; the canonical and
    written words are read with the dialect's escapes (a backslash in Snowflake, Redshift, BigQuery,
    MySQL, Databricks) and comments: every node after such a string lost its span or got a wrong one
    (`Paris'`)."""
    import rat
    from model.scoring.scorer import written_spans

    schema = rat.Schema({"customers": ["name", "city", "tier"]})
    sql = f"SELECT name FROM customers WHERE name = {literal} AND city = 'Paris' AND tier > 3"
    tree = rat.to_tree(sql, schema, dialect=dialect)
    written = {n.label: None if s is None else sql[s[0]:s[1]]
               for n, s in zip(tree.postorder(), written_spans(sql, tree, schema, dialect))}
    assert None not in written.values(), written
    assert written["'Paris'"] == "'Paris'" and written["customers.city"] == "city" and written["3"] == "3"
    assert literal in written.values()


def test_the_look_here_span_of_a_snowflake_string_with_a_doubled_quote():
    from model import Scorer

    sql = "SELECT email FROM customers WHERE name = 'O''Brien' AND city = 'Paris'"
    scored = Scorer.pretrained().score(sql, question="Emails of customers named Smith living in Paris",
                                       schema={"customers": ["customer_id", "name", "email", "city"]},
                                       dialect="snowflake")
    assert all(n.span is not None for n in scored.nodes)
    assert sql[slice(*scored.nodes[scored.look_here_first].span)] in ("'O''Brien'", "name = 'O''Brien'")
