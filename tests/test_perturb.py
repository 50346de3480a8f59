"""Perturbation engine: reproducible, every kind changes the query, labels follow execution,
and the error classifier reads fixture cases right."""

from pathlib import Path

import pytest

import rat
from model.data.datasets import database_path, load_questions, load_schemas
from model.data.execution import execute_pairs
from model.nodes.examples import make_example
from model.synth.error_kinds import classify_error
from model.synth.perturb import DEFAULT_MIX, KINDS, STRUCTURAL_KINDS, Perturber

FIXTURES = Path(__file__).parent / "fixtures" / "perturb"


@pytest.fixture(scope="module")
def demo():
    from model.synth.demo import demo_root

    root = demo_root()
    return root, load_questions(root, "train") + load_questions(root, "dev"), load_schemas(root)


def _perturber(demo, db_id):
    root, _, schemas = demo
    return Perturber(schemas[db_id], database_path(root, db_id))


def test_same_seed_same_output_other_seed_differs(demo):
    _, questions, _ = demo
    runs = []
    for seed in (0, 0, 1):
        out = []
        for q in questions[:60]:
            out += [(p.sql, p.kind) for p in _perturber(demo, q.db_id).perturb(q.gold_sql, 3, seed)]
        runs.append(out)
    assert runs[0] == runs[1] and len(runs[0]) > 100
    assert runs[0] != runs[2]


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_changes_the_query_and_wrong_results_get_wrong_nodes(demo, kind):
    root, questions, schemas = demo
    made = []
    for q in questions:
        perturber = _perturber(demo, q.db_id)
        for p in perturber.perturb(q.gold_sql, n=1, seed=7, kinds=(kind,)):
            assert p.kind == kind and p.sql != perturber.render(q.gold_sql)
            made.append((q, p))
        if len(made) >= 15:
            break
    assert made, f"no query of the demo corpus admits a {kind} perturbation"
    outcomes = execute_pairs([(database_path(root, q.db_id), p.sql, q.gold_sql) for q, p in made],
                             progress=False)
    wrong = 0
    for (q, p), outcome in zip(made, outcomes, strict=True):
        schema = schemas[q.db_id]
        gold_tree = rat.to_tree(q.gold_sql, schema)
        example = make_example(q, p.sql, f"perturb:{kind}", schema, gold_tree, outcome == "match")
        if outcome == "match":
            assert all(example.node_labels), (p.sql, example.node_labels)
        else:
            wrong += 1
            # Every wrong query has a wrong node: a perturbation that only removes something
            # (LIMIT, a condition) gets its root marked wrong.
            assert 0 in example.node_labels, (q.gold_sql, p.sql)
    if kind != "distinct":  # DISTINCT is ignored by the execution comparison (test-suite style)
        assert wrong > 0


def test_unknown_kind_in_mix_is_refused(demo):
    _, _, schemas = demo
    with pytest.raises(ValueError, match="unknown perturbation kinds"):
        Perturber(schemas["clinic"], mix={"colum": 1.0})


def test_default_mix_is_a_distribution_over_all_kinds():
    assert set(DEFAULT_MIX) == set(KINDS)
    assert sum(DEFAULT_MIX.values()) == pytest.approx(1.0)


CONCERTS = rat.Schema({"stadium": ["stadium_id", "name"], "concert": ["concert_id", "stadium_id", "year"]},
                      foreign_keys=(("concert.stadium_id", "stadium.stadium_id"),))


@pytest.mark.parametrize("kind, gold, expected", [
    ("set_operation", "SELECT name FROM stadium INTERSECT SELECT name FROM stadium WHERE stadium_id > 3",
     {"SELECT stadium.name FROM stadium UNION SELECT stadium.name FROM stadium WHERE stadium.stadium_id > 3",
      "SELECT stadium.name FROM stadium EXCEPT SELECT stadium.name FROM stadium WHERE stadium.stadium_id > 3"}),
    ("not_in_except", "SELECT name FROM stadium WHERE stadium_id NOT IN (SELECT stadium_id FROM concert)",
     {"SELECT stadium.name FROM stadium EXCEPT SELECT concert.stadium_id FROM concert"}),
    ("not_in_except", "SELECT stadium_id FROM stadium EXCEPT SELECT stadium_id FROM concert",
     {("SELECT stadium.stadium_id FROM stadium WHERE NOT stadium.stadium_id IN "
      "(SELECT concert.stadium_id FROM concert)")}),
    ("subquery_join", "SELECT name FROM stadium WHERE stadium_id IN (SELECT stadium_id FROM concert WHERE year = 2014)",
     {("SELECT stadium.name FROM stadium JOIN concert ON stadium.stadium_id = concert.stadium_id "
      "WHERE concert.year = 2014")}),
    ("subquery_join", ("SELECT T1.name FROM stadium AS T1 JOIN concert AS T2 ON T1.stadium_id = T2.stadium_id "
                      "WHERE T2.year = 2014"),
     {("SELECT stadium.name FROM stadium WHERE stadium.stadium_id IN "
      "(SELECT concert.stadium_id FROM concert WHERE concert.year = 2014)")}),
])
def test_structural_rewrites(kind, gold, expected):
    made = Perturber(CONCERTS).perturb(gold, n=2, seed=0, kinds=(kind,))
    assert made and {p.sql for p in made} <= expected
    for p in made:
        assert rat.to_tree(p.sql, CONCERTS).hash != rat.to_tree(gold, CONCERTS).hash


def test_structural_kinds_are_off_by_default_and_nothing_applies_to_a_flat_query():
    assert all(DEFAULT_MIX[k] == 0 for k in STRUCTURAL_KINDS)
    flat = "SELECT name FROM stadium WHERE stadium_id = 1"
    assert Perturber(CONCERTS).perturb(flat, n=1, kinds=STRUCTURAL_KINDS) == []
    assert {p.kind for p in Perturber(CONCERTS).perturb(flat, n=6)}.isdisjoint(STRUCTURAL_KINDS)


def test_schema_item_replacement_stays_in_the_database(demo):
    _, questions, schemas = demo
    for q in questions[:40]:
        schema = schemas[q.db_id]
        for p in _perturber(demo, q.db_id).perturb(q.gold_sql, 2, 3, kinds=("column", "table")):
            tree = rat.to_tree(p.sql, schema)
            for node in tree.postorder():
                if not node.children and "." in node.label and not node.label[0].isdigit():
                    table, column = node.label.split(".", 1)
                    assert column in schema.tables[table], p.sql


def test_unparsable_sql_raises_rat_error(demo):
    with pytest.raises(rat.RATError):
        _perturber(demo, "clinic").perturb("SELECT FROM WHERE", n=1)


def _cases():
    text = (FIXTURES / "error_kinds.txt").read_text()
    for block in text.split("# title:")[1:]:
        title, gold, pred, kind = [line for line in block.splitlines() if line.strip()][:4]
        yield pytest.param(gold, pred, kind, id=title.strip())


@pytest.mark.parametrize("gold, pred, kind", list(_cases()))
def test_classify_error(demo, gold, pred, kind):
    _, _, schemas = demo
    assert classify_error(gold, pred, schemas["supply_chain"]) == kind


@pytest.mark.data
def test_spider_gold_queries_perturb_without_crashing(shared_data):
    spider = shared_data / "spider"
    questions = load_questions(spider, "dev")[:80]
    schemas = load_schemas(spider)
    made = 0
    for index, q in enumerate(questions):
        perturber = Perturber(schemas[q.db_id], database_path(spider, q.db_id))
        made += len(perturber.perturb(q.gold_sql, n=2, seed=index))
    assert made >= 0.9 * 2 * len(questions)


def test_a_tables_json_entry_is_a_schema_as_rat_reads_it():
    """Perturber takes what rat.Schema.of takes, as the docs say of a schema (a tables.json entry was an AttributeError)."""
    entry = {"db_id": "d", "table_names_original": ["singer"], "column_names_original": [[-1, "*"], [0, "name"], [0, "age"]],
             "column_types": ["text", "text", "number"], "primary_keys": [], "foreign_keys": []}
    sql = "SELECT name FROM singer WHERE age > 20"
    assert Perturber(entry).perturb(sql, 3, 0) == Perturber(rat.Schema.from_spider(entry)).perturb(sql, 3, 0)
