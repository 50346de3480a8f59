"""The public `rat` API: names, Node, serialisation, errors, hash stability, the CLI."""

import json
import os
import re
import subprocess
import sys

import pytest

import rat

SQL = "SELECT T1.name FROM singer AS T1 JOIN concert AS T2 ON T1.singer_id = T2.singer_id " \
      "WHERE T2.year > 2014 AND T1.country IN ('France', 'Spain') ORDER BY T1.age DESC LIMIT 3"


def test_public_names():
    assert sorted(rat.__all__) == sorted([
        "RATError", "ParseError", "Node", "Schema", "align_tokens", "canonicalize", "label_nodes",
        "node_ends", "serialize", "to_tree", "SqlSpans", "node_kind", "sql_spans", "DIALECTS"])
    public = {n for n in vars(rat) if not n.startswith("_")}
    # submodules are importable attributes too; nothing else is public
    assert public - set(rat.__all__) <= {"align", "canonicalize", "errors", "hashing", "labels",
                                         "node", "schema", "serialize", "tree", "kinds", "spans",
                                         "build", "dialects", "walks", "text"}


def test_paper_example_serialisation():
    tree = rat.to_tree("SELECT player_api_id FROM Player ORDER BY heaviness DESC LIMIT 1")
    assert rat.serialize(tree) == \
        "((1)((player.heaviness)((player.player_api_id)(player)Project)Orderby_desc)Limit)"


def test_node_is_immutable_and_postorder_is_children_first():
    tree = rat.to_tree(SQL)
    with pytest.raises(AttributeError):
        tree.label = "x"
    nodes = tree.postorder()
    assert nodes[-1] is tree
    position = {id(n): i for i, n in enumerate(nodes)}
    for node in nodes:
        assert isinstance(node.children, tuple)
        assert all(position[id(c)] < position[id(node)] for c in node.children)


def test_node_ends_point_at_each_nodes_closing_parenthesis():
    tree = rat.to_tree(SQL)
    text, ends = rat.serialize(tree), rat.node_ends(tree)
    nodes = tree.postorder()
    assert len(ends) == len(nodes)
    assert ends == sorted(ends) and ends[-1] == len(text) - 1
    for node, end in zip(nodes, ends):
        assert text[end] == ")"
        assert text[: end].endswith(node.label)
        assert rat.serialize(node) == text[end + 1 - len(rat.serialize(node)): end + 1]


def test_labels_one_per_node_and_execution_match_overrides():
    pred = rat.to_tree(SQL)
    gold = rat.to_tree(SQL.replace("2014", "2015"))
    labels = rat.label_nodes(pred, gold)
    assert len(labels) == len(pred.postorder()) and 0 in labels and 1 in labels
    assert rat.label_nodes(pred, gold, execution_match=True) == [1] * len(labels)
    assert rat.label_nodes(pred, pred) == [1] * len(labels)


def test_schema_qualifies_ambiguous_columns_only_when_unique():
    schema = rat.Schema({"singer": ["singer_id", "name"], "concert": ["singer_id", "year"]})
    sql = "SELECT name, year, singer_id FROM singer JOIN concert ON singer.singer_id = concert.singer_id"
    assert rat.canonicalize(sql, schema).startswith("select singer.name, concert.year, singer_id ")


def test_schema_from_spider_entry_composite_keys():
    entry = {"db_id": "x", "table_names_original": ["A", "B"],
             "column_names_original": [[-1, "*"], [0, "Id"], [1, "Id"], [1, "A_Id"]],
             "column_types": ["text", "number", "number", "number"],
             "primary_keys": [1, [2, 3]], "foreign_keys": [[3, 1]]}
    schema = rat.Schema.from_spider(entry)
    assert schema.tables == {"a": ("id",), "b": ("id", "a_id")}
    assert schema.primary_keys == ("a.id", "b.id", "b.a_id")
    assert schema.foreign_keys == (("b.a_id", "a.id"),)


def test_canonicalize_output_is_valid_and_stable():
    text = rat.canonicalize(SQL)
    assert text == rat.canonicalize(text)
    assert "t1" not in text and "T1" not in text
    assert rat.to_tree(text).hash == rat.to_tree(SQL).hash


def test_canonicalize_keeps_string_case_and_self_join_apart():
    text = rat.canonicalize("SELECT a.Name FROM Emp AS a JOIN Emp AS b ON a.Boss = b.ID "
                            "WHERE b.Name = 'Kim O''Neil'")
    assert text == ("select emp.name from emp join emp as emp_2 on emp.boss = emp_2.id "
                    "where emp_2.name = 'Kim O''Neil'")


@pytest.mark.parametrize("ordinal, named", [
    ("SELECT status, count(*) FROM orders GROUP BY 1", "SELECT status, count(*) FROM orders GROUP BY status"),
    ("SELECT status, count(*) AS n FROM orders GROUP BY 1 ORDER BY 2 DESC",
     "SELECT status, count(*) AS n FROM orders GROUP BY status ORDER BY n DESC"),
    ("SELECT o.status FROM orders AS o ORDER BY 1", "SELECT status FROM orders ORDER BY status"),
])
def test_group_by_and_order_by_ordinals_name_output_columns(ordinal, named):
    schema = {"orders": ["id", "status"]}
    assert rat.to_tree(ordinal, schema).hash == rat.to_tree(named, schema).hash
    assert rat.to_tree(ordinal, schema, "postgres").hash == rat.to_tree(named, schema, "postgres").hash


def test_an_ordinal_that_names_no_counted_output_stays_a_number():
    schema = {"orders": ["id", "status"]}
    for sql in ("SELECT * FROM orders ORDER BY 1", "SELECT status FROM orders ORDER BY 2"):
        assert rat.to_tree(sql, schema).children[0].label in ("1", "2")
    # T-SQL has no GROUP BY ordinals (a constant there); its ORDER BY has them
    tsql = rat.to_tree("SELECT status, count(*) FROM orders GROUP BY 1 ORDER BY 1", schema, "tsql")
    assert "(1)(orders)Groupby" in rat.serialize(tsql) and tsql.children[0].label == "orders.status"


@pytest.mark.parametrize("sql, construct", [
    ("SELECT FROM WHERE", "cannot parse"),
    ("SELECT a FROM t; SELECT b FROM u", "expected one statement"),
    ("INSERT INTO t VALUES (1)", "not a query (a statement that begins 'INSERT'"),
    ("SELECT a FROM t WHERE (", "cannot parse"),
    ("SELECT a FROM t JOIN s USING GROUP BY a", "cannot parse (JOIN .. USING without its columns)"),
    ("", "expected one statement"),
    ("SELECT a FROM t, LATERAL (SELECT 1)", ""),
    ("SELECT " + "(" * 3000 + "1" + ")" * 3000, ""),
])
def test_bad_sql_raises_rat_error_quoting_the_sql(sql, construct):
    with pytest.raises(rat.RATError) as info:
        rat.to_tree(sql)
    assert construct in str(info.value)
    assert isinstance(info.value, ValueError)
    assert repr(sql)[:50] in str(info.value)


def test_hashes_identical_across_processes():
    code = ("import rat, json, sys; t = rat.to_tree(sys.argv[1]); "
            "print(json.dumps([n.hash for n in t.postorder()]))")
    outputs = []
    for seed in ("1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run([sys.executable, "-c", code, SQL], env=env, check=True,
                                capture_output=True, text=True)
        outputs.append(json.loads(result.stdout))
    here = [n.hash for n in rat.to_tree(SQL).postorder()]
    assert outputs[0] == outputs[1] == here


def test_cli_prints_tree_postorder_and_labels(tmp_path):
    tables = [{"db_id": "music", "table_names_original": ["singer"],
               "column_names_original": [[-1, "*"], [0, "name"], [0, "age"]],
               "column_types": ["text", "text", "number"], "primary_keys": [],
               "foreign_keys": []}]
    path = tmp_path / "tables.json"
    path.write_text(json.dumps(tables))
    result = subprocess.run(
        [sys.executable, "-m", "rat", "SELECT name FROM singer WHERE age > 20",
         "--schema", str(path), "--db-id", "music", "--gold",
         "SELECT name FROM singer WHERE age >= 20"],
        capture_output=True, text=True, check=True)
    out = result.stdout
    assert "((singer.name)(((singer.age)(20)Gt)(singer)Selection)Project)" in out
    assert "  Gt  [INCORRECT]" in out and "    singer.age  [correct]" in out
    assert "4/7 nodes correct" in out


def test_cli_reports_bad_sql_without_traceback():
    result = subprocess.run([sys.executable, "-m", "rat", "SELECT FROM"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2 and result.stderr.startswith("python -m rat: error: sql: cannot parse")
    assert len(result.stderr.strip().splitlines()) == 1


def test_cli_shows_no_escape_sequence_of_the_query():
    """A literal or a message quoting the query prints its control characters as U+FFFD
    (rat.text.printable): an escape sequence in a query does not run on the terminal."""
    for sql, code in (("SELECT a FROM t WHERE b = '\x1b[2J\u202e'", 0), ("SELECT a FROM t WHERE \x1b[31m", 2)):
        result = subprocess.run([sys.executable, "-m", "rat", sql], capture_output=True, text=True, check=False)
        assert result.returncode == code, result.stderr
        shown = result.stdout + result.stderr
        assert "\x1b" not in shown and "\u202e" not in shown and "\ufffd[" in shown, shown


@pytest.mark.parametrize("pred, gold, expected", [
    (["select", "a", "from", "t"], ["select", "a", "from", "t"], [1, 1, 1, 1]),
    (["select", "b", "from", "t"], ["select", "a", "from", "t"], [1, 0, 1, 1]),
    (["select", "a", ",", "b", "from", "t"], ["select", "a", "from", "t"], [1, 1, 0, 0, 1, 1]),
    (["select", "a", "from", "t"], ["select", "a", ",", "b", "from", "t"], [1, 1, 1, 1]),
    (list("kitten"), list("sitting"), [0, 1, 1, 1, 0, 1]),
    ([], [], []),
    ([1, 2, 3], [3, 2, 1], [0, 1, 0]),
])
def test_align_tokens(pred, gold, expected):
    assert rat.align_tokens(pred, gold) == expected


@pytest.mark.parametrize("pred, gold, message", [
    ({"a": 1}, ["a"], "pred_tokens: expected a list of tokens, found dict"),
    (["a"], None, "gold_tokens: expected a list of tokens, found NoneType"),
    ("select a", ["select"], "pred_tokens: expected a list of tokens, found str"),
])
def test_align_tokens_names_an_argument_that_is_no_list_of_tokens(pred, gold, message):
    with pytest.raises(TypeError, match=message):
        rat.align_tokens(pred, gold)


@pytest.mark.parametrize("sql, problem", [
    ("SELECT a INTO x FROM t", "unsupported construct 'INTO'"),
    ("SELECT 1 WHERE " + " OR ".join(["a = 1"] * 12_000), "characters of SQL; at most 100000 are read"),
    # a recursive CTE is a query, UNION [ALL], then a step reading it
    ("WITH RECURSIVE c(x) AS (SELECT x + 1 FROM c) SELECT x FROM c", "'WITH RECURSIVE c': expected"),
    ("WITH RECURSIVE c(x) AS (SELECT x FROM c UNION ALL SELECT 1) SELECT x FROM c", "'WITH RECURSIVE c'"),
])
def test_sql_rat_cannot_read_faithfully_is_a_rat_error_with_a_short_message(sql, problem):
    for dialect in sorted(rat.DIALECTS):
        with pytest.raises(rat.RATError) as error:
            rat.to_tree(sql, dialect=dialect)
        assert problem in str(error.value) and len(str(error.value)) < 300 and error.value.sql == sql


def test_a_lone_surrogate_is_hashed_and_labelled():
    # a command-line argument's undecodable byte reaches rat as a lone surrogate
    tree = rat.to_tree("SELECT name FROM singer WHERE name = 'caf\udce9'")
    assert tree.hash != rat.to_tree("SELECT name FROM singer WHERE name = 'cafe'").hash
    assert rat.label_nodes(tree, tree) == [1] * len(list(tree.postorder()))


def test_token_alignment_is_bounded():
    with pytest.raises(ValueError, match="at most 2000 on each side"):
        rat.align_tokens(["a"] * 2001, ["a"])


def test_arguments_of_the_wrong_type_are_one_type_error_naming_them():
    tree = rat.to_tree("SELECT a FROM t")
    for call, says in ((lambda: rat.to_tree(None), "sql: expected a str, found NoneType"),
                       (lambda: rat.to_tree("SELECT a FROM t", 5), "schema: expected a rat.Schema"),
                       (lambda: rat.to_tree("SELECT a FROM t", {"t": "a"}), "table 't': expected a list"),
                       (lambda: rat.canonicalize(b"SELECT 1"), "sql: expected a str, found bytes"),
                       (lambda: rat.sql_spans(None), "sql: expected a str"),
                       (lambda: rat.sql_spans("SELECT a FROM t", "t"), "tree: expected a rat.Node"),
                       (lambda: rat.label_nodes(tree, None), "gold: expected a rat.Node"),
                       (lambda: rat.serialize("t"), "tree: expected a rat.Node"),
                       (lambda: rat.node_ends(None), "tree: expected a rat.Node"),
                       (lambda: rat.node_kind("t"), "node: expected a rat.Node"),
                       (lambda: rat.Schema({"t": [1]}), "table 't': column names must be strings"),
                       (lambda: rat.Schema({"t": ["a", None]}), "table 't': column names must be strings, found NoneType"),
                       (lambda: rat.to_tree("SELECT 1", dialect=None), "dialect: expected a dialect name"),
                       (lambda: rat.Schema({"t": ["a"]}, foreign_keys=[("t.a",)]), "foreign_keys")):
        with pytest.raises(TypeError, match=says):
            call()


def test_a_schema_is_a_mapping_or_a_tables_json_entry_and_a_broken_entry_is_one_value_error():
    mapping = rat.to_tree("SELECT name FROM singer AS s", {"Singer": ["Name"]})
    schema = rat.to_tree("SELECT name FROM singer AS s", rat.Schema({"singer": ["name"]}))
    assert mapping == schema and rat.serialize(mapping) == "((singer.name)(singer)Project)"
    for entry, says in (({"table_names_original": ["t"]}, "has no 'column_names_original'"),
                        ({"table_names_original": ["t"], "column_names_original": [[3, "a"]]},
                         "a table index: 3 is not an index of table_names_original"),
                        ({"table_names_original": ["t"], "column_names_original": [["0", "a"]]},
                         "a table index: '0' is not"),
                        ({"table_names_original": ["t"], "column_names_original": [[0, 5]]}, "column names must be strings")):
        with pytest.raises(ValueError, match=says):
            rat.Schema.from_spider(entry)


def test_a_mapping_with_two_spellings_of_one_lower_case_name_is_refused_as_a_tables_json_entry_is():
    for tables, says in (({"T": ["a"], "t": ["b"]}, "schema: tables: 'T' and 't' are one name in lower case"),
                         ({"t": ["a", "A"]}, "the columns of table 't': 'a' and 'A' are one name")):
        with pytest.raises(ValueError, match=re.escape(says)):  # (merged: table T's columns were lost)
            rat.Schema(tables)
    assert rat.Schema({"v": ["id", "id"]}).tables == {"v": ("id", "id")}  # a view's repeated output name


@pytest.mark.parametrize("change, says", [
    ({"table_names_original": "ab"}, "table_names_original: expected a list of strings"),  # (was tables 'a' and 'b')
    ({"table_names_original": ["People", "people"]}, "'People' and 'people' are one name in lower case"),  # (merged)
    ({"column_names_original": [[-1, "*"], [0, "Name"], [0, "name"]]}, "'Name' and 'name' are one name"),
    ({"primary_keys": [-1]}, "primary_keys: -1 is not an index of column_names_original"),  # (was the last column)
    ({"foreign_keys": [[1, -2]]}, "foreign_keys: -2 is not an index"),
    ({"column_types": "text"}, "column_types: expected a list of strings"),  # (was a type a letter)
])
def test_a_tables_json_entry_read_other_than_written_is_refused(change, says):
    entry = {"db_id": "d", "table_names_original": ["People"], "column_names_original": [[-1, "*"], [0, "Name"]],
             "column_types": ["text", "text"], "primary_keys": [1], "foreign_keys": []}
    assert rat.Schema.from_spider(entry).tables == {"people": ("name",)}
    with pytest.raises(ValueError, match=re.escape(says)):
        rat.Schema.from_spider({**entry, **change})


def test_sql_rat_refuses_leaves_nothing_in_sqlglots_log_and_other_calls_are_untouched(caplog):
    import sqlglot

    with caplog.at_level("WARNING", logger="sqlglot"):
        with pytest.raises(rat.RATError, match="not a query"):
            rat.to_tree("SHOW TABLES")  # sqlglot falls back to a Command, and would say so
        assert not caplog.records
        sqlglot.parse_one("SHOW TABLES", read="sqlite")  # not rat's call: sqlglot's warning stays
        assert any("Falling back" in r.getMessage() for r in caplog.records)


def test_sqlglot_s_own_type_errors_are_sql_it_cannot_parse():
    """sqlglot's parser raises TypeError on `a ? FROM` in PostgreSQL: SQL rat cannot read, not an
    argument of the wrong type."""
    with pytest.raises(rat.RATError, match="cannot parse"):
        rat.to_tree("SELECT a ? FROM t", None, "postgres")


def test_label_nodes_and_schema_source_name_an_argument_of_the_wrong_type():
    pred, gold = rat.to_tree("SELECT a FROM t"), rat.to_tree("SELECT b FROM t")
    with pytest.raises(TypeError, match="execution_match: expected True or False, found 'no'"):
        rat.label_nodes(pred, gold, execution_match="no")  # a string was true: every node 1
    assert rat.label_nodes(pred, gold, execution_match=None) == [0, 1, 0]
    with pytest.raises(TypeError, match=r"column: expected a column label \(str\), found int"):
        rat.Schema({"t": ["a"]}).source(5)


STAR_SCHEMA = {"singer": ["singer_id", "name", "age"], "concert": ["concert_id", "singer_id", "year"]}


@pytest.mark.parametrize("star, named", [
    ("WITH s AS (SELECT * FROM singer) SELECT name FROM s WHERE age > 30",
     "WITH s AS (SELECT * FROM singer) SELECT s.name FROM s WHERE s.age > 30"),
    ("SELECT name FROM (SELECT * FROM singer) WHERE age > 30",
     "SELECT s.name FROM (SELECT * FROM singer) AS s WHERE s.age > 30"),
    ("SELECT name FROM (SELECT * FROM singer) AS s WHERE s.age > 30",
     "SELECT s.name FROM (SELECT * FROM singer) AS s WHERE s.age > 30"),
    *((f"{cte} SELECT name, year FROM s", f"{cte} SELECT s.name, s.year FROM s") for cte in [
        "WITH s AS (SELECT singer.*, concert.year FROM singer JOIN concert ON singer.singer_id = concert.singer_id)"]),
    ("WITH a AS (SELECT * FROM singer), b AS (SELECT *, 1 AS k FROM a) SELECT name, k FROM b",
     "WITH a AS (SELECT * FROM singer), b AS (SELECT *, 1 AS k FROM a) SELECT b.name, b.k FROM b"),
    # without a schema, a star's columns are unknown: the one FROM item's
    ("WITH s AS (SELECT * FROM nowhere) SELECT x FROM s", "WITH s AS (SELECT * FROM nowhere) SELECT s.x FROM s"),
])
def test_a_column_read_through_a_star_is_the_subquerys(star, named):
    """`WITH s AS (SELECT * FROM singer) SELECT name FROM s`: `name` is the CTE's column (the
    star stands for singer's columns), as `s.name` is; it was left unqualified, as if unknown."""
    for schema in (STAR_SCHEMA, None):
        tree = rat.serialize(rat.to_tree(star, schema))
        assert tree == rat.serialize(rat.to_tree(named, schema))
        assert tree.startswith("((derived.")


def test_a_column_two_from_items_have_through_a_star_stays_as_written():
    """A name both a star's subquery and another FROM item have is ambiguous (the database refuses
    it): left unqualified, as in a join of two tables; one only a table has is the table's."""
    sql = ("WITH r AS (SELECT * FROM singer) SELECT singer_id, year, name FROM r "
           "JOIN concert ON r.singer_id = concert.singer_id")
    assert rat.serialize(rat.to_tree(sql, STAR_SCHEMA)).startswith("((singer_id)(concert.year)(derived.name)")
    # a CTE named like a table of the schema is the CTE, its columns unknown where its star's are
    sql = ("WITH concert AS (SELECT * FROM nowhere) SELECT year FROM singer "
           "JOIN concert ON singer.singer_id = concert.singer_id")
    assert rat.serialize(rat.to_tree(sql, STAR_SCHEMA)).startswith("((year)")


def test_a_mapping_keyed_by_schema_and_table_reads_them_as_ddl_does():
    """{"sales.orders": [..], "finance.orders": [..]}: orders of two schemas, read as DDL
    declaring them is (an unqualified orders: finance's, the first by name), not tables named
    "sales.orders" that no query's orders reads."""
    from model.data.databases import schema_from_ddl

    mapping = {"sales.orders": ["id", "total"], "finance.orders": ["id", "revenue"], "sales.customers": ["id"]}
    schema = rat.Schema.of(mapping)
    ddl = schema_from_ddl("CREATE TABLE sales.orders (id INT, total INT); CREATE TABLE finance.orders (id INT, revenue INT);"
                          "CREATE TABLE sales.customers (id INT);", "postgres")
    assert schema.tables == ddl.tables and schema.table_schemas == ddl.table_schemas
    assert schema.tables["orders"] == ("id", "revenue") and schema.table_schemas["customers"] == "sales"
    sales = rat.to_tree("SELECT SUM(total) FROM sales.orders", schema=schema)
    assert "sales.orders.total" in str(sales) and "In_schema" in str(sales)
    assert "sales" not in str(rat.to_tree("SELECT SUM(revenue) FROM finance.orders", schema=schema))
    assert rat.Schema.of({"orders": ["id"], "sales.orders": ["total"]}).tables == {"orders": ("id",), "sales.orders": ("total",)}
