"""The whole-query head (model.nodes.query_head): fitted on a run's out-of-fold node confidences,
saved in the model folder, read by Scorer; a folder without it still loads, a malformed one is
one line."""

import json
import shutil

import numpy as np
import pytest

from model.calibrators import query_aggregates
from model.errors import ModelFileError, UsageError
from model.nodes.estimator import BoostedNodeModel, BoostedParams
from model.nodes.query_head import QueryHead, head_feature_names, head_features
from model.scoring import RowError, Scorer
from model.train import train
from tests.test_boosted import FAST, compose_cfg
from tests.test_scorer import _rows

HEAD = [*FAST, "data.protocol=crossfit", "data.folds=3", "model.query_head=all", "model.database=dropout"]


@pytest.fixture(scope="module")
def head_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("head_run")
    metrics, objects = train(compose_cfg("train", HEAD, out))
    return out, metrics, objects


def test_the_run_fits_and_saves_a_head_per_database_mode(head_run):
    out, metrics, objects = head_run
    folder = out / "model"
    assert {"query_head.skops", "query_head_without_database.skops"} <= {p.name for p in folder.iterdir()}
    meta = json.loads((folder / "model.json").read_text())
    for head in (meta["query_head"], meta["without_database"]["query_head"]):
        assert head["label"] == "execution"  # the demo has its databases
        assert head["features"] == list(head_feature_names(meta["features"], "all"))
        assert 0.5 < head["metrics"]["query_auc"] <= 1 and 0 <= head["metrics"]["query_ece"] < 0.5
    assert meta["query_label"] == "execution"
    assert metrics["query/head_query_auc"] == pytest.approx(meta["query_head"]["metrics"]["query_auc"])
    model = objects["model"]
    assert model.query_head_for(True) is model.query_head_
    assert model.query_head_for(False) is model.query_head_without_database_


def test_scorer_reads_the_head_and_a_reload_gives_the_same_confidences(head_run):
    out, _, objects = head_run
    table, fitted = objects["table"], objects["model"]
    indices = list(range(0, len(table.examples), 7))
    results = Scorer.load(out / "model").score_many(_rows(table, indices), progress=False, spans=False)
    assert not [r for r in results if isinstance(r, RowError)]
    loaded = BoostedNodeModel.load(out / "model")
    moved = 0
    for k, r in zip(indices, results):
        e = table.examples[k]
        conf = np.array([n.confidence for n in r.nodes])
        site = np.array([n.site_score for n in r.nodes])
        row = head_features(conf, site, e.node_types, r.features, fitted.features_, "all")
        expected = float(fitted.query_head_.confidence(row[None, :])[0])
        assert r.query_confidence == pytest.approx(expected, abs=1e-9)
        assert float(loaded.query_head_.confidence(row[None, :])[0]) == pytest.approx(expected, abs=1e-12)
        least = float(fitted.query_calibrator_.confidence(np.array([query_aggregates(conf)]))[0])
        moved += abs(least - r.query_confidence) > 1e-6
    assert moved > len(indices) / 2  # not the least confident node's map


def test_a_model_file_without_a_head_still_loads_and_scores_by_the_least_node(head_run, tmp_path):
    out, _, objects = head_run
    folder = tmp_path / "model"
    shutil.copytree(out / "model", folder)
    meta = json.loads((folder / "model.json").read_text())
    del meta["query_head"], meta["without_database"]["query_head"]
    (folder / "model.json").write_text(json.dumps(meta))
    for name in ("query_head.skops", "query_head_without_database.skops"):
        (folder / name).unlink()
    scorer = Scorer.load(folder)
    assert scorer.saved.query_head_ is None and scorer.saved.query_head_without_database_ is None
    table = objects["table"]
    result = scorer.score_many(_rows(table, [0]), progress=False, spans=False)[0]
    conf = np.array([n.confidence for n in result.nodes])
    least = float(scorer.saved.query_calibrator_.confidence(np.array([query_aggregates(conf)]))[0])
    assert result.query_confidence == pytest.approx(least, abs=1e-12)


def _head(meta):
    return meta["query_head"]


@pytest.mark.parametrize("change, message", [
    (lambda m: {**m, "query_head": [1]}, "model.json: query_head: expected an object"),
    (lambda m: {**m, "query_head": {**_head(m), "label": "guess"}}, "query_head: label must be one of"),
    (lambda m: {**m, "query_head": {**_head(m), "coef": "x"}}, "query_head: expected coef and intercept numbers"),
    (lambda m: {**m, "query_head": {**_head(m), "version": "qh-0"}}, "query_head: saved as 'qh-0'"),
    (lambda m: {**m, "query_head": {**_head(m), "features": _head(m)["features"][:-1]}},
     "query_head: its features are not those"),
    (lambda m: {**m, "query_head": {**_head(m), "feature_set": "everything"}},
     "query_head: unknown feature_set 'everything'"),
    (lambda m: {**m, "without_database": {**m["without_database"], "query_head": {
        **m["without_database"]["query_head"], "intercept": None}}},
     "without_database.query_head: expected coef and intercept numbers"),
])
def test_a_malformed_head_is_one_line_naming_it(head_run, tmp_path, change, message):
    folder = tmp_path / "model"
    shutil.copytree(head_run[0] / "model", folder)
    path = folder / "model.json"
    path.write_text(json.dumps(change(json.loads(path.read_text()))))
    with pytest.raises(ModelFileError) as e:
        Scorer.load(folder)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_missing_head_classifier_is_one_line(head_run, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(head_run[0] / "model", folder)
    (folder / "query_head.skops").unlink()
    with pytest.raises(ModelFileError, match=r"query_head.skops: missing$"):
        Scorer.load(folder)


def test_a_wrong_head_value_is_a_usage_error():
    with pytest.raises(UsageError, match="model.query_head must be one of"):
        BoostedParams.from_mapping({"query_head": "everything"})
    with pytest.raises(UsageError, match="model.query_head_labels must be auto or tree"):
        BoostedParams.from_mapping({"query_head_labels": "execution"})


def test_the_head_reads_more_than_the_least_confident_node():
    # every query has the same least confident node; what differs is how many nodes are low
    rng = np.random.default_rng(1)
    rows, labels = [], []
    for _ in range(600):
        low = int(rng.integers(1, 5))
        conf = np.r_[np.full(low, 0.6), np.full(6 - low, 0.95)]
        rows.append(head_features(conf, None, ["column"] * 5 + ["Project"], None, (), "confidences"))
        labels.append(int(rng.random() < (0.9 if low == 1 else 0.2)))
    q, y = np.array(rows), np.array(labels)
    head = QueryHead.fit(q, y, np.arange(600) % 3, head_feature_names((), "confidences"), "tree", {"max_iter": 50})
    assert head.metrics["query_auc"] > 0.75  # the least confident node alone ranks them at 0.5
    low = list(head_feature_names((), "confidences")).index("below_0.7")
    one, four = head.confidence(q[[np.argmin(q[:, low]), np.argmax(q[:, low])]])
    assert one > 0.8 and four < 0.3


def test_tree_labels_for_the_head_need_tree_node_labels(head_run):
    from model.nodes.estimator import OutOfFold, fit_query_head

    table = head_run[2]["table"]  # execution node labels: every node of a matching query is right
    conf = {k: np.full(len(table.examples[k].node_labels), 0.9) for k in range(20)}
    oof = OutOfFold({}, conf, {k: k % 2 for k in conf})
    params = BoostedParams(query_head="confidences", query_head_labels="tree")
    with pytest.raises(UsageError, match="needs tree node labels"):
        fit_query_head(table, list(conf), params, oof, np.ones(len(table.names), dtype=bool), table.names)
