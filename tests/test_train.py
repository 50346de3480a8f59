"""train.py and conf/: every experiment composes; train(cfg) runs end to end on the demo corpus and
writes what evaluate.py reads; node positions point at each node's last token."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import get_class
from omegaconf import OmegaConf, open_dict

import rat
from model.train import train

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))
# Shrinks any config to seconds: a tiny encoder, two epochs of a few batches, no logger.
TINY = [
    "logger=none", "model.encoder.d_model=32", "model.encoder.n_layers=1", "model.encoder.n_heads=4",
    "model.encoder.max_positions=512", "trainer.max_epochs=1", "trainer.limit_train_batches=3",
    "~callbacks.progress_bar", "trainer.enable_progress_bar=false", "trainer.enable_model_summary=false",
]


def compose_cfg(overrides: list[str], output_dir: Path | None = None):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    with open_dict(cfg):
        cfg.paths.output_dir = str(output_dir or "/tmp/unused")
    return cfg


def test_all_six_experiments_exist():
    assert EXPERIMENTS == ["codellama_paper", "perturbed", "perturbed_posweight", "predictions",
                           "predictions_posweight", "qwen_coder_paper"]


@pytest.mark.parametrize("experiment", EXPERIMENTS)
@pytest.mark.parametrize("data", ["demo", "spider"])
def test_experiment_composes_and_resolves(experiment, data):
    cfg = compose_cfg([f"+experiment={experiment}", f"data={data}", "data.root=/data/spider"])
    resolved = OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
    for group in ("data", "model", "trainer"):
        assert get_class(resolved[group]["_target_"])
    assert resolved["task_name"] == experiment
    # The tokenizer and the embedder are always the same LM, and inputs fit the encoder.
    assert resolved["data"]["lm_name_or_path"] == resolved["model"]["embedder"]["name_or_path"]
    assert resolved["data"]["max_tokens"] == resolved["model"]["encoder"]["max_positions"]
    perturbations = experiment not in ("predictions", "predictions_posweight")
    assert resolved["data"]["use_perturbations"] is perturbations
    weighted = experiment in ("perturbed_posweight", "predictions_posweight", "codellama_paper",
                              "qwen_coder_paper")
    assert (resolved["model"]["pos_weight"] == "auto") is weighted


def test_features_on_spider_learn_from_the_committed_llm_answers_and_nowhere_else(tmp_path, monkeypatch):
    from model.nodes.datamodule import NodeDataModule
    from model.train_boosted import params_of

    def side(overrides):
        cfg = compose_cfg(["model=features", *overrides])
        config = params_of(cfg.model)
        return config.train_side, config.train_predictions

    train_side, answers = side(["data=spider", "data.root=/data/spider"])
    assert train_side == "all"  # both models
    monkeypatch.chdir(tmp_path)  # read from the repository's root wherever train.py runs
    files = NodeDataModule().prediction_files(answers, default=False)
    assert [p.name for p in files] == ["qwen_coder.jsonl"] and files[0].stat().st_size > 100_000
    assert side(["data=spider", "data.root=/d", "model.train_predictions=null"]) == ("none", None)
    assert side(["data=spider", "data.root=/d", "model.train_side=none"])[0] == "none"
    splash = side(["data=spider", "data.root=/d", "model.train_predictions=${data.train_predictions}"])
    assert splash == ("all", "/d/../predictions/spider_train/*.jsonl")
    assert side(["data=bird", "data.root=/d"]) == ("none", None)  # Spider's answers are not BIRD's
    assert side([]) == ("none", None)  # the demo corpus: no answers, and no perturbations either
    # the neural models keep SPLASH as their train side
    assert compose_cfg(["data=spider", "data.root=/d"]).data.train_predictions.endswith("spider_train/*.jsonl")


@pytest.mark.parametrize("data, embedder", [("demo", None), ("spider", "sentence-transformers/all-MiniLM-L6-v2"),
                                           ("bird", "sentence-transformers/all-MiniLM-L6-v2")])
def test_every_dataset_has_a_default_model(data, embedder):
    """`train.py data=bird` without `model=` stopped in Hydra's error of several lines: there was
    no conf/model/default_for_bird.yaml (None: the packaged SmolLM2)."""
    cfg = compose_cfg([f"data={data}", "data.root=/d"] if data != "demo" else [])
    assert cfg.model.embedder.name_or_path == embedder


def test_paper_config_uses_codellama_at_full_width():
    cfg = compose_cfg(["+experiment=codellama_paper", "data.root=/data/spider"])
    assert cfg.model.embedder.name_or_path == "codellama/CodeLlama-7b-hf" and cfg.model.embedder.layer == 0
    assert cfg.model.encoder.d_model is None and cfg.model.encoder.max_positions == 2048
    assert cfg.trainer.accelerator == "gpu" and "predictions/spider_dev" in cfg.data.predictions


def test_qwen_config_is_the_paper_config_with_the_qwen_embedder():
    paper = OmegaConf.to_container(compose_cfg(["+experiment=codellama_paper", "data.root=/d"]), resolve=True)
    qwen = OmegaConf.to_container(compose_cfg(["+experiment=qwen_coder_paper", "data.root=/d"]), resolve=True)
    assert qwen["model"]["embedder"].pop("name_or_path") == "qwen_coder"
    assert paper["model"]["embedder"].pop("name_or_path") == "codellama/CodeLlama-7b-hf"
    assert qwen["data"].pop("lm_name_or_path") == "qwen_coder"
    paper["data"].pop("lm_name_or_path")
    # everything else (encoder, data, trainer=gpu) is the paper's
    for group in ("model", "data", "trainer"):
        assert qwen[group] == paper[group], group
    assert qwen["trainer"]["accelerator"] == "gpu"


@pytest.mark.parametrize("override", ["trainer=ddp", "trainer=gpu", "logger=csv", "logger=wandb",
                                      "callbacks=none", "model=codellama_paper", "model=qwen_coder_paper",
                                      "model=minilm"])
def test_groups_compose(override):
    cfg = OmegaConf.to_container(compose_cfg([override]), resolve=True)
    group, name = override.split("=")
    chosen = OmegaConf.to_container(OmegaConf.load(Path(__file__).parents[1] / "conf" / group / f"{name}.yaml"))
    chosen = {k: v for k, v in (chosen or {}).items() if k != "defaults"}
    # every top-level entry of the chosen group file is in the composed config
    assert set(chosen) <= set(cfg[group] or {}), (override, sorted(chosen), sorted(cfg[group] or {}))
    if group == "callbacks":
        assert not cfg[group]  # callbacks=none really removes them


def test_last_checkpoint_is_the_last_epoch_and_the_best_is_kept_apart(tmp_path):
    """conf/callbacks/default.yaml: last.ckpt (what a run resumes from) holds the last epoch even
    when an earlier one was the best (Lightning 2.6's save_last wrote it only with a new best)."""
    import hydra
    import lightning as L
    import torch
    from lightning.pytorch.demos.boring_classes import BoringModel

    class Worsening(BoringModel):  # val/loss grows each epoch: epoch 0 stays the best
        def validation_step(self, batch, batch_idx):
            self.log("val/loss", float(self.current_epoch))

    cfg = compose_cfg(["logger=none"], tmp_path)
    callbacks = [hydra.utils.instantiate(c) for name, c in cfg.callbacks.items() if name != "progress_bar"]
    trainer = L.Trainer(max_epochs=3, limit_train_batches=2, limit_val_batches=1, callbacks=callbacks,
                        logger=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Worsening())
    assert torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)["epoch"] == 2
    assert Path(trainer.checkpoint_callback.best_model_path).name == "epoch00-val_loss0.0000.ckpt"
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["epoch00-val_loss0.0000.ckpt", "last.ckpt"]


def test_resuming_in_another_run_directory_is_refused(tmp_path):
    """Resumed in a new folder, Lightning forgets the earlier best (its checkpoint folder changed)
    and the run tests a worse checkpoint: ckpt_path resumes in the run it belongs to."""
    from model.errors import UsageError
    from model.train import check_neural

    last = tmp_path / "old" / "checkpoints" / "last.ckpt"
    last.parent.mkdir(parents=True)
    write_checkpoint(last, [])
    check_neural(compose_cfg([f"ckpt_path={last}"], tmp_path / "old"))
    check_neural(compose_cfg([f"ckpt_path={last}", "train=false"], tmp_path / "new"))  # testing it: anywhere
    with pytest.raises(UsageError, match=f"resume in the run it belongs to \\(hydra.run.dir={tmp_path / 'old'}\\)"):
        check_neural(compose_cfg([f"ckpt_path={last}"], tmp_path / "new"))


def write_checkpoint(path: Path, model_overrides: list[str]) -> None:
    """What check_neural reads of a train.py checkpoint: the saved hyperparameters of the model
    those overrides build (the weights are not looked at)."""
    import torch

    model = OmegaConf.to_container(compose_cfg(model_overrides).model, resolve=True)
    torch.save({"hyper_parameters": model, "state_dict": {}}, path)


def test_a_checkpoint_of_another_model_is_one_line_naming_the_option_to_add(tmp_path):
    """ckpt_path of a model=minilm run under the default model: Lightning's RuntimeError of ~150
    state_dict keys, after the data was built; told before any work, with the option to add."""
    from model.errors import UsageError
    from model.train import check_neural

    minilm, tiny, junk = tmp_path / "minilm.ckpt", tmp_path / "tiny.ckpt", tmp_path / "notes.ckpt"
    write_checkpoint(minilm, ["model=minilm"])
    write_checkpoint(tiny, ["model.encoder.d_model=32", "model.encoder.n_heads=4"])
    junk.write_text("not a checkpoint")
    check_neural(compose_cfg([f"ckpt_path={minilm}", "train=false", "model=minilm"], tmp_path / "run"))
    with pytest.raises(UsageError, match=f"^ckpt_path={minilm}: a model=minilm checkpoint; add model=minilm$"):
        check_neural(compose_cfg([f"ckpt_path={minilm}", "train=false"], tmp_path / "run"))
    with pytest.raises(UsageError, match=f"^ckpt_path={tiny}: a model=smollm2 checkpoint; add model=smollm2$"):
        check_neural(compose_cfg([f"ckpt_path={tiny}", "train=false", "model=minilm"], tmp_path / "run"))
    with pytest.raises(UsageError, match=f"^ckpt_path={tiny}: trained with other model settings; add "
                                         "model.encoder.d_model=32 model.encoder.n_heads=4$"):
        check_neural(compose_cfg([f"ckpt_path={tiny}", "train=false"], tmp_path / "run"))
    with pytest.raises(UsageError, match=f"^ckpt_path={junk}: not a checkpoint train.py wrote "):
        check_neural(compose_cfg([f"ckpt_path={junk}", "train=false"], tmp_path / "run"))
    # cross-fitted: a model per fold; fit_and_test(test=False) would predict with untrained ones
    with pytest.raises(UsageError, match=f"^ckpt_path={minilm}: a cross-fitted run has a checkpoint per fold "
                                         "and cannot test one"):
        check_neural(compose_cfg([f"ckpt_path={minilm}", "train=false", "model=minilm", "data.protocol=crossfit"],
                                 tmp_path / "run"))


def test_prediction_files_not_found_note_relative_paths_only_for_relative_globs(tmp_path):
    from model.data.predictions import prediction_files
    from model.errors import UsageError

    pattern = str(tmp_path / "no" / "such" / "*.jsonl")
    with pytest.raises(UsageError) as refused:
        prediction_files(tmp_path, pattern)
    assert str(refused.value) == f"prediction files not found: [{pattern!r}]"


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    cfg = compose_cfg([*TINY, "trainer.limit_val_batches=2"], out)
    metrics, objects = train(cfg)
    return out, metrics, objects


def test_train_end_to_end_writes_what_evaluate_reads(demo_run):
    out, metrics, objects = demo_run
    assert {"test/loss", "test/auc", "test/brier", "test/ece", "val/loss"} <= set(metrics)
    data = json.loads((out / "data.json").read_text())
    split_of = data["db_split"]
    datamodule = objects["datamodule"]
    for split in ("val", "test"):
        rows = [json.loads(line) for line in (out / "predictions" / f"{split}.jsonl").read_text().splitlines()]
        assert len(rows) == len(datamodule.datasets[split]) > 0
        for row in rows:
            n = len(row["node_labels"])
            assert n == len(row["node_confidences"]) == len(row["node_types"]) > 0
            assert all(0 <= c <= 1 for c in row["node_confidences"])
            assert split_of[row["db_id"]] == split
            assert {"question_id", "system", "sql", "execution_match"} <= set(row)
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["test/auc"] == pytest.approx(metrics["test/auc"])
    config = OmegaConf.load(out / "config.yaml")
    assert Path(config.data.root, "tables.json").is_file()  # evaluate.py finds the databases
    assert Path(saved["best_checkpoint"]).is_file()
    # trainer.limit_val_batches=2: val/* is said to be over part of what predictions/val.jsonl holds
    assert list(saved["partial_splits"]) == ["val"]
    assert saved["partial_splits"]["val"].startswith("val/* over 2 of ")


def test_no_callbacks_no_checkpoint_and_a_limited_test_is_said_in_metrics_json(tmp_path):
    """callbacks=none writes no checkpoint (the final weights are tested); test/* over
    trainer.limit_test_batches is marked as such, the prediction file holding the whole split."""
    cfg = compose_cfg([*(o for o in TINY if o != "~callbacks.progress_bar"), "callbacks=none",
                       "trainer.limit_val_batches=2", "trainer.limit_test_batches=2"], tmp_path)
    _, objects = train(cfg)
    assert not list(tmp_path.rglob("*.ckpt")) and objects["best_checkpoint"] == ""
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["partial_splits"]["test"].startswith("test/* over 2 of ")
    rows = (tmp_path / "predictions" / "test.jsonl").read_text().splitlines()
    assert len(rows) == len(objects["datamodule"].datasets["test"])


def test_predictions_carry_the_tree_so_nothing_parses_again(demo_run):
    from model.nodes.outputs import read_predictions, tree_of

    out, _, _ = demo_run
    rows = read_predictions(out / "predictions" / "test.jsonl")
    for row in rows[:50]:
        tree = tree_of(row)
        assert tree is not None and rat.serialize(tree) == row["tree"]
        assert [n.label for n in tree.postorder()] == row["node_names"]


def test_results_notebook_runs_on_the_train_run(demo_run):
    """notebooks/02_results.ipynb on what train.py really writes (the demo's test split is one
    database, so BS-P/ECE-P are missing: the notebook must say so, not raise KeyError)."""
    from test_notebooks import _text, run_notebook

    out, _, _ = demo_run
    nb = run_notebook(REPO / "notebooks" / "02_results.ipynb", {"RAT_RUN_DIR": str(out)})
    text = _text(nb)
    assert "RAT node model" in text and "AUC=" in text and "BS-P=–" in text
    metrics = json.loads((out / "eval" / "metrics.json").read_text())
    assert metrics["node"]["methods"]["RAT node model"]["metrics"]["brier_platt"] is None
    assert "2 databases" in (out / "eval" / "report.md").read_text()


@pytest.mark.parametrize("args, message", [
    (["data=spider"], "data.root is required for this dataset (e.g. data.root=../shared/data/spider)"),
    (["data=spider", "data.root=/no/such/folder"], "data.root=/no/such/folder: no such directory"),
    (["data=spider", f"data.root={REPO / 'pyproject.toml'}"],
     f"data.root={REPO / 'pyproject.toml'}: a file, not the dataset's folder"),
    (["data=spider", f"data.root={REPO / 'docs'}"],  # (a folder too high: not the prediction files it reads from there)
     (f"data.root={REPO / 'docs'}: no tables.json (or dev_tables.json) and no dev.json (data.eval_split) in it; "
      "give the dataset's own folder (e.g. data.root=../shared/data/spider or ../shared/data/bird)")),
    (["train=false"], "train=false needs ckpt_path=<run>/checkpoints/<file>.ckpt (the checkpoint to test)"),
    (["model=features", "train=false"], ("train=false: model=features has no checkpoint; it fits and tests in one "
                                         "run (its saved model, <run>/model, scores new outputs: rat-score --model <run>)")),
    (["data.protocol=crossfit", "data.folds=9"], ("data.folds=9: the eval split has only 5 databases with "
                                                 "examples; use data.folds=3 to 5, or data.protocol=split")),
    (["model=features", "data.protocol=crossfit", "data.folds=9"], (  # (the boosted run's: a traceback)
        "data.folds=9: the eval split has only 5 databases with examples; use data.folds=3 to 5, or data.protocol=split")),
    # one database (the demo's first 20 questions): the advice was fewer folds or data.protocol=split,
    # which were refused (data.folds=1) or died in a traceback (train: no examples to fit on)
    (["model=features", "data.max_questions=20"], (
        "data.protocol=split: the eval split has 1 database with examples; training needs 3 at least (whole "
        "databases to train, validate and test on, under either data.protocol): add outputs on other databases' "
        "questions")),
    (["model=features", "data.max_questions=20", "data.protocol=crossfit", "data.folds=3"], (
        "data.folds=3: the eval split has 1 database with examples; training needs 3 at least (whole "
        "databases to train, validate and test on, under either data.protocol): add outputs on other databases' "
        "questions")),
    (["data.protocol=crossfit", "data.folds=3", "data.run_folds=[3]"],
     "data.run_folds: folds are numbered 0..2; found [3]"),
    (["data.fold_calibration=beta"], "data.fold_calibration must be platt, isotonic or none; found 'beta'"),
    (["threads=0"], "threads must be a whole number of 1 or more, or null; found 0"),
    (["seed=abc"], "seed must be a whole number; found 'abc'"),
    (["+data.typo_key=1"], ("data: no key 'typo_key' (the data keys: _target_, batch_size, consensus, "
                           "dedupe_train, eval_perturbations, eval_split, evidence, example_options, "
                           "fold_calibration, folds, holdout_system, labels, llm_answers, lm_cache_dir, "
                           "lm_gguf_file, lm_name_or_path, max_questions, max_tokens, num_workers, predictions, "
                           "protocol, require_database, root, run_folds, seed, sources_file, split_seed, "
                           "test_fraction, train_gold, train_perturbations, train_predictions, train_split, "
                           "use_perturbations, use_predictions, val_fraction)")),
    (["data.protocol=crossfit", "data.folds=1"],
     "data.folds must be a whole number of 3 or more (test, validation and training folds); found 1"),
    (["model=features", "data.protocol=bogus"], "data.protocol must be split or crossfit; found 'bogus'"),
    (["data.test_fraction=1.5"], "data.test_fraction must be a number from 0 to below 1; found 1.5"),
    (["data.val_fraction=-0.1"], "data.val_fraction must be a number from 0 to below 1; found -0.1"),
    (["trainer.max_epochs=0"], "trainer.max_epochs must be a whole number of 1 or more; found 0"),
    (["trainer.max_epochs=-2"], "trainer.max_epochs must be a whole number of 1 or more; found -2"),
    (["data.batch_size=0"], "data.batch_size must be a whole number of 1 or more; found 0"),
    (["model.lr=-1"], "model.lr must be a number above 0; found -1"),
    (["model.pos_weight=abc"], "model.pos_weight must be auto, none or a number above 0; found 'abc'"),
    (["model.encoder.d_model=7"], "model.encoder.d_model=7 is not divisible by model.encoder.n_heads=8"),
    (["model=features", "data.max_questions=-3"],
     "data.max_questions must be a whole number of 1 or more, or null (all); found -3"),
    (["model=features", "model.drop=[nosuchfeature]"], (
        "model.drop: unknown feature or group ['nosuchfeature'] (groups: consensus, execution, linking, lm, question, "
        "semantic, structure, values; sets: database, benchmark_size; the features: docs/training.md#node-features)")),
    (["model=features", "+model.hgbb.max_iter=5"], (
        "model: no key 'hgbb' (the keys: groups, site_head, site_context, site_wrong_only, inner_folds, train_side, "
        "train_predictions, calibration, hgb, monotone, quantiles, feature_timeout_s, use_cache, lm, drop, "
        "save_model, database, test_database)")),
])
def test_user_mistakes_are_one_line_and_exit_2(tmp_path, args, message):
    run = tmp_path / "run"
    result = subprocess.run([sys.executable, str(REPO / "train.py"), *args, "logger=none",
                             f"hydra.run.dir={run}"], check=False, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == f"train.py: error: {message}"
    assert not run.exists()  # no junk run directory


def test_a_dataset_without_a_train_split_is_told_what_reads_it_and_how_to_leave_it_out(tmp_path):
    """Your own data (a dev split) with data=spider, without data.llm_answers=null: the error named
    the missing train.json, not that only data.llm_answers reads it (and only after labelling
    the eval split's outputs)."""
    import shutil

    from model.errors import UsageError
    from model.synth.demo import demo_root

    root = tmp_path / "mydata"
    shutil.copytree(demo_root(), root, ignore=shutil.ignore_patterns("train.json"))
    cfg = compose_cfg(["model=features", "data=spider", f"data.root={root}", f"data.predictions=[{root}/predictions/*]",
                       "logger=none"], tmp_path / "run")
    with pytest.raises(UsageError) as error:
        train(cfg)
    assert str(error.value) == (
        f"no questions for split 'train' under {root} (looked for train.json): data.train_split=train is read only "
        "for data.llm_answers (data/llm_answers/spider_train/*.jsonl: outputs on its questions); to learn from the "
        "eval split's outputs alone: data.llm_answers=null")


def test_split_databases_leaves_no_role_without_a_database_and_refuses_too_few():
    from model.data.folds import split_databases
    from model.errors import UsageError

    for seed in range(10):  # a small and a large database: test took both small ones, val the large one
        assert sorted(split_databases({"a": 1, "b": 1, "c": 100}, 0.2, 0.3, seed=seed).values()) == [
            "test", "train", "val"]
    assert sorted(split_databases({"a": 1, "b": 1}, 0.0, 0.3).values()) == ["test", "train"]
    with pytest.raises(UsageError, match="^data.protocol=split: the eval split has 2 databases with examples; "
                                         "training needs 3 at least"):
        split_databases({"a": 10, "b": 10}, 0.2, 0.3)


def test_an_lm_that_is_not_installed_is_one_line_naming_its_setup(tmp_path):
    """model=qwen_coder_paper before `make setup-qwen`: the file Hydra could not build the model
    without, in one line (not Hydra's wrapper of several), and no junk run directory."""
    run = tmp_path / "run"
    result = subprocess.run([sys.executable, str(REPO / "train.py"), "model=qwen_coder_paper", "logger=none",
                             f"hydra.run.dir={run}"], check=False, capture_output=True, text=True, cwd=tmp_path,
                            env={**os.environ, "RAT_CACHE": str(tmp_path / "cache")})  # (nothing installed there)
    assert result.returncode == 2
    expected = ("train.py: error: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (qwen_coder) is not installed: "
                f"run `make setup-qwen` (expected {tmp_path / 'cache' / 'models' / 'qwen_coder' / 'qwen.gguf'})")
    assert [line for line in result.stderr.splitlines() if not line.startswith("INFO: ")] == [expected]  # (the seed's)
    assert not run.exists()


def test_a_gpu_run_where_there_is_none_is_one_line(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    from model.errors import UsageError
    from model.train import check_neural

    with pytest.raises(UsageError, match=r"^trainer.accelerator=gpu: torch finds no GPU here \(use trainer=cpu\)$"):
        check_neural(compose_cfg(["trainer.accelerator=gpu"], tmp_path))


def test_lightnings_refusal_of_a_setting_is_one_line_naming_the_key(capsys):
    """What Lightning refuses while Hydra builds the Trainer (its MisconfigurationException) is
    the user's mistake, told in one line with the config key; any other failure stays a traceback."""
    from hydra.errors import InstantiationException
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    from model.errors import user_errors

    def building(cause):
        try:
            raise cause
        except Exception as e:
            raise InstantiationException(f"Error in call to target 'lightning.Trainer':\n{e!r}\nfull_key: trainer") from e

    with pytest.raises(SystemExit) as done, user_errors("train.py"):
        building(MisconfigurationException("`devices` must be a positive integer, found 0"))
    assert done.value.code == 2
    assert capsys.readouterr().err == "train.py: error: trainer: `devices` must be a positive integer, found 0\n"
    with pytest.raises(InstantiationException), user_errors("train.py"):
        building(RuntimeError("a bug"))


def test_threads_caps_torch_and_the_openmp_and_blas_pools_for_the_run():
    import torch
    from threadpoolctl import threadpool_info

    from train import cpu_threads

    before, variable = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    with cpu_threads(1):
        assert torch.get_num_threads() == 1
        assert {pool["num_threads"] for pool in threadpool_info()} == {1}
        assert os.environ["OMP_NUM_THREADS"] == "1"  # what a pool loaded during the run reads
    assert torch.get_num_threads() == before and os.environ.get("OMP_NUM_THREADS") == variable
    with cpu_threads(None):  # threads=null: the libraries' own default
        assert torch.get_num_threads() == before


def test_missing_prediction_files_are_one_line_naming_the_folder_read(tmp_path):
    # a relative pattern found neither in the current folder nor in the repository: the user is
    # told which pattern found nothing and where it was looked for
    result = subprocess.run([sys.executable, str(REPO / "train.py"), "model=features", "logger=none",
                             "data.predictions=no/such/*.jsonl", f"hydra.run.dir={tmp_path / 'run'}"],
                            check=False, capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == ("train.py: error: prediction files not found: ['no/such/*.jsonl'] "
                                     f"(a relative path is read from the current folder, {tmp_path}, then from the repository's, {REPO})")


def test_splits_are_schema_disjoint(demo_run):
    _, _, objects = demo_run
    dbs = {s: {e.db_id for e in d} for s, d in objects["datamodule"].datasets.items()}
    assert not dbs["train"] & dbs["val"] and not dbs["train"] & dbs["test"] and not dbs["val"] & dbs["test"]


def test_node_positions_point_at_each_nodes_last_token(demo_run):
    """The token at each node position holds that node's closing parenthesis (rat.node_ends)."""
    from model.data.datasets import load_schemas

    _, _, objects = demo_run
    datamodule = objects["datamodule"]
    tokenizer = datamodule.tokenizer()
    schemas = load_schemas(datamodule.root)
    checked = 0
    for example in datamodule.datasets["test"][:40]:
        text = tokenizer.decode(example.input_ids)
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        tree = rat.to_tree(example.sql, schemas[example.db_id])
        start = text.rindex("tree: ") + len("tree: ")
        assert text[start:] == rat.serialize(tree)
        nodes = tree.postorder()
        assert len(nodes) == len(example.node_positions)
        for node, end, position in zip(nodes, rat.node_ends(tree), example.node_positions):
            char = start + end
            assert text[char] == ")" and text[:char].endswith(node.label)
            token_start, token_end = offsets[position]
            assert token_start <= char < token_end, (node.label, text[token_start:token_end])
            checked += 1
    assert checked > 100


def test_checkpoint_reloads_and_infer_scores_every_node(demo_run, capsys):
    out, _, objects = demo_run
    from model.nodes.infer import main

    datamodule = objects["datamodule"]
    example = datamodule.datasets["test"][0]
    code = main(["--ckpt", str(out), "--schema", str(datamodule.root / "tables.json"), "--db-id", example.db_id,
                 "--question", "how many?", "--sql", example.sql, "--json"])
    assert code == 0
    nodes = json.loads(capsys.readouterr().out)["nodes"]
    assert len(nodes) == len(example.node_labels)
    assert nodes[-1]["depth"] == 0 and all(0 <= n["confidence"] <= 1 for n in nodes)
    code = main(["--ckpt", str(out), "--schema", str(datamodule.root / "tables.json"), "--db-id", example.db_id,
                 "--question", "how many?", "--sql", example.sql, "--color", "always"])
    printed = capsys.readouterr().out
    assert code == 0 and "\033[" in printed and len(printed.splitlines()) == len(nodes) + 1
    assert printed.splitlines()[-1].startswith("look here first: ")


def test_infer_scores_a_whole_prediction_file_in_one_call(demo_run, tmp_path, capsys):
    from model.data.jsonl import read_jsonl
    from model.nodes.infer import main

    out, _, objects = demo_run
    root = objects["datamodule"].root
    predictions = min((root / "predictions").glob("*.jsonl"))
    scored = tmp_path / "scored.jsonl"
    assert main(["--ckpt", str(out), "--data-root", str(root), "--predictions", str(predictions),
                 "--out", str(scored)]) == 0
    rows = read_jsonl(scored)
    n_predictions = sum(1 for line in predictions.read_text().splitlines() if line.strip())
    assert 0.9 * n_predictions <= len(rows) <= n_predictions and f"scored {len(rows)}" in capsys.readouterr().out
    for row in rows[:20]:
        assert len(row["node_confidences"]) == len(row["node_names"]) > 0 and "node_labels" not in row


def test_infer_refuses_a_missing_checkpoint_in_one_line(capsys):
    from model.nodes.infer import main

    assert main(["--ckpt", "/no/such/run", "--question", "q", "--sql", "SELECT 1"]) == 2
    assert capsys.readouterr().err.strip() == "python -m model.nodes.infer: error: no checkpoint at /no/such/run (expected a .ckpt file or a run directory)"


@pytest.mark.slow
def test_same_seed_same_predictions_and_resume(tmp_path):
    import torch

    runs = []
    for name in ("a", "b"):
        cfg = compose_cfg([*TINY, "trainer.limit_val_batches=2", "trainer.max_epochs=2"], tmp_path / name)
        train(cfg)
        runs.append((tmp_path / name / "predictions" / "test.jsonl").read_text())
    assert runs[0] == runs[1]
    last = tmp_path / "a" / "checkpoints" / "last.ckpt"
    callbacks = torch.load(last, weights_only=True)["callbacks"]
    best_so_far = next(v["best_model_score"] for k, v in callbacks.items()
                       if k.startswith("ModelCheckpoint") and "'monitor': 'val/loss'" in k)
    cfg = compose_cfg([*TINY, "trainer.limit_val_batches=2", "trainer.max_epochs=3", f"ckpt_path={last}"],
                      tmp_path / "a")  # resumed in its own run directory: the best so far is kept
    _, objects = train(cfg)
    assert objects["trainer"].current_epoch == 3 and objects["trainer"].global_step == 9
    best = objects["trainer"].checkpoint_callback
    assert float(best.best_model_score) <= float(best_so_far) and Path(best.best_model_path).is_file()
    assert torch.load(last, weights_only=True)["epoch"] == 2


@pytest.mark.slow
def test_ddp_two_cpu_processes(tmp_path):
    env = {**os.environ, "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [sys.executable, "train.py", "trainer=ddp", "trainer.devices=2", "trainer.accelerator=cpu",
           *TINY, "trainer.limit_val_batches=2", "trainer.limit_test_batches=2", f"hydra.run.dir={tmp_path}"]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "GLOBAL_RANK: 1, MEMBER: 2/2" in done.stderr + done.stdout  # really two processes
    assert (tmp_path / "predictions" / "test.jsonl").is_file()
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert "test/auc" in metrics


def test_partial_splits_reads_the_limits_lightning_applies():
    """metrics.json's partial_splits from trainer.limit_*_batches: a checkpoint tested with
    train=false validates every batch, while the trainer's num_val_batches (fit's loop, which did
    not run) said 0 of 10."""
    from types import SimpleNamespace

    from model.train import partial_splits

    trainer = SimpleNamespace(limit_val_batches=1.0, limit_test_batches=2, num_val_batches=[], num_test_batches=[2])
    datamodule = SimpleNamespace(val_dataloader=lambda: [0] * 10, test_dataloader=lambda: [0] * 10)
    said = partial_splits(trainer, datamodule, {"val/auc": 0.5, "test/auc": 0.5})
    assert list(said["partial_splits"]) == ["test"] and said["partial_splits"]["test"].startswith("test/* over 2 of 10")
    trainer.limit_val_batches = 0.25
    assert partial_splits(trainer, datamodule, {"val/auc": 0.5})["partial_splits"]["val"].startswith("val/* over 2 of 10")
