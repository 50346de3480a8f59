"""model.quantiles: the count features that shift between benchmarks are read as quantiles
among the run's nodes; the saved model keeps that reference and reproduces the run's numbers,
``quantiles="rows"`` reads scored rows against their own nodes, and a monotone run's saved node
model keeps its constraints."""

import json

import numpy as np
import pytest

from model.nodes.estimator import BoostedNodeModel
from model.nodes.quantiles import SHIFTED_FEATURES, Quantiles
from model.scoring import Scorer
from model.train import train
from tests.test_boosted import FAST, compose_cfg
from tests.test_score_cli import rat_score
from tests.test_scorer import _rows, assert_reproduces_in_sample


@pytest.fixture(scope="module")
def quantile_model(tmp_path_factory):
    out = tmp_path_factory.mktemp("quantile_run")
    _, objects = train(compose_cfg("train", [*FAST, "model.quantiles=true", "model.monotone=true"], out))
    return out / "model", objects


def _columns(table):
    return [table.names.index(n) for n in SHIFTED_FEATURES if n in table.names]


def test_the_run_reads_the_shifted_counts_as_quantiles_and_saves_the_reference(quantile_model):
    folder, objects = quantile_model
    table = objects["table"]
    x = np.vstack(table.features)
    columns = _columns(table)
    assert len(columns) == len(SHIFTED_FEATURES)
    for j in columns:  # mid-ranks among the run's own nodes: in (0, 1), mean exactly one half
        v = x[:, j][~np.isnan(x[:, j])]
        assert ((v > 0) & (v < 1)).all() and v.mean() == pytest.approx(0.5)
    saved = BoostedNodeModel.load(folder)
    assert saved.quantiles_ == table.quantiles and saved.info_["config"]["quantiles"] is True
    assert "question_words" in json.loads((folder / "model.json").read_text())["quantiles"]


def test_a_monotone_runs_saved_node_model_keeps_its_constraints(quantile_model):
    folder, objects = quantile_model
    saved = BoostedNodeModel.load(folder)
    expected = objects["config"].node_hgb(saved.features_)["monotonic_cst"]
    assert any(expected) and list(saved.node_model_.monotonic_cst) == expected


def test_the_reloaded_model_reads_new_queries_against_its_training_nodes(quantile_model):
    folder, objects = quantile_model
    table = objects["table"]
    results = assert_reproduces_in_sample(folder, table)
    features = np.vstack([r.features for r in results])  # the model's columns, as it read them
    np.testing.assert_allclose(features[:, _columns(table)], np.vstack(table.features)[:, _columns(table)])


def test_rows_read_against_their_own_nodes(quantile_model):
    """One database's queries: against the training nodes their counts sit wherever that
    database's sizes put them; against their own nodes each count's mid-ranks average one half."""
    folder, objects = quantile_model
    table = objects["table"]
    db = table.examples[0].db_id
    indices = [k for k, e in enumerate(table.examples) if e.db_id == db]
    scorer = Scorer.load(folder)
    own = scorer.score_many(_rows(table, indices), progress=False, spans=False, quantiles="rows")
    trained = scorer.score_many(_rows(table, indices), progress=False, spans=False)
    j = table.names.index("schema_columns")  # one value for the whole database
    own_x, trained_x = (np.vstack([r.features for r in rs]) for rs in (own, trained))
    assert np.allclose(own_x[:, j], 0.5) and not np.allclose(trained_x[:, j], 0.5)
    for c in _columns(table):
        v = own_x[:, c][~np.isnan(own_x[:, c])]
        assert v.mean() == pytest.approx(0.5)
    assert not np.allclose(np.concatenate([[n.confidence for n in r.nodes] for r in own]),
                           np.concatenate([[n.confidence for n in r.nodes] for r in trained]))
    with pytest.raises(ValueError, match="quantiles must be"):
        scorer.score_many(_rows(table, indices[:1]), progress=False, quantiles="file")


def test_a_reference_gives_unseen_values_their_rank_between_the_seen_ones():
    q = Quantiles.fit(np.array([[1.0], [1.0], [3.0], [5.0]]), ["tree_size"])
    assert q.transform(np.array([[0.0], [1.0], [2.0], [9.0]]), ["tree_size"])[:, 0].tolist() == [0.0, 0.25, 0.5, 1.0]


def test_rat_score_quantiles_rows_with_a_file(quantile_model, tmp_path):
    folder, objects = quantile_model
    root = objects["table"].root
    predictions = min((root / "predictions").glob("*.jsonl"))
    out = tmp_path / "scored.jsonl"
    done = rat_score("--model", str(folder), "--data-root", str(root), "--predictions", str(predictions),
                     "--out", str(out), "--quantiles", "rows", "--no-reasons")
    assert done.returncode == 0, done.stderr
    assert len(out.read_text().splitlines()) > 10
    refused = rat_score("--predictions", str(predictions), "--data-root", str(root), "--quantiles", "rows")
    assert refused.returncode == 2 and refused.stdout == ""
    assert len(refused.stderr.strip().splitlines()) == 1 and "does not read quantiles" in refused.stderr


def test_adapting_a_quantile_model_is_refused_in_one_line(quantile_model):
    from model.scoring.adapt import AdaptError, adapt

    folder, objects = quantile_model
    table = objects["table"]
    saved = BoostedNodeModel.load(folder)
    with pytest.raises(AdaptError, match="quantiles"):
        adapt(saved, saved, _rows(table, range(3)), progress=False)
