"""A model folder or checkpoint that cannot be used is one line naming the first missing or
malformed part, from Scorer.load, rat-score and rat-serve alike; nothing in it runs."""

import json
import os
import pickle
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from model.errors import ModelFileError
from model.scoring.scorer import PRETRAINED, Scorer

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture
def model_copy(tmp_path) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(PRETRAINED["spider"], folder)
    return folder


def _edit(folder: Path, change) -> None:
    path = folder / "model.json"
    meta = json.loads(path.read_text())
    path.write_text(json.dumps(change(meta)))


def _without(key):
    return lambda meta: {k: v for k, v in meta.items() if k != key}


@pytest.mark.parametrize("change, message", [
    (lambda meta: [meta], "model.json: expected a JSON object, found list"),
    (_without("query_calibrator"), "model.json: query_calibrator: missing"),
    (_without("features"), "model.json: features: missing"),
    (lambda meta: {**meta, "features": "abc"}, "features: expected a non-empty list of feature names"),
    (lambda meta: {**meta, "calibrator": {"kind": "platt", "a": "x"}}, "model.json: calibrator: cannot be read"),
    (lambda meta: {**meta, "calibrator": {"kind": "nope"}}, "model.json: calibrator: cannot be read"),
    (lambda meta: {**meta, "typical": {"value": {"x": "junk"}}}, "typical: expected {kind group: {feature: number}}"),
    (lambda meta: {**meta, "typical": [1, 2]}, "typical: expected"),
    (lambda meta: {**meta, "query_calibrator": {**meta["query_calibrator"], "coef": "x"}},
     "query_calibrator: expected 1 coef numbers and an intercept"),
    (lambda meta: {**meta, "query_calibrator": {"features": meta["query_calibrator"]["features"]}},
     "query_calibrator: expected 1 coef numbers"),
    # printed as they are: a terminal escape in a model folder from someone else
    (lambda meta: {**meta, "method": "\x1b]0;PWNED\x07\x1b[31mred"}, "method: expected a short line of printable"),
    (lambda meta: {**meta, "query_label": ["x"]}, "query_label: expected a short line of printable text"),
    # values no calibrator can hold: each drives verdicts if loaded
    (lambda meta: {**meta, "calibrator": {**meta["calibrator"], "constant": 5.0}}, "calibrator: cannot be read (constant"),
    (lambda meta: {**meta, "without_database": {**meta["without_database"], "calibrator": {
        "kind": "isotonic", "x_thresholds": [0.5], "y_thresholds": [2.0]}}},
     "without_database.calibrator: cannot be read (y_thresholds"),
    (lambda meta: {**meta, "calibrator": {"kind": "isotonic", "x_thresholds": [0.9, 0.1], "y_thresholds": [0.1, 0.9]}},
     "calibrator: cannot be read (x_thresholds"),
    (lambda meta: {**meta, "pointer_reliability": {k: [{**b, "top1": 7.0} for b in bins]
                                                   for k, bins in meta["pointer_reliability"].items()}},
     "pointer_reliability: expected"),
    # the names of the node model's columns, in the order the features are computed
    (lambda meta: {**meta, "features": [meta["features"][0]] * len(meta["features"])},
     "features: kind is named twice"),
    (lambda meta: {**meta, "features": [*meta["features"][:-1], "zz"]}, "features: 'zz' is no feature of nf-"),
    (lambda meta: {**meta, "features": meta["features"][::-1]}, "features: not in the order"),
    # the rates and counts label shift divides (rat-score --label-shift, rat-adapt --label-shift)
    (lambda meta: {**meta, "query_rate": "high"}, "query_rate: expected a number between 0 and 1"),
    (lambda meta: {**meta, "query_rate": 1.5}, "query_rate: expected a number between 0 and 1"),
    (lambda meta: {**meta, "query_rate": float("nan")}, "query_rate: expected a number between 0 and 1"),
    (lambda meta: {**meta, "query_rate_without_database": 0}, "query_rate_without_database: expected a number"),
    (lambda meta: {**meta, "trained_on": {**meta["trained_on"], "examples": "many"}},
     "trained_on.examples: expected a whole number, 0 or more"),
    (lambda meta: {**meta, "trained_on": {**meta["trained_on"], "correct_queries": [1]}},
     "trained_on.correct_queries: expected a whole number"),
    (lambda meta: {**meta, "trained_on": {**meta["trained_on"], "correct_nodes": -1}},
     "trained_on.correct_nodes: expected a whole number"),
    (lambda meta: {**meta, "trained_on": {**meta["trained_on"], "correct_queries": 99999}},
     "trained_on.correct_queries: 99999, more than its examples (10681)"),
    (lambda meta: {**meta, "trained_on": "spider"}, "trained_on: expected an object"),
    (lambda meta: {**meta, "recalibrated_on": "x"}, "recalibrated_on: expected an object"),
    (lambda meta: {**meta, "recalibrated_on": {"queries": 4, "right_queries": 5, "refitted": ["all"]}},
     "recalibrated_on.right_queries: 5, more than its queries (4)"),
    (lambda meta: {**meta, "recalibrated_on": {"queries": 4, "pairs": {"all": {"queries": 4, "right_queries": 2.5}}}},
     "recalibrated_on.pairs.all.right_queries: expected a whole number"),
    (lambda meta: {**meta, "query_label_without_database": "\x1b[31mred"},
     "query_label_without_database: expected a short line of printable text"),
])
def test_a_malformed_model_json_is_one_line_naming_the_part(model_copy, change, message):
    _edit(model_copy, change)
    with pytest.raises(ModelFileError) as e:
        Scorer.load(model_copy)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_damaged_or_misshapen_skops_file_is_one_line(model_copy, tmp_path):
    import numpy as np
    import skops.io as sio
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression

    site = model_copy / "site_model.skops"
    original = site.read_bytes()
    site.unlink()  # its card says it has a site head (pointer_reliability): not loaded as one without
    with pytest.raises(ModelFileError, match="site_model.skops: missing"):
        Scorer.load(model_copy)
    site.write_bytes(original)

    def cut_an_array(files: dict[str, bytes]) -> None:
        member = next(n for n in files if n.endswith(".npy"))
        files[member] = files[member][:len(files[member]) // 2]

    _rewrite_members(site, cut_an_array)
    with pytest.raises(ModelFileError, match="site_model.skops: not a readable skops file") as e:
        Scorer.load(model_copy)
    assert "\n" not in str(e.value)
    rng = np.random.default_rng(0)
    sio.dump(LogisticRegression().fit(rng.random((20, 3)), [0, 1] * 10), site)
    with pytest.raises(ModelFileError, match="site_model.skops: reads 3 features"):
        Scorer.load(model_copy)
    site.write_bytes(original)
    width = len(json.loads((model_copy / "model.json").read_text())["features"])
    for labels in ([0, 1, 2] * 20, ["a", "b"] * 30):
        sio.dump(HistGradientBoostingClassifier(max_iter=2).fit(rng.random((60, width)), labels),
                 model_copy / "node_model.skops")
        with pytest.raises(ModelFileError, match="node_model.skops: predicts classes .* not 0 and 1"):
            Scorer.load(model_copy)


def _rewrite_members(path, change) -> None:
    """The zip (skops) file at ``path`` written again with ``change`` made to its members."""
    with zipfile.ZipFile(path) as z:
        files = {n: z.read(n) for n in z.namelist()}
    change(files)
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)


def test_the_shipped_models_pass_the_checks():
    for folder in PRETRAINED.values():
        assert Scorer.load(folder).saved is not None


def test_a_skops_function_is_refused_by_its_real_name(model_copy):
    # skops names a function node "builtins.function"; the refusal names what it points at
    def add_a_function(files: dict[str, bytes]) -> None:
        schema = json.loads(files["schema.json"])
        state = schema["content"]  # the classifier's attributes: a dict node
        state["content"]["evil"] = {"__class__": "function", "__module__": "builtins", "__loader__": "FunctionNode",
                                    "content": {"module_path": "os", "function": "system"}, "__id__": 1}
        state["key_types"]["content"].append(state["key_types"]["content"][0])
        files["schema.json"] = json.dumps(schema).encode()

    _rewrite_members(model_copy / "site_model.skops", add_a_function)
    with pytest.raises(ModelFileError, match="does not trust: .*function os.system") as e:
        Scorer.load(model_copy)
    assert "builtins.function" not in str(e.value)


def test_a_skops_file_of_a_trusted_type_that_is_no_classifier_is_refused_at_load(model_copy):
    import skops.io as sio
    from sklearn.preprocessing import StandardScaler

    sio.dump(StandardScaler(), model_copy / "node_model.skops")
    with pytest.raises(ModelFileError, match="node_model.skops: holds a StandardScaler, not a classifier"):
        Scorer.load(model_copy)


def test_scoring_does_not_import_torch_where_it_is_installed():
    """skops lists scikit-learn's estimators by walking its packages, one of which imports torch
    (about 180 MB for a scorer that never uses it); `make setup` installs torch."""
    pytest.importorskip("torch")
    script = ("import sys; from model.scoring import Scorer; Scorer.pretrained().score("
              "'SELECT name FROM singer', schema={'singer': ['name']}); print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=ENV, timeout=300,
                          cwd=Path(__file__).parents[1], check=False)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr


class _Call:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_a_checkpoint_holding_a_pickled_call_is_one_line_and_runs_nothing(tmp_path):
    ckpt = tmp_path / "evil.ckpt"
    with ckpt.open("wb") as f:
        pickle.dump({"state_dict": _Call()}, f)
    with pytest.raises(ModelFileError, match="not a checkpoint this project can read"):
        Scorer.load(ckpt)
    done = subprocess.run([sys.executable, "-m", "model.scoring.cli", "--model", str(ckpt), "--sql", "SELECT 1"],
                          cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "pwned").exists()


def test_rat_serve_refuses_a_broken_model_at_start_in_one_line(model_copy):
    _edit(model_copy, _without("query_calibrator"))
    done = subprocess.run([sys.executable, "-m", "model.scoring.service", "--model", str(model_copy), "--port", "0"],
                          env=ENV, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "rat-serve: error: --model" in done.stderr and "query_calibrator: missing" in done.stderr


def test_a_path_the_system_cannot_read_is_one_line():
    for path in ("x" * 5000, "/no/such/model"):
        with pytest.raises(ModelFileError) as e:
            Scorer.load(path)
        assert "\n" not in str(e.value) and len(str(e.value)) < 300


@pytest.mark.parametrize("written_before", [False, True])
def test_a_fine_tuned_encoder_checkpoint_loads_as_one(tmp_path, written_before):
    """model=minilm: its checkpoint is read as the fine-tuned encoder it is, not as a causal LM's
    frozen embedder (a TypeError: 'not a checkpoint this project can read'); so is one written
    before its hyperparameters kept embedder.fine_tune (NodeConfidenceModule popped it from the
    dict it saved)."""
    torch = pytest.importorskip("torch")
    from omegaconf import OmegaConf

    from model.nodes.module import NodeConfidenceModule

    config = OmegaConf.load(Path(__file__).parents[1] / "conf" / "model" / "minilm.yaml")
    embedder = {k: config.embedder[k] for k in ("name_or_path", "fine_tune", "lr")}
    module = NodeConfidenceModule(embedder=embedder, encoder=OmegaConf.to_container(config.encoder), pos_weight=2.0)
    assert module.hparams.embedder["fine_tune"] is True  # what Lightning writes as hyper_parameters
    hyper_parameters = dict(module.hparams)
    if written_before:
        hyper_parameters["embedder"] = {k: v for k, v in embedder.items() if k not in ("fine_tune", "lr")}
    ckpt = tmp_path / "last.ckpt"
    torch.save({"hyper_parameters": hyper_parameters, "state_dict": module.state_dict()}, ckpt)
    scorer = Scorer.load(ckpt)
    assert scorer.neural.model.fine_tune and scorer.neural.max_tokens == 512
    scored = scorer.score("SELECT name FROM suppliers", schema={"suppliers": ["name"]})
    assert len(scored.nodes) == 3 and all(0 <= n.confidence <= 1 for n in scored.nodes)


def _digests(folder: Path) -> dict[str, str]:
    import hashlib

    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_model_saved_over_another_is_written_whole_or_not_at_all(failure, model_copy, monkeypatch):
    """A save that fails half way (a full disk, Ctrl-C) leaves the old model folder as it was and
    nothing beside it; one that succeeds leaves no file of the old model."""
    import skops.io

    from model.nodes.estimator import BoostedNodeModel

    model = BoostedNodeModel.load(model_copy)
    (model_copy / "stale.txt").write_text("of the old model")
    before = _digests(model_copy)
    dump = skops.io.dump

    def fails(obj, file, *args, **kwargs):  # the second file fails after part of it is written
        if Path(file).name == "site_model.skops":
            Path(file).write_bytes(b"PK\x03\x04 half a model")
            raise failure
        return dump(obj, file, *args, **kwargs)

    monkeypatch.setattr(skops.io, "dump", fails)
    with pytest.raises(type(failure)):
        model.save(model_copy)
    assert _digests(model_copy) == before
    assert [p.name for p in model_copy.parent.iterdir()] == ["model"]
    monkeypatch.undo()
    model.save(model_copy)
    assert [p.name for p in model_copy.parent.iterdir()] == ["model"]
    assert sorted(_digests(model_copy)) == ["model.json", "node_model.skops", "site_model.skops"]
    assert Scorer.load(model_copy).saved is not None


def test_a_model_is_never_saved_over_a_folder_that_holds_no_model(model_copy, tmp_path):
    """`--out .` or a run's folder: a model saved over it would have replaced it whole."""
    from model.errors import ModelFileError
    from model.nodes.estimator import BoostedNodeModel

    model = BoostedNodeModel.load(model_copy)
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("mine")
    with pytest.raises(ModelFileError, match="exists and holds no model"):
        model.save(work)
    assert [p.name for p in work.iterdir()] == ["notes.txt"] and sorted(p.name for p in tmp_path.iterdir()) == ["model", "work"]
    (tmp_path / "empty").mkdir()
    model.save(tmp_path / "empty")  # an empty folder, or a model's (the test above), is written
    assert Scorer.load(tmp_path / "empty").saved is not None
