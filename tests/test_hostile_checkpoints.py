"""A neural checkpoint or run directory from elsewhere (``rat-score --model x.ckpt``,
``Scorer.load``) is read as data: its paths are not used, its hyperparameters build nothing its
weights do not hold, and whatever is wrong with it is one line naming the file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from model import Scorer
from model.errors import ModelFileError

torch = pytest.importorskip("torch")

SMOLLM2_HIDDEN = 576  # the packaged LM's hidden size: what a checkpoint's encoder reads
TINY = {"d_model": 16, "n_layers": 1, "n_heads": 2, "max_positions": 64}


def tiny_state_dict(encoder: dict | None = None, d_input: int = SMOLLM2_HIDDEN) -> dict:
    """The trainable weights of a small scratch encoder over the packaged LM (no LM loaded)."""
    from model.nodes.encoder import EncoderConfig, NodeEncoder

    weights = NodeEncoder(EncoderConfig(d_input=d_input, **(encoder or TINY))).state_dict()
    return {**{f"encoder.{k}": v for k, v in weights.items()}, "pos_weight": torch.tensor(1.0)}


def write(path: Path, hyper_parameters, state_dict) -> Path:
    torch.save({"hyper_parameters": hyper_parameters, "state_dict": state_dict}, path)
    return path


@pytest.fixture
def no_lm(monkeypatch):
    """Loading an LM (or a tokenizer) fails the test: what is refused is refused before."""
    import model.lm.load
    import model.nodes.backbone
    import model.nodes.embedder  # (imported first: each binds the loaders it imports)

    def refuse(*args, **kwargs):
        raise AssertionError("an LM was loaded")

    for name in ("load_causal_lm", "load_tokenizer", "load_encoder"):
        monkeypatch.setattr(model.lm.load, name, refuse)
    monkeypatch.setattr(model.nodes.embedder, "load_causal_lm", refuse)
    monkeypatch.setattr(model.nodes.backbone, "load_encoder", refuse)


def one_line(error: BaseException, path: Path) -> str:
    message = str(error)
    assert "\n" not in message and str(path) in message, message
    return message


def refused(path: Path, match: str = "") -> str:
    """The specific reason (NeuralCheckpoint), and Scorer.load's one line naming the file."""
    import re

    from model.nodes.infer import NeuralCheckpoint

    with pytest.raises(ModelFileError) as caught:
        NeuralCheckpoint(path, device="cpu")
    message = one_line(caught.value, path)
    assert re.search(match, message), message
    with pytest.raises(ModelFileError) as caught:
        Scorer.load(path)
    one_line(caught.value, path)
    return message


def test_a_checkpoints_lm_cache_is_never_written(tmp_path, no_lm):
    """The probe's 1.4 KB file: rat-score wrote a 517 MB converted LM to its lm_cache_dir."""
    outside = tmp_path / "outside_lm"
    ckpt = write(tmp_path / "a.ckpt", {"embedder": {"lm_cache_dir": str(outside)}}, {})
    refused(ckpt, "the state_dict holds no encoder")
    assert not outside.exists()


@pytest.mark.parametrize("encoder", [
    {"d_model": 4096, "n_layers": 3},  # 3.8 GB of encoder built before the empty state_dict was compared
    {"max_positions": 10**9, "d_model": 64, "n_heads": 8},
    {"d_model": 32768, "n_layers": 48, "n_heads": 8},
])
def test_hyperparameters_the_weights_do_not_hold_build_nothing(tmp_path, no_lm, encoder):
    ckpt = write(tmp_path / "big.ckpt", {"embedder": {}, "encoder": encoder}, {})
    start = time.perf_counter()
    refused(ckpt)
    assert time.perf_counter() - start < 2


@pytest.mark.parametrize("change, match", [
    ({"max_positions": 10**9}, r"encoder\.positions\.weight"),
    ({"d_ff": 10**9}, r"linear1\.(weight|bias) is of shape \[64\]; the hyperparameters give shape \[1000000000\]"),
    ({"d_model": 4096, "n_heads": 8}, r"of shape \[64\]; the hyperparameters give shape \[16384\]"),
    ({"n_layers": 10**9}, r"n_layers=1000000000 .*1 layer"),
    ({"head_tokens": 10**6}, r"head\.linear\.weight"),
])
def test_hyperparameters_beside_real_weights_are_compared_before_anything_is_built(tmp_path, no_lm, change, match):
    ckpt = write(tmp_path / "lying.ckpt", {"embedder": {}, "encoder": {**TINY, **change}}, tiny_state_dict())
    start = time.perf_counter()
    refused(ckpt, match)
    assert time.perf_counter() - start < 2


@pytest.mark.parametrize("hyper_parameters, match", [
    (["x"], r"hyper_parameters: expected a mapping"),
    ({"embedder": {}, "encoder": TINY, "_target_": "os.system"}, r"unknown hyperparameter _target_"),
    ({"embedder": {"evil": 1}, "encoder": TINY}, r"unknown hyperparameter embedder\.evil"),
    ({"embedder": {}, "encoder": {**TINY, "evil": 1}}, r"unknown hyperparameter encoder\.evil"),
    ({"embedder": "x", "encoder": TINY}, r"embedder: expected a mapping"),
    ({"embedder": {"name_or_path": "/etc"}, "encoder": TINY}, r"name_or_path '/etc' is a local path outside"),
    ({"embedder": {"name_or_path": "../../models/x"}, "encoder": TINY}, r"local path outside"),
    ({"embedder": {"fine_tune": True, "name_or_path": "/etc"}, "encoder": {}}, r"local path outside"),
    ({"embedder": {"name_or_path": "x@llama.cpp"}, "encoder": TINY}, r"llama\.cpp"),
    ({"embedder": {"name_or_path": "org/lm", "gguf_file": "../../x.gguf"}, "encoder": TINY}, r"gguf_file"),
    ({"embedder": {"name_or_path": "org/lm", "gguf_file": "...gguf"}, "encoder": TINY}, r"gguf_file"),
    ({"embedder": {"name_or_path": 5}, "encoder": TINY}, r"name_or_path: expected"),
    ({"embedder": {"dtype": "load"}, "encoder": TINY}, r"dtype"),
])
def test_a_checkpoints_settings_are_checked_before_an_lm_is_loaded(tmp_path, no_lm, hyper_parameters, match):
    ckpt = write(tmp_path / "odd.ckpt", hyper_parameters, tiny_state_dict())
    refused(ckpt, match)


def test_a_state_dict_that_is_not_tensors_is_one_line(tmp_path, no_lm):
    refused(write(tmp_path / "a.ckpt", {"embedder": {}, "encoder": TINY}, {"pos_weight": "x"}), "state_dict")
    refused(write(tmp_path / "b.ckpt", {"embedder": {}, "encoder": TINY}, [1]), "state_dict")
    torch.save([1, 2], tmp_path / "c.ckpt")
    refused(tmp_path / "c.ckpt", "not a checkpoint")


def test_an_lm_folder_under_the_lm_cache_is_read_and_a_hub_id_passed_on(tmp_path):
    """A local name_or_path is read when it lies under the LM cache (the caller's, or the
    project's; a link put there by the user counts); a hub id is passed to from_pretrained as it
    is (offline here: not found, one line naming the file and the id)."""
    from model.lm import default_cache_dir
    from model.nodes.infer import NeuralCheckpoint

    converted = default_cache_dir() / "SmolLM2-135M-Instruct.Q4_1"  # the packaged LM, converted once
    if not (converted / "config.json").is_file():
        NeuralCheckpoint(write(tmp_path / "packaged.ckpt", {"encoder": TINY}, tiny_state_dict()), device="cpu")
    cache = tmp_path / "lm_cache"
    cache.mkdir()
    (cache / "mine").symlink_to(converted, target_is_directory=True)
    ckpt = write(tmp_path / "a.ckpt", {"embedder": {"name_or_path": str(cache / "mine")}, "encoder": TINY},
                 tiny_state_dict())
    assert len(NeuralCheckpoint(ckpt, device="cpu", lm_cache_dir=cache).score(None, "", "SELECT 1")) == 2
    with pytest.raises(ModelFileError, match="local path outside the LM cache"):
        NeuralCheckpoint(ckpt, device="cpu")  # the project's LM cache: not under it
    hub = "some-org/some-model-that-needs-network"
    ckpt = write(tmp_path / "hub.ckpt", {"embedder": {"name_or_path": hub}, "encoder": TINY}, tiny_state_dict())
    with pytest.raises(ModelFileError, match=f"could not load causal LM '{hub}'") as caught:
        NeuralCheckpoint(ckpt, device="cpu")
    one_line(caught.value, ckpt)


def test_a_checkpoints_embedding_cache_is_not_used_and_the_callers_is(tmp_path):
    """layer=1 with cache_dir set in the file: rat-score wrote (and read back) a .pt per query in
    the file's folder. Scored with the caller's settings only (none: in memory)."""
    from model.nodes.infer import NeuralCheckpoint

    outside = tmp_path / "outside_cache"
    ckpt = write(tmp_path / "layer1.ckpt", {"embedder": {"layer": 1, "cache_dir": str(outside), "table": "/etc/x"},
                                             "encoder": TINY}, tiny_state_dict())
    scored = Scorer.load(ckpt).score("SELECT name FROM singer", schema={"singer": ["name"]})
    assert len(scored.nodes) == 3 and not outside.exists()
    mine = tmp_path / "mine"
    NeuralCheckpoint(ckpt, device="cpu", cache_dir=mine).score(None, "", "SELECT 1")
    assert list(mine.rglob("*.pt")) and not outside.exists()


@pytest.mark.parametrize("metrics, match", [
    ("{not json", r"metrics\.json: not JSON"),
    ("[1, 2]", r"metrics\.json: expected a JSON object"),
    ("[" * 100_000 + "]" * 100_000, r"metrics\.json: .*nested"),
    ('{"best_checkpoint": 5}', r"best_checkpoint: expected a path"),
])
def test_a_run_directorys_broken_metrics_is_one_line(tmp_path, metrics, match):
    from model.nodes.infer import resolve_checkpoint

    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "metrics.json").write_text(metrics)
    with pytest.raises(ModelFileError, match=match) as caught:
        resolve_checkpoint(run)
    one_line(caught.value, run / "metrics.json")
    with pytest.raises(ModelFileError) as caught:
        Scorer.load(run)
    one_line(caught.value, run / "metrics.json")


def test_a_best_checkpoint_outside_the_run_is_not_read(tmp_path):
    from model.nodes.infer import resolve_checkpoint

    elsewhere = write(tmp_path / "elsewhere.ckpt", {}, {})
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps({"best_checkpoint": str(elsewhere)}))
    with pytest.raises(ModelFileError, match="outside the run directory; give that .ckpt itself") as caught:
        resolve_checkpoint(run)
    one_line(caught.value, run)
    (run / "metrics.json").write_text(json.dumps({"best_checkpoint": f"{run}/../elsewhere.ckpt"}))
    with pytest.raises(ModelFileError, match="outside the run directory"):
        resolve_checkpoint(run)
    # the run's own: as named inside it, or (a moved run) the file of that name in its checkpoints/
    (run / "checkpoints").mkdir()
    own, last = write(run / "checkpoints" / "elsewhere.ckpt", {}, {}), write(run / "checkpoints" / "last.ckpt", {}, {})
    assert resolve_checkpoint(run) == own
    (run / "metrics.json").write_text(json.dumps({"best_checkpoint": "/old/place/run/checkpoints/gone.ckpt"}))
    assert resolve_checkpoint(run) == last
    (run / "metrics.json").write_text(json.dumps({"best_checkpoint": str(own)}))
    assert resolve_checkpoint(run) == own


@pytest.mark.slow
def test_rat_score_writes_nothing_outside_for_a_crafted_checkpoint(tmp_path):
    outside = tmp_path / "outside_lm"
    ckpt = write(tmp_path / "a.ckpt", {"embedder": {"lm_cache_dir": str(outside)}}, {})
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "RAT_CACHE": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-m", "model.scoring.cli", "--model", str(ckpt), "--sql", "SELECT 1"],
                          cwd=Path(__file__).parents[1], env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert str(ckpt) in done.stderr and not outside.exists()
    assert not (tmp_path / "cache" / "models").exists()  # refused before any LM was converted
