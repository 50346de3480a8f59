"""Choosing one query among candidates for a question (``Scorer.choose``, model.scoring.choice):
the tree most candidates share, whatever their spelling, on the demo database with the shipped
model; the most confident one by the other rule; unreadable candidates left out."""

import hashlib

import pytest

import rat
from model import Scorer
from model.scoring import RowError
from model.scoring.choice import MAX_CANDIDATES, choose
from model.synth.demo import demo_root

DB = "supply_chain"
QUESTION = "What is the name of each supplier whose country is Poland?"
RIGHT = "SELECT name FROM suppliers WHERE country = 'Poland'"
# the right query twice more, spelled otherwise (an alias, the comparison turned round, case)
SAME = ["SELECT s.name FROM suppliers AS s WHERE 'Poland' = s.country", "select NAME from SUPPLIERS where COUNTRY='Poland'"]
WRONG = ["SELECT name FROM suppliers", "SELECT name FROM suppliers WHERE city = 'Poland'"]


@pytest.fixture(scope="module")
def scorer():
    return Scorer.pretrained()


def test_the_tree_most_candidates_share_is_chosen_however_it_is_written(scorer):
    database = demo_root() / "database" / DB / f"{DB}.sqlite"
    before = hashlib.sha256(database.read_bytes()).hexdigest()
    candidates = [WRONG[0], SAME[0], WRONG[1], RIGHT, "SELEC name", SAME[1]]
    choice = scorer.choose(candidates, question=QUESTION, database=database)
    assert isinstance(choice.scored[4], RowError) and choice.scored[4].kind == "sql"
    assert choice.index in (1, 3, 5) and choice.agreeing == 3
    assert choice.chosen is choice.scored[choice.index]
    readable = [s for s in choice.scored if not isinstance(s, RowError)]
    assert choice.chosen.query_confidence == max(s.query_confidence for i, s in enumerate(choice.scored)
                                                 if i in (1, 3, 5))
    # by confidence alone: the most confident readable candidate, whichever tree it has
    alone = scorer.choose(candidates, question=QUESTION, database=database, rule="most confident")
    assert alone.chosen.query_confidence == max(s.query_confidence for s in readable) and alone.agreeing >= 1
    assert hashlib.sha256(database.read_bytes()).hexdigest() == before


def test_a_tie_goes_to_the_tree_of_the_more_confident_candidate():
    assert choose(["a", "b", "b", "a"], [0.5, 0.6, 0.2, 0.7]) == 3
    assert choose(["a", "b", "b", "c"], [0.99, 0.1, 0.2, 0.98]) == 2
    assert choose(["a"], [0.1], "most confident") == 0
    tree = rat.to_tree(RIGHT).hash
    assert [rat.to_tree(sql).hash == tree for sql in SAME] == [True, True]


@pytest.mark.parametrize("call, error, message", [
    (lambda s: s.choose([]), TypeError, "candidates: expected a non-empty list of SQL strings"),
    (lambda s: s.choose(RIGHT), TypeError, "candidates: expected a non-empty list of SQL strings"),
    (lambda s: s.choose(["SELECT * FROM (", "SELEC a"]), rat.RATError, "cannot parse"),  # the first one's
    (lambda s: s.choose([RIGHT], rule="best"), ValueError, "rule: unknown rule 'best' (known: 'most common tree', "),
    # the rule and the candidates' types are checked before any work: an unreadable one does not hide them
    (lambda s: s.choose(["SELEC x"], rule="best"), ValueError, "rule: unknown rule 'best'"),
    (lambda s: s.choose([RIGHT, b"SELECT 1"]), TypeError, "candidates[1]: expected a str of SQL, found bytes"),
    # a bounded cost: at most MAX_CANDIDATES (a consensus model compares each with every other)
    (lambda s: s.choose([RIGHT] * (MAX_CANDIDATES + 1)), ValueError, "candidates: 65 queries; at most 64"),
])
def test_what_cannot_be_chosen_from_is_one_clear_error(scorer, call, error, message):
    with pytest.raises(error) as raised:
        call(scorer)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def test_a_consensus_model_reads_the_candidates_as_answers_to_one_question():
    """`pretrained:spider_consensus` scores each candidate beside the others (they share a
    question): the three that agree come out above the two that do not, which they do not when
    each is scored alone."""
    consensus = Scorer.pretrained("spider_consensus")
    database = demo_root() / "database" / DB / f"{DB}.sqlite"
    assert consensus.reads_other_answers and not Scorer.pretrained().reads_other_answers
    choice = consensus.choose([WRONG[0], SAME[0], WRONG[1], RIGHT, SAME[1]], question=QUESTION, database=database)
    together = [s.query_confidence for s in choice.scored]
    assert min(together[1], together[3], together[4]) > max(together[0], together[2]) + 0.2
    assert choice.index in (1, 3, 4) and choice.agreeing == 3 and choice.chosen.question_id is None
    alone = [consensus.score(sql, question=QUESTION, database=database).query_confidence for sql in WRONG]
    assert min(alone) > max(together[0], together[2]) + 0.2


def test_score_many_bounds_the_answers_a_consensus_model_compares_for_one_question():
    """A model that reads the other answers compares each answer of a question with every other
    (a cost that grows with their square): ``score_many`` scores a question's answers up to
    MAX_CANDIDATES, as ``choose`` does, and makes each answer of a question with more a
    ``RowError`` naming it; other questions' rows in the same call are scored."""
    consensus = Scorer.pretrained("spider_consensus")
    many = [{"question_id": "q1", "db_id": DB, "question": QUESTION, "sql": sql}
            for sql in ([RIGHT, *SAME, *WRONG] * 14)[:MAX_CANDIDATES + 1]]
    other = {"question_id": "q2", "db_id": DB, "question": QUESTION, "sql": RIGHT}
    results = consensus.score_many([*many, other], progress=False, spans=False)
    assert all(isinstance(r, RowError) and r.message == "question_id 'q1': 65 answers to one question; "
               "a model that reads the other answers takes at most 64" for r in results[:-1])
    assert not isinstance(results[-1], RowError)
    scored = consensus.score_many(many[:MAX_CANDIDATES], progress=False, spans=False)
    assert not any(isinstance(r, RowError) for r in scored)
    # a model that scores each query alone reads any number
    assert not any(isinstance(r, RowError) for r in Scorer.pretrained().score_many(many, progress=False, spans=False))


def test_rat_score_choose_writes_one_row_a_question(tmp_path):
    """`rat-score --choose`: a file of candidates (several rows a question_id) in, each
    question's chosen row out, with how many candidates share its tree and how many there were."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    rows = [*({"question_id": "q1", "db_id": DB, "question": QUESTION, "sql": sql}
              for sql in (WRONG[0], SAME[0], "SELEC name", RIGHT, WRONG[1])),
            {"question_id": 2, "db_id": DB, "question": "How many suppliers are there?",
             "sql": "SELECT count(*) FROM suppliers"}]
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rat_score = str(Path(sys.executable).with_name("rat-score"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([rat_score, "--data-root", str(demo_root()), "--predictions", str(samples), "--choose",
                           "--out", str(tmp_path / "chosen.jsonl")], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    chosen = [json.loads(line) for line in (tmp_path / "chosen.jsonl").read_text().splitlines()]
    assert [(c["question_id"], c["agreeing"], c["candidates"]) for c in chosen] == [("q1", 2, 5), (2, 1, 1)]
    assert chosen[0]["sql"] in (SAME[0], RIGHT)
    assert "chose one for each of 2 questions (most common tree)" in done.stderr
    refused = subprocess.run([rat_score, "--predictions", str(samples), "--choose", "--check"], capture_output=True,
                             text=True, env=env, timeout=300, check=False)
    assert refused.returncode == 2 and refused.stderr.strip().endswith("--choose reads a --predictions file of "
                                                                      "candidates, without --check or --label-shift")


def test_rat_score_choose_reads_rows_without_a_question_id_together(tmp_path):
    """Candidates named by their db_id and question (no question_id) are one question's answers
    to a model that reads the other answers, as `Scorer.choose` gives them (the chosen one's
    confidence is the one it has among them, not the one it has alone); no id is left on the row."""
    import json

    from model.scoring.cli import main

    candidates = [WRONG[0], SAME[0], WRONG[1], RIGHT, SAME[1]]
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps({"db_id": DB, "question": QUESTION, "sql": sql}) + "\n"
                               for sql in candidates))
    out = tmp_path / "chosen.jsonl"
    assert main(["--model", "pretrained:spider_consensus", "--data-root", str(demo_root()), "--predictions",
                 str(samples), "--choose", "--out", str(out)]) == 0
    [chosen] = [json.loads(line) for line in out.read_text().splitlines()]
    assert chosen["question_id"] is None and chosen["agreeing"] == 3 and chosen["sql"] in (RIGHT, *SAME)
    consensus = Scorer.pretrained("spider_consensus")
    database = demo_root() / "database" / DB / f"{DB}.sqlite"
    together = consensus.choose(candidates, question=QUESTION, database=database).chosen.query_confidence
    alone = consensus.score(chosen["sql"], question=QUESTION, database=database).query_confidence
    assert chosen["query_confidence"] == pytest.approx(together, abs=1e-6) and abs(together - alone) > 0.05


def test_candidate_choice_measures_rules_on_rat_score_rows_by_tree_labels(tmp_path):
    """scripts/candidate_choice.py --scored: rat-score's rows of every candidate, labelled by
    their trees against the benchmark's gold (a benchmark without databases, as BIRD dev)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from model.data.datasets import load_questions

    questions = load_questions(demo_root(), "dev")[:30]
    rows = [{"question_id": q.question_id, "db_id": q.db_id, "system": system, "sql": sql, "query_confidence": conf}
            for q in questions for system, sql, conf in (("a", q.gold_sql, 0.6), ("b", q.gold_sql, 0.5),
                                                          ("c", "SELECT 1", 0.9))]
    scored = tmp_path / "all.jsonl"
    scored.write_text("".join(json.dumps(r) + "\n" for r in rows))
    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(repo / "scripts/candidate_choice.py"), "--scored", str(scored),
                           "--data-root", str(demo_root()), "--bootstrap", "50"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    lines = {line[:40].strip(): line[40:].split() for line in done.stdout.splitlines()[2:]}
    assert lines["system a"] == ["1.000"] and lines["system c"] == ["0.000"], done.stdout
    assert lines["most common tree"][0] == "1.000" and lines["most confident"][0] == "0.000", done.stdout
    assert "30 questions, 3 candidates each" in done.stdout and "tree match" in done.stdout
