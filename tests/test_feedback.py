"""What a verdict tells the model that wrote the query, and a person: one sentence per fact, each a
reason for doubt that names what to look at (the column a literal is stored in, the column that
matches the question better); what the check could not look at (no schema, a query that did not
finish); on the demo databases and the shipped model."""

import pytest

from model import Scorer
from model.scoring.verdict import Policy
from model.synth.demo import demo_root

EVERYTHING = Policy(run_at=0.0, regenerate_below=0.0)  # runs any query it may


def database(name: str):
    return demo_root() / "database" / name / f"{name}.sqlite"


SUPPLY = "supply_chain"


@pytest.fixture(scope="module")
def scorer():
    return Scorer.pretrained()


def test_a_query_checked_without_a_schema_is_never_run(scorer):
    """A probe: `SELECT count(*) FROM suppliers` with no schema and no database got `run` (0.97),
    and so would a table that does not exist: nothing about its names was checked."""
    question, sql = "How many suppliers are there?", "SELECT count(*) FROM suppliers"
    for policy in (None, EVERYTHING):
        blind = scorer.check(sql, question=question, policy=policy)
        assert blind.action == "review", blind
        assert "the tables and columns were not checked (no schema given)" in blind.reasons
        assert "- the tables and columns were not checked (no schema given)" in blind.feedback
        assert blind.to_dict()["scored_with_schema"] is False and blind.to_dict()["scored_with_database"] is False
    assert scorer.check("SELECT count(*) FROM vendors", question=question).action != "run"
    # given a schema (or a database, whose schema is read) the names are checked
    schema = {"suppliers": ["supplier_id", "name", "country"]}
    named = scorer.check(sql, question=question, schema=schema, policy=EVERYTHING)
    assert named.action == "review" and not any("not checked" in r for r in named.reasons)  # (no database)
    assert named.to_dict()["scored_with_schema"] is True and named.to_dict()["scored_with_database"] is False
    full = scorer.check(sql, question=question, database=database(SUPPLY), policy=EVERYTHING)
    assert full.action == "run" and not any("not checked" in r for r in full.reasons)
    assert full.to_dict()["scored_with_schema"] is True and full.to_dict()["scored_with_database"] is True


def test_a_literal_stored_in_another_column_names_it(scorer):
    """`WHERE city = 'Poland'` pointed at suppliers.city with "the literal compared with column
    suppliers.city is stored in 1 other column(s) of the database": not which one, and no
    sentence saying 'Poland' is no city."""
    verdict = scorer.check("SELECT name FROM suppliers WHERE city = 'Poland'", database=database(SUPPLY),
                           question="What is the name of each supplier whose country is Poland?")
    assert verdict.look_here_first["text"] == "city"
    assert verdict.reasons[0] == "the literal 'Poland' is not a value of suppliers.city; it is stored in suppliers.country"
    assert not any("other column(s)" in r or "the literal compared with" in r for r in verdict.reasons)
    assert "- the literal 'Poland' is not a value of suppliers.city; it is stored in suppliers.country" in verdict.feedback


def test_a_literal_in_its_column_and_in_another_names_the_other(scorer):
    """Without a sentence of its own (stored in the column it is compared with), a literal stored
    elsewhere too names where."""
    from model.scoring.verdict import _columns_holding

    scored = scorer.score("SELECT name FROM suppliers WHERE city = 'Poland'", database=database(SUPPLY))
    literal = next(n.index for n in scored.nodes if n.label == "'Poland'")
    assert _columns_holding(scored, literal, database(SUPPLY)) == ["suppliers.country"]
    assert _columns_holding(scored, literal, None) is None


def test_the_column_that_matches_the_question_better_is_named(scorer):
    """"another column of the schema matches the question better (by 0.50)" could push a model
    away from a right query: which column it is, the node's own table's first."""
    verdict = scorer.check("SELECT warehouses.city FROM warehouses", question="List the name of all warehouses.",
                           database=database(SUPPLY))
    assert "another column of the schema matches the question better: warehouses.name (by 0.50)" in verdict.reasons
    scored = scorer.score("SELECT products.name, products.supplier_id FROM products WHERE products.weight_kg >= 20.4",
                          question="Which products have a weight in kg at least 20.4? Give their name.",
                          database=database(SUPPLY))
    ranks = [r.text for n in scored.nodes for r in n.reasons if r.feature == "name_rank"]
    assert ranks and all("match the question better (the best: " in t for t in ranks), ranks


def test_one_sentence_per_fact(scorer):
    """"the query returns 0 row(s)" beside "the query returns no rows"; a literal's sentence beside
    "a literal inside it is not found in its column" (the demo's check loop showed both)."""
    empty = scorer.check("SELECT artists.name, AVG(concerts.ticket_price) FROM concerts JOIN artists ON "
                         "concerts.artist_id = artists.genre GROUP BY artists.artist_id",
                         question="For each artist, what is the average ticket price of its concerts? Show the name too.",
                         database=database("music_events"))
    rows = [r for r in empty.reasons if "the query returns" in r and "row" in r]
    assert rows == ["the query returns no rows"], empty.reasons
    course = scorer.check("SELECT courses.title FROM courses EXCEPT SELECT courses.title FROM enrollments JOIN courses "
                          "ON enrollments.course_id = courses.course_id WHERE enrollments.course_id = 'spring 2024'",
                          question="Which courses never had a enrollment with semester spring 2024? Give their title.",
                          database=database("university"))
    literal = [r for r in course.reasons if "'spring 2024'" in r]
    assert literal == [("the literal 'spring 2024' is not a value of enrollments.course_id; "
                        "it is stored in enrollments.semester")], course.reasons
    assert not any("a literal inside it is not found" in r or "the literal compared with" in r for r in course.reasons)


def test_a_range_bound_is_never_said_to_be_missing_from_its_column(scorer):
    """"a literal inside it is not found in its column" for `fee >= 76.54`: a bound need not be
    a stored value (the literal sentences never say so of one)."""
    verdict = scorer.check("SELECT appointments.appointment_id FROM appointments WHERE appointments.fee >= 76.54 "
                           "AND appointments.fee <= 254.4", database=database("clinic"),
                           question="List the appointment id of appointments with fee between 103.2 and 254.4.")
    assert verdict.reasons and not any("not found in its column" in r or "not found in it" in r
                                       for r in verdict.reasons), verdict.reasons


def test_a_row_count_is_a_reason_only_as_what_lowers_the_confidence(scorer):
    """"- the query returns 13 row(s)" was listed as a reason: a fact, not what is wrong with it.
    A row count is shown where it lowered the confidence, and says so."""
    verdict = scorer.check("SELECT products.name FROM products", question="List the name of all products.",
                           database=database(SUPPLY))
    rows = [r for r in verdict.reasons if "row" in r]
    assert rows == [("the query returns 30 row(s), more than a right query typically does (1): "
                     "this lowers the confidence")], verdict.reasons


def test_a_query_that_did_not_finish_says_so(scorer):
    """A query stopped by the time limit while its features were read had no reason at all."""
    slow = Scorer(scorer.saved, feature_timeout_s=1e-6)
    verdict = slow.check("SELECT count(*) FROM orders a, orders b, orders c", question="How many?",
                         database=database(SUPPLY))
    assert verdict.scored.execution_error == "timeout after 1e-06 s"
    assert "the query did not finish within 1e-06 s against the database" in verdict.reasons
    assert "- the query did not finish within 1e-06 s against the database" in verdict.feedback


def test_the_time_limit_of_each_read_is_an_option_of_pretrained_and_load(scorer, tmp_path):
    """docs/scoring.md spelt it `Scorer(feature_timeout_s=)`: a ValueError about a boosted model."""
    assert Scorer.pretrained(feature_timeout_s=1).feature_timeout_s == 1
    assert Scorer.load("pretrained", feature_timeout_s=2, max_result_bytes=1024).max_result_bytes == 1024
    with pytest.raises(ValueError, match=r"Scorer.pretrained\(feature_timeout_s=1\)"):
        Scorer(feature_timeout_s=1)
    with pytest.raises(ValueError, match="feature_timeout_s: expected a positive number of seconds, found 0"):
        Scorer.pretrained(feature_timeout_s=0)
