"""`written_spans` (the nodes of rat's canonical tree in the SQL as the user wrote it) of
`x BETWEEN a AND b` / `x NOT BETWEEN a AND b`, which rat spells as two comparisons with two
copies of `x`, and of `x IS NOT y` where the canonical SQL writes `not x is y`."""

import pytest

import rat
from model.scoring.scorer import written_spans

SCHEMA = rat.Schema({"singer": ["singer_id", "name", "age"], "concert": ["concert_id", "singer_id"]})
DIALECTS = sorted(rat.DIALECTS)


def texts(sql: str, dialect: str) -> list[tuple[str, str | None]]:
    """Each post-order node's (label, written text)."""
    tree = rat.to_tree(sql, SCHEMA, dialect)
    spans = written_spans(sql, tree, SCHEMA, dialect)
    return [(n.label, None if s is None else sql[s[0]:s[1]]) for n, s in zip(tree.postorder(), spans)]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("negated, lower, upper, joined", [
    (False, "Gte", "Lte", "And"), (True, "Lt", "Gt", "Or")])
def test_between_both_copies_of_the_operand_are_the_written_operand(dialect, negated, lower, upper, joined):
    """Both copies of the operand are the written `s.age`; the lower comparison is `s.age
    BETWEEN 1` (the operand to its bound), the upper one `s.age BETWEEN 1 AND 5` (the operand to
    its bound: the whole predicate, which holds both)."""
    between = "NOT BETWEEN" if negated else "BETWEEN"
    sql = f"SELECT name FROM singer AS s WHERE s.age {between} 1 AND 5"
    got = texts(sql, dialect)
    assert got[1:8] == [("singer.age", "s.age"), ("1", "1"), (lower, f"s.age {between} 1"),
                        ("singer.age", "s.age"), ("5", "5"), (upper, f"s.age {between} 1 AND 5"),
                        (joined, f"s.age {between} 1 AND 5")], got


@pytest.mark.parametrize("dialect", ["sqlite", "postgres", "duckdb"])
def test_between_of_an_expression_among_other_conditions(dialect):
    """The operand's every node has its copy's text; the other conditions keep theirs."""
    sql = "SELECT name FROM singer AS s WHERE s.age BETWEEN 1 AND 5 AND s.name = 'x'"
    got = texts(sql, dialect)
    assert [t for label, t in got if label == "singer.age"] == ["s.age", "s.age"], got
    assert ("Lte", "s.age BETWEEN 1 AND 5") in got and ("Eq", "s.name = 'x'") in got, got
    sql = "SELECT name FROM singer WHERE age * 2 BETWEEN 10 AND 50"
    got = texts(sql, dialect)
    assert [t for label, t in got if label in ("singer.age", "Mul")] == ["age", "age * 2"] * 2, got
    assert [t for label, t in got if label in ("Gte", "Lte")] == ["age * 2 BETWEEN 10",
                                                                 "age * 2 BETWEEN 10 AND 50"], got


def test_two_betweens_each_map_to_their_own():
    sql = "SELECT name FROM singer AS s WHERE s.age BETWEEN 1 AND 5 OR s.singer_id BETWEEN 7 AND 9"
    got = texts(sql, "sqlite")
    assert [t for label, t in got if label in ("singer.age", "singer.singer_id")] == \
        ["s.age", "s.age", "s.singer_id", "s.singer_id"], got
    assert ("Lte", "s.singer_id BETWEEN 7 AND 9") in got, got


def test_comparisons_written_twice_are_left_as_they_are():
    """`x >= 1 AND x <= 5` written out: each copy of x is its own written text."""
    sql = "SELECT name FROM singer WHERE age >= 1 AND age <= 5"
    got = texts(sql, "sqlite")
    assert got[1:8] == [("singer.age", "age"), ("1", "1"), ("Gte", "age >= 1"), ("singer.age", "age"),
                        ("5", "5"), ("Lte", "age <= 5"), ("And", "age >= 1 AND age <= 5")], got


@pytest.mark.parametrize("dialect", ["postgres", "mysql", "sqlite", "duckdb"])
def test_is_not_keeps_its_left_operand(dialect):
    """`s.age IS NOT 3`, which PostgreSQL and MySQL read as `not s.age is 3` (a Not over an Is):
    the column is `s.age`, the Is and the Not the whole predicate."""
    sql = "SELECT name FROM singer AS s WHERE s.age IS NOT 3"
    got = texts(sql, dialect)
    assert got[1:3] == [("singer.age", "s.age"), ("3", "3")], got
    assert all(t == "s.age IS NOT 3" for label, t in got[3:] if label in ("Is", "Not", "Is_not")), got
