"""Prediction files in the formats real systems publish (model/data/predictions.py)."""

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from model.data.datasets import Question
from model.data.predictions import Prediction, load_predictions, write_predictions
from model.errors import PredictionFileError

QUESTIONS = [
    Question("dev_0", "concert", "How many singers?", "SELECT count(*) FROM singer"),
    Question("dev_1", "concert", "Names and ages?", "SELECT name, age FROM singer"),
    Question("dev_2", "pets", "Oldest pet?", "SELECT max(age) FROM pets"),
]


def sqls(predictions: list[Prediction]) -> list[str]:
    return [p.sql for p in predictions]


def test_txt_with_semicolons_tabs_crlf_and_final_newlines(tmp_path: Path) -> None:
    path = tmp_path / "graphix.txt"
    path.write_bytes(
        b"select count(*) from singer;\r\nSELECT name, age FROM singer\tconcert\r\n"
        b"SELECT max(age) FROM pets ;\n\n"
    )
    predictions = load_predictions(path, QUESTIONS)
    assert sqls(predictions) == [
        "select count(*) from singer;",
        "SELECT name, age FROM singer",
        "SELECT max(age) FROM pets ;",
    ]
    assert [p.question_id for p in predictions] == ["dev_0", "dev_1", "dev_2"]
    assert {p.system for p in predictions} == {"graphix"}


def test_txt_blank_line_is_an_empty_prediction(tmp_path: Path) -> None:
    path = tmp_path / "gaps.txt"
    path.write_text("SELECT 1\n\nSELECT 3\n")
    assert sqls(load_predictions(path, QUESTIONS)) == ["SELECT 1", "", "SELECT 3"]


def test_row_count_mismatch_names_file_and_counts(tmp_path: Path) -> None:
    path = tmp_path / "short.txt"
    path.write_text("SELECT 1\nSELECT 2\n")
    with pytest.raises(ValueError, match=r"short\.txt: 2 predictions but 3 questions"):
        load_predictions(path, QUESTIONS)
    long = tmp_path / "long.jsonl"
    long.write_text(
        "".join(json.dumps({"question_id": f"dev_{i}", "sql": "SELECT 1"}) + "\n" for i in range(4))
    )
    with pytest.raises(ValueError, match=r"long\.jsonl: 4 predictions but 3 questions"):
        load_predictions(long, QUESTIONS)


def test_txt_db_id_mismatch_is_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "shifted.txt"
    path.write_text("SELECT 1\tconcert\nSELECT 2\tpets\nSELECT 3\tpets\n")
    skipped: Counter[str] = Counter()
    predictions = load_predictions(path, QUESTIONS, system="sys", skipped=skipped)
    assert [p.question_id for p in predictions] == ["dev_0", "dev_2"]
    assert skipped == {"db_id not its question's": 1}


def test_din_sql_csv_with_commas_quotes_and_newlines(tmp_path: Path) -> None:
    path = tmp_path / "din_sql.csv"
    rows = [
        [
            "How many singers?",
            "SELECT COUNT(*) FROM singer",
            "SELECT count(*) FROM singer",
            "concert",
        ],
        [
            "Names, and ages?",
            'SELECT name, age\nFROM singer\nWHERE name = "a, b"',
            "SELECT name, age FROM singer",
            "concert",
        ],
        ["Oldest pet?", "SELECT max(age) FROM pets", "SELECT max(age) FROM pets", "pets"],
    ]
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["NLQ", "PREDICTED SQL", "GOLD SQL", "DATABASE"])
        writer.writerows(rows)
    assert sqls(load_predictions(path, QUESTIONS)) == [row[1] for row in rows]


def test_csv_without_the_din_sql_columns(tmp_path: Path) -> None:
    path = tmp_path / "other.csv"
    path.write_text("question,sql\na,SELECT 1\n")
    with pytest.raises(ValueError, match="PREDICTED SQL"):
        load_predictions(path, QUESTIONS)


def test_codes_bird_json(tmp_path: Path) -> None:
    path = tmp_path / "codes_7b.json"
    # keys deliberately out of order and past 9, to catch string sorting
    data = {str(i): f"SELECT {i}\t----- bird -----\t{q.db_id}" for i, q in enumerate(QUESTIONS)}
    path.write_text(json.dumps(dict(reversed(list(data.items())))))
    assert sqls(load_predictions(path, QUESTIONS)) == ["SELECT 0", "SELECT 1", "SELECT 2"]
    many = [Question(f"dev_{i}", "db", "q", "SELECT 1") for i in range(12)]
    path.write_text(json.dumps({str(i): f"SELECT {i}\t----- bird -----\tdb" for i in range(12)}))
    assert sqls(load_predictions(path, many))[10] == "SELECT 10"


@pytest.mark.parametrize(("keys", "says"), [(["0", "1", "300"], "2 is missing"), (["-1", "0", "1"], "2 is missing"),
                                           (["0", "01", "1"], "2 is missing")])
def test_positional_json_keys_must_number_every_question_once(tmp_path: Path, keys, says) -> None:
    path = tmp_path / "gaps.json"
    path.write_text(json.dumps({k: "SELECT 1" for k in keys}))  # as many rows as questions, one shifted
    with pytest.raises(PredictionFileError, match=f"keys must run from 0 to 2; {says}"):
        load_predictions(path, QUESTIONS)


def test_json_nested_too_deeply_is_one_line_or_one_counted_row(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000)
    with pytest.raises(PredictionFileError, match="not JSON|nested too deeply"):
        load_predictions(path, QUESTIONS)
    lines = tmp_path / "deep.jsonl"
    lines.write_text("[" * 100_000 + "\n" + "".join(
        json.dumps({"question_id": q.question_id, "sql": "SELECT 1"}) + "\n" for q in QUESTIONS[:2]))
    skipped = Counter()
    found = load_predictions(lines, QUESTIONS, skipped=skipped)
    assert len(found) == 2 and skipped["not a JSON line"] == 1


def test_jsonl_any_order_with_samples(tmp_path: Path) -> None:
    path = tmp_path / "ours.jsonl"
    rows = [
        {"question_id": "dev_2", "db_id": "pets", "sql": "SELECT max(age) FROM pets"},
        {
            "question_id": "dev_0",
            "db_id": "concert",
            "sql": "SELECT count(*) FROM singer",
            "samples": ["SELECT count(name) FROM singer", "SELECT 4"],
        },
        {"question_id": "dev_1", "sql": "SELECT name, age FROM singer"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    predictions = load_predictions(path, QUESTIONS, system="mine")
    assert [p.question_id for p in predictions] == ["dev_0", "dev_1", "dev_2"]
    assert predictions[0] == Prediction(
        "dev_0",
        "concert",
        "SELECT count(*) FROM singer",
        "mine",
        ("SELECT count(name) FROM singer", "SELECT 4"),
    )
    assert predictions[1].db_id == "concert"  # taken from the question when the row has none


def test_jsonl_bad_rows_are_counted_per_reason(tmp_path: Path) -> None:
    questions = [Question(f"dev_{i}", "concert", "q", "SELECT 1") for i in range(7)]
    lines = [
        json.dumps({"question_id": "dev_0", "db_id": "concert", "sql": "SELECT 1"}),
        "{this is not json",
        json.dumps({"question_id": "dev_2", "db_id": "concert"}),  # no sql
        json.dumps({"question_id": "dev_99", "sql": "SELECT 1"}),
        json.dumps({"question_id": "dev_0", "sql": "SELECT 2"}),  # repeated
        json.dumps({"question_id": "dev_5", "db_id": "pets", "sql": "SELECT 1"}),
        json.dumps({"question_id": "dev_6", "sql": "SELECT 6", "samples": "not a list"}),
    ]
    path = tmp_path / "messy.jsonl"
    path.write_text("\n".join(lines) + "\n")
    skipped: Counter[str] = Counter()
    predictions = load_predictions(path, questions, skipped=skipped)
    assert [(p.question_id, p.sql, p.samples) for p in predictions] == [
        ("dev_0", "SELECT 1", ()),
        ("dev_6", "SELECT 6", ()),
    ]
    assert skipped == {
        "not a JSON line": 1,
        "no question_id or sql (a string)": 1,
        "unknown question_id": 1,
        "duplicate question_id": 1,
        "db_id not its question's": 1,
        "samples not a list of strings (read as none)": 1,
    }


def test_write_then_load_round_trip(tmp_path: Path) -> None:
    predictions = [
        Prediction(q.question_id, q.db_id, q.gold_sql, "gold", ("SELECT 0",) * (i % 2))
        for i, q in enumerate(QUESTIONS)
    ]
    path = tmp_path / "gold.jsonl"
    write_predictions(path, predictions)
    assert load_predictions(path, QUESTIONS) == predictions


def test_unknown_extension(tmp_path: Path) -> None:
    path = tmp_path / "preds.parquet"
    path.write_text("")
    with pytest.raises(ValueError, match=r"unknown prediction format '.parquet' \(.txt .sql .csv .json .jsonl\)$"):
        load_predictions(path, QUESTIONS)


def test_a_folder_named_as_prediction_files_is_one_line_naming_it(tmp_path: Path) -> None:
    """data.predictions=<folder> was read as a file of format '' (its empty suffix)."""
    from model.data.predictions import prediction_files
    from model.errors import UsageError

    folder = tmp_path / "answers"
    folder.mkdir()
    with pytest.raises(UsageError) as refused:
        prediction_files(tmp_path, str(folder))
    assert str(refused.value) == f"prediction files: {folder} is a folder; name its files ({folder / '*.jsonl'})"


def test_id_keyed_jsonl_may_cover_part_of_a_split_when_allowed(tmp_path):
    """SPLASH-style training sources answer only some questions of Spider train."""
    from model.data.datasets import Question
    from model.data.predictions import PredictionFileError

    questions = [Question(f"train_{i}", "shop", "q", "SELECT 1") for i in range(3)]
    path = tmp_path / "partial.jsonl"
    path.write_text('{"question_id": "train_2", "sql": "SELECT 2"}\n')
    with pytest.raises(PredictionFileError, match="1 predictions but 3 questions"):
        load_predictions(path, questions)
    (only,) = load_predictions(path, questions, allow_partial=True)
    assert (only.question_id, only.sql) == ("train_2", "SELECT 2")


def test_one_reader_of_jsonl_rows_for_training_scoring_and_evaluation(tmp_path: Path) -> None:
    """A byte-order mark, a U+2028 inside a string and a line that is not UTF-8 read alike in
    training's prediction files and evaluate.py's rows (model.data.jsonl.read_objects): the mark
    is no part of the first row, U+2028 ends no line, the bad line is one row counted."""
    from model.data.jsonl import read_rows

    path = tmp_path / "p.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(
        [json.dumps({"question_id": "dev_0", "sql": "SELECT 'a\u2028b'"}, ensure_ascii=False),
         json.dumps({"question_id": "dev_1", "sql": "SELECT 1"})]).encode() + b"\n\xff\xfe\n")
    skipped = Counter()
    found = load_predictions(path, QUESTIONS[:3], skipped=skipped)
    assert [p.sql for p in found] == ["SELECT 'a\u2028b'", "SELECT 1"] and skipped == {"not UTF-8": 1}
    skipped = Counter()
    assert [row["sql"] for row in read_rows(path, skipped)] == ["SELECT 'a\u2028b'", "SELECT 1"]
    assert skipped == {"not UTF-8": 1}


def test_two_files_of_one_name_are_one_line_not_one_system(tmp_path: Path) -> None:
    """A file's name names its system: a/sys.jsonl and b/sys.jsonl were merged into one system."""
    from model.data.predictions import prediction_files
    from model.errors import UsageError

    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "sys.jsonl").write_text("")
    with pytest.raises(UsageError, match="one system name, 'sys', for two files"):
        prediction_files(tmp_path, [str(tmp_path / "a" / "*"), str(tmp_path / "b" / "*")])
    (tmp_path / "predictions").mkdir()
    for name in ("sys.txt", "sys.jsonl"):
        (tmp_path / "predictions" / name).write_text("")
    with pytest.raises(UsageError, match="one system name"):
        prediction_files(tmp_path, None)


def test_a_csv_quote_never_closed_is_one_row_left_out_not_the_rest_of_the_file(tmp_path: Path) -> None:
    """evaluate.py's and rat-exec's rows: a quote opened and never closed (or closed, then followed
    by more of its field) is one row left out and counted, naming its line; the rows after it are
    read, and a quoted field may still hold a line break."""
    from model.data.jsonl import read_rows

    path = tmp_path / "scores.csv"
    body = [f"0.{i},1,db{i}\r\n" for i in range(1, 600)]
    body[300] = '"unterminated,1,db1\r\n'
    body[400:401] = ["\r\n", '0.5,"1"x,db2\r\n']
    path.write_text("confidence,label,group\r\n" + "".join(body) + '0.9,0,"db\r\nsix"\r\n')
    skipped = Counter()
    rows = read_rows(path, skipped)
    assert len(rows) == 599 - 2 + 1 and skipped == {"bad CSV quoting (line 302 and others)": 2}
    assert rows[300] == {"confidence": "0.302", "label": "1", "group": "db302"}
    assert rows[-1] == {"confidence": "0.9", "label": "0", "group": "db\r\nsix"}


def test_a_jsonl_file_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    """A write that fails half way (a full disk, an interrupt) leaves the old file as it was and
    no partial or temporary file; one that ends replaces it, keeping its mode."""
    from model.data.jsonl import read_jsonl, write_jsonl

    path = tmp_path / "out.jsonl"
    write_jsonl(path, [{"old": 1}])
    path.chmod(0o640)

    def rows():
        yield {"new": 1}
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        write_jsonl(path, rows())
    assert read_jsonl(path) == [{"old": 1}] and [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]
    assert write_jsonl(path, [{"new": 1}, {"new": 2}]) == 2
    assert read_jsonl(path) == [{"new": 1}, {"new": 2}] and (path.stat().st_mode & 0o777) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["out.jsonl"]


def _rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_row_whose_question_is_another_ids_is_skipped_and_a_shift_is_named(tmp_path: Path, caplog) -> None:
    """A probe's own outputs numbered from 1 (dev_1 for dev.json's first question) trained on
    misaligned pairs (each output labelled against the next question's gold) although every row
    also carried its own question: the rows' question text is checked against their id's."""
    import logging

    questions = [Question(f"dev_{k}", "concert", f"Question number {k}?", f"SELECT {k}") for k in range(12)]
    shifted = [{"question_id": f"dev_{k + 1}", "db_id": "concert", "sql": f"SELECT {k}", "question": f"Question number {k}?"}
               for k in range(12)]
    skipped: Counter = Counter()
    with caplog.at_level(logging.WARNING, logger="model.data.predictions"):
        kept = load_predictions(_rows(tmp_path / "ours.jsonl", shifted), questions, skipped=skipped)
    assert kept == [] and skipped == {"question not its question_id's": 11, "unknown question_id": 1}
    said = caplog.text
    assert "11 of 12 rows carry a question that is not the one their question_id names" in said
    assert "the ids look shifted by +1 (the row named dev_1 asks dev_0's question)" in said
    assert "expected dev_0 .. dev_11" in said and "(e.g. 'dev_12')" in said


def test_a_rows_question_is_its_ids_but_for_case_whitespace_tokenising_or_birds_evidence(tmp_path: Path) -> None:
    questions = [Question("dev_0", "concert", 'Who sang "Hey"?', "SELECT 1"),
                 Question("dev_1", "schools", "How many schools?", "SELECT 2", evidence="school means x")]
    rows = [{"question_id": "dev_0", "sql": "SELECT 1", "question": "who  sang `` Hey '' ?"},  # Spider's tokens
            {"question_id": "dev_1", "sql": "SELECT 2", "question": "How many schools? school means x"},
            {"question_id": "dev_1", "sql": "SELECT 2", "question": "How many schools?\n"},
            {"question_id": "dev_0", "sql": "SELECT 1", "question": ""}]  # (empty: not compared)
    for k, row in enumerate(rows):
        skipped: Counter = Counter()
        assert len(load_predictions(_rows(tmp_path / f"ok{k}.jsonl", [row]), questions, skipped=skipped,
                                    allow_partial=True)) == 1 and not skipped, row


def test_ids_of_another_numbering_are_told_which_ids_the_split_has(tmp_path: Path, caplog) -> None:
    import logging

    rows = [{"question_id": f"q{k:04d}", "sql": "SELECT 1"} for k in range(3)]
    with caplog.at_level(logging.WARNING, logger="model.data.predictions"):
        assert load_predictions(_rows(tmp_path / "own.jsonl", rows), QUESTIONS) == []
    assert "3 row(s) name a question_id the split does not have (e.g. 'q0000'); expected dev_0 .. dev_2" in caplog.text
    assert "the split's questions in file order from 0" in caplog.text
