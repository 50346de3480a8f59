"""Node model v2: the fine-tuned encoder (model=minilm), cross-fitting over the eval databases,
real outputs on the train split as training data, training dedupe and the consensus input."""

import json

import lightning as L
import pytest
import torch
from test_model_training import fit_small, synthetic
from test_train import TINY, compose_cfg

from model.data.datasets import load_questions
from model.nodes.datamodule import Collate, NodeDataModule, dedupe
from model.nodes.module import NodeConfidenceModule
from model.nodes.outputs import read_predictions
from model.synth.demo import demo_root
from model.train import train

MINILM = {"name_or_path": "sentence-transformers/all-MiniLM-L6-v2", "fine_tune": True, "lr": 1e-4}


def minilm_module(**kwargs) -> NodeConfidenceModule:
    return NodeConfidenceModule(embedder=MINILM, encoder={"max_positions": 64}, lr=3e-3, warmup_steps=1,
                                **kwargs)


def batch_of(examples):
    return Collate(0)(list(enumerate(examples)))


def test_minilm_is_fine_tuned_end_to_end_and_learns_a_planted_signal():
    L.seed_everything(0)
    data = {"train": synthetic(30, 0, "a"), "val": synthetic(10, 1, "b"), "test": synthetic(10, 2, "c")}
    datamodule = NodeDataModule.from_tokenized(data, pad_id=0, batch_size=16)
    model = minilm_module()
    before = model.backbone.backbone.embeddings.word_embeddings.weight.detach().clone()
    optimizer = model.configure_optimizers()["optimizer"]
    assert sorted({g["lr"] for g in optimizer.param_groups}) == [1e-4, 3e-3]  # encoder, head
    _, val = fit_small(model, datamodule, epochs=4)
    assert val["val/auc"] > 0.8
    after = model.backbone.backbone.embeddings.word_embeddings.weight.detach()
    assert not torch.equal(before, after)  # the pre-trained encoder itself was trained


def test_consensus_head_reads_each_nodes_agreement():
    model = minilm_module(consensus=True).eval()
    examples = synthetic(1, 0, "a")[:2]
    batch = batch_of(examples)
    assert torch.isnan(batch["node_agreement"]).all()  # examples without agreements: unknown
    unknown = model(batch)
    for e in examples:
        e.node_agreement = [1.0] * len(e.node_labels)
    agreed = model(batch_of(examples))
    for e in examples:
        e.node_agreement = [0.0] * len(e.node_labels)
    disagreed = model(batch_of(examples))
    mask = batch["node_mask"]
    assert not torch.allclose(agreed[mask], disagreed[mask]) and not torch.allclose(unknown[mask], agreed[mask])
    # untrained, the head ranks by agreement: its logit enters with weight 1 (clipped at 0.02/0.98)
    gap = 2 * torch.log(torch.tensor(0.98 / 0.02))
    assert torch.allclose(agreed[mask] - disagreed[mask], gap.expand(int(mask.sum())), atol=1e-4)
    with pytest.raises(ValueError, match="consensus"):
        model.backbone(batch["input_ids"], batch["attention_mask"], batch["node_positions"], mask)


def test_weighted_loss_equals_the_loss_over_the_duplicates():
    model = NodeConfidenceModule(embedder={"layer": 0}, encoder={"d_model": 32, "n_layers": 1, "n_heads": 4,
                                                                 "max_positions": 64}, pos_weight=0.3)
    logits, labels = torch.tensor([0.5, -1.0, 2.0]), torch.tensor([1, 0, 1])
    weighted = model.loss(logits, labels, torch.tensor([3.0, 1.0, 2.0]))
    repeated = model.loss(logits.repeat_interleave(torch.tensor([3, 1, 2])),
                          labels.repeat_interleave(torch.tensor([3, 1, 2])))
    assert weighted == pytest.approx(float(repeated))


def test_dedupe_merges_identical_inputs_only():
    examples = synthetic(2, 0, "a")
    twin = synthetic(2, 0, "a")[0]
    merged = dedupe([*examples, twin])
    assert len(merged) == len(examples) and merged[0].weight == 2
    assert all(getattr(e, "weight", 1) == 1 for e in examples)  # the originals are untouched


@pytest.fixture(scope="module")
def crossfit_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("crossfit")
    cfg = compose_cfg([*TINY, "trainer.limit_val_batches=2", "data.protocol=crossfit", "data.folds=3"], out)
    metrics, objects = train(cfg)
    return out, metrics, objects


def test_crossfit_scores_every_prediction_out_of_fold(crossfit_run):
    out, metrics, objects = crossfit_run
    datamodule = objects["datamodule"]
    rows = read_predictions(out / "predictions" / "test.jsonl")
    predicted = datamodule.sources["eval_predicted"]
    assert len(rows) == len(predicted)
    assert sorted((r["question_id"], r["system"]) for r in rows) == sorted(
        (e.question_id, e.system) for e in predicted)
    folds = json.loads((out / "data.json").read_text())["folds"]
    fold_of_db = {db: int(f) for f, dbs in folds.items() for db in dbs}
    assert {r["fold"] for r in rows} == {0, 1, 2}
    assert all(fold_of_db[r["db_id"]] == r["fold"] for r in rows)  # scored by the fold it tests
    assert all("single-system" in r["method"] for r in rows)
    val_rows = read_predictions(out / "predictions" / "val.jsonl")
    assert all(fold_of_db[r["db_id"]] == (r["fold"] + 1) % 3 for r in val_rows)
    assert {"test/auc", "test/query_auc", "val/auc"} <= set(metrics)
    for i in range(3):
        assert (out / f"fold{i}" / "checkpoints").is_dir()


def test_crossfit_folds_are_calibrated_on_their_validation_databases(crossfit_run, tmp_path):
    import shutil

    import numpy as np

    from model.calibrators import fit_calibrator
    from model.train import calibrate_run

    out = crossfit_run[0]
    rows = read_predictions(out / "predictions" / "test.jsonl")
    val = read_predictions(out / "predictions" / "val.jsonl")
    for fold in range(3):
        raw = np.concatenate([r["node_confidences_raw"] for r in val if r["fold"] == fold])
        labels = np.concatenate([r["node_labels"] for r in val if r["fold"] == fold])
        platt = fit_calibrator("platt", raw, labels)
        mine = [r for r in rows if r["fold"] == fold]
        expected = platt.confidence(np.concatenate([r["node_confidences_raw"] for r in mine]))
        assert np.allclose(np.concatenate([r["node_confidences"] for r in mine]), expected, atol=1e-5)
    copy = tmp_path / "run"
    shutil.copytree(out / "predictions", copy / "predictions")
    once = read_predictions(copy / "predictions" / "test.jsonl")
    calibrate_run(copy)  # again: from the raw values, so nothing changes
    assert read_predictions(copy / "predictions" / "test.jsonl") == once
    calibrate_run(copy, "none")
    assert all(r["node_confidences"] == r["node_confidences_raw"] for r in read_predictions(copy / "predictions" / "test.jsonl"))


def test_crossfit_folds_never_train_on_their_test_databases(crossfit_run):
    datamodule = crossfit_run[2]["datamodule"]
    for fold in range(3):
        datamodule.use_fold(fold)
        test_dbs = {e.db_id for e in datamodule.datasets["test"]}
        val_dbs = {e.db_id for e in datamodule.datasets["val"]}
        train_dbs = {e.db_id for e in datamodule.datasets["train"]}
        assert test_dbs and val_dbs and not (test_dbs & train_dbs) and not (val_dbs & train_dbs)


def test_evaluate_reads_a_crossfit_run(crossfit_run):
    from test_boosted import compose_cfg as compose_any

    from model.evaluate import evaluate

    out = crossfit_run[0]
    results = evaluate(compose_any("evaluate", [f"run_dir={out}", "n_bootstrap=0", "breakdown_bootstrap=0"]))
    method = results["node"]["methods"]["RAT node model (single-system)"]
    assert 0 <= method["metrics"]["auc"] <= 1 and "top1" in method["localisation"]


def assert_run_covers_only_fold(run, fold: int) -> None:
    """A ``data.run_folds=[fold]`` run: its predictions and data.json hold that fold only."""
    rows = read_predictions(run / "predictions" / "test.jsonl")
    folds = json.loads((run / "data.json").read_text())["folds"]
    assert rows and {r["fold"] for r in rows} == {fold} and list(folds) == [str(fold)]
    assert {r["db_id"] for r in rows} == set(folds[str(fold)])
    assert {r["fold"] for r in read_predictions(run / "predictions" / "val.jsonl")} == {fold}


def test_run_folds_runs_only_the_listed_folds(tmp_path):
    cfg = compose_cfg([*TINY, "trainer.limit_val_batches=2", "data.protocol=crossfit", "data.folds=3",
                       "data.run_folds=[1]"], tmp_path)
    train(cfg)
    assert_run_covers_only_fold(tmp_path, 1)
    assert (tmp_path / "fold1" / "checkpoints").is_dir() and not (tmp_path / "fold0").exists()


def test_compare_node_runs_pairs_a_run_with_its_baseline(crossfit_run):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "compare_node_runs.py"
    out = str(crossfit_run[0])
    result = subprocess.run([sys.executable, str(script), "--baseline", out, out, "--n-bootstrap", "20"],
                            capture_output=True, text=True, check=True)
    line = result.stdout.strip().splitlines()[-1].split(" | ")
    rows = read_predictions(crossfit_run[0] / "predictions" / "test.jsonl")
    assert line[1:4] == ["0,1,2", "3", str(len(rows))]  # folds, systems, outputs
    assert line[5] == line[6] and line[7] == "+0.000 [+0.000, +0.000]"  # a run against itself
    assert 0.5 < float(line[11]) <= 1  # agreement of the demo's three systems ranks nodes
    bad = subprocess.run([sys.executable, str(script), "--baseline", "/no/run", out], check=False,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "no predictions/test.jsonl" in bad.stderr and "Traceback" not in bad.stderr


def test_partial_id_keyed_outputs_on_the_train_split_are_training_examples(tmp_path):
    questions = load_questions(demo_root(), "train")[:5]
    path = tmp_path / "parser_run1.jsonl"
    path.write_text("".join(json.dumps({"question_id": q.question_id, "sql": q.gold_sql}) + "\n"
                            for q in questions[:3]))
    datamodule = NodeDataModule(train_predictions=str(path), use_perturbations=False, train_gold=True)
    built = datamodule._build()
    systems = [e.system for e in built["train_side"]]
    assert systems.count("parser_run1") == 3  # three rows cover three questions: no error
    assert systems.count("gold") == len(load_questions(demo_root(), "train"))
    assert all(all(e.node_labels) for e in built["train_side"] if e.system == "gold")


def test_consensus_data_attaches_agreements_to_real_outputs_only():
    datamodule = NodeDataModule(consensus=True, max_questions=40)
    datamodule.build_sources()
    predicted = datamodule.sources["eval_predicted"]
    assert predicted and all(e.node_agreement is not None and len(e.node_agreement) == len(e.node_labels)
                             for e in predicted)  # three demo systems answer every question
    assert all(e.node_agreement is None for e in datamodule.sources["train_side"])  # perturbations


def test_leave_one_system_out_trains_without_it_and_tests_only_it():
    datamodule = NodeDataModule(protocol="crossfit", folds=3, use_perturbations=False,
                                holdout_system="demo_weak")
    datamodule.build_sources()
    for fold in range(3):
        datamodule.use_fold(fold)
        assert {e.system for e in datamodule.datasets["test"]} == {"demo_weak"}
        assert "demo_weak" not in {e.system for s in ("train", "val") for e in datamodule.datasets[s]}
    from model.errors import UsageError

    with pytest.raises(UsageError, match="data.holdout_system=nobody: no such system"):
        NodeDataModule(protocol="crossfit", folds=3, holdout_system="nobody").use_fold(0)
