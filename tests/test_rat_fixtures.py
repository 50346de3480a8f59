"""Fixture-driven tests of `rat.label_nodes`: every case in tests/fixtures/rat/*.txt.

A case is a block of lines separated by a blank line:

    # title: what the case shows
    # dialect: postgres                                                           (optional)
    # schema: singer(singer_id, name, age); concert(concert_id, singer_id, year)   (optional)
    <predicted SQL, one line>
    <gold SQL, one line>
    all correct            or    incorrect: Label | Label | ...    or    incorrect: none

`incorrect:` lists the labels of the incorrect predicted nodes in post-order (`none`: every
node occurs in gold, yet the trees differ, e.g. gold has an extra DISTINCT); `all correct`
also requires the two root hashes to be equal. Both queries are written in the case's dialect
(default: sqlite); dialects.txt has at least 4 cases for each dialect `rat` reads.
"""

from collections import Counter
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
            dialect = "sqlite"
            body = lines[1:]
            if body[0].startswith("# dialect:"):
                dialect = body[0].removeprefix("# dialect:").strip()
                body = body[1:]
            if body[0].startswith("# schema:"):
                schema = _schema(body[0].removeprefix("# schema:"))
                body = body[1:]
            assert len(body) == 3, f"{path.name}: {title!r} needs pred, gold, expectation"
            pred, gold, expected = body
            cases.append(pytest.param(pred, gold, expected.strip(), schema, dialect,
                                      id=f"{path.stem}: {title}"))
    return cases


CASES = load_cases()


def test_enough_cases():
    assert len(CASES) >= 60


def test_every_dialect_has_cases():
    per_dialect = Counter(case.values[4] for case in CASES)
    assert {d: per_dialect[d] for d in rat.DIALECTS} == \
        {d: max(per_dialect[d], 4) for d in rat.DIALECTS}


@pytest.mark.parametrize("pred_sql, gold_sql, expected, schema, dialect", CASES)
def test_labels(pred_sql, gold_sql, expected, schema, dialect):
    pred, gold = rat.to_tree(pred_sql, schema, dialect), rat.to_tree(gold_sql, schema, dialect)
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


DIALECT_CASES = [case for case in CASES if case.values[4] != "sqlite"]


@pytest.mark.parametrize("pred_sql, gold_sql, expected, schema, dialect", DIALECT_CASES)
def test_dialect_queries_map_to_their_canonical_text_and_round_trip(pred_sql, gold_sql, expected,
                                                                    schema, dialect):
    """Every node of a dialect's query has its text in the canonical SQL of that dialect, and
    that text, read again in the dialect, gives the same tree."""
    for sql in (pred_sql, gold_sql):
        tree = rat.to_tree(sql, schema, dialect)
        spans = rat.sql_spans(sql, tree, schema, dialect)
        assert spans.unmapped == 0 and spans.tree == tree, (sql, spans.sql)
        assert spans.sql == rat.canonicalize(sql, schema, dialect)
        assert rat.to_tree(spans.sql, schema, dialect).hash == tree.hash, spans.sql
