"""Fixture-driven tests of `rat.label_nodes`: every case in tests/fixtures/rat/*.txt.

A case is a block of lines separated by a blank line:

    # title: what the case shows
    # schema: singer(singer_id, name, age); concert(concert_id, singer_id, year)   (optional)
    <predicted SQL, one line>
    <gold SQL, one line>
    all correct            or    incorrect: Label | Label | ...    or    incorrect: none

`incorrect:` lists the labels of the incorrect predicted nodes in post-order (`none`: every
node occurs in gold, yet the trees differ, e.g. gold has an extra DISTINCT); `all correct`
also requires the two root hashes to be equal.
"""

from pathlib import Path

import pytest

import rat

FIXTURES = Path(__file__).parent / "fixtures" / "rat"


def _schema(text: str) -> rat.Schema:
    tables = {}
    for table in text.split(";"):
        name, _, columns = table.strip().partition("(")
        tables[name.strip()] = [c.strip().strip("`") for c in columns.rstrip(")").split(",")]
    return rat.Schema(tables)


def load_cases() -> list:
    cases = []
    for path in sorted(FIXTURES.glob("*.txt")):
        for block in path.read_text().strip().split("\n\n"):
            lines = [line for line in block.strip().splitlines() if line.strip()]
            title = lines[0].removeprefix("# title:").strip()
            assert lines[0].startswith("# title:"), f"{path.name}: case without title: {block!r}"
            schema = None
            body = lines[1:]
            if body[0].startswith("# schema:"):
                schema = _schema(body[0].removeprefix("# schema:"))
                body = body[1:]
            assert len(body) == 3, f"{path.name}: {title!r} needs pred, gold, expectation"
            pred, gold, expected = body
            cases.append(pytest.param(pred, gold, expected.strip(), schema,
                                      id=f"{path.stem}: {title}"))
    return cases


CASES = load_cases()


def test_enough_cases():
    assert len(CASES) >= 60


@pytest.mark.parametrize("pred_sql, gold_sql, expected, schema", CASES)
def test_labels(pred_sql, gold_sql, expected, schema):
    pred, gold = rat.to_tree(pred_sql, schema), rat.to_tree(gold_sql, schema)
    labels = rat.label_nodes(pred, gold)
    nodes = pred.postorder()
    assert len(labels) == len(nodes)
    incorrect = [n.label for n, label in zip(nodes, labels) if not label]
    shown = rat.serialize(pred) + "\n" + rat.serialize(gold)
    if expected == "all correct":
        assert incorrect == [], shown
        assert pred.hash == gold.hash, shown
    else:
        assert expected.startswith("incorrect:"), expected
        wanted = [label.strip() for label in expected.removeprefix("incorrect:").split(" | ")]
        wanted = [] if wanted == ["none"] else wanted
        assert incorrect == wanted, shown
        assert pred.hash != gold.hash
