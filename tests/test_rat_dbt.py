"""SQL as dbt writes it: an uncompiled model (Jinja), a materialisation's statement, the
`SELECT * FROM final` that ends every model, and `* EXCLUDE (..)` lists."""

import pytest

import rat
from rat.serialize import serialize

JINJA = "a Jinja template"


@pytest.mark.parametrize("dialect", ["sqlite", "duckdb", "snowflake", "bigquery", "postgres"])
@pytest.mark.parametrize("sql", [
    "select * from {{ ref('orders') }}",
    "{{ config(materialized='table') }}\nselect 1",
    "select a from t {% if is_incremental() %} where d > (select max(d) from {{ this }}) {% endif %}",
    "select * from t where status = {{ var('s') }}",
    "select {{- x -}} from t",
    "{%- set cols = ['a', 'b'] -%}\nselect 1",
    "select * from {{ source('shop', 'orders') }} -- comment",
])
def test_jinja_is_a_parse_error_that_says_so(sql, dialect):
    with pytest.raises(rat.ParseError) as error:
        rat.to_tree(sql, dialect=dialect)
    assert JINJA in str(error.value) and "dbt compile" in str(error.value)
    assert str(error.value).startswith("cannot parse (")


@pytest.mark.parametrize(("sql", "dialect"), [
    ("select '{{ x }}' as s", "sqlite"),                 # in a string: a string
    ("select '{% if %}' as s", "snowflake"),
    ("select 1 -- {{ ref('x') }}", "duckdb"),            # in a comment
    ("select 1 /* {% if a %} */", "postgres"),
    ("{# a Jinja comment #} select 1", "sqlite"),        # a comment to every dialect
    ("{# a Jinja comment #} select 1", "bigquery"),
])
def test_braces_in_strings_and_comments_are_read(sql, dialect):
    rat.to_tree(sql, dialect=dialect)


@pytest.mark.parametrize(("sql", "dialect"), [
    ("select {'a': 1} as s", "duckdb"),
    ("select {'a': {'b': 1}} as s", "duckdb"),
])
def test_struct_literals_are_no_jinja(sql, dialect):
    with pytest.raises(rat.RATError) as error:
        rat.to_tree(sql, dialect=dialect)
    assert JINJA not in str(error.value)


@pytest.mark.parametrize(("sql", "dialect"), [
    ("create or replace transient table analytics.orders as select order_id from orders", "snowflake"),
    ("create table x as (select 1)", "postgres"),
    ("create view v as select a from t union select b from u", "sqlite"),
    ("insert into x select a from t", "sqlite"),
    ("insert into x with c as (select 1 a) select a from c", "postgres"),
])
def test_a_statement_holding_a_query_says_to_score_it(sql, dialect):
    with pytest.raises(rat.RATError) as error:
        rat.to_tree(sql, dialect=dialect)
    assert not isinstance(error.value, rat.ParseError)
    assert error.value.problem.startswith("not a query (a statement that begins ")
    assert error.value.problem.endswith("; score the SELECT inside it)")


@pytest.mark.parametrize("sql", ["insert into x values (1)", "create table x (a int)", "delete from t"])
def test_a_statement_without_a_query_says_nothing_of_one(sql):
    with pytest.raises(rat.RATError) as error:
        rat.to_tree(sql)
    assert error.value.problem.startswith("not a query") and "inside it" not in error.value.problem


@pytest.mark.parametrize("dialect", ["sqlite", "postgres", "duckdb", "snowflake", "bigquery", "tsql"])
@pytest.mark.parametrize("wrapped", [
    "WITH final AS (SELECT order_id, status FROM orders) SELECT * FROM final",
    "SELECT * FROM (SELECT order_id, status FROM orders) AS final",
    "SELECT * FROM (SELECT order_id, status FROM orders) final(a, b)",
    "WITH a AS (SELECT order_id, status FROM orders), final AS (SELECT * FROM a) SELECT * FROM final",
])
def test_select_star_of_one_derived_table_is_its_query(wrapped, dialect):
    if "final(a, b)" in wrapped and dialect in ("bigquery", "tsql"):
        pytest.skip("no column list after an alias in this dialect")
    plain = "SELECT order_id, status FROM orders"
    assert serialize(rat.to_tree(wrapped, dialect=dialect)) == serialize(rat.to_tree(plain, dialect=dialect))


def test_select_star_of_a_cte_with_modifiers_inside_is_its_query():
    inner = "SELECT status, count(*) AS n FROM orders WHERE a > 1 GROUP BY status HAVING count(*) > 2 LIMIT 5"
    assert rat.to_tree(f"WITH final AS ({inner}) SELECT * FROM final") == rat.to_tree(inner)
    union = "SELECT a FROM t UNION SELECT b FROM u"
    assert rat.to_tree(f"SELECT * FROM ({union}) AS s") == rat.to_tree(union)


@pytest.mark.parametrize("outer", [
    "SELECT * FROM ({x}) AS s WHERE s.a > 1",
    "SELECT * FROM ({x}) AS s ORDER BY a",
    "SELECT * FROM ({x}) AS s LIMIT 3",
    "SELECT DISTINCT * FROM ({x}) AS s",
    "SELECT *, 1 FROM ({x}) AS s",
    "SELECT s.a FROM ({x}) AS s",
    "SELECT * FROM ({x}) AS s GROUP BY a",
    "SELECT * FROM ({x}) AS s JOIN u ON s.a = u.a",
    "SELECT * FROM ({x}) AS s, u",
    "SELECT * FROM t",
])
def test_select_star_with_anything_more_keeps_its_project(outer):
    tree = rat.to_tree(outer.format(x="SELECT a FROM t"))
    assert tree.label in ("Project", "Distinct", "Orderby_asc", "Limit")
    node = tree
    while node.label != "Project":
        node = node.children[-1]
    assert node.children[0].label in ("*", "s.a", "derived.a") or node.children[0].label.endswith("*")


@pytest.mark.parametrize("inner", [
    "SELECT a FROM t ORDER BY a",
    "SELECT a FROM t ORDER BY a LIMIT 3",
    "SELECT a FROM t ORDER BY a DESC LIMIT 3 OFFSET 1",
])
def test_select_star_of_an_ordered_query_keeps_its_project(inner):
    # SQL keeps no derived table's order: the outer rows are unordered, the inner ones are not
    for wrapped in (f"SELECT * FROM ({inner}) AS s", f"WITH s AS ({inner}) SELECT * FROM s"):
        tree = rat.to_tree(wrapped)
        assert tree.label == "Project" and tree.children[0].label == "*"
        assert tree != rat.to_tree(inner)


def test_the_unwrapped_query_has_the_spans_of_the_inner_one():
    sql = "WITH final AS (SELECT order_id FROM orders) SELECT * FROM final"
    tree = rat.to_tree(sql)
    spans = rat.sql_spans(sql, tree)
    assert [n.label for n in tree.postorder()] == ["orders.order_id", "orders", "Project"]
    assert spans.text(0) == "orders.order_id"


@pytest.mark.parametrize("dialect", ["duckdb", "snowflake"])
def test_exclude_lists_are_sets(dialect):
    a = rat.to_tree("SELECT * EXCLUDE (a, b) FROM t", dialect=dialect)
    b = rat.to_tree("SELECT * EXCLUDE (b, a) FROM t", dialect=dialect)
    assert a == b and a.hash == b.hash
    assert a != rat.to_tree("SELECT * EXCLUDE (a) FROM t", dialect=dialect)
    assert rat.label_nodes(a, b) == [1] * len(list(a.postorder()))


def test_except_lists_are_sets_in_bigquery():
    a = rat.to_tree("SELECT t.* EXCEPT (a, b) FROM t", dialect="bigquery")
    b = rat.to_tree("SELECT t.* EXCEPT (b, a) FROM t", dialect="bigquery")
    assert a == b
    # the star stays apart from the excluded names
    assert rat.to_tree("SELECT * EXCEPT (a) FROM t", dialect="bigquery") != a
