"""scripts/site_misses.py end to end on a small predictions file: the run's own top-1 with an
interval over databases, the per-system table, several systems at once, and the paired reading."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "site_misses.py"
# Project(column, Table): the table is the one error site when labels are [1, 0, 0]
BASE = {"node_arity": [0, 0, 2], "node_names": ["name", "singer", "Project"],
        "node_types": ["column", "table", "Project"], "node_labels": [1, 0, 0]}


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps({**BASE, **r}) + "\n" for r in rows))
    return path


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False)


def test_top1_interval_by_system_and_several_systems(tmp_path):
    hit, miss = [0.1, 0.9, 0.2], [0.9, 0.1, 0.2]  # site scores: the table first, or the column
    rows = [{"question_id": f"q{i}", "system": system, "db_id": db, "site_scores": scores}
            for i, (system, db, scores) in enumerate([("a", "d1", hit), ("a", "d2", hit), ("b", "d1", miss),
                                                      ("b", "d2", hit), ("c", "d1", miss)])]
    path = write(tmp_path / "test.jsonl", rows + [{"question_id": "right", "system": "a", "db_id": "d1",
                                                   "node_labels": [1, 1, 1], "site_scores": miss}])
    out = run(str(path)).stdout.splitlines()
    assert out[0].startswith("wrong queries with a site: 5; top-1 0.600 (95% interval over 2 databases ")
    assert out[0].endswith("; top-3 1.000, mrr 0.733")  # the two misses rank the table third
    table = {line.split(" | ")[0][2:]: line.split(" | ") for line in out if line.startswith("| ") and " | 100.0% | " in line}
    assert {s: t[3] for s, t in table.items()} == {"a": "1.000", "b": "0.500", "c": "0.000"}
    assert all(t[4].rstrip(" |") == "0.600" for t in table.values())  # every query has one site
    assert run(str(path), "--system", "a,b").stdout.startswith("wrong queries with a site: 4; top-1 0.750")
    other = write(tmp_path / "other.jsonl", [{**r, "site_scores": hit} for r in rows])
    assert "top-1 0.600 against 1.000 (-0.400;" in run(str(path), "--against", str(other)).stdout


def test_unusable_files_are_one_line(tmp_path):
    path = write(tmp_path / "test.jsonl", [{"question_id": "q", "system": "a", "db_id": "d"}])
    not_json, a_list = tmp_path / "not.jsonl", tmp_path / "list.jsonl"
    not_json.write_text("not json\n")
    a_list.write_text("[1, 2]\n")
    for args, message in (([str(path)], "no wrong query with an error site and site_scores"),
                          ([str(path), "--against", str(not_json)], "not.jsonl:1: not a JSON line"),
                          ([str(a_list), "--system", "a"], "list.jsonl: a row without question_id")):
        result = run(*args)
        assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_sample_of_one_site_kind(tmp_path):
    miss = [0.9, 0.1, 0.2]  # points at the column; the table is the site
    rows = [{"question_id": f"dev_{i}", "system": "a", "db_id": "d1", "sql": "SELECT name FROM singer",
             "site_scores": miss} for i in range(2)]
    path = write(tmp_path / "test.jsonl", rows)
    root = tmp_path / "spider"
    root.mkdir()
    (root / "dev.json").write_text(json.dumps([{"db_id": "d1", "question": f"Question {i}?",
                                                "query": "SELECT name FROM singers"} for i in range(2)]))
    out = run(str(path), "--sample", "5", "--site-kind", "table", "--data-root", str(root)).stdout
    assert "2 of 2 distinct one-site misses" in out and "site: table singer; pointed at: column name" in out
    done = run(str(path), "--sample", "5", "--site-kind", "Project", "--data-root", str(root))
    assert done.returncode == 2 and "--site-kind Project: no one-site miss has a site of that kind" in done.stderr
    assert "Traceback" not in done.stderr
