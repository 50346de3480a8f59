"""The LightningModule + datamodule on a synthetic corpus with a planted signal: it is learned,
pos_weight=auto is the label ratio, the frozen embedder never changes, batches keep questions."""

import random
from dataclasses import dataclass, field

import lightning as L
import pytest
import torch

from model.nodes.datamodule import Collate, NodeDataModule, QuestionBatchSampler, split_databases
from model.nodes.module import NodeConfidenceModule

GOOD, BAD = [1000, 1001, 1002], [2000, 2001, 2002]  # token ids that decide a node's label


@dataclass
class Example:
    question_id: str
    db_id: str
    input_ids: list[int]
    node_positions: list[int]
    node_labels: list[int]
    system: str = "synthetic"
    sql: str = ""
    node_types: list[str] = field(default_factory=list)
    execution_match: bool | None = None


def synthetic(n_questions: int, seed: int, db: str) -> list[Example]:
    """Random filler tokens; each node's last token is GOOD (label 1) or BAD (label 0), ~30% BAD."""
    rng = random.Random(seed)
    out = []
    for q in range(n_questions):
        for variant in range(3):  # several "systems" per question, batched together
            length = rng.randint(10, 24)
            ids = [rng.randint(3000, 9000) for _ in range(length)]
            positions = sorted(rng.sample(range(1, length), rng.randint(2, 5)))
            labels = []
            for p in positions:
                correct = rng.random() > 0.3
                ids[p] = rng.choice(GOOD if correct else BAD)
                labels.append(int(correct))
            out.append(Example(f"{db}_{q}", db, ids, positions, labels, node_types=["Column"] * len(positions)))
    return out


@pytest.fixture(scope="module")
def trained():
    L.seed_everything(0)
    data = {"train": synthetic(40, 0, "db_train"), "val": synthetic(12, 1, "db_val"),
            "test": synthetic(12, 2, "db_test")}
    datamodule = NodeDataModule.from_tokenized(data, pad_id=0, batch_size=16)
    model = NodeConfidenceModule(
        embedder={"layer": 0},
        encoder={"d_model": 32, "n_layers": 1, "n_heads": 4, "max_positions": 64, "dropout": 0.0},
        lr=3e-3, warmup_steps=1,
    )
    table_before = model.embedder.frozen.weight.detach().clone()
    trainer, val = fit_small(model, datamodule, epochs=6)
    return model, datamodule, trainer, val, table_before


def fit_small(model, datamodule, epochs: int):
    """Fit a node module on a small tokenized datamodule on the CPU; (trainer, val metrics)."""
    trainer = L.Trainer(max_epochs=epochs, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, deterministic=True,
                        use_distributed_sampler=False)
    model.resolve_pos_weight(*datamodule.train_label_counts())
    trainer.fit(model, datamodule=datamodule)
    return trainer, trainer.validate(model, datamodule=datamodule, verbose=False)[0]


def test_planted_signal_is_learned(trained):
    _, _, _, val, _ = trained
    assert val["val/auc"] > 0.9, val
    assert val["val/ece"] < 0.2 and val["val/brier"] < 0.15, val


def test_pos_weight_auto_is_the_training_label_ratio(trained):
    model, datamodule, _, _, _ = trained
    labels = [y for e in datamodule.datasets["train"] for y in e.node_labels]
    negatives, positives = labels.count(0), labels.count(1)
    assert model.pos_weight.item() == pytest.approx(negatives / positives)
    assert 0.2 < model.pos_weight.item() < 0.7  # ~30% wrong nodes planted
    assert "pos_weight" in model.state_dict()  # the resolved value travels with checkpoints


def test_embedder_is_frozen_and_unchanged_by_training(trained):
    model, _, trainer, _, table_before = trained
    table = model.embedder.frozen.weight
    assert not table.requires_grad and table.grad is None
    assert torch.equal(table, table_before)
    optimized = {id(p) for g in trainer.optimizers[0].param_groups for p in g["params"]}
    assert id(table) not in optimized
    assert optimized == {id(p) for p in model.encoder.parameters()}
    assert not any(k.startswith("embedder") for k in model.state_dict())


def test_confidences_are_per_node_in_example_order(trained):
    model, datamodule, _, _, _ = trained
    loader = datamodule.split_loader("test")
    order = [int(i) for b in loader for i in b["index"]]
    confidences = model.node_confidences(loader)
    examples = datamodule.datasets["test"]
    assert sorted(order) == list(range(len(examples)))
    for index, conf in zip(order, confidences):
        assert len(conf) == len(examples[index].node_labels)
        assert all(0.0 <= c <= 1.0 for c in conf)


def test_batches_keep_each_question_together():
    qids = [f"q{i // 3}" for i in range(30)] + ["big"] * 7
    sampler = QuestionBatchSampler(qids, batch_size=5, shuffle=True, seed=1)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(37))
    for b in batches:
        assert len(b) <= 5
        if qids[b[0]] != "big":
            assert all(sum(qids[i] == qids[j] for j in b) == 3 for i in b)  # whole groups only
    sampler.set_epoch(1)
    assert list(sampler) != batches  # reshuffled per epoch
    sampler.set_epoch(0)
    assert list(sampler) == batches  # and reproducibly


def test_ddp_shards_cover_every_batch_with_equal_counts():
    qids = [f"q{i}" for i in range(11)]
    shards = [list(QuestionBatchSampler(qids, 2, shuffle=True, pad_to_equal=True, rank=r, world_size=2))
              for r in range(2)]
    assert len(shards[0]) == len(shards[1])
    assert {i for s in shards for b in s for i in b} == set(range(11))
    evals = [list(QuestionBatchSampler(qids, 2, shuffle=False, rank=r, world_size=2)) for r in range(2)]
    assert sorted(i for s in evals for b in s for i in b) == list(range(11))  # no duplicates


def test_collate_pads_and_masks():
    a = Example("q", "d", [5, 6, 7], [0, 2], [1, 0])
    b = Example("q", "d", [5, 6, 7, 8, 9], [1, 2, 4], [1, 1, 0])
    batch = Collate(pad_id=2)([(0, a), (1, b)])
    assert batch["input_ids"].tolist() == [[5, 6, 7, 2, 2], [5, 6, 7, 8, 9]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0], [1] * 5]
    assert batch["node_mask"].tolist() == [[True, True, False], [True] * 3]
    assert batch["node_positions"][0, :2].tolist() == [0, 2]


def test_split_databases_hits_the_fractions_and_is_disjoint():
    counts = {f"db{i}": 10 + i for i in range(20)}
    split = split_databases(counts, val_fraction=0.15, test_fraction=0.5, seed=3)
    total = sum(counts.values())
    share = {s: sum(c for d, c in counts.items() if split[d] == s) / total for s in ("train", "val", "test")}
    assert abs(share["test"] - 0.5) < 0.06 and abs(share["val"] - 0.15) < 0.06, share
    assert split == split_databases(dict(reversed(list(counts.items()))), 0.15, 0.5, seed=3)
