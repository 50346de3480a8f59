"""The checks every input of rat-score and rat-serve passes (model.scoring.inputs, model.scoring.fields)."""

import sqlite3

import pytest

from model.errors import UsageError
from model.scoring.fields import field_problem, row_problem
from model.scoring.inputs import DatabaseFiles, database_under, read_schemas


def _database(folder, db_id):
    path = folder / "database" / db_id / f"{db_id}.sqlite"
    path.parent.mkdir(parents=True)
    sqlite3.connect(path).close()
    return path


def test_a_database_folder_linked_outside_the_root_is_not_read(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    inside = _database(root, "fine")
    elsewhere = _database(outside, "linked")
    (root / "database" / "linked").symlink_to(elsewhere.parent)  # a folder linked to elsewhere
    (root / "database" / "alias").mkdir()
    (root / "database" / "alias" / "alias.sqlite").symlink_to(inside)  # a file linked within the root
    assert database_under(root, "fine") == inside.resolve()
    assert database_under(root, "alias") == inside.resolve()
    assert database_under(root, "linked") is None and database_under(root, "absent") is None


def test_a_remembered_database_is_checked_again_on_each_use(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    first = _database(root, "first")
    elsewhere = _database(outside, "first")
    files = DatabaseFiles(root)
    assert files("first") == first.resolve() == files("first")
    first.parent.rename(root / "database" / "moved")  # its folder replaced by a link out of the root
    (root / "database" / "first").symlink_to(elsewhere.parent)
    assert files("first") is None
    (root / "database" / "first").unlink()
    (root / "database" / "moved").rename(first.parent)
    assert files("first") == first.resolve()
    first.unlink()  # the file gone
    assert files("first") is None
    _database(root, "later")  # a database that appears while the service runs
    assert files("later") == database_under(root, "later") is not None


@pytest.mark.parametrize("name, value, problem", [
    ("db_id", "d" * 129, "db_id: longer than 128 characters"),
    ("db_id", 5, "db_id: expected a string, found int"),
    ("db_id", "a\x00b", "db_id: a NUL character at character 1"),
    ("db_id", ".hidden", "db_id: not a database name"),
    ("db_id", "a\nb", "db_id: not a database name"),
    ("question", "ok \ud800", "question: not valid Unicode text (a lone surrogate at character 3)"),
    ("question_id", 7, None),
    ("question_id", True, "question_id: expected a string, found bool"),
    ("database", "x" * 1025, "database: longer than 1024 characters"),
    ("sql", "SELECT 1", None),
])
def test_field_problems_name_the_field(name, value, problem):
    assert field_problem(name, value) == problem


def test_row_problem_is_the_first_malformed_field():
    assert row_problem({"sql": "SELECT 1", "db_id": ["x"], "question": "\udfff"}) == \
        "question: not valid Unicode text (a lone surrogate at character 0)"
    assert row_problem({"sql": "SELECT 1", "db_id": "concert_singer", "question_id": 3}) is None


def test_a_binary_or_malformed_schema_file_is_one_usage_error(tmp_path):
    binary = tmp_path / "tables.json"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(UsageError, match="not UTF-8 text"):
        read_schemas(binary)
    binary.write_text('[{"db_id": "x"}]')
    with pytest.raises(UsageError, match=r"tables.json: x: schema: the tables.json entry has no 'table_names_original'"):
        read_schemas(binary)
    binary.write_text('{"a": 1}')
    with pytest.raises(UsageError, match="expected a JSON list of tables.json entries"):
        read_schemas(binary)


@pytest.mark.parametrize("command", ["rat-score", "rat-serve", "rat-mcp"])
def test_schema_and_data_root_together_are_one_line(tmp_path, command, capsys):
    """--data-root's schemas were dropped for --schema's, its databases then read against them
    (rat-score scored a Spider query against a shop DDL renamed concert_singer): one line, exit 2."""
    from model.scoring import cli, mcp_server, service

    main = {"rat-score": cli.main, "rat-serve": service.main, "rat-mcp": mcp_server.main}[command]
    shop = tmp_path / "shop.sql"
    shop.write_text("CREATE TABLE item (id INT, name TEXT);")
    argv = ["--schema", str(shop), "--data-root", str(tmp_path)] + (["--sql", "SELECT 1"] if command == "rat-score" else [])
    if command == "rat-serve":
        argv += ["--port", "0"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("--schema and --data-root: give one (--data-root's folder holds its databases' schemas; "
                        "--schema alone scores without a database, or with --database)") and "\n" not in err
