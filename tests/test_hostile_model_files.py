"""Crafted model files (a node model whose trees point outside their arrays, a skops zip that
inflates to gigabytes, JSON numbers of 100,000 digits) are one line naming the file, refused
before any prediction; never a crash of the process, a hang or a traceback."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

from model.data.datasets import Question
from model.data.jsonl import read_json
from model.data.predictions import load_predictions
from model.errors import ModelFileError, PredictionFileError, UsageError
from model.nodes import model_file
from model.scoring.scorer import PRETRAINED, Scorer

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
HUGE = "9" * 100_000  # past Python's limit of 4300 digits for int("...")


@pytest.fixture
def model_copy(tmp_path) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(PRETRAINED["spider"], folder)
    return folder


def _rewrite_node_model(folder: Path, change) -> None:
    """node_model.skops written again (by skops) with ``change`` made to the classifier."""
    import skops.io as sio

    path = folder / "node_model.skops"
    model = sio.load(path, trusted=sio.get_untrusted_types(file=path))
    change(model)
    sio.dump(model, path)


def _first_tree(change):
    def edit(model) -> None:
        predictor = model._predictors[0][0]
        nodes = predictor.nodes.copy()
        predictor.nodes = change(nodes, predictor)
    return edit


def _splits(nodes: np.ndarray) -> np.ndarray:
    return np.flatnonzero(nodes["is_leaf"] == 0)


def _children_outside(nodes, _):
    nodes["left"], nodes["right"], nodes["is_leaf"] = 10**6, 10**6, 0
    return nodes


def _feature_outside(nodes, _):
    nodes["feature_idx"] = 10**7
    return nodes


def _negative_feature(nodes, _):
    nodes["feature_idx"][_splits(nodes)[0]] = -1
    return nodes


def _bitset_outside(nodes, _):
    nodes["is_categorical"], nodes["bitset_idx"] = 1, 10**7
    return nodes


def _self_loop(nodes, _):
    nodes["left"], nodes["right"], nodes["is_leaf"] = 0, 0, 0
    return nodes


def _cycle(nodes, _):
    nodes["is_leaf"], nodes["num_threshold"] = 0, np.inf
    nodes["left"] = nodes["right"] = np.arange(len(nodes))[::-1]
    return nodes


def _shared_child(nodes, _):
    first, second = _splits(nodes)[:2]
    nodes["left"][second] = nodes["left"][first] if nodes["left"][first] > second else nodes["right"][first]
    return nodes


def _leaf_value(value):
    def change(nodes, _):
        nodes["value"][nodes["is_leaf"] == 1] = value
        return nodes
    return change


def _nan_threshold(nodes, _):
    split = next(i for i in _splits(nodes) if not nodes["is_categorical"][i])
    nodes["num_threshold"][split] = np.nan
    return nodes


@pytest.mark.parametrize("change, says", [
    (_children_outside, "tree 0: node 0's children"),
    (_self_loop, "tree 0: node 0's children"),
    (_cycle, "children"),
    (_shared_child, "the child of two splits"),
    (_feature_outside, "tree 0: node 0 splits on feature 10000000"),
    (_negative_feature, "splits on feature -1"),
    (_bitset_outside, "tree 0: node 0 makes a categorical split of feature"),  # (as the probe wrote it)
    (_leaf_value(np.nan), "tree 0: a leaf's value is not a finite number"),
    (_leaf_value(np.inf), "tree 0: a leaf's value is not a finite number"),
    (_nan_threshold, "threshold is not a number"),
    (lambda nodes, _: np.stack([nodes, nodes]), "tree 0: expected a 1-D array of scikit-learn's node records"),
    (lambda nodes, _: nodes[:0], "tree 0: expected a 1-D array of scikit-learn's node records"),
])
def test_a_node_model_whose_trees_cannot_be_walked_is_refused_at_load(model_copy, change, says):
    _rewrite_node_model(model_copy, _first_tree(change))
    with pytest.raises(ModelFileError) as e:
        Scorer.load(model_copy)
    message = str(e.value)
    assert message.startswith(f"{model_copy / 'node_model.skops'}: ") and says in message and "\n" not in message


def _categorical_split_reading_a_set_outside(model):
    categorical = np.asarray(model._bin_mapper.is_categorical_, dtype=bool)
    nodes = model._predictors[0][0].nodes.copy()
    split = next(i for i in _splits(nodes) if categorical[nodes["feature_idx"][i]])
    nodes["is_categorical"][split], nodes["bitset_idx"][split] = 1, 10**7
    model._predictors[0][0].nodes = nodes


def _huge_leaves_in_two_trees(model):
    for trees in model._predictors[:2]:
        trees[0].nodes = trees[0].nodes.copy()
        trees[0].nodes["value"][trees[0].nodes["is_leaf"] == 1] = 1e308


@pytest.mark.parametrize("change, says", [
    (_categorical_split_reading_a_set_outside, r"tree 0: node \d+ reads category set 10000000; the tree has \d+"),
    (_huge_leaves_in_two_trees, "its leaf values add up past the largest number"),
])
def test_a_node_model_whose_trees_cannot_be_added_up_or_read_is_refused(model_copy, change, says):
    _rewrite_node_model(model_copy, change)
    with pytest.raises(ModelFileError, match=f"^{model_copy / 'node_model.skops'}: {says}"):
        Scorer.load(model_copy)


def test_a_categorical_split_on_a_numeric_feature_is_refused(model_copy):
    def change(model):
        numeric = int(np.flatnonzero(~np.asarray(model._bin_mapper.is_categorical_, dtype=bool))[0])
        nodes = model._predictors[0][0].nodes.copy()
        split = _splits(nodes)[0]
        nodes["is_categorical"][split], nodes["bitset_idx"][split], nodes["feature_idx"][split] = 1, 0, numeric
        model._predictors[0][0].nodes = nodes
        if not len(model._predictors[0][0].raw_left_cat_bitsets):
            model._predictors[0][0].raw_left_cat_bitsets = np.zeros((1, 8), dtype=np.uint32)

    _rewrite_node_model(model_copy, change)
    with pytest.raises(ModelFileError, match=r"node_model.skops: tree 0: node 0 makes a categorical split of "
                                             r"feature \d+, which is not categorical"):
        Scorer.load(model_copy)


def test_a_node_model_of_another_kind_of_classifier_is_refused(model_copy):
    # skops trusts most of scikit-learn's classifiers (and their compiled code reads their arrays
    # unchecked); this project fits and reads HistGradientBoostingClassifier only
    import skops.io as sio
    from sklearn.linear_model import LogisticRegression

    width = len(json.loads((model_copy / "model.json").read_text())["features"])
    rng = np.random.default_rng(0)
    sio.dump(LogisticRegression().fit(rng.random((20, width)), [0, 1] * 10), model_copy / "node_model.skops")
    with pytest.raises(ModelFileError, match="node_model.skops: holds a LogisticRegression, not a "
                                             "HistGradientBoostingClassifier"):
        Scorer.load(model_copy)


def _score(folder: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    schema = tmp_path / "schema.sql"
    schema.write_text("CREATE TABLE singer (singer_id INT PRIMARY KEY, name TEXT, age INT);")
    return subprocess.run([sys.executable, "-m", "model.scoring.cli", "--model", str(folder), "--schema", str(schema),
                           "--sql", "SELECT name FROM singer WHERE age > 3"],
                          capture_output=True, text=True, env=ENV, timeout=120, check=False)


def test_rat_score_refuses_trees_that_point_outside_their_arrays_in_one_line(model_copy, tmp_path):
    # (before: scikit-learn's compiled predictor read past the arrays: killed by signal 11)
    _rewrite_node_model(model_copy, _first_tree(_children_outside))
    done = _score(model_copy, tmp_path)
    assert done.returncode == 2, (done.returncode, done.stderr[-500:])
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(
        f"rat-score: error: --model {model_copy}: {model_copy / 'node_model.skops'}: tree 0: node 0's children"), \
        done.stderr


_IN_MEMORY = textwrap.dedent("""
    import sys
    import numpy as np
    from model.errors import ModelFileError
    from model.nodes.estimator import BoostedNodeModel
    model = BoostedNodeModel.load(sys.argv[1])
    nodes = model.node_model_._predictors[0][0].nodes.copy()
    if sys.argv[2] == "outside":
        nodes["left"], nodes["right"], nodes["is_leaf"] = 10**6, 10**6, 0
    else:
        nodes["is_leaf"], nodes["left"] = 0, 0
    model.node_model_._predictors[0][0].nodes = nodes
    try:
        model.raw_node_probability(np.zeros((int(sys.argv[3]), len(model.features_))))
    except ModelFileError as e:
        print(e)
""")


@pytest.mark.parametrize("how, rows", [("outside", 1), ("outside", 2000), ("loop", 1)])
def test_scoring_trees_changed_after_loading_is_a_model_file_error_not_scikit_learns_walk(how, rows):
    # (before: CompiledTrees refused the tree and scikit-learn's predictor walked it: signal 11,
    # or a RecursionError)
    done = subprocess.run([sys.executable, "-c", _IN_MEMORY, str(PRETRAINED["spider"]), how, str(rows)],
                          capture_output=True, text=True, env=ENV, timeout=120, check=False)
    assert done.returncode == 0, (done.returncode, done.stderr[-500:])
    assert done.stdout.startswith("the node model: tree 0: node 0's children") and done.stdout.count("\n") == 1


def _zip_with(path: Path, member: str, write) -> None:
    """The zip (skops) file at ``path`` written again, deflated, ``member``'s bytes by ``write``."""
    with zipfile.ZipFile(path) as z:
        files = {info.filename: z.read(info) for info in z.infolist()}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for name, data in files.items():
            if name == member:
                with z.open(name, "w", force_zip64=True) as out:
                    write(out, data)
            else:
                z.writestr(name, data)


def test_a_skops_member_that_inflates_past_the_cap_is_refused_unread(model_copy):
    path = model_copy / "node_model.skops"
    with zipfile.ZipFile(path) as z:
        member = next(n for n in z.namelist() if n.endswith(".npy"))

    def bomb(out, data):
        out.write(data)
        zeros = bytes(16 << 20)
        for _ in range((model_file.MAX_SKOPS_BYTES >> 24) + 1):
            out.write(zeros)

    _zip_with(path, member, bomb)
    assert path.stat().st_size < 4 << 20  # (a few MB on disk)
    with pytest.raises(ModelFileError) as e:
        Scorer.load(model_copy)
    message = str(e.value)
    assert message.startswith(f"{path}: its members inflate to ") and member in message and "\n" not in message


def test_a_padded_schema_json_is_refused_unread(model_copy):
    path = model_copy / "site_model.skops"

    def padded(out, data):
        spaces = b" " * (16 << 20)
        for _ in range((model_file.MAX_SCHEMA_BYTES >> 24) + 1):
            out.write(spaces)
        out.write(data)

    _zip_with(path, "schema.json", padded)
    with pytest.raises(ModelFileError, match=f"^{path}: its schema.json inflates to .* MiB, over the "
                                             f"{model_file.MAX_SCHEMA_BYTES >> 20} MiB"):
        Scorer.load(model_copy)


def test_the_caps_leave_room_over_the_packaged_models():
    for folder in PRETRAINED.values():
        for name in ("node_model.skops", "site_model.skops"):
            with zipfile.ZipFile(folder / name) as z:
                members = z.infolist()
            assert sum(m.file_size for m in members) * 20 < model_file.MAX_SKOPS_BYTES
            assert z.getinfo("schema.json").file_size * 20 < model_file.MAX_SCHEMA_BYTES
            assert len(members) * 20 < model_file.MAX_SKOPS_MEMBERS


def test_a_model_json_number_of_100_000_digits_is_one_line(model_copy):
    path = model_copy / "model.json"
    path.write_text(path.read_text().replace('"format_version": 1', f'"format_version": {HUGE}', 1))
    assert HUGE in path.read_text()
    with pytest.raises(ModelFileError) as e:
        Scorer.load(model_copy)
    assert str(e.value).startswith(f"{path}: not JSON") and "\n" not in str(e.value) and len(str(e.value)) < 300


def test_read_json_of_a_number_of_100_000_digits_is_a_usage_error(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text(f'{{"a": {HUGE}}}')
    with pytest.raises(UsageError) as e:
        read_json(path)
    assert str(e.value) == f"{path}: not JSON this project can read (Exceeds the limit (4300 digits) for " \
                           "integer string conversion)"
    path.write_text("{oops")  # as before
    with pytest.raises(UsageError, match=r"metrics.json: not JSON \(Expecting property name"):
        read_json(path)


def test_a_prediction_file_number_of_100_000_digits_is_one_line(tmp_path):
    path = tmp_path / "predictions.json"
    path.write_text(f'{{"0": {HUGE}}}')
    questions = [Question("dev_0", "concert", "How many singers?", "SELECT count(*) FROM singer")]
    with pytest.raises(PredictionFileError) as e:
        load_predictions(path, questions)
    assert str(e.value).startswith(f"{path}: not JSON") and "\n" not in str(e.value)
