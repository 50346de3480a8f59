"""Choosing one query among candidates for a question (``Scorer.choose``, model.scoring.choice):
the tree most candidates share, whatever their spelling, on the demo database with the shipped
model; the most confident one by the other rule; unreadable candidates left out."""

import hashlib

import pytest

import rat
from model import Scorer
from model.scoring import RowError
from model.scoring.choice import RULES, choose
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
])
def test_what_cannot_be_chosen_from_is_one_clear_error(scorer, call, error, message):
    with pytest.raises(error) as raised:
        call(scorer)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
    assert RULES[0] == "most common tree"


def test_a_consensus_model_reads_the_candidates_as_answers_to_one_question():
    """`pretrained:spider_consensus` scores each candidate beside the others (they share a
    question): the three that agree come out above the two that do not, which they do not when
    each is scored alone; it chooses by confidence."""
    consensus = Scorer.pretrained("spider_consensus")
    database = demo_root() / "database" / DB / f"{DB}.sqlite"
    assert consensus.reads_other_answers and not Scorer.pretrained().reads_other_answers
    choice = consensus.choose([WRONG[0], SAME[0], WRONG[1], RIGHT, SAME[1]], question=QUESTION, database=database)
    together = [s.query_confidence for s in choice.scored]
    assert min(together[1], together[3], together[4]) > max(together[0], together[2]) + 0.2
    assert choice.index in (1, 3, 4) and choice.agreeing == 3 and choice.chosen.question_id is None
    alone = [consensus.score(sql, question=QUESTION, database=database).query_confidence for sql in WRONG]
    assert min(alone) > max(together[0], together[2]) + 0.2
