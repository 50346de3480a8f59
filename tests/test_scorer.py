"""Score your own SQL: a model=features run saves a model that Scorer loads (never through
pickle), reproduces the run's in-sample numbers, scores with and without a database, gives
faithful reasons, and refuses a model it cannot trust in one line."""

import hashlib
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import rat
from model import metrics as M
from model.nodes.estimator import BoostedNodeModel, kind_group
from model.scoring import ModelFileError, RowError, Scorer
from model.scoring.reasons import EXPLAINABLE, ReasonContext, explain_nodes, render
from model.scoring.scorer import PRETRAINED
from model.train import train
from tests.test_boosted import FAST, compose_cfg


@pytest.fixture(scope="module")
def boosted_model(tmp_path_factory):
    out = tmp_path_factory.mktemp("scorer_run")
    _, objects = train(compose_cfg("train", FAST, out))
    return out / "model", objects


def _rows(table, indices, with_database=True):
    from model.data.datasets import database_path, load_schemas

    schemas = load_schemas(table.root)
    return [{"sql": table.examples[k].sql, "question": table.examples[k].question,
             "db_id": table.examples[k].db_id, "schema": schemas[table.examples[k].db_id],
             "database": database_path(table.root, table.examples[k].db_id) if with_database else None}
            for k in indices]


def test_run_saves_a_model_directory_without_pickle(boosted_model):
    folder, objects = boosted_model
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["model.json", "node_model.skops", "site_model.skops"]
    meta = json.loads((folder / "model.json").read_text())
    table = objects["table"]
    assert meta["features"] == list(table.names) and meta["feature_version"].startswith("nf-")
    assert meta["trained_on"]["examples"] == len(table.examples)
    assert set(meta["trained_on"]["systems"]) == {e.system for e in table.examples}
    assert meta["trained_on"]["labels"] == table.labels == "execution"  # the demo has its databases
    assert 0.5 < meta["metrics"]["out_of_fold"]["test/auc"] <= 1
    assert set(meta["typical"]) == {"table", "column", "value", "operator"}


def assert_reproduces_in_sample(folder, table) -> list:
    """Every example the run trained on, scored by the reloaded model: the run's in-sample node
    AUC and Brier score again. Returns the results."""
    indices = range(len(table.examples))
    results = Scorer.load(folder).score_many(_rows(table, indices), progress=False, spans=False)
    assert not [r for r in results if isinstance(r, RowError)]
    conf = np.concatenate([[n.confidence for n in r.nodes] for r in results])
    labels = np.concatenate([table.examples[k].node_labels for k in indices])
    in_sample = json.loads((folder / "model.json").read_text())["metrics"]["in_sample"]
    assert M.auc(conf, labels) == pytest.approx(in_sample["auc"], abs=1e-9)
    assert M.brier(conf, labels) == pytest.approx(in_sample["brier"], abs=1e-6)
    return results


def test_reloaded_model_reproduces_the_runs_in_sample_numbers(boosted_model):
    folder, objects = boosted_model
    assert_reproduces_in_sample(folder, objects["table"])


def test_compiled_trees_give_scikit_learns_probabilities_exactly(boosted_model):
    from model.nodes.compiled import CompiledTrees
    from model.nodes.sites import with_context

    folder, objects = boosted_model
    table = objects["table"]
    saved = BoostedNodeModel.load(folder)
    x = np.vstack(table.features[:60])
    odd = x.copy()
    odd[::3, 0] = 997.0  # a node kind never seen in training
    odd[::4, 1] = np.nan  # no parent kind
    odd[::5, 5] = np.nan  # a missing numeric feature
    assert saved.site_context  # the site head reads the node model's confidences beside the features
    arities = [e.node_arity for e in table.examples[:60]]
    for model, context in ((saved.node_model_, False), (saved.site_model_, True)):
        for rows in (x, odd):
            if context:
                rows = with_context(rows, saved.node_model_.predict_proba(rows)[:, 1], arities, saved.features_)
            for part in (rows, rows[:1]):
                assert np.array_equal(CompiledTrees(model).predict_proba1(part), model.predict_proba(part)[:, 1])


def test_evidence_is_read_as_part_of_the_question(boosted_model):
    folder, objects = boosted_model
    table = objects["table"]
    k, column = next((k, n) for k, e in enumerate(table.examples)
                     for n, kind in zip(e.node_names, e.node_types) if kind == "column" and "*" not in n)
    row = {**_rows(table, [k], with_database=False)[0], "question": "Which ones?"}
    scorer = Scorer.load(folder)
    plain = scorer.score(**row)
    hinted = scorer.score(**row, evidence=f"it refers to {column.split('.')[-1].replace('_', ' ')}")
    mentioned = list(scorer.saved.features_).index("name_word_share")
    assert np.nanmax(hinted.features[:, mentioned]) > np.nanmax(np.nan_to_num(plain.features[:, mentioned]))


def test_worker_processes_give_the_same_scores_in_the_same_order(boosted_model):
    folder, objects = boosted_model
    table = objects["table"]
    rows = _rows(table, range(40))
    rows[7] = {**rows[7], "sql": "SELECT * FROM ("}  # a bad row stays in its place
    scorer = Scorer.load(folder)
    alone = scorer.score_many(rows, progress=False, batch_size=8, workers=1)
    forked = scorer.score_many(rows, progress=False, batch_size=8, workers=2)
    assert isinstance(forked[7], RowError) and forked[7].index == 7 == alone[7].index
    assert [r.to_dict() for r in forked if not isinstance(r, RowError)] == \
        [r.to_dict() for r in alone if not isinstance(r, RowError)]


def test_rows_on_an_open_database_are_scored_in_batches_with_workers_asked_for(boosted_model):
    """A URL (rat-score --database) is opened once and held by every row: more than one batch
    with worker processes tried to send its connection to them (`cannot pickle '_thread.lock'`)."""
    folder, objects = boosted_model
    rows = [{**row, "database": f"sqlite:///{row['database']}"} for row in _rows(objects["table"], range(12))]
    scorer = Scorer.load(folder)
    alone = scorer.score_many(rows, progress=False, batch_size=4, workers=1)
    batched = scorer.score_many(rows, progress=False, batch_size=4, workers=2)
    assert not any(isinstance(r, RowError) for r in batched)
    assert [r.to_dict() for r in batched] == [r.to_dict() for r in alone]


def test_scores_without_a_database_and_never_changes_one(boosted_model):
    folder, objects = boosted_model
    table = objects["table"]
    with_db, without = (_rows(table, [0], flag)[0] for flag in (True, False))
    before = hashlib.sha256(Path(with_db["database"]).read_bytes()).hexdigest()
    scorer = Scorer.load(folder)
    a, b = scorer.score(**with_db), scorer.score(**without)
    assert [n.label for n in a.nodes] == [n.label for n in b.nodes]
    assert all(0 <= n.confidence <= 1 for n in a.nodes + b.nodes)
    assert [n.confidence for n in a.nodes] != [n.confidence for n in b.nodes]  # db features differ
    table_name = next(iter(with_db["schema"].tables))
    scorer.score_many([{**with_db, "sql": f"DELETE FROM {table_name}"},
                       {**with_db, "sql": f"SELECT * FROM {table_name}; DROP TABLE {table_name}"}],
                      progress=False)
    assert hashlib.sha256(Path(with_db["database"]).read_bytes()).hexdigest() == before


def test_look_here_first_points_into_the_written_sql(boosted_model):
    scored = Scorer.load(boosted_model[0]).score(
        "SELECT T1.name FROM singer AS T1 WHERE T1.age > 20", question="Singers older than 20?",
        schema={"singer": ["singer_id", "name", "age"]})
    look = scored.nodes[scored.look_here_first]
    assert look.span is not None and scored.sql[look.span[0]:look.span[1]] == look.text
    assert scored.runner_up is not None and scored.runner_up != scored.look_here_first
    assert max(n.site_score for n in scored.nodes) == look.site_score
    row = scored.to_dict()
    assert [n["label"] for n in row["nodes"]] == [n.label for n in rat.to_tree(scored.sql).postorder()]


def test_look_here_first_says_how_often_such_a_pointer_was_right(boosted_model):
    """The run saves, out of fold, how often a pointer scored in each site-score bin was on an
    error site (with and without databases where it scored both); Scorer says it beside "look
    here first", from the bins of the way the row was scored; an adapted model, whose site head
    is fitted again, does not carry it."""
    from model.scoring.adapt import _adapted_info

    folder, _ = boosted_model
    bins = json.loads((folder / "model.json").read_text())["pointer_reliability"]["with_database"]
    assert sum(b["n"] for b in bins) > 0 and all(0 <= b["top1"] <= 1 and b["lo"] < b["hi"] for b in bins)
    scorer = Scorer.load(folder)
    one = [{"lo": 0.0, "hi": 1.0, "n": 4, "mean_score": 0.5, "top1": 0.25}]
    scorer.saved.info_["pointer_reliability"] = {"with_database": one,
                                                "without_database": [{**one[0], "top1": 0.75}]}
    query = {"sql": "SELECT T1.name FROM singer AS T1 WHERE T1.age > 20", "question": "Singers older than 20?",
             "schema": {"singer": ["singer_id", "name", "age"]}}
    scored = scorer.score(**query)  # no database: the bins measured without one
    assert scored.look_here_reliability == 0.75 and scored.to_dict()["look_here_reliability"] == 0.75
    assert "site score" in str(scored) and "error site in 75% of wrong queries, out of fold" in str(scored)
    del scorer.saved.info_["pointer_reliability"]["without_database"]  # a model scored with databases only
    assert scorer.score(**query).look_here_reliability == 0.25
    scorer.saved.info_.pop("pointer_reliability")
    assert scorer.score(**query).look_here_reliability is None and "out of fold" not in str(scorer.score(**query))
    model = Scorer.load(folder).saved
    info = _adapted_info(model, model, {"queries": 1})
    assert "pointer_reliability" not in info and info["base_model"]["pointer_reliability"]["with_database"] == bins


def test_a_misspelt_field_is_the_rows_error_a_field_of_the_callers_own_is_passed_over(boosted_model):
    """``databse`` was read as no database given (scored as without one, silently), where
    rat-serve, rat-mcp and the LangChain tool refuse it; a DataFrame record's own columns stay fine."""
    sql = "SELECT 1 FROM t"
    results = Scorer.load(boosted_model[0]).score_many(
        [{"sql": sql, "databse": "x.sqlite"}, {"sql": sql, "Question": "How many?"},
         {"sql": sql, "latency_ms": 12, "model": "gpt", "id": 3},
         {"sql": sql, "SQL": "SELECT 2 FROM t", "database_id": 7, "questions": [], "difficulty": "hard"}],
        progress=False)  # (BIRD's gold `SQL` beside `sql`, names holding a field's: the caller's own)
    assert [type(r).__name__ for r in results] == ["RowError", "RowError", "ScoredQuery", "ScoredQuery"]
    assert results[0].message == "'databse': not a field read (did you mean 'database'?)"
    assert results[1].message == "'Question': not a field read (did you mean 'question'?)"


def test_a_bad_row_is_reported_and_the_batch_goes_on(boosted_model):
    results = Scorer.load(boosted_model[0]).score_many(
        [{"sql": "SELECT 1 FROM t"}, {"sql": "SELEC x FRM"}, {"question": "no sql"}, {"sql": "SELECT 2 FROM t"},
         {"sql": "SELECT 3 FROM t", "question": "t " * 2001}, {"sql": "SELECT 4 FROM t", "evidence": "x" * 4001}],
        progress=False)
    assert [type(r).__name__ for r in results] == ["ScoredQuery", "RowError", "RowError", "ScoredQuery",
                                                  "RowError", "RowError"]
    assert "cannot parse" in results[1].message and results[2].message == "no SQL"
    assert results[4].message == "question: 4002 characters; at most 4000"  # its cost is bounded
    assert results[5].message == "evidence: 4001 characters; at most 4000"


def test_a_bug_in_rat_on_one_row_is_that_rows_error_and_the_rest_are_scored(boosted_model, monkeypatch, capsys):
    """rat raising InternalError (its own bug, e.g. once on `SELECT a.(*) FROM t`) lost the whole
    batch: rat-score printed a traceback and wrote nothing, rat-serve answered 500. It is that
    row's RowError (kind "internal"), the batch goes on; one query is one line, exit 2."""
    from model.scoring.cli import main
    from model.synth.demo import demo_root
    from rat.errors import InternalError

    sql_spans = rat.sql_spans

    def buggy(sql, *args, **kwargs):
        if "BUG" in sql:
            raise InternalError("canonicalise", AttributeError("'Star' object has no attribute 'lower'"), sql)
        return sql_spans(sql, *args, **kwargs)

    monkeypatch.setattr(rat, "sql_spans", buggy)
    scorer = Scorer.load(boosted_model[0])
    results = scorer.score_many([{"sql": "SELECT 1 FROM t"}, {"sql": "SELECT BUG FROM t"}, {"sql": "SELECT 2 FROM t"}],
                                progress=False)
    assert [type(r).__name__ for r in results] == ["ScoredQuery", "RowError", "ScoredQuery"]
    assert results[1].kind == "internal" and results[1].message.startswith("bug in rat: canonicalise raised")
    with pytest.raises(RuntimeError, match="^bug in rat"):
        scorer.score("SELECT BUG FROM t")
    assert main(["--data-root", str(demo_root()), "--db-id", "supply_chain", "--sql", "SELECT BUG FROM suppliers"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rat-score: error: --sql: bug in rat") and len(err.strip().splitlines()) == 1


def test_reasons_are_the_features_whose_typical_value_raises_the_node_most(boosted_model):
    folder, objects = boosted_model
    saved = BoostedNodeModel.load(folder)
    table = objects["table"]
    k = next(k for k, e in enumerate(table.examples) if not e.execution_match)
    e, x = table.examples[k], table.features[k]
    base = saved.node_confidence(x)
    nodes = list(range(len(base)))
    contexts = [ReasonContext(n, t) for n, t in zip(e.node_names, e.node_types)]
    groups = [kind_group(t) for t in e.node_types]
    reasons = explain_nodes(saved, x, nodes, contexts, groups, base)
    assert any(reasons.values())
    col = {n: j for j, n in enumerate(saved.features_)}
    for i, found in reasons.items():
        assert len(found) <= 3 and [r.gain for r in found] == sorted((r.gain for r in found), reverse=True)
        for r in found:
            assert r.feature in EXPLAINABLE and r.gain >= 0.01 and r.text
            row = x[i].copy()
            row[col[r.feature]] = saved.typical_[groups[i]][r.feature]
            assert saved.node_confidence(row[None])[0] - base[i] == pytest.approx(r.gain)


def test_every_explainable_feature_has_a_sentence():
    ctx = ReasonContext("schools.county", "column", None)
    for name in EXPLAINABLE:
        text = render(name, 0.0, ctx)
        assert text and ": 0" not in text, name  # the fallback prints "doc: value"


def test_a_model_of_another_feature_version_refuses_to_load(boosted_model, tmp_path):
    copy = tmp_path / "m"
    shutil.copytree(boosted_model[0], copy)
    meta = json.loads((copy / "model.json").read_text())
    meta["feature_version"] = "nf-0"
    (copy / "model.json").write_text(json.dumps(meta))
    with pytest.raises(ModelFileError, match="saved with node features 'nf-0'") as error:
        Scorer.load(copy)
    assert "\n" not in str(error.value)
    meta["feature_version"] = "nf-4"  # nf-5 changed where two kinds of column are looked up only
    (copy / "model.json").write_text(json.dumps(meta))
    assert Scorer.load(copy).score("SELECT 1").nodes


class Planted:  # a type no model file of ours refers to
    def __reduce__(self):
        return (print, ("code ran",))


def test_a_model_file_with_untrusted_types_is_refused(boosted_model, tmp_path):
    import skops.io as sio

    copy = tmp_path / "m"
    shutil.copytree(boosted_model[0], copy)
    sio.dump({"x": Planted()}, copy / "node_model.skops")
    with pytest.raises(ModelFileError, match="types this project does not trust"):
        Scorer.load(copy)
    (copy / "node_model.skops").write_bytes(b"not a zip")
    with pytest.raises(ModelFileError, match="not a readable skops file"):
        Scorer.load(copy)


@pytest.mark.parametrize(("change", "says"), [
    (lambda m: {"features": m["features"][:-1]}, "features: 63 names, but the node model reads 64"),
    (lambda m: {"pointer_reliability": "x"}, "pointer_reliability: expected"),
    (lambda m: {"pointer_reliability": {"with_database": [{"lo": 0}]}}, "pointer_reliability: expected"),
    (lambda m: {"quantiles": {"count": 5}}, "quantiles: cannot be read"),
    (lambda m: {"config": "strict"}, "config: expected an object"),
    (lambda m: {"config": {**m["config"], "database": "sometimes"}}, "config: model.database must be one of")])
def test_a_tampered_model_json_is_refused_when_loaded_not_when_scoring(change, says, tmp_path):
    copy = tmp_path / "m"
    shutil.copytree(PRETRAINED["spider"], copy)
    meta = json.loads((copy / "model.json").read_text())
    (copy / "model.json").write_text(json.dumps({**meta, **change(meta)}))
    with pytest.raises(ModelFileError, match=says):
        Scorer.load(copy)


SINGER = {"singer": ["singer_id", "name", "country"]}
FRANCE = "SELECT name FROM singer WHERE country = 'France'"


@pytest.fixture(scope="module")
def singers(tmp_path_factory) -> Path:
    import sqlite3

    path = tmp_path_factory.mktemp("singers") / "singers.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT)")
        conn.executemany("INSERT INTO singer VALUES (?, ?, ?)", [(1, "Ann", "France"), (2, "Bo", "Spain")])
    return path


def test_a_query_with_parameters_is_scored_without_running_it(singers):
    """`$1`, `?`, `:id`: values given only when the query runs. Scored, not run (its results
    unknown, as without a database), and said so; a query without them runs."""
    scorer = Scorer.pretrained()
    for sql, dialect in (("SELECT name FROM singer WHERE country = ?", "sqlite"),
                         ("SELECT name FROM singer WHERE country = :country", "sqlite"),
                         ("SELECT name FROM singer WHERE country = $1", "postgres")):
        scored = scorer.score(sql, question="Singers from France?", database=singers, dialect=dialect)
        parameter = next(n for n in scored.nodes if n.label in ("?", ":country", "$1"))
        assert parameter.kind == "value"
        assert scored.execution_error.startswith("it has parameters") and parameter.label in scored.execution_error
        assert not any(r.feature.startswith("exec_") for n in scored.nodes for r in n.reasons)
    assert scorer.score(FRANCE, question="Singers from France?", database=singers).execution_error is None


def test_an_operator_the_model_has_no_code_for_is_marked_unfamiliar(singers):
    """`upper()`, `OR`: read by the node features as one unknown kind; those nodes (and only
    those) are marked, in the row and the printout."""
    from model.nodes.features import known_kind
    from model.scoring.scorer import UNFAMILIAR

    scored = Scorer.pretrained().score("SELECT upper(name) FROM singer WHERE country = 'France' OR singer_id = 2",
                                       question="Names of singers from France, or singer 2?", database=singers)
    marked = {n.kind for n in scored.nodes if n.unfamiliar}
    assert marked == {"Upper", "Or"} and all(known_kind(n.kind) for n in scored.nodes if not n.unfamiliar)
    row = scored.to_dict()
    assert [n["unfamiliar"] for n in row["nodes"]] == [n.kind in marked for n in scored.nodes]
    assert str(scored).count("· " + UNFAMILIAR.format(kind="Or")) == 1
    plain = Scorer.pretrained().score(FRANCE, question="Singers from France?", database=singers)
    assert not any(n.unfamiliar for n in plain.nodes) and "does not know" not in str(plain)


def test_each_bad_row_is_one_error_of_its_kind_and_score_raises_it(singers, tmp_path):
    from model.data.databases import DatabaseError

    scorer = Scorer.pretrained()
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database")
    rows = [{"sql": FRANCE, "schema": SINGER}, FRANCE, None, {"sql": FRANCE, "question": 5},
            {"sql": 5}, {"sql": FRANCE, "schema": {"singer": "name"}},
            {"sql": FRANCE, "schema": {"table_names_original": ["singer"]}},
            {"sql": FRANCE, "database": tmp_path / "typo.sqlite"}, {"sql": FRANCE, "database": text},
            {"sql": FRANCE, "database": tmp_path}, {"sql": FRANCE, "database": 5}, {"sql": "SELEC x"},
            {"sql": FRANCE, "schema": SINGER, "database": singers}]
    results = scorer.score_many(rows, progress=False)
    assert [type(r).__name__ for r in results] == ["ScoredQuery"] + ["RowError"] * 11 + ["ScoredQuery"]
    said = [(r.kind, r.message) for r in results[1:-1]]
    assert said[:5] == [("type", "expected a row (a mapping with 'sql'), found str"),
                        ("type", "expected a row (a mapping with 'sql'), found NoneType"),
                        ("type", "question: expected a string, found int"), ("type", "sql: expected a string, found int"),
                        ("type", "schema: table 'singer': expected a list of column names, found str")]
    assert said[5] == ("value", "schema: the tables.json entry has no 'column_names_original'")
    assert said[6] == ("database", f"{tmp_path / 'typo.sqlite'}: no such database file")
    assert said[7][0] == "database" and "cannot be read as a SQLite database" in said[7][1]
    assert said[8] == ("database", f"{tmp_path}: not a file") and said[9][0] == "database"
    assert said[10][0] == "sql" and not (tmp_path / "typo.sqlite").exists()
    assert results[-1].with_database
    # paths the system cannot open, and SQL that once reached a bug of rat's: rows of their own
    odd = scorer.score_many([{"sql": FRANCE, "schema": SINGER, "database": d} for d in ("x" * 5000, "a\x00b", "\ud800")]
                            + [{"sql": "SELECT a FROM t JOIN s USING GROUP BY a"}, {"sql": FRANCE, "schema": SINGER}],
                            progress=False)
    assert [getattr(r, "kind", None) for r in odd] == ["database"] * 3 + ["sql", None]
    assert odd[0].message.startswith("xxx") and "not a path that can be read (OSError" in odd[0].message
    assert odd[3].message.startswith("cannot parse (JOIN .. USING without its columns)")
    for row, error in ((rows[7], DatabaseError), (rows[5], TypeError), (rows[11], rat.RATError)):
        with pytest.raises(error):
            scorer.score(**row)
    for bad in ({"batch_size": 0}, {"batch_size": -1}, {"max_nodes": "5"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            scorer.score_many(rows[:1], progress=False, **bad)
    with pytest.raises(TypeError, match="score\\(\\) scores one query"):
        scorer.score_many({"sql": FRANCE})
    for call, error in ((lambda: Scorer.load(None), TypeError), (lambda: Scorer.pretrained(["spider"]), ModelFileError),
                        (lambda: scorer.score(FRANCE, timeout_s=0), ValueError)):
        with pytest.raises(error):
            call()


def test_a_schema_without_tables_is_refused_not_scored_against_nothing(singers):
    """schema={} (a schema that failed to load) scored every query near 0, even with a database
    whose own schema it hid: silent 'regenerate' verdicts."""
    scorer = Scorer.pretrained()
    for call in (lambda: scorer.score(FRANCE, schema={}), lambda: scorer.score(FRANCE, schema={}, database=singers),
                 lambda: scorer.check(FRANCE, schema={}, database=singers),
                 lambda: scorer.choose([FRANCE, FRANCE], schema={}, database=singers)):
        with pytest.raises(ValueError, match="^schema: no tables$"):
            call()
    bad, fine = scorer.score_many([{"sql": FRANCE, "schema": {}, "database": singers},
                                   {"sql": FRANCE, "database": singers}], progress=False)
    assert (bad.kind, bad.message) == ("value", "schema: no tables") and fine.with_database


def test_a_node_under_a_quoted_alias_or_a_double_quoted_string_shows_its_whole_text():
    """A quoted name or string is one word when the canonical SQL's words are matched to the
    written ones: "T1".age was shown as '.age', "Ben Jones" without its closing quote."""
    sql = 'SELECT "T1".age FROM singer AS "T1" WHERE "T1".name = "Ben Jones";'
    scored = Scorer.pretrained().score(sql, schema={"singer": ["name", "age"]})
    assert [n.text for n in scored.nodes[:4]] == ['"T1".age', '"T1".name', '"Ben Jones"', '"T1".name = "Ben Jones"']


def test_fields_and_options_of_the_wrong_type_are_named_before_any_work():
    """A db_id of bytes was scored and its result could not be written as JSON; a label_shift of
    "yes" was read as true, features="kind" as its letters, deadline="soon" a comparison error."""
    scorer = Scorer.pretrained()
    rows = [{"sql": FRANCE, "schema": SINGER, name: value}
            for name, value in (("db_id", b"x"), ("question_id", [1]), ("system", 3), ("gold", 1.5), ("dialect", 5))]
    said = [(r.kind, r.message) for r in scorer.score_many(rows, progress=False)]
    assert said == [("type", "db_id: expected a string, found bytes"), ("type", "question_id: expected a string, found list"),
                    ("type", "system: expected a string, found int"), ("type", "gold: expected a string, found float"),
                    ("type", "dialect: expected a string, found int")]
    (fine,) = scorer.score_many([{"sql": FRANCE, "schema": SINGER, "question_id": 7}], progress=False)
    assert fine.question_id == 7
    for options, says in (({"label_shift": "yes"}, "label_shift: expected True, False or None, found 'yes'"),
                          ({"features": "kind"}, "features: expected a list of feature names, found 'kind'"),
                          ({"deadline": "soon"}, "deadline: expected a time.monotonic() value or None"),
                          ({"reasons": "no"}, "reasons: expected True or False, found 'no'"),
                          ({"workers": "2"}, "workers: expected a positive whole number or None, found '2'")):
        with pytest.raises((TypeError, ValueError), match=re.escape(says)):
            scorer.score_many([{"sql": FRANCE}], progress=False, **options)


def test_a_callers_bar_is_moved_by_each_batch_scored_and_left_open() -> None:
    """``progress`` may be a caller's tqdm bar (rat-score's, over a file's chunks): each batch
    scored moves it, and it stays open; a bar moved only once a whole call had returned stood
    still through a file scored as one chunk (label shift)."""
    from tqdm.auto import tqdm

    moves = []
    bar = tqdm(total=5, disable=True)
    bar.update, bar.close = moves.append, lambda: moves.append("closed")  # (what the bar is told)
    results = Scorer.pretrained().score_many([{"sql": FRANCE, "schema": SINGER}] * 5, progress=bar, batch_size=2,
                                             workers=1)
    assert len(results) == 5 and moves == [2, 2, 1]
    with pytest.raises(TypeError, match="progress: expected True or False, found 'bar'"):
        Scorer.pretrained().score_many([{"sql": FRANCE}], progress="bar")


def test_a_call_past_its_timeout_raises_and_a_closed_connection_is_a_database_error(singers):
    import sqlite3

    from model.data.databases import DatabaseError
    from model.data.execution import DeadlineExceeded

    scorer = Scorer.pretrained()
    with pytest.raises(DeadlineExceeded):
        scorer.score(FRANCE, schema=SINGER, database=singers, timeout_s=1e-9)
    assert scorer.score(FRANCE, schema=SINGER, database=singers, timeout_s=60).with_database
    conn = sqlite3.connect(singers)
    conn.close()
    with pytest.raises(DatabaseError, match="cannot be read"):
        scorer.score(FRANCE, schema=SINGER, database=conn)


def test_rows_sharing_a_db_id_keep_their_own_schema_and_database(singers, tmp_path):
    import sqlite3

    pets = tmp_path / "pets.sqlite"
    with sqlite3.connect(pets) as conn:
        conn.execute("CREATE TABLE pets (petid INTEGER PRIMARY KEY, kind TEXT)")
    scorer = Scorer.pretrained()
    alone = [scorer.score(FRANCE, schema=SINGER, database=singers).query_confidence,
             scorer.score(FRANCE, schema=SINGER).query_confidence]
    for other in ({"sql": "SELECT petid FROM pets", "db_id": "x", "schema": {"pets": ["petid"]}},
                  {"sql": "SELECT petid FROM pets", "db_id": "x", "database": pets}):
        for database, expected in zip((singers, None), alone):
            first, _ = scorer.score_many([{"sql": FRANCE, "db_id": "x", "schema": SINGER, "database": database},
                                          other], progress=False)
            assert first.query_confidence == pytest.approx(expected)
    unnamed, _ = scorer.score_many([{"sql": FRANCE, "schema": SINGER},
                                        {"sql": "SELECT petid FROM pets", "db_id": "schema0",
                                         "schema": {"pets": ["petid"]}}], progress=False)
    assert unnamed.query_confidence == pytest.approx(alone[1])


def test_a_wal_database_is_read_without_files_left_beside_it(singers, tmp_path):
    import sqlite3

    wal = tmp_path / "wal.sqlite"
    shutil.copy(singers, wal)
    with sqlite3.connect(wal) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
    before = hashlib.sha256(wal.read_bytes()).hexdigest()
    scored = Scorer.pretrained().score(FRANCE, database=wal)
    assert scored.with_database and [n.label for n in scored.nodes][:1] == ["singer.name"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wal.sqlite"]
    assert hashlib.sha256(wal.read_bytes()).hexdigest() == before


def test_pretrained_model_loads_and_scores():
    scorer = Scorer.pretrained()
    assert scorer.saved.info_["trained_on"]["examples"] > 10000
    scored = scorer.score("SELECT count(*) FROM singer", question="How many singers are there?",
                          schema={"singer": ["singer_id", "name"]})
    assert 0 < scored.query_confidence < 1 and len(scored.nodes) == 4


def test_the_shipped_transfer_model_loads_and_says_what_it_is_for():
    """pretrained:spider_transfer: fitted on Spider with perturbations of its gold queries and
    without the benchmark-size features, to score another benchmark (docs/model_card.md)."""
    scorer = Scorer.load("pretrained:spider_transfer")
    info = scorer.saved.info_
    assert info["config"]["train_side"] == "all" and "benchmark_size" in info["config"]["drop"]
    assert info["trained_on"]["train_side_examples"] > 5000  # the perturbations
    assert "question_words" not in scorer.saved.features_ and "schema_columns" not in scorer.saved.features_
    scored = scorer.score("SELECT count(*) FROM singer", question="How many singers are there?",
                          schema={"singer": ["singer_id", "name"]})
    assert 0 < scored.query_confidence < 1 and len(scored.nodes) == 4


@pytest.mark.parametrize("name", ["spider", "spider_transfer", "spider_consensus"])
def test_every_shipped_model_names_the_label_its_confidence_is_calibrated_to(name):
    """Each shipped model was fitted on Spider dev's execution labels: 8,496 of the 10,681
    predictions return gold's result (tree labels would say 56.7%)."""
    saved = Scorer.pretrained(name).saved
    trained = saved.info_["trained_on"]
    assert saved.query_label == "execution" == trained["labels"]
    assert trained["correct_queries"] == 8496 and trained["examples"] == 10681


@pytest.fixture(scope="module")
def consensus_model(tmp_path_factory):
    out = tmp_path_factory.mktemp("consensus_run")
    _, objects = train(compose_cfg("train", [*FAST, "model.groups=single+consensus"], out))
    return out / "model", objects


def test_a_consensus_model_reads_every_system_of_a_question_whatever_the_order(consensus_model):
    """A consensus model's rows are batched by question: the same scores with the rows in file
    order (one system after another) in small batches as with each question's rows together."""
    folder, objects = consensus_model
    table = objects["table"]
    by_question: dict[str, list[int]] = {}
    for k, e in enumerate(table.examples):
        by_question.setdefault(e.question_id, []).append(k)
    shared = [ks for ks in by_question.values() if len(ks) > 1][:6]
    assert shared  # the demo corpus answers its questions with several systems
    grouped = [k for ks in shared for k in ks]
    by_system = sorted(grouped, key=lambda k: (table.examples[k].system, table.examples[k].question_id))
    rows = {k: {**row, "question_id": table.examples[k].question_id, "system": table.examples[k].system}
            for k, row in zip(grouped, _rows(table, grouped))}
    scorer = Scorer.load(folder)
    together = dict(zip(grouped, scorer.score_many([rows[k] for k in grouped], progress=False, workers=1)))
    apart = dict(zip(by_system, scorer.score_many([rows[k] for k in by_system], progress=False,
                                                  batch_size=3, workers=1)))
    agreement = list(scorer.saved.features_).index("agreement")
    for k in grouped:
        assert not np.isnan(apart[k].features[:, agreement]).any()  # the other systems were read
        assert apart[k].to_dict() == together[k].to_dict()


def test_a_query_that_did_not_run_says_why_in_its_result_and_reasons(singers):
    """A query that fails counts as failing to run (`exec_error`); one stopped by the time limit
    or the result budget has unknown results, as without a database (a slow or large query on a
    big database is not a wrong one). The result, its JSON row, its printout and the reason say
    which."""
    schema = {"singer": ["singer_id", "name", "country"]}
    scorer = Scorer.pretrained()
    ran = scorer.score("SELECT name FROM singer WHERE country = 'France'", "Singers from France?",
                       schema=schema, database=singers)
    assert ran.execution_error is None and "execution_error" not in ran.to_dict()
    failed = scorer.score("SELECT nme FROM singer WHERE country = 'France'", "Singers from France?",
                          schema=schema, database=singers)
    assert failed.execution_error == "OperationalError: no such column: nme"
    assert failed.to_dict()["execution_error"] == failed.execution_error
    assert "did not run on the database: OperationalError: no such column: nme" in str(failed)
    texts = {r.text for n in failed.nodes for r in n.reasons if r.feature == "exec_error"}
    assert texts == {"the query fails to run on the database (OperationalError: no such column: nme)"}
    names = list(scorer.saved.features_)
    result_features = [names.index(f) for f in ("exec_error", "exec_empty", "exec_log_rows", "exec_columns")]
    cross = ", ".join(f"singer s{k}" for k in range(20))  # 2**20 rows to count
    for stopped, says in ((Scorer(scorer.saved, feature_timeout_s=1e-6), "timeout after"),
                          (Scorer(scorer.saved, max_result_bytes=64), "result larger than")):
        sql = f"SELECT count(*) FROM {cross}" if says == "timeout after" else "SELECT name, country FROM singer"
        got = stopped.score(sql, "How many?", schema=schema, database=singers)
        assert got.execution_error.startswith(says), got.execution_error
        assert np.isnan(got.features[:, result_features]).all()
        assert f"stopped on the database ({got.execution_error}): scored without its result" in str(got)
        assert not any(r.feature == "exec_error" for n in got.nodes for r in n.reasons)


def test_a_query_the_database_guard_refuses_is_a_row_error_on_every_surface(singers):
    """A query that is not sent to its open database (it writes, locks, ..: the guard rat-score's
    --sql refuses with) is that row's RowError, counted as refused by rat-score, rat-serve and
    score_many alike; it was scored as a query that failed to run, the batch's others as usual."""
    from model.data.databases import open_database

    with open_database(singers) as db:
        results = Scorer.pretrained().score_many([{"sql": "DELETE FROM singer", "database": db},
                                                  {"sql": "SELECT name FROM singer", "database": db}], progress=False)
    assert isinstance(results[0], RowError) and results[0].message.startswith("refused: only a query that reads")
    assert not isinstance(results[1], RowError) and results[1].with_database


SINGER = {"singer": ["singer_id", "name", "country", "age"]}


def _written_texts(sql, schema=SINGER, dialect="sqlite"):
    from model.scoring.scorer import written_spans

    tree = rat.to_tree(sql, schema, dialect)
    return [(n.label, None if s is None else sql[s[0]:s[1]])
            for n, s in zip(tree.postorder(), written_spans(sql, tree, rat.Schema.of(schema), dialect))]


def test_written_spans_point_an_ordinal_node_at_the_written_number():
    """rat replaces `GROUP BY 1` / `ORDER BY 2` by the output they name, whose canonical words
    (`group by singer.country`) are not in the written SQL: those nodes had no span, and "look
    here first" on one pointed nowhere. They are the written `1` / `2` (not a `;` or comment
    after it); an ORDER BY alias is the alias."""
    texts = _written_texts("SELECT country, count(*) FROM singer GROUP BY 1 ORDER BY 2 DESC")
    assert texts[:2] == [("*", "2"), ("Count", "2")] and ("singer.country", "1") in texts
    assert all(text is not None for _, text in texts)
    assert _written_texts("SELECT country, count(*) FROM singer GROUP BY 1; -- by country")[3] == ("singer.country", "1")
    texts = _written_texts("SELECT country, count(*) AS n FROM singer GROUP BY country ORDER BY n")
    assert texts[:2] == [("*", "n"), ("Count", "n")]


def test_written_spans_of_a_sqlite_parameter_reach_it():
    """sqlite reads `$1` as a column, which the canonical SQL quotes (`"$1"`): the parameter had
    no span and its parents stopped before it. `?`, `:name`, `@name` and `$1` are the parameter,
    and the comparison and clauses over it run to its end."""
    for parameter in ("$1", "?", ":name", "@name"):
        sql = f"SELECT name FROM singer WHERE name = {parameter}"
        texts = dict(_written_texts(sql)[2:])
        assert texts[parameter] == parameter and texts["Eq"] == f"name = {parameter}", sql
        assert texts["Selection"] == sql[12:] and texts["Project"] == sql, sql
    texts = _written_texts("SELECT name FROM singer WHERE name = $1 /* the name */ AND age > $2")
    assert ("$1", "$1") in texts and ("$2", "$2") in texts and ("Gt", "age > $2") in texts


def test_written_spans_do_not_guess_where_the_word_diff_lost_its_way():
    """Canonical words without written ones stand for the written words between their matched
    neighbours only where that is plausible: not for a node sharing only some words with the run,
    not for words in a run no node makes up, nor for a gap of many more written words."""
    schema = {"student": ["stuid", "age"], "has_pet": ["stuid", "petid"]}
    sql = ("SELECT StuID FROM Student WHERE StuID NOT IN (SELECT T1.StuID FROM Student AS T1 "
           "JOIN Has_Pet AS T2 ON T1.StuID = T2.StuID)")
    assert ("student", "AS T1") not in _written_texts(sql, schema)  # (the diff matched the outer `from student` to the inner)
    schema = {"comments": ["postid", "userid"], "posthistory": ["postid", "posthistorytypeid"]}
    sql = ("SELECT T1.PostHistoryTypeId, (SELECT COUNT(DISTINCT UserId) FROM comments WHERE PostId = 3720) "
           "AS NumberOfUsers FROM postHistory AS T1 WHERE T1.PostId = 3720")
    texts = _written_texts(sql, schema)  # (the diff matched the subquery's `.postid = 3720` to the outer query's)
    assert not [text for label, text in texts if label in ("comments.postid", "Eq") and "NumberOfUsers" in (text or "")]
    sql = "SELECT first_name FROM students WHERE current_address_id != permanent_address_id"
    texts = _written_texts(sql, {"students": ["first_name", "current_address_id", "permanent_address_id"]})
    assert ("students.permanent_address_id", "permanent_address_id") in texts


def test_look_here_first_of_an_ordinal_query_has_a_span():
    """The shipped model's "look here first" on `GROUP BY 1` was its `singer.country`, without a span."""
    scored = Scorer.pretrained().score("SELECT country, count(*) FROM singer GROUP BY 1",
                                       question="Which country has the most singers?", schema=SINGER)
    assert all(n.span is not None and scored.sql[n.span[0]:n.span[1]] == n.text for n in scored.nodes)
    assert [n.text for n in scored.nodes if n.label == "singer.country"] == ["country", "1"]


@pytest.mark.parametrize("sql, dialect", [
    ("SELECT age--1, name FROM singer WHERE age > 3", "mysql"),  # MySQL's `--1` is no comment
    ("SELECT name FROM singer WHERE name = 'O\\'Brien' AND country = '-- x' AND age > 3", "mysql"),
    ("SELECT `a--b`, name FROM singer WHERE age > 3", "sqlite"),  # a quoted name holding `--`
])
def test_written_spans_read_comments_as_the_dialect_does(sql, dialect):
    """Comments were found with PostgreSQL's pattern whatever the dialect: MySQL's `age--1` or a
    backslash-escaped quote, or a name in backticks holding `--`, read as a comment to the end of
    the line, and every node after it lost its span."""
    texts = _written_texts(sql, {"singer": ["singer_id", "name", "country", "age", "a--b"]}, dialect)
    assert dict(texts)["Gt"] == "age > 3" and texts[-1] == ("Project", sql)
    if "\\" not in sql:  # (a backslash escape's words are not matched: its string has no span, as before)
        assert all(text is not None for _, text in texts), texts



@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_written_spans_of_the_left_operand_of_a_negated_predicate(dialect):
    """The canonical SQL writes `x NOT IN (..)` as `not x in (..)` (SQLite's `x IS NOT NULL` as
    `not x is null`, `x NOT GLOB p` as `not x glob p`): with the words in another order the word
    diff lost x, whose span was `.singer_id` of `s.singer_id`, or none. Each predicate below ends
    the query; one written `NOT x IN (..)` keeps its order."""
    schema = {"singer": ["singer_id", "name", "age"], "concert": ["concert_id", "singer_id"]}
    for sql, column, left, predicate in [
        ("SELECT s.name FROM singer s WHERE s.singer_id NOT IN (SELECT c.singer_id FROM concert c)",
         "singer.singer_id", "s.singer_id", "s.singer_id NOT"),
        ("SELECT name FROM singer WHERE singer_id NOT IN (SELECT singer_id FROM concert)",
         "singer.singer_id", "singer_id", "singer_id NOT"),
        ("SELECT s.name FROM singer s WHERE s.age > 3 AND s.singer_id NOT IN (SELECT c.singer_id FROM concert c)",
         "singer.singer_id", "s.singer_id", "s.singer_id NOT"),
        ("SELECT name FROM singer WHERE age NOT IN (1, 2)", "singer.age", "age", "age NOT"),
        ("SELECT s.name FROM singer s WHERE s.age IS NOT NULL", "singer.age", "s.age", "s.age IS"),
        ("SELECT name FROM singer WHERE name NOT GLOB 'a*'", "singer.name", "name", "name NOT"),
        ("SELECT name FROM singer WHERE NOT singer_id IN (SELECT singer_id FROM concert)",
         "singer.singer_id", "singer_id", "NOT singer_id"),
    ]:
        texts = _written_texts(sql, schema, dialect)
        assert (column, left) in texts and all(text is not None for _, text in texts), (sql, texts)
        negated = [text for label, text in texts if label in ("Not_in", "Is_not_null", "Not_glob")]
        assert negated == [sql[sql.index(predicate):]], (sql, texts)
