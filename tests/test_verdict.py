"""The verdict: thresholds chosen on a risk-coverage curve to meet stated targets, saved with the
model by a training run and validated on load; Scorer.check's actions and feedback on the demo
databases; the guard around run_sql; the policy command."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

import rat
from model import Scorer
from model.errors import ModelFileError, UsageError
from model.scoring.scorer import PRETRAINED
from model.scoring.verdict import (
    Policy,
    QueryHeld,
    choose_policy,
    guard,
    held_out,
    measure,
    wilson_upper,
)
from model.synth.demo import demo_root
from tests.test_scorer import boosted_model  # noqa: F401  (the fixture)

DB = "supply_chain"
TYPO = "SELECT name FROM suppliers WHERE country = 'Germani'"
QUESTION = "Which suppliers are based in Germany?"


@pytest.fixture(scope="module")
def demo():
    root = demo_root()
    return root / "database" / DB / f"{DB}.sqlite", json.loads((root / "tables.json").read_text())


@pytest.fixture(scope="module")
def scorer():
    return Scorer.pretrained()


def curve(n=4000, seed=0):
    """Confidences and labels where higher confidence is more often right (as a model's)."""
    rng = np.random.default_rng(seed)
    conf = rng.uniform(size=n)
    return conf, (rng.uniform(size=n) < 0.05 + 0.94 * conf).astype(int)


def test_thresholds_meet_the_targets_with_their_upper_bound():
    conf, right = curve()
    policy = choose_policy(conf, right, max_wrong=0.05, max_right_regenerated=0.25)
    run, back = conf >= policy.run_at, conf < policy.regenerate_below
    assert wilson_upper(int(np.sum(right[run] == 0)), int(run.sum())) <= 0.05
    assert wilson_upper(int(np.sum(right[back])), int(back.sum())) <= 0.25
    assert 0 < policy.regenerate_below < policy.run_at < 1
    # the lowest threshold that holds: one level lower no longer does
    lower = np.max(conf[conf < policy.run_at])
    more = conf >= lower
    assert wilson_upper(int(np.sum(right[more] == 0)), int(more.sum())) > 0.05
    assert policy.measured["run_share"] == pytest.approx(run.mean(), abs=1e-4)
    assert policy.measured["run_wrong"] <= 0.05 and policy.measured["queries"] == len(conf)
    # a looser target runs more queries
    assert choose_policy(conf, right, max_wrong=0.10).measured["run_share"] > policy.measured["run_share"]


def test_a_target_no_threshold_meets_runs_nothing():
    conf = np.linspace(0, 1, 200)
    policy = choose_policy(conf, np.tile([0, 1], 100), max_wrong=0.05)
    assert policy.run_at is None and {policy.action(c) for c in conf} <= {"review", "regenerate"}
    assert measure(policy, conf, np.tile([0, 1], 100))["run_share"] == 0.0


def test_tied_confidences_get_one_action():
    policy = choose_policy([0.9] * 100 + [0.7] * 50, [1] * 100 + [1] * 40 + [0] * 10)
    assert policy.run_at == 0.9 and policy.action(0.7) != "run"


def test_held_out_folds_choose_on_the_other_folds():
    conf, right = curve(6000, seed=1)
    folds = np.arange(len(conf)) % 5
    check = held_out(conf, right, folds)
    assert check["folds"] == 5 and check["run_wrong"] <= 0.07  # near the 5% target on unseen folds


@pytest.mark.parametrize("bad", [([0.5, 0.6], [1]), ([], []), ([float("nan")], [1])])
def test_bad_pairs_are_one_usage_line(bad):
    with pytest.raises(UsageError):
        choose_policy(*bad)


def test_a_policy_round_trips_and_a_malformed_one_is_one_line(tmp_path):
    policy = choose_policy(*curve())
    assert Policy.from_dict(json.loads(json.dumps(policy.to_dict()))) == policy
    folder = tmp_path / "model"
    shutil.copytree(PRETRAINED["spider"], folder)
    meta = json.loads((folder / "model.json").read_text())
    for broken, says in (({"run_at": 2.0, "regenerate_below": 0.1}, "run_at"),
                         ({"run_at": 0.5, "regenerate_below": 0.8}, "above run_at"),
                         ("strict", "expected an object"), ({"run_at": 0.9}, "regenerate_below"),
                         ({"run_at": 0.9, "regenerate_below": 0.1, "without_database": {"run_at": 2.0}},
                          "without_database: run_at")):
        (folder / "model.json").write_text(json.dumps({**meta, "policy": broken}))
        with pytest.raises(ModelFileError, match=f"policy: .*{says}") as caught:
            Scorer.load(folder)
        assert "\n" not in str(caught.value)


def test_the_shipped_model_has_a_policy_on_execution_labels(scorer):
    policy = scorer.policy
    assert policy.label == "execution_match" and policy.max_wrong == 0.05
    assert policy.measured["run_wrong"] <= 0.05 and policy.measured["queries"] > 10_000
    blind = policy.without_database  # chosen on the same queries scored without their databases
    assert blind.label == "execution_match" and blind.measured["queries"] == policy.measured["queries"]
    assert blind.measured["run_wrong"] <= 0.05 and blind.measured != policy.measured


def test_a_training_run_saves_its_policy(boosted_model):  # noqa: F811
    folder, objects = boosted_model
    saved = json.loads((folder / "model.json").read_text())["policy"]
    policy = Policy.from_dict(saved)
    assert policy.label == "execution_match"  # the demo has its databases
    scored_out_of_fold = (folder.parent / "predictions" / "test.jsonl").read_text().count("\n")
    assert saved["measured"]["queries"] == scored_out_of_fold < len(objects["table"].examples)
    if policy.run_at is not None:
        assert saved["measured"]["run_wrong"] <= policy.max_wrong
    assert Scorer.load(folder).policy == policy


@pytest.fixture(scope="module")
def dropout_model(tmp_path_factory):
    """A demo run whose folds are scored with and without their databases."""
    from tests.test_boosted import FAST, compose_cfg
    from train import train

    out = tmp_path_factory.mktemp("dropout_run")
    train(compose_cfg("train", [*FAST, "model.database=dropout"], out))
    return out


def test_a_run_with_and_without_databases_saves_a_policy_for_each(dropout_model):
    saved = json.loads((dropout_model / "model" / "model.json").read_text())["policy"]
    blind = saved["without_database"]
    assert blind is not None and blind["label"] == "execution_match"
    scored = (dropout_model / "predictions" / "test_without_database.jsonl").read_text().count("\n")
    assert blind["measured"]["queries"] == scored == saved["measured"]["queries"]
    # chosen on the confidences without databases: another curve, other shares
    assert blind["measured"] != saved["measured"]
    if blind["run_at"] is not None:
        assert blind["measured"]["run_wrong"] <= blind["max_wrong"]
    policy = Scorer.load(dropout_model / "model").policy
    assert policy.without_database == Policy.from_dict(blind) and policy.for_database(False) is policy.without_database


def test_the_policy_command_reads_the_predictions_without_databases(dropout_model, tmp_path):
    copy = tmp_path / "model"
    shutil.copytree(dropout_model / "model", copy)
    before = json.loads((copy / "model.json").read_text())["policy"]
    done = subprocess.run([sys.executable, "-m", "model.scoring.policy", "--model", str(copy), "--predictions",
                           str(dropout_model / "predictions" / "test.jsonl"), "--write"], check=False,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "scored without their databases: run at" in done.stdout
    after = json.loads((copy / "model.json").read_text())["policy"]
    # the command reprints what the run chose, from its files alone
    assert after["without_database"]["measured"] == before["without_database"]["measured"]
    assert after["without_database"]["run_at"] == before["without_database"]["run_at"]


def test_check_names_the_closest_stored_value(scorer, demo):
    database, _ = demo
    verdict = scorer.check(TYPO, question=QUESTION, database=database)
    assert verdict.action in ("review", "regenerate")
    assert verdict.look_here_first["text"] == "'Germani'"
    start, end = verdict.look_here_first["span"]
    assert TYPO[start:end] == "'Germani'"
    assert "the literal 'Germani' is not a value of suppliers.country; closest: 'Germany'" in verdict.feedback
    assert verdict.feedback.splitlines()[0].startswith("The query ")
    right = scorer.check("SELECT name FROM suppliers WHERE country = 'Germany'", question=QUESTION,
                         database=database)
    assert right.query_confidence > verdict.query_confidence
    assert not any("not a value of" in r for r in right.reasons)


def test_the_stored_values_named_are_read_again_when_the_file_changes(scorer, demo, tmp_path):
    """A long-running service: a value stored since the last check is no longer called missing."""
    import sqlite3

    database = tmp_path / "db.sqlite"
    shutil.copy(demo[0], database)
    assert "'Germani' is not a value of suppliers.country" in scorer.check(TYPO, database=database).feedback
    with sqlite3.connect(database) as conn:
        conn.execute("UPDATE suppliers SET country = 'Germani' WHERE country = 'Germany'")
    conn.close()
    assert "not a value of" not in scorer.check(TYPO, database=database).feedback


SHOP = {"products": ["id", "name", "price", "attrs"], "orders": ["id", "product_id", "ordered_at"]}


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    """A small shop: text, real, JSON and timestamp columns."""
    import sqlite3

    path = tmp_path_factory.mktemp("shop") / "shop.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript("""
            CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, price REAL, attrs TEXT);
            CREATE TABLE orders (id INTEGER PRIMARY KEY, product_id INTEGER, ordered_at TEXT);
            INSERT INTO products VALUES (1, 'Widget', 2.5, '{"color": "blue"}'), (2, 'Gadget', 5.0, '{"color": "red"}'),
                                        (3, 'it''s', 7.25, '{"color": "red"}');
            INSERT INTO orders VALUES (1, 1, '2024-01-05 10:00:00'), (2, 2, '2024-02-11 12:30:00');""")
    conn.close()
    return path


def literal_sentences(scorer, sql, database, dialect="sqlite"):
    """The stored-value sentence of each literal of ``sql``, whether or not the model gives the
    literal reasons (``check`` looks a literal up only then)."""
    from model.scoring.verdict import _literal_sentence

    scored = scorer.score(sql, schema=SHOP, database=database, dialect=dialect, reasons=False)
    found = (_literal_sentence(scored, n.index, database) for n in scored.nodes if n.kind == "value")
    return [s for s in found if s]


@pytest.mark.parametrize("dialect, sql", [
    ("sqlite", "SELECT strftime('%Y-%m', ordered_at), count(*) FROM orders GROUP BY 1"),
    ("sqlite", "SELECT substr(name, 1, 3), instr(name, 'g'), replace(name, 'a', 'b') FROM products"),
    ("sqlite", "SELECT json_extract(attrs, '$.color') FROM products"),
    ("sqlite", "SELECT date(ordered_at, '+1 day') FROM orders"),
    ("sqlite", "SELECT name || ', ' FROM products"),
    ("sqlite", "SELECT coalesce(name, 'none') FROM products"),
    ("sqlite", "SELECT name FROM products WHERE price + 1 = 3"),
    ("sqlite", "SELECT name FROM products WHERE price BETWEEN 1 AND 6 OR price > 3"),  # bounds, not values
    ("postgres", "SELECT date_trunc('month', ordered_at), count(*) FROM orders GROUP BY 1"),
    ("postgres", "SELECT to_char(ordered_at, 'YYYY-MM') FROM orders"),
    ("postgres", "SELECT string_agg(name, ', ') FROM products"),
    ("postgres", "SELECT name FROM products WHERE attrs->>'color' = 'red'"),
    ("postgres", "SELECT count(*) FROM orders WHERE EXTRACT(year FROM ordered_at) = 2024"),
    ("postgres", "SELECT split_part(name, 'g', 1) FROM products"),
])
def test_a_literal_not_compared_with_a_columns_values_is_never_called_not_a_value(scorer, shop, dialect, sql):
    """A format, a date part, a JSON path, a separator or a range's bound is no stored value: a
    probe on PostgreSQL got "the literal 'month' is not a value of orders.ordered_at", "the
    literal 'Y-%m' ..." (text not in the query), "the literal '$.color' ..."."""
    assert literal_sentences(scorer, sql, shop, dialect) == []


@pytest.mark.parametrize("sql, sentence", [
    ("SELECT id FROM products WHERE name = 'Widgit'", "the literal 'Widgit' is not a value of products.name; closest: 'Widget'"),
    ("SELECT id FROM products WHERE 'Widgit' = name", "the literal 'Widgit' is not a value of products.name; closest: 'Widget'"),
    ("SELECT id FROM products WHERE name <> 'Widgit'", "the literal 'Widgit' is not a value of products.name; closest: 'Widget'"),
    ("SELECT id FROM products WHERE name IN ('Gadget', 'Widgit')",
     "the literal 'Widgit' is not a value of products.name; closest: 'Widget'"),
    ("SELECT id FROM products WHERE name NOT IN ('Widgit')",
     "the literal 'Widgit' is not a value of products.name; closest: 'Widget'"),
    ("SELECT id FROM products WHERE lower(name) = 'widgit'",
     "the literal 'widgit' is not a value of lower(products.name); closest: 'widget'"),
    ("SELECT id FROM products WHERE lower(name) = 'Widget'",  # never equal: its capital W
     "the literal 'Widget' is not a value of lower(products.name); closest: 'widget', 'gadget'"),
    ("SELECT id FROM products WHERE name LIKE '% Wx %'", "the pattern '% Wx %' matches no value of products.name"),
    ("SELECT id FROM products WHERE name LIKE '%Widgt%'",
     "the pattern '%Widgt%' matches no value of products.name; closest: 'Widget'"),
    ("SELECT id FROM products WHERE name = 'Widget'", None),
    ("SELECT id FROM products WHERE lower(trim(name)) = 'widget'", None),
    ("SELECT id FROM products WHERE name LIKE '%idg%' OR name LIKE 'gadget' OR name GLOB 'G*'", None),
    ("SELECT id FROM products WHERE name = 'it''s'", None),  # stored as it's
    ("SELECT id FROM products WHERE price = 5 OR price IN (7.25)", None),  # stored as 5.0
])
def test_a_literal_compared_with_a_column_is_looked_up_as_written(scorer, shop, sql, sentence):
    """=, <>, IN, LIKE (a pattern: "matches no value"), through lower/upper/trim, the column on
    either side; the literal quoted as the query writes it."""
    assert literal_sentences(scorer, sql, shop) == ([sentence] if sentence else [])


def test_a_value_beyond_the_values_read_is_not_called_missing(scorer, tmp_path):
    """The feedback reads at most 5,000 distinct values of the first 100,000 rows: a literal
    not among them is asked of the whole table before it is called no value of it."""
    import sqlite3

    database = tmp_path / "people.sqlite"
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT)")
        conn.executemany("INSERT INTO people VALUES (?, ?)", [(i, f"person {i:05d}") for i in range(6000)])
    conn.close()
    people = {"people": ["id", "name"]}

    def sentences(sql):
        from model.scoring.verdict import _literal_sentence

        scored = scorer.score(sql, schema=people, database=database, reasons=False)
        return [s for s in (_literal_sentence(scored, n.index, database) for n in scored.nodes) if s]

    for stored in ("name = 'person 05999'", "name IN ('person 05500')", "name LIKE '%05999'", "upper(name) = 'PERSON 05999'"):
        assert sentences(f"SELECT id FROM people WHERE {stored}") == [], stored
    assert sentences("SELECT id FROM people WHERE name = 'person 6000'")[0].startswith(
        "the literal 'person 6000' is not a value of people.name; closest: ")
    assert sentences("SELECT id FROM people WHERE name LIKE '%06001'") == [
        "the pattern '%06001' matches no value of people.name"]


def test_a_verdict_looks_up_few_literals_in_the_whole_table(scorer, tmp_path, monkeypatch):
    """Each literal the values read lack is asked of the whole table (up to 2 s each): a query
    of hundreds of them could hold one check for minutes. A verdict asks at most WHOLE_TABLE_LOOKUPS."""
    import sqlite3

    from model.scoring import verdict as module

    database = tmp_path / "people.sqlite"
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT)")
        conn.executemany("INSERT INTO people VALUES (?, ?)", [(i, f"person {i:05d}") for i in range(100)])
    conn.close()
    asked = []  # each look-up timing out (unknown: no sentence, the next literal asked)
    monkeypatch.setattr(module, "_stored_in", lambda *args: asked.append(args))
    missing = " OR ".join(f"name = 'nobody {i}'" for i in range(30))
    scored = scorer.score(f"SELECT id FROM people WHERE {missing}", schema={"people": ["id", "name"]},
                          database=database)
    left = [module.WHOLE_TABLE_LOOKUPS]  # (what _reason_sentences gives each verdict)
    for node in scored.nodes:
        assert module._literal_sentence(scored, node.index, database, left) is None
    assert len(asked) == module.WHOLE_TABLE_LOOKUPS and left == [0]


def test_check_reads_no_values_for_a_literal_it_is_not_compared_with(scorer, shop, monkeypatch):
    """The check read the distinct values (whole JSON documents) of a column given to a function."""
    from model.scoring import verdict as module

    read = []
    monkeypatch.setattr(module, "column_values", lambda *a: read.append(a[1:]) or ())
    for sql in ("SELECT json_extract(attrs, '$.color') FROM products",
                "SELECT strftime('%Y-%m', ordered_at), count(*) FROM orders GROUP BY 1"):
        verdict = scorer.check(sql, question="Colours and months?", database=shop)
        assert not any("not a value of" in r or "'Y-%m'" in r or "'$.color'" in r for r in verdict.reasons)
    assert read == []
    assert literal_sentences(scorer, "SELECT id FROM products WHERE attrs = '{}'", shop) and read == [("products", "attrs")]


def test_a_literal_in_a_reason_is_quoted_as_written():
    from model.scoring.reasons import literal_of

    assert [literal_of(x) for x in ("', '", "'%Y-%m'", "'% Wx %'", '"dq"', "2024")] == [
        "', '", "'%Y-%m'", "'% Wx %'", "'dq'", "2024"]


def test_a_policy_of_ones_own_states_its_thresholds_not_the_shipped_target(scorer, demo):
    verdict = scorer.check("SELECT count(*) FROM suppliers", database=demo[0], policy=Policy(0.0, 0.0))
    assert verdict.action == "run"
    assert verdict.policy == "thresholds given (run at 0.00 or above, regenerate below 0.00), not chosen on a measured curve"
    assert "out of fold" in scorer.check("SELECT count(*) FROM suppliers", database=demo[0]).policy


def test_check_many_gives_each_rows_verdict_as_check_does(scorer, demo):
    """Scorer.check_many: a verdict per row, as check gives it (its literals looked up in the
    row's database), a row that cannot be scored its RowError, in order; a policy of one's own."""
    from model.scoring import RowError

    database, _ = demo
    rows = [{"sql": TYPO, "question": QUESTION, "database": database},
            {"sql": "SELECT * FROM (", "database": database},
            {"sql": "SELECT count(*) FROM suppliers", "question": "How many suppliers?", "database": database}]
    typo, bad, count = scorer.check_many(rows)
    assert typo.to_dict() == scorer.check(TYPO, question=QUESTION, database=database).to_dict()
    assert isinstance(bad, RowError) and "cannot parse" in bad.message
    assert count.query_confidence > typo.query_confidence
    assert {v.action for v in scorer.check_many(rows[::2], policy=Policy(run_at=0.0, regenerate_below=0.0))} == {"run"}
    for not_rows in (None, rows[0]):  # as score_many says it (a dict's keys were read as rows)
        with pytest.raises(TypeError, match="rows: expected an iterable of rows"):
            scorer.check_many(not_rows)


def test_actions_follow_the_policy_and_need_a_database_to_run(scorer, demo):
    database, tables = demo
    schema = next(t for t in tables if t["db_id"] == DB)
    everything = Policy(run_at=0.0, regenerate_below=0.0)
    assert scorer.check(TYPO, question=QUESTION, database=database, policy=everything).action == "run"
    without = scorer.check(TYPO, question=QUESTION, schema=schema, policy=everything)
    assert without.action == "review" and any("without its database" in r for r in without.reasons)
    # a policy with thresholds for queries scored without their database applies those
    blind = Policy(0.0, 0.0, without_database=Policy(None, 0.0))
    assert scorer.check(TYPO, question=QUESTION, database=database, policy=blind).action == "run"
    held = scorer.check(TYPO, question=QUESTION, schema=schema, policy=blind)
    assert held.action == "review" and not any("without its database" in r for r in held.reasons)
    assert "scored without their database" in held.policy
    runs = scorer.check(TYPO, question=QUESTION, schema=schema, policy=Policy(None, 0.0, without_database=everything))
    assert runs.action == "run"
    back = scorer.check(TYPO, question=QUESTION, database=database, policy=Policy(None, 1.0))
    assert back.action == "regenerate" and back.feedback.endswith("Write the query again, fixing these.")
    assert back.to_dict()["action"] == "regenerate" and "regenerate" in str(back)


@pytest.mark.parametrize("sql", ["SELECT 1", "SELECT 'Poland'"])
def test_a_query_that_reads_no_table_never_runs_unseen(scorer, demo, sql):
    """The shipped model gave `SELECT 1` about 0.95 and the verdict `run`."""
    database, _ = demo
    verdict = scorer.check(sql, question=QUESTION, database=database, policy=Policy(run_at=0.0, regenerate_below=0.0))
    assert verdict.action == "review" and any("reads no table" in r for r in verdict.reasons)
    assert "- it reads no table" in verdict.feedback  # (what the model that wrote it reads)
    assert scorer.check(TYPO, question=QUESTION, database=database, policy=Policy(0.0, 0.0)).action == "run"


def test_the_guard_runs_only_what_the_verdict_lets_run(scorer, demo):
    import sqlite3

    database, _ = demo
    ran = []

    def run_sql(sql):
        ran.append(sql)
        with sqlite3.connect(database) as conn:
            return conn.execute(sql).fetchall()

    allowed = guard(run_sql, scorer=scorer, database=database)
    sure = scorer.check("SELECT count(*) FROM suppliers", question="How many suppliers are there?",
                        database=database)
    held = scorer.check(TYPO, question=QUESTION, database=database)
    assert sure.action == "run" and held.action != "run"
    assert allowed("SELECT count(*) FROM suppliers", question="How many suppliers are there?")[0][0] > 0
    with pytest.raises(QueryHeld, match="query not run") as caught:
        allowed(TYPO, question=QUESTION)
    assert caught.value.verdict.action == held.action and ran == ["SELECT count(*) FROM suppliers"]

    @guard(scorer=scorer, database=database, on_hold=lambda v: ("held", v.action))
    def run_quietly(sql):
        return run_sql(sql)

    assert run_quietly(TYPO, question=QUESTION) == ("held", held.action)

    hurried = guard(run_sql, scorer=scorer, database=database, timeout_s=1e-9)  # each check's bound
    with pytest.raises(TimeoutError):
        hurried("SELECT count(*) FROM suppliers", question="How many suppliers are there?")  # not run
    with pytest.raises(rat.RATError, match="not a query"):  # no verdict: raised, not handed to on_hold
        run_quietly("DROP TABLE suppliers", question=QUESTION)
    assert run_quietly.__name__ == "run_quietly" and len(ran) == 1


def test_a_policy_or_a_guard_built_wrong_is_one_line_at_once(scorer, demo):
    import rat

    database, _ = demo
    for values, says in (((2.0, 0.1), "run_at"), ((0.1, 0.9), "above run_at"), (("0.5", 0.1), "run_at")):
        with pytest.raises(ValueError, match=says):
            Policy(*values)
    with pytest.raises(TypeError, match="policy: expected a model.scoring.verdict.Policy, found str"):
        scorer.check("SELECT count(*) FROM suppliers", database=database, policy="strict")
    for kwargs, error, says in (({"scorer": "pretrained"}, UsageError, "guard needs scorer=.*found str"),
                                ({"scorer": scorer, "on_hold": "print"}, TypeError, "on_hold must be callable"),
                                ({"scorer": scorer, "policy": {"run_at": 0.9}}, TypeError, "policy must be a Policy"),
                                ({"scorer": scorer, "dialect": "oracle"}, rat.RATError, "unknown dialect 'oracle'"),
                                ({"scorer": scorer, "timeout_s": 0}, ValueError, "guard: timeout_s: expected a positive")):
        with pytest.raises(error, match=says):
            guard(print, **kwargs)
    with pytest.raises(TypeError, match="run_sql must be callable"):
        guard("SELECT 1", scorer=scorer)


def test_a_model_without_a_policy_says_so(boosted_model, tmp_path):  # noqa: F811
    folder, _ = boosted_model
    copy = tmp_path / "model"
    shutil.copytree(folder, copy)
    meta = json.loads((copy / "model.json").read_text())
    meta.pop("policy")
    (copy / "model.json").write_text(json.dumps(meta))
    with pytest.raises(UsageError, match="no policy saved"):
        Scorer.load(copy).check("SELECT 1")


def test_the_policy_command_chooses_and_writes(boosted_model, tmp_path):  # noqa: F811
    folder, _ = boosted_model
    copy = tmp_path / "model"
    shutil.copytree(folder, copy)
    before = json.loads((copy / "model.json").read_text())
    predictions = folder.parent / "predictions" / "test.jsonl"
    done = subprocess.run([sys.executable, "-m", "model.scoring.policy", "--model", str(copy), "--predictions",
                           str(predictions), "--max-wrong", "0.1", "--write"], check=False, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "at most 10% wrong among the queries run" in done.stdout and "out of fold: queries" in done.stdout
    after = json.loads((copy / "model.json").read_text())
    assert after["policy"]["max_wrong"] == 0.1
    assert {k: v for k, v in after.items() if k != "policy"} == {k: v for k, v in before.items() if k != "policy"}
    bad = subprocess.run([sys.executable, "-m", "model.scoring.policy", "--model", str(copy), "--predictions",
                          str(tmp_path / "none.jsonl")], check=False, capture_output=True, text=True,
                         timeout=300)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no such file" in bad.stderr
