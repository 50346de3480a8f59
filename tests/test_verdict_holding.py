"""A verdict names the other columns that store a literal as its scoring found them (the
``literal_elsewhere`` feature's look-up, kept with the scored query): the database is not asked
again. On the demo database and the shipped model."""

import pytest

from model import Scorer
from model.nodes.features import DatabaseProbe
from model.scoring.verdict import verdict_of
from model.synth.demo import demo_root

SUPPLY = demo_root() / "database" / "supply_chain" / "supply_chain.sqlite"
QUESTION = "What is the name of each supplier whose country is Poland?"


@pytest.fixture(scope="module")
def scorer():
    return Scorer.pretrained()


@pytest.fixture
def searches(monkeypatch):
    """The literals ``DatabaseProbe.columns_holding`` is asked about, in order."""
    asked, search = [], DatabaseProbe.columns_holding

    def counted(self, literal, columns):
        asked.append(literal)
        return search(self, literal, columns)

    monkeypatch.setattr(DatabaseProbe, "columns_holding", counted)
    return asked


def test_the_verdict_names_the_column_the_scoring_found_the_literal_in(scorer, searches):
    """The verdict opened the database again and searched every text column for 'Poland', as the
    scoring had just done for the literal_elsewhere feature."""
    scored = scorer.score("SELECT name FROM suppliers WHERE city = 'Poland'", question=QUESTION, database=SUPPLY)
    verdict = verdict_of(scored, scorer.policy, SUPPLY)
    assert searches == ["'Poland'"]  # (the scoring's search only)
    assert verdict.reasons[0] == "the literal 'Poland' is not a value of suppliers.city; it is stored in suppliers.country"
    literal = next(n.index for n in scored.nodes if n.label == "'Poland'")
    assert scored.columns_holding[literal] == ("suppliers.country",)
    # what the verdict says is what the scoring found, not a read of its own
    scored.columns_holding[literal] = ()
    assert not any("stored in" in r for r in verdict_of(scored, scorer.policy, SUPPLY).reasons)


def test_a_literal_the_scoring_did_not_search_for_is_searched_for_once(scorer, searches):
    """An IN list's literal has no literal_elsewhere feature (it is compared with a list, not the
    column): the verdict's own search names where it is stored."""
    verdict = scorer.check("SELECT name FROM suppliers WHERE city IN ('Poland', 'Germany')",
                           question="Suppliers from Poland?", database=SUPPLY)
    assert verdict.reasons[0] == "the literal 'Germany' is not a value of suppliers.city; it is stored in suppliers.country"
    assert searches == ["'Germany'"]
