"""Spider/BIRD loading (model/data/datasets.py)."""

import json
from pathlib import Path

import pytest

from model.data.datasets import (
    Question,
    database_path,
    is_bird,
    load_questions,
    load_schemas,
    spider_hardness,
)
from model.errors import UsageError


def parsed(**clauses):
    """A Spider ``sql`` dict for ``SELECT count(*) FROM <table 0>`` with ``clauses`` replaced."""
    sql = {
        "select": [False, [[3, [0, [0, 0, False], None]]]],
        "from": {"table_units": [["table_unit", 0]], "conds": []},
        "where": [],
        "groupBy": [],
        "having": [],
        "orderBy": [],
        "limit": None,
        "intersect": None,
        "union": None,
        "except": None,
    }
    sql.update(clauses)
    return sql


COL = [0, [0, 1, False], None]  # val_unit: column 1, no arithmetic
COND = [False, 2, COL, 1.0, None]  # column 1 = 1
TWO_COLUMNS = [False, [[0, COL], [0, COL]]]


@pytest.mark.parametrize(
    ("sql", "hardness"),
    [
        (parsed(), "easy"),
        (parsed(where=[COND]), "easy"),  # one component, nothing else
        (parsed(select=TWO_COLUMNS, orderBy=["desc", [COL]]), "medium"),
        (parsed(where=[COND, "and", COND], orderBy=["asc", [COL]]), "medium"),
        (
            parsed(where=[COND, "and", COND], groupBy=[[0, 1, False]], orderBy=["asc", [COL]]),
            "hard",
        ),
        (
            parsed(where=[COND, "or", COND], groupBy=[[0, 1, False]], orderBy=["asc", [COL]]),
            "extra",
        ),
        (parsed(intersect=parsed()), "hard"),  # one set operation on a plain query
        (parsed(where=[COND], intersect=parsed()), "hard"),
        (parsed(where=[COND, "and", COND], intersect=parsed()), "extra"),
        (
            parsed(where=[[False, 8, COL, parsed(), None]], limit=1),
            "extra",
        ),  # nested + 2 components
    ],
)
def test_spider_hardness(sql, hardness) -> None:
    assert spider_hardness(sql) == hardness


def test_spider_hardness_counts_having_connectives_as_aggregates() -> None:
    # Official quirk kept on purpose: count_agg(sql['having']) reads element 0 of every item, so
    # each 'and' ('a' != 0) counts as an aggregation while the conditions (not_op False) do not.
    cond = [False, 3, [0, [0, 1, False], None], 1.0, None]
    sql = parsed(select=[False, [[0, COL]]], groupBy=[[0, 1, False]])
    assert spider_hardness({**sql, "having": [cond, "and", cond]}) == "easy"  # agg_count 1
    assert spider_hardness({**sql, "having": [cond, "and", cond, "and", cond]}) == "medium"  # 2 > 1


@pytest.fixture
def spider_root(tmp_path: Path) -> Path:
    root = tmp_path / "spider"
    root.mkdir()
    (root / "dev.json").write_text(
        json.dumps(
            [
                {
                    "db_id": "shop",
                    "question": "How many?",
                    "query": "SELECT count(*) FROM t",
                    "sql": parsed(),
                },
                {
                    "db_id": "zoo",
                    "question": "Which?",
                    "query": "SELECT a FROM t ORDER BY b",
                    "sql": parsed(select=TWO_COLUMNS, orderBy=["desc", [COL]]),
                },
            ]
        )
    )
    (root / "train_spider.json").write_text(
        json.dumps([{"db_id": "shop", "question": "A?", "query": "SELECT 1"}])
    )
    (root / "train_others.json").write_text(
        json.dumps(
            [
                {"db_id": "zoo", "question": "B?", "query": "SELECT 2"},
                {"db_id": "zoo", "question": "C?", "query": "SELECT 3"},
            ]
        )
    )
    (root / "tables.json").write_text(
        json.dumps(
            [
                {
                    "db_id": "shop",
                    "table_names_original": ["t"],
                    "table_names": ["t"],
                    "column_names_original": [[-1, "*"], [0, "a"]],
                    "column_names": [[-1, "*"], [0, "a"]],
                    "column_types": ["text", "number"],
                    "primary_keys": [1],
                    "foreign_keys": [],
                }
            ]
        )
    )
    (root / "database" / "shop").mkdir(parents=True)
    (root / "database" / "shop" / "shop.sqlite").write_bytes(b"")
    return root


def test_spider_questions(spider_root: Path) -> None:
    dev = load_questions(spider_root, "dev")
    assert dev == [
        Question("dev_0", "shop", "How many?", "SELECT count(*) FROM t", difficulty="easy"),
        Question("dev_1", "zoo", "Which?", "SELECT a FROM t ORDER BY b", difficulty="medium"),
    ]
    assert not is_bird(spider_root)


def test_spider_train_is_both_train_files_with_stable_ids(spider_root: Path) -> None:
    train = load_questions(spider_root, "train")
    assert [q.question_id for q in train] == ["train_spider_0", "train_others_0", "train_others_1"]
    assert [q.gold_sql for q in train] == ["SELECT 1", "SELECT 2", "SELECT 3"]
    assert load_questions(spider_root, "train_others")[1] == train[2]
    assert all(q.difficulty is None for q in train)  # no parsed `sql` field in the train files


def test_single_train_file_wins(spider_root: Path) -> None:
    (spider_root / "train.json").write_text(
        json.dumps([{"db_id": "shop", "question": "D?", "query": "SELECT 4"}])
    )
    assert [q.question_id for q in load_questions(spider_root, "train")] == ["train_0"]


def test_unknown_split_and_malformed_rows(spider_root: Path) -> None:
    with pytest.raises(FileNotFoundError, match="test"):
        load_questions(spider_root, "test")
    (spider_root / "bad.json").write_text(json.dumps([{"db_id": "shop", "question": "no query"}]))
    with pytest.raises(UsageError, match="bad_0 has no field 'query'"):
        load_questions(spider_root, "bad")
    for rows, says in (([{"db_id": "shop", "question": "q", "query": 5}], "row bad_0: query is not text"),
                       (["SELECT 1"], "row bad_0 is not an object"), ({}, "expected a JSON list of questions")):
        (spider_root / "bad.json").write_text(json.dumps(rows))
        with pytest.raises(UsageError, match=says):
            load_questions(spider_root, "bad")
    for text, says in ("", "not JSON"), ("[" * 100_000, "not JSON|nested too deeply"):
        (spider_root / "bad.json").write_text(text)
        with pytest.raises(UsageError, match=says):
            load_questions(spider_root, "bad")
    (spider_root / "tables.json").write_text(json.dumps([{"db_id": "shop", "table_names_original": ["t"],
                                                           "column_names_original": [[4, "a"]]}]))
    with pytest.raises(UsageError, match="tables.json: shop: schema: a malformed tables.json entry"):
        load_schemas(spider_root)


def test_database_path(spider_root: Path) -> None:
    assert database_path(spider_root, "shop") == spider_root / "database" / "shop" / "shop.sqlite"
    assert database_path(spider_root, "zoo") is None


def test_load_schemas(spider_root: Path) -> None:
    rat = pytest.importorskip("rat")
    if not hasattr(rat, "Schema"):
        pytest.skip("rat.Schema not implemented yet")
    schemas = load_schemas(spider_root)
    assert list(schemas) == ["shop"]
    assert isinstance(schemas["shop"], rat.Schema)


def test_bird_questions(tmp_path: Path) -> None:
    (tmp_path / "dev_tables.json").write_text("[]")
    (tmp_path / "dev.json").write_text(
        json.dumps(
            [
                {
                    "question_id": 0,
                    "db_id": "schools",
                    "question": "Highest rate?",
                    "evidence": "rate = a / b",
                    "SQL": "SELECT max(a / b) FROM frpm",
                    "difficulty": "simple",
                }
            ]
        )
    )
    (tmp_path / "dev_databases" / "schools").mkdir(parents=True)
    (tmp_path / "dev_databases" / "schools" / "schools.sqlite").write_bytes(b"")
    assert is_bird(tmp_path)
    assert load_questions(tmp_path, "dev") == [
        Question(
            "dev_0",
            "schools",
            "Highest rate?",
            "SELECT max(a / b) FROM frpm",
            "rate = a / b",
            "simple",
        )
    ]
    assert (
        database_path(tmp_path, "schools")
        == tmp_path / "dev_databases" / "schools" / "schools.sqlite"
    )


def test_a_db_id_with_two_tables_json_entries_is_one_line(tmp_path):
    """The later entry was ignored: a query on its tables was scored against the first one."""
    from model.data.datasets import schemas_of

    entry = {"db_id": "shop", "table_names_original": ["t"], "column_names_original": [[-1, "*"], [0, "a"]],
             "column_types": ["text", "text"], "primary_keys": [], "foreign_keys": []}
    with pytest.raises(UsageError, match="db_id 'shop' has two entries"):
        schemas_of([entry, {**entry, "table_names_original": ["clients"]}], tmp_path / "tables.json")


def test_a_folder_without_tables_json_has_its_databases_schemas(tmp_path):
    """Your own data needs no tables.json: each `database/<db_id>/<db_id>.sqlite`'s schema is read
    from its catalogue: the tables, columns and keys the demo's tables.json gives;
    a file that is not a database is one line naming it."""
    import shutil

    from model.synth.demo import demo_root

    root = tmp_path / "mine"
    shutil.copytree(demo_root() / "database", root / "database")
    given = load_schemas(demo_root())
    read = load_schemas(root)
    assert set(read) == set(given) and len(read) == 5
    for db_id, schema in given.items():
        assert read[db_id].tables == schema.tables
        # (a composite key whole, where tables.json, as Spider's, names one of its columns)
        assert set(read[db_id].primary_keys) >= set(schema.primary_keys)
        assert set(read[db_id].foreign_keys) == set(schema.foreign_keys)
    with pytest.raises(FileNotFoundError):
        load_schemas(tmp_path / "empty")
    bad = root / "database" / "notes" / "notes.sqlite"
    bad.parent.mkdir()
    bad.write_text("not a database")
    with pytest.raises(UsageError, match="notes.sqlite"):
        load_schemas(root)
