"""Node features: one named, documented row per node; NaN without a database; the disk cache."""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

import rat
from model.data.datasets import database_path, load_schemas
from model.eval.baselines import node_agreement
from model.nodes.examples import build_examples
from model.nodes.features import (
    CONSENSUS_FEATURES,
    FEATURE_NAMES,
    FEATURES,
    LM_FEATURES,
    SINGLE_FEATURES,
    build_features,
    feature_doc_table,
    lm_span_features,
    single_system_features,
)
from model.nodes.outputs import tree_of
from model.synth.demo import demo_root


@pytest.fixture(scope="module")
def demo():
    root = demo_root()
    examples, _ = build_examples(root, "dev", sorted((root / "predictions").glob("*")),
                                 max_questions=20, verbose=False)
    schemas = load_schemas(root)
    db_paths = {db: database_path(root, db) for db in {e.db_id for e in examples}}
    return examples, schemas, db_paths


def test_features_are_named_documented_and_split_into_two_tracks():
    assert len(set(FEATURE_NAMES)) == len(FEATURES)
    assert all(f.doc and f.group for f in FEATURES)
    assert SINGLE_FEATURES + LM_FEATURES + CONSENSUS_FEATURES == FEATURE_NAMES
    assert {f.group for f in FEATURES if f.track == "consensus"} == {"consensus"}
    assert {f.group for f in FEATURES if f.track == "lm"} == {"lm"}
    assert feature_doc_table().count("\n") == len(FEATURES) + 1


def test_one_complete_row_per_node(demo, tmp_path):
    examples, schemas, db_paths = demo
    matrices, names, report = build_features(examples, schemas, db_paths, consensus=True,
                                             cache_folder=tmp_path)
    assert names == SINGLE_FEATURES + CONSENSUS_FEATURES and report.nodes == sum(len(e.node_labels) for e in examples)
    for e, x in zip(examples, matrices):
        assert x.shape == (len(e.node_labels), len(names))
    stacked = np.vstack(matrices)
    column = dict(zip(names, stacked.T))
    for always in ("kind", "depth", "subtree_size", "tree_size", "exec_error", "agreement"):
        assert not np.isnan(column[always]).any(), always
    assert np.nanmax(column["value_in_column"]) == 1.0  # demo literals are found in the database


def test_consensus_agreement_is_node_agreement(demo, tmp_path):
    examples, schemas, db_paths = demo
    matrices, names, _ = build_features(examples, schemas, db_paths, consensus=True,
                                        cache_folder=tmp_path)
    expected = node_agreement({(e.system, e.question_id): tree_of(
        {"node_names": e.node_names, "node_arity": e.node_arity}) for e in examples})
    j = names.index("agreement")
    for e, x in zip(examples, matrices):
        assert x[:, j].tolist() == pytest.approx(expected[e.system, e.question_id])


def test_reference_site_points_where_the_query_departs_from_the_other_systems_answer():
    import rat
    from model.nodes.features import CONSENSUS_FEATURES, consensus_features

    def example(system, sql):
        nodes = rat.to_tree(sql).postorder()
        return SimpleNamespace(question_id="q", system=system, node_names=[n.label for n in nodes],
                               node_arity=[len(n.children) for n in nodes], node_labels=[1] * len(nodes))

    wrong = example("a", "SELECT name FROM singer WHERE age > 20")
    others = [example(s, "SELECT name FROM singer WHERE age > 30") for s in "bc"]
    others.append(example("d", "SELECT name FROM singer"))
    x = consensus_features([wrong, *others], [None] * 4)[0]
    column = dict(zip(CONSENSUS_FEATURES, x.T))
    site = wrong.node_names.index("20")
    assert column["reference_site"][site] == 1.0  # against b and c's answer: the literal 20
    assert column["reference_site"].sum() == 1.0  # and nothing else is a site
    assert column["reference_share"][0] == pytest.approx(2 / 3)
    assert column["reference_agreement"][site] == 0.0
    # with results: c returns a's rows, so b alone is the reference; d's tree stands apart
    x = consensus_features([wrong, *others], ["r1", "r2", "r1", "r3"])[0]
    column = dict(zip(CONSENSUS_FEATURES, x.T))
    assert column["reference_share"][0] == pytest.approx(1 / 3)
    same = consensus_features([wrong, example("b", "SELECT name FROM singer WHERE age > 20")], [None, None])[0]
    assert np.isnan(same[:, CONSENSUS_FEATURES.index("reference_site")]).all()  # no other answer


def test_missing_database_gives_nan_not_an_error(demo):
    examples, schemas, _ = demo
    example = next(e for e in examples if "value" in e.node_types)
    x = single_system_features(example, schemas[example.db_id], None).values
    column = dict(zip(SINGLE_FEATURES, x.T))
    for db_feature in ("exec_error", "exec_empty", "value_in_column"):
        assert np.isnan(column[db_feature]).all(), db_feature
    assert not np.isnan(column["name_word_share"]).all()  # schema linking needs no database


def test_failing_sql_and_broken_database_give_nan_and_write_nothing(demo, tmp_path):
    examples, schemas, db_paths = demo
    example = next(e for e in examples if "value" in e.node_types)
    schema, db = schemas[example.db_id], db_paths[example.db_id]
    before = db.read_bytes()
    table = next(iter(schema.tables))
    for sql in ("SELECT nonsense FROM nowhere", f'DELETE FROM "{table}"'):
        x = single_system_features(dataclasses.replace(example, sql=sql), schema, db).values
        column = dict(zip(SINGLE_FEATURES, x.T))
        assert (column["exec_error"] == 1).all() and np.isnan(column["exec_empty"]).all(), sql
    assert db.read_bytes() == before  # the DELETE was refused: databases are opened read-only
    broken = tmp_path / "broken.sqlite"
    broken.write_text("not a database")
    column = dict(zip(SINGLE_FEATURES, single_system_features(example, schema, broken).values.T))
    # a file that is no database is refused when opened: read as no database (unknown), not as SQL that failed
    assert np.isnan(column["value_in_column"]).all() and np.isnan(column["exec_error"]).all()
    assert broken.read_text() == "not a database"


def test_second_build_reads_the_cache(demo, tmp_path):
    examples, schemas, db_paths = demo
    first, _, cold = build_features(examples, schemas, db_paths, cache_folder=tmp_path)
    second, _, warm = build_features(examples, schemas, db_paths, cache_folder=tmp_path)
    assert warm.cache_hits == len(examples) > cold.cache_hits
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(first, second))
    # the same SQL read into another tree (a newer rat) is not served the old tree's rows
    regrown = [dataclasses.replace(e, tree_text=e.tree_text + " ") for e in examples[:3]]
    _, _, other = build_features(regrown, schemas, db_paths, cache_folder=tmp_path)
    assert other.cache_hits == 0


def test_rows_without_minilm_have_their_own_cache_entries(demo, tmp_path):
    from model.nodes.features import reads_semantic

    examples, schemas, db_paths = demo
    semantic = [SINGLE_FEATURES.index(f.name) for f in FEATURES if f.group == "semantic"]
    other = [j for j in range(len(SINGLE_FEATURES)) if j not in semantic]
    plain, _, _ = build_features(examples, schemas, db_paths, cache_folder=tmp_path, semantic=False)
    full, _, report = build_features(examples, schemas, db_paths, cache_folder=tmp_path)
    assert report.cache_hits < len(examples)  # the rows without MiniLM were not taken for full ones
    assert all(np.isnan(x[:, semantic]).all() for x in plain)
    assert not np.isnan(np.vstack(full)[:, SINGLE_FEATURES.index("name_semantic")]).all()
    assert all(np.array_equal(a[:, other], b[:, other], equal_nan=True) for a, b in zip(plain, full))
    assert not reads_semantic(["semantic"]) and reads_semantic(["name_semantic_gap"]) and reads_semantic([])


def test_semantic_linking_ranks_the_name_the_question_means_first():
    import rat
    from model.lm.sentence import embed_texts
    from model.nodes.examples import make_example
    from model.nodes.features import QuestionIndex

    schema = rat.Schema({"singer": ["singer_id", "name", "nationality"], "stadium": ["capacity", "location"]})
    text = "Which vocalists come from France?"
    question = QuestionIndex(text, embed_texts([text])[0])
    q = dataclasses.make_dataclass("Q", ["question_id", "db_id", "question", "gold_sql"])("q", "d", text, "")
    example = make_example(q, "SELECT name FROM singer WHERE nationality = 'France'", "s", schema)
    x = single_system_features(example, schema, None, question=question).values
    row = {name: dict(zip(SINGLE_FEATURES, x[example.node_names.index(name)]))
           for name in ("singer.nationality", "singer")}
    from model.nodes.features import SchemaIndex

    columns = SchemaIndex(schema, question).semantic["column"]
    # no shared word, yet "vocalists ... come from" is nearer the singer's nationality than the stadium's columns
    assert columns["nationality"] > max(columns["capacity"], columns["location"])
    assert row["singer.nationality"]["name_semantic"] == pytest.approx(columns["nationality"])
    assert row["singer"]["name_semantic_rank"] == 0 and row["singer"]["name_word_share"] == 0
    assert row["singer"]["name_semantic"] > 0.2
    without = single_system_features(example, schema, None).values  # no question vector: NaN
    assert np.isnan(without[:, SINGLE_FEATURES.index("name_semantic")]).all()


def test_lm_span_features_pool_the_scorers_token_log_probs_over_node_spans(demo, tmp_path):
    from model.data.datasets import Question
    from model.lm import load_causal_lm
    from model.lm.token_probabilities import prompt_text, token_probabilities
    from model.nodes.examples import make_example

    model, tokenizer = load_causal_lm()
    q = Question(question_id="dev_x", db_id="clinic", question="List the names of patients.", gold_sql="")
    schema = demo[1]["clinic"]
    table = min(schema.tables)
    column = schema.tables[table][0]
    sql = f"SELECT {column} FROM {table}"
    example = make_example(q, sql, "s", schema)
    (x,) = lm_span_features([example], demo[1], model, tokenizer, cache_path=tmp_path / "scores.jsonl")
    _, probabilities = token_probabilities(model, tokenizer, [(prompt_text(q.question, schema.tables), sql)])[0]
    log_p = np.log(probabilities)
    row = dict(zip(LM_FEATURES, x[-1]))  # the root spans the whole query, every written word matched
    assert row["lm_span_min_logprob"] == pytest.approx(log_p.min(), abs=1e-4)
    assert row["lm_span_mean_logprob"] == pytest.approx(log_p.mean(), abs=1e-4)
    assert np.allclose(x[:, 2], log_p.mean(), atol=1e-4)
    leaf = example.node_names.index(f"{table}.{column}")  # span "table.column": only "column" is written
    assert x[leaf, 0] >= log_p.min() - 1e-6 and np.isfinite(x[leaf, 1])
    assert (tmp_path / "scores.jsonl").exists()  # scored once, then read from the scorer's cache


def _bird_root(tmp_path):
    """A one-question BIRD-format folder (no database) and one system's answer to it."""
    import json

    root = tmp_path / "bird"
    root.mkdir()
    columns = [[-1, "*"], [0, "cdscode"], [0, "county"]]
    (root / "dev_tables.json").write_text(json.dumps([{
        "db_id": "schools", "table_names_original": ["frpm"], "table_names": ["frpm"],
        "column_names_original": columns, "column_names": columns, "column_types": ["text"] * 3,
        "primary_keys": [1], "foreign_keys": []}]))
    (root / "dev.json").write_text(json.dumps([{
        "question_id": 0, "db_id": "schools", "question": "How many schools are in Alameda?",
        "evidence": "Alameda refers to county = 'Alameda'", "difficulty": "simple",
        "SQL": "SELECT count(cdscode) FROM frpm WHERE county = 'Alameda'"}]))
    (tmp_path / "system.txt").write_text("SELECT count(*) FROM frpm WHERE county = 'Alameda'\n")
    return root, tmp_path / "system.txt"


@pytest.mark.parametrize("evidence", [True, False])
def test_the_scorer_lm_prompts_hold_birds_evidence(tmp_path, monkeypatch, evidence):
    """The node features' scorer-LM prompt (lm=true) reads the question as build_examples joined
    it with BIRD's evidence; the whole-query scorer's prompt has the evidence on its own line."""
    from model.data.datasets import load_questions
    from model.data.predictions import load_predictions
    from model.lm import token_probabilities as scoring

    root, answers = _bird_root(tmp_path)
    examples, _ = build_examples(root, "dev", [answers], require_database=False, evidence=evidence,
                                 verbose=False)
    prompts = []

    def scored(model, tokenizer, items, **kwargs):
        prompts.extend(prompt for prompt, _ in items)
        return [([], [])] * len(items)

    monkeypatch.setattr(scoring, "token_probabilities", scored)
    (x,) = lm_span_features(examples, load_schemas(root), model=object(),
                            tokenizer=lambda text, **kwargs: {"offset_mapping": []})
    assert np.isnan(x).all()  # nothing scored here: the prompt is what is checked
    (prompt,) = prompts
    assert prompt.startswith("-- Tables: frpm(cdscode, county)\n-- Question: How many schools are in Alameda?")
    assert ("Alameda refers to county = 'Alameda'" in prompt) == evidence

    questions = {q.question_id: q for q in load_questions(root, "dev")}
    monkeypatch.setattr(scoring, "score_sql", lambda model, tokenizer, items, **kwargs: prompts.extend(
        prompt for prompt, _ in items))
    scoring.score_predictions(None, None, load_predictions(answers, list(questions.values())), questions,
                              load_schemas(root))
    assert "\n-- Evidence: Alameda refers to county = 'Alameda'\n-- SQL:" in prompts[-1]


def test_sqlite_column_types_read_as_spiders_words():
    """BIRD's schemas declare SQLite types (integer, real, date): the column_type feature reads them
    as Spider's number and time, not as 'other'; Spider's own words read as before."""
    import rat
    from model.data.datasets import Question
    from model.nodes.examples import make_example
    from model.nodes.features import COLUMN_TYPES

    columns = [[-1, "*"], [0, "id"], [0, "rate"], [0, "opened"], [0, "name"], [0, "seats"]]
    schema = rat.Schema.from_spider({
        "db_id": "d", "table_names_original": ["school"], "table_names": ["school"],
        "column_names_original": columns, "column_names": columns,
        "column_types": ["text", "integer", "real", "datetime", "text", "number"],
        "primary_keys": [1], "foreign_keys": []})
    q = Question(question_id="q", db_id="d", question="Which schools?", gold_sql="")
    example = make_example(q, "SELECT id, rate, opened, name, seats FROM school", "s", schema)
    table = single_system_features(example, schema, None)
    codes = table.values[:, SINGLE_FEATURES.index("column_type")]
    read = {name: COLUMN_TYPES[int(c)] for name, c in zip(example.node_names, codes) if not np.isnan(c)}
    assert read == {"school.id": "number", "school.rate": "number", "school.opened": "time",
                    "school.name": "text", "school.seats": "number"}


def test_a_literal_found_in_another_column_or_near_a_stored_value(demo):
    """`city = 'Poland'`: Poland is no city but a country (the column is wrong); `country =
    'Polnd'`: no country, but close to one (the literal is wrong). Both the literal and the
    compared column carry the reading; a database-free row leaves it NaN."""
    from model.nodes.examples import node_types

    _, schemas, db_paths = demo
    schema, db = schemas["supply_chain"], db_paths["supply_chain"]

    def columns(sql, db_path=db):
        tree = rat.to_tree(sql, schema)
        nodes = tree.postorder()
        example = SimpleNamespace(question_id="q", db_id="supply_chain", sql=sql,
                                  question="Which suppliers are in Poland?", node_names=[n.label for n in nodes],
                                  node_arity=[len(n.children) for n in nodes], node_types=node_types(tree),
                                  node_labels=[1] * len(nodes))
        x = single_system_features(example, schema, db_path).values
        return example.node_names, dict(zip(SINGLE_FEATURES, x.T))

    names, column = columns("SELECT name FROM suppliers WHERE city = 'Poland'")
    literal, city = names.index("'Poland'"), names.index("suppliers.city")
    for node in (literal, city):
        assert column["compared_literal_found"][node] == 0.0
        assert column["literal_elsewhere"][node] >= 1  # suppliers.country holds it
    assert np.isnan(column["literal_elsewhere"][names.index("suppliers.name")])  # compared with nothing
    names, column = columns("SELECT name FROM suppliers WHERE country = 'Polnd'")
    near = column["literal_near_match"][names.index("'Polnd'")]
    assert 0.8 < near < 1.0 and column["literal_elsewhere"][names.index("'Polnd'")] == 0
    names, column = columns("SELECT name FROM suppliers WHERE country = 'Poland'")
    assert column["literal_near_match"][names.index("'Poland'")] == 1.0
    assert column["compared_literal_found"][names.index("suppliers.country")] == 1.0
    _, column = columns("SELECT name FROM suppliers WHERE city = 'Poland'", db_path=None)
    for feature in ("compared_literal_found", "literal_elsewhere", "literal_near_match"):
        assert np.isnan(column[feature]).all(), feature
    # a read that fails is unknown, not "stored nowhere"
    from model.nodes.features import DatabaseProbe

    probe = DatabaseProbe(db)
    assert probe.columns_holding("'Poland'", ["suppliers.country"]) == {"suppliers.country"}
    assert probe.columns_holding("'Poland'", ["no_such_table.country"]) is None
    # a table the schema names and the database lacks leaves the other columns' answer known
    assert probe.columns_holding("'Poland'", ["no_such_table.country", "suppliers.country"]) == {"suppliers.country"}
    assert probe.columns_holding("'Poland'", []) == set()
    assert np.isnan(probe.near_match("no_such_table", "country", "Poland"))


def test_database_lookups_are_shared_between_probes_until_the_file_changes(demo, tmp_path, monkeypatch):
    """rat-serve builds a probe per request: a later probe of the same unchanged file answers a
    lookup without reading it; a read that failed is not kept; a changed file is read again;
    the answers held stay under their bound."""
    import shutil
    import sqlite3

    from model.nodes import features
    from model.nodes.features import DatabaseProbe, SharedLookups

    monkeypatch.setattr(features, "SHARED_LOOKUPS", SharedLookups(max_bytes=20_000))
    db = tmp_path / "supply_chain.sqlite"
    shutil.copy(demo[2]["supply_chain"], db)
    reads = []

    def probe():
        p = DatabaseProbe(db)
        execute = p.database.execute
        p.database.execute = lambda sql, *a: reads.append(sql) or execute(sql, *a)
        return p

    first = probe()
    answers = (first.value_in_column("suppliers", "country", "'Poland'", like=False),
               first.columns_holding("'Poland'", ["suppliers.country", "suppliers.city"]),
               first.near_match("suppliers", "country", "Polnd"))
    assert answers[0] == (1.0, 1.0) and answers[1] == {"suppliers.country"} and 0.8 < answers[2] < 1
    assert np.isnan(first.near_match("no_such_table", "country", "Poland"))  # a failed read
    read_by_first = len(reads)
    second = probe()
    assert (second.value_in_column("suppliers", "country", "'Poland'", like=False),
            second.columns_holding("'Poland'", ["suppliers.country", "suppliers.city"]),
            second.near_match("suppliers", "country", "Polnd")) == answers
    assert len(reads) == read_by_first  # nothing read again
    assert np.isnan(second.near_match("no_such_table", "country", "Poland"))
    assert len(reads) == read_by_first + 1  # the failed read is tried again
    with sqlite3.connect(db) as conn:  # the file changes: Poland is gone
        conn.execute("UPDATE suppliers SET country = 'Norway' WHERE country = 'Poland'")
    conn.close()
    assert probe().value_in_column("suppliers", "country", "'Poland'", like=False) == (0.0, 0.0)
    assert features.SHARED_LOOKUPS._held <= 20_000


def test_a_scorer_lm_that_is_not_installed_is_one_usage_error(demo, tmp_path):
    from model.errors import UsageError

    examples, schemas, _ = demo
    with pytest.raises(UsageError, match="no GGUF file at"):
        lm_span_features(examples[:1], schemas, lm_model=f"{tmp_path / 'none.gguf'}@llama.cpp")


def test_self_join_and_subquery_columns_read_as_the_schema_holds_them(tmp_path):
    """A self-join's second `employee` is `employee_2` in the tree and a CTE's columns are
    `derived.c`: neither is "not in the schema", and the second table's keys, types and stored
    values are its table's."""
    import sqlite3

    from model.data.datasets import Question
    from model.nodes.examples import make_example

    db = tmp_path / "hr.sqlite"
    with sqlite3.connect(db) as connection:
        connection.executescript(
            "CREATE TABLE employee (id INTEGER PRIMARY KEY, name TEXT, boss INTEGER REFERENCES employee(id));"
            "INSERT INTO employee VALUES (1, 'Ada', NULL), (2, 'Bob', 1);")
    connection.close()
    schema = rat.Schema({"employee": ["id", "name", "boss"]}, ("employee.id",), (("employee.boss", "employee.id"),),
                        {"employee.id": "number", "employee.name": "text", "employee.boss": "number"})
    question = Question("q_0", "hr", "Who works for Ada?", "")

    def columns(sql):
        example = make_example(question, sql, "sys", schema)
        x = single_system_features(example, schema, db).values
        return {name: dict(zip(SINGLE_FEATURES, row)) for name, row in zip(example.node_names, x)}

    joined = columns("SELECT e.name FROM employee e JOIN employee b ON e.boss = b.id WHERE b.name = 'Ada'")
    plain = columns("SELECT name FROM employee WHERE name = 'Ada'")
    second = joined["employee_2.name"]
    assert second["in_schema"] == 1 and second["table_in_tree"] == 1
    assert second["table_word_share"] == joined["employee.name"]["table_word_share"]
    assert joined["employee_2.id"]["is_primary_key"] == 1
    assert second["column_type"] == plain["employee.name"]["column_type"]
    assert joined["employee.boss"]["is_foreign_key"] == 1
    literal = joined["'Ada'"]
    assert literal["value_in_column"] == 1 and literal["compared_literal_found"] == 1
    assert columns("SELECT e.name FROM employee e JOIN employee b ON e.boss = b.id")["Eq"]["join_on_fk"] == 1
    missing = columns("SELECT b.salary FROM employee e JOIN employee b ON e.boss = b.id")
    assert missing["employee_2.salary"]["in_schema"] == 0  # a column the table lacks still is

    cte = columns("WITH ada AS (SELECT id, name FROM employee WHERE name = 'Ada') SELECT a.name FROM ada a")
    outer = cte["derived.name"]
    assert np.isnan(outer["in_schema"]) and outer["table_in_tree"] == 1  # no row of the schema
    assert cte["employee.name"]["in_schema"] == 1


def test_a_table_whose_look_up_timed_out_is_not_looked_up_again_by_that_probe(demo, monkeypatch):
    """A literal's look-ups on a 5M-row PostgreSQL table each took the whole time limit: six
    literals of one query, 34 s. Once a look-up in a table times out, the probe answers the
    next ones in that table as unknown without reading; other tables are still read."""
    from model.nodes import features
    from model.nodes.features import DatabaseProbe

    monkeypatch.setattr(features, "SHARED_LOOKUPS", features.SharedLookups())  # (nothing answered from before)
    probe = DatabaseProbe(database_path(demo_root(), "supply_chain"))
    reads = []
    execute = probe.database.execute

    def slow_on_products(sql, seconds, max_bytes):
        reads.append(sql)
        return (None, f"timeout after {seconds:g} s") if "products" in sql else execute(sql, seconds, max_bytes)

    monkeypatch.setattr(probe.database, "execute", slow_on_products)
    for literal in ("'a'", "'b'", "'c'"):
        assert np.isnan(probe.value_in_column("products", "name", literal, like=True)).all()
    assert np.isnan(probe.near_match("products", "name", "a"))
    assert len(reads) == 1  # the first look-up alone read the table
    assert probe.value_in_column("suppliers", "country", "'Poland'", like=False) == (1.0, 1.0)
    assert probe.columns_holding("'x'", ["products.name"]) is None and probe.columns_holding("'y'", ["products.name"]) is None
    assert len(reads) == 3  # suppliers read; of the two searches of every column, the first alone


def test_the_look_ups_of_one_query_read_for_two_time_limits_together(demo, monkeypatch):
    """Each look-up was bounded by the read time limit alone, and reads just under it added up:
    40 literals on a 270 MB table took 62 s, 160 would take half an hour. One query's look-ups
    read for two time limits together, the rest unknown; the query's own run is not counted,
    and the next query on the same probe reads in its own time."""
    import time

    from model.nodes import features
    from model.nodes.examples import node_types

    monkeypatch.setattr(features, "SHARED_LOOKUPS", features.SharedLookups())
    _, schemas, db_paths = demo
    schema = schemas["supply_chain"]
    probe = features.DatabaseProbe(db_paths["supply_chain"], timeout_s=0.1)
    execute, reads = probe.database.execute, []

    def just_under_the_limit(sql, seconds, max_bytes):
        reads.append(sql)
        time.sleep(min(seconds, 0.08))
        return (None, f"timeout after {seconds:g} s") if seconds < 0.08 else execute(sql, seconds, max_bytes)

    monkeypatch.setattr(probe.database, "execute", just_under_the_limit)

    def literal_features(first: int):
        sql = "SELECT name FROM suppliers WHERE " + " OR ".join(f"city = 'c{i}'" for i in range(first, first + 6))
        nodes = rat.to_tree(sql, schema).postorder()
        example = SimpleNamespace(question_id="q", db_id="supply_chain", sql=sql, question="Which suppliers?",
                                  node_names=[n.label for n in nodes], node_arity=[len(n.children) for n in nodes],
                                  node_types=node_types(rat.to_tree(sql, schema)), node_labels=[1] * len(nodes))
        x = single_system_features(example, schema, None, probe=probe).values
        column = dict(zip(SINGLE_FEATURES, x.T))
        assert column["exec_error"][0] == 0  # the query itself ran
        return [column["value_in_column"][i] for i, n in enumerate(nodes) if n.label.startswith("'c")]

    for first in (0, 6):  # two queries, each with its own time
        del reads[:]
        start = time.monotonic()
        found = literal_features(first)
        assert time.monotonic() - start < 0.5  # the run (0.08 s) and two time limits; was 1.4 s
        assert found[0] == 0 and np.isnan(found[-1])  # the first literal looked up, the last not
        assert len(reads) <= 4  # the run and three look-ups (the third cut short); was 13
    # a look-up cut short by the query's time does not mark its table slow
    assert not probe._timed_out


def test_the_shared_look_up_answers_stay_within_their_bytes(monkeypatch):
    """The answers were capped at 200,000 values while their keys hold the literal (up to 10,000
    characters) and every column searched: 14 KiB a counted value, 2.7 GiB a process at the cap.
    Keys count too: the answers held stay within the cap as Python measures it."""
    import gc
    import tracemalloc

    from model.nodes.features import SharedLookups

    cap = 2_000_000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        shared = SharedLookups(max_bytes=cap)
        for i in range(1_000):  # 1,000 searches of every column for a 9,000-character literal
            columns = tuple(f"table_{i}.column_{j}" for j in range(60))
            shared.put(("db", "1:2", 10**8, ("holding", f"'{i:04d}{'z' * 9_000}'", columns)), set(columns[:3]))
            del columns
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert 0.5 * cap < held < 1.1 * cap, held
    assert shared.get(("db", "1:2", 10**8, ("holding", f"'0999{'z' * 9_000}'", tuple(
        f"table_999.column_{j}" for j in range(60))))) == {f"table_999.column_{j}" for j in range(3)}


@pytest.mark.parametrize("dialect, sql", [
    ("snowflake", "SELECT COUNT(*) FROM orders WHERE created_at >= DATEADD(day, -30, CURRENT_DATE())"),
    ("tsql", "SELECT COUNT(*) FROM orders WHERE created_at >= DATEADD(day, -30, CAST(GETDATE() AS date))"),
    ("redshift", "SELECT COUNT(*) FROM orders WHERE created_at >= DATEADD(day, -30, GETDATE())"),
    ("bigquery", "SELECT COUNT(*) FROM orders WHERE created_at >= DATE_ADD(CURRENT_DATE(), INTERVAL -30 DAY)"),
    ("mysql", "SELECT COUNT(*) FROM orders WHERE created_at >= TIMESTAMPADD(DAY, -30, NOW())"),
    ("duckdb", "SELECT COUNT(*) FROM orders WHERE created_at >= CURRENT_DATE + INTERVAL (-30) DAY"),
    ("postgres", "SELECT COUNT(*) FROM orders WHERE created_at >= CURRENT_DATE + INTERVAL '-30 days'"),
    ("snowflake", "SELECT COUNT(*) FROM orders WHERE created_at >= CURRENT_DATE() - 30"),
])
def test_the_negative_amount_of_date_arithmetic_is_the_questions_number(dialect, sql):
    """"The last 30 days" is DATEADD(day, -30, d) in Snowflake and SQL Server, INTERVAL -30 DAY
    elsewhere: the literal -30 there uses the question's 30 (it read as a number of the question the
    query leaves unused, and a literal the question does not say)."""
    from model.data.datasets import Question
    from model.nodes.examples import make_example

    schema = rat.Schema({"orders": ["order_id", "created_at"]})
    question = Question("q_0", "shop", "How many orders were placed in the last 30 days?", "")
    example = make_example(question, sql, "sys", schema, dialect=dialect)
    x = single_system_features(example, schema, None, dialect=dialect).values
    rows = [dict(zip(SINGLE_FEATURES, row)) for row in x]
    assert rows[0]["question_numbers_unused"] == 0
    literal = next(r for r, name in zip(rows, example.node_names) if name in ("-30", "30"))
    assert literal["value_in_question"] == 1


def test_a_negative_literal_elsewhere_and_the_questions_own_negative_number():
    """Outside date arithmetic the sign is the question's to say: "above 30" is no `x > -30`; a
    question that says -30 uses a literal -30 wherever it is."""
    from model.data.datasets import Question
    from model.nodes.examples import make_example

    schema = rat.Schema({"city": ["name", "temperature", "day"]})

    def literal(question, sql, dialect="sqlite"):
        example = make_example(Question("q_0", "w", question, ""), sql, "sys", schema, dialect=dialect)
        rows = [dict(zip(SINGLE_FEATURES, row)) for row in single_system_features(example, schema, None).values]
        return rows[example.node_names.index("-30")]["value_in_question"], rows[0]["question_numbers_unused"]

    sql = "SELECT name FROM city WHERE temperature > -30"
    assert literal("Which cities are above 30 degrees?", sql) == (0, 1)
    assert literal("Which cities are above -30 degrees?", sql) == (1, 0)
    assert literal("Which cities were above -30 degrees in the last 30 days?",
                   "SELECT name FROM city WHERE temperature > -30 AND day > DATEADD(day, -30, CURRENT_DATE())",
                   "snowflake") == (1, 0)
    assert literal("Which cities were above 30 degrees in the last 30 days?",
                   "SELECT name FROM city WHERE temperature > -30 AND day > DATEADD(day, -30, CURRENT_DATE())",
                   "snowflake") == (0, 0)
