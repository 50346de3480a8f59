"""Regression tests for prediction files: TABs inside SQL, JSON of the wrong shape, undecodable
files; every bad file is one `PredictionFileError` naming it, and `rat-exec` prints one line."""

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from model.data import exec_command
from model.data.datasets import Question
from model.data.predictions import PredictionFileError, load_predictions

QUESTIONS = [
    Question("dev_0", "concert", "How many singers?", "SELECT count(*) FROM singer"),
    Question("dev_1", "concert", "Names?", "SELECT name FROM singer"),
    Question("dev_2", "pets", "Oldest pet?", "SELECT max(age) FROM pets"),
]


def sqls(path: Path) -> list[str]:
    return [p.sql for p in load_predictions(path, QUESTIONS)]


def test_txt_tab_inside_sql_stays_in_the_sql(tmp_path):
    path = tmp_path / "tabs.txt"
    path.write_text("SELECT count(*)\tFROM singer\n"  # a TAB, no db_id
                    "SELECT name\tFROM singer\tconcert\n"  # a TAB, then the db_id
                    "SELECT max(age) FROM\tpets\tpets\n")  # db_id equal to a table name
    assert sqls(path) == ["SELECT count(*)\tFROM singer", "SELECT name\tFROM singer",
                          "SELECT max(age) FROM\tpets"]


def test_txt_trailing_word_that_names_no_database_is_sql(tmp_path):
    path = tmp_path / "words.txt"
    path.write_text("SELECT count(*) FROM\tsinger\nSELECT name FROM singer\tconcert \n"
                    "SELECT max(age) FROM pets\t\n")
    assert sqls(path) == ["SELECT count(*) FROM\tsinger", "SELECT name FROM singer",
                          "SELECT max(age) FROM pets"]


def test_txt_db_id_of_another_question_is_still_a_mismatch(tmp_path):
    path = tmp_path / "shifted.txt"
    path.write_text("SELECT 1\tpets\nSELECT 2\tconcert\nSELECT 3\tpets\n")
    predictions = load_predictions(path, QUESTIONS)
    assert [p.question_id for p in predictions] == ["dev_1", "dev_2"]


@pytest.mark.parametrize("content, problem", [
    ("5", "found 5"),
    ("null", "found null"),
    ('"SELECT 1"', 'found "SELECT 1"'),
    ("true", "found true"),
    ("{oops", "not JSON"),
    ("", "not JSON"),
    ('{"0": "SELECT 1", "one": "SELECT 2", "2": "SELECT 3"}', "found 'one'"),
    ('{"0": "SELECT 1", "1": 2, "2": "SELECT 3"}', "prediction 1 is int"),
    ('["SELECT 1", null, "SELECT 3"]', "prediction 1 is NoneType"),
    ('["SELECT 1"]', "1 predictions but 3 questions"),
])
def test_json_of_the_wrong_shape_is_one_error_naming_the_file(tmp_path, content, problem):
    path = tmp_path / "codes.json"
    path.write_text(content)
    with pytest.raises(PredictionFileError) as info:
        load_predictions(path, QUESTIONS)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and problem in message and "\n" not in message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("suffix", [".txt", ".json", ".csv"])
def test_undecodable_file_is_one_error_naming_the_file(tmp_path, suffix):
    path = tmp_path / f"latin1{suffix}"
    path.write_bytes(b"SELECT 'caf\xe9'\nSELECT 2\nSELECT 3\n")
    with pytest.raises(PredictionFileError, match=rf"{path.name}: not UTF-8"):
        load_predictions(path, QUESTIONS)


def test_an_undecodable_jsonl_line_is_one_row_counted(tmp_path):
    """A JSONL file's rows are read a line at a time: a line that is not UTF-8 costs that row."""
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"question_id": "dev_0", "sql": "SELECT \'caf\xe9\'"}\n'
                     + "".join(json.dumps({"question_id": q.question_id, "sql": "SELECT 2"}) + "\n"
                               for q in QUESTIONS[1:]).encode())
    skipped = Counter()
    found = load_predictions(path, QUESTIONS, skipped=skipped)
    assert [p.question_id for p in found] == [q.question_id for q in QUESTIONS[1:]] and skipped == {"not UTF-8": 1}


def test_a_jsonl_line_past_the_line_limit_is_one_row_counted_never_held(tmp_path, monkeypatch):
    """A user's JSONL file is read a line at a time (it was read whole, and split, about twice
    its size held): a line over MAX_LINE_BYTES is passed over in pieces and counted."""
    import tracemalloc

    from model.data import jsonl

    monkeypatch.setattr(jsonl, "MAX_LINE_BYTES", 1 << 20)
    path = tmp_path / "ours.jsonl"
    with path.open("w") as f:
        f.write(json.dumps({"question_id": "dev_0", "sql": "SELECT 1"}) + "\n")
        f.write(json.dumps({"question_id": "dev_1", "sql": "SELECT '" + "x" * (8 << 20) + "'"}) + "\n")
        f.write(json.dumps({"question_id": "dev_2", "sql": "SELECT 2"}))  # (no line end)
    skipped = Counter()
    tracemalloc.start()
    rows = jsonl.read_objects(path, skipped)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [r["question_id"] for r in rows] == ["dev_0", "dev_2"] and skipped == {"a line over 1 MiB": 1}
    assert peak < 6 << 20  # (the file is 8 MiB: read whole and split, it was 16 MiB and more)
    # a line of the limit's length is read, whatever ends it (a line end, CRLF, a byte-order mark)
    row = json.dumps({"sql": "SELECT 1", "pad": ""}).encode()
    row = row[:-2] + b"x" * ((1 << 20) - len(row)) + row[-2:]
    for content in (row + b"\n", b"\xef\xbb\xbf" + row + b"\r\n", row):
        path.write_bytes(content)
        assert len(jsonl.read_objects(path, Counter())) == 1


def test_broken_csv_is_one_error_naming_the_file(tmp_path):
    path = tmp_path / "din.csv"
    path.write_text("NLQ,PREDICTED SQL,GOLD SQL,DATABASE\nq,\"SELECT\x00 1\",g,concert\n")
    with pytest.raises(PredictionFileError, match="din.csv"):
        load_predictions(path, QUESTIONS)


def test_unknown_format_and_row_counts_are_prediction_file_errors(tmp_path):
    with pytest.raises(PredictionFileError, match=r"\.xml"):
        load_predictions(tmp_path / "p.xml", QUESTIONS)
    path = tmp_path / "short.jsonl"
    path.write_text(json.dumps({"question_id": "dev_0", "sql": "SELECT 1"}) + "\n")
    with pytest.raises(PredictionFileError, match="1 predictions but 3 questions"):
        load_predictions(path, QUESTIONS)


def test_jsonl_keeps_line_separators_inside_strings(tmp_path):
    path = tmp_path / "ours.jsonl"
    rows = [{"question_id": f"dev_{i}", "sql": f"SELECT '\u2028{i}\x85'"} for i in range(3)]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    assert sqls(path) == [f"SELECT '\u2028{i}\x85'" for i in range(3)]


# ------------------------------------------------------------------------------- rat-exec CLI


@pytest.fixture
def spider_root(tmp_path: Path) -> Path:
    root = tmp_path / "spider"
    root.mkdir()
    (root / "dev.json").write_text(json.dumps(
        [{"db_id": "concert", "question": "q", "query": "SELECT 1"}] * 2))
    return root


@pytest.mark.parametrize("name, content", [
    ("plain.json", "5"),
    ("null.json", "null"),
    ("broken.json", "{"),
    ("latin1.txt", b"SELECT 'caf\xe9'\nSELECT 1\n"),
    ("missing.txt", None),
    ("short.txt", "SELECT 1\n"),
])
def test_rat_exec_prints_one_line_for_a_bad_prediction_file(spider_root, tmp_path, capsys,
                                                            name, content):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    code = exec_command.main(["--root", str(spider_root), "--predictions", str(path),
                           "--no-cache", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rat-exec: ") and name in lines[0]


@pytest.mark.parametrize("questions", [None, "[1, 2]", '{"a": 1}', "{", '[{"db_id": "x"}]'])
def test_rat_exec_prints_one_line_for_a_bad_root(tmp_path, capsys, questions):
    root = tmp_path / "root"
    if questions is not None:
        root.mkdir()
        (root / "dev.json").write_text(questions)
    predictions = tmp_path / "p.txt"
    predictions.write_text("SELECT 1\n")
    code = exec_command.main(["--root", str(root), "--predictions", str(predictions),
                           "--no-cache", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and str(root) in lines[0], captured.err


def test_rat_exec_prints_one_line_for_an_unusable_cache(spider_root, tmp_path, capsys):
    predictions = tmp_path / "p.txt"
    predictions.write_text("SELECT 1\nSELECT 1\n")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "execution.sqlite").write_text("not a database, but long enough to be read " * 20)
    database = spider_root / "database" / "concert"
    database.mkdir(parents=True)
    sqlite3.connect(database / "concert.sqlite").close()
    code = exec_command.main(["--root", str(spider_root), "--predictions", str(predictions),
                           "--cache-dir", str(cache), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "cache" in lines[0], captured.err
