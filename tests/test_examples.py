"""Node-model examples: labels, node positions on the real SmolLM2 tokenizer, schema pruning,
bad input counted, tokenized cache."""

import json
import shutil

import pytest

from model.nodes.examples import build_examples, fit_schema, tokenize_examples
from model.synth.demo import demo_root


@pytest.fixture(scope="module")
def root():
    return demo_root()


@pytest.fixture(scope="module")
def tokenizer():
    from model.lm import load_tokenizer

    return load_tokenizer()


@pytest.fixture(scope="module")
def examples(root, tmp_path_factory):
    files = sorted((root / "predictions").glob("*.jsonl"))
    examples, report = build_examples(root, "dev", prediction_files=files[:1],
                                      perturbations_per_query=1, seed=0, max_questions=60,
                                      execution_cache=tmp_path_factory.mktemp("exec"))
    return examples, report


def test_sources_and_labels(examples):
    examples, report = examples
    assert report.kept == len(examples) == 120  # 60 predictions + 60 perturbations
    systems = {e.system for e in examples}
    assert "demo_medium" in systems and any(s.startswith("perturb:") for s in systems)
    for e in examples:
        assert len(e.node_labels) == len(e.node_char_ends) == len(e.node_types)
        if e.execution_match:
            assert all(e.node_labels)
    assert any(e.execution_match is False and 0 in e.node_labels for e in examples)


def test_node_char_ends_point_at_node_ends(examples):
    for e in examples[0]:
        assert all(e.text[c] == ")" for c in e.node_char_ends)
        assert e.text.endswith(e.tree_text)


def test_predictions_only_and_perturbations_only(root, tmp_path):
    files = sorted((root / "predictions").glob("*.jsonl"))
    only_pred, _ = build_examples(root, "dev", prediction_files=files, max_questions=10,
                                  execution_cache=tmp_path, verbose=False)
    only_pert, _ = build_examples(root, "train", perturbations_per_query=2, max_questions=10,
                                  execution_cache=tmp_path, verbose=False)
    assert len(only_pred) == 10 * len(files)
    assert not any(e.system.startswith("perturb:") for e in only_pred)
    assert only_pert and all(e.system.startswith("perturb:") for e in only_pert)
    again, _ = build_examples(root, "train", perturbations_per_query=2, max_questions=10,
                              execution_cache=tmp_path, verbose=False)
    assert [e.sql for e in again] == [e.sql for e in only_pert]  # seeded


def _token_holds(tokenizer, ids, position, text, char):
    """The token at `position` of text's encoding covers character `char`."""
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    assert encoded["input_ids"] == ids
    start, end = encoded["offset_mapping"][position]
    return start <= char < end


def test_node_positions_hold_each_nodes_last_char(examples, tokenizer, tmp_path):
    examples, _ = examples
    tokenized = tokenize_examples(examples, tokenizer, max_tokens=1024, cache_dir=tmp_path)
    assert len(tokenized) == len(examples)
    for e, t in zip(examples, tokenized, strict=True):
        assert not t.pruned_schema and len(t.node_positions) == len(e.node_labels)
        assert tokenizer.decode(t.input_ids) == e.text
        for position, char in zip(t.node_positions, e.node_char_ends, strict=True):
            assert ")" in tokenizer.decode([t.input_ids[position]])
            assert _token_holds(tokenizer, t.input_ids, position, e.text, char)


def test_pruning_keeps_used_tables_and_every_node(examples, tokenizer, tmp_path):
    examples, _ = examples
    tokenized = tokenize_examples(examples, tokenizer, max_tokens=110, cache_dir=tmp_path)
    by_key = {(e.system, e.question_id): e for e in examples}
    pruned = [t for t in tokenized if t.pruned_schema]
    assert len(pruned) > 10
    for t in pruned:
        e = by_key[t.system, t.question_id]
        assert len(t.input_ids) <= 110
        text = tokenizer.decode(t.input_ids)
        assert text.endswith(e.tree_text) and len(t.node_positions) == len(e.node_labels)
        schema_line = text.splitlines()[0]
        for table, columns in e.used_tables.items():
            assert f"{table}:" in schema_line
            assert all(c in schema_line for c in columns)
        for position in t.node_positions:
            assert ")" in tokenizer.decode([t.input_ids[position]])


def test_fit_schema_refuses_when_used_items_do_not_fit(examples):
    e = examples[0][0]
    assert fit_schema(e, len, max_tokens=10) is None
    assert fit_schema(e, len, max_tokens=10_000) == e.schema_tables


def test_too_long_rat_is_skipped_and_counted(examples, tokenizer, tmp_path):
    examples, report = examples
    kept_before = report.kept
    tokenized = tokenize_examples(examples, tokenizer, max_tokens=20, cache_dir=tmp_path,
                                  report=report)
    assert len(tokenized) < len(examples)
    assert report.skipped["RAT alone longer than max_tokens"] > 0
    assert report.kept == kept_before - (len(examples) - len(tokenized))


def test_tokenized_examples_are_cached(examples, tokenizer, tmp_path):
    examples, _ = examples
    first = tokenize_examples(examples[:5], tokenizer, 512, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.pkl"))) == 1
    assert tokenize_examples(examples[:5], tokenizer, 512, cache_dir=tmp_path) == first
    tokenize_examples(examples[:5], tokenizer, 256, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.pkl"))) == 2  # max_tokens is part of the key


def test_bad_input_is_counted_not_raised(root, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(root, bad, ignore=shutil.ignore_patterns("predictions"))
    tables = json.loads((bad / "tables.json").read_text())
    ghost_db = dict(tables[0], db_id="no_sqlite_file")  # in tables.json, no database file
    (bad / "tables.json").write_text(json.dumps(tables + [ghost_db]))
    dev = json.loads((bad / "dev.json").read_text())[:3]
    dev += [{"db_id": "not_in_tables", "question": "?", "query": "SELECT 1"},
            {"db_id": "no_sqlite_file", "question": "?", "query": dev[0]["query"]}]
    (bad / "dev.json").write_text(json.dumps(dev))
    rows = [{"question_id": "dev_0", "db_id": dev[0]["db_id"], "sql": "SELECT FROM WHERE"},
            {"question_id": "dev_1", "db_id": dev[1]["db_id"], "sql": dev[1]["query"]},
            {"question_id": "dev_2", "db_id": dev[2]["db_id"], "sql": ""},
            {"question_id": "dev_3", "db_id": "not_in_tables", "sql": "SELECT 1"},
            "{not json"]
    path = bad / "system.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    (bad / "short.txt").write_text("SELECT 1\n")  # 1 row for 5 questions
    examples, report = build_examples(bad, "dev", prediction_files=[path, bad / "short.txt"],
                                      perturbations_per_query=1, execution_cache=tmp_path / "exec")
    # kept: dev_1's prediction and the perturbations of dev_0..dev_2's gold queries
    assert report.kept == len(examples) == 4
    assert report.skipped["db_id not in tables.json"] == 2  # dev_3's prediction and its perturbation
    assert report.skipped["missing database"] == 1  # the perturbation of dev_4
    assert report.skipped["not a JSON line"] == 1
    assert report.skipped["prediction file unreadable (short.txt)"] == 1
    assert report.skipped["unparsable or unsupported predicted SQL"] == 1
    assert report.skipped["empty predicted SQL"] == 1
    assert "kept 4 of" in report.summary()


def test_tree_labels_compare_with_gold_where_execution_would_decide(root, tmp_path):
    import rat
    from model.data.datasets import load_questions, load_schemas
    from model.errors import UsageError

    files = sorted((root / "predictions").glob("*.jsonl"))
    by_execution, _ = build_examples(root, "dev", prediction_files=files, max_questions=60,
                                     execution_cache=tmp_path, verbose=False)
    by_tree, _ = build_examples(root, "dev", prediction_files=files, max_questions=60,
                                execution_cache=tmp_path, verbose=False, labels="tree")
    assert [(e.question_id, e.system) for e in by_execution] == [(e.question_id, e.system) for e in by_tree]
    gold = {q.question_id: q.gold_sql for q in load_questions(root, "dev")}
    schemas = load_schemas(root)
    for a, b in zip(by_execution, by_tree):
        assert b.execution_match is None  # the database was read, its verdict not used
        if a.execution_match is False:
            assert a.node_labels == b.node_labels
        schema = schemas[b.db_id]
        assert b.correct == (rat.to_tree(b.sql, schema).hash == rat.to_tree(gold[b.question_id], schema).hash)
    assert any(a.execution_match and not b.correct for a, b in zip(by_execution, by_tree))
    with pytest.raises(UsageError, match="data.labels must be execution or tree; found 'gold'"):
        build_examples(root, "dev", prediction_files=files, max_questions=2, labels="gold", verbose=False)
