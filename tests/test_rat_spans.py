"""`rat.sql_spans`: RAT nodes located in the canonical SQL text (rat/spans.py)."""

import re
from pathlib import Path

import pytest

import rat
from rat import spans as spans_module

FIXTURES = Path(__file__).parent / "fixtures" / "rat_spans"
COMPARISONS = {"Eq", "Neq", "Gt", "Gte", "Lt", "Lte", "Like", "In"}


def read_cases(path: Path) -> list[dict]:
    """`# title:` line, SQL line, then `Label | text` and `@ word => Label` lines per case."""
    cases, case = [], None
    for line in path.read_text().splitlines():
        if line.startswith("# title:"):
            case = {"title": line.split(":", 1)[1].strip(), "sql": None, "spans": [],
                    "owners": []}
            cases.append(case)
        elif case is None or not line.strip() or line.startswith("#"):
            continue
        elif case["sql"] is None:
            case["sql"] = line
        elif line.startswith("@"):
            word, label = line[1:].split("=>")
            case["owners"].append((word.strip(), label.strip()))
        else:
            label, text = line.split(" | ", 1)
            case["spans"].append((label.strip(), text))
    return cases


CASES = read_cases(FIXTURES / "spans.txt")


def check_spans(tree: rat.Node, spans: rat.SqlSpans) -> None:
    """Properties every mapped query must have."""
    nodes = tree.postorder()
    assert len(spans.spans) == len(nodes) and len(spans.owners) == len(spans.sql)
    assert spans.unmapped == 0, [n.label for n, s in zip(nodes, spans.spans) if s is None]
    index = {id(n): i for i, n in enumerate(nodes)}
    for i, node in enumerate(nodes):
        start, end = spans.spans[i]
        text = spans.text(i)
        assert 0 <= start < end <= len(spans.sql) and text == text.strip()
        for child in node.children:  # a subtree's text holds its children's
            c_start, c_end = spans.spans[index[id(child)]]
            assert start <= c_start and c_end <= end, (node.label, child.label)
        if rat.node_kind(node) == "column" and "." in node.label:  # its own name, nothing more
            assert text.replace('"', "").endswith(node.label.split(".")[1]), (node.label, text)
            assert " " not in text
        if node.label in COMPARISONS:  # `a > b`: both operands inside, the left one first
            operands = [spans.spans[index[id(c)]] for c in node.children]
            assert start == operands[0][0] and all(e <= end for _, e in operands), text
    assert spans.spans[-1] == (0, len(spans.sql))  # the root is the whole query


def test_enough_cases():
    assert len(CASES) >= 14


@pytest.mark.parametrize("case", CASES, ids=[c["title"] for c in CASES])
def test_nodes_map_to_their_sql_text(case):
    tree = rat.to_tree(case["sql"])
    spans = rat.sql_spans(case["sql"], tree)
    assert spans.sql == rat.canonicalize(case["sql"])
    check_spans(tree, spans)
    found = {(n.label, spans.text(i)) for i, n in enumerate(tree.postorder())}
    for label, text in case["spans"]:
        assert (label, text) in found, (label, text, sorted(t for lab, t in found if lab == label))
    nodes = tree.postorder()
    for word, label in case["owners"]:
        match = re.search(rf"(?<!\w){re.escape(word)}(?!\w)", spans.sql)
        assert match, word
        owner = spans.owners[match.start()]
        assert owner is not None and nodes[owner].label == label, (
            word, None if owner is None else nodes[owner].label)


def test_default_tree_is_to_tree_of_the_sql():
    sql = "SELECT name FROM singer WHERE age > 20 ORDER BY age DESC LIMIT 3"
    assert rat.sql_spans(sql) == rat.sql_spans(sql, rat.to_tree(sql))


def test_spans_follow_the_schema_the_tree_was_built_with():
    schema = rat.Schema({"singer": ["singer_id", "name"], "concert": ["singer_id", "year"]})
    sql = ("SELECT name FROM singer AS s JOIN concert AS c ON s.singer_id = c.singer_id "
           "WHERE year = 2014")
    tree = rat.to_tree(sql, schema)
    spans = rat.sql_spans(sql, tree, schema)
    check_spans(tree, spans)
    assert "concert.year = 2014" in {spans.text(i) for i in range(len(spans.spans))}
    # Without the schema `year` stays unqualified: the trees differ, nothing is mapped.
    assert rat.sql_spans(sql, tree).unmapped == len(tree.postorder())


def test_unmappable_nodes_are_counted_not_raised(monkeypatch):
    tree = rat.to_tree("SELECT name FROM singer WHERE age > 20")
    n = len(tree.postorder())
    other = rat.sql_spans("SELECT 1", tree)  # a different query
    assert other.unmapped == n and other.sql == "select 1" and set(other.owners) == {None}
    broken = rat.sql_spans("SELEC name FRM", tree)  # not SQL: shown as written
    assert broken.unmapped == n and broken.sql == "SELEC name FRM"

    def fail(*args, **kwargs):
        raise RuntimeError("builder changed")

    monkeypatch.setattr(spans_module._SpanRecorder, "select", fail)
    assert rat.sql_spans("SELECT name FROM singer WHERE age > 20", tree).unmapped == n


def test_a_cte_read_twice_shares_its_spans():
    sql = "WITH x AS (SELECT a FROM t) SELECT p.a FROM x AS p JOIN x AS q ON p.a = q.a"
    tree = rat.to_tree(sql)
    spans = rat.sql_spans(sql, tree)
    assert spans.unmapped == 0 and spans.spans[-1] == (0, len(spans.sql))
    product = spans.text(len(spans.spans) - 2)  # its subtree holds the CTE's text as well
    assert "from x as derived join x as derived_2" in product and "select t.a" in product


@pytest.mark.parametrize("terms", [300, 900])
def test_deep_trees_map_without_recursion_errors(terms):
    sql = "SELECT " + " + ".join(["a"] * terms) + " FROM t"
    tree = rat.to_tree(sql)
    spans = rat.sql_spans(sql, tree)
    assert spans.unmapped == 0 and spans.text(0) == "t.a"
    assert spans.spans[-1] == (0, len(spans.sql))


@pytest.mark.data
def test_every_spider_dev_gold_node_is_located(shared_data):
    from model.data.datasets import load_questions, load_schemas

    root = shared_data / "spider"
    schemas = load_schemas(root)
    unmapped = total = 0
    for question in load_questions(root, "dev"):
        schema = schemas.get(question.db_id)
        tree = rat.to_tree(question.gold_sql, schema)
        spans = rat.sql_spans(question.gold_sql, tree, schema)
        # the marking generator writes the text canonicalize writes (checked here, not per query)
        assert spans.sql == rat.canonicalize(question.gold_sql, schema), question.gold_sql
        unmapped += spans.unmapped
        total += len(spans.spans)
    assert total > 10_000 and unmapped == 0


@pytest.mark.parametrize("sql", [
    "SELECT name FROM singer WHERE EXISTS (SELECT 1 FROM concert)",
    "SELECT name FROM singer WHERE NOT EXISTS (SELECT 1 FROM concert WHERE concert.singer_id = singer.singer_id)",
])
@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_exists_queries_are_mapped_with_the_tree_to_tree_builds(sql, dialect):
    """Generating the marked text dropped the notes canonicalize leaves on an EXISTS query (that
    its SELECT list does not change what EXISTS reads): the tree rebuilt for the spans kept the
    `SELECT 1` (`Exists(Project(1, ..))`), so every node of an EXISTS query lost its span, and the
    tree that came with the spans (the one the scorer scores) was not `rat.to_tree`'s."""
    schema = {"singer": ["singer_id", "name"], "concert": ["concert_id", "singer_id"]}
    tree = rat.to_tree(sql, schema, dialect)
    spans = rat.sql_spans(sql, tree, schema, dialect)
    assert spans.unmapped == 0
    check_spans(tree, spans)
    assert rat.sql_spans(sql, None, schema, dialect).tree == tree
    exists = next(i for i, n in enumerate(tree.postorder()) if n.label.endswith("xists"))
    assert spans.text(exists) == spans.sql.split(" where ", 1)[1]  # `[not ]exists(select 1 from concert ..)`
