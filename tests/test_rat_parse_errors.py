"""`rat.ParseError`: SQL that cannot be parsed, told from SQL that uses a construct rat does not
model by its type (callers read the message's `cannot parse` prefix before)."""

import pytest

import rat
from rat.errors import DepthError


@pytest.mark.parametrize("sql, dialect", [
    ("SELEC x FROM t", "sqlite"),  # sqlglot's ParseError
    ("SELECT 'a FROM t", "sqlite"),  # sqlglot's TokenError: a string left open
    ("SELECT a FROM t,", "sqlite"),  # cut short: nothing after the comma
    ("FROM t SELECT a", "sqlite"),  # FROM before SELECT
    ("SELECT a FROM t JOIN u USING", "sqlite"),  # USING without its columns
    ("SELECT a FROM t GROUP BY DISTINCT", "postgres"),  # GROUP BY DISTINCT without its keys
])
def test_sql_that_does_not_parse_raises_parse_error(sql, dialect):
    with pytest.raises(rat.ParseError) as raised:
        rat.to_tree(sql, None, dialect)
    error = raised.value
    assert isinstance(error, rat.RATError) and isinstance(error, ValueError)
    assert str(error).startswith("cannot parse (") and error.sql == sql  # the message as before
    assert type(error) is rat.ParseError and rat.errors.ParseError is rat.ParseError
    with pytest.raises(rat.ParseError):
        rat.canonicalize(sql, None, dialect)


def test_parse_error_keeps_the_message():
    with pytest.raises(rat.ParseError, match=r"^cannot parse \(Invalid expression / Unexpected token at line 1, "
                                             r"col 12\) in SQL: 'SELEC x FROM t'$"):
        rat.to_tree("SELEC x FROM t")


@pytest.mark.parametrize("sql, dialect", [
    ("SELECT * FROM t PIVOT (sum(a) FOR b IN (1, 2))", "sqlite"),  # unsupported construct
    ("SELECT a FROM t TABLESAMPLE SYSTEM (10)", "sqlite"),
    ("SELECT a FROM t; SELECT b FROM u", "sqlite"),  # two statements
    ("DELETE FROM t", "sqlite"),  # not a query
    ("SELECT a FROM t", "oracle"),  # an unknown dialect
])
def test_sql_rat_refuses_is_no_parse_error(sql, dialect):
    with pytest.raises(rat.RATError) as raised:
        rat.to_tree(sql, None, dialect)
    assert not isinstance(raised.value, rat.ParseError), str(raised.value)
    assert not str(raised.value).startswith("cannot parse")


def test_a_query_nested_too_deeply_is_no_parse_error():
    with pytest.raises(DepthError) as raised:
        rat.to_tree("SELECT " + "(" * 900 + "1" + ")" * 900)
    assert isinstance(raised.value, rat.RATError) and not isinstance(raised.value, rat.ParseError)


def test_every_cannot_parse_message_in_rat_is_a_parse_error():
    """No RATError whose message says `cannot parse` is raised as a plain RATError (a new one
    would be told from an unsupported construct by its message alone again)."""
    import re
    from pathlib import Path

    source = "\n".join(p.read_text() for p in sorted((Path(rat.__file__).parent).glob("*.py")))
    assert "raise ParseError(" in source
    assert not re.search(r"raise RATError\(\s*f?[\"']cannot parse", source)
