"""rat-score end to end as a user runs it: a prediction file -> JSONL rows and report.html; one
query -> a tree; every mistake one line and exit code 2; bad rows counted, never fatal."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from model.scoring.cli import REPORT_QUERIES
from tests.test_scorer import boosted_model, consensus_model  # noqa: F401  (the fixtures)

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def rat_score(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "model.scoring.cli", *args], check=False,
                          capture_output=True, text=True, env=ENV, timeout=600)


def test_a_prediction_file_gives_one_row_per_prediction_and_a_report(boosted_model, tmp_path):  # noqa: F811
    folder, objects = boosted_model
    root = objects["table"].root
    predictions = min((root / "predictions").glob("*.jsonl"))
    out = tmp_path / "scored.jsonl"
    done = rat_score("--model", str(folder), "--data-root", str(root), "--split", "dev",
                     "--predictions", str(predictions), "--out", str(out))
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    n_input = len(predictions.read_text().splitlines())
    assert len(rows) == n_input and f"scored {n_input} of {n_input} rows" in done.stderr
    for row in rows:
        assert {"question_id", "sql", "query_confidence", "look_here_first", "nodes"} <= set(row)
        assert 0 <= row["look_here_first"] < len(row["nodes"])
        assert all({"label", "confidence", "site_score"} <= set(n) for n in row["nodes"])
    report = (tmp_path / "report.html").read_text()
    shown = min(n_input, REPORT_QUERIES)  # the least confident first, at most REPORT_QUERIES
    assert report.count("class='example'") == shown and "Look here first" in report
    assert f"the {shown} least confident of {n_input} queries" in report
    least = min(rows, key=lambda r: r["query_confidence"])
    first = report.index("class='example'")
    assert str(least["question_id"]) in report[first:report.find("class='example'", first + 1)]


def test_several_files_are_scored_together_for_a_consensus_model(consensus_model, tmp_path):  # noqa: F811
    folder, objects = consensus_model
    root = objects["table"].root
    files = sorted((root / "predictions").glob("*.jsonl"))[:2]
    assert len(files) == 2

    def scored(*paths):
        out = tmp_path / "scored.jsonl"
        done = rat_score("--model", str(folder), "--data-root", str(root), "--no-reasons",
                         "--predictions", *map(str, paths), "--out", str(out))
        assert done.returncode == 0, done.stderr
        return {(r["system"], r["question_id"]): r for r in map(json.loads, out.read_text().splitlines())}

    together = scored(*files)
    alone = {**scored(files[0]), **scored(files[1])}
    assert together.keys() == alone.keys() and len({system for system, _ in together}) == 2
    # read beside the other system's answer, some node's confidence changes
    assert any([n["confidence"] for n in together[k]["nodes"]] != [n["confidence"] for n in alone[k]["nodes"]]
               for k in together)


def test_bad_rows_are_counted_and_the_run_goes_on(boosted_model, tmp_path):  # noqa: F811
    folder, objects = boosted_model
    root = objects["table"].root
    rows = tmp_path / "rows.jsonl"
    db = objects["table"].examples[0].db_id
    rows.write_text("\n".join([json.dumps({"db_id": db, "question": "q", "sql": "SELECT upper('a')"}),
                               "{not json", json.dumps({"db_id": db, "sql": "SELECT * FROM ("}),
                               json.dumps({"db_id": "no_such_db", "sql": "SELECT 1"}),
                               json.dumps({"db_id": db, "question": "q"}),
                               # hostile fields: never a traceback, each a counted row
                               json.dumps({"db_id": ["x"], "sql": "SELECT 1"}),
                               json.dumps({"db_id": 5, "sql": "SELECT 1"}),
                               json.dumps({"db_id": "d" * 300, "sql": "SELECT 1"}),
                               json.dumps({"db_id": db, "question": "\ud800", "sql": "SELECT 1"}),
                               json.dumps({"db_id": db, "question_id": [1], "sql": "SELECT 1"}),
                               # each row's cost is bounded: a long question, long SQL, a large tree
                               json.dumps({"db_id": db, "question": "q " * 2001, "sql": "SELECT 1"}),
                               json.dumps({"db_id": db, "sql": "SELECT 1 WHERE " + "1 = 1 AND " * 1000 + "1"}),
                               json.dumps({"db_id": db, "sql": "SELECT 1 WHERE " + " OR ".join(["a = 1"] * 200)})]))
    done = rat_score("--model", str(folder), "--data-root", str(root), "--predictions", str(rows),
                     "--out", str(tmp_path / "o.jsonl"))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 1
    *_, summary, unfamiliar = done.stderr.strip().splitlines()
    assert unfamiliar == ("rat-score: 1 of 1 queries have operators the model does not know (Upper 1): "
                          "their confidences there say little")
    assert "scored 1 of 13 rows" in summary and "not scored: 12" in summary
    assert "malformed db_id 3" in summary and "malformed question 2" in summary
    assert "characters; at most 10000 are scored 1" in summary
    assert "the query has N nodes; at most 500 are scored 1" in summary
    assert "malformed question_id 1" in summary
    assert "class='example'" in (tmp_path / "report.html").read_text()


def test_a_binary_schema_and_a_long_db_id_are_one_line(tmp_path):
    binary = tmp_path / "tables.json"
    binary.write_bytes(bytes(range(256)) * 4)
    done = rat_score("--schema", str(binary), "--sql", "SELECT 1", "--db-id", "x")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"{binary}: not UTF-8 text" in done.stderr
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    done = rat_score("--sql", "SELECT 1", "--db-id", "d" * 300, "--schema", str(empty))
    assert done.returncode == 2 and "--db-id: longer than 128 characters" in done.stderr, done.stderr


def test_one_query_prints_the_tree_and_where_to_look(boosted_model):  # noqa: F811
    folder, objects = boosted_model
    e = objects["table"].examples[0]
    done = rat_score("--model", str(folder), "--data-root", str(objects["table"].root), "--db-id", e.db_id,
                     "--question", e.question, "--sql", e.sql)
    assert done.returncode == 0, done.stderr
    assert "look here first:" in done.stdout and "query confidence:" in done.stdout
    as_json = rat_score("--model", str(folder), "--schema", str(objects["table"].root / "tables.json"),
                        "--db-id", e.db_id, "--sql", e.sql, "--json")
    assert json.loads(as_json.stdout)["nodes"]


def test_check_prints_the_verdict_and_exits_1_unless_every_query_runs(tmp_path):
    """--check: one query's verdict and feedback (exit 0 for 'run', 1 otherwise); a file's verdict
    rows, their count by action, and exit 1 when any is not 'run' (a row not scored included)."""
    from model.synth.demo import demo_root

    root = str(demo_root())
    typo = "SELECT name FROM suppliers WHERE country = 'Germani'"
    done = rat_score("--data-root", root, "--db-id", "supply_chain", "--question", "Suppliers in Germany?",
                     "--sql", typo, "--check")
    assert done.returncode == 1 and done.stdout.split(" ")[0] in ("review", "regenerate"), done.stderr
    assert "- the literal 'Germani' is not a value of suppliers.country; closest: 'Germany'" in done.stdout
    fine = rat_score("--data-root", root, "--db-id", "supply_chain", "--question", "How many suppliers are there?",
                     "--sql", "SELECT count(*) FROM suppliers", "--check", "--json")
    verdict = json.loads(fine.stdout)
    assert fine.returncode == (0 if verdict["action"] == "run" else 1) and verdict["policy"]
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"db_id": "supply_chain", "question": q, "sql": sql}) + "\n" for q, sql in [
        ("Suppliers in Germany?", typo), ("How many suppliers are there?", "SELECT count(*) FROM suppliers")]))
    done = rat_score("--data-root", root, "--predictions", str(rows), "--check", "--out", str(tmp_path / "v.jsonl"))
    written = [json.loads(line) for line in (tmp_path / "v.jsonl").read_text().splitlines()]
    assert done.returncode == 1 and [v["sql"] for v in written] == [typo, "SELECT count(*) FROM suppliers"]
    counts = {a: sum(v["action"] == a for v in written) for a in ("run", "review", "regenerate")}
    assert done.stderr.strip().splitlines()[-1] == "rat-score: verdicts: " + ", ".join(f"{a} {n}" for a, n in counts.items())


@pytest.mark.parametrize("args, message", [
    (["--sql", "SELECT 1", "--model", "/no/such/model"], "--model /no/such/model"),
    (["--predictions", "/no/such.jsonl"], "--predictions /no/such.jsonl: no such file"),
    (["--sql", "SELEC x FRM"], "--sql: cannot parse"),
    (["--sql", "SELECT 1", "--data-root", "/no/such/root"], "--data-root /no/such/root: no such directory"),
    ([], "give --sql (one query) or --predictions (a file)"),
    (["--sql", " "], "--sql: empty"),
    (["--sql", "SELECT 1", "--no-database", "--database", "shop.sqlite"], "--no-database and --database: give one"),
    (["--sql", "SELECT 1", "--predictions", "p.jsonl"], "not both"),
    (["--predictions", __file__, "--check", "--label-shift"], "--check and --label-shift"),
    (["--sql", "SELEC " + "x, " * 3000 + "x FRM t"], "--sql: cannot parse"),
    (["--sql", "SELECT " + "x, " * 5000 + "x FROM t"], "--sql: 15015 characters; at most 10000 are scored"),
    (["--sql", "SELECT 1", "--question", "x" * 4001], "--question: 4001 characters; at most 4000"),  # (was --sql)
    (["--predictions", __file__, "--out", str(Path(__file__).parent)], "a folder, not a file"),
    (["--predictions", __file__, "--out", "o.jsonl", "--report", f"{__file__}/report.html"], "cannot be written"),
    (["--predictions", str(Path(__file__).parent)], "tests: a folder, not a file"),
    (["--database=", "--sql", "SELECT 1"], "--database: empty (give a database URL or file)"),
    (["--database", "x" * 5000, "--sql", "SELECT 1"], "not a path that can be read (OSError)"),
])
def test_mistakes_are_one_line_and_exit_2(args, message):
    done = rat_score(*args)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr, done.stderr
    assert len(done.stderr) < 500  # the SQL of an error is cut, not echoed whole


def test_a_positional_file_without_questions_is_one_line(tmp_path):
    preds = tmp_path / "p.txt"
    preds.write_text("SELECT 1\n")
    done = rat_score("--predictions", str(preds))
    assert done.returncode == 2 and "needs --data-root" in done.stderr


def test_console_scripts_are_installed_and_print_their_help():
    bin_dir = Path(sys.executable).parent
    for name in ("rat-score", "rat-serve", "rat-adapt", "rat-calibrate", "rat-exec", "rat-mcp"):
        done = subprocess.run([str(bin_dir / name), "--help"], check=False, capture_output=True, text=True,
                              env=ENV, timeout=120)
        assert done.returncode == 0 and done.stdout.startswith("usage: ") and not done.stderr, (name, done.stderr)


def test_outputs_never_overwrite_an_input_or_replace_a_device(tmp_path):
    """`--out` or `--report` naming an input (or each other) is refused before any work; a
    report into a pipe is written into it (the pipe stays a pipe), `--out /dev/stdout` writes no
    report beside it, and a device that refuses writes is one line."""
    import stat
    import threading

    from model.synth.demo import demo_root

    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"db_id": "supply_chain", "question": "How many suppliers are there?",
                                "sql": "SELECT count(*) FROM suppliers"}) + "\n")
    before = rows.read_text()
    root = str(demo_root())
    for args, message in [(["--out", str(rows)], f"--out {rows}: the same file as --predictions"),
                          (["--out", str(tmp_path / "o.jsonl"), "--report", str(rows)], "--report"),
                          (["--out", str(tmp_path / "o.jsonl"), "--report", str(tmp_path / "o.jsonl")],
                           "the same file as --out")]:
        done = rat_score("--data-root", root, "--predictions", str(rows), *args)
        assert done.returncode == 2 and message in done.stderr and len(done.stderr.strip().splitlines()) == 1, \
            done.stderr
    assert rows.read_text() == before
    pipe = tmp_path / "report.pipe"
    os.mkfifo(pipe)
    received = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_text()))
    reader.start()
    done = rat_score("--data-root", root, "--predictions", str(rows), "--out", "/dev/stdout", "--report", str(pipe))
    reader.join(60)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISFIFO(pipe.stat().st_mode) and "<html" in received[0].lower()
    assert json.loads(done.stdout)["sql"] == "SELECT count(*) FROM suppliers"
    beside = Path("/dev/report.html").exists()
    done = rat_score("--data-root", root, "--predictions", str(rows), "--out", "/dev/stdout")
    assert done.returncode == 0 and Path("/dev/report.html").exists() == beside
    full = rat_score("--data-root", root, "--predictions", str(rows), "--out", "/dev/full")
    assert full.returncode == 2 and full.stderr.strip().splitlines()[-1] == \
        "rat-score: error: --out /dev/full: cannot be written (No space left on device)", full.stderr


def test_rows_a_benchmark_cannot_place_are_counted(tmp_path):
    """With --data-root, a row naming a question_id the benchmark lacks (and no question of its
    own), or a db_id other than its question's, is counted, not scored against the wrong
    question; a byte-order mark is no part of the first row; a line that is no JSON object and
    SQL that is no string are named as such."""
    from model.synth.demo import demo_root

    root = demo_root()
    qid = json.loads((root / "predictions" / "demo_weak.jsonl").read_text().splitlines()[0])["question_id"]
    rows = tmp_path / "rows.jsonl"
    rows.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(r) + "\n" for r in [
        {"question_id": qid, "sql": "SELECT count(*) FROM suppliers"},
        {"question_id": "dev_99999", "sql": "SELECT 1"},
        {"question_id": "dev_99999", "question": "How many suppliers?", "db_id": "supply_chain",
         "sql": "SELECT count(*) FROM suppliers"},
        {"question_id": qid, "db_id": "no_such_db", "sql": "SELECT 1"},
        [1, 2], {"sql": 5}]).encode())
    done = rat_score("--data-root", str(root), "--predictions", str(rows), "--no-reasons")
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["question_id"] for line in done.stdout.splitlines()] == [qid, "dev_99999"]
    summary = done.stderr.strip().splitlines()[-1]
    for reason in ("unknown question_id 1", "db_id not its question's 1", "not an object 1",
                   "malformed sql 1"):
        assert reason in summary, summary


def test_control_characters_of_the_query_do_not_reach_the_terminal():
    from model.synth.demo import demo_root

    sql = "SELECT name FROM suppliers WHERE country = '\x1b[2J\x1b]0;pwned\x07'"
    for extra in ([], ["--check"]):
        done = rat_score("--data-root", str(demo_root()), "--db-id", "supply_chain", "--sql", sql, *extra)
        assert done.returncode in (0, 1) and "pwned" in done.stdout, done.stderr
        assert "\x1b" not in done.stdout and "\x07" not in done.stdout and "\ufffd[2J" in done.stdout


def test_an_error_quoting_a_path_or_query_shows_no_escape_sequence(tmp_path):
    """Every command tells a mistake through model.errors.say_error: the message is printable."""
    for args in (["--schema", str(tmp_path / "x\x1b]0;pwned\x07.json"), "--db-id", "a", "--sql", "SELECT 1"],
                 ["--schema", str(tmp_path / "x.json"), "--db-id", "a\u202e", "--sql", "SELECT 1"]):
        done = rat_score(*args)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "\x1b" not in done.stderr and "\x07" not in done.stderr and "\u202e" not in done.stderr
        assert done.stderr.startswith("rat-score: error: "), done.stderr


def test_a_schema_nested_too_deeply_and_a_file_that_is_no_database_are_one_line(tmp_path):
    deep = tmp_path / "deep.sql"
    deep.write_text("CREATE TABLE singer (id INT, name TEXT CHECK (" + "(" * 800 + "1" + ")" * 800 + "));")
    done = rat_score("--schema", str(deep), "--sql", "SELECT name FROM singer")
    assert done.returncode == 2 and done.stderr.strip() == f"rat-score: error: {deep}: cannot read schemas " \
        "(nested too deeply)", done.stderr
    garbage = tmp_path / "shop.sqlite"
    garbage.write_bytes(bytes(range(256)) * 16)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"question": "q", "sql": "SELECT 1"}) + "\n")
    done = rat_score("--database", str(garbage), "--predictions", str(rows))  # (not only with --sql)
    assert done.returncode == 2 and done.stderr.strip() == f"rat-score: error: {garbage}: cannot be read as a " \
        "SQLite database (DatabaseError: file is not a database)", done.stderr


def test_two_files_of_one_system_name_and_an_empty_split_are_one_line(tmp_path):
    from model.synth.demo import demo_root

    for folder, sql in (("a", "SELECT 1"), ("b", "SELECT 2")):  # (the same outputs twice: refused as such)
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "sys.jsonl").write_text(json.dumps({"question": "How many suppliers?",
                                                                 "db_id": "supply_chain", "sql": sql}) + "\n")
    done = rat_score("--data-root", str(demo_root()), "--predictions", str(tmp_path / "a" / "sys.jsonl"),
                     str(tmp_path / "b" / "sys.jsonl"))
    assert done.returncode == 2 and "both hold rows of system 'sys'" in done.stderr, done.stderr
    empty = tmp_path / "empty"
    shutil.copytree(demo_root(), empty)
    (empty / "dev.json").write_text("[]")
    done = rat_score("--data-root", str(empty), "--predictions", str(tmp_path / "a" / "sys.jsonl"))
    assert done.returncode == 2 and done.stderr.strip().endswith("--split dev: no questions"), done.stderr


def test_rows_whose_database_file_is_missing_are_said_to_be_scored_without_it(tmp_path):
    from model.synth.demo import demo_root

    root = tmp_path / "root"
    shutil.copytree(demo_root(), root)
    (root / "database" / "supply_chain" / "supply_chain.sqlite").unlink()
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"question": "How many suppliers?", "db_id": "supply_chain",
                                        "sql": "SELECT count(*) FROM suppliers"}) + "\n" for _ in range(3)))
    done = rat_score("--data-root", str(root), "--predictions", str(rows), "--no-reasons")
    assert done.returncode == 0, done.stderr
    assert "3 rows scored without their database (no file under --data-root for db_id supply_chain (3))" \
        in done.stderr, done.stderr


def _unread_pipe() -> int:
    """The writing end of a pipe nobody reads (``| head -1`` gone): a write there fails (EPIPE)."""
    read, write = os.pipe()
    os.close(read)
    return write


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path):
    """Standard output closed (one query, a file to standard output): exit 141 and no traceback,
    the report written first; standard error closed: the work goes on and --out is written."""
    from model.synth.demo import demo_root

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"question": "How many suppliers?", "db_id": "supply_chain",
                                        "sql": "SELECT count(*) FROM suppliers"}) + "\n" for _ in range(3)))
    command = [sys.executable, "-m", "model.scoring.cli", "--data-root", str(demo_root()), "--no-reasons"]
    for args in (["--db-id", "supply_chain", "--sql", "SELECT count(*) FROM suppliers"],
                 ["--predictions", str(rows), "--report", str(tmp_path / "report.html")]):
        unread = _unread_pipe()
        done = subprocess.run([*command, *args], stdout=unread, stderr=subprocess.PIPE, text=True, env=ENV,
                              timeout=600, check=False)
        os.close(unread)
        assert done.returncode == 141 and "Error" not in done.stderr, done.stderr  # (no traceback)
    assert (tmp_path / "report.html").is_file()
    unread = _unread_pipe()
    done = subprocess.run([*command, "--predictions", str(rows), "--out", str(tmp_path / "scored.jsonl")],
                          stdout=subprocess.PIPE, stderr=unread, text=True, env=ENV, timeout=600, check=False)
    os.close(unread)
    assert done.returncode == 0 and len((tmp_path / "scored.jsonl").read_text().splitlines()) == 3


def test_a_reader_that_stops_at_the_first_rows_leaves_a_report_of_every_row_scored(tmp_path):
    """A file's rows go to standard output as each chunk is scored: a reader gone at the first
    rows (the write fails) left a report of no query, though the chunk had been scored."""
    from model.synth.demo import demo_root

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"question": "How many suppliers?", "db_id": "supply_chain",
                                        "sql": f"SELECT count(*) FROM suppliers WHERE supplier_id > {i}"}) + "\n"
                            for i in range(12)))  # (more than the 8 KB standard output holds before a write)
    unread = _unread_pipe()
    done = subprocess.run([sys.executable, "-m", "model.scoring.cli", "--data-root", str(demo_root()),
                           "--predictions", str(rows), "--report", str(tmp_path / "report.html")],
                          stdout=unread, stderr=subprocess.PIPE, text=True, env=ENV, timeout=600, check=False)
    os.close(unread)
    assert done.returncode == 141 and "Error" not in done.stderr, done.stderr
    assert "the 12 least confident of 12 queries" in (tmp_path / "report.html").read_text()


_INTERRUPTED = """
import multiprocessing, sys, time
from model.errors import leave_interrupts_to_the_parent, quiet_closed_pipes

def started(ready):
    leave_interrupts_to_the_parent()
    ready.wait()  # (the interrupt comes once both workers have started, as a user's would)

@quiet_closed_pipes()
def main():
    context = multiprocessing.get_context("fork")
    ready = context.Barrier(3)
    with context.Pool(2, initializer=started, initargs=(ready,)) as pool:
        pending = pool.map_async(time.sleep, [60, 60])
        ready.wait(timeout=60)
        print(*[p.pid for p in multiprocessing.active_children()], flush=True)
        pending.wait()

main()
"""


@pytest.mark.parametrize("signal_name, group, status", [("SIGINT", True, 130), ("SIGTERM", False, 143)])
def test_an_interrupted_command_ends_its_workers_with_one_line(signal_name, group, status):
    """Ctrl-C (SIGINT to the process group) or SIGTERM to the command: its worker processes end
    with it, exit 130 / 143, no traceback (Ctrl-C printed one from each process; SIGTERM left the
    workers running)."""
    import signal

    command = subprocess.Popen([sys.executable, "-c", _INTERRUPTED], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=ENV, start_new_session=True)
    workers = [int(pid) for pid in command.stdout.readline().split()]
    assert len(workers) == 2
    sent = getattr(signal, signal_name)
    os.killpg(command.pid, sent) if group else os.kill(command.pid, sent)
    _, err = command.communicate(timeout=60)
    assert command.returncode == status and "Traceback" not in err, err
    assert ("interrupted" in err) == (signal_name == "SIGINT")
    for pid in workers:  # (not this process's children: gone, or a zombie until init reaps it)
        status = Path(f"/proc/{pid}/status")
        assert not status.exists() or "zombie" in status.read_text().lower()


def test_the_rows_and_the_page_say_what_the_query_confidence_means(tmp_path):
    """Each row names its model's query_label; report.html says what "right" means and, without
    gold, shows no mark for a node labelled wrong."""
    from model.synth.demo import demo_root

    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"question": "How many suppliers?", "db_id": "supply_chain",
                                "sql": "SELECT count(*) FROM suppliers"}) + "\n")
    done = rat_score("--data-root", str(demo_root()), "--predictions", str(rows), "--no-reasons",
                     "--out", str(tmp_path / "scored.jsonl"))
    assert done.returncode == 0, done.stderr
    (row,) = map(json.loads, (tmp_path / "scored.jsonl").read_text().splitlines())
    assert row["query_label"] == "execution"  # the shipped model's
    page = (tmp_path / "report.html").read_text()
    assert "Query confidence: P(right by execution match" in page and "wrong against gold" not in page


@pytest.mark.parametrize("sql, says", [
    ("CREATE TABLE pwn (a int)", "refused: only a query that reads is run (found CREATE)"),
    ("SET ROLE postgres", "refused: only a query that reads is run (found SET)"),
    ("SELECT 1 AS a INTO pwn3", "refused: SELECT .. INTO writes a table"),
])
def test_a_statement_that_reads_nothing_is_refused_in_one_line_against_a_database(sql, says, capsys):
    """They were 'no table pwn' (and SET ROLE printed sqlglot's note on a line of its own first)."""
    from model.scoring.cli import main
    from model.synth.demo import demo_root

    database = demo_root() / "database" / "supply_chain" / "supply_chain.sqlite"
    assert main(["--database", str(database), "--sql", sql]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--sql: {says}" in err, err


def test_sql_that_does_not_parse_is_said_not_to_parse_against_a_database_and_a_write_is_refused(tmp_path, capsys):
    """`SELEC name FROM suppliers` with --database was counted (and --sql refused) as 'refused:
    only a query that reads is run (found SELEC)', as if the guard had stopped a write: it is
    SQL that does not parse, said as without a database. A write is still refused, never run."""
    import hashlib

    from model.data.databases import open_database
    from model.scoring import RowError, Scorer
    from model.scoring.cli import main

    database = Path(_demo_database("supply_chain"))
    before = hashlib.sha256(database.read_bytes()).hexdigest()
    typo, write = "SELEC name FROM suppliers", "DELETE FROM suppliers"
    with open_database(database) as db:
        results = Scorer.pretrained().score_many([{"sql": sql, "database": db} for sql in (typo, write)],
                                                 progress=False)
    assert all(isinstance(r, RowError) for r in results) and [(r.kind, r.reason) for r in results] == [
        ("sql", "cannot parse"), ("value", "refused: only a query that reads is run")], results
    assert main(["--database", str(database), "--sql", typo]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "rat-score: error: --sql: cannot parse (" in err and "refused" not in err, err
    rows = _write_rows(tmp_path / "rows.jsonl", [{"question": "Supplier names?", "sql": sql}
                                                 for sql in (typo, write, "SELECT name FROM suppliers")])
    assert main(["--database", str(database), "--predictions", str(rows), "--no-reasons",
                 "--out", str(tmp_path / "scored.jsonl")]) == 0
    closing = [line for line in capsys.readouterr().err.splitlines() if "not scored" in line]
    assert len(closing) == 1 and "scored 1 of 3 rows" in closing[0], closing
    assert "cannot parse 1" in closing[0] and "refused: only a query that reads is run 1" in closing[0], closing
    assert hashlib.sha256(database.read_bytes()).hexdigest() == before


def test_a_model_trained_with_every_querys_database_says_so_when_it_scores_without_one(boosted_model, tmp_path,  # noqa: F811
                                                                                       capsys):
    """A model of the default model.database=with (every training query had its database, and no
    calibrators were fitted without) scored a file, or one query, without a database silently,
    its database features missing as in no query it learnt from: one line says so. The shipped
    model (model.database=dropout: calibrated both ways) and the same model with the databases
    say nothing."""
    from model.scoring.cli import main

    folder, objects = boosted_model
    root = objects["table"].root
    predictions = min((root / "predictions").glob("*.jsonl"))
    n = len(predictions.read_text().splitlines())
    common = ["--data-root", str(root), "--no-reasons", "--predictions", str(predictions),
              "--out", str(tmp_path / "scored.jsonl")]
    for model, flags, said in ((folder, ["--no-database"], True), (folder, [], False),
                               ("pretrained", ["--no-database"], False)):
        assert main(["--model", str(model), *common, *flags]) == 0
        notes = [line for line in capsys.readouterr().err.splitlines() if "model.database=with" in line]
        assert len(notes) == said, (model, flags, notes)
        assert all(line.startswith(f"rat-score: {n} of {n} queries scored without their database") for line in notes)
    query = objects["table"].examples[0]
    for model, said in ((folder, True), ("pretrained", False)):
        assert main(["--model", str(model), "--data-root", str(root), "--no-database", "--db-id", query.db_id,
                     "--question", query.question, "--sql", query.sql]) == 0
        notes = [line for line in capsys.readouterr().err.splitlines() if "model.database=with" in line]
        assert len(notes) == said and all(line.startswith("rat-score: scored without its database") for line in notes)


def test_a_database_value_without_a_scheme_is_named_without_its_password(capsys):
    from model.scoring.cli import main

    assert main(["--database", "scorer:secretpw@localhost/shop", "--sql", "SELECT 1"]) == 2
    err = capsys.readouterr().err
    assert "secretpw" not in err and "scorer:***@localhost/shop: no such file" in err, err


def test_a_table_another_schema_holds_is_scored_not_said_to_be_missing(capsys):
    """`archive.old_orders` against a database whose schema lacks old_orders was 'no table
    old_orders in shop', exit 2, though the archive schema (another MySQL database) holds it:
    the schema is read from the URL's database alone. A name without a qualifier is still told."""
    from model.scoring.cli import main
    from model.synth.demo import demo_root

    database = demo_root() / "database" / "supply_chain" / "supply_chain.sqlite"
    assert main(["--database", str(database), "--sql", "SELECT * FROM archive.old_orders"]) == 0
    out, err = capsys.readouterr()
    assert "table old_orders is not in the schema" in out and "no table" not in err, err
    assert main(["--database", str(database), "--sql", "SELECT * FROM old_orders"]) == 2
    assert f"--sql: no table 'old_orders' in {database}" in capsys.readouterr().err


def test_choose_counts_a_question_of_more_candidates_than_choose_takes_as_not_scored(tmp_path):
    """A group was scored whatever its size: a consensus model compares each candidate with every
    other, so one question of 100,000 rows held the run. A group over MAX_CANDIDATES is counted as
    not scored and the file goes on."""
    from model.scoring.choice import MAX_CANDIDATES
    from model.synth.demo import demo_root

    big = [{"question_id": "big", "db_id": "supply_chain", "question": "Suppliers?", "sql": f"SELECT {i} FROM suppliers"}
           for i in range(MAX_CANDIDATES + 1)]
    fine = [{"db_id": "supply_chain", "question": "How many suppliers?", "sql": sql}
            for sql in ("SELECT count(*) FROM suppliers", "SELECT count(name) FROM suppliers")]
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in [*big, *fine]))
    done = rat_score("--schema", str(demo_root() / "tables.json"), "--predictions", str(samples), "--choose",
                     "--no-reasons", "--out", str(tmp_path / "chosen.jsonl"))
    assert done.returncode == 0, done.stderr
    (chosen,) = map(json.loads, (tmp_path / "chosen.jsonl").read_text().splitlines())
    assert chosen["question"] == "How many suppliers?" and chosen["candidates"] == 2
    assert "scored 2 of 67 rows" in done.stderr
    assert f"not scored: 65 (over {MAX_CANDIDATES} candidates for one question 65)" in done.stderr, done.stderr


def test_a_file_is_scored_a_chunk_at_a_time_with_the_rows_of_one_question_together(consensus_model, tmp_path,  # noqa: F811
                                                                                    monkeypatch):
    """A file's results were held whole (about 20 KB a row) until the end: it is scored
    CHUNK_ROWS rows at a time, each chunk written before the next is scored, never splitting the
    answers to one question that a consensus model reads together; the rows and the report are
    those of one pass over the whole file (the rows question by question)."""
    from model.scoring import cli
    from model.scoring.scorer import Scorer

    folder, objects = consensus_model
    root = objects["table"].root
    files = [str(p) for p in sorted((root / "predictions").glob("*.jsonl"))[:2]]

    def scored(name: str) -> tuple[list[dict], str]:
        out = tmp_path / name / "scored.jsonl"
        assert cli.main(["--model", str(folder), "--data-root", str(root), "--no-reasons",
                         "--predictions", *files, "--out", str(out)]) == 0
        return [json.loads(line) for line in out.read_text().splitlines()], (out.parent / "report.html").read_text()

    whole = scored("whole")
    calls = []
    score_many = Scorer.score_many
    monkeypatch.setattr(Scorer, "score_many", lambda self, rows, **kw: calls.append(list(rows)) or score_many(self, rows, **kw))
    monkeypatch.setattr(cli, "CHUNK_ROWS", 3)
    chunked = scored("chunked")
    def by_answer(rows: list[dict]) -> dict:
        return {(r["system"], r["question_id"]): r for r in rows}

    assert by_answer(chunked[0]) == by_answer(whole[0]) and chunked[1] == whole[1] and len(calls) > 2
    for qid in {r["question_id"] for r in chunked[0]}:  # each question's answers in one call
        assert sum(any(row.get("question_id") == qid for row in call) for call in calls) == 1


def test_rows_without_a_db_id_take_the_one_schema_and_a_refused_query_is_counted_as_refused(tmp_path, capsys):
    """docs/scoring.md's `rat-score --database .. --schema shop.sql --predictions rows.jsonl`: rows
    without a db_id were each "no db_id", none scored (--db-id was read for --sql alone). A query
    the database guard refuses (a session lock) was scored as one that fails to run there, where
    --sql refuses it: now not scored, counted under its reason."""
    import sqlite3

    from model.scoring.cli import main
    from model.synth.demo import demo_root

    database = demo_root() / "database" / "supply_chain" / "supply_chain.sqlite"
    with sqlite3.connect(database) as conn:
        ddl = ";\n".join(sql for (sql,) in conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table'"))
    conn.close()
    schema = tmp_path / "shop.sql"
    schema.write_text(ddl + ";\n")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"question": "How many suppliers?", "sql": sql}) + "\n" for sql in
                            ("SELECT count(*) FROM suppliers", "SELECT get_lock('x', 1) FROM suppliers")))
    out = tmp_path / "scored.jsonl"
    assert main(["--database", str(database), "--schema", str(schema), "--predictions", str(rows),
                 "--out", str(out), "--no-reasons"]) == 0
    (row,) = map(json.loads, out.read_text().splitlines())
    assert row["db_id"] == "shop", row
    assert "refused: get_lock() has an effect that outlives the query 1" in capsys.readouterr().err


def test_rows_of_a_system_the_model_was_fitted_on_say_so(tmp_path):
    """A row whose system is one of the model's trained_on.systems carries fitted_on_system, the
    benchmark those outputs were on; a row of another system carries none."""
    from model.synth.demo import demo_root

    shipped = json.loads((Path(__file__).parents[1] / "model/scoring/pretrained/spider/model.json").read_text())
    assert "gpt4_zero_shot" in shipped["trained_on"]["systems"]
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"question": "How many suppliers?", "db_id": "supply_chain",
                                        "sql": "SELECT count(*) FROM suppliers", "system": system}) + "\n"
                            for system in ("gpt4_zero_shot", "mine")))
    done = rat_score("--data-root", str(demo_root()), "--predictions", str(rows), "--no-reasons",
                     "--out", str(tmp_path / "scored.jsonl"))
    assert done.returncode == 0, done.stderr
    seen, new = map(json.loads, (tmp_path / "scored.jsonl").read_text().splitlines())
    assert seen["system"] == "gpt4_zero_shot" and seen["fitted_on_system"] == shipped["trained_on"]["data_root"]
    assert new["system"] == "mine" and "fitted_on_system" not in new


def _demo_rows(db_id: str, n: int, system: str | None = None) -> list[dict]:
    """``n`` of the demo's dev questions on ``db_id`` as JSONL rows, each answered by its gold SQL."""
    from model.synth.demo import demo_root

    dev = json.loads((demo_root() / "dev.json").read_text())
    rows = [{"question": q["question"], "db_id": q["db_id"], "sql": q["query"]} for q in dev if q["db_id"] == db_id]
    return [{**row, **({"system": system} if system else {})} for row in rows[:n]]


def _write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _demo_database(db_id: str) -> str:
    from model.synth.demo import demo_root

    return str(demo_root() / "database" / db_id / f"{db_id}.sqlite")


def test_a_prediction_file_given_twice_is_refused_in_one_line(tmp_path, capsys):
    """One file given twice to --predictions (or its copy under another name) was scored twice
    and, with --label-shift, moved twice in place (0.753, then 0.485): refused, as rat-adapt
    refuses it, before anything is scored or written."""
    from model.scoring.cli import main

    rows = _write_rows(tmp_path / "mine.jsonl", _demo_rows("library", 10))
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(rows.read_bytes())
    out = tmp_path / "scored.jsonl"
    for files in ([rows, rows], [rows, copy]):
        assert main(["--database", _demo_database("library"), "--predictions", *map(str, files),
                     "--out", str(out), "--no-reasons", "--label-shift"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--predictions {rows} and {files[1]}: the same outputs twice" in err, err
    assert not out.exists()


def test_label_shift_of_one_query_is_refused_in_one_line(capsys):
    """--sql with --label-shift was accepted and did nothing (a single query is never shifted):
    refused, as --check with --label-shift is."""
    from model.scoring.cli import main

    assert main(["--database", _demo_database("library"), "--sql", "SELECT count(*) FROM books",
                 "--label-shift"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--sql and --label-shift: a rate is estimated on a file of queries" in err, err


def test_label_shift_of_a_file_under_100_queries_says_nothing_moved(tmp_path, capsys):
    """A file of fewer than model.label_shift.MIN_QUERIES scored queries is not shifted: it was
    silent, now a line says why."""
    from model.scoring.cli import main

    rows = _write_rows(tmp_path / "mine.jsonl", _demo_rows("library", 20))
    out = tmp_path / "scored.jsonl"
    assert main(["--database", _demo_database("library"), "--predictions", str(rows), "--out", str(out),
                 "--no-reasons", "--label-shift"]) == 0
    err = capsys.readouterr().err
    assert ("rat-score: mine.jsonl: label shift: 20 queries scored, fewer than 100: no rate estimated, confidences "
            "not moved") in err, err
    assert all("label_shift" not in json.loads(line) for line in out.read_text().splitlines())


def test_label_shift_with_a_model_that_records_no_rate_is_refused_in_one_line(tmp_path, capsys):
    """A model whose card records no rate it was calibrated at (an adapted model, or this one)
    moved nothing, silently, after scoring the whole file: one line, exit 2, before it."""
    import shutil

    from model.scoring.cli import main

    rows = _write_rows(tmp_path / "mine.jsonl", _demo_rows("library", 20))
    norate = tmp_path / "norate"  # the shipped model, its card without the share of right training outputs
    shutil.copytree(Path(__file__).parents[1] / "model/scoring/pretrained/spider", norate)
    card = json.loads((norate / "model.json").read_text())
    del card["trained_on"]["correct_queries"]
    (norate / "model.json").write_text(json.dumps(card))
    assert main(["--model", str(norate), "--database", _demo_database("library"), "--predictions", str(rows),
                 "--out", str(tmp_path / "other.jsonl"), "--label-shift"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--label-shift: the model (" in err, err
    assert "records no rate of right queries it was calibrated at" in err and "adapted" not in err, err


def test_rows_read_against_a_database_without_their_tables_are_counted(tmp_path, capsys):
    """Rows of one database scored against another (--database of the wrong file) were scored
    silently, every one 'not in the schema' and near 0: the closing lines count them and name
    the option."""
    from model.scoring.cli import main

    rows = _write_rows(tmp_path / "mine.jsonl", _demo_rows("library", 12))
    out = tmp_path / "scored.jsonl"
    clinic = _demo_database("clinic")
    assert main(["--database", clinic, "--predictions", str(rows), "--out", str(out), "--no-reasons"]) == 0
    err = capsys.readouterr().err
    assert f"rat-score: 12 of 12 queries read only tables --database {clinic} lacks (the schema of these " \
           "queries?)" in err, err
    assert main(["--database", _demo_database("library"), "--predictions", str(rows), "--out", str(out),
                 "--no-reasons"]) == 0
    assert "lacks" not in capsys.readouterr().err


def test_an_empty_database_is_one_line(tmp_path, capsys):
    """A --database without a table: every row was left out as 'schema: no tables', exit 0; now
    one line naming --database, exit 2."""
    import sqlite3

    from model.scoring.cli import main

    rows = _write_rows(tmp_path / "mine.jsonl", _demo_rows("library", 12))
    out = tmp_path / "scored.jsonl"
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()
    assert main(["--database", str(empty), "--predictions", str(rows), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--database {empty}: no tables" in err, err


def test_check_scores_a_query_reading_a_table_the_database_lacks(capsys):
    """`--sql` naming a table the --database lacks was 'no table' and exit 2 even with --check,
    where a made-up table is what the check is for (a file's rows were scored): the verdict."""
    from model.scoring.cli import main
    from model.synth.demo import demo_root

    database = demo_root() / "database" / "supply_chain" / "supply_chain.sqlite"
    assert main(["--database", str(database), "--sql", "SELECT name FROM vendors_made_up", "--check"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith(("regenerate", "review")) and "vendors_made_up" in out, out
    assert f"rat-score: no table 'vendors_made_up' in {database}" in err, err
    assert main(["--database", str(database), "--sql", "SELECT name FROM vendors_made_up"]) == 2
    assert f"--sql: no table 'vendors_made_up' in {database}" in capsys.readouterr().err


def test_a_device_given_as_a_file_is_named_so_not_missing(capsys):
    """`--schema /dev/null` said 'no such file'; it is there, but no regular file."""
    from model.scoring.cli import main

    assert main(["--schema", "/dev/null", "--sql", "SELECT 1"]) == 2
    err = capsys.readouterr().err
    assert "--schema /dev/null: not a regular file (a device, pipe or socket)" in err, err


def test_max_nodes_bounds_a_query_and_the_message_names_the_option(capsys):
    """A 200-line dbt model (782 nodes) was refused with no way to raise the bound from the
    command line (rat-serve and rat-mcp had --max-nodes): the option, named in the message."""
    from model.scoring.cli import main

    sql = "SELECT " + " + ".join(["age"] * 300) + " FROM singer"
    assert main(["--sql", sql]) == 2
    assert "at most 500 are scored (--max-nodes raises it)" in capsys.readouterr().err
    assert main(["--sql", sql, "--max-nodes", "1000", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["nodes"]) > 500
    assert main(["--sql", "SELECT 1", "--max-sql-chars", "0"]) == 2
    assert "--max-sql-chars must be a positive number, found 0" in capsys.readouterr().err
