"""`rat.sql_spans` of negated predicates (NOT BETWEEN, NOT LIKE, NOT EXISTS, NOT (a = b), a <> b)
and of a CTE joined with itself: each node's text in the canonical SQL, and that text read back."""

import pytest

import rat

SCHEMA = {"singer": ["singer_id", "name", "age"], "concert": ["concert_id", "singer_id"]}


def located(sql: str, dialect: str = "sqlite", schema=SCHEMA):
    """The tree of ``sql``, its spans (every node mapped, each subtree holding its children), and
    each post-order node's (label, text)."""
    tree = rat.to_tree(sql, schema, dialect)
    spans = rat.sql_spans(sql, tree, schema, dialect)
    nodes = tree.postorder()
    assert spans.unmapped == 0 and spans.spans[-1] == (0, len(spans.sql))
    index = {id(n): i for i, n in enumerate(nodes)}
    for i, node in enumerate(nodes):
        start, end = spans.spans[i]
        assert 0 <= start < end <= len(spans.sql) and spans.text(i) == spans.text(i).strip()
        for child in node.children:
            assert start <= spans.spans[index[id(child)]][0] and spans.spans[index[id(child)]][1] <= end
    return tree, spans, [(n.label, spans.text(i)) for i, n in enumerate(tree.postorder())]


@pytest.mark.parametrize("sql, dialect, spelled", [
    ("SELECT name FROM singer WHERE age NOT BETWEEN 1 AND 5 AND name = 'x'", "sqlite",
     "singer.age < 1 or singer.age > 5"),
    ("SELECT name FROM singer WHERE name = 'x' AND NOT age BETWEEN 1 AND 5", "sqlite",
     "singer.age < 1 or singer.age > 5"),
    ("SELECT s.name FROM singer AS s WHERE (s.age NOT BETWEEN 1 AND 5 AND s.name = 'x') OR s.age = 9", "sqlite",
     "singer.age < 1 or singer.age > 5"),
    ("SELECT age NOT BETWEEN 1 AND 5 AND name = 'x' FROM singer", "sqlite", "singer.age < 1 or singer.age > 5"),
    ("SELECT CASE WHEN age NOT BETWEEN 1 AND 5 AND name = 'x' THEN 1 END FROM singer", "sqlite",
     "singer.age < 1 or singer.age > 5"),
    ("SELECT c.concert_id FROM concert AS c JOIN singer AS s ON s.age NOT BETWEEN 1 AND 5 AND c.singer_id = s.singer_id",
     "sqlite", "singer.age < 1 or singer.age > 5"),
    ("SELECT name FROM singer WHERE age NOT BETWEEN 1 AND 5 AND name = 'x'", "postgres",
     "singer.age < 1 or singer.age > 5"),
    ("SELECT name FROM singer WHERE age BETWEEN SYMMETRIC 1 AND 5 AND name = 'x'", "postgres",
     "(singer.age >= 1 and singer.age <= 5) or (singer.age >= 5 and singer.age <= 1)"),
])
def test_not_between_in_an_and_keeps_its_parentheses(sql, dialect, spelled):
    """`x NOT BETWEEN a AND b` is spelled `x < a OR x > b`: in an AND it was written without its
    parentheses, so the canonical SQL (`canonicalize`, the text the spans index) read
    `x < a or x > b and c`, another condition; the Or node's text was `x < a or x > b`, which
    that text does not hold as one expression. It is parenthesised as an OR written so is (whose
    text, as here, is inside its parentheses)."""
    tree, spans, texts = located(sql, dialect)
    assert ("Or", spelled) in texts, texts
    ands = [text for label, text in texts if label == "And" and spelled in text]
    assert f"({spelled})" in spans.sql and all(f"({spelled})" in text for text in ands), texts
    assert rat.to_tree(spans.sql, SCHEMA, dialect) == tree  # the canonical text means what the SQL does
    assert spans.sql == rat.canonicalize(sql, SCHEMA, dialect)
    assert rat.to_tree(rat.canonicalize(sql, SCHEMA, dialect), SCHEMA, dialect) == tree


@pytest.mark.parametrize("dialect", ["sqlite", "postgres", "mysql"])
def test_not_between_each_node_has_its_text(dialect):
    _, _, texts = located("SELECT s.name FROM singer AS s WHERE s.age NOT BETWEEN 1 AND 5", dialect)
    assert texts[1:8] == [("singer.age", "singer.age"), ("1", "1"), ("Lt", "singer.age < 1"),
                          ("singer.age", "singer.age"), ("5", "5"), ("Gt", "singer.age > 5"),
                          ("Or", "singer.age < 1 or singer.age > 5")]


@pytest.mark.parametrize("dialect", ["sqlite", "postgres", "mysql"])
@pytest.mark.parametrize("predicate, label, text", [
    ("s.name NOT LIKE 'a%'", "Not_like", "singer.name not like 'a%'"),
    ("NOT s.name LIKE 'a%'", "Not_like", "not singer.name like 'a%'"),
    ("NOT EXISTS (SELECT 1 FROM concert AS c WHERE c.singer_id = s.singer_id)", "Not_exists",
     "not exists(select 1 from concert where concert.singer_id = singer.singer_id)"),
    ("NOT (s.age = 3)", "Neq", "not (singer.age = 3)"),
    ("NOT s.age = 3", "Neq", "not singer.age = 3"),
    ("s.age <> 3", "Neq", "singer.age <> 3"),
    ("s.age != 3", "Neq", "singer.age <> 3"),
    ("NOT (s.age <> 3)", "Eq", "not (singer.age <> 3)"),
])
def test_negated_predicates_keep_their_left_operand(predicate, label, text, dialect):
    """The predicate's text is all of it, and its left operand is the whole column (`singer.name`,
    not `.name`)."""
    tree, spans, texts = located(f"SELECT s.name FROM singer AS s WHERE {predicate}", dialect)
    nodes = tree.postorder()
    at = next(i for i, n in enumerate(nodes) if n.label == label)
    assert spans.text(at) == text == spans.sql.split(" where ", 1)[1]
    left = nodes[at].children[0]
    if rat.node_kind(left) == "column":  # the column as the canonical SQL writes it
        assert spans.text(nodes.index(left)) == left.label
    assert ("Selection", "from singer where " + text) in texts


SELF_JOIN = "WITH c AS (SELECT singer_id, name FROM singer) SELECT a.name FROM c AS a JOIN c AS b ON a.singer_id = b.singer_id"


def test_a_cte_joined_with_itself():
    """Both scans of the CTE are its query (one subtree, read twice: the text in the WITH clause);
    the join's subtree holds that text and its FROM clause. No character of the outer SELECT's
    own text (`select derived.name`, between the two) is the join's: it belongs to the outer
    Project, as in the same query written with two derived tables; the FROM clause's words
    (`c as derived`) are the join's."""
    tree, spans, texts = located(SELF_JOIN)
    nodes = tree.postorder()
    assert spans.sql == ("with c as (select singer.singer_id, singer.name from singer) select derived.name "
                         "from c as derived join c as derived_2 on derived.singer_id = derived_2.singer_id")
    product = nodes.index(tree.children[-1])
    assert nodes[product].label == "Product"
    scans = [i for i, n in enumerate(nodes) if n.label == "Project" and i != len(nodes) - 1]
    assert len(scans) == 2 and [nodes[i] for i in scans] == list(nodes[product].children[:2])
    body = "select singer.singer_id, singer.name from singer"
    assert [spans.text(i) for i in scans] == [body, body]
    assert spans.text(product).startswith(body) and spans.text(product).endswith(
        "from c as derived join c as derived_2 on derived.singer_id = derived_2.singer_id")
    assert ("Eq", "derived.singer_id = derived_2.singer_id") in texts

    def owner(word, start=0):
        found = spans.owners[spans.sql.index(word, start)]
        return None if found is None else nodes[found].label

    outer = spans.sql.index(") select") + 2
    assert owner("select", outer) == "Project" and spans.owners[outer] == len(nodes) - 1
    assert owner("from c") == "Product" and owner("join") == "Product" and owner("c as derived_2") == "Product"
    assert owner("derived.name") == "derived.name" and owner("with") == "Project"
    assert owner("singer.name") == "singer.name" and spans.owners[spans.sql.index("select")] == scans[0]


def test_a_cte_read_once_gives_the_outer_select_its_own_text():
    """The same for a CTE read once, under a WHERE: `select` of the outer query is its Project's."""
    sql = "WITH c AS (SELECT singer_id, name FROM singer) SELECT c.name FROM c WHERE c.singer_id > 1"
    tree, spans, texts = located(sql)
    nodes = tree.postorder()
    outer = spans.sql.index(") select") + 2
    assert spans.owners[outer] == len(nodes) - 1
    assert nodes[spans.owners[spans.sql.index("from c")]].label == "Selection"
    assert ("Gt", "derived.singer_id > 1") in texts


def test_a_cte_joined_with_itself_under_a_where():
    """Above the join too: the WHERE over it is no owner of the outer `select` either."""
    tree, spans, _ = located(SELF_JOIN + " WHERE a.name = 'x'")
    nodes = tree.postorder()
    outer = spans.sql.index(") select") + 2
    assert spans.owners[outer] == len(nodes) - 1
    assert nodes[spans.owners[spans.sql.index("where")]].label == "Selection"
    assert nodes[spans.owners[spans.sql.index("join")]].label == "Product"
