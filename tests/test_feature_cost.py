"""Per-row costs of node features on large schemas stay bounded (model.nodes.features)."""

import sqlite3

import rat
from model.nodes import features
from model.nodes.features import HOLDING_COLUMNS, DatabaseProbe, QuestionIndex, SchemaIndex


def _wide_database(path, tables: int, columns: int):
    """A SQLite file of ``tables`` tables of ``columns`` text columns and one row; 'needle' is in the last."""
    with sqlite3.connect(path) as con:
        for t in range(tables):
            names = [f"c{c}" for c in range(columns)]
            con.execute(f"CREATE TABLE t{t} ({', '.join(n + ' TEXT' for n in names)})")
            values = ["needle" if (t, c) == (tables - 1, columns - 1) else "hay" for c in range(columns)]
            con.execute(f"INSERT INTO t{t} VALUES ({', '.join('?' * columns)})", values)
    return [f"t{t}.c{c}" for t in range(tables) for c in range(columns)]


def _counting(probe: DatabaseProbe) -> list:
    """The SQL of each read of ``probe``'s database; a read of a column ``c99`` fails."""
    reads, execute = [], probe.database.execute
    probe.database.execute = lambda *a, **k: reads.append(a[0]) or (
        (None, "no such column: c99") if '"c99"' in a[0] else execute(*a, **k))
    return reads


def test_a_literal_is_searched_in_more_columns_than_one_read_holds(tmp_path):
    """2,100 text columns: more than SQLite returns from one SELECT (it failed: unknown)."""
    columns = _wide_database(tmp_path / "wide.sqlite", 21, 100)
    probe = DatabaseProbe(tmp_path / "wide.sqlite")
    assert probe.columns_holding("'NEEDLE'", columns) == {"t20.c99"}
    assert probe.columns_holding("'hay'", columns[:3]) == set(columns[:3])


def test_a_search_past_its_bound_or_that_failed_is_not_read_again(tmp_path):
    columns = _wide_database(tmp_path / "wide.sqlite", 2, 10)
    probe = DatabaseProbe(tmp_path / "wide.sqlite")
    reads = _counting(probe)
    many = [f"t0.x{k}" for k in range(HOLDING_COLUMNS + 1)]
    assert probe.columns_holding("'a'", many) is None and probe.columns_holding("'b'", many) is None
    assert reads == []  # past the bound: unknown, nothing read
    broken = columns + ["t1.c99"]
    assert probe.columns_holding("'a'", broken) is None
    assert len(reads) == 1
    assert probe.columns_holding("'b'", broken) is None  # another literal: the failed read not tried again
    assert len(reads) == 1
    assert probe.columns_holding("'needle'", columns) == {"t1.c9"}  # the columns that read well still do


def test_a_schemas_names_are_made_once_for_every_question(monkeypatch):
    schema = rat.Schema({"singer": ["singer_id", "name", "home_town"], "concert": ["concert_id", "singer_id"]})
    made = []
    phrase = features.name_phrase
    monkeypatch.setattr(features, "name_phrase", lambda name: made.append(name) or phrase(name))
    first = SchemaIndex(schema, QuestionIndex("Which singers are from Paris?"))
    assert len(made) == 2 + 4  # the tables and the distinct columns
    second = SchemaIndex(schema, QuestionIndex("How many concerts are there?"))
    assert len(made) == 6  # not again
    assert first.tables["singer"] == 1.0 and second.tables["concert"] == 1.0
    assert second.columns == {c: QuestionIndex("How many concerts are there?").fuzzy(phrase(c)) for c in second.columns}
