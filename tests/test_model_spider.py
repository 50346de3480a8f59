"""data=spider end to end on a slice of the real data: examples build, splits are schema-disjoint,
val/test hold only real predictions, and the tokenized inputs fit the encoder."""

import pytest

from model.nodes.datamodule import NodeDataModule

pytestmark = [pytest.mark.data, pytest.mark.slow]


def test_spider_datamodule_on_a_slice(shared_data):
    root = shared_data / "spider"
    datamodule = NodeDataModule(
        root=str(root), predictions=str(shared_data / "predictions" / "spider_dev" / "*"),
        train_perturbations=1, eval_perturbations=1, val_fraction=0.15, test_fraction=0.5,
        max_questions=150, max_tokens=1024, batch_size=32,
    )
    datamodule.setup("fit")
    summary = datamodule.summary()
    dbs = {s: set(v["databases"]) for s, v in summary.items()}
    assert not dbs["train"] & dbs["test"] and not dbs["train"] & dbs["val"] and not dbs["val"] & dbs["test"]
    for split in ("val", "test"):
        assert summary[split]["examples"] > 0
        assert not any(s.startswith("perturb") for s in summary[split]["systems"])
        assert len(summary[split]["systems"]) == 11
    assert any(s.startswith("perturb") for s in summary["train"]["systems"])
    assert all(len(e.input_ids) <= 1024 for d in datamodule.datasets.values() for e in d)
    negatives, positives = datamodule.train_label_counts()
    assert negatives > 0 and positives > 0
    batch = next(iter(datamodule.train_dataloader()))
    assert batch["input_ids"].shape[0] <= 32
