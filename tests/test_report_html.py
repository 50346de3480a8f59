"""report.html: RAT nodes located in the canonical SQL text and coloured by confidence."""

import doctest
import html
import re
from pathlib import Path

import pytest

import rat
from model import sql_spans
from model.eval import report
from model.sql_spans import SqlSpans

FIXTURES = Path(__file__).parent / "fixtures" / "report_html"
COMPARISONS = {"Eq", "Neq", "Gt", "Gte", "Lt", "Lte", "Like", "In", "Between"}


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


def check_spans(sql: str, tree: rat.Node, spans: SqlSpans) -> None:
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
        if "." in node.label and not node.children:  # a column: its own name, nothing more
            assert text.replace('"', "").endswith(node.label.split(".")[1]), (node.label, text)
            assert " " not in text
        if node.label in COMPARISONS:  # `a > b`: both operands inside, the left one first
            operands = [spans.spans[index[id(c)]] for c in node.children]
            assert start == operands[0][0] and all(e <= end for _, e in operands), text
    assert spans.spans[-1] == (0, len(spans.sql))  # the root is the whole query


@pytest.mark.parametrize("case", CASES, ids=[c["title"] for c in CASES])
def test_nodes_map_to_their_sql_text(case):
    tree = rat.to_tree(case["sql"])
    spans = sql_spans.sql_spans(case["sql"], tree)
    assert spans.sql == rat.canonicalize(case["sql"])
    check_spans(case["sql"], tree, spans)
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


def test_spans_follow_the_schema_the_tree_was_built_with():
    schema = rat.Schema({"singer": ["singer_id", "name"], "concert": ["singer_id", "year"]})
    sql = ("SELECT name FROM singer AS s JOIN concert AS c ON s.singer_id = c.singer_id "
           "WHERE year = 2014")
    tree = rat.to_tree(sql, schema)
    spans = sql_spans.sql_spans(sql, tree, schema)
    check_spans(sql, tree, spans)
    assert "concert.year = 2014" in {spans.text(i) for i in range(len(spans.spans))}
    # Without the schema `year` stays unqualified: the trees differ, nothing is mapped.
    assert sql_spans.sql_spans(sql, tree).unmapped == len(tree.postorder())


def test_unmappable_nodes_are_counted_not_raised(monkeypatch):
    tree = rat.to_tree("SELECT name FROM singer WHERE age > 20")
    n = len(tree.postorder())
    other = sql_spans.sql_spans("SELECT 1", tree)  # a different query
    assert other.unmapped == n and other.sql == "select 1" and set(other.owners) == {None}
    broken = sql_spans.sql_spans("SELEC name FRM", tree)  # not SQL: shown as written
    assert broken.unmapped == n and broken.sql == "SELEC name FRM"

    def fail(*args, **kwargs):
        raise RuntimeError("builder changed")

    monkeypatch.setattr(sql_spans._SpanBuilder, "select", fail)
    assert sql_spans.sql_spans("SELECT name FROM singer WHERE age > 20", tree).unmapped == n
    page = report.html_report([{"tree": tree, "confidences": [0.5] * n, "sql": "SELECT 1"}])
    assert f"{n} of {n} nodes not located in the SQL" in page
    assert f"0 of {n} RAT nodes located" in page


def _runs(page: str) -> list[tuple[str, str, str]]:
    """(post-order index, background colour, text) of every coloured run of SQL."""
    pattern = r'<span class="s [^"]*" data-n="(\d+)" style="background:(#[0-9a-f]{6})"[^>]*>([^<]*)</span>'
    return [(n, colour, html.unescape(text)) for n, colour, text in re.findall(pattern, page)]


def test_report_colours_a_demo_prediction():
    from model.data.datasets import load_questions, load_schemas
    from model.data.predictions import load_predictions
    from model.synth.demo import demo_root

    root = demo_root()
    questions = load_questions(root, "dev")
    schemas = load_schemas(root)
    path = min((root / "predictions").glob("*.jsonl"))
    prediction = next(p for p in load_predictions(path, questions)
                      if " where " in p.sql.lower() and " join " in p.sql.lower())
    schema = schemas[prediction.db_id]
    tree = rat.to_tree(prediction.sql, schema)
    nodes = tree.postorder()
    # Arbitrary distinct test inputs (not model outputs): node i gets confidence i / n.
    confidences = [i / len(nodes) for i in range(len(nodes))]
    labels = [1] * len(nodes)
    labels[0] = 0
    page = report.html_report([{"tree": tree, "confidences": confidences, "labels": labels,
                                "sql": prediction.sql, "schema": schema,
                                "query_confidence": 0.25}])
    spans = sql_spans.sql_spans(prediction.sql, tree, schema)
    assert spans.unmapped == 0
    assert f"{len(nodes)} of {len(nodes)} RAT nodes located" in page
    runs = _runs(page)
    # The runs spell out the canonical SQL (gaps are uncoloured) ...
    assert "".join(text for _, _, text in runs) == "".join(
        c for c, o in zip(spans.sql, spans.owners) if o is not None)
    # ... each in its node's colour, and every leaf shows up as its own text.
    for index, colour, _ in runs:
        assert colour == report.confidence_colour(confidences[int(index)])
    coloured = {int(index) for index, _, _ in runs}
    assert {i for i, n in enumerate(nodes) if not n.children} <= coloured
    for index, _, text in runs:
        if not nodes[int(index)].children:
            assert text in spans.text(int(index))
    # The node labelled wrong is marked, and hovering can reach every ancestor's subtree.
    assert re.search(r'class="s n0 [^"]* bad" data-n="0"', page)
    assert f"n{len(nodes) - 1}" in page and page.count("<svg") == 1


@pytest.mark.parametrize("module", [sql_spans, report], ids=["sql_spans", "report"])
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.data
def test_every_spider_dev_gold_node_is_located(shared_data):
    from model.data.datasets import load_questions, load_schemas

    root = shared_data / "spider"
    schemas = load_schemas(root)
    unmapped = total = 0
    for question in load_questions(root, "dev"):
        schema = schemas.get(question.db_id)
        try:
            tree = rat.to_tree(question.gold_sql, schema)
        except rat.RATError:
            continue
        spans = sql_spans.sql_spans(question.gold_sql, tree, schema)
        unmapped += spans.unmapped
        total += len(spans.spans)
    assert total > 10_000 and unmapped == 0
