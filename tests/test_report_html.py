"""report.html: RAT nodes located in the canonical SQL text and coloured by confidence."""

import doctest
import html
import re
from pathlib import Path

import pytest

import rat
from model.eval import report


def _runs(page: str) -> list[tuple[str, str, str]]:
    """(post-order index, background colour, text) of every coloured run of SQL."""
    pattern = r'<span class="s[^"]*" data-n="(\d+)" data-lo="\d+" style="background:(#[0-9a-f]{6})"[^>]*>([^<]*)</span>'
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
    spans = rat.sql_spans(prediction.sql, tree, schema)
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
    # The node labelled wrong is marked, and each run and box names its subtree's first node, so
    # hovering lights the whole subtree (the root's starts at 0).
    assert re.search(r'class="s bad" data-n="0" data-lo="0"', page)
    assert f'data-n="{len(nodes) - 1}" data-lo="0"' in page and page.count("<svg") == 1


def test_docstring_examples():
    module = report
    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted > 0


def test_hostile_text_is_data_in_html_and_markdown(tmp_path):
    tree = rat.to_tree("SELECT name FROM singer WHERE country = 'a\u202eb'")
    n = len(tree.postorder())
    page = report.html_report([{"tree": tree, "confidences": [0.5] * n, "sql": "SELECT name FROM singer "
                                "WHERE country = 'a\u202eb'", "question": "<script>alert(1)</script>",
                                "query_confidence": 0.5}])
    assert "<script>alert" not in page and "&lt;script&gt;" in page
    assert "\u202e" not in page and "&lt;U+202E&gt;" in page  # shown, not obeyed: the text reads as it runs
    table = report.markdown_table(["system"], [["<img src=x onerror=alert(1)>|x\ny"]])
    assert table.splitlines()[2] == r"| &lt;img src=x onerror=alert(1)&gt;\|x y |"
    report.write_report(tmp_path / "r.md", "a\ud800b")  # a lone surrogate: written escaped, not a crash
    assert (tmp_path / "r.md").read_text() == "a\\ud800b"


def test_a_deep_query_makes_a_page_linear_in_its_size():
    # each run's title named every enclosing node and its classes every ancestor: a 481-node
    # chain gave a 1.5 MB section
    sizes = []
    for depth in (60, 240):
        sql = "SELECT " + "(" * depth + "a" + " + 1)" * depth + " FROM t"
        tree = rat.to_tree(sql)
        n = len(tree.postorder())
        page = report.html_report([{"tree": tree, "confidences": [0.5] * n, "sql": sql, "query_confidence": 0.5}])
        sizes.append(len(page))
    assert sizes[1] < 5 * sizes[0]  # 4x the nodes: about 4x the page, not 16x


def test_an_example_over_the_drawing_bounds_is_named_not_drawn():
    sql = "SELECT " + " + ".join(["a"] * 400) + " FROM t"  # 801 nodes
    tree = rat.to_tree(sql)
    n = len(tree.postorder())
    page = report.html_report([{"tree": tree, "confidences": [0.5] * n, "sql": sql, "question_id": "q1"}])
    assert f"q1 · too large to show: {n} nodes" in page and "<svg" not in page and len(page) < 20_000


def test_the_wrong_node_legend_only_with_labels_and_the_query_label_in_the_header():
    tree = rat.to_tree("SELECT name FROM singer WHERE age > 40")
    n = len(tree.postorder())
    example = {"tree": tree, "confidences": [0.5] * n, "sql": "SELECT name FROM singer WHERE age > 40"}
    unlabelled = report.html_report([example], query_confidence_means="P(right by tree agreement)")
    labelled = report.html_report([{**example, "labels": [1] * n}])
    assert "labelled wrong against gold" not in unlabelled and "labelled wrong against gold" in labelled
    assert "Query confidence: P(right by tree agreement)." in unlabelled and "Query confidence" not in labelled



@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_report_that_cannot_be_written_leaves_the_old_one_and_no_temporary_file(failure, tmp_path, monkeypatch):
    path = tmp_path / "report.html"
    path.write_text("old")

    def fails(self, *args, **kwargs):  # the disk fills (or Ctrl-C comes) half way through the report
        with Path.open(self, "w") as f:
            f.write("<html>half a rep")
        raise failure

    monkeypatch.setattr(Path, "write_text", fails)
    with pytest.raises(type(failure)):
        report.write_report(path, "<html>new</html>")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"] and path.read_text() == "old"
